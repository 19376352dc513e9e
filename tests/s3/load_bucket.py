#!/usr/bin/python3
"""Loads a POSIX bucket directory into an S3 bucket: every regular file becomes an object whose
key is its path relative to the directory. Then checks that every key is there with its size.

    tests/s3/load_bucket.py --endpoint http://127.0.0.1:PORT --bucket hsdstest \\
        tests/data/hsds-v2/hsdstest
Credentials: --access-key/--secret-key, else $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY, else
s3rver's S3RVER/S3RVER. Standard library only.

Verification lists the bucket (ListObjectsV2, every page) and HEADs any expected key that the
listing lacks: s3rver 3.7.1 orders keys wrongly when a key is a prefix of another (`a`, `a-b`,
`a/c`), so paging can skip keys that exist. Such keys are reported, not treated as missing.
"""
import argparse
import concurrent.futures
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from s3client import S3Client, S3Error  # noqa: E402


def local_objects(root):
    """{key: path} for every regular file under root (symlinks to files followed)."""
    root = Path(root)
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_file():
                out[p.relative_to(root).as_posix()] = p
    return out


def load(endpoint, bucket, root, access_key="S3RVER", secret_key="S3RVER", jobs=8,
         create=True, verify=True, log=None):
    """Creates the bucket (if create), uploads every file, verifies. Returns a summary dict:
    {'objects': n, 'bytes': n, 'seconds': s, 'unlisted': [keys found only by HEAD]}."""
    objects = local_objects(root)
    if not objects:
        raise ValueError(f"{root}: no files")
    t0 = time.monotonic()
    with S3Client(endpoint, access_key, secret_key) as c:
        if create:
            r = c.request("PUT", bucket)
            if r.status >= 300 and r.error_code() not in ("BucketAlreadyOwnedByYou",
                                                          "BucketAlreadyExists"):
                r.check(f"CreateBucket {bucket}")

    def upload(items):
        with S3Client(endpoint, access_key, secret_key) as c:
            for key, path in items:
                c.put_object(bucket, key, path.read_bytes())

    keys = sorted(objects)
    jobs = max(1, min(jobs, len(keys)))
    batches = [[(k, objects[k]) for k in keys[i::jobs]] for i in range(jobs)]
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for f in [ex.submit(upload, b) for b in batches]:
            f.result()
    total = sum(p.stat().st_size for p in objects.values())
    summary = {"objects": len(objects), "bytes": total,
               "seconds": time.monotonic() - t0, "unlisted": []}
    if verify:
        summary["unlisted"] = check(endpoint, bucket, objects, access_key, secret_key)
    if log:
        log(f"load_bucket: {len(objects)} objects, {total} bytes into {bucket} "
            f"in {summary['seconds']:.2f} s")
    return summary


def check(endpoint, bucket, objects, access_key, secret_key):
    """Raises AssertionError unless every key of objects ({key: path}) is in the bucket with
    the file's size. Returns the keys that only a HEAD found (listing quirk)."""
    with S3Client(endpoint, access_key, secret_key) as c:
        listed, _ = c.list_all(bucket)
        sizes = {k: size for k, size, _ in listed}
        problems, unlisted = [], []
        for key, path in sorted(objects.items()):
            want = path.stat().st_size
            if key in sizes:
                if sizes[key] != want:
                    problems.append(f"{key}: listed size {sizes[key]}, file size {want}")
                continue
            r = c.head_object(bucket, key)
            if r.status != 200:
                problems.append(f"{key}: not listed, HEAD answers {r.status}")
            elif int(r.headers.get("content-length", -1)) != want:
                problems.append(f"{key}: HEAD size {r.headers.get('content-length')}, "
                                f"file size {want}")
            else:
                unlisted.append(key)
    if problems:
        raise AssertionError(f"bucket {bucket}: " + "; ".join(problems[:20]))
    return unlisted


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", help="the local bucket directory (e.g. .../hsdstest)")
    ap.add_argument("--endpoint", required=True, help="http://127.0.0.1:PORT")
    ap.add_argument("--bucket", help="bucket name (default: the directory's name)")
    ap.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID", "S3RVER"))
    ap.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY", "S3RVER"))
    ap.add_argument("--jobs", type=int, default=8, help="parallel uploads (default 8)")
    ap.add_argument("--no-verify", action="store_true")
    a = ap.parse_args()
    bucket = a.bucket or Path(a.directory).resolve().name
    try:
        s = load(a.endpoint, bucket, a.directory, a.access_key, a.secret_key, a.jobs,
                 verify=not a.no_verify)
    except (S3Error, AssertionError, OSError, ValueError) as e:
        print(f"load_bucket: {e}", file=sys.stderr)
        return 1
    print(f"{s['objects']} objects, {s['bytes']} bytes in {s['seconds']:.2f} s")
    for k in s["unlisted"]:
        print(f"warning: {k} exists but the listing skipped it (s3rver ordering)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
