#!/usr/bin/python3
"""Time to first value over S3 of a file copied out of the mount against its source (issue 28 §3).

An HDF5 file as h5py writes it by default (metadata where HDF5 put it as the file grew: 50
groups x 10 datasets with 4 attributes each, and a 64 MiB gzip dataset) is copied into a
local-directory bucket with cp, and copied out again with cp from a fresh read-only mount with
-o paged_images=on: the copy has paged aggregation (file space strategy PAGE, 4 KiB pages). Both files are uploaded as
objects of the test S3 server's public bucket (s3rver, tests/s3), and each is opened by HDF5's
ros3 driver through a counting HTTP proxy; the timed step opens the file, reads one value of
the last dataset and of the gzip dataset ("first value"), or every dataset's attributes
("walk"). The paged copy is opened with a page buffer
(page_buf_size); the source cannot be (HDF5 refuses a page buffer for a file that is not
paged), so it gets ros3's defaults. Contenders alternate, every run checks the values; the
median of --reps runs is reported, with the proxy's GET count and bytes per open.

usage: bench/bench_cloud_copy.py [--reps N] [--page-buf BYTES] [--dir DIR]
"""
import argparse
import http.client
import http.server
import multiprocessing
import os
import shutil
import socketserver
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
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "integration"))
import harness  # noqa: E402
import hsds_bucket  # noqa: E402
from harness import S3Server  # noqa: E402

GROUPS, DSETS, ATTRS = 50, 10, 4
GZIP_SHAPE, GZIP_CHUNKS = (4096, 4096), (256, 4096)     # 64 MiB of float32, 4 MiB chunks
LAST = f"g{GROUPS - 1}/d{DSETS - 1}"


def make_source(path):
    rng = np.random.default_rng(28)
    with h5py.File(path, "w") as f:
        for g in range(GROUPS):
            grp = f.create_group(f"g{g}")
            for d in range(DSETS):
                ds = grp.create_dataset(f"d{d}", data=np.arange(100, dtype="f8") + g * DSETS + d)
                for a in range(ATTRS):
                    ds.attrs[f"a{a}"] = a
        big = f.create_dataset("gz", GZIP_SHAPE, "f4", chunks=GZIP_CHUNKS, compression="gzip")
        for i in range(0, GZIP_SHAPE[0], GZIP_CHUNKS[0]):
            noise = rng.integers(0, 16, (GZIP_CHUNKS[0], GZIP_SHAPE[1])).astype("f4")
            big[i:i + GZIP_CHUNKS[0]] = noise + i   # compressible: gzip keeps about a third


def copy_through_mount(work, source, out):
    bucket, mnt = work / "bucket", work / "mnt"
    bucket.mkdir()
    mnt.mkdir()
    now = time.time()
    hsds_bucket.put(bucket, "home/.domain.json",
                    {"owner": "bench", "acls": {"bench": hsds_bucket.acl_all()},
                     "created": now, "lastModified": now})
    for mode, step in (("rw", lambda: shutil.copyfile(source, mnt / "home" / "x.h5")),
                       ("ro", lambda: shutil.copyfile(mnt / "home" / "x.h5", out))):
        opts = f"user=bench,cache_dir={work / ('cache-' + mode)}" + \
            (",ro,paged_images=on" if mode == "ro" else "")
        daemon = harness.Daemon(["-o", opts], bucket, mnt, work / f"h5osfs-{mode}.log")
        try:
            step()
        finally:
            daemon.stop(exit_timeout=60)


