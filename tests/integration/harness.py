"""The one way the tests and the benchmarks run h5osfs: start a daemon, wait for its mount,
unmount it, and check what it left behind; and the s3rver test server they talk to.

conftest.py (every fixture that mounts), test_s3.py and bench/*.py use it; it needs neither
pytest nor anything else outside the standard library (a bench script adds tests/integration to
sys.path and imports it).

Daemon(args, bucket, mnt, log) runs `$H5OSFS_BIN -f -o log_file=LOG ARGS BUCKET MNT` (the binary
is $H5OSFS_BIN, plain or sanitizer build, else build/h5osfs), with its standard error in a file
beside the log (a pipe nobody reads would stall a daemon that writes much there: a sanitizer
report), SIGINT and SIGQUIT at their defaults (see default_interrupt_signals), and returns once
the mount is in /proc/self/mountinfo.

The teardown, the same for every daemon (Daemon.finish, or unmount() then problems()):
  - unmounted with fusermount3 -u, retried while the mount is busy for BUSY_TIMEOUT s; only then
    lazily (fusermount3 -uz), and that is a problem;
  - the daemon exits by itself within exit_timeout, with the expected status (0): one still
    running is killed, and that is a problem;
  - no secret in its log or its standard error: the values of AWS_SECRET_ACCESS_KEY and
    AWS_SESSION_TOKEN in its environment, and whatever else the caller names;
  - no sanitizer report (AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer, ...) in
    its standard error or its log: UBSan reports and goes on, so the exit status alone misses it.
problems() lists what went wrong (empty: clean); assert_clean(daemons) raises AssertionError
with all of it (a test's teardown), Daemon.stop() RuntimeError (a benchmark's).

S3Server(workdir) starts tests/s3/server.js (s3rver behind a SigV4 verifier) on 127.0.0.1; the
test session runs one (s3fixtures.s3rver_server: test_s3.py's server, and in a tenant of its own
conftest's [s3] backend), a benchmark may run its own.
"""
import itertools
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
S3DIR = REPO / "tests" / "s3"

if str(S3DIR) not in sys.path:
    sys.path.insert(0, str(S3DIR))
from s3client import S3Client  # noqa: E402
import load_bucket  # noqa: E402

MOUNT_TIMEOUT = 15      # s: from start to the mount in mountinfo
BUSY_TIMEOUT = 5        # s: fusermount3 -u retried while the mount is busy
EXIT_TIMEOUT = 15       # s: from the unmount to the daemon's exit
TERM_TIMEOUT = 60       # s: from SIGTERM (unmount(terminate=True)) to the daemon's exit

SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")

# What the sanitizers print: "==PID==ERROR: AddressSanitizer: heap-use-after-free ...",
# "==PID==ERROR: LeakSanitizer: detected memory leaks", "file.c:12:3: runtime error: ...",
# "SUMMARY: UndefinedBehaviorSanitizer: ...", "WARNING: ThreadSanitizer: data race".
SANITIZER_REPORT = re.compile(r"(?:ERROR|WARNING|SUMMARY): [A-Za-z]*Sanitizer\b|"
                              r": runtime error: ")


def h5osfs_bin():
    return Path(os.environ.get("H5OSFS_BIN", REPO / "build" / "h5osfs"))


def sanitized(binary=None):
    """Whether binary (default: the daemon, $H5OSFS_BIN) was built with AddressSanitizer."""
    return b"__asan_init" in Path(binary or h5osfs_bin()).read_bytes()


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # field 5 is the mount point, with spaces etc. escaped as \040 octal
            point = line.split()[4].encode().decode("unicode_escape")
            if point == path:
                return True
    return False


def default_interrupt_signals():
    """In a daemon's child, before exec: SIGINT and SIGQUIT as a terminal would give them. A
    shell starts a background job (the suite run with &, or under nohup) with both ignored,
    the child inherits that, and libfuse then leaves them ignored on purpose, so a test that
    sends SIGINT would wait for an exit that never comes."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def sanitizer_reports(text):
    """The lines of text that are a sanitizer's report."""
    return [line for line in text.splitlines() if SANITIZER_REPORT.search(line)]


