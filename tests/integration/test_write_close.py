"""When a written file becomes the domain (issue 24 part 4): an open file description shared by
several processes (a shell's `> file` handed to each command of a group) is committed once
its last descriptor closes, so no close sees a half-written file; and readers opening a domain
that `cp` keeps replacing, on a busy machine, each get one whole version, never ESTALE.

The store does not matter here (flush, release and open are the FUSE front end's): posix only.
"""
import errno
import json
import os
import shutil
import subprocess
import sys
import threading

import h5py
import numpy as np

HOME = "home/test_user1"

import pytest

pytestmark = pytest.mark.backends("posix")


@pytest.fixture
def writable(bucket_copy, mount_bucket, tmp_path):
    return mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")


def make_file_of(path, n, tag):
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(n, dtype="<i8") * 3
        f.attrs["tag"] = tag


def assert_version(path, n, tag):
    with h5py.File(path, "r") as f:
        assert f.attrs["tag"] == tag
        assert np.array_equal(f["x"][...], np.arange(n, dtype="<i8") * 3)


def test_commands_sharing_a_redirection_write_one_file(writable, tmp_path):
    """`(head -c N src; tail -c +N+1 src) > MNT/x.h5`: head's close is not the last of the
    open file description (tail's and the subshell's follow), so it commits nothing and
    succeeds; the file is stored whole once the last descriptor closes."""
    src = tmp_path / "src.h5"
    make_file_of(src, 100000, "whole")
    half = src.stat().st_size // 2
    target = writable.path(f"{HOME}/split.h5")
    r = subprocess.run(["bash", "-c", f'(head -c {half} "$1"; tail -c +{half + 1} "$1") > "$2"',
                        "sh", str(src), str(target)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert target.stat().st_size > 0
    assert_version(target, 100000, "whole")
    assert "not an HDF5 file" not in writable.log()
    assert writable.log().count("split.h5: committed") == 1     # once, at the last close


def test_dup_descriptors_commit_at_the_last_close_with_its_error(writable, tmp_path):
    """Two descriptors of one open (dup): closing the first commits nothing and succeeds; the
    last close commits, and a commit's error (bytes that are not HDF5) is that close's."""
    src = tmp_path / "src.h5"
    make_file_of(src, 50000, "dup")
    data = src.read_bytes()
    target = writable.path(f"{HOME}/dup.h5")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    second = os.dup(fd)
    try:
        os.write(fd, data[:1000])
        os.close(fd)                                    # not the last: no EINVAL
        os.write(second, data[1000:])
    finally:
        os.close(second)
    assert_version(target, 50000, "dup")
    assert writable.log().count("dup.h5: committed") == 1

    junk = writable.path(f"{HOME}/junk.h5")
    fd = os.open(junk, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    second = os.dup(fd)
    os.write(fd, b"not HDF5 at all")
    os.close(fd)
    with pytest.raises(OSError) as e:
        os.close(second)
    assert e.value.errno == errno.EINVAL
    assert not junk.exists()


def test_opener_closing_first_leaves_the_commit_to_the_child_that_writes(writable, tmp_path):
    """open, fork: the child writes the first half, the parent closes its descriptor (not the
    last: the child, which wrote, still holds one), then the child writes the rest and exits;
    its exit's close commits the whole file."""
    src = tmp_path / "src.h5"
    make_file_of(src, 50000, "forked")
    data = src.read_bytes()
    target = writable.path(f"{HOME}/forked.h5")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    wrote_half, go_on = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:                                        # the child: no pytest code runs here
        code = 1
        try:
            os.close(wrote_half[0])
            os.close(go_on[1])
            os.write(fd, data[:len(data) // 2])
            os.write(wrote_half[1], b"x")
            os.read(go_on[0], 1)                        # the parent closed (or gave up)
            os.write(fd, data[len(data) // 2:])
            code = 0
        finally:
            os._exit(code)                              # closes fd: the last descriptor
    os.close(wrote_half[1])
    os.close(go_on[0])
    try:
        assert os.read(wrote_half[0], 1) == b"x"
        os.close(fd)                                    # the child still writes: no commit
    finally:
        os.close(go_on[1])
        os.close(wrote_half[0])
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert_version(target, 50000, "forked")
    assert writable.log().count("forked.h5: committed") == 1
    assert "not an HDF5 file" not in writable.log()


def test_fsync_commits_while_other_descriptors_are_open(writable, tmp_path):
    """fsync makes the file durable whatever else holds it: it commits, and its error is
    fsync's."""
    src = tmp_path / "src.h5"
    make_file_of(src, 20000, "synced")
    target = writable.path(f"{HOME}/synced.h5")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    second = os.dup(fd)
    os.write(fd, src.read_bytes())
    os.fsync(fd)
    assert writable.log().count("synced.h5: committed") == 1
    root = os.getxattr(target, "user.h5osfs.root")
    os.close(fd)
    os.close(second)                                    # nothing changed since: no commit
    assert writable.log().count("synced.h5: committed") == 1
    assert os.getxattr(target, "user.h5osfs.root") == root
    assert_version(target, 20000, "synced")


READER = r"""
import errno, json, sys
import h5py, numpy as np
path, opens, sizes = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
seen, failures = {tag: 0 for tag in sizes}, []
for _ in range(opens):
    try:
        with h5py.File(path, "r") as f:
            tag = f.attrs["tag"]
            if not np.array_equal(f["x"][...], np.arange(sizes[tag], dtype="<i8") * 3):
                failures.append(f"version {tag}: other values")
            seen[tag] += 1
    except Exception as e:              # every failure is a finding
        failures.append(repr(e)[:200])
print(json.dumps({"seen": seen, "failures": failures}))
"""


def test_opens_on_a_busy_machine_while_cp_replaces_get_whole_versions(writable, tmp_path):
    """A domain that cp keeps replacing (two versions of different sizes) on the same mount,
    four reader processes opening and reading it whole 150 times each, the CPUs kept busy by
    burners (the wait between the kernel's lookup and its open grows, and the domain is
    often replaced in between, twice too): every open succeeds (no ESTALE) and reads one
    whole version; every cp succeeds."""
    sizes = {"A": 1000, "B": 300000}
    versions = {tag: tmp_path / f"{tag}.h5" for tag in sizes}
    for tag, n in sizes.items():
        make_file_of(versions[tag], n, tag)
    target = writable.path(f"{HOME}/race.h5")
    shutil.copyfile(versions["A"], target)
    stop, copies, cp_errors = threading.Event(), [0], []

    def replace_in_a_loop():
        while not stop.is_set():
            try:
                shutil.copyfile(versions["B" if copies[0] % 2 == 0 else "A"], target)
                copies[0] += 1
            except OSError as e:
                cp_errors.append(repr(e))

    burners = [subprocess.Popen(["nice", "-n", "5", "sh", "-c", "while :; do :; done"])
               for _ in range(os.cpu_count() or 2)]
    writer = threading.Thread(target=replace_in_a_loop)
    try:
        writer.start()
        readers = [subprocess.Popen([sys.executable, "-c", READER, str(target), "150",
                                     json.dumps(sizes)], stdout=subprocess.PIPE, text=True)
                   for _ in range(4)]
        results = [json.loads(r.communicate()[0]) for r in readers]
    finally:
        stop.set()
        writer.join()
        for b in burners:
            b.kill()
            b.wait()
    failures = [f for r in results for f in r["failures"]]
    assert failures == [], (len(failures), failures[:5])
    assert cp_errors == [], cp_errors[:5]
    assert sum(sum(r["seen"].values()) for r in results) == 600
    assert copies[0] >= 2, (copies, results)


def test_readers_while_cp_replaces_a_domain_read_whole_versions_byte_for_byte(
        bucket_copy, mount_bucket, tmp_path):
    """cp over a domain writes through the inode the kernel has for the path: its O_TRUNC and
    writes change that inode's size, which the kernel keeps for ttl, and drop its pages. A
    writer now gets a node of its own, so readers of the stored version keep theirs: a reader
    that opened before the replacements and one that opens again and again while cp replaces
    the domain (a small and a large version, in turn) read whole versions, byte for byte,
    never one cut at the writer's size or padded with another's bytes or zeros."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,cache_dir={tmp_path}/cache")
    sources = {"small": tmp_path / "small.h5", "large": tmp_path / "large.h5"}
    make_file_of(sources["small"], 1000, "small")
    make_file_of(sources["large"], 600000, "large")
    target = m.path(f"{HOME}/replaced.h5")
    stored = {}
    for tag in ("large", "small"):
        subprocess.run(["cp", str(sources[tag]), str(target)], check=True, stdin=subprocess.DEVNULL)
        stored[tag] = target.read_bytes()
    held = os.open(target, os.O_RDONLY)                      # the small version, open throughout
    done = threading.Event()

    def replace():
        try:
            for _ in range(10):
                for tag in ("large", "small"):
                    subprocess.run(["cp", str(sources[tag]), str(target)], check=True,
                                   stdin=subprocess.DEVNULL)
        finally:
            done.set()

    writer = threading.Thread(target=replace)
    reads, wrong = 0, []
    try:
        writer.start()
        while not done.is_set() or reads == 0:
            with open(target, "rb") as f:
                got = f.read()
            reads += 1
            if got not in stored.values():
                wrong.append(len(got))
        writer.join()
        held_bytes = b"".join(iter(lambda: os.read(held, 1 << 20), b""))
    finally:
        os.close(held)
        writer.join()
    assert wrong == [], (reads, wrong[:10])
    assert held_bytes == stored["small"]


def test_a_readers_close_never_commits_what_a_writer_has_written_so_far(
        writable, bucket_copy, tmp_path):
    """A new file that h5py is writing (flushed: valid HDF5 so far) read by another process
    (cat, the same user): cat's close commits nothing; the writer's close stores the file
    whole, once."""
    target = writable.path(f"{HOME}/growing.h5")
    with h5py.File(target, "w") as f:
        f["first"] = np.arange(10)
        f.flush()
        r = subprocess.run(["cat", str(target)], stdin=subprocess.DEVNULL, capture_output=True)
        assert r.returncode == 0, r.stderr
        assert not (bucket_copy / HOME / "growing.h5" / ".domain.json").exists()
        f["second"] = np.arange(5)
    with h5py.File(target, "r") as f:
        assert sorted(f) == ["first", "second"]
    assert writable.log().count("growing.h5: committed") == 1
