"""Issue 26, goals G1 and G2 with -o versions_current=ref (doc/versions.md §2 B): the current
.domain.json names the head version itself (REF_INDIRECT over the domain's pool), no plain
root is kept beside it, and an r+ stores only what changed: the chunks the writer did not
change are named in the new version as the head version names them, neither copied nor read.
The bucket's ACL of the domain denies HSDS every write; the mount still enforces the real one,
kept in the domain's h5osfs member."""
import errno
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import hsds_bucket  # noqa: E402
import harness  # noqa: E402
from conftest import Mount, MountSource, is_mounted  # noqa: E402
import objcheck  # noqa: E402

pytestmark = pytest.mark.backends("posix", "s3")

HOME = "home/test_user1"
CHUNKS, PER = 200, 256
COMMIT_KINDS = ("get", "head", "copy", "put", "list")  # not the collector's delayed deletes
# The collector's grace in the tests that count requests: a ref r+ hands the root it ingested
# to the collector (nothing names it, no descriptor can hold it), which would list and read
# for it 30 s later, amid a later r+ of a slow run. With this it acts only at the unmount.
QUIET_GC = {"H5OSFS_TEST_GC_GRACE": "86400"}


def requests(m):
    got = json.loads(m.path(".h5osfs-stats").read_text())["store"]["requests"]
    return sum(got.get(k, 0) for k in COMMIT_KINDS)


def domain_json(m, domain):
    return json.loads(m.get(f"{domain}/.domain.json"))


def version_list(m, domain):
    d, name = domain.rsplit("/", 1)
    return json.loads(m.get(f"{d}/.versions/{name}/.h5osfs-versions"))


def stored_below(bucket):
    """{key: size} below a bucket directory; what the collector deletes meanwhile is left out."""
    out = {}
    for top, _, files in os.walk(bucket):
        for name in files:
            p = Path(top) / name
            try:
                out[p.relative_to(bucket).as_posix()] = p.stat().st_size
            except FileNotFoundError:
                pass
    return out


def stored(m):
    """{key: size} of every object of the bucket as the store has it now."""
    mirror = m.src.mirror
    if mirror is None:
        return stored_below(m.bucket)
    prefix = mirror.prefix + Path(m.bucket).relative_to(mirror.root).as_posix() + "/"
    listed = mirror.s3.listing(prefix)
    return {k[len(prefix):]: v[0] for k, v in listed.items()}


def roots_of(keys):
    return {k.split("/")[1] for k in keys if k.startswith("db/")}


def live_roots(m, domain):
    lst = version_list(m, domain)
    return {e["root"][2:19] for e in lst["versions"]} | {lst["pool"][2:19]}


def make(bucket_copy, values, domain):
    hsds_bucket.make_domain(str(bucket_copy), "/" + domain, "f4", (CHUNKS * PER,), (PER,),
                            lambda idx: values[idx[0] * PER:(idx[0] + 1) * PER].tobytes(),
                            user="test_user1")


def ref_folder_mount(bucket_copy, mount_bucket, tmp_path, extra_env=None):
    """The folder HOME/kept as HSDS makes it, mounted (ttl=0, cache_dir c1) and turned to ref
    mode by its xattr: the mount."""
    hsds_bucket.put(str(bucket_copy), f"{HOME}/kept/.domain.json",
                    {"owner": "test_user1", "acls": {"test_user1": hsds_bucket.acl_all()},
                     "created": time.time(), "lastModified": time.time()})
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/c1",
                     extra_env=extra_env)
    os.setxattr(m.path(f"{HOME}/kept"), "user.h5osfs.versions", b"ref")
    return m


def r_plus(m, domain, index, value):
    before = requests(m)
    t0 = time.monotonic()
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][index] = value
    return requests(m) - before, time.monotonic() - t0


