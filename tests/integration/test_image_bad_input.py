"""Bad objects inside a domain (src/image): a bad chunk makes only its dataset unreadable (EIO,
never wrong bytes or fill values), a bad dataset or linked file is shown as a placeholder whose
reads fail with EIO (or left out when HDF5 cannot show even that), a bad link is left out, each
logged once, and everything else still reads equal to the source. Only a domain without a usable
root group fails to open. The bucket is never modified and the daemon keeps serving.

Each test corrupts a copy of the fixture bucket (bucket_copy) and mounts it with a long ttl, so
that every domain is built once and each problem is logged once. Every test runs on both backends
(conftest.py: [posix] mounts the copy, [s3] its upload; a neighbouring bucket directory such as
plant_other_bucket's is uploaded beside it, c<n>/otherbucket/, and the S3 server also has a
bucket "otherbucket" holding the linked file)."""
import errno
import json
import random
import secrets
import shutil
import struct
import subprocess
import time

import h5py
import numpy as np
import pytest

import harness
from conftest import assert_serving, assert_unchanged, bucket_snapshot
from test_image import (
    DOMAINS, HOME, USER, check_h5diff, chunk_dir, compare_dataset, compare_file, domain_file,
    domain_objects, object_json_path, source_file, unique_objects)

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

# What a damaged object holds is decoded the same whichever store served it (the store's own
# failures are test_s3.py's): these run on posix only.
CONTENT_ONLY = pytest.mark.store_independent(reason="checks how damaged object contents are "
                                             "handled, after the store has served them")

ARGS = USER + ("-o", "ttl=3600")


def log_lines(m, text):
    return [line for line in m.log().splitlines() if text in line]


