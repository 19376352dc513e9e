"""The domain summary db/A-B/.info.json (spec §3.7, issue 10 part 5): every commit writes it as
HSDS's scanner would, byte for byte in json.dumps's format. Each summary is checked against
what the test itself finds in the bucket (one listing: keys, sizes, times, ETags, as HSDS's
POSIX or S3 driver sees them, and a Python port of HSDS's key-to-id rule), and against the
summary real HSDS wrote for the same source file in the fixture (structure, member order,
types, and every value that depends neither on time nor on ids)."""
import datetime
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import BUCKET, S3_BUCKET, SOURCE, Mount, MountSource

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
UNCOMPRESSED = ("sample1.h5", "sample3.h5")
TIME_SLACK = 2.0       # seconds between this machine's clock and the S3 server's whole seconds


def domain_root(m, path):
    return json.loads(m.get(f"{path}/.domain.json"))["root"]


def info_key(root):
    return f"db/{root[2:19]}/.info.json"


def hex_rot(c):
    return format((int(c, 16) + 8) % 16, "x")


def object_id(key):
    """HSDS's idUtil.getObjId for a v2 key below db/, or None where its scan ignores the key."""
    parts = key.split("/")
    token = parts[1].replace("-", "")
    coord, partition = "", ""
    if len(parts) == 3:
        if parts[2] != ".group.json":
            return None
        token += "".join(hex_rot(c) for c in token[:16])
        prefix = "g"
    elif len(parts) == 5:
        token += parts[3].replace("-", "")
        if (parts[2], parts[4]) == ("g", ".group.json"):
            prefix = "g"
        elif (parts[2], parts[4]) == ("t", ".datatype.json"):
            prefix = "t"
        elif parts[2] == "d":
            prefix = "d" if parts[4] == ".dataset.json" else "c"
            coord = "" if prefix == "d" else "_" + parts[4]
        else:
            return None
    elif len(parts) == 6 and parts[2] == "d" and parts[4].startswith("p"):
        token += parts[3].replace("-", "")
        prefix, partition, coord = "c", parts[4][1:], "_" + parts[5]
    else:
        return None
    return (f"{prefix}{partition}-{token[0:8]}-{token[8:16]}-{token[16:20]}-{token[20:26]}-"
            f"{token[26:32]}{coord}")


def listing(m, root):
    """[(key, size, mtime, etag)] of the root's objects as HSDS's driver would list them: POSIX
    in os.walk's order with float mtimes and the MD5 of the bytes; S3 in key order with whole
    seconds and the listing's ETag, quotes kept (botocore keeps them)."""
    prefix = f"db/{root[2:19]}/"
    if m.src.mirror is None:
        out = []
        base = m.bucket / prefix
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                p = os.path.join(dirpath, name)
                key = prefix + os.path.relpath(p, base)
                with open(p, "rb") as f:
                    data = f.read()
                out.append((key, len(data), os.stat(p).st_mtime, hashlib.md5(data).hexdigest()))
        return out
    mirror = m.src.mirror
    sub = mirror.url(m.bucket).removeprefix(f"s3://{S3_BUCKET}/") + "/"
    out = []
    for k, (size, etag, modified) in sorted(mirror.s3.listing(sub + prefix).items()):
        t = datetime.datetime.fromisoformat(modified.replace("Z", "+00:00")).timestamp()
        out.append((k[len(sub):], size, int(t), f'"{etag}"'))
    return out


def expected_from_listing(objects):
    """What scanRootCallback counts from a listing (the values that need no dataset JSON)."""
    want = {"lastModified": 0, "num_groups": 0, "num_datatypes": 0, "datasets": {},
            "num_chunks": 0, "allocated_bytes": 0, "metadata_bytes": 0}
    sums = {}
    for key, size, mtime, etag in objects:
        oid = object_id(key)
        if oid is None:
            continue
        sums[oid] = etag
        want["lastModified"] = max(want["lastModified"], mtime)
        chunk = oid[0] == "c"
        want["num_chunks"] += chunk
        want["allocated_bytes" if chunk else "metadata_bytes"] += size
        want["num_groups"] += oid[0] == "g"
        want["num_datatypes"] += oid[0] == "t"
        if chunk or oid[0] == "d":
            dset = "d-" + oid[oid.index("-") + 1:][:36]
            d = want["datasets"].setdefault(dset, {"lastModified": 0, "num_chunks": 0,
                                                   "allocated_bytes": 0})
            d["lastModified"] = max(d["lastModified"], mtime)
            d["num_chunks"] += chunk
            d["allocated_bytes"] += size if chunk else 0
    n = (want["num_groups"] + want["num_datatypes"] + len(want["datasets"]) +
         want["num_chunks"])
    assert len(sums) == n
    packed = b"".join(sums[k][:16].encode().ljust(16, b"\0") for k in sorted(sums))
    want["md5_sum"] = hashlib.md5(packed).hexdigest()
    return want


