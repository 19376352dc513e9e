"""mkdir, rmdir, rm and mv on domains and folders (issue 5, namespace part), on a real mount of
a copy of the HSDS fixture bucket: what the mount shows, what the bucket holds afterwards
(keys HSDS reads, JSON HSDS requires), rights from the ACLs, read-only mounts.
Creating and writing domain files is not implemented yet (EROFS, tested elsewhere)."""
import errno
import json
import os

import pytest

import conftest
from conftest import bucket_snapshot

HOME = "home/test_user1"


def domain_json(bucket, path):
    return json.loads((bucket / path / ".domain.json").read_text())


def db_keys(bucket, root):
    d = bucket / "db" / root[2:19]
    return sorted(str(p.relative_to(bucket)) for p in d.rglob("*")
                  if p.is_file() and not conftest.is_put_under_way(p))


def test_mkdir_creates_a_folder_domain_as_hsds_would(bucket_copy, mount_bucket):
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    os.mkdir(m.path(f"{HOME}/project"))
    assert os.path.isdir(m.path(f"{HOME}/project"))
    assert os.listdir(m.path(f"{HOME}/project")) == []
    d = domain_json(bucket_copy, f"{HOME}/project")
    assert "root" not in d and d["owner"] == "test_user1"
    assert list(d) == ["owner", "acls", "created", "lastModified"]     # HSDS's member order
    assert d["acls"]["test_user1"] == {k: True for k in
                                       ("create", "read", "update", "delete", "readACL",
                                        "updateACL")}
    assert d["acls"]["default"]["read"] is True and not d["acls"]["default"]["update"]
    assert isinstance(d["created"], float)
    with pytest.raises(FileExistsError):
        os.mkdir(m.path(f"{HOME}/project"))
    with pytest.raises(FileExistsError):
        os.mkdir(m.path(f"{HOME}/sample1.h5"))
    os.mkdir(m.path(f"{HOME}/project/sub"))     # create right inherited
    assert os.listdir(m.path(f"{HOME}/project")) == ["sub"]


def test_rights_decide_who_may_change_what(bucket_copy, mount_bucket):
    other = mount_bucket(bucket_copy, "-o", "user=intruder,ttl=0")
    before = bucket_snapshot(bucket_copy)
    for op in (lambda: os.mkdir(other.path(f"{HOME}/x")),
               lambda: os.mkdir(other.path("home/x")),       # /home grants create to admin only
               lambda: os.mkdir(other.path("top")),          # the bucket root: admin only
               lambda: os.rmdir(other.path(HOME)),
               lambda: os.unlink(other.path(f"{HOME}/sample1.h5")),
               lambda: os.rename(other.path(f"{HOME}/sample1.h5"), other.path(f"{HOME}/y.h5"))):
        with pytest.raises(PermissionError):
            op()
    assert bucket_snapshot(bucket_copy) == before
    admin = mount_bucket(bucket_copy, "-o", "user=admin,ttl=0")
    os.mkdir(admin.path("top"))
    assert domain_json(bucket_copy, "top")["owner"] == "admin"


def test_read_only_mount_refuses_every_change(bucket_copy, mount_bucket):
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ro")
    before = bucket_snapshot(bucket_copy)
    for op in (lambda: os.mkdir(m.path(f"{HOME}/x")),
               lambda: os.rmdir(m.path(HOME)),
               lambda: os.unlink(m.path(f"{HOME}/sample1.h5")),
               lambda: os.rename(m.path(f"{HOME}/sample1.h5"), m.path(f"{HOME}/y.h5"))):
        with pytest.raises(OSError) as e:
            op()
        assert e.value.errno == errno.EROFS
    assert bucket_snapshot(bucket_copy) == before


def test_rmdir_only_when_empty(bucket_copy, mount_bucket):
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    with pytest.raises(OSError) as e:
        os.rmdir(m.path(HOME))
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(NotADirectoryError):
        os.rmdir(m.path(f"{HOME}/sample1.h5"))
    os.mkdir(m.path(f"{HOME}/empty"))
    os.rmdir(m.path(f"{HOME}/empty"))
    assert "empty" not in os.listdir(m.path(HOME))
    assert not (bucket_copy / HOME / "empty" / ".domain.json").exists()


