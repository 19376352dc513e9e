"""Issue 26, step 3: with versions on, every new or replacing commit (cp, O_TRUNC) is kept
as a version: DIR/.versions/NAME/<n>.h5 reads exactly what the domain read right after
commit n, on the same mount, after a remount with a fresh cache_dir, on a read-only mount
without versions=on. Chunks of fixed-size datasets are stored once in the domain's pool; the
collector deletes replaced roots but never a version's root or the pool; a daemon killed at
any stage of a versioned commit leaves every listed version readable."""
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

import harness
from conftest import SOURCE, Mount, MountSource, is_mounted

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
TARGET = f"{HOME}/v.h5"
VDIR = f"{HOME}/.versions/v.h5"
A, B = SOURCE / "sample3.h5", SOURCE / "sample1.h5"


def same(a, b):
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True)
    return r.returncode == 0


def versions(m):
    names = os.listdir(m.path(VDIR))
    return sorted(names, key=lambda n: int(n.split(".")[0]))


def test_cp_then_cp_over_keeps_both(bucket_copy, mount_bucket, tmp_path):
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    shutil.copyfile(A, m.path(TARGET))
    shutil.copyfile(B, m.path(TARGET))
    assert versions(m) == ["1.h5", "2.h5"]
    assert same(m.path(f"{VDIR}/1.h5"), A) and same(m.path(f"{VDIR}/2.h5"), B)
    assert ".versions" not in os.listdir(m.path(HOME))
    assert os.getxattr(m.path(f"{VDIR}/2.h5"), "user.h5osfs.committer").startswith(b"test_user1")
    assert m.unmount() == 0
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    assert versions(ro) == ["1.h5", "2.h5"]
    assert same(ro.path(f"{VDIR}/1.h5"), A) and same(ro.path(f"{VDIR}/2.h5"), B)
    assert same(ro.path(TARGET), B)


