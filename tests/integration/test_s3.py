"""The S3 backend (src/store/s3*.c) through the real daemon on a real FUSE mount, against a real
S3 server and a fault-injecting proxy. Every test runs on both servers of the suite: [s3] on
s3rver behind a SigV4 verifier (tests/s3/server.js), [rgw] on Ceph RGW (tests/s3/rgw.py).

The reference is a mount of the same fixture bucket as a POSIX directory: an S3 mount must show
the same tree (names, kinds, modes, times, sizes) and serve byte-identical HDF5 images, whatever
the backend. Faults must be retried into correct bytes or, once retries are exhausted, give EIO
in bounded time with one log line naming the key, while the daemon keeps serving.

Every mount here is started by S3Mounts (not conftest's Mount: an S3 daemon needs its own
environment) as a harness.Daemon: h5osfs -f -o log_file=..., AWS_* from the test server, HOME in
a temporary directory (no ~/.aws of the machine's); on teardown harness's checks, as for every
mount of the suite: unmounted, exit status 0, no secret in its log or its standard error, no
sanitizer report.
"""
import errno
import hashlib
import http.server
import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import pytest

import conftest
import harness
from s3fixtures import FIXTURE_BUCKET, PUBLIC_BUCKET, load_bucket

pytestmark = pytest.mark.backends("s3", "rgw")

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "data" / "hsds-v2" / "source"
HOME = "home/test_user1"
USER = ("-o", "user=test_user1")
DOMAINS = ["partial", "sample1", "sample2", "sample2_z_zstd", "sample3", "sample3_z_gzip",
           "sample3_z_lz4", "sample_fastlink", "sample_link"]
ERROR_LINE = re.compile(r"^\S+ h5osfs\[\d+\] error: ", re.M)


h5osfs_bin = harness.h5osfs_bin
run_refused = harness.run_refused


def error_lines(text):
    return [l for l in text.splitlines() if ERROR_LINE.match(l)]


def unexpected_errors(text):
    """Error lines but those of a bucket not called hsdstest: its linked domains' file_uri
    names no key of it (assert_tree_equal), which their first stat, building them, reports."""
    return [l for l in error_lines(text)
            if not ("file_uri \"hsdstest/linked/sample_link.h5\" is not a key of this bucket"
                    in l)]


# ---- running the daemon ----

def start_daemon(bucket, mnt, workdir, args, env, secrets=()):
    """h5osfs on mnt, with its log, stderr and a cache_dir of its own (as conftest's mounts)
    in workdir."""
    if not conftest.names_cache_dir(args):
        args = ["-o", f"cache_dir={Path(workdir) / mnt.name}.cache", *args]
    return harness.Daemon(args, bucket, mnt, Path(workdir) / f"{mnt.name}.log", env=env,
                          secrets=secrets)


@pytest.fixture(scope="session")
def clean_home(tmp_path_factory):
    """An empty HOME: the daemon must not find the machine's ~/.aws."""
    return tmp_path_factory.mktemp("home")


def daemon_env(home, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(home)
    env["XDG_CACHE_HOME"] = str(Path(home) / ".cache")
    env.update(extra or {})
    return env


class S3Mounts:
    def __init__(self, tmp_path, home, server):
        self.tmp_path, self.home, self.server = tmp_path, home, server
        self.mounts = []

    def start(self, bucket, *args, endpoint=None, env=None, creds=True, secrets=(),
              user=True):
        """bucket: "s3://..." or a directory; endpoint None = the server itself (S3 only);
        env: more variables; creds: AWS_* of the test server in the environment."""
        extra = dict(self.server.env()) if creds else {}
        extra.update(env or {})
        opts = list(USER) if user else []
        if str(bucket).startswith("s3://"):
            opts += ["-o", f"endpoint={endpoint or self.server.endpoint}"]
        mnt = self.tmp_path / f"mnt{len(self.mounts)}"
        mnt.mkdir()
        d = start_daemon(bucket, mnt, self.tmp_path, opts + list(args),
                         daemon_env(self.home, extra), [self.server.secret_key, *secrets])
        self.mounts.append(d)
        return d


@pytest.fixture
def s3_mount(tmp_path, clean_home, s3_server):
    """Factory: s3_mount(bucket, *args, endpoint=, env=, creds=, secrets=) -> harness.Daemon;
    every daemon gets harness's teardown."""
    mounts = S3Mounts(tmp_path, clean_home, s3_server)
    yield mounts.start
    harness.assert_clean(mounts.mounts)


# ---- what a mount shows ----

def tree(root):
    """{relative path: (kind, permission bits, mtime_ns, ctime_ns, size before any open,
    xattrs)} of every entry below root."""
    out = {}
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = os.lstat(p)
            xattrs = {n: os.getxattr(p, n) for n in sorted(os.listxattr(p))}
            out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                             st.st_mtime_ns, st.st_ctime_ns, st.st_size, xattrs)
    return out


def open_sizes(root):
    """{relative path: size seen through an open descriptor} of every regular file."""
    sizes = {}
    for rel, (kind, mode, *_rest) in tree(root).items():
        if kind == stat.S_IFREG and mode:
            fd = os.open(Path(root) / rel, os.O_RDONLY)
            try:
                sizes[rel] = os.fstat(fd).st_size
            finally:
                os.close(fd)
    return sizes


def sha256_path(path, bufsize=1 << 20):
    h, n = hashlib.sha256(), 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, bufsize)
            if not b:
                return h.hexdigest(), n
            h.update(b)
            n += len(b)
    finally:
        os.close(fd)


