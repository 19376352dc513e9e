"""--remove-passed (cleanup.py), which scripts/test.sh gives every pytest process: a passed
test's directory goes as soon as it has passed, a failed or errored test's stays, and a mount
left inside a passed test's directory is not descended into. Checked on a pytest run of a few
probe tests in a directory of their own, with the same wiring as conftest.py."""
import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

PROBE_CONFTEST = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import cleanup
from cleanup import pytest_runtest_makereport, pytest_runtest_protocol, tmp_path


def pytest_addoption(parser):
    cleanup.add_option(parser)


def pytest_configure(config):
    cleanup.configure(config)


def pytest_sessionfinish(session):
    cleanup.session_finish(session)
"""

PROBE_TESTS = """
import os, subprocess
import pytest


def test_passes(tmp_path):
    (tmp_path / "made").write_text("x")


def test_fails(tmp_path):
    (tmp_path / "made").write_text("x")
    assert False


@pytest.fixture
def teardown_fails():
    yield
    raise RuntimeError("teardown")


def test_teardown_errors(tmp_path, teardown_fails):
    (tmp_path / "made").write_text("x")


def test_passes_leaving_a_mount(tmp_path):
    (tmp_path / "made").write_text("x")
    (tmp_path / "mnt").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "probe", str(tmp_path / "mnt")],
                   check=True)
    (tmp_path / "mnt" / "inside").write_text("a file system of its own")
"""


def run_probe(tmp_path, *opts):
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "conftest.py").write_text(PROBE_CONFTEST)
    (probe / "test_probe.py").write_text(PROBE_TESTS)
    base = tmp_path / f"base{len(opts)}"
    r = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        "--rootdir", str(probe), "--basetemp", str(base), *opts, str(probe)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert "1 failed, 3 passed, 1 error" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    return {p.name[:-1]: p for p in base.iterdir() if p.is_dir() and not p.is_symlink()}


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_remove_passed_removes_passed_tests_files_only(tmp_path):
    kept = run_probe(tmp_path)
    mnt = kept["test_passes_leaving_a_mount"] / "mnt"
    subprocess.run(["umount", str(mnt)], check=True)
    assert sorted(kept) == ["test_fails", "test_passes", "test_passes_leaving_a_mount",
                            "test_teardown_errors"]       # without the option: all stay
    removed = run_probe(tmp_path, "--remove-passed")
    left = removed.pop("test_passes_leaving_a_mount")
    try:
        assert sorted(removed) == ["test_fails", "test_teardown_errors"]
        assert all((d / "made").exists() for d in removed.values())
        # rm --one-file-system removed what it could and left the mount and its file alone
        assert (left / "mnt" / "inside").read_text() == "a file system of its own"
        assert not (left / "made").exists()
    finally:
        subprocess.run(["umount", str(left / "mnt")], check=True)
