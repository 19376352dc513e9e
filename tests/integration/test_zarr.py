"""Every domain is also a read-only Zarr v2 group at MOUNT/.zarr/<domain path>/ (issue 28 §1;
doc/image.md, "The Zarr view"): zarr reads every dataset it holds equal to h5py through the
.h5 file; compressed chunks are the stored Blosc frames byte for byte, raw ones the stored
bytes; a chunk not stored is a file that does not exist; dimension scales make xarray's
open_zarr equal its open_dataset; nothing changes through it (EROFS)."""
import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import BUCKET, FIXTURE

zarr = pytest.importorskip("zarr", reason="python3-zarr: scripts/install-deps.sh")

pytestmark = pytest.mark.backends("posix", "s3")

HOME = "home/test_user1"
# raw chunks and a dataset with no chunk (sample3), Blosc frames (zlib, lz4, zstd), compounds,
# vlen strings, booleans, enums, scalars, edge chunks (sample2), missing chunks (partial),
# datasets hsload --link linked to an HDF5 file of the bucket (chunk maps, a hyperchunked chunk
# table, contiguous; fastlink: a chunk table whose chunks are not all computed yet)
DOMAINS = ["sample1.h5", "sample2.h5", "sample2_z_zstd.h5", "sample3.h5", "sample3_z_gzip.h5",
           "sample3_z_lz4.h5", "partial.h5", "sample_link.h5", "sample_fastlink.h5"]
# views that read the bucket's objects whichever store holds them: the rules are the same
STORE_INDEPENDENT = pytest.mark.store_independent(reason="what the view shows does not depend "
                                                  "on the store")


def zarr_path(m, domain):
    return m.path(f".zarr/{HOME}/{domain}")


def dataset_key(bucket, domain, name):
    """The key prefix of dataset `name` (a link of the root group) of a fixture domain."""
    root = json.loads((bucket / HOME / domain / ".domain.json").read_text())["root"]
    group = json.loads((bucket / "db" / root[2:19] / ".group.json").read_text())
    dset = group["links"][name]["id"]
    return f"db/{dset[2:19]}/d/{dset[20:]}"


def as_text(values):
    return np.array([v.decode() if isinstance(v, bytes) else v for v in np.ravel(values)],
                    dtype=object).reshape(np.shape(values))


@pytest.mark.parametrize("consolidated", [False, True], ids=["files", "zmetadata"])
@pytest.mark.parametrize("domain", DOMAINS)
def test_zarr_reads_every_dataset_as_h5py(shared_mount, domain, consolidated):
    m = shared_mount
    group = (zarr.open_consolidated if consolidated else zarr.open_group)(zarr_path(m, domain),
                                                                          mode="r")
    seen = []
    with h5py.File(m.path(f"{HOME}/{domain}"), "r") as f:
        def check(name, arr):
            if not isinstance(arr, zarr.Array):
                return
            want, got = f[name][()], arr[()]
            if f[name].dtype.kind == "O":
                want = as_text(want)
            else:
                assert got.dtype == want.dtype, name
            assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), name
            seen.append(name)
        group.visititems(check)
    assert seen


def test_zarr_chunk_files_are_the_stored_objects(shared_mount):
    m = shared_mount
    for domain, name, compressor in (("sample3_z_gzip.h5", "ramp_i32", "blosc"),
                                     ("sample2_z_zstd.h5", "multichunk_f32_gzip", "blosc"),
                                     ("sample3.h5", "ramp_i32", None)):
        arr = os.path.join(zarr_path(m, domain), name)
        meta = json.loads(open(os.path.join(arr, ".zarray")).read())
        assert (meta["compressor"] or {}).get("id") == compressor
        assert meta["dimension_separator"] == "." and meta["order"] == "C"
        prefix = BUCKET / dataset_key(BUCKET, domain, name)
        stored = {p.name.replace("_", "."): p for p in prefix.iterdir()
                  if not p.name.startswith(".")}
        files = {n for n in os.listdir(arr) if not n.startswith(".")}
        assert files == set(stored) and files
        for chunk, obj in stored.items():
            path = os.path.join(arr, chunk)
            assert os.stat(path).st_size == obj.stat().st_size   # the listing's, body unread
            assert open(path, "rb").read() == obj.read_bytes()


