"""Issue 24 part 3: the collector's queue survives a crash. A version replaced by a commit (or
a deleted domain) is recorded in the cache_dir's journal before it is queued, and its record
goes only once its prefix db/A-B/ lists empty; the next mount of the bucket with that cache_dir
queues it again. Before, the queue lived in memory: `cp a`, `cp b` over it, `kill -9` within
the grace period, remount, unmount left the old root in the bucket for good (sample2.h5's: 44
objects, 3.2 MB; with -o ingest=link 34, its .h5osfs-file among them), and so did a kill
during a collection.

Checked on a real mount against the store the daemon writes (the bucket directory, or the S3
server's listing): the old root's keys are all gone after the remount's unmount, the current
version reads whole (h5diff), only live roots remain under db/, and no record is left. A root
that the domain names again when its record is replayed is never deleted (posix: the record
is the same code on every store)."""
import json
import os
import shutil
import subprocess
import time

import pytest

import harness
from conftest import SOURCE, Mount, bucket_identity, is_mounted

pytestmark = pytest.mark.backends("posix", "s3")

HOME = "home/test_user1"
TARGET = f"{HOME}/gc.h5"


def h5diff_ok(a, b):
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


@pytest.fixture
def daemons(tmp_path):
    """Factory: daemons(src, *args, crash_at=None, killed=False) -> Mount of MountSource src as
    test_user1 on tmp_path/cache (every daemon of a test shares it: the remount recovers).
    crash_at: H5OSFS_TEST_CRASH_AT; killed: the test kills it. Either way its exit status must
    be -9. Teardown: every daemon unmounted and checked."""
    started = []

    def start(src, *args, crash_at=None, killed=False):
        n = len(started)
        mnt = tmp_path / f"mnt{n}"
        mnt.mkdir()
        env = dict(src.env or os.environ)
        if crash_at:
            env["H5OSFS_TEST_CRASH_AT"] = crash_at
        m = Mount(src, mnt, tmp_path / f"h5osfs{n}.log", ("-o", "user=test_user1,ttl=0", *args),
                  env=env, cache_dir=tmp_path / "cache",
                  expect_status=-9 if crash_at or killed else 0)
        started.append(m)
        return m

    yield start
    for m in started:
        if m.proc.poll() is not None and is_mounted(m.mnt):
            subprocess.run(["fusermount3", "-uz", str(m.mnt)], check=False)
    harness.assert_clean(started)


def store_keys(src, below=""):
    """The keys the store holds below prefix `below` of the bucket (relative to it)."""
    if src.mirror is None:
        root = src.local / below
        return sorted(str(p.relative_to(src.local)) for p in root.rglob("*")
                      if p.is_file() and not p.name.startswith(".h5osfs-tmp."))
    prefix = src.source.removeprefix("s3://").split("/", 1)[1].rstrip("/") + "/"
    listed = src.mirror.s3.listing(prefix + below)
    return sorted(k[len(prefix):] for k in listed)


def domain_root(src, path):
    src_key = f"{path}/.domain.json"
    data = (src.local / src_key).read_bytes() if src.mirror is None else \
        src.mirror.get(src.local / src_key)
    return json.loads(data)["root"]


def root_prefix(root):
    return f"db/{root[2:19]}/"


def committed_keys(src, root, timeout=30):
    """The keys of root once the daemon has written its summary (.info.json, written in the
    background after the commit): what the collector will find."""
    deadline = time.monotonic() + timeout
    while True:
        keys = store_keys(src, root_prefix(root))
        if f"{root_prefix(root)}.info.json" in keys:
            return keys
        assert time.monotonic() < deadline, f"no .info.json for root {root}"
        time.sleep(0.05)


def live_prefixes(src):
    keys = store_keys(src)
    roots = {json.loads(
        (src.local / k).read_bytes() if src.mirror is None else src.mirror.get(src.local / k)
    ).get("root") for k in keys if k.endswith(".domain.json")}
    return {root_prefix(r) for r in roots if r}


def stored_prefixes(src):
    return {"/".join(k.split("/")[:2]) + "/" for k in store_keys(src, "db/")}


def collector_records(tmp_path):
    journal = tmp_path / "cache" / "journal"
    return sorted(p.name for p in journal.iterdir() if p.name.startswith("gc.")) \
        if journal.exists() else []


def kill(m):
    """kill -9, and the dead mount taken away."""
    m.proc.kill()
    m.proc.wait(timeout=30)
    subprocess.run(["fusermount3", "-uz", str(m.mnt)], check=False)
    assert not is_mounted(m.mnt)


