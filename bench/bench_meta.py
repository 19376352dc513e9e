#!/usr/bin/python3
"""Metadata speed of h5osfs: `ls -l` of a folder of 1000 domains, and the cost of a
one-element r+ change of a domain of 1e5 chunk objects, each against baselines measured in
the same run.

A. `ls -l` of a folder of 1000 small domains (3 datasets, 2 groups, 9 attributes each), on a
   local-directory bucket and over S3 (tests/s3: s3rver on 127.0.0.1), with -o ttl=2: the
   first `ls -l` on a fresh mount (cold), a second one on the same mount at once (warm), and
   a third after `sleep 3` (the ttl has expired). Baselines: `ls -l` of a local directory of
   the 1000 native .h5 files, and over S3 s3fs-fuse (-o stat_cache_expire=2, the same ttl) on
   a bucket holding the 1000 .h5 files as objects. Check: the listing names the 1000 files,
   and for 20 of them the size `ls -l` shows equals the bytes a read of the file returns, and
   h5py reads the native file's values from it.
B. `h5py.File(path, "r+")`, one element changed, close (the close commits a new root: the
   unchanged chunks are copied inside the store, hard links on a local bucket, CopyObject on
   S3), on a fresh mount each time, on the local bucket and over S3, of a domain of 1e5 chunk
   objects of 4 KiB (float32). Baselines: the same r+ on the native .h5 file on local disk,
   and over S3 a `cp` of the whole domain's file out of a fresh mount to local disk (what a
   full rewrite would have to move at least). The daemon's "committed" log line says what the
   commit wrote and copied. Check: after a remount the element has its new value and others
   (its neighbours, the first and last ones, 1000 random ones) did not change; the `cp` copy
   has the whole dataset's values.

The data is generated here (seeded): the 1000 native files with h5py, `cp` into a read-write
h5osfs mount of a local directory (how users make a bucket); the 1e5-chunk domain written as
objects (bench/hsds_bucket.py) and the same data as a native file with h5py; both buckets and
the native files uploaded to the S3 server. Kept in --work with --keep; a rerun reuses them.
The r+ runs change the bucket's domains (a new root each time; the element changed is always
the same one, so the checks hold in every run).

Method: ratio = baseline time / h5osfs time (> 1: h5osfs is faster); contenders alternate
(A B A B ...), the table has medians of --reps runs. The h5osfs binary is copied into --work
at the start, so a rebuild during the run does not change what is measured.

usage: bench/bench_meta.py [--work DIR] [--keep] [--only A,B] [--reps N] [--reload] [--out F]
"""
import argparse
import datetime
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests" / "integration"), str(REPO / "tests" / "s3")]
import bench_cp  # noqa: E402
import bench_read_all as bra  # noqa: E402
import hsds_bucket  # noqa: E402
from bench_read_all import Line, Run, alternate, fmt_s, log, timed, wait_for  # noqa: E402
from harness import S3Server, s3rver_problem  # noqa: E402

USER = bra.USER                       # "bench": the folders /home/bench of both buckets
META_BUCKET = "metabucket"            # A: /home/bench/meta/dNNNN.h5, 1000 domains
BIG_BUCKET = "bigbucket"              # B: /home/bench/big.h5, 1e5 chunk objects
FILES_BUCKET = bra.FILES_BUCKET       # A over S3, s3fs: the 1000 native files as objects
N_META = 1000
SAMPLE = 20                           # domains whose size is checked against a read
FAST_REPS = 5                         # A on the local bucket: at least this many runs
TTL, TTL_SLEEP = 2, 3                 # the expired listing: -o ttl=2, then sleep 3
TTL_WARM = 600                        # the warm listing: a ttl no cold listing outlasts
BIG_CHUNK = 1024                      # float32 values: 4 KiB chunk objects
BIG_CHUNKS = BIG_LEN = CHANGED = None  # set_chunks(): --chunks, default 100000


def set_chunks(n):
    """The size of B's domain: n chunk objects; the r+ runs change one element of chunk
    0.54321 n, always the same one."""
    global BIG_CHUNKS, BIG_LEN, CHANGED
    BIG_CHUNKS, BIG_LEN = n, n * BIG_CHUNK
    CHANGED = int(n * 0.54321) * BIG_CHUNK + 7
UNMOUNT_TIMEOUT = 900


# ---------------------------------------------------------------------------------------------
# the data

