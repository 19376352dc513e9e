#!/usr/bin/python3
"""Write throughput of h5osfs: `cp file.h5 MOUNT/home/bench/` (staging, then the commit of the
file as HSDS objects on close, durable) against the plain copy of the same bytes, in the same
run, the two contenders alternating (issue 10 part 3).

Two 1 GiB sources, made once with h5py and kept in the work directory:
- gzip: 3.25 GiB of float32 in 1 MiB chunks, deflate level 4 (a smooth field plus noise
  quantised to 0.01: it compresses about 3:1, like instrument data);
- raw: 1 GiB of random float32 in 1 MiB chunks, no filter.

Cases (each: runs x [baseline, h5osfs], alternating; median of each):
  raw-copy   raw source, default ingest, local bucket   / cp + sync        goal >= 0.5
  raw-link   raw source, -o ingest=link, local bucket   / cp + sync        goal >= 0.8
  gzip-copy  gzip source, default ingest, local bucket  / plain cp         goal >= 0.3
  gzip-link  gzip source, -o ingest=link, local bucket  / cp + sync        (no goal)
  s3-link    gzip source, -o ingest=link, S3 (s3rver)   / a plain multipart upload of the
             same file by the daemon's own store code (tests/store_put), same part size,
             threshold and parallelism                                    goal >= 0.8
Baselines: `cp` copies within one filesystem with copy_file_range (in the kernel); "cp +
sync" times cp and sync together, since a commit makes what it stores durable.

Every h5osfs run is a fresh mount: cp, then rm, then unmount (which lets the collector delete
the domain's objects), so every run starts with the disk as the baseline finds it. (Measured:
this disk writes 1 GiB in 0.75 s while it reuses freed blocks, but 3-4x slower once gigabytes
of new blocks are taken; a benchmark that keeps old versions around measures that instead.)
The disk use of the staging area (-o cache_dir, deleted files the daemon holds included) is
sampled during each cp; its peak is compared with the file size (goal <= 1.0).
Values: after the last run of each case the file is kept, the bucket mounted again, and
`h5diff source MOUNT/...` must exit 0; objcheck checks the objects of a local bucket.

Both copies start with the source warm in the page cache (read once, untimed) and after a
sync (untimed); caches cannot be dropped here.

usage: bench/bench_cp.py [--dir WORKDIR] [--runs N] [--cases raw-copy,raw-link,...] [--keep]
Output: a table, then one line "JSON {...}".
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hsds_bucket  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
import harness  # noqa: E402
import objcheck  # noqa: E402

USER = "bench"
# float32 chunks of 16 x 16384 = 1 MiB; 3328 of them compress to a file of about 1 GiB
ROWS, COLS, CHUNK_ROWS = 53248, 16384, 16
SOURCE_NAME = "bench_src_f32_gzip4_1GiB.h5"


def default_dir():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "h5osfs-bench"


def source_ready(path, shape):
    """Is path a finished source of that shape (its attribute "complete" is written last)?
    An unfinished one is removed."""
    if not path.exists():
        return False
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("complete") == 1 and f["data"].shape == shape:
                return True
    except OSError:
        pass
    path.unlink()
    return False


def make_source(path):
    """The 1 GiB gzip source file (once)."""
    if source_ready(path, (ROWS, COLS)):
        return False
    tmp = path.with_suffix(".tmp")
    rng = np.random.default_rng(20240601)
    x = np.linspace(0, 8 * np.pi, COLS, dtype=np.float32)[None, :]
    t = time.perf_counter()
    with h5py.File(tmp, "w") as f:
        d = f.create_dataset("data", (ROWS, COLS), "<f4", chunks=(CHUNK_ROWS, COLS),
                             compression="gzip", compression_opts=4)
        d.attrs["units"] = "K"
        for r in range(0, ROWS, CHUNK_ROWS):
            y = (np.arange(r, r + CHUNK_ROWS, dtype=np.float32) / 500.0)[:, None]
            block = 20.0 + 5.0 * np.sin(x) * np.cos(y) + rng.normal(0, 0.05, (CHUNK_ROWS, COLS))
            d[r:r + CHUNK_ROWS] = np.round(block, 2).astype(np.float32)
        f.attrs["complete"] = 1
    os.rename(tmp, path)
    print(f"made {path} ({path.stat().st_size / 2**20:.0f} MiB on disk) in "
          f"{time.perf_counter() - t:.0f} s", flush=True)
    return True


def warm(path):
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def timed_cp(src, dst, tool="cp"):
    """tool "cp": coreutils cp, which copies within one filesystem with copy_file_range (in
    the kernel); "dd": read and write in 1 MiB pieces, as cp copies into any FUSE mount;
    "cp+sync": cp, then sync, timed together (a commit makes its objects durable: the fair
    baseline for it, issue 10)."""
    os.sync()       # untimed: earlier dirty pages are not written back during the copy
    cmd = ["cp", str(src), str(dst)] if tool != "dd" else \
        ["dd", f"if={src}", f"of={dst}", "bs=1M", "status=none"]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if tool == "cp+sync" and r.returncode == 0:
        os.sync()
    return time.perf_counter() - t, r


class DiskSampler:
    """Peak disk use (allocated blocks) of the files below root and of the files below root
    that process pid holds open (deleted ones too), sampled every interval seconds."""

    def __init__(self, root, pid, interval=0.02):
        self.root, self.pid, self.interval = os.path.realpath(root), pid, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        seen, total = set(), 0
        for dirpath, _, filenames in os.walk(self.root):
            for name in filenames:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
        fd_dir = f"/proc/{self.pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            fds = []
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
                if not target.startswith(self.root + "/"):
                    continue
                st = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.sample())


def make_bucket(bucket):
    """An empty bucket with the folders /home and /home/bench, as HSDS writes folders."""
    now = time.time()
    ro = {k: k == "read" for k in ("create", "read", "update", "delete", "readACL",
                                    "updateACL")}
    for folder in ("home", "home/" + USER):
        hsds_bucket.put(bucket, f"{folder}/.domain.json",
                        {"owner": USER, "acls": {USER: hsds_bucket.acl_all(), "default": ro},
                         "created": now, "lastModified": now})


def unmount(daemon):
    """harness's teardown (unmounted, exit status 0, no sanitizer report), or RuntimeError;
    the daemon may take long: it commits what it staged before it exits."""
    daemon.stop(exit_timeout=600)


RAW_NAME = "bench_src_f32_raw_1GiB.h5"
RAW_ROWS = 16384                 # x COLS float32 = 1 GiB, in (16, 16384) chunks of 1 MiB
S3_BUCKET = "benchcp"
# the daemon's defaults (options.h, store.h), given to the baseline uploader as they are
MULTIPART = ("-t", str(64 << 20), "-p", str(8 << 20), "-m", "16")

CASES = {   # name: (source, ingest, backend, baseline, goal)
    "raw-copy": ("raw", "copy", "posix", "cp+sync", 0.5),
    "raw-link": ("raw", "link", "posix", "cp+sync", 0.8),
    "gzip-copy": ("gzip", "copy", "posix", "cp", 0.3),
    "gzip-link": ("gzip", "link", "posix", "cp+sync", None),
    "s3-link": ("gzip", "link", "s3", "multipart", 0.8),
}


def make_raw_source(path):
    """The 1 GiB unfiltered source (once)."""
    if source_ready(path, (RAW_ROWS, COLS)):
        return False
    tmp = path.with_suffix(".tmp")
    rng = np.random.default_rng(20261125)
    with h5py.File(tmp, "w") as f:
        d = f.create_dataset("data", (RAW_ROWS, COLS), "<f4", chunks=(CHUNK_ROWS, COLS))
        for r in range(0, RAW_ROWS, 1024):
            d[r:r + 1024] = rng.random((1024, COLS), dtype=np.float32)
        f.attrs["complete"] = 1
    os.rename(tmp, path)
    return True


class Target:
    """Where a case's h5osfs copies go: a local bucket, or a bucket of the test s3rver."""

    def __init__(self, work, backend, server=None):
        self.root = work / "mount"
        shutil.rmtree(self.root, ignore_errors=True)
        self.mnt, self.cache = self.root / "mnt", self.root / "cache"
        self.cache.mkdir(parents=True)
        folders = self.root / "bucket" / "benchbucket"
        make_bucket(folders)
        self.server, self.local = server, backend == "posix"
        if self.local:
            self.bucket, self.env, self.opts = folders, None, ""
        else:
            server.load(S3_BUCKET, folders)
            self.bucket = f"s3://{S3_BUCKET}"
            self.env = dict(os.environ, **server.env())
            self.opts = f",endpoint={server.endpoint}"
        self.runs = 0

    def mount(self, ingest):
        self.runs += 1
        self.mnt.mkdir(parents=True, exist_ok=True)
        return harness.Daemon(["-o", f"user={USER},cache_dir={self.cache},ingest={ingest}"
                               + self.opts], self.bucket, self.mnt,
                              self.root / f"h5osfs-{self.runs}.log", env=self.env)

    def path(self):
        return self.mnt / "home" / USER / "bench.h5"