def test_rm_removes_the_domain_then_its_objects(bucket_copy, mount_bucket):
    root = domain_json(bucket_copy, f"{HOME}/sample3.h5")["root"]
    others = {d: db_keys(bucket_copy, domain_json(bucket_copy, f"{HOME}/{d}")["root"])
              for d in ("sample1.h5", "sample2.h5")}
    assert db_keys(bucket_copy, root)
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    with pytest.raises(IsADirectoryError):
        os.unlink(m.path(HOME))
    os.unlink(m.path(f"{HOME}/sample3.h5"))
    assert "sample3.h5" not in os.listdir(m.path(HOME))
    assert not (bucket_copy / HOME / "sample3.h5" / ".domain.json").exists()
    m.unmount()                                  # the collector finishes at unmount
    assert db_keys(bucket_copy, root) == []
    for d, keys in others.items():               # nothing else was touched
        assert db_keys(bucket_copy, domain_json(bucket_copy, f"{HOME}/{d}")["root"]) == keys
    assert "gc: deleted the" in m.log()




def test_mv_moves_domains_and_folders(bucket_copy, mount_bucket):
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    root = domain_json(bucket_copy, f"{HOME}/sample3.h5")["root"]
    before = open(m.path(f"{HOME}/sample3.h5"), "rb").read()
    os.mkdir(m.path(f"{HOME}/project"))
    os.rename(m.path(f"{HOME}/sample3.h5"), m.path(f"{HOME}/project/s3.h5"))
    assert "sample3.h5" not in os.listdir(m.path(HOME))
    assert domain_json(bucket_copy, f"{HOME}/project/s3.h5")["root"] == root
    assert open(m.path(f"{HOME}/project/s3.h5"), "rb").read() == before
    # a folder with its domains
    os.rename(m.path(f"{HOME}/project"), m.path(f"{HOME}/moved"))
    assert os.listdir(m.path(f"{HOME}/moved")) == ["s3.h5"]
    assert not (bucket_copy / HOME / "project" / ".domain.json").exists()
    assert domain_json(bucket_copy, f"{HOME}/moved/s3.h5")["root"] == root
    # over an existing domain: replaced, the old one's objects collected
    victim = domain_json(bucket_copy, f"{HOME}/sample2.h5")["root"]
    os.rename(m.path(f"{HOME}/moved/s3.h5"), m.path(f"{HOME}/sample2.h5"))
    assert domain_json(bucket_copy, f"{HOME}/sample2.h5")["root"] == root
    with pytest.raises(OSError) as e:
        os.rename(m.path(f"{HOME}/sample1.h5"), m.path(f"{HOME}/moved"))
    assert e.value.errno == errno.EISDIR
    with pytest.raises(OSError) as e:
        os.rename(m.path(HOME), m.path(f"{HOME}/moved/inside"))
    assert e.value.errno == errno.EINVAL
    m.unmount()
    assert db_keys(bucket_copy, victim) == []
    assert db_keys(bucket_copy, root) != []


def test_open_file_survives_rm(bucket_copy, mount_bucket):
    """POSIX: an open file stays readable after unlink; its objects stay while it is open."""
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    path = m.path(f"{HOME}/sample3.h5")
    with open(path, "rb") as f:
        whole = f.read()
    with open(path, "rb") as f:
        head = f.read(4096)
        os.unlink(path)
        rest = f.read()
    assert head + rest == whole


def test_a_file_being_written_moves_with_its_folder(bucket_copy, mount_bucket):
    """mv of a folder while a file in it is open for writing: the file moves with the folder,
    as on any file system, and its close stores it under the new path (staging_rename)."""
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    content = open(m.path(f"{HOME}/sample3.h5"), "rb").read()
    os.mkdir(m.path(f"{HOME}/project"))
    with open(m.path(f"{HOME}/project/new.h5"), "wb") as f:
        f.write(content)
        f.flush()
        os.rename(m.path(f"{HOME}/project"), m.path(f"{HOME}/moved"))
        assert os.listdir(m.path(f"{HOME}/moved")) == ["new.h5"]
        assert os.stat(m.path(f"{HOME}/moved/new.h5")).st_size == len(content)
    assert os.listdir(m.path(f"{HOME}/moved")) == ["new.h5"]
    assert not os.path.exists(m.path(f"{HOME}/project"))
    assert not (bucket_copy / HOME / "project" / "new.h5" / ".domain.json").exists()
    assert domain_json(bucket_copy, f"{HOME}/moved/new.h5")["root"]
