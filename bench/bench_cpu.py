#!/usr/bin/python3
"""Daemon CPU per GiB of a full read (issue 29 §3): one h5osfs binary against another (--base,
a build of the commit to compare with), alternating (A B A B ...), each run a fresh daemon
(cold: no chunk cache, no page cache of the file), on a local-directory bucket and on s3rver.

S3 is s3rver (tests/s3, the suite's server) or, with --server rgw, Ceph RGW (tests/s3/rgw.py,
its OSD in RAM, started and loaded by the run).

The data: one domain /home/bench/float.h5 with a float32 dataset of 16384 x 16384 (1 GiB) in
1 MiB chunks (16 x 16384), written as HSDS objects directly (bench/hsds_bucket.py); value k of
the dataset (row-major) is k mod 16777213, so a chunk served at the wrong place is seen.

Readers (--readers):
  h5py   Dataset.read_direct of the whole dataset into one array; the values are checked
  raw    the .h5 file read front to back in 1 MiB read()s; its bytes are checked against the
         first run's (every binary must serve the same image)

--version reads version 1 of the domain instead (DIR/.versions/float.h5/1.h5, made by
tests/tools/make_version.py: every chunk a pool object named by a chunk table), in its own
bucket and work subfolder: the cost of reading through the pool (each pool object checked
against the MD5 its key names: S3 by its ETag, a local bucket by hashing).

Measured per run, from the open to the end of the read: wall time, the daemon's CPU
(utime + stime from /proc/PID/stat, all its threads, kernel work on its behalf included: the
copy of READ replies into the reader's pages is the daemon's stime), the reader's CPU (this
process) and the S3 server's. The table gives medians and the ratio new/base of daemon CPU.

usage: bench/bench_cpu.py --base BIN [--work DIR] [--backends posix,s3] [--readers h5py,raw]
                          [--reps N] [--opts O] [--base-opts O] [--server s3rver|rgw]
                          [--version]
"""
import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "integration"),
                str(HERE.parent / "tests" / "s3")]
import harness  # noqa: E402
import hsds_bucket  # noqa: E402
import s3fixtures  # noqa: E402
from bench_read_all import proc_cpu_seconds, process_tree  # noqa: E402
from harness import S3Server  # noqa: E402

USER = "bench"
BUCKET = "cpubucket"
SHAPE, CHUNKS = (16384, 16384), (16, 16384)
MODULUS = 16777213          # < 2**24: every value is exact in float32
GIB = SHAPE[0] * SHAPE[1] * 4 / 2**30


def chunk_values(row0):
    k = np.arange(row0 * SHAPE[1], (row0 + CHUNKS[0]) * SHAPE[1], dtype=np.int64)
    return (k % MODULUS).astype(np.float32)


def expected():
    return (np.arange(SHAPE[0] * SHAPE[1], dtype=np.int64) % MODULUS).astype(
        np.float32).reshape(SHAPE)


MAKE_VERSION = HERE.parent / "tests" / "tools" / "make_version.py"


def make_bucket(work, version=False):
    bucket = work / "bucket" / BUCKET
    marker = work / "bucket" / "done"
    if not marker.exists():
        shutil.rmtree(work / "bucket", ignore_errors=True)
        print("writing the 1 GiB domain", flush=True)
        hsds_bucket.make_domain(bucket, f"/home/{USER}/float.h5", "f4", SHAPE, CHUNKS,
                                lambda idx: chunk_values(idx[0] * CHUNKS[0]).tobytes(),
                                user=USER)
        if version:
            print("keeping it as version 1 (1 GiB into the pool)", flush=True)
            subprocess.run([sys.executable, str(MAKE_VERSION), str(bucket),
                            f"home/{USER}/float.h5"], check=True, stdout=subprocess.DEVNULL)
        marker.write_text("1")
    return bucket


def read_h5py(path, want):
    with h5py.File(path, "r") as f:
        d = f["data"]
        out = np.empty(d.shape, d.dtype)
        d.read_direct(out)
    return np.array_equal(out, want)


def read_raw(path, digest):
    h = hashlib.blake2b()
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
    finally:
        os.close(fd)
    d = h.hexdigest()
    if digest[0] is None:
        digest[0] = d
    return d == digest[0]


class Rgw:
    """Ceph RGW loaded with the bucket, as s3rver's S3Server looks to one_run."""

    def __init__(self, work, local):
        self._rgw = s3fixtures.RgwServer(work / "rgw", memstore_mib=2048)
        self.main = self._rgw.main
        self.endpoint = self._rgw.endpoint
        self.proc = self._rgw.proc
        print("uploading to RGW", flush=True)
        self.main.load(BUCKET, local)

    def env(self):
        return self.main.env()

    def stop(self):
        self._rgw.stop()