def test_equal_chunks_are_stored_once_on_every_store(bucket_copy, mount_bucket, tmp_path):
    """cp a, cp a again: the second version names the same pool objects and stores none (on
    S3 the first copied them in the store, keyed by their listed MD5, without reading them,
    but for the two it read to prove that the store's ETags are MD5s)."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    shutil.copyfile(A, m.path(TARGET))
    shutil.copyfile(A, m.path(TARGET))
    lines = [line for line in m.log().splitlines() if "kept as version" in line]
    first, second = (re.search(r"(\d+) chunks in the pool, (\d+) of them new \((\d+) copied",
                               line).groups() for line in lines)
    assert int(first[0]) > 0 and first[0] == first[1] == second[0] and second[1] == "0"
    if m.backend == "posix":
        assert int(first[2]) == 0
    else:
        assert int(first[0]) - 2 <= int(first[2]) < int(first[0])
    assert same(m.path(f"{VDIR}/2.h5"), A)


def pool_objects(bucket):
    lst = json.loads((bucket / VDIR / ".h5osfs-versions").read_text())
    pool = bucket / "db" / lst["pool"][2:19] / "c"
    return lst, sorted(p.name for p in pool.iterdir())


def named_roots(bucket):
    """db/ directories of every root a .domain.json names (domains and versions alike)."""
    roots = set()
    for p in bucket.rglob(".domain.json"):
        root = json.loads(p.read_text()).get("root")
        if root:
            roots.add(root[2:19])
    return roots


@pytest.mark.posix_only(reason="counts objects in the bucket directory; the store adds nothing")
def test_chunks_are_stored_once_and_the_collector_keeps_versions(bucket_copy, mount_bucket,
                                                                  tmp_path):
    """cp a, cp b, cp a: three versions; the third stores no chunk again (the pool already has
    every chunk of a); the replaced roots are collected, the versions' roots and the pool
    never are, and every version still reads."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    shutil.copyfile(A, m.path(TARGET))
    _, after_a = pool_objects(bucket_copy)
    shutil.copyfile(B, m.path(TARGET))
    _, after_b = pool_objects(bucket_copy)
    shutil.copyfile(A, m.path(TARGET))
    lst, after_a2 = pool_objects(bucket_copy)
    assert len(after_a) > 0 and set(after_a) < set(after_b)
    assert after_a2 == after_b                        # nothing of a stored twice
    assert [e["n"] for e in lst["versions"]] == [1, 2, 3]
    harness.assert_clean([m])                         # the collector drains at unmount
    on_disk = {p.name for p in (bucket_copy / "db").iterdir()}
    assert on_disk == named_roots(bucket_copy) | {lst["pool"][2:19]}
    ro = mount_bucket(bucket_copy, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    assert [same(ro.path(f"{VDIR}/{n}.h5"), f) for n, f in ((1, A), (2, B), (3, A))] == \
        [True, True, True]


def unkeepable_file(tmp_path):
    """A file whose version cannot be kept yet: a gzip dataset of object references (a version
    cannot copy one), beside a plain dataset written to the pool first or not (key order)."""
    import h5py
    import numpy as np
    p = tmp_path / "refs.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("data", data=np.arange(40000, dtype="f4"), chunks=(10000,))
        f.create_dataset("refs", data=[f["data"].ref], dtype=h5py.ref_dtype, chunks=(1,),
                         compression="gzip")
    return p


@pytest.mark.posix_only(reason="counts objects in the bucket directory; the store adds nothing")
def test_a_domain_never_kept_as_a_version_leaves_no_pool(bucket_copy, mount_bucket, tmp_path):
    """Each commit of a new versioned domain begins a pool; when its version cannot be kept,
    no list names that pool, so the commit deletes it (its marker, and the objects the version
    wrote before it was refused). Three such commits leave only the domain's root in db/."""
    before = {p.name for p in (bucket_copy / "db").iterdir()}
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    src = unkeepable_file(tmp_path)
    for _ in range(3):
        shutil.copyfile(src, m.path(TARGET))
    assert m.log().count("cannot be kept as a version yet") == 3
    assert same(m.path(TARGET), src)
    assert not (bucket_copy / VDIR).exists()
    harness.assert_clean([m])                         # the collector drains at unmount
    left = {p.name for p in (bucket_copy / "db").iterdir()} - before
    assert left == named_roots(bucket_copy) - before, \
        sorted(str(k.relative_to(bucket_copy)) for d in left for k in (bucket_copy / "db" / d)
               .rglob("*") if k.is_file())[:20]


def crash_mount(bucket, mnt, log, cache, env_extra):
    env = dict(os.environ, **env_extra)
    return Mount(MountSource("posix", bucket, bucket, env=env), mnt, log,
                 ("-o", f"user=test_user1,ttl=0,versions=on,cache_dir={cache}"))


@pytest.mark.posix_only(reason="kills the daemon; the commit protocol is the same code on "
                        "every backend")
@pytest.mark.parametrize("stage", ["root", "vroot", "listed", "domain"])
def test_kill_at_each_versioned_commit_stage(bucket_copy, tmp_path, stage):
    """Version 1 is a; cp b is killed at stage; the next mount recovers. Every listed version
    reads whole: 1 is a, 2 is b, and no other: a commit killed after its list put (its commit
    point) and before its swap is finished by the next mount, not done again."""
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()
    m = crash_mount(bucket_copy, mnt, tmp_path / "0.log", cache, {})
    shutil.copyfile(A, m.path(TARGET))
    harness.assert_clean([m])
    m = crash_mount(bucket_copy, mnt, tmp_path / "1.log", cache, {"H5OSFS_TEST_CRASH_AT": stage})
    with pytest.raises(OSError):
        shutil.copyfile(B, m.path(TARGET))
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert not is_mounted(mnt)
    m = crash_mount(bucket_copy, mnt, tmp_path / "2.log", cache, {})
    assert versions(m) == ["1.h5", "2.h5"]
    assert same(m.path(f"{VDIR}/1.h5"), A) and same(m.path(f"{VDIR}/2.h5"), B)
    assert same(m.path(TARGET), B)
    harness.assert_clean([m])


R_PLUS = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("x", data=np.arange(100000), chunks=(1000,), compression="gzip")
with h5py.File(sys.argv[1], "r+") as f:
    f["x"][5] = -1
"""


@pytest.mark.posix_only(reason="the r+ commit path is the same code on every backend")
def test_r_plus_keeps_a_version_and_versions_reopen_from_the_kept_file(bucket_copy, mount_bucket,
                                                                        tmp_path):
    """h5py "w" then "r+": two versions, each with its values; a version opened again is served
    from the built file kept in cache_dir (a table over an all-fill dataset included), not
    refused and built again."""
    import h5py
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    subprocess.run([sys.executable, "-c", R_PLUS, m.path(f"{HOME}/r.h5")], check=True)
    shutil.copyfile(A, m.path(TARGET))              # sample3 has an empty dataset
    for _ in range(2):
        with h5py.File(m.path(f"{HOME}/.versions/r.h5/1.h5"), "r") as f:
            assert list(f["x"][3:7]) == [3, 4, 5, 6]
        with h5py.File(m.path(f"{HOME}/.versions/r.h5/2.h5"), "r") as f:
            assert list(f["x"][3:7]) == [3, 4, -1, 6]
        assert same(m.path(f"{VDIR}/1.h5"), A)
    assert "not a usable built file" not in m.log()


@pytest.mark.posix_only(reason="writes the version list by hand; the list's put_if is tested "
                        "on every store by test_write_mounts.py's .domain.json races")
def test_a_commit_on_a_base_another_writer_listed_first_loses(bucket_copy, mount_bucket,
                                                             tmp_path):
    """Two mounts commit over the same version of the domain: the one whose version is listed
    first wins. Here the other writer's entry (listed, its swap not yet done) is written by
    hand: cp b then fails with ESTALE, and the list gains nothing."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    shutil.copyfile(A, m.path(TARGET))
    lst_path = bucket_copy / VDIR / ".h5osfs-versions"
    lst = json.loads(lst_path.read_text())
    first = lst["versions"][0]
    current = os.getxattr(m.path(TARGET), "user.h5osfs.root").decode()
    lst["versions"].append(dict(first, n=2, names=["2.h5"], base=current, current=first["root"]))
    lst["next"] = 3
    lst_path.write_text(json.dumps(lst))
    with pytest.raises(OSError) as e:
        shutil.copyfile(B, m.path(TARGET))
    assert e.value.errno == errno.ESTALE
    assert [v["n"] for v in json.loads(lst_path.read_text())["versions"]] == [1, 2]
    assert "committed on the same base root" in m.log()
    assert same(m.path(TARGET), A)


def new_root_id():
    """A root group id (HSDS's: the second half is the first, each hex digit + 8)."""
    rot = {c: format((int(c, 16) + 8) % 16, "x") for c in "0123456789abcdef"}
    h = os.urandom(8).hex()
    d = h + "".join(rot[c] for c in h)
    return f"g-{d[0:8]}-{d[8:16]}-{d[16:20]}-{d[20:26]}-{d[26:32]}"


@pytest.mark.posix_only(reason="writes the version list by hand; the list's put_if is tested "
                        "on every store by test_write_mounts.py's .domain.json races")
def test_a_first_commit_that_meets_another_lineage_loses_and_leaves_no_pool(
        bucket_copy, mount_bucket, tmp_path):
    """A new domain's first versioned commit begins a lineage: a pool of its own. Held after
    its version's root is written (the test hook), another writer lists a first version of the
    same name over another pool (written by hand). The commit loses with ESTALE instead of
    listing a version whose tables name a pool the list does not, and deletes its pool, which
    nothing names; the other writer's list stays as it was."""
    before = {p.name for p in (bucket_copy / "db").iterdir()}
    gate = tmp_path / "gate"
    gate.touch()
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1",
                     extra_env={"H5OSFS_TEST_PAUSE_AT": f"vroot:{gate}"})
    failed = []

    def cp():
        try:
            shutil.copyfile(A, m.path(TARGET))
        except OSError as e:
            failed.append(e.errno)
    t = threading.Thread(target=cp)
    t.start()
    try:
        harness.await_pause(m, "vroot", t.is_alive)
        other = {"format": 1, "domain": "/" + TARGET, "pool": new_root_id(), "next": 2,
                 "versions": [{"n": 1, "root": new_root_id(), "time": time.time(),
                               "by": "other@host", "parent": 0, "size": 0, "stamp": "",
                               "names": ["1.h5"], "state": "kept"}]}
        lst_path = bucket_copy / VDIR / ".h5osfs-versions"
        lst_path.parent.mkdir(parents=True, exist_ok=True)
        lst_path.write_text(json.dumps(other))
    finally:
        gate.unlink()
        t.join()
    assert failed == [errno.ESTALE], m.log()[-3000:]
    assert "another writer began its versions" in m.log()
    assert json.loads(lst_path.read_text()) == other
    assert not os.path.exists(m.path(TARGET))
    harness.assert_clean([m])                         # the collector drains at unmount
    left = {p.name for p in (bucket_copy / "db").iterdir()} - before
    assert left == set(), \
        sorted(str(k.relative_to(bucket_copy)) for d in left for k in (bucket_copy / "db" / d)
               .rglob("*") if k.is_file())[:20]


