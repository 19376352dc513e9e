"""Issue 26, collection (doc/versions.md §4.4 steps 2-4, §5): a version with no name left (rm
of its last name, versions_keep expiry) is collected. Its root db/V_n/ goes through the durable
collector, its entry leaves the list once the root is gone, and a mark-and-sweep of the
domain's pool deletes the pool objects that no listed version's chunk table names any more
(older than versions_grace), never one that a kept version needs, chunks shared with the
removed version included. The state lives in the bucket: a mount with a fresh cache_dir
finishes what another left; a sweep owed is journaled, so a killed or unmounted daemon sweeps
again at the next mount."""
import errno
import json
import os
import re
import shutil
import subprocess
import time
import zlib
from pathlib import Path

import pytest

import harness
from conftest import Mount, MountSource, is_mounted
from test_versions_commit import A, B, HOME, TARGET, VDIR, same  # noqa: E402

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

FAST = "versions_grace=0,versions_sweep_interval=0"   # tests: sweep whatever is unnamed


def keys(m, prefix):
    """Relative keys of the mounted bucket below prefix, as the store has them now."""
    mirror = m.src.mirror
    if mirror is None:    # os.walk passes over directories the collector removes meanwhile
        return {(Path(d) / f).relative_to(m.bucket).as_posix()
                for d, _, files in os.walk(m.bucket / prefix) for f in files
                if (Path(d) / f).is_file()}
    rel = Path(m.bucket).relative_to(mirror.root).as_posix()
    full = mirror.prefix + ("" if rel == "." else rel + "/")
    return {k[len(full):] for k in mirror.s3.listing(full + prefix)}


def version_list(m):
    return json.loads(m.get(f"{VDIR}/.h5osfs-versions"))


def pool_prefix(m):
    return f"db/{version_list(m)['pool'][2:19]}/c/"


def named_pool_objects(m, root):
    """Pool keys the chunk tables under root name: every non-JSON object of the version's root
    scanned for a pool URI (test-side, independent of the daemon's reading of tables)."""
    prefix = pool_prefix(m)
    found = set()
    for k in keys(m, f"db/{root[2:19]}/"):
        if not k.endswith(".json"):
            data = m.get(k)
            if data[:1] == b"\x78":    # a deflated table tile (zlib stream)
                data = zlib.decompress(data)
            found |= {prefix + h.decode() for h in
                      re.findall(rb"%s([0-9a-f]{32})" % re.escape(prefix.encode()), data)}
    return found


def root_of(m, name):
    return os.getxattr(m.path(f"{VDIR}/{name}"), "user.h5osfs.root").decode()