def unmount_path(mnt, busy_timeout=BUSY_TIMEOUT):
    """fusermount3 -u, retried while busy; lazily as the last resort. -> None when unmounted
    cleanly (or not mounted), else what went wrong."""
    deadline = time.monotonic() + busy_timeout
    err = ""
    while is_mounted(mnt):
        r = subprocess.run(["fusermount3", "-u", str(mnt)], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        if r.returncode == 0:
            return None
        err = r.stderr.strip()
        if time.monotonic() > deadline:
            subprocess.run(["fusermount3", "-uz", str(mnt)], stdin=subprocess.DEVNULL,
                           capture_output=True)
            return f"fusermount3 -u failed for {busy_timeout} s ({err}): unmounted lazily"
        time.sleep(0.1)
    return None


def _text(path):
    try:
        return Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return ""


class Daemon:
    """One h5osfs -f process and its mountpoint (see the module docstring)."""

    def __init__(self, args, bucket, mnt, log, env=None, secrets=(), stderr_path=None,
                 mount_timeout=MOUNT_TIMEOUT, expect_status=0, binary=None):
        """args: options before the bucket; env: the daemon's whole environment (None: this
        process's); secrets: more strings that must appear in neither its log nor its stderr;
        expect_status: the exit status the teardown accepts (-9: a test kills it); binary:
        the h5osfs to run (default h5osfs_bin())."""
        self.source, self.mnt, self.log_path = str(bucket), Path(mnt), Path(log)
        self.stderr_path = Path(stderr_path or self.log_path.with_suffix(".stderr"))
        self.env = dict(os.environ if env is None else env)
        self.secrets = [s for s in (*secrets, *(self.env.get(v) for v in SECRET_VARIABLES))
                        if s]
        self.expect_status = expect_status
        self.cmd = [str(binary or h5osfs_bin()), "-f", "-o", f"log_file={self.log_path}",
                    *map(str, args), self.source, str(self.mnt)]
        self._unmount_problems = []
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=self.env,
                                         preexec_fn=default_interrupt_signals)
        self._wait_mounted(mount_timeout)

    def _wait_mounted(self, timeout):
        deadline = time.monotonic() + timeout
        while not is_mounted(self.mnt):
            if self.proc.poll() is not None:
                raise RuntimeError(f"h5osfs exited with {self.proc.returncode}: "
                                   f"{self.stderr()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                unmount_path(self.mnt)
                raise RuntimeError(f"h5osfs did not mount {self.mnt} within {timeout} s: "
                                   f"{self.stderr()[-2000:]}")
            time.sleep(0.02)

    @property
    def pid(self):
        return self.proc.pid

    def path(self, rel=""):
        return self.mnt / str(rel).lstrip("/")

    def log(self):
        return _text(self.log_path)

    def stderr(self):
        return _text(self.stderr_path)

    def alive(self):
        return self.proc.poll() is None

    def assert_serving(self):
        """The daemon is alive and still mounted."""
        assert self.alive(), f"h5osfs exited with {self.proc.returncode}: {self.stderr()}"
        assert is_mounted(self.mnt), f"{self.mnt} is not mounted"

    def unmount(self, exit_timeout=EXIT_TIMEOUT, terminate=False):
        """Unmounts (if still mounted) and waits for the daemon's exit: -> its exit status.
        One still running after exit_timeout is killed (a problem), or with terminate=True
        sent SIGTERM and waited for TERM_TIMEOUT s more (what a benchmark does with a daemon
        still deleting old objects; it must then exit 0). Calling it again changes nothing."""
        problem = unmount_path(self.mnt)
        if problem:
            self._unmount_problems.append(problem)
        if self.proc.returncode is not None:
            return self.proc.returncode
        try:
            self.proc.wait(timeout=exit_timeout)
        except subprocess.TimeoutExpired:
            if terminate:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=TERM_TIMEOUT)
                    self.terminated = True
                    return self.proc.returncode
                except subprocess.TimeoutExpired:
                    pass
            self.proc.kill()
            self.proc.wait()
            self._unmount_problems.append(f"did not exit within {exit_timeout} s of the "
                                          f"unmount{' (nor of SIGTERM)' if terminate else ''}: "
                                          "killed")
        return self.proc.returncode

    terminated = False      # unmount(terminate=True) had to send SIGTERM

    def problems(self):
        """After unmount(): what the teardown must report (empty: all well)."""
        out = list(self._unmount_problems)
        if is_mounted(self.mnt):
            out.append("still mounted")
        rc = self.proc.returncode
        if rc is None:
            out.append("still running")
        elif rc != self.expect_status:
            out.append(f"exit status {rc} (expected {self.expect_status}): "
                       f"{self.stderr()[-1000:]}")
        log, err = self.log(), self.stderr()
        for i, s in enumerate(self.secrets):
            where = [n for n, text in (("log", log), ("stderr", err)) if s in text]
            if where:
                out.append(f"secret #{i + 1} ({len(s)} characters) appears in its "
                           f"{' and '.join(where)}")
        for name, text, path in (("stderr", err, self.stderr_path), ("log", log, self.log_path)):
            reports = sanitizer_reports(text)
            if reports:
                out.append(f"sanitizer report in its {name}: {reports[0]} "
                           f"({len(reports)} lines; see {path})")
        return [f"{self.mnt}: {p}" for p in out]

    def finish(self, exit_timeout=EXIT_TIMEOUT):
        """The teardown: unmount(), then problems()."""
        self.unmount(exit_timeout)
        return self.problems()

    def stop(self, exit_timeout=EXIT_TIMEOUT, terminate=False):
        """The teardown of a script (a benchmark): unmount(exit_timeout, terminate), then
        RuntimeError with the problems, if any."""
        self.unmount(exit_timeout, terminate)
        problems = self.problems()
        if problems:
            raise RuntimeError("h5osfs failed its teardown:\n" + "\n".join(problems))


