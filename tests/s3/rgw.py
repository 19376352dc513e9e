#!/usr/bin/python3
"""Ceph RGW on 127.0.0.1 for the tests: a single-host Ceph cluster (one mon, one OSD keeping
its objects in RAM, radosgw with the beast frontend) in a fresh data directory, and one S3 user.

    tests/s3/rgw.py --access-key AK --secret-key SK [--port 0] [--data-dir DIR]
                    [--exit-on-stdin-eof] [--keep-data-dir] [--timeout 120]
                    [--memstore-mib 4096]

Prints "PORT <n>" and then "ENDPOINT http://127.0.0.1:<n>" on stdout once RGW answers a request
signed with the user's keys, then nothing. SIGTERM, SIGINT or SIGHUP (or stdin closing, with
--exit-on-stdin-eof) stops every daemon and removes the data directory: status 0. A daemon that
dies on its own stops the rest: status 1, its log's tail on stderr. The daemons also die with
this process, however it ends (PR_SET_PDEATHSIG).

Credentials: --access-key/--secret-key, else $S3_ACCESS_KEY_ID/$S3_SECRET_ACCESS_KEY (as
server.js). Needs Debian's ceph-mon, ceph-osd, radosgw and ceph-common (scripts/install-deps.sh).
Standard library only; as a module, start() runs the same from Python and add_user() makes more
users (tenants: buckets of the same name in separate namespaces).

Everything lives below the data directory: ceph.conf, the mon's store, logs (log/), pid files
and the crash directory; nothing under /etc/ceph, /var/lib/ceph or /var/log/ceph is read or
written. Every stored byte is in the OSD's memory (memstore): keep what the tests store small.
"""
import argparse
import ctypes
import http.client
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from s3client import S3Client  # noqa: E402

TOOLS = ("monmaptool", "ceph-mon", "ceph-osd", "radosgw", "radosgw-admin")
PR_SET_PDEATHSIG = 1

# Why each setting is there (../../../shared/DESIGN.md, "Ceph RGW on one host"; Ceph's
# src/vstart.sh is the reference for the rest):
# - auth none: no keyrings to make. radosgw 16 still insists on a secure mon session unless
#   the client modes say crc; without them it retries every 3 s until `client mount timeout`.
# - size 1, few PGs: one OSD holds everything; radosgw makes 7 pools, and the mon refuses
#   pools beyond its PG limit per OSD. The autoscaler lives in ceph-mgr, which is not run.
# - paxos propose interval 0.1 s and a 1 s mon tick: the mon commits each of radosgw's pool
#   creations sooner, and asks the OSD to create their PGs at its next tick (default 5 s).
# - tcp_nodelay: without it each small answer waits ~40 ms (Nagle against delayed ACKs).
# - mon data avail: a developer's disk may be more than 70 % full; the mon's store is tiny.
CONF = """\
[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{mon_port}
public addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
paxos propose interval = 0.1
mon tick interval = 1
mon data avail warn = 1
mon data avail crit = 1
mon data = {d}/mon.$id
osd data = {d}/osd.$id
osd objectstore = memstore
memstore device bytes = {memstore_bytes}
run dir = {d}/run
crash dir = {d}/crash
pid file = {d}/run/$name.pid
admin socket = {d}/run/$name.asok
log file = {d}/log/$name.log
mon cluster log to file = false

[client]
ms mon client mode = crc
ms client mode = crc

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port} tcp_nodelay=1
rgw data = {d}/rgw
rgw thread pool size = 64
rgw dynamic resharding = false
"""


class StartError(Exception):
    pass


def missing_tools():
    """The Ceph programs that are not on PATH (empty when all are there)."""
    return [t for t in TOOLS if shutil.which(t) is None]


def reserved_port():
    """A socket bound to a free port of 127.0.0.1 (SO_REUSEADDR, never listened on), held
    until the daemon given the port listens on it: ceph-mon and radosgw bind beside it, while
    the kernel gives it to no other bind(port 0) nor outgoing connection of the machine. A
    port found free and let go at once stayed free for nobody during the seconds radosgw
    takes to listen (other suites, their servers and connections run beside this one)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s


def die_with_parent():
    """In a daemon's child, before exec: killed when the process that started it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tail(path, n=3000):
    try:
        return Path(path).read_text(errors="replace")[-n:]
    except OSError:
        return ""