def wait_for(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def test_rm_of_last_names_collects_roots_and_unshared_pool_objects(bucket_copy, mount_bucket,
                                                                   tmp_path):
    """cp a, cp b, cp a: version 3 shares every pool chunk with version 1. rm 1.h5 and 2.h5:
    their roots go (the collector drains at unmount) and their entries leave the list; the
    pool is swept (right then, or by the next mount from the sweep's journal record when the
    unmount stopped it): exactly the objects version 3 names are left, and version 3 and the
    domain read as a."""
    opts = f"user=test_user1,ttl=0,versions=on,{FAST},cache_dir={tmp_path}/c1"
    m = mount_bucket(bucket_copy, "-o", opts)
    shutil.copyfile(A, m.path(TARGET))
    pool_a = keys(m, pool_prefix(m))
    shutil.copyfile(B, m.path(TARGET))
    shutil.copyfile(A, m.path(TARGET))
    pool_all = keys(m, pool_prefix(m))
    roots = {n: root_of(m, f"{n}.h5") for n in (1, 2, 3)}
    assert pool_a < pool_all
    assert named_pool_objects(m, roots[3]) == pool_a == named_pool_objects(m, roots[1])
    os.unlink(m.path(f"{VDIR}/1.h5"))
    os.unlink(m.path(f"{VDIR}/2.h5"))
    assert os.listdir(m.path(VDIR)) == ["3.h5"]
    assert m.unmount() == 0
    assert keys(m, f"db/{roots[1][2:19]}/") == set() == keys(m, f"db/{roots[2][2:19]}/")
    assert keys(m, f"db/{roots[3][2:19]}/")
    assert [v["n"] for v in version_list(m)["versions"]] == [3]
    assert m.get(f"{VDIR}/1.h5/.domain.json") is None
    m = mount_bucket(m, "-o", opts)
    wait_for(lambda: keys(m, pool_prefix(m)) == pool_a, "the pool holds what version 3 names")
    assert same(m.path(f"{VDIR}/3.h5"), A) and same(m.path(TARGET), A)


@pytest.mark.posix_only(reason="expiry drops names through the same list code on every store; "
                        "the collection after it is the rm test's")
def test_expiry_collects_what_it_unnamed(bucket_copy, mount_bucket, tmp_path):
    """versions_keep=1: cp a, cp b expires version 1; after a remount its root and the pool
    objects only it named are gone, version 2 reads as b."""
    opts = f"user=test_user1,ttl=0,versions=on,versions_keep=1,{FAST},cache_dir={tmp_path}/c1"
    m = mount_bucket(bucket_copy, "-o", opts)
    shutil.copyfile(A, m.path(TARGET))
    root1 = root_of(m, "1.h5")
    shutil.copyfile(B, m.path(TARGET))
    assert os.listdir(m.path(VDIR)) == ["2.h5"]
    root2 = root_of(m, "2.h5")
    assert m.unmount() == 0
    assert keys(m, f"db/{root1[2:19]}/") == set()
    m = mount_bucket(m, "-o", opts)
    want = named_pool_objects(m, root2)
    wait_for(lambda: keys(m, pool_prefix(m)) == want, "the pool holds what version 2 names")
    assert [v["n"] for v in version_list(m)["versions"]] == [2]
    assert same(m.path(f"{VDIR}/2.h5"), B)


@pytest.mark.posix_only(reason="reads the pool objects' mtimes in the bucket directory")
def test_a_commit_rewrites_the_old_pool_chunks_it_reuses(bucket_copy, mount_bucket, tmp_path):
    """A sweep deletes only pool objects older than versions_grace: a commit that names a pool
    chunk written more than half of it ago writes it again (same bytes), so a sweep running
    meanwhile keeps it. With a grace of 2 ms, cp a twice: the second commit stores no new
    chunk but rewrites every one it names; with the default grace it leaves them as they are.
    A rewrite is told by its new inode (every put renames a new file into place), not by a
    later mtime: two writes within one tick of the kernel's file clock (~4 ms) have equal
    mtimes; the rewritten object's mtime is never earlier, which is what a sweep reads."""
    def stamps(m):
        pool = m.bucket / pool_prefix(m)
        return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in pool.iterdir()}

    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,versions=on,"
                     f"versions_grace=0.002,cache_dir={tmp_path}/c1")
    shutil.copyfile(A, m.path(TARGET))
    first = stamps(m)
    shutil.copyfile(A, m.path(TARGET))
    second = stamps(m)
    assert second.keys() == first.keys()
    assert all(second[k][0] != first[k][0] and second[k][1] >= first[k][1] for k in first)
    assert m.get(f"{VDIR}/2.h5/.domain.json") and same(m.path(f"{VDIR}/2.h5"), A)
    assert m.unmount() == 0
    m = mount_bucket(m, "-o", f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    shutil.copyfile(A, m.path(TARGET))
    assert stamps(m) == second


def crash_mount(bucket, mnt, tmp_path, log, cache, env_extra, extra=""):
    args = ("-o", f"user=test_user1,ttl=0,versions=on,{FAST},cache_dir={cache}{extra}")
    return Mount(MountSource("posix", bucket, bucket, env=dict(os.environ, **env_extra)), mnt,
                 tmp_path / log, args)


def await_killed(m, mnt):
    m.proc.wait(timeout=60)
    assert m.proc.returncode == -9
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False, capture_output=True)
    assert not is_mounted(mnt)


def three_versions(bucket_copy, mnt, tmp_path):
    """cp a, cp b, cp a on a mount at mnt (cache_dir c0) whose sweeps keep everything young
    (versions_grace one hour): the mount and {n: root of version n}."""
    mnt.mkdir()
    m = crash_mount(bucket_copy, mnt, tmp_path, "0.log", tmp_path / "c0", {},
                    ",versions_grace=3600")  # the sweep at its unmount keeps b's chunks
    try:
        for f in (A, B, A):
            shutil.copyfile(f, m.path(TARGET))
        return m, {n: root_of(m, f"{n}.h5") for n in (1, 2, 3)}
    except BaseException:
        harness.kill_mounted(m, mnt)
        raise


