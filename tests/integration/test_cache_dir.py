"""cache_dir, where a read-write mount stages and journals its writes: a relative one is the
directory the user meant even after the daemon daemonises (it used to break every write with
EINVAL); the default is one directory per bucket, so read-write mounts of different buckets
run side by side (they used to refuse each other) and a remount of a bucket recovers what its
crashed predecessor staged; a journal record is committed only into the bucket it was staged
for (a crash-leftover of bucket A used to be committed into bucket B mounted on the same
cache_dir).

Every daemon here gets HOME and XDG_CACHE_HOME of the test's own: a default cache_dir is never
the real home's."""
import os
import shutil
import subprocess

import pytest

import conftest
import harness
from conftest import (BUCKET, SOURCE, Mount, bucket_identity, h5osfs_bin, is_mounted,
                      set_child_subreaper, wait_exit)

HOME = "home/test_user1"
TARGET = f"{HOME}/crash.h5"


def h5diff_ok(a, b):
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


def xdg(tmp_path):
    return tmp_path / "xdg"


@pytest.fixture
def second_bucket(tmp_path):
    """Another writable copy of the fixture, also named hsdstest (the same readable name as
    bucket_copy's: only the identity tells them apart)."""
    dst = tmp_path / "bucket2" / "hsdstest"
    shutil.copytree(BUCKET, dst)
    return dst


@pytest.fixture
def daemons(tmp_path):
    """Factory: daemons(src, *args, crash_at=None) -> Mount of MountSource src as test_user1,
    with HOME and XDG_CACHE_HOME below tmp_path and h5osfs's default cache_dir unless args name
    one. crash_at: H5OSFS_TEST_CRASH_AT for this daemon (expected to die of SIGKILL).
    Teardown: every daemon unmounted, exit status 0 (or -9 when it was told to crash)."""
    started = []

    def start(src, *args, crash_at=None):
        n = len(started)
        mnt = tmp_path / f"mnt{n}"
        mnt.mkdir()
        env = dict(src.env or os.environ, HOME=str(tmp_path / "home"),
                   XDG_CACHE_HOME=str(xdg(tmp_path)))
        if crash_at:
            env["H5OSFS_TEST_CRASH_AT"] = crash_at
        m = Mount(src, mnt, tmp_path / f"h5osfs{n}.log", ("-o", "user=test_user1,ttl=0", *args),
                  env=env, own_cache_dir=False, expect_status=-9 if crash_at else 0)
        m.crash_at = crash_at
        started.append(m)
        return m

    yield start
    for m in started:
        if m.crash_at and m.proc.poll() is not None and is_mounted(m.mnt):
            subprocess.run(["fusermount3", "-uz", str(m.mnt)], check=False)
    harness.assert_clean(started)


def default_cache_dirs(tmp_path):
    """Every cache_dir the daemons made below XDG_CACHE_HOME (a read-write mount locks its)."""
    return sorted(p.parent for p in xdg(tmp_path).rglob("lock"))


def files_in(d):
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def assert_stored(daemons, src, path, want):
    """A fresh read-only daemon of src (it reads the store, not any staging area) shows path
    with the bytes of want (None: no such file)."""
    ro = daemons(src, "-o", "ro")
    try:
        if want is None:
            assert not ro.path(path).exists()
        else:
            h5diff_ok(want, ro.path(path))
    finally:
        assert ro.unmount() == 0


def crash_during_commit(daemons, src, *args):
    """A daemon of src killed (SIGKILL) in the middle of committing TARGET: the whole file waits
    in its cache_dir's staging area with a COMMITTING record."""
    m = daemons(src, *args, crash_at="chunks")
    with pytest.raises(OSError):
        shutil.copyfile(SOURCE / "sample2.h5", m.path(TARGET))
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(m.mnt)], check=False)
    assert not is_mounted(m.mnt)
    return m


# ---- a relative cache_dir ----