def meta_name(i):
    return f"d{i:04d}.h5"


def write_meta_file(path, i):
    """A small file as many folders hold: 2 groups, 3 datasets, 9 attributes."""
    rng = np.random.default_rng(1000 + i)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = f"station {i}"
        f.attrs["version"] = np.int32(3)
        f.attrs["created"] = "2026-11-24T00:00:00Z"
        obs = f.create_group("obs")
        t = obs.create_dataset("temperature", data=rng.normal(280, 5, 100).astype("<f4"))
        t.attrs["units"] = "K"
        t.attrs["valid_range"] = np.array([150.0, 350.0], "<f4")
        p = obs.create_dataset("pressure", data=rng.normal(1000, 20, (10, 10)))
        p.attrs["units"] = "hPa"
        p.attrs["scale_factor"] = np.float64(1.0)
        q = f.create_group("qc").create_dataset("flags", data=rng.integers(0, 8, 50, "i1"))
        q.attrs["meanings"] = "good suspect bad"


def meta_values(path):
    with h5py.File(path, "r") as f:
        return [f["obs/temperature"][()], f["obs/pressure"][()], f["qc/flags"][()],
                f.attrs["title"], f["obs/pressure"].attrs["units"]]


def same_values(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def big_chunk(i):
    """Chunk i of the 1e5-chunk dataset (exact in float32: values below 2**24)."""
    return ((np.arange(BIG_CHUNK, dtype=np.int64) + i * BIG_CHUNK) % 999_983).astype("<f4")


def big_value(idx):
    return ((np.asarray(idx, dtype=np.int64)) % 999_983).astype("<f4")


def done_marker(path, want):
    return path.exists() and path.read_text() == want


def make_meta_natives(work):
    d = work / "native" / "meta"
    marker = work / "native" / "meta.done"
    if done_marker(marker, str(N_META)):
        return d
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    log(f"making {N_META} small HDF5 files in {d}")
    t, _ = timed(lambda: [write_meta_file(d / meta_name(i), i) for i in range(N_META)])
    marker.write_text(str(N_META))
    log(f"  {t:.1f} s, {sum(p.stat().st_size for p in d.iterdir()) / 1e6:.1f} MB")
    return d


def make_meta_bucket(work):
    """cp of the 1000 files into a read-write h5osfs mount of work/bucket/metabucket."""
    bucket = work / "bucket" / META_BUCKET
    marker = work / "bucket" / "meta.done"
    if done_marker(marker, str(N_META)):
        return bucket
    shutil.rmtree(bucket, ignore_errors=True)
    bench_cp.make_bucket(bucket)
    m = Mount("ingest", bucket, work / "mnt" / "ingest", work)
    with m.mounted():
        folder = m.mnt / "home" / USER / "meta"
        folder.mkdir()
        srcs = sorted((work / "native" / "meta").iterdir())
        log(f"cp of {len(srcs)} files into the mount")
        t, r = timed(subprocess.run, ["cp", *map(str, srcs), str(folder)], capture_output=True,
                     text=True)
        if r.returncode != 0:
            raise RuntimeError(f"cp into h5osfs failed: {r.stderr[-1000:]}")
        log(f"  {t:.1f} s ({len(srcs) / t:.0f} files/s)")
    marker.write_text(str(N_META))
    return bucket


def make_big_native(work):
    path = work / "native" / "big.h5"
    marker = work / "native" / "big.done"
    if done_marker(marker, str(BIG_CHUNKS)):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"making {path}: {BIG_CHUNKS} chunks of {BIG_CHUNK * 4} bytes")
    tmp = path.with_suffix(".tmp")

    def write():
        with h5py.File(tmp, "w") as f:
            d = f.create_dataset("data", (BIG_LEN,), "<f4", chunks=(BIG_CHUNK,))
            step = 1000
            for c in range(0, BIG_CHUNKS, step):
                d[c * BIG_CHUNK:(c + step) * BIG_CHUNK] = np.concatenate(
                    [big_chunk(i) for i in range(c, c + step)])
    t, _ = timed(write)
    os.rename(tmp, path)
    marker.write_text(str(BIG_CHUNKS))
    log(f"  {t:.1f} s, {path.stat().st_size / 1e6:.0f} MB")
    return path


