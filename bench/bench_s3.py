#!/usr/bin/python3
"""Read throughput of h5osfs over S3, as ratios against baselines measured in the same run
against the same local S3 server (s3rver from tests/s3, started here):

  A. a full h5py read of a domain (>= 256 MiB of float32 in 2 MiB chunks) through a fresh
     h5osfs mount of s3://benchbucket (nothing cached);
  B. the same chunk objects fetched with plain parallel GETs (keep-alive, the same
     concurrency as h5osfs's -o max_requests), nothing else done with them;
  C. HDF5's own read-only S3 driver (ros3) reading the domain's source file, stored as one
     object in the same server, with h5py.

Goal: A/B >= 0.8; A/C is reported (the aim is A faster than C).

usage: bench/bench_s3.py [--mib N] [--requests N] [--dir DIR]
"""
import argparse
import concurrent.futures
import os
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "integration"))
import harness  # noqa: E402
import hsds_bucket  # noqa: E402
from harness import S3Server  # noqa: E402

ROWS_PER_CHUNK, COLS = 8, 65536                 # 8 x 65536 float32 = 2 MiB per chunk


def make_data(work, mib):
    rows = (mib // 2) * ROWS_PER_CHUNK
    rng = np.random.default_rng(7)
    block = rng.random((ROWS_PER_CHUNK, COLS), dtype=np.float32)
    local = work / "benchbucket"

    def chunk(idx):
        return (block + np.float32(idx[0])).tobytes()

    hsds_bucket.make_domain(local, "/big.h5", "f4", (rows, COLS), (ROWS_PER_CHUNK, COLS), chunk)
    native = work / "big_native.h5"
    with h5py.File(native, "w") as f:
        d = f.create_dataset("data", (rows, COLS), "<f4", chunks=(ROWS_PER_CHUNK, COLS))
        for i in range(0, rows, ROWS_PER_CHUNK):
            d[i:i + ROWS_PER_CHUNK] = block + np.float32(i // ROWS_PER_CHUNK)
    return local, native, rows * COLS * 4


def upload(server, local, native):
    server.load("benchbucket", local)
    with server.client() as c:
        c.create_bucket("benchfile")
        c.put_object("benchfile", "big_native.h5", native.read_bytes()).check("upload")


def read_through_mount(server, work, requests):
    mnt = work / "mnt"
    mnt.mkdir(exist_ok=True)
    env = dict(os.environ, **server.env())
    daemon = harness.Daemon(["-o", f"user=bench,endpoint={server.endpoint},"
                             f"max_requests={requests}"], "s3://benchbucket", mnt,
                            work / "h5osfs.log", env=env)
    try:
        with h5py.File(mnt / "big.h5", "r") as f:          # the image build is not timed
            d = f["data"]
            t = time.perf_counter()
            a = d[()]
            dt = time.perf_counter() - t
    finally:
        daemon.stop(exit_timeout=30)        # harness's teardown, or RuntimeError
    return dt, a


def parallel_gets(server, requests):
    with server.client() as c:
        listed, _ = c.list_all("benchbucket", prefix="db/")
        keys = [k for k, _, _ in listed if not k.endswith(".json")]

    def worker(chunk_keys):
        n = 0
        with server.client() as c:
            for k in chunk_keys:
                r = c.get_object("benchbucket", k)
                n += len(r.body)
        return n

    groups = [keys[i::requests] for i in range(requests)]
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(requests) as ex:
        total = sum(ex.map(worker, groups))
    return time.perf_counter() - t, total


def read_ros3(server):
    url = f"{server.endpoint}/benchfile/big_native.h5"
    try:
        with h5py.File(url, "r", driver="ros3", aws_region=server.region.encode(),
                       secret_id=server.access_key.encode(),
                       secret_key=server.secret_key.encode()) as f:
            d = f["data"]
            t = time.perf_counter()
            a = d[()]
            return time.perf_counter() - t, a
    except (ValueError, OSError) as e:
        return None, e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        os.environ["BENCH_KEEP"] = d
        work = Path(d)
        local, native, nbytes = make_data(work, args.mib)
        server = S3Server(work / "s3")
        print("work dir", work)
        try:
            upload(server, local, native)
            t_get, got = parallel_gets(server, args.requests)
            t_mnt, a = read_through_mount(server, work, args.requests)
            t_ros3, b = read_ros3(server)
            log = (work / "h5osfs.log").read_text()
            print("".join(line + "\n" for line in log.splitlines() if "chunk cache" in line
                          or "built" in line), end="")
        finally:
            server.stop()
        mb = nbytes / 1e6
        with h5py.File(native, "r") as f:
            same = np.array_equal(f["data"][()], a)
        print(f"S3 read of {nbytes / 2**20:.0f} MiB ({args.requests} requests in flight): "
              f"h5osfs {mb / t_mnt:.0f} MB/s (data equal: {same}); parallel GETs "
              f"{got / 1e6 / t_get:.0f} MB/s; ratio {(got / t_get) / (nbytes / t_mnt):.2f}"
              f" -> h5osfs/GETs = {(nbytes / t_mnt) / (got / t_get):.2f} (goal >= 0.8)")
        if t_ros3 is None:
            print(f"ros3: not available here ({b})")
        else:
            print(f"ros3 {mb / t_ros3:.0f} MB/s; h5osfs/ros3 = {t_ros3 / t_mnt:.2f} (goal > 1)")


if __name__ == "__main__":
    main()
