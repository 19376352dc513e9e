"""Virtual datasets come back virtual and are never stored as fill (issue 27.1).

The files of tests/data/vds/ (tools/make_vds_files.py) are cp'd into a mount: a detector
master whose VDS stacks /entry/data of two frame files of the same folder (relative names), a
file whose VDS stack, pick and follow (an unlimited mapping) datasets of the same file ("."),
and one whose source file does not exist. Read back through a fresh mount, every VDS is a VDS:
h5py's is_virtual, virtual_sources() (file and dataset names, both selections) and values are
the source's, h5dump shows a VIRTUAL layout, and a copy out of the mount h5diffs equal to the
source. No chunk object is stored for them (the values are their sources'). The store matters
only for the copy in, so the s3 backend runs the master case alone.
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import threading
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

import objcheck
from conftest import DATA

_spec = importlib.util.spec_from_file_location(
    "make_vds_files", Path(__file__).resolve().parents[2] / "tools" / "make_vds_files.py")
make_vds_files = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_vds_files)

pytestmark = pytest.mark.backends("posix", "s3")

VDS = DATA / "vds"
HOME = "home/test_user1"
FILES = ["frames_1.h5", "frames_2.h5", "master.h5", "same_file.h5", "missing_source.h5",
         "block_0.h5", "block_1.h5", "printf.h5"]


@pytest.fixture
def copied(bucket_copy, mount_bucket, tmp_path):
    """The log of a mount the files were cp'd into; then a read-only mount of the bucket (a
    fresh daemon: nothing cached from the copy)."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    for name in FILES:
        shutil.copyfile(VDS / name, m.path(f"{HOME}/{name}"))
    assert m.unmount() == 0
    return m.log(), mount_bucket(m, "-o", "user=test_user1,ro")


def selection(space):
    """What a selection is, in the terms h5py gives."""
    kind = space.get_select_type()
    if kind == h5py.h5s.SEL_HYPERSLABS and space.is_regular_hyperslab():
        return kind, space.get_regular_hyperslab()
    if kind == h5py.h5s.SEL_HYPERSLABS:
        return kind, space.get_select_hyper_blocklist().tolist()
    return kind, space.shape


def mappings(ds):
    return [(vs.file_name, vs.dset_name, selection(vs.vspace), selection(vs.src_space))
            for vs in ds.virtual_sources()]


def assert_same_vds(src_path, mine_path, name):
    with h5py.File(src_path, "r") as s, h5py.File(mine_path, "r") as f:
        assert f[name].is_virtual, name
        assert mappings(f[name]) == mappings(s[name]), name
        assert f[name].shape == s[name].shape and f[name].maxshape == s[name].maxshape
        assert f[name].dtype == s[name].dtype
        if f[name].dtype.kind != "O":   # h5py 3.7 crashes on a vlen string's fillvalue
            assert f[name].fillvalue == s[name].fillvalue or (
                np.isnan(f[name].fillvalue) and np.isnan(s[name].fillvalue))
        assert np.array_equal(f[name][()], s[name][()], equal_nan=f[name].dtype.kind == "f"), name


def stored_virtual(bucket):
    """{dataset JSON path: JSON} of the datasets that keep virtual mappings, and {dataset
    folder: chunk keys} (db/A-B/d/C-D-E/.dataset.json, chunks beside it)."""
    virtual, chunks = {}, {}
    for p in bucket.glob("db/*/d/*/.dataset.json"):
        j = json.loads(p.read_text())
        if "h5osfs" in j:
            virtual[p] = j
        chunks[p.parent] = [c.name for c in p.parent.rglob("*") if not c.name.endswith("json")]
    return virtual, chunks


@pytest.mark.posix_only(reason="the same JSON on every store; the master case runs on s3")
def test_printf_mapping_follows_the_block_files(copied):
    log, m = copied
    assert_same_vds(VDS / "printf.h5", m.path(f"{HOME}/printf.h5"), "p")
    with h5py.File(m.path(f"{HOME}/printf.h5"), "r") as f:
        assert mappings(f["p"])[0][:2] == ("block_%b.h5", "d")
        assert f["p"][()].tolist() == [10, 10, 20, 20]


