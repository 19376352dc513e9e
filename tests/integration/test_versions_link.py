"""Issue 26 for linked data (-o ingest=link, doc/versions.md §3.2): with versions on, every
commit of a domain whose datasets point into its own stored file is kept as a version too. The
file is kept once in the domain's pool (db/P/f/<name>: a hard link on a local bucket, a copy in
the store on S3) for every version with those bytes: an r+ carries the file over unchanged, so
its version names the base version's pool file again and copies nothing. The versions' linked
datasets keep their layouts, naming that pool file; their chunk tables are copied as they are,
never pooled. So a version reads exactly what the domain read after its commit, after the
domain's root (and its file) is collected, on a fresh read-only mount, and through HSDS's
objects (objcheck). A restore copies the file back as the new root's own; the pool sweep reads
past linked tables and deletes a pool file once no version names it. In ref mode a version,
which the domain names itself, keeps its own copy. Before this, each version copied the whole
file (S3: 2.0 GiB for 6 commits of a 256 MiB file), and before that such a commit was
"committed without a version"."""
import errno
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

import harness
import objcheck
from conftest import Mount, MountSource, is_mounted
from test_versions_collect import FAST, keys, named_pool_objects, pool_prefix, wait_for
from test_versions_commit import named_roots
from test_write_link import datasets_by_path, root_objects

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
TARGET = f"{HOME}/v.h5"
VDIR = f"{HOME}/.versions/v.h5"
FILE_NAME = ".h5osfs-file"
NOT_KEPT = "cannot be kept as a version yet"


def make_linked_source(path):
    """Each layout a linked ingest gives (contiguous, a chunk map, a chunk table), beside
    datasets it copies (small, vlen)."""
    with h5py.File(path, "w") as f:
        f.create_dataset("contig", data=np.linspace(0, 1, 4000))
        f.create_dataset("gzip", data=np.arange(100 * 80, dtype="<f4").reshape(100, 80),
                         chunks=(50, 40), compression="gzip")
        f.create_dataset("many", data=np.arange(256 * 256, dtype="<u2").reshape(256, 256),
                         chunks=(32, 32))
        f.create_dataset("small", data=np.arange(100, dtype="<i4"))
        f.create_dataset("vlen", data=["a", "bb"] * 300, dtype=h5py.string_dtype())
        f.attrs["title"] = "linked"


LINKED = {"contig": "H5D_CONTIGUOUS_REF", "gzip": "H5D_CHUNKED_REF",
          "many": "H5D_CHUNKED_REF_INDIRECT"}


def make_unlinked(path, start):
    """A file a linked ingest copies whole (datasets of at most 512 elements): pooled."""
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(start, start + 500, dtype="<i8"), chunks=(100,))
    return path


def change(path, edit):
    with h5py.File(path, "r+") as f:
        edit(f)


def edit_small(f):
    f["small"][0] = -5
    f.attrs["step"] = 2


def edit_many(f):
    f["many"][0, 0] = 7


def edit_small_again(f):
    f["small"][1] = 9


def same(a, b):
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr)[-2000:]


def versions(m):
    return sorted(os.listdir(m.path(VDIR)), key=lambda n: int(n.split(".")[0]))


def vroot(m, n):
    return os.getxattr(m.path(f"{VDIR}/{n}.h5"), "user.h5osfs.root").decode()


def layouts(m, root):
    """{dataset name: creationProperties.layout} of root's linked datasets, and its file."""
    objects = root_objects(m, root)
    named, _ = datasets_by_path(objects, root)
    return ({n: d.get("creationProperties", {}).get("layout", {}) for n, d in named.items()},
            objects.get(FILE_NAME))


def pool_files(m):
    """Keys of the pool files of v.h5's pool."""
    pool = json.loads(m.get(f"{VDIR}/.h5osfs-versions"))["pool"]
    return keys(m, f"db/{pool[2:19]}/f/")


def root_group_file(m, root, member="file"):
    """The pool file name a version root's group says its linked datasets name (or None); with
    member="file_etag", the etag it recorded for that file."""
    group = json.loads(root_objects(m, root)[".group.json"])
    return group.get("h5osfs", {}).get(member)


def forge_layouts(bucket_dir, root, edits):
    """In the local bucket, each linked layout of root's datasets whose class edits names gets
    member: edit(its value) for each of edits[class] (a pooled layout, with no file_uri, is
    left as it is)."""
    for p in (bucket_dir / "db" / root[2:19] / "d").glob("*/.dataset.json"):
        doc = json.loads(p.read_text())
        lay = doc.get("creationProperties", {}).get("layout", {})
        if "file_uri" in lay:
            for member, edit in edits.get(lay.get("class"), {}).items():
                lay[member] = edit(lay.get(member))
            p.write_text(json.dumps(doc))