def test_ref_domain_stores_only_what_changed(bucket_copy, mount_bucket, tmp_path):
    """A domain of CHUNKS chunks, turned to ref mode by its folder's xattr, then three
    one-element r+: the first seals every chunk into the pool (version 1, the plain root
    collected); each later one adds one chunk, a table and JSON, in O(1) requests, and
    every version and the current domain read what was written, also after a remount with
    a fresh cache_dir, read-only, without the option."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/kept/v.h5"
    others = roots_of(stored_below(bucket_copy))
    make(bucket_copy, values, domain)
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path, QUIET_GC)
    assert os.getxattr(m.path(f"{HOME}/kept"), "user.h5osfs.versions") == b"ref"

    expected, want, counts = [], values.copy(), []
    for n, index in enumerate((3, 5 + 50 * PER, 7 + 150 * PER, 9 + 199 * PER)):
        want = want.copy()
        want[index] = -1 - n
        before = stored(m)
        counts.append(r_plus(m, domain, index, want[index]))
        expected.append(want)
        dom = domain_json(m, domain)
        lst = version_list(m, domain)
        assert dom["root"] == lst["versions"][-1]["root"], "the domain names its head version"
        added = sum(v for k, v in stored(m).items() if before.get(k) != v)
        if n > 0:   # one chunk (1 KiB), the table (200 entries), JSON: never the 200 chunks
            new_chunks = [k for k in stored(m) if k not in before and "/c/" in k]
            assert len(new_chunks) == 1, new_chunks
            assert added < 60_000, added
    assert all(c[0] <= 100 for c in counts[1:]), counts   # G2: O(1), not O(chunks)
    assert f"{CHUNKS - 1} named as the base version names them" in m.log()
    assert f"({CHUNKS - 1} told at once" in m.log()   # no HDF5 lookup per unchanged chunk

    def check(mount):
        for number, want in enumerate(expected, 1):
            with h5py.File(mount.path(f"{HOME}/kept/.versions/v.h5/{number}.h5"), "r") as f:
                assert np.array_equal(f["data"][:], want), number
        with h5py.File(mount.path(domain), "r") as f:
            assert np.array_equal(f["data"][:], expected[-1])
    check(m)
    print("requests per r+:", counts)
    assert m.unmount(exit_timeout=600) == 0     # the collector drains: the replaced roots go
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    assert roots_of(stored(ro)) - others == live_roots(ro, domain)
    check(ro)


def test_an_r_plus_after_a_remount_still_stores_only_what_changed(bucket_copy, mount_bucket,
                                                                  tmp_path):
    """The next mount with the same cache_dir takes the head version's file from there (not
    built again): an r+ through it still names the unchanged chunks as the head does, in
    O(1) requests, rather than storing every chunk again."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/kept/v.h5"
    make(bucket_copy, values, domain)
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path, QUIET_GC)
    r_plus(m, domain, 3, -1)                    # version 1: every chunk sealed
    with h5py.File(m.path(domain), "r") as f:   # the head's file, kept in cache_dir c1
        assert f["data"][3] == -1
    assert m.unmount() == 0
    again = mount_bucket(m, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/c1",
                         extra_env=QUIET_GC)
    count, _ = r_plus(again, domain, 7 + 100 * PER, -7)
    assert "the HDF5 file built before (kept in cache_dir)" in again.log()
    assert f"{CHUNKS - 1} named as the base version names them" in again.log(), again.log()
    assert count <= 100, count
    values[3], values[7 + 100 * PER] = -1, -7
    with h5py.File(again.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], values)


def chunk_key_of_head(m, domain):
    """The key an HSDS chunk 0 of /data would have under the root the domain names."""
    root = domain_json(m, domain)["root"]
    group = json.loads(m.get(f"db/{root[2:19]}/.group.json"))
    did = group["links"]["data"]["id"]
    return f"db/{root[2:19]}/d/{did[20:]}/0"


