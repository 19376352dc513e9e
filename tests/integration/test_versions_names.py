"""Issue 26, step 5: names of kept versions. `ln DIR/.versions/NAME/3.h5 .../paper.h5` gives
version 3 a second name (a tag) that reads as the version and is kept until removed;
`rm .../<x>` drops a name; the current version's number cannot be removed (EBUSY); a version
with no name left leaves the listing. Every change is one conditional put of the version list,
so two mounts changing names concurrently both land; a daemon killed right after that put
leaves every listed name readable."""
import errno
import json
import os
import shutil
import subprocess

import pytest

import harness
from conftest import Mount, MountSource, is_mounted

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

# the domain, its versions' folder, its two sources, and h5diff's verdict: as the commits' tests
from test_versions_commit import A, B, HOME, TARGET, VDIR, same  # noqa: E402


def two_versions(m):
    shutil.copyfile(A, m.path(TARGET))
    shutil.copyfile(B, m.path(TARGET))
    assert sorted(os.listdir(m.path(VDIR))) == ["1.h5", "2.h5"]


def test_tag_reads_as_its_version_and_names_go_by_rm(bucket_copy, mount_bucket, tmp_path):
    """ln 1.h5 paper.h5: paper.h5 reads as version 1, also on a fresh read-only mount, and is
    an HSDS domain naming version 1's root; rm 1.h5 keeps the version under its tag; rm of the
    current version's number is EBUSY; rm of the last name makes the version leave the
    listing; a tag of the form <n>.h5 is EINVAL."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    two_versions(m)
    os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/paper.h5"))
    assert sorted(os.listdir(m.path(VDIR))) == ["1.h5", "2.h5", "paper.h5"]
    assert same(m.path(f"{VDIR}/paper.h5"), A)
    root1 = os.getxattr(m.path(f"{VDIR}/1.h5"), "user.h5osfs.root")
    assert os.getxattr(m.path(f"{VDIR}/paper.h5"), "user.h5osfs.root") == root1
    tag_domain = m.get(f"{VDIR}/paper.h5/.domain.json")
    assert json.loads(tag_domain)["root"] == root1.decode()
    with pytest.raises(OSError) as e:
        os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/7.h5"))
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        os.unlink(m.path(f"{VDIR}/2.h5"))
    assert e.value.errno == errno.EBUSY
    os.unlink(m.path(f"{VDIR}/1.h5"))
    assert sorted(os.listdir(m.path(VDIR))) == ["2.h5", "paper.h5"]
    assert not os.path.exists(m.path(f"{VDIR}/1.h5"))
    assert same(m.path(f"{VDIR}/paper.h5"), A)
    assert m.unmount() == 0
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    assert sorted(os.listdir(ro.path(VDIR))) == ["2.h5", "paper.h5"]
    assert same(ro.path(f"{VDIR}/paper.h5"), A) and same(ro.path(f"{VDIR}/2.h5"), B)
    assert ro.unmount() == 0
    m = mount_bucket(m, "-o", f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c2")
    os.unlink(m.path(f"{VDIR}/paper.h5"))
    assert os.listdir(m.path(VDIR)) == ["2.h5"]
    lst = json.loads(m.get(f"{VDIR}/.h5osfs-versions"))
    assert [(v["n"], v["names"], v["state"]) for v in lst["versions"]] == \
        [(1, [], "removing"), (2, ["2.h5"], "kept")]


# (tag, the reason `cp` to that name in a folder logs, or a tag's own): names no tag may take.
# The kernel passes names up to 1024 bytes to the daemon, so 300 bytes reaches its rule.
BAD_TAGS = [(".domain.json", "the bucket reserves the name"),
            (".h5osfs-tmp.x.h5", "the bucket reserves the name"),
            (".h5osfs-versions", "not the version list's own"),
            ("new\nline", "not a valid name"),
            ("L" * 300, "not a valid name")]


@pytest.mark.not_on("rgw", reason="refused before the store; s3rver covers the S3 side")
def test_a_tag_takes_no_reserved_or_invalid_name(bucket_copy, mount_bucket, tmp_path):
    """ln of a version to .domain.json (the key of the version folder's own object), to
    .h5osfs-tmp.*, to .h5osfs-versions (the version list's object), or to a name with a control
    character or longer than 255 bytes is EINVAL with one log line, as cp to such a name is;
    nothing is stored and the list is as before. Before: the reserved names were listed as tags
    (their domain objects nested under the list's or the folder's object) and the invalid ones
    EXDEV with nothing logged."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    two_versions(m)
    lst = m.get(f"{VDIR}/.h5osfs-versions")
    keys = store_keys(m, f"{HOME}/.versions/")
    failures = []
    for tag, reason in BAD_TAGS:
        logged = len(m.log())
        try:
            os.link(m.path(f"{VDIR}/2.h5"), m.path(f"{VDIR}/{tag}"))
            failures.append(f"{tag[:20]!r}: linked")
        except OSError as e:
            if e.errno != errno.EINVAL:
                failures.append(f"{tag[:20]!r}: {errno.errorcode.get(e.errno, e.errno)}")
        refusals = [line for line in m.log()[logged:].splitlines() if "refused" in line]
        if len(refusals) != 1 or reason not in refusals[0]:
            failures.append(f"{tag[:20]!r}: logged {refusals}, not one line saying {reason!r}")
    assert not failures, failures
    assert m.get(f"{VDIR}/.h5osfs-versions") == lst
    assert store_keys(m, f"{HOME}/.versions/") == keys
    assert sorted(os.listdir(m.path(VDIR))) == ["1.h5", "2.h5"]
    assert m.unmount() == 0


@pytest.mark.posix_only(reason="kills the daemon; the list put is the same code on every store")
@pytest.mark.parametrize("stage", ["tagged", "unnamed"])
def test_kill_right_after_a_name_change_leaves_every_name_readable(bucket_copy, tmp_path, stage):
    """A tag (or a removal) whose daemon is killed right after its list put: on the next mount
    the change is there and every listed name reads whole."""
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()

    def mount(log, env):
        return Mount(MountSource("posix", bucket_copy, bucket_copy, env=dict(os.environ, **env)),
                     mnt, tmp_path / log,
                     ("-o", f"user=test_user1,ttl=0,versions=on,cache_dir={cache}"))

    m = mount("0.log", {})
    try:
        two_versions(m)
        if stage == "unnamed":
            os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/paper.h5"))
        harness.assert_clean([m])
        m = mount("1.log", {"H5OSFS_TEST_CRASH_AT": stage})
        with pytest.raises(OSError):
            if stage == "tagged":
                os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/paper.h5"))
            else:
                os.unlink(m.path(f"{VDIR}/1.h5"))
        m.proc.wait(timeout=30)
        assert m.proc.returncode == -9
        subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
        assert not is_mounted(mnt)
        m = mount("2.log", {})
        assert sorted(os.listdir(m.path(VDIR))) == \
            (["1.h5", "2.h5", "paper.h5"] if stage == "tagged" else ["2.h5", "paper.h5"])
        assert same(m.path(f"{VDIR}/paper.h5"), A) and same(m.path(f"{VDIR}/2.h5"), B)
        harness.assert_clean([m])
    finally:                    # a failed step must not leave its daemon mounted
        harness.kill_mounted(m, mnt)


@pytest.mark.not_on("rgw", reason="the conditional list put; s3rver covers the S3 side")
def test_two_mounts_tagging_at_once_both_land(bucket_copy, mount_bucket, tmp_path):
    """Two mounts of one bucket each tag a version, at once: both tags are in the list (each
    put re-reads and re-applies on a lost race), both read."""
    import threading
    m1 = mount_bucket(bucket_copy, "-o",
                      f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    two_versions(m1)
    m2 = mount_bucket(m1, "-o", f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c2")
    tags = [f"t{i}.h5" for i in range(8)]
    errors = []

    def tag(m, names):
        try:
            for t in names:
                os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/{t}"))
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=tag, args=(m, tags[i::2])) for i, m in enumerate((m1, m2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    lst = json.loads(m1.get(f"{VDIR}/.h5osfs-versions"))
    assert sorted(lst["versions"][0]["names"]) == sorted(["1.h5"] + tags)
    assert sorted(os.listdir(m2.path(VDIR))) == sorted(["1.h5", "2.h5"] + tags)
    assert same(m2.path(f"{VDIR}/t7.h5"), A)


def gets_of(m):
    return json.loads(m.path(".h5osfs-stats").read_text())["store"]["requests"]["get"]


def listed(m, vdir=VDIR):
    return sorted(os.listdir(m.path(vdir)))


@pytest.mark.posix_only(reason="expiry is a change of the version list, the same code on every "
                        "store as the tags above")
def test_keep_n_expires_old_untagged_versions_at_commit(bucket_copy, mount_bucket, tmp_path):
    """-o versions_keep=2: each commit keeps the newest two untagged versions; a tagged one
    stays (under its number too) until untagged. A folder's keep:1 overrides the mount's."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,versions=on,versions_keep=2,"
                     f"cache_dir={tmp_path}/c1")
    shutil.copyfile(A, m.path(TARGET))
    os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/paper.h5"))
    for f in (B, A, B):
        shutil.copyfile(f, m.path(TARGET))
    assert listed(m) == ["1.h5", "3.h5", "4.h5", "paper.h5"]
    assert m.get(f"{VDIR}/2.h5/.domain.json") is None
    assert same(m.path(f"{VDIR}/1.h5"), A) and same(m.path(f"{VDIR}/4.h5"), B)
    folder = m.path(f"{HOME}/one")
    os.mkdir(folder)
    os.setxattr(folder, "user.h5osfs.versions", b"keep:1")
    for f in (A, B):
        shutil.copyfile(f, os.path.join(folder, "x.h5"))
    assert listed(m, f"{HOME}/one/.versions/x.h5") == ["2.h5"]
    assert same(os.path.join(folder, ".versions", "x.h5", "2.h5"), B)


@pytest.mark.posix_only(reason="the mount's cache of version lists; the store plays no part")
def test_a_mount_sees_its_own_name_changes_at_once_with_a_long_ttl(bucket_copy, mount_bucket,
                                                                   tmp_path):
    """With ttl=600 the version list is read once for many lookups (`ls -l` of 20 names: one
    GET of the list, not one per name); this mount's own tag, removal and commit show at once
    all the same."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=600,versions=on,cache_dir={tmp_path}/c1")
    two_versions(m)
    for i in range(20):
        os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/t{i}.h5"))
    for name in listed(m):                      # built once, kept in cache_dir
        os.stat(m.path(f"{VDIR}/{name}"))
    assert m.unmount() == 0
    m = mount_bucket(m, "-o", f"user=test_user1,ttl=600,versions=on,cache_dir={tmp_path}/c1")
    gets = gets_of(m)
    subprocess.run(["ls", "-l", m.path(VDIR)], check=True, capture_output=True)
    assert gets_of(m) - gets <= 5               # the list once, the folders and domain objects
    for i in range(20):
        os.unlink(m.path(f"{VDIR}/t{i}.h5"))
    os.link(m.path(f"{VDIR}/1.h5"), m.path(f"{VDIR}/paper.h5"))
    assert listed(m) == ["1.h5", "2.h5", "paper.h5"]
    os.unlink(m.path(f"{VDIR}/1.h5"))
    assert listed(m) == ["2.h5", "paper.h5"]
    shutil.copyfile(A, m.path(TARGET))
    assert listed(m) == ["2.h5", "3.h5", "paper.h5"]
    assert same(m.path(f"{VDIR}/3.h5"), A) and same(m.path(f"{VDIR}/paper.h5"), A)


def built(m):
    return json.loads(m.path(".h5osfs-stats").read_text())["images"]["built"]


@pytest.mark.posix_only(reason="edits the version list by hand; the sizes are recorded by the "
                        "same commit code on every store")
def test_ls_l_of_versions_builds_nothing_and_a_wrong_size_is_eio(bucket_copy, mount_bucket,
                                                                 tmp_path):
    """Each commit records its version's file size in the list: `ls -l` of the versions on a
    fresh mount (fresh cache_dir) builds no file, and the sizes are the bytes a read returns.
    An entry without a size (an older list) is built to be listed; a recorded size that is
    wrong makes the open fail with EIO, never a short or long read."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    for f in (A, B, A):
        shutil.copyfile(f, m.path(TARGET))
    assert m.unmount() == 0
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,ttl=0,cache_dir={tmp_path}/fresh")
    subprocess.run(["ls", "-l", ro.path(VDIR)], check=True, capture_output=True)
    assert built(ro) == 0
    for n, f in ((1, A), (2, B), (3, A)):
        p = ro.path(f"{VDIR}/{n}.h5")
        assert os.stat(p).st_size == len(open(p, "rb").read())
        assert same(p, f)
    assert ro.unmount() == 0
    lst_path = bucket_copy / VDIR / ".h5osfs-versions"
    lst = json.loads(lst_path.read_text())
    lst["versions"][0]["size"] = 0                  # as written before sizes were
    lst["versions"][1]["size"] += 4096              # wrong for this build
    lst_path.write_text(json.dumps(lst))
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,ttl=0,cache_dir={tmp_path}/fresh2")
    p1 = ro.path(f"{VDIR}/1.h5")
    assert os.stat(p1).st_size == len(open(p1, "rb").read()) and built(ro) >= 1
    with pytest.raises(OSError) as e:
        open(ro.path(f"{VDIR}/2.h5"), "rb").read()
    assert e.value.errno == errno.EIO
    assert "but its commit recorded" in ro.log()
    assert same(ro.path(f"{VDIR}/3.h5"), A)


def store_keys(m, below):
    """The keys the store holds below prefix `below` of the bucket (relative to it)."""
    if m.src.mirror is None:
        return sorted(str(p.relative_to(m.bucket)) for p in (m.bucket / below).rglob("*")
                      if p.is_file() and not p.name.startswith(".h5osfs-tmp."))
    prefix = m.src.source.removeprefix("s3://").split("/", 1)[1].rstrip("/") + "/"
    return sorted(k[len(prefix):] for k in m.src.mirror.s3.listing(prefix + below))


def rm_r(path):
    return subprocess.run(["rm", "-r", str(path)], capture_output=True, text=True)


@pytest.mark.not_on("rgw", reason="deletes by prefix listings; s3rver covers the S3 side")
def test_rm_r_of_the_versions_of_a_removed_domain_drops_them(bucket_copy, mount_bucket, tmp_path):
    """While the domain exists, rm -r .versions/NAME removes the names it may (1.h5) and stops
    at the current version's (EBUSY) and at the folder (ENOTEMPTY). Once the domain is gone,
    rm -r drops every version: names, roots, pool, list and folder objects, and .versions
    itself when it held nothing else; a fresh mount sees none of it."""
    m = mount_bucket(bucket_copy, "-o",
                     f"user=test_user1,ttl=0,versions=on,cache_dir={tmp_path}/c1")
    two_versions(m)
    lst = json.loads(m.get(f"{VDIR}/.h5osfs-versions"))
    data = [f"db/{e['root'][2:19]}/" for e in lst["versions"]] + [f"db/{lst['pool'][2:19]}/"]
    assert all(store_keys(m, p) for p in data)
    r = rm_r(m.path(VDIR))
    assert r.returncode != 0 and "Device or resource busy" in r.stderr, r.stderr
    assert os.listdir(m.path(VDIR)) == ["2.h5"]
    with pytest.raises(OSError) as e:
        os.rmdir(m.path(VDIR))
    assert e.value.errno == errno.ENOTEMPTY
    os.unlink(m.path(TARGET))
    r = rm_r(m.path(VDIR))
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(m.path(VDIR))
    assert os.listdir(m.path(f"{HOME}/.versions")) == []
    assert store_keys(m, f"{HOME}/.versions/") == []
    assert [p for p in data if store_keys(m, p)] == []
    assert m.unmount() == 0
    ro = mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh")
    assert not os.path.exists(ro.path(VDIR))
    assert ro.unmount() == 0