def expected_files(tmp_path):
    """The source, then the source after each r+ of the test, as files."""
    src = tmp_path / "src.h5"
    make_linked_source(src)
    out = [src]
    for i, edit in enumerate((edit_small, edit_many), 2):
        nxt = tmp_path / f"expected{i}.h5"
        shutil.copyfile(out[-1], nxt)
        change(nxt, edit)
        out.append(nxt)
    return out


def mount_rw(mount_bucket, bucket, tmp_path, *more):
    opts = ",".join(("user=test_user1,ttl=0,versions=on,ingest=link",
                     f"cache_dir={tmp_path}/c1") + more)
    return mount_bucket(bucket, "-o", opts)


def test_every_commit_of_a_linked_domain_is_a_version(bucket_copy, mount_bucket, tmp_path):
    """cp of a linkable file, an r+ of a copied dataset, an r+ of a linked one: three versions,
    each reading exactly as the domain did after its commit; the pool holds one copy of the
    file, which every version's linked layouts name (no version root holds one); the linked
    table is copied, not pooled."""
    want = expected_files(tmp_path)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(want[0], m.path(TARGET))
    change(m.path(TARGET), edit_small)
    change(m.path(TARGET), edit_many)
    assert NOT_KEPT not in m.log()
    assert versions(m) == ["1.h5", "2.h5", "3.h5"]
    for n, w in enumerate(want, 1):
        ok, out = same(m.path(f"{VDIR}/{n}.h5"), w)
        assert ok, (n, out)
    ok, out = same(m.path(TARGET), want[2])
    assert ok, out
    source = want[0].read_bytes()
    files = pool_files(m)
    assert len(files) == 1, files                     # one copy for the three versions
    (fkey,) = files
    assert m.get(fkey) == source                      # unchanged
    etags = {root_group_file(m, vroot(m, n), "file_etag") for n in (1, 2, 3)}
    assert len(etags) == 1 and None not in etags, etags   # the one file's, kept by each
    for n in (1, 2, 3):
        root = vroot(m, n)
        lay, file = layouts(m, root)
        assert file is None, n                        # no copy of its own
        assert root_group_file(m, root) == fkey[-32:], n
        linked = {name: l["class"] for name, l in lay.items() if "file_uri" in l}
        assert linked == (LINKED if n < 3 else {k: v for k, v in LINKED.items() if k != "many"})
        for name in linked:
            assert lay[name]["file_uri"].endswith(f"/{fkey}"), (n, name)
        if n == 3:                                    # written by the r+: pooled since
            assert lay["many"]["class"] == "H5D_CHUNKED_REF_INDIRECT"
            assert "pool" in lay["many"]["h5osfs"] and "file_uri" not in lay["many"]
        else:                                         # its table copied as it was
            assert "h5osfs" not in lay["many"]
        if m.backend == "posix":
            assert objcheck.problems(bucket_copy, f"/{VDIR}/{n}.h5") == [], n
    harness.assert_clean([m])                         # replaced roots and their files go
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for n, w in enumerate(want, 1):
        ok, out = same(ro.path(f"{VDIR}/{n}.h5"), w)
        assert ok, (n, out)


def forged_copy(src):
    """src's bytes with one value of its contiguous dataset changed: the same size, every
    dataset still decodes."""
    data = bytearray(src.read_bytes())
    with h5py.File(src, "r") as f:
        off = f["contig"].id.get_offset() + 8 * 10
        value = -f["contig"][10] - 1
    data[off:off + 8] = np.float64(value).tobytes()
    return bytes(data)