@pytest.mark.posix_only(reason="ACLs and keys are the same on every store")
def test_ref_domain_is_read_only_to_hsds_and_the_mount_keeps_its_acl(bucket_copy, mount_bucket,
                                                                     tmp_path):
    """-o versions=on,versions_current=ref: after a commit the bucket ACL of the domain lets
    nobody write (HSDS would corrupt a REF layout), the real ACL sits in the h5osfs member and
    the mount decides by it: test_user2, whom it lets update, still writes through the mount;
    a reader may not. A chunk PUT as HSDS would put it under the head version's root is not
    what the mount serves: the version's chunk table names the pool, not that key."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/r.h5"
    make(bucket_copy, values, domain)
    acls = {"test_user1": hsds_bucket.acl_all(),
            "test_user2": {"read": True, "update": True},
            "reader": {"read": True}}
    dom = json.loads((bucket_copy / domain / ".domain.json").read_text())
    dom["acls"] = acls
    hsds_bucket.put(str(bucket_copy), f"{domain}/.domain.json", dom)
    opts = "ttl=0,versions=on,versions_current=ref"
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,{opts},cache_dir={tmp_path}/c1")
    want = values.copy()
    want[1] = -1
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][1] = -1
    dom = domain_json(m, domain)
    assert dom["h5osfs"]["current"] == "ref" and dom["h5osfs"]["acls"] == acls
    for user, rights in dom["acls"].items():
        assert not any(v for k, v in rights.items() if k != "read"), (user, rights)
        assert rights.get("read") is True, user

    user2 = mount_bucket(bucket_copy, "-o", f"user=test_user2,{opts},cache_dir={tmp_path}/c2")
    with h5py.File(user2.path(domain), "r+") as f:
        f["data"][2] = -2
    want[2] = -2
    reader = mount_bucket(bucket_copy, "-o", f"user=reader,{opts},cache_dir={tmp_path}/c3")
    with pytest.raises(PermissionError):
        h5py.File(reader.path(domain), "r+")
    assert [e["n"] for e in version_list(m, domain)["versions"]] == [1, 2]

    m.put(chunk_key_of_head(m, domain), np.full(PER, 99, dtype="f4").tobytes())
    fresh = mount_bucket(bucket_copy, "-o", f"user=reader,ro,cache_dir={tmp_path}/fresh")
    with h5py.File(fresh.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], want)
    with h5py.File(fresh.path(f"{HOME}/.versions/r.h5/2.h5"), "r") as f:
        assert np.array_equal(f["data"][:], want)


R_PLUS = """
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["data"][int(sys.argv[2])] = float(sys.argv[3])
"""


def crash_mount(bucket, mnt, log, cache, env_extra, current="ref"):
    env = dict(os.environ, **env_extra)
    return Mount(MountSource("posix", bucket, bucket, env=env), mnt, log,
                 ("-o", f"user=test_user1,ttl=0,versions=on,versions_current={current},"
                        f"cache_dir={cache}"))


@pytest.mark.posix_only(reason="kills the daemon; the commit protocol is the same code on "
                        "every backend")
@pytest.mark.parametrize("stage,recovered_by", [("root", "ref"), ("vroot", "ref"),
                                                ("listed", "ref"), ("domain", "ref"),
                                                ("listed", "root")])
def test_kill_at_each_stage_of_a_ref_r_plus(bucket_copy, tmp_path, stage, recovered_by):
    """Version 1 by an r+; the second r+ is killed at stage; the next mount recovers: the
    versions are 1 and 2 with what each r+ wrote, the domain names version 2's root (a commit
    killed after its list put is rolled forward to the version, not to the root it sealed,
    also by a mount without versions_current=ref: that root holds only the changed chunk),
    and once the collector drained, db/ holds the versions' roots and the pool, nothing else."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/c.h5"
    others = roots_of(stored_below(bucket_copy))
    make(bucket_copy, values, domain)
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()

    def r_plus_in_child(m, index, value):
        """Its exit status says nothing: HDF5 may crash when the daemon dies under it."""
        subprocess.run([sys.executable, "-c", R_PLUS, str(m.path(domain)), str(index),
                        str(value)], capture_output=True)

    m = crash_mount(bucket_copy, mnt, tmp_path / "0.log", cache, {})
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][1] = -1
    harness.assert_clean([m])
    m = crash_mount(bucket_copy, mnt, tmp_path / "1.log", cache, {"H5OSFS_TEST_CRASH_AT": stage})
    r_plus_in_child(m, 100 * PER, -2)
    m.proc.wait(timeout=30)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert not is_mounted(mnt)
    m = crash_mount(bucket_copy, mnt, tmp_path / "2.log", cache, {}, current=recovered_by)
    want1, want2 = values.copy(), values.copy()
    want1[1] = want2[1] = -1
    want2[100 * PER] = -2
    assert sorted(os.listdir(m.path(f"{HOME}/.versions/c.h5"))) == ["1.h5", "2.h5"]
    for name, want in (("1.h5", want1), ("2.h5", want2)):
        with h5py.File(m.path(f"{HOME}/.versions/c.h5/{name}"), "r") as f:
            assert np.array_equal(f["data"][:], want), name
    with h5py.File(m.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], want2)
    lst = version_list(m, domain)
    assert domain_json(m, domain)["root"] == lst["versions"][-1]["root"]
    harness.assert_clean([m])
    left = roots_of(stored_below(bucket_copy)) - others
    assert left >= live_roots(m, domain)
    # a version root written but not listed when the daemon died is in the journal record
    # (its id, before its first object): recovery collects it, as the root it sealed
    assert left == live_roots(m, domain), left


@pytest.mark.posix_only(reason="edits a .domain.json and a version list by hand; the read path "
                        "is the same on every store")
