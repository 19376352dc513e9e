"""Schema v1 buckets (spec §11): uuid ids, every object and chunk at a top-level key
<md5(id)[:5]>-<id>, no db/, no .info.json, chunks that cannot be listed.

The fixture tests/data/hsds-v1/hsdstest is the v2 fixture converted by tools/v2_to_v1.py
(its README). Here:
- the fixture is what the converter makes, and its keys are re-derived independently
  (§11's verified examples, MD5 of each id, the ids in every JSON object);
- every domain of it reads equal to its source through a mount, on every backend: h5diff with
  the README's notes, h5py values and attributes, linked layouts, the partially written domain
  (every chunk of a v1 grid is declared, and the missing ones read as the fill value);
- no built file is kept for a v1 root, in cache_dir or in the bucket (its chunks cannot be
  listed, so a changed chunk would go unnoticed);
- writing: a new domain in a v1 bucket is v2 (as HSDS makes new domains); an r+ change of a
  v1 domain and a cp over one are committed under a new v1 root, with v1 ids and top-level
  keys, so the domain stays v1 (as HSDS mints v1 ids in v1 domains); objcheck finds nothing
  wrong with either.
"""
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import objcheck
import conftest
from conftest import (DATA, REPO, S3_BACKENDS, SOURCE, Mount, MountSource, S3Mirror,
                      backend_server)
from test_image import (DOMAIN_NAMES, LINK_LAYOUTS, check_h5diff, check_sparse_reads_fill,
                        chunk_regions, compare_dataset, compare_file, domain_objects,
                        object_json_path, source_file)

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