def wait_for_log(m, *parts, timeout=10):
    """A log line with every part. Chunks may be loaded (and their failures logged) by the
    daemon's read-ahead threads, after the read that needed them has failed: poll a little."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in m.log().splitlines() if all(p in line for p in parts)]
        if lines or time.monotonic() > deadline:
            assert lines, f"no log line with {parts}:\n{m.log()}"
            return lines
        time.sleep(0.05)


def assert_eio(func, *args):
    with pytest.raises(OSError) as info:
        func(*args)
    assert info.value.errno == errno.EIO, (
        f"expected EIO, got {errno.errorcode.get(info.value.errno, info.value.errno)}: "
        f"{info.value}")


def read_all(ds):
    return ds[()]


def other_domain(domain):
    """A domain of different sources to prove the problem stays inside its domain."""
    return next(d for d in ("sample3", "sample_link", "sample1") if DOMAINS[d] != DOMAINS[domain])


def assert_domain_equals_source(m, domain, hyperslabs=3):
    compare_file(source_file(domain), domain_file(m, domain), domain, hyperslabs=hyperslabs)


def rest_of_domain_failures(m, domain, bad_paths):
    """Every dataset of the domain but bad_paths compared with the source: the failures."""
    failures = []
    with h5py.File(source_file(domain), "r") as fs, h5py.File(domain_file(m, domain), "r") as fd:
        for path, kind in unique_objects(fs).items():
            if kind != "dataset" or path in bad_paths:
                continue
            try:
                compare_dataset(fs, fd, path, hyperslabs=3)
            except OSError as e:
                failures.append(f"{path}: OSError {errno.errorcode.get(e.errno, e.errno)}")
            except AssertionError as e:
                failures.append(f"{path}: {str(e)[:160]}")
    return failures


# ---- bad chunk objects ----

def cut_half(b):
    return b[:len(b) // 2]


def garbage(b):
    return random.Random(len(b)).randbytes(len(b))


def blosc_nbytes(scale=None, value=None):
    """A blosc frame whose header states another uncompressed size than its data has."""
    def mutate(b):
        assert b[0] == 2 and b[3] != 0, "not a blosc frame"
        n = struct.unpack_from("<I", b, 4)[0]
        new = value if value is not None else int(n * scale)
        return b[:4] + struct.pack("<I", new) + b[8:]
    return mutate


def longer(b):
    return b + b"\0\0\0\0"


def shorter(b):
    return b[:-4]


def empty(b):
    return b""


# (id, domain, dataset, chunk index, mutation)
CHUNK_CASES = [
    ("truncated-blosc-zlib", "sample2", "/chunked_f32_gzip", "0_0", cut_half),
    ("truncated-blosc-zstd", "sample2_z_zstd", "/multichunk_f32_gzip", "2_1", cut_half),
    ("truncated-raw", "sample3", "/ramp_i32", "0_0", cut_half),
    ("garbage-blosc-lz4", "sample3_z_lz4", "/noise_f32", "0_0", garbage),
    ("garbage-blosc-zlib", "partial", "/data", "1_1", garbage),
    ("blosc-nbytes-larger", "sample3_z_gzip", "/ramp_i32", "0_0", blosc_nbytes(scale=2)),
    ("blosc-nbytes-smaller", "sample3_z_gzip", "/smooth_f64_contig", "0_0",
     blosc_nbytes(scale=0.5)),
    ("blosc-nbytes-huge", "sample2_z_zstd", "/cube_u8", "0_0_0", blosc_nbytes(value=0xfffffff0)),
    ("raw-too-long", "sample3", "/noise_f32", "0_0", longer),
    ("raw-too-short", "partial", "/raw", "1_1", shorter),
    ("raw-empty", "sample2", "/cube_u8", "0_0_0", empty),
]


def corrupt_chunk(bucket, domain, path, index, mutate):
    """Mutate one chunk object; returns its key."""
    _, ids = domain_objects(bucket, domain)
    obj = chunk_dir(bucket, ids[path]) / index
    obj.write_bytes(mutate(obj.read_bytes()))
    return str(obj.relative_to(bucket))


@pytest.mark.parametrize("case", CHUNK_CASES, ids=[c[0] for c in CHUNK_CASES])
@CONTENT_ONLY
def test_bad_chunk_fails_with_eio(mount_bucket, bucket_copy, case):
    _, domain, path, index, mutate = case
    key = corrupt_chunk(bucket_copy, domain, path, index, mutate)
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, domain), "r") as f:
        assert_eio(read_all, f[path])
        assert_eio(read_all, f[path])       # a failure is not remembered as data
    lines = log_lines(m, key)
    assert lines, m.log()
    assert all(" error: " in line and path in line for line in lines), lines
    assert_domain_equals_source(m, other_domain(domain))
    assert_unchanged(m, before)
    assert_serving(m)


@pytest.mark.parametrize("case", CHUNK_CASES, ids=[c[0] for c in CHUNK_CASES])
@CONTENT_ONLY
def test_bad_chunk_leaves_other_datasets_readable(mount_bucket, bucket_copy, case):
    _, domain, path, index, mutate = case
    corrupt_chunk(bucket_copy, domain, path, index, mutate)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, domain), "r") as f:
        assert_eio(read_all, f[path])
    failures = rest_of_domain_failures(m, domain, {path})
    assert not failures, f"{domain}: bad chunk {path} {index} broke other datasets: {failures}"
    assert_serving(m)


def vlen_count(count):
    """A vlen chunk whose first element states count bytes (spec 6.3)."""
    def mutate(b):
        return struct.pack("<i", count) + b[4:]
    return mutate


# Datasets written as values (vlen, references, scalars) read their chunks when the file is
# built: a bad chunk is written unreadable, so reads of it fail with EIO; a scalar cannot be
# (HDF5 cannot chunk it, and readers keep a failed read of unchunked data as zeros): it is left
# out. (id, domain, dataset, chunk index, mutation)
VALUE_CHUNK_CASES = [
    ("vlen-str-truncated", "sample2", "/vlen_str", "0", cut_half),
    ("vlen-int-garbage", "sample2", "/vlen_int", "0", garbage),
    ("vlen-negative-count", "sample2", "/vlen_str", "0", vlen_count(-5)),
    ("vlen-huge-count", "sample2", "/vlen_str_2d", "0_0", vlen_count(0x7fffffff)),
    ("compound-vlen-blosc-truncated", "sample2_z_zstd", "/compound_vlen_str", "0", cut_half),
    ("scalar-wrong-size", "sample2", "/scalar", "0", shorter),
    ("references-garbage", "sample1", "/object_refs", "0", garbage),
]


def first_chunk_selection(ds):
    return tuple(slice(0, min(n, c)) for n, c in zip(ds.shape, ds.chunks))


@pytest.mark.parametrize("case", VALUE_CHUNK_CASES, ids=[c[0] for c in VALUE_CHUNK_CASES])
@CONTENT_ONLY
def test_bad_chunk_of_value_dataset_fails_with_eio(mount_bucket, bucket_copy, case):
    _, domain, path, index, mutate = case
    key = corrupt_chunk(bucket_copy, domain, path, index, mutate)
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, domain), "r") as f, h5py.File(source_file(domain), "r") as s:
        if s[path].shape == ():
            with pytest.raises(KeyError):
                f[path]
        else:
            assert f[path].shape == s[path].shape and f[path].dtype == s[path].dtype
            for _ in range(2):          # a failure is not remembered as data
                assert_eio(read_all, f[path])
                assert_eio(f[path].__getitem__, first_chunk_selection(f[path]))
    lines = log_lines(m, key)
    assert len(lines) == 1 and " error: " in lines[0] and path in lines[0], m.log()
    failures = rest_of_domain_failures(m, domain, {path})
    assert not failures, failures
    assert_domain_equals_source(m, other_domain(domain))
    assert_unchanged(m, before)
    assert_serving(m)


# A gzip dataset copied in keeps HDF5's own chunks: bare zlib streams (no blosc frame), which the
# daemon inflates whole (libdeflate); each damage is named in the log line.
ZLIB_CASES = [
    ("truncated", cut_half, "corrupt or truncated"),
    ("garbage", lambda b: b[:2] + garbage(b[2:]), "corrupt or truncated"),
    ("trailing-bytes", longer, "followed by 4 bytes"),
]


@pytest.mark.posix_only(reason="damages a chunk object in the bucket directory after a cp "
                        "stored it")
@pytest.mark.parametrize("case", ZLIB_CASES, ids=[c[0] for c in ZLIB_CASES])
def test_bad_zlib_stream_chunk_fails_with_eio(mount_bucket, bucket_copy, tmp_path, case):
    _, mutate, why = case
    n = 1024                    # 1 MiB chunks: big enough to be stored as they are
    data = np.arange(n * n, dtype=np.float32).reshape(n, n)
    src = tmp_path / "z.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("z", data=data, chunks=(n // 2, n // 2), compression="gzip")
    writer = mount_bucket(bucket_copy, *USER)
    writer.path(f"{HOME}/z.h5").write_bytes(src.read_bytes())
    assert writer.unmount() == 0
    _, ids = domain_objects(bucket_copy, "z")
    obj = chunk_dir(bucket_copy, ids["/z"]) / "0_1"
    body = obj.read_bytes()
    assert body[0] == 0x78, "not a bare zlib stream"
    obj.write_bytes(mutate(body))
    m = mount_bucket(writer, *ARGS)
    with h5py.File(m.path(f"{HOME}/z.h5"), "r") as f:
        assert_eio(read_all, f["z"])
        assert_eio(lambda d: d[:n // 2, n // 2:], f["z"])
        assert np.array_equal(f["z"][:n // 2, :n // 2], data[:n // 2, :n // 2])
        assert np.array_equal(f["z"][n // 2:, :], data[n // 2:, :])
    key = str(obj.relative_to(bucket_copy))
    lines = wait_for_log(m, key, why)
    assert all(" error: " in line and "/z" in line for line in lines), lines
    assert_serving(m)


def test_stray_keys_beside_chunks_are_ignored(mount_bucket, bucket_copy):
    """Keys in a dataset's prefix that are no chunk of its grid: logged, not served."""
    domain, path = "sample2", "/multichunk_f32_gzip"
    _, ids = domain_objects(bucket_copy, domain)
    d = chunk_dir(bucket_copy, ids[path])
    good = (d / "0_0").read_bytes()
    for name in ("0_0.bak", "x_1", "0_1_2", "0"):
        (d / name).write_bytes(good)
    (d / "9_0").write_bytes(good)       # beyond the shape: not part of this version
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, domain), "r") as f:
        assert f[path].id.get_num_chunks() == 8
    compare_file(source_file(domain), domain_file(m, domain), domain, hyperslabs=10)
    assert log_lines(m, "is not a chunk of its grid"), m.log()
    assert_serving(m)