def finish_all(daemons, exit_timeout=EXIT_TIMEOUT):
    """Every daemon's teardown (all of them, whatever fails): -> the problems of all."""
    out = []
    for d in daemons:
        try:
            out += d.finish(exit_timeout)
        except Exception as e:          # the others are still to be unmounted
            out.append(f"{d.mnt}: teardown failed: {e!r}")
    return out


def await_pause(m, stage, alive, limit=120):
    """Until mount m's daemon holds at test hook stage (H5OSFS_TEST_PAUSE_AT=stage:gate in its
    environment) while alive() is true (the thread or daemon that gets it there still runs).
    The limit only ends a hang with the log; no outcome depends on time."""
    t0 = time.monotonic()
    while f"H5OSFS_TEST_PAUSE_AT={stage}" not in m.log():
        assert time.monotonic() - t0 < limit and alive(), m.log()[-3000:]
        time.sleep(0.05)


def assert_clean(daemons, exit_timeout=EXIT_TIMEOUT):
    problems = finish_all(daemons, exit_timeout)
    assert not problems, "\n".join(problems)


def run_refused(cmd, env, mnt, timeout=10):
    """Runs a command line that must be refused at start: -> (status, stderr). Never leaves a
    mount: one that was not refused is unmounted, and AssertionError says so."""
    proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=default_interrupt_signals)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        unmount_path(mnt)
        proc.kill()
        proc.communicate()
        raise AssertionError(f"h5osfs was not refused: it ran (and mounted: {cmd})") from None
    mounted = is_mounted(mnt)
    if mounted:
        unmount_path(mnt)
    assert not mounted, f"{cmd} mounted something"
    return proc.returncode, err.decode(errors="replace")


# ---- the S3 test server (tests/s3) ----

S3RVER_VERSION = "3.7.1"
ACCESS_KEY = "H5OSFSTESTACCESSKEY1"
SECRET_KEY = "h5osfs/Test+Secret=Key0123456789abcdefghi"
REGION = "us-east-1"
PUBLIC_BUCKET = "hsdspublic"  # unsigned GET/HEAD allowed (for -o no_sign tests)


def node_binary():
    return shutil.which("node") or shutil.which("nodejs")


def s3rver_problem():
    """None when node and the pinned s3rver are installed, else why not."""
    if node_binary() is None:
        return "node is not on PATH (scripts/install-deps.sh installs Debian's nodejs)"
    pkg = S3DIR / "node_modules" / "s3rver" / "package.json"
    if not pkg.is_file():
        return f"{pkg} is missing (run scripts/install-s3rver.sh)"
    version = json.loads(pkg.read_text()).get("version")
    if version != S3RVER_VERSION:
        return (f"s3rver {version} installed, {S3RVER_VERSION} pinned "
                "(run scripts/install-s3rver.sh)")
    return None


