#!/usr/bin/python3
"""make_version.py BUCKET_DIR DOMAIN [--by NAME] [--time T] [--from OTHER]: keep the current state of the
domain DOMAIN ("home/u/a.h5") of the local bucket directory BUCKET_DIR as its next version,
written by hand the way issue 26's design (doc/versions.md) stores one:

  db/<P>/c/<md5>                         each chunk of a fixed-size dataset, once (the pool)
  db/<P>/.h5osfs-pool                    {"domain": "/DOMAIN"}: whose pool it is
  db/<V>/...                             the version's root: every object's JSON, ids moved
                                         under V; fixed-size datasets H5D_CHUNKED_REF_INDIRECT
                                         over a chunk table whose entries name pool objects;
                                         other datasets keep plain chunks, copied under V
  DIR/.versions/NAME/.h5osfs-versions    the version list, the entry appended
  DIR/.versions/NAME/<n>.h5/.domain.json the version as an HSDS domain (read-only ACL)

The tests use it to make versions before h5osfs writes them itself (tests/integration/
test_versions_read.py); it prints the new version's number and root. Local buckets only.
"""
import argparse
import hashlib
import json
import os
import re
import secrets
import time

import numpy as np

URI_LEN = 128  # fixed-length ASCII file_uri: table chunks stay fixed-size (spec §8.3 allows it)
CHUNK_NAME = re.compile(r"^\d+(_\d+)*$")
ROT = {c: format((int(c, 16) + 8) % 16, "x") for c in "0123456789abcdef"}


def new_root_id():
    h = secrets.token_hex(8)
    d = h + "".join(ROT[c] for c in h)
    return f"g-{d[0:8]}-{d[8:16]}-{d[16:20]}-{d[20:26]}-{d[26:32]}"


def prefix_of(root):
    """db/A-B of a v2 id."""
    return root[2:19]


def object_dir(bucket, obj_id):
    hexs = obj_id[2:].replace("-", "")
    return os.path.join(bucket, "db", prefix_of(obj_id), obj_id[0],
                        f"{hexs[16:20]}-{hexs[20:26]}-{hexs[26:32]}")


def fixed_size(t):
    cls = t.get("class") if isinstance(t, dict) else None
    if cls in ("H5T_VLEN", "H5T_REFERENCE") or cls is None:
        return False
    if cls == "H5T_STRING":
        return t.get("length") != "H5T_VARIABLE"
    if cls == "H5T_COMPOUND":
        return all(fixed_size(f["type"]) for f in t["fields"])
    if cls == "H5T_ARRAY":
        return fixed_size(t["base"])
    return True


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def moved(text, root, vroot):
    """JSON text of an object of root with every id moved under vroot (suffixes kept)."""
    return text.replace(root, vroot).replace(prefix_of(root), prefix_of(vroot))


def chunk_files(dset_dir):
    names = os.listdir(dset_dir) if os.path.isdir(dset_dir) else []
    if any(n.startswith("p") and os.path.isdir(os.path.join(dset_dir, n)) for n in names):
        raise SystemExit(f"{dset_dir}: partitioned chunks are not supported here")
    return {n: os.path.join(dset_dir, n) for n in names if CHUNK_NAME.match(n)}


def seal(bucket, bucket_name, pool, files):
    """Copy chunk files into the pool: {index string: (uri, size)}."""
    out = {}
    for name, path in files.items():
        data = open(path, "rb").read()
        md5 = hashlib.md5(data).hexdigest()
        write(os.path.join(bucket, "db", prefix_of(pool), "c", md5), data)
        out[name] = (f"{bucket_name}/db/{prefix_of(pool)}/c/{md5}", len(data))
    return out


