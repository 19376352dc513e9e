"""Many mounts, one bucket (issue 13.1): two daemons with their own cache_dirs write the same
domain. A commit is conditional on the version its file started from; the loser's close()
fails with ESTALE and its bytes are kept whole in its cache_dir's rejected/ folder, named in
one log line. Nothing is lost silently, and no domain is ever a mix of two writers."""
import errno
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import conftest
import harness
from conftest import SOURCE, Mount

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"


@pytest.fixture
def two_mounts(bucket_copy, mount_bucket, tmp_path):
    """Two read-write daemons on one bucket, each with its own cache_dir (as on two
    machines), ttl=0 so that each sees the other's commits at the next open."""
    a = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache_a")
    b = mount_bucket(a, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache_b")
    return a, b


def make_domain(m, name, tmp_path):
    src = tmp_path / f"{name}.src.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.arange(2000, dtype="<i4"), chunks=(500,))
    with open(src, "rb") as fin, open(m.path(f"{HOME}/{name}"), "wb") as fout:
        fout.write(fin.read())
    return src


def same_hdf5(a, b):
    """h5diff finds no difference between the two files (objects, attributes, values)."""
    r = subprocess.run(["h5diff", str(a), str(b)], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode == 0


# HDF5 leaves a file whose close failed half-closed, and h5py then crashes at exit: the writer
# that loses runs in a child process, which reports its close and leaves with os._exit.
R_PLUS_WRITER = r"""
import os, re, sys
import h5py
f = h5py.File(sys.argv[1], "r+")
print("open", flush=True)
sys.stdin.readline()
f.attrs[sys.argv[2]] = int(sys.argv[3])
f["x"][int(sys.argv[3]) - 1] = -int(sys.argv[3])
try:
    f.close()
    print("closed", flush=True)
except Exception as e:
    m = re.search(r"errno = (\d+)", str(e))
    print("errno", m.group(1) if m else repr(e), flush=True)
os._exit(0)
"""


class RPlusWriter:
    """h5py.File(path, "r+") in a child: open now; change() adds attribute name = value,
    sets x[value - 1] = -value and closes: -> "closed" or "errno N"."""

    def __init__(self, path, name, value):
        self.proc = subprocess.Popen([sys.executable, "-c", R_PLUS_WRITER, str(path), name,
                                      str(value)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "open"

    def change(self):
        out, _ = self.proc.communicate("go\n", timeout=60)
        return out.strip()


def kept_file(m, cache_dir, timeout=30):
    """The path the 'kept as' log line names, checked to be in cache_dir's rejected/. The file
    is moved and the line logged at the release, which the kernel sends after close(2) (or
    the writer's exit) has returned: awaited."""
    deadline = time.monotonic() + timeout
    while not (found := re.findall(r"another writer changed the domain.*kept as (\S+)",
                                   m.log())):
        assert time.monotonic() < deadline, m.log()[-3000:]
        time.sleep(0.02)
    assert len(found) == 1, m.log()[-3000:]
    kept = Path(found[0])
    assert kept.parent == Path(cache_dir) / "rejected" and kept.is_file(), kept
    return kept


def test_two_r_plus_writers_the_second_close_fails_and_keeps_its_change(two_mounts, tmp_path):
    a, b = two_mounts
    make_domain(a, "both.h5", tmp_path)
    wa = RPlusWriter(a.path(f"{HOME}/both.h5"), "a", 1)
    wb = RPlusWriter(b.path(f"{HOME}/both.h5"), "b", 2)
    assert wa.change() == "closed"
    assert wb.change() == f"errno {errno.ESTALE}"
    for m in (a, b):
        with h5py.File(m.path(f"{HOME}/both.h5"), "r") as f:
            assert dict(f.attrs) == {"a": 1}
            assert list(f["x"][:3]) == [-1, 1, 2]
    kept = kept_file(b, tmp_path / "cache_b")
    with h5py.File(kept, "r") as f:     # B's change, whole: its unchanged chunks included
        assert dict(f.attrs) == {"b": 2}
        want = np.arange(2000, dtype="<i4")
        want[1] = -2
        assert np.array_equal(f["x"][:], want)
    assert "another writer" not in a.log()


def raw_write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    return fd


def close_errno(fd):
    try:
        os.close(fd)
    except OSError as e:
        return e.errno
    return None


@pytest.mark.parametrize("exists", [False, True], ids=["new", "replace"])
def test_two_copies_to_one_path_one_wins_whole(two_mounts, tmp_path, exists):
    """cp from two mounts at once, to a new path or over a domain: the first close stores its
    file; the second fails with ESTALE, stores nothing and keeps its bytes."""
    a, b = two_mounts
    if exists:
        make_domain(a, "cp.h5", tmp_path)
    one, two = SOURCE / "sample1.h5", SOURCE / "sample2.h5"
    fa = raw_write(a.path(f"{HOME}/cp.h5"), one.read_bytes())
    fb = raw_write(b.path(f"{HOME}/cp.h5"), two.read_bytes())
    assert close_errno(fa) is None
    assert close_errno(fb) == errno.ESTALE
    for m in (a, b):
        with h5py.File(m.path(f"{HOME}/cp.h5"), "r") as got, h5py.File(one, "r") as want:
            assert sorted(got) == sorted(want)
    assert kept_file(b, tmp_path / "cache_b").read_bytes() == two.read_bytes()


@pytest.mark.parametrize("exists", [False, True], ids=["new", "replace"])
def test_commits_at_the_same_moment_one_wins_whole(bucket_copy, mount_bucket, tmp_path,
                                                   exists):
    """Four mounts close a copy to one path at once, so that their conditional puts may race
    on the server (RGW refuses a put that loses such a race with 500 UnknownError, which
    h5osfs retries into the 412 that tells it lost): exactly one close succeeds, the others
    fail with ESTALE and keep their bytes, and the domain is the winner's file whole."""
    import threading
    sources = [SOURCE / n for n in ("sample1.h5", "sample2.h5", "sample3.h5",
                                    "partial_expected.h5")]
    mounts = [mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,"
                                              f"cache_dir={tmp_path}/cache{i}")
              for i in range(len(sources))]
    if exists:
        make_domain(mounts[0], "race.h5", tmp_path)
    fds = [raw_write(m.path(f"{HOME}/race.h5"), src.read_bytes())
           for m, src in zip(mounts, sources)]
    barrier = threading.Barrier(len(fds))
    results = [None] * len(fds)

    def close(i):
        barrier.wait()
        results[i] = close_errno(fds[i])
    threads = [threading.Thread(target=close, args=(i,)) for i in range(len(fds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results.count(None) == 1 and results.count(errno.ESTALE) == len(fds) - 1, results
    won = results.index(None)
    for i, (m, src) in enumerate(zip(mounts, sources)):
        assert same_hdf5(m.path(f"{HOME}/race.h5"), sources[won]), (i, won)
        if i != won:
            assert kept_file(m, tmp_path / f"cache{i}").read_bytes() == src.read_bytes()
    assert "another writer" not in mounts[won].log()


def test_writers_one_after_the_other_both_changes_stay(two_mounts, tmp_path):
    """No false conflict: B opens after A's commit, so B starts from A's version."""
    a, b = two_mounts
    make_domain(a, "turns.h5", tmp_path)
    for m, name in ((a, "a"), (b, "b"), (a, "c")):
        with h5py.File(m.path(f"{HOME}/turns.h5"), "r+") as f:
            f.attrs[name] = 1
    for m in (a, b):
        with h5py.File(m.path(f"{HOME}/turns.h5"), "r") as f:
            assert sorted(f.attrs) == ["a", "b", "c"]
    assert "another writer" not in a.log() + b.log()


def test_a_change_that_loses_while_its_daemon_is_down_is_kept_at_restart(
        bucket_copy, mount_bucket, tmp_path):
    """B stages a replacement and dies (kill -9) before its close; A replaces the domain. B's
    next mount finds the conflict at recovery: A's version stays, B's bytes go to
    rejected/."""
    a = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache_a")
    make_domain(a, "down.h5", tmp_path)
    cache_b = tmp_path / "cache_b"
    mnt_b = tmp_path / "mnt_b"
    mnt_b.mkdir()
    b = Mount(a.src, mnt_b, tmp_path / "b.log", ("-o", f"user=test_user1,ttl=0,"
                                                 f"cache_dir={cache_b}"))
    try:
        fd = raw_write(b.path(f"{HOME}/down.h5"), (SOURCE / "sample2.h5").read_bytes())
        b.proc.kill()
        b.proc.wait()
    finally:
        subprocess.run(["fusermount3", "-uz", str(mnt_b)], capture_output=True)
    close_errno(fd)                                 # the dead mount's handle
    one = SOURCE / "sample1.h5"
    with open(one, "rb") as fin, open(a.path(f"{HOME}/down.h5"), "wb") as fout:
        fout.write(fin.read())
    b2 = mount_bucket(a, "-o", f"user=test_user1,ttl=0,cache_dir={cache_b}")
    kept = re.findall(r"lost to another writer's change: kept as (\S+)", b2.log())
    assert len(kept) == 1, b2.log()[-3000:]
    assert Path(kept[0]).read_bytes() == (SOURCE / "sample2.h5").read_bytes()
    for m in (a, b2):
        with h5py.File(m.path(f"{HOME}/down.h5"), "r") as got, h5py.File(one, "r") as want:
            assert sorted(got) == sorted(want)
    assert not list((cache_b / "staging").iterdir())


def the_second_of_two_writers_loses(a, b, name, attrs):
    """r+ writers on mounts a and b, a's close first: a's change lands on top of attrs, b's
    close fails with ESTALE."""
    wa = RPlusWriter(a.path(f"{HOME}/{name}"), "a", 1)
    wb = RPlusWriter(b.path(f"{HOME}/{name}"), "b", 2)
    assert wa.change() == "closed"
    assert wb.change() == f"errno {errno.ESTALE}"
    with h5py.File(b.path(f"{HOME}/{name}"), "r") as f:
        assert sorted(f.attrs) == sorted(["a"] + attrs)


@pytest.mark.not_on("posix", "s3", reason="Ceph RGW's If-Match (s3rver takes RFC 7232's quoted "
                    "ETag; a local bucket has none)")
def test_replacements_on_rgw_send_the_bare_if_match_once_seen(two_mounts, tmp_path):
    """The real server behind test_commits_on_a_server_that_wants_if_match_bare: each mount's
    first replacement finds that RGW refuses the quoted ETag, says so once, and every commit
    lands; the second of two writers still loses."""
    a, b = two_mounts
    make_domain(a, "bare.h5", tmp_path)
    for attr, value in (("x", 3), ("y", 4)):      # in a child: a failed close crashes h5py
        assert RPlusWriter(a.path(f"{HOME}/bare.h5"), attr, value).change() == "closed"
    assert a.log().count("wants If-Match without quotes") == 1, a.log()[-3000:]
    the_second_of_two_writers_loses(a, b, "bare.h5", ["x", "y"])
    kept_file(b, tmp_path / "cache_b")


@pytest.mark.posix_only(reason="starts its own S3 server (server.js --if-match-bare), whatever "
                        "the backend")
def test_commits_on_a_server_that_wants_if_match_bare(backend, tmp_path):
    """Ceph RGW 16 compares If-Match with its unquoted ETag byte for byte, so RFC 7232's quoted
    form never matches there. Commits still land (h5osfs sends the bare ETag once it sees
    that), and the second of two writers still loses."""
    from s3fixtures import S3Server
    srv = S3Server(tmp_path / "rgw-like", extra_args=("--if-match-bare",))
    mounts = []
    try:
        name = srv.new_bucket(conftest.BUCKET)
        for i in (0, 1):
            mounts.append(conftest.mount_own_server(srv, name, tmp_path, i))
        a, b = mounts
        make_domain(a, "bare.h5", tmp_path)                 # a create: If-None-Match
        for attr in ("x", "y"):                             # replacements: If-Match
            with h5py.File(a.path(f"{HOME}/bare.h5"), "r+") as f:
                f.attrs[attr] = 1
        assert "without quotes" in a.log()
        the_second_of_two_writers_loses(a, b, "bare.h5", ["x", "y"])
    finally:
        problems = harness.finish_all(mounts)
        assert srv.stop() == 0
    assert not problems, problems