def summary(m, root, timeout=30):
    """The root's summary, once the daemon's background writer has put it."""
    deadline = time.monotonic() + timeout
    while (text := m.get(info_key(root))) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert text is not None, f"no {info_key(root)} after {timeout} s"
    info = json.loads(text)
    assert json.dumps(info).encode() == text      # json.dumps's own bytes: separators, floats
    return info


def check_against_listing(m, root, started):
    info = summary(m, root)
    ended = time.time()
    objects = listing(m, root)
    want = expected_from_listing(objects)
    for k in ("num_groups", "num_datatypes", "num_chunks", "allocated_bytes", "metadata_bytes",
              "lastModified", "md5_sum"):
        assert info[k] == want[k], k
        assert type(info[k]) is type(want[k]), k
    assert list(info["datasets"]) == list(want["datasets"])        # HSDS's listing order
    for dset, d in want["datasets"].items():
        for k, v in d.items():
            assert info["datasets"][dset][k] == v and type(info["datasets"][dset][k]) is type(v)
    assert info["bucket"] == S3_BUCKET      # the copy is called hsdstest too
    assert started - TIME_SLACK <= info["lastModified"] <= info["scan_start"] + TIME_SLACK
    assert started <= info["scan_start"] <= info["scan_complete"] <= ended
    return info


def fixture_summary(domain):
    root = json.loads((BUCKET / HOME / domain / ".domain.json").read_text())["root"]
    return json.loads((BUCKET / info_key(root)).read_text())


def dataset_sizes(info, key):
    return sorted(d[key] for d in info["datasets"].values())


@pytest.mark.parametrize("sample", ["sample1.h5", "sample2.h5", "sample3.h5"])
def test_cp_writes_the_summary_hsds_would(bucket_copy, mount_bucket, sample):
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    started = time.time()
    shutil.copyfile(SOURCE / sample, m.path(f"{HOME}/copy_{sample}"))
    root = domain_root(m, f"{HOME}/copy_{sample}")
    info = check_against_listing(m, root, started)
    hsds = fixture_summary(sample)
    assert list(info) == list(hsds)
    assert [type(v) for v in info.values()] == [
        int if k == "lastModified" and m.src.mirror is not None else type(v)
        for k, v in hsds.items()]
    for k in ("num_groups", "num_datatypes", "num_linked_chunks", "linked_bytes"):
        assert info[k] == hsds[k], k
    assert len(info["datasets"]) == len(hsds["datasets"])
    for d in info["datasets"].values():
        assert list(d) == list(next(iter(hsds["datasets"].values())))
    # the declared sizes do not depend on how the chunks were cut and compressed (vlen
    # datasets count their allocated bytes: sample2's compress to the same sizes)
    assert info["logical_bytes"] == hsds["logical_bytes"]
    assert dataset_sizes(info, "logical_bytes") == dataset_sizes(hsds, "logical_bytes")
    if sample in UNCOMPRESSED:      # stored as hsload stored them: the same chunks
        for k in ("num_chunks", "allocated_bytes"):
            assert info[k] == hsds[k], k
            assert dataset_sizes(info, k) == dataset_sizes(hsds, k), k


def test_summary_follows_changes_and_goes_with_the_domain(bucket_copy, mount_bucket):
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    path = f"{HOME}/changed.h5"
    shutil.copyfile(SOURCE / "sample3.h5", m.path(path))
    first = domain_root(m, path)
    before = summary(m, first)
    started = time.time()
    with h5py.File(m.path(path), "r+") as f:
        f.create_dataset("added", data=np.arange(5000, dtype="<i8"), chunks=(1000,))
        f.create_group("more")
    second = domain_root(m, path)
    assert second != first
    after = check_against_listing(m, second, started)
    assert len(after["datasets"]) == len(before["datasets"]) + 1
    assert after["num_groups"] == before["num_groups"] + 1
    assert after["logical_bytes"] == before["logical_bytes"] + 5000 * 8
    os.unlink(m.path(path))
    m.unmount()                                 # the collector finishes at unmount
    assert m.get(info_key(first)) is None
    assert m.get(info_key(second)) is None
    assert listing(m, first) == [] and listing(m, second) == []


