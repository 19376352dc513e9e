"""Issue 26, doc/versions.md §4.6-4.8: versions follow their domain. mv of a domain moves
DIR/.versions/NAME/ with it, mv of a folder moves every .versions/ below it; a target that
has versions of its own keeps them and gains the moved domain as one more version. cp of a
kept version over the domain (a restore, also after rm: an undelete) commits a new version
that stores no chunk bytes: the pool has them all, and the current root gets its chunks by a
copy in the store, not by an upload. kill -9 between moving the versions and moving the
domain loses nothing, and mv again finishes the move."""
import errno
import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import harness
from conftest import Mount, MountSource, is_mounted

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"


def same(a, b):
    return subprocess.run(["h5diff", str(a), str(b)], capture_output=True).returncode == 0


def versions(path):
    return sorted(os.listdir(path), key=lambda n: int(n.split(".")[0]))


def make_files(tmp_path, count):
    """count HDF5 files of distinct values: a plain dataset of 8 chunks of 128 KiB (so that
    chunk bytes outweigh every JSON object a commit writes) and a compressed one."""
    import h5py
    out = []
    for i in range(count):
        p = tmp_path / f"f{i + 1}.h5"
        rng = np.random.default_rng(i)
        with h5py.File(p, "w") as f:
            f.create_dataset("x", data=rng.random(8 * 16384), chunks=(16384,))
            f.create_dataset("y", data=np.arange(10000) * (i + 1), chunks=(1000,),
                             compression="gzip")
        out.append(p)
    return out


