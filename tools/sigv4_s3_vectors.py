#!/usr/bin/python3
"""Derive the S3-specific SigV4 test vectors embedded in tests/unit/test_sigv4.c.

    /usr/bin/python3 tools/sigv4_s3_vectors.py > /tmp/vectors.inc

A second implementation written straight from the AWS documentation ("Signature Version 4
signing process" and "Authenticating Requests: Using the Authorization Header" for S3), with
only the standard library (hashlib, hmac, urllib.parse.quote), so the C signer is checked against
something that shares none of its code. Before printing anything it re-derives the four examples
published in the S3 documentation and stops if any published signature differs: the script proves
itself before it is trusted to make new vectors.

S3 rules applied here: the path is the object key URI-encoded once ('/' kept), never normalised;
query keys and values are URI-encoded ('/' encoded too) and sorted by key then value; header names
lower-cased, values trimmed with inner whitespace runs folded; the payload hash is the body's
SHA-256 or UNSIGNED-PAYLOAD, sent as x-amz-content-sha256.

Output: one C initializer per case (struct s3_case in the test), pasted verbatim between the
"clang-format off/on" lines inside the "BEGIN/END generated" markers of
tests/unit/test_sigv4.c. Only the well-known AWS example credentials appear; no real secret is
ever used.
"""
import hashlib
import hmac
import sys
from urllib.parse import quote

EXAMPLE_ID = "AKIDEXAMPLE"
EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
DOC_ID = "AKIAIOSFODNN7EXAMPLE"
DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def uri_encode(text, keep_slash):
    """quote() keeps A-Z a-z 0-9 _ . - ~ on Python >= 3.7: exactly SigV4's unreserved set."""
    return quote(text.encode("utf-8"), safe="/" if keep_slash else "")


def canonical_query(params):
    pairs = sorted((uri_encode(k, False), uri_encode(v, False)) for k, v in params)
    return "&".join(k + "=" + v for k, v in pairs)


def canonical_headers(headers):
    merged = {}
    for name, value in headers:
        merged.setdefault(name.lower(), []).append(" ".join(value.split()))
    names = sorted(merged)
    text = "".join(n + ":" + ",".join(merged[n]) + "\n" for n in names)
    return text, ";".join(names)


def hmac_sha256(key, msg):
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def sign(case):
    hdr_text, signed = canonical_headers(case["headers"])
    creq = "\n".join([case["method"], case["path"], canonical_query(case["params"]),
                      hdr_text, signed, case["payload_hash"]])
    date8 = case["date"][:8]
    scope = "/".join([date8, case["region"], "s3", "aws4_request"])
    sts = "\n".join(["AWS4-HMAC-SHA256", case["date"], scope,
                     hashlib.sha256(creq.encode("utf-8")).hexdigest()])
    key = ("AWS4" + case["secret"]).encode("utf-8")
    for part in (date8, case["region"], "s3", "aws4_request"):
        key = hmac_sha256(key, part)
    sig = hmac.new(key, sts.encode("utf-8"), hashlib.sha256).hexdigest()
    auth = ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
            % (case["key_id"], scope, signed, sig))
    return creq, sts, sig, auth


def with_target(case, key, path):
    """An object key becomes the path the caller sends: "/" + the key encoded once."""
    if key is not None:
        case["key"] = key
        case["path"] = "/" + uri_encode(key, True)
    else:
        case["path"] = path
    return case


def doc_case(method, params, headers, payload_hash, published, key=None, path="/", body=b""):
    headers = [("Host", "examplebucket.s3.amazonaws.com")] + headers
    headers += [("x-amz-content-sha256", payload_hash), ("x-amz-date", "20130524T000000Z")]
    case = dict(method=method, params=params, headers=headers, payload_hash=payload_hash,
                date="20130524T000000Z", region="us-east-1", key_id=DOC_ID,
                secret=DOC_SECRET, published=published, body=body)
    return with_target(case, key, path)


