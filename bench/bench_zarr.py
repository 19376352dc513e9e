#!/usr/bin/python3
"""The Zarr view (issue 28 §1) against the .h5 file of the same domain, on a local-directory
bucket, each measured on a fresh mount (cold: no tree, no built file kept, no kernel pages):

A. Opening a domain of 500 datasets (bench_read_all.py's meta.h5: 50 groups, 6 attributes per
   dataset): `h5py.File` of the .h5 (the image is built at lookup) against `zarr.open_group`
   of `.zarr/...` (the tree is read at the first lookup); and the same followed by a walk that
   reads every dataset's shape and dtype (h5py.visititems; zarr's visititems, which opens
   every .zarray); and zarr.open_consolidated, which reads the root's .zmetadata instead.
B. A full read of the 512 MiB gzip dataset (bench_read_all.py's gzip.h5, 1 MiB chunks, stored
   as the zlib streams `cp` wrote): dask.array.from_zarr on `.zarr/...` with 2 threads against
   h5py's `f["data"][()]` on the .h5. Check: both sums equal the native file's. And the floor
   of any reader of those stored bytes: the chunk files read into memory first, then only
   inflated (numcodecs, the codec the .zarray names) and summed by 2 threads.

Contenders alternate (A B A B ...); medians of --reps runs; ratio = .h5 time / .zarr time (> 1:
the Zarr view is faster). The data is made as bench_read_all.py makes it (h5py, then `cp`
into a read-write mount), kept in --work with --keep.

With --s3 both run on the test S3 server (s3rver on 127.0.0.1, the bucket uploaded once), and
B has a third contender, C (issue 28 §2-3): the same dask read through the domain's kerchunk
references with no mount, fsspec's reference file system over its HTTP file system straight
to the server (unsigned GETs: the bucket is served as a public bucket, --public-bucket). The
references are made once, before the timed runs, by a mount with
-o refs_url=http://127.0.0.1:PORT/benchbucket/ (what a publisher's -o bucket_refs=on would
have put in the bucket); their making is reported apart.

usage: bench/bench_zarr.py [--work DIR] [--keep] [--reps N] [--only A,B] [--s3]
"""
import argparse
import functools
import json
import shutil
import time
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "integration")]
import bench_read_all as bra  # noqa: E402
from bench_read_all import H5osfs, log  # noqa: E402

OPEN_H5 = """
import sys, time, h5py
t = time.perf_counter()
f = h5py.File(sys.argv[1], "r")
opened = time.perf_counter() - t
n = []
f.visititems(lambda name, o: n.append((o.shape, o.dtype)) if isinstance(o, h5py.Dataset) else None)
print(opened, time.perf_counter() - t, len(n))
"""

OPEN_ZARR = """
import sys, time, zarr
t = time.perf_counter()
g = zarr.open_group(sys.argv[1], mode="r")
opened = time.perf_counter() - t
n = []
g.visititems(lambda name, o: n.append((o.shape, o.dtype)) if isinstance(o, zarr.Array) else None)
print(opened, time.perf_counter() - t, len(n))
"""

OPEN_ZARR_CONSOLIDATED = OPEN_ZARR.replace("zarr.open_group(", "zarr.open_consolidated(")

READ_H5 = """
import sys, time, h5py, numpy as np
t = time.perf_counter()
with h5py.File(sys.argv[1], "r") as f:
    s = float(np.sum(f["data"][()], dtype=np.float64))
print(time.perf_counter() - t, s)
"""

READ_ZARR = """
import sys, time, dask, dask.array as da, numpy as np
t = time.perf_counter()
a = da.from_zarr(sys.argv[1])
with dask.config.set(scheduler="threads", num_workers=2):
    s = float(a.sum(dtype=np.float64).compute())
print(time.perf_counter() - t, s)
"""

READ_REFS = """
import sys, json, time, dask, dask.array as da, fsspec, numpy as np, zarr
t = time.perf_counter()
refs = json.load(open(sys.argv[1]))
fs = fsspec.filesystem("reference", fo=refs, remote_protocol="http")
a = da.from_zarr(zarr.open_group(zarr.storage.KVStore(fs.get_mapper("")), mode="r")["data"])
with dask.config.set(scheduler="threads", num_workers=2):
    s = float(a.sum(dtype=np.float64).compute())
print(time.perf_counter() - t, s)
"""

