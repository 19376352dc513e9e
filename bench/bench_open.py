#!/usr/bin/python3
"""Open + first value of a one-dataset domain of N chunk objects (issue 29 §1): requests (from
/.h5osfs-stats) and time, cold mount (fresh daemon, empty cache_dir), on a local-directory
bucket, on s3rver and on Ceph RGW (--backends rgw; its objects in memory, loaded once per
run): the open alone (h5py.File and the dataset), and with the first value
(and the last, --last). Each N gets its own bucket, written as objects (bench/hsds_bucket.py):
int8 chunks of 16 values as bench_read_all.py's 10^6-chunk domain (value i of chunk c is
(c + i) % 127), so a 4 KiB page of the file holds 256 chunks: a build that reads such a file
through the page cache makes 256 chunk GETs for the first value (the kernel reads whole
pages); one that reads it past the page cache (doc/design.md, "Reading fast") makes 1.

Binaries alternate (A B A B ...) when --base is given (a build of the commit to compare with).

The daemon's peak resident memory (VmHWM, read just before it stops) is printed per run.
--whole then reads the whole dataset (values checked): its time, requests and the daemon's CPU
seconds (utime + stime from /proc) for that read.

usage: bench/bench_open.py [--work DIR] [--sizes 1000,10000] [--backends posix,s3,rgw]
                           [--base BIN] [--reps N] [--last] [--whole]
"""
import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "integration"), str(HERE.parent / "tests" / "s3")]
import harness  # noqa: E402
import hsds_bucket  # noqa: E402
import s3fixtures  # noqa: E402
from harness import S3Server  # noqa: E402

USER = "bench"
BUCKET = "openbucket"


def chunk(i):
    return ((np.arange(16) + i) % 127).astype(np.int8)


def make_bucket(work, n):
    bucket = work / f"n{n}" / BUCKET
    marker = work / f"n{n}" / "done"
    if not marker.exists():
        shutil.rmtree(work / f"n{n}", ignore_errors=True)
        hsds_bucket.make_domain(bucket, f"/home/{USER}/d.h5", "i1", (n * 16,), (16,),
                                lambda idx: chunk(idx[0]).tobytes(), user=USER)
        marker.write_text("1")
    return bucket


def requests(mnt):
    s = json.loads((mnt / ".h5osfs-stats").read_text())
    return s["store"]["requests"]


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / __import__("os").sysconf("SC_CLK_TCK")


def read_whole(d, pid, mnt):
    """d[:] with its values checked -> (seconds, requests, daemon CPU seconds)."""
    before, cpu0 = requests(mnt), cpu_seconds(pid)
    t0 = time.perf_counter()
    got = d[:]
    t = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    after = requests(mnt)
    n = got.shape[0] // 16
    want = (np.arange(16)[None, :] + np.arange(n)[:, None]) % 127
    assert np.array_equal(got.reshape(n, 16), want.astype(np.int8))
    return t, {k: after.get(k, 0) - before.get(k, 0) for k in after}, cpu


def one_run(binary, bucket, work, server, last, whole=False):
    mnt = work / "mnt"
    mnt.mkdir(exist_ok=True)
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    opts = f"user={USER},cache_dir={cache}"
    env = None
    if server:
        opts += f",endpoint={server.endpoint}"
        env = dict(__import__("os").environ, **server.env())
    daemon = harness.Daemon(["-o", opts], bucket, mnt, work / "h5osfs.log", env=env,
                            mount_timeout=60, binary=binary)
    try:
        (mnt / "home" / USER).stat()    # the folders, looked up before the count
        before = requests(mnt)
        t0 = time.perf_counter()
        with h5py.File(mnt / "home" / USER / "d.h5", "r") as f:
            d = f["data"]
            t_open = time.perf_counter() - t0
            opened = requests(mnt)
            v = d[0]
            assert v == 0, v
            if last:
                n = d.shape[0]
                assert d[n - 1] == chunk(n // 16 - 1)[15]
            t = time.perf_counter() - t0
            after = requests(mnt)
            read = read_whole(d, daemon.proc.pid, mnt) if whole else None
        rss = peak_rss_mib(daemon.proc.pid)
    finally:
        daemon.stop(120)
    return t, t_open, {k: after.get(k, 0) - before.get(k, 0) for k in after}, \
        {k: opened.get(k, 0) - before.get(k, 0) for k in opened}, rss, read


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/bench_open")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--backends", default="posix,s3")
    ap.add_argument("--base", help="the binary to compare with (alternating)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--last", action="store_true", help="read the last value too")
    ap.add_argument("--whole", action="store_true", help="then read the whole dataset")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    bins = [("new", harness.h5osfs_bin())] + ([("base", a.base)] if a.base else [])
    server = rgw = None
    for n in map(int, a.sizes.split(",")):
        local = make_bucket(work, n)
        for backend in a.backends.split(","):
            account = None
            if backend == "s3":
                if server is None:
                    server = S3Server(work / "s3")
                account = server
                name = f"open-{n}"
                marker = work / "s3" / f"loaded-{n}"
                if not marker.exists():
                    server.load(name, local)
                    marker.write_text("1")
                bucket = f"s3://{name}"
            elif backend == "rgw":
                if rgw is None:
                    rgw = s3fixtures.RgwServer(work / "rgw")
                account = rgw.main
                name = f"open-{n}"
                t_load = time.perf_counter()
                rgw.main.load(name, local)
                print(f"rgw   N={n:<7} loaded in {time.perf_counter() - t_load:.0f} s", flush=True)
                bucket = f"s3://{name}"
            else:
                bucket = local
            res = {label: [] for label, _ in bins}
            for _ in range(a.reps):
                for label, binary in bins:
                    res[label].append(one_run(binary, bucket, work, account, a.last, a.whole))
            for label, runs in res.items():
                t = statistics.median(r[0] for r in runs)
                t_open = statistics.median(r[1] for r in runs)
                req, req_open = runs[-1][2], runs[-1][3]
                rss = max(r[4] for r in runs)
                fmt = lambda r: " ".join(f"{k}={v}" for k, v in sorted(r.items()) if v)  # noqa
                print(f"{backend:5} N={n:<7} {label:4} open {t_open:7.3f} s [{fmt(req_open)}]"
                      f"  +value {t:7.3f} s [{fmt(req)}]  peak RSS {rss:.1f} MiB", flush=True)
                if a.whole:
                    tw = statistics.median(r[5][0] for r in runs)
                    cw = statistics.median(r[5][2] for r in runs)
                    print(f"{'':5} {'':9} {label:4} whole {tw:7.3f} s [{fmt(runs[-1][5][1])}]"
                          f"  daemon CPU {cw:.2f} s", flush=True)
    if server:
        server.stop()
    if rgw:
        rgw.stop()


if __name__ == "__main__":
    main()