@pytest.mark.posix_only(reason="kills the daemon; the list and the sweep are the same code on "
                        "every store")
@pytest.mark.parametrize("stage", ["unnamed", "collected", "sweep"])
def test_kill_during_collection_then_every_version_reads_and_orphans_go(bucket_copy, tmp_path,
                                                                        stage):
    """cp a, cp b, cp a; rm 2.h5 (b's chunks are its own) with the daemon killed right after
    the list put (unnamed), right before the collected entry is dropped (collected), or after
    the sweep's mark, before it deletes (sweep). The next mounts (a fresh cache_dir after the
    first two: the bucket says what is left to do) finish it: version 2's root and name object
    are gone, its entry leaves the list, the pool holds exactly what versions 1 and 3 name,
    and they read whole."""
    mnt = tmp_path / "mnt"
    m, roots = three_versions(bucket_copy, mnt, tmp_path)
    try:
        if stage == "sweep":
            os.unlink(m.path(f"{VDIR}/2.h5"))
        harness.assert_clean([m])
        if stage == "unnamed":
            m = crash_mount(bucket_copy, mnt, tmp_path, "1.log", tmp_path / "c1",
                            {"H5OSFS_TEST_CRASH_AT": "unnamed"})
            with pytest.raises(OSError):
                os.unlink(m.path(f"{VDIR}/2.h5"))
            await_killed(m, mnt)
        elif stage == "collected":
            m = crash_mount(bucket_copy, mnt, tmp_path, "1.log", tmp_path / "c1",
                            {"H5OSFS_TEST_CRASH_AT": "collected"})
            os.unlink(m.path(f"{VDIR}/2.h5"))
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
            await_killed(m, mnt)             # the collector drained; killed before the drop
            assert keys(m, f"db/{roots[2][2:19]}/") == set()
            assert [v["state"] for v in version_list(m)["versions"]][1] == "removing"
        else:
            m = crash_mount(bucket_copy, mnt, tmp_path, "1.log", tmp_path / "c0",
                            {"H5OSFS_TEST_CRASH_AT": "sweep"})
            await_killed(m, mnt)             # the journaled sweep restarted and was killed
        assert len(keys(m, pool_prefix(m))) == 8          # b's four chunks are still there
        cache = tmp_path / ("c0" if stage == "sweep" else "c2")
        m = crash_mount(bucket_copy, mnt, tmp_path, "2.log", cache, {})
        assert sorted(os.listdir(m.path(VDIR))) == ["1.h5", "3.h5"]   # a reader's hint too
        harness.assert_clean([m])            # the collector drains the root at unmount
        m = crash_mount(bucket_copy, mnt, tmp_path, "3.log", cache, {})
        want = named_pool_objects(m, roots[1]) | named_pool_objects(m, roots[3])
        assert len(want) == 4
        wait_for(lambda: keys(m, pool_prefix(m)) == want, "the pool holds what 1 and 3 name")
        assert keys(m, f"db/{roots[2][2:19]}/") == set()
        assert m.get(f"{VDIR}/2.h5/.domain.json") is None
        assert [v["n"] for v in version_list(m)["versions"]] == [1, 3]
        assert same(m.path(f"{VDIR}/1.h5"), A) and same(m.path(f"{VDIR}/3.h5"), A)
        assert same(m.path(TARGET), A)
        harness.assert_clean([m])
    finally:                    # a failed step must not leave its daemon mounted
        harness.kill_mounted(m, mnt)


