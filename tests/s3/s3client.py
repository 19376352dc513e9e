"""A small S3 client for the tests: Signature V4 with hashlib/hmac, one keep-alive connection
through http.client, path-style URLs. Standard library only (Debian's /usr/bin/python3).

    c = S3Client("http://127.0.0.1:4569", "S3RVER", "S3RVER")
    c.create_bucket("b"); c.put_object("b", "k/ey", b"bytes")
    c.get_object("b", "k/ey", byte_range=(0, 2)).body
    c.list_all("b", prefix="k/")

Every method returns a Response (status, reason, headers with lower-case names, body bytes) and
raises nothing for HTTP errors; `check()` raises S3Error for a status >= 300.
"""
import base64
import datetime
import hashlib
import hmac
import http.client
import socket
import urllib.parse
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape as xml_escape

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED = "UNSIGNED-PAYLOAD"


def key_decoder(listing):
    """How the keys of a parsed ListObjectsV2 answer asked with encoding-type=url read: S3
    encodes them as a form does (a space is '+'); a server that ignores encoding-type (s3rver)
    says no EncodingType and sends them as they are."""
    return urllib.parse.unquote_plus if listing.findtext("EncodingType") == "url" else str


def parse_xml(body):
    """Parses an S3 XML answer with namespaces stripped from tag names: s3rver answers in
    http://doc.s3.amazonaws.com/2006-03-01/, AWS in http://s3.amazonaws.com/doc/2006-03-01/."""
    root = ET.fromstring(body)
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith("{"):
            el.tag = el.tag.split("}", 1)[1]
    return root


def uri_encode(s, keep_slash):
    """S3's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ (and '/' in a path) as %XX."""
    return urllib.parse.quote(s, safe="/-_.~" if keep_slash else "-_.~")


def canonical_query(pairs):
    """pairs: [(name, value)] unencoded -> the canonical query string (sorted, encoded)."""
    enc = sorted((uri_encode(n, False), uri_encode(v, False)) for n, v in pairs)
    return "&".join(f"{n}={v}" for n, v in enc)


def canonical_headers(headers):
    """headers: [(name, value)] (a name may repeat) -> (canonical headers, signed headers)."""
    merged = {}
    for name, value in headers:
        merged.setdefault(name.lower().strip(), []).append(" ".join(str(value).split()))
    names = sorted(merged)
    text = "".join(f"{n}:{','.join(merged[n])}\n" for n in names)
    return text, ";".join(names)


def signing_key(secret, date, region, service):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def sign_v4(method, canonical_uri, query_pairs, headers, payload_hash, access_key, secret,
         region, amz_date, service="s3"):
    """headers must already hold host and x-amz-date (and the token, content hash if any).
    canonical_uri is the path as it will be sent (already encoded once).
    Returns (authorization header value, canonical request, string to sign)."""
    date = amz_date[:8]
    ch, signed = canonical_headers(headers)
    creq = "\n".join([method, canonical_uri, canonical_query(query_pairs), ch, signed,
                      payload_hash])
    scope = f"{date}/{region}/{service}/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(signing_key(secret, date, region, service), sts.encode(),
                   hashlib.sha256).hexdigest()
    auth = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={signed}, "
            f"Signature={sig}")
    return auth, creq, sts


class S3Error(Exception):
    def __init__(self, resp, what=""):
        self.resp = resp
        self.status = resp.status
        self.code = resp.error_code()
        super().__init__(f"{what}: HTTP {resp.status} {self.code or resp.reason}".strip(": "))


class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # {lower-case name: value}
        self.body = body

    def error_code(self):
        if self.status < 300 or not self.body.lstrip().startswith(b"<"):
            return None
        try:
            el = parse_xml(self.body).find("Code")
        except ET.ParseError:
            return None
        return el.text if el is not None else None

    def check(self, what=""):
        if self.status >= 300:
            raise S3Error(self, what)
        return self

    def __repr__(self):
        return f"<Response {self.status} {self.reason} {len(self.body)} bytes>"


