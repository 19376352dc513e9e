#!/usr/bin/python3
"""What versions cost (issue 26's goal table), each against a baseline measured in the same run.

G1 storage. A domain of --mib MiB in --chunks chunks of float32 (random, seeded, no filter) is
   copied into two local-directory buckets, one mounted with -o versions=on, one without
   (the baseline: today's design, one live copy). Then --commits times, alternating the two
   mounts: h5py "r+", one element changed (a different chunk each time), close (the commit).
   Every --every commits, the bytes each bucket holds (du of the bucket's regular files),
   split into the current root, the pool, the version roots and the rest; and the commit
   times (close), median per bucket. Checks at the end, on a fresh read-only mount: the
   current domain and versions 1, the middle one and the last hold exactly the values the
   domain had right after that commit.
G2 one-element r+ of a domain of --big-chunks chunk objects of 4 KiB (as bench_meta.py B),
   written as HSDS objects into two buckets; one is made versioned by one r+ on a
   versions=on mount (timed and counted apart: it seals every chunk into the pool). Then
   --reps times, alternating: r+ one element on a fresh mount with versions=on / without.
   Store requests of the daemon by kind (.h5osfs-stats, open + commit), open and close
   seconds. Check: after the runs a fresh mount reads the last value and the neighbours.
GL versions of a linked domain (-o ingest=link on both arms): a --mib MiB file linked through a
   chunk table (--chunks chunks), --commits one-element r+ of a small copied dataset,
   alternating; bucket bytes at the end (each file once) and close times; versions 1, the
   middle one and the last checked on a fresh read-only mount. Not in the default --only.
G4 read speed of a kept version against the current domain of the G1 bucket: the whole file
   read (cat, 1 MiB blocks) on a fresh mount with a fresh cache_dir, --reps times
   alternating; same bytes checked (md5 of the file of the current domain against the last
   version, which has the same values: they differ only in layout bytes, so the check is
   h5py's values).

Process CPU (user+sys of the daemon, from /proc before it exits) is printed for each r+ of G2.
Ratios are baseline / versions (> 1: versions faster or smaller).

--s3 runs G2 and GL on the test S3 server (s3rver on 127.0.0.1; each bucket made locally, then
uploaded once): requests and open/close times as on a local bucket. The table bytes of the
newest version (below) are only counted on a local bucket.

G2 also prints, for the versioned arm on a local bucket, the bytes of the newest version's
chunk tables: all their tiles, and the tiles written by that commit (the others are hard
links to the version before: no bytes).

--current ref mounts the versioned arm with -o versions_current=ref (doc/versions.md §2 B):
the domain names its head version, no plain root is kept beside the pool (G1), and an r+
stores only the changed chunks, a table and JSON (G2). Default root: today's design D.

usage: bench/bench_versions.py [--work DIR] [--only G1,G2,G4,GL] [--mib N] [--chunks N]
                               [--commits N] [--every N] [--big-chunks N] [--reps N]
                               [--current root|ref] [--s3]
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests" / "integration")]
import bench_cp  # noqa: E402
import harness  # noqa: E402
import hsds_bucket  # noqa: E402

DOMAIN = f"home/{bench_cp.USER}/v.h5"
VDIR = f"home/{bench_cp.USER}/.versions/v.h5"
SEED = 26


def log(msg):
    print(msg, flush=True)


class Mounted:
    """One h5osfs daemon (harness.Daemon) with its own cache_dir (fresh when asked)."""

    def __init__(self, bucket, mnt, cache, logfile, opts, fresh_cache=False):
        if fresh_cache:
            shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        mnt.mkdir(parents=True, exist_ok=True)
        self.mnt = mnt
        o = f"user={bench_cp.USER},cache_dir={cache}" + (f",{opts}" if opts else "")
        env = None
        if str(bucket).startswith("s3://"):     # G2 --s3
            o += f",endpoint={S3.endpoint}"
            env = dict(os.environ, **S3.env())
        self.daemon = harness.Daemon(["-o", o], bucket, mnt, logfile, env=env)

    def path(self, rel):
        return self.mnt / rel

    def stats(self):
        return json.loads((self.mnt / ".h5osfs-stats").read_text())

    def cpu_seconds(self):
        with open(f"/proc/{self.daemon.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.daemon.stop(exit_timeout=900)


def requests(stats):
    return dict(stats["store"]["requests"])


def delta(after, before):
    return {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}


# ---- G1: storage of N one-element versions ----

def g1_source(work, mib, chunks):
    n = mib * (1 << 20) // 4
    per = n // chunks
    path = work / f"g1_src_{mib}m_{chunks}c.h5"
    if not path.exists():
        rng = np.random.default_rng(SEED)
        with h5py.File(path.with_suffix(".tmp"), "w") as f:
            d = f.create_dataset("data", (n,), "f4", chunks=(per,))
            for i in range(chunks):
                d[i * per:(i + 1) * per] = rng.random(per, dtype="f4")
        path.with_suffix(".tmp").rename(path)
    return path, n, per


def root_dir(root_id):
    """db/<this>/ holds a root's objects (spec §1.2: the first 16 digits of the id)."""
    return root_id[2:19]