def test_pool_layout_reads_only_through_a_listed_version(bucket_copy, mount_bucket, tmp_path):
    """The current domain may read the pool only through a root its version list has (the
    sweep keeps what listed versions name) or, failing that, that its object names in ref
    mode. Its head version named without the ref member (an older h5osfs or a hand edit)
    still reads, as that version; the same root once the list no longer has it either is
    EIO with one log line, never bytes of the pool taken on trust."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/b.h5"
    make(bucket_copy, values, domain)
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,versions=on,"
                     f"versions_current=ref,cache_dir={tmp_path}/c1")
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][1] = -1
    values[1] = -1
    assert m.unmount() == 0
    dom = json.loads((bucket_copy / domain / ".domain.json").read_text())
    del dom["h5osfs"]["current"]
    (bucket_copy / domain / ".domain.json").write_text(json.dumps(dom))
    fresh = mount_bucket(bucket_copy, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    with h5py.File(fresh.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], values)
    assert fresh.unmount() == 0
    lst_path = bucket_copy / HOME / ".versions" / "b.h5" / ".h5osfs-versions"
    lst = json.loads(lst_path.read_text())
    assert lst["versions"][-1]["root"] == dom["root"]
    del lst["versions"][-1]
    lst_path.write_text(json.dumps(lst))
    fresh = mount_bucket(bucket_copy, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh2")
    with h5py.File(fresh.path(domain), "r") as f, pytest.raises(OSError):
        f["data"][:]
    assert "does not name its head version (ref mode)" in fresh.log()


@pytest.mark.posix_only(reason="two mounts of one local bucket; the build's checks are the same "
                        "on every store")
def test_an_open_racing_a_ref_commit_reads_a_whole_version(bucket_copy, mount_bucket, tmp_path):
    """A reader's build is held (the test hook) after it chose the head version to read;
    another mount then commits the next version, which the domain now names. Released, the
    open reads one whole version, the one it chose or the new one, never EIO: the pool is
    the domain's as long as its list keeps the root being read."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/race.h5"
    make(bucket_copy, values, domain)
    opts = "user=test_user1,ttl=0,versions=on,versions_current=ref"
    writer = mount_bucket(bucket_copy, "-o", f"{opts},cache_dir={tmp_path}/c1")
    with h5py.File(writer.path(domain), "r+") as f:
        f["data"][0] = -1                 # version 1, by reference
    values[0] = -1
    gate = tmp_path / "gate"
    gate.touch()
    reader = mount_bucket(bucket_copy, "-o", f"user=test_user1,ro,ttl=0,cache_dir={tmp_path}/c2",
                          extra_env={"H5OSFS_TEST_PAUSE_AT": f"image build:{gate}"})
    got, failed = [], []

    def read():                           # no h5py here: its lock would hold the writer's
        try:
            got.append(Path(reader.path(domain)).read_bytes())
        except OSError as e:
            failed.append(e)
    t = threading.Thread(target=read)
    t.start()
    try:
        harness.await_pause(reader, "image build", t.is_alive)
        with h5py.File(writer.path(domain), "r+") as f:
            f["data"][5] = -5             # version 2: the domain names it now
        after = values.copy()
        after[5] = -5
        assert [v["n"] for v in version_list(writer, domain)["versions"]] == [1, 2]
    finally:
        gate.unlink()
        t.join()
    assert failed == [], reader.log()[-3000:]
    with h5py.File(io.BytesIO(got[0]), "r") as f:
        seen = f["data"][:]
    assert np.array_equal(seen, values) or np.array_equal(seen, after)
    assert "cannot build" not in reader.log(), reader.log()[-3000:]


