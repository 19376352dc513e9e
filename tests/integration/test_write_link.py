"""Linked ingest (issue 10 part 1, seed 003, spec §8): with -o ingest=link a new file is stored
whole as one object of its root (db/A-B/.h5osfs-file) and the datasets HSDS can read from it
point into it, with the layouts hsload --link chooses; the rest is copied as before.

Checked on a real mount (local directory and S3): the values read back equal the source
(h5diff, live and after a remount), each dataset gets the layout hsload would give it, the
stored file is the source byte for byte, the objects are valid (objcheck), the fixture's
hsload-made linked domain and ours agree field by field, rm deletes the file object with the
domain, and an r+ change makes the datasets it writes ordinary chunked ones while the others
stay linked, to a copy of the file under the new root (the linked bytes are never changed)."""
import errno
import json
import os
import shutil
import subprocess
import time

import h5py
import numpy as np
import pytest

import conftest
import objcheck
from conftest import SOURCE

pytestmark = pytest.mark.backends("posix", "s3")

HOME = "home/test_user1"
FILE_NAME = ".h5osfs-file"
FIXTURE_LINKED = conftest.BUCKET / "db" / "f9b4b1c7-5fba90ae"     # hsload --link sample_link.h5


def h5diff(a, b):
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr)[-3000:]


def make_linkable_file(path, userblock=0, dense=True):
    """One dataset of each layout hsload chooses, and some that must be copied. dense: also
    one of more chunks than a linked ingest lists one by one (5,000: slow to write, copy and
    compare; only the layout tests need it)."""
    with h5py.File(path, "w", userblock_size=userblock) as f:
        f.create_dataset("contig_f8", data=np.linspace(0, 1, 40 * 50).reshape(40, 50))
        f.create_dataset("contig_be", data=np.arange(3000, dtype=">i4"))
        f.create_dataset("contig_big",
                         data=np.arange(3000 * 2000, dtype="u1").reshape(3000, 2000))
        f.create_dataset("gzip4", data=np.arange(100 * 80, dtype="<f4").reshape(100, 80),
                         chunks=(50, 40), compression="gzip", compression_opts=4, shuffle=True)
        f.create_dataset("many", data=np.arange(256 * 256, dtype="<u2").reshape(256, 256),
                         chunks=(32, 32))
        if dense:  # more chunks than ingest_link lists one by one: looked up by coordinates
            f.create_dataset("dense", data=np.arange(20000, dtype="<i4"), chunks=(4,))
        sparse = f.create_dataset("sparse", shape=(60, 60), dtype="<i2", chunks=(20, 30),
                                  fillvalue=-1)
        sparse[0:10, 0:10] = 5
        sparse[45:50, 40:50] = 7
        f.create_dataset("edge", data=np.arange(1000, dtype="<i8"), chunks=(300,),
                         compression="gzip")
        f.create_dataset("small", data=np.arange(100, dtype="<i4"))            # <= 512: copied
        f.create_dataset("scalar", data=3.5)                                   # copied
        f.create_dataset("vlen", data=["a", "bb"] * 300, dtype=h5py.string_dtype())  # copied
        f.create_dataset("fletcher", data=np.arange(2000, dtype="<i4"), chunks=(500,),
                         fletcher32=True)                                      # copied
        f.create_dataset("late", shape=(1000, 1000), dtype="<f4")              # nothing stored
        f.attrs["title"] = "linked"


EXPECTED_CLASS = {"contig_f8": "H5D_CONTIGUOUS_REF", "contig_be": "H5D_CONTIGUOUS_REF",
                  "contig_big": "H5D_CONTIGUOUS_REF",
                  "gzip4": "H5D_CHUNKED_REF", "sparse": "H5D_CHUNKED_REF",
                  "dense": "H5D_CHUNKED_REF_INDIRECT",
                  "edge": "H5D_CHUNKED_REF", "many": "H5D_CHUNKED_REF_INDIRECT",
                  "small": "H5D_CHUNKED", "scalar": None, "vlen": "H5D_CHUNKED",
                  "fletcher": "H5D_CHUNKED", "late": "H5D_CHUNKED"}


@pytest.fixture
def linking(bucket_copy, mount_bucket, tmp_path):
    """A read-write mount of a copy of the fixture bucket with -o ingest=link."""
    return mount_bucket(bucket_copy, "-o",
                        f"user=test_user1,ttl=0,ingest=link,cache_dir={tmp_path}/cache")


