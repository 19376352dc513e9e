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
