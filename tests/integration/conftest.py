"""pytest fixtures that run the real h5osfs binary on a real FUSE mount.

The binary is $H5OSFS_BIN, or build/h5osfs in the repository. Every mount is a harness.Daemon:
started in the foreground with a log file and a cache_dir of its own (a read-write mount locks
it: two on one cache_dir, or tests of another run on ~/.cache/h5osfs, would refuse each other),
waited for in /proc/self/mountinfo, and on teardown checked by harness as everywhere in the
suite: unmounted with fusermount3 (a busy mount is retried, a lazy unmount fails the test),
exit status 0, no secret in its log or stderr, no sanitizer report.

Backends. In a module marked `pytestmark = pytest.mark.backends("posix", "s3")` (the read-path
suite: test_namespace, test_bad_input, test_image, test_image_bad_input), every test that mounts
through mount_bucket, shared_mount or mount_source (or asks for `backend`) runs twice: [posix]
mounts the bucket directory itself, [s3] uploads that directory to a real S3 server (s3rver,
tests/s3) and mounts it from there. A module (or test) that also names "rgw" runs a third time
on Ceph RGW (tests/s3/rgw.py: a real S3 implementation, which checks signatures and
conditional writes; skipped with the reason when Ceph is not installed). Elsewhere these
fixtures mount the directory (posix), and test ids do not change. A module marked
backends("s3", "rgw") without mounts of its own (test_s3.py) gets its s3_server from the
backend (s3fixtures.py).

The S3 server of these runs is the session's one server, test_s3.py's too: a tenant of its own
on the session's s3rver (backend_s3) or RGW (backend_rgw), so that its bucket "hsdstest" is not
test_s3.py's s3_bucket. Its bucket "hsdstest" holds the read-only fixture under the prefix base/
(loaded once), and every other bucket directory a test mounts under a prefix of its own, c<n>/:
uploaded right before the mount, re-synchronised before every later mount of the same directory
(a copy that an earlier test left exactly as uploaded, checked in a listing, serves a later test
with the same files instead). The prefix mirrors the directory's parent:
tmp_path/bucket/hsdstest is c<n>/hsdstest/, and a neighbouring tmp_path/bucket/otherbucket is
c<n>/otherbucket/, so the S3 layout is the POSIX one. The bucket has to be called hsdstest with
every copy below a prefix: linked domains name their file "hsdstest/linked/sample_link.h5",
which the daemon resolves below the mount's prefix. A second bucket, "otherbucket", holds the
fixture's linked file (linked/sample_link.h5): a daemon that followed a file_uri out of its
bucket would read the right bytes there.

To change a bucket while it is mounted, tests use m.put(key, bytes), m.delete(key) and
m.delete_tree(prefix): they change the directory and, on s3, the objects. To prove that nothing
was changed, assert_unchanged(m, before) compares bucket_snapshot()s and, on s3, every object
(a listing: keys, sizes, ETags = MD5 of the stored bytes, Last-Modified).

A test that cannot run on S3 carries @pytest.mark.posix_only(reason="..."): its [s3] and [rgw]
instances are deselected, and the terminal summary lists them with the reason. One that cannot
run on some backends carries @pytest.mark.not_on("rgw", ..., reason="...") (the same, for
those backends).
"""
import concurrent.futures
import hashlib
import itertools
import os
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest

import claims
import cleanup
import fpmode
import harness
# Re-exported for the test modules, which import them from here.
from harness import (default_interrupt_signals, h5osfs_bin, is_mounted,  # noqa: F401
                     run_refused)

# --claims: the plain pass of scripts/test.sh as two processes sharing the tests.
from claims import pytest_runtestloop  # noqa: F401
# --remove-passed: a passed test's files removed while the run goes on (tmp_path noted).
from cleanup import pytest_runtest_makereport, pytest_runtest_protocol, tmp_path  # noqa: F401

# The S3 servers' fixtures (s3_server, s3_bucket, fault_proxy, rgw_server ...), for every module.
from s3fixtures import (fault_proxy, fixture_buckets, rgw_server, s3_bucket,  # noqa: F401
                        s3_server, s3rver_server)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