@pytest.mark.not_on("rgw", reason="one prefix listing; s3rver covers the S3 side")
def test_rm_keeps_the_versions_and_their_folder(bucket_copy, mount_bucket, tmp_path):
    """rm of a versioned domain removes the domain, not its versions; the folder holding them
    looks empty but is not (rmdir: ENOTEMPTY), so they never become unreachable."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    folder = m.path(f"{HOME}/d")
    os.mkdir(folder)
    shutil.copyfile(A, os.path.join(folder, "x.h5"))
    os.unlink(os.path.join(folder, "x.h5"))
    assert os.listdir(folder) == []
    assert same(os.path.join(folder, ".versions", "x.h5", "1.h5"), A)
    with pytest.raises(OSError) as e:
        os.rmdir(folder)
    assert e.value.errno == errno.ENOTEMPTY
    assert same(os.path.join(folder, ".versions", "x.h5", "1.h5"), A)


@pytest.mark.posix_only(reason="the setting is a folder object's member, read the same on "
                        "every store")
def test_folder_xattr_turns_versions_on_below_it(bucket_copy, mount_bucket, tmp_path):
    """Without -o versions, a folder's user.h5osfs.versions=on keeps versions of domains
    below it, in subfolders too, until one says off; elsewhere none."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/c1")
    top = m.path(f"{HOME}/kept")
    os.makedirs(os.path.join(top, "sub", "off"))
    os.setxattr(top, "user.h5osfs.versions", b"on")
    os.setxattr(os.path.join(top, "sub", "off"), "user.h5osfs.versions", b"off")
    for rel in ("kept/a.h5", "kept/sub/b.h5", "kept/sub/off/c.h5", "d.h5"):
        shutil.copyfile(A, m.path(f"{HOME}/{rel}"))
    assert os.listdir(os.path.join(top, ".versions", "a.h5")) == ["1.h5"]
    assert os.listdir(os.path.join(top, "sub", ".versions", "b.h5")) == ["1.h5"]
    for rel in ("kept/sub/off/.versions/c.h5", ".versions/d.h5"):
        assert not os.path.exists(m.path(f"{HOME}/{rel}")), rel