V1 = DATA / "hsds-v1"
V1_BUCKET = V1 / "hsdstest"
V2_BUCKET = DATA / "hsds-v2" / "hsdstest"
HOME = "home/test_user1"
USER = ("-o", "user=test_user1")
V1_ID = re.compile(r"^[gdt]-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
V2_ID_TEXT = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{6}-[0-9a-f]{6}")


def md5_key(obj_id):
    return hashlib.md5(obj_id.encode()).hexdigest()[:5] + "-" + obj_id


def converter():
    spec = importlib.util.spec_from_file_location("v2_to_v1", REPO / "tools" / "v2_to_v1.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def files_below(root):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in Path(root).rglob("*") if p.is_file() and not conftest.is_put_under_way(p)}


def domain_file(m, domain):
    return m.path(f"{HOME}/{domain}.h5")


def domain_root(bucket, domain):
    return json.loads((Path(bucket) / HOME / f"{domain}.h5" / ".domain.json").read_text())["root"]


# ---- the fixture ----

def test_fixture_is_what_the_converter_makes(tmp_path):
    """tests/data/hsds-v1 is exactly tools/v2_to_v1.py's output (bucket and listing): rerun,
    byte for byte."""
    out = tmp_path / "hsdstest"
    listing = tmp_path / "LISTING.txt"
    r = subprocess.run(["/usr/bin/python3", REPO / "tools" / "v2_to_v1.py", V2_BUCKET, out,
                        "--listing", listing], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert files_below(out) == files_below(V1_BUCKET)
    assert listing.read_text() == (V1 / "LISTING.txt").read_text()


def test_converter_keys_are_the_specs():
    """§11's verified examples, and the chunk id spelling (c- + the dataset's uuid + index)."""
    v = converter()
    assert v.v1_key("g-2428ae0e-a082-11e6-9d93-0242ac110005") == \
        "a860f-g-2428ae0e-a082-11e6-9d93-0242ac110005"
    assert v.v1_key("c-2428ae0e-a082-11e6-9d93-0242ac110005_0_1") == \
        "e89bb-c-2428ae0e-a082-11e6-9d93-0242ac110005_0_1"
    assert v.v1_key("d-4ab77230-9c0e-11e6-8fdd-0242ac110005") == \
        "4feb1-d-4ab77230-9c0e-11e6-8fdd-0242ac110005"
    d2 = "d-b03b24ef-69f244b6-56e5-25125a-89ba79"
    d1 = v.v1_id(d2)
    assert V1_ID.match(d1) and d1 == v.v1_id(d2) and d1[0] == "d"
    assert d1.split("-")[3][0] == "1" and d1.split("-")[4][0] in "89ab"    # uuid1's version
    assert v.v1_chunk_id(d2, "3_0_12") == "c-" + d1[2:] + "_3_0_12"
    assert v.v1_chunk_id(d2, "3_0_12", 7) == "c7-" + d1[2:] + "_3_0_12"


def test_fixture_keys_rederived():
    """Every key of the v1 bucket, re-derived from what it holds: objects at <md5(id)[:5]>-<id>
    of the id in their JSON, chunks of datasets that exist with an index inside their grid,
    every object reachable from a domain, one v1 object per v2 object, no v2 id anywhere."""
    keys = files_below(V1_BUCKET)
    v2 = files_below(V2_BUCKET)
    assert not [k for k in keys if k.startswith("db/") or k.endswith(".info.json")]
    top = {k: b for k, b in keys.items() if "/" not in k}
    objects = {}
    chunks = []
    for key, data in top.items():
        h, rest = key[:5], key[6:]
        assert key[5] == "-" and hashlib.md5(rest.encode()).hexdigest()[:5] == h, key
        if rest.startswith("c-"):
            dset, index = rest.split("_", 1)
            chunks.append(("d-" + dset[2:], index))
            continue
        doc = json.loads(data)
        assert doc["id"] == rest and V1_ID.match(rest), key
        objects[rest] = doc
    for dset, index in chunks:
        doc = objects[dset]
        idx = [int(x) for x in index.split("_")]
        assert len(idx) == len(doc["layout"]["dims"]), (dset, index)
        dims = doc["shape"].get("dims", [1])
        assert all(i * c < max(n, 1) for i, c, n in zip(idx, doc["layout"]["dims"], dims))
    for key, data in keys.items():
        assert not V2_ID_TEXT.search(data), f"{key} holds a v2 id"
    reached = set()
    for domain in DOMAIN_NAMES:
        root, ids = domain_objects(V1_BUCKET, domain)
        assert objects[root]["root"] == root
        reached |= set(ids.values())
        for obj_id in ids.values():
            assert objects[obj_id]["root"] == root
    tables = {d["creationProperties"]["layout"]["chunk_table"] for d in objects.values()
              if "chunk_table" in d.get("creationProperties", {}).get("layout", {})}
    assert reached | tables == set(objects)
    n_v2 = sum(1 for k in v2 if k.startswith("db/") and not k.endswith(".info.json"))
    assert len(top) == n_v2
    assert {k: b for k, b in keys.items() if "/" in k and not k.endswith(".domain.json")} == \
        {k: b for k, b in v2.items() if not k.startswith("db/") and
         not k.endswith(".domain.json")}


def test_objcheck_checks_v1_domains(tmp_path):
    """The format checker passes every v1 domain and finds a wrong hash, a v2 id in a link and
    a missing root."""
    assert objcheck.problems(V1_BUCKET) == []
    bucket = tmp_path / "hsdstest"
    shutil.copytree(V1_BUCKET, bucket)
    root = domain_root(bucket, "sample1")
    root_key = bucket / md5_key(root)
    doc = json.loads(root_key.read_text())
    doc["links"]["g1"]["id"] = "g-b03b24ef-69f244b6-38b3-ac67e1-7acc3e"
    root_key.write_text(json.dumps(doc))
    chunk = next(p for p in bucket.iterdir() if p.name[6:8] == "c-")
    chunk.rename(bucket / ("00000" + chunk.name[5:]))
    (bucket / md5_key(domain_root(bucket, "sample3"))).unlink()
    probs = objcheck.problems(bucket)
    assert any(p.startswith(f"{md5_key(root)}: links['g1'].id: not a v1") for p in probs), probs
    assert any(p.startswith("00000-c-") and "MD5 of the id" in p for p in probs), probs
    assert any("the root group of /home/test_user1/sample3.h5 is missing" in p
               for p in probs), probs


# ---- reading ----

def v1_source(backend, request):
    """MountSource of the read-only v1 fixture on the backend (on S3: uploaded once per
    session below a prefix of its own)."""
    if backend not in S3_BACKENDS:
        return MountSource("posix", V1_BUCKET, V1_BUCKET)
    s3 = backend_server(backend, request)
    mirror = getattr(s3, "v1_mirror", None)
    if mirror is None:
        mirror = s3.v1_mirror = S3Mirror(s3, V1_BUCKET, read_only=True)
        mirror.sync()
    return MountSource("s3", V1_BUCKET, mirror.url(V1_BUCKET), ("-o", f"endpoint={s3.endpoint}"),
                       s3.env(), mirror, s3.secret)


@pytest.fixture(scope="module")
def v1_mount(tmp_path_factory, backend, request):
    """One read-only mount of the v1 fixture as test_user1, shared by the module's readers."""
    root = tmp_path_factory.mktemp("v1")
    (root / "mnt").mkdir()
    m = Mount(v1_source(backend, request), root / "mnt", root / "h5osfs.log",
              ("-o", "ro", *USER))
    yield m
    assert m.unmount() == 0
    assert not m.problems(), m.problems()
    assert " error: " not in m.log() and " warning: " not in m.log(), m.log()[-3000:]


def test_namespace_shows_the_domains_only(v1_mount):
    """The top-level object keys are hidden like db/: the same tree as the v2 bucket's."""
    assert os.listdir(v1_mount.path()) == ["home"]
    assert sorted(os.listdir(v1_mount.path(HOME))) == sorted(f"{d}.h5" for d in DOMAIN_NAMES)
    for d in DOMAIN_NAMES:
        assert os.getxattr(domain_file(v1_mount, d), "user.h5osfs.root").decode() == \
            domain_root(V1_BUCKET, d)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_h5diff_equals_source(v1_mount, domain):
    check_h5diff(source_file(domain), domain_file(v1_mount, domain))


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_h5py_values_equal_source(v1_mount, domain):
    compare_file(source_file(domain), domain_file(v1_mount, domain), domain, bucket=V1_BUCKET)


@pytest.mark.parametrize("domain", ["sample_link", "sample_fastlink"])
def test_linked_domain_reads_source(v1_mount, domain):
    """Every *_REF layout, the chunk tables of H5D_CHUNKED_REF_INDIRECT being v1 datasets whose
    chunks are found by probing."""
    root, ids = domain_objects(V1_BUCKET, domain)
    with h5py.File(SOURCE / "sample_link.h5", "r") as s, \
            h5py.File(domain_file(v1_mount, domain), "r") as d:
        assert sorted(d) == sorted(p.lstrip("/") for p in LINK_LAYOUTS)
        for path, cls in LINK_LAYOUTS.items():
            doc = json.loads(object_json_path(V1_BUCKET, ids[path], root).read_text())
            assert doc["creationProperties"]["layout"]["class"] == cls, path
            compare_dataset(s, d, path)
        check_sparse_reads_fill(d, V1_BUCKET, ids, root)


@pytest.mark.parametrize("path, present, total", [("/data", 7, 24), ("/raw", 2, 4)])
def test_partial_missing_chunks_are_fill(v1_mount, path, present, total):
    """v1 chunks cannot be listed: the image declares the whole grid, and each chunk with no
    object reads as the fill value."""
    _, ids = domain_objects(V1_BUCKET, "partial")
    body = ids[path][2:]
    stored = {p.name.split("_", 1)[1] for p in V1_BUCKET.iterdir()
              if p.name[6:].startswith(f"c-{body}_")}
    assert len(stored) == present
    with h5py.File(domain_file(v1_mount, "partial"), "r") as f, \
            h5py.File(source_file("partial"), "r") as e:
        ds = f[path]
        assert ds.id.get_num_chunks() == total
        fill = ds.fillvalue
        assert fill == e[path].fillvalue
        for key, region in chunk_regions(ds.shape, ds.chunks):
            got = ds[region]
            assert np.array_equal(got, e[path][region]), f"{path} chunk {key}"
            assert np.all(got == fill) == (key not in stored), f"{path} chunk {key}"


# ---- no kept files for v1 roots ----

def copy_v1(tmp_path):
    dst = tmp_path / "bucket" / "hsdstest"
    shutil.copytree(V1_BUCKET, dst)
    return dst


def test_no_built_file_is_kept_for_a_v1_root(mount_bucket, tmp_path):
    """A kept file is reused while a listing of the root's objects shows the same keys; a v1
    root's cannot be listed, so nothing is kept, in cache_dir or in the bucket: every mount
    builds again, and the bucket is not written."""
    bucket = copy_v1(tmp_path)
    before = files_below(bucket)
    args = (*USER, "-o", "bucket_images=write", "-o", "ttl=3600")
    for i in range(2):
        m = mount_bucket(bucket, *args, "-o", f"cache_dir={tmp_path}/cache{i}")
        with h5py.File(domain_file(m, "sample2"), "r") as f:
            assert f["multichunk_f32_gzip"].shape
        assert m.unmount() == 0
        assert "/home/test_user1/sample2.h5: built the HDF5 file" in m.log(), m.log()
        assert "built before" not in m.log()
        images = tmp_path / f"cache{i}" / "images"
        assert not images.exists() or not os.listdir(images)
        keys = bucket_keys(m)
        assert not [k for k in keys if ".h5osfs-image" in k], keys
    assert files_below(bucket) == before


# ---- writing ----

def bucket_keys(m):
    """Every key of the mounted bucket (on S3: listed from the server)."""
    if m.src.mirror is None:
        return sorted(files_below(m.bucket))
    prefix = m.src.source.split("/", 3)[3].rstrip("/") + "/"
    return sorted(k[len(prefix):] for k in m.src.mirror.s3.listing(prefix))


def download(m, dst):
    """The bucket as the store holds it now, in directory dst (the directory itself on posix):
    for objcheck, which reads a POSIX bucket."""
    if m.src.mirror is None:
        return m.bucket
    for key in bucket_keys(m):
        p = dst / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(m.get(key))
    return dst


def assert_h5diff_equal(a, b):
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


def domain_json(m, domain):
    return json.loads(m.get(f"{HOME}/{domain}/.domain.json"))


def wait_committed(m, domain, n=1, timeout=20):
    deadline = time.monotonic() + timeout
    while len([ln for ln in m.log().splitlines() if f"/{domain}: committed" in ln]) < n:
        assert time.monotonic() < deadline, m.log()[-3000:]
        time.sleep(0.05)


@pytest.fixture
def writable(mount_bucket, tmp_path):
    return mount_bucket(copy_v1(tmp_path), *USER, "-o", f"ttl=0,cache_dir={tmp_path}/cache")


def test_new_domain_in_a_v1_bucket_is_v2(writable, mount_bucket, tmp_path):
    """HSDS gives every new domain a v2 root, whatever the bucket holds: so does a cp."""
    keys_before = bucket_keys(writable)
    shutil.copyfile(SOURCE / "sample2.h5", writable.path(f"{HOME}/new.h5"))
    wait_committed(writable, f"{HOME}/new.h5")
    root = domain_json(writable, "new.h5")["root"]
    assert objcheck.is_root_id(root), root
    keys = bucket_keys(writable)
    new = sorted(set(keys) - set(keys_before))
    assert f"db/{root[2:19]}/.group.json" in new
    assert all(k.startswith(f"db/{root[2:19]}/") for k in new
               if k != f"{HOME}/new.h5/.domain.json")
    assert objcheck.problems(download(writable, tmp_path / "dl"), f"/{HOME}/new.h5") == []
    assert writable.unmount() == 0
    m2 = mount_bucket(writable, *USER, "-o", f"ttl=0,cache_dir={tmp_path}/cache")
    assert_h5diff_equal(SOURCE / "sample2.h5", m2.path(f"{HOME}/new.h5"))


def assert_stays_v1(m, domain, old_root, keys_before, tmp_path):
    """The domain's new root is a fresh uuid1 group id, its objects are v1 objects at
    top-level keys (nothing new under db/), and they pass objcheck."""
    root = domain_json(m, domain)["root"]
    assert V1_ID.match(root) and root[0] == "g" and root != old_root, root
    assert root.split("-")[3][0] == "1", f"{root}: not a uuid1"
    keys = bucket_keys(m)
    new = sorted(set(keys) - set(keys_before))
    assert md5_key(root) in new
    assert not [k for k in new if "/" in k], new
    assert all(hashlib.md5(k[6:].encode()).hexdigest()[:5] == k[:5] for k in new), new
    bucket = download(m, tmp_path / f"dl-{domain}")
    assert objcheck.problems(bucket, f"/{HOME}/{domain}") == []
    objs = [json.loads((bucket / k).read_bytes()) for k in new if k[6] in "gdt"]
    assert objs and all(o["root"] == root and V1_ID.match(o["id"]) for o in objs)
    return root


def test_r_plus_change_keeps_a_v1_domain_v1(writable, mount_bucket, tmp_path):
    """An r+ change of a v1 domain is committed under a new v1 root, its objects with v1 ids
    and keys (HSDS mints v1 ids for new objects of a v1 domain, §1.2/§11); the change and
    everything else read back; the old version's objects stay (v1 objects cannot be found to
    collect them), with a warning."""
    old_root = domain_root(writable.bucket, "sample3")
    keys_before = bucket_keys(writable)
    path = domain_file(writable, "sample3")
    with h5py.File(path, "r+") as f:
        f["ramp_i32"][0, :5] = [-1, -2, -3, -4, -5]
        f.create_dataset("added", data=np.arange(10, dtype="<i8"))
    wait_committed(writable, f"{HOME}/sample3.h5")
    assert_stays_v1(writable, "sample3.h5", old_root, keys_before, tmp_path)
    assert set(keys_before) <= set(bucket_keys(writable))
    assert writable.unmount() == 0
    assert f"gc: objects of v1 root {old_root} cannot be listed; left in the bucket" in \
        writable.log()
    m2 = mount_bucket(writable, *USER, "-o", f"ttl=0,cache_dir={tmp_path}/cache")
    with h5py.File(domain_file(m2, "sample3"), "r") as f, \
            h5py.File(SOURCE / "sample3.h5", "r") as s:
        want = s["ramp_i32"][()]
        want[0, :5] = [-1, -2, -3, -4, -5]
        assert np.array_equal(f["ramp_i32"][()], want)
        assert np.array_equal(f["added"][()], np.arange(10))
        for name in ("noise_f32", "smooth_f64_contig", "sub/small_u16", "zeros_i16"):
            assert np.array_equal(f[name][()], s[name][()]), name
        assert dict(f.attrs) == dict(s.attrs)


def test_cp_over_a_v1_domain_keeps_it_v1(writable, mount_bucket, tmp_path):
    """A replacement of a v1 domain (cp over it) is a change of that domain: v1 too, with its
    owner and ACLs; references between its objects hold the new v1 ids."""
    old = domain_json(writable, "sample1.h5")
    keys_before = bucket_keys(writable)
    subprocess.run(["cp", str(SOURCE / "sample1.h5"), str(domain_file(writable, "sample1"))],
                   check=True)
    wait_committed(writable, f"{HOME}/sample1.h5")
    root = assert_stays_v1(writable, "sample1.h5", old["root"], keys_before, tmp_path)
    new = domain_json(writable, "sample1.h5")
    assert (new["owner"], new["acls"]) == (old["owner"], old["acls"])
    assert writable.unmount() == 0
    m2 = mount_bucket(writable, *USER, "-o", f"ttl=0,cache_dir={tmp_path}/cache")
    assert os.getxattr(domain_file(m2, "sample1"), "user.h5osfs.root").decode() == root
    with h5py.File(domain_file(m2, "sample1"), "r") as f:
        assert [f[r].name if r else None for r in f["object_refs"][()]] == [
            "/", "/g1", "/g1/g1.1/dset_int16", "/points", "/g1/g1.1/g1.1.1"]
    assert_h5diff_equal(SOURCE / "sample1.h5", domain_file(m2, "sample1"))


def test_rm_of_a_v1_domain(writable):
    """rm deletes the .domain.json at once; the v1 objects stay, said in the log."""
    root = domain_root(writable.bucket, "sample2")
    os.unlink(domain_file(writable, "sample2"))
    assert "sample2.h5" not in os.listdir(writable.path(HOME))
    assert f"{HOME}/sample2.h5/.domain.json" not in bucket_keys(writable)
    assert md5_key(root) in bucket_keys(writable)
    assert writable.unmount() == 0
    assert f"gc: objects of v1 root {root} cannot be listed; left in the bucket" in writable.log()
