"""Write small HSDS v2 buckets for benchmarks: a domain with one chunked dataset, laid out as
HSDS's POSIX driver lays it out (spec/hsds-format.md §2-§6). Raw (uncompressed) chunks."""
import json
import os
import secrets
import time

ROT = {c: format((int(c, 16) + 8) % 16, "x") for c in "0123456789abcdef"}


def root_id():
    h = secrets.token_hex(8)
    full = h + "".join(ROT[c] for c in h)
    return f"g-{full[:8]}-{full[8:16]}-{full[16:20]}-{full[20:26]}-{full[26:]}"


def member_id(root, cls):
    r = secrets.token_hex(8)
    full = root[2:19].replace("-", "") + r
    return f"{cls}-{full[:8]}-{full[8:16]}-{full[16:20]}-{full[20:26]}-{full[26:]}"


def put(bucket, key, data):
    path = os.path.join(bucket, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else json.dumps(data).encode())


def acl_all():
    return {k: True for k in ("create", "read", "update", "delete", "readACL", "updateACL")}


def make_domain(bucket, domain, dtype, shape, chunks, chunk_bytes_fn, user="bench"):
    """One dataset /data; chunk_bytes_fn(index tuple) -> raw chunk bytes or None (absent)."""
    now = time.time()
    root = root_id()
    dset = member_id(root, "d")
    a_b = root[2:19]
    c_d_e = dset[20:]
    put(bucket, domain.strip("/") + "/.domain.json",
        {"root": root, "owner": user, "acls": {user: acl_all()}, "created": now, "lastModified": now})
    put(bucket, f"db/{a_b}/.group.json",
        {"id": root, "root": root, "created": now, "lastModified": now,
         "links": {"data": {"id": dset, "class": "H5L_TYPE_HARD", "created": now}},
         "attributes": {}})
    put(bucket, f"db/{a_b}/d/{c_d_e}/.dataset.json",
        {"id": dset, "root": root, "created": now, "lastModified": now,
         "type": {"class": "H5T_FLOAT" if dtype.startswith("f") else "H5T_INTEGER",
                  "base": {"f4": "H5T_IEEE_F32LE", "i1": "H5T_STD_I8LE"}[dtype]},
         "shape": {"class": "H5S_SIMPLE", "dims": list(shape)}, "attributes": {},
         "layout": {"class": "H5D_CHUNKED", "dims": list(chunks)}})
    grid = [(s + c - 1) // c for s, c in zip(shape, chunks)]
    index = [0] * len(grid)
    while True:
        data = chunk_bytes_fn(tuple(index))
        if data is not None:
            put(bucket, f"db/{a_b}/d/{c_d_e}/" + "_".join(map(str, index)), data)
        for k in reversed(range(len(grid))):
            index[k] += 1
            if index[k] < grid[k]:
                break
            index[k] = 0
        else:
            return root