@pytest.mark.posix_only(reason="the collector's choice is the same code on every store")
def test_rm_of_a_ref_domain_keeps_its_head_version(bucket_copy, mount_bucket, tmp_path):
    """rm DIR/NAME of a ref-mode domain deletes its .domain.json, not the root it names (its
    newest version's): once the collector drained, every version still reads, and a cp of
    the last one brings the domain back."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/d.h5"
    make(bucket_copy, values, domain)
    opts = f"user=test_user1,ttl=0,versions=on,versions_current=ref,cache_dir={tmp_path}/c1"
    m = mount_bucket(bucket_copy, "-o", opts)
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][1] = -1
    values[1] = -1
    os.unlink(m.path(domain))
    assert m.unmount() == 0              # the collector drains
    m = mount_bucket(m, "-o", opts)
    with h5py.File(m.path(f"{HOME}/.versions/d.h5/1.h5"), "r") as f:
        assert np.array_equal(f["data"][:], values)
    shutil.copyfile(m.path(f"{HOME}/.versions/d.h5/1.h5"), m.path(domain))
    with h5py.File(m.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], values)


@pytest.mark.posix_only(reason="the ingest's choice is the same code on every store")
def test_ref_r_plus_that_changes_more_than_chunk_bytes(bucket_copy, mount_bucket, tmp_path):
    """An r+ that also adds an attribute and a dataset writes HDF5 metadata: the unchanged
    chunks can no longer be vouched for in one pass and are asked for one by one, still left
    in the pool; every value, the attribute and the new dataset read back in both versions."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/m.h5"
    make(bucket_copy, values, domain)
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,versions=on,"
                     f"versions_current=ref,cache_dir={tmp_path}/c1")
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][1] = -1
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][2 + 70 * PER] = -2
        f["data"].attrs["note"] = "second"
        f.create_dataset("more", data=np.arange(10, dtype="i4"))
    want1, want2 = values.copy(), values.copy()
    want1[1] = want2[1] = -1
    want2[2 + 70 * PER] = -2
    told = [line for line in m.log().splitlines() if "left in the base version's pool" in line]
    assert f"{CHUNKS - 1} unchanged chunks" in told[-1] and "(0 told at once" in told[-1]
    fresh = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for path, want in ((f"{HOME}/.versions/m.h5/1.h5", want1), (domain, want2)):
        with h5py.File(fresh.path(path), "r") as f:
            assert np.array_equal(f["data"][:], want), path
    with h5py.File(fresh.path(domain), "r") as f:
        assert f["data"].attrs["note"] == "second"
        assert np.array_equal(f["more"][:], np.arange(10))


@pytest.mark.posix_only(reason="two mounts of one local bucket; the race is decided by the same "
                        "conditional puts on every store")
def test_two_mounts_racing_on_a_ref_domain(bucket_copy, mount_bucket, tmp_path):
    """Two mounts open the domain r+ at its version 1 and change different elements: the
    first to commit makes version 2; the other's commit finds the domain moved on and fails
    (ESTALE), the list and the domain keep the winner's version, nothing of it is lost."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/race.h5"
    make(bucket_copy, values, domain)
    opts = "user=test_user1,ttl=0,versions=on,versions_current=ref"
    one = mount_bucket(bucket_copy, "-o", f"{opts},cache_dir={tmp_path}/c1")
    two = mount_bucket(bucket_copy, "-o", f"{opts},cache_dir={tmp_path}/c2")
    with h5py.File(one.path(domain), "r+") as f:
        f["data"][0] = -1                 # version 1, by reference
    values[0] = -1
    a = open(one.path(domain), "r+b")
    b = open(two.path(domain), "r+b")
    with h5py.File(a, "r+") as f:
        f["data"][10] = -10
    a.close()
    with pytest.raises(OSError) as e:
        with h5py.File(b, "r+") as f:
            f["data"][20] = -20
        b.close()
    assert e.value.errno == errno.ESTALE            # from the close that commits
    values[10] = -10
    lst = version_list(one, domain)
    assert [v["n"] for v in lst["versions"]] == [1, 2]
    assert domain_json(one, domain)["root"] == lst["versions"][-1]["root"]
    assert "another writer changed the domain" in two.log()
    with h5py.File(one.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], values)


def pool_key(m, domain, data):
    """The key of the pool object that holds chunk bytes data (content addressed: their MD5)."""
    return f"db/{version_list(m, domain)['pool'][2:19]}/c/{hashlib.md5(data).hexdigest()}"


def test_a_forged_pool_object_is_never_served_and_a_commit_stores_it_again(bucket_copy,
                                                                          mount_bucket,
                                                                          tmp_path):
    """A pool object's key is the MD5 of its bytes, but anyone who may write the bucket may put
    other bytes there. Another chunk's bytes (same length, they decode fine) at the key of a
    chunk every version shares: each reader of that chunk, in each version and the current
    domain, gets EIO and the log names the object, never those bytes; the other chunks read.
    Bytes planted where the next commit's chunk will go are replaced by the chunk's own."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/kept/v.h5"
    make(bucket_copy, values, domain)
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path)
    r_plus(m, domain, 3, -1)                    # version 1 seals every chunk into the pool
    v1 = values.copy()
    v1[3] = -1

    def chunk(v, k):
        return v[k * PER:(k + 1) * PER]

    shared = pool_key(m, domain, chunk(v1, 10).tobytes())
    assert m.get(shared) == chunk(v1, 10).tobytes()
    m.put(shared, chunk(v1, 11).tobytes())
    v2 = v1.copy()
    v2[20 * PER + 5] = -20
    planted = pool_key(m, domain, chunk(v2, 20).tobytes())
    m.put(planted, chunk(v1, 21).tobytes())
    r_plus(m, domain, 20 * PER + 5, -20)        # version 2: its chunk 20 goes to `planted`
    assert m.get(planted) == chunk(v2, 20).tobytes(), "the commit stored the chunk again"
    assert f"pool object {planted}" in m.log()

    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for path, want in ((f"{HOME}/kept/.versions/v.h5/1.h5", v1),
                       (f"{HOME}/kept/.versions/v.h5/2.h5", v2), (domain, v2)):
        with h5py.File(ro.path(path), "r") as f:
            d = f["data"]
            # chunks of 1 KiB: a page of the file holds 4, and a READ that covers a byte of
            # chunk 10 fails whole; these are pages away
            assert np.array_equal(d[:5 * PER], want[:5 * PER]), path
            assert np.array_equal(d[16 * PER:], want[16 * PER:]), path
            with pytest.raises(OSError):
                d[10 * PER:11 * PER]
    assert f"pool object {shared}" in ro.log()
    assert "not the " + shared.rsplit("/", 1)[1] in ro.log()


