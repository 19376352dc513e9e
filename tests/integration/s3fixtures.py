"""pytest fixtures for the S3 backend: real S3 servers on 127.0.0.1 (s3rver behind
tests/s3/server.js, and Ceph RGW started by tests/s3/rgw.py), the HSDS fixture bucket loaded
into them, and a fault-injecting proxy in front of them. conftest.py imports the fixtures.

s3_server (module): the S3 server of a module's tests: RGW's main user (RgwUser) where the
    backend is "rgw" (a module marked backends("s3", "rgw")), s3rver (S3Server) elsewhere.
s3rver_server (session): S3Server (harness.py), the session's one s3rver — .endpoint
    ("http://127.0.0.1:PORT"), .access_key, .secret_key, .region, .env() (AWS_* variables for
    a daemon), .client() (an S3Client), .load(bucket, directory), .new_bucket(directory=None),
    .tenant(name) (conftest's [s3] backend: BACKEND_TENANT), .stop(). Authentication is on:
    requests must be signed (SigV4 verified against the secret) with its key pair or s3rver's
    S3RVER/S3RVER; unsigned requests get 403, except GET/HEAD in bucket PUBLIC_BUCKET.
rgw_server (session): RgwServer — one Ceph cluster for the session (started in seconds; every
    object in the OSD's memory), .endpoint, .main (an RgwUser, the same interface as S3Server:
    its buckets are in the global namespace, where unsigned requests go; PUBLIC_BUCKET has a
    policy letting anyone GET and list it), .add_user(access, secret, tenant) -> RgwUser (a
    tenant: buckets of its own, "hsdstest" again included), .log(), .peak_rss(),
    .stored_mib(), .stop().
s3_bucket (module): S3Bucket — tests/data/hsds-v2/hsdstest loaded as bucket "hsdstest" of
    s3_server (once per server):
    .name, .url ("s3://hsdstest"), .endpoint, .server, .source (the directory), .sizes
    ({key: size}). Read-only by convention: tests that write use s3_server.new_bucket().
fault_proxy (function): FaultProxy in front of s3_server — .endpoint, .add_rule(action, **kw)
    (fault_proxy.py documents the fields) -> the rule with its id, .rules(), .counters(),
    .fired(rule_id), .log(), .clear(), .stop().

When node or s3rver (or Ceph: ceph-mon, ceph-osd, radosgw, radosgw-admin) is missing, the
fixtures skip with the reason (scripts/install-deps.sh installs all); with H5OSFS_S3_REQUIRED=1
in the environment they fail instead.
"""
import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
S3DIR = REPO / "tests" / "s3"
FIXTURE_BUCKET = REPO / "tests" / "data" / "hsds-v2" / "hsdstest"

# The s3rver server and its account live in harness.py (the benchmarks start theirs there too).
from harness import (ACCESS_KEY, PUBLIC_BUCKET, REGION, SECRET_KEY, S3Client,  # noqa: E402
                     S3Server, ServerUser, _tail, load_bucket, node_binary, read_port,
                     s3rver_problem)
from harness import stop_process as _stop  # noqa: E402
import rgw  # noqa: E402


def _unavailable(reason, what="S3 test server"):
    if os.environ.get("H5OSFS_S3_REQUIRED") == "1":
        pytest.fail(f"{what} unavailable: {reason}")
    pytest.skip(f"{what} unavailable: {reason}")


def rgw_problem():
    """None when the Ceph programs rgw.py runs are installed, else why not."""
    missing = rgw.missing_tools()
    if missing:
        return (f"{', '.join(missing)} not on PATH (scripts/install-deps.sh installs Debian's "
                "ceph-mon, ceph-osd, radosgw and ceph-common)")
    return None