def start_server(kind, work, local):
    if kind == "rgw":
        return Rgw(work, local)
    server = S3Server(work / "s3")
    marker = work / "s3" / "loaded"
    if not marker.exists():
        print("uploading to s3rver", flush=True)
        server.load(BUCKET, local)
        marker.write_text("1")
    return server


def one_run(binary, opts, bucket, work, server, reader, rel):
    mnt = work / "mnt"
    mnt.mkdir(exist_ok=True)
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    o = f"user={USER},cache_dir={cache}" + (f",{opts}" if opts else "")
    env = None
    if server:
        o += f",endpoint={server.endpoint}"
        env = dict(os.environ, **server.env())
    daemon = harness.Daemon(["-o", o], bucket, mnt, work / "h5osfs.log", env=env,
                            mount_timeout=60, binary=binary)
    try:
        path = mnt / rel
        path.stat()
        srv = process_tree(server.proc.pid) if server else []
        d0, s0, r0 = proc_cpu_seconds(daemon.pid), sum(map(proc_cpu_seconds, srv)), \
            time.process_time()
        t0 = time.perf_counter()
        ok = reader(path)
        t = time.perf_counter() - t0
        d1, s1, r1 = proc_cpu_seconds(daemon.pid), sum(map(proc_cpu_seconds, srv)), \
            time.process_time()
    finally:
        daemon.stop(120)
    return {"time": t, "daemon": d1 - d0, "reader": r1 - r0, "server": s1 - s0, "ok": ok}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_cpu"))
    ap.add_argument("--base", required=True, help="the binary to compare with")
    ap.add_argument("--backends", default="posix,s3")
    ap.add_argument("--readers", default="h5py,raw")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--opts", default="", help="more -o options of the new binary")
    ap.add_argument("--base-opts", default="", help="more -o options of the base binary")
    ap.add_argument("--server", choices=("s3rver", "rgw"), default="s3rver")
    ap.add_argument("--version", action="store_true",
                    help="read version 1 of the domain (through the pool) instead")
    a = ap.parse_args()
    work = a.work.resolve() / ("version" if a.version else "")
    work.mkdir(parents=True, exist_ok=True)
    local = make_bucket(work, a.version)
    rel = f"home/{USER}/.versions/float.h5/1.h5" if a.version else f"home/{USER}/float.h5"
    bins = [("base", a.base, a.base_opts), ("new", str(harness.h5osfs_bin()), a.opts)]
    want = expected() if "h5py" in a.readers else None
    server = None
    rows = []
    all_ok = True
    try:
        for backend in a.backends.split(","):
            bucket = local
            if backend == "s3":
                server = server or start_server(a.server, work, local)
                bucket = f"s3://{BUCKET}"
            for rname in a.readers.split(","):
                digest = [None]
                reader = (lambda p: read_h5py(p, want)) if rname == "h5py" else \
                    (lambda p: read_raw(p, digest))
                res = {label: [] for label, _, _ in bins}
                for i in range(a.reps):
                    for label, binary, opts in bins:
                        r = one_run(binary, opts, bucket, work,
                                    server if backend == "s3" else None, reader, rel)
                        res[label].append(r)
                        print(f"{backend:5} {rname:4} {label:4} run {i + 1}: {r['time']:.2f} s, "
                              f"daemon {r['daemon']:.2f} s CPU"
                              + ("" if r["ok"] else " VALUES DIFFER"), flush=True)
                med = {label: {k: statistics.median(r[k] for r in runs)
                               for k in ("time", "daemon", "reader", "server")}
                       for label, runs in res.items()}
                ok = all(r["ok"] for runs in res.values() for r in runs)
                all_ok &= ok
                rows.append((backend, rname, med, ok))
    finally:
        if server:
            server.stop()
    print(f"\n{a.reps} runs each, medians; CPU in seconds per GiB; ratio = new / base; "
          f"S3: {a.server}; {rel}; load average {os.getloadavg()[0]:.1f}\n")
    print("| backend | reader | binary | time | daemon CPU/GiB | reader CPU | server CPU "
          "| daemon ratio | values |")
    print("|---|---|---|---|---|---|---|---|---|")
    for backend, rname, med, ok in rows:
        for label in ("base", "new"):
            m = med[label]
            ratio = f"{m['daemon'] / med['base']['daemon']:.2f}" if label == "new" else ""
            print(f"| {backend} | {rname} | {label} | {m['time']:.2f} s | "
                  f"{m['daemon'] / GIB:.2f} | {m['reader']:.2f} | {m['server']:.2f} | {ratio} "
                  f"| {'ok' if ok else 'DIFFER'} |")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