@STORE_INDEPENDENT
def test_zarr_missing_chunk_is_no_file(shared_mount):
    m = shared_mount
    arr = os.path.join(zarr_path(m, "partial.h5"), "data")
    meta = json.loads(open(os.path.join(arr, ".zarray")).read())
    grid = [-(-s // c) for s, c in zip(meta["shape"], meta["chunks"])]
    files = [n for n in os.listdir(arr) if not n.startswith(".")]
    assert 0 < len(files) < np.prod(grid)                      # 7 of 24 stored
    missing = next(".".join(map(str, i)) for i in np.ndindex(*grid)
                   if ".".join(map(str, i)) not in files)
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(arr, missing))
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(arr, "99.0"))                     # outside the grid


@STORE_INDEPENDENT
def test_zarr_is_hidden_and_lists_like_the_mount(shared_mount):
    m = shared_mount
    assert ".zarr" not in os.listdir(m.mnt)
    assert os.path.isdir(m.path(".zarr"))
    assert sorted(os.listdir(m.path(".zarr/home/test_user1"))) == \
        sorted(os.listdir(m.path("home/test_user1")))
    assert sorted(os.listdir(zarr_path(m, "sample3.h5"))) == \
        [".zattrs", ".zgroup", ".zmetadata", "noise_f32", "ramp_i32", "smooth_f64_contig", "sub",
         "zeros_i16"]
    assert sorted(os.listdir(os.path.join(zarr_path(m, "sample3.h5"), "zeros_i16"))) == \
        [".zarray", ".zattrs"]                                   # no chunk stored
    attrs = json.loads(open(os.path.join(zarr_path(m, "sample3_z_gzip.h5"), ".zattrs")).read())
    assert attrs == {"purpose": "load with hsload -z to get compressed chunks"}
    with pytest.raises(FileNotFoundError):
        os.stat(m.path(".zarr/home/test_user1/no_such.h5"))


@STORE_INDEPENDENT
def test_zarr_needs_the_right_to_read_the_domain(mount_bucket):
    """A user the domain's ACL gives no read right sees its group (as its .h5 file) and nothing
    in it: no lookup, no listing, no references; nothing of the domain is read for them."""
    m = mount_bucket(BUCKET, "-o", "ro", "-o", "user=stranger")
    group = zarr_path(m, "sample3.h5")
    assert os.path.isdir(group)
    for attempt in (lambda: os.stat(os.path.join(group, ".zgroup")),
                    lambda: os.stat(os.path.join(group, "ramp_i32", "0.0")),
                    lambda: os.listdir(group),
                    lambda: open(m.path(f".kerchunk/{HOME}/sample3.h5.json")).read()):
        with pytest.raises(PermissionError):
            attempt()
    assert "zarr view" not in m.log_path.read_text()


@STORE_INDEPENDENT
def test_zarr_changes_are_erofs(mount_bucket, bucket_copy):
    m = mount_bucket(bucket_copy, "-o", "user=test_user1")     # a read-write mount
    group = zarr_path(m, "sample3.h5")
    chunk = os.path.join(group, "ramp_i32", "0.0")
    attempts = [lambda: open(chunk, "r+b"),
                lambda: open(os.path.join(group, "new"), "wb"),
                lambda: os.mkdir(os.path.join(group, "g")),
                lambda: os.mkdir(m.path(".zarr/home/new_folder")),
                lambda: os.unlink(chunk),
                lambda: os.rename(chunk, chunk + "x"),
                lambda: os.truncate(chunk, 0),
                lambda: os.rmdir(os.path.join(group, "sub"))]
    for attempt in attempts:
        with pytest.raises(OSError) as e:
            attempt()
        assert e.value.errno == errno.EROFS
    assert not (bucket_copy / ".zarr").exists()
    assert open(chunk, "rb").read()                            # still there, still readable


@STORE_INDEPENDENT
def test_zarr_bad_objects_fail_alone(mount_bucket, bucket_copy):
    """A malformed dataset JSON leaves that dataset out; a forged chunk key is no chunk file;
    a raw chunk cut short is EIO, never wrong bytes; the rest reads."""
    raw = bucket_copy / dataset_key(bucket_copy, "sample3.h5", "ramp_i32")
    (raw / "0_0").write_bytes((raw / "0_0").read_bytes()[:-4])
    (raw / "7_7_7").write_bytes(b"forged")
    bad = bucket_copy / dataset_key(bucket_copy, "sample3.h5", "noise_f32")
    (bad / ".dataset.json").write_text("{not json")
    m = mount_bucket(bucket_copy, "-o", "ro", "-o", "user=test_user1")
    group = zarr_path(m, "sample3.h5")
    assert "noise_f32" not in os.listdir(group)
    assert sorted(os.listdir(os.path.join(group, "ramp_i32"))) == [".zarray", ".zattrs", "0.0"]
    with pytest.raises(OSError) as e:
        open(os.path.join(group, "ramp_i32", "0.0"), "rb").read()
    assert e.value.errno == errno.EIO
    with h5py.File(m.path(f"{HOME}/sample3.h5"), "r") as f:
        assert np.array_equal(zarr.open_group(group, mode="r")["smooth_f64_contig"][()],
                              f["smooth_f64_contig"][()])
    log = m.log_path.read_text()
    assert "ramp_i32" in log or "0_0" in log


