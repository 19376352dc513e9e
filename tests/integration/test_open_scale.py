"""The open of a domain costs the same requests at any number of chunk objects (issue 29 §1).

A root of more chunk objects than one listing page (1,000) is not listed: every dataset
declares its whole grid, a chunk without an object reads as the fill value, and the image is
a new version at every open after ttl, so a chunk HSDS rewrote in place is read anew. These
tests write domains of N chunk objects straight into the bucket (as HSDS lays them out) and
count the requests of /.h5osfs-stats: deterministic, no timing."""
import errno
import json
import os
import sys
import time

import h5py
import numpy as np
import pytest

import conftest
from chunk_writer import ChunkWriter

sys.path.insert(0, str(conftest.REPO / "bench"))
import hsds_bucket  # noqa: E402

pytestmark = pytest.mark.backends("posix", "s3")

USER = "test_user1"
HOME = f"home/{USER}"
CHUNK = 4096                # int8 elements per chunk: one chunk is one page of the file
TINY = 16                   # int8 elements per chunk of a tiny-chunk domain: 256 in a page
TTL = 1
SEEN_LIMIT = TTL + 10       # s: how long a rewrite may take to show (ttl, then a rebuild)


def chunk(i, base=0, length=CHUNK):
    return ((np.arange(length) + i + base) % 127).astype(np.int8)


def add_domain(bucket, name, n, length=CHUNK):
    """Domain HOME/name: one int8 dataset /data of n chunk objects of length elements. -> its
    chunk key prefix."""
    root = hsds_bucket.make_domain(bucket, f"/{HOME}/{name}", "i1", (n * length,), (length,),
                                   lambda idx: chunk(idx[0], length=length).tobytes(), user=USER)
    (dset_dir,) = (bucket / "db" / root[2:19] / "d").iterdir()
    return (dset_dir.relative_to(bucket)).as_posix() + "/"


def requests(m):
    return json.loads(m.path(".h5osfs-stats").read_text())["store"]["requests"]


def open_cost(m, name, n, length=CHUNK):
    """The requests of an open and a read of the first and last values of HOME/name."""
    before = requests(m)
    with h5py.File(m.path(f"{HOME}/{name}"), "r") as f:
        d = f["data"]
        assert d[0] == chunk(0, length=length)[0]
        assert d[n * length - 1] == chunk(n - 1, length=length)[length - 1]
    after = requests(m)
    return {k: after[k] - before[k] for k in ("list", "get", "head")}


def test_open_costs_the_same_requests_at_any_scale(bucket_copy, mount_bucket):
    """200 and 2,000 chunk objects: the same LISTs and GETs (the metadata, then the two chunks
    read), and no HEAD per chunk (a local bucket stats the keys of a listing it uses). Before,
    the 2,000 cost two LIST pages on S3 and 2,000 HEADs on a local bucket."""
    add_domain(bucket_copy, "small.h5", 200)
    add_domain(bucket_copy, "large.h5", 2000)
    costs = {}
    for name, n in (("small.h5", 200), ("large.h5", 2000)):
        m = mount_bucket(bucket_copy, "-o", f"user={USER}")
        m.path(HOME).stat()             # the folders looked up before the count
        costs[name] = open_cost(m, name, n)
        m.unmount()
    small, large = costs["small.h5"], costs["large.h5"]
    assert large["list"] == small["list"], costs
    assert large["get"] == small["get"], costs
    assert large["head"] <= small["head"], costs


def test_a_value_in_chunks_of_a_few_bytes_costs_one_get(bucket_copy, mount_bucket, backend):
    """Chunks of 16 bytes: 256 of them in a page of the file. The kernel reads whole pages, so
    the first and last values cost 2 x 256 chunk GETs (issue 29: 492 GETs for two values).
    Over S3 such a file is read past the page cache: each value costs one GET, as in chunks of
    a page. A local bucket keeps the page cache (a chunk is a file read there, and a whole read
    past the cache costs a round trip per chunk): a value costs its page. Either way every
    byte of the file, read in pieces at odd offsets, is the byte read whole."""
    n = 1000
    add_domain(bucket_copy, "pages.h5", 200)
    add_domain(bucket_copy, "tiny.h5", n, TINY)
    m = mount_bucket(bucket_copy, "-o", f"user={USER}")
    m.path(HOME).stat()                 # the folders looked up before the count
    pages = open_cost(m, "pages.h5", 200)
    tiny = open_cost(m, "tiny.h5", n, TINY)
    if backend == "posix":
        assert tiny["get"] > pages["get"] + 256, (tiny, pages)
    else:
        assert tiny["get"] == pages["get"], (tiny, pages)
    want = np.concatenate([chunk(i, length=TINY) for i in range(n)])
    assert np.array_equal(read_data(m, "tiny.h5"), want)
    path = m.path(f"{HOME}/tiny.h5")
    whole = path.read_bytes()
    assert len(whole) == path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in range(1, len(whole), 4093):
            assert os.pread(fd, 37, off) == whole[off:off + 37], off
    finally:
        os.close(fd)


