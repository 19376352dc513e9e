"""Built files kept in cache_dir/images (src/image/image_cache.c): the next mount with the same
cache_dir reads a domain's file from there instead of fetching every object again, as long as
a listing of the domain's root shows the same keys with the same sizes and etags. Anything
changed in the bucket (an object rewritten in place as HSDS does, a chunk added) makes it
build again; a damaged kept file is a rebuild, never wrong bytes; -o image_cache=0 keeps
nothing and a small limit evicts.

Domains are written by hand as HSDS lays them out (test_image_declared.make_domain)."""
import json
import os

import h5py
import numpy as np
import pytest

from test_image_declared import USER, bucket_dir, dataset, dataset_key, make_domain  # noqa: F401

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

ARGS = ("-o", f"user={USER}", "-o", "ttl=3600")
BUILT = "built the HDF5 file"
KEPT = "the HDF5 file built before (kept in cache_dir)"


def log_lines(m, name, what):
    return [line for line in m.log().splitlines() if f"/home/{USER}/{name}: {what}" in line]


def read(m, name):
    """{dataset: (values, attributes)} and the file's size as stat and a read see it."""
    path = m.path(f"home/{USER}/{name}")
    size = os.stat(path).st_size
    assert len(path.read_bytes()) == size
    with h5py.File(path, "r") as f:
        return {k: (f[k][...].tolist(), dict(f[k].attrs)) for k in f}


@pytest.fixture
def domain(bucket_dir):  # noqa: F811
    ids = make_domain(bucket_dir, "kept.h5", {
        "a": (dataset([8], [4], fill=-1), {"0": bytes([1, 2, 3, 4])}),
        "b": (dataset([3], [3]), {"0": bytes([7, 8, 9])}),
    })
    return bucket_dir, ids


def test_next_mount_reads_the_kept_file(mount_bucket, domain):
    bucket, _ = domain
    m = mount_bucket(bucket, *ARGS)
    first = read(m, "kept.h5")
    assert first == {"a": ([1, 2, 3, 4, -1, -1, -1, -1], {}), "b": ([7, 8, 9], {})}
    assert len(log_lines(m, "kept.h5", BUILT)) == 1
    assert m.unmount() == 0
    assert len(os.listdir(m.cache_dir / "images")) == 1

    m2 = mount_bucket(m, *ARGS)
    assert read(m2, "kept.h5") == first
    assert log_lines(m2, "kept.h5", BUILT) == [], m2.log()
    assert len(log_lines(m2, "kept.h5", KEPT)) == 1, m2.log()


def test_an_object_rewritten_in_place_is_built_again(mount_bucket, domain):
    bucket, ids = domain
    m = mount_bucket(bucket, *ARGS)
    read(m, "kept.h5")
    assert m.unmount() == 0
    # what HSDS does when a client adds an attribute: the dataset's JSON is rewritten in place
    key = dataset_key(ids["b"]) + "/.dataset.json"
    obj = json.loads((bucket / key).read_text())
    obj["attributes"]["units"] = {"type": {"class": "H5T_INTEGER", "base": "H5T_STD_I32LE"},
                                  "shape": {"class": "H5S_SCALAR"}, "value": 42,
                                  "created": obj["created"]}
    m.put(key, json.dumps(obj).encode())

    m2 = mount_bucket(m, *ARGS)
    assert read(m2, "kept.h5")["b"] == ([7, 8, 9], {"units": 42})
    assert len(log_lines(m2, "kept.h5", BUILT)) == 1, m2.log()
    assert log_lines(m2, "kept.h5", KEPT) == []


def test_a_chunk_added_is_built_again(mount_bucket, domain):
    bucket, ids = domain
    m = mount_bucket(bucket, *ARGS)
    read(m, "kept.h5")
    assert m.unmount() == 0
    m.put(dataset_key(ids["a"]) + "/1", bytes([5, 6, 7, 8]))    # was a hole, read as fill

    m2 = mount_bucket(m, *ARGS)
    assert read(m2, "kept.h5")["a"] == ([1, 2, 3, 4, 5, 6, 7, 8], {})
    assert len(log_lines(m2, "kept.h5", BUILT)) == 1, m2.log()