@pytest.mark.posix_only(reason="starts its own S3 server (server.js --etag-not-md5), whatever "
                        "the backend")
def test_etags_that_are_no_md5s_never_key_the_pool(backend, tmp_path):
    """Under SSE-KMS or SSE-C, S3's ETags are 32 hex digits that are not the MD5 of the bytes.
    Keyed by them, every pool object would sit under another MD5's key and no version would
    read. The seal reads and hashes a chunk, finds its ETag is not its MD5, and seals every
    chunk by its bytes: both versions read as committed, on the mount and on a fresh one."""
    import conftest
    import h5py
    import numpy as np
    from s3fixtures import S3Server
    srv = S3Server(tmp_path / "kms-like", extra_args=("--etag-not-md5",))
    mounts = []
    try:
        name = srv.new_bucket(conftest.BUCKET)

        def mount(i, opts):
            mounts.append(conftest.mount_own_server(srv, name, tmp_path, i, opts))
            return mounts[-1]

        m = mount(0, ",versions=on")
        values = np.arange(64 * 1024, dtype="f4")
        with h5py.File(tmp_path / "v.h5", "w") as f:
            f.create_dataset("data", data=values, chunks=(4096,))
        shutil.copyfile(tmp_path / "v.h5", m.path(TARGET))
        with h5py.File(m.path(TARGET), "r+") as f:
            f["data"][5000] = -1.0
        changed = values.copy()
        changed[5000] = -1.0
        assert versions(m) == ["1.h5", "2.h5"]
        assert m.unmount() == 0
        ro = mount(1, ",ro")
        for number, want in ((1, values), (2, changed)):
            with h5py.File(ro.path(f"{VDIR}/{number}.h5"), "r") as f:
                assert np.array_equal(f["data"][()], want), number
        with h5py.File(ro.path(TARGET), "r") as f:
            assert np.array_equal(f["data"][()], changed)
        assert "not the MD5s of their bytes" in m.log()
    finally:
        problems = harness.finish_all(mounts)
        assert srv.stop() == 0
    assert not problems, problems