# ---- bad dataset objects ----

BAD_DOMAIN, BAD_PATH = "sample2", "/cube_u8"


def edit_doc(change):
    def mutate(text):
        doc = json.loads(text)
        change(doc)
        return json.dumps(doc)
    return mutate


def set_key(*keys, value):
    def change(doc):
        d = doc
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit_doc(change)


def rank40(doc):
    doc["shape"] = {"class": "H5S_SIMPLE", "dims": [1] * 40, "maxdims": [1] * 40}
    doc["layout"] = {"class": "H5D_CHUNKED", "dims": [1] * 40}


U8 = {"class": "H5T_INTEGER", "base": "H5T_STD_U8LE"}
DATASET_CASES = {
    "malformed-json": lambda text: text[:len(text) // 2],
    "not-an-object": lambda text: "[1, 2, 3]",
    "negative-dims": set_key("shape", "dims", value=[16, -16, 16]),
    "dims-not-integers": set_key("shape", "dims", value=[16, "16", 16]),
    "chunk-dims-zero": set_key("layout", "dims", value=[8, 0, 8]),
    "chunk-rank-mismatch": set_key("layout", "dims", value=[16, 16]),
    "rank-40": edit_doc(rank40),
    "zero-size-string-field": set_key("type", value={"class": "H5T_COMPOUND", "fields": [
        {"name": "a", "type": U8},
        {"name": "z", "type": {"class": "H5T_STRING", "charSet": "H5T_CSET_ASCII",
                               "length": 0, "strPad": "H5T_STR_NULLPAD"}}]}),
    "zero-size-compound-field": set_key("type", value={"class": "H5T_COMPOUND", "fields": [
        {"name": "a", "type": U8},
        {"name": "z", "type": {"class": "H5T_COMPOUND", "fields": []}}]}),
    "unknown-type-class": set_key("type", value={"class": "H5T_MYSTERY",
                                                 "base": "H5T_STD_U8LE"}),
    "no-type": edit_doc(lambda doc: doc.pop("type")),
    "unknown-shape-class": set_key("shape", "class", value="H5S_MYSTERY"),
    "chunk-dims-negative": set_key("layout", "dims", value=[8, -8, 8]),
    "chunk-over-2GiB": set_key("layout", "dims", value=[1 << 20, 1 << 12, 16]),
    "maxdims-smaller-than-dims": set_key("shape", "maxdims", value=[16, 8, 16]),
    # 2^84 elements in chunks of one: counts past 2^64 wrap, chunk indices with them
    "elements-past-2^62": set_key("shape", value={"class": "H5S_SIMPLE",
                                                   "dims": [1 << 40, 1 << 40, 16],
                                                   "maxdims": [1 << 40, 1 << 40, 16]}),
}


# What a reader sees of a dataset object that cannot be made as stored: a placeholder of its
# shape (its own type, or an opaque one of the stored element size, when HDF5 cannot make the
# type) whose reads fail with EIO, or nothing when not even the shape can be read. Its
# attributes are still there.
PLACEHOLDER_TYPES = {
    "chunk-dims-zero": "uint8", "chunk-rank-mismatch": "uint8", "chunk-dims-negative": "uint8",
    "chunk-over-2GiB": "uint8", "maxdims-smaller-than-dims": "uint8", "unknown-type-class": "|V1",
    "no-type": "|V1", "zero-size-string-field": "|V1", "zero-size-compound-field": "|V1",
}


@pytest.mark.parametrize("case", sorted(DATASET_CASES))
@CONTENT_ONLY
def test_bad_dataset_object_is_shown_unreadable(mount_bucket, bucket_copy, case):
    root, ids = domain_objects(bucket_copy, BAD_DOMAIN)
    obj_id = ids[BAD_PATH]
    p = object_json_path(bucket_copy, obj_id, root)
    p.write_text(DATASET_CASES[case](p.read_text()))
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, BAD_DOMAIN), "r") as f, \
            h5py.File(source_file(BAD_DOMAIN), "r") as s:
        if case in PLACEHOLDER_TYPES:
            d = f[BAD_PATH]
            assert d.shape == s[BAD_PATH].shape and d.dtype == np.dtype(PLACEHOLDER_TYPES[case])
            assert dict(d.attrs) == dict(s[BAD_PATH].attrs)
            for _ in range(2):          # a failure is not remembered as data
                assert_eio(read_all, d)
                assert_eio(d.__getitem__, (0, 0, slice(0, 3)))
        else:
            with pytest.raises(KeyError):
                f[BAD_PATH]
            assert BAD_PATH.lstrip("/") not in f
        shape = ", ".join(map(str, s[BAD_PATH].shape))
    listing = subprocess.run(["h5ls", str(domain_file(m, BAD_DOMAIN))], capture_output=True,
                             text=True, timeout=60).stdout
    listed = [line.split(None, 2) for line in listing.splitlines()]
    assert (["cube_u8", "Dataset", "{" + shape + "}"] in listed) == (case in PLACEHOLDER_TYPES), \
        listing
    lines = [line for line in m.log().splitlines() if obj_id in line or BAD_PATH in line]
    assert len(lines) == 1, m.log()
    assert " error: " in lines[0]
    assert ("shown as a placeholder" in lines[0]) == (case in PLACEHOLDER_TYPES), lines[0]
    compare_file(source_file(BAD_DOMAIN), domain_file(m, BAD_DOMAIN), BAD_DOMAIN,
                 hyperslabs=3, skip=(BAD_PATH,))
    check_h5diff(source_file(BAD_DOMAIN), domain_file(m, BAD_DOMAIN), exclude=(BAD_PATH,))
    assert_unchanged(m, before)
    assert_serving(m)


