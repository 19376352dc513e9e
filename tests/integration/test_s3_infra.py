"""Tests of the S3 test infrastructure itself (tests/s3, s3fixtures.py): the server, its
authentication, the loaded fixture bucket, ranges, the s3rver quirks the daemon must live with,
and every fault of the proxy. No h5osfs here: when these pass, an S3 test that fails is about
h5osfs.

Each test that takes s3_server runs on both servers of the suite: [s3] on s3rver (server.js),
[rgw] on Ceph RGW (rgw.py). What one of them does differently is a quirk test of that server
alone (not_on the other), so that a change of either shows."""
import datetime
import hashlib
import http.client
import json
import os
import socket
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from s3fixtures import PUBLIC_BUCKET, S3DIR, FaultProxy, S3Client, S3Server, node_binary

from s3client import parse_xml, sign_v4, uri_encode

pytestmark = pytest.mark.backends("s3", "rgw")

VECTORS = Path(__file__).resolve().parents[1] / "data" / "aws-sigv4"   # copy of shared/testdata
CHUNK = "db/55dd170e-0f0e83c7/d/78af-cfea7b-d7a279/0_0"  # any object of the fixture bucket


def md5_etag(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


@pytest.fixture(scope="module")
def client(s3_server):
    with s3_server.client() as c:
        yield c


def test_server_answers(s3_server, client):
    r = client.request("GET")
    assert r.status == 200, r.body
    assert b"ListAllMyBucketsResult" in r.body
    assert client.connections == 1


# ---- authentication ----

def test_builtin_and_extra_keys_work(s3_server, s3_bucket):
    pairs = [(s3_server.access_key, s3_server.secret_key)]
    if s3_server.kind == "s3rver":
        pairs.append(("S3RVER", "S3RVER"))      # s3rver's built-in pair
    for key, secret in pairs:
        with S3Client(s3_server.endpoint, key, secret) as c:
            assert "hsdstest" in c.list_buckets()


def test_unknown_key_is_refused(s3_server, s3_bucket):
    with S3Client(s3_server.endpoint, "NOSUCHKEY", "whatever") as c:
        r = c.get_object("hsdstest", CHUNK)
        assert (r.status, r.error_code()) == (403, "InvalidAccessKeyId")


def test_wrong_secret_is_refused(s3_server, s3_bucket):
    with S3Client(s3_server.endpoint, s3_server.access_key, "wrong-secret") as c:
        r = c.get_object("hsdstest", CHUNK)
        assert (r.status, r.error_code()) == (403, "SignatureDoesNotMatch")
        if s3_server.kind == "s3rver":
            # The answer explains itself, as AWS's does: the server's canonical request
            # (RGW's says nothing more, test_rgw_quirk_error_bodies_are_bare).
            assert b"<CanonicalRequest>GET\n/hsdstest/" in r.body
        r = c.request("PUT", "hsdstest", "should-not-exist", body=b"x")
        assert r.status == 403
    with s3_server.client() as c:
        assert c.head_object("hsdstest", "should-not-exist").status == 404


def test_s3rver_tenants_have_buckets_of_their_own(tmp_path):
    """server.js's tenants (S3_TENANTS), as RGW's: a tenant's bucket hsdstest is not the main
    user's, though both live on one server (the suite's [s3] backend and test_s3.py share the
    session's s3rver that way)."""
    srv = S3Server(tmp_path / "s3", tenants=[("t1", "H5OSFSTENANTKEY00001", "tenant/Sec+ret=1")])
    try:
        tenant = srv.tenant("t1")
        with srv.client() as main, tenant.client() as ten:
            for c, data in ((main, b"main"), (ten, b"tenant")):
                c.create_bucket("hsdstest")
                c.put_object("hsdstest", "k", data).check("PUT k")
            ten.put_object("hsdstest", "tenant-only", b"x").check("PUT tenant-only")
            assert main.get_object("hsdstest", "k").check().body == b"main"
            assert ten.get_object("hsdstest", "k").check().body == b"tenant"
            assert [k for k, *_ in main.list_all("hsdstest")[0]] == ["k"]
            assert [k for k, *_ in ten.list_all("hsdstest")[0]] == ["k", "tenant-only"]
        with S3Client(srv.endpoint, tenant.access_key, "wrong-secret") as c:
            r = c.get_object("hsdstest", "k")
            assert (r.status, r.error_code()) == (403, "SignatureDoesNotMatch")
    finally:
        assert srv.stop() == 0


def test_tampered_request_is_refused(s3_server, s3_bucket, client):
    """The signature covers the signed headers: a Range changed after signing is refused."""
    ok = client.get_object("hsdstest", CHUNK, byte_range=(0, 9))
    assert ok.status == 206
    amz_date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = "/hsdstest/" + uri_encode(CHUNK, True)
    empty = hashlib.sha256(b"").hexdigest()
    signed = [("host", f"127.0.0.1:{s3_server.port}"), ("range", "bytes=0-9"),
              ("x-amz-content-sha256", empty), ("x-amz-date", amz_date)]
    auth, _, _ = sign_v4("GET", path, [], signed, empty, s3_server.access_key,
                         s3_server.secret_key, "us-east-1", amz_date)
    c = http.client.HTTPConnection("127.0.0.1", s3_server.port, timeout=10)
    try:
        c.request("GET", path, headers={"Range": "bytes=0-99", "x-amz-date": amz_date,
                                        "x-amz-content-sha256": empty, "Authorization": auth})
        r = c.getresponse()
        assert r.status == 403 and b"SignatureDoesNotMatch" in r.read()
    finally:
        c.close()


def test_unsigned_requests(s3_server, s3_bucket, client):
    """Unsigned requests are refused (a private bucket), except GET/HEAD of the public one."""
    anon = S3Client(s3_server.endpoint)  # no key: no Authorization header
    with anon:
        r = anon.get_object("hsdstest", CHUNK)
        assert (r.status, r.error_code()) == (403, "AccessDenied")
        assert anon.request("PUT", PUBLIC_BUCKET).status == 403
    r = client.request("PUT", PUBLIC_BUCKET)
    # it may exist already (test_s3.py shares the session's server): s3rver then answers 409
    # BucketAlreadyExists even to its owner, where AWS says BucketAlreadyOwnedByYou
    assert r.status == 200 or r.error_code() in ("BucketAlreadyOwnedByYou",
                                                 "BucketAlreadyExists"), r.body
    client.put_object(PUBLIC_BUCKET, "hello", b"hello world")
    with anon:
        r = anon.get_object(PUBLIC_BUCKET, "hello", byte_range=(0, 4))
        assert (r.status, r.body) == (206, b"hello")
        assert anon.list_objects_v2(PUBLIC_BUCKET)["keys"][0][0] == "hello"
        assert anon.request("PUT", PUBLIC_BUCKET, "other", body=b"x").status == 403


def _vector_cases():
    if not VECTORS.is_dir():
        return []
    return sorted(p.name for p in VECTORS.iterdir() if (p / "request.txt").is_file())


def _needs_normalising(path):
    return "//" in path or any(seg in (".", "..") for seg in path.split("/"))


@pytest.mark.parametrize("case", _vector_cases())
def test_python_signer_matches_aws_vectors(case):
    """s3client's signer (used to load and check buckets) against the AWS test suite."""
    d = VECTORS / case
    ctx = json.loads((d / "context.json").read_text())
    head, _, body = (d / "request.txt").read_text().partition("\n\n")
    lines = head.split("\n")
    method, target = lines[0].split(" ")[0], lines[0].split(" ", 1)[1].rsplit(" HTTP/", 1)[0]
    path, _, query = target.partition("?")
    if ctx["normalize"] and _needs_normalising(path):
        pytest.skip("path normalisation: S3 never normalises")
    headers = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t"):
            headers[-1] = (headers[-1][0], headers[-1][1] + " " + line.strip())
        elif line:
            name, _, value = line.partition(":")
            headers.append((name, value))
    expected = (d / "header-canonical-request.txt").read_text()
    ts = datetime.datetime.strptime(ctx["timestamp"], "%Y-%m-%dT%H:%M:%SZ")
    amz_date = ts.strftime("%Y%m%dT%H%M%SZ")
    headers.append(("X-Amz-Date", amz_date))
    token = ctx["credentials"].get("token")
    if token and "x-amz-security-token:" in expected:
        headers.append(("X-Amz-Security-Token", token))
    payload = hashlib.sha256(body.encode()).hexdigest()
    if ctx["sign_body"]:
        headers.append(("X-Amz-Content-Sha256", payload))
    pairs = [(urllib.parse.unquote(n), urllib.parse.unquote(v))
             for n, _, v in (p.partition("=") for p in query.split("&") if p)]
    canonical_uri = uri_encode(urllib.parse.unquote(path), True)
    _, creq, sts = sign_v4(method, canonical_uri, pairs, headers, payload,
                           ctx["credentials"]["access_key_id"],
                           ctx["credentials"]["secret_access_key"], ctx["region"], amz_date,
                           service=ctx["service"])
    assert creq == expected
    assert sts == (d / "header-string-to-sign.txt").read_text()


def test_server_verifier_matches_aws_vectors():
    """server.js's SigV4 verifier (sigv4.js) accepts every applicable signed request of the
    AWS test suite and refuses each with a wrong secret."""
    if node_binary() is None or not VECTORS.is_dir():
        pytest.skip("node or the AWS test vectors are missing")
    out = subprocess.run([node_binary(), str(S3DIR / "check_sigv4_vectors.js"), str(VECTORS)],
                         check=True, capture_output=True, text=True, cwd=S3DIR).stdout
    results = [json.loads(line) for line in out.splitlines()]
    applicable = [r for r in results if r["applies"]]
    assert len(applicable) >= 30
    bad = [r for r in applicable if not (r["ok"] and r["canonicalMatches"])]
    assert not bad
    assert all(r["wrongSecretRefused"] for r in results)
    # The cases left out are exactly those that normalise the path.
    assert all("normalized" in r["case"] for r in results if not r["applies"])


# ---- the fixture bucket ----

def test_bucket_lists_every_fixture_key(s3_bucket, client):
    keys, _ = client.list_all("hsdstest")
    listed = {k: size for k, size, _ in keys}
    assert listed == s3_bucket.sizes
    assert [k for k, _, _ in keys] == sorted(listed)  # no prefix-of-another keys here
    # Small pages cover it all too.
    keys7, _ = client.list_all("hsdstest", max_keys=7)
    assert [k for k, _, _ in keys7] == [k for k, _, _ in keys]


def test_bucket_holds_the_fixture_bytes(s3_bucket, client):
    keys, _ = client.list_all("hsdstest")
    etags = {k: etag for k, _, etag in keys}
    for key in s3_bucket.sizes:
        data = (s3_bucket.source / key).read_bytes()
        r = client.get_object("hsdstest", key)
        assert r.status == 200, (key, r.status)
        assert r.body == data, key
        assert r.headers["etag"] == etags[key] == md5_etag(data)
    assert client.connections == 1  # all of it over one keep-alive connection


def test_delimiter_listing(s3_server, s3_bucket, client):
    page = client.list_objects_v2("hsdstest", prefix="home/test_user1/", delimiter="/")
    assert [k for k, _, _ in page["keys"]] == ["home/test_user1/.domain.json"]
    domains = sorted({k.split("/")[2] for k in s3_bucket.sizes
                      if k.startswith("home/test_user1/") and k.count("/") == 3})
    assert page["prefixes"] == [f"home/test_user1/{d}/" for d in domains]
    page = client.list_objects_v2("hsdstest", delimiter="/")
    if s3_server.kind == "s3rver":
        # s3rver quirk: db/ holds no object directly (only db/<root>/...), so it is left
        # out. AWS, MinIO, RGW and HSDS's own listing return ["db/", "home/", "linked/"].
        assert page["prefixes"] == ["home/", "linked/"]
    else:
        assert page["prefixes"] == ["db/", "home/", "linked/"]


# ---- ranges ----

def test_ranged_get(s3_bucket, client):
    data = (s3_bucket.source / CHUNK).read_bytes()
    n = len(data)
    assert n > 1000
    for first, last in ((0, 0 + 99), (1, 1), (n // 3, n // 2), (n - 10, n - 1), (5, n - 1)):
        r = client.get_object("hsdstest", CHUNK, byte_range=(first, last))
        assert r.status == 206
        assert r.headers["content-range"] == f"bytes {first}-{last}/{n}"
        assert r.body == data[first:last + 1]
    r = client.get_object("hsdstest", CHUNK, byte_range=(n - 5, n + 100))  # clipped
    assert (r.status, r.body) == (206, data[n - 5:])
    r = client.get_object("hsdstest", CHUNK, range_header=f"bytes={n - 7}-")
    assert (r.status, r.body) == (206, data[n - 7:])
    r = client.get_object("hsdstest", CHUNK, byte_range=(n, n + 10))
    assert (r.status, r.error_code()) == (416, "InvalidRange")


# ---- s3rver quirks (if one of these fails, s3rver changed: update tests/s3/README.md) ----

S3RVER_ONLY = pytest.mark.not_on("rgw", reason="an s3rver quirk (RGW answers as AWS does: "
                                 "test_rgw_lists_and_ranges_as_aws)")

@pytest.fixture(scope="module")
def quirks(s3_server):
    with s3_server.client() as c:
        name = s3_server.new_bucket()
        for key in ("a", "a-b", "a/c", "x/y/z", "sp ace+plus=eq%/ü"):
            c.put_object(name, key, key.encode() * 10)
        yield c, name


def test_multipart_uploads_as_aws(s3_server, client):
    """Create, parts, list, abort, complete: what h5osfs's multipart upload relies on
    (s3rver's missing abort and listing are server.js's)."""
    name = s3_server.new_bucket()
    parts = [os.urandom(5 << 20), b"tail"]

    def create(key):
        r = client.request("POST", name, key, query=[("uploads", "")]).check("create")
        return parse_xml(r.body).findtext("UploadId")

    def put_part(key, upload, n, data):
        return client.request("PUT", name, key, body=data,
                              query=[("partNumber", str(n)), ("uploadId", upload)])

    def complete(key, upload, etags):
        body = "<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>"
            for n, e in enumerate(etags, 1)) + "</CompleteMultipartUpload>"
        return client.request("POST", name, key, query=[("uploadId", upload)],
                              body=body.encode())

    kept, dropped = create("db/kept"), create("db/dropped")
    etags = [put_part("db/kept", kept, n, d).check("part").headers["etag"]
             for n, d in enumerate(parts, 1)]
    assert put_part("db/dropped", dropped, 1, parts[0]).status == 200
    assert sorted(client.list_multipart_uploads(name)) == sorted(
        [("db/kept", kept), ("db/dropped", dropped)])
    assert client.request("DELETE", name, "db/dropped",
                          query=[("uploadId", dropped)]).status == 204
    assert client.list_multipart_uploads(name) == [("db/kept", kept)]
    r = put_part("db/dropped", dropped, 2, b"late")
    assert (r.status, r.error_code()) == (404, "NoSuchUpload")
    r = complete("db/dropped", dropped, etags)
    # RGW 16 answers 500 InternalError (a quirk: retried, then the upload is lost all the same)
    assert (r.status, r.error_code()) == ((500, "InternalError") if s3_server.kind == "rgw"
                                          else (404, "NoSuchUpload"))
    assert client.head_object(name, "db/dropped").status == 404
    r = complete("db/kept", kept, etags).check("complete")
    assert parse_xml(r.body).tag == "CompleteMultipartUploadResult"
    assert client.get_object(name, "db/kept").body == b"".join(parts)
    assert client.list_multipart_uploads(name) == []
    r = client.request("DELETE", name, "db/kept", query=[("uploadId", kept)])
    assert (r.status, r.error_code()) == (404, "NoSuchUpload")


@S3RVER_ONLY
def test_quirk_listing_order_and_paging(quirks):
    c, b = quirks
    keys = [k for k, _, _ in c.list_objects_v2(b, prefix="a")["keys"]]
    assert keys == ["a/c", "a-b", "a"]  # S3 order: a, a-b, a/c
    paged = [k for k, _, _ in c.list_all(b, prefix="a", max_keys=1)[0]]
    assert paged == ["a/c"]  # pages continue after the last key in S3 order: a-b, a skipped


@S3RVER_ONLY
def test_quirk_delimiter_omits_deeper_prefixes(quirks):
    c, b = quirks
    page = c.list_objects_v2(b, delimiter="/")
    # x/ holds only x/y/z: no "x/" prefix, although S3 returns one.
    assert "x/" not in page["prefixes"] and "a/" in page["prefixes"]
    assert c.list_objects_v2(b, prefix="x/", delimiter="/")["prefixes"] == ["x/y/"]


@S3RVER_ONLY
def test_quirk_xml_namespace_and_keycount(quirks):
    c, b = quirks
    r = c.request("GET", b, query=[("list-type", "2"), ("prefix", "a"), ("delimiter", "/")])
    assert b'xmlns="http://doc.s3.amazonaws.com/2006-03-01/"' in r.body  # AWS: s3.amazonaws.com/doc
    assert b"<KeyCount>2</KeyCount>" in r.body  # AWS counts the common prefix too: 3


@S3RVER_ONLY
def test_quirk_encoding_type_url_ignored(quirks):
    c, b = quirks
    r = c.request("GET", b, query=[("list-type", "2"), ("prefix", "sp"),
                                   ("encoding-type", "url")])
    assert "<Key>sp ace+plus=eq%/ü</Key>".encode() in r.body  # raw, not URL-encoded
    assert b"<EncodingType>" not in r.body


@S3RVER_ONLY
def test_quirk_ranges(quirks):
    c, b = quirks
    data = b"a-b" * 10
    r = c.get_object(b, "a-b", range_header="bytes=-5")  # suffix range: wrong bytes
    assert (r.status, r.body) == (206, data[0:6])
    r = c.get_object(b, "a-b", range_header="bytes=0-0")  # one byte asked, all sent
    assert (r.status, r.headers["content-range"], r.body) == (206, "bytes 0-29/30", data)
    r = c.get_object(b, "a-b", range_header="bytes=0-4,6-7")  # multi-range: all sent
    assert (r.status, r.body) == (206, data)


@S3RVER_ONLY
def test_quirk_range_of_empty_object_hangs(s3_server, quirks):
    """A range of a 0-byte object: s3rver announces Content-Length 1 and sends nothing (AWS
    answers 416). A client without a timeout waits forever."""
    c, b = quirks
    c.put_object(b, "empty", b"")
    assert c.get_object(b, "empty").body == b""
    with s3_server.client(timeout=0.5) as t:
        with pytest.raises(socket.timeout):
            t.get_object(b, "empty", byte_range=(0, 10))


def test_quirk_put_is_atomic(s3_server, quirks):
    """server.js makes s3rver replace an object at once, as S3 does: GETs racing PUTs of one
    key read the old or the new bytes whole, never a mix or a part, under the ETag of those
    bytes (s3rver alone fails this); the temporary file never shows in a listing."""
    c, b = quirks
    old, new = b"o" * 2_000_000, b"n" * 3_000_000
    c.put_object(b, "swap", old)
    stop, bad, seen = threading.Event(), [], set()

    def putter():
        with s3_server.client() as p:
            i = 0
            while not stop.is_set():
                p.put_object(b, "swap", new if i % 2 == 0 else old)
                i += 1

    t = threading.Thread(target=putter)
    t.start()
    try:
        # The race is narrow (a stat and an open, a rename between them): give it 2 s of
        # GETs, and more until both versions were seen (the putter may start late on a loaded
        # machine); the cap is only a hang check.
        t0 = time.monotonic()
        while (time.monotonic() < t0 + 2 or seen != {b"o", b"n"}) and \
                time.monotonic() < t0 + 60:
            r = c.get_object(b, "swap")
            body = r.body
            if body not in (old, new):
                bad.append(len(body))
            elif r.headers["etag"].strip('"') != hashlib.md5(body).hexdigest():
                bad.append(("etag", len(body)))
            seen.add(body[:1])
            keys = [k for k, _, _ in c.list_objects_v2(b, prefix="swap")["keys"]]
            if keys != ["swap"]:
                bad.append(keys)
    finally:
        stop.set()
        t.join()
    assert not bad, bad[:5]
    assert seen == {b"o", b"n"}


@pytest.mark.not_on("rgw", reason="RGW 16 answers some conditional PUTs otherwise than AWS: "
                   "test_rgw_quirk_conditional_put")
def test_conditional_put_as_aws_answers_it(quirks):
    """server.js adds S3's conditional writes (s3rver ignores them): If-None-Match: * creates
    only, If-Match replaces only the version named; a failed one changes nothing."""
    c, b = quirks

    def put(key, data, **cond):
        h = {"If-Match": f'"{cond["match"]}"'} if "match" in cond else {"If-None-Match": "*"}
        return c.request("PUT", b, key, body=data, headers=h)

    assert put("cond", b"one").status == 200
    r = put("cond", b"two")
    assert (r.status, c.get_object(b, "cond").body) == (412, b"one")
    etag = hashlib.md5(b"one").hexdigest()
    assert put("cond", b"three", match="0" * 32).status == 412
    assert put("cond", b"three", match=etag).status == 200
    assert put("cond", b"four", match=etag).status == 412     # that version is gone
    assert c.get_object(b, "cond").body == b"three"
    assert put("never-was", b"x", match=etag).status == 404
    assert c.get_object(b, "never-was").status == 404


def if_match(server, etag):
    """The If-Match value the server accepts for ETag header etag: RGW wants it unquoted."""
    return etag.strip('"') if server.kind == "rgw" else etag


def test_conditional_puts_lose_no_update(s3_server, quirks):
    """Four writers add 1 to a counter by GET, then PUT If-Match the ETag they read, again
    when refused: every addition is there at the end. RGW refuses a conditional PUT that
    races another one on the same key with 500 UnknownError (AWS: 409
    ConditionalRequestConflict), and such a PUT never lands."""
    c, b = quirks
    c.put_object(b, "counter", b"0")
    refused = {"s3rver": {(412, "PreconditionFailed")},
               "rgw": {(412, "PreconditionFailed"), (500, "UnknownError")}}[s3_server.kind]
    seen = []

    def adder():
        with s3_server.client() as w:
            for _ in range(25):
                while True:
                    r = w.get_object(b, "counter")
                    new = str(int(r.body) + 1).encode()
                    p = w.request("PUT", b, "counter", body=new,
                                  headers={"If-Match": if_match(s3_server, r.headers["etag"])})
                    if p.status == 200:
                        break
                    seen.append((p.status, p.error_code()))

    threads = [threading.Thread(target=adder) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen) <= refused, set(seen) - refused
    assert c.get_object(b, "counter").body == b"100"


def test_odd_keys_round_trip(quirks):
    c, b = quirks
    key = "sp ace+plus=eq%/ü"
    r = c.get_object(b, key)
    assert (r.status, r.body) == (200, key.encode() * 10)
    assert c.head_object(b, "a").headers["content-length"] == "10"
    r = c.head_object(b, "nope")
    assert r.status == 404 and r.body == b""


# ---- Ceph RGW 16 quirks: where it answers otherwise than AWS (h5osfs must live with them) ----

RGW_ONLY = pytest.mark.not_on("s3", reason="a Ceph RGW quirk (s3rver behind server.js answers "
                              "as AWS does)")


@pytest.mark.not_on("s3", reason="s3rver answers otherwise: the test_quirk_* tests pin how")
def test_rgw_lists_and_ranges_as_aws(quirks):
    """What s3rver gets wrong, RGW answers as AWS does: listing order and paging, a common
    prefix for every "directory", KeyCount, encoding-type=url, AWS's XML namespace, suffix
    and one-byte ranges, 416 for a range of an empty object."""
    c, b = quirks
    assert [k for k, _, _ in c.list_objects_v2(b, prefix="a")["keys"]] == ["a", "a-b", "a/c"]
    paged = [k for k, _, _ in c.list_all(b, prefix="a", max_keys=1)[0]]
    assert paged == ["a", "a-b", "a/c"]
    assert c.list_objects_v2(b, delimiter="/")["prefixes"] == ["a/", "sp ace+plus=eq%/", "x/"]
    r = c.request("GET", b, query=[("list-type", "2"), ("prefix", "a"), ("delimiter", "/")])
    assert b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"' in r.body
    assert b"<KeyCount>3</KeyCount>" in r.body
    r = c.request("GET", b, query=[("list-type", "2"), ("prefix", "sp"),
                                   ("encoding-type", "url")])
    assert b"<Key>sp%20ace%2Bplus%3Deq%25%2F%C3%BC</Key>" in r.body
    assert b"<EncodingType>url</EncodingType>" in r.body
    data = b"a-b" * 10
    r = c.get_object(b, "a-b", range_header="bytes=-5")
    assert (r.status, r.headers["content-range"], r.body) == (206, "bytes 25-29/30", data[-5:])
    r = c.get_object(b, "a-b", range_header="bytes=0-0")
    assert (r.status, r.headers["content-range"], r.body) == (206, "bytes 0-0/30", b"a")
    c.put_object(b, "rgw-empty", b"")
    r = c.get_object(b, "rgw-empty", byte_range=(0, 10))
    assert (r.status, r.error_code()) == (416, "InvalidRange")


@RGW_ONLY
def test_rgw_quirk_conditional_put(s3_server, quirks):
    """If-None-Match: * as AWS. If-Match is compared byte for byte with the stored ETag, which
    has no quotes: RFC 7232's quoted form (what AWS documents, and what RGW's own ETag header
    looks like) never matches; the bare ETag does. If-Match on a missing key gives 412, where
    AWS gives 404 NoSuchKey."""
    c, b = quirks

    def put(key, data, header, value):
        return c.request("PUT", b, key, body=data, headers={header: value})

    assert put("rgw-cond", b"one", "If-None-Match", "*").status == 200
    r = put("rgw-cond", b"two", "If-None-Match", "*")
    assert (r.status, r.error_code()) == (412, "PreconditionFailed")
    etag = hashlib.md5(b"one").hexdigest()
    assert c.head_object(b, "rgw-cond").headers["etag"] == f'"{etag}"'
    r = put("rgw-cond", b"two", "If-Match", f'"{etag}"')     # the current ETag, quoted
    assert (r.status, r.error_code()) == (412, "PreconditionFailed")
    assert c.get_object(b, "rgw-cond").body == b"one"
    assert put("rgw-cond", b"two", "If-Match", etag).status == 200
    assert put("rgw-cond", b"three", "If-Match", etag).status == 412    # that version is gone
    assert put("rgw-cond", b"three", "If-Match", "*").status == 200
    r = put("rgw-never-was", b"x", "If-Match", etag)
    assert (r.status, r.error_code()) == (412, "PreconditionFailed")
    assert put("rgw-never-was", b"x", "If-Match", "*").status == 412
    assert c.head_object(b, "rgw-never-was").status == 404
    assert c.get_object(b, "rgw-cond").body == b"three"


@RGW_ONLY
def test_rgw_quirk_error_bodies_are_bare(s3_server, quirks):
    """Error answers carry the code and an empty <Message>: no text, and for a refused
    signature no <CanonicalRequest>/<StringToSign> to compare with (AWS sends all three)."""
    c, b = quirks
    with S3Client(s3_server.endpoint, s3_server.access_key, "wrong-secret") as w:
        r = w.get_object(b, "a")
    assert (r.status, r.error_code()) == (403, "SignatureDoesNotMatch")
    assert b"<Message></Message>" in r.body and b"CanonicalRequest" not in r.body
    r = c.get_object(b, "no-such-key")
    assert (r.status, r.error_code()) == (404, "NoSuchKey")
    assert b"<Message></Message>" in r.body


@RGW_ONLY
def test_rgw_quirk_multi_range_gives_the_first(quirks):
    """A multi-range GET is answered with the first range alone (206, its Content-Range),
    not multipart/byteranges."""
    c, b = quirks
    data = b"a-b" * 10
    r = c.get_object(b, "a-b", range_header="bytes=0-4,6-7")
    assert (r.status, r.headers["content-range"], r.body) == (206, "bytes 0-4/30", data[:5])


# ---- the fault proxy ----

def _get(c, key=CHUNK, **kw):
    return c.get_object("hsdstest", key, **kw)


def test_proxy_passes_requests_through(s3_bucket, s3_server, fault_proxy):
    data = (s3_bucket.source / CHUNK).read_bytes()
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        assert _get(c).body == data
        assert _get(c, byte_range=(10, 20)).body == data[10:21]
        assert c.head_object("hsdstest", CHUNK).headers["content-length"] == str(len(data))
        keys, _ = c.list_all("hsdstest")
        assert len(keys) == len(s3_bucket.sizes)
        name = s3_server.new_bucket()
        c.put_object(name, "k", b"x" * 100000)
        assert c.get_object(name, "k").body == b"x" * 100000
        assert c.connections == 1
    st = fault_proxy.counters()
    assert (st["connections"], st["requests"], st["upstream_connections"]) == (1, 6, 1)
    assert st["faults"] == {}


def test_proxy_keep_alive(s3_bucket, s3_server, fault_proxy):
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        for i in range(50):
            assert _get(c, byte_range=(i, i + 9)).status == 206
        fault_proxy.add_rule("error", times=1)  # an error answer keeps the connection
        assert _get(c).status == 500
        assert _get(c).status == 200
        assert c.connections == 1
    st = fault_proxy.counters()
    assert (st["connections"], st["requests"], st["upstream_connections"]) == (1, 52, 1)


def await_server_close(srv, name, timeout=60):
    """Until the server has closed every connection that was idle before the call: a probe
    connection made now goes idle after them, and node closes idle connections (one timeout
    for all, kept in one list in start order) in the order they went idle. A condition, not a
    sleep: a loaded machine runs node's timers late (a fixed 1.6 s for 1.1 s once fell short)."""
    with srv.client() as probe:
        assert probe.get_object(name, "k").body == b"data"
        sock = probe.conn.sock
        sock.settimeout(timeout)
        try:
            assert sock.recv(1, socket.MSG_PEEK) == b"", "the server sent after its answer"
        except socket.timeout:
            pytest.fail(f"the server kept an idle connection open for {timeout} s")


@pytest.mark.not_on("rgw", reason="starts an s3rver of its own (server.js --keep-alive-ms)")
def test_idle_connections_closed_by_the_server(s3_server, tmp_path):
    """The server closes idle keep-alive connections (node 20: keepAliveTimeout + 1 s, so
    about 6 s by default; 1.1 s here); the proxy and the test client reconnect without
    failing a request."""
    srv = S3Server(tmp_path / "srv", extra_args=("--keep-alive-ms", "100"))
    proxy = FaultProxy(srv.endpoint, tmp_path)
    try:
        name = srv.new_bucket()
        for endpoint in (srv.endpoint, proxy.endpoint):
            with srv.client(endpoint=endpoint) as c:
                c.put_object(name, "k", b"data")
                await_server_close(srv, name)
                assert c.get_object(name, "k").body == b"data"
                connections = c.connections
        assert connections == 1  # through the proxy: one client connection ...
        st = proxy.counters()
        # ... and two upstream ones: the proxy reconnected when the server had closed one.
        assert (st["connections"], st["requests"], st["upstream_connections"]) == (1, 2, 2)
    finally:
        assert proxy.stop() == 0
        assert srv.stop() == 0


@pytest.mark.parametrize("action,status,code", [
    ("error", 500, "InternalError"),
    ("slowdown", 503, "SlowDown"),
    ("signature", 403, "SignatureDoesNotMatch"),
])
def test_proxy_error_answers(s3_bucket, s3_server, fault_proxy, action, status, code):
    rule = fault_proxy.add_rule(action, method="GET", key="/0_0", times=2)
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        assert c.head_object("hsdstest", CHUNK).status == 200  # method does not match
        assert _get(c, key="home/.domain.json").status == 200  # key does not match
        for _ in range(2):
            r = _get(c)
            assert (r.status, r.error_code()) == (status, code)
        assert _get(c).status == 200  # the rule fired twice: then the server answers
        assert c.connections == 1
    [r] = fault_proxy.rules()
    assert (r["id"], r["seen"], r["fired"]) == (rule["id"], 3, 2)
    assert fault_proxy.counters()["faults"] == {action: 2}
    log = fault_proxy.log()
    assert [(e["action"], e["method"]) for e in log] == [(action, "GET")] * 2
    assert log[0]["path"] == "/hsdstest/" + CHUNK


def test_proxy_error_with_custom_status(s3_bucket, s3_server, fault_proxy):
    fault_proxy.add_rule("error", status=429, code="TooManyRequests", times=None)
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        for _ in range(3):
            r = _get(c)
            assert (r.status, r.error_code()) == (429, "TooManyRequests")
    assert fault_proxy.counters()["faults"] == {"error": 3}


def test_proxy_every_nth_and_skip(s3_bucket, s3_server, fault_proxy):
    fault_proxy.add_rule("error", id="third", every=3, times=None)
    fault_proxy.add_rule("slowdown", id="late", skip=7, times=1)
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        statuses = [_get(c, byte_range=(0, 0 + 9)).status for _ in range(10)]
    # third: requests 3, 6, 9; late: the 8th request (the first after 7 skipped)
    assert statuses == [206, 206, 500, 206, 206, 500, 206, 503, 500, 206]
    by_id = {r["id"]: r for r in fault_proxy.rules()}
    assert (by_id["third"]["fired"], by_id["late"]["fired"]) == (3, 1)


# The timeout of a request that nothing delays: a loaded machine (two passes of the suite on
# two cores) once kept the proxy and s3rver from answering one within 0.5 s. The retries after
# a fault's timeout use it; only the faulted request itself has the short one.
LOADED_ANSWER_TIMEOUT = 30


def test_proxy_delay_past_client_timeout(s3_bucket, s3_server, fault_proxy):
    rule = fault_proxy.add_rule("delay", delay=1.5, times=1)
    data = (s3_bucket.source / CHUNK).read_bytes()
    with s3_server.client(endpoint=fault_proxy.endpoint, timeout=0.5) as c:
        with pytest.raises(socket.timeout):     # the client gave up before the late answer
            _get(c)
        c.timeout = LOADED_ANSWER_TIMEOUT
        assert _get(c).body == data  # the retry, on a new connection, is not delayed
    assert fault_proxy.fired(rule["id"]) == 1
    with s3_server.client(endpoint=fault_proxy.endpoint, timeout=5) as c:
        fault_proxy.add_rule("delay", delay=0.3, times=1)
        t0 = time.monotonic()
        assert _get(c).body == data  # a delay within the timeout: late but right
        assert time.monotonic() - t0 >= 0.3


def test_proxy_drop(s3_bucket, s3_server, fault_proxy):
    fault_proxy.add_rule("drop", times=1)
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        with pytest.raises(http.client.RemoteDisconnected):
            _get(c)
        assert _get(c).status == 200
    assert fault_proxy.counters()["faults"] == {"drop": 1}


def test_proxy_reset(s3_bucket, s3_server, fault_proxy):
    fault_proxy.add_rule("reset", times=1)
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        with pytest.raises(ConnectionResetError):
            _get(c)
        assert _get(c).status == 200
    assert fault_proxy.counters()["faults"] == {"reset": 1}


def test_proxy_reset_in_body(s3_server, fault_proxy):
    """A PUT cut off while its body is being sent: the server never sees it."""
    name = s3_server.new_bucket()
    body = os.urandom(8 << 20)
    fault_proxy.add_rule("reset_in_body", method="PUT", bytes=1 << 20, times=1)
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            c.request("PUT", name, "cut", body=body)
    with s3_server.client() as c:
        assert c.head_object(name, "cut").status == 404
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        assert c.request("PUT", name, "cut", body=body).status == 200
    assert fault_proxy.counters()["faults"] == {"reset_in_body": 1}


def test_proxy_drop_after_headers(s3_bucket, s3_server, fault_proxy):
    fault_proxy.add_rule("drop_after_headers", times=1)
    n = s3_bucket.sizes[CHUNK]
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        with pytest.raises(http.client.IncompleteRead) as e:
            _get(c)
        assert (len(e.value.partial), e.value.expected) == (0, n)
        assert _get(c).status == 200
    assert fault_proxy.counters()["faults"] == {"drop_after_headers": 1}


def test_proxy_truncate(s3_bucket, s3_server, fault_proxy):
    data = (s3_bucket.source / CHUNK).read_bytes()
    fault_proxy.add_rule("truncate", bytes=1000, times=1)
    fault_proxy.add_rule("truncate", key="home/", times=1)  # default: half of the body
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        with pytest.raises(http.client.IncompleteRead) as e:
            _get(c)
        assert e.value.partial == data[:1000]  # the right bytes, too few of them
        assert _get(c).body == data
        d = (s3_bucket.source / "home/.domain.json").read_bytes()
        with pytest.raises(http.client.IncompleteRead) as e:
            _get(c, key="home/.domain.json")
        assert e.value.partial == d[:len(d) // 2]
    assert fault_proxy.counters()["faults"] == {"truncate": 2}


def test_proxy_stall_mid_body(s3_bucket, s3_server, fault_proxy):
    data = (s3_bucket.source / CHUNK).read_bytes()
    fault_proxy.add_rule("stall", bytes=4096, delay=1.5, times=1)
    with s3_server.client(endpoint=fault_proxy.endpoint, timeout=0.5) as c:
        with pytest.raises(socket.timeout):
            _get(c)
        c.timeout = LOADED_ANSWER_TIMEOUT
        assert _get(c).body == data
    fault_proxy.add_rule("stall", bytes=4096, delay=0.3, times=1)
    with s3_server.client(endpoint=fault_proxy.endpoint, timeout=5) as c:
        assert _get(c).body == data  # a stall within the timeout: the body completes
    assert fault_proxy.counters()["faults"] == {"stall": 2}


def test_proxy_forwarded_put_is_executed(s3_server, fault_proxy):
    """forward=True: the server executes the request, the client sees the fault."""
    name = s3_server.new_bucket()
    fault_proxy.add_rule("error", method="PUT", key="/lost-answer", forward=True)
    fault_proxy.add_rule("slowdown", method="PUT", key="/refused")
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        assert c.request("PUT", name, "lost-answer", body=b"1234").status == 500
        assert c.request("PUT", name, "refused", body=b"1234").status == 503
    with s3_server.client() as c:
        assert c.get_object(name, "lost-answer").body == b"1234"
        assert c.head_object(name, "refused").status == 404


def test_proxy_expect_100_continue(s3_server, fault_proxy):
    """curl sends Expect: 100-continue for big PUTs; the proxy answers it."""
    name = s3_server.new_bucket()
    body = os.urandom(300000)
    with s3_server.client(endpoint=fault_proxy.endpoint) as c:
        # Sign as the client would, then send by hand to wait for the interim answer.
        amz_date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = f"/{name}/big"
        h = hashlib.sha256(body).hexdigest()
        signed = [("host", f"127.0.0.1:{fault_proxy.endpoint.rsplit(':', 1)[1]}"),
                  ("x-amz-content-sha256", h), ("x-amz-date", amz_date)]
        auth, _, _ = sign_v4("PUT", path, [], signed, h, s3_server.access_key,
                             s3_server.secret_key, "us-east-1", amz_date)
    port = int(fault_proxy.endpoint.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall((f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                   f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n"
                   f"x-amz-content-sha256: {h}\r\nx-amz-date: {amz_date}\r\n"
                   f"Authorization: {auth}\r\n\r\n").encode())
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
    with s3_server.client() as c:
        assert c.get_object(name, "big").body == body


def test_proxy_control(fault_proxy):
    a = fault_proxy.add_rule("error", id="a", times=None)
    assert a["id"] == "a" and a["fired"] == 0
    b = fault_proxy.add_rule("drop")
    assert [r["id"] for r in fault_proxy.rules()] == ["a", b["id"]]
    fault_proxy.remove_rule("a")
    assert [r["id"] for r in fault_proxy.rules()] == [b["id"]]
    with pytest.raises(ValueError):
        fault_proxy.add_rule("explode")
    with pytest.raises(ValueError):
        fault_proxy.add_rule("error", colour="red")
    fault_proxy.clear()
    st = fault_proxy.counters()
    assert st["rules"] == [] and st["requests"] == 0 and fault_proxy.log() == []