@pytest.mark.posix_only(reason="the sweep's journal record is the same on every store")
def test_a_sweep_owed_before_an_mv_is_done_under_the_new_name(bucket_copy, tmp_path):
    """cp a, cp b, cp a; rm 2.h5 with b's chunks too young to sweep: the sweep stays owed in the
    mount's journal, for the domain's name. The domain is then moved (another mount, with its
    own cache_dir). At the first mount's next start the owed sweep finds no list at the old
    name and follows the pool's marker to the new one: b's chunks go there, and the versions
    read under the new name (before, the record was dropped and they stayed)."""
    mnt = tmp_path / "mnt"
    m, roots = three_versions(bucket_copy, mnt, tmp_path)
    try:
        os.unlink(m.path(f"{VDIR}/2.h5"))
        harness.assert_clean([m])
        prefix = pool_prefix(m)
        want = named_pool_objects(m, roots[1]) | named_pool_objects(m, roots[3])
        assert len(want) == 4 and len(keys(m, prefix)) == 8   # b's four are unnamed
        m = crash_mount(bucket_copy, mnt, tmp_path, "1.log", tmp_path / "c1", {},
                        ",versions_grace=3600")
        os.rename(m.path(TARGET), m.path(f"{HOME}/w.h5"))
        harness.assert_clean([m])
        assert len(keys(m, prefix)) == 8
        m = crash_mount(bucket_copy, mnt, tmp_path, "2.log", tmp_path / "c0", {})
        wait_for(lambda: keys(m, prefix) == want, "the owed sweep, done under the new name")
        w = f"{HOME}/.versions/w.h5"
        assert sorted(os.listdir(m.path(w))) == ["1.h5", "3.h5"]
        assert same(m.path(f"{w}/1.h5"), A) and same(m.path(f"{w}/3.h5"), A)
        harness.assert_clean([m])
    finally:                    # a failed step must not leave its daemon mounted
        harness.kill_mounted(m, mnt)


def error_lines(log):
    return [line for line in Path(log).read_text().splitlines()
            if " error: " in line or " warning: " in line]