FIXTURE = DATA / "hsds-v2"
BUCKET = FIXTURE / "hsdstest"
SHARED = REPO.parent / "shared"

BACKENDS = ("posix", "s3", "rgw")
S3_BACKENDS = ("s3", "rgw")     # s3rver; Ceph RGW
S3_BUCKET = "hsdstest"          # linked domains name it in their file_uri
S3_BASE_PREFIX = "base/"        # the read-only fixture bucket
OTHER_BUCKET = "otherbucket"    # another bucket, holding the fixture's linked file
S3RVER_KEEP = ".s3rver-keep"    # see list_like_aws()


# ---- the backend parameter ----

def is_put_under_way(path):
    """A local bucket's temporary name (.h5osfs-tmp.*): an object being written, renamed into
    place a moment later. The domain summary is written after the close, so a walk of the
    bucket right after a commit may meet one."""
    return Path(path).name.startswith(".h5osfs-tmp.")


def pytest_addoption(parser):
    group = parser.getgroup("h5osfs")
    group.addoption(
        "--smoke", action="store_true",
        help="run one test of each module (its first, on posix where it has a posix instance): "
        "scripts/test.sh --quick")
    group.addoption(
        "--one-backend", action="store_true",
        help="run each backend-parametrised test once: its posix instance, or its first "
        "instance where it has none (S3-only tests); the sanitizer pass of scripts/test.sh")
    claims.add_option(parser)
    cleanup.add_option(parser)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "posix_only(reason): the test cannot run on the S3 backends (why, in "
        "reason=); its [s3] and [rgw] instances are deselected and listed in the summary")
    config.addinivalue_line(
        "markers", "not_on(*backends, reason): the test cannot run on these backends (why, in "
        "reason=); those instances are deselected and listed in the summary")
    config.addinivalue_line(
        "markers", "backends(*names): run the tests that mount on each of these backends "
        "(\"posix\", \"s3\", \"rgw\"), as the parameter `backend`")
    config.addinivalue_line(
        "markers", "store_independent(reason): what the test checks does not depend on the "
        "store (why, in reason=): its [s3] and [rgw] instances are deselected (issue 25: each "
        "behaviour once per backend where the backend matters)")
    config.addinivalue_line(
        "markers", "plain_pass_only(reason): an instance that runs the same daemon or store "
        "code as another instance of its test, only longer (why, in reason=): the sanitizer "
        "pass (--one-backend) deselects it, the plain pass runs it")
    cleanup.configure(config)
    config._h5osfs_posix_only = []
    config._h5osfs_store_independent = 0
    fpmode.load_plugins_then_restore()


@pytest.fixture(autouse=True)
def _subnormals_kept():
    """A test that ends in flush-to-zero mode may have compared subnormals as zeros."""
    yield
    if not fpmode.subnormals_kept():
        fpmode.restore_default()
        pytest.fail("the floating-point mode flushed subnormals to zero during the test "
                    "(a library linked with -ffast-math, see fpmode.py)")


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is not None and "backend" in metafunc.fixturenames:
        unknown = set(marker.args) - set(BACKENDS)
        if unknown or not marker.args:
            raise pytest.UsageError(f"backends{marker.args}: known are {BACKENDS}")
        metafunc.parametrize("backend", marker.args, indirect=True, scope="module")


def excluded_backends(item):
    """{backend: why not} from item's posix_only and not_on markers."""
    excluded = {}
    for name, backends in (("posix_only", S3_BACKENDS), ("not_on", None)):
        for marker in item.iter_markers(name):
            reason = marker.kwargs.get("reason") or (
                marker.args[0] if backends and marker.args else "")
            if not reason:
                raise pytest.UsageError(f"{item.nodeid}: {name} needs reason=")
            for b in backends or marker.args:
                excluded.setdefault(b, reason)
    return excluded


def item_backend(item):
    return getattr(getattr(item, "callspec", None), "params", {}).get("backend")


def instance_key(item):
    """What an item tests, whatever backend it runs on: its node id less the backend."""
    params = dict(getattr(getattr(item, "callspec", None), "params", {}))
    params.pop("backend", None)
    return (item.module.__name__, item.originalname, repr(sorted(params.items())))