def domain_file(m, domain):
    return m.path(f"{HOME}/{domain}.h5")


def domain_shas(m, domains=DOMAINS):
    return {d: sha256_path(domain_file(m, d)) for d in domains}


class Reference:
    """What the POSIX mount of the fixture bucket shows: the truth for every S3 mount."""


@pytest.fixture(scope="module")
def ref(tmp_path_factory, clean_home):
    """The fixture bucket mounted as a directory: its tree before any open, the sizes once
    open, every domain's bytes, and where each dataset of sample3 lies in its image."""
    work = tmp_path_factory.mktemp("posix")
    mnt = work / "mnt"
    mnt.mkdir()
    d = start_daemon(FIXTURE_BUCKET, mnt, work, USER, daemon_env(clean_home))
    try:
        r = Reference()
        r.tree = tree(mnt)
        r.sizes = open_sizes(mnt)
        r.tree_after = tree(mnt)
        r.shas = domain_shas(d)
        r.extents = {}          # sample3: dataset -> (offset, length) of its one chunk
        r.extent_sha = {}
        with h5py.File(domain_file(d, "sample3"), "r") as f:
            for name in ("ramp_i32", "noise_f32", "smooth_f64_contig", "zeros_i16",
                         "sub/small_u16"):
                ds = f[name]
                assert ds.id.get_num_chunks() == 1
                info = ds.id.get_chunk_info(0)
                r.extents[name] = (info.byte_offset, info.size)
        fd = os.open(domain_file(d, "sample3"), os.O_RDONLY)
        try:
            for name, (off, n) in r.extents.items():
                r.extent_sha[name] = hashlib.sha256(os.pread(fd, n, off)).hexdigest()
        finally:
            os.close(fd)
        r.h5ls = {}
        for dom in ("sample3", "sample1"):
            p = subprocess.run(["h5ls", "-r", str(domain_file(d, dom))], capture_output=True,
                               text=True, timeout=60)
            assert p.returncode == 0, p.stderr
            r.h5ls[dom] = p.stdout
        assert not error_lines(d.log()), d.log()
    except BaseException:
        d.unmount()
        raise
    yield r
    harness.assert_clean([d])


LINKED = {f"{HOME}/sample_link.h5", f"{HOME}/sample_fastlink.h5"}


def assert_tree_equal(got, want, bucket="hsdstest"):
    """Equal entries. In a bucket not called hsdstest, the linked domains' file_uri
    ("hsdstest/linked/...") names no file of the mount: their datasets read EIO, so their
    files (and sizes) differ; everything else of them must not."""
    assert sorted(got) == sorted(want), "different names"
    size = 4

    def comparable(p, entry):
        return entry[:size] + entry[size + 1:] if bucket != "hsdstest" and p in LINKED else entry
    diffs = {p: (got[p], want[p]) for p in want
             if comparable(p, got[p]) != comparable(p, want[p])}
    assert not diffs, f"entries that differ (S3, POSIX): {diffs}"


# ---- reading in a child process (a read that hangs cannot hang the test) ----

READER = r"""
import hashlib, json, mmap, os, sys, time
path, off, length, direct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
out = {}
t = time.monotonic()
try:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        if direct:   # one aligned read: one FUSE request, the kernel's page cache bypassed
            start = off - off % 4096
            end = -(-(off + length) // 4096) * 4096
            buf = mmap.mmap(-1, end - start)
            os.lseek(fd, start, 0)
            n = os.readv(fd, [buf])
            data = bytes(buf[off - start:min(n, off - start + length)])
        else:
            parts, done = [], 0
            while done < length:
                b = os.pread(fd, length - done, off + done)
                if not b:
                    break
                parts.append(b)
                done += len(b)
            data = b"".join(parts)
    finally:
        os.close(fd)
    out["sha"] = hashlib.sha256(data).hexdigest()
    out["len"] = len(data)
except OSError as e:
    out["errno"] = e.errno
out["elapsed"] = time.monotonic() - t
print(json.dumps(out))
"""

H5PY_READER = r"""
import json, sys, time
import h5py
out = {}
with h5py.File(sys.argv[1], "r") as f:
    ds = f[sys.argv[2]]
    t = time.monotonic()
    try:
        ds[()]
        out["ok"] = True
    except OSError as e:
        out["error"] = str(e)
    out["elapsed"] = time.monotonic() - t
print(json.dumps(out))
"""


def child_read(path, off, length, direct=False, timeout=60):
    """-> {"sha", "len"} or {"errno"}, with "elapsed" seconds of the read itself."""
    t = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", READER, str(path), str(off), str(length),
                            "1" if direct else "0"], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a read of {path} hung for {time.monotonic() - t:.0f} s")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


# ---- the fixture bucket's keys ----