@pytest.mark.not_on("rgw", reason="the etag check is the same code on every S3 server")
def test_a_replaced_pool_file_is_eio_in_every_version_naming_it(bucket_copy, mount_bucket,
                                                                 tmp_path):
    """A pool file is not named by its bytes: each version's root group records the etag the
    file had when the version was kept. The file replaced in the bucket by bytes of the same
    size, which decode fine: every linked read of each version naming it, through the .h5 and
    the .zarr view, is EIO with a log line naming the file, never those bytes; its kerchunk
    references leave those arrays out (their readers check nothing); the versions' copied
    datasets and the current domain (its own file) read; the next commit copies the
    domain's file into the pool again, and its version reads."""
    want = expected_files(tmp_path)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(want[0], m.path(TARGET))
    change(m.path(TARGET), edit_small)                # version 2 names the same pool file
    (fkey,) = pool_files(m)
    forged = forged_copy(want[0])
    assert m.unmount() == 0
    replace_pool_file(m, bucket_copy, fkey, forged)
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for n in (1, 2):
        with h5py.File(ro.path(f"{VDIR}/{n}.h5"), "r") as f, h5py.File(want[n - 1], "r") as src:
            for name in ("contig", "gzip", "many"):
                with pytest.raises(OSError):
                    f[name][:]
            for name in ("small", "vlen"):
                assert np.array_equal(f[name][:], src[name][:]), (n, name)
    assert f"pool file {fkey} is not the one the version kept" in ro.log()
    chunks = [p for p in os.scandir(ro.path(f".zarr/{VDIR}/1.h5/contig"))
              if not p.name.startswith(".")]
    assert chunks
    for p in chunks:
        with pytest.raises(OSError):
            open(p.path, "rb").read()
    assert "the pool file is not the one the version kept" in ro.log()
    refs = json.loads(open(ro.path(f".kerchunk/{VDIR}/1.h5.json")).read())["refs"]
    assert not [k for k in refs if k.split("/")[0] in ("contig", "gzip", "many")], sorted(refs)
    assert "small/.zarray" in refs
    assert "kerchunk references: array" in ro.log()
    ok, out = same(ro.path(TARGET), want[1])
    assert ok, out
    assert ro.unmount() == 0
    m = mount_rw(mount_bucket, m, tmp_path)
    change(m.path(TARGET), edit_many)                 # version 3: a new pool file
    assert len(pool_files(m)) == 2
    ok, out = same(m.path(f"{VDIR}/3.h5"), want[2])
    assert ok, out


def replace_pool_file(m, bucket_copy, fkey, data):
    """Other bytes at pool file fkey, as a bucket writer puts them: a new file in its place on a
    local bucket (where the pool's file is a link to a root's), a PutObject on S3."""
    if m.backend == "posix":
        path = bucket_copy / fkey
        (path.parent / "forged").write_bytes(data)
        os.replace(path.parent / "forged", path)
    else:
        m.put(fkey, data)


@pytest.mark.not_on("rgw", reason="the etag check is the same code on every S3 server")
def test_a_replaced_pool_file_is_never_carried_into_a_new_root(bucket_copy, mount_bucket,
                                                               tmp_path):
    """In ref mode the domain reads its head version's pool file. An r+ that makes a whole root
    (the folder back in root mode) copies that file as the new root's own at its commit; the
    file replaced in the bucket between the r+'s open (which read the kept bytes) and its
    close would have been copied, and the new version would have recorded the new file's
    etag: the commit fails with EIO instead (logged), the list and the domain stay as they
    were, and version 2 reads EIO for its linked data, never the new bytes."""
    want = expected_files(tmp_path)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path, "versions_current=ref")
    shutil.copyfile(want[0], m.path(TARGET))
    change(m.path(TARGET), edit_small)
    (fkey,) = pool_files(m)
    before = os.getxattr(m.path(TARGET), "user.h5osfs.root").decode()
    assert m.unmount() == 0
    rw = mount_rw(mount_bucket, m, tmp_path)        # root mode: a whole root
    fobj = open(rw.path(TARGET), "r+b")              # the OS close, which commits, by hand
    with h5py.File(fobj, "r+") as f:
        edit_small_again(f)
    replace_pool_file(rw, bucket_copy, fkey, forged_copy(want[0]))
    with pytest.raises(OSError) as e:
        fobj.close()
    assert e.value.errno == errno.EIO
    assert "is not the one the base version kept" in rw.log()
    assert versions(rw) == ["1.h5", "2.h5"]
    assert os.getxattr(rw.path(TARGET), "user.h5osfs.root").decode() == before
    with h5py.File(rw.path(f"{VDIR}/2.h5"), "r") as f:
        assert f["small"][0] == -5
        with pytest.raises(OSError):
            f["contig"][:]