# ---- attributes that cannot be made ----

ATTRIBUTE_CASES = {
    "unknown-type-class": {"type": {"class": "H5T_MYSTERY"}, "shape": {"class": "H5S_SCALAR"},
                           "value": 1},
    "value-not-base64": {"type": U8, "shape": {"class": "H5S_SIMPLE", "dims": [4]},
                         "value": "***", "encoding": "base64"},
    "value-of-wrong-shape": {"type": U8, "shape": {"class": "H5S_SIMPLE", "dims": [4]},
                             "value": [1, 2]},
}


@pytest.mark.parametrize("case", sorted(ATTRIBUTE_CASES))
@CONTENT_ONLY
def test_bad_attribute_is_left_out(mount_bucket, bucket_copy, case):
    """An attribute cannot fail a read (it is metadata): it is left out, logged once, and its
    object and the object's other attributes are there."""
    root, ids = domain_objects(bucket_copy, BAD_DOMAIN)
    p = object_json_path(bucket_copy, ids[BAD_PATH], root)
    doc = json.loads(p.read_text())
    doc.setdefault("attributes", {})["broken"] = ATTRIBUTE_CASES[case]
    p.write_text(json.dumps(doc))
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, BAD_DOMAIN), "r") as f, \
            h5py.File(source_file(BAD_DOMAIN), "r") as s:
        assert "broken" not in f[BAD_PATH].attrs
        assert dict(f[BAD_PATH].attrs) == dict(s[BAD_PATH].attrs)
        assert np.array_equal(f[BAD_PATH][()], s[BAD_PATH][()])
    lines = log_lines(m, '"broken"')
    assert len(lines) == 1 and " error: " in lines[0] and BAD_PATH in lines[0], m.log()
    assert_domain_equals_source(m, BAD_DOMAIN)
    assert_unchanged(m, before)
    assert_serving(m)