@pytest.mark.posix_only(reason="the mode switch is decided by the same code on every store")
def test_back_to_root_mode_restores_a_plain_root_and_the_acl(bucket_copy, mount_bucket,
                                                              tmp_path):
    """A folder set from ref back to on (the mount's default root mode): the next r+ stores a
    plain root again, the domain gets its real ACL back in the bucket, and the versions made
    in ref mode, the head one included, stay readable."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/kept/back.h5"
    make(bucket_copy, values, domain)
    real = json.loads((bucket_copy / domain / ".domain.json").read_text())["acls"]
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path)
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][1] = -1
    want1 = values.copy()
    want1[1] = -1
    os.setxattr(m.path(f"{HOME}/kept"), "user.h5osfs.versions", b"on")
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][2] = -2
    want2 = want1.copy()
    want2[2] = -2
    dom = domain_json(m, domain)
    assert dom["acls"] == real and "current" not in dom.get("h5osfs", {})
    assert dom["root"] not in {v["root"] for v in version_list(m, domain)["versions"]}
    assert m.unmount() == 0
    fresh = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for path, want in ((f"{HOME}/kept/.versions/back.h5/1.h5", want1),
                       (f"{HOME}/kept/.versions/back.h5/2.h5", want2), (domain, want2)):
        with h5py.File(fresh.path(path), "r") as f:
            assert np.array_equal(f["data"][:], want), path


TILE = 4096     # vtable.h VTABLE_TILE_ENTRIES
ENTRY = 140     # offset I64, size I32, file_uri ASCII[128]


def table_of(bucket, version_domain):
    """(table id, table JSON) of /data's chunk table in the domain's root."""
    root = json.loads((bucket / version_domain / ".domain.json").read_text())["root"]
    base = bucket / "db" / root[2:19]
    did = json.loads((base / ".group.json").read_text())["links"]["data"]["id"]
    dset = json.loads((base / "d" / did[20:] / ".dataset.json").read_text())
    tid = dset["creationProperties"]["layout"]["chunk_table"]
    return tid, json.loads((base / "d" / tid[20:] / ".dataset.json").read_text())


def tile_path(bucket, tid, i):
    return bucket / "db" / tid[2:19] / "d" / tid[20:] / str(i)


def old_format(bucket, version_domain):
    """Rewrite a version's table as tables were written before tiling: one raw chunk."""
    tid, doc = table_of(bucket, version_domain)
    grid = doc["shape"]["dims"][0]
    tiles = (grid + doc["layout"]["dims"][0] - 1) // doc["layout"]["dims"][0]
    raw = b"".join(zlib.decompress(tile_path(bucket, tid, i).read_bytes()) for i in range(tiles))
    for i in range(tiles):
        tile_path(bucket, tid, i).unlink()
    tile_path(bucket, tid, 0).write_bytes(raw[:grid * ENTRY])
    doc["layout"]["dims"] = [grid]
    doc["creationProperties"] = {}
    (tile_path(bucket, tid, 0).parent / ".dataset.json").write_text(json.dumps(doc))


