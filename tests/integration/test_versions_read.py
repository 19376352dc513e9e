"""Issue 26, step 2: reading kept versions. DIR/.versions/NAME/<n>.h5 is the version n of the
domain DIR/NAME, read from the version list and the version's own root (chunk tables over the
domain's pool, tests/tools/make_version.py writes them as the design stores them): reachable
by name, never listed in DIR, read-only, mtime = commit time, xattrs naming root and committer.
Bad input costs one version, never the others or the domain."""
import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
NAME = "sample3_z_gzip.h5"
TOOL = Path(__file__).resolve().parents[1] / "tools" / "make_version.py"
VDIR = f"{HOME}/.versions/{NAME}"


def make_version(bucket, domain, *more):
    out = subprocess.run([sys.executable, str(TOOL), str(bucket), domain, *more],
                         capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), out[1], out[2]          # number, root, pool


def same(a, b):
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


@pytest.fixture
def two_versions(bucket_copy):
    """Version 1 of NAME is NAME as the fixture has it (gzip chunks, read through the pool);
    version 2 is sample2.h5's content, as if it had been copied over NAME."""
    v1 = make_version(bucket_copy, f"{HOME}/{NAME}", "--time", "1000000000.5", "--by", "alice@h")
    v2 = make_version(bucket_copy, f"{HOME}/{NAME}", "--from", f"{HOME}/sample2.h5")
    return bucket_copy, v1, v2


