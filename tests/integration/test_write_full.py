"""A full cache_dir (issue 12, defect 7): the staging area on a 1 MiB tmpfs. A write the staged
file cannot take leaves an incomplete file that is never stored and whose space comes back
(at its last close, at rm, rename over or O_TRUNC, and at the next mount after a crash); a
whole file still commits when only its journal record finds no room, live and at recovery;
rm of a domain with a change staged drops the change. Mounting a tmpfs needs root."""
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import harness
from conftest import SOURCE, Mount, MountSource, is_mounted
from test_write import assert_equal_files, wait_for

# the staging area is a local directory whatever the store: one backend is enough
pytestmark = pytest.mark.backends("posix")

HOME = "home/test_user1"
SMALL = SOURCE / "sample1.h5"

# Writes until the cache_dir is full and holds the file open; then, told "write" or "close"
# on stdin, says what a further write and the close give.
HOLDER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
block = os.urandom(1 << 16)
try:
    while True:
        os.write(fd, block)
except OSError as e:
    print("full", e.errno, flush=True)
what = sys.stdin.readline().strip()
if what == "write":
    try:
        os.write(fd, block)
        print("write", 0, flush=True)
    except OSError as e:
        print("write", e.errno, flush=True)
try:
    os.close(fd)
    print("close", 0, flush=True)
except OSError as e:
    print("close", e.errno, flush=True)
"""


@pytest.fixture
def small_cache(tmp_path):
    """A cache_dir on a 1 MiB tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    cache = tmp_path / "cache"
    cache.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(cache)], check=True)
    yield cache
    subprocess.run(["umount", "-l", str(cache)], check=False)


@pytest.fixture
def big_file(tmp_path):
    """An HDF5 file of 2.4 MB: more than the cache_dir holds."""
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.random.default_rng(12).random(300_000))
    return path


def mount_on(bucket, tmp_path, cache, log, env=None):
    """A mount outside the mount_bucket fixture (a test may kill it): unmount it yourself."""
    mnt = tmp_path / f"mnt-{log}"
    mnt.mkdir(exist_ok=True)
    return Mount(MountSource("posix", bucket, bucket, env=env), mnt, tmp_path / f"{log}.log",
                 ("-o", f"user=test_user1,ttl=0,cache_dir={cache}"))


def kill(m):
    """kill -9 of mount m's daemon (if it still runs), and the dead mount detached."""
    if m.proc.poll() is None:
        m.proc.kill()
    m.proc.wait(timeout=30)
    subprocess.run(["fusermount3", "-uz", str(m.mnt)], check=False)
    assert not is_mounted(m.mnt)


def free_bytes(cache):
    st = os.statvfs(cache)
    return st.f_bavail * st.f_frsize


def total_bytes(cache):
    st = os.statvfs(cache)
    return st.f_blocks * st.f_frsize


def staging(cache):
    return sorted(p.name for p in (cache / "staging").iterdir())


def journal(cache):
    return sorted(p.name for p in (cache / "journal").iterdir())


def assert_freed(cache):
    """Nothing is staged or journaled: the tmpfs holds the lock file and little else."""
    assert staging(cache) == [] and journal(cache) == []
    assert free_bytes(cache) > 0.9 * total_bytes(cache)