def make_big_bucket(work):
    """work/bucket/bigbucket: /home/bench/big.h5 written as HSDS objects."""
    bucket = work / "bucket" / BIG_BUCKET
    marker = work / "bucket" / "big.done"
    if done_marker(marker, str(BIG_CHUNKS)):
        return bucket
    shutil.rmtree(bucket, ignore_errors=True)
    bench_cp.make_bucket(bucket)
    log(f"writing {BIG_CHUNKS} chunk objects into {bucket}")
    t, _ = timed(hsds_bucket.make_domain, str(bucket), f"/home/{USER}/big.h5", "f4",
                 (BIG_LEN,), (BIG_CHUNK,), lambda idx: big_chunk(idx[0]).tobytes())
    marker.write_text(str(BIG_CHUNKS))
    log(f"  {t:.1f} s")
    return bucket


class Store:
    """The S3 server: both buckets as HSDS objects, and the 1000 native files as objects of
    FILES_BUCKET (for s3fs). Loaded once; a bucket is loaded before any r+ run changes it
    locally, and kept (with its own changes) in later runs."""

    def __init__(self, work, reload):
        self.dir = work / "s3"
        self.marker = self.dir / "loaded.json"
        fresh = reload or not self.marker.exists()
        if fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.server = S3Server(self.dir)
        self.endpoint = self.server.endpoint
        self.loaded = {} if fresh else json.loads(self.marker.read_text())

    def ensure(self, name, load, what=""):
        if self.loaded.get(name) == what:
            return
        if name in self.loaded:             # other data: the server keeps a bucket as a folder
            shutil.rmtree(self.server.data_dir / name)
        log(f"uploading {name} to {self.endpoint}")
        t, _ = timed(load)
        self.loaded[name] = what
        self.marker.write_text(json.dumps(self.loaded))
        log(f"  {t:.0f} s")

    def load_bucket(self, name, directory, what=""):
        self.ensure(name, lambda: self.server.load(name, directory), what)

    def load_files(self, directory):
        def load():
            with self.server.client() as c:
                c.create_bucket(FILES_BUCKET)
                for p in sorted(directory.iterdir()):
                    c.put_object(FILES_BUCKET, p.name, p.read_bytes())
        self.ensure(FILES_BUCKET, load)

    def drop_old_roots(self, bucket, domain):
        """Removes, from the server's directory, the objects of every root of bucket but the
        one domain names: what h5osfs's collector left (a daemon stopped while it deleted).
        Returns how many objects there were."""
        with self.server.client() as c:
            r = c.get_object(bucket, domain.strip("/") + "/.domain.json").check("GET domain")
        keep = json.loads(r.body)["root"][2:19]
        n = 0
        for d in (self.server.data_dir / bucket / "db").iterdir():
            if d.name != keep:
                n += sum(1 for _ in d.rglob("*._S3rver_object"))
                shutil.rmtree(d)
        return n

    def stop(self):
        self.server.stop()


# ---------------------------------------------------------------------------------------------
# contenders

class Mount(bra.H5osfs):
    """bench_read_all's h5osfs daemon (run by harness.py) with extra -o options (ttl), a log
    read per run, and an unmount that may wait for the background collection of old roots."""

    def __init__(self, label, bucket, mnt, work, store=None, opts=""):
        super().__init__(label, bucket, mnt, work, store)
        self.opts = opts
        self.last_unmount = None
        self.drain = UNMOUNT_TIMEOUT
        self.cut_short = 0

    def set_ttl(self, seconds):
        """-o ttl=seconds from the next mount on."""
        self.opts = f"ttl={seconds}"

    def unmount(self):
        """fusermount3 -u, then wait for the daemon to exit: it first deletes the objects of
        the old roots its commits replaced (gc_drain). One still at it after self.drain
        seconds is stopped with SIGTERM (self.cut_short counts them): over the test S3 server
        that deletion runs at a few objects a second. Then harness's checks, as every
        teardown (RuntimeError)."""
        if self.daemon is None:
            return
        t0 = time.perf_counter()
        daemon = super().unmount(exit_timeout=self.drain, terminate=True)
        self.last_unmount = time.perf_counter() - t0
        if daemon.terminated:
            log(f"    h5osfs ({self.label}) still running {self.drain:.0f} s after the unmount "
                "(deleting old objects): stopped with SIGTERM")
            self.cut_short += 1

    def log_size(self):
        return self.log.stat().st_size if self.log.exists() else 0

    def log_since(self, offset):
        with open(self.log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")


class S3fs(bra.S3fs):
    """bench_read_all's s3fs, with its stat cache expiring after the ttl h5osfs gets."""
    ttl = TTL

    def set_ttl(self, seconds):
        self.ttl = seconds

    def mount(self):
        s = self.store.server
        self.passwd.write_text(f"{s.access_key}:{s.secret_key}\n")
        self.passwd.chmod(0o600)
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(exist_ok=True)
        opts = (f"url={self.store.endpoint},use_path_request_style,endpoint={s.region},"
                f"passwd_file={self.passwd},stat_cache_expire={self.ttl}")
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(["s3fs", FILES_BUCKET, str(self.mnt), "-f", "-o", opts],
                                         stdout=logf, stderr=logf)

        def up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"s3fs exited with {self.proc.returncode}; see {self.log}")
            return os.path.ismount(self.mnt)
        wait_for(up, "s3fs to mount")