@STORE_INDEPENDENT
def test_zarr_passes_ingested_deflate_through_as_zlib(mount_bucket, bucket_copy, tmp_path):
    """A file cp'd into the mount keeps HDF5's deflate streams as the objects of the chunks
    wholly inside a dataset (1 MiB chunks, the grid HSDS would choose): the view names numcodecs'
    zlib (with shuffle where the file shuffled) and serves those unchanged; the edge chunks,
    which the ingest stored as Blosc frames, are served re-encoded, equal in value."""
    src = tmp_path / "deflate.h5"
    rng = np.random.default_rng(5)
    with h5py.File(src, "w") as f:
        f.create_dataset("plain", data=np.round(rng.normal(size=(600, 1024)), 2).astype("<f4"),
                         chunks=(256, 1024), compression="gzip", compression_opts=3)
        f.create_dataset("shuffled", data=rng.integers(0, 1000, (600, 1024), dtype=np.int32),
                         chunks=(256, 1024), compression="gzip", shuffle=True)
        sparse = f.create_dataset("sparse", (1024, 1024), "<f4", chunks=(256, 1024),
                                  compression="gzip", fillvalue=-1.0)
        sparse[300:400] = 5.0                          # one chunk written, the rest missing
    m = mount_bucket(bucket_copy, "-o", "user=test_user1")
    domain = "deflate.h5"
    subprocess.run(["cp", str(src), m.path(f"{HOME}/{domain}")], check=True)
    group = zarr.open_group(zarr_path(m, domain), mode="r")
    passed = 0
    with h5py.File(src, "r") as f:
        for name in ("plain", "shuffled", "sparse"):
            arr = os.path.join(zarr_path(m, domain), name)
            meta = json.loads(open(os.path.join(arr, ".zarray")).read())
            assert meta["compressor"]["id"] == "zlib", name
            assert (meta["filters"] or [{}])[0].get("id") == ("shuffle" if name == "shuffled"
                                                              else None), name
            assert np.array_equal(group[name][()], f[name][()]), name
            prefix = bucket_copy / dataset_key(bucket_copy, domain, name)
            stored = {p.name.replace("_", "."): p.read_bytes() for p in prefix.iterdir()
                      if not p.name.startswith(".")}
            assert {n for n in os.listdir(arr) if not n.startswith(".")} == set(stored), name
            for chunk, data in stored.items():
                if data[0] & 0x0f == 8:                # a zlib stream: passed through
                    assert open(os.path.join(arr, chunk), "rb").read() == data, (name, chunk)
                    passed += 1
            if name == "sparse":
                assert list(stored) == ["1.0"]
    assert passed >= 5                                  # 2 + 2 inner chunks, sparse's one
    # the references: inner chunks name the objects, the Blosc edge chunks are inline (a
    # reference to one would fail the reader's zlib decode)
    refs = references(m, domain)
    assert refs["refs"]["plain/0.0"] == [f"file://{bucket_copy.resolve()}/"
                                         f"{dataset_key(bucket_copy, domain, 'plain')}/0_0"]
    assert refs["refs"]["plain/2.0"].startswith("base64:")
    group = read_references(refs)
    with h5py.File(src, "r") as f:
        for name in ("plain", "shuffled", "sparse"):
            assert np.array_equal(group[name][()], f[name][()]), name


