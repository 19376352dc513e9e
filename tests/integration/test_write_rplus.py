"""An r+ of a domain of many chunks settles the chunks it did not change without asking HDF5
where each one is (issue 26 G2, without versions too). HDF5 1.10's H5Dget_chunk_info_by_coord
walks the whole chunk index at every call, so a lookup per unchanged chunk made a one-element
r+ of 1e5 chunks spend minutes of CPU. Where the writer changed nothing but chunk bytes in
place, every chunk is where the image put it: the commit copies the unchanged ones in the store
in one pass over the image ("told at once" in the log), and asks HDF5 only for the rest. Where
HDF5 allocated (a new chunk, a moved index), it asks per chunk as before. Values are checked
after a remount with a fresh cache_dir either way."""
import json
import re
import sys

import h5py
import numpy as np
import pytest

import conftest

sys.path.insert(0, str(conftest.REPO / "bench"))
import hsds_bucket  # noqa: E402

pytestmark = pytest.mark.posix_only(reason="the pass over the image is the same on every store; "
                                    "the copies it queues are the store's own, tested elsewhere")

USER = "test_user1"
HOME = f"home/{USER}"
CHUNKS, PER = 300, 64
ABSENT = {7, 8, 200}


def values(absent=()):
    v = np.arange(CHUNKS * PER, dtype="f4")
    for c in absent:
        v[c * PER:(c + 1) * PER] = 0
    return v


def make(bucket, name, absent=()):
    v = values(absent)
    hsds_bucket.make_domain(bucket, f"/{HOME}/{name}", "f4", (CHUNKS * PER,), (PER,),
                            lambda idx: None if idx[0] in absent
                            else v[idx[0] * PER:(idx[0] + 1) * PER].tobytes(), user=USER)
    return v


def copied(log):
    """(chunks copied, of them told at once) of the last commit's log line."""
    found = re.findall(r"(\d+) chunks copied from \S+ \((\d+) told at once\)", log)
    assert found, log[-3000:]
    return tuple(map(int, found[-1]))


def stored_chunks(bucket, name):
    """The chunk object names of the domain's only dataset, under the root it names now."""
    root = json.loads((bucket / HOME / name / ".domain.json").read_text())["root"]
    (dset_dir,) = (bucket / "db" / root[2:19] / "d").iterdir()
    return {p.name for p in dset_dir.iterdir() if not p.name.startswith(".")}


def reread(mount_bucket, m, bucket, tmp_path, name):
    """The domain's values through a new mount with a fresh cache_dir, m unmounted first."""
    assert m.unmount() == 0
    m2 = mount_bucket(bucket, "-o", f"user={USER},ro,cache_dir={tmp_path}/fresh")
    with h5py.File(m2.path(f"{HOME}/{name}"), "r") as f:
        return f["data"][:]


def test_unchanged_chunks_are_copied_in_one_pass(bucket_copy, mount_bucket, tmp_path):
    want = make(bucket_copy, "big.h5")
    m = mount_bucket(bucket_copy, "-o", f"user={USER},ttl=0")
    with h5py.File(m.path(f"{HOME}/big.h5"), "r+") as f:
        f["data"][5 * PER + 3] = -1
    want[5 * PER + 3] = -1
    assert copied(m.log()) == (CHUNKS - 1, CHUNKS - 1)
    assert np.array_equal(reread(mount_bucket, m, bucket_copy, tmp_path, "big.h5"), want)


def test_absent_chunks_stay_absent_and_are_not_looked_up(bucket_copy, mount_bucket, tmp_path):
    want = make(bucket_copy, "sparse.h5", ABSENT)
    m = mount_bucket(bucket_copy, "-o", f"user={USER},ttl=0")
    with h5py.File(m.path(f"{HOME}/sparse.h5"), "r+") as f:
        f["data"][100 * PER] = -2
    want[100 * PER] = -2
    present = CHUNKS - len(ABSENT)
    assert copied(m.log()) == (present - 1, present - 1)
    assert np.array_equal(reread(mount_bucket, m, bucket_copy, tmp_path, "sparse.h5"), want)
    assert not {str(c) for c in ABSENT} & stored_chunks(bucket_copy, "sparse.h5")


def test_a_write_that_allocates_asks_hdf5_per_chunk(bucket_copy, mount_bucket, tmp_path):
    """Writing into an absent chunk makes HDF5 allocate it (the file grows, the index
    changes): no chunk is where the image put it for sure, so none is told at once."""
    want = make(bucket_copy, "grow.h5", ABSENT)
    m = mount_bucket(bucket_copy, "-o", f"user={USER},ttl=0")
    with h5py.File(m.path(f"{HOME}/grow.h5"), "r+") as f:
        f["data"][8 * PER + 1] = -3
    want[8 * PER + 1] = -3
    present = CHUNKS - len(ABSENT)
    assert copied(m.log()) == (present, 0)
    assert np.array_equal(reread(mount_bucket, m, bucket_copy, tmp_path, "grow.h5"), want)
    assert "8" in stored_chunks(bucket_copy, "grow.h5")