class LocalDir:
    """The baseline of A: a plain directory of the native files."""
    label = "native"

    def __init__(self, path):
        self.dir = path

    def set_ttl(self, seconds):
        pass

    def fresh(self):
        pass


# ---------------------------------------------------------------------------------------------
# A: ls -l

def ls_l(directory):
    """(seconds, {name: size}) of one `ls -l`; raises if ls fails."""
    env = dict(os.environ, LC_ALL="C")
    t, r = timed(subprocess.run, ["ls", "-l", str(directory)], capture_output=True, text=True,
                 env=env)
    if r.returncode != 0:
        raise RuntimeError(f"ls -l {directory} failed: {r.stderr[-500:]}")
    sizes = {}
    for line in r.stdout.splitlines()[1:]:            # "total N" first
        parts = line.split(maxsplit=8)
        sizes[parts[8]] = int(parts[4])
    return t, sizes


def read_bytes_count(path):
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return n
            n += len(b)


class MetaCheck:
    """What every listing must show, and the sample whose sizes and values are read."""

    def __init__(self, native_dir):
        self.native_dir = native_dir
        self.names = sorted(p.name for p in native_dir.iterdir())
        self.sample = sorted(random.Random(5).sample(self.names, SAMPLE))
        self.values = {n: meta_values(native_dir / n) for n in self.sample}
        self.problems = []

    def failed(self, label):
        return any(p.startswith(label + ":") or p.startswith(label + " ")
                   for p in self.problems)

    def listing(self, label, sizes):
        if sorted(sizes) != self.names:
            self.problems.append(f"{label}: ls -l listed {len(sizes)} entries, not the "
                                 f"{len(self.names)} names")
            return False
        return True

    def sample_reads(self, label, directory, sizes):
        """For each sampled file: ls -l's size == the bytes a read returns, and h5py reads the
        native file's values. Untimed."""
        ok = True
        for n in self.sample:
            got = read_bytes_count(directory / n)
            if got != sizes[n]:
                self.problems.append(f"{label}: {n}: ls -l shows {sizes[n]} bytes, a read "
                                     f"returned {got}")
                ok = False
            if not same_values(meta_values(directory / n), self.values[n]):
                self.problems.append(f"{label}: {n}: values differ from the native file")
                ok = False
        return ok


def ls_run(contender, directory, check):
    """One measured run of A for one contender. A fresh mount with a ttl longer than any
    listing: `ls -l` (cold), `ls -l` again (warm). Then a fresh mount with -o ttl=2: `ls -l`
    (a second cold one), sleep 3, `ls -l` (every entry expired). Then the sample's sizes and
    values are read (untimed). (A cold listing over S3 takes longer than 2 s, so a warm one
    within ttl=2 would not be warm: hence the two mounts.)"""
    times, ok = {}, True
    for ttl, phases in ((TTL_WARM, ("cold", "warm")), (TTL, ("cold2", "expired"))):
        contender.set_ttl(ttl)
        contender.fresh()
        for what in phases:
            if what == "expired":
                time.sleep(TTL_SLEEP)
            times[what], sizes = ls_l(directory)
            ok &= check.listing(f"{contender.label} {what}", sizes)
    ok &= check.sample_reads(contender.label, directory, sizes)
    return Run(times["cold"], ok=ok and not check.failed(contender.label), extra=times)