def remount(m, mount_bucket, tmp_path, *more):
    assert m.unmount() == 0
    return mount_bucket(m, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache", *more)


def root_of(m, rel):
    return os.getxattr(m.path(rel), "user.h5osfs.root").decode()


def root_objects(m, root):
    """{key below db/A-B/: bytes} of every object of root, as the store has it."""
    prefix = f"db/{root[2:19]}/"
    if m.src.mirror is None:
        base = m.bucket / prefix
        return {p.relative_to(base).as_posix(): p.read_bytes()
                for p in base.rglob("*") if p.is_file() and not conftest.is_put_under_way(p)}
    bucket_prefix = m.src.source.removeprefix(f"s3://{conftest.S3_BUCKET}/") + "/"
    keys = m.src.mirror.s3.listing(bucket_prefix + prefix)
    return {k[len(bucket_prefix + prefix):]: m.get(k[len(bucket_prefix):]) for k in keys}


def datasets_by_path(objects, root):
    """{HDF5 path: dataset JSON} of a root's objects (one level of groups), and the others by
    id."""
    dsets = {json.loads(v)["id"]: json.loads(v) for k, v in objects.items()
             if k.endswith(".dataset.json")}
    rootg = json.loads(objects[".group.json"])
    named = {name: dsets.pop(link["id"]) for name, link in rootg["links"].items()
             if link["id"] in dsets}
    return named, dsets


def test_link_round_trip(linking, mount_bucket, tmp_path):
    src = tmp_path / "linkable.h5"
    make_linkable_file(src)
    target = f"{HOME}/linkable.h5"
    shutil.copyfile(src, linking.path(target))
    assert h5diff(src, linking.path(target))[0] == 0
    root = root_of(linking, target)
    objects = root_objects(linking, root)
    assert objects[FILE_NAME] == src.read_bytes()       # the file, whole, as it was written
    named, others = datasets_by_path(objects, root)
    classes = {name: d.get("creationProperties", {}).get("layout", {}).get("class")
               for name, d in named.items()}
    assert classes == EXPECTED_CLASS
    for name, d in named.items():
        lay = d.get("creationProperties", {}).get("layout", {})
        if "_REF" in (lay.get("class") or ""):
            bucket = conftest.S3_BUCKET if linking.backend != "posix" else linking.bucket.name
            assert lay["file_uri"] == f"{bucket}/db/{root[2:19]}/{FILE_NAME}"
            assert d["layout"]["class"] == "H5D_CHUNKED"
            assert not any(k.startswith(f"d/{d['id'][20:]}/") and not k.endswith(".json")
                           for k in objects), f"{name}: chunk objects beside a linked layout"
    # HSDS's getContiguousLayout: whole rows while under 4 MiB, then halved (§5.5)
    assert named["contig_big"]["layout"]["dims"] == [1500, 2000]
    assert named["contig_f8"]["layout"]["dims"] == [40, 50]
    tables = {named[n]["creationProperties"]["layout"]["chunk_table"] for n in ("many", "dense")}
    assert set(others) == tables                # the chunk tables, linked from no group
    dense = named["dense"]["creationProperties"]["layout"]
    assert dense["hyper_dims"] == [4] and dense["dims"] == [16384]      # hsload's expandChunk
    assert "linked to the file" in linking.log()
    if linking.backend == "posix":
        assert objcheck.problems(linking.bucket, f"/{target}", fill_chunks="error") == []
    m2 = remount(linking, mount_bucket, tmp_path)
    rc, out = h5diff(src, m2.path(target))
    assert rc == 0, out


def store_gets(m):
    return json.loads(m.path(".h5osfs-stats").read_text())["store"]["requests"]["get"]


def test_hyper_chunks_are_read_in_a_few_requests(linking, mount_bucket, tmp_path):
    """hsload links a file's small chunks as the pieces of a larger chunk (5,000 chunks of 16
    bytes: 4,096 to a 64 KiB chunk, hyper_dims). Reading them cost a ranged GET per piece:
    5,000 requests, 10 s on s3rver. The pieces of a chunk lying together in the file are read
    with one GET now, and every value is still its own."""
    src = tmp_path / "hyper.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("dense", data=np.arange(20000, dtype="<i4") * 3 - 7, chunks=(4,))
    target = f"{HOME}/hyper.h5"
    shutil.copyfile(src, linking.path(target))
    root = root_of(linking, target)
    named, _ = datasets_by_path(root_objects(linking, root), root)
    lay = named["dense"]["creationProperties"]["layout"]
    assert lay["class"] == "H5D_CHUNKED_REF_INDIRECT" and lay["hyper_dims"] == [4], lay
    m = remount(linking, mount_bucket, tmp_path)
    with h5py.File(m.path(target), "r") as f:
        d = f["dense"]
        before = store_gets(m)
        got = d[()]
        gets = store_gets(m) - before
    assert np.array_equal(got, np.arange(20000, dtype="<i4") * 3 - 7)
    assert gets <= 8, f"{gets} GETs to read 2 chunks of 4,096 and 904 linked pieces"


def test_offsets_count_the_user_block(linking, tmp_path):
    """HDF5 addresses start after a user block; the linked offsets are file offsets."""
    src = tmp_path / "userblock.h5"
    make_linkable_file(src, userblock=1024, dense=False)
    target = f"{HOME}/userblock.h5"
    shutil.copyfile(src, linking.path(target))
    rc, out = h5diff(src, linking.path(target))
    assert rc == 0, out
    named, _ = datasets_by_path(root_objects(linking, root_of(linking, target)),
                                root_of(linking, target))
    assert named["gzip4"]["creationProperties"]["layout"]["class"] == "H5D_CHUNKED_REF"
    if linking.backend == "posix":
        assert objcheck.problems(linking.bucket, f"/{target}") == []


def normalised(d, ids):
    """A dataset JSON without what two loads of one file legitimately differ in."""
    d = json.loads(json.dumps(d))
    for k in ("id", "root", "created", "lastModified"):
        d.pop(k, None)
    lay = d.get("creationProperties", {}).get("layout", {})
    lay.pop("file_uri", None)
    if "chunk_table" in lay:
        lay["chunk_table"] = ids.get(lay["chunk_table"], "?")
    return d


def test_agrees_with_hsload_field_by_field(linking):
    """sample_link.h5, which the fixture holds as hsload --link (HSDS 0.9.4) stored it: every
    dataset and the chunk table agree with ours but for ids, times and the file's key."""
    target = f"{HOME}/sample_link_ours.h5"
    shutil.copyfile(SOURCE / "sample_link.h5", linking.path(target))
    root = root_of(linking, target)
    objects = root_objects(linking, root)
    ours, our_tables = datasets_by_path(objects, root)
    theirs_objects = {p.relative_to(FIXTURE_LINKED).as_posix(): p.read_bytes()
                      for p in FIXTURE_LINKED.rglob("*") if p.is_file()}
    fixture_root = json.loads((conftest.BUCKET / HOME / "sample_link.h5" / ".domain.json")
                              .read_text())["root"]
    theirs_objects[".group.json"] = (FIXTURE_LINKED / ".group.json").read_bytes()
    theirs, their_tables = datasets_by_path(theirs_objects, fixture_root)
    assert sorted(ours) == sorted(theirs)
    ids = {next(iter(our_tables)): "table", next(iter(their_tables)): "table"}
    for name in theirs:
        assert normalised(ours[name], ids) == normalised(theirs[name], ids), name
        assert list(ours[name]) == list(theirs[name]), name      # member order too
    ours_t, theirs_t = next(iter(our_tables.values())), next(iter(their_tables.values()))
    assert normalised(ours_t, ids) == normalised(theirs_t, ids)
    ours_chunk = objects[f"d/{ours_t['id'][20:]}/0_0"]
    assert ours_chunk == theirs_objects[f"d/{theirs_t['id'][20:]}/0_0"]


def test_rm_deletes_the_file_object(linking, mount_bucket, tmp_path):
    src = tmp_path / "gone.h5"
    make_linkable_file(src, dense=False)
    target = f"{HOME}/gone.h5"
    shutil.copyfile(src, linking.path(target))
    key = f"db/{root_of(linking, target)[2:19]}/{FILE_NAME}"
    assert linking.get(key) == src.read_bytes()
    os.unlink(linking.path(target))
    assert linking.unmount() == 0           # the collector finishes at unmount
    assert linking.get(key) is None


def test_replacement_stores_a_new_file(linking, tmp_path):
    src = tmp_path / "one.h5"
    make_linkable_file(src, dense=False)
    target = f"{HOME}/replaced.h5"
    shutil.copyfile(src, linking.path(target))
    old = root_of(linking, target)
    with h5py.File(src, "a") as f:
        f["contig_f8"][0, 0] = -5.0
    shutil.copyfile(src, linking.path(target))          # O_TRUNC: a replacement
    new = root_of(linking, target)
    assert new != old
    assert linking.get(f"db/{new[2:19]}/{FILE_NAME}") == src.read_bytes()
    assert h5diff(src, linking.path(target))[0] == 0


def test_r_plus_converts_what_it_writes_and_never_patches_the_file(linking, mount_bucket,
                                                                  tmp_path):
    src = tmp_path / "change.h5"
    make_linkable_file(src, dense=False)
    target = f"{HOME}/change.h5"
    shutil.copyfile(src, linking.path(target))
    old = root_of(linking, target)
    with h5py.File(linking.path(target), "r+") as f:
        f["gzip4"][3, 3] = -1.0
        f["contig_f8"][1, 1] = -2.0
        f.attrs["changed"] = 1
    new = root_of(linking, target)
    assert new != old
    expected = tmp_path / "expected.h5"
    shutil.copyfile(src, expected)
    with h5py.File(expected, "r+") as f:
        f["gzip4"][3, 3] = -1.0
        f["contig_f8"][1, 1] = -2.0
        f.attrs["changed"] = 1
    objects = root_objects(linking, new)
    named, _ = datasets_by_path(objects, new)
    cls = {n: d.get("creationProperties", {}).get("layout", {}).get("class")
           for n, d in named.items()}
    assert cls["gzip4"] == "H5D_CHUNKED" and cls["contig_f8"] == "H5D_CHUNKED"
    assert cls["many"] == "H5D_CHUNKED_REF_INDIRECT" and cls["sparse"] == "H5D_CHUNKED_REF"
    uri = named["many"]["creationProperties"]["layout"]["file_uri"]
    assert uri.endswith(f"/db/{new[2:19]}/{FILE_NAME}")     # the new root's copy
    assert objects[FILE_NAME] == src.read_bytes()           # never patched
    if linking.backend == "posix":
        assert objcheck.problems(linking.bucket, f"/{target}") == []
    m2 = remount(linking, mount_bucket, tmp_path)           # the old root is collected
    assert m2.get(f"db/{old[2:19]}/{FILE_NAME}") is None
    rc, out = h5diff(expected, m2.path(target))
    assert rc == 0, out


def test_copy_is_the_default(bucket_copy, mount_bucket, tmp_path):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    src = tmp_path / "copied.h5"
    make_linkable_file(src, dense=False)
    shutil.copyfile(src, m.path(f"{HOME}/copied.h5"))
    root = root_of(m, f"{HOME}/copied.h5")
    objects = root_objects(m, root)
    assert FILE_NAME not in objects
    assert not any(b"_REF" in v for k, v in objects.items() if k.endswith(".json"))
    assert h5diff(src, m.path(f"{HOME}/copied.h5"))[0] == 0


@pytest.mark.posix_only(reason="option parsing is the same on every backend")
def test_unknown_ingest_mode_is_refused(bucket_copy, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    rc, err = conftest.run_refused([conftest.h5osfs_bin(), "-f", "-o", "ingest=fast",
                                    str(bucket_copy), str(mnt)], None, mnt)
    assert rc != 0 and "ingest must be copy or link" in err


def test_r_plus_write_into_an_hsload_linked_dataset(linking, mount_bucket, tmp_path):
    """The fixture's hsload --link domain, one element written r+ into a linked gzip dataset of
    4 chunks: the dataset becomes an ordinary one holding every value (the 3 chunks not written
    come from the linked file), the others stay linked to hsload's file."""
    target = f"{HOME}/sample_link.h5"
    expected = tmp_path / "expected.h5"
    shutil.copyfile(linking.path(target), expected)
    for path in (linking.path(target), expected):
        with h5py.File(path, "r+") as f:
            f["chunked_4_gzip_f32"][3, 3] = -1.0
    rc, out = h5diff(expected, linking.path(target))
    assert rc == 0, out
    named, _ = datasets_by_path(root_objects(linking, root_of(linking, target)),
                                root_of(linking, target))
    lay = {n: d.get("creationProperties", {}).get("layout", {}) for n, d in named.items()}
    assert lay["chunked_4_gzip_f32"]["class"] == "H5D_CHUNKED"
    assert lay["chunked_6_i32"]["file_uri"] == "hsdstest/linked/sample_link.h5"
    m2 = remount(linking, mount_bucket, tmp_path)
    rc, out = h5diff(expected, m2.path(target))
    assert rc == 0, out


def is_linked(m, rel):
    return m.get(f"db/{root_of(m, rel)[2:19]}/{FILE_NAME}") is not None


def test_folder_xattr_chooses_and_is_inherited(bucket_copy, mount_bucket, tmp_path):
    """user.h5osfs.ingest on a folder decides for every file created below it, in subfolders
    too (made before or after), until a folder below says otherwise; the mount's -o ingest
    elsewhere. Kept in the folder's .domain.json, which stays a valid HSDS folder object."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    src = tmp_path / "x.h5"
    make_linkable_file(src, dense=False)
    top = f"{HOME}/linked"
    os.mkdir(m.path(top))
    os.mkdir(m.path(f"{top}/before"))
    assert os.listxattr(m.path(top)) == ["user.h5osfs.owner"]
    os.setxattr(m.path(top), "user.h5osfs.ingest", b"link")
    assert os.getxattr(m.path(top), "user.h5osfs.ingest") == b"link"
    assert sorted(os.listxattr(m.path(top))) == ["user.h5osfs.ingest", "user.h5osfs.owner"]
    os.mkdir(m.path(f"{top}/after"))
    os.mkdir(m.path(f"{top}/copied"))
    os.setxattr(m.path(f"{top}/copied"), "user.h5osfs.ingest", b"copy")
    for rel in (f"{top}/a.h5", f"{top}/before/b.h5", f"{top}/after/c.h5",
                f"{top}/copied/d.h5", f"{HOME}/e.h5"):
        shutil.copyfile(src, m.path(rel))
        assert h5diff(src, m.path(rel))[0] == 0, rel
    assert [is_linked(m, r) for r in (f"{top}/a.h5", f"{top}/before/b.h5",
                                      f"{top}/after/c.h5", f"{top}/copied/d.h5",
                                      f"{HOME}/e.h5")] == [True, True, True, False, False]
    folder = json.loads(m.get(f"{top}/.domain.json"))
    assert folder["h5osfs"] == {"ingest": "link"} and "root" not in folder
    assert list(folder)[:5] == ["owner", "acls", "created", "lastModified", "h5osfs"]
    os.removexattr(m.path(top), "user.h5osfs.ingest")
    assert "h5osfs" not in json.loads(m.get(f"{top}/.domain.json"))
    shutil.copyfile(src, m.path(f"{top}/f.h5"))
    assert not is_linked(m, f"{top}/f.h5")
    if m.backend == "posix":
        assert objcheck.problems(m.bucket, f"/{top}/copied") == []


def test_folder_xattr_refusals(bucket_copy, mount_bucket, tmp_path):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    folder = m.path(f"{HOME}/refusals")
    os.mkdir(folder)
    with pytest.raises(OSError) as e:
        os.setxattr(folder, "user.h5osfs.ingest", b"fast")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        os.setxattr(m.path(f"{HOME}/sample1.h5"), "user.h5osfs.ingest", b"link")
    assert e.value.errno == errno.ENOTSUP           # a domain: per folder only
    with pytest.raises(OSError) as e:
        os.removexattr(folder, "user.h5osfs.ingest")
    assert e.value.errno == errno.ENODATA
    with pytest.raises(OSError) as e:
        os.getxattr(folder, "user.h5osfs.ingest")
    assert e.value.errno == errno.ENODATA
    os.setxattr(folder, "user.h5osfs.ingest", b"copy", os.XATTR_CREATE)
    with pytest.raises(OSError) as e:
        os.setxattr(folder, "user.h5osfs.ingest", b"link", os.XATTR_CREATE)
    assert e.value.errno == errno.EEXIST
    with pytest.raises(OSError) as e:
        os.setxattr(folder, "user.other", b"x")
    assert e.value.errno == errno.ENOTSUP           # no other attribute is kept (none of HSDS's)
    # the fixture's /home is the admin's: test_user1 may not change it
    with pytest.raises(OSError) as e:
        os.setxattr(m.path("home"), "user.h5osfs.ingest", b"link")
    assert e.value.errno == errno.EACCES


@pytest.mark.posix_only(reason="kills the daemon and looks at the bucket directory; the "
                        "commit protocol is the same code on both backends")
@pytest.mark.parametrize("stage", ["chunks", "root"])
def test_killed_linked_commit_leaves_no_file_behind(bucket_copy, tmp_path, stage):
    """Killed after the file was put (with the chunks), or after the root group: the next
    mount commits the staged file again, linked, and the interrupted root, its file object
    with it, is collected."""
    src = tmp_path / "crash.h5"
    make_linkable_file(src, dense=False)
    mnt, cache, target = tmp_path / "mnt", tmp_path / "cache", f"{HOME}/crash.h5"
    mnt.mkdir()
    opts = ("-o", f"user=test_user1,ttl=0,ingest=link,cache_dir={cache}")

    def start(log, env):
        return conftest.Mount(conftest.MountSource("posix", bucket_copy, bucket_copy,
                                                   env=dict(os.environ, **env)),
                              mnt, tmp_path / log, opts)

    m = start("1.log", {"H5OSFS_TEST_CRASH_AT": stage})
    with pytest.raises(OSError):
        shutil.copyfile(src, m.path(target))
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    files = {p.parent.name for p in (bucket_copy / "db").glob(f"*/{FILE_NAME}")}
    assert len(files) == 1                      # the interrupted root's
    m = start("2.log", {})
    rc, out = h5diff(src, m.path(target))
    assert rc == 0, out
    assert is_linked(m, target)
    assert m.unmount() == 0                     # the collector drains at unmount
    live = {json.loads(p.read_text()).get("root", "")[2:19]
            for p in bucket_copy.rglob(".domain.json")}
    assert {p.parent.name for p in (bucket_copy / "db").glob(f"*/{FILE_NAME}")} <= live
    assert {p.name for p in (bucket_copy / "db").iterdir()} <= live


def make_other_file(path):
    with h5py.File(path, "w") as f:
        f.create_dataset("other", data=np.arange(4000, dtype="<f8"))


def test_local_bucket_keeps_the_staged_file_itself(linking, tmp_path):
    """On a local bucket the staged file becomes the object (a hard link): no second copy of
    the bytes. Seen while the writer still holds it open: one inode, an object's mode."""
    if linking.backend != "posix":
        pytest.skip("a hard link is a local bucket's way")
    src = tmp_path / "kept.h5"
    make_linkable_file(src, dense=False)
    target = f"{HOME}/kept.h5"
    fd = os.open(linking.path(target), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, src.read_bytes())
        os.fsync(fd)                                    # the commit
        obj = linking.bucket / "db" / root_of(linking, target)[2:19] / FILE_NAME
        staged = list((tmp_path / "cache" / "staging").glob("*.h5"))
        assert len(staged) == 1
        assert os.stat(obj).st_ino == os.stat(staged[0]).st_ino
        assert os.stat(obj).st_mode & 0o777 == 0o644
    finally:
        os.close(fd)
    assert obj.read_bytes() == src.read_bytes()
    # the staged name goes at the release, which the kernel sends after close() returned
    deadline = time.monotonic() + 10
    while os.stat(obj).st_nlink != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.stat(obj).st_nlink == 1


@pytest.mark.parametrize("change", ["write", "truncate"])
def test_writes_after_a_linked_commit_never_change_the_stored_file(linking, mount_bucket,
                                                                    tmp_path, change):
    """A handle kept open after its commit (fsync, then more writes, or a truncation and new
    content) must not change the stored file in place: the staged file is copied first."""
    src, other = tmp_path / "first.h5", tmp_path / "second.h5"
    make_linkable_file(src, dense=False)
    make_other_file(other)
    target = f"{HOME}/rewritten.h5"
    fd = os.open(linking.path(target), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, src.read_bytes())
        os.fsync(fd)
        first = root_of(linking, target)
        key = f"db/{first[2:19]}/{FILE_NAME}"
        if change == "write":
            os.pwrite(fd, b"\xff" * 4096, 0)            # no HDF5 file any more, for now
            os.pwrite(fd, b"\xee" * 4096, 1 << 20)
        else:
            os.ftruncate(fd, 0)
        assert linking.get(key) == src.read_bytes()     # the committed version, untouched
        data = other.read_bytes()
        os.ftruncate(fd, len(data))
        os.pwrite(fd, data, 0)
        assert linking.get(key) == src.read_bytes()
    finally:
        os.close(fd)                                    # commits the second content
    assert root_of(linking, target) != first
    rc, out = h5diff(other, linking.path(target))
    assert rc == 0, out
    m2 = remount(linking, mount_bucket, tmp_path)
    rc, out = h5diff(other, m2.path(target))
    assert rc == 0, out