@pytest.fixture(scope="module")
def sample3_keys(s3_bucket):
    """The keys of sample3.h5 in the bucket, found with an S3 listing: {"domain": the
    .domain.json key, "root": db/<root>/, "chunks": {dataset name: chunk key}}."""
    dom_key = f"{HOME}/sample3.h5/.domain.json"
    with s3_bucket.server.client() as c:
        doc = json.loads(c.get_object(s3_bucket.name, dom_key).check().body)
        root = doc["root"]                           # g-AAAAAAAA-BBBBBBBB-...
        prefix = "db/" + "-".join(root.split("-")[1:3]) + "/"
        keys, _ = c.list_all(s3_bucket.name, prefix=prefix)
        group = json.loads(c.get_object(s3_bucket.name, prefix + ".group.json").check().body)
    by_id = {link["id"]: name for name, link in group["links"].items() if "id" in link}
    chunks = {}
    for key, size, _ in keys:
        m = re.fullmatch(re.escape(prefix) + r"d/([0-9a-f-]+)/(\d+(?:_\d+)*)", key)
        if not m:
            continue
        ds_id = "d-" + "-".join(root.split("-")[1:3]) + "-" + m.group(1)
        if ds_id in by_id:
            chunks[by_id[ds_id]] = key
    assert "ramp_i32" in chunks and "noise_f32" in chunks, (keys, by_id)
    return {"domain": dom_key, "root": prefix, "chunks": chunks,
            "objects": {k: s for k, s, _ in keys}}