def row_a(bench):
    work = bench.work
    natives = make_meta_natives(work)
    bucket = make_meta_bucket(work)
    check = MetaCheck(natives)
    native = LocalDir(natives)
    local = Mount("meta-local", bucket, work / "mnt" / "meta-local", work)
    groups = [({"local": (local, local.mnt / "home" / USER / "meta"),
                "native": (native, natives)}, max(bench.args.reps, FAST_REPS))]
    if not bench.args.no_s3:
        store = bench.store_for_a()
        s3 = Mount("meta-S3", f"s3://{META_BUCKET}", work / "mnt" / "meta-S3", work, store)
        s3fs = S3fs(work, store)
        groups.append(({"S3": (s3, s3.mnt / "home" / USER / "meta"), "s3fs": (s3fs, s3fs.mnt),
                        "native": (native, natives)}, bench.args.reps))
    log(f"A: ls -l of {N_META} domains (cold and warm: ttl={TTL_WARM}; expired: ttl={TTL}, "
        f"sleep {TTL_SLEEP})")
    for contenders, reps in groups:
        measures = {k: (lambda c=c, d=d: ls_run(c, d, check)) for k, (c, d) in
                    contenders.items()}
        try:
            runs = alternate(measures, reps)
        finally:
            for c, _ in contenders.values():
                if hasattr(c, "unmount"):
                    c.unmount()
        h = "local" if "local" in contenders else "S3"
        where = "local bucket" if h == "local" else "S3"
        for what, title in (("cold", "first, fresh mount (cold)"),
                            ("warm", f"second, same mount (warm; ttl={TTL_WARM})"),
                            ("expired", f"after the ttl expired (ttl={TTL}, sleep {TTL_SLEEP})")):
            for o in [k for k in contenders if k != h]:
                bench.lines.append(Line("A", f"`ls -l` {N_META} domains, {where}, {title}", h,
                                        phase(runs[h], what), o, phase(runs[o], what)))
        bench.a_runs[where] = runs
    for p in check.problems:
        log(f"  CHECK FAILED: {p}")
    bench.problems += check.problems


def phase(runs, what):
    return [Run(r.extra[what], ok=r.ok) for r in runs]


# ---------------------------------------------------------------------------------------------
# B: one-element r+ change of a 1e5-chunk domain

COMMIT_RE = re.compile(r"committed \(root [^)]*\): (.*)")


def r_plus(path, value):
    """h5py r+ open, one element changed, close: (total s, open s, close s)."""
    t0 = time.perf_counter()
    f = h5py.File(path, "r+")
    t1 = time.perf_counter()
    try:
        f["data"][CHANGED] = value
    finally:
        t2 = time.perf_counter()
        f.close()
    t3 = time.perf_counter()
    return t3 - t0, t1 - t0, t3 - t2


def check_big(path, value):
    """The changed element has value; its neighbours, the ends and 1000 random others have
    the generator's."""
    rng = np.random.default_rng(7)
    idx = np.unique(np.concatenate([[0, CHANGED - 1, CHANGED + 1, BIG_LEN - 1],
                                    rng.integers(0, BIG_LEN, 1000)]))
    idx = idx[idx != CHANGED]
    with h5py.File(path, "r") as f:
        d = f["data"]
        if d.shape != (BIG_LEN,) or d[CHANGED] != value:
            return False
        got = np.array([d[int(i)] for i in idx[:50]] + list(d[np.sort(idx[50:])]))
    return np.array_equal(got, big_value(idx))


def check_copy(path, value):
    """A copy of the whole file: every value is the generator's but the changed one, which is
    value."""
    with h5py.File(path, "r") as f:
        got = f["data"][()]
    if got.shape != (BIG_LEN,) or got[CHANGED] != value:
        return False
    got[CHANGED] = big_value(CHANGED)
    return np.array_equal(got, big_value(np.arange(BIG_LEN)))


def commit_counts(line):
    """(chunks written, chunks copied in the store) of a "committed" log line."""
    w = re.search(r"(\d+) chunks written", line)
    c = re.search(r"(\d+) chunks copied in the store", line)
    return (int(w.group(1)) if w else None, int(c.group(1)) if c else None)