def fill(path):
    """Writes path until the file system is full."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\1" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC


class Holder:
    """A process that wrote target until the cache_dir was full and holds it open."""

    def __init__(self, target):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().split() == ["full", str(errno.ENOSPC)]

    def finish(self, what):
        """-> {"write": errno, "close": errno} of what it was told to do."""
        out, _ = self.proc.communicate(what + "\n", timeout=30)
        return {k: int(v) for k, v in (line.split() for line in out.splitlines())}

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def assert_small_cp_commits(m, cache):
    """A create works (and commits) on mount m whose cache_dir is cache."""
    target = m.path(f"{HOME}/small.h5")
    shutil.copyfile(SMALL, target)
    assert_equal_files(SMALL, target)
    wait_for(lambda: staging(cache) == [])      # committed at close, dropped at release


def test_enospc_during_cp_frees_the_staging_and_a_later_cp_commits(bucket_copy, mount_bucket,
                                                                    small_cache, big_file):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={small_cache}")
    target = m.path(f"{HOME}/big.h5")
    with pytest.raises(OSError) as e:
        shutil.copyfile(big_file, target)
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(FileNotFoundError):      # what a user does next: gone at the last close
        os.unlink(target)
    wait_for(lambda: staging(small_cache) == [])    # the release follows close() unawaited
    assert_freed(small_cache)
    assert not target.exists()
    assert "big.h5: writing its staged file" in m.log() and "is not stored" in m.log()
    assert_small_cp_commits(m, small_cache)
    assert list((small_cache / "rejected").iterdir()) == []
    assert m.unmount() == 0
    m2 = mount_bucket(m, "-o", f"user=test_user1,ttl=0,cache_dir={small_cache}")
    assert_equal_files(SMALL, m2.path(f"{HOME}/small.h5"))
    assert not m2.path(f"{HOME}/big.h5").exists()


def test_rm_while_the_writer_holds_the_half_written_file_open(bucket_copy, mount_bucket,
                                                               small_cache):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={small_cache}")
    target = m.path(f"{HOME}/held.h5")
    holder = Holder(target)
    try:
        assert free_bytes(small_cache) < 64 << 10
        os.unlink(target)                   # frees the staged bytes now, the writer open
        assert not target.exists()
        assert_freed(small_cache)
        assert_small_cp_commits(m, small_cache)
        # the removed file takes no more bytes, and its close commits nothing
        assert holder.finish("write") == {"write": errno.ESTALE, "close": 0}
    finally:
        holder.kill()
    wait_for(lambda: staging(small_cache) == [])
    assert not target.exists()
    assert "held.h5: committed" not in m.log()
    assert_equal_files(SMALL, m.path(f"{HOME}/small.h5"))


def test_o_trunc_of_the_half_written_file_starts_it_afresh(bucket_copy, mount_bucket,
                                                            small_cache):
    """An O_TRUNC open shares the writer's staged file (POSIX): emptied, no longer missing
    anything, it takes the new content, which its close commits."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={small_cache}")
    target = m.path(f"{HOME}/again.h5")
    holder = Holder(target)
    try:
        shutil.copyfile(SMALL, target)
        assert_equal_files(SMALL, target)
        assert holder.finish("close") == {"close": 0}
    finally:
        holder.kill()
    wait_for(lambda: staging(small_cache) == [])
    assert_freed(small_cache)
    assert_equal_files(SMALL, target)


def test_rename_over_the_half_written_file_drops_it(bucket_copy, mount_bucket, small_cache):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={small_cache}")
    source, target = m.path(f"{HOME}/sample1.h5"), m.path(f"{HOME}/over.h5")
    domain = source.read_bytes()
    holder = Holder(target)
    try:
        os.rename(source, target)
        assert_freed(small_cache)
        assert target.read_bytes() == domain
        assert holder.finish("write") == {"write": errno.ESTALE, "close": 0}
    finally:
        holder.kill()
    wait_for(lambda: staging(small_cache) == [])
    assert target.read_bytes() == domain    # the renamed domain, not the dropped bytes
    assert "over.h5: committed" not in m.log()


def test_remount_after_a_crash_with_a_half_written_file_frees_it(bucket_copy, tmp_path,
                                                                 small_cache):
    m = mount_on(bucket_copy, tmp_path, small_cache, "crash")
    holder = Holder(m.path(f"{HOME}/held.h5"))
    try:
        kill(m)
    finally:
        holder.kill()
    assert staging(small_cache) != []       # the incomplete bytes, left by the crash
    m = mount_on(bucket_copy, tmp_path, small_cache, "after")
    try:
        assert_freed(small_cache)
        assert "removed 1 staged files that no journal record names" in m.log()
        assert_equal_files(SOURCE / "sample3.h5", m.path(f"{HOME}/sample3.h5"))    # reads
        assert not m.path(f"{HOME}/held.h5").exists()
        assert_small_cp_commits(m, small_cache)
    finally:
        harness.assert_clean([m])