def run_mount(target, src, ingest, keep):
    """One cp into a fresh mount: (seconds, staging peak, error or None). The file is removed
    after it unless keep, and the unmount lets the collector delete its objects."""
    daemon = target.mount(ingest)
    try:
        warm(src)
        with DiskSampler(target.cache, daemon.pid) as s:
            dt, r = timed_cp(src, target.path())
        if r.returncode != 0:
            return dt, s.peak, f"cp into the mount failed: {r.stderr.strip()}"
        if not keep:
            os.unlink(target.path())
    finally:
        unmount(daemon)
    return dt, s.peak, None


def run_baseline(src, work, tool, server=None):
    """One baseline copy of src: cp, cp+sync (to a directory on the same disk, removed after),
    or multipart (store_put to the s3rver, the object deleted after)."""
    if tool == "multipart":
        warm(src)
        os.sync()
        cmd = [str(harness.h5osfs_bin().parent / "tests" / "store_put"), *MULTIPART,
               server.endpoint, S3_BUCKET, "plain/bench.h5", str(src)]
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           env=dict(os.environ, **server.env()))
        dt = time.perf_counter() - t
        if r.returncode != 0:
            raise RuntimeError(f"store_put failed: {r.stdout} {r.stderr[-2000:]}")
        with server.client() as c:
            head = c.head_object(S3_BUCKET, "plain/bench.h5")
            if int(head.headers["content-length"]) != src.stat().st_size:
                raise RuntimeError(f"store_put stored {head.headers['content-length']} bytes")
            c.delete_object(S3_BUCKET, "plain/bench.h5")
        return dt
    dst = work / "baseline"
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    warm(src)
    dt, r = timed_cp(src, dst / "bench.h5", tool)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} failed: {r.stderr}")
    shutil.rmtree(dst)
    return dt


