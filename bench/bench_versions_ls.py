#!/usr/bin/python3
"""`ls` and `ls -l` of DIR/.versions/NAME/ with 1,000 kept versions (issue 26, goal: warm
`ls -l` <= 0.2 s).

Setup (kept in --work, reused by a rerun): a local-directory bucket with the folders
/home/bench, mounted with -o versions=on; a small domain (two datasets) copied onto
home/bench/v.h5 --versions times, alternating two files, so that each copy commits one
version. Measure: on a fresh mount with a fresh cache_dir, `ls -l` once (cold), then --reps
times `ls` and `ls -l` (warm: the same mount, ttl long enough); medians. Check: the listing
names every version, and the sizes `ls -l` shows for the first and last version equal the
bytes a read returns.

usage: bench/bench_versions_ls.py [--work DIR] [--versions N] [--reps N]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests" / "integration")]
import bench_cp  # noqa: E402
import harness  # noqa: E402

DOMAIN = "home/bench/v.h5"
VDIR = "home/bench/.versions/v.h5"


class Mounted:
    """A daemon run by tests/integration/harness.py, as every bench script's."""

    def __init__(self, bucket, mnt, cache, log, opts):
        mnt.mkdir(parents=True, exist_ok=True)
        self.mnt = mnt
        self.daemon = harness.Daemon(["-o", f"user={bench_cp.USER},cache_dir={cache},{opts}"],
                                     bucket, mnt, log)

    def path(self, rel):
        return self.mnt / rel

    def stop(self):
        self.daemon.stop(exit_timeout=600)


def sources(work):
    out = []
    for i in range(2):
        p = work / f"src{i}.h5"
        if not p.exists():
            with h5py.File(p, "w") as f:
                f.create_dataset("x", data=np.arange(1000) + i, chunks=(100,))
                f.create_dataset("y", data=np.full((10, 10), i, dtype="f4"))
        out.append(p)
    return out


def make_versions(work, n):
    bucket = work / "bucket"
    vlist = bucket / VDIR / ".h5osfs-versions"
    if vlist.exists() and vlist.read_text().count('"n":') >= n:
        return bucket
    shutil.rmtree(bucket, ignore_errors=True)
    bench_cp.make_bucket(bucket)
    srcs = sources(work)
    m = Mounted(bucket, work / "mnt", work / "cache-make", work / "make.log", "versions=on")
    try:
        t0 = time.monotonic()
        for i in range(n):
            shutil.copyfile(srcs[i % 2], m.path(DOMAIN))
        print(f"{n} versions committed in {time.monotonic() - t0:.1f} s", flush=True)
    finally:
        m.stop()
    return bucket


def timed(argv):
    t0 = time.monotonic()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return time.monotonic() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path,
                    default=Path(tempfile.gettempdir()) / "h5osfs-bench-versions-ls")
    ap.add_argument("--versions", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    bucket = make_versions(a.work, a.versions)
    cache = a.work / "cache-ls"
    shutil.rmtree(cache, ignore_errors=True)
    m = Mounted(bucket, a.work / "mnt", cache, a.work / "ls.log", "ro,ttl=600")
    try:
        vdir = str(m.path(VDIR))
        cold, out = timed(["ls", "-l", vdir])
        lines = [ln.split() for ln in out.splitlines()[1:]]
        sizes = {ln[-1]: int(ln[4]) for ln in lines}
        assert len(sizes) == a.versions, f"{len(sizes)} names listed"
        for name in ("1.h5", f"{a.versions}.h5"):
            with open(os.path.join(vdir, name), "rb") as f:
                assert len(f.read()) == sizes[name], name
        ls = statistics.median(timed(["ls", vdir])[0] for _ in range(a.reps))
        lsl = statistics.median(timed(["ls", "-l", vdir])[0] for _ in range(a.reps))
    finally:
        m.stop()
    print(f"{a.versions} versions: ls -l cold {cold:.3f} s; warm (median of {a.reps}): "
          f"ls {ls:.3f} s, ls -l {lsl:.3f} s (goal <= 0.2 s)")


if __name__ == "__main__":
    main()