class S3Client:
    def __init__(self, endpoint, access_key=None, secret_key=None, region="us-east-1",
                 session_token=None, timeout=30.0, sign_payload=False):
        u = urllib.parse.urlsplit(endpoint)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"only http://host:port endpoints: {endpoint}")
        self.host, self.port = u.hostname, u.port or 80
        self.hostheader = u.netloc
        self.access_key, self.secret_key = access_key, secret_key
        self.region, self.session_token = region, session_token
        self.timeout = timeout
        self.sign_payload = sign_payload
        self.conn = None
        self.connections = 0  # TCP connections opened so far (keep-alive shows as 1)
        self.last_creq = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _connect(self):
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections += 1

    def request(self, method, bucket="", key=None, query=None, headers=None, body=b"",
                sign=True, payload_hash=None, retry_stale=True):
        """query: dict or [(name, value)]; key None = a bucket request."""
        path = "/" + uri_encode(bucket, True) if bucket else "/"
        if key is not None:
            path += "/" + uri_encode(key, True)
        pairs = list(query.items()) if isinstance(query, dict) else list(query or [])
        qs = "&".join(f"{uri_encode(n, False)}={uri_encode(v, False)}" for n, v in pairs)
        target = path + ("?" + qs if qs else "")
        hdrs = dict(headers or {})
        if sign and self.access_key is not None:
            amz_date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            if payload_hash is None:
                payload_hash = (hashlib.sha256(body).hexdigest()
                                if self.sign_payload or method not in ("GET", "HEAD", "DELETE")
                                else (EMPTY_SHA256 if not body else UNSIGNED))
            hdrs["x-amz-date"] = amz_date
            hdrs["x-amz-content-sha256"] = payload_hash
            if self.session_token:
                hdrs["x-amz-security-token"] = self.session_token
            signed = [("host", self.hostheader)] + [
                (n, v) for n, v in hdrs.items()
                if n.lower().startswith("x-amz-") or n.lower() in ("content-md5", "content-type",
                                                                    "range")]
            auth, self.last_creq, _ = sign_v4(method, path, pairs, signed, payload_hash,
                                              self.access_key, self.secret_key, self.region,
                                              amz_date)
            hdrs["Authorization"] = auth
        if method in ("PUT", "POST") or body:
            hdrs["Content-Length"] = str(len(body))
        reused = self.conn is not None
        if self.conn is None:
            self._connect()
        try:
            self.conn.request(method, target, body=body or None, headers=hdrs)
            r = self.conn.getresponse()
            data = r.read()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            self.close()
            if reused and retry_stale:  # the server closed an idle keep-alive connection
                return self.request(method, bucket, key, query, headers, body, sign,
                                    payload_hash, retry_stale=False)
            raise
        except BaseException:
            self.close()
            raise
        resp = Response(r.status, r.reason, {k.lower(): v for k, v in r.getheaders()}, data)
        if r.will_close:
            self.close()
        return resp

    # ---- operations ----

    def list_buckets(self):
        r = self.request("GET").check("ListBuckets")
        return [b.findtext("Name") for b in parse_xml(r.body).iter("Bucket")]

    def create_bucket(self, bucket):
        return self.request("PUT", bucket).check(f"CreateBucket {bucket}")

    def put_object(self, bucket, key, data, content_type="application/octet-stream"):
        return self.request("PUT", bucket, key, body=data,
                            headers={"Content-Type": content_type}).check(f"PUT {key}")

    def get_object(self, bucket, key, byte_range=None, range_header=None):
        """byte_range=(first, last) inclusive, or range_header='bytes=...' verbatim."""
        h = {}
        if byte_range is not None:
            h["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        elif range_header is not None:
            h["Range"] = range_header
        return self.request("GET", bucket, key, headers=h)

    def head_object(self, bucket, key):
        return self.request("HEAD", bucket, key)

    def delete_object(self, bucket, key):
        return self.request("DELETE", bucket, key)

    def delete_objects(self, bucket, keys):
        """DeleteObjects (POST ?delete), 1000 keys a request; raises S3Error when a key was
        not deleted."""
        keys = list(keys)
        for i in range(0, len(keys), 1000):
            body = ("<Delete><Quiet>true</Quiet>" + "".join(
                f"<Object><Key>{xml_escape(k)}</Key></Object>" for k in keys[i:i + 1000]) +
                "</Delete>").encode()
            md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
            r = self.request("POST", bucket, query=[("delete", "")], body=body,
                             headers={"Content-MD5": md5}).check(f"DeleteObjects {bucket}")
            failed = [e.findtext("Key") for e in parse_xml(r.body).iter("Error")]
            if failed:
                raise S3Error(r, f"DeleteObjects {bucket}: not deleted: {failed[:5]}")

    def list_objects_v2(self, bucket, prefix=None, delimiter=None, max_keys=None,
                        token=None, start_after=None):
        """One page: {'keys': [(key, size, etag)], 'prefixes': [...], 'truncated': bool,
        'token': next continuation token or None}."""
        q = [("list-type", "2"), ("encoding-type", "url")]  # keys XML 1.0 cannot hold too
        for name, value in (("prefix", prefix), ("delimiter", delimiter),
                            ("max-keys", None if max_keys is None else str(max_keys)),
                            ("continuation-token", token), ("start-after", start_after)):
            if value is not None:
                q.append((name, value))
        r = self.request("GET", bucket, query=q).check(f"ListObjectsV2 {bucket}")
        root = parse_xml(r.body)
        name = key_decoder(root)
        keys = [(name(c.findtext("Key")), int(c.findtext("Size")), c.findtext("ETag"))
                for c in root.iter("Contents")]
        prefixes = [name(p.findtext("Prefix")) for p in root.iter("CommonPrefixes")]
        return {"keys": keys, "prefixes": prefixes,
                "truncated": root.findtext("IsTruncated") == "true",
                "token": root.findtext("NextContinuationToken")}

    def list_multipart_uploads(self, bucket):
        """ListMultipartUploads: [(key, upload id)] of the uploads neither completed nor
        aborted (one page: the tests never leave 1000)."""
        r = self.request("GET", bucket, query=[("uploads", "")]).check(
            f"ListMultipartUploads {bucket}")
        return [(u.findtext("Key"), u.findtext("UploadId"))
                for u in parse_xml(r.body).iter("Upload")]

    def list_all(self, bucket, prefix=None, delimiter=None, max_keys=None):
        """Every page of a listing: (keys [(key, size, etag)], prefixes). A key seen twice is
        kept once (s3rver can repeat common prefixes on every page)."""
        keys, prefixes, seen, token = [], [], set(), None
        while True:
            page = self.list_objects_v2(bucket, prefix, delimiter, max_keys, token)
            for k in page["keys"]:
                if k[0] not in seen:
                    seen.add(k[0])
                    keys.append(k)
            for p in page["prefixes"]:
                if p not in prefixes:
                    prefixes.append(p)
            if not page["truncated"]:
                return keys, prefixes
            token = page["token"]
            if not token:
                raise S3Error(Response(500, "truncated listing without a token", {}, b""))
