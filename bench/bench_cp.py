#!/usr/bin/python3
"""Write throughput of h5osfs: `cp file.h5 MOUNT/home/bench/` (staging, then the commit of the
file as HSDS objects on close) against a plain `cp` of the same file to a directory on the same
disk, measured in the same run.

The source is a 1 GiB HDF5 file (on disk: 3.25 GiB of float32 in 1 MiB chunks, deflate (gzip)
level 4), holding a smooth field plus noise quantised to 0.01 (it compresses about 3:1, like
instrument data; not random bytes, not zeros). It is made once with h5py and kept in the work
directory.

1. baselines: cp to a directory of the work directory, 3 times (rm in between), median; cp
   copies within one filesystem with copy_file_range, in the kernel. The same with dd bs=1M
   (read and write through user space, which is how cp copies into any FUSE mount);
2. h5osfs: an empty POSIX bucket (folders /home and /home/bench owned by user "bench") on the
   same disk, cp into the mount until cp exits, 3 times (rm in between), median; meanwhile the
   disk use of the staging area (-o cache_dir, files the daemon holds open there included, even
   deleted ones) is sampled, and its peak is compared with the file size;
3. correctness: after the last copy, unmount, mount again, `h5diff source MOUNT/...` must exit
   0, and objcheck finds no problem in the domain's objects.

4. the same with -o ingest=link (the file stored whole, its dataset linked: issue 10.1),
   against cp + sync (timed together), since a commit makes what it stores durable.

Both copies start with the source warm in the page cache (read once, untimed) and after a
sync (untimed); caches cannot be dropped here, and neither copy syncs its result. Goals: h5osfs/baseline >= 0.5, staging peak <= the file size.

usage: bench/bench_cp.py [--dir WORKDIR] [--runs N] [--keep]
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


def make_source(path):
    """The 1 GiB source file (once; a finished file is recognised by its attribute)."""
    if path.exists():
        try:
            with h5py.File(path, "r") as f:
                if f.attrs.get("complete") == 1 and f["data"].shape == (ROWS, COLS):
                    return False
        except OSError:
            pass
        path.unlink()
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


def mount(bucket, mnt, log, cache_dir, ingest="copy"):
    """A harness.Daemon (tests/integration/harness.py) on mnt."""
    mnt.mkdir(parents=True, exist_ok=True)
    return harness.Daemon(["-o", f"user={USER},cache_dir={cache_dir},ingest={ingest}"], bucket,
                          mnt, log)


def unmount(daemon):
    """harness's teardown (unmounted, exit status 0, no sanitizer report), or RuntimeError;
    the daemon may take long: it commits what it staged before it exits."""
    daemon.stop(exit_timeout=600)


def bench_baseline(src, work, runs, tool="cp"):
    dst_dir = work / "baseline"
    shutil.rmtree(dst_dir, ignore_errors=True)
    dst_dir.mkdir()
    times = []
    for _ in range(runs):
        warm(src)
        dt, r = timed_cp(src, dst_dir / "bench.h5", tool)
        if r.returncode != 0:
            raise RuntimeError(f"cp failed: {r.stderr}")
        times.append(dt)
        (dst_dir / "bench.h5").unlink()
    shutil.rmtree(dst_dir)
    return times


def bench_mount(src, work, runs, ingest="copy"):
    """(times, staging peaks, error or None, h5diff exit status, objcheck problems)."""
    root = work / "mount"
    shutil.rmtree(root, ignore_errors=True)
    bucket, mnt, cache = root / "bucket" / "benchbucket", root / "mnt", root / "cache"
    make_bucket(bucket)
    cache.mkdir()
    target = mnt / "home" / USER / "bench.h5"
    times, peaks, error = [], [], None
    daemon = mount(bucket, mnt, root / "h5osfs.log", cache, ingest)
    try:
        for i in range(runs):
            warm(src)
            with DiskSampler(cache, daemon.pid) as s:
                dt, r = timed_cp(src, target)
            if r.returncode != 0:
                error = f"cp into the mount failed: {r.stderr.strip()}"
                break
            times.append(dt)
            peaks.append(s.peak)
            if i < runs - 1:
                os.unlink(target)
    finally:
        unmount(daemon)
    if error:
        return times, peaks, error, None, None
    daemon = mount(bucket, mnt, root / "h5osfs-2.log", cache)
    try:
        diff = subprocess.run(["h5diff", str(src), str(target)], capture_output=True, text=True)
        if diff.returncode != 0:
            error = f"h5diff exit {diff.returncode}: {(diff.stdout + diff.stderr)[-500:]}"
    finally:
        unmount(daemon)
    problems = objcheck.problems(bucket, f"/home/{USER}/bench.h5", fill_chunks="error")
    return times, peaks, error, diff.returncode, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=default_dir(),
                    help="work directory; the source file is kept there (default %(default)s)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the bucket and mount directory")
    args = ap.parse_args()
    work = args.dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    src = work / SOURCE_NAME
    make_source(src)
    size = src.stat().st_size
    base = bench_baseline(src, work, args.runs)
    base_rw = bench_baseline(src, work, args.runs, "dd")
    base_sync = bench_baseline(src, work, args.runs, "cp+sync")
    times, peaks, error, diff_rc, problems = bench_mount(src, work, args.runs)
    link = bench_mount(src, work, args.runs, "link")
    if not args.keep:
        shutil.rmtree(work / "mount", ignore_errors=True)

    mb = size / 1e6
    t_base = statistics.median(base)
    t_rw = statistics.median(base_rw)
    res = {"file_bytes": size, "dataset_bytes": ROWS * COLS * 4, "runs": args.runs,
           "baseline_s": [round(t, 3) for t in base], "baseline_MBps": round(mb / t_base, 1),
           "dd_s": [round(t, 3) for t in base_rw], "dd_MBps": round(mb / t_rw, 1),
           "ratio_vs_dd": None,
           "h5osfs_s": [round(t, 3) for t in times], "h5osfs_MBps": None, "ratio": None,
           "staging_peak_bytes": max(peaks) if peaks else None, "staging_peak_vs_file": None,
           "h5diff_exit": diff_rc, "objcheck_problems": None if problems is None else
           len(problems), "error": error,
           "cp_sync_s": [round(t, 3) for t in base_sync], "ratio_vs_cp_sync": None,
           "link_s": [round(t, 3) for t in link[0]], "link_ratio_vs_cp_sync": None,
           "link_staging_peak_vs_file": None, "link_h5diff_exit": link[3],
           "link_objcheck_problems": None if link[4] is None else len(link[4]),
           "link_error": link[2]}
    rows = [("file", f"{size / 2**20:.0f} MiB on disk ({ROWS}x{COLS} float32 = "
                     f"{ROWS * COLS * 4 / 2**30:.2f} GiB, 1 MiB chunks, gzip 4)"),
            ("cp to the same disk", f"{mb / t_base:8.1f} MB/s  (median of {args.runs}: "
                                    f"{', '.join(f'{t:.2f}' for t in base)} s)"),
            ("dd bs=1M, same disk", f"{mb / t_rw:8.1f} MB/s  (median of {args.runs}: "
                                    f"{', '.join(f'{t:.2f}' for t in base_rw)} s)")]
    if len(times) == args.runs:
        t_mnt = statistics.median(times)
        res["h5osfs_MBps"] = round(mb / t_mnt, 1)
        res["ratio"] = round(t_base / t_mnt, 3)
        res["ratio_vs_dd"] = round(t_rw / t_mnt, 3)
        res["staging_peak_vs_file"] = round(max(peaks) / size, 3)
        rows += [("cp into h5osfs", f"{mb / t_mnt:8.1f} MB/s  (median of {args.runs}: "
                                    f"{', '.join(f'{t:.2f}' for t in times)} s)"),
                 ("ratio", f"{t_base / t_mnt:8.2f}     (goal >= 0.5)"),
                 ("ratio vs dd", f"{t_rw / t_mnt:8.2f}     (read/write copy, as into any FUSE "
                                 "mount)"),
                 ("staging peak", f"{max(peaks) / 2**20:8.0f} MiB = {max(peaks) / size:.2f} x "
                                  "the file (goal <= 1.00)"),
                 ("h5diff after remount", f"exit {diff_rc}"),
                 ("objcheck", f"{len(problems)} problems" + (f": {problems[:5]}"
                                                             if problems else ""))]
    t_sync = statistics.median(base_sync)
    rows.append(("cp + sync, same disk", f"{mb / t_sync:8.1f} MB/s  (median of {args.runs}: "
                                         f"{', '.join(f'{t:.2f}' for t in base_sync)} s)"))
    if len(times) == args.runs:
        res["ratio_vs_cp_sync"] = round(t_sync / statistics.median(times), 3)
        rows.append(("ratio vs cp + sync", f"{res['ratio_vs_cp_sync']:8.2f}     (goal >= 0.5)"))
    if len(link[0]) == args.runs:
        t_link = statistics.median(link[0])
        res["link_ratio_vs_cp_sync"] = round(t_sync / t_link, 3)
        res["link_staging_peak_vs_file"] = round(max(link[1]) / size, 3)
        rows += [("cp, -o ingest=link", f"{mb / t_link:8.1f} MB/s  (median of {args.runs}: "
                                        f"{', '.join(f'{t:.2f}' for t in link[0])} s)"),
                 ("link ratio vs cp + sync", f"{t_sync / t_link:8.2f}     (goal >= 0.8)"),
                 ("link: h5diff, objcheck", f"exit {link[3]}, " + (
                     "-" if link[4] is None else f"{len(link[4])} problems"))]
    if error or link[2]:
        rows.append(("error", error or link[2]))
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print("JSON " + json.dumps(res))
    ok = not error and res["ratio"] is not None and not problems and not link[2] and \
        not link[4]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