def check_values(target, src):
    """(h5diff exit status, objcheck problems or None) of the kept file, after a remount; the
    file is removed after."""
    daemon = target.mount("copy")
    problems = None
    try:
        diff = subprocess.run(["h5diff", str(src), str(target.path())], capture_output=True,
                              text=True)
        if target.local:
            problems = objcheck.problems(target.bucket, f"/home/{USER}/bench.h5",
                                         fill_chunks="error")
        os.unlink(target.path())
    finally:
        unmount(daemon)
    for p in problems or []:
        print(f"objcheck: {p}", file=sys.stderr)
    if diff.returncode != 0:
        print(f"h5diff exit {diff.returncode}: {(diff.stdout + diff.stderr)[-500:]}",
              file=sys.stderr)
    return diff.returncode, problems


def run_case(name, sources, work, runs, server):
    kind, ingest, backend, tool, goal = CASES[name]
    src = sources[kind]
    target = Target(work, backend, server)
    base, mine, peaks, error = [], [], [], None
    for i in range(runs):
        base.append(run_baseline(src, work, tool, server))
        dt, peak, error = run_mount(target, src, ingest, keep=i == runs - 1)
        if error:
            break
        mine.append(dt)
        peaks.append(peak)
    diff_rc, problems = check_values(target, src) if not error else (None, None)
    size = src.stat().st_size
    res = {"case": name, "source": kind, "ingest": ingest, "backend": backend,
           "baseline": tool, "goal": goal, "file_bytes": size,
           "baseline_s": [round(t, 3) for t in base], "h5osfs_s": [round(t, 3) for t in mine],
           "ratio": None, "staging_peak_vs_file": None, "h5diff_exit": diff_rc,
           "objcheck_problems": None if problems is None else len(problems), "error": error}
    if len(mine) == runs:
        res["ratio"] = round(statistics.median(base) / statistics.median(mine), 3)
        res["staging_peak_vs_file"] = round(max(peaks) / size, 3)
    return res