def table_for(doc, vroot, sealed, bucket_name, pool):
    """A chunk table dataset (JSON, its one chunk's bytes) over sealed chunks."""
    dims = doc["shape"]["dims"]
    cdims = doc["layout"]["dims"]
    grid = [(d + c - 1) // c for d, c in zip(dims, cdims)]
    dt = np.dtype([("offset", "<i8"), ("size", "<i4"), ("file_uri", f"S{URI_LEN}")])
    table = np.zeros(grid, dtype=dt)
    table["file_uri"] = f"{bucket_name}/db/{prefix_of(pool)}/c/0".encode()  # absent: fill
    for name, (uri, size) in sealed.items():
        idx = tuple(int(i) for i in name.split("_"))
        table[idx] = (0, size, uri.encode())
    tid = "d-" + prefix_of(vroot) + "-" + secrets.token_hex(2) + "-" + \
        secrets.token_hex(3) + "-" + secrets.token_hex(3)
    now = time.time()
    tdoc = {"id": tid, "root": vroot, "created": now, "lastModified": now,
            "type": {"class": "H5T_COMPOUND", "fields": [
                {"name": "offset", "type": {"class": "H5T_INTEGER", "base": "H5T_STD_I64LE"}},
                {"name": "size", "type": {"class": "H5T_INTEGER", "base": "H5T_STD_I32LE"}},
                {"name": "file_uri", "type": {"class": "H5T_STRING", "charSet": "H5T_CSET_ASCII",
                                              "strPad": "H5T_STR_NULLPAD", "length": URI_LEN}}]},
            "shape": {"class": "H5S_SIMPLE", "dims": grid, "maxdims": grid},
            "attributes": {}, "creationProperties": {}, "layout": {"class": "H5D_CHUNKED",
                                                                   "dims": grid}}
    return tid, tdoc, table.tobytes()


def version_dataset(bucket, bucket_name, pool, vroot, text, src_dir):
    """Write one dataset of the version; returns nothing."""
    doc = json.loads(text)
    files = chunk_files(src_dir)
    cprops = doc.setdefault("creationProperties", {})
    plain = doc.get("layout", {}).get("class") == "H5D_CHUNKED" and \
        cprops.get("layout", {}).get("class", "H5D_CHUNKED") == "H5D_CHUNKED"
    simple = doc.get("shape", {}).get("class") == "H5S_SIMPLE"
    if not (plain and simple and fixed_size(doc["type"])):
        for name, path in files.items():  # copied per version
            write(os.path.join(object_dir(bucket, doc["id"]), name), open(path, "rb").read())
        write(os.path.join(object_dir(bucket, doc["id"]), ".dataset.json"), text.encode())
        return
    sealed = seal(bucket, bucket_name, pool, files)
    tid, tdoc, tbytes = table_for(doc, vroot, sealed, bucket_name, pool)
    tdir = object_dir(bucket, tid)
    write(os.path.join(tdir, ".dataset.json"), json.dumps(tdoc).encode())
    write(os.path.join(tdir, "_".join("0" * len(doc["shape"]["dims"]))), tbytes)
    cprops["layout"] = {"class": "H5D_CHUNKED_REF_INDIRECT", "dims": doc["layout"]["dims"],
                        "chunk_table": tid, "h5osfs": {"pool": pool}}
    write(os.path.join(object_dir(bucket, doc["id"]), ".dataset.json"),
          json.dumps(doc).encode())


def copy_root(bucket, bucket_name, pool, root, vroot):
    src = os.path.join(bucket, "db", prefix_of(root))
    for dirpath, _, names in os.walk(src):
        for n in names:
            path = os.path.join(dirpath, n)
            rel = os.path.relpath(path, src)
            if n == ".dataset.json":
                version_dataset(bucket, bucket_name, pool, vroot,
                                moved(open(path).read(), root, vroot), dirpath)
            elif rel == ".group.json":      # the root group claims the pool (vpool.h)
                doc = json.loads(moved(open(path).read(), root, vroot))
                doc["h5osfs"] = {"pool": pool}
                write(os.path.join(bucket, "db", prefix_of(vroot), rel), json.dumps(doc).encode())
            elif n in (".group.json", ".datatype.json"):
                write(os.path.join(bucket, "db", prefix_of(vroot), rel),
                      moved(open(path).read(), root, vroot).encode())
            # chunks go with their dataset; .info.json: versions have none


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bucket_dir")
    ap.add_argument("domain")
    ap.add_argument("--by", default="fixture@test")
    ap.add_argument("--time", type=float, default=None)
    ap.add_argument("--from", dest="source", default=None,
                    help="keep this other domain's state as DOMAIN's version (as after a cp)")
    a = ap.parse_args()
    bucket = a.bucket_dir.rstrip("/")
    bucket_name = os.path.basename(bucket)
    dom_path = os.path.join(bucket, a.domain, ".domain.json")
    dom = json.load(open(dom_path))
    parent, name = os.path.split(a.domain)
    vdir = os.path.join(bucket, parent, ".versions", name)
    list_path = os.path.join(vdir, ".h5osfs-versions")
    if os.path.exists(list_path):
        vlist = json.load(open(list_path))
    else:
        vlist = {"format": 1, "domain": "/" + a.domain, "pool": new_root_id(), "next": 1,
                 "versions": []}
        write(os.path.join(bucket, "db", prefix_of(vlist["pool"]), ".h5osfs-pool"),
              json.dumps({"domain": "/" + a.domain}).encode())
    vroot = new_root_id()
    source = json.load(open(os.path.join(bucket, a.source, ".domain.json"))) if a.source else dom
    copy_root(bucket, bucket_name, vlist["pool"], source["root"], vroot)
    n = vlist["next"]
    kept = [e for e in vlist["versions"] if isinstance(e, dict) and e.get("state") == "kept"]
    vlist["versions"].append({
        "n": n, "root": vroot, "time": a.time if a.time is not None else time.time(),
        "by": a.by, "parent": max([e.get("n", 0) for e in kept], default=0), "size": 0,
        "stamp": "", "names": [f"{n}.h5"], "state": "kept"})
    vlist["next"] = n + 1
    write(list_path, json.dumps(vlist).encode())
    vdom = dict(dom, root=vroot, h5osfs={"version": n})
    vdom["acls"] = {u: dict(r, create=False, update=False, delete=False, updateACL=False)
                    for u, r in dom.get("acls", {}).items()}
    write(os.path.join(vdir, f"{n}.h5", ".domain.json"), json.dumps(vdom).encode())
    print(n, vroot, vlist["pool"])


if __name__ == "__main__":
    main()