def read_data(m, name):
    with h5py.File(m.path(f"{HOME}/{name}"), "r") as f:
        return f["data"][:]


def read_data_unless_eio(m, name):
    """read_data, or None when a read failed with EIO: a version whose chunk HSDS rewrote after
    the version served it, met before ttl passed (man page, HSDS WRITING CHUNKS IN PLACE)."""
    try:
        return read_data(m, name)
    except OSError as e:
        assert "errno = 5" in str(e), e
        return None


def test_a_rewrite_in_place_is_read_at_the_next_open_of_an_unlisted_domain(bucket_copy,
                                                                          mount_bucket):
    """A domain too large to list: HSDS rewrites chunk 7 in place after the mount read it; an
    open after ttl reads the new values there and the old ones everywhere else (each open one
    whole read of the dataset: never a mix of old and new in chunk 7); a chunk deleted reads as
    the fill value (0)."""
    n = 1100
    prefix = add_domain(bucket_copy, "big.h5", n)
    want = np.concatenate([chunk(i) for i in range(n)])
    m = mount_bucket(bucket_copy, "-o", f"user={USER},ttl={TTL}")
    assert np.array_equal(read_data(m, "big.h5"), want)
    m.put(prefix + "7", chunk(7, base=50).tobytes())
    want[7 * CHUNK:8 * CHUNK] = chunk(7, base=50)
    m.delete(prefix + "9")
    want[9 * CHUNK:10 * CHUNK] = 0
    t0 = time.monotonic()
    while not np.array_equal(got := read_data_unless_eio(m, "big.h5"), want):
        old = np.concatenate([chunk(i) for i in range(n)])
        assert got is None or np.array_equal(got, old), "a mix of the old and the new chunks"
        assert time.monotonic() - t0 < SEEN_LIMIT, "HSDS's rewrite not seen"
        time.sleep(0.1)


def test_a_kept_image_is_not_served_stale(bucket_copy, mount_bucket, tmp_path):
    """A mount that read the domain is gone; HSDS rewrites a chunk; a new mount on the same
    cache_dir reads the new values (nothing kept from before names the old bytes)."""
    n = 1100
    prefix = add_domain(bucket_copy, "kept.h5", n)
    cache = tmp_path / "cache"
    m = mount_bucket(bucket_copy, "-o", f"user={USER},cache_dir={cache}")
    assert read_data(m, "kept.h5")[3 * CHUNK] == chunk(3)[0]
    m.put(prefix + "3", chunk(3, base=9).tobytes())
    m.unmount()
    again = mount_bucket(m, "-o", f"user={USER},cache_dir={cache}")
    assert np.array_equal(read_data(again, "kept.h5")[3 * CHUNK:4 * CHUNK], chunk(3, base=9))


def r_plus_change(path, index, value, meanwhile=None):
    """An h5py r+ of path that reads the chunk of data[index], lets meanwhile() run, then sets
    data[index] = value and closes: "closed", or "errno N" from the close."""
    w = ChunkWriter(path, "data", index, value, CHUNK)
    if meanwhile:
        meanwhile()
    return w.change()


def after_this_second():
    """Until the clock is in a later whole second than now: an S3 mtime (whole seconds) of a
    write after this is later than anything begun before the call. A clock condition, not a
    race: the wait is at most one second."""
    start = int(time.time())
    while int(time.time()) <= start:
        time.sleep(0.05)


def test_r_plus_of_an_unlisted_domain_over_a_chunk_rewritten_meanwhile_fails_estale(
        bucket_copy, mount_bucket):
    """A domain too large to list (no listing to compare etags with): the writer read chunk 5,
    HSDS rewrites it in place, the writer changes one element of its copy and closes: ESTALE
    (the chunk object's mtime is after the writer's image was built), HSDS's bytes stay. The
    same change with no rewrite commits. Before, the unlisted domain's commit wrote the writer's
    chunk over HSDS's, losing HSDS's write."""
    n = 1100
    prefix = add_domain(bucket_copy, "race.h5", n)
    m = mount_bucket(bucket_copy, "-o", f"user={USER},ttl={TTL}")
    hsds = chunk(5, base=70).tobytes()

    def hsds_rewrites():
        after_this_second()
        m.put(prefix + "5", hsds)

    assert r_plus_change(m.path(f"{HOME}/race.h5"), 5 * CHUNK + 1, -1,
                         hsds_rewrites) == f"errno {errno.ESTALE}"
    assert m.get(prefix + "5") == hsds
    assert "was changed in the bucket" in m.log()
    time.sleep(TTL + 0.5)               # the next open after ttl: a new build, a new base
    assert r_plus_change(m.path(f"{HOME}/race.h5"), 5 * CHUNK + 1, -1) == "closed"
    want = np.frombuffer(hsds, dtype=np.int8).copy()
    want[1] = -1
    assert np.array_equal(read_data(m, "race.h5")[5 * CHUNK:6 * CHUNK], want)