def one_per_backend_set(items):
    """Of each test's backend instances, the posix one, or the first (S3-only tests)."""
    by_test = {}
    for item in items:
        by_test.setdefault(instance_key(item), []).append(item)
    keep = set()
    for group in by_test.values():
        posix = [i for i in group if item_backend(i) in (None, "posix")]
        keep.update(map(id, posix or group[:1]))
    return keep


def plain_pass_only(items):
    """ids of the items marked plain_pass_only (each must say why)."""
    out = set()
    for item in items:
        mark = item.get_closest_marker("plain_pass_only")
        if mark is None:
            continue
        if not mark.kwargs.get("reason"):
            raise pytest.UsageError(f"{item.nodeid}: plain_pass_only needs reason=")
        out.add(id(item))
    return out


def first_per_module(items):
    """The first item of each module, a posix instance where the module has one."""
    keep, modules = set(), {}
    for item in items:
        modules.setdefault(item.module.__name__, []).append(item)
    for group in modules.values():
        posix = [i for i in group if item_backend(i) in (None, "posix")]
        keep.add(id((posix or group)[0]))
    return keep


def select(config, items, wanted):
    dropped = [i for i in items if id(i) not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if id(i) in wanted]


@pytest.hookimpl(trylast=True)       # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config, items):
    drop_excluded_backends(config, items)
    if config.getoption("--one-backend"):
        select(config, items, one_per_backend_set(items) - plain_pass_only(items))
    if config.getoption("--smoke"):
        select(config, items, first_per_module(items))


def drop_excluded_backends(config, items):
    keep, dropped = [], []
    for item in items:
        if item.get_closest_marker("store_independent") and item_backend(item) in S3_BACKENDS:
            if not item.get_closest_marker("store_independent").kwargs.get("reason"):
                raise pytest.UsageError(f"{item.nodeid}: store_independent needs reason=")
            dropped.append(item)
            config._h5osfs_store_independent += 1
            continue
        excluded = excluded_backends(item)
        backend = item_backend(item)
        if backend in excluded:
            dropped.append(item)
            config._h5osfs_posix_only.append((item.nodeid, excluded[backend]))
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_sessionfinish(session):
    cleanup.session_finish(session)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    claims.summary(terminalreporter, config)
    dropped = getattr(config, "_h5osfs_posix_only", [])
    one_instance = config.getoption("--smoke") or config.getoption("--one-backend")
    if dropped and not one_instance:   # a pass that runs each test once drops far more
        terminalreporter.section(f"not on every backend: {len(dropped)} instances not run")
        for nodeid, reason in dropped:
            terminalreporter.write_line(f"{nodeid}: {reason}")
    independent = getattr(config, "_h5osfs_store_independent", 0)
    if independent:
        terminalreporter.write_line(
            f"{independent} [s3]/[rgw] instances of store_independent tests not run: they check "
            "what the store does not change (each test's reason= says why)")
    rgw = getattr(config, "_h5osfs_rgw", None)
    if rgw is not None:
        terminalreporter.section("Ceph RGW")
        terminalreporter.write_line(
            f"started in {rgw.started_in:.1f} s; peak RSS (MiB): " +
            ", ".join(f"{n} {v}" for n, v in sorted(rgw.peak_rss().items())) +
            f"; objects stored at the end: {rgw.stored_mib()} MiB")


@pytest.fixture(scope="module")
def backend(request):
    """"posix", "s3" or "rgw" (parametrised by pytest_generate_tests in modules marked
    backends(...); "posix" elsewhere)."""
    return getattr(request, "param", "posix")


def list_like_aws(backend, put, *dirs):
    """s3rver 3.7.1 leaves out of a delimiter listing every common prefix that holds no object
    directly (tests/s3/README.md, "quirks"); AWS and MinIO list it. On s3, put(key, bytes)
    writes a stray object S3RVER_KEEP directly in each of dirs (relative to the bucket), so
    that s3rver lists them as AWS would; the daemon hides stray keys. Nothing on posix."""
    if backend == "s3":
        for d in dirs:
            put(f"{d.strip('/')}/{S3RVER_KEEP}", b"keeps this prefix in s3rver's listings\n")


