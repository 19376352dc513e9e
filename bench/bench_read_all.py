#!/usr/bin/python3
"""Read speed of h5osfs against the simplest alternatives, side by side in one run: the table
of issue 9, reproduced from scratch.

Contenders, all on the same data:
  native   h5py on the local .h5 file (the baseline of the local rows)
  local    h5osfs on a local-directory bucket ($H5OSFS_BIN, default build/h5osfs)
  S3       h5osfs on s3://benchbucket of the test S3 server (tests/s3: s3rver on 127.0.0.1, or
           with --server rgw Ceph RGW, a real S3 implementation: multi-threaded, its objects in
           RAM, its listings and requests several times cheaper than s3rver's)
  s3fs     s3fs-fuse (Debian's s3fs) mounting bucket benchfiles of the same server, which holds
           each native .h5 file as one object; no local cache
  ros3     HDF5's read-only S3 driver, h5py.File(url, driver="ros3") on the same objects, with
           h5py's defaults; "ros3+64M" the same with a 64 MiB chunk cache (rdcc_nbytes), which
           holds whole chunks (the default 1 MiB cannot hold a 2 MB chunk, so HDF5 reads it in
           pieces, one GET each)
  GETs     plain parallel GETs of exactly the chunk objects the workload needs, as many in
           flight as h5osfs's -o max_requests default (the store's limit), by curl

The data is generated here (seeded, so every run sees the same bytes): native files with h5py,
then `cp` into a read-write h5osfs mount of a local directory (h5osfs stores them as HSDS
would), that directory uploaded to the S3 server; the 1e6-chunk domain is written as objects
directly (bench/hsds_bucket.py). All of it is kept in the work directory with --keep, and a
rerun reuses what is there.

Method: every ratio is baseline time / h5osfs time, both measured in this run (> 1: h5osfs is
faster). Contenders alternate (A B A B ...); the median of --reps runs (more for fast rows).
Warm rows read once unmeasured first; cold rows remount h5osfs and s3fs (a fresh daemon, so no
cache and no page cache) and reopen ros3 before every measured run; the mount itself is not
timed, the open of the file and the reads are. Every value read is compared with the native
file (numpy.array_equal); GETs are checked by decoding each chunk object and comparing it with
the same region of the native file; h5ls/h5dump output is compared with the native file's.
A run longer than --budget seconds stops early and is extrapolated (shown with "~"). Each
measured run also counts the CPU seconds of the S3 server, the daemon and the reader: a second
table shows where the time went, and whether the machine's cores were all busy.

usage: bench/bench_read_all.py [--work DIR] [--keep] [--only ROWS] [--reps N] [--budget S]
                               [--server s3rver|rgw] [--out FILE]
"""
import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests" / "integration"), str(REPO / "tests" / "s3")]
import bench_cp  # noqa: E402
import harness  # noqa: E402
import hsds_bucket  # noqa: E402
import s3fixtures  # noqa: E402
from harness import S3Server, s3rver_problem  # noqa: E402

BIN = harness.h5osfs_bin()      # bench_meta.py runs a copy of it (snapshot_binary)
USER = "bench"
BUCKET = "benchbucket"          # HSDS objects: a local directory, and the same on S3
FILES_BUCKET = "benchfiles"     # each native .h5 file as one object (s3fs, ros3)

# The data of issue 9.
TABLE_SHAPE, TABLE_CHUNKS = (8760, 20000), (2000, 500)        # int16, 2 MB chunks, 350 MB
FLOAT_SHAPE, FLOAT_CHUNKS = (16384, 16384), (16, 16384)       # float32, 1 MiB chunks, 1 GiB
GZIP_SHAPE, GZIP_CHUNKS = (16384, 8192), (32, 8192)           # float32, 1 MiB chunks, gzip 4
META_GROUPS, META_DSETS, META_ATTRS, META_SOFT = 50, 10, 6, 49  # 500 datasets, 3000 attrs+links
MANY_CHUNKS = 1_000_000                                        # int8 chunks of 16 values
NATIVE = {"meta": "/g17/d3", "table": "/table", "float": "/data", "gzip": "/data"}
SELECTIONS = 200
FAST_ROW = 1.0                  # seconds: warm rows faster than this get more runs
FAST_REPS = 7
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# small helpers

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def timed(fn, *args, **kw):
    """(seconds, fn's result)."""
    t = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t, out