# ---- links to objects that are not there ----

def add_link(target):
    def setup(bucket):
        root, _ = domain_objects(bucket, BAD_DOMAIN)
        p = object_json_path(bucket, root, root)
        doc = json.loads(p.read_text())
        doc["links"]["ghost"] = {"id": target(bucket), "class": "H5L_TYPE_HARD",
                                 "created": 1795302887.0}
        p.write_text(json.dumps(doc))
        return "ghost", target(bucket)
    return setup


def delete_dataset(bucket):
    root, ids = domain_objects(bucket, BAD_DOMAIN)
    object_json_path(bucket, ids[BAD_PATH], root).unlink()
    return BAD_PATH.lstrip("/"), ids[BAD_PATH]


LINK_CASES = {
    "missing-dataset": add_link(lambda b: "d-5897df5c-0a297b92-0000-000000-000000"),
    "missing-group": add_link(lambda b: "g-5897df5c-0a297b92-0000-000000-000001"),
    "missing-datatype": add_link(lambda b: "t-5897df5c-0a297b92-0000-000000-000002"),
    "object-of-another-domain": add_link(lambda b: domain_objects(b, "sample3")[1]["/ramp_i32"]),
    "deleted-dataset-object": delete_dataset,
}


@pytest.mark.parametrize("case", sorted(LINK_CASES))
@CONTENT_ONLY
def test_link_to_missing_object_is_left_out(mount_bucket, bucket_copy, case):
    name, target = LINK_CASES[case](bucket_copy)
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, BAD_DOMAIN), "r") as f:
        assert f.get(name, getlink=True) is None
        with pytest.raises(KeyError):
            f[name]
    lines = log_lines(m, target)
    assert len(lines) == 1 and " error: " in lines[0] and f'link "{name}"' in lines[0], m.log()
    skip = ("/" + name,) if name != "ghost" else ()
    compare_file(source_file(BAD_DOMAIN), domain_file(m, BAD_DOMAIN), BAD_DOMAIN,
                 hyperslabs=3, skip=skip)
    check_h5diff(source_file(BAD_DOMAIN), domain_file(m, BAD_DOMAIN), exclude=skip)
    assert_unchanged(m, before)
    assert_serving(m)


# ---- names and texts that are not Unicode ----

VSTR = {"class": "H5T_STRING", "charSet": "H5T_CSET_UTF8", "length": "H5T_VARIABLE",
        "strPad": "H5T_STR_NULLTERM"}
SCALAR = {"class": "H5S_SCALAR"}


def logged(text):
    return text.replace("\\", "\\\\")