class RgwServer:
    """One tests/s3/rgw.py process: a single-host Ceph cluster with radosgw on 127.0.0.1, its
    data directory below workdir (removed when it stops), and its main user (ACCESS_KEY)."""

    START_TIMEOUT = 150     # rgw.py's own limit is 120 s; ~2 s on a quiet machine

    def __init__(self, workdir, memstore_mib=None):
        """memstore_mib: what the OSD may hold (all of it in RAM; rgw.py's default: 4096)."""
        problem = rgw_problem()
        if problem:
            raise FileNotFoundError(problem)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "rgw.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CEPH_")}
        env["S3_ACCESS_KEY_ID"], env["S3_SECRET_ACCESS_KEY"] = ACCESS_KEY, SECRET_KEY
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            # stdin stays open: the cluster stops when this process does, however it ends.
            more = ["--memstore-mib", str(memstore_mib)] if memstore_mib else []
            self.proc = subprocess.Popen(
                [sys.executable, str(S3DIR / "rgw.py"), "--data-dir", str(self.data_dir),
                 "--exit-on-stdin-eof", *more], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, env=env)
        self.port = read_port(self.proc, "rgw.py", self.log_path, self.START_TIMEOUT)
        self.started_in = time.monotonic() - t0
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.main = RgwUser(self, ACCESS_KEY, SECRET_KEY)
        self.main.make_public(PUBLIC_BUCKET)
        self._peak, self._stored = {}, None

    def add_user(self, access_key, secret_key, tenant=None):
        rgw.add_user(self.data_dir, access_key, secret_key, tenant)
        return RgwUser(self, access_key, secret_key)

    def _daemon_pids(self):
        """{program: pid} of rgw.py's children (radosgw -f writes no pid file)."""
        pids = {}
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return pids
        for pid in map(int, children.split()):
            try:
                pids[Path(f"/proc/{pid}/comm").read_text().strip()] = pid
            except OSError:
                pass
        return pids

    def peak_rss(self):
        """{daemon: its peak resident memory in MiB} (VmHWM), while they run."""
        for name, pid in self._daemon_pids().items():
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self._peak[name] = int(line.split()[1]) // 1024
            except OSError:
                pass
        return dict(self._peak)

    def stored_mib(self):
        """What the OSD holds (MiB, all of it in its memory), or None when it cannot tell."""
        try:
            asok = self.data_dir / "run" / "osd.0.asok"
            r = subprocess.run(["ceph", "--admin-daemon", str(asok), "perf", "dump"],
                               capture_output=True, timeout=10)
            used = json.loads(r.stdout)["osd"]["stat_bytes_used"]
        except (OSError, subprocess.SubprocessError, ValueError, KeyError):
            return self._stored
        self._stored = used // (1 << 20)
        return self._stored

    def log(self):
        return _tail(self.log_path, 100000)

    def stop(self):
        self.peak_rss()
        self.stored_mib()
        return _stop(self.proc, timeout=20)


class RgwUser(ServerUser):
    """An S3 user of an RgwServer (the server is stopped by its fixture)."""

    kind = "rgw"

    def make_public(self, bucket):
        """Creates bucket with a policy that lets anyone (unsigned requests) GET its objects
        and list it, as s3rver's --public-bucket."""
        policy = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": ["*"]},
            "Action": ["s3:GetObject", "s3:ListBucket"],
            "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]}
        with self.client() as c:
            c.create_bucket(bucket)
            c.request("PUT", bucket, query=[("policy", "")],
                      body=json.dumps(policy).encode()).check(f"PutBucketPolicy {bucket}")


class S3Bucket:
    def __init__(self, server, name, source, sizes):
        self.server, self.name, self.source, self.sizes = server, name, Path(source), sizes
        self.endpoint = server.endpoint
        self.url = f"s3://{name}"


