"""HSDS rewrites chunks in place (issue 24, part 2): HSDS stores a write into an existing chunk
as a new object under the same key, without touching the domain's metadata. A mount that read
that chunk must show the new values at the next open after ttl (not keep the old image, its
cached chunks and the kernel's pages), and an r+ change through the mount must carry only
what its writer changed: chunks it did not write keep what HSDS stored meanwhile, and a chunk
HSDS rewrote under the writer's copy of it makes the commit fail with ESTALE (the bytes kept in
cache_dir/rejected/, as when another mount wins), never undo HSDS's write.

HSDS's write is m.put(chunk_key, bytes): the same key, the raw bytes HSDS stores for an
unfiltered chunk. On a local bucket, a rewrite in place that sets the mtime back (touch -r,
os.utime) is told by its ctime."""
import errno
import os
import re
import time

import h5py
import numpy as np
import pytest

import conftest
from chunk_writer import ChunkWriter

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
NAME = "rewritten.h5"
REL = f"{HOME}/{NAME}"
CHUNK = 1 << 18            # elements per chunk of x (int32, unfiltered, HSDS's 1 MiB least): 4
N = 4 * CHUNK
TTL = 1
SEEN_LIMIT = TTL + 10        # s: how long a rewrite may take to show (ttl, then a rebuild)


@pytest.fixture
def mounted(bucket_copy, mount_bucket, tmp_path):
    """A read-write mount with ttl=1 holding domain REL (x = arange(N), int32, CHUNK per
    chunk, unfiltered), and the keys of x's chunk objects: (m, {chunk index: key})."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl={TTL},cache_dir={tmp_path}/cache")
    src = tmp_path / "src.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.arange(N, dtype="<i4"), chunks=(CHUNK,))
    with open(src, "rb") as fin, open(m.path(REL), "wb") as fout:
        fout.write(fin.read())
    keys = chunk_keys(m)
    assert sorted(keys) == [0, 1, 2, 3], keys
    for i, key in keys.items():   # the test's idea of HSDS's bytes is the stored one
        assert m.get(key) == values(i).tobytes(), key
    return m, keys


def root_of(m):
    return os.getxattr(m.path(REL), "user.h5osfs.root").decode()


def chunk_keys(m):
    """{chunk index: key} of x's chunk objects in the domain's current root."""
    prefix = f"db/{root_of(m)[2:19]}/"
    if m.src.mirror is None:
        found = [p.relative_to(m.bucket).as_posix() for p in (m.bucket / prefix).rglob("*")
                 if p.is_file() and not conftest.is_put_under_way(p)]
    else:
        bucket_prefix = m.src.source.removeprefix(f"s3://{conftest.S3_BUCKET}/") + "/"
        found = [k[len(bucket_prefix):] for k in m.src.mirror.s3.listing(bucket_prefix + prefix)]
    return {int(k.rsplit("/", 1)[1]): k for k in found
            if re.fullmatch(r"db/[^/]+/d/[^/]+/\d+", k)}


def values(i, base=0):
    """Chunk i of x as stored: arange(N)'s part, plus base."""
    return np.arange(i * CHUNK, (i + 1) * CHUNK, dtype="<i4") + base


def read_x(m):
    with h5py.File(m.path(REL), "r") as f:
        return f["x"][:]


def read_x_unless_eio(m):
    """x as an open reads it; None when the read failed with EIO: until ttl has passed an open
    may meet the version the mount read, whose chunk HSDS has rewritten since, and a chunk of
    that version the daemon let go cannot be served again as it was (man page, HSDS WRITING
    CHUNKS IN PLACE). The next open then reads the new version."""
    try:
        return read_x(m)
    except OSError as e:
        assert "errno = 5" in str(e), e
        return None


def await_values(m, want):
    """Seconds until an open of the domain reads x == want; fails after SEEN_LIMIT."""
    t0 = time.monotonic()
    while not np.array_equal(read_x_unless_eio(m), want):
        assert time.monotonic() - t0 < SEEN_LIMIT, (
            f"HSDS's rewrite not seen {SEEN_LIMIT} s after it (ttl={TTL}): x[{CHUNK}:] = "
            f"{read_x_unless_eio(m)}...")
        time.sleep(0.1)
    return time.monotonic() - t0


def await_log(m, pattern, timeout=30):
    """The group of pattern's one match in m's log, written at the file's last close (FUSE
    sends the release after close(2) has returned)."""
    t0 = time.monotonic()
    while not (found := re.findall(pattern, m.log())):
        assert time.monotonic() - t0 < timeout, m.log()[-3000:]
        time.sleep(0.05)
    assert len(found) == 1, found
    return found[0]


def test_rewritten_chunk_is_seen_at_the_next_open_after_ttl(mounted):
    """The mount read every chunk (its caches and the kernel's pages hold them); HSDS rewrites
    chunk 1: an open after ttl reads the new values, the other chunks as before."""
    m, keys = mounted
    assert np.array_equal(read_x(m), np.arange(N))
    m.put(keys[1], values(1, base=100000).tobytes())
    want = np.arange(N, dtype="<i4")
    want[CHUNK:2 * CHUNK] += 100000
    seconds = await_values(m, want)
    print(f"rewrite seen after {seconds:.2f} s (ttl={TTL})")