def fmt_s(s):
    return "-" if s is None else f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def wait_for(cond, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def proc_cpu_seconds(pid):
    """utime + stime of process pid (all its threads) so far; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def process_tree(root):
    """root and every process below it (the S3 server and the daemons it started: RGW's)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


class CpuMeter:
    """CPU seconds spent during one measured run by the S3 server (with every process it
    started), the contender's daemon (h5osfs, s3fs) and the reader: this process (h5py, ros3),
    or with reader_is_child its reaped children (curl, the GETs). On a machine of few cores
    their sum against wall time x cores tells a run that waited from one that had no CPU left."""

    def __init__(self, server_pid=None, daemon_pid=None, reader_is_child=False):
        self.server = process_tree(server_pid) if server_pid else []
        self.daemon, self.reader_is_child = daemon_pid, reader_is_child
        self.start = self._now()

    def _reader(self):
        if self.reader_is_child:
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            return ru.ru_utime + ru.ru_stime
        return time.process_time()

    def _now(self):
        return (sum(proc_cpu_seconds(p) for p in self.server),
                proc_cpu_seconds(self.daemon) if self.daemon else 0.0, self._reader())

    def stop(self):
        return {k: round(b - a, 3)
                for k, a, b in zip(("server", "daemon", "reader"), self.start, self._now())}


def proc_status_kib(pid, field_name):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field_name} in /proc/{pid}/status")


def default_max_requests():
    """h5osfs's own -o max_requests default, read from its --help (so it follows the code)."""
    out = subprocess.run([str(BIN), "--help"], capture_output=True, text=True)
    m = re.search(r"max_requests=N.*\(default:? (\d+)\)", out.stdout + out.stderr)
    if not m:
        raise RuntimeError("cannot find the max_requests default in h5osfs --help")
    return int(m.group(1))


# ---------------------------------------------------------------------------------------------
# the data: native files, the HSDS bucket made from them, the S3 server holding both

def write_meta(f):
    """500 datasets in 50 groups, 6 attributes each (3000), and 49 soft links per group: 3000
    links in all (50 groups + 500 datasets + 2450 soft links)."""
    rng = np.random.default_rng(1)
    for g in range(META_GROUPS):
        grp = f.create_group(f"g{g:02d}")
        for d in range(META_DSETS):
            ds = grp.create_dataset(f"d{d}", data=rng.random(100))
            ds.attrs["units"] = "m/s"
            ds.attrs["long_name"] = np.bytes_(f"wind speed {g}.{d}")
            ds.attrs["scale_factor"] = np.float32(rng.random())
            ds.attrs["index"] = np.int64(g * META_DSETS + d)
            ds.attrs["valid_range"] = np.array([0.0, 1.0])
            ds.attrs["flags"] = np.arange(4, dtype=np.uint8)
        for s in range(META_SOFT):
            grp[f"s{s:02d}"] = h5py.SoftLink(f"/g{(g + 1 + s) % META_GROUPS:02d}/d{s % 10}")


def write_table(f):
    d = f.create_dataset("table", TABLE_SHAPE, "<i2", chunks=TABLE_CHUNKS)
    rng = np.random.default_rng(2)
    for r in range(0, TABLE_SHAPE[0], TABLE_CHUNKS[0]):
        n = min(TABLE_CHUNKS[0], TABLE_SHAPE[0] - r)
        d[r:r + n] = rng.integers(-32768, 32767, (n, TABLE_SHAPE[1]), dtype=np.int16,
                                  endpoint=True)


def write_float(f):
    d = f.create_dataset("data", FLOAT_SHAPE, "<f4", chunks=FLOAT_CHUNKS)
    rng = np.random.default_rng(3)
    step = 256
    for r in range(0, FLOAT_SHAPE[0], step):
        d[r:r + step] = rng.random((step, FLOAT_SHAPE[1]), dtype=np.float32)


def write_gzip(f):
    """A smooth field plus noise quantised to 0.01, as instrument data: it compresses ~3:1."""
    rows, cols = GZIP_SHAPE
    d = f.create_dataset("data", GZIP_SHAPE, "<f4", chunks=GZIP_CHUNKS, compression="gzip",
                         compression_opts=4)
    rng = np.random.default_rng(4)
    x = np.linspace(0, 8 * np.pi, cols, dtype=np.float32)[None, :]
    step = 256
    for r in range(0, rows, step):
        y = (np.arange(r, r + step, dtype=np.float32) / 500.0)[:, None]
        block = 20.0 + 5.0 * np.sin(x) * np.cos(y) + rng.normal(0, 0.05, (step, cols))
        d[r:r + step] = np.round(block, 2).astype(np.float32)


WRITERS = {"meta": write_meta, "table": write_table, "float": write_float, "gzip": write_gzip}


ROW_FILES = {"1": ["meta"], "2": ["table"], "3": ["table"], "4": ["float"], "5": ["gzip"],
             "6": ["table"], "7": ["meta"], "8": []}


def needed_files(rows):
    """The native files the rows read, in WRITERS order (row 8 makes its own domain)."""
    want = {f for r in rows for f in ROW_FILES[r]}
    return [n for n in WRITERS if n in want]


def stamp(path):
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def make_native(work, name):
    """work/native/NAME.h5, once: a file is finished when its .done marker is there."""
    path = work / "native" / f"{name}.h5"
    done = path.with_suffix(".done")
    if path.exists() and done.exists() and done.read_text() == stamp(path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    log(f"making {path}")
    t, _ = timed(lambda: _write_h5(tmp, WRITERS[name]))
    os.rename(tmp, path)
    done.write_text(stamp(path))
    log(f"  {path.stat().st_size / 2**20:.0f} MiB in {t:.1f} s")
    return path


def _write_h5(path, writer):
    with h5py.File(path, "w") as f:
        writer(f)


def ingest(work, names):
    """cp each native file into a read-write h5osfs mount of work/bucket/benchbucket, once."""
    bucket = work / "bucket" / BUCKET
    marker = work / "bucket" / "ingested.json"
    done = json.loads(marker.read_text()) if marker.exists() else {}
    natives = {n: work / "native" / f"{n}.h5" for n in names}
    todo = [n for n in names if done.get(n) != stamp(natives[n])]
    if not todo:
        return False
    if not (bucket / "home" / USER / ".domain.json").exists():
        bench_cp.make_bucket(bucket)
    mnt = H5osfs("ingest", bucket, work / "mnt" / "ingest", work)
    with mnt.mounted():
        for n in todo:
            target = mnt.domain(n)
            if target.exists():
                target.unlink()
            log(f"cp {natives[n]} into the mount")
            t, _ = timed(subprocess.run, ["cp", str(natives[n]), str(target)])
            if not target.exists():
                raise RuntimeError(f"cp of {natives[n]} into h5osfs failed")
            log(f"  {t:.1f} s")
            done[n] = stamp(natives[n])
            marker.write_text(json.dumps(done))
    return True


def make_many(work):
    """work/many/benchbucket: the domain /many.h5 with one int8 dataset of MANY_CHUNKS chunk
    objects of 16 values each, written as objects (much faster than h5py + cp)."""
    bucket = work / "many" / BUCKET
    marker = work / "many" / "done"
    if marker.exists() and marker.read_text() == str(MANY_CHUNKS):
        return bucket
    shutil.rmtree(work / "many", ignore_errors=True)
    log(f"writing {MANY_CHUNKS} chunk objects into {bucket}")
    t, _ = timed(hsds_bucket.make_domain, bucket, "/many.h5", "i1", (MANY_CHUNKS * 16,), (16,),
                 lambda idx: many_chunk(idx[0]).tobytes())
    marker.write_text(str(MANY_CHUNKS))
    log(f"  {t:.0f} s")
    return bucket


def many_chunk(i):
    return ((np.arange(16) + i) % 127).astype(np.int8)


class Store:
    """The S3 server, loaded with the local bucket (HSDS objects) and the native files: s3rver,
    whose data directory is kept between runs (uploaded again only when the data changed), or
    Ceph RGW, whose OSD holds everything in RAM (started and loaded anew by every run)."""

    def __init__(self, work, names, reload, kind="s3rver"):
        self.kind = kind
        if kind == "rgw":
            self._start_rgw(work, names)
            return
        self.dir = work / "s3"
        marker = self.dir / "loaded.json"
        want = {"bucket": json.loads((work / "bucket" / "ingested.json").read_text()),
                "files": {n: stamp(work / "native" / f"{n}.h5") for n in names}}
        fresh = reload or not marker.exists() or json.loads(marker.read_text()) != want
        if fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        self._server = S3Server(self.dir)
        self.server = self._server
        self.endpoint = self.server.endpoint
        if fresh:
            log(f"uploading the bucket and the native files to {self.endpoint}")
            t, _ = timed(self._load, work, names)
            marker.write_text(json.dumps(want))
            log(f"  {t:.0f} s")

    def _start_rgw(self, work, names):
        data = sum(f.stat().st_size for f in (work / "bucket" / BUCKET).rglob("*") if f.is_file())
        data += sum((work / "native" / f"{n}.h5").stat().st_size for n in names)
        mib = (data >> 20) * 5 // 4 + 1024     # the OSD's overhead, and room to spare
        shutil.rmtree(work / "rgw", ignore_errors=True)
        log(f"starting Ceph RGW with {mib} MiB of memstore")
        self._server = s3fixtures.RgwServer(work / "rgw", memstore_mib=mib)
        self.server = self._server.main
        self.endpoint = self._server.endpoint
        log(f"uploading the bucket and the native files to {self.endpoint}")
        t, _ = timed(self._load, work, names)
        log(f"  {t:.0f} s")

    def _load(self, work, names):
        self.server.load(BUCKET, work / "bucket" / BUCKET)
        with self.server.client() as c:
            c.create_bucket(FILES_BUCKET)
            for n in names:
                c.put_object(FILES_BUCKET, f"{n}.h5", (work / "native" / f"{n}.h5").read_bytes())

    @property
    def pid(self):
        """The server's process: s3rver, or rgw.py, which started RGW's daemons."""
        return self._server.proc.pid

    def url(self, name):
        return f"{self.endpoint}/{FILES_BUCKET}/{name}.h5"

    def stop(self):
        self._server.stop()


# ---------------------------------------------------------------------------------------------
# contenders

class Native:
    label = "native"

    def __init__(self, work):
        self.work = work

    def fresh(self):
        pass

    def open(self, name):
        return h5py.File(self.work / "native" / f"{name}.h5", "r")

    def path(self, name):
        return self.work / "native" / f"{name}.h5"


class H5osfs:
    """One h5osfs daemon on a bucket (a local directory, or s3://NAME with store set), run by
    tests/integration/harness.py: started and checked at unmount as in the tests."""

    def __init__(self, label, bucket, mnt, work, store=None, opts="", forget_images=False,
                 binary=None):
        """opts: more -o options; forget_images: every mount starts with no built file kept
        in cache_dir (a machine that never opened the domain); binary: another h5osfs than
        BIN (--base)."""
        self.label, self.bucket, self.mnt, self.store = label, bucket, mnt, store
        self.binary = binary or BIN
        self.log = work / "logs" / f"h5osfs-{label}.log"
        self.cache_dir = work / "cache" / label
        self.opts, self.forget_images = opts, forget_images
        self.daemon = None

    def mount(self):
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(exist_ok=True)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        if self.forget_images:
            shutil.rmtree(self.cache_dir / "images", ignore_errors=True)
        opts = f"user={USER},cache_dir={self.cache_dir}"
        if self.opts:
            opts += "," + self.opts
        env = None
        if self.store:
            opts += f",endpoint={self.store.endpoint}"
            env = dict(os.environ, **self.store.server.env())
        self.daemon = harness.Daemon(["-o", opts], self.bucket, self.mnt, self.log, env=env,
                                     mount_timeout=30, binary=self.binary)

    def unmount(self, exit_timeout=120, terminate=False):
        """harness's teardown (unmounted, exit status 0, no secret or sanitizer report in its
        log), or RuntimeError. -> the harness.Daemon, or None when none was mounted."""
        daemon, self.daemon = self.daemon, None
        if daemon is not None:
            daemon.stop(exit_timeout, terminate)
        return daemon

    def fresh(self):
        self.unmount()
        self.mount()

    def ensure(self):
        if self.daemon is None:
            self.mount()

    @contextlib.contextmanager
    def mounted(self):
        self.mount()
        try:
            yield self
        finally:
            self.unmount()

    def domain(self, name):
        return self.mnt / "home" / USER / f"{name}.h5"

    path = domain

    def open(self, name):
        return h5py.File(self.domain(name), "r")

    def peak_rss_kib(self):
        return proc_status_kib(self.daemon.pid, "VmHWM")

    def daemon_pid(self):
        return self.daemon.pid if self.daemon else None


class S3fs:
    """s3fs-fuse on the files bucket: no use_cache (nothing kept between mounts), path-style."""
    label = "s3fs"

    def __init__(self, work, store):
        self.store, self.mnt = store, work / "mnt" / "s3fs"
        self.passwd = work / "s3fs.passwd"
        self.log = work / "logs" / "s3fs.log"
        self.proc = None

    def mount(self):
        s = self.store.server
        self.passwd.write_text(f"{s.access_key}:{s.secret_key}\n")
        self.passwd.chmod(0o600)
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(exist_ok=True)
        opts = (f"url={self.store.endpoint},use_path_request_style,endpoint={s.region},"
                f"passwd_file={self.passwd}")
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(["s3fs", FILES_BUCKET, str(self.mnt), "-f", "-o", opts],
                                         stdout=logf, stderr=logf)

        def up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"s3fs exited with {self.proc.returncode}; see {self.log}")
            return os.path.ismount(self.mnt)
        wait_for(up, "s3fs to mount")

    def unmount(self):
        if self.proc is None:
            return
        subprocess.run(["fusermount3", "-u", str(self.mnt)], check=True)
        self.proc.wait(timeout=120)
        self.proc = None

    def fresh(self):
        self.unmount()
        self.mount()

    def open(self, name):
        return h5py.File(self.mnt / f"{name}.h5", "r")

    def daemon_pid(self):
        return self.proc.pid if self.proc else None


class Ros3:
    """HDF5's ros3 driver: a new open is a cold start (it keeps nothing between opens). It
    sends one ranged GET per read HDF5 makes, so a chunk larger than h5py's chunk cache (1 MiB
    by default; rdcc_nbytes) read in part costs one GET per contiguous piece."""
    def __init__(self, store, rdcc_nbytes=None):
        self.store = store
        self.cache = {} if rdcc_nbytes is None else {"rdcc_nbytes": rdcc_nbytes}
        self.label = "ros3" if rdcc_nbytes is None else f"ros3+{rdcc_nbytes >> 20}M"

    def fresh(self):
        pass

    def open(self, name):
        s = self.store.server
        return h5py.File(self.store.url(name), "r", driver="ros3", aws_region=s.region.encode(),
                         secret_id=s.access_key.encode(), secret_key=s.secret_key.encode(),
                         **self.cache)


class Gets:
    """Plain parallel GETs of chunk objects: one curl process (libcurl, as h5osfs uses) with
    `requests` keep-alive connections in flight, bodies written to /dev/shm. A C client: a
    Python one costs enough CPU on this 2-core machine to slow the S3 server it measures."""
    label = "GETs"

    def __init__(self, store, requests):
        self.store, self.requests = store, requests

    def fetch(self, keys):
        """{key: body} of every key; the timed part is the curl run alone."""
        s = self.store.server
        with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
            cfg = Path(tmp) / "curl.cfg"
            cfg.write_text("".join(f'url = "{s.endpoint}/{BUCKET}/{k}"\n'
                                   f'output = "{tmp}/{i}"\n' for i, k in enumerate(keys)))
            cmd = ["curl", "-sS", "--parallel", "--parallel-immediate", "--parallel-max",
                   str(self.requests), "--aws-sigv4", f"aws:amz:{s.region}:s3",
                   "--user", f"{s.access_key}:{s.secret_key}",
                   "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                   "-w", "%{http_code}\n", "-K", str(cfg)]
            dt, r = timed(subprocess.run, cmd, capture_output=True, text=True)
            codes = r.stdout.split()
            if r.returncode != 0 or codes != ["200"] * len(keys):
                raise RuntimeError(f"curl GETs failed ({r.returncode}): {r.stderr[-500:]} "
                                   f"codes {sorted(set(codes))}")
            return dt, {k: (Path(tmp) / str(i)).read_bytes() for i, k in enumerate(keys)}


# ---------------------------------------------------------------------------------------------
# workloads: what is read, what it should be, which chunk objects it needs

@dataclass
class Workload:
    file: str                           # native/NAME.h5, domain home/bench/NAME.h5
    sels: list                          # [(dataset path, selection tuple)]
    expected: list = field(default=None, repr=False)

    def load_expected(self, native):
        if self.expected is None:
            with native.open(self.file) as f:
                self.expected = [f[p][s] for p, s in self.sels]


def read_selections(f, sels, deadline):
    out = []
    for p, s in sels:
        out.append(f[p][s])
        if time.perf_counter() > deadline:
            break
    return out


def columns(n=SELECTIONS):
    js = np.random.default_rng(11).choice(TABLE_SHAPE[1], n, replace=False)
    return Workload("table", [("/table", (slice(None), int(j))) for j in js])


def rows(n=SELECTIONS):
    iis = np.random.default_rng(12).choice(TABLE_SHAPE[0], n, replace=False)
    return Workload("table", [("/table", (int(i), slice(None))) for i in iis])


def hyperslabs(n=SELECTIONS):
    """Random boxes of 1..1500 x 1..1500 values at random offsets of the table."""
    rng = np.random.default_rng(13)
    sels = []
    for _ in range(n):
        h, w = (int(x) for x in rng.integers(1, 1501, 2))
        r = int(rng.integers(0, TABLE_SHAPE[0] - h))
        c = int(rng.integers(0, TABLE_SHAPE[1] - w))
        sels.append(("/table", (slice(r, r + h), slice(c, c + w))))
    return Workload("table", sels)


def full(name):
    return Workload(name, [("/data", ())])


def one_value():
    return Workload("meta", [(NATIVE["meta"], (3,))])


class Layout:
    """Where a domain's dataset keeps its chunk objects in the local bucket (HSDS schema)."""

    def __init__(self, bucket, name, path):
        dom = json.loads((bucket / "home" / USER / f"{name}.h5" / ".domain.json").read_text())
        obj = dom["root"]
        for part in path.strip("/").split("/"):
            grp = json.loads((bucket / "db" / obj[2:19] / ".group.json").read_text())
            obj = grp["links"][part]["id"]
        self.prefix = f"db/{obj[2:19]}/d/{obj[20:]}/"
        meta = json.loads((bucket / self.prefix / ".dataset.json").read_text())
        self.shape = tuple(meta["shape"]["dims"])
        self.chunks = tuple(meta["layout"]["dims"])
        self.filters = [f.get("class") for f in meta.get("creationProperties", {})
                        .get("filters", [])]
        self.bucket = bucket

    def needed_keys(self, sels):
        """The chunk objects that hold any value of the selections and exist in the bucket."""
        keys = set()
        for _, sel in sels:
            ranges = []
            for dim, (n, c) in enumerate(zip(self.shape, self.chunks)):
                s = sel[dim] if dim < len(sel) else slice(None)
                lo, hi = (s, s + 1) if isinstance(s, int) else (s.start or 0, s.stop or n)
                ranges.append(range(lo // c, (hi - 1) // c + 1))
            for idx in np.ndindex(*[len(r) for r in ranges]):
                keys.add(self.prefix + "_".join(str(r[i]) for r, i in zip(ranges, idx)))
        return sorted(k for k in keys if (self.bucket / k).exists())

    def check(self, bodies, native, name, path, dtype):
        """Each fetched chunk object, decoded, equals the same region of the native file."""
        with native.open(name) as f:
            d = f[path]
            for key, body in bodies.items():
                idx = [int(x) for x in key.rsplit("/", 1)[1].split("_")]
                if "H5Z_FILTER_DEFLATE" in self.filters:
                    body = zlib.decompress(body)
                chunk = np.frombuffer(body, dtype).reshape(self.chunks)
                region = tuple(slice(i * c, min((i + 1) * c, n))
                               for i, c, n in zip(idx, self.chunks, self.shape))
                part = chunk[tuple(slice(0, r.stop - r.start) for r in region)]
                if not np.array_equal(part, d[region]):
                    return False
        return True


# ---------------------------------------------------------------------------------------------
# measuring: one run of one contender, alternation, rows

@dataclass
class Run:
    seconds: float                      # measured, or extrapolated when partial
    done: int = 1
    total: int = 1
    ok: bool = True
    extra: dict = field(default_factory=dict)

    @property
    def partial(self):
        return self.done < self.total


def run_h5py(contender, wl, cold, budget):
    """Opens wl.file through contender (after a fresh mount when cold) and reads every
    selection; the open and the reads are timed, then the values are checked."""
    if cold:
        contender.fresh()
    store = getattr(contender, "store", None)
    daemon = getattr(contender, "daemon_pid", lambda: None)()
    cpu = CpuMeter(store.pid if store else None, daemon)
    t0 = time.perf_counter()
    with contender.open(wl.file) as f:
        got = read_selections(f, wl.sels, t0 + budget)
    dt = time.perf_counter() - t0
    used = cpu.stop()
    ok = all(np.array_equal(a, b) for a, b in zip(got, wl.expected))
    n = len(wl.sels)
    return Run(dt * n / len(got), len(got), n, ok, {"cpu": used})


def run_gets(gets, layout, wl, native, dtype):
    keys = layout.needed_keys(wl.sels)
    cpu = CpuMeter(gets.store.pid, reader_is_child=True)
    dt, bodies = gets.fetch(keys)
    used = cpu.stop()
    ok = len(bodies) == len(keys) and layout.check(bodies, native, wl.file, wl.sels[0][0],
                                                    dtype)
    return Run(dt, ok=ok, extra={"objects": len(keys), "cpu": used,
                                 "bytes": sum(len(b) for b in bodies.values())})


def alternate(measures, reps):
    """measures: {label: () -> Run}; runs them A B C A B C ... reps times. A contender whose
    run was extrapolated (too slow) is not run again."""
    runs = {k: [] for k in measures}
    for i in range(reps):
        for label, m in measures.items():
            if runs[label] and runs[label][-1].partial:
                continue
            r = m()
            runs[label].append(r)
            log(f"    {label:6} run {i + 1}: {fmt_s(r.seconds)}"
                + (f" (~, {r.done}/{r.total} done)" if r.partial else "")
                + ("" if r.ok else " VALUES DIFFER"))
    return runs


@dataclass
class Line:
    """One line of the table: h5osfs against one baseline."""
    row: str
    workload: str
    h5osfs: str
    h5osfs_runs: list
    other: str = None
    other_runs: list = None
    goal: str = ""
    met: object = None                  # (h5osfs median, other median, ratio) -> bool
    note: str = ""

    @staticmethod
    def median(runs):
        return statistics.median(r.seconds for r in runs) if runs else None

    def cells(self):
        h = self.median(self.h5osfs_runs)
        o = self.median(self.other_runs) if self.other_runs else None
        ratio = o / h if (h and o) else None
        ok = all(r.ok for r in self.h5osfs_runs + (self.other_runs or []))
        met = "VALUES DIFFER" if not ok else \
            ("yes" if self.met(h, o, ratio) else "no") if self.met else ""
        est = lambda runs: "~" if runs and any(r.partial for r in runs) else ""  # noqa: E731
        return [self.row + ". " + self.workload,
                f"{self.h5osfs} {est(self.h5osfs_runs)}{fmt_s(h)}",
                f"{self.other} {est(self.other_runs)}{fmt_s(o)}" if self.other else "-",
                f"{ratio:.2f}" if ratio is not None else "-", self.goal, met], ok


def at_least(x):
    return f">= {x}", lambda h, o, r: r is not None and r >= x


# Issue 29 §2 set the sparse S3 rows' goal against plain GETs at 0.7 (on RGW); issue 9 had 0.8.
SPARSE_GETS = at_least(0.7)


FASTER = ("> 1 (faster)", lambda h, o, r: r is not None and r > 1)
NO_GOAL = ("-", None)           # shown for comparison: the issue sets no goal against it


class Bench:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.native = Native(work)
        self.lines = []
        self.store = None
        self._local = None
        self._layouts = {}

    # -- contenders, made when first needed
    def local(self):
        if self._local is None:
            self._local = H5osfs("local", self.work / "bucket" / BUCKET,
                                 self.work / "mnt" / "local", self.work)
        self._local.ensure()
        return self._local

    def s3_contenders(self):
        if self.store is None:
            self.store = Store(self.work, needed_files(self.args.only), self.args.reload,
                               self.args.server)
            self.s3 = H5osfs("S3", f"s3://{BUCKET}", self.work / "mnt" / "s3", self.work,
                             self.store, opts="bucket_images=write", forget_images=True)
            self.s3_built = H5osfs("S3-built", f"s3://{BUCKET}", self.work / "mnt" / "s3-built",
                                   self.work, self.store, opts="bucket_images=off",
                                   forget_images=True)
            self.s3_base = None
            if self.args.base:
                self.s3_base = H5osfs("S3-base", f"s3://{BUCKET}", self.work / "mnt" / "s3-base",
                                      self.work, self.store, opts="bucket_images=write",
                                      forget_images=True, binary=self.args.base)
            self.s3fs = S3fs(self.work, self.store)
            self.ros3 = [] if self.args.no_ros3 else [Ros3(self.store)]
            if self.args.ros3_cache and not self.args.no_ros3:
                self.ros3.append(Ros3(self.store, self.args.ros3_cache))
            self.gets = Gets(self.store, default_max_requests())
        return self.s3, self.s3fs, self.ros3, self.gets

    def layout(self, name, path):
        key = (name, path)
        if key not in self._layouts:
            self._layouts[key] = Layout(self.work / "bucket" / BUCKET, name, path)
        return self._layouts[key]

    def close(self):
        for c in (self._local, getattr(self, "s3", None), getattr(self, "s3_built", None),
                  getattr(self, "s3_base", None), getattr(self, "s3fs", None)):
            if c is not None:
                with contextlib.suppress(Exception):
                    c.unmount()
        if self.store:
            self.store.stop()

    def reps(self, fast=False):
        return max(self.args.reps, FAST_REPS) if fast else self.args.reps

    # -- row kinds
    def warm_row(self, row, title, wl, goal, fast=False):
        """h5osfs on the local bucket vs native h5py, both warm (one unmeasured read each)."""
        log(f"row {row}: {title}")
        wl.load_expected(self.native)
        local = self.local()
        budget = self.args.budget
        measures = {"native": lambda: run_h5py(self.native, wl, False, budget),
                    "local": lambda: run_h5py(local, wl, False, budget)}
        warmup = [m() for m in measures.values()]           # unmeasured
        fast = fast or max(r.seconds for r in warmup) < FAST_ROW
        runs = alternate(measures, self.reps(fast))
        self.lines.append(Line(row, title, "local", runs["local"], "native", runs["native"],
                               *goal))

    def cold_s3_row(self, row, title, wl, goals, dtype=None, fast=False, first_open=False):
        """h5osfs over S3 vs s3fs, ros3 and (given dtype) plain GETs, each cold. h5osfs cold:
        a new daemon and no built file kept in its cache_dir, as on a machine that never
        opened the domain; the bucket as a publisher's h5osfs leaves it (with the built file
        that -o bucket_images=write puts there: one unmeasured open first). first_open: also
        h5osfs with -o bucket_images=off (the first open of a domain anywhere)."""
        log(f"row {row}: {title}")
        wl.load_expected(self.native)
        s3, s3fs, ros3, gets = self.s3_contenders()
        budget = self.args.budget
        run_h5py(s3, wl, True, budget)          # unmeasured: the built file into the bucket
        measures = {"S3": lambda: run_h5py(s3, wl, True, budget),
                    "s3fs": lambda: run_h5py(s3fs, wl, True, budget)}
        if first_open:
            measures["S3-built"] = lambda: run_h5py(self.s3_built, wl, True, budget)
        if self.s3_base is not None:
            measures["S3-base"] = lambda: run_h5py(self.s3_base, wl, True, budget)
        for r in ros3:
            measures[r.label] = lambda r=r: run_h5py(r, wl, True, budget)
        note = ""
        if dtype is not None:
            layout = self.layout(wl.file, wl.sels[0][0])
            measures["GETs"] = lambda: run_gets(gets, layout, wl, self.native, dtype)
        runs = alternate(measures, self.reps(fast))
        s3.unmount()
        s3fs.unmount()
        self.s3_built.unmount()
        if self.s3_base is not None:
            self.s3_base.unmount()
        if "GETs" in runs:
            g = runs["GETs"][0].extra
            note = (f"GETs: {g['objects']} objects, {g['bytes'] / 1e6:.0f} MB, "
                    f"{gets.requests} in flight")
        for mine, label in (("S3", title), ("S3-built", title + ", first open anywhere")):
            for other in runs if mine in runs else ():
                if other not in ("S3", "S3-built"):
                    goal = (NO_GOAL if other == "S3-base" else
                            goals["ros3" if other.startswith("ros3") else other])
                    self.lines.append(Line(row, label, mine, runs[mine], other, runs[other],
                                           *goal, note=note if other == "GETs" else ""))

    # -- the rows of issue 9
    def row1(self):
        def goal(h, o, r):
            return h <= 0.25 and r >= 0.2
        self.cold_s3_row("1", "open 500-dataset domain + one value, S3 cold", one_value(),
                         {"s3fs": ("<= 0.25 s and >= 0.2 (5x)", goal), "ros3": NO_GOAL},
                         fast=True, first_open=True)

    def row2(self):
        self.cold_s3_row("2", "200 columns C[:, j], S3 cold", columns(),
                         {"s3fs": FASTER, "ros3": FASTER, "GETs": SPARSE_GETS}, np.int16)

    def row3(self):
        self.warm_row("3", "200 columns C[:, j], local warm", columns(), at_least(0.7))
        self.warm_row("3", "200 rows C[i, :], local warm", rows(), at_least(0.7))
        self.cold_s3_row("3", "200 rows C[i, :], S3 cold", rows(),
                         {"s3fs": FASTER, "ros3": FASTER, "GETs": SPARSE_GETS}, np.int16)

    def row4(self):
        self.cold_s3_row("4", "full read 1 GiB float32, S3 cold", full("float"),
                         {"s3fs": FASTER, "ros3": FASTER, "GETs": at_least(0.9)}, np.float32)
        self.warm_row("4", "full read 1 GiB float32, local warm", full("float"), at_least(0.9))

    def row5(self):
        self.warm_row("5", "full read 512 MiB gzip float32, local warm", full("gzip"),
                      at_least(2))
        self.cold_s3_row("5", "full read 512 MiB gzip float32, S3 cold", full("gzip"),
                         {"s3fs": FASTER, "ros3": FASTER, "GETs": at_least(0.6)}, np.float32)

    def row6(self):
        self.warm_row("6", "200 random unaligned hyperslabs, local warm", hyperslabs(),
                      at_least(0.9))
        self.cold_s3_row("6", "200 random unaligned hyperslabs, S3 cold", hyperslabs(),
                         {"s3fs": FASTER, "ros3": FASTER, "GETs": SPARSE_GETS}, np.int16)

    def row7(self):
        for tool in (["h5ls", "-r"], ["h5dump", "-H"]):
            self.tool_row(tool)

    def tool_row(self, tool):
        """tool on the 500-dataset domain: first open (fresh mount) and second open (same
        mount, domain unchanged) against the native file (warm)."""
        name = " ".join(tool)
        log(f"row 7: {name}")
        local = self.local()

        def one(path, want=None):
            t, r = timed(subprocess.run, tool + [str(path)], capture_output=True, text=True)
            out = r.stdout.split("\n", 1)[1] if tool[0] == "h5dump" else r.stdout  # names file
            return Run(t, ok=r.returncode == 0 and out == want), out

        want = one(self.native.path("meta"))[1]
        if not want:
            raise RuntimeError(f"{name} of the native file printed nothing")

        def twice(path):
            """Two runs: the first and the second open (extra["second"])."""
            (first, _), (second, _) = one(path, want), one(path, want)
            return Run(first.seconds, ok=first.ok and second.ok,
                       extra={"second": second.seconds})

        def mounted():
            local.fresh()
            return twice(local.domain("meta"))

        mounted()                                   # warm the bucket's files, unmeasured
        runs = alternate({"native": lambda: twice(self.native.path("meta")),
                          "local": mounted}, self.reps(fast=True))
        first = runs
        second = {k: [Run(r.extra["second"], ok=r.ok) for r in v] for k, v in runs.items()}
        self.lines.append(Line("7", f"`{name}` 500-dataset domain, first open", "local",
                               first["local"], "native", first["native"], *at_least(0.5)))
        self.lines.append(Line("7", f"`{name}` 500-dataset domain, second open", "local",
                               second["local"], "native", second["native"], *at_least(0.8)))

    def row8(self):
        """First open of the 1e6-chunk domain on a fresh mount: time to the first value, and
        the daemon's peak RSS (VmHWM)."""
        log("row 8: first open of a 1e6-chunk domain")
        bucket = make_many(self.work)
        many = H5osfs("many", bucket, self.work / "mnt" / "many", self.work)
        many.mount()
        try:
            with h5py.File(many.mnt / "many.h5", "r") as f:    # warm the bucket's dentries
                f["data"][0]
            runs, rss = [], []
            for i in range(self.args.reps):
                many.fresh()
                t0 = time.perf_counter()
                with h5py.File(many.mnt / "many.h5", "r") as f:
                    v = f["data"][0]
                    dt = time.perf_counter() - t0
                    tail = f["data"][-16:]
                ok = v == 0 and np.array_equal(tail, many_chunk(MANY_CHUNKS - 1))
                rss.append(Run(many.peak_rss_kib() / 1024, ok=ok))
                runs.append(Run(dt, ok=ok))
                log(f"    first value {fmt_s(dt)}, VmHWM {rss[-1].seconds:.0f} MiB")
        finally:
            many.unmount()
        self.lines.append(Line("8", "1e6-chunk domain, first open to first value (local)",
                               "local", runs, goal="<= 1 s",
                               met=lambda h, o, r: h <= 1.0))
        line = Line("8", "1e6-chunk domain, daemon peak RSS (VmHWM)", "local", rss,
                    goal="<= 64 MiB", met=lambda h, o, r: h <= 64)
        line.fmt_mib = True
        self.lines.append(line)


ROWS = {"1": Bench.row1, "2": Bench.row2, "3": Bench.row3, "4": Bench.row4, "5": Bench.row5,
        "6": Bench.row6, "7": Bench.row7, "8": Bench.row8}


# ---------------------------------------------------------------------------------------------
# the table

HEADER = ["workload", "h5osfs", "baseline", "ratio", "goal", "met?"]


def table_cells(lines):
    out, all_ok = [], True
    for line in lines:
        cells, ok = line.cells()
        if getattr(line, "fmt_mib", False):
            cells[1] = f"{line.h5osfs} {line.median(line.h5osfs_runs):.0f} MiB"
        if line.note:
            cells[0] += f" ({line.note})"
        all_ok &= ok
        out.append(cells)
    return out, all_ok


CPU_HEADER = ["workload", "contender", "time", "server CPU", "daemon CPU", "reader CPU",
              "CPU sum", "busy"]
CPU_PARTS = ("server", "daemon", "reader")


def cpu_cells(lines):
    """One line per row and contender that measured CPU: the medians of its runs' time and
    CPU seconds, and busy = CPU sum / (time x cores) (1: every core was busy all along)."""
    seen, out = set(), []
    for ln in lines:
        for label, runs in ((ln.h5osfs, ln.h5osfs_runs), (ln.other, ln.other_runs or [])):
            if not runs or id(runs) in seen or any("cpu" not in r.extra for r in runs):
                continue                    # a baseline shared by two lines: once
            seen.add(id(runs))
            # a run stopped early: its CPU scaled up as its time was ("~")
            whole = [{k: r.extra["cpu"][k] * r.total / r.done for k in CPU_PARTS}
                     for r in runs]
            med = {k: statistics.median(c[k] for c in whole) for k in CPU_PARTS}
            busy = statistics.median(sum(c.values()) / (r.seconds * os.cpu_count())
                                     for c, r in zip(whole, runs))
            est = "~" if any(r.partial for r in runs) else ""
            out.append([f"{ln.row}. {ln.workload}", label, est + fmt_s(Line.median(runs)),
                        *(f"{est}{med[k]:.2f} s" for k in CPU_PARTS),
                        f"{est}{sum(med.values()):.2f} s", f"{busy:.2f}"])
    return out


def text_table(rows, header=HEADER):
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def markdown_table(rows, header=HEADER):
    esc = lambda c: c.replace("|", "\\|")  # noqa: E731
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


def machine(server):
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.machine())
    mem = proc_meminfo_gib()
    rev = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip()
    s3fs = subprocess.run(["s3fs", "--version"], capture_output=True, text=True).stdout
    s3fs = s3fs.split("\n", 1)[0].replace("Amazon Simple Storage Service File System ", "")
    return (f"{os.cpu_count()} x {cpu}, {mem:.0f} GiB RAM, Linux {platform.release()}; "
            f"{BIN} (source tree {rev}); HDF5 {h5py.version.hdf5_version}, h5py "
            f"{h5py.version.version}; s3fs {s3fs.strip()}; S3 server: "
            + ("Ceph RGW (tests/s3/rgw.py)" if server == "rgw" else "s3rver (tests/s3)"))


def proc_meminfo_gib():
    with open("/proc/meminfo") as f:
        return int(f.readline().split()[1]) / 2**20


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path,
                    default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                    / "h5osfs-bench" / "read-all", help="work directory (default %(default)s)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the generated data in --work for the next run (~11 GiB)")
    ap.add_argument("--only", default=",".join(ROWS),
                    help="rows to run, e.g. 2,4 (default: all, %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="measured runs per contender "
                    f"(fast rows: at least {FAST_REPS}; default %(default)s)")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds one measured run may "
                    "take before it stops and is extrapolated (default %(default)s)")
    ap.add_argument("--ros3-cache", type=int, metavar="BYTES", default=64 << 20,
                    help="h5py chunk cache (rdcc_nbytes) of a second ros3 contender, one that "
                    "holds the chunks a selection needs; 0: none (default %(default)s)")
    ap.add_argument("--no-ros3", action="store_true",
                    help="leave out the ros3 contenders (minutes per row of columns or "
                    "hyperslabs)")
    ap.add_argument("--base", type=Path, metavar="BIN",
                    help="another h5osfs binary (e.g. the commit before a change) run as "
                    "contender S3-base, alternating with $H5OSFS_BIN on the S3 rows")
    ap.add_argument("--reload", action="store_true", help="upload the data to S3 again")
    ap.add_argument("--server", choices=("s3rver", "rgw"), default="s3rver",
                    help="the S3 server of the S3 rows: the test s3rver (default), or Ceph RGW "
                    "(tests/s3/rgw.py, its OSD in RAM: started and loaded by every run)")
    ap.add_argument("--out", type=Path, help="markdown table (default WORK/results.md)")
    args = ap.parse_args()
    args.only = [r.strip() for r in args.only.split(",") if r.strip()]
    bad = [r for r in args.only if r not in ROWS]
    if bad:
        ap.error(f"unknown rows {bad}; rows are {', '.join(ROWS)}")
    return args


def check_tools(rows, server):
    if not BIN.is_file():
        sys.exit(f"{BIN} not found: build h5osfs (ninja -C build) or set H5OSFS_BIN")
    s3 = {"1", "2", "3", "4", "5", "6"} & set(rows)
    if s3:
        problem = s3fixtures.rgw_problem() if server == "rgw" else s3rver_problem()
        if problem:
            sys.exit(f"the S3 test server is missing: {problem}")
        for tool in ("s3fs", "curl"):
            if shutil.which(tool) is None:
                sys.exit(f"{tool} is missing: run scripts/install-bench-deps.sh")
        if not h5py.get_config().ros3:
            sys.exit("this h5py/HDF5 has no ros3 driver")


def main():
    args = parse_args()
    check_tools(args.only, args.server)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    started = datetime.datetime.now()
    load_before = os.getloadavg()
    for name in needed_files(args.only):
        make_native(work, name)
    ingest(work, needed_files(args.only))
    bench = Bench(args, work)
    try:
        if "8" in args.only:
            make_many(work)
        if {"1", "2", "3", "4", "5", "6"} & set(args.only):
            bench.s3_contenders()                           # uploads the data when needed
        bench.setup_seconds = time.perf_counter() - t_start
        for r in args.only:
            ROWS[r](bench)
    finally:
        bench.close()
    total = time.perf_counter() - t_start
    rows, ok = table_cells(bench.lines)
    head = (f"h5osfs read benchmark (bench/bench_read_all.py --only {','.join(args.only)}), "
            f"{started:%Y-%m-%d %H:%M}, {total / 60:.1f} min in all (making the data: "
            f"{bench.setup_seconds:.0f} s)\n{machine(args.server)}\n"
            "ratio = baseline time / h5osfs time (> 1: h5osfs is faster); median of "
            f"{args.reps} runs (fast rows: {max(args.reps, FAST_REPS)}); ~ = extrapolated "
            f"from a run stopped after {args.budget:.0f} s\nload average (1 min) "
            f"{load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (other work "
            "on this machine)")
    cpu = cpu_cells(bench.lines)
    cpu_head = (f"Where the time goes: CPU seconds spent during the measured runs (medians) by "
                f"the S3 server (every process of it), the daemon (h5osfs, s3fs) and the reader "
                f"(h5py with ros3 in it; curl for the GETs); busy = their sum / (time x "
                f"{os.cpu_count()} cores)")
    print(head + "\n\n" + text_table(rows) + "\n\n" + cpu_head + "\n\n"
          + text_table(cpu, CPU_HEADER))
    out = args.out or work / "results.md"
    out.write_text(head.replace("\n", "  \n") + "\n\n" + markdown_table(rows) + "\n\n"
                   + cpu_head + "\n\n" + markdown_table(cpu, CPU_HEADER) + "\n")
    (work / "results.json").write_text(json.dumps(
        [{"row": ln.row, "workload": ln.workload, "h5osfs": ln.h5osfs,
          "h5osfs_runs": [r.__dict__ for r in ln.h5osfs_runs], "baseline": ln.other,
          "baseline_runs": [r.__dict__ for r in ln.other_runs or []], "goal": ln.goal}
         for ln in bench.lines], indent=1))
    print(f"\nmarkdown: {out}")
    if not args.keep:
        for d in ("native", "bucket", "many", "s3", "cache"):
            shutil.rmtree(work / d, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