XARRAY_SAME = """
import os, sys, warnings, xarray as xr
warnings.simplefilter("ignore")
mnt, names = sys.argv[1], sys.argv[2:]
compared, differ = 0, []
for name in names:
    dom = "home/test_user1/nc/" + name
    try:
        want = xr.open_dataset(os.path.join(mnt, dom), engine="netcdf4", decode_times=False)
        want.load()
    except Exception:       # xarray cannot open the .h5 itself (ref_hdf5_compat2.nc): not judged
        continue
    # consolidated: the root's .zmetadata, which xarray reads first
    got = xr.open_zarr(os.path.join(mnt, ".zarr", dom), consolidated=True, decode_times=False)
    got.load()
    compared += 1
    if not got.identical(want):
        differ.append(name)
        print(name, got, want)
print("compared", compared, "differ", differ)
sys.exit(1 if differ or compared < len(names) - 1 else 0)
"""


@STORE_INDEPENDENT
def test_xarray_open_zarr_equals_open_dataset(mount_bucket):
    """Every hsdsnc domain xarray opens: dimension scales, netCDF's phony dimensions (unlimited
    ones apart), dimensions that are no variable, variables without _FillValue whose chunks
    are not all stored, one-element attributes, vlen strings, enums, compounds."""
    pytest.importorskip("xarray", reason="python3-xarray: scripts/install-deps.sh")
    m = mount_bucket(FIXTURE / "hsdsnc", "-o", "ro", "-o", "user=test_user1")
    names = sorted(os.listdir(m.path(f"{HOME}/nc")))
    assert len(names) == 12
    # a process of its own: xarray keeps files open in caches, which would keep the mount busy
    r = subprocess.run([sys.executable, "-c", XARRAY_SAME, str(m.mnt), *names],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


# ---- kerchunk references (issue 28 §2): MOUNT/.kerchunk/<domain path>.json ----

def references(m, domain):
    return json.loads(open(m.path(f".kerchunk/{HOME}/{domain}.json")).read())


def read_references(refs):
    """The Zarr group the references describe, read with fsspec alone (no mount). The KVStore
    wrapper reads chunk by chunk: Debian's fsspec 2022.11 fails a batch that names a chunk the
    references lack (a missing chunk) with KeyError instead of leaving it out."""
    fsspec = pytest.importorskip("fsspec", reason="python3-fsspec: scripts/install-deps.sh")
    fs = fsspec.filesystem("reference", fo=refs)
    return zarr.open_group(zarr.storage.KVStore(fs.get_mapper("")), mode="r")


def chunk_urls(refs):
    return [v[0] for k, v in refs["refs"].items() if isinstance(v, list)]


def test_kerchunk_references_name_the_stored_objects(shared_mount):
    m = shared_mount
    assert ".kerchunk" not in os.listdir(m.mnt)
    assert sorted(os.listdir(m.path(f".kerchunk/{HOME}"))) == \
        sorted(f"{d}.json" for d in os.listdir(m.path(HOME)))
    refs = references(m, "sample3_z_gzip.h5")
    assert refs["version"] == 1
    assert json.loads(refs["refs"][".zgroup"]) == {"zarr_format": 2}
    assert refs["refs"]["ramp_i32/.zarray"] == \
        open(os.path.join(zarr_path(m, "sample3_z_gzip.h5"), "ramp_i32", ".zarray")).read()
    urls = chunk_urls(refs)
    base = f"file://{BUCKET.resolve()}/" if m.backend == "posix" else "s3://hsdstest/"
    assert urls and all(u.startswith(base) for u in urls)
    for u in urls:                                        # each one a chunk object's key
        key = u[u.index("/db/") + 1:]
        assert (BUCKET / key).is_file(), u
    with pytest.raises(OSError) as e:
        open(m.path(f".kerchunk/{HOME}/sample3.h5.json"), "w")
    assert e.value.errno == errno.EROFS


@pytest.mark.parametrize("domain", ["sample2.h5", "sample3.h5", "partial.h5", "sample_link.h5"])
@STORE_INDEPENDENT
def test_kerchunk_references_read_equal_without_the_mount(shared_mount, domain):
    """On a local bucket the references point at the bucket's files: fsspec and zarr read them
    with no h5osfs in the way, equal to h5py through the .h5 (edge and missing chunks, Blosc
    and raw chunks, compounds)."""
    m = shared_mount
    group = read_references(references(m, domain))
    seen = []
    with h5py.File(m.path(f"{HOME}/{domain}"), "r") as f:
        def check(name, arr):
            if isinstance(arr, zarr.Array):
                want, got = f[name][()], arr[()]
                assert got.dtype == want.dtype, name
                assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), name
                seen.append(name)
        group.visititems(check)
    assert seen