def print_table(results):
    print(f"{'case':<10} {'baseline':<10} {'baseline s':>18} {'h5osfs s':>18} {'ratio':>6} "
          f"{'goal':>5} {'staging':>8}  values")
    for r in results:
        med = (lambda v: f"{statistics.median(v):.2f} ({', '.join(f'{t:.2f}' for t in v)})"
               if v else "-")
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        goal = "-" if r["goal"] is None else f"{r['goal']:.1f}"
        staging = "-" if r["staging_peak_vs_file"] is None else \
            f"{r['staging_peak_vs_file']:.2f}x"
        values = r["error"] or (f"h5diff {r['h5diff_exit']}" + (
            "" if r["objcheck_problems"] is None else f", objcheck {r['objcheck_problems']}"))
        print(f"{r['case']:<10} {r['baseline']:<10} {med(r['baseline_s']):>18} "
              f"{med(r['h5osfs_s']):>18} {ratio:>6} {goal:>5} {staging:>8}  {values}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=default_dir(),
                    help="work directory; the sources are kept there (default %(default)s)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES),
                    help="comma-separated, from: " + ", ".join(CASES))
    ap.add_argument("--keep", action="store_true", help="keep the bucket and mount directory")
    args = ap.parse_args()
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    work = args.dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    sources = {"gzip": work / SOURCE_NAME, "raw": work / RAW_NAME}
    if any(CASES[c][0] == "gzip" for c in cases):
        make_source(sources["gzip"])
    if any(CASES[c][0] == "raw" for c in cases):
        make_raw_source(sources["raw"])
    server = None
    if any(CASES[c][2] == "s3" for c in cases):
        problem = harness.s3rver_problem()
        if problem:
            print(f"s3 cases skipped: {problem}", file=sys.stderr)
            cases = [c for c in cases if CASES[c][2] != "s3"]
        else:
            server = harness.S3Server(work / "s3cp")
    results = []
    try:
        for name in cases:
            results.append(run_case(name, sources, work, args.runs, server))
            print(f"{name}: done", file=sys.stderr, flush=True)
    finally:
        if server:
            server.stop()
            if not args.keep:
                shutil.rmtree(work / "s3cp", ignore_errors=True)
        if not args.keep:
            shutil.rmtree(work / "mount", ignore_errors=True)
    print_table(results)
    print("JSON " + json.dumps({"runs": args.runs, "cases": results}))
    ok = all(not r["error"] and r["h5diff_exit"] == 0 and not r["objcheck_problems"]
             for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