@pytest.mark.parametrize("crash", [False, True], ids=["close", "crash"])
def test_a_whole_file_commits_when_its_journal_record_finds_no_room(bucket_copy, tmp_path,
                                                                    small_cache, crash):
    """The file is written whole, then something else fills the cache_dir: the commit cannot
    journal itself, and goes ahead anyway (at close; or, killed during it, at the next mount),
    which frees the staged bytes. Before, the file stayed staged, the disk full, at every
    mount."""
    env = dict(os.environ, H5OSFS_TEST_CRASH_AT="chunks") if crash else None
    m = mount_on(bucket_copy, tmp_path, small_cache, "write", env)
    target = m.path(f"{HOME}/whole.h5")
    src = SOURCE / "sample3.h5"             # 726 KB
    try:
        f = open(target, "wb")
        f.write(src.read_bytes())
        f.flush()
        fill(small_cache / "filler")
        if crash:
            with pytest.raises(OSError):
                f.close()                   # the daemon died in the commit
        else:
            f.close()
    finally:
        if crash:
            kill(m)
        else:
            harness.assert_clean([m])
    if crash:
        assert journal(small_cache) != []   # a record, and a whole staged file, on a full disk
        m = mount_on(bucket_copy, tmp_path, small_cache, "recover")
    else:
        m = mount_on(bucket_copy, tmp_path, small_cache, "again")
    try:
        assert "committing without its journal record" in Path(
            tmp_path / ("recover.log" if crash else "write.log")).read_text()
        assert staging(small_cache) == [] and journal(small_cache) == []
        assert_equal_files(src, m.path(f"{HOME}/whole.h5"))
        assert_small_cp_commits(m, small_cache)     # room for creates, the filler still there
    finally:
        harness.assert_clean([m])


def test_rm_of_a_domain_drops_its_staged_change(bucket_copy, mount_bucket, tmp_path):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    target = m.path(f"{HOME}/sample1.h5")
    fd = os.open(target, os.O_RDWR)
    try:
        os.pwrite(fd, b"\0" * 4096, 4096)  # a change, not committed yet
        os.unlink(target)                   # deletes the domain as before, and the change
        assert not target.exists()
        assert staging(tmp_path / "cache") == []
    finally:
        os.close(fd)                        # commits nothing: the domain stays deleted
    assert not target.exists()
    assert not (bucket_copy / HOME / "sample1.h5" / ".domain.json").exists()
    assert "sample1.h5: committed" not in m.log()


def test_a_crash_keeps_an_r_plus_write_into_a_small_dataset(bucket_copy, tmp_path):
    """r+ stages a domain's chunks as holes and a recovery tells a written chunk by the data
    in its whole blocks; a chunk smaller than a block (a small dataset's) has none, so a write
    into one was restored as unwritten and lost at a crash. The daemon is killed with the
    written descriptor open; the next mount commits the write."""
    cache = tmp_path / "cache"
    cache.mkdir()
    m = mount_on(bucket_copy, tmp_path, cache, "rplus")
    target = m.path(f"{HOME}/small.h5")
    try:
        with h5py.File(target, "w") as f:
            f.create_dataset("small", data=np.arange(1, 301, dtype="<i4"))
        with h5py.File(target, "r") as f:
            d = f["small"]
            offset = d.id.get_offset()
            if offset is None:
                offset = d.id.get_chunk_info(0).byte_offset
            assert d.id.get_storage_size() < 4096
        fd = os.open(target, os.O_RDWR)
        assert os.pwrite(fd, b"\x7f\x7f\x7f\x7f", offset + 8) == 4     # value 2 (direct_io)
    finally:
        kill(m)
    with pytest.raises(OSError):
        os.close(fd)                        # the daemon is gone: nothing was committed
    m = mount_on(bucket_copy, tmp_path, cache, "after")
    try:
        with h5py.File(m.path(f"{HOME}/small.h5"), "r") as f:
            values = f["small"][:]
        assert values[2] == 0x7f7f7f7f
        assert list(values[:2]) == [1, 2] and list(values[3:]) == list(range(4, 301))
        assert staging(cache) == []
        assert [n for n in journal(cache) if not n.startswith("gc.")] == []
    finally:
        harness.assert_clean([m])