@pytest.mark.posix_only(reason="the base's root group is read by the same code on every store")
def test_a_whole_root_from_a_ref_base_with_a_large_root_group_commits(bucket_copy, mount_bucket,
                                                                      tmp_path):
    """The base version's root group, which records the pool file's etag, is read whole by an
    r+ that makes a whole root from a ref-mode base: a root group of several MB (here 2.5 MB
    of attributes) is read as any JSON of the ingest is, and the commit and its version
    read (it was refused with EIO, "File too large", when read with a 1 MiB cap)."""
    src = tmp_path / "attrs.h5"
    make_linked_source(src)
    with h5py.File(src, "r+") as f:
        for i in range(20):
            f.attrs[f"big{i}"] = np.linspace(0, 1, 7000)
    want = tmp_path / "want.h5"
    shutil.copyfile(src, want)
    change(want, edit_small)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path, "versions_current=ref")
    shutil.copyfile(src, m.path(TARGET))
    group = bucket_copy / "db" / vroot(m, 1)[2:19] / ".group.json"
    assert group.stat().st_size > 2 << 20
    assert m.unmount() == 0
    rw = mount_rw(mount_bucket, m, tmp_path)        # root mode: a whole root
    change(rw.path(TARGET), edit_small)
    assert versions(rw) == ["1.h5", "2.h5"]
    for path in (TARGET, f"{VDIR}/2.h5"):
        ok, out = same(rw.path(path), want)
        assert ok, (path, out)


@pytest.mark.not_on("rgw", reason="the restore's store side is the same code as on s3rver")
def test_restore_of_a_linked_version_copies_its_file(bucket_copy, mount_bucket, tmp_path):
    """cp .versions/v.h5/1.h5 v.h5 restores version 1 (no new file linked from the staged
    copy): the new root holds a copy of version 1's file, which its linked datasets name, and
    it reads as version 1 after a remount."""
    want = expected_files(tmp_path)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(want[0], m.path(TARGET))
    change(m.path(TARGET), edit_small)
    shutil.copyfile(m.path(f"{VDIR}/1.h5"), m.path(TARGET))
    assert "restored from version 1" in m.log()
    assert versions(m) == ["1.h5", "2.h5", "3.h5"]
    root = os.getxattr(m.path(TARGET), "user.h5osfs.root").decode()
    lay, file = layouts(m, root)
    assert file == want[0].read_bytes()
    assert {name: l["class"] for name, l in lay.items() if "file_uri" in l} == LINKED
    assert all(l["file_uri"].endswith(f"/db/{root[2:19]}/{FILE_NAME}")
               for l in lay.values() if "file_uri" in l)
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for path in (TARGET, f"{VDIR}/3.h5", f"{VDIR}/1.h5"):
        ok, out = same(ro.path(path), want[0])
        assert ok, (path, out)


@pytest.mark.not_on("rgw", reason="the collection's store side is covered on rgw by "
                    "test_versions_collect")
def test_collection_reads_past_linked_tables_and_takes_the_file(bucket_copy, mount_bucket,
                                                                tmp_path):
    """cp a (pooled), cp the linkable file, cp b (pooled): rm 1.h5, and the pool sweep, which reads every
    kept version's chunk tables, passes the linked version's table of file offsets and deletes
    what only version 1 named; rm 2.h5 then takes its root, its file included."""
    want = expected_files(tmp_path)
    opts = ("user=test_user1,ttl=0,versions=on,ingest=link," + FAST +
            f",cache_dir={tmp_path}/c1")
    m = mount_bucket(bucket_copy, "-o", opts, extra_env={"H5OSFS_TEST_GC_GRACE": "0"})
    a = make_unlinked(tmp_path / "a.h5", 0)
    b = make_unlinked(tmp_path / "b.h5", 1000)
    for src in (a, want[0], b):
        shutil.copyfile(src, m.path(TARGET))
    roots = {n: vroot(m, n) for n in (1, 2, 3)}
    only_1 = named_pool_objects(m, roots[1]) - named_pool_objects(m, roots[3])
    assert only_1 and only_1 <= keys(m, pool_prefix(m))
    (fkey,) = pool_files(m)
    assert root_group_file(m, roots[2]) == fkey[-32:]
    os.unlink(m.path(f"{VDIR}/1.h5"))
    wanted = named_pool_objects(m, roots[2]) | named_pool_objects(m, roots[3])
    wait_for(lambda: keys(m, f"db/{roots[1][2:19]}/") == set(), "version 1's root collected")
    wait_for(lambda: keys(m, pool_prefix(m)) == wanted, "the pool swept to what 2 and 3 name")
    assert pool_files(m) == {fkey}                    # version 2 still names it
    assert "nothing is deleted" not in m.log()
    os.unlink(m.path(f"{VDIR}/2.h5"))
    wait_for(lambda: keys(m, f"db/{roots[2][2:19]}/") == set(), "version 2's root collected")
    wait_for(lambda: pool_files(m) == set(), "the pool file swept once no version names it")
    assert "nothing is deleted" not in m.log()
    assert m.unmount() == 0
    m = mount_bucket(m, "-o", opts)
    for path in (f"{VDIR}/3.h5", TARGET):
        ok, out = same(m.path(path), b)
        assert ok, (path, out)
    assert [v["n"] for v in json.loads(m.get(f"{VDIR}/.h5osfs-versions"))["versions"]] == [3]