@pytest.mark.posix_only(reason="the build reads the same bytes from every store")
def test_names_and_texts_that_are_not_unicode_are_left_out(mount_bucket, bucket_copy):
    """Python writes a lone surrogate (a name decoded with surrogateescape) as \\udc80 and a NUL
    as \\u0000, and HSDS keeps both; jansson refuses them. In the root group they cost only
    the link or attribute that holds them (left out, logged once), never the domain."""
    root, ids = domain_objects(bucket_copy, BAD_DOMAIN)
    p = object_json_path(bucket_copy, root, root)
    doc = json.loads(p.read_text())
    target = {"id": ids[BAD_PATH], "class": "H5L_TYPE_HARD", "created": 1795302887.0}
    doc["links"]["caf\udc80"] = target
    doc["links"]["nul\x00name"] = target
    doc["links"]["\ud800pair"] = target
    doc.setdefault("attributes", {})["attr\udc81"] = {"type": VSTR, "shape": SCALAR,
                                                      "value": "fine"}
    doc["attributes"]["text"] = {"type": VSTR, "shape": SCALAR, "value": "x\udc82"}
    p.write_text(json.dumps(doc))
    assert "\\udc80" in p.read_text()
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, BAD_DOMAIN), "r") as f, \
            h5py.File(source_file(BAD_DOMAIN), "r") as s:
        assert sorted(f) == sorted(s)
        assert dict(f.attrs) == dict(s.attrs)
    # a name is logged as its JSON text, and the log doubles a backslash
    for name in ("caf\\udc80", "nul\\u0000name", "\\ud800pair"):
        lines = log_lines(m, f'link "{logged(name)}"')
        assert len(lines) == 1 and " error: " in lines[0] and "not Unicode" in lines[0], m.log()
    lines = log_lines(m, 'attribute "' + logged("attr\\udc81") + '"')
    assert len(lines) == 1 and "not Unicode" in lines[0], m.log()
    lines = log_lines(m, 'attribute "text"')
    assert len(lines) == 1 and "surrogate" in lines[0], m.log()
    assert_domain_equals_source(m, BAD_DOMAIN)
    assert_unchanged(m, before)
    assert_serving(m)


# ---- a root group that cannot be used ----

ROOT_CASES = {
    "missing": None,
    "malformed-json": b'{"id": "g-',
    "not-an-object": b"[]",
    "empty": b"",
    "id-mismatch": "id",
}


@pytest.mark.parametrize("case", sorted(ROOT_CASES))
@CONTENT_ONLY
def test_unusable_root_group_fails_open_with_eio(mount_bucket, bucket_copy, case):
    domain = "sample3"
    root, _ = domain_objects(bucket_copy, domain)
    p = object_json_path(bucket_copy, root, root)
    change = ROOT_CASES[case]
    if change is None:
        p.unlink()
    elif change == "id":
        doc = json.loads(p.read_text())
        doc["id"] = doc["id"][:-1] + ("0" if doc["id"][-1] != "0" else "1")
        p.write_text(json.dumps(doc))
    else:
        p.write_bytes(change)
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    path = domain_file(m, domain)
    assert_eio(open, path, "rb")
    assert_eio(h5py.File, path, "r")
    lines = log_lines(m, root)
    assert lines, m.log()
    why = {"missing": "missing"}.get(case)
    if why:
        assert any(why in line for line in lines), lines
    assert log_lines(m, f"/home/test_user1/{domain}.h5: cannot build the HDF5 file"), m.log()
    assert_domain_equals_source(m, "sample3_z_gzip")
    assert_domain_equals_source(m, "sample1", hyperslabs=0)
    assert_unchanged(m, before)
    assert_serving(m)


# ---- linked files outside the bucket ----

LINK_DOMAIN = "sample_link"
REF_DATASETS = ["/contig_f64", "/chunked_6_i32", "/chunked_64_u16"]
OUTSIDE_URIS = [
    "otherbucket/linked/sample_link.h5",
    "s3://otherbucket/linked/sample_link.h5",
    "hsdstest/../otherbucket/linked/sample_link.h5",
    "hsdstest/../../etc/passwd",
    "/etc/passwd",
    "file:///etc/passwd",
]


def plant_other_bucket(bucket):
    """The linked file, also in a neighbouring bucket: a daemon that followed a file_uri out of
    its bucket would serve the right bytes, so only EIO proves it did not."""
    other = bucket.parent / "otherbucket" / "linked"
    other.mkdir(parents=True)
    shutil.copyfile(bucket / "linked" / "sample_link.h5", other / "sample_link.h5")


def link_outside(bucket, path, uri):
    plant_other_bucket(bucket)
    root, ids = domain_objects(bucket, LINK_DOMAIN)
    p = object_json_path(bucket, ids[path], root)
    doc = json.loads(p.read_text())
    doc["creationProperties"]["layout"]["file_uri"] = uri
    p.write_text(json.dumps(doc))