class RPlus:
    """One contender of B: r+ of one element on a path; through h5osfs on a fresh mount, the
    daemon's commit line kept, then checked on a new mount. With cp_dest, that new mount
    first times a `cp` of the whole file out of it (cold: a new daemon), the baseline of the
    S3 row, and the copy is checked whole."""

    def __init__(self, label, mount=None, path=None, cp_dest=None, after_unmount=None):
        self.label, self.mount, self.path, self.cp_dest = label, mount, path, cp_dest
        self.after_unmount = after_unmount
        self.counter = 0
        self.commits, self.cp_runs = [], []

    def target(self):
        return self.mount.domain("big") if self.mount else self.path

    def __call__(self):
        self.counter += 1
        value = np.float32(-(time.time() % 1e5) - self.counter)   # never a generator value
        if self.mount:
            self.mount.fresh()
            offset = self.mount.log_size()
        t, t_open, t_close = r_plus(self.target(), value)
        extra = {"open": t_open, "close": t_close}
        msg = f"      {self.label}: open {fmt_s(t_open)}, close (commit) {fmt_s(t_close)}"
        if self.mount:
            m = COMMIT_RE.findall(self.mount.log_since(offset))
            self.commits.append(m[-1] if m else "no commit line in the log")
            cut = self.mount.cut_short
            self.mount.unmount()
            extra["unmount"] = self.mount.last_unmount
            msg += f", unmount after it {fmt_s(self.mount.last_unmount)}"
            if self.mount.cut_short > cut:
                msg += " (stopped while deleting the old root's objects)"
            if self.after_unmount:
                extra["left"] = self.after_unmount()
            self.mount.mount()                      # the checks read a new daemon's view
            if self.cp_dest:
                self.cp_runs.append(self.cp_out(value))
                msg += f"; cp out {fmt_s(self.cp_runs[-1].seconds)}"
        ok = check_big(self.target(), value)
        log(msg)
        return Run(t, ok=ok, extra=extra)

    def cp_out(self, value):
        src = self.mount.domain("big")
        self.cp_dest.parent.mkdir(parents=True, exist_ok=True)
        t, r = timed(subprocess.run, ["cp", str(src), str(self.cp_dest)], capture_output=True,
                     text=True)
        size = src.stat().st_size
        ok = r.returncode == 0 and self.cp_dest.stat().st_size == size and \
            check_copy(self.cp_dest, value)
        self.cp_dest.unlink(missing_ok=True)
        return Run(t, ok=ok, extra={"bytes": size})


def alternate_within(measures, reps, budget):
    """bench_read_all.alternate, but a contender whose run took longer than budget seconds is
    not run again (its median is of fewer runs)."""
    runs = {k: [] for k in measures}
    for i in range(reps):
        for label, m in measures.items():
            if runs[label] and runs[label][-1].seconds > budget:
                continue
            r = m()
            runs[label].append(r)
            log(f"    {label:6} run {i + 1}: {fmt_s(r.seconds)}"
                + ("" if r.ok else " VALUES DIFFER"))
    return runs


def row_b(bench):
    work = bench.work
    native = make_big_native(work)
    bucket = make_big_bucket(work)
    s3 = not bench.args.no_s3
    local = Mount("big-local", bucket, work / "mnt" / "big-local", work)
    contenders = {"local": RPlus("local", local), "native": RPlus("native", path=native)}
    if s3:
        s3m = Mount("big-S3", f"s3://{BIG_BUCKET}", work / "mnt" / "big-S3", work,
                    bench.store_for_b())
        s3m.drain = bench.args.drain
        bench.drop_old_roots()                      # left by an earlier run
        contenders["S3"] = RPlus("S3", s3m, cp_dest=work / "cpout" / "big.h5",
                                 after_unmount=bench.drop_old_roots)
    log(f"B: r+ change of one element of a {BIG_CHUNKS}-chunk domain")
    try:
        runs = alternate_within(contenders, bench.args.reps, bench.args.budget)
    finally:
        local.unmount()
        if s3:
            s3m.unmount()
    bench.b_runs = runs
    bench.commit_lines = {k: c.commits for k, c in contenders.items() if c.mount}

    def note(label):
        n = len(runs[label])
        return "" if n == bench.args.reps else \
            f"{n} run{'s' if n > 1 else ''}: over the {bench.args.budget:.0f} s budget"
    title = f"r+ one element of {BIG_CHUNKS} chunks"
    bench.lines.append(Line("B", f"{title}, local bucket", "local", runs["local"], "native",
                            runs["native"], note=note("local")))
    if s3:
        bench.lines.append(Line("B", f"{title}, S3", "S3", runs["S3"], "native",
                                runs["native"], note=note("S3")))
        cp = contenders["S3"].cp_runs
        mb = cp[0].extra["bytes"] / 1e6
        bench.lines.append(Line("B", f"{title}, S3; baseline: cp of the whole {mb:.0f} MB file "
                                "out of a fresh mount", "S3", runs["S3"], "cp out", cp,
                                note=note("S3")))