# The floor of any reader of the chunk files as stored: every chunk file's bytes are read into
# memory first (not timed), then inflated with the .zarray's codec (numcodecs, as dask's zarr
# reads) by 2 threads and summed. No FUSE, no scheduler: what inflating the stored zlib streams
# costs on this machine, which bounds the .zarr read from below. CPU: the process's.
DECODE_FLOOR = """
import json, os, sys, time, numpy as np, numcodecs
from concurrent.futures import ThreadPoolExecutor
d = sys.argv[1]
meta = json.load(open(os.path.join(d, ".zarray")))
codec = numcodecs.get_codec(meta["compressor"])
chunks = [open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))
          if not n.startswith(".")]
dtype = np.dtype(meta["dtype"])
def one(b):
    return float(np.sum(np.frombuffer(codec.decode(b), dtype=dtype), dtype=np.float64))
t, c = time.perf_counter(), time.process_time()
with ThreadPoolExecutor(2) as pool:
    s = sum(pool.map(one, chunks))
print(time.perf_counter() - t, s, time.process_time() - c, len(chunks))
"""

NATIVE_SUM = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    print(float(np.sum(f["data"][()], dtype=np.float64)))
"""


def run(script, *args):
    r = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                       text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return r.stdout.split()


WHERE = "local bucket"
STORE = None  # bench_read_all.Store with --s3: the bucket on the test S3 server (s3rver)


def fresh(work, label):
    bucket = f"s3://{bra.BUCKET}" if STORE else work / "bucket" / bra.BUCKET
    m = H5osfs(label, bucket, work / "mnt" / label, work, store=STORE, forget_images=True)
    m.mount()
    return m


def measure(work, label, fn, reps):
    """fn(mount) -> tuple of floats, on a fresh mount per rep; -> list of tuples."""
    out = []
    for _ in range(reps):
        m = fresh(work, label)
        try:
            out.append(fn(m))
        finally:
            m.unmount()
    return out


def alternate(work, contenders, reps):
    results = {name: [] for name in contenders}
    for _ in range(reps):
        for name, fn in contenders.items():
            results[name] += measure(work, name, fn, 1)
    return results


def median(rows, i):
    return statistics.median(r[i] for r in rows)


def bench_open(work, reps):
    h5 = lambda m: tuple(map(float, run(OPEN_H5, m.domain("meta"))))  # noqa: E731
    zr = lambda m: tuple(map(float, run(OPEN_ZARR, m.mnt / ".zarr" / "home" / bra.USER  # noqa
                                        / "meta.h5")))
    zc = lambda m: tuple(map(float, run(OPEN_ZARR_CONSOLIDATED, m.mnt / ".zarr" / "home"  # noqa
                                        / bra.USER / "meta.h5")))
    res = alternate(work, {"h5": h5, "zarr": zr, "zmeta": zc}, reps)
    assert all(r[2] == 500 for r in res["h5"] + res["zarr"] + res["zmeta"]), res
    lines = [f"| A: domain of 500 datasets, {WHERE}, cold | .h5 (h5py) | .zarr (open_group) "
             "| ratio | .zarr (open_consolidated) | ratio |", "|---|---|---|---|---|---|"]
    for i, what in ((0, "open"), (1, "open + every dataset's shape and dtype")):
        a, b, c = median(res["h5"], i), median(res["zarr"], i), median(res["zmeta"], i)
        lines.append(f"| {what} | {a:.3f} s | {b:.3f} s | {a / b:.2f}x | {c:.3f} s | "
                     f"{a / c:.2f}x |")
    return lines


def bench_read(work, reps):
    want = float(run(NATIVE_SUM, work / "native" / "gzip.h5")[0])
    h5 = lambda m: tuple(map(float, run(READ_H5, m.domain("gzip"))))  # noqa: E731
    zr = lambda m: tuple(map(float, run(READ_ZARR, m.mnt / ".zarr" / "home" / bra.USER  # noqa
                                        / "gzip.h5" / "data")))
    floor = lambda m: tuple(map(float, run(DECODE_FLOOR, m.mnt / ".zarr" / "home"  # noqa
                                           / bra.USER / "gzip.h5" / "data")))
    contenders = {"h5": h5, "zarr": zr, "floor": floor}
    made = None
    if STORE:
        refs_file, made = make_references(work)
        contenders["refs"] = lambda m: tuple(map(float, run(READ_REFS, refs_file)))
    res = alternate(work, contenders, reps)
    bad = [r for rows in res.values() for r in rows if r[1] != want]
    if bad:
        raise RuntimeError(f"sums differ from the native file's {want}: {bad}")
    a, b = median(res["h5"], 0), median(res["zarr"], 0)
    lines = [f"| B: full read of the 512 MiB gzip dataset, {WHERE}, cold | .h5 (h5py) | "
             ".zarr (dask, 2 threads) | ratio |", "|---|---|---|---|",
             f"| time | {a:.2f} s | {b:.2f} s | {a / b:.2f}x |",
             f"| MiB/s | {512 / a:.0f} | {512 / b:.0f} | |"]
    f, fcpu = median(res["floor"], 0), median(res["floor"], 2)
    lines += ["", f"| the floor: the {res['floor'][0][3]:.0f} chunk files, in memory, inflated "
              "(numcodecs) and summed by 2 threads | time | .h5 / floor |", "|---|---|---|",
              f"| {fcpu:.2f} s CPU | {f:.2f} s | {a / f:.2f}x (the most any reader of the "
              "stored bytes reaches here) |"]
    if STORE:
        c = median(res["refs"], 0)
        lines += ["", "| C: the same, no mount: kerchunk references, fsspec HTTP to the S3 server"
                  " | .h5 over S3 (h5py) | references (dask, 2 threads) | ratio |",
                  "|---|---|---|---|",
                  f"| time | {a:.2f} s | {c:.2f} s | {a / c:.2f}x |",
                  f"| MiB/s | {512 / a:.0f} | {512 / c:.0f} | |",
                  f"| making the references once (a mount's .kerchunk, cold) | | {made:.2f} s | |"]
    return lines


def make_references(work):
    """The gzip domain's references whose chunks are http://server/benchbucket/<key>: read
    once from a fresh mount's .kerchunk (-o refs_url). -> (file, seconds it took)."""
    base = f"{STORE.endpoint}/{bra.BUCKET}/"
    m = H5osfs("refs", f"s3://{bra.BUCKET}", work / "mnt" / "refs", work, store=STORE,
               opts=f"refs_url={base}", forget_images=True)
    m.mount()
    try:
        t = time.perf_counter()
        text = (m.mnt / ".kerchunk" / "home" / bra.USER / "gzip.h5.json").read_text()
        made = time.perf_counter() - t
    finally:
        m.unmount()
    urls = [v[0] for v in json.loads(text)["refs"].values() if isinstance(v, list)]
    assert urls and all(u.startswith(base) for u in urls), urls[:3]
    out = work / "gzip.refs.json"
    out.write_text(text)
    return out, made


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", type=Path, default=Path.home() / ".cache/h5osfs-bench/zarr")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--only", default="A,B")
    p.add_argument("--s3", action="store_true", help="the bucket on s3rver (tests/s3), not local")
    a = p.parse_args()
    global STORE, WHERE
    only = a.only.split(",")
    names = (["meta"] if "A" in only else []) + (["gzip"] if "B" in only else [])
    try:
        for n in names:
            bra.make_native(a.work, n)
        bra.ingest(a.work, names)
        if a.s3:
            # unsigned GETs of the bucket, as of a public bucket: the references' HTTP reader
            bra.S3Server = functools.partial(bra.S3Server,
                                             extra_args=("--public-bucket", bra.BUCKET))
            STORE = bra.Store(a.work, names, reload=False)
            WHERE = "S3 (s3rver, 127.0.0.1)"
        lines = []
        if "A" in only:
            lines += bench_open(a.work, a.reps) + [""]
        if "B" in only:
            lines += bench_read(a.work, a.reps)
        print("\n".join(lines))
    finally:
        if STORE:
            STORE.stop()
        if not a.keep:
            shutil.rmtree(a.work, ignore_errors=True)
    log("done")


if __name__ == "__main__":
    main()
