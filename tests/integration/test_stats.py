"""Watching a mount run (issue 14.2): the read-only file /.h5osfs-stats at the mount's root and
the log line SIGUSR1 asks for, both the same JSON counters, checked against what the test
made the mount do."""
import errno
import json
import os
import shutil
import signal
import time

import h5py
import numpy as np
import pytest

from conftest import BUCKET, SOURCE, assert_serving

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
STATS = ".h5osfs-stats"


def stats(m):
    return json.loads(m.path(STATS).read_text())


def released(m, timeout=10):
    """The statistics once every staged file is released: the kernel sends a file's release
    after close() has returned, so the daemon may not have seen it yet."""
    deadline = time.monotonic() + timeout
    while (now := stats(m))["writes"]["files_staged"] and time.monotonic() < deadline:
        time.sleep(0.05)
    return now


def test_stats_count_what_reads_do(mount_bucket):
    m = mount_bucket(BUCKET, "-o", "user=test_user1")
    assert STATS not in os.listdir(m.mnt)              # hidden from listings
    st = os.stat(m.path(STATS))
    assert oct(st.st_mode & 0o777) == "0o444"
    before = stats(m)
    assert before["store"]["backend"] == m.backend
    assert before["writes"] is not None                 # a read-write mount
    with h5py.File(m.path(f"{HOME}/sample1.h5"), "r") as f:
        with h5py.File(SOURCE / "sample1.h5", "r") as src:
            names = []
            f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and
                         o.dtype.kind in "iuf" else None)
            assert names
            for name in names:
                assert np.array_equal(f[name][()], src[name][()])
    after = stats(m)
    assert after["images"]["built"] >= before["images"]["built"] + 1
    assert after["images"]["failed"] == 0
    gets = after["store"]["requests"]["get"] - before["store"]["requests"]["get"]
    assert gets >= 2                                    # the JSON objects, a chunk at least
    assert after["store"]["bytes_read"] > before["store"]["bytes_read"]
    assert after["chunk_cache"]["misses"] > before["chunk_cache"]["misses"]
    with h5py.File(m.path(f"{HOME}/sample2.h5"), "r") as f:  # one value: its chunk stays held
        with h5py.File(SOURCE / "sample2.h5", "r") as src:
            assert f["multichunk_f32_gzip"][300, 1500] == src["multichunk_f32_gzip"][300, 1500]
    cache = stats(m)["chunk_cache"]
    assert cache["capacity"] == 1 << 30                 # the default cache_size, 1G
    assert cache["entries"] > 0 and cache["bytes"] >= 256 * 1024 * 4
    assert cache["charged"] == cache["bytes"] + 256 * cache["entries"]
    assert after["store"]["failures"] == 0
    assert after["uptime_seconds"] > before["uptime_seconds"]


def test_stats_count_commits(mount_bucket, bucket_copy, tmp_path):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    before = stats(m)
    src = SOURCE / "sample2.h5"
    fd = os.open(m.path(f"{HOME}/copy.h5"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, src.read_bytes()[:65536])
    mid = stats(m)
    assert mid["writes"]["files_staged"] == 1
    assert mid["writes"]["bytes_staged"] >= 65536
    os.write(fd, src.read_bytes()[65536:])
    os.close(fd)
    after = released(m)
    w = after["writes"]
    assert (w["commits"], w["commit_failures"], w["commits_lost"]) == (1, 0, 0)
    assert (w["files_staged"], w["bytes_staged"]) == (0, 0)
    written = after["store"]["bytes_written"] - before["store"]["bytes_written"]
    assert written > 0 and after["store"]["requests"]["put"] > before["store"]["requests"]["put"]
    fd = os.open(m.path(f"{HOME}/bad.h5"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"not hdf5")
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.EINVAL
    assert stats(m)["writes"]["commit_failures"] == 1


def test_stats_file_cannot_be_changed(mount_bucket, bucket_copy, tmp_path):
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    path = m.path(STATS)
    checks = [(lambda: open(path, "w"), errno.EACCES),
              (lambda: os.truncate(path, 0), errno.EACCES),
              (lambda: os.unlink(path), errno.EPERM),
              (lambda: os.mkdir(path), errno.EEXIST),
              (lambda: os.rename(path, m.path("x")), errno.EPERM),
              (lambda: shutil.copyfile(SOURCE / "sample1.h5", path), errno.EACCES)]
    for change, want in checks:
        with pytest.raises(OSError) as e:
            change()
        assert e.value.errno == want, (change, e.value)
    with pytest.raises(OSError) as e:
        os.rename(m.path(f"{HOME}/sample1.h5"), path)
    assert e.value.errno == errno.EPERM
    assert json.loads(path.read_text())["version"]
    assert STATS not in os.listdir(m.bucket)           # nothing reached the bucket


def test_read_only_mount_has_no_writes(mount_bucket):
    m = mount_bucket(BUCKET, "-o", "user=test_user1,ro")
    assert stats(m)["writes"] is None


def test_sigusr1_logs_the_statistics_and_the_mount_serves_on(mount_bucket):
    m = mount_bucket(BUCKET, "-o", "user=test_user1")
    with h5py.File(m.path(f"{HOME}/sample3.h5"), "r") as f:
        list(f)
    for n in (1, 2):        # one at a time: two pending SIGUSR1 are one
        m.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while m.log().count("statistics: ") < n:
            assert time.monotonic() < deadline, m.log()[-2000:]
            time.sleep(0.05)
    line = [x for x in m.log().splitlines() if "statistics: " in x][-1]
    logged = json.loads(line.split("statistics: ", 1)[1])
    assert logged["images"]["built"] >= 1
    assert logged["store"]["requests"]["get"] > 0
    assert_serving(m)
