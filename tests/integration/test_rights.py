"""Rights per caller (issue 12, defect 5): with -o allow_other every local user reaches the
daemon, and each must get the rights the domain ACLs give *its* HSDS name, not the mount's.

The suite runs as root, so the mount's user is uid 0 with the HSDS name test_user1 (-o user=);
other callers are processes run with setpriv under other uids: uids mapped by -o user_map to
"intruder" (no ACL entry anywhere) and "test_user2" (entries this module adds to a copy of the
fixture bucket), the local account "nobody" (no mapping: its local name is its HSDS name), and
a uid with no account at all (no HSDS name: default's read, nothing more). The mountpoint is in
a directory every uid may enter (pytest's own temporary directories are 0700)."""
import errno
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import h5py
import pytest

import harness
from conftest import Mount, bucket_snapshot

HOME = "home/test_user1"
ALL = {k: True for k in ("create", "read", "update", "delete", "readACL", "updateACL")}


def free_uid(start):
    """A uid without a local account."""
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


INTRUDER = free_uid(23456)
USER2 = free_uid(INTRUDER + 1)
UNNAMED = free_uid(USER2 + 1)          # not mapped either
NOBODY = pwd.getpwnam("nobody").pw_uid
USER_MAP = f"user_map={INTRUDER}:intruder:{USER2}:test_user2"


# ---- what another uid's process sees ----

# Runs as the other uid: each operation of argv[2] (JSON) on the mount argv[1]; prints the
# results as JSON: "ok", a value, or the errno's name.
CALLER = textwrap.dedent(r'''
    import errno, json, os, shutil, sys
    mnt, ops = sys.argv[1], json.loads(sys.argv[2])
    def p(rel):
        return os.path.join(mnt, rel)
    def read(rel):
        with open(p(rel), "rb") as f:
            return len(f.read())
    def open_rw(rel):
        with open(p(rel), "r+b"):
            return "ok"
    def set_attr(rel):
        import h5py
        with h5py.File(p(rel), "r+") as f:
            f.attrs["changed_by"] = os.getuid()
        return "ok"
    def cp(src, dst):
        shutil.copyfile(p(src), p(dst))
        return "ok"
    do = {
        "stat": lambda a: os.stat(p(a)).st_size,
        "read": read,
        "ls": lambda a: sorted(os.listdir(p(a))),
        "r+": open_rw,
        "h5py r+": set_attr,
        "truncate": lambda a: os.truncate(p(a), 0) or "ok",
        "cp": cp,
        "mkdir": lambda a: os.mkdir(p(a)) or "ok",
        "rmdir": lambda a: os.rmdir(p(a)) or "ok",
        "rm": lambda a: os.unlink(p(a)) or "ok",
        "mv": lambda a, b: os.rename(p(a), p(b)) or "ok",
        "access w": lambda a: os.access(p(a), os.W_OK),
        "access r": lambda a: os.access(p(a), os.R_OK),
        "owner": lambda a: os.getxattr(p(a), "user.h5osfs.owner").decode(),
    }
    out = []
    for op, *args in ops:
        try:
            out.append(do[op](*args))
        except OSError as e:
            out.append(errno.errorcode.get(e.errno, str(e.errno)))
    print(json.dumps(out))
''')


def as_uid(uid, mnt, *ops):
    """Runs ops ((name, path, ...) tuples) as uid (gid the same, no supplementary groups):
    one result per op, in order."""
    r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                        sys.executable, "-c", CALLER, str(mnt), json.dumps(ops)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                     "HOME": "/"})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def results(uid, mnt, ops):
    """{op as text: result} for ops run as uid."""
    return dict(zip((" ".join(op) for op in ops), as_uid(uid, mnt, *ops)))


# ---- the bucket's ACLs and the mounts ----

def domain_json(bucket, path):
    return json.loads((bucket / path / ".domain.json").read_text())


def set_acl(bucket, path, user, **rights):
    """Gives user the rights named true in rights (the others false) on path's ACL."""
    d = domain_json(bucket, path)
    d["acls"][user] = {k: bool(rights.get(k, False)) for k in ALL}
    (bucket / path / ".domain.json").write_text(json.dumps(d))


