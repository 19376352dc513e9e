"""Writing domains (issue 5): cp and h5py into a real mount, staged locally and committed as
HSDS objects on close/fsync; read back through the mount (live and after a remount) and
compared with the source by h5diff and h5py; replacements, in-place changes, bad bytes,
rights, concurrent writers, and a kill -9 at every stage of a commit."""
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest

import conftest
import harness
import objcheck
from conftest import SOURCE, Mount, MountSource, is_mounted

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
SAMPLES = sorted(p.name for p in SOURCE.glob("sample*.h5"))


def h5diff(a, b, *opts):
    r = subprocess.run(["h5diff", *opts, str(a), str(b)], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def assert_equal_files(a, b):
    rc, out = h5diff(a, b)
    assert rc == 0, out[-3000:]


def make_rich_file(path):
    """One file with much of what HDF5 users store: groups, links of every kind, committed
    types, references, attributes of many types, fill values, chunked+gzip, contiguous, compact,
    scalar, empty and resizable datasets."""
    with h5py.File(path, "w", track_order=True) as f:
        g = f.create_group("grp/sub")
        f.attrs["title"] = "rich file"
        f.attrs["version"] = np.int16(3)
        f.attrs["vec"] = np.arange(4, dtype="<f8")
        g.attrs["utf8"] = "héllo"
        x = np.linspace(0, 1, 300 * 400, dtype="<f4").reshape(300, 400)
        f.create_dataset("grp/gz", data=x, chunks=(64, 100), compression="gzip",
                         compression_opts=4, shuffle=True)
        f.create_dataset("contig_be", data=np.arange(1000, dtype=">i4"))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        sid = h5py.h5s.create_simple((10,))
        h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_U8LE, sid, dcpl=dcpl).write(
            h5py.h5s.ALL, h5py.h5s.ALL, np.arange(10, dtype="u1"))
        f.create_dataset("scalar", data=np.float64(2.5))
        f.create_dataset("empty", shape=(0,), dtype="i8", maxshape=(None,))
        f.create_dataset("fill", shape=(50, 50), dtype="i4", chunks=(10, 10), fillvalue=-7)
        f["fill"][0:5, 0:5] = 1
        sparse = f.create_dataset("sparse", shape=(2000, 3000), dtype="<i4", chunks=(50, 50),
                                  fillvalue=11)      # a few chunks written: listed, not scanned
        sparse[0, 0] = 1
        sparse[1234:1300, 2990:3000] = 2
        sparse[1999, 2999] = 3
        f.create_dataset("resizable", data=np.arange(20, dtype="i2"), maxshape=(None,),
                         chunks=(8,))
        comp = np.dtype([("id", "<i4"), ("val", "<f8"), ("tag", "S6")])
        f["ctype"] = comp
        f.create_dataset("table", data=np.array([(i, i / 2, b"t%d" % i) for i in range(30)],
                                                dtype=comp), dtype=f["ctype"])
        f.create_dataset("vlen_str", data=["a", "bb", "ccc", ""],
                         dtype=h5py.string_dtype())
        f.create_dataset("fixed_str", data=np.array([b"ab", b"cde"], dtype="S5"))
        f.create_dataset("enum", data=np.array([0, 1, 2, 1], dtype="i1"),
                         dtype=h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 2}, "i1"))
        f.create_dataset("bools", data=np.array([True, False, True]))
        f.create_dataset("arr", data=np.zeros((3,), dtype=np.dtype(("<i4", (2, 2)))))
        f.create_dataset("vlen_int", data=[np.arange(i, dtype="i4") for i in range(5)],
                         dtype=h5py.vlen_dtype("i4"))
        refs = f.create_dataset("refs", shape=(2,), dtype=h5py.ref_dtype)
        refs[0] = f["grp/gz"].ref
        refs[1] = f["grp"].ref
        f.attrs["ref_attr"] = f["table"].ref
        f["soft"] = h5py.SoftLink("/grp/gz")
        f["dangling"] = h5py.SoftLink("/nowhere")
        f["ext"] = h5py.ExternalLink("other.h5", "/x")
        f["hard_again"] = f["contig_be"]