class CountingProxy(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """Forwards every request to the S3 server and counts GETs and the bytes they return. It
    runs in a process of its own: h5py holds Python's lock while ros3 waits for an answer."""

    daemon_threads = True

    def __init__(self, upstream_port, gets, nbytes):
        self.upstream_port, self.gets, self.bytes = upstream_port, gets, nbytes
        super().__init__(("127.0.0.1", 0), ProxyHandler)


def run_proxy(upstream_port, gets, nbytes, port_queue):
    proxy = CountingProxy(upstream_port, gets, nbytes)
    port_queue.put(proxy.server_address[1])
    proxy.serve_forever()


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _forward(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        conn.request(self.command, self.path, headers=headers)
        r = conn.getresponse()
        body = r.read()
        conn.close()
        if self.command == "GET":
            with self.server.gets.get_lock():
                self.server.gets.value += 1
                self.server.bytes.value += len(body)
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = _forward


def first_values(f):
    return (f[LAST][0], f["gz"][0, 0])


def walk(f):
    """Every dataset's attributes: what a browser of the file reads."""
    total = []
    f.visititems(lambda name, obj: total.append(sum(obj.attrs.values()))
                 if isinstance(obj, h5py.Dataset) and obj.attrs else None)
    return sum(total)


WORKLOADS = {"first value": first_values, "walk": walk}


def timed(url, page_buf, workload):
    kw = {"page_buf_size": page_buf} if page_buf else {}
    t = time.perf_counter()
    with h5py.File(url, "r", driver="ros3", **kw) as f:
        v = workload(f)
    return time.perf_counter() - t, v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--page-buf", type=int, default=4 << 20)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        work = Path(d)
        source, copy = work / "source.h5", work / "copy.h5"
        make_source(source)
        copy_through_mount(work, source, copy)
        stat = subprocess.run(["h5stat", "-S", str(copy)], capture_output=True, text=True,
                              check=True).stdout
        print(next(line for line in stat.splitlines() if "strategy" in line))
        with h5py.File(source, "r") as f:
            want = {w: fn(f) for w, fn in WORKLOADS.items()}
        for p in (source, copy):
            with h5py.File(p, "r") as f:
                print(f"{p.name}: gz chunks {f['gz'].chunks}, {f['gz'].compression}, "
                      f"{f['gz'].id.get_storage_size() / 2**20:.1f} MiB stored")
        server = S3Server(work / "s3")
        gets, nbytes = multiprocessing.Value("q", 0), multiprocessing.Value("q", 0)
        port_queue = multiprocessing.Queue()
        proxy = multiprocessing.Process(target=run_proxy, daemon=True,
                                        args=(server.port, gets, nbytes, port_queue))
        proxy.start()
        try:
            with server.client() as c:
                c.create_bucket(server.public_bucket)
                for p in (source, copy):
                    c.put_object(server.public_bucket, p.name, p.read_bytes()).check("upload")
            base = f"http://127.0.0.1:{port_queue.get(timeout=30)}/{server.public_bucket}/"
            runs, counts = {}, {}
            for _ in range(args.reps):
                for w, fn in WORKLOADS.items():
                    for name, page_buf in (("source", 0), ("copy", args.page_buf)):
                        g0, b0 = gets.value, nbytes.value
                        dt, got = timed(base + name + ".h5", page_buf, fn)
                        if got != want[w]:
                            sys.exit(f"{name}, {w}: read {got}, want {want[w]}")
                        runs.setdefault((w, name), []).append(dt)
                        counts[w, name] = (gets.value - g0, nbytes.value - b0)
        finally:
            proxy.terminate()
            proxy.join()
            server.stop()
        med = {k: statistics.median(v) for k, v in runs.items()}
        for name in ("source", "copy"):
            print(f"{name}: {os.path.getsize(work / (name + '.h5')) / 2**20:.1f} MiB")
        for (w, name), t in med.items():
            print(f"  {w:12} {name:7} {t * 1e3:7.1f} ms (median of {args.reps}), "
                  f"{counts[w, name][0]} GETs, {counts[w, name][1] / 1024:.0f} KiB")
        for w in WORKLOADS:
            print(f"{w}: source/copy = {med[w, 'source'] / med[w, 'copy']:.2f}")

if __name__ == "__main__":
    main()