def test_unmount_writes_the_summaries_still_waiting(bucket_copy, mount_bucket):
    """Summaries are written in the background, after close() returned; an unmount right
    after the copies waits for them, and each is the listing's."""
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    started = time.time()
    roots = []
    for i, sample in enumerate(["sample1.h5", "sample2.h5", "sample3.h5"] * 2):
        shutil.copyfile(SOURCE / sample, m.path(f"{HOME}/quick{i}.h5"))
        roots.append(domain_root(m, f"{HOME}/quick{i}.h5"))
    assert m.unmount() == 0
    for root in roots:
        check_against_listing(m, root, started)


@pytest.mark.posix_only(reason="kills the daemon mid-commit with the test hook; recovery is "
                        "the same code on both backends")
def test_recovery_writes_the_summary_a_crash_left_out(bucket_copy, backend, tmp_path):
    """Killed right after the .domain.json put, before the summary: the next mount's recovery
    finds the commit finished and writes it."""
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()
    path = f"{HOME}/crashed.h5"

    def mount(log, env_extra):
        return Mount(MountSource("posix", bucket_copy, bucket_copy,
                                 env=dict(os.environ, **env_extra)),
                     mnt, tmp_path / log, ("-o", f"user=test_user1,ttl=0,cache_dir={cache}"))

    m = mount("0.log", {"H5OSFS_TEST_CRASH_AT": "domain"})
    try:
        with pytest.raises(OSError):
            shutil.copyfile(SOURCE / "sample3.h5", m.path(path))
        m.proc.wait(timeout=30)
        assert m.proc.returncode == -9
    finally:
        subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    root = domain_root(m, path)
    assert m.get(info_key(root)) is None
    started = time.time()
    m = mount("1.log", {})
    try:
        check_against_listing(m, root, started)
    finally:
        assert m.unmount() == 0


@pytest.mark.posix_only(reason="holds the summary with the test hook; the stop is the same "
                        "code on every backend")
def test_a_second_stop_signal_abandons_the_summary_under_way(bucket_copy, backend, tmp_path):
    """A stop signal unmounts; the daemon then finishes the summaries still to write. A second
    signal gives them up, the one under way too, however long it would take (a root of 10^6
    objects): the hook holds that summary until the test removes its gate, which the test
    never does before the daemon has exited."""
    cache, mnt, gate = tmp_path / "cache", tmp_path / "mnt", tmp_path / "gate"
    mnt.mkdir()
    gate.touch()
    m = Mount(MountSource("posix", bucket_copy, bucket_copy,
                          env=dict(os.environ, H5OSFS_TEST_PAUSE_AT=f"summary:{gate}")),
              mnt, tmp_path / "0.log", ("-o", f"user=test_user1,ttl=0,cache_dir={cache}"))
    try:
        shutil.copyfile(SOURCE / "sample3.h5", m.path(f"{HOME}/held.h5"))
        root = domain_root(m, f"{HOME}/held.h5")
        deadline = time.monotonic() + 60
        while "H5OSFS_TEST_PAUSE_AT=summary" not in m.log():
            assert time.monotonic() < deadline and m.proc.poll() is None, m.log()
            time.sleep(0.05)
        # the first signal ends the loop; only once the daemon is finishing does one give up:
        # signal until it exits (the ones before are the first signal again)
        while m.proc.poll() is None:
            assert time.monotonic() < deadline, "the daemon waited for the held summary"
            m.proc.send_signal(signal.SIGTERM)
            try:
                m.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        assert gate.exists()
        assert m.proc.returncode == 0, m.log()
    finally:
        gate.unlink(missing_ok=True)
        subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
        if m.proc.poll() is None:
            m.proc.kill()
            m.proc.wait()
    assert "the domain summary was abandoned half-way" in m.log(), m.log()
    assert m.get(info_key(root)) is None


def test_linked_domain_keeps_its_linked_counts(bucket_copy, mount_bucket):
    """An r+ change of an hsload --link domain that leaves its datasets alone: the new root's
    summary counts the same linked chunks and bytes as HSDS's (chunk tables read)."""
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    path = f"{HOME}/sample_link.h5"
    started = time.time()
    with h5py.File(m.path(path), "r+") as f:
        f.attrs["touched"] = 1
    info = check_against_listing(m, domain_root(m, path), started)
    hsds = fixture_summary("sample_link.h5")
    assert info["num_linked_chunks"] > 0
    for k in ("num_linked_chunks", "linked_bytes", "logical_bytes"):
        assert info[k] == hsds[k], k
    for k in ("num_linked_chunks", "linked_bytes"):
        assert dataset_sizes(info, k) == dataset_sizes(hsds, k), k