@pytest.fixture
def writable(bucket_copy, mount_bucket, tmp_path):
    """A read-write mount of a copy of the fixture bucket as test_user1."""
    return mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")


def wait_for(cond, timeout=10):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def staged_files(tmp_path):
    d = tmp_path / "cache" / "staging"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def remount(m, mount_bucket, tmp_path):
    assert m.unmount() == 0
    return mount_bucket(m, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")


def test_cp_stores_domains_equal_to_their_sources(writable, mount_bucket, tmp_path):
    rich = tmp_path / "rich.h5"
    make_rich_file(rich)
    sources = [SOURCE / s for s in SAMPLES] + [rich]
    os.mkdir(writable.path(f"{HOME}/new"))
    for src in sources:
        subprocess.run(["cp", str(src), str(writable.path(f"{HOME}/new/{src.name}"))],
                       check=True)
    wait_for(lambda: staged_files(tmp_path) == [])  # committed at close, dropped at release
    for src in sources:
        assert_equal_files(src, writable.path(f"{HOME}/new/{src.name}"))
    if writable.backend == "posix":     # the objects, field by field against the spec
        for src in sources:
            assert objcheck.problems(writable.bucket, f"/{HOME}/new/{src.name}",
                                     fill_chunks="error") == []
    m2 = remount(writable, mount_bucket, tmp_path)
    assert sorted(os.listdir(m2.path(f"{HOME}/new"))) == sorted(s.name for s in sources)
    for src in sources:
        assert_equal_files(src, m2.path(f"{HOME}/new/{src.name}"))
    with h5py.File(m2.path(f"{HOME}/new/rich.h5"), "r") as f:
        assert f["table"].dtype.names == ("id", "val", "tag")
        assert f["fill"][40, 40] == -7 and f["fill"][0, 0] == 1
        assert f[f["refs"][0]].name == "/grp/gz" and f[f.attrs["ref_attr"]].name == "/table"
        assert f["soft"].name == "/soft" and f.get("dangling", getlink=True).path == "/nowhere"
        assert f.get("ext", getlink=True).filename == "other.h5"
        assert f["ctype"].dtype == f["table"].dtype
        assert f["hard_again"].id == f["contig_be"].id
        assert list(f.attrs) == ["title", "version", "vec", "ref_attr"]


def test_h5py_creates_then_changes_it(writable, mount_bucket, tmp_path):
    """An r+ change is a new version: a new root (swapped in at once for every reader of the
    bucket), whose values are the changed ones, after a remount too."""
    path = writable.path(f"{HOME}/new.h5")
    with h5py.File(path, "w") as f:
        f["x"] = [1, 2, 3]
    with h5py.File(path, "r") as f:
        assert list(f["x"][:]) == [1, 2, 3]
    root = os.getxattr(path, "user.h5osfs.root")
    with h5py.File(path, "r+") as f:
        f["x"][0] = 9
        f.attrs["note"] = "changed"
    assert os.getxattr(path, "user.h5osfs.root") != root       # a new version
    with h5py.File(path, "r") as f:
        assert list(f["x"][:]) == [9, 2, 3] and f.attrs["note"] == "changed"
    m2 = remount(writable, mount_bucket, tmp_path)
    with h5py.File(m2.path(f"{HOME}/new.h5"), "r") as f:
        assert list(f["x"][:]) == [9, 2, 3] and f.attrs["note"] == "changed"


def test_a_change_moves_the_mtime_and_keeps_the_ctime(writable):
    """make, rsync -u and backups go by mtime: an r+ change and a cp over a domain move it
    (the .domain.json's lastModified); created (ctime) stays the domain's creation."""
    path = writable.path(f"{HOME}/sample1.h5")
    before = os.stat(path)
    t0 = time.time()
    with h5py.File(path, "r+") as f:
        f.attrs["touched"] = 1
    after_change = os.stat(path)
    assert t0 - 1 <= after_change.st_mtime <= time.time() + 1
    assert after_change.st_mtime > before.st_mtime
    assert after_change.st_ctime == before.st_ctime
    time.sleep(0.05)
    shutil.copyfile(SOURCE / "sample2.h5", path)
    after_cp = os.stat(path)
    assert after_cp.st_mtime > after_change.st_mtime and after_cp.st_ctime == before.st_ctime


FIXTURE_DOMAINS = sorted(p.name for p in (conftest.BUCKET / HOME).iterdir()
                         if p.name.endswith(".h5"))


@pytest.mark.parametrize("name", FIXTURE_DOMAINS)
def test_change_of_an_hsds_domain_keeps_what_did_not_change(writable, mount_bucket, tmp_path,
                                                              name):
    """Every domain HSDS wrote (blosc with zlib, zstd or lz4, linked layouts with a chunk
    table, missing chunks), changed r+ and changed back: the new version reads the same as the
    old one; its unchanged chunks are copied in the store (not re-encoded), its objects are
    valid HSDS objects, and linked datasets stay linked."""
    path = writable.path(f"{HOME}/{name}")
    before = tmp_path / f"before-{name}"
    shutil.copyfile(path, before)
    root = os.getxattr(path, "user.h5osfs.root")
    with h5py.File(path, "r+") as f:
        f.attrs["h5osfs-test"] = 1
        del f.attrs["h5osfs-test"]
    assert os.getxattr(path, "user.h5osfs.root") != root
    m2 = remount(writable, mount_bucket, tmp_path)
    assert_equal_files(before, m2.path(f"{HOME}/{name}"))
    done = [l for l in writable.log().splitlines() if f"/{name}: committed" in l]
    assert len(done) == 1, done
    written, copied = (int(re.search(rf"(\d+) {what}", done[0]).group(1))
                       for what in ("chunks written", "chunks copied in the store"))
    # only chunks the file holds as values (variable-length and scalar data) are written again
    assert copied > 0 and written <= 5, (written, copied)
    if writable.backend == "posix":
        assert objcheck.problems(writable.bucket, f"/{HOME}/{name}") == []
        if "link" in name:
            new_root = os.getxattr(m2.path(f"{HOME}/{name}"), "user.h5osfs.root").decode()
            layouts = [json.loads(p.read_text()).get("creationProperties", {}).get("layout", {})
                       for p in (writable.bucket / "db" / new_root[2:19]).rglob(".dataset.json")]
            assert any("_REF" in l.get("class", "") for l in layouts)


def chunk_files(db):
    """{key below db/<A-B>/: inode} of a root's chunk objects (not its JSON)."""
    return {p.relative_to(db).as_posix(): p.stat().st_ino for p in db.rglob("*")
            if p.is_file() and not p.name.endswith(".json") and not conftest.is_put_under_way(p)}


@pytest.mark.posix_only(reason="compares the inodes of the bucket directory's files")
def test_change_copies_unchanged_chunks_in_the_store(bucket_copy, mount_bucket, tmp_path):
    """One element changed r+ in a dataset of 16 chunks: the new root's chunks are the old
    root's files (hard links: no byte copied) but the one changed, which is new; every object
    keeps its id's last 16 digits; the old root goes to the collector."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    path = m.path(f"{HOME}/change.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("big", data=np.arange(4 * 1024 * 1024, dtype="<f4"),
                         chunks=(262144,))
        f.create_dataset("small", data=np.arange(10))
    old_root = os.getxattr(path, "user.h5osfs.root").decode()
    old = chunk_files(bucket_copy / "db" / old_root[2:19])
    assert len(old) == 17
    with h5py.File(path, "r+") as f:
        f["big"][5] = -1.0
    new_root = os.getxattr(path, "user.h5osfs.root").decode()
    assert new_root != old_root
    new = chunk_files(bucket_copy / "db" / new_root[2:19])
    assert sorted(new) == sorted(old)           # the same ids' digits, the same chunk keys
    fresh = [k for k in new if new[k] != old[k]]
    assert len(fresh) == 1, fresh
    assert "chunks copied in the store" in m.log()
    with h5py.File(path, "r") as f:
        assert f["big"][5] == -1.0 and f["big"][6] == 6.0
        assert list(f["small"][:]) == list(range(10))


def test_replacement_readers_see_old_or_new(writable, tmp_path):
    target = writable.path(f"{HOME}/target.h5")
    shutil.copyfile(SOURCE / "sample1.h5", target)
    old_bytes = target.read_bytes()
    old_root = os.getxattr(target, "user.h5osfs.root")
    with open(target, "rb") as reader:
        shutil.copyfile(SOURCE / "sample3.h5", target)     # O_TRUNC: a replacement
        assert os.getxattr(target, "user.h5osfs.root") != old_root
        assert reader.read() == old_bytes                   # the open version, whole
    assert_equal_files(SOURCE / "sample3.h5", target)


def test_trunc_open_beside_an_open_writer_changes_nothing_unless_written(writable):
    """A second O_TRUNC open shares the path's staged file: it empties it, as a first one
    would start empty, and an empty file is no change (nothing committed, no EINVAL)."""
    path = writable.path(f"{HOME}/sample1.h5")
    before = path.read_bytes()
    keep = os.open(path, os.O_RDWR)
    os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
    os.close(keep)
    assert path.read_bytes() == before
    with open(path, "r+b") as f:            # a write after the truncation is a replacement
        f.truncate(0)
        f.write((SOURCE / "sample3.h5").read_bytes())
    assert_equal_files(SOURCE / "sample3.h5", path)


def test_truncate_after_the_last_close_is_a_change_of_its_own(writable):
    """truncate(2) after a writer's last close is not that writer's: its release, which comes
    after close() returned, is held back here by a process that inherited the descriptor and
    never uses it. The truncate to 0 is refused (EINVAL: an empty file is no HDF5 file) and
    the domain stays as it was."""
    path = writable.path(f"{HOME}/sample1.h5")
    before = path.read_bytes()
    fd = os.open(path, os.O_WRONLY)
    holder = subprocess.Popen(["sleep", "600"], pass_fds=[fd], stdin=subprocess.DEVNULL)
    try:
        os.close(fd)
        with pytest.raises(OSError) as e:
            os.truncate(path, 0)
        assert e.value.errno == errno.EINVAL
    finally:
        holder.kill()
        holder.wait()
    assert path.read_bytes() == before


def test_workloads_random_writes_and_appends(writable, tmp_path):
    """The same h5py operations on a local file and on the mount give equal files."""
    local = tmp_path / "local.h5"
    mounted = writable.path(f"{HOME}/work.h5")
    rng = np.random.default_rng(7)
    for path in (local, mounted):
        with h5py.File(path, "w") as f:
            f.create_dataset("log", shape=(0, 3), maxshape=(None, 3), chunks=(64, 3), dtype="f8")
            f.create_dataset("grid", shape=(200, 300), chunks=(50, 50), dtype="i4", fillvalue=3)
    ops = [(int(rng.integers(0, 200)), int(rng.integers(0, 300)), int(rng.integers(-99, 99)))
           for _ in range(40)]
    for round_ in range(3):
        for path in (local, mounted):
            with h5py.File(path, "r+") as f:
                log = f["log"]
                n = log.shape[0]
                log.resize((n + 50, 3))
                log[n:] = np.arange(150, dtype="f8").reshape(50, 3) + round_
                for i, j, v in ops[round_ * 10:(round_ + 1) * 10]:
                    f["grid"][i, j] = v
    assert_equal_files(local, mounted)


def test_concurrent_writers_to_different_domains(writable, tmp_path):
    errors = []

    def copy(i):
        try:
            src = SOURCE / SAMPLES[i % len(SAMPLES)]
            shutil.copyfile(src, writable.path(f"{HOME}/par{i}.h5"))
        except Exception as e:          # reported by the assertion below
            errors.append(repr(e))

    threads = [threading.Thread(target=copy, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(6):
        assert_equal_files(SOURCE / SAMPLES[i % len(SAMPLES)], writable.path(f"{HOME}/par{i}.h5"))


def test_bytes_that_are_not_hdf5_are_refused_and_kept(writable, tmp_path):
    path = writable.path(f"{HOME}/notes.h5")
    f = open(path, "wb")
    f.write(b"these are not the bytes of an HDF5 file\n")
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.EINVAL
    assert not path.exists()
    rejected = tmp_path / "cache" / "rejected"
    wait_for(lambda: list(rejected.iterdir()))      # moved at release, which close() does not await
    kept = list(rejected.iterdir())
    assert [p.read_bytes() for p in kept] == [b"these are not the bytes of an HDF5 file\n"]
    wait_for(lambda: f"kept as {kept[0]}" in writable.log())    # logged once it is moved
    wait_for(lambda: staged_files(tmp_path) == [])


def test_no_staging_without_rights(bucket_copy, mount_bucket, tmp_path):
    ro = mount_bucket(bucket_copy, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/cache")
    with pytest.raises(OSError) as e:
        open(ro.path(f"{HOME}/new.h5"), "wb")
    assert e.value.errno == errno.EROFS
    intruder = mount_bucket(bucket_copy, "-o", f"user=intruder,cache_dir={tmp_path}/cache")
    for target in (f"{HOME}/new.h5", f"{HOME}/sample1.h5"):
        with pytest.raises(PermissionError):
            open(intruder.path(target), "r+b" if "sample" in target else "wb")
    wait_for(lambda: staged_files(tmp_path) == [])


# ---- one daemon per cache_dir ----

def start_second(m, mnt, *opts):
    """Starts another daemon (-f) on what Mount m mounts, which must be refused: -> (status,
    stderr)."""
    cmd = [conftest.h5osfs_bin(), "-f", *opts, *m.src.args, m.src.source, mnt]
    return conftest.run_refused(cmd, m.src.env, mnt, timeout=15)


# A writer of its own: a descriptor this test process held would be inherited by the second
# daemon's fork and closed at its exec, a FUSE flush that commits the half-written file.
HALF_WRITER = r"""
import os, sys
data = open(sys.argv[2], "rb").read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
def write_all(b):
    while b:
        b = b[os.write(fd, b):]
write_all(data[:len(data) // 2])
print("half written", flush=True)
sys.stdin.readline()
write_all(data[len(data) // 2:])
try:
    os.close(fd)
    print("closed")
except OSError as e:
    print(f"close failed: errno {e.errno}")
"""


def test_second_daemon_on_a_cache_dir_is_refused_and_the_first_keeps_writing(writable,
                                                                               tmp_path):
    """Issue 12: a second daemon's recovery committed the first one's open file and removed
    its staging (the first writer's close() failed with EINVAL). A cache_dir is one daemon's."""
    src = SOURCE / "sample3.h5"
    target = writable.path(f"{HOME}/written-during.h5")
    mnt = tmp_path / "second"
    mnt.mkdir()
    cache = tmp_path / "cache"
    writer = subprocess.Popen([sys.executable, "-c", HALF_WRITER, str(target), str(src)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "half written\n"
        staged = staged_files(tmp_path)
        assert len(staged) == 1
        rc, err = start_second(writable, mnt, "-o", f"user=test_user1,ttl=0,cache_dir={cache}")
        assert rc == 1, err
        lines = err.splitlines()
        assert len(lines) == 1, lines
        assert f"cache_dir '{cache}' is in use" in lines[0], lines[0]
        assert f"pid {writable.proc.pid}" in lines[0], lines[0]
        assert staged_files(tmp_path) == staged         # nothing recovered, nothing removed
        out, _ = writer.communicate("go\n", timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert out == "closed\n", out                      # committed: no EINVAL
    assert_equal_files(src, target)
    wait_for(lambda: staged_files(tmp_path) == [])
    assert not os.listdir(mnt)


def test_read_only_mount_beside_a_writer_on_its_cache_dir(writable, mount_bucket, tmp_path):
    """A read-only mount never uses cache_dir: it takes no lock, is not refused, and does not
    take the writer's (a further writer is still refused, naming the first)."""
    cache = tmp_path / "cache"
    ro = mount_bucket(writable, "-o", f"user=test_user1,ro,ttl=0,cache_dir={cache}")
    shutil.copyfile(SOURCE / "sample1.h5", writable.path(f"{HOME}/from-writer.h5"))
    assert_equal_files(SOURCE / "sample1.h5", ro.path(f"{HOME}/from-writer.h5"))
    mnt = tmp_path / "third"
    mnt.mkdir()
    rc, err = start_second(writable, mnt, "-o", f"user=test_user1,cache_dir={cache}")
    assert rc == 1 and f"pid {writable.proc.pid}" in err, err
    assert (cache / "lock").read_text().strip() == str(writable.proc.pid)


# ---- crashes ----

STAGES = ["committing", "chunks", "metadata", "root", "domain"]


def crash_mount(bucket, mnt, log, cache, env_extra):
    env = dict(os.environ, **env_extra)
    return Mount(MountSource("posix", bucket, bucket, env=env), mnt, log,
                 ("-o", f"user=test_user1,ttl=0,cache_dir={cache}"))


def live_roots(bucket):
    roots = set()
    for p in bucket.rglob(".domain.json"):
        root = json.loads(p.read_text()).get("root")
        if root:
            roots.add(root[2:19])
    return roots


@pytest.mark.posix_only(reason="looks for leftover roots in the bucket directory; the commit "
                        "protocol is the same code on both backends")
@pytest.mark.parametrize("replace", [False, True], ids=["new", "replace"])
@pytest.mark.parametrize("stage", STAGES)
def test_kill_at_each_commit_stage(bucket_copy, backend, tmp_path, stage, replace):
    cache = tmp_path / "cache"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    target = f"{HOME}/crash.h5"
    if replace:
        m = crash_mount(bucket_copy, mnt, tmp_path / "0.log", cache, {})
        shutil.copyfile(SOURCE / "sample1.h5", m.path(target))
        harness.assert_clean([m])
    m = crash_mount(bucket_copy, mnt, tmp_path / "1.log", cache, {"H5OSFS_TEST_CRASH_AT": stage})
    with pytest.raises(OSError):
        shutil.copyfile(SOURCE / "sample2.h5", m.path(target))
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert not is_mounted(mnt)
    # no staged byte lost: the whole file waits in the staging area
    staged = list((cache / "staging").iterdir())
    assert [p.read_bytes() for p in staged] == [(SOURCE / "sample2.h5").read_bytes()]
    m = crash_mount(bucket_copy, mnt, tmp_path / "2.log", cache, {})
    assert_equal_files(SOURCE / "sample2.h5", m.path(target))
    harness.assert_clean([m])                     # the collector drains at unmount
    assert list((cache / "staging").iterdir()) == []
    assert list((cache / "journal").iterdir()) == []
    on_disk = {p.name for p in (bucket_copy / "db").iterdir()}
    assert on_disk == live_roots(bucket_copy), "objects of undone or replaced roots remain"


CHANGE_STAGES = ["committing", "chunks", "metadata", "root", "domain"]
CHANGE_EVERYTHING = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    f["x"][...] = -np.arange(64 * 4096, dtype="<i8")
    f.attrs["v"] = "new"
"""


def read_version(path):
    """(attribute v, every value) of the domain file at path."""
    with h5py.File(path, "r") as f:
        return f.attrs["v"], f["x"][...]


@pytest.mark.posix_only(reason="kills the daemon and looks at the bucket directory; the "
                        "commit protocol is the same code on both backends")
@pytest.mark.parametrize("stage", CHANGE_STAGES)
def test_change_killed_at_each_stage_is_never_seen_torn(bucket_copy, tmp_path, stage):
    """An r+ change of every chunk and an attribute, the daemon killed at each stage of its
    commit: another mount (another cache_dir, which recovers nothing) reads the old version
    whole until the .domain.json swap and the new one whole after it; HSDS's objects are valid
    all along; the writer's cache_dir then commits the change, and only live roots remain."""
    cache, other = tmp_path / "cache", tmp_path / "other"
    mnt, mnt2 = tmp_path / "mnt", tmp_path / "mnt2"
    mnt.mkdir()
    mnt2.mkdir()
    target = f"{HOME}/change.h5"
    old_x, new_x = np.arange(64 * 4096, dtype="<i8"), -np.arange(64 * 4096, dtype="<i8")
    m = crash_mount(bucket_copy, mnt, tmp_path / "0.log", cache, {})
    with h5py.File(m.path(target), "w") as f:
        f.create_dataset("x", data=old_x, chunks=(4096,))
        f.attrs["v"] = "old"
    harness.assert_clean([m])
    m = crash_mount(bucket_copy, mnt, tmp_path / "1.log", cache, {"H5OSFS_TEST_CRASH_AT": stage})
    # in a child: h5py may crash when the close that commits dies with the daemon
    subprocess.run([sys.executable, "-c", CHANGE_EVERYTHING, str(m.path(target))],
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert objcheck.problems(bucket_copy, f"/{target}") == []
    seen = crash_mount(bucket_copy, mnt2, tmp_path / "2.log", other, {})
    v, x = read_version(seen.path(target))
    want_v, want_x = ("new", new_x) if stage == "domain" else ("old", old_x)
    assert v == want_v and np.array_equal(x, want_x), f"{v}: a torn version"
    harness.assert_clean([seen])
    m = crash_mount(bucket_copy, mnt, tmp_path / "3.log", cache, {})
    v, x = read_version(m.path(target))
    assert v == "new" and np.array_equal(x, new_x)
    harness.assert_clean([m])                     # the collector drains at unmount
    assert list((cache / "journal").iterdir()) == []
    on_disk = {p.name for p in (bucket_copy / "db").iterdir()}
    assert on_disk == live_roots(bucket_copy), "objects of undone or replaced roots remain"
    assert objcheck.problems(bucket_copy, f"/{target}") == []


# ---- a store that fails ----

@pytest.fixture
def small_bucket(tmp_path):
    """A bucket on a 1 MiB tmpfs (with a home folder for test_user1): puts fail with ENOSPC
    once it is full. Mounting a tmpfs needs root (CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    fs = tmp_path / "small"
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(fs)], check=True)
    bucket = fs / "hsdstest"
    for folder in ("home", HOME):
        (bucket / folder).mkdir(parents=True)
        shutil.copyfile(conftest.BUCKET / folder / ".domain.json",
                        bucket / folder / ".domain.json")
    yield fs, bucket
    subprocess.run(["umount", "-l", str(fs)], check=False)


@pytest.mark.posix_only(reason="fills a local filesystem; S3 stores do not fill up")
def test_full_bucket_fails_close_keeps_bytes_and_commits_at_next_mount(small_bucket, backend,
                                                                        mount_bucket, tmp_path):
    fs, bucket = small_bucket
    args = ("-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    m = mount_bucket(bucket, *args)
    target = m.path(f"{HOME}/big.h5")
    src = SOURCE / "sample2.h5"          # 3.5 MiB of chunks: more than the bucket holds
    with pytest.raises(OSError) as e:
        shutil.copyfile(src, target)
    assert e.value.errno == errno.ENOSPC
    assert not target.exists()           # nothing half-made is visible
    assert "No space left on device" in m.log()
    assert m.unmount() == 0              # the partial root is collected at unmount
    left = sorted(str(p.relative_to(bucket)) for p in bucket.rglob("*"))
    assert left == ["home", "home/.domain.json", HOME, f"{HOME}/.domain.json"], left
    staged = list((tmp_path / "cache" / "staging").iterdir())
    assert [p.read_bytes() for p in staged] == [src.read_bytes()]   # kept for the retry
    subprocess.run(["mount", "-o", "remount,size=64m", str(fs)], check=True)
    m2 = mount_bucket(bucket, *args)     # recovery commits what was kept
    assert_equal_files(src, m2.path(f"{HOME}/big.h5"))
    assert staged_files(tmp_path) == []
    assert "committed at the next mount" in m.log()


def native_attr_order(obj):
    """Attribute names in the order the object header holds them (ncdump lists them so)."""
    names = []
    h5py.h5a.iterate(obj.id, lambda n: names.append(n.decode()), index_type=h5py.h5.INDEX_NAME,
                     order=h5py.h5.ITER_NATIVE)
    return names


def test_attribute_order_is_kept(writable, tmp_path):
    """Attributes made in an order that is not their names' (a netCDF file's _FillValue,
    units, long_name ...) are listed in that order through the mount, untracked (native
    order) and tracked (creation order), also past HDF5's 8 compact attributes."""
    src = tmp_path / "order.h5"
    names = ["zeta", "units", "alpha", "long_name", "mid", "b", "a9", "a10", "x", "c", "_q"]
    with h5py.File(src, "w") as f:
        plain = f.create_dataset("plain", data=np.arange(4))
        for i, n in enumerate(names[:5]):
            plain.attrs[n] = i
        tracked = f.create_dataset("tracked", data=np.arange(4), track_order=True)
        for i, n in enumerate(names):
            tracked.attrs[n] = i
        g = f.create_group("g", track_order=True)
        for i, n in enumerate(reversed(names)):
            g.attrs[n] = i
    shutil.copyfile(src, writable.path(f"{HOME}/order.h5"))
    with h5py.File(src, "r") as want, h5py.File(writable.path(f"{HOME}/order.h5"), "r") as got:
        assert native_attr_order(got["plain"]) == native_attr_order(want["plain"]) == names[:5]
        assert native_attr_order(got["tracked"]) == names
        assert list(got["g"].attrs) == list(want["g"].attrs) == list(reversed(names))


@pytest.mark.posix_only(reason="the kernel's attributes of a file being written: the same on "
                        "every store")
@pytest.mark.parametrize("read_between", [False, True], ids=["w_w", "w_read_w"])
def test_h5py_w_over_a_domain_with_the_default_ttl(bucket_copy, mount_bucket, tmp_path,
                                                   read_between):
    """h5py's "w" over a domain opens it with O_TRUNC, then HDF5 takes the file's size from
    fstat. The kernel keeps a domain's attributes for ttl, so the writer's fstat must show its
    own staged file (empty), not the version it replaces: else HDF5 looks for a superblock in
    an empty file ("file signature not found", the old build). With a reader between the two
    writes the writer also gets a node of its own."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,cache_dir={tmp_path}/cache")
    path = m.path(f"{HOME}/w.h5")
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(10)
    if read_between:
        with h5py.File(path, "r") as f:
            assert np.array_equal(f["a"][()], np.arange(10))
    with h5py.File(path, "w") as f:
        f["b"] = np.ones(5)
    with h5py.File(path, "r") as f:
        assert sorted(f) == ["b"]
        assert np.array_equal(f["b"][()], np.ones(5))