# ---------------------------------------------------------------------------------------------
# driver, table

class Bench:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.lines, self.problems = [], []
        self.store = None
        self.commit_lines, self.b_runs, self.b_notes = {}, {}, {}
        self.a_runs = {}

    def s3(self):
        if self.store is None:
            self.store = Store(self.work, self.args.reload)
        return self.store

    def store_for_a(self):
        s = self.s3()
        s.load_bucket(META_BUCKET, make_meta_bucket(self.work))
        s.load_files(make_meta_natives(self.work))
        return s

    def store_for_b(self):
        s = self.s3()
        s.load_bucket(BIG_BUCKET, make_big_bucket(self.work), f"{BIG_CHUNKS} chunks")
        return s

    def drop_old_roots(self):
        """Over S3: the objects of replaced roots that h5osfs did not get to delete."""
        n = self.store.drop_old_roots(BIG_BUCKET, f"/home/{USER}/big.h5")
        if n:
            log(f"    removed {n} objects of old roots of {BIG_BUCKET} left in the S3 "
                "server's directory")
        return n

    def prepare(self):
        """All data and uploads first, so that the rows time nothing of it; the big bucket is
        uploaded before a local r+ run changes it."""
        if "A" in self.args.only:
            make_meta_natives(self.work)
            make_meta_bucket(self.work)
            if not self.args.no_s3:
                self.store_for_a()
        if "B" in self.args.only:
            make_big_native(self.work)
            make_big_bucket(self.work)
            if not self.args.no_s3:
                self.store_for_b()

    def close(self):
        if self.store:
            self.store.stop()


HEADER = ["workload", "h5osfs", "baseline", "ratio", "values"]


def table_rows(lines):
    out = []
    for line in lines:
        cells, ok = line.cells()
        if line.note:
            cells[0] += f" ({line.note})"
        out.append(cells[:4] + ["ok" if ok else "DIFFER"])
    return out