@pytest.mark.posix_only(reason="edits a version's JSON in the bucket directory; the check is "
                        "the image build's, the same on every store")
def test_a_version_linked_to_a_file_not_its_own_is_eio_for_that_dataset(bucket_copy,
                                                                          mount_bucket, tmp_path):
    """A version reads only what was kept with it. A dataset whose file_uri was pointed at a
    file elsewhere in the bucket (which anyone may replace; a current domain may link to one),
    or at another domain's pool file (which that domain's ACL guards), or whose chunk table
    was pointed at another root's (the domain's own, which an r+ or HSDS may change), is EIO,
    logged; its own pool file named in another form of the URI (s3://, file://) still reads,
    and so do the version's other datasets."""
    want = expected_files(tmp_path)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path)
    shutil.copyfile(want[0], m.path(TARGET))
    change(m.path(TARGET), edit_small)
    shutil.copyfile(want[0], m.path(f"{HOME}/w.h5"))    # another domain, with its own pool
    other_pool = json.loads(m.get(f"{HOME}/.versions/w.h5/.h5osfs-versions"))["pool"]
    (other_file,) = keys(m, f"db/{other_pool[2:19]}/f/")
    root, current = vroot(m, 1), os.getxattr(m.path(TARGET), "user.h5osfs.root").decode()
    root2 = vroot(m, 2)
    (own_pool_file,) = pool_files(m)
    assert m.unmount() == 0
    shutil.copyfile(want[0], bucket_copy / "elsewhere.h5")
    bucket = bucket_copy.name
    current_tables = {json.loads(p.read_text())["creationProperties"]["layout"]["chunk_table"]
                      for p in (bucket_copy / "db" / current[2:19] / "d").glob("*/.dataset.json")
                      if "chunk_table" in p.read_text()}
    assert len(current_tables) == 1
    forge_layouts(bucket_copy, root, {
        "H5D_CONTIGUOUS_REF": {"file_uri": lambda _: f"{bucket}/elsewhere.h5"},
        "H5D_CHUNKED_REF": {"file_uri": lambda uri: f"s3://{uri}"},
        "H5D_CHUNKED_REF_INDIRECT": {"chunk_table": lambda _: current_tables.pop()}})
    forge_layouts(bucket_copy, root2, {
        "H5D_CONTIGUOUS_REF": {"file_uri": lambda _: f"{bucket}/{other_file}"},
        "H5D_CHUNKED_REF": {"file_uri": lambda uri: f"file://{uri}"}})
    # the current domain (root mode) owns its file: even its own pool's is refused
    forge_layouts(bucket_copy, current, {
        "H5D_CONTIGUOUS_REF": {"file_uri": lambda _: f"{bucket}/{own_pool_file}"}})
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    with h5py.File(ro.path(f"{VDIR}/1.h5"), "r") as f, h5py.File(want[0], "r") as src:
        for name in ("contig", "many"):
            with pytest.raises(OSError):
                f[name][:]
        for name in ("gzip", "small", "vlen"):
            assert np.array_equal(f[name][:], src[name][:]), name
    assert ro.log().count("names neither its pool nor its own file") == 2
    with h5py.File(ro.path(f"{VDIR}/2.h5"), "r") as f, h5py.File(want[1], "r") as src:
        with pytest.raises(OSError):
            f["contig"][:]
        for name in ("gzip", "many", "small", "vlen"):
            assert np.array_equal(f[name][:], src[name][:]), name
    assert ro.log().count("is not of the domain's pool") == 1
    with h5py.File(ro.path(TARGET), "r") as f, h5py.File(want[1], "r") as src:
        with pytest.raises(OSError):
            f["contig"][:]
        assert np.array_equal(f["gzip"][:], src["gzip"][:])
    assert "does not name its head version (ref mode)" in ro.log()
    zarr = ro.path(f".zarr/{VDIR}/1.h5")                  # the Zarr view, by the same rule
    assert sorted(n for n in os.listdir(zarr) if not n.startswith(".")) == \
        ["gzip", "small", "vlen"]
    assert ro.log().count("linked layout names a file that is not its own") == 2
    zarr = ro.path(f".zarr/{VDIR}/2.h5")
    assert sorted(n for n in os.listdir(zarr) if not n.startswith(".")) == \
        ["gzip", "many", "small", "vlen"]
    assert ro.log().count("is not of the domain's pool") == 2


