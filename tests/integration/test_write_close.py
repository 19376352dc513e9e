"""When a written file becomes the domain (issue 24 part 4): an open file description shared by
several processes (a shell's `> file` handed to each command of a group) is committed once
its last descriptor closes, so no close sees a half-written file; and readers opening a domain
that `cp` keeps replacing, on a busy machine, each get one whole version, never ESTALE.

The store does not matter here (flush, release and open are the FUSE front end's): posix only.
"""
import errno
import os
import subprocess

import h5py
import numpy as np

HOME = "home/test_user1"

import pytest

pytestmark = pytest.mark.backends("posix")


@pytest.fixture
def writable(bucket_copy, mount_bucket, tmp_path):
    return mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")


def make_file_of(path, n, tag):
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(n, dtype="<i8") * 3
        f.attrs["tag"] = tag


def assert_version(path, n, tag):
    with h5py.File(path, "r") as f:
        assert f.attrs["tag"] == tag
        assert np.array_equal(f["x"][...], np.arange(n, dtype="<i8") * 3)


def test_commands_sharing_a_redirection_write_one_file(writable, tmp_path):
    """`(head -c N src; tail -c +N+1 src) > MNT/x.h5`: head's close is not the last of the
    open file description (tail's and the subshell's follow), so it commits nothing and
    succeeds; the file is stored whole once the last descriptor closes."""
    src = tmp_path / "src.h5"
    make_file_of(src, 100000, "whole")
    half = src.stat().st_size // 2
    target = writable.path(f"{HOME}/split.h5")
    r = subprocess.run(["bash", "-c", f'(head -c {half} "$1"; tail -c +{half + 1} "$1") > "$2"',
                        "sh", str(src), str(target)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert target.stat().st_size > 0
    assert_version(target, 100000, "whole")
    assert "not an HDF5 file" not in writable.log()
    assert writable.log().count("split.h5: committed") == 1     # once, at the last close


def test_dup_descriptors_commit_at_the_last_close_with_its_error(writable, tmp_path):
    """Two descriptors of one open (dup): closing the first commits nothing and succeeds; the
    last close commits, and a commit's error (bytes that are not HDF5) is that close's."""
    src = tmp_path / "src.h5"
    make_file_of(src, 50000, "dup")
    data = src.read_bytes()
    target = writable.path(f"{HOME}/dup.h5")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    second = os.dup(fd)
    os.write(fd, data[:1000])
    os.close(fd)                                        # not the last: no EINVAL
    os.write(second, data[1000:])
    os.close(second)
    assert_version(target, 50000, "dup")
    assert writable.log().count("dup.h5: committed") == 1

    junk = writable.path(f"{HOME}/junk.h5")
    fd = os.open(junk, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    second = os.dup(fd)
    os.write(fd, b"not HDF5 at all")
    os.close(fd)
    with pytest.raises(OSError) as e:
        os.close(second)
    assert e.value.errno == errno.EINVAL
    assert not junk.exists()


def test_fsync_commits_while_other_descriptors_are_open(writable, tmp_path):
    """fsync makes the file durable whatever else holds it: it commits, and its error is
    fsync's."""
    src = tmp_path / "src.h5"
    make_file_of(src, 20000, "synced")
    target = writable.path(f"{HOME}/synced.h5")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    second = os.dup(fd)
    os.write(fd, src.read_bytes())
    os.fsync(fd)
    assert writable.log().count("synced.h5: committed") == 1
    root = os.getxattr(target, "user.h5osfs.root")
    os.close(fd)
    os.close(second)                                    # nothing changed since: no commit
    assert writable.log().count("synced.h5: committed") == 1
    assert os.getxattr(target, "user.h5osfs.root") == root
    assert_version(target, 20000, "synced")