@pytest.mark.posix_only(reason="kills the daemon; the deletes are the same code on every store")
@pytest.mark.parametrize("stage", ["dropping version", "dropping pool"])
def test_kill_during_rm_r_of_a_version_folder_then_rm_r_again_deletes_everything(
        bucket_copy, tmp_path, stage):
    """rm -r of a version folder killed after its first delete of a removed version's root or
    of the pool: the object that shows whose the rest are (the root group, the pool's marker)
    is deleted last, so the next rm -r still sees them as the domain's and deletes them all;
    nothing is left in the bucket that no one claims, and nothing is logged as foreign. A cp
    that makes the domain again in between keeps no version in the marked lineage and does not
    stop that rm -r (which a domain with versions would: ENOTEMPTY)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = crash_mount(bucket_copy, mnt, tmp_path, "0.log", tmp_path / "c0",
                    {"H5OSFS_TEST_CRASH_AT": stage})
    try:
        shutil.copyfile(A, m.path(TARGET))
        pool, root = version_list(m)["pool"], root_of(m, "1.h5")
        assert keys(m, f"db/{pool[2:19]}/") and keys(m, f"db/{root[2:19]}/")
        os.unlink(m.path(TARGET))
        os.unlink(m.path(f"{VDIR}/1.h5"))
        with pytest.raises(OSError):
            os.rmdir(m.path(VDIR))
        await_killed(m, mnt)
        left = keys(m, f"db/{root[2:19]}/") | keys(m, f"db/{pool[2:19]}/")
        assert left, "killed before anything of the version or the pool was deleted"
        m = crash_mount(bucket_copy, mnt, tmp_path, "1.log", tmp_path / "c0", {})
        # the domain made again meanwhile: its commit keeps no version in the marked lineage,
        # and the rmdir still finishes (the mark shows the domain has no version there)
        shutil.copyfile(B, m.path(TARGET))
        os.rmdir(m.path(VDIR))
        assert keys(m, f"db/{root[2:19]}/") == set()     # before the collector's grace ends
        assert keys(m, f"db/{pool[2:19]}/") == set()
        assert not os.path.exists(m.path(VDIR))
        shutil.copyfile(A, m.path(TARGET))
        assert sorted(os.listdir(m.path(VDIR))) == ["1.h5"] and same(m.path(f"{VDIR}/1.h5"), A)
        harness.assert_clean([m])
        assert [line for line in error_lines(tmp_path / "1.log")
                if "its version folder is being removed" not in line] == []
    finally:                    # a failed step must not leave its daemon mounted
        harness.kill_mounted(m, mnt)


def rm_r_held_at(m, gate, stage):
    """Version 1 of TARGET, then the domain and that name removed, and rm -r (rmdir) of its
    version folder started on a thread and held at the daemon's pause point stage while gate
    exists (H5OSFS_TEST_PAUSE_AT=stage:gate in m's environment): the thread and the dict its
    return value goes to."""
    import threading
    shutil.copyfile(A, m.path(TARGET))
    os.unlink(m.path(TARGET))
    os.unlink(m.path(f"{VDIR}/1.h5"))
    gate.touch()
    done = {}
    rm = threading.Thread(target=lambda: done.setdefault("rc", os.rmdir(m.path(VDIR))))
    rm.start()
    wait_for(lambda: f"H5OSFS_TEST_PAUSE_AT={stage}" in m.log(), f"rm -r held at {stage}")
    return rm, done


@pytest.mark.posix_only(reason="holds rm -r at a test hook; the list's conditional put is "
                        "tested on every store above")
def test_a_commit_during_rm_r_of_its_version_folder_keeps_no_version_there(bucket_copy,
                                                                          tmp_path):
    """rm -r of a version folder marks the list "dropping" before it deletes anything; a cp
    to the domain committed meanwhile keeps no version in that lineage (before, its version
    was listed, then deleted with the pool by the rm -r: its root was left behind). The
    domain reads what the cp wrote, and the next commit starts new versions at 1."""
    mnt, gate = tmp_path / "mnt", tmp_path / "gate"
    mnt.mkdir()
    m = crash_mount(bucket_copy, mnt, tmp_path, "0.log", tmp_path / "c0",
                    {"H5OSFS_TEST_PAUSE_AT": f"dropping:{gate}"})
    try:
        rm, done = rm_r_held_at(m, gate, "dropping")
        shutil.copyfile(B, m.path(TARGET))
        assert "its version folder is being removed" in m.log()
        gate.unlink()
        rm.join(timeout=60)
        assert not rm.is_alive() and "rc" in done
        assert same(m.path(TARGET), B)
        assert not os.path.exists(m.path(VDIR))
        shutil.copyfile(A, m.path(TARGET))
        assert sorted(os.listdir(m.path(VDIR))) == ["1.h5"] and same(m.path(f"{VDIR}/1.h5"), A)
        pool = version_list(m)["pool"]
        harness.assert_clean([m])               # the collector drains at unmount
    finally:
        gate.unlink(missing_ok=True)
        harness.kill_mounted(m, mnt)
    named = {json.loads(p.read_text()).get("root", "")[2:19]
             for p in bucket_copy.rglob(".domain.json")} - {""}
    assert {p.name for p in (bucket_copy / "db").iterdir()} == named | {pool[2:19]}


@pytest.mark.posix_only(reason="holds rm -r at a test hook; the folder objects are plain "
                        "keys on every store")
def test_a_first_version_committed_while_rm_r_removes_the_last_keeps_versions_listed(
        bucket_copy, tmp_path):
    """rm -r of DIR's last version folder also removes DIR/.versions' HSDS folder object, once
    it sees no version folder below it. A first version of another domain of DIR committed
    between that look and the delete saw the object and did not put it: the delete left
    DIR/.versions/w.h5/ under no folder, which HSDS cannot list. The rm -r now looks again
    after the delete and puts the object back."""
    mnt, gate = tmp_path / "mnt", tmp_path / "gate"
    mnt.mkdir()
    m = crash_mount(bucket_copy, mnt, tmp_path, "0.log", tmp_path / "c0",
                    {"H5OSFS_TEST_PAUSE_AT": f"versions dir:{gate}"})
    folder = bucket_copy / HOME / ".versions" / ".domain.json"
    other = f"{HOME}/w.h5"
    try:
        rm, done = rm_r_held_at(m, gate, "versions dir")
        shutil.copyfile(B, m.path(other))
        assert folder.exists()
        gate.unlink()
        rm.join(timeout=60)
        assert not rm.is_alive() and "rc" in done
        assert folder.exists(), "DIR/.versions has a version folder but no HSDS folder object"
        assert (bucket_copy / HOME / ".versions" / "w.h5" / ".domain.json").exists()
        assert os.listdir(m.path(f"{HOME}/.versions")) == ["w.h5"]
        assert same(m.path(f"{HOME}/.versions/w.h5/1.h5"), B)
        harness.assert_clean([m])
    finally:
        gate.unlink(missing_ok=True)
        harness.kill_mounted(m, mnt)


@pytest.mark.posix_only(reason="the list is forged in the bucket directory; what the daemon "
                        "checks is the same code on every store")
@pytest.mark.parametrize("forged_pool", [True, False], ids=["its-pool", "its-own-pool"])
def test_a_forged_list_never_gets_another_domains_data_deleted(bucket_copy, mount_bucket,
                                                               tmp_path, forged_pool):
    """A version list is a key among its domain's own, which a writer may be allowed without
    any right under db/ (doc/versions.md §3.1). v.h5's list is forged: removing entries name
    w.h5's current root, its version's root and its pool, a named one w.h5's version, and
    the list's pool is set to w.h5's (its-pool) or left v.h5's (its-own-pool). A lookup of
    v.h5's versions finishes its removals, and rm -r of its version folder (the domain gone)
    deletes what the list names: nothing of w.h5 goes (each refusal logged), w.h5's version is
    never shown as v.h5's, a commit of v.h5 puts nothing into w.h5's pool (it keeps no
    version), and w.h5 and its version read as before on a fresh mount."""
    opts = f"user=test_user1,ttl=0,versions=on,{FAST},cache_dir={tmp_path}/c1"
    other, other_vdir = f"{HOME}/w.h5", f"{HOME}/.versions/w.h5"
    m = mount_bucket(bucket_copy, "-o", opts)
    shutil.copyfile(A, m.path(TARGET))
    shutil.copyfile(B, m.path(TARGET))
    shutil.copyfile(B, m.path(other))
    w_root = json.loads(m.get(f"{other}/.domain.json"))["root"]
    w_list = json.loads(m.get(f"{other_vdir}/.h5osfs-versions"))
    w_v1, w_pool = w_list["versions"][0]["root"], w_list["pool"]
    w_data = {k for r in (w_root, w_v1, w_pool) for k in keys(m, f"db/{r[2:19]}/")
              if ".h5osfs-tmp." not in k}       # a local bucket's put in flight
    assert m.unmount() == 0
    forged = version_list(m)
    if forged_pool:
        forged["pool"] = w_pool
    for n, root in ((96, w_pool), (98, w_root), (99, w_v1)):
        forged["versions"].append({"n": n, "root": root, "time": 1.0, "by": "forger",
                                   "parent": 0, "size": 0, "stamp": "", "names": [],
                                   "state": "removing"})
    forged["versions"].append({"n": 97, "root": w_v1, "time": 1.0, "by": "forger",
                               "parent": 0, "size": 0, "stamp": "", "names": ["97.h5"],
                               "state": "kept"})
    forged["next"] = 100
    m.put(f"{VDIR}/.h5osfs-versions", json.dumps(forged).encode())

    m = mount_bucket(m, "-o", opts)
    assert sorted(os.listdir(m.path(VDIR))) == ["1.h5", "2.h5", "97.h5"]   # finishes removals
    wait_for(lambda: [v["n"] for v in version_list(m)["versions"]] == [1, 2, 97],
             "the forged removing entries leave the list")
    with pytest.raises(OSError) as e:   # w.h5's version, shown as v.h5's: never its bytes
        with open(m.path(f"{VDIR}/97.h5"), "rb") as f:
            f.read()
    assert e.value.errno == errno.EIO
    if forged_pool:         # a commit keeps no version in another domain's pool
        before = keys(m, f"db/{w_pool[2:19]}/")
        shutil.copyfile(A, m.path(TARGET))
        assert same(m.path(TARGET), A)
        assert keys(m, f"db/{w_pool[2:19]}/") == before
        assert [v["n"] for v in version_list(m)["versions"]] == [1, 2, 97]
        assert f"names pool {w_pool}, which is not its own" in m.log()
    os.unlink(m.path(TARGET))
    for name in ("1.h5", "2.h5", "97.h5"):
        os.unlink(m.path(f"{VDIR}/{name}"))
    os.rmdir(m.path(VDIR))
    assert m.unmount() == 0                                  # the collector drains
    lost = w_data - set().union(*(keys(m, f"db/{r[2:19]}/") for r in (w_root, w_v1, w_pool)))
    assert not lost, lost
    log = m.log()
    assert f"removed version 98 is dropped from the list, its root {w_root} stays" in log
    if forged_pool:
        assert f"pool {w_pool} is not this domain's" in log
        assert f"pool {w_pool} is another domain's (/{other})" in log
    else:
        assert f"root {w_v1} is not a version over pool" in log
        assert f"{w_pool}, named by removed version 96, holds objects but no root group" in log
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    assert same(ro.path(other), B) and same(ro.path(f"{other_vdir}/1.h5"), B)
