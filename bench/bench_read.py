#!/usr/bin/python3
"""Read throughput and image build cost of h5osfs, each as a ratio against a baseline measured
in the same run.

1. Full h5py read of a 1 GiB float32 dataset in 1 MiB chunks (raw chunks, POSIX bucket) through
   the mount, against h5py reading the same data from a native HDF5 file on the same disk; both
   with a warm page cache (one untimed read first), best of 3.
2. Image build for a dataset of 100,000 chunks: time of the first open (the build, from the
   daemon's log line) and the daemon's resident memory after it, against the same daemon's
   memory just after mounting.

usage: bench/bench_read.py [--dir DIR] [--gib N]
"""
import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
import harness  # noqa: E402
import hsds_bucket  # noqa: E402



def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def mount(bucket, mnt, log, *opts):
    """A harness.Daemon (tests/integration/harness.py) on mnt."""
    mnt.mkdir(exist_ok=True)
    return harness.Daemon(["-o", "user=bench,ttl=3600", *opts], bucket, mnt, log)


def unmount(daemon):
    """harness's teardown (unmounted, exit status 0, no sanitizer report), or RuntimeError."""
    daemon.stop(exit_timeout=30)


def timed_read(path, repeat=3):
    best = None
    with h5py.File(path, "r") as f:
        d = f["data"]
        d[()]                                   # warm the page cache, untimed
        for _ in range(repeat):
            t = time.perf_counter()
            a = d[()]
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
    return best, a.nbytes


def bench_read(work, gib):
    rows_per_chunk, cols = 4, 65536             # 4 x 65536 float32 = 1 MiB per chunk
    rows = int(gib * 1024) * rows_per_chunk
    bucket = work / "read" / "benchbucket"
    rng = np.random.default_rng(1)
    block = rng.random((rows_per_chunk, cols), dtype=np.float32)

    def chunk(idx):
        return (block + np.float32(idx[0])).tobytes()

    hsds_bucket.make_domain(bucket, "/big.h5", "f4", (rows, cols), (rows_per_chunk, cols), chunk)
    native = work / "read" / "native.h5"
    with h5py.File(native, "w") as f:
        d = f.create_dataset("data", (rows, cols), "<f4", chunks=(rows_per_chunk, cols))
        for i in range(0, rows, rows_per_chunk):
            d[i:i + rows_per_chunk] = block + np.float32(i // rows_per_chunk)
    t_native, nbytes = timed_read(native)
    daemon = mount(bucket, work / "read" / "mnt", work / "read.log",
                   "-o", f"cache_size={2 * nbytes}")
    try:
        t_mount, _ = timed_read(work / "read" / "mnt" / "big.h5")
        rss = rss_kib(daemon.pid)
    finally:
        unmount(daemon)
    mb = nbytes / 1e6
    print(f"read {nbytes / 2**30:.2f} GiB: native {mb / t_native:.0f} MB/s, "
          f"h5osfs {mb / t_mount:.0f} MB/s, ratio {t_native / t_mount:.2f} (goal >= 0.7); "
          f"daemon RSS {rss / 1024:.0f} MiB (cache_size {2 * nbytes / 2**20:.0f} MiB)")


def bench_build(work, chunks=100_000):
    bucket = work / "build" / "benchbucket"
    payload = bytes(range(16))
    hsds_bucket.make_domain(bucket, "/many.h5", "i1", (chunks * 16,), (16,), lambda idx: payload)
    log = work / "build.log"
    daemon = mount(bucket, work / "build" / "mnt", log)
    try:
        base = rss_kib(daemon.pid)
        t = time.perf_counter()
        with open(work / "build" / "mnt" / "many.h5", "rb") as f:
            f.read(8)
        t_open = time.perf_counter() - t
        after = rss_kib(daemon.pid)
        with h5py.File(work / "build" / "mnt" / "many.h5", "r") as f:
            ok = f["data"][:32].tobytes() == payload * 2
    finally:
        unmount(daemon)
    # "... N chunk extents, M runs of metadata, B bytes of RAM, S s" (the middle part may grow)
    m = re.search(r"(\d+) chunk extents, (?:.*?, )?(\d+) bytes of RAM, ([\d.]+) s",
                  log.read_text())
    print(f"build {chunks} chunks: open {t_open:.3f} s (build {m.group(3)} s, goal < 1 s); "
          f"image RAM {int(m.group(2)) / 2**20:.1f} MiB; daemon RSS {base / 1024:.1f} MiB at "
          f"mount -> {after / 1024:.1f} MiB after the build (+{(after - base) / 1024:.1f} MiB, "
          f"goal < 64 MiB); data ok: {ok}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    ap.add_argument("--gib", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        work = Path(d)
        bench_build(work)
        bench_read(work, args.gib)


if __name__ == "__main__":
    main()