def bucket_bytes(bucket):
    """{current, pool, versions, garbage, rest: bytes} of a posix bucket, each file counted
    once (the store copies a chunk into a new root by a hard link): the current root, the
    pool, the kept version roots, roots no longer named (the collector deletes them in the
    background, "garbage") and the objects outside db/ (domains, folders, the list)."""
    dom = json.loads((bucket / DOMAIN / ".domain.json").read_text())
    vlist_path = bucket / VDIR / ".h5osfs-versions"
    vlist = json.loads(vlist_path.read_text()) if vlist_path.exists() else {"versions": []}
    kind = {root_dir(dom["root"]): "current"}
    if "pool" in vlist:
        kind[root_dir(vlist["pool"])] = "pool"
    for v in vlist["versions"]:
        kind.setdefault(root_dir(v["root"]), "versions")
    order = ["current", "pool", "versions", "garbage", "rest"]
    files = {}                                   # (dev, ino) -> (category, size)
    for dirpath, _, names in os.walk(bucket):
        rel = Path(dirpath).relative_to(bucket).parts
        k = kind.get(rel[1], "garbage") if len(rel) >= 2 and rel[0] == "db" else "rest"
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue        # the collector deleted it meanwhile
            key = (st.st_dev, st.st_ino)
            if key not in files or order.index(k) < order.index(files[key][0]):
                files[key] = (k, st.st_size)
    out = dict.fromkeys(order, 0)
    for k, size in files.values():
        out[k] += size
    return out


def kept(b):
    return b["current"] + b["pool"] + b["versions"] + b["rest"]


def described(b):
    return (f"{gib(kept(b))} kept (current {gib(b['current'])}, pool {gib(b['pool'])}, version "
            f"roots {gib(b['versions'])}, other {gib(b['rest'])}), {gib(b['garbage'])} still "
            "to collect")


def gib(b):
    return f"{b / (1 << 30):.3f} GiB"


def r_plus_one(path, index, value):
    t0 = time.perf_counter()
    with h5py.File(path, "r+") as f:
        f["data"][index] = value
        t1 = time.perf_counter()
    return time.perf_counter() - t1, t1 - t0


