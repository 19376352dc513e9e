"""Issue 26, step 1: the settings that turn versions on (-o versions=, -o versions_keep=, the
folder xattr user.h5osfs.versions) and the name .versions, which only h5osfs's version
operations may make. The setting is a folder object's member, the same on every store (posix
only: the store adds nothing here)."""
import errno
import json
import os
import subprocess

import pytest

from conftest import h5osfs_bin

HOME = "home/test_user1"


def test_help_names_the_options():
    out = subprocess.run([h5osfs_bin(), "--help"], capture_output=True, text=True).stdout
    assert "-o versions=on|off" in out and "-o versions_keep=N" in out
    assert "-o versions_grace=SECONDS" in out and "-o versions_sweep_interval=SECONDS" in out
    assert "-o versions_current=root|ref" in out


@pytest.mark.parametrize("opt,message", [
    ("versions=yes", "versions must be on or off"),
    ("versions_keep=0", "versions_keep must be a whole number"),
    ("versions_grace=-1", "versions_grace must be a number of seconds"),
    ("versions_sweep_interval=x", "versions_sweep_interval must be a number of seconds"),
    ("versions_current=plain", "versions_current must be root or ref"),
    ("versions=ref", "versions must be on or off"),
])
def test_bad_option_values_are_refused(opt, message, tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "m").mkdir()
    r = subprocess.run([h5osfs_bin(), "-f", "-o", opt, str(tmp_path / "b"), str(tmp_path / "m")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and message in r.stderr


def test_folder_xattr_is_kept_in_the_folder_object(bucket_copy, mount_bucket, tmp_path):
    """on, off and keep:N are stored as the folder's "h5osfs": {"versions": ...}, read back,
    listed, removed; other values, domains and .versions names are refused."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    top = m.path(f"{HOME}/kept")
    os.mkdir(top)
    with pytest.raises(OSError) as e:
        os.getxattr(top, "user.h5osfs.versions")
    assert e.value.errno == errno.ENODATA
    for value in (b"on", b"keep:3", b"off"):
        os.setxattr(top, "user.h5osfs.versions", value)
        assert os.getxattr(top, "user.h5osfs.versions") == value
        folder = json.loads(m.get(f"{HOME}/kept/.domain.json"))
        assert folder["h5osfs"] == {"versions": value.decode()} and "root" not in folder
    os.setxattr(top, "user.h5osfs.ingest", b"link")
    assert sorted(os.listxattr(top)) == ["user.h5osfs.ingest", "user.h5osfs.owner",
                                         "user.h5osfs.versions"]
    os.removexattr(top, "user.h5osfs.versions")
    assert json.loads(m.get(f"{HOME}/kept/.domain.json"))["h5osfs"] == {"ingest": "link"}
    for bad in (b"yes", b"keep:0", b"keep:x", b"ON"):
        with pytest.raises(OSError) as e:
            os.setxattr(top, "user.h5osfs.versions", bad)
        assert e.value.errno == errno.EINVAL, bad
    with pytest.raises(OSError) as e:
        os.setxattr(m.path(f"{HOME}/sample1.h5"), "user.h5osfs.versions", b"on")
    assert e.value.errno == errno.ENOTSUP           # a domain: per folder only
    with pytest.raises(OSError) as e:
        os.mkdir(m.path(f"{HOME}/.versions/x"))
    assert e.value.errno == errno.EPERM             # only version operations make them