# ---- S3: the server of the [s3] runs ----

def _md5(data):
    return hashlib.md5(data).hexdigest()


def local_files(root):
    """{relative posix path: Path} of every regular file below root (no symlinks followed,
    mount points skipped). S3 has no directories: empty ones are not kept."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.ismount(os.path.join(dirpath, d))]
        for name in filenames:
            p = Path(dirpath) / name
            if stat.S_ISREG(p.lstat().st_mode):
                rel = p.relative_to(root).as_posix()
                try:
                    rel.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"{p}: an S3 key must be UTF-8 (mark the test "
                                     "posix_only)") from None
                out[rel] = p
    return out


class S3Backend:
    """The S3 server of the [s3] or [rgw] runs (an S3Server or RgwUser of s3fixtures), its
    buckets, and a pool of clients for uploads."""

    JOBS = 8

    def __init__(self, workdir, server):
        self.workdir = Path(workdir)
        self.server = server
        self.endpoint = self.server.endpoint
        self.secret = self.server.secret_key
        self.home = self.workdir / "home"      # no ~/.aws of the machine's
        self.home.mkdir()
        self._ids = itertools.count(1)
        self._idle = {}         # digest of a copy's files -> its prefix, unused
        self._local = threading.local()
        self._clients, self._clients_lock = [], threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(self.JOBS)
        c = self.client()
        c.create_bucket(S3_BUCKET)
        c.create_bucket(OTHER_BUCKET)
        c.put_object(OTHER_BUCKET, "linked/sample_link.h5",
                     (BUCKET / "linked" / "sample_link.h5").read_bytes())
        self.base = S3Mirror(self, BUCKET, S3_BASE_PREFIX, read_only=True)
        self.base.sync()

    def client(self):
        """This thread's client (one keep-alive connection)."""
        c = getattr(self._local, "client", None)
        if c is None:
            c = self._local.client = self.server.client()
            with self._clients_lock:
                self._clients.append(c)
        return c

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["HOME"] = str(self.home)
        env["XDG_CACHE_HOME"] = str(self.home / ".cache")
        env.update(self.server.env())
        return env

    def new_prefix(self):
        return f"c{next(self._ids)}/"

    # A copy that a finished test left as it was uploaded can serve the next test that
    # uploads the same files (the same corruption of the fixture, say): its prefix is handed
    # over once a listing shows every key with the right ETag, and to one test at a time.

    @staticmethod
    def _digest(md5s):
        return hashlib.sha256(repr(sorted(md5s.items())).encode()).hexdigest()

    # RGW holds every object in its memory for the whole session (some 3 bytes of RSS per
    # byte stored): there a copy that no later test can use goes at once, and only the last
    # few unchanged ones are kept for reuse (each ~7 MB: a whole fixture bucket).
    IDLE_ON_RGW = 16

    def release(self, mirror):
        if mirror.prefix is None or mirror.read_only:
            return
        digest = self._digest(mirror.remote)
        if self.server.kind != "rgw":
            self._idle[digest] = mirror.prefix
            return
        listed = self.listing(mirror.prefix)
        changed = {k[len(mirror.prefix):]: v[1] for k, v in listed.items()} != mirror.remote
        if changed or digest in self._idle:
            self.client().delete_objects(S3_BUCKET, listed)
            return
        self._idle[digest] = mirror.prefix
        while len(self._idle) > self.IDLE_ON_RGW:
            oldest = self._idle.pop(next(iter(self._idle)))
            self.client().delete_objects(S3_BUCKET, self.listing(oldest))

    def reuse(self, md5s):
        """A prefix holding exactly md5s ({relative key: md5}) and its listing, or None."""
        prefix = self._idle.pop(self._digest(md5s), None)
        if prefix is None:
            return None
        listed = {k[len(prefix):]: v for k, v in self.listing(prefix).items()}
        if {k: v[1] for k, v in listed.items()} != md5s:
            return None         # changed since (by a daemon that writes): not used again
        return prefix, listed

    def map(self, func, items):
        return list(self.pool.map(func, items))

    def put(self, key, data):
        self.client().put_object(S3_BUCKET, key, data)

    def delete(self, key):
        r = self.client().delete_object(S3_BUCKET, key)
        if r.status not in (200, 204):
            r.check(f"DELETE {key}")

    def listing(self, prefix):
        """{key: (size, etag, last_modified)} of every key below prefix."""
        from s3client import key_decoder, parse_xml
        out, token = {}, None
        while True:
            q = [("list-type", "2"), ("encoding-type", "url"), ("prefix", prefix)]
            if token:
                q.append(("continuation-token", token))
            r = self.client().request("GET", S3_BUCKET, query=q).check(f"LIST {prefix}")
            root = parse_xml(r.body)
            name = key_decoder(root)
            for c in root.iter("Contents"):
                out[name(c.findtext("Key"))] = (int(c.findtext("Size")), c.findtext("ETag").strip('"'),
                                          c.findtext("LastModified"))
            if root.findtext("IsTruncated") != "true":
                return out
            token = root.findtext("NextContinuationToken")
            assert token, "truncated listing without a continuation token"

    def stop(self):
        self.pool.shutdown()
        for c in self._clients:
            c.close()
        return self.server.stop()