@pytest.mark.posix_only(reason="a local bucket's file is rewritten in place, its mtime set back")
def test_rewrite_that_sets_the_mtime_back_is_seen(mounted):
    """A local bucket: HSDS's chunk file rewritten in place (same inode, same size), then its
    mtime set back as touch -r does: the ctime, which nobody can set back, tells the change."""
    m, keys = mounted
    assert np.array_equal(read_x(m), np.arange(N))
    path = m.bucket / keys[1]
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.write(values(1, base=7).tobytes())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns)
    want = np.arange(N, dtype="<i4")
    want[CHUNK:2 * CHUNK] += 7
    await_values(m, want)


# The writer runs in a child: HDF5 leaves a file whose close failed half-closed, and h5py then
# crashes at exit. It opens r+, reads the chunk of x that holds x[i] (its copy), waits for a
# line, sets x[i] = v in its copy, writes the copy back whole and closes: "closed" or "errno N".
# (A read-modify-write, as HDF5 itself does for a filtered chunk it holds in its chunk cache.)
def Writer(path, index, value):
    return ChunkWriter(path, "x", index, value, CHUNK)


def test_r_plus_after_a_rewrite_changes_the_new_values(mounted):
    """The mount read x, HSDS rewrote chunk 1, and an r+ open after ttl changes one element of
    it: the commit holds HSDS's values with that one element changed (it once wrote the old
    chunk back, undoing HSDS's write)."""
    m, keys = mounted
    assert np.array_equal(read_x(m), np.arange(N))
    m.put(keys[1], values(1, base=100000).tobytes())
    want = np.arange(N, dtype="<i4")
    want[CHUNK:2 * CHUNK] += 100000
    await_values(m, want)
    assert Writer(m.path(REL), CHUNK + 3, -1).change() == "closed"
    want[CHUNK + 3] = -1
    assert np.array_equal(read_x(m), want)
    assert m.get(chunk_keys(m)[1]) == want[CHUNK:2 * CHUNK].tobytes()


def test_r_plus_over_a_chunk_rewritten_meanwhile_fails_estale(mounted, tmp_path):
    """The writer has read chunk 1; HSDS rewrites it; the writer changes one element of its
    copy and closes: ESTALE, HSDS's chunk stays, the domain is not replaced, and the writer's
    file is kept whole in cache_dir/rejected/ (one log line names the chunk, one the file)."""
    m, keys = mounted
    root = root_of(m)
    w = Writer(m.path(REL), CHUNK + 3, -1)
    hsds = values(1, base=100000).tobytes()
    m.put(keys[1], hsds)
    assert w.change() == f"errno {errno.ESTALE}"
    assert root_of(m) == root and m.get(keys[1]) == hsds
    assert re.search(rf"chunk object \S*{re.escape(keys[1])} was changed in the bucket", m.log())
    kept = await_log(m, r"another writer changed the domain.*kept as (\S+)")
    assert os.path.dirname(kept) == str(tmp_path / "cache" / "rejected")
    with h5py.File(kept, "r") as f:     # the writer's file: its copy of chunk 1, its change
        want = np.arange(N, dtype="<i4")
        want[CHUNK + 3] = -1
        got = f["x"][:]
        assert np.array_equal(got, want), np.nonzero(got != want)[0][:5]


@pytest.mark.posix_only(reason="hard links are a local bucket's; S3 has no inode change time")
def test_r_plus_commits_when_only_a_hard_link_to_its_chunk_came_and_went(mounted):
    """While a writer holds chunk 1, a hard link to the chunk's file is made and removed, as
    the store's copies between roots and their collection do on a local bucket (the collection
    of the root an earlier commit replaced, 30 s later, under an open r+). That changes the
    file's ctime and nothing else: the commit goes through (it once failed ESTALE, the
    writer's change kept only in rejected/, bench_versions.py G1 hit it)."""
    m, keys = mounted
    w = Writer(m.path(REL), CHUNK + 3, -1)
    path = m.bucket / keys[1]
    before = os.stat(path).st_ctime_ns
    for _ in range(100000):         # until the coarse clock the ctime comes from has moved on
        os.link(path, str(path) + ".link")
        os.unlink(str(path) + ".link")
        if os.stat(path).st_ctime_ns != before:
            break
    assert os.stat(path).st_ctime_ns != before
    assert w.change() == "closed"
    want = np.arange(N, dtype="<i4")
    want[CHUNK + 3] = -1
    assert np.array_equal(read_x(m), want)


def test_r_plus_keeps_what_hsds_wrote_into_another_chunk(mounted):
    """The writer has read chunk 1 and changes it while HSDS rewrites chunk 2: the
    commit carries the writer's chunk 1 and HSDS's chunk 2 (a chunk the writer did not write is
    copied from the bucket as it is at the commit, not from the writer's copy)."""
    m, keys = mounted
    w = Writer(m.path(REL), CHUNK + 3, -1)
    m.put(keys[2], values(2, base=100000).tobytes())
    assert w.change() == "closed"
    want = np.arange(N, dtype="<i4")
    want[CHUNK + 3] = -1
    want[2 * CHUNK:3 * CHUNK] += 100000
    assert np.array_equal(read_x(m), want)
    now = chunk_keys(m)
    assert m.get(now[1]) == want[CHUNK:2 * CHUNK].tobytes()
    assert m.get(now[2]) == want[2 * CHUNK:3 * CHUNK].tobytes()