@pytest.mark.posix_only(reason="the tiles' layout is the same on every store; hard links are "
                        "how a local bucket copies, S3's CopyObject is counted by bench G2")
def test_ref_tables_are_compressed_tiles_and_unchanged_tiles_are_copied(bucket_copy,
                                                                        mount_bucket, tmp_path):
    """A table of 5,000 entries is two deflate tiles of 4,096 entries that HSDS reads (objcheck:
    filters, layout, chunk bytes); an r+ changing one chunk writes one tile and copies the
    other from the version before (a hard link: no bytes); a version whose base table is one
    raw chunk (buckets written before tiling) is still read and continued."""
    n_chunks, per = 5000, 4
    values = np.arange(n_chunks * per, dtype="f4")
    domain = f"{HOME}/kept/t.h5"
    hsds_bucket.make_domain(str(bucket_copy), "/" + domain, "f4", (n_chunks * per,), (per,),
                            lambda idx: values[idx[0] * per:(idx[0] + 1) * per].tobytes(),
                            user="test_user1")
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path)
    want = [values.copy()]
    for n, index in enumerate((3, 4500 * per + 1, 10 * per + 2)):
        w = want[-1].copy()
        w[index] = -1 - n
        r_plus(m, domain, index, w[index])
        want.append(w)
        if n == 1:
            old_format(bucket_copy, f"{HOME}/kept/.versions/t.h5/2.h5")
    vdir = f"{HOME}/kept/.versions/t.h5"
    tid1, doc1 = table_of(bucket_copy, f"{vdir}/1.h5")
    tid3, doc3 = table_of(bucket_copy, f"{vdir}/3.h5")
    for doc in (doc1, doc3):
        assert doc["layout"]["dims"] == [TILE] and doc["shape"]["dims"] == [n_chunks]
        assert doc["creationProperties"]["filters"][0]["class"] == "H5Z_FILTER_DEFLATE"
    sizes = []
    for tid in (tid1, tid3):
        for i in (0, 1):
            raw = zlib.decompress(tile_path(bucket_copy, tid, i).read_bytes())
            assert len(raw) == TILE * ENTRY    # whole tiles, the edge one zero-padded
            sizes.append(tile_path(bucket_copy, tid, i).stat().st_size)
    assert sum(sizes[:2]) < n_chunks * ENTRY / 4, sizes    # raw: 700,000 bytes
    # version 3 (chunk 10 changed) was written over version 2's raw table: tiled again
    m.unmount()
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/c2")
    w = want[-1].copy()
    w[4900 * per] = -9
    r_plus(m, domain, 4900 * per, w[4900 * per])     # tile 1 changes, tile 0 is version 3's
    want.append(w)
    tid4, _ = table_of(bucket_copy, f"{vdir}/4.h5")
    assert (tile_path(bucket_copy, tid4, 0).stat().st_ino ==
            tile_path(bucket_copy, tid3, 0).stat().st_ino), "unchanged tile: copied, not written"
    assert (tile_path(bucket_copy, tid4, 1).stat().st_ino !=
            tile_path(bucket_copy, tid3, 1).stat().st_ino)
    for number, w in enumerate(want[1:], 1):
        with h5py.File(m.path(f"{vdir}/{number}.h5"), "r") as f:
            assert np.array_equal(f["data"][:], w), number
        if number != 2:     # version 2's table was rewritten by hand (its JSON, not HSDS's)
            probs = objcheck.problems(bucket_copy, f"{vdir}/{number}.h5")
            assert not probs, probs
    with h5py.File(m.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], want[-1])
    assert not objcheck.problems(bucket_copy, domain)