class S3Mirror:
    """A local directory tree kept equal to the objects below prefix of bucket hsdstest: every
    regular file is the object prefix + its relative path."""

    def __init__(self, s3, root, prefix=None, read_only=False):
        """prefix None: a new one, or a released copy of the same files, at the first sync.
        read_only: the fixture's copy (never released for reuse; put/delete refused)."""
        self.s3, self.root, self.prefix = s3, Path(root), prefix
        self.remote = {}        # relative key -> md5 of what was uploaded
        self.listed = {}        # relative key -> (size, etag, last_modified) after the upload
        self.read_only = read_only

    def url(self, bucket_dir):
        rel = Path(bucket_dir).relative_to(self.root).as_posix()
        prefix = self.prefix + ("" if rel == "." else rel + "/")
        return f"s3://{S3_BUCKET}/{prefix.rstrip('/')}"

    def sync(self):
        """Uploads what changed in the directory since the last sync, deletes what is gone,
        and checks the result in a listing."""
        files = local_files(self.root)
        data = {rel: p.read_bytes() for rel, p in files.items()}
        want = {rel: _md5(b) for rel, b in data.items()}
        if self.prefix is None:
            reused = self.s3.reuse(want)
            if reused:
                self.prefix, self.listed = reused
                self.remote = dict(want)
                return
            self.prefix = self.s3.new_prefix()
        puts = [rel for rel in want if self.remote.get(rel) != want[rel]]
        gone = [rel for rel in self.remote if rel not in want]
        self.s3.map(lambda rel: self.s3.put(self.prefix + rel, data[rel]), puts)
        for rel in gone:       # one at a time: s3rver's DELETE races with itself (500)
            self.s3.delete(self.prefix + rel)
        self.remote = want
        listed = {k[len(self.prefix):]: v for k, v in self.s3.listing(self.prefix).items()}
        problems = sorted(set(listed) ^ set(want)) + [
            rel for rel in want if rel in listed and listed[rel][:2] != (len(data[rel]), want[rel])]
        assert not problems, f"s3 copy of {self.root} under {self.prefix}: {problems[:10]}"
        self.listed = listed

    def put(self, path, data):
        assert not self.read_only, "the fixture bucket is read-only"
        rel = Path(path).relative_to(self.root).as_posix()
        self.s3.put(self.prefix + rel, data)
        self.remote[rel] = _md5(data)
        self.listed.pop(rel, None)

    def get(self, path):
        """The object at path as the server has it now, or None."""
        rel = Path(path).relative_to(self.root).as_posix()
        r = self.s3.client().get_object(S3_BUCKET, self.prefix + rel)
        return None if r.status == 404 else r.check(f"GET {rel}").body

    def delete_below(self, path):
        """Deletes the object at path, or every object below it."""
        assert not self.read_only, "the fixture bucket is read-only"
        rel = Path(path).relative_to(self.root).as_posix()
        gone = [k for k in self.remote if k == rel or k.startswith(rel + "/")]
        for k in gone:         # one at a time: s3rver's DELETE races with itself (500)
            self.s3.delete(self.prefix + k)
            self.remote.pop(k)
            self.listed.pop(k, None)
        return gone

    def check_unchanged(self, root, before):
        """The objects below root (a directory inside the mirror) are exactly the regular files
        of snapshot before (bucket_snapshot(root)), and none was written since it was uploaded.
        From one listing: keys, sizes, ETags (s3rver's is the MD5 of the bytes it stores, so
        this compares contents) and Last-Modified (seconds: catches a rewrite with the same
        bytes a second later)."""
        rel_root = Path(root).relative_to(self.root).as_posix()
        sub = "" if rel_root == "." else rel_root + "/"
        want = {rel: v[3] for rel, v in before.items()
                if stat.S_ISREG(v[0]) and v[3] is not None}
        listed = {k[len(self.prefix) + len(sub):]: v
                  for k, v in self.s3.listing(self.prefix + sub).items()}
        problems = [f"{k}: in S3, not in the directory" for k in sorted(set(listed) - set(want))]
        problems += [f"{k}: missing in S3" for k in sorted(set(want) - set(listed))]
        for k in sorted(set(want) & set(listed)):
            size, etag, modified = listed[k]
            if (size, etag) != (len(want[k]), _md5(want[k])):
                problems.append(f"{k}: listed as {size} bytes, ETag {etag}")
            was = self.listed.get(sub + k)
            if was is not None and was[2] != modified:
                problems.append(f"{k}: Last-Modified {was[2]} -> {modified}")
        assert not problems, f"{self.url(root)} changed: {problems[:20]}"