def test_a_damaged_kept_file_is_built_again(mount_bucket, domain):
    bucket, _ = domain
    m = mount_bucket(bucket, *ARGS)
    first = read(m, "kept.h5")
    assert m.unmount() == 0
    (kept,) = (m.cache_dir / "images").iterdir()
    data = kept.read_bytes()
    kept.write_bytes(data[:len(data) // 2])             # truncated after its header

    m2 = mount_bucket(m, *ARGS)
    assert read(m2, "kept.h5") == first
    assert len(log_lines(m2, "kept.h5", BUILT)) == 1, m2.log()
    assert "not a usable built file" in m2.log()
    assert m2.unmount() == 0
    assert kept.read_bytes() == data                    # the rebuild replaced it whole

    flipped = bytearray(data)
    for at in range(len(data) // 3, len(data), 997):   # corrupt bytes all through
        flipped[at] ^= 0x5a
    kept.write_bytes(bytes(flipped))
    m3 = mount_bucket(m, *ARGS)
    assert read(m3, "kept.h5") == first


def test_image_cache_0_keeps_nothing(mount_bucket, domain):
    bucket, _ = domain
    m = mount_bucket(bucket, *ARGS, "-o", "image_cache=0")
    read(m, "kept.h5")
    assert m.unmount() == 0
    assert not (m.cache_dir / "images").exists()
    m2 = mount_bucket(m, *ARGS, "-o", "image_cache=0")
    read(m2, "kept.h5")
    assert len(log_lines(m2, "kept.h5", BUILT)) == 1


def test_a_small_limit_evicts_the_least_recently_used(mount_bucket, bucket_dir):  # noqa: F811
    for name in ("one.h5", "two.h5", "three.h5"):
        make_domain(bucket_dir, name, {"x": (dataset([4], [4]), {"0": bytes(4)})})
    m = mount_bucket(bucket_dir, *ARGS)
    read(m, "one.h5")
    assert m.unmount() == 0
    (one,) = (m.cache_dir / "images").iterdir()
    size = one.stat().st_size

    # room for two: the third build evicts the one used least recently (one.h5)
    m2 = mount_bucket(m, *ARGS, "-o", f"image_cache={2 * size + size // 2}")
    read(m2, "two.h5")
    read(m2, "three.h5")
    assert m2.unmount() == 0
    assert len(list((m.cache_dir / "images").iterdir())) == 2
    assert not one.exists()

    m3 = mount_bucket(m, *ARGS, "-o", f"image_cache={2 * size + size // 2}")
    for name in ("three.h5", "two.h5", "one.h5"):
        assert read(m3, name) == {"x": ([0, 0, 0, 0], {})}
    assert len(log_lines(m3, "three.h5", KEPT)) == 1, m3.log()
    assert len(log_lines(m3, "two.h5", KEPT)) == 1
    assert len(log_lines(m3, "one.h5", BUILT)) == 1
    assert m3.unmount() == 0
    assert len(list((m.cache_dir / "images").iterdir())) == 2
    assert one.exists()                 # three.h5's went: used before two.h5's


# ---- the copy in the bucket: db/A-B/.h5osfs-image ----

BUCKET_KEPT = "the HDF5 file built before (kept in the bucket)"
SHARED = ".h5osfs-image"
WRITE = ("-o", "bucket_images=write")


@pytest.fixture
def big_domain(bucket_dir):  # noqa: F811
    """Ten datasets: enough objects that their image is worth a put."""
    ids = make_domain(bucket_dir, "big.h5", {
        f"d{i}": (dataset([4], [4]), {"0": bytes([i, i + 1, i + 2, i + 3])}) for i in range(10)})
    return bucket_dir, ids


def shared_key(ids):
    """db/A-B/.h5osfs-image of the domain whose dataset ids are ids."""
    return "/".join(dataset_key(next(iter(ids.values()))).split("/")[:2]) + "/" + SHARED


def other_cache(m, name):
    return ("-o", f"cache_dir={m.log_path.parent / name}")


def test_another_mount_reads_the_image_kept_in_the_bucket(mount_bucket, big_domain):
    """A mount with an empty cache_dir (another machine) reads the image that a
    bucket_images=write mount put into the bucket: one listing and one GET instead of every
    object; then its own copy."""
    bucket, ids = big_domain
    m = mount_bucket(bucket, *ARGS, *WRITE)
    first = read(m, "big.h5")
    assert first == {f"d{i}": ([i, i + 1, i + 2, i + 3], {}) for i in range(10)}
    assert len(log_lines(m, "big.h5", BUILT)) == 1
    assert m.unmount() == 0
    assert m.get(shared_key(ids)) is not None

    m2 = mount_bucket(m, *ARGS, *other_cache(m, "elsewhere"))
    assert read(m2, "big.h5") == first
    assert log_lines(m2, "big.h5", BUILT) == [], m2.log()
    assert len(log_lines(m2, "big.h5", BUCKET_KEPT)) == 1, m2.log()
    assert m2.unmount() == 0

    m3 = mount_bucket(m, *ARGS, *other_cache(m, "elsewhere"))
    assert read(m3, "big.h5") == first
    assert len(log_lines(m3, "big.h5", KEPT)) == 1, m3.log()


def test_only_bucket_images_write_puts_them(mount_bucket, big_domain, domain):
    """Reads never write the bucket unless asked: the default (read) and -o ro read the
    bucket's copy and put none, bucket_images=off does neither; a domain of few objects is not
    worth a put even when asked."""
    bucket, ids = big_domain
    _, small_ids = domain
    m = mount_bucket(bucket, *ARGS)
    for opts in ((), ("-o", "ro"), ("-o", "bucket_images=off")):
        if opts:
            m = mount_bucket(m, *ARGS, *opts, *other_cache(m, opts[1]))
        assert read(m, "big.h5")["d3"] == ([3, 4, 5, 6], {})
        assert len(log_lines(m, "big.h5", BUILT)) == 1, m.log()
        assert m.unmount() == 0
        assert m.get(shared_key(ids)) is None
    m = mount_bucket(m, *ARGS, *WRITE, *other_cache(m, "write"))
    first = read(m, "big.h5")
    read(m, "kept.h5")
    assert m.unmount() == 0
    assert m.get(shared_key(ids)) is not None
    assert m.get(shared_key(small_ids)) is None
    for opt, used in (("ro", BUCKET_KEPT), ("bucket_images=off", BUILT)):
        m2 = mount_bucket(m, *ARGS, "-o", opt, *other_cache(m, opt + "2"))
        assert read(m2, "big.h5") == first
        assert len(log_lines(m2, "big.h5", used)) == 1, m2.log()


def test_a_stale_or_damaged_bucket_image_is_built_again(mount_bucket, big_domain):
    """The bucket's copy is used only for the version it was made from, and bytes that are
    not a usable image are a build, never wrong data."""
    bucket, ids = big_domain
    m = mount_bucket(bucket, *ARGS, *WRITE)
    read(m, "big.h5")
    assert m.unmount() == 0
    key = dataset_key(ids["d2"]) + "/.dataset.json"     # HSDS rewrites it in place
    obj = json.loads((bucket / key).read_text())
    obj["attributes"]["units"] = {"type": {"class": "H5T_INTEGER", "base": "H5T_STD_I32LE"},
                                  "shape": {"class": "H5S_SCALAR"}, "value": 7,
                                  "created": obj["created"]}
    m.put(key, json.dumps(obj).encode())

    m2 = mount_bucket(m, *ARGS, *WRITE, *other_cache(m, "second"))
    assert read(m2, "big.h5")["d2"] == ([2, 3, 4, 5], {"units": 7})
    assert len(log_lines(m2, "big.h5", BUILT)) == 1, m2.log()
    assert m2.unmount() == 0
    image = m.get(shared_key(ids))      # m2 put the new version's
    m3 = mount_bucket(m, *ARGS, "-o", "ro", *other_cache(m, "ro"))
    want = read(m3, "big.h5")
    assert len(log_lines(m3, "big.h5", BUCKET_KEPT)) == 1, m3.log()

    for bad in (image[:len(image) // 2], bytes(len(image)), b"garbage"):
        m.put(shared_key(ids), bad)
        m4 = mount_bucket(m, *ARGS, "-o", "ro", *other_cache(m, f"bad{len(bad)}"))
        assert read(m4, "big.h5") == want
        assert len(log_lines(m4, "big.h5", BUILT)) == 1, m4.log()
        assert "not a usable built file" in m4.log()