@pytest.mark.posix_only(reason="counts roots in the bucket directory; the refusal is the same "
                        "code on every store")
def test_a_domain_linked_to_a_file_not_its_own_is_committed_without_a_version(
        bucket_copy, mount_bucket, tmp_path):
    """The fixture's hsload --link domain points into a file elsewhere in the bucket, which a
    version could not keep: an r+ of it is committed (the change reads back), without a
    version (one log line), and leaves no version root, file copy or pool behind."""
    name = f"{HOME}/sample_link.h5"
    before = {p.name for p in (bucket_copy / "db").iterdir()}
    m = mount_rw(mount_bucket, bucket_copy, tmp_path)
    with h5py.File(m.path(name), "r+") as f:
        f.attrs["touched"] = 1
    assert m.log().count(NOT_KEPT) == 1
    with h5py.File(m.path(name), "r") as f:
        assert f.attrs["touched"] == 1
    assert not (bucket_copy / f"{HOME}/.versions/sample_link.h5").exists()
    harness.assert_clean([m])
    left = {p.name for p in (bucket_copy / "db").iterdir()} - before
    assert left == named_roots(bucket_copy) - before


@pytest.mark.not_on("rgw", reason="ref mode's store side is test_versions_ref's")
def test_linked_domain_in_ref_mode(bucket_copy, mount_bucket, tmp_path):
    """versions_current=ref: the domain names its head version's root, whose linked datasets
    read the pool's one copy of the file, as every version's do: an r+ copies no file at all
    (its sparse root carries the layouts over as they are); each r+ keeps a version as in root
    mode, one after the linked dataset was pooled leaves its unchanged chunks in the pool
    (nothing copied), and no other root is left once the collector has drained."""
    want = expected_files(tmp_path)
    fourth = tmp_path / "expected4.h5"
    shutil.copyfile(want[2], fourth)
    change(fourth, edit_small_again)
    want.append(fourth)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path, "versions_current=ref")
    shutil.copyfile(want[0], m.path(TARGET))
    for edit in (edit_small, edit_many, edit_small_again):
        change(m.path(TARGET), edit)
    assert NOT_KEPT not in m.log()
    assert "1 unchanged chunks left in the base version's pool" in m.log()    # "many", pooled
    assert versions(m) == ["1.h5", "2.h5", "3.h5", "4.h5"]
    assert os.getxattr(m.path(TARGET), "user.h5osfs.root").decode() == vroot(m, 4)
    pool = json.loads(m.get(f"{VDIR}/.h5osfs-versions"))["pool"]
    (fkey,) = pool_files(m)                # one copy, which the domain itself reads
    assert m.get(fkey) == want[0].read_bytes()
    for n in (1, 2, 3, 4):
        lay, file = layouts(m, vroot(m, n))
        assert file is None, n
        assert all(l["file_uri"].endswith(f"/{fkey}") for l in lay.values() if "file_uri" in l)
    etags = {root_group_file(m, vroot(m, n), "file_etag") for n in (1, 2, 3, 4)}
    assert len(etags) == 1 and None not in etags, etags     # carried over by each r+
    harness.assert_clean([m])
    if m.backend == "posix":
        on_disk = {p.name for p in (bucket_copy / "db").iterdir()}
        assert on_disk == named_roots(bucket_copy) | {pool[2:19]}
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for n, w in enumerate(want, 1):
        ok, out = same(ro.path(f"{VDIR}/{n}.h5"), w)
        assert ok, (n, out)
    ok, out = same(ro.path(TARGET), want[3])
    assert ok, out
    zarr = ro.path(f".zarr/{TARGET}")          # the Zarr view reads the pool's file too
    assert sorted(n for n in os.listdir(zarr) if not n.startswith(".")) == \
        ["contig", "gzip", "many", "small", "vlen"]
    assert "not of the domain's pool" not in ro.log()
    # back to root mode: the r+'s whole root owns a copy of the file again
    rw = mount_bucket(m, "-o", "user=test_user1,ttl=0,versions=on,ingest=link,"
                      f"cache_dir={tmp_path}/c2")
    change(rw.path(TARGET), edit_small)
    root = os.getxattr(rw.path(TARGET), "user.h5osfs.root").decode()
    lay, file = layouts(rw, root)
    assert file == want[0].read_bytes()
    assert all(l["file_uri"].endswith(f"/db/{root[2:19]}/{FILE_NAME}")
               for l in lay.values() if "file_uri" in l)
    assert root_group_file(rw, vroot(rw, 5)) == fkey[-32:]     # named again, not copied
    assert root_group_file(rw, vroot(rw, 5), "file_etag") in etags
    assert pool_files(rw) == {fkey}