@pytest.fixture(scope="session")
def backend_s3(s3rver_server, tmp_path_factory):
    """The S3 server of the [s3] runs: a user of the session's s3rver in a tenant of its own
    (s3fixtures.BACKEND_TENANT), so that its bucket hsdstest is not test_s3.py's."""
    from s3fixtures import BACKEND_TENANT
    s3 = S3Backend(tmp_path_factory.mktemp("s3backend"), s3rver_server.tenant(BACKEND_TENANT[0]))
    yield s3
    try:
        s3.base.check_unchanged(BUCKET, bucket_snapshot(BUCKET))   # mounted rw by many tests
    finally:
        s3.stop()


RGW_BACKEND_KEY = "H5OSFSRGWBACKENDKEY1"
RGW_BACKEND_SECRET = "h5osfs/Rgw+Backend=Secret0123456789abcdef"


@pytest.fixture(scope="session")
def backend_rgw(rgw_server, tmp_path_factory):
    """The S3 server of the [rgw] runs: a user of the session's RGW in a tenant of its own, so
    that its bucket hsdstest is not test_s3.py's (the main user's)."""
    user = rgw_server.add_user(RGW_BACKEND_KEY, RGW_BACKEND_SECRET, tenant="backend")
    s3 = S3Backend(tmp_path_factory.mktemp("rgwbackend"), user)
    yield s3
    try:
        s3.base.check_unchanged(BUCKET, bucket_snapshot(BUCKET))
    finally:
        s3.stop()


def backend_server(backend, request):
    """The S3Backend of an S3 backend ("s3" or "rgw")."""
    return request.getfixturevalue("backend_rgw" if backend == "rgw" else "backend_s3")


class MountSource:
    """What to give h5osfs to mount a bucket directory on a backend: the bucket argument,
    more options, the environment (None: this process's)."""

    def __init__(self, backend, local, source, args=(), env=None, mirror=None, secret=None):
        self.backend, self.local, self.source = backend, Path(local), str(source)
        self.args, self.env, self.mirror, self.secret = tuple(args), env, mirror, secret