def g1(args, work):
    src, n, per = g1_source(work, args.mib, args.chunks)
    log(f"G1: {args.mib} MiB in {args.chunks} chunks, {args.commits} one-element r+ commits")
    arms = {}
    for label, opts in (("versions", args.versions_opts), ("baseline", "")):
        bucket = work / f"g1-{label}" / "bucket"
        shutil.rmtree(bucket.parent, ignore_errors=True)
        bench_cp.make_bucket(bucket)
        m = Mounted(bucket, work / f"g1-{label}" / "mnt", work / f"g1-{label}" / "cache",
                    work / f"g1-{label}" / "h5osfs.log", opts)
        t0 = time.perf_counter()
        shutil.copyfile(src, m.path(DOMAIN))
        log(f"  {label}: cp of the source {time.perf_counter() - t0:.1f} s, "
            f"bucket {described(bucket_bytes(bucket))}")
        arms[label] = {"bucket": bucket, "mount": m, "close": [], "bytes": []}
    expected = {}                  # version number -> {index: value} changed up to it
    changes = {}
    rows = []
    try:
        for i in range(1, args.commits + 1):
            index = (i % args.chunks) * per + (i * 7919) % per
            value = np.float32(-i)
            changes[index] = value
            for label in ("versions", "baseline") if i % 2 else ("baseline", "versions"):
                a = arms[label]
                close, _ = r_plus_one(a["mount"].path(DOMAIN), index, value)
                a["close"].append(close)
            expected[i + 1] = dict(changes)
            if i % args.every == 0 or i == args.commits:
                row = {k: bucket_bytes(a["bucket"]) for k, a in arms.items()}
                rows.append((i, row))
                log(f"  after {i:4} commits: versions {described(row['versions'])}; "
                    f"baseline {described(row['baseline'])}; close median versions "
                    f"{statistics.median(arms['versions']['close'][-args.every:]):.2f} s, "
                    f"baseline {statistics.median(arms['baseline']['close'][-args.every:]):.2f} s")
    finally:
        for a in arms.values():
            a["mount"].stop()            # waits for the collector: nothing left to collect
    final = {k: bucket_bytes(a["bucket"]) for k, a in arms.items()}
    rows.append(("end", final))
    for k, b in final.items():
        log(f"  after the unmount, {k}: {described(b)}")
    g1_check(work, arms["versions"]["bucket"], src, expected, args.commits)
    return rows, arms


