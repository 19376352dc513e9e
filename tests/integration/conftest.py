"""pytest fixtures that run the real h5osfs binary on a real FUSE mount.

The binary is $H5OSFS_BIN, or build/h5osfs in the repository. Every mount is started in the
foreground with a log file, waited for in /proc/self/mountinfo, and on teardown unmounted with
fusermount3; the daemon must then exit by itself with status 0.
"""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
FIXTURE = DATA / "hsds-v2"
BUCKET = FIXTURE / "hsdstest"
SHARED = REPO.parent / "shared"


def h5osfs_bin():
    return Path(os.environ.get("H5OSFS_BIN", REPO / "build" / "h5osfs"))


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # field 5 is the mount point, with spaces etc. escaped as \040 octal
            point = line.split()[4].encode().decode("unicode_escape")
            if point == path:
                return True
    return False


class Mount:
    """One running h5osfs daemon and its mountpoint."""

    def __init__(self, bucket, mnt, log, args):
        self.bucket = Path(bucket)
        self.mnt = Path(mnt)
        self.log_path = Path(log)
        cmd = [str(h5osfs_bin()), "-f", "-o", f"log_file={log}"] + list(args) + [
            str(bucket), str(mnt)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while not is_mounted(mnt):
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                raise RuntimeError(f"h5osfs exited with {self.proc.returncode}: {err.decode()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("h5osfs did not mount within 15 s")
            time.sleep(0.02)

    def path(self, rel=""):
        return self.mnt / rel.lstrip("/")

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def unmount(self):
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", str(self.mnt)], check=True)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("h5osfs did not exit after unmount")
        self.proc.communicate()
        return self.proc.returncode


@pytest.fixture
def mount_bucket(tmp_path):
    """Factory: mount_bucket(bucket, *args) -> Mount; every mount is checked at teardown."""
    mounts = []

    def start(bucket=BUCKET, *args):
        mnt = tmp_path / f"mnt{len(mounts)}"
        mnt.mkdir()
        m = Mount(bucket, mnt, tmp_path / f"h5osfs{len(mounts)}.log", args)
        mounts.append(m)
        return m

    yield start
    failures = []
    for m in mounts:
        rc = m.unmount()
        if rc != 0:
            failures.append(f"{m.mnt}: exit status {rc}")
        if is_mounted(m.mnt):
            failures.append(f"{m.mnt}: still mounted")
    assert not failures, failures


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


# ---- shared by the image tests (test_image*.py) ----

SOURCE = FIXTURE / "source"


@pytest.fixture(scope="module")
def shared_mount(tmp_path_factory):
    """One mount of the read-only fixture bucket as test_user1, shared by a module's tests that
    only read. Checked like mount_bucket's mounts when the module is done."""
    root = tmp_path_factory.mktemp("shared")
    mnt = root / "mnt"
    mnt.mkdir()
    m = Mount(BUCKET, mnt, root / "h5osfs.log", ("-o", "user=test_user1"))
    yield m
    rc = m.unmount()
    assert rc == 0, f"{mnt}: exit status {rc}"
    assert not is_mounted(mnt), f"{mnt}: still mounted"


def assert_serving(m):
    """The daemon of mount m is alive, still mounted and answering."""
    assert m.proc.poll() is None, f"h5osfs exited with {m.proc.returncode}"
    assert is_mounted(m.mnt)
    assert os.listdir(m.path("home/test_user1"))