@pytest.mark.parametrize("ingest", ["copy", "link"])
def test_version_replaced_before_a_kill_is_collected_at_the_next_mount(
        bucket_copy, mount_source, daemons, tmp_path, ingest):
    """cp a, cp b over it, kill -9 while the old version waits for the collector, remount,
    unmount: the old root's objects are gone (with ingest=link its .h5osfs-file too), the
    domain reads whole. A reader holds the old version open until the kill: the collector
    postpones a root in use, so the kill is within the wait whatever the machine's speed."""
    src = mount_source(bucket_copy)
    args = ("-o", "ingest=link") if ingest == "link" else ()
    m = daemons(src, *args, killed=True)
    shutil.copyfile(SOURCE / "sample2.h5", m.path(TARGET))
    old = domain_root(src, TARGET)
    old_keys = committed_keys(src, old)
    assert len(old_keys) > 1
    assert (f"{root_prefix(old)}.h5osfs-file" in old_keys) == (ingest == "link")
    reader = os.open(m.path(TARGET), os.O_RDONLY)
    assert os.read(reader, 8) == b"\x89HDF\r\n\x1a\n"
    shutil.copyfile(SOURCE / "sample3.h5", m.path(TARGET))
    assert domain_root(src, TARGET) != old
    kill(m)
    try:
        os.close(reader)
    except OSError:
        pass                    # its mount is gone
    assert store_keys(src, root_prefix(old)) == old_keys    # what the issue saw: left for good

    m = daemons(src, *args)
    h5diff_ok(SOURCE / "sample3.h5", m.path(TARGET))
    assert m.unmount() == 0                                   # the collector drains
    assert store_keys(src, root_prefix(old)) == []
    assert stored_prefixes(src) == live_prefixes(src)
    assert collector_records(tmp_path) == []
    assert "queued again" in m.log()


def test_kill_during_a_collection_is_finished_at_the_next_mount(bucket_copy, mount_source,
                                                                 daemons, tmp_path):
    """The daemon dies (SIGKILL) right after the first delete of the old root's objects, at
    the unmount's drain: the record is still there, and the next mount deletes the rest."""
    src = mount_source(bucket_copy)
    m = daemons(src, crash_at="collecting")
    shutil.copyfile(SOURCE / "sample2.h5", m.path(TARGET))
    old = domain_root(src, TARGET)
    n_old = len(committed_keys(src, old))
    shutil.copyfile(SOURCE / "sample3.h5", m.path(TARGET))
    assert m.unmount() == -9
    left = store_keys(src, root_prefix(old))
    assert 0 < len(left) < n_old, "not killed in the middle of the collection"
    assert len(collector_records(tmp_path)) == 1

    m = daemons(src)
    assert m.unmount() == 0
    assert store_keys(src, root_prefix(old)) == []
    assert stored_prefixes(src) == live_prefixes(src)
    assert collector_records(tmp_path) == []
    ro = daemons(src, "-o", "ro")
    h5diff_ok(SOURCE / "sample3.h5", ro.path(TARGET))


@pytest.mark.posix_only(reason="rm queues the root through the same code as a commit; the "
                        "store's part is tested on s3 above")
def test_domain_removed_before_a_kill_is_collected_at_the_next_mount(bucket_copy, mount_source,
                                                                     daemons, tmp_path):
    """rm, kill -9 while the removed version waits (a reader holds it open), remount, unmount:
    its objects are gone."""
    src = mount_source(bucket_copy)
    m = daemons(src, killed=True)
    shutil.copyfile(SOURCE / "sample2.h5", m.path(TARGET))
    old = domain_root(src, TARGET)
    old_keys = committed_keys(src, old)
    reader = os.open(m.path(TARGET), os.O_RDONLY)
    os.unlink(m.path(TARGET))
    kill(m)
    try:
        os.close(reader)
    except OSError:
        pass
    assert store_keys(src, root_prefix(old)) == old_keys
    m = daemons(src)
    assert not m.path(TARGET).exists()
    assert m.unmount() == 0
    assert store_keys(src, root_prefix(old)) == []
    assert stored_prefixes(src) == live_prefixes(src)
    assert collector_records(tmp_path) == []


def bucket_tag(identity):
    """The FNV-1a hash of the bucket's identity that names its records (src/commit/journal.c)."""
    h = 1469598103934665603
    for b in identity.encode():
        h = ((h ^ b) * 1099511628211) & (2 ** 64 - 1)
    return f"{h:016x}"


@pytest.mark.posix_only(reason="the check reads the domain object through the store interface, "
                        "the same code on every backend")
def test_root_its_domain_names_is_never_collected(bucket_copy, mount_source, daemons,
                                                  tmp_path):
    """A record replayed at mount may be older than what happened to the bucket since (another
    tool, a restored backup): a root that its domain's .domain.json names is kept, and the
    record dropped."""
    src = mount_source(bucket_copy)
    m = daemons(src)
    shutil.copyfile(SOURCE / "sample2.h5", m.path(TARGET))
    assert m.unmount() == 0
    live = domain_root(src, TARGET)
    keys = store_keys(src, root_prefix(live))
    journal = tmp_path / "cache" / "journal"
    name = f"gc.{bucket_tag(bucket_identity(src))}.{live}.json"
    (journal / name).write_text(json.dumps({"bucket": bucket_identity(src), "root": live,
                                            "domain": f"/{TARGET}", "replaced_by": ""}))
    m = daemons(src)
    assert m.unmount() == 0
    assert store_keys(src, root_prefix(live)) == keys
    assert collector_records(tmp_path) == []
    assert f"/{TARGET} names root {live}" in m.log()
    ro = daemons(src, "-o", "ro")
    h5diff_ok(SOURCE / "sample2.h5", ro.path(TARGET))