def test_relative_cache_dir_of_a_daemonised_mount(bucket_copy, tmp_path, daemons):
    """fuse_daemonize changes to "/": the journal's paths built from a relative cache_dir then
    pointed below "/", and every write failed with EINVAL. The cache_dir is the launcher's
    working directory's."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    mnt = tmp_path / "daemon-mnt"
    mnt.mkdir()
    log = tmp_path / "daemon.log"
    env = dict(os.environ, HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(xdg(tmp_path)))
    pid = None
    set_child_subreaper(True)
    try:
        r = subprocess.run([str(h5osfs_bin().resolve()), "-o", f"log_file={log},user=test_user1,ttl=0",
                            "-o", "cache_dir=relcache", str(bucket_copy), str(mnt)],
                           cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=15)
        assert r.returncode == 0, r.stderr
        pg = subprocess.run(["pgrep", "-f", str(mnt)], capture_output=True, text=True,
                            timeout=10)
        pids = [int(p) for p in pg.stdout.split()]
        assert len(pids) == 1, pg.stdout
        pid = pids[0]
        assert is_mounted(mnt)
        target = mnt / HOME / "relative.h5"
        cp = subprocess.run(["cp", str(SOURCE / "sample1.h5"), str(target)],
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        cache = cwd / "relcache"
        assert files_in(cache) == ["images", "journal", "lock", "rejected", "staging"]
        assert (cache / "lock").read_text().strip() == str(pid)
        assert f"cache_dir {cache}" in log.read_text()
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True, timeout=10)
        status = wait_exit(pid, 15)
        assert status is not None, f"h5osfs {pid} still running 15 s after unmount"
        pid = None
        assert status == 0
        assert files_in(cache / "staging") == [] and files_in(cache / "journal") == []
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)], timeout=10)
        if pid is not None and wait_exit(pid, 0) is None:
            os.kill(pid, 9)
            wait_exit(pid, 10)
        set_child_subreaper(False)
    src = conftest.MountSource("posix", bucket_copy, bucket_copy)
    assert_stored(daemons, src, f"{HOME}/relative.h5", SOURCE / "sample1.h5")


# ---- the default cache_dir: one per bucket ----

@pytest.mark.backends("posix", "s3", "rgw")
def test_two_buckets_mounted_read_write_with_the_default_cache_dir(
        bucket_copy, second_bucket, mount_source, daemons, tmp_path):
    """With one default cache_dir for every bucket, the second read-write mount was refused
    (its cache_dir was locked by the first)."""
    src1, src2 = mount_source(bucket_copy), mount_source(second_bucket)
    m1 = daemons(src1)
    m2 = daemons(src2)
    shutil.copyfile(SOURCE / "sample1.h5", m1.path(f"{HOME}/one.h5"))
    shutil.copyfile(SOURCE / "sample3.h5", m2.path(f"{HOME}/two.h5"))
    caches = default_cache_dirs(tmp_path)
    assert len(caches) == 2, caches
    readable = "s3-hsdstest-" if m1.backend == "s3" else "hsdstest-"
    assert all(c.name.startswith(readable) for c in caches), caches
    owner = {(c / "lock").read_text().strip(): c for c in caches}
    assert sorted(owner) == sorted([str(m1.proc.pid), str(m2.proc.pid)])
    cache1 = owner[str(m1.proc.pid)]
    for m in (m1, m2):
        assert sum(f"cache_dir {c}" in m.log() for c in caches) == 1, m.log()
    assert_stored(daemons, src1, f"{HOME}/one.h5", SOURCE / "sample1.h5")
    assert_stored(daemons, src2, f"{HOME}/two.h5", SOURCE / "sample3.h5")
    assert_stored(daemons, src1, f"{HOME}/two.h5", None)
    assert_stored(daemons, src2, f"{HOME}/one.h5", None)
    for m in (m1, m2):                  # a read-write remount of a bucket finds its own again
        assert m.unmount() == 0
    again = daemons(src1)
    assert default_cache_dirs(tmp_path) == caches
    assert f"cache_dir {cache1}" in again.log()
    assert (cache1 / "lock").read_text().strip() == str(again.proc.pid)


# ---- records of one bucket are never committed into another ----

@pytest.mark.backends("posix", "s3", "rgw")
@pytest.mark.parametrize("cache", ["default", "shared"])
def test_crash_leftover_goes_to_its_own_bucket_only(bucket_copy, second_bucket, mount_source,
                                                    daemons, tmp_path, cache):
    """Bucket A's daemon dies in a commit; bucket B is mounted read-write next (with the
    default cache_dir, or with the same explicit one): B's recovery used to commit A's staged
    file into B. Now it stays for A, whose next mount commits it."""
    args = () if cache == "default" else ("-o", f"cache_dir={tmp_path}/shared")
    src_a, src_b = mount_source(bucket_copy), mount_source(second_bucket)
    crash_during_commit(daemons, src_a, *args)
    caches = default_cache_dirs(tmp_path) if cache == "default" else [tmp_path / "shared"]
    assert len(caches) == 1, caches
    staged = files_in(caches[0] / "staging")
    records = files_in(caches[0] / "journal")
    assert len(staged) == 1 and len(records) == 1, (staged, records)
    b = daemons(src_b, *args)
    assert not b.path(TARGET).exists()
    assert b.unmount() == 0
    assert_stored(daemons, src_b, TARGET, None)
    assert files_in(caches[0] / "staging") == staged
    assert files_in(caches[0] / "journal") == records
    if cache == "shared":
        name = records[0].removesuffix(".json")
        identity = bucket_identity(src_a)
        lines = [ln for ln in b.log().splitlines() if name in ln]
        assert len(lines) == 1, lines
        assert f"is for bucket {identity}, not this one" in lines[0], lines[0]
        assert f"/{TARGET}" in lines[0], lines[0]
    else:
        assert len(default_cache_dirs(tmp_path)) == 2
    a = daemons(src_a, *args)
    h5diff_ok(SOURCE / "sample2.h5", a.path(TARGET))
    assert a.unmount() == 0
    assert files_in(caches[0] / "staging") == [] and files_in(caches[0] / "journal") == []
    assert_stored(daemons, src_a, TARGET, SOURCE / "sample2.h5")


def test_record_naming_no_bucket_is_kept(bucket_copy, daemons, tmp_path):
    """A record written before records named their bucket could be any bucket's: it is not
    committed (not even into the bucket it may have come from) and not removed; one line says
    where its bytes are."""
    cache = tmp_path / "cache"
    src = conftest.MountSource("posix", bucket_copy, bucket_copy)
    crash_during_commit(daemons, src, "-o", f"cache_dir={cache}")
    [record] = (cache / "journal").iterdir()
    [staged] = (cache / "staging").iterdir()
    text = record.read_text()
    assert f'"bucket":"{os.path.realpath(bucket_copy)}"' in text
    record.write_text(text.replace(f'"bucket":"{os.path.realpath(bucket_copy)}",', ""))
    m = daemons(src, "-o", f"cache_dir={cache}")
    assert not m.path(TARGET).exists()
    assert m.unmount() == 0
    lines = [ln for ln in m.log().splitlines() if record.stem in ln]
    assert len(lines) == 1, lines
    assert "names no bucket" in lines[0] and str(staged) in lines[0], lines[0]
    assert staged.read_bytes() == (SOURCE / "sample2.h5").read_bytes()
    assert sorted((cache / "journal").iterdir()) == [record]