def test_versions_read_as_committed(two_versions, mount_bucket, tmp_path):
    bucket, v1, v2 = two_versions
    m = mount_bucket(bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    assert ".versions" not in os.listdir(m.path(HOME))          # tar, rsync, du skip it
    assert os.listdir(m.path(f"{HOME}/.versions")) == [NAME]
    assert os.listdir(m.path(VDIR)) == ["1.h5", "2.h5"]
    for n, source in ((1, NAME), (2, "sample2.h5")):
        ok, out = same(m.path(f"{VDIR}/{n}.h5"), m.path(f"{HOME}/{source}"))
        assert ok, out
    st = os.stat(m.path(f"{VDIR}/1.h5"))
    assert st.st_mtime == 1000000000.5 and st.st_mode & 0o222 == 0
    assert os.getxattr(m.path(f"{VDIR}/1.h5"), "user.h5osfs.root").decode() == v1[1]
    assert os.getxattr(m.path(f"{VDIR}/1.h5"), "user.h5osfs.committer") == b"alice@h"
    assert os.getxattr(m.path(f"{VDIR}/2.h5"), "user.h5osfs.version") == b"2"
    with pytest.raises(FileNotFoundError):
        os.stat(m.path(f"{VDIR}/3.h5"))


@pytest.mark.posix_only(reason="the list and the objects are read the same on every store")
def test_versions_are_read_only(two_versions, mount_bucket, tmp_path):
    bucket, _, _ = two_versions
    m = mount_bucket(bucket, "-o", f"user=test_user1,cache_dir={tmp_path}/cache")
    with pytest.raises(PermissionError):
        open(m.path(f"{VDIR}/1.h5"), "r+b")
    for make in (lambda: open(m.path(f"{VDIR}/9.h5"), "wb"),
                 lambda: os.mkdir(m.path(f"{VDIR}/x"))):
        with pytest.raises(OSError) as e:
            make()
        assert e.value.errno == errno.EPERM             # only version operations make them


def edit_json(path, change):
    doc = json.loads(Path(path).read_text())
    change(doc)
    Path(path).write_text(json.dumps(doc))


@pytest.mark.posix_only(reason="bad input is read the same on every store")
def test_a_malformed_entry_costs_that_version_only(two_versions, mount_bucket, tmp_path):
    bucket, _, _ = two_versions
    lst = bucket / VDIR / ".h5osfs-versions"
    edit_json(lst, lambda d: d["versions"][0].update(root="g-not-a-root"))
    m = mount_bucket(bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    assert os.listdir(m.path(VDIR)) == ["1.h5", "2.h5"]
    with pytest.raises(OSError) as e:
        open(m.path(f"{VDIR}/1.h5"), "rb").read()
    assert e.value.errno == errno.EIO
    assert same(m.path(f"{VDIR}/2.h5"), m.path(f"{HOME}/sample2.h5"))[0]
    assert "version 1 unreadable: root is not a root group id" in m.log()


@pytest.mark.posix_only(reason="bad input is read the same on every store")
@pytest.mark.parametrize("forged", ["no number", "a number twice"])
def test_an_entry_without_its_own_number_is_logged_and_listed_once(two_versions, mount_bucket,
                                                                   tmp_path, forged):
    """An entry whose n is no number cannot be listed under one: it is logged (once), not
    dropped silently. An entry that takes another's number (its names then name another
    number) is broken: that number is listed once, and reads as the valid entry's version."""
    bucket, _, _ = two_versions
    lst = bucket / VDIR / ".h5osfs-versions"
    edit_json(lst, lambda d: d["versions"][0].update(n="two" if forged == "no number" else 2))
    m = mount_bucket(bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    names = os.listdir(m.path(VDIR))
    assert names == ["2.h5"], names
    assert same(m.path(f"{VDIR}/2.h5"), m.path(f"{HOME}/sample2.h5"))[0]
    if forged == "no number":
        assert m.log().count("a version list entry without a valid number is not shown: n is "
                             "not a positive integer") == 1, m.log()[-2000:]
    else:
        assert "version 2 unreadable: a name is another version's number" in m.log()


@pytest.mark.posix_only(reason="bad input is read the same on every store")
def test_an_unparseable_list_leaves_the_domain_readable(two_versions, mount_bucket, tmp_path):
    bucket, _, _ = two_versions
    (bucket / VDIR / ".h5osfs-versions").write_text("{not json")
    m = mount_bucket(bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    with pytest.raises(OSError) as e:
        os.listdir(m.path(VDIR))
    assert e.value.errno == errno.EIO
    with open(m.path(f"{HOME}/{NAME}"), "rb") as f:
        assert f.read(8) == b"\x89HDF\r\n\x1a\n"
    assert "version list unusable" in m.log()


def table_chunks(bucket, vroot):
    """The table chunks (files) of the version root vroot: those whose entries name pool
    objects."""
    found = [p for p in (bucket / "db" / vroot[2:19]).rglob("0*")
             if p.is_file() and b"/c/" in p.read_bytes()]
    assert found, "no chunk table"
    return found


@pytest.mark.posix_only(reason="bad input is read the same on every store")
@pytest.mark.parametrize("target", ["current", "other_bucket", "missing_root"])
def test_a_table_outside_the_pool_is_eio_for_that_version(two_versions, mount_bucket, tmp_path,
                                                          target):
    """An entry naming an object of the current root (or of another bucket) is refused: EIO
    for that version, never the other object's bytes; so is a version whose root is gone."""
    bucket, v1, _ = two_versions
    if target == "missing_root":
        shutil.rmtree(bucket / "db" / v1[1][2:19])
    else:
        evil = (b"otherbucket/linked/sample_link.h5" if target == "other_bucket"
                else b"hsdstest/home/test_user1/" + NAME.encode() + b"/.domain.json")
        for chunk in table_chunks(bucket, v1[1]):
            chunk.write_bytes(re.sub(rb"hsdstest/db/[0-9a-f-]{17}/c/[0-9a-f]{32}",
                                     lambda u: evil.ljust(len(u.group(0)), b"\0"),
                                     chunk.read_bytes()))
    m = mount_bucket(bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    with pytest.raises(OSError) as e:
        open(m.path(f"{VDIR}/1.h5"), "rb").read()
    assert e.value.errno == errno.EIO
    assert same(m.path(f"{VDIR}/2.h5"), m.path(f"{HOME}/sample2.h5"))[0]
    assert ".versions" not in os.listdir(m.path(HOME))
    if target != "missing_root":
        assert "outside pool" in m.log()


@pytest.mark.parametrize("target", ["other_domain", "other_version"])
def test_a_list_naming_another_domains_root_is_eio_for_that_version(two_versions, mount_bucket,
                                                                   tmp_path, target):
    """The list is a key the domain's folder writer may write: an entry pointed at another
    domain's root (one its ACL hides from the reader, or a version of it, whose root group
    names that domain's pool) serves nothing of it, not even its groups and attributes: that
    version is EIO with one log line, the other version and the domain read as before."""
    bucket, _, _ = two_versions
    other = f"{HOME}/sample3.h5"
    root = json.loads((bucket / other / ".domain.json").read_text())["root"]
    if target == "other_version":
        root = make_version(bucket, other)[1]                  # over sample3.h5's own pool
    edit_json(bucket / other / ".domain.json",
              lambda d: d["acls"].update(test_user1={r: False for r in d["acls"]["test_user1"]}))

    def forge(doc):                     # lists kept before sizes were may lack "size"
        doc["versions"][1]["root"] = root
        doc["versions"][1].pop("size", None)
    edit_json(bucket / VDIR / ".h5osfs-versions", forge)
    m = mount_bucket(bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    with pytest.raises(PermissionError):
        open(m.path(other), "rb").read()
    with pytest.raises(OSError) as e:               # before anything of it: its groups too
        with open(m.path(f"{VDIR}/2.h5"), "rb"):
            pass
    assert e.value.errno == errno.EIO
    with pytest.raises(OSError) as e:               # nor its tree in the Zarr view
        os.listdir(m.path(f".zarr/{VDIR}/2.h5"))
    assert e.value.errno == errno.EIO
    refused = [line for line in m.log().splitlines()
               if f"{VDIR}/2.h5: " in line and f"root {root} is not a version over pool" in line]
    assert "zarr view" not in refused[0] and "zarr view" in refused[-1], refused   # each view
    assert os.listdir(m.path(f".zarr/{VDIR}/1.h5"))
    ok, out = same(m.path(f"{VDIR}/1.h5"), m.path(f"{HOME}/{NAME}"))
    assert ok, out
    with open(m.path(f"{HOME}/{NAME}"), "rb") as f:
        assert f.read(8) == b"\x89HDF\r\n\x1a\n"