@pytest.mark.parametrize("uri", OUTSIDE_URIS)
@pytest.mark.parametrize("path", REF_DATASETS)
def test_file_uri_outside_the_bucket_fails_with_eio(mount_bucket, bucket_copy, path, uri):
    link_outside(bucket_copy, path, uri)
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, LINK_DOMAIN), "r") as f:
        assert f[path].shape is not None
        assert_eio(read_all, f[path])
        sel = tuple(slice(0, 3) for _ in f[path].shape)
        assert_eio(f[path].__getitem__, sel)
    lines = log_lines(m, path)
    assert lines and all(" error: " in line for line in lines), m.log()
    assert any(uri in line for line in lines), lines
    assert_domain_equals_source(m, "sample_fastlink")
    assert_unchanged(m, before)
    assert_serving(m)


@pytest.mark.parametrize("path", REF_DATASETS)
def test_file_uri_outside_the_bucket_leaves_other_datasets_readable(mount_bucket, bucket_copy,
                                                                    path):
    link_outside(bucket_copy, path, OUTSIDE_URIS[0])
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, LINK_DOMAIN), "r") as f:
        assert_eio(read_all, f[path])
    failures = rest_of_domain_failures(m, LINK_DOMAIN, {path})
    assert not failures, f"unreadable {path} broke other datasets: {failures}"
    assert_serving(m)


def plant_in_another_domain(bucket):
    """The linked file as an object of another domain (sample1's root, where linked ingest
    keeps a file): bytes that a file_uri must not reach, whatever they are."""
    root, _ = domain_objects(bucket, "sample1")
    planted = object_json_path(bucket, root, root).parent / ".h5osfs-file"
    shutil.copyfile(bucket / "linked" / "sample_link.h5", planted)
    return planted.relative_to(bucket).as_posix()


@pytest.mark.parametrize("target", ["another-domains-file", "a-domain-json"])
@CONTENT_ONLY
def test_file_uri_naming_an_object_of_a_domain_fails_with_eio(mount_bucket, bucket_copy,
                                                              target):
    """A dataset's file_uri may name any HDF5 file of the bucket, never an object of a domain
    (its chunks, its linked file, its .domain.json): that would read another domain's bytes
    past its ACL (issue 24). Only EIO proves it: the planted object holds the right bytes."""
    path = "/contig_f64"
    key = (plant_in_another_domain(bucket_copy) if target == "another-domains-file"
           else f"{HOME}/sample1.h5/.domain.json")
    uri = f"hsdstest/{key}"
    root, ids = domain_objects(bucket_copy, LINK_DOMAIN)
    p = object_json_path(bucket_copy, ids[path], root)
    doc = json.loads(p.read_text())
    doc["creationProperties"]["layout"]["file_uri"] = uri
    p.write_text(json.dumps(doc))
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, LINK_DOMAIN), "r") as f:
        assert_eio(read_all, f[path])
    lines = log_lines(m, path)
    assert any(uri in line and "names an object of a domain" in line for line in lines), m.log()
    failures = rest_of_domain_failures(m, LINK_DOMAIN, {path})
    assert not failures, failures
    assert_serving(m)


LINKED_DOMAINS = ("sample_link", "sample_fastlink")


def test_linked_file_removed(mount_bucket, bucket_copy):
    (bucket_copy / "linked" / "sample_link.h5").unlink()
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    for domain in LINKED_DOMAINS:
        with h5py.File(domain_file(m, domain), "r") as f, \
                h5py.File(source_file(domain), "r") as s:
            assert sorted(f) == sorted(s)
            for name in s:
                assert f[name].shape == s[name].shape and f[name].dtype == s[name].dtype
                assert_eio(read_all, f[name])
            # chunks that have no linked data are the fill value, as ever
            assert np.all(f["chunked_sparse"][0:20, 30:60] == -1)
        assert wait_for_log(m, f"{domain}.h5: /", "linked file linked/sample_link.h5 is missing")
    assert_domain_equals_source(m, "sample3")
    assert_domain_equals_source(m, "sample1", hyperslabs=0)
    assert_unchanged(m, before)
    assert_serving(m)


# ---- object references to objects that are not in the domain ----

REF_DOMAIN, REF_PATH = "sample1", "/object_refs"
REF_SIZE = 48           # spec 6.2: a reference is 48 NUL-padded ASCII bytes


def point_reference_at(bucket, element, target):
    """Make element of the dataset's only chunk refer to target ("datasets/d-..."); its id."""
    _, ids = domain_objects(bucket, REF_DOMAIN)
    obj = chunk_dir(bucket, ids[REF_PATH]) / "0"
    b = bytearray(obj.read_bytes())
    b[element * REF_SIZE:(element + 1) * REF_SIZE] = target.encode().ljust(REF_SIZE, b"\0")
    obj.write_bytes(bytes(b))