@pytest.fixture
def open_dir():
    """A directory every uid may enter, for mountpoints."""
    d = Path(tempfile.mkdtemp(prefix="h5osfs-rights-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def mount_shared(open_dir, tmp_path):
    """Factory: mount_shared(bucket, *args) -> a Mount as test_user1 that other uids can reach
    (args: more -o options, allow_other among them or not). Checked at teardown as
    mount_bucket's mounts are."""
    mounts = []

    def start(bucket, *args):
        mnt = open_dir / f"mnt{len(mounts)}"
        mnt.mkdir()
        mnt.chmod(0o755)
        m = Mount(bucket, mnt, tmp_path / f"h5osfs{len(mounts)}.log",
                  ["-o", "user=test_user1,ttl=0", *args])
        mounts.append(m)
        return m

    yield start
    harness.assert_clean(mounts)


@pytest.fixture
def acl_bucket(bucket_copy):
    """The fixture bucket with more ACL entries: test_user2 may create in test_user1's folder
    and read and update (not delete) sample1.h5; nobody may read sample2.h5; default may read,
    update and delete sample3.h5. Every domain is readable by the bucket's dirs (0755)."""
    set_acl(bucket_copy, HOME, "test_user2", create=True, read=True)
    set_acl(bucket_copy, f"{HOME}/sample1.h5", "test_user2", read=True, update=True)
    set_acl(bucket_copy, f"{HOME}/sample2.h5", "nobody", read=True)
    set_acl(bucket_copy, f"{HOME}/sample3.h5", "default", read=True, update=True, delete=True)
    return bucket_copy


# ---- the tests ----

def test_other_user_cannot_change_what_only_the_mounter_may(acl_bucket, mount_shared):
    m = mount_shared(acl_bucket, "-o", f"allow_other,{USER_MAP}")
    os.mkdir(m.path(f"{HOME}/empty"))           # the mounter's, to try rmdir on
    before = bucket_snapshot(acl_bucket)
    size3 = len(m.path(f"{HOME}/sample3.h5").read_bytes())
    got = results(INTRUDER, m.mnt, [
        ("r+", f"{HOME}/sample1.h5"),
        ("truncate", f"{HOME}/sample1.h5"),
        ("cp", f"{HOME}/sample3.h5", f"{HOME}/copy.h5"),
        ("cp", f"{HOME}/sample3.h5", f"{HOME}/sample1.h5"),
        ("mkdir", f"{HOME}/mine"),
        ("rmdir", f"{HOME}/empty"),
        ("rm", f"{HOME}/sample1.h5"),
        ("mv", f"{HOME}/sample1.h5", f"{HOME}/moved.h5"),
        ("mv", f"{HOME}/empty", f"{HOME}/moved"),
        ("read", f"{HOME}/sample1.h5"),         # only test_user1 may read it
        ("access w", f"{HOME}/sample1.h5"),
        ("access r", f"{HOME}/sample1.h5"),
        ("owner", f"{HOME}/sample1.h5"),
    ])
    assert got == {
        f"r+ {HOME}/sample1.h5": "EACCES",
        f"truncate {HOME}/sample1.h5": "EACCES",
        f"cp {HOME}/sample3.h5 {HOME}/copy.h5": "EACCES",
        f"cp {HOME}/sample3.h5 {HOME}/sample1.h5": "EACCES",
        f"mkdir {HOME}/mine": "EACCES",
        f"rmdir {HOME}/empty": "EACCES",
        f"rm {HOME}/sample1.h5": "EACCES",
        f"mv {HOME}/sample1.h5 {HOME}/moved.h5": "EACCES",
        f"mv {HOME}/empty {HOME}/moved": "EACCES",
        f"read {HOME}/sample1.h5": "EACCES",
        f"access w {HOME}/sample1.h5": False,
        f"access r {HOME}/sample1.h5": False,
        f"owner {HOME}/sample1.h5": "EACCES",
    }
    # what the ACLs let "default" read, it reads
    got = results(INTRUDER, m.mnt, [("ls", HOME), ("read", f"{HOME}/sample3.h5"),
                                    ("owner", HOME), ("stat", f"{HOME}/sample1.h5")])
    assert got[f"ls {HOME}"] == sorted(os.listdir(m.path(HOME)))
    assert got[f"read {HOME}/sample3.h5"] == size3
    assert got[f"owner {HOME}"] == "test_user1"
    assert got[f"stat {HOME}/sample1.h5"] == os.stat(m.path(f"{HOME}/sample1.h5")).st_size
    assert bucket_snapshot(acl_bucket) == before
    # the attributes are the mounting user's (one st_mode per inode for every caller)
    assert stat.S_IMODE(os.stat(m.path(f"{HOME}/sample1.h5")).st_mode) == 0o644


def test_mapped_user_gets_its_own_rights(acl_bucket, mount_shared):
    m = mount_shared(acl_bucket, "-o", f"allow_other,{USER_MAP}")
    got = results(USER2, m.mnt, [
        ("h5py r+", f"{HOME}/sample1.h5"),          # read + update
        ("rm", f"{HOME}/sample1.h5"),               # no delete
        ("mv", f"{HOME}/sample1.h5", f"{HOME}/x.h5"),
        ("read", f"{HOME}/sample2.h5"),             # no entry, no default
        ("cp", f"{HOME}/sample1.h5", f"{HOME}/new.h5"),     # create on the folder
        ("mkdir", f"{HOME}/project"),
        ("owner", f"{HOME}/new.h5"),
        ("rm", f"{HOME}/new.h5"),                   # its own: every right
    ])
    assert got == {
        f"h5py r+ {HOME}/sample1.h5": "ok",
        f"rm {HOME}/sample1.h5": "EACCES",
        f"mv {HOME}/sample1.h5 {HOME}/x.h5": "EACCES",
        f"read {HOME}/sample2.h5": "EACCES",
        f"cp {HOME}/sample1.h5 {HOME}/new.h5": "ok",
        f"mkdir {HOME}/project": "ok",
        f"owner {HOME}/new.h5": "test_user2",
        f"rm {HOME}/new.h5": "ok",
    }
    with h5py.File(m.path(f"{HOME}/sample1.h5"), "r") as f:
        assert f.attrs["changed_by"] == USER2
    # a folder and a domain are their creator's, as HSDS makes them (owner == self), with the
    # parent's other entries inherited
    folder = domain_json(acl_bucket, f"{HOME}/project")
    assert folder["owner"] == "test_user2"
    assert folder["acls"]["test_user2"] == ALL and folder["acls"]["test_user1"] == ALL
    assert folder["acls"]["default"]["read"] and not folder["acls"]["default"]["update"]
    got = results(USER2, m.mnt, [("cp", f"{HOME}/sample1.h5", f"{HOME}/project/d.h5")])
    assert list(got.values()) == ["ok"]
    dom = domain_json(acl_bucket, f"{HOME}/project/d.h5")
    assert dom["owner"] == "test_user2" and dom["acls"]["test_user2"] == ALL
    assert "default" not in dom["acls"]
    # the mounting user keeps its rights: test_user1's entry came with the folder
    with h5py.File(m.path(f"{HOME}/project/d.h5"), "r+") as f:
        f.attrs["by_mounter"] = 1
    os.unlink(m.path(f"{HOME}/project/d.h5"))
    os.rmdir(m.path(f"{HOME}/project"))


def test_local_user_name_and_callers_without_one(acl_bucket, mount_shared):
    """Without a mapping a caller is its local user name; without one at all, it may read what
    default may, and change nothing even where default may (HSDS: writes need a user)."""
    m = mount_shared(acl_bucket, "-o", f"allow_other,{USER_MAP}")
    before = bucket_snapshot(acl_bucket)
    size2 = len(m.path(f"{HOME}/sample2.h5").read_bytes())
    got = results(NOBODY, m.mnt, [("read", f"{HOME}/sample2.h5"),
                                  ("read", f"{HOME}/sample1.h5"),
                                  ("r+", f"{HOME}/sample3.h5")])       # default's update
    assert got == {f"read {HOME}/sample2.h5": size2, f"read {HOME}/sample1.h5": "EACCES",
                   f"r+ {HOME}/sample3.h5": "ok"}
    got = results(UNNAMED, m.mnt, [("read", f"{HOME}/sample3.h5"),
                                   ("read", f"{HOME}/sample2.h5"),
                                   ("r+", f"{HOME}/sample3.h5"),
                                   ("rm", f"{HOME}/sample3.h5"),
                                   ("cp", f"{HOME}/sample3.h5", f"{HOME}/c.h5")])
    assert got == {f"read {HOME}/sample3.h5": len(m.path(f"{HOME}/sample3.h5").read_bytes()),
                   f"read {HOME}/sample2.h5": "EACCES", f"r+ {HOME}/sample3.h5": "EACCES",
                   f"rm {HOME}/sample3.h5": "EACCES",
                   f"cp {HOME}/sample3.h5 {HOME}/c.h5": "EACCES"}
    assert bucket_snapshot(acl_bucket) == before


# Runs as test_user2: creates argv[1], writes to it, says so, and holds it open until told.
WRITER = textwrap.dedent(r'''
    import sys
    f = open(sys.argv[1], "wb")
    f.write(open(sys.argv[2], "rb").read())
    f.flush()
    print("written", flush=True)
    sys.stdin.readline()
    f.close()
''')


def test_a_file_being_written_is_its_creators_only(acl_bucket, mount_shared):
    """Before its commit a new file has no ACL: nobody but its creator may open it."""
    m = mount_shared(acl_bucket, "-o", f"allow_other,{USER_MAP}")
    new, src = m.path(f"{HOME}/held.h5"), m.path(f"{HOME}/sample1.h5")
    writer = subprocess.Popen(["setpriv", f"--reuid={USER2}", f"--regid={USER2}",
                               "--clear-groups", sys.executable, "-c", WRITER, str(new),
                               str(src)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd="/")
    try:
        assert writer.stdout.readline().strip() == "written"
        got = results(INTRUDER, m.mnt, [("read", f"{HOME}/held.h5"), ("r+", f"{HOME}/held.h5")])
        assert list(got.values()) == ["EACCES", "EACCES"]
        with pytest.raises(PermissionError):
            open(new, "r+b")                    # the mounting user's neither
        got = results(USER2, m.mnt, [("read", f"{HOME}/held.h5")])
        assert list(got.values()) == [len(src.read_bytes())]
    finally:
        writer.communicate("close\n", timeout=60)
    assert writer.returncode == 0
    assert domain_json(acl_bucket, f"{HOME}/held.h5")["owner"] == "test_user2"
    # committed: now its ACL decides (test_user1's entry was inherited from the folder)
    with h5py.File(new, "r") as f, h5py.File(src, "r") as g:
        assert sorted(f) == sorted(g)
    assert results(INTRUDER, m.mnt, [("read", f"{HOME}/held.h5")]) == {
        f"read {HOME}/held.h5": "EACCES"}


def test_mounting_user_unchanged_and_others_kept_out_without_allow_other(acl_bucket,
                                                                         mount_shared):
    """Without allow_other the kernel lets no other uid reach the daemon, and the mounting
    user's rights are what they were (a guard: this held before callers had rights too)."""
    m = mount_shared(acl_bucket, "-o", USER_MAP)
    got = results(USER2, m.mnt, [("stat", HOME), ("read", f"{HOME}/sample1.h5")])
    assert list(got.values()) == ["EACCES", "EACCES"]
    os.mkdir(m.path(f"{HOME}/p"))
    shutil.copyfile(m.path(f"{HOME}/sample1.h5"), m.path(f"{HOME}/p/c.h5"))
    with h5py.File(m.path(f"{HOME}/p/c.h5"), "r+") as f:
        f.attrs["x"] = 1
    os.rename(m.path(f"{HOME}/p/c.h5"), m.path(f"{HOME}/p/d.h5"))
    assert domain_json(acl_bucket, f"{HOME}/p/d.h5")["owner"] == "test_user1"
    os.unlink(m.path(f"{HOME}/p/d.h5"))
    os.rmdir(m.path(f"{HOME}/p"))
    with pytest.raises(PermissionError):
        os.mkdir(m.path("home/x"))              # /home: the admin's
    assert os.getxattr(m.path(f"{HOME}/sample2.h5"), "user.h5osfs.owner") == b"test_user1"


READ_ONLY = {k: k == "read" for k in ALL}
NONE = {k: False for k in ALL}


def test_versions_are_read_by_whoever_may_read_the_domain_and_written_by_nobody(acl_bucket,
                                                                               mount_shared):
    """Issue 26: a kept version (its number, a tag, its folder) is an HSDS domain carrying the
    domain's read rights and no other right, so test_user2 reads the versions of sample1.h5
    (its ACL lets it read) and not those of sample2.h5, also once both domains are removed
    (the version's own ACL decides then, as HSDS would, not the folder's default read); no one
    writes a version."""
    m = mount_shared(acl_bucket, "-o", f"allow_other,{USER_MAP},versions=on")
    for name in ("sample1.h5", "sample2.h5"):
        shutil.copyfile(m.path(f"{HOME}/sample3.h5"), m.path(f"{HOME}/{name}"))
    os.link(m.path(f"{HOME}/.versions/sample1.h5/1.h5"),
            m.path(f"{HOME}/.versions/sample1.h5/paper.h5"))
    v1, v2 = f"{HOME}/.versions/sample1.h5", f"{HOME}/.versions/sample2.h5"
    for obj in (f"{v1}/1.h5", f"{v1}/paper.h5", v1):
        assert domain_json(acl_bucket, obj)["acls"] == {"test_user1": READ_ONLY,
                                                        "test_user2": READ_ONLY}, obj
    assert domain_json(acl_bucket, f"{v2}/1.h5")["acls"] == {"test_user1": READ_ONLY,
                                                           "nobody": READ_ONLY}
    size = len(m.path(f"{HOME}/sample3.h5").read_bytes())
    ops = [("read", f"{v1}/1.h5"), ("read", f"{v1}/paper.h5"), ("read", f"{v2}/1.h5"),
           ("r+", f"{v1}/1.h5")]
    expected = {f"read {v1}/1.h5": size, f"read {v1}/paper.h5": size,
                f"read {v2}/1.h5": "EACCES", f"r+ {v1}/1.h5": "EACCES"}
    assert results(USER2, m.mnt, ops) == expected
    assert results(INTRUDER, m.mnt, ops[:1]) == {f"read {v1}/1.h5": "EACCES"}
    with pytest.raises(OSError) as e:           # not even the owner
        open(m.path(f"{v1}/1.h5"), "r+b").close()
    assert e.value.errno == errno.EACCES
    os.unlink(m.path(f"{HOME}/sample1.h5"))
    os.unlink(m.path(f"{HOME}/sample2.h5"))
    assert results(USER2, m.mnt, ops) == expected
