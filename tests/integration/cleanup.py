"""--remove-passed: the files of a test that passed are removed while the run goes on.

A whole run of scripts/test.sh leaves its tests' directories (buckets, cache directories,
staging areas: about 20 MB and 400 files a test) until its end, where removing them took
63-81 s after the last test had ended (bench/README.md, "The suite"). With this option
each test's tmp_path is removed as soon as the test has passed, its teardown included, by
`rm` at the lowest CPU priority in the background, while the next tests run: the cores are
busy with the tests, the removal mostly waits on the disk. A test that failed or errored
keeps its files, as does a run without the option. The session waits for the removals it
started before it ends, so nothing outlives the run.

`rm --one-file-system`: a mount a test left behind in its directory is never descended into
(whatever a daemon serves there is a bucket, not the test's files).
"""
import subprocess

import pytest


MAX_RUNNING = 4   # removals at once; the next test waits for the oldest beyond that


def add_option(parser):
    parser.getgroup("h5osfs").addoption(
        "--remove-passed", action="store_true",
        help="remove each passed test's tmp_path in the background as soon as it has passed "
        "(scripts/test.sh: the run's files are not all left for its end)")


class Remover:
    def __init__(self):
        self.running = []

    def remove(self, path):
        self.running = [p for p in self.running if p.poll() is None]
        while len(self.running) >= MAX_RUNNING:
            self.running.pop(0).wait()
        self.running.append(subprocess.Popen(
            ["nice", "-n", "19", "rm", "-rf", "--one-file-system", "--", str(path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def wait(self):
        for p in self.running:
            p.wait()
        self.running = []


def configure(config):
    config._h5osfs_remover = Remover() if config.getoption("--remove-passed") else None


@pytest.fixture
def tmp_path(tmp_path, request):
    """pytest's tmp_path, noted on the test so that it can be removed once the test passed."""
    request.node._h5osfs_tmp_path = tmp_path
    return tmp_path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if outcome.get_result().failed:
        item._h5osfs_failed = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield   # every function-scoped fixture is torn down by now: no mount uses the directory
    remover = getattr(item.config, "_h5osfs_remover", None)
    path = getattr(item, "_h5osfs_tmp_path", None)
    if remover and path and not getattr(item, "_h5osfs_failed", False):
        remover.remove(path)


def session_finish(session):
    remover = getattr(session.config, "_h5osfs_remover", None)
    if remover:
        remover.wait()