def copy_objects(server, src_bucket, dst_bucket, keys, rename=lambda k: k):
    """Copies objects between buckets of the test server, in 8 threads."""
    keys = list(keys)

    def work(part):
        with server.client() as c:
            for k in part:
                data = c.get_object(src_bucket, k).check().body
                c.put_object(dst_bucket, rename(k), data)
    threads = [threading.Thread(target=work, args=(keys[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# ==== 1. the tree and the bytes equal the POSIX mount's ====

def test_tree_and_bytes_equal_posix(s3_bucket, ref, s3_mount):
    m = s3_mount(s3_bucket.url)
    assert_tree_equal(tree(m.mnt), ref.tree)            # sizes before any open: exact
    assert open_sizes(m.mnt) == ref.sizes
    assert_tree_equal(tree(m.mnt), ref.tree_after)
    shas = domain_shas(m)
    assert shas == ref.shas
    for dom, (_, n) in shas.items():
        assert n == ref.sizes[f"{HOME}/{dom}.h5"]
    assert not error_lines(m.log()), m.log()


# ==== 2. h5diff against the source files ====

@pytest.mark.parametrize("domain", ["sample3", "sample2", "sample_link"])
def test_h5diff_equals_source(s3_bucket, fault_proxy, s3_mount, domain):
    """Through the proxy (no faults): sample_link's linked layouts must read ranges of the
    linked file linked/sample_link.h5 from the server."""
    linked = fault_proxy.add_rule("error", method="GET", key="/linked/sample_link.h5",
                                  times=0)        # counts, never fires
    m = s3_mount(s3_bucket.url, endpoint=fault_proxy.endpoint)
    p = subprocess.run(["h5diff", str(SOURCE / f"{domain}.h5"), str(domain_file(m, domain))],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    seen = [r for r in fault_proxy.rules() if r["id"] == linked["id"]][0]["seen"]
    if domain == "sample_link":
        assert seen > 0, "no GET of linked/sample_link.h5 went to the server"
    else:
        assert seen == 0
    assert not error_lines(m.log()), m.log()


# ==== 3. faults on a chunk ====

FAULTS = {
    "500": ({"action": "error"}, r"HTTP 500 InternalError"),
    "503-slowdown": ({"action": "slowdown"}, r"HTTP 503 SlowDown"),
    "429": ({"action": "error", "status": 429, "code": "TooManyRequests",
             "message": "Please slow down."}, r"HTTP 429 TooManyRequests"),
    "drop": ({"action": "drop"}, r"Server returned nothing"),
    "reset": ({"action": "reset"},
              r"Failure when receiving data from the peer|Server returned nothing|"
              r"Send failure|Connection reset"),
    "truncate": ({"action": "truncate"}, r"Transferred a partial file"),
    "delay": ({"action": "delay", "delay": 6.0}, r"Timeout was reached"),
}
# Request timeouts: 2 s only where the fault is a delay the daemon must give up on (6 s, three
# times the timeout: at a load average of 33 a 1 s timeout before a 3 s delay failed
# test_metadata_fault_twice_is_retried[s3-listing-delay] once); else 10 s. At a load average of 30, s3rver's answers to requests no rule touched took over 1 s:
# timeout=1 failed them after their retries, and a listing lost the domains whose .domain.json
# timed out (test_chunk_fault_always_gives_eio[s3-truncate], 1 of 6 runs).
def timeout_for(fault):
    return 2 if fault == "delay" else 10


def fast(fault):
    return ("-o", f"timeout={timeout_for(fault)}")


def exhaust(fault):
    return ("-o", f"retries=2,retry_time=10,timeout={timeout_for(fault)}")


@pytest.mark.parametrize("fault", list(FAULTS))
def test_chunk_fault_twice_is_retried(s3_bucket, ref, sample3_keys, fault_proxy, s3_mount,
                                      fault):
    key = sample3_keys["chunks"]["ramp_i32"]
    rule = fault_proxy.add_rule(**FAULTS[fault][0], method="GET", key=key, times=2)
    m = s3_mount(s3_bucket.url, *fast(fault), endpoint=fault_proxy.endpoint)
    r = child_read(domain_file(m, "sample3"), 0, ref.sizes[f"{HOME}/sample3.h5"])
    assert "errno" not in r, f"the read failed: {os.strerror(r['errno'])}\n{m.log()}"
    assert r["sha"] == ref.shas["sample3"][0]
    assert fault_proxy.fired(rule["id"]) == 2
    assert not error_lines(m.log()), m.log()
    m.assert_serving()


@pytest.mark.parametrize("fault", list(FAULTS))
def test_chunk_fault_always_gives_eio(s3_bucket, ref, sample3_keys, fault_proxy, s3_mount,
                                      fault):
    """Retries exhausted: one read (one FUSE request: O_DIRECT) fails with EIO in bounded time,
    one error line names the key and the status or curl error; the daemon keeps serving, and
    the chunk reads again once the server recovers (a failure is not cached)."""
    key = sample3_keys["chunks"]["ramp_i32"]
    spec, pattern = FAULTS[fault]
    rule = fault_proxy.add_rule(**spec, method="GET", key=key, times=None)
    m = s3_mount(s3_bucket.url, *exhaust(fault), endpoint=fault_proxy.endpoint)
    path = domain_file(m, "sample3")
    off, n = ref.extents["ramp_i32"]
    r = child_read(path, off, n, direct=True)
    assert r.get("errno") == errno.EIO, r
    assert r["elapsed"] < 20, r
    lines = error_lines(m.log())
    assert len(lines) == 1, m.log()
    assert f"hsdstest/{key}" in lines[0] and re.search(pattern, lines[0]), lines[0]
    fired = fault_proxy.fired(rule["id"])
    # 1 + retries=2 attempts (curl itself may resend once on a reused connection that died)
    assert 3 <= fired <= (6 if fault in ("drop", "reset") else 3), fired

    # still serving: the other datasets, another domain, listings
    for name, (o, k) in ref.extents.items():
        if name != "ramp_i32":
            assert child_read(path, o, k)["sha"] == ref.extent_sha[name], name
    assert sha256_path(domain_file(m, "sample1")) == ref.shas["sample1"]
    assert sorted(os.listdir(m.path(HOME))) == sorted(f"{d}.h5" for d in DOMAINS)
    m.assert_serving()
    # the server recovers: once the daemon's memory of the failure (1 s) has passed, the
    # chunk reads, right
    fault_proxy.remove_rule(rule["id"])
    time.sleep(1.2)
    r = child_read(path, off, n)
    assert r.get("sha") == ref.extent_sha["ramp_i32"], (r, m.log())


# The failure memory of the test below, in place of the daemon's 1 s (src/main/stack.c): the
# kernel's re-read of the page must meet the memory however late a loaded machine delivers it.
REMEMBERED = {"H5OSFS_TEST_CHUNK_RETRY_AFTER": "3600"}


def test_failed_dataset_read_logs_once_within_bound(s3_bucket, ref, sample3_keys, fault_proxy,
                                                    s3_mount):
    """A reader's read of the dataset (h5py: through the page cache) whose chunk always times
    out: EIO, one error line for the key, and no more attempts than fit in the configured
    bound (retry_time), however many retries are allowed. The kernel re-reads the page at
    once: that READ is answered from the failure just remembered, and starts no second round
    of attempts with a second line (the memory is made an hour long, so that this holds however
    late the re-read comes)."""
    key = sample3_keys["chunks"]["ramp_i32"]
    rule = fault_proxy.add_rule("delay", delay=3.0, method="GET", key=key, times=None)
    retry_time, timeout = 3, 1
    m = s3_mount(s3_bucket.url, "-o", f"retries=20,retry_time={retry_time},timeout={timeout}",
                 endpoint=fault_proxy.endpoint, env=REMEMBERED)
    t = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", H5PY_READER, str(domain_file(m, "sample3")),
                            "ramp_i32"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"h5py's read hung for {time.monotonic() - t:.0f} s")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert "errno = 5" in r.get("error", ""), r
    log = m.log()
    lines = error_lines(log)
    fired = fault_proxy.fired(rule["id"])
    assert lines and all(f"hsdstest/{key}" in l and "Timeout was reached" in l
                         for l in lines), log
    assert "test hook H5OSFS_TEST_CHUNK_RETRY_AFTER=3600" in log, log
    problems = []
    if len(lines) != 1:
        problems.append(f"{len(lines)} error lines for one failed read(2) while its failure was "
                        f"remembered; {fired} GETs of the key")
    # an attempt lasts at least timeout (curl's low-speed window), so retry_time leaves room
    # for 3 of the 21 that retries=20 allows
    most = retry_time // timeout
    attempts = [int(re.search(r"after (\d+) attempts?", l).group(1)) for l in lines]
    if max(attempts) > most or not len(lines) <= fired <= most * len(lines):
        problems.append(f"{attempts} attempts logged, {fired} GETs of the key; at most {most} "
                        f"a round fit in retry_time={retry_time} with timeout={timeout}")
    assert not problems, "; ".join(problems) + "\n" + log
    m.assert_serving()


# ==== 4. faults on listings and on .domain.json ====

META_FAULTS = [
    ("listing", "error"), ("listing", "slowdown"), ("listing", "reset"),
    ("listing", "truncate"), ("listing", "delay"),
    ("domain", "error"), ("domain", "drop"), ("domain", "truncate"), ("domain", "delay"),
]


@pytest.mark.parametrize("target,action", META_FAULTS, ids=[f"{t}-{a}" for t, a in META_FAULTS])
def test_metadata_fault_twice_is_retried(s3_bucket, ref, fault_proxy, s3_mount, target, action):
    spec = FAULTS["delay"][0] if action == "delay" else {"action": action}
    where = {"query": "list-type=2"} if target == "listing" else {"key": "/.domain.json"}
    rule = fault_proxy.add_rule(**spec, method="GET", times=2, **where)
    m = s3_mount(s3_bucket.url, *fast(action), endpoint=fault_proxy.endpoint)
    assert_tree_equal(tree(m.mnt), ref.tree)
    assert fault_proxy.fired(rule["id"]) == 2
    assert not error_lines(m.log()), m.log()
    assert os.stat(domain_file(m, "sample1")).st_mtime_ns == ref.tree[f"{HOME}/sample1.h5"][2]


def test_a_domain_the_store_fails_to_describe_is_listed_and_fails_alone(s3_bucket, ref,
                                                                        fault_proxy, s3_mount):
    """A listing once left out a domain whose .domain.json GET failed, and kept that listing
    for ttl: to `ls` or a sync tool the domain was gone. Now it is listed by name (type
    unknown), its stat fails with EIO alone, and the listing is not kept: once the store
    answers, the domain is back at once, well within ttl."""
    key = f"/{HOME}/sample1.h5/.domain.json"
    rule = fault_proxy.add_rule("error", method="GET", key=key, times=None)
    m = s3_mount(s3_bucket.url, "-o", "ttl=600,retries=1,retry_time=2,timeout=10",
                 endpoint=fault_proxy.endpoint)
    home = m.path(HOME)
    want = sorted(p.split("/")[-1] for p in ref.tree if p.startswith(HOME + "/")
                  and "/" not in p[len(HOME) + 1:])
    assert sorted(os.listdir(home)) == want
    with pytest.raises(OSError) as e:
        os.stat(domain_file(m, "sample1"))
    assert e.value.errno == errno.EIO
    assert stat.S_ISREG(os.stat(domain_file(m, "sample2")).st_mode)
    assert fault_proxy.fired(rule["id"]) >= 2
    lines = error_lines(m.log())
    assert lines and all("sample1.h5/.domain.json" in l for l in lines), m.log()
    fault_proxy.remove_rule(rule["id"])
    assert sorted(os.listdir(home)) == want
    st = os.stat(domain_file(m, "sample1"))
    assert st.st_mtime_ns == ref.tree[f"{HOME}/sample1.h5"][2]
    m.assert_serving()


def test_a_listing_that_keeps_failing_is_eio_and_its_log_line_names_the_prefix(
        s3_bucket, fault_proxy, s3_mount):
    """A folder whose listing the store keeps failing: EIO for that folder, and one log line
    saying which listing (it named the bucket alone: "s3 GET hsdstest/: HTTP 500 ...")."""
    m = s3_mount(s3_bucket.url, "-o", "ttl=0,retries=1,retry_time=2,timeout=10",
                 endpoint=fault_proxy.endpoint)          # the mount's own probe lists too
    rule = fault_proxy.add_rule("error", method="GET", query="list-type=2", times=None)
    with pytest.raises(OSError) as e:
        os.listdir(m.path(HOME))
    assert e.value.errno == errno.EIO
    assert fault_proxy.fired(rule["id"]) >= 2
    lines = error_lines(m.log())
    assert lines and all(f" LIST {s3_bucket.name}/" in l and "HTTP 500" in l
                         for l in lines), m.log()
    assert any(f"{HOME}/" in l for l in lines), m.log()
    fault_proxy.remove_rule(rule["id"])
    m.assert_serving()


def test_rmdir_of_a_folder_whose_child_the_store_fails_to_describe_is_enotempty(
        s3_bucket, fault_proxy, s3_mount):
    """rmdir decides emptiness from the listing: when a failed GET left the child out, the
    folder object was deleted with a folder below it. As admin (who may delete /home)."""
    rule = fault_proxy.add_rule("error", method="GET", key="/home/test_user1/.domain.json",
                                times=None)
    m = s3_mount(s3_bucket.url, "-o", "user=admin,retries=1,retry_time=2,timeout=10",
                 endpoint=fault_proxy.endpoint)
    with pytest.raises(OSError) as e:
        os.rmdir(m.path("home"))
    assert e.value.errno == errno.ENOTEMPTY
    assert fault_proxy.fired(rule["id"]) >= 1
    fault_proxy.remove_rule(rule["id"])
    assert os.listdir(m.path("home")) == ["test_user1"]
    assert stat.S_ISDIR(os.stat(m.path("home")).st_mode)


# ==== 5. refused credentials, a missing bucket, no server: the mount is refused ====

WRONG_SECRET = "Wr0ng/Secret+Key=ABCDEFGHIJKLMNOPQRSTUVWXYZ"
OTHER_SECRET = "Some/Other+Secret=0123456789abcdefghijklmn"
REFUSED = {
    # the test server verifies SigV4 signatures (tests/s3/sigv4.js), as AWS and Ceph RGW do
    "wrong-secret": ({"AWS_SECRET_ACCESS_KEY": WRONG_SECRET}, "hsdstest",
                     r"credentials refused by {url}: HTTP 403 SignatureDoesNotMatch: the server "
                     r"refused the request signature \(wrong secret key\?\)"),
    "unknown-key": ({"AWS_ACCESS_KEY_ID": "NOSUCHACCESSKEY00000",
                     "AWS_SECRET_ACCESS_KEY": OTHER_SECRET}, "hsdstest",
                    r"credentials refused by {url}: HTTP 403 InvalidAccessKeyId: \S.*"),
    "no-such-bucket": ({}, "h5osfs-no-such-bucket",
                       r"no such bucket at {url}: HTTP 404 NoSuchBucket{message}"),
}
# The server's <Message>, after the code: Ceph RGW sends it empty (and h5osfs then says "access
# denied" after a 403's code, nothing after others').
MESSAGE = {"s3": r": \S.*", "rgw": ""}


def start_refused(server, home, tmp_path, bucket, *args, endpoint=None, env=None):
    """An S3 mount that must be refused at start: -> (status, the stderr line)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "h5osfs.log"
    cmd = [h5osfs_bin(), "-f", "-o", f"log_file={log}", "-o", f"cache_dir={tmp_path}/cache",
           *USER, "-o", f"endpoint={endpoint or server.endpoint}", *args, bucket, mnt]
    rc, err = run_refused(cmd, daemon_env(home, {**server.env(), **(env or {})}), mnt,
                          timeout=30)
    assert not os.listdir(mnt)
    for secret in (server.secret_key, WRONG_SECRET, OTHER_SECRET):
        assert secret not in err and (not log.exists() or secret not in log.read_text())
    lines = err.splitlines()
    assert len(lines) == 1, lines
    return rc, lines[0]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_at_mount_with_one_line(s3_bucket, s3_server, clean_home, tmp_path, case,
                                        backend):
    """Issue 12: a wrong secret key let the mount start and failed every request afterwards.
    One listing at mount fails it instead: status 1, one line with the bucket, its URL and the
    S3 error code."""
    env, bucket, expect = REFUSED[case]
    rc, line = start_refused(s3_server, clean_home, tmp_path, f"s3://{bucket}", env=env)
    assert rc == 1, line
    url = re.escape(f"{s3_server.endpoint}/{bucket}")
    expect = expect.format(url=url, message=MESSAGE[backend])
    assert re.fullmatch(rf"h5osfs: S3 bucket 's3://{bucket}': " + expect, line), line


@pytest.fixture
def refusing_port():
    """A port of 127.0.0.1 that refuses connections for the whole test: bound and never
    listened on. A port only found free and let go (bind, close) may be taken meanwhile by
    any server or outgoing connection of the machine (other suites run beside this one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_unreachable_endpoint_is_refused_at_mount(s3_server, clean_home, tmp_path,
                                                  refusing_port):
    endpoint = f"http://127.0.0.1:{refusing_port}"
    t = time.monotonic()
    rc, line = start_refused(s3_server, clean_home, tmp_path, "s3://hsdstest", "-o",
                             "retries=1", endpoint=endpoint)
    assert rc == 1, line
    assert re.fullmatch(rf"h5osfs: S3 bucket 's3://hsdstest': no usable answer from "
                        rf"{re.escape(endpoint)}/hsdstest: .+ after 2 attempts", line), line
    assert time.monotonic() - t < 15


class NotS3(http.server.BaseHTTPRequestHandler):
    """A web server that is not S3: 200 and a page for every GET."""

    def do_GET(self):
        body = b"<!DOCTYPE html><p>a web page, not an S3 listing"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_endpoint_that_is_not_s3_is_refused_at_mount(s3_server, clean_home, tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotS3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        rc, line = start_refused(s3_server, clean_home, tmp_path, "s3://hsdstest",
                                 endpoint=endpoint)
    finally:
        server.shutdown()
        server.server_close()
    assert rc == 1, line
    assert f"{endpoint}/hsdstest answered a bucket listing with something other than" in line


# ==== 6. where credentials come from ====

def write_profiles(tmp_path, server, name="h5test"):
    creds = tmp_path / "credentials"
    creds.write_text(
        "[default]\naws_access_key_id = NOTTHISKEY0000000000\n"
        "aws_secret_access_key = not/this+secret=either0000000000000000\n\n"
        f"# the test profile\n[{name}]\naws_access_key_id = {server.access_key}\n"
        f"aws_secret_access_key = {server.secret_key}\n")
    config = tmp_path / "config"
    config.write_text(f"[default]\nregion = us-east-1\n\n[profile {name}]\n"
                      f"region = {server.region}\n")
    return {"AWS_SHARED_CREDENTIALS_FILE": str(creds), "AWS_CONFIG_FILE": str(config)}


def assert_reads_fixture(m, ref, domains=("sample1", "sample3")):
    assert sorted(os.listdir(m.path(HOME))) == sorted(f"{d}.h5" for d in DOMAINS)
    for d in domains:
        assert sha256_path(domain_file(m, d)) == ref.shas[d], d
    assert not unexpected_errors(m.log()), m.log()


def test_kerchunk_references_read_over_http_with_no_mount(public_bucket, s3_server, s3_mount):
    """Issue 28 §2: with -o refs_url=http://SERVER/BUCKET a mount's references name the public
    bucket's objects by URL, and fsspec (reference file system over HTTP) + zarr read every
    dataset equal to the mount's .h5 after the mount is gone: no h5osfs, no HSDS, no keys."""
    import numpy as np
    fsspec = pytest.importorskip("fsspec", reason="python3-fsspec: scripts/install-deps.sh")
    zarr = pytest.importorskip("zarr", reason="python3-zarr: scripts/install-deps.sh")
    base = f"{s3_server.endpoint}/{public_bucket}"
    m = s3_mount(f"s3://{public_bucket}", "-o", "no_sign", "-o", f"refs_url={base}", creds=False)
    domains = ("sample1.h5", "sample2_z_zstd.h5", "sample3_z_gzip.h5", "partial.h5")
    refs, want = {}, {}
    for d in domains:
        refs[d] = json.loads(m.path(f".kerchunk/{HOME}/{d}").with_suffix(".h5.json").read_text())
        with h5py.File(m.path(f"{HOME}/{d}"), "r") as f:
            want[d] = {}
            f.visititems(lambda name, o: want[d].__setitem__(name, o[()])
                         if isinstance(o, h5py.Dataset) and o.dtype.kind in "iuf" else None)
    assert m.unmount() == 0
    urls = [v[0] for r in refs.values() for v in r["refs"].values() if isinstance(v, list)]
    assert urls and all(u.startswith(base + "/db/") for u in urls)
    for d in domains:
        fs = fsspec.filesystem("reference", fo=refs[d], remote_protocol="http")
        group = zarr.open_group(zarr.storage.KVStore(fs.get_mapper("")), mode="r")
        assert want[d], d
        for name, values in want[d].items():
            got = group[name][()]
            assert got.dtype == values.dtype and np.array_equal(got, values, equal_nan=True), \
                f"{d}: {name}"


def test_credentials_from_aws_profile(s3_bucket, s3_server, ref, s3_mount, tmp_path):
    env = write_profiles(tmp_path, s3_server)
    env["AWS_PROFILE"] = "h5test"
    m = s3_mount(s3_bucket.url, env=env, creds=False)
    assert_reads_fixture(m, ref)


@pytest.mark.parametrize("decoys", [False, True], ids=["alone", "over-env-keys"])
def test_credentials_from_profile_option(s3_bucket, s3_server, ref, s3_mount, tmp_path, decoys):
    """-o profile=NAME, also when AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (wrong ones) and
    AWS_PROFILE name something else: the explicit option wins, as with aws --profile."""
    env = write_profiles(tmp_path, s3_server)
    if decoys:
        env.update({"AWS_ACCESS_KEY_ID": "NOTTHISKEY1111111111",
                    "AWS_SECRET_ACCESS_KEY": "decoy/secret+1111111111111111111111111",
                    "AWS_PROFILE": "default"})
    m = s3_mount(s3_bucket.url, "-o", "profile=h5test", env=env, creds=False,
                 secrets=["decoy/secret+1111111111111111111111111"])
    assert_reads_fixture(m, ref)


def test_no_credentials_is_refused_before_mounting(s3_bucket, s3_server, clean_home, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "h5osfs.log"
    env = daemon_env(clean_home, {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                                  "AWS_CONFIG_FILE": str(tmp_path / "none")})
    cmd = [h5osfs_bin(), "-f", "-o", f"log_file={log}", *USER, "-o",
           f"endpoint={s3_server.endpoint}", s3_bucket.url, mnt]
    rc, err = run_refused(cmd, env, mnt)
    assert rc == 1
    assert len(err.splitlines()) == 1 and "credentials" in err, err
    assert not os.listdir(mnt)


@pytest.fixture
def public_bucket(s3_server):
    """The fixture loaded into the public bucket (unsigned GET/HEAD allowed), removed again
    after the test: other tests keep their own objects there."""
    summary = s3_server.load(PUBLIC_BUCKET, FIXTURE_BUCKET)
    assert summary["objects"] == len(load_bucket.local_objects(FIXTURE_BUCKET))
    yield PUBLIC_BUCKET
    with s3_server.client() as c:
        for key in load_bucket.local_objects(FIXTURE_BUCKET):
            c.delete_object(PUBLIC_BUCKET, key).check(f"DELETE {key}")


def test_no_sign_reads_public_bucket(public_bucket, ref, s3_mount):
    m = s3_mount(f"s3://{public_bucket}", "-o", "no_sign", creds=False)
    assert "anonymous listing refused" not in m.log()
    assert_tree_equal(tree(m.mnt), ref.tree, public_bucket)
    assert_reads_fixture(m, ref, domains=("sample1", "sample2", "sample3", "partial"))


def test_no_sign_on_private_bucket_gives_eacces(s3_bucket, s3_mount):
    """An anonymous mount whose listing is refused at mount still mounts (a public bucket may
    serve objects but no listing), with one warning; what needs a listing gets EACCES."""
    # with keys in the environment too: no_sign must not use them
    m = s3_mount(s3_bucket.url, "-o", "no_sign")
    warnings = [l for l in m.log().splitlines() if "anonymous listing refused" in l]
    assert len(warnings) == 1 and " warning: " in warnings[0], m.log()
    assert f"by {s3_bucket.endpoint}/{s3_bucket.name} (HTTP 403 AccessDenied" in warnings[0]
    with pytest.raises(PermissionError) as e:
        os.listdir(m.mnt)
    assert e.value.errno == errno.EACCES
    lines = error_lines(m.log())
    assert lines and all("HTTP 403 AccessDenied" in l for l in lines), m.log()
    m.assert_serving()


# ==== 7. a key prefix ====

@pytest.fixture(scope="module")
def prefixed_bucket(s3_bucket):
    server = s3_bucket.server
    name = server.new_bucket()
    copy_objects(server, s3_bucket.name, name, s3_bucket.sizes, rename=lambda k: "deep/er/" + k)
    with server.client() as c:
        keys, _ = c.list_all(name)
    assert len(keys) == len(s3_bucket.sizes)
    return name


@pytest.mark.parametrize("suffix", ["deep/er", "deep/er/"])
def test_key_prefix(prefixed_bucket, ref, s3_mount, suffix):
    m = s3_mount(f"s3://{prefixed_bucket}/{suffix}")
    assert_tree_equal(tree(m.mnt), ref.tree, prefixed_bucket)
    for d in ("sample1", "sample2", "sample3", "partial"):
        assert sha256_path(domain_file(m, d)) == ref.shas[d], d
    assert not unexpected_errors(m.log()), m.log()


# ==== 8. keys that need encoding ====

HOSTILE = ["a b+c=d%e ü.h5", "x%20y%2Bz.h5", "plus+eq=amp&semi;.h5", "q?h#é€~.h5"]
HOSTILE_FOLDER = "dir with space+eq=pct%25 ü"


@pytest.fixture(scope="module")
def hostile_bucket(s3_bucket, sample3_keys):
    """A bucket with sample3 under names that need URL encoding, in a folder whose name does
    too, and the folders above them."""
    server = s3_bucket.server
    name = server.new_bucket()
    copy_objects(server, s3_bucket.name, name,
                 ["home/.domain.json", f"{HOME}/.domain.json", *sample3_keys["objects"]])
    with server.client() as c:
        dom = c.get_object(s3_bucket.name, sample3_keys["domain"]).check().body
        folder = c.get_object(s3_bucket.name, f"{HOME}/.domain.json").check().body
        for n in HOSTILE:
            c.put_object(name, f"{HOME}/{n}/.domain.json", dom)
        c.put_object(name, f"{HOME}/{HOSTILE_FOLDER}/.domain.json", folder)
        c.put_object(name, f"{HOME}/{HOSTILE_FOLDER}/{HOSTILE[0]}/.domain.json", dom)
        keys = {k for k, _, _ in c.list_all(name)[0]}
    assert f"{HOME}/{HOSTILE[1]}/.domain.json" in keys
    return name


def test_hostile_key_names(hostile_bucket, ref, s3_mount):
    m = s3_mount(f"s3://{hostile_bucket}")
    assert sorted(os.listdir(m.path(HOME))) == sorted(HOSTILE + [HOSTILE_FOLDER])
    assert os.listdir(m.path(f"{HOME}/{HOSTILE_FOLDER}")) == [HOSTILE[0]]
    assert stat.S_ISDIR(os.stat(m.path(f"{HOME}/{HOSTILE_FOLDER}")).st_mode)
    ref_st = ref.tree[f"{HOME}/sample3.h5"]
    paths = [f"{HOME}/{n}" for n in HOSTILE] + [f"{HOME}/{HOSTILE_FOLDER}/{HOSTILE[0]}"]
    for rel in paths:
        p = m.path(rel)
        st = os.stat(p)
        assert (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_mtime_ns) == \
            ref_st[:3], rel
        r = subprocess.run(["h5ls", "-r", str(p)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (rel, r.stdout, r.stderr)
        assert r.stdout == ref.h5ls["sample3"], rel
        with h5py.File(p, "r") as f:
            off, n = ref.extents["ramp_i32"]
            assert f["ramp_i32"].id.get_chunk_info(0).byte_offset == off
        assert child_read(p, 0, 1 << 30)["sha"] == ref.shas["sample3"][0], rel
    assert not error_lines(m.log()), m.log()


# ==== 9. requests in flight ====

def test_max_requests_1_reads_everything(s3_bucket, ref, fault_proxy, s3_mount):
    m = s3_mount(s3_bucket.url, "-o", "max_requests=1", endpoint=fault_proxy.endpoint)
    assert_tree_equal(tree(m.mnt), ref.tree)
    results = {}

    def read(d):
        results[d] = sha256_path(domain_file(m, d))
    threads = [threading.Thread(target=read, args=(d,)) for d in DOMAINS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == ref.shas
    stats = fault_proxy.counters()
    assert stats["connections"] == 1, stats     # one request at a time, kept alive
    assert not error_lines(m.log()), m.log()


def test_max_requests_8_runs_requests_at_once(s3_bucket, ref, fault_proxy, s3_mount):
    """9 readers of 9 domains at once (and the read-ahead threads): several requests in
    flight, on several kept-alive connections, never more than max_requests."""
    m = s3_mount(s3_bucket.url, "-o", "max_requests=8", endpoint=fault_proxy.endpoint)
    results = {}

    def read(d):
        results[d] = sha256_path(domain_file(m, d))
    threads = [threading.Thread(target=read, args=(d,)) for d in DOMAINS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == ref.shas
    stats = fault_proxy.counters()
    assert 2 <= stats["connections"] <= 8, stats
    assert not error_lines(m.log()), m.log()


# ==== 10. refused command lines ====

BAD = [
    (["-o", "endpoint=ftp://x"], "s3://hsdstest", "endpoint"),
    (["-o", "max_requests=0"], "s3://hsdstest", "max_requests"),
    (["-o", "max_requests=1025"], "s3://hsdstest", "max_requests"),
    (["-o", "timeout=0"], "s3://hsdstest", "timeout"),
    (["-o", "retries=many"], "s3://hsdstest", "retries"),
    ([], "s3://Bad_Bucket!!", "Bad_Bucket"),
    ([], "s3://ab", "s3://ab"),
    ([], "s3://", "s3://"),
]


@pytest.mark.parametrize("args,bucket,mention", BAD,
                         ids=["ftp-endpoint", "max_requests=0", "max_requests=1025",
                              "timeout=0", "retries=many", "bad-bucket", "short-bucket",
                              "no-bucket"])
def test_bad_command_line(s3_server, clean_home, tmp_path, args, bucket, mention):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "h5osfs.log"
    cmd = [h5osfs_bin(), "-f", "-o", f"log_file={log}", *USER,
           *(["-o", f"endpoint={s3_server.endpoint}"] if "endpoint=ftp://x" not in args
             else []), *args, bucket, mnt]
    rc, err = run_refused(cmd, daemon_env(clean_home, s3_server.env()), mnt)
    assert rc == 1, err
    assert len(err.splitlines()) == 1 and mention in err, err
    assert s3_server.secret_key not in err
    assert not os.listdir(mnt)