@pytest.mark.posix_only(reason="the commit's choice is the same code on every store")
def test_ref_r_plus_whose_version_cannot_be_kept_names_a_whole_root(bucket_copy, mount_bucket,
                                                                    tmp_path):
    """An r+ of a ref-mode domain leaves the unchanged chunks in the pool (a sparse root); when
    its version cannot be kept (here: a new gzip dataset of object references, which a version
    cannot copy), that sparse root is never named: a whole root is ingested and named, and
    every value reads, also on a fresh mount; nothing else is left in db/."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/kept/s.h5"
    others = roots_of(stored_below(bucket_copy))
    make(bucket_copy, values, domain)
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path)
    want = values.copy()
    want[1] = -1
    r_plus(m, domain, 1, -1)                       # version 1: the domain names its root
    want[100 * PER] = -5
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][100 * PER] = -5
        f.create_dataset("refs", data=[f["data"].ref], dtype=h5py.ref_dtype, chunks=(1,),
                         compression="gzip")
    assert "cannot be kept as a version yet" in m.log()
    with h5py.File(m.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], want)
    assert m.unmount() == 0
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    with h5py.File(ro.path(domain), "r") as f:
        assert np.array_equal(f["data"][:], want)
        assert f[f["refs"][0]].name == "/data"
    named = domain_json(ro, domain)["root"][2:19]
    assert roots_of(stored(ro)) - others == live_roots(ro, domain) | {named}


@pytest.mark.posix_only(reason="the move's choice is the same code on every store")
def test_mv_of_a_ref_domain_onto_a_versioned_one_reads_whole(bucket_copy, mount_bucket,
                                                             tmp_path):
    """mv of a ref-mode domain (it names its head version's root, whose tables name its own
    pool) onto another domain with versions of its own: the target reads the moved values,
    after a remount with a fresh cache_dir too, and so do the target's older versions and the
    source's versions, which stay under the old name."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    src, dst = f"{HOME}/kept/s.h5", f"{HOME}/kept/t.h5"
    make(bucket_copy, values, src)
    make(bucket_copy, values + 1, dst)
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path)
    want_src, want_dst = values.copy(), values + 1
    want_src[3] = -3
    want_dst[4] = -4
    r_plus(m, src, 3, -3)
    r_plus(m, dst, 4, -4)
    assert domain_json(m, src)["root"] == version_list(m, src)["versions"][-1]["root"]
    subprocess.run(["mv", m.path(src), m.path(dst)], check=True)
    with h5py.File(m.path(dst), "r") as f:
        assert np.array_equal(f["data"][:], want_src)
    assert m.unmount() == 0                        # the collector drains
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    with h5py.File(ro.path(dst), "r") as f:
        assert np.array_equal(f["data"][:], want_src)
    vdst = sorted(os.listdir(ro.path(f"{HOME}/kept/.versions/t.h5")))
    with h5py.File(ro.path(f"{HOME}/kept/.versions/t.h5/1.h5"), "r") as f:
        assert np.array_equal(f["data"][:], want_dst)
    with h5py.File(ro.path(f"{HOME}/kept/.versions/t.h5/{vdst[-1]}"), "r") as f:
        assert np.array_equal(f["data"][:], want_src)
    with h5py.File(ro.path(f"{HOME}/kept/.versions/s.h5/1.h5"), "r") as f:
        assert np.array_equal(f["data"][:], want_src)


@pytest.mark.posix_only(reason="the collector's choice is the same code on every store")
def test_mv_onto_a_ref_domain_adds_a_version_and_keeps_its_head(bucket_copy, mount_bucket,
                                                                tmp_path):
    """mv of a plain domain onto a ref-mode one: the target keeps its versions and gains the
    moved domain as its next version; the root the target named (its head version's) is not
    collected, so every version still reads after the collector drained."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    domain = f"{HOME}/kept/t.h5"
    make(bucket_copy, values, domain)
    m = ref_folder_mount(bucket_copy, mount_bucket, tmp_path)
    want1, want2 = values.copy(), values.copy()
    want1[1] = want2[1] = -1
    want2[2] = -2
    r_plus(m, domain, 1, -1)
    r_plus(m, domain, 2, -2)
    head = version_list(m, domain)["versions"][-1]["root"]
    assert domain_json(m, domain)["root"] == head
    moved = np.full(10, 7, dtype="i4")
    with h5py.File(m.path(f"{HOME}/src.h5"), "w") as f:
        f["other"] = moved
    os.rename(m.path(f"{HOME}/src.h5"), m.path(domain))
    vdir = f"{HOME}/kept/.versions/t.h5"
    assert sorted(os.listdir(m.path(vdir))) == ["1.h5", "2.h5", "3.h5"]
    assert m.unmount() == 0                        # the collector drains
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    for name, want in (("1.h5", want1), ("2.h5", want2)):
        with h5py.File(ro.path(f"{vdir}/{name}"), "r") as f:
            assert np.array_equal(f["data"][:], want), name
    for path in (f"{vdir}/3.h5", domain):
        with h5py.File(ro.path(path), "r") as f:
            assert np.array_equal(f["other"][:], moved), path
    assert (bucket_copy / "db" / head[2:19]).is_dir()
