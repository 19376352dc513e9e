#!/usr/bin/python3
"""Memory of image builds (issue 24 part 4): a domain of DEPTH groups each inside the last
(/g/g/g/..., default 10,000), opened OPENS times on one mount with -o ttl=0,image_cache=0,
bucket_images=off, so that every open builds the file again (more than once: lookup and open).
After each open the daemon's VmRSS (what it holds now) and VmHWM (its peak so far) are read
from /proc; the baseline is the daemon's VmRSS right after the mount, in the same run.

    bench/bench_nested_groups.py [--depth 10000] [--opens 5] [--work DIR]
    H5OSFS_BIN=/path/to/h5osfs bench/bench_nested_groups.py     # another build, e.g. the base

The domain is written as HSDS objects (bench/hsds_bucket.py's ids) into a temporary
directory (or --work), and deleted at the end unless --work is given. Output: one line per
open, then the number of builds the log counted.

Figures (2-core box shared with other builds, depth 10,000; an open builds 4 times):
before a363cdd, after open 1 VmRSS 712 MiB (peak 712), after open 2 1053 MiB; at a363cdd,
after open 1 67 MiB (peak 117), after open 5 92 MiB (peak 163); 13 MiB after the mount.
"""
import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import h5py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests" / "integration")]
import harness  # noqa: E402
import hsds_bucket  # noqa: E402

ACL = {"bench": hsds_bucket.acl_all(), "default": hsds_bucket.acl_all()}


def put_nested_domain(bucket, depth):
    now = time.time()
    root = hsds_bucket.root_id()
    ids = [root] + [hsds_bucket.member_id(root, "g") for _ in range(depth)]
    hsds_bucket.put(bucket, "home/bench/.domain.json",
                    {"owner": "bench", "acls": ACL, "created": now, "lastModified": now})
    hsds_bucket.put(bucket, "home/bench/nested.h5/.domain.json",
                    {"root": root, "owner": "bench", "acls": ACL, "created": now,
                     "lastModified": now})
    for i, gid in enumerate(ids):
        links = {"g": {"id": ids[i + 1], "class": "H5L_TYPE_HARD", "created": now}} \
            if i < depth else {}
        key = f"db/{root[2:19]}/.group.json" if i == 0 else \
            f"db/{root[2:19]}/g/{gid[20:]}/.group.json"
        hsds_bucket.put(bucket, key, {"id": gid, "root": root, "created": now,
                                      "lastModified": now, "links": links, "attributes": {}})


def status_mib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=10000)
    ap.add_argument("--opens", type=int, default=5)
    ap.add_argument("--work", type=Path)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-nested-"))
    bucket = work / "bucket" / "hsdstest"
    if not (bucket / "home" / "bench" / "nested.h5").exists():
        put_nested_domain(str(bucket), args.depth)
    mnt = work / "mnt"
    mnt.mkdir(exist_ok=True)
    shutil.rmtree(work / "cache", ignore_errors=True)
    d = harness.Daemon(["-o", "ro,user=bench,ttl=0,image_cache=0,bucket_images=off",
                        "-o", f"cache_dir={work / 'cache'}"], bucket, mnt, work / "h5osfs.log")
    try:
        start = status_mib(d.pid, "VmRSS")
        print(f"depth {args.depth}, {harness.h5osfs_bin()}")
        print(f"after mount: VmRSS {start:7.1f} MiB")
        for k in range(1, args.opens + 1):
            t0 = time.monotonic()
            with h5py.File(d.path("home/bench/nested.h5"), "r") as f:
                assert isinstance(f["g"], h5py.Group)
            print(f"after open {k}: VmRSS {status_mib(d.pid, 'VmRSS'):7.1f} MiB, "
                  f"VmHWM {status_mib(d.pid, 'VmHWM'):7.1f} MiB ({time.monotonic() - t0:.1f} s)")
        builds = sum("built the HDF5 file" in line for line in d.log().splitlines())
        print(f"{builds} builds")
    finally:
        try:
            d.stop()
        finally:
            if not args.work:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