def test_detector_master_stays_virtual_with_relative_sources(copied, tmp_path):
    log, m = copied
    assert_same_vds(VDS / "master.h5", m.path(f"{HOME}/master.h5"), "entry/data")
    with h5py.File(m.path(f"{HOME}/master.h5"), "r") as f:
        assert f["entry/data"][4, 1].tolist() == (np.arange(5) + 2000 + 20 + 5).tolist()
    dump = subprocess.run(["h5dump", "-p", "-H", m.path(f"{HOME}/master.h5")],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert "VIRTUAL" in dump and "frames_2.h5" in dump, dump
    out = tmp_path / "out"
    out.mkdir()
    for name in FILES[:3]:
        shutil.copyfile(m.path(f"{HOME}/{name}"), out / name)
    diff = subprocess.run(["h5diff", str(VDS / "master.h5"), str(out / "master.h5")],
                          capture_output=True, text=True, timeout=60)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    with h5py.File(out / "master.h5", "r") as f:
        assert f["entry/data"].is_virtual and f["entry/data"][5, 3, 4] == 2000 + 59


@pytest.mark.posix_only(reason="what the bucket holds is the same JSON on every store")
def test_no_chunk_is_stored_for_a_virtual_dataset(copied, bucket_copy):
    log, m = copied
    virtual, chunks = stored_virtual(bucket_copy)
    assert len(virtual) == 8, list(virtual)  # entry/data, 5 of same_file.h5, v, p
    for path, j in virtual.items():
        assert chunks[path.parent] == [], j
        # none of these maps whole chunks of a dataset of its file: no chunk table for HSDS
        assert "_REF" not in j.get("creationProperties", {}).get("layout", {}).get("class", ""), j
        for mapping in j["h5osfs"]["virtual"]:
            assert set(mapping) == {"file", "dataset", "src_select", "vds_select"}, mapping
    assert "stored as a regular dataset" not in log


@pytest.mark.posix_only(reason="the same JSON on every store; the master case runs on s3")
def test_same_file_mappings_stay_virtual(copied, tmp_path):
    log, m = copied
    mine = m.path(f"{HOME}/same_file.h5")
    for name in ["stacked", "points", "blocks", "unlimited", "strings"]:
        assert_same_vds(VDS / "same_file.h5", mine, name)
    with h5py.File(mine, "r") as f:
        assert mappings(f["unlimited"])[0][2][1][2] == (h5py.h5s.UNLIMITED,)
        assert mappings(f["blocks"])[0][2] == (h5py.h5s.SEL_HYPERSLABS,
                                               [[[0, 0], [0, 1]], [[2, 1], [2, 3]]])
    shutil.copyfile(mine, tmp_path / "same_file.h5")
    diff = subprocess.run(["h5diff", str(VDS / "same_file.h5"), str(tmp_path / "same_file.h5")],
                          capture_output=True, text=True, timeout=60)
    assert diff.returncode == 0, diff.stdout + diff.stderr


@pytest.mark.posix_only(reason="the same JSON on every store; the master case runs on s3")
def test_missing_source_keeps_the_mapping_and_reads_as_hdf5_reads_it(copied):
    log, m = copied
    assert_same_vds(VDS / "missing_source.h5", m.path(f"{HOME}/missing_source.h5"), "v")
    with h5py.File(m.path(f"{HOME}/missing_source.h5"), "r") as f:
        assert f["v"][()].tolist() == [7] * 5
    lines = [ln for ln in log.splitlines() if "missing_source.h5: /v:" in ln]
    assert len(lines) == 1 and "dataset x of file gone.h5" in lines[0], lines


@pytest.mark.posix_only(reason="a forged object: the same on every store")
def test_a_bad_mapping_makes_only_that_dataset_unreadable(copied, bucket_copy):
    log, m = copied
    virtual, _ = stored_virtual(bucket_copy)
    path, j = next((p, j) for p, j in virtual.items() if len(j["h5osfs"]["virtual"]) == 2
                   and j["h5osfs"]["virtual"][0]["dataset"] == "a")
    j["h5osfs"]["virtual"][1]["src_select"]["count"] = [99]   # 99 elements for 3
    m.put(str(path.relative_to(bucket_copy)), json.dumps(j).encode())
    with h5py.File(m.path(f"{HOME}/same_file.h5"), "r") as f:
        assert f["points"].is_virtual and f["points"][0] == 2.5
        with pytest.raises(OSError):
            f["stacked"][()]
    assert len(re.findall(r"same_file.h5.*stacked.*virtual mapping 1", m.log())) == 1, m.log()


@pytest.mark.posix_only(reason="an r+ commit: the store does not matter")
def test_r_plus_keeps_the_virtual_dataset(bucket_copy, mount_bucket, tmp_path):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    for name in FILES[:4]:
        shutil.copyfile(VDS / name, m.path(f"{HOME}/{name}"))
    with h5py.File(m.path(f"{HOME}/same_file.h5"), "r+") as f:
        f["stacked"].attrs["seen"] = 1
        f["b"][0] = 42.0
    with h5py.File(m.path(f"{HOME}/same_file.h5"), "r") as f:
        assert f["stacked"].is_virtual and f["stacked"].attrs["seen"] == 1
        assert mappings(f["stacked"]) == mappings(h5py.File(VDS / "same_file.h5")["stacked"])
        assert f["stacked"][1, 0] == 42.0 and f["stacked"][0, 1] == 1.5


def version_names(f):
    return sorted(n for n in f["_version_data/versions"] if n != "__first_version__")


@pytest.mark.posix_only(reason="an r+ commit of mappings: the store does not matter")
def test_versioned_hdf5_layout_keeps_its_versions_and_takes_a_new_one(bucket_copy, mount_bucket,
                                                                      tmp_path):
    """versioned-hdf5's layout (tools/make_vds_files.py, versioned.h5): every version is a VDS
    whose chunk-aligned mappings point into raw_data of the same file. They come back as VDS
    with the same mappings and values, and an r+ that appends a chunk to raw_data and a new
    version pointing at it (as versioned-hdf5 commits one) reads back right."""
    src = VDS / "versioned.h5"
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    mine = m.path(f"{HOME}/versioned.h5")
    shutil.copyfile(src, mine)
    with h5py.File(src, "r") as s:
        names = version_names(s)
        last = s[f"_version_data/versions/{names[-1]}/data1"][()]
    assert names == ["r1", "r2", "r3"]
    for name in names:
        assert_same_vds(src, mine, f"_version_data/versions/{name}/data1")
    with h5py.File(mine, "r+") as f:
        raw = f["_version_data/data1/raw_data"]
        chunk = 16
        at = raw.shape[0]
        raw.resize((at + chunk,))
        raw[at:] = np.arange(chunk, dtype=np.float64) + 0.125
        layout = h5py.VirtualLayout(shape=last.shape, dtype=np.float64)
        prev = f["_version_data/versions/r3/data1"]
        for vs in prev.virtual_sources():        # every chunk as r3 has it ...
            start = vs.vspace.get_regular_hyperslab()[0][0]
            s0 = vs.src_space.get_regular_hyperslab()[0][0]
            layout[start:start + chunk] = h5py.VirtualSource(
                ".", "/_version_data/data1/raw_data", shape=(at + chunk,))[s0:s0 + chunk]
        layout[0:chunk] = h5py.VirtualSource(   # ... but the first: the new chunk
            ".", "/_version_data/data1/raw_data", shape=(at + chunk,))[at:at + chunk]
        f["_version_data/versions"].create_group("r4").create_virtual_dataset(
            "data1", layout, fillvalue=0.0)
        f["_version_data/versions"].attrs["current_version"] = "r4"
    assert m.unmount() == 0
    ro = mount_bucket(m, "-o", "user=test_user1,ro")
    with h5py.File(ro.path(f"{HOME}/versioned.h5"), "r") as f:
        assert version_names(f) == ["r1", "r2", "r3", "r4"]
        new = f["_version_data/versions/r4/data1"]
        assert new.is_virtual
        want = last.copy()
        want[:16] = np.arange(16) + 0.125
        assert np.array_equal(new[()], want)
        assert np.array_equal(f["_version_data/versions/r3/data1"][()], last)
    for name in names:
        assert_same_vds(src, ro.path(f"{HOME}/versioned.h5"), f"_version_data/versions/{name}/data1")


@pytest.mark.posix_only(reason="what is stored does not depend on the store")
def test_a_versioned_folder_keeps_a_version_of_a_versioned_hdf5_file(bucket_copy, mount_bucket,
                                                                     tmp_path):
    """With versions on, the copy is kept as version 1 (h5osfs's versions take no chunk
    table yet: the VDS is stored as its mappings alone), and both the domain and its version
    read each versioned-hdf5 version as the source does."""
    src = VDS / "versioned.h5"
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/cache")
    shutil.copyfile(src, m.path(f"{HOME}/versioned.h5"))
    assert "cannot be kept as a version" not in m.log()
    with h5py.File(src, "r") as s:
        names = version_names(s)
    for path in (f"{HOME}/versioned.h5", f"{HOME}/.versions/versioned.h5/1.h5"):
        for name in names:
            assert_same_vds(src, m.path(path), f"_version_data/versions/{name}/data1")


@pytest.mark.posix_only(reason="what is stored does not depend on the store")
def test_a_source_that_fails_to_read_keeps_the_mapping(bucket_copy, mount_bucket, tmp_path):
    """A VDS whose source HDF5 finds but cannot read (here shorter than the mapping: HDF5 1.10
    fails the read) was stored as fill values, with a change line, and read -1 for good. Its
    mapping is kept: once the source has the values, the mount reads them."""
    src = tmp_path / "src.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("d", data=np.arange(4, dtype=np.int32) + 1, maxshape=(None,))
    layout = h5py.VirtualLayout(shape=(8,), dtype=np.int32)
    layout[:] = h5py.VirtualSource(str(src), "d", shape=(8,))
    with h5py.File(tmp_path / "short.h5", "w") as f:
        f.create_virtual_dataset("v", layout, fillvalue=-1)
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    shutil.copyfile(tmp_path / "short.h5", m.path(f"{HOME}/short.h5"))
    assert m.unmount() == 0
    assert "stored without them" not in m.log() and "regular dataset" not in m.log()
    with h5py.File(src, "a") as f:
        f["d"].resize((8,))
        f["d"][4:] = [5, 6, 7, 8]
    ro = mount_bucket(m, "-o", "user=test_user1,ro")
    with h5py.File(ro.path(f"{HOME}/short.h5"), "r") as f:
        assert f["v"].is_virtual and f["v"][()].tolist() == list(range(1, 9))


@pytest.mark.posix_only(reason="the ingest's own file access: the store does not matter")
def test_a_source_named_by_a_fifo_does_not_hold_the_commit(bucket_copy, mount_bucket, tmp_path):
    """The ingest looks for a VDS's sources only to name a missing one; it opened any path the
    file names, and a FIFO held the commit (and the cp) until something wrote to it. Only
    regular files are opened now: the cp ends, the mapping is kept and the source named."""
    fifo = tmp_path / "fifo.h5"
    os.mkfifo(fifo)
    layout = h5py.VirtualLayout(shape=(4,), dtype=np.int32)
    layout[:] = h5py.VirtualSource(str(fifo), "d", shape=(4,))
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_virtual_dataset("v", layout, fillvalue=-1)
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    copy = threading.Thread(target=shutil.copyfile, args=(tmp_path / "f.h5", m.path(f"{HOME}/f.h5")))
    copy.start()
    try:
        copy.join(timeout=60)       # a hang detector: the copy takes milliseconds
        assert not copy.is_alive(), "the commit waits on the FIFO"
    finally:
        try:                        # a daemon stuck opening the FIFO is let go
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        copy.join()
    assert m.unmount() == 0
    assert f"source dataset d of file {fifo}" in m.log()
    with h5py.File(mount_bucket(m, "-o", "user=test_user1,ro").path(f"{HOME}/f.h5"), "r") as f:
        assert f["v"].is_virtual


# ---- what HSDS serves of versioned-hdf5's versions (H5D_CHUNKED_REF_INDIRECT, spec §8.3) ----

ENTRY = np.dtype([("offset", "<i8"), ("size", "<i4"), ("uri", "S128")])  # vtable.h


def obj_key(obj_id, name):
    """db/A-B/<kind>/C-D-E/<name> of a v2 group or dataset id (spec §2.1)."""
    kind = {"g": "g", "d": "d"}[obj_id[0]]
    return f"db/{obj_id[2:19]}/{kind}/{obj_id[20:]}/{name}"


def stored_json(m, key):
    return json.loads(m.get(key))


def dataset_doc(m, domain, h5path):
    """The dataset JSON at h5path of the domain, found as HSDS finds it: its root, then links."""
    root = stored_json(m, f"{domain}/.domain.json")["root"]
    doc = stored_json(m, f"db/{root[2:19]}/.group.json")
    for name in h5path.strip("/").split("/"):
        target = doc["links"][name]["id"]
        doc = stored_json(m, obj_key(target, ".group.json" if target[0] == "g" else
                                     ".dataset.json"))
    return doc


def grid_of(dims, chunk):
    return tuple(-(-d // c) for d, c in zip(dims, chunk))


def read_table(m, table):
    """The entries of a chunk table dataset, as HSDS reads its chunks (filters of its JSON)."""
    grid, tile = table["shape"]["dims"], table["layout"]["dims"]
    filters = table.get("creationProperties", {}).get("filters")
    out = np.zeros(grid, dtype=ENTRY)
    for idx in np.ndindex(*grid_of(grid, tile)):
        raw = m.get(obj_key(table["id"], "_".join(map(str, idx))))
        assert raw is not None, f"table tile {idx} of {table['id']} missing"
        part = np.frombuffer(objcheck.decode_chunk(raw, filters, ENTRY.itemsize, False),
                             dtype=ENTRY).reshape(tile)
        at = tuple(slice(i * t, min((i + 1) * t, g)) for i, t, g in zip(idx, tile, grid))
        out[at] = part[tuple(slice(0, s.stop - s.start) for s in at)]
    return out


def hsds_values(m, domain, h5path):
    """(values, the keys the table names) of a dataset of H5D_CHUNKED_REF_INDIRECT layout with a
    URI per entry, read as HSDS reads it: the table by position, each entry's (offset, size) of
    the object its URI names, decoded with the dataset's filters; size 0 is the fill value."""
    d = dataset_doc(m, domain, h5path)
    lay, cp = d["creationProperties"]["layout"], d["creationProperties"]
    assert lay["class"] == "H5D_CHUNKED_REF_INDIRECT" and "file_uri" not in lay, lay
    chunk, dims = d["layout"]["dims"], d["shape"]["dims"]
    dtype = objcheck.np_dtype(d["type"])
    table = read_table(m, stored_json(m, obj_key(lay["chunk_table"], ".dataset.json")))
    assert list(table.shape) == list(grid_of(dims, chunk))
    out = np.full(dims, cp.get("fillValue", 0), dtype=dtype)
    bucket = Path(m.bucket).name + "/"
    named = []
    for idx in np.ndindex(*table.shape):
        e = table[idx]
        assert e["uri"], f"entry {idx}: an empty URI is the one before it (spec §12)"
        if e["size"] == 0:
            continue
        uri = e["uri"].decode("ascii")
        assert uri.startswith(bucket), uri
        named.append(uri[len(bucket):])
        data = m.get(uri[len(bucket):])[e["offset"]:e["offset"] + e["size"]]
        piece = np.frombuffer(objcheck.decode_chunk(data, cp.get("filters"), dtype.itemsize,
                                                    False), dtype=dtype).reshape(chunk)
        at = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(idx, chunk, dims))
        out[at] = piece[tuple(slice(0, s.stop - s.start) for s in at)]
    return out, named


def domain_bytes(m, domain):
    """Bytes a local bucket holds for the domain: its .domain.json and everything under its
    root."""
    root = stored_json(m, f"{domain}/.domain.json")["root"]
    under = Path(m.bucket) / "db" / root[2:19]
    return (sum(p.stat().st_size for p in under.rglob("*") if p.is_file()) +
            len(m.get(f"{domain}/.domain.json")))


def assert_hsds_serves_every_version(m, domain, source, ro):
    """Each version of /data1 read as HSDS reads the bucket equals h5py's reading of source;
    every entry names a chunk object of raw_data (nothing copied); through the mount ro, each
    version is still a VDS with source's mappings. The raw data's bytes: returned."""
    with h5py.File(source, "r") as s:
        raw = s["_version_data/data1/raw_data"]
        raw_bytes = raw.size * raw.dtype.itemsize
        names = version_names(s)
        raw_dir = obj_key(dataset_doc(m, domain, "_version_data/data1/raw_data")["id"], "")
        for name in names:
            path = f"_version_data/versions/{name}/data1"
            values, named = hsds_values(m, domain, path)
            assert np.array_equal(values, s[path][()]), name
            assert named and all(k.startswith(raw_dir) for k in named), (name, named[:3])
            assert_same_vds(source, ro.path(domain), path)
    return names, raw_bytes


@pytest.mark.parametrize("mib", [0, pytest.param(16, marks=pytest.mark.posix_only(
    reason="bytes are counted once, on the local bucket"))], ids=["small", "16MiB"])
def test_hsds_serves_every_version_from_raw_datas_chunks(bucket_copy, mount_bucket, tmp_path, mib):
    """versioned-hdf5's versions are VDS mapped chunk by chunk into raw_data: each is also
    stored as H5D_CHUNKED_REF_INDIRECT whose table names raw_data's chunk objects, so HSDS
    serves every version's values, not fill, while the mount still shows the VDS and the
    bucket holds <= 1.2 x the raw data. An r+ committing a new version (versioned-hdf5's
    writer: new chunks appended to raw_data, a new VDS) keeps all of it true."""
    if mib == 0:
        src = VDS / "versioned.h5"
    else:   # 32 KiB chunks, 10 versions, 2 chunks rewritten by each, shuffle and deflate
        src = tmp_path / "versioned.h5"
        make_vds_files.versioned(src, 4096, max(1, int(mib * 2**20 / 32768 / 1.45)), 10, 2,
                                 compression="gzip")
    domain = f"{HOME}/versioned.h5"
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    shutil.copyfile(src, m.path(domain))
    assert m.unmount() == 0
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/ro")
    names, raw_bytes = assert_hsds_serves_every_version(m, domain, src, ro)
    if mib:
        assert domain_bytes(m, domain) <= 1.2 * raw_bytes, (domain_bytes(m, domain), raw_bytes)
        assert objcheck.problems(m.bucket, domain) == []
    assert ro.unmount() == 0

    mine = tmp_path / "mine.h5"            # the same commit on a local copy: what h5py reads
    shutil.copyfile(src, mine)
    rw = mount_bucket(m, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    with h5py.File(src, "r") as s:
        chunk = s["_version_data/data1/raw_data"].chunks[0]
    changes = {1: np.arange(chunk, dtype=np.float64) + 0.125}
    for path in (mine, rw.path(domain)):
        with h5py.File(path, "r+") as f:
            make_vds_files.append_version(f, "next", changes)
    assert rw.unmount() == 0
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/ro2")
    after, raw_after = assert_hsds_serves_every_version(m, domain, mine, ro)
    assert after == sorted(names + ["next"])
    if mib:
        assert domain_bytes(m, domain) <= 1.2 * raw_after, (domain_bytes(m, domain), raw_after)


@pytest.mark.posix_only(reason="a forged object: the same on every store")
def test_the_mount_reads_versions_by_their_mappings_never_through_the_table(bucket_copy,
                                                                           mount_bucket,
                                                                           tmp_path):
    """A chunk table is input like any stored object: forged so that every entry names
    raw_data's first chunk (HSDS then serves that chunk everywhere), the mount still reads each
    version through its mappings, as HDF5 reads the VDS, and says nothing of the table."""
    src, domain = VDS / "versioned.h5", f"{HOME}/versioned.h5"
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    shutil.copyfile(src, m.path(domain))
    assert m.unmount() == 0
    with h5py.File(src, "r") as s:
        names = version_names(s)
    for name in names:
        path = f"_version_data/versions/{name}/data1"
        d = dataset_doc(m, domain, path)
        table = stored_json(m, obj_key(d["creationProperties"]["layout"]["chunk_table"],
                                       ".dataset.json"))
        entries = read_table(m, table)
        first = entries[entries["size"] > 0][0]
        entries[:] = first
        assert table["layout"]["dims"] == table["shape"]["dims"]   # one tile
        m.put(obj_key(table["id"], "0"), zlib.compress(entries.tobytes()))
        forged, _ = hsds_values(m, domain, path)
        with h5py.File(src, "r") as s:
            assert not np.array_equal(forged, s[path][()])
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/ro")
    for name in names:
        assert_same_vds(src, ro.path(domain), f"_version_data/versions/{name}/data1")
    assert "table" not in ro.log(), ro.log()
