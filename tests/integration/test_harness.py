"""The teardown every mount of the suite and of bench/ gets (harness.py) catches what it must:
a daemon that died of a signal, a sanitizer report, a secret in the log, a mount still busy.
Each failure is made on purpose on a real daemon, and the teardown must name it."""
import os
import signal
import threading
import time

import pytest

import harness
from conftest import BUCKET

USER = ("-o", "user=test_user1")
SECRET = "h5osfs/Harness+Secret=0123456789abcdefghij"
TOKEN = "FwoGZXIvYXdzEHarnessSessionToken0123456789"


@pytest.fixture
def start(tmp_path):
    """Factory: start(env=None, **kw) -> harness.Daemon on the fixture bucket; a daemon the test
    left running is stopped at the end (its problems are the test's business)."""
    daemons = []

    def start_one(env=None, **kw):
        mnt = tmp_path / f"mnt{len(daemons)}"
        mnt.mkdir()
        d = harness.Daemon([*USER, "-o", f"cache_dir={tmp_path}/cache{len(daemons)}"], BUCKET,
                           mnt, tmp_path / f"h5osfs{len(daemons)}.log", env=env, **kw)
        daemons.append(d)
        return d

    yield start_one
    harness.finish_all(daemons)


def test_a_clean_daemon_has_no_problems(start):
    d = start()
    assert os.listdir(d.path("home/test_user1"))
    assert d.finish() == []
    assert d.proc.returncode == 0


def test_a_daemon_killed_by_sigabrt_fails(start):
    d = start()
    os.kill(d.pid, signal.SIGABRT)
    d.proc.wait(timeout=30)
    problems = d.finish()
    assert any(f"exit status {-signal.SIGABRT} (expected 0)" in p for p in problems), problems
    assert not harness.is_mounted(d.mnt)


def test_the_expected_status_of_a_killed_daemon_passes(start):
    d = start(expect_status=-signal.SIGKILL)
    d.proc.kill()
    d.proc.wait(timeout=30)
    assert d.finish() == []


@pytest.mark.parametrize("where", ["log", "stderr"])
@pytest.mark.parametrize("line", [
    "==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010",
    "==4242==ERROR: LeakSanitizer: detected memory leaks",
    "src/fs/fs.c:12:5: runtime error: signed integer overflow",
    "SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior src/fs/fs.c:12:5",
], ids=["asan", "lsan", "ubsan", "summary"])
def test_a_sanitizer_report_fails(start, where, line):
    """UBSan reports and goes on (exit status 0): only the text tells."""
    d = start()
    path = d.log_path if where == "log" else d.stderr_path
    with open(path, "a") as f:
        f.write(line + "\n")
    problems = d.finish()
    assert d.proc.returncode == 0
    assert len(problems) == 1 and f"sanitizer report in its {where}: {line}" in problems[0], \
        problems


@pytest.mark.parametrize("variable,value", [("AWS_SECRET_ACCESS_KEY", SECRET),
                                            ("AWS_SESSION_TOKEN", TOKEN)])
def test_a_secret_of_the_environment_in_the_log_fails(start, variable, value):
    d = start(env=dict(os.environ, **{variable: value}))
    with open(d.log_path, "a") as f:
        f.write(f"2026-01-01 h5osfs[1] info: signing with {value}\n")
    problems = d.finish()
    assert len(problems) == 1 and "secret #1" in problems[0] and "in its log" in problems[0], \
        problems
    assert value not in problems[0]


def test_a_named_secret_on_stderr_fails(start):
    d = start(secrets=["an-explicit/secret+value"])
    with open(d.stderr_path, "a") as f:
        f.write("h5osfs: an-explicit/secret+value\n")
    problems = d.finish()
    assert len(problems) == 1 and "appears in its stderr" in problems[0], problems


def test_a_busy_mount_is_unmounted_lazily_and_fails(start):
    """A descriptor open at teardown: fusermount3 -u is retried for BUSY_TIMEOUT s, then the
    mount is detached lazily, and that is a failure; the daemon exits once the descriptor goes
    (closed here once the lazy unmount took the mount away). How it exits is not this test's
    business: under load the kernel sometimes ends the detached connection as aborted,
    libfuse's read then fails with ECONNABORTED ("Software caused connection abort") and
    h5osfs exits 1."""
    d = start()
    fd = os.open(d.path("home/test_user1/sample1.h5"), os.O_RDONLY)

    def close_once_detached():
        # however long the retries took; the cap only keeps a broken teardown from hanging
        deadline = time.monotonic() + 60
        while harness.is_mounted(d.mnt) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.close(fd)

    closer = threading.Thread(target=close_once_detached)
    closer.start()
    try:
        problems = d.finish()
    finally:
        closer.join()
    assert "unmounted lazily" in problems[0], problems
    assert all("exit status 1 " in p for p in problems[1:]), problems
    assert d.proc.returncode is not None and not harness.is_mounted(d.mnt)