def read_line(proc, what, log_path, timeout=20.0):
    """The next line a child prints on stdout (read byte-wise: what follows stays unread)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                proc.kill()
                raise RuntimeError(f"{what} did not answer within {timeout} s: "
                                   f"{_tail(log_path)}")
            chunk = os.read(proc.stdout.fileno(), 1)
            if not chunk:
                proc.wait()
                raise RuntimeError(f"{what} exited with {proc.returncode}: {_tail(log_path)}")
            buf += chunk
    finally:
        sel.close()
    return buf.decode().rstrip("\n")


def read_port(proc, what, log_path, timeout=20.0):
    """Waits for the "PORT <n>" line a child prints once it listens."""
    line = read_line(proc, what, log_path, timeout)
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"{what} printed {line!r}")
    return int(line.split()[1])


def _tail(path, n=2000):
    return _text(path)[-n:]


def kill_mounted(daemon, mnt):
    """For a test's finally: a daemon still running (a step failed) is killed and its mount
    point lazily unmounted, so that no later test meets it."""
    if daemon.proc.poll() is None:
        daemon.proc.kill()
        daemon.proc.wait(timeout=30)
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False, capture_output=True)


def stop_process(proc, timeout=5):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            f.close()
    return proc.returncode


class S3Account:
    """A key pair on an S3 server: .endpoint, .access_key, .secret_key, .region."""

    def client(self, **kw):
        kw.setdefault("access_key", self.access_key)
        kw.setdefault("secret_key", self.secret_key)
        endpoint = kw.pop("endpoint", self.endpoint)
        return S3Client(endpoint, **kw)

    def env(self):
        """Environment variables for a process that talks to this server (h5osfs)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}

    def load(self, bucket, directory):
        """Creates bucket and uploads every file of directory (key = relative path)."""
        return load_bucket.load(self.endpoint, bucket, directory, self.access_key,
                                self.secret_key)

    def new_bucket(self, directory=None):
        """A fresh bucket with a unique name (loaded from directory if given): for tests
        that write."""
        name = f"h5osfs-test-{next(self._names)}"
        if directory is None:
            with self.client() as c:
                c.create_bucket(name)
        else:
            self.load(name, directory)
        return name


class S3Server(S3Account):
    """One s3rver process (tests/s3/server.js) on 127.0.0.1 with a data directory of its own
    (kept between runs: a benchmark reuses what it uploaded)."""

    kind = "s3rver"

    def __init__(self, workdir, verify_sigv4=True, extra_args=(), tenants=()):
        """extra_args: more server.js options (e.g. "--keep-alive-ms", "200"); tenants:
        (tenant, access key, secret key) of users with buckets of their own (self.tenant)."""
        problem = s3rver_problem()
        if problem:
            raise FileNotFoundError(problem)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "server.log"
        self.access_key, self.secret_key, self.region = ACCESS_KEY, SECRET_KEY, REGION
        self.public_bucket = PUBLIC_BUCKET
        env = dict(os.environ)
        opts = env.get("NODE_OPTIONS", "")
        if "--openssl-legacy-provider" not in opts:
            env["NODE_OPTIONS"] = (opts + " --openssl-legacy-provider").strip()
        env["S3_ACCESS_KEY_ID"], env["S3_SECRET_ACCESS_KEY"] = ACCESS_KEY, SECRET_KEY
        self._tenants = {t: (a, k) for t, a, k in tenants}
        env["S3_TENANTS"] = json.dumps([{"tenant": t, "access_key": a, "secret_key": k}
                                        for t, (a, k) in self._tenants.items()])
        cmd = [node_binary(), str(S3DIR / "server.js"), "--directory", str(self.data_dir),
               "--port", "0", "--exit-on-stdin-eof", "--public-bucket", PUBLIC_BUCKET]
        if not verify_sigv4:
            cmd.append("--no-verify-sigv4")
        cmd += list(extra_args)
        with open(self.log_path, "wb") as log:
            # stdin stays open: the server exits when this process does, however it ends.
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, cwd=S3DIR, env=env)
        self.port = read_port(self.proc, "s3rver", self.log_path)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._names = itertools.count(1)

    def tenant(self, name):
        """The S3Tenant of one of the tenants this server was started with."""
        return S3Tenant(self, *self._tenants[name])

    def log(self):
        return _tail(self.log_path, 100000)

    def stop(self):
        return stop_process(self.proc)


class ServerUser(S3Account):
    """Another user of a running server, with S3Server's interface; the server is stopped by
    its owner, not here."""

    def __init__(self, server, access_key, secret_key):
        self.server = server
        self.endpoint, self.port = server.endpoint, server.port
        self.access_key, self.secret_key, self.region = access_key, secret_key, REGION
        self.public_bucket = PUBLIC_BUCKET
        self._names = itertools.count(1)

    def log(self):
        return self.server.log()

    def stop(self):
        return 0


class S3Tenant(ServerUser):
    """A user of an S3Server in a tenant of its own (its buckets are nobody else's, as a
    Ceph RGW tenant's)."""

    kind = "s3rver"