def test_refs_url_replaces_the_base(mount_bucket):
    """-o refs_url: the references name PREFIX + key (a public bucket's https endpoint, a copy);
    here the fixture directory, which on S3 holds the same bytes as the objects."""
    m = mount_bucket(BUCKET, "-o", "ro", "-o", "user=test_user1",
                     "-o", f"refs_url=file://{BUCKET.resolve()}")
    refs = references(m, "partial.h5")
    assert all(u.startswith(f"file://{BUCKET.resolve()}/db/") for u in chunk_urls(refs))
    group = read_references(refs)
    with h5py.File(m.path(f"{HOME}/partial.h5"), "r") as f:
        assert np.array_equal(group["data"][()], f["data"][()])


# ---- references in the bucket (issue 28 §2, -o bucket_refs=on) ----

def bucket_refs(m, domain):
    """The references a publisher's commits keep beside the domain, as the store has them."""
    data = m.get(f"{HOME}/{domain}/.kerchunk.json")
    return json.loads(data) if data is not None else None


def test_bucket_refs_kept_with_every_commit(mount_bucket, bucket_copy, tmp_path):
    """cp puts DIR/NAME/.kerchunk.json with the domain; fsspec and zarr read it with no mount
    equal to the file; an r+ change puts the new version's; mv takes it along; rm removes it;
    and HSDS's layout is untouched: the domain stays a domain, the object makes no folder."""
    src = tmp_path / "pub.h5"
    data = np.arange(64 * 1024, dtype="<f8").reshape(256, 256)
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=data, chunks=(64, 256), compression="gzip")
    m = mount_bucket(bucket_copy, "-o", "user=test_user1", "-o", "bucket_refs=on")
    subprocess.run(["cp", str(src), m.path(f"{HOME}/pub.h5")], check=True)
    refs = bucket_refs(m, "pub.h5")
    assert refs is not None and refs["version"] == 1
    assert refs == references(m, "pub.h5")
    first = chunk_urls(refs)
    if m.backend == "posix":        # on S3 they name s3:// objects: s3fs, not installed
        assert np.array_equal(read_references(refs)["x"][()], data)
    with h5py.File(m.path(f"{HOME}/pub.h5"), "r+") as f:
        f["x"][0, :] = -1.0
    data[0, :] = -1.0
    refs = bucket_refs(m, "pub.h5")
    assert refs == references(m, "pub.h5") and chunk_urls(refs) != first   # the new root's
    if m.backend == "posix":
        assert np.array_equal(read_references(refs)["x"][()], data)
    assert "pub.h5" in os.listdir(m.path(HOME))
    os.rename(m.path(f"{HOME}/pub.h5"), m.path(f"{HOME}/moved.h5"))
    assert bucket_refs(m, "pub.h5") is None
    assert bucket_refs(m, "moved.h5") == refs
    os.unlink(m.path(f"{HOME}/moved.h5"))
    assert bucket_refs(m, "moved.h5") is None
    assert not {"pub.h5", "moved.h5"} & set(os.listdir(m.path(HOME)))
    if m.backend == "posix":                                    # no folder left behind
        assert not (bucket_copy / HOME / "pub.h5").exists()
        assert not (bucket_copy / HOME / "moved.h5").exists()


def test_bucket_refs_move_with_their_folder(mount_bucket, bucket_copy, tmp_path):
    """mv of a folder takes its domains' references along: none stays under the old name."""
    src = tmp_path / "f.h5"
    with h5py.File(src, "w") as f:
        f["x"] = np.arange(1000.0)
    m = mount_bucket(bucket_copy, "-o", "user=test_user1", "-o", "bucket_refs=on")
    os.mkdir(m.path(f"{HOME}/sub"))
    subprocess.run(["cp", str(src), m.path(f"{HOME}/sub/f.h5")], check=True)
    refs = bucket_refs(m, "sub/f.h5")
    assert refs is not None
    os.rename(m.path(f"{HOME}/sub"), m.path(f"{HOME}/sub2"))
    assert bucket_refs(m, "sub/f.h5") is None
    assert bucket_refs(m, "sub2/f.h5") == refs == references(m, "sub2/f.h5")
    if m.backend == "posix":
        assert not (bucket_copy / HOME / "sub").exists()
        assert np.array_equal(read_references(refs)["x"][()], np.arange(1000.0))