def g1_check(work, bucket, src, expected, commits):
    with h5py.File(src, "r") as f:
        base = f["data"][()]
    m = Mounted(bucket, work / "g1-check" / "mnt", work / "g1-check" / "cache",
                work / "g1-check" / "h5osfs.log", "ro", fresh_cache=True)
    try:
        for number in sorted({1, commits // 2 + 1, commits + 1}):
            want = base.copy()
            for k, v in expected.get(number, {}).items():
                want[k] = v
            with h5py.File(m.path(f"{VDIR}/{number}.h5"), "r") as f:
                ok = np.array_equal(f["data"][()], want)
            log(f"  check: version {number} {'has exactly its values' if ok else 'DIFFERS'}")
            assert ok
        with h5py.File(m.path(DOMAIN), "r") as f:
            assert np.array_equal(f["data"][()], want), "the current domain differs"
        log("  check: the current domain equals the last version")
    finally:
        m.stop()


# ---- G2: one-element r+ of a domain of many chunks ----

S3 = None    # with --s3: the harness.S3Server G2's buckets are uploaded to


def s3_load_fresh(name, bucket):
    """bucket (a local directory) uploaded as S3 bucket name, emptied first: the server's
    data directory outlives a run, and what an earlier run left there (another mode's pool
    and versions) would be counted and continued."""
    shutil.rmtree(S3.data_dir / name, ignore_errors=True)
    S3.load(name, bucket)


def g2_bucket(work, label, chunks):
    bucket = work / f"g2-{label}" / "bucket"
    shutil.rmtree(bucket.parent, ignore_errors=True)
    bench_cp.make_bucket(bucket)
    per = 1024                                    # float32: 4 KiB chunks
    t0 = time.perf_counter()
    hsds_bucket.make_domain(str(bucket), "/" + DOMAIN, "f4", (chunks * per,), (per,),
                            lambda idx: np.full(per, idx[0], dtype="f4").tobytes())
    log(f"  {label}: {chunks} chunk objects written in {time.perf_counter() - t0:.1f} s")
    if S3 is None:
        return bucket
    t0 = time.perf_counter()
    s3_load_fresh(f"g2-{label}", bucket)
    log(f"  {label}: uploaded to {S3.endpoint} in {time.perf_counter() - t0:.1f} s")
    return f"s3://g2-{label}"


def table_tiles(bucket, root):
    """{(dev, ino): size} of the chunk-table tiles under a version root (local bucket)."""
    out = {}
    for doc_path in (bucket / "db" / root_dir(root) / "d").glob("*/.dataset.json"):
        lay = json.loads(doc_path.read_text()).get("creationProperties", {}).get("layout", {})
        tid = lay.get("chunk_table")
        if not tid:
            continue
        for tile in (bucket / "db" / root_dir(tid) / "d" / tid[20:]).iterdir():
            if not tile.name.endswith(".json"):
                st = tile.stat()
                out[(st.st_dev, st.st_ino)] = st.st_size
    return out


def table_bytes(bucket):
    """(all, written by its commit) bytes of the newest version's chunk tables."""
    if not isinstance(bucket, Path):
        return None
    versions = json.loads((bucket / VDIR / ".h5osfs-versions").read_text())["versions"]
    new = table_tiles(bucket, versions[-1]["root"])
    old = table_tiles(bucket, versions[-2]["root"]) if len(versions) > 1 else {}
    return sum(new.values()), sum(v for k, v in new.items() if k not in old)


def g2_run(work, bucket, label, opts, index, value):
    d = work / f"g2-{label}"
    m = Mounted(bucket, d / "mnt", d / "cache", d / "h5osfs.log", opts, fresh_cache=True)
    try:
        before = requests(m.stats())
        cpu0 = m.cpu_seconds()
        close, opened = r_plus_one(m.path(DOMAIN), index, value)
        req = delta(requests(m.stats()), before)
        cpu = m.cpu_seconds() - cpu0
    finally:
        m.stop()
    tables = table_bytes(bucket) if label == "versions" else None
    return {"open": opened, "close": close, "requests": req, "total": sum(req.values()),
            "cpu": cpu, "tables": tables}


def g2(args, work):
    log(f"G2: one-element r+ of a domain of {args.big_chunks} chunks of 4 KiB")
    buckets = {"versions": g2_bucket(work, "versions", args.big_chunks),
               "baseline": g2_bucket(work, "baseline", args.big_chunks)}
    opts = {"versions": args.versions_opts, "baseline": ""}
    first = g2_run(work, buckets["versions"], "versions", args.versions_opts, 5,
                   np.float32(-1))
    log(f"  first versioned commit (seals every chunk): open {first['open']:.1f} s, close "
        f"{first['close']:.1f} s, {first['total']} requests {first['requests']}")
    runs = {"versions": [], "baseline": []}
    for i in range(args.reps):
        for label in ("versions", "baseline") if i % 2 == 0 else ("baseline", "versions"):
            r = g2_run(work, buckets[label], label, opts[label], 5 + 1024 * (i + 1),
                       np.float32(-2 - i))
            runs[label].append(r)
            log(f"    {label:8} run {i + 1}: open {r['open']:.2f} s, close {r['close']:.2f} s, "
                f"daemon CPU {r['cpu']:.2f} s, {r['total']} requests {r['requests']}")
            if r["tables"]:
                log(f"             chunk tables of the new version: {r['tables'][0]} bytes, "
                    f"{r['tables'][1]} of them written by this commit")
    for label, bucket in buckets.items():
        m = Mounted(bucket, work / "g2-check" / "mnt", work / "g2-check" / "cache",
                    work / "g2-check" / "h5osfs.log", "ro", fresh_cache=True)
        try:
            with h5py.File(m.path(DOMAIN), "r") as f:
                i = args.reps
                got = f["data"][5 + 1024 * i - 1:5 + 1024 * i + 2]
                want = [i, -2 - (i - 1), i]
                assert list(got) == want, (label, list(got), want)
        finally:
            m.stop()
    log("  check: the last change and its neighbours read right on both")
    return first, runs


# ---- G4: reading a kept version against the current domain ----

def read_all(path):
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
    return time.perf_counter() - t0


def g4(args, work, bucket, last):
    log(f"G4: whole-file read of version {last} against the current domain, cold")
    runs = {"version": [], "current": []}
    paths = {"version": f"{VDIR}/{last}.h5", "current": DOMAIN}
    for i in range(args.reps):
        for label in ("version", "current") if i % 2 == 0 else ("current", "version"):
            m = Mounted(bucket, work / "g4" / "mnt", work / "g4" / "cache",
                        work / "g4" / "h5osfs.log", "ro", fresh_cache=True)
            try:
                size = m.path(paths[label]).stat().st_size
                t = read_all(m.path(paths[label]))
            finally:
                m.stop()
            runs[label].append(t)
            log(f"    {label:8} run {i + 1}: {size / t / 1e6:.0f} MB/s ({t:.2f} s)")
    m = Mounted(bucket, work / "g4" / "mnt", work / "g4" / "cache", work / "g4" / "h5osfs.log",
                "ro", fresh_cache=True)
    try:
        with h5py.File(m.path(paths["version"]), "r") as a, \
                h5py.File(m.path(paths["current"]), "r") as b:
            assert np.array_equal(a["data"][()], b["data"][()])
    finally:
        m.stop()
    log("  check: the version and the current domain hold the same values")
    return runs


# ---- GL: versions of a linked domain (-o ingest=link) ----

def gl_source(work, mib, chunks):
    """A file a linked ingest links: "data", mib MiB of float32 in chunks chunks (linked through
    a chunk table), and "meta", 100 int32 that it copies (what each r+ changes)."""
    path = work / f"gl_src_{mib}m_{chunks}c.h5"
    if not path.exists():
        n = mib * (1 << 20) // 4
        per = n // chunks
        rng = np.random.default_rng(SEED)
        with h5py.File(path.with_suffix(".tmp"), "w") as f:
            d = f.create_dataset("data", (n,), "f4", chunks=(per,))
            for i in range(chunks):
                d[i * per:(i + 1) * per] = rng.random(per, dtype="f4")
            f["meta"] = np.arange(100, dtype="<i4")
        path.with_suffix(".tmp").rename(path)
    return path


def s3_bucket_bytes(bucket):
    """bucket_bytes of an S3 bucket, as its listing says (the store keeps no links: every
    object counts), by the same categories."""
    name = bucket.removeprefix("s3://")
    with S3.client() as c:
        listed = {k: size for k, size, _ in c.list_all(name)[0]}
    dom = json.loads(c_get(name, DOMAIN + "/.domain.json"))
    text = c_get(name, VDIR + "/.h5osfs-versions")
    vlist = json.loads(text) if text else {"versions": []}
    kind = {root_dir(dom["root"]): "current"}
    if "pool" in vlist:
        kind[root_dir(vlist["pool"])] = "pool"
    for v in vlist["versions"]:
        kind.setdefault(root_dir(v["root"]), "versions")
    out = dict.fromkeys(["current", "pool", "versions", "garbage", "rest"], 0)
    for key, size in listed.items():
        parts = key.split("/")
        k = kind.get(parts[1], "garbage") if len(parts) > 2 and parts[0] == "db" else "rest"
        out[k] += size
    return out


def c_get(bucket, key):
    with S3.client() as c:
        r = c.request("GET", bucket, key)
    return r.body if r.status == 200 else None


def any_bucket_bytes(bucket):
    return bucket_bytes(bucket) if isinstance(bucket, Path) else s3_bucket_bytes(bucket)


def gl(args, work):
    """--commits one-element r+ of "meta", alternating a versions=on mount and one without,
    both ingest=link: bucket bytes (each file once: a local bucket's copies are hard links)
    and close times; then every version checked on a fresh read-only mount."""
    src = gl_source(work, args.mib, args.chunks)
    log(f"GL: a linked {args.mib} MiB file, {args.commits} one-element r+ commits")
    arms = {}
    for label, opts in (("versions", "ingest=link," + args.versions_opts),
                        ("baseline", "ingest=link")):
        bucket = work / f"gl-{label}" / "bucket"
        shutil.rmtree(bucket.parent, ignore_errors=True)
        bench_cp.make_bucket(bucket)
        if S3 is not None:
            s3_load_fresh(f"gl-{label}", bucket)
            bucket = f"s3://gl-{label}"
        m = Mounted(bucket, work / f"gl-{label}" / "mnt", work / f"gl-{label}" / "cache",
                    work / f"gl-{label}" / "h5osfs.log", opts)
        t0 = time.perf_counter()
        shutil.copyfile(src, m.path(DOMAIN))
        log(f"  {label}: cp {time.perf_counter() - t0:.1f} s")
        arms[label] = {"bucket": bucket, "mount": m, "close": []}
    try:
        for i in range(1, args.commits + 1):
            for label in ("versions", "baseline") if i % 2 else ("baseline", "versions"):
                t0 = time.perf_counter()
                with h5py.File(arms[label]["mount"].path(DOMAIN), "r+") as f:
                    f["meta"][i % 100] = -i
                    t1 = time.perf_counter()
                arms[label]["close"].append(time.perf_counter() - t1)
    finally:
        for a in arms.values():
            a["mount"].stop()
    final = {k: any_bucket_bytes(a["bucket"]) for k, a in arms.items()}
    for k, b in final.items():
        log(f"  after the unmount, {k}: {described(b)}; close median "
            f"{statistics.median(arms[k]['close']):.2f} s")
    m = Mounted(arms["versions"]["bucket"], work / "gl-check" / "mnt", work / "gl-check" / "cache",
                work / "gl-check" / "h5osfs.log", "ro", fresh_cache=True)
    try:
        with h5py.File(src, "r") as f:
            data = f["data"][()]
        for number in sorted({1, args.commits // 2 + 1, args.commits + 1}):
            meta = np.arange(100, dtype="<i4")
            for i in range(1, number):
                meta[i % 100] = -i
            with h5py.File(m.path(f"{VDIR}/{number}.h5"), "r") as f:
                ok = np.array_equal(f["meta"][()], meta) and np.array_equal(f["data"][()], data)
            log(f"  check: version {number} {'has exactly its values' if ok else 'DIFFERS'}")
            assert ok
    finally:
        m.stop()
    return final, arms


def on_store(args, part):
    """part(args, work) with S3 the test server (--s3), started for it and stopped after."""
    global S3
    if args.s3:
        S3 = harness.S3Server(args.work / "s3")
    try:
        return part(args, args.work)
    finally:
        if S3 is not None:
            S3.stop()
            S3 = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path,
                    default=Path(tempfile.gettempdir()) / "h5osfs-bench-versions")
    ap.add_argument("--only", default="G1,G2,G4")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--chunks", type=int, default=1024)
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--big-chunks", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--current", choices=("root", "ref"), default="root")
    ap.add_argument("--s3", action="store_true",
                    help="G2 and GL on s3rver (tests/s3), not local")
    args = ap.parse_args()
    args.versions_opts = "versions=on" + (",versions_current=ref" if args.current == "ref"
                                          else "")
    args.work.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    log(f"h5osfs {hashlib.md5(Path(harness.h5osfs_bin()).read_bytes()).hexdigest()[:12]}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
        f"versioned arm: {args.versions_opts}")
    if "G1" in only or "G4" in only:
        rows, arms = g1(args, args.work)
        last = rows[-1][1]
        ratio = kept(last["baseline"]) / kept(last["versions"])
        log(f"G1 result: {gib(kept(last['versions']))} with versions, "
            f"{gib(kept(last['baseline']))} without (ratio {ratio:.2f}); "
            f"goal <= 1.15x the domain's {args.mib} MiB; close median "
            f"{statistics.median(arms['versions']['close']):.2f} s vs "
            f"{statistics.median(arms['baseline']['close']):.2f} s")
        if "G4" in only:
            runs = g4(args, args.work, arms["versions"]["bucket"], args.commits + 1)
            v, c = statistics.median(runs["version"]), statistics.median(runs["current"])
            log(f"G4 result: median {v:.2f} s version, {c:.2f} s current (ratio {c / v:.2f})")
    if "GL" in only:
        final, arms = on_store(args, gl)
        v, b = kept(final["versions"]), kept(final["baseline"])
        log(f"GL result: {gib(v)} with versions, {gib(b)} without (ratio {b / v:.2f}); close "
            f"median {statistics.median(arms['versions']['close']):.2f} s vs "
            f"{statistics.median(arms['baseline']['close']):.2f} s")
    if "G2" in only:
        first, runs = on_store(args, g2)
        v, b = runs["versions"], runs["baseline"]
        log(f"G2 result: median close {statistics.median(r['close'] for r in v):.2f} s with "
            f"versions, {statistics.median(r['close'] for r in b):.2f} s without; median "
            f"requests {statistics.median(r['total'] for r in v):.0f} vs "
            f"{statistics.median(r['total'] for r in b):.0f}; goal <= 100 requests + changed "
            f"chunks, <= 1 s")


if __name__ == "__main__":
    main()