def run_tool(data_dir, name, *args, timeout=60, env=None):
    """A short-lived ceph program on the cluster of data_dir; its output goes to
    log/<name>.out there."""
    data_dir = Path(data_dir)
    out = data_dir / "log" / f"{name}.out"
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CEPH_")}
    with open(out, "ab") as f:
        try:
            r = subprocess.run([*args, "-c", str(data_dir / "ceph.conf")],
                               stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                               env=env, timeout=timeout, preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired:
            raise StartError(f"{args[0]} took more than {timeout} s: {tail(out)}") from None
    if r.returncode != 0:
        raise StartError(f"{' '.join(map(str, args))} exited with {r.returncode}: {tail(out)}")


def add_user(data_dir, access_key, secret_key, tenant=None, env=None):
    """An S3 user with this key pair in the running cluster of data_dir (radosgw-admin).
    tenant: the user's buckets are in a namespace of their own (a bucket name taken in
    another tenant is free there); None: the global one, where unsigned requests look."""
    uid = f"u-{access_key.lower()}"
    args = ["radosgw-admin", "user", "create", "--uid", uid, "--display-name", uid,
            "--access-key", access_key, "--secret-key", secret_key]
    if tenant:
        args += ["--tenant", tenant]
    run_tool(data_dir, "radosgw-admin", *args, env=env)


class Cluster:
    """The daemons of one cluster in data_dir (fresh), radosgw on 127.0.0.1:port."""

    def __init__(self, data_dir, port=0, memstore_mib=4096):
        self.dir = Path(data_dir).resolve()
        self.memstore_bytes = memstore_mib << 20
        self.conf = self.dir / "ceph.conf"
        self.reserved = []      # sockets holding our ports until the daemons listen
        if not port:
            self.reserved.append(reserved_port())
            port = self.reserved[-1].getsockname()[1]
        self.port = port
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.procs = {}         # name -> Popen
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CEPH_")}

    # ---- running ceph programs ----

    def _run(self, name, *args, timeout=60):
        run_tool(self.dir, name, *args, timeout=timeout, env=self.env)

    def _daemon(self, name, *args):
        """A daemon in the foreground (-f: it logs to log/<name>.log, stderr to .stderr)."""
        with open(self.dir / "log" / f"{name}.stderr", "ab") as err:
            self.procs[name] = subprocess.Popen(
                [*args, "-c", str(self.conf), "-f"], stdin=subprocess.DEVNULL,
                stdout=err, stderr=subprocess.STDOUT, env=self.env,
                preexec_fn=die_with_parent)

    def dead(self):
        """(name, status) of a daemon that exited, or None."""
        for name, p in self.procs.items():
            if p.poll() is not None:
                return name, p.returncode
        return None

    def daemon_log(self, name):
        log = {"mon": "mon.a", "osd": "osd.0", "rgw": "client.rgw"}[name]
        return (tail(self.dir / "log" / f"{name}.stderr", 1000) +
                tail(self.dir / "log" / f"{log}.log"))

    # ---- start ----

    def start(self, timeout=120.0):
        """Makes the cluster and starts it; returns once radosgw answers HTTP."""
        deadline = time.monotonic() + timeout
        for sub in ("run", "log", "crash", "osd.0", "rgw"):
            (self.dir / sub).mkdir(parents=True)
        fsid = str(uuid.uuid4())
        self.reserved.append(reserved_port())
        mon_port = self.reserved[-1].getsockname()[1]
        self.conf.write_text(CONF.format(fsid=fsid, mon_port=mon_port, rgw_port=self.port,
                                         d=self.dir, memstore_bytes=self.memstore_bytes))
        monmap = self.dir / "monmap"
        self._run("monmaptool", "monmaptool", "--create", "--fsid", fsid, "--add", "a",
                  f"v2:127.0.0.1:{mon_port}", str(monmap))
        self._run("mon-mkfs", "ceph-mon", "--mkfs", "-i", "a", "--monmap", str(monmap))
        self._daemon("mon", "ceph-mon", "-i", "a")
        # The OSD's mkfs needs no mon (memstore, the fsid from ceph.conf); the OSD registers
        # itself ("osd create", crush location) when it boots.
        self._run("osd-mkfs", "ceph-osd", "-i", "0", "--mkfs", "--osd-uuid", str(uuid.uuid4()))
        self._daemon("osd", "ceph-osd", "-i", "0")
        self._daemon("rgw", "radosgw", "-n", "client.rgw")
        self._wait_http(deadline)
        self.release_ports()

    def release_ports(self):
        """The daemons listen on their ports now (or are gone): the reservations go."""
        for s in self.reserved:
            s.close()
        self.reserved = []

    def _wait_http(self, deadline):
        """Until radosgw answers anything on its port (it listens once its pools exist)."""
        while True:
            gone = self.dead()
            if gone:
                raise StartError(f"{gone[0]} exited with {gone[1]}: {self.daemon_log(gone[0])}")
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            try:
                c.request("GET", "/")
                c.getresponse().read()
                return
            except OSError:
                pass
            finally:
                c.close()
            if time.monotonic() > deadline:
                raise StartError(f"radosgw did not answer within the time limit: "
                                 f"{self.daemon_log('rgw')}")
            time.sleep(0.05)

    def add_user(self, access_key, secret_key, tenant=None):
        add_user(self.dir, access_key, secret_key, tenant, env=self.env)

    def check_user(self, access_key, secret_key, deadline):
        """Until a signed ListBuckets with the key pair answers 200."""
        while True:
            with S3Client(self.endpoint, access_key, secret_key, timeout=10) as c:
                try:
                    r = c.request("GET")
                    if r.status == 200:
                        return
                    why = f"HTTP {r.status} {r.error_code()}"
                except OSError as e:
                    why = str(e)
            if time.monotonic() > deadline:
                raise StartError(f"a signed request with {access_key} failed: {why}")
            time.sleep(0.1)

    # ---- stop ----

    def stop(self):
        """Kills every daemon. Nothing is saved: the OSD's objects are in its memory and the
        data directory goes next, so there is no clean shutdown to wait for (the OSD's takes
        seconds)."""
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            p.wait()
        self.release_ports()


def start(data_dir, access_key, secret_key, port=0, timeout=120.0, memstore_mib=4096):
    """A started Cluster with one user; on failure nothing keeps running (StartError)."""
    t0 = time.monotonic()
    cluster = Cluster(data_dir, port, memstore_mib)
    try:
        cluster.start(timeout)
        cluster.add_user(access_key, secret_key)
        cluster.check_user(access_key, secret_key, t0 + timeout)
    except BaseException:
        cluster.stop()
        raise
    cluster.started_in = time.monotonic() - t0
    return cluster


def fresh_dir(path):
    """path (created, or an empty existing directory), or a new temporary one."""
    if path is None:
        return Path(tempfile.mkdtemp(prefix="h5osfs-rgw-"))
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    if any(p.iterdir()):
        raise StartError(f"{p}: the data directory must be new or empty")
    return p


def wait_for_stop(cluster, stdin_eof):
    """Returns 0 when asked to stop (signal, or stdin closed), 1 when a daemon died."""
    stop = []

    def asked(signum, frame):
        stop.append(signum)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, asked)
    # poll, not epoll: epoll refuses a regular file (stdin from /dev/null), poll says readable
    sel = selectors.PollSelector()
    if stdin_eof:
        sel.register(sys.stdin.buffer, selectors.EVENT_READ)
    while not stop:
        for key, _ in sel.select(0.5):
            if not os.read(key.fileobj.fileno(), 4096):
                return 0
        gone = cluster.dead()
        if gone:
            print(f"rgw.py: {gone[0]} exited with {gone[1]}: {cluster.daemon_log(gone[0])}",
                  file=sys.stderr)
            return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--access-key", default=os.environ.get("S3_ACCESS_KEY_ID"))
    ap.add_argument("--secret-key", default=os.environ.get("S3_SECRET_ACCESS_KEY"))
    ap.add_argument("--port", type=int, default=0, help="radosgw's port (0: any free one)")
    ap.add_argument("--data-dir", help="new or empty (default: a new temporary directory)")
    ap.add_argument("--keep-data-dir", action="store_true", help="do not remove it at the end")
    ap.add_argument("--exit-on-stdin-eof", action="store_true",
                    help="stop when stdin closes (a killed parent never leaves it behind)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to start (120)")
    ap.add_argument("--memstore-mib", type=int, default=4096,
                    help="what the OSD may hold, all of it in RAM (default 4096)")
    a = ap.parse_args()
    if not a.access_key or not a.secret_key:
        ap.error("--access-key and --secret-key (or S3_ACCESS_KEY_ID/S3_SECRET_ACCESS_KEY)")
    missing = missing_tools()
    if missing:
        print(f"rgw.py: not installed: {' '.join(missing)} (run scripts/install-deps.sh)",
              file=sys.stderr)
        return 2
    status, cluster, data_dir = 1, None, None
    # Until the handlers of wait_for_stop: a stop asked for during the start ends it cleanly.
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.default_int_handler)
    try:
        data_dir = fresh_dir(a.data_dir)
        cluster = start(data_dir, a.access_key, a.secret_key, a.port, a.timeout, a.memstore_mib)
        print(f"PORT {cluster.port}\nENDPOINT {cluster.endpoint}", flush=True)
        print(f"rgw.py: {cluster.endpoint} ready in {cluster.started_in:.1f} s, data in "
              f"{data_dir}", file=sys.stderr, flush=True)
        status = wait_for_stop(cluster, a.exit_on_stdin_eof)
    except StartError as e:
        print(f"rgw.py: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        status = 0
    finally:
        if cluster is not None:
            cluster.stop()
        if data_dir is not None and not a.keep_data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