def test_bucket_refs_off_puts_none(mount_bucket, bucket_copy, tmp_path):
    src = tmp_path / "plain.h5"
    with h5py.File(src, "w") as f:
        f["x"] = np.arange(10)
    m = mount_bucket(bucket_copy, "-o", "user=test_user1")
    subprocess.run(["cp", str(src), m.path(f"{HOME}/plain.h5")], check=True)
    assert m.get(f"{HOME}/plain.h5/.domain.json") is not None
    assert bucket_refs(m, "plain.h5") is None


# ---- datasets linked to HDF5 files (-o ingest=link, hsload --link; spec §8) ----

LINKED_CLASS = {"gz_map": "H5D_CHUNKED_REF", "zlib_map": "H5D_CHUNKED_REF",
                "gz_table": "H5D_CHUNKED_REF_INDIRECT", "raw_table": "H5D_CHUNKED_REF_INDIRECT",
                "contig": "H5D_CONTIGUOUS_REF"}
# compressor, filter of each array as the view names it
LINKED_CODEC = {"gz_map": ("zlib", "shuffle"), "zlib_map": ("zlib", None),
                "gz_table": ("zlib", "shuffle"), "raw_table": (None, None),
                "contig": (None, None)}


def make_linked_source(path):
    """gzip+shuffle and gzip alone in a chunk map (<= 10 chunks) and a chunk table (edge
    chunks), raw chunks in a table with chunks never written, and a contiguous dataset."""
    rng = np.random.default_rng(28)
    with h5py.File(path, "w") as f:
        f.create_dataset("gz_map", data=np.round(rng.normal(size=(300, 400)), 2).astype("<f4"),
                         chunks=(100, 200), compression="gzip", shuffle=True)
        f.create_dataset("zlib_map", data=np.linspace(0, 1, 200 * 300).reshape(200, 300),
                         chunks=(100, 100), compression="gzip", compression_opts=6)
        f.create_dataset("gz_table", data=rng.integers(0, 5000, (1000, 300), dtype="<i4"),
                         chunks=(64, 128), compression="gzip", shuffle=True)
        raw = f.create_dataset("raw_table", (500, 700), "<u2", chunks=(100, 96), fillvalue=7)
        raw[0:250, 0:400] = np.arange(250 * 400, dtype="<u2").reshape(250, 400)
        f.create_dataset("contig", data=np.arange(250 * 300, dtype="<f8").reshape(250, 300))


def linked_classes(m, rel):
    """{link name: creationProperties.layout.class} of the root group's datasets, from the
    store."""
    root = os.getxattr(m.path(rel), "user.h5osfs.root").decode()
    group = json.loads(m.get(f"db/{root[2:19]}/.group.json"))
    out = {}
    for name, link in group["links"].items():
        d = json.loads(m.get(f"db/{link['id'][2:19]}/d/{link['id'][20:]}/.dataset.json"))
        out[name] = d["creationProperties"]["layout"]["class"]
    return out