@pytest.fixture
def mount_source(backend, request, tmp_path):
    """Factory: mount_source(bucket_dir=BUCKET) -> MountSource for the test's backend. On s3
    the directory is uploaded (or re-synchronised) first, or a copy of the same files that an
    earlier test left unchanged is used (S3Backend.reuse). The objects stay (the server's data
    directory is under pytest's basetemp; deleting ~200 objects one by one would cost more than
    the upload)."""
    if backend == "posix":
        yield lambda bucket=BUCKET: MountSource("posix", bucket, bucket)
        return
    s3 = backend_server(backend, request)
    mirrors = {}

    def get(bucket=BUCKET):
        bucket = Path(bucket)
        if bucket.resolve() == BUCKET.resolve():
            mirror = s3.base
        else:
            # the parent too (neighbouring buckets), unless that is the test's own directory
            root = bucket if bucket.parent == tmp_path else bucket.parent
            if root not in mirrors:
                mirrors[root] = S3Mirror(s3, root)
            mirror = mirrors[root]
            mirror.sync()
        return MountSource("s3", bucket, mirror.url(bucket), ("-o", f"endpoint={s3.endpoint}"),
                           s3.env(), mirror, s3.secret)

    yield get
    for mirror in mirrors.values():
        s3.release(mirror)


def bucket_identity(src):
    """How h5osfs names the bucket of MountSource src in its journal records (and hashes it for
    the default cache_dir): the directory's real path, or s3:ENDPOINT/bucket/prefix."""
    if src.backend == "posix":
        return os.path.realpath(src.source)
    endpoint = next(a.split("=", 1)[1] for a in src.args if a.startswith("endpoint="))
    return f"s3:{endpoint.rstrip('/')}/{src.source.removeprefix('s3://').rstrip('/')}"


# ---- mounts ----

def names_cache_dir(args):
    return any("cache_dir=" in str(a) for a in args)


class Mount(harness.Daemon):
    """One running h5osfs daemon and its mountpoint (harness.Daemon). bucket: a directory, or a
    MountSource. A read-write mount's cache_dir is its own (a second daemon on it is refused):
    unless args name one, it is cache_dir, or else a new directory beside the log (<log>.cache).
    With own_cache_dir=False, h5osfs's default is left (env must then set HOME and
    XDG_CACHE_HOME to the test's own directories). expect_status: the exit status its teardown
    accepts."""

    def __init__(self, bucket, mnt, log, args, env=None, cache_dir=None, own_cache_dir=True,
                 expect_status=0):
        src = bucket if isinstance(bucket, MountSource) else MountSource("posix", bucket, bucket)
        self.src = src
        self.backend = src.backend
        self.bucket = src.local         # the bucket directory (on s3: the uploaded one)
        self.cache_dir = None
        if own_cache_dir and not names_cache_dir(args):
            self.cache_dir = Path(cache_dir or Path(log).with_suffix(".cache"))
            args = ["-o", f"cache_dir={self.cache_dir}", *args]
        super().__init__([*args, *src.args], src.source, mnt, log, env=env or src.env,
                         secrets=[src.secret] if src.secret else (),
                         expect_status=expect_status)
        self.wait_serving()

    def wait_serving(self):
        """Until the daemon answers a request. It recovers the staged files of its cache_dir
        between mounting and answering (the kernel holds every request until then): what the
        recovery did and logged is all there once this returns. A refusal is an answer too."""
        try:
            os.stat(self.mnt)
        except OSError:
            pass

    # changing the bucket under the daemon: the directory, and on s3 the objects

    def put(self, key, data):
        """Writes object key (relative to the bucket) with bytes data."""
        assert self.bucket.resolve() != BUCKET.resolve(), "the fixture bucket is read-only"
        p = self.bucket / key.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        if self.src.mirror is not None:
            self.src.mirror.put(p, data)

    def get(self, key):
        """Object key as the store has it now (the daemon may have written it), or None."""
        p = self.bucket / key.lstrip("/")
        if self.src.mirror is not None:
            return self.src.mirror.get(p)
        return p.read_bytes() if p.exists() else None

    def delete(self, key):
        assert self.bucket.resolve() != BUCKET.resolve(), "the fixture bucket is read-only"
        p = self.bucket / key.lstrip("/")
        p.unlink()
        if self.src.mirror is not None:
            assert self.src.mirror.delete_below(p), f"{key}: no such object"

    def delete_tree(self, prefix):
        """Deletes every object below prefix (a directory of the bucket)."""
        assert self.bucket.resolve() != BUCKET.resolve(), "the fixture bucket is read-only"
        p = self.bucket / prefix.strip("/")
        shutil.rmtree(p)
        if self.src.mirror is not None:
            self.src.mirror.delete_below(p)