def documented_examples():
    """The four header-signing examples of the S3 API reference (sigv4-header-based-auth)."""
    put_body = b"Welcome to Amazon S3."
    return {
        "aws-doc-get-object": doc_case(
            "GET", [], [("Range", "bytes=0-9")], EMPTY_SHA256,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
            key="test.txt"),
        "aws-doc-put-object": doc_case(
            "PUT", [], [("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                        ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
            hashlib.sha256(put_body).hexdigest(),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
            key="test$file.text", body=put_body),
        "aws-doc-get-lifecycle": doc_case(
            "GET", [("lifecycle", "")], [], EMPTY_SHA256,
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
        "aws-doc-list-objects": doc_case(
            "GET", [("max-keys", "2"), ("prefix", "J")], [], EMPTY_SHA256,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
    }


def own_case(method, params, headers, payload_hash, key=None, path="/", body=b"",
             region="us-east-1", host="examplebucket.s3.us-east-1.amazonaws.com"):
    date = "20240115T093000Z"
    headers = [("Host", host)] + headers
    headers += [("x-amz-content-sha256", payload_hash), ("X-Amz-Date", date)]
    case = dict(method=method, params=params, headers=headers, payload_hash=payload_hash,
                date=date, region=region, key_id=EXAMPLE_ID, secret=EXAMPLE_SECRET, body=body)
    return with_target(case, key, path)


TOKEN = "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="
SESSION_TOKEN = ("IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+abc/def"
                 "+ghi=EXAMPLEtokenEXAMPLE==")
PUT_BODY = b"HDF5 chunk bytes \x00\x01\x02\xff end\n"


def own_cases():
    return {
        "s3-get-range-odd-key": own_case(
            "GET", [], [("Range", "bytes=4096-8191")], "UNSIGNED-PAYLOAD",
            key="a b/c+d=e%f~\u00fc.h5"),
        "s3-list-objects-v2": own_case(
            "GET", [("list-type", "2"), ("prefix", "home/"), ("delimiter", "/"),
                    ("continuation-token", TOKEN)], [], EMPTY_SHA256),
        "s3-put-payload": own_case(
            "PUT", [], [("Content-Length", str(len(PUT_BODY))),
                        ("Content-Type", "application/octet-stream")],
            hashlib.sha256(PUT_BODY).hexdigest(), key="home/test_user1/d-1234/0_0",
            body=PUT_BODY),
        "s3-session-token": own_case(
            "HEAD", [], [("X-Amz-Security-Token", SESSION_TOKEN)], "UNSIGNED-PAYLOAD",
            key="home/.domain.json", region="eu-central-1",
            host="examplebucket.s3.eu-central-1.amazonaws.com"),
        "s3-path-not-normalised": own_case(
            "GET", [], [], EMPTY_SHA256, path="/bucket/a/./b//c",
            host="s3.us-east-1.amazonaws.com"),
    }


def c_string(text):
    out = []
    for ch in (text if isinstance(text, bytes) else text.encode("utf-8")):
        if ch == 0x0A:
            out.append("\\n")
        elif ch in (0x22, 0x5C):
            out.append("\\" + chr(ch))
        elif 0x20 <= ch < 0x7F:
            out.append(chr(ch))
        else:
            out.append("\\x%02x\"\"" % ch)   # split the literal so no hex digit follows
    return '"' + "".join(out) + '"'


def wire_query(params):
    """The query as the caller sends it: request order, each part encoded like the signer; a
    parameter without a value goes bare ("?lifecycle"), as S3's own examples send it."""
    return "&".join(uri_encode(k, False) + ("=" + uri_encode(v, False) if v else "")
                    for k, v in params)


def raw_query(params):
    """The same query unencoded, to show the signer canonicalises both alike; only where the
    raw text is unambiguous (no '&', '%' or '+' inside a key or value), else NULL."""
    if any(c in k + v for k, v in params for c in "&%+"):
        return None
    return "&".join(k + "=" + v for k, v in params)


def emit(name, case, out):
    creq, sts, sig, auth = sign(case)
    hdrs = ", ".join("{ %s, %s }" % (c_string(n), c_string(v)) for n, v in case["headers"])
    out.write("    {\n        .name = %s,\n" % c_string(name))
    out.write("        .method = %s,\n" % c_string(case["method"]))
    out.write("        .path = %s,\n" % c_string(case["path"]))
    out.write("        .query = %s,\n" % c_string(wire_query(case["params"])))
    raw = raw_query(case["params"])
    out.write("        .raw_query = %s,\n" % (c_string(raw) if raw is not None else "NULL"))
    out.write("        .key = %s,\n" % (c_string(case["key"]) if "key" in case else "NULL"))
    body = case.get("body", b"")
    out.write("        .body = %s,\n" % c_string(body))
    out.write("        .body_len = %d,\n" % len(body))
    out.write("        .headers = { %s },\n" % hdrs)
    out.write("        .n_headers = %d,\n" % len(case["headers"]))
    out.write("        .payload_hash = %s,\n" % c_string(case["payload_hash"]))
    out.write("        .key_id = %s,\n" % c_string(case["key_id"]))
    out.write("        .secret = %s,\n" % c_string(case["secret"]))
    out.write("        .amz_date = %s,\n" % c_string(case["date"]))
    out.write("        .region = %s,\n" % c_string(case["region"]))
    out.write("        .creq = %s,\n" % c_string(creq))
    out.write("        .sts = %s,\n" % c_string(sts))
    out.write("        .signature = %s,\n" % c_string(sig))
    out.write("        .authorization = %s,\n    },\n" % c_string(auth))


def main():
    for name, case in documented_examples().items():
        sig = sign(case)[2]
        if sig != case["published"]:
            sys.exit("%s: derived %s, AWS published %s" % (name, sig, case["published"]))
    out = sys.stdout
    for name, case in list(documented_examples().items()) + list(own_cases().items()):
        emit(name, case, out)


if __name__ == "__main__":
    main()