def file_chunks(dset):
    """{zarr chunk name: the chunk's bytes as the file stores them (filtered)}."""
    if dset.chunks is None:
        return {".".join("0" * dset.ndim): dset[()].tobytes()}
    out = {}
    for i in range(dset.id.get_num_chunks()):
        info = dset.id.get_chunk_info(i)
        name = ".".join(str(o // c) for o, c in zip(info.chunk_offset, dset.chunks))
        out[name] = dset.id.read_direct_chunk(info.chunk_offset)[1]
    return out


def file_ranges(dset):
    """{zarr chunk name: (offset, size)} of the file's chunks."""
    if dset.chunks is None:
        return {".".join("0" * dset.ndim): (dset.id.get_offset(), dset.id.get_storage_size())}
    out = {}
    for i in range(dset.id.get_num_chunks()):
        info = dset.id.get_chunk_info(i)
        name = ".".join(str(o // c) for o, c in zip(info.chunk_offset, dset.chunks))
        out[name] = (info.byte_offset, info.size)
    return out


def test_zarr_linked_datasets_pass_the_files_chunks_through(mount_bucket, bucket_copy, tmp_path):
    """A file cp'd in with -o ingest=link: every linked dataset (chunk map, chunk table,
    contiguous) is an array of .zarr whose chunk files are the file's chunk bytes unchanged
    (deflate as numcodecs' zlib, shuffle as its filter; a contiguous dataset one chunk),
    read by zarr equal to h5py through the .h5; its kerchunk references are [URL, offset,
    size] of the stored file, which fsspec reads with no mount (local bucket)."""
    src = tmp_path / "linked.h5"
    make_linked_source(src)
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ingest=link,cache_dir={tmp_path}/c")
    domain = "linked.h5"
    subprocess.run(["cp", str(src), m.path(f"{HOME}/{domain}")], check=True)
    assert linked_classes(m, f"{HOME}/{domain}") == LINKED_CLASS
    group = zarr.open_group(zarr_path(m, domain), mode="r")
    assert sorted(group.array_keys()) == sorted(LINKED_CLASS)
    with h5py.File(src, "r") as f, h5py.File(m.path(f"{HOME}/{domain}"), "r") as mounted:
        for name, (compressor, filt) in LINKED_CODEC.items():
            arr = os.path.join(zarr_path(m, domain), name)
            meta = json.loads(open(os.path.join(arr, ".zarray")).read())
            assert (meta["compressor"] or {}).get("id") == compressor, name
            assert (meta["filters"] or [{}])[0].get("id") == filt, name
            assert meta["chunks"] == list(f[name].chunks or f[name].shape), name
            got = group[name][()]
            assert got.dtype == f[name].dtype, name
            assert np.array_equal(got, mounted[name][()]), name
            assert np.array_equal(got, f[name][()]), name
            want = file_chunks(f[name])
            assert {n for n in os.listdir(arr) if not n.startswith(".")} == set(want), name
            for chunk, data in want.items():
                assert os.stat(os.path.join(arr, chunk)).st_size == len(data), (name, chunk)
                assert open(os.path.join(arr, chunk), "rb").read() == data, (name, chunk)
        assert len(file_chunks(f["raw_table"])) == 15           # the rest never written: fill
        refs = references(m, domain)
        root = os.getxattr(m.path(f"{HOME}/{domain}"), "user.h5osfs.root").decode()
        base = f"file://{bucket_copy.resolve()}/" if m.backend == "posix" else "s3://hsdstest/"
        for name in LINKED_CLASS:
            for chunk, (off, size) in file_ranges(f[name]).items():
                url, roff, rsize = refs["refs"][f"{name}/{chunk}"]
                assert url.startswith(base) and url.endswith(f"db/{root[2:19]}/.h5osfs-file")
                assert (roff, rsize) == (off, size), (name, chunk)
        if m.backend == "posix":        # on S3 they name s3:// objects: s3fs, not installed
            by_refs = read_references(refs)
            for name in LINKED_CLASS:
                assert np.array_equal(by_refs[name][()], f[name][()]), name


# ---- kept versions (issue 26): their datasets read through the domain's version pool ----

MAKE_VERSION = Path(__file__).resolve().parents[1] / "tools" / "make_version.py"
VNAME = "sample3_z_gzip.h5"


def make_version(bucket, domain, *more):
    out = subprocess.run([sys.executable, str(MAKE_VERSION), str(bucket), domain, *more],
                         capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), out[1], out[2]          # number, root, pool


@pytest.fixture
def versioned_bucket(bucket_copy):
    """Version 1 of VNAME is VNAME as the fixture has it (gzip Blosc chunks, now in its pool);
    version 2 is sample2.h5's content (tests/tools/make_version.py)."""
    make_version(bucket_copy, f"{HOME}/{VNAME}")
    make_version(bucket_copy, f"{HOME}/{VNAME}", "--from", f"{HOME}/sample2.h5")
    return bucket_copy


def zarr_arrays(group):
    names = []
    group.visititems(lambda name, o: names.append(name) if isinstance(o, zarr.Array) else None)
    return sorted(names)


def numeric_datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, o: out.__setitem__(name, o[()])
                     if isinstance(o, h5py.Dataset) and o.dtype.kind in "iuf" else None)
    return out


def test_zarr_reads_kept_versions_from_their_pool(versioned_bucket, mount_bucket, tmp_path):
    """A kept version is a domain too: its datasets, whose chunk tables name objects of the
    domain's version pool, read through .zarr equal to the version's .h5 file, with the pool
    objects' bytes as chunk files and kerchunk references that name them."""
    m = mount_bucket(versioned_bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    for n in (1, 2):
        version = f"{HOME}/.versions/{VNAME}/{n}.h5"
        want = numeric_datasets(m.path(version))
        group = zarr.open_group(m.path(f".zarr/{version}"), mode="r")
        assert want and set(want) <= set(zarr_arrays(group))
        for name, values in want.items():
            got = group[name][()]
            assert got.dtype == values.dtype and np.array_equal(got, values, equal_nan=True), \
                f"{n}: {name}"
        refs = json.loads(open(m.path(f".kerchunk/{version}.json")).read())
        chunks = {k: v for k, v in refs["refs"].items() if isinstance(v, list)}
        pooled = {k: v for k, v in chunks.items() if "/c/" in v[0]}      # pool objects
        assert pooled
        for k, (url, off, size) in list(pooled.items())[:8]:
            stored = m.get("db/" + url.split("/db/", 1)[1])
            assert stored is not None and open(m.path(f".zarr/{version}/{k}"), "rb").read() == \
                stored[off:off + size]
    assert m.unmount() == 0


@pytest.mark.posix_only(reason="the same check on every store; S3's ETag path: test_versions_ref")
def test_zarr_never_serves_a_forged_pool_object(versioned_bucket, mount_bucket, tmp_path):
    """A pool object is named by the MD5 of its bytes: one overwritten with another pool
    object's bytes (a valid chunk, which numcodecs would decode) is a chunk file that fails
    with EIO, logged with its key; the object whose bytes were copied still reads."""
    m = mount_bucket(versioned_bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    version = f"{HOME}/.versions/{VNAME}/1.h5"
    refs = json.loads(open(m.path(f".kerchunk/{version}.json")).read())
    pooled = {}
    for k, v in sorted(refs["refs"].items()):
        if isinstance(v, list) and "/c/" in v[0] and v[0] not in pooled.values():
            pooled[k] = v[0]
    (k1, url1), (k2, url2) = list(pooled.items())[:2]
    key1, key2 = ("db/" + u.split("/db/", 1)[1] for u in (url1, url2))
    size1, other = len(m.get(key1)), m.get(key2)
    m.put(key1, (other * (size1 // len(other) + 1))[:size1])   # its length: served unread
    with pytest.raises(OSError) as e:
        open(m.path(f".zarr/{version}/{k1}"), "rb").read()
    assert e.value.errno == errno.EIO
    assert open(m.path(f".zarr/{version}/{k2}"), "rb").read() == other
    assert f"chunk {key1}" in m.log() and "its key names" in m.log()


@pytest.mark.posix_only(reason="bad input is read the same on every store")
def test_zarr_refuses_a_version_table_outside_its_pool(versioned_bucket, mount_bucket, tmp_path):
    """A version's table entry forged to name an object of the current root is never served
    as that object's bytes: the chunk read fails (EIO, one log line) and version 2 reads."""
    bucket = versioned_bucket
    lst = json.loads((bucket / HOME / ".versions" / VNAME / ".h5osfs-versions").read_text())
    v1root = next(e["root"] for e in lst["versions"] if e["n"] == 1)
    evil = b"hsdstest/home/test_user1/" + VNAME.encode() + b"/.domain.json"
    forged = 0
    for p in (bucket / "db" / v1root[2:19]).rglob("0*"):
        data = p.read_bytes() if p.is_file() else b""
        if b"/c/" in data:
            p.write_bytes(re.sub(rb"hsdstest/db/[0-9a-f-]{17}/c/[0-9a-f]{32}",
                                 lambda u: evil.ljust(len(u.group(0)), b"\0"), data))
            forged += 1
    assert forged
    m = mount_bucket(bucket, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    v1 = m.path(f".zarr/{HOME}/.versions/{VNAME}/1.h5")
    truth = numeric_datasets(m.path(f"{HOME}/{VNAME}"))     # version 1's content, unforged
    refused = 0
    for name, values in truth.items():
        try:    # .zarray names the compressor, which the chunks decide: EIO with the table
            meta = json.loads(open(f"{v1}/{name}/.zarray").read())
        except OSError as e:
            assert e.errno == errno.EIO, name
            with pytest.raises(OSError):                    # again: no second log line
                open(f"{v1}/{name}/.zarray").read()
            refused += 1
            continue
        got = zarr.open_array(f"{v1}/{name}", mode="r")[()]
        assert meta and np.array_equal(got, values, equal_nan=True), name   # all fill
    assert refused
    lines = [l for l in m.log().splitlines() if "outside pool" in l]
    assert len(lines) == refused, lines         # once per dataset, however often it is read
    assert "outside pool" in m.log()
    g2 = zarr.open_group(m.path(f".zarr/{HOME}/.versions/{VNAME}/2.h5"), mode="r")
    want = numeric_datasets(m.path(f"{HOME}/.versions/{VNAME}/2.h5"))
    for name, values in want.items():
        assert np.array_equal(g2[name][()], values, equal_nan=True), name