class Mounts:
    """Daemons a kill test starts on one mount point over a local bucket, one after another;
    whatever a failing assert leaves mounted is unmounted and stopped at the end."""

    def __init__(self, bucket, mnt, tmp_path):
        self.bucket, self.mnt, self.tmp, self.started = bucket, mnt, tmp_path, []
        mnt.mkdir()

    def start(self, log, env_extra, opts):
        env = dict(os.environ, **env_extra)
        m = Mount(MountSource("posix", self.bucket, self.bucket, env=env), self.mnt,
                  self.tmp / log, ("-o", opts))
        self.started.append(m)
        return m

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-uz", str(self.mnt)], check=False)
        for m in self.started:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(timeout=30)


@pytest.mark.posix_only(reason="edits a version's root group in the bucket directory; the "
                        "fallback is the commit's, the same on every store")
def test_a_ref_mode_r_plus_whose_version_cannot_name_the_pool_file_stores_a_whole_root(
        bucket_copy, mount_bucket, tmp_path):
    """Ref mode: an r+'s sparse root carries over layouts that name the head version's pool
    file. When its version cannot be kept that way (here the head's root group no longer says
    which pool file it names), that sparse root must never become the domain: it owns no file,
    and only versions keep pool files. The commit ingests a whole root instead, which gets its
    own copy of the file, and that is kept as the version the domain names: it reads."""
    want = expected_files(tmp_path)
    m = mount_rw(mount_bucket, bucket_copy, tmp_path, "versions_current=ref")
    shutil.copyfile(want[0], m.path(TARGET))
    group = bucket_copy / "db" / vroot(m, 1)[2:19] / ".group.json"
    doc = json.loads(group.read_text())
    del doc["h5osfs"]["file"]
    group.write_text(json.dumps(doc))
    change(m.path(TARGET), edit_small)
    assert versions(m) == ["1.h5", "2.h5"]
    assert os.getxattr(m.path(TARGET), "user.h5osfs.root").decode() == vroot(m, 2)
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for path in (TARGET, f"{VDIR}/2.h5"):
        ok, out = same(ro.path(path), want[1])
        assert ok, (path, out)


EDIT_MANY = """
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["many"][0, 0] = 7
"""


@pytest.mark.posix_only(reason="kills the daemon; the commit protocol is the same code on "
                        "every backend")