def mount(mount_bucket, bucket, tmp_path, name="c1"):
    return mount_bucket(bucket, "-o",
                        f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/{name}")


def fresh_ro(mount_bucket, m, tmp_path):
    assert m.unmount() == 0
    return mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")


def vdir(m, domain):
    d, name = os.path.split(domain)
    return m.path(f"{d}/.versions/{name}")


def test_mv_of_a_domain_moves_its_versions(bucket_copy, mount_bucket, tmp_path):
    """Every version reads as before under the new name, on the same mount and after a remount
    with a fresh cache_dir; the old .versions/NAME is gone; the next commit continues the
    numbers."""
    f1, f2 = make_files(tmp_path, 2)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(f1, m.path(f"{HOME}/v.h5"))
    shutil.copyfile(f2, m.path(f"{HOME}/v.h5"))
    os.rename(m.path(f"{HOME}/v.h5"), m.path(f"{HOME}/w.h5"))
    assert not os.path.exists(vdir(m, f"{HOME}/v.h5"))
    assert versions(vdir(m, f"{HOME}/w.h5")) == ["1.h5", "2.h5"]
    assert same(f"{vdir(m, f'{HOME}/w.h5')}/1.h5", f1)
    shutil.copyfile(f1, m.path(f"{HOME}/w.h5"))
    assert versions(vdir(m, f"{HOME}/w.h5")) == ["1.h5", "2.h5", "3.h5"]
    ro = fresh_ro(mount_bucket, m, tmp_path)
    w = vdir(ro, f"{HOME}/w.h5")
    assert [same(f"{w}/{n}.h5", f) for n, f in ((1, f1), (2, f2), (3, f1))] == [True] * 3
    assert not os.path.exists(vdir(ro, f"{HOME}/v.h5"))
    assert ro.get(f"{HOME}/.versions/v.h5/.h5osfs-versions") is None
    lst = json.loads(ro.get(f"{HOME}/.versions/w.h5/.h5osfs-versions"))
    assert lst["domain"] == f"/{HOME}/w.h5"
    assert json.loads(ro.get(f"db/{lst['pool'][2:19]}/.h5osfs-pool")) == \
        {"domain": f"/{HOME}/w.h5"}, "the pool's marker moved with the list (vpool.h)"


@pytest.mark.not_on("rgw", reason="the folder's objects are listed and copied as on s3rver")
def test_mv_of_a_folder_moves_the_versions_below_it(bucket_copy, mount_bucket, tmp_path):
    f1, f2 = make_files(tmp_path, 2)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    os.makedirs(m.path(f"{HOME}/d/sub"))
    shutil.copyfile(f1, m.path(f"{HOME}/d/sub/x.h5"))
    shutil.copyfile(f2, m.path(f"{HOME}/d/sub/x.h5"))
    os.rename(m.path(f"{HOME}/d"), m.path(f"{HOME}/e"))
    assert not os.path.exists(m.path(f"{HOME}/d"))
    x = vdir(m, f"{HOME}/e/sub/x.h5")
    assert versions(x) == ["1.h5", "2.h5"] and same(f"{x}/1.h5", f1)
    ro = fresh_ro(mount_bucket, m, tmp_path)
    x = vdir(ro, f"{HOME}/e/sub/x.h5")
    assert versions(x) == ["1.h5", "2.h5"]
    assert same(f"{x}/1.h5", f1) and same(f"{x}/2.h5", f2)
    assert same(ro.path(f"{HOME}/e/sub/x.h5"), f2)
    lst = json.loads(ro.get(f"{HOME}/e/sub/.versions/x.h5/.h5osfs-versions"))
    assert lst["domain"] == f"/{HOME}/e/sub/x.h5"
    assert json.loads(ro.get(f"db/{lst['pool'][2:19]}/.h5osfs-pool")) == \
        {"domain": f"/{HOME}/e/sub/x.h5"}


@pytest.mark.posix_only(reason="the decision is the same code on every store; its commit is "
                        "tested on every store by test_versions_commit.py")
def test_mv_onto_a_versioned_domain_adds_one_version_there(bucket_copy, mount_bucket, tmp_path):
    """The target keeps its list and gains the moved domain as its next version; the source's
    history stays at .versions/OLD, as after rm."""
    f1, f2, f3 = make_files(tmp_path, 3)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(f1, m.path(f"{HOME}/v.h5"))
    shutil.copyfile(f2, m.path(f"{HOME}/w.h5"))
    shutil.copyfile(f3, m.path(f"{HOME}/w.h5"))
    os.rename(m.path(f"{HOME}/v.h5"), m.path(f"{HOME}/w.h5"))
    w, v = vdir(m, f"{HOME}/w.h5"), vdir(m, f"{HOME}/v.h5")
    assert versions(w) == ["1.h5", "2.h5", "3.h5"]
    assert [same(f"{w}/{n}.h5", f) for n, f in ((1, f2), (2, f3), (3, f1))] == [True] * 3
    assert versions(v) == ["1.h5"] and same(f"{v}/1.h5", f1)
    assert same(m.path(f"{HOME}/w.h5"), f1)
    os.unlink(f"{w}/2.h5")                  # 3 is the current version: 2 may go
    with pytest.raises(OSError):
        os.unlink(f"{w}/3.h5")


@pytest.mark.posix_only(reason="the same code on every store; the pool's marker is checked "
                        "after a move on every store above")
def test_rm_r_after_mv_deletes_the_moved_pool(bucket_copy, mount_bucket, tmp_path):
    """The pool goes to the new name with the list: once the moved domain and its versions are
    removed, rm -r of the new version folder deletes the pool (its marker names the new path),
    and the old path owns nothing any more."""
    f1, = make_files(tmp_path, 1)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(f1, m.path(f"{HOME}/v.h5"))
    os.rename(m.path(f"{HOME}/v.h5"), m.path(f"{HOME}/w.h5"))
    pool = json.loads(m.get(f"{HOME}/.versions/w.h5/.h5osfs-versions"))["pool"]
    assert listing(m, f"db/{pool[2:19]}")
    os.unlink(m.path(f"{HOME}/w.h5"))
    os.unlink(f"{vdir(m, f'{HOME}/w.h5')}/1.h5")
    os.rmdir(vdir(m, f"{HOME}/w.h5"))
    assert m.unmount() == 0
    assert listing(m, f"db/{pool[2:19]}") == {}
    # the sweeper, the collector and rmdir race here: none of them may take what the others
    # deleted for a forgery or a failure
    assert [line for line in m.log().splitlines() if " error: " in line or " warning: " in line] \
        == []


@pytest.mark.posix_only(reason="namespace rules, the same code on every store")
def test_a_folder_emptied_by_mv_can_be_removed_and_versions_keep_their_names(
        bucket_copy, mount_bucket, tmp_path):
    """Once its only versioned domain has moved out, nothing of its versions is left in the
    folder: rmdir works. A version's own name cannot be renamed (EROFS): a second name is a
    tag (ln)."""
    f1, = make_files(tmp_path, 1)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    os.mkdir(m.path(f"{HOME}/d"))
    shutil.copyfile(f1, m.path(f"{HOME}/d/v.h5"))
    v = vdir(m, f"{HOME}/d/v.h5")
    with pytest.raises(OSError) as e:
        os.rename(f"{v}/1.h5", f"{v}/x.h5")
    assert e.value.errno == errno.EROFS
    os.rename(m.path(f"{HOME}/d/v.h5"), m.path(f"{HOME}/w.h5"))
    os.rmdir(m.path(f"{HOME}/d"))
    assert versions(vdir(m, f"{HOME}/w.h5")) == ["1.h5"]
    assert not (bucket_copy / HOME / "d").exists()


def listing(m, rel_prefix):
    """{key below rel_prefix: size}, as the store has them."""
    base = m.bucket / rel_prefix
    mirror = m.src.mirror
    if mirror is None:
        return {p.relative_to(base).as_posix(): p.stat().st_size
                for p in base.rglob("*") if p.is_file()}
    prefix = mirror.prefix + base.relative_to(mirror.root).as_posix() + "/"
    return {k[len(prefix):]: v[0] for k, v in mirror.s3.listing(prefix).items()}


def pool_of(m, domain):
    d, name = os.path.split(domain)
    lst = json.loads(m.get(f"{d}/.versions/{name}/.h5osfs-versions"))
    return listing(m, f"db/{lst['pool'][2:19]}")


def bytes_written(m):
    return json.loads(m.path(".h5osfs-stats").read_text())["store"]["bytes_written"]


def chunk_bytes(path):
    import h5py
    with h5py.File(path, "r") as f:
        return sum(f[n].id.get_chunk_info(i).size for n in f
                   for i in range(f[n].id.get_num_chunks()))


def test_restore_stores_no_chunk_bytes(bucket_copy, mount_bucket, tmp_path):
    """cp .versions/NAME/3.h5 NAME: version 5 reads as 3; the pool is unchanged (objects and
    sizes), and on S3 the commit uploads less than a quarter of the chunks' bytes: the current
    root's chunks are copied in the store (CopyObject from the pool)."""
    files = make_files(tmp_path, 4)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    target = m.path(f"{HOME}/v.h5")
    for f in files:
        shutil.copyfile(f, target)
    pool, before = pool_of(m, f"{HOME}/v.h5"), bytes_written(m)
    shutil.copyfile(f"{vdir(m, f'{HOME}/v.h5')}/3.h5", target)
    uploaded = bytes_written(m) - before
    assert versions(vdir(m, f"{HOME}/v.h5")) == [f"{n}.h5" for n in range(1, 6)]
    assert same(target, files[2]) and same(f"{vdir(m, f'{HOME}/v.h5')}/5.h5", files[2])
    assert pool_of(m, f"{HOME}/v.h5") == pool
    assert "restored from version 3" in m.log()
    if m.backend != "posix":    # a local bucket copies chunks by their bytes, never a link
        assert uploaded < chunk_bytes(files[2]) / 4, (uploaded, chunk_bytes(files[2]))
    ro = fresh_ro(mount_bucket, m, tmp_path)
    assert same(ro.path(f"{HOME}/v.h5"), files[2])
    assert same(f"{vdir(ro, f'{HOME}/v.h5')}/5.h5", files[2])


@pytest.mark.not_on("rgw", reason="the restore's store side is covered on rgw above")
def test_undelete_continues_the_numbers(bucket_copy, mount_bucket, tmp_path):
    """rm NAME, then cp .versions/NAME/1.h5 NAME: the domain is back as version 3, its chunks
    copied in the store, the pool unchanged."""
    f1, f2 = make_files(tmp_path, 2)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    target = m.path(f"{HOME}/v.h5")
    shutil.copyfile(f1, target)
    shutil.copyfile(f2, target)
    os.unlink(target)
    pool, before = pool_of(m, f"{HOME}/v.h5"), bytes_written(m)
    shutil.copyfile(f"{vdir(m, f'{HOME}/v.h5')}/1.h5", target)
    uploaded = bytes_written(m) - before
    assert versions(vdir(m, f"{HOME}/v.h5")) == ["1.h5", "2.h5", "3.h5"]
    assert same(target, f1) and same(f"{vdir(m, f'{HOME}/v.h5')}/3.h5", f1)
    assert pool_of(m, f"{HOME}/v.h5") == pool
    if m.backend != "posix":
        assert uploaded < chunk_bytes(f1) / 4, (uploaded, chunk_bytes(f1))


def crash_mount(bucket, mnt, log, cache, env_extra):
    env = dict(os.environ, **env_extra)
    return Mount(MountSource("posix", bucket, bucket, env=env), mnt, log,
                 ("-o", f"user=test_user1,ttl=0,versions=on,cache_dir={cache}"))


@pytest.mark.posix_only(reason="kills the daemon; the move is the same code on every store")
def test_kill_between_moving_the_versions_and_the_domain(bucket_copy, tmp_path):
    """Killed after the versions are copied to the new name and before the domain is: every
    version reads under the old name (the domain is still there), nothing is lost; mv again
    finishes the move, and the old name's versions are gone."""
    f1, f2 = make_files(tmp_path, 2)
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()
    m = crash_mount(bucket_copy, mnt, tmp_path / "0.log", cache, {})
    shutil.copyfile(f1, m.path(f"{HOME}/v.h5"))
    shutil.copyfile(f2, m.path(f"{HOME}/v.h5"))
    harness.assert_clean([m])
    m = crash_mount(bucket_copy, mnt, tmp_path / "1.log", cache,
                    {"H5OSFS_TEST_CRASH_AT": "vmoved"})
    try:
        os.rename(m.path(f"{HOME}/v.h5"), m.path(f"{HOME}/w.h5"))
    except OSError:
        pass
    else:
        harness.assert_clean([m])
        pytest.fail("the rename was not stopped at the crash point")
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert not is_mounted(mnt)
    # a fresh cache_dir: the versions are built from the bucket, through the pool's marker
    m = crash_mount(bucket_copy, mnt, tmp_path / "2.log", tmp_path / "fresh", {})
    try:
        v = vdir(m, f"{HOME}/v.h5")
        assert versions(v) == ["1.h5", "2.h5"]
        assert same(f"{v}/1.h5", f1) and same(f"{v}/2.h5", f2)
        assert same(m.path(f"{HOME}/v.h5"), f2)
        os.rename(m.path(f"{HOME}/v.h5"), m.path(f"{HOME}/w.h5"))
        w = vdir(m, f"{HOME}/w.h5")
        assert versions(w) == ["1.h5", "2.h5"]
        assert same(f"{w}/1.h5", f1) and same(f"{w}/2.h5", f2)
        assert not os.path.exists(v)
        pool = json.loads(m.get(f"{HOME}/.versions/w.h5/.h5osfs-versions"))["pool"]
        assert json.loads(m.get(f"db/{pool[2:19]}/.h5osfs-pool")) == {"domain": f"/{HOME}/w.h5"}
    finally:
        harness.assert_clean([m])
    assert [line for line in (tmp_path / "2.log").read_text().splitlines()
            if " error: " in line or " warning: " in line] == []



def pool_key_of_x(path, pool):
    """The pool key and bytes of dataset x of the file at path as the ingest stores it: one
    chunk of 1 MiB, raw (HSDS's layout makes x's 8 HDF5 chunks one)."""
    import h5py
    import hashlib
    with h5py.File(path, "r") as f:
        data = f["x"][:].tobytes()
    return f"db/{pool[2:19]}/c/{hashlib.md5(data).hexdigest()}", data


@pytest.mark.not_on("rgw", reason="the same check on every store")
def test_a_restore_from_a_forged_pool_object_stores_the_file(bucket_copy, mount_bucket,
                                                              tmp_path):
    """cp .versions/NAME/1.h5 NAME, and a pool object of version 1 overwritten with other
    bytes between the cp's read and its commit (held by the test hook): the restore never
    copies the forged object, the commit stores the file the cp wrote instead, and its seal
    writes the pool object's own bytes again. Version 3 and the domain read as version 1."""
    f1, f2 = make_files(tmp_path, 2)
    m = mount(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(f1, m.path(f"{HOME}/v.h5"))
    shutil.copyfile(f2, m.path(f"{HOME}/v.h5"))
    pool = json.loads(m.get(f"{HOME}/.versions/v.h5/.h5osfs-versions"))["pool"]
    (key, good), (_, other) = pool_key_of_x(f1, pool), pool_key_of_x(f2, pool)
    assert m.get(key) == good
    assert m.unmount() == 0
    gate = tmp_path / "gate"        # the hook holds the first commit of a daemon only
    gate.touch()
    m = mount_bucket(m, "-o", f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c2",
                     extra_env={"H5OSFS_TEST_PAUSE_AT": f"committing:{gate}"})
    target = m.path(f"{HOME}/v.h5")
    cp = threading.Thread(target=shutil.copyfile, args=(f"{vdir(m, f'{HOME}/v.h5')}/1.h5", target))
    cp.start()
    try:
        harness.await_pause(m, "committing", cp.is_alive)
        m.put(key, other)
    finally:
        gate.unlink()
        cp.join()
    assert versions(vdir(m, f"{HOME}/v.h5")) == ["1.h5", "2.h5", "3.h5"]
    # the restore's comparison of the file with version 1 met the forged object (the cp's
    # read had let go of the chunk), so the file was stored as written, and its seal wrote
    # the object again; a restore that met it itself says "not restored" and does the same
    assert f"pool object {key}" in m.log() and "written again with the chunk's bytes" in m.log()
    assert m.get(key) == good, "the commit wrote the pool object's own bytes again"
    ro = fresh_ro(mount_bucket, m, tmp_path)
    for path in (ro.path(f"{HOME}/v.h5"), f"{vdir(ro, f'{HOME}/v.h5')}/3.h5",
                 f"{vdir(ro, f'{HOME}/v.h5')}/1.h5"):
        assert same(path, f1), path


@pytest.mark.posix_only(reason="kills the daemon; the commit protocol is the same code on "
                        "every store")
@pytest.mark.parametrize("stage", ["vroot", "listed"])
def test_kill_during_a_restore(bucket_copy, tmp_path, stage):
    """A restore killed before its version is listed is committed again by the next mount
    (again from the version, not ingested); one killed after it is finished. Either way
    version 3 reads as 1, the domain too, and the pool is unchanged."""
    f1, f2 = make_files(tmp_path, 2)
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()
    m = crash_mount(bucket_copy, mnt, tmp_path / "0.log", cache, {})
    shutil.copyfile(f1, m.path(f"{HOME}/v.h5"))
    shutil.copyfile(f2, m.path(f"{HOME}/v.h5"))
    pool = pool_of(m, f"{HOME}/v.h5")
    harness.assert_clean([m])
    m = crash_mount(bucket_copy, mnt, tmp_path / "1.log", cache, {"H5OSFS_TEST_CRASH_AT": stage})
    try:
        shutil.copyfile(f"{vdir(m, f'{HOME}/v.h5')}/1.h5", m.path(f"{HOME}/v.h5"))
    except OSError:
        pass
    else:
        harness.assert_clean([m])
        pytest.fail("the restore was not stopped at the crash point")
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert not is_mounted(mnt)
    m = crash_mount(bucket_copy, mnt, tmp_path / "2.log", cache, {})
    try:
        v = vdir(m, f"{HOME}/v.h5")
        assert versions(v) == ["1.h5", "2.h5", "3.h5"]
        assert [same(f"{v}/{n}.h5", f) for n, f in ((1, f1), (2, f2), (3, f1))] == [True] * 3
        assert same(m.path(f"{HOME}/v.h5"), f1)
        assert pool_of(m, f"{HOME}/v.h5") == pool
    finally:
        harness.assert_clean([m])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