@pytest.fixture
def mount_bucket(tmp_path, mount_source):
    """Factory: mount_bucket(bucket, *args) -> Mount on the test's backend; every mount is
    checked at teardown. mount_bucket(m, *args) mounts what Mount m mounted again, as it is now
    (on s3: the objects the first mount wrote, with no upload of the directory), with m's
    cache_dir unless args name one."""
    mounts = []

    def start(bucket=BUCKET, *args, extra_env=None):
        mnt = tmp_path / f"mnt{len(mounts)}"
        mnt.mkdir()
        src = bucket.src if isinstance(bucket, Mount) else mount_source(bucket)
        cache_dir = bucket.cache_dir if isinstance(bucket, Mount) else None
        env = dict(src.env or os.environ, **extra_env) if extra_env else None
        m = Mount(src, mnt, tmp_path / f"h5osfs{len(mounts)}.log", args, env=env,
                  cache_dir=cache_dir)
        mounts.append(m)
        return m

    yield start
    harness.assert_clean(mounts)


def mount_own_server(srv, name, tmp_path, i, opts=""):
    """Mount number i of bucket name on an S3 server the test started itself (S3Server), as
    test_user1 with ttl=0 and a cache_dir of its own (opts: more, after a comma)."""
    mnt = tmp_path / f"mnt{i}"
    mnt.mkdir()
    src = MountSource("s3", BUCKET, f"s3://{name}", ("-o", f"endpoint={srv.endpoint}"),
                      srv.env())
    return Mount(src, mnt, tmp_path / f"h5osfs{i}.log",
                 ("-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache{i}{opts}"))


@pytest.fixture
def bucket_copy(tmp_path):
    """A writable copy of the fixture bucket, named hsdstest like the original."""
    dst = tmp_path / "bucket" / "hsdstest"
    shutil.copytree(BUCKET, dst)
    return dst


def bucket_snapshot(root):
    """Every file and directory of a bucket with its size, mtime and bytes: to prove that
    nothing was modified."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            data = p.read_bytes() if p.is_file() else None
            snap[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, data)
    return snap


def assert_unchanged(m, before, root=None):
    """Nothing of the bucket of mount m changed since bucket_snapshot(root) gave before (root:
    the bucket directory, or its parent): the directory, and on s3 the objects."""
    root = Path(root) if root is not None else m.bucket
    assert bucket_snapshot(root) == before
    if m.src.mirror is not None:
        m.src.mirror.check_unchanged(root, before)


# ---- daemonised mounts (no -f) ----

PR_SET_CHILD_SUBREAPER = 36


def set_child_subreaper(on):
    """Make this process adopt orphaned descendants, so that a daemonised h5osfs becomes our
    child once its launcher exits: we can then reap it and read its exit status."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0, ctypes.get_errno()


def wait_exit(pid, timeout):
    """The exit status of our child pid, or None if it is still running after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


# ---- shared by the image tests (test_image*.py) ----

SOURCE = FIXTURE / "source"


@pytest.fixture(scope="module")
def shared_mount(tmp_path_factory, backend, request):
    """One mount of the read-only fixture bucket as test_user1, shared by a module's tests that
    only read. Checked like mount_bucket's mounts when the module is done."""
    root = tmp_path_factory.mktemp("shared")
    mnt = root / "mnt"
    mnt.mkdir()
    if backend in S3_BACKENDS:
        s3 = backend_server(backend, request)
        src = MountSource("s3", BUCKET, s3.base.url(BUCKET), ("-o", f"endpoint={s3.endpoint}"),
                          s3.env(), s3.base, s3.secret)
    else:
        src = MountSource("posix", BUCKET, BUCKET)
    m = Mount(src, mnt, root / "h5osfs.log", ("-o", "user=test_user1"))
    yield m
    harness.assert_clean([m])


def assert_serving(m):
    """The daemon of mount m is alive, still mounted and answering."""
    m.assert_serving()
    assert os.listdir(m.path("home/test_user1"))