def reference_names(f, refs):
    return [f[r].name if r else None for r in refs]


@pytest.mark.posix_only(reason="the build reads the same bytes from every store")
def test_reference_to_deleted_object_reads_as_null(mount_bucket, bucket_copy):
    """HSDS keeps and serves a reference whose target was deleted: that element reads as the
    null reference, the others as stored, and the daemon says so once."""
    root, _ = domain_objects(bucket_copy, REF_DOMAIN)
    ghost = "d-" + root[2:19] + "-0000-000000-000000"
    point_reference_at(bucket_copy, 2, "datasets/" + ghost)
    before = bucket_snapshot(bucket_copy)
    m = mount_bucket(bucket_copy, *ARGS)
    with h5py.File(domain_file(m, REF_DOMAIN), "r") as f, \
            h5py.File(source_file(REF_DOMAIN), "r") as s:
        want = reference_names(s, s[REF_PATH][()])
        want[2] = None
        assert reference_names(f, f[REF_PATH][()]) == want
        assert reference_names(f, f[REF_PATH][1:4]) == want[1:4]
    lines = log_lines(m, ghost)
    assert len(lines) == 1 and "null reference" in lines[0] and REF_PATH in lines[0], m.log()
    assert_domain_equals_source(m, "sample3")
    assert_unchanged(m, before)
    assert_serving(m)


# ---- what a build costs in memory ----

NESTED_DEPTH = 5000     # the 10,000 is measured by bench/bench_nested_groups.py
MIB = 1024


def hex_id(cls, first16, last16):
    """A v2 id (spec 4): the domain's 16 hex digits, then the object's."""
    full = first16 + last16
    return f"{cls}-{full[:8]}-{full[8:16]}-{full[16:20]}-{full[20:26]}-{full[26:]}"


def put_nested_domain(bucket, domain, depth):
    """A domain of depth groups each inside the last (/g/g/g/...), written as HSDS would."""
    first = secrets.token_hex(8)
    root = hex_id("g", first, "".join(format((int(c, 16) + 8) % 16, "x") for c in first))
    ids = [root] + [hex_id("g", first, secrets.token_hex(8)) for _ in range(depth)]
    now = time.time()
    base = bucket / "db" / root[2:19]
    for i, gid in enumerate(ids):
        links = {"g": {"id": ids[i + 1], "class": "H5L_TYPE_HARD", "created": now}} \
            if i < depth else {}
        key = base / ".group.json" if i == 0 else base / "g" / gid[20:] / ".group.json"
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(json.dumps({"id": gid, "root": root, "created": now, "lastModified": now,
                                   "links": links, "attributes": {}}))
    dom = bucket / HOME.strip("/") / f"{domain}.h5"
    dom.mkdir()
    (dom / ".domain.json").write_text(json.dumps(
        {"root": root, "owner": "test_user1", "created": now, "lastModified": now,
         "acls": {"test_user1": {k: True for k in ("create", "read", "update", "delete",
                                                   "readACL", "updateACL")}}}))


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


@pytest.mark.posix_only(reason="what a build keeps in memory does not depend on the store")
def test_nested_groups_build_gives_its_memory_back(mount_bucket, bucket_copy):
    """An open of a domain of 5,000 nested groups builds it (again: ttl=0, no kept images).
    The build used memory quadratic in the depth (HDF5 kept the path of every open object,
    the build its own), and the FUSE threads' arenas kept it. Now its peak and what stays
    after it are a fraction of that."""
    if harness.sanitized():
        pytest.skip("AddressSanitizer's shadow memory and quarantine are not the daemon's")
    put_nested_domain(bucket_copy, "nested", NESTED_DEPTH)
    m = mount_bucket(bucket_copy, *USER, "-o", "ttl=0", "-o", "image_cache=0",
                     "-o", "bucket_images=off")
    pid = m.proc.pid
    start = status_kib(pid, "VmRSS")
    with h5py.File(domain_file(m, "nested"), "r") as f:
        assert isinstance(f["g/" * 100], h5py.Group)
    # with ttl=0 an open builds more than once (lookup, open): repeated builds, on FUSE threads
    assert len(log_lines(m, "nested.h5: built the HDF5 file")) >= 2, m.log()
    peak, kept = status_kib(pid, "VmHWM") - start, status_kib(pid, "VmRSS") - start
    # measured (MiB): before, peak 206 and kept 206; after, peak 59 and kept 38
    assert peak < 120 * MIB and kept < 100 * MIB, (peak // MIB, kept // MIB)
    assert_serving(m)