def text_table(rows):
    widths = [max(len(r[i]) for r in rows + [HEADER]) for i in range(len(HEADER))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([fmt(HEADER), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def markdown_table(rows):
    esc = lambda c: c.replace("|", "\\|")  # noqa: E731
    return "\n".join(["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
                     + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


def snapshot_binary(work):
    """A copy of $H5OSFS_BIN in work/bin: the run measures one binary even if it is rebuilt."""
    src = bra.BIN
    if not src.is_file():
        sys.exit(f"{src} not found: build h5osfs (ninja -C build) or set H5OSFS_BIN")
    dst = work / "bin" / "h5osfs"
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
    digest = hashlib.sha256(dst.read_bytes()).hexdigest()[:12]
    mtime = datetime.datetime.fromtimestamp(src.stat().st_mtime)
    bra.BIN = dst
    return f"{src} built {mtime:%Y-%m-%d %H:%M}, sha256 {digest}"


def details(bench):
    """The lines under the table: A's second cold listing, B's open/commit split and the
    daemon's commit lines."""
    out = []
    for where, runs in bench.a_runs.items():
        for k, rs in runs.items():
            if k != "native":
                cold2 = fmt_s(statistics.median(r.extra["cold2"] for r in rs))
                out.append(f"A {k}: the cold listing on the ttl={TTL} mount (before the sleep): "
                           f"median {cold2}")
    for k, runs in bench.b_runs.items():
        if not runs:
            continue
        med = lambda key: fmt_s(statistics.median(r.extra[key] for r in runs))  # noqa: E731
        line = f"B {k}: open {med('open')}, close (the commit) {med('close')}"
        if "unmount" in runs[0].extra:
            line += f"; the unmount after the commit {med('unmount')}"
        if "left" in runs[0].extra:
            line += (f"; objects of the old root not deleted when the daemon was stopped "
                     f"{bench.args.drain:.0f} s after the unmount: "
                     f"{', '.join(str(r.extra['left']) for r in runs)}")
        out.append(line + " (medians)")
    for k, commits in bench.commit_lines.items():
        for i, c in enumerate(commits, 1):
            w, cp = commit_counts(c)
            out.append(f"B {k} run {i}: {w} chunks written, {cp} copied in the store; daemon "
                       f"log: committed ...: {c}")
    return out


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path,
                    default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                    / "h5osfs-bench" / "meta", help="work directory (default %(default)s)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the generated data in --work for the next run (~2 GiB)")
    ap.add_argument("--only", default="A,B", help="parts to run (default %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="measured runs per contender "
                    "(default %(default)s)")
    ap.add_argument("--budget", type=float, default=60.0, help="B: a contender whose run "
                    "takes longer than this is not run again (default %(default)s s)")
    ap.add_argument("--drain", type=float, default=30.0, help="B over S3: seconds the daemon "
                    "may take to exit after the unmount (it deletes the old root's objects, "
                    "a few a second on the test server) before it is stopped; what it left is "
                    "removed from the server's directory (default %(default)s)")
    ap.add_argument("--chunks", type=int, default=100_000, help="B: chunk objects of the "
                    "domain (4 KiB each; default %(default)s)")
    ap.add_argument("--no-s3", action="store_true", help="local bucket rows only")
    ap.add_argument("--reload", action="store_true", help="upload the data to S3 again")
    ap.add_argument("--out", type=Path, help="markdown table (default WORK/results.md)")
    args = ap.parse_args()
    args.only = [r.strip().upper() for r in args.only.split(",") if r.strip()]
    bad = [r for r in args.only if r not in ("A", "B")]
    if bad:
        ap.error(f"unknown parts {bad}; parts are A, B")
    return args


def main():
    args = parse_args()
    set_chunks(args.chunks)
    if not args.no_s3:
        problem = s3rver_problem()
        if problem:
            sys.exit(f"the S3 test server is missing: {problem}")
        if "A" in args.only and shutil.which("s3fs") is None:
            sys.exit("s3fs is missing: run scripts/install-bench-deps.sh")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    binary = snapshot_binary(work)
    started = datetime.datetime.now()
    t_start = time.perf_counter()
    load_before = os.getloadavg()
    bench = Bench(args, work)
    try:
        bench.prepare()
        setup = time.perf_counter() - t_start
        if "A" in args.only:
            row_a(bench)
        if "B" in args.only:
            row_b(bench)
    finally:
        bench.close()
    total = time.perf_counter() - t_start
    rows = table_rows(bench.lines)
    ok = all(r[4] == "ok" for r in rows) and not bench.problems
    head = (f"h5osfs metadata benchmark (bench/bench_meta.py --only {','.join(args.only)}"
            f"{' --no-s3' if args.no_s3 else ''}), {started:%Y-%m-%d %H:%M}, "
            f"{total / 60:.1f} min in all (making the data: {setup:.0f} s)\n"
            f"{bra.machine().split('; ', 1)[0]}; {binary}; HDF5 {h5py.version.hdf5_version}, "
            f"h5py {h5py.version.version}\nratio = baseline time / h5osfs time (> 1: h5osfs is "
            f"faster); medians of {args.reps} runs (A on the local bucket: "
            f"{max(args.reps, FAST_REPS)}; B: a contender whose run took over {args.budget:.0f} s "
            "runs once), contenders alternating\nload average (1 min) "
            f"{load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    notes = details(bench) + [f"CHECK FAILED: {p}" for p in bench.problems]
    print(head + "\n\n" + text_table(rows) + "\n\n" + "\n".join(notes))
    out = args.out or work / "results.md"
    out.write_text(head.replace("\n", "  \n") + "\n\n" + markdown_table(rows) + "\n\n"
                   + "".join(f"- {n}\n" for n in notes))
    (work / "results.json").write_text(json.dumps(
        [{"row": ln.row, "workload": ln.workload, "h5osfs": ln.h5osfs,
          "h5osfs_runs": [r.__dict__ for r in ln.h5osfs_runs], "baseline": ln.other,
          "baseline_runs": [r.__dict__ for r in ln.other_runs or []]}
         for ln in bench.lines], indent=1, default=float))
    print(f"\nmarkdown: {out}")
    if not args.keep:
        for d in ("native", "bucket", "s3", "cache", "cpout"):
            shutil.rmtree(work / d, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