@pytest.mark.parametrize("stage", ["vroot", "listed"])
def test_kill_during_a_linked_versioned_commit(bucket_copy, tmp_path, stage):
    """Version 1 is the linked source; an r+ of a linked dataset is killed after the version
    root is written (vroot: it names version 1's pool file, copying none) or after its list
    put (listed).
    The next mount recovers: versions 1 and 2 read whole, and once the collector has drained
    db/ holds only roots something names and the pool, whose one file both versions name."""
    want = expected_files(tmp_path)
    opts = f"user=test_user1,ttl=0,versions=on,ingest=link,cache_dir={tmp_path}/cache"
    with Mounts(bucket_copy, tmp_path / "mnt", tmp_path) as ms:
        m = ms.start("0.log", {}, opts)
        shutil.copyfile(want[0], m.path(TARGET))
        harness.assert_clean([m])
        m = ms.start("1.log", {"H5OSFS_TEST_CRASH_AT": stage}, opts)
        r = subprocess.run([sys.executable, "-c", EDIT_MANY, str(m.path(TARGET))],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r.stdout
        m.proc.wait(timeout=30)
        assert m.proc.returncode == -9
        subprocess.run(["fusermount3", "-uz", str(ms.mnt)], check=False)
        assert not is_mounted(ms.mnt)
        m = ms.start("2.log", {}, opts)
        assert versions(m) == ["1.h5", "2.h5"]
        expected = tmp_path / "expected_many.h5"
        shutil.copyfile(want[0], expected)
        change(expected, edit_many)
        for path, w in ((f"{VDIR}/1.h5", want[0]), (f"{VDIR}/2.h5", expected),
                        (TARGET, expected)):
            ok, out = same(m.path(path), w)
            assert ok, (path, out)
        pool = json.loads(m.get(f"{VDIR}/.h5osfs-versions"))["pool"]
        harness.assert_clean([m])
        on_disk = {p.name for p in (bucket_copy / "db").iterdir()}
        assert on_disk == named_roots(bucket_copy) | {pool[2:19]}
        assert len(pool_files(m)) == 1     # version 2 names version 1's file


@pytest.mark.posix_only(reason="kills the daemon; the commit protocol is the same code on "
                        "every backend")
def test_a_replacement_killed_before_its_listing_leaves_no_pool_file(bucket_copy, tmp_path):
    """cp of the linked source (version 1, its file into the pool), then cp of another linkable
    file killed after its version root and its copy of the file into the pool are written,
    before the list names them (vroot): the next mount collects that root and deletes the pool
    file only it could name, and commits the staged file again (version 2, with a pool file
    of its own); version 1 and its file stay. Before, the killed version's copy stayed, named
    by nothing, until a sweep (which runs only after a removal)."""
    want = expected_files(tmp_path)
    opts = f"user=test_user1,ttl=0,versions=on,ingest=link,cache_dir={tmp_path}/cache"
    with Mounts(bucket_copy, tmp_path / "mnt", tmp_path) as ms:
        m = ms.start("0.log", {}, opts)
        shutil.copyfile(want[0], m.path(TARGET))
        (first,) = pool_files(m)
        assert m.unmount() == 0
        m = ms.start("1.log", {"H5OSFS_TEST_CRASH_AT": "vroot"}, opts)
        with pytest.raises(OSError):
            shutil.copyfile(want[2], m.path(TARGET))
        m.proc.wait(timeout=30)
        assert m.proc.returncode == -9
        subprocess.run(["fusermount3", "-uz", str(ms.mnt)], check=False)
        assert len(pool_files(m)) == 2                # the killed version's copy is there
        m = ms.start("2.log", {}, opts)
        assert versions(m) == ["1.h5", "2.h5"]        # the staged file, committed again
        second = {k for k in pool_files(m) if k.endswith(root_group_file(m, vroot(m, 2)))}
        assert pool_files(m) == {first} | second and len(second) == 1
        for n, w in ((1, want[0]), (2, want[2])):
            ok, out = same(m.path(f"{VDIR}/{n}.h5"), w)
            assert ok, (n, out)
        harness.assert_clean([m])


@pytest.mark.posix_only(reason="kills the daemon; the commit protocol is the same code on "
                        "every backend")
def test_a_root_mode_commit_finished_by_a_ref_mode_mount_names_its_root(bucket_copy, tmp_path):
    """An r+ of a linked domain in root mode is killed after its version was listed (its
    linked datasets name the pool's file); the next mount, with versions_current=ref, finishes
    the commit by naming the version itself, as ref mode does, and the domain reads the change
    through the pool's file (a current domain in ref mode may: its root is a version's)."""
    want = expected_files(tmp_path)
    opts = f"user=test_user1,ttl=0,versions=on,ingest=link,cache_dir={tmp_path}/cache"
    with Mounts(bucket_copy, tmp_path / "mnt", tmp_path) as ms:
        m = ms.start("0.log", {}, opts)
        shutil.copyfile(want[0], m.path(TARGET))
        assert m.unmount() == 0
        m = ms.start("1.log", {"H5OSFS_TEST_CRASH_AT": "listed"}, opts)
        r = subprocess.run([sys.executable, "-c", EDIT_MANY, str(m.path(TARGET))],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r.stdout
        m.proc.wait(timeout=30)
        subprocess.run(["fusermount3", "-uz", str(ms.mnt)], check=False)
        m = ms.start("2.log", {}, opts + ",versions_current=ref")
        assert versions(m) == ["1.h5", "2.h5"]
        assert os.getxattr(m.path(TARGET), "user.h5osfs.root").decode() == vroot(m, 2)
        expected = tmp_path / "expected_many.h5"
        shutil.copyfile(want[0], expected)
        change(expected, edit_many)
        for path in (TARGET, f"{VDIR}/2.h5"):
            ok, out = same(m.path(path), expected)
            assert ok, (path, out)
        harness.assert_clean([m])