class FaultProxy:
    """One tests/s3/fault_proxy.py process in front of an S3 server."""

    def __init__(self, upstream, workdir):
        self.log_path = Path(workdir) / "fault_proxy.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["/usr/bin/python3", str(S3DIR / "fault_proxy.py"), "--upstream", upstream,
                 "--port", "0", "--verbose", "--exit-on-stdin-eof"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.port = read_port(self.proc, "fault_proxy", self.log_path)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _call(self, method, name, obj=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            body = None if obj is None else json.dumps(obj).encode()
            c.request(method, "/__fault__/" + name, body=body,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = json.loads(r.read() or b"null")
            if r.status != 200:
                raise ValueError(f"fault_proxy {method} {name}: {data}")
            return data
        finally:
            c.close()

    def add_rule(self, action, **fields):
        """add_rule("slowdown", method="GET", key="/0_0", times=2) -> the rule (with "id")."""
        return self._call("POST", "rules", {"action": action, **fields})[0]

    def add_rules(self, rules):
        return self._call("POST", "rules", rules)

    def remove_rule(self, rule_id):
        return self._call("DELETE", f"rules/{rule_id}")

    def rules(self):
        return self._call("GET", "rules")

    def counters(self):
        """{"connections", "requests", "upstream_connections", "faults": {action: n},
        "rules": [{..., "seen": n, "fired": n}]}"""
        return self._call("GET", "stats")

    def fired(self, rule_id):
        for r in self.rules():
            if r["id"] == rule_id:
                return r["fired"]
        raise KeyError(rule_id)

    def log(self):
        return self._call("GET", "log")

    def clear(self):
        return self._call("POST", "clear")

    def stop(self):
        return _stop(self.proc)


# conftest's [s3] backend: a tenant of the session's s3rver, so that its bucket hsdstest is not
# test_s3.py's (as backend_rgw's on RGW)
BACKEND_TENANT = ("backend", "H5OSFSS3BACKENDKEY01", "h5osfs/S3+Backend=Secret0123456789abcdef")


@pytest.fixture(scope="session")
def s3rver_server(tmp_path_factory):
    """The session's one s3rver: test_s3.py's server, and conftest's [s3] backend in the tenant
    BACKEND_TENANT (server.tenant("backend"))."""
    problem = s3rver_problem()
    if problem:
        _unavailable(problem)
    server = S3Server(tmp_path_factory.mktemp("s3server"), tenants=[BACKEND_TENANT])
    yield server
    rc = server.stop()
    assert rc == 0, f"s3rver exited with {rc}: {server.log()[-2000:]}"


@pytest.fixture(scope="session")
def rgw_server(tmp_path_factory, request):
    """The session's Ceph cluster (started once: the [rgw] instances of every module share
    it, each user or tenant with buckets of its own)."""
    problem = rgw_problem()
    if problem:
        _unavailable(problem, "Ceph RGW")
    server = RgwServer(tmp_path_factory.mktemp("rgw"))
    request.config._h5osfs_rgw = server      # its start time and memory, in the summary
    yield server
    rc = server.stop()
    assert rc == 0, f"rgw.py exited with {rc}: {server.log()[-3000:]}"


@pytest.fixture(scope="module")
def s3_server(backend, request):
    """RGW's main user in a module's [rgw] instances, s3rver everywhere else."""
    if backend == "rgw":
        return request.getfixturevalue("rgw_server").main
    return request.getfixturevalue("s3rver_server")


@pytest.fixture(scope="session")
def fixture_buckets():
    """{id(server): S3Bucket}: the fixture is loaded once into each server."""
    return {}


@pytest.fixture(scope="module")
def s3_bucket(s3_server, fixture_buckets):
    if id(s3_server) not in fixture_buckets:
        name = FIXTURE_BUCKET.name  # "hsdstest": linked domains name their bucket
        s3_server.load(name, FIXTURE_BUCKET)
        sizes = {k: p.stat().st_size
                 for k, p in load_bucket.local_objects(FIXTURE_BUCKET).items()}
        fixture_buckets[id(s3_server)] = S3Bucket(s3_server, name, FIXTURE_BUCKET, sizes)
    return fixture_buckets[id(s3_server)]


@pytest.fixture
def fault_proxy(s3_server, tmp_path):
    proxy = FaultProxy(s3_server.endpoint, tmp_path)
    yield proxy
    rc = proxy.stop()
    assert rc == 0, f"fault_proxy exited with {rc}: {_tail(proxy.log_path)}"


__all__ = ["s3_server", "s3rver_server", "rgw_server", "fixture_buckets", "s3_bucket",
           "fault_proxy", "S3Server", "RgwServer", "RgwUser", "S3Bucket", "FaultProxy",
           "S3Client", "s3rver_problem", "rgw_problem", "ACCESS_KEY", "SECRET_KEY", "REGION",
           "PUBLIC_BUCKET", "FIXTURE_BUCKET", "node_binary"]
