"""Sizes and versions (issue 12, defects 1 and 4): whatever reports a domain's size reports the
exact size of the file an open reads, before any open too, so tar, cp -a and du out of a mount
copy equal files; and an open sees one whole version of a domain, old or new, with the
matching size, while the same mount replaces it."""
import os
import shutil
import subprocess
import tarfile
import threading
import time

import h5py
import numpy as np
import pytest

from conftest import BUCKET

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"


def domain_files(root):
    """Every regular file below root (the domains a mount shows), relative paths."""
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
    return sorted(out)


def test_size_before_open_is_the_size_read(mount_bucket):
    """Every fixture domain, linked ones included: st_size from a stat that no open preceded
    (a fresh mount) is the number of bytes an open reads, and stays so."""
    m = mount_bucket(BUCKET, "-o", "user=test_user1")
    sizes = {rel: os.stat(m.path(f"{HOME}/{rel}")).st_size
             for rel in domain_files(m.path(HOME))}
    assert sizes and "sample_link.h5" in sizes
    for rel, size in sizes.items():
        data = m.path(f"{HOME}/{rel}").read_bytes()
        assert len(data) == size, rel
        assert os.stat(m.path(f"{HOME}/{rel}")).st_size == size, rel


def make_file(path, n, tag):
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(n, dtype="<i8") * 3
        f.attrs["tag"] = tag


def test_new_domain_copies_out_whole(mount_bucket, bucket_copy, tmp_path):
    """A domain written through the mount, then remounted (its .info.json is the one h5osfs
    wrote, which no size comes from): stat, ls -l, du, tar, cp -a and cp give files equal to
    what an open reads."""
    src = tmp_path / "new.h5"
    make_file(src, 50000, "new")
    m = mount_bucket(bucket_copy, "-o", "user=test_user1")
    shutil.copyfile(src, m.path(f"{HOME}/new.h5"))
    assert m.unmount() == 0
    m2 = mount_bucket(m, "-o", "user=test_user1")
    path = m2.path(f"{HOME}/new.h5")
    size = os.stat(path).st_size
    assert size > 0
    ls = subprocess.run(["ls", "-l", str(path)], capture_output=True, text=True, check=True)
    assert f" {size} " in ls.stdout
    du = subprocess.run(["du", "-B1", "--apparent-size", str(path)], capture_output=True,
                        text=True, check=True)
    assert int(du.stdout.split()[0]) == size
    data = path.read_bytes()
    assert len(data) == size

    archive = tmp_path / "out.tar"
    r = subprocess.run(["tar", "-C", str(m2.path(HOME)), "-cf", str(archive), "."],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "shrank" not in r.stderr and "changed" not in r.stderr, r.stderr
    with tarfile.open(archive) as t:
        members = {os.path.normpath(i.name): i for i in t.getmembers() if i.isfile()}
        for rel in domain_files(m2.path(HOME)):
            got = t.extractfile(members[rel]).read()
            assert got == m2.path(f"{HOME}/{rel}").read_bytes(), rel

    out = tmp_path / "cp_a"
    subprocess.run(["cp", "-a", str(m2.path(HOME)), str(out)], check=True)
    for rel in domain_files(m2.path(HOME)):
        assert (out / rel).read_bytes() == m2.path(f"{HOME}/{rel}").read_bytes(), rel
    with h5py.File(out / "new.h5", "r") as f:
        assert np.array_equal(f["x"][...], np.arange(50000, dtype="<i8") * 3)


def test_stat_after_replacement_shows_the_new_size(mount_bucket, bucket_copy, tmp_path):
    """cp over a domain: the next stat on the same mount shows the new file's size, and the
    bytes an open reads are that many."""
    small, big = tmp_path / "small.h5", tmp_path / "big.h5"
    make_file(small, 10, "small")
    make_file(big, 200000, "big")
    m = mount_bucket(bucket_copy, "-o", "user=test_user1")
    target = m.path(f"{HOME}/grow.h5")
    shutil.copyfile(small, target)
    first = os.stat(target).st_size
    assert len(target.read_bytes()) == first
    shutil.copyfile(big, target)
    second = os.stat(target).st_size
    assert second > first
    assert len(target.read_bytes()) == second
    with h5py.File(target, "r") as f:
        assert f.attrs["tag"] == "big"


COPIES = 20     # replacements: 10 of each version
HANG = 600      # s: only a hang check; each step waits for what it needs, not for a time


def test_opens_during_replacements_see_whole_versions(mount_bucket, bucket_copy, tmp_path):
    """One thread replaces a domain with cp COPIES times (two versions of different sizes),
    three keep opening and reading it on the same mount: every open reads one whole version,
    old or new; none fails, none mixes. Each replacement waits until an open that began
    after the one before has been read, so every version is read, whatever the scheduling.
    A file opened before a replacement keeps reading its version after it."""
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    make_file(a, 1000, "A")
    make_file(b, 300000, "B")
    want = {"A": np.arange(1000, dtype="<i8") * 3, "B": np.arange(300000, dtype="<i8") * 3}
    m = mount_bucket(bucket_copy, "-o", "user=test_user1")
    target = m.path(f"{HOME}/race.h5")
    shutil.copyfile(a, target)
    held = h5py.File(target, "r")           # version A, read after the replacements
    done = threading.Event()
    cond = threading.Condition()
    errors, seen = [], {"A": 0, "B": 0}
    copies = [0]            # replacements finished
    read_after = [0]        # the most replacements an open had seen finished when it began
    deadline = time.monotonic() + HANG

    def writer():
        try:
            for i in range(COPIES):
                shutil.copyfile(b if i % 2 == 0 else a, target)
                with cond:
                    copies[0] += 1
                    while read_after[0] < copies[0] and time.monotonic() < deadline:
                        cond.wait(1)
                    if read_after[0] < copies[0]:
                        errors.append(f"no open read version {copies[0]} within {HANG} s")
                        return
        except Exception as e:             # noqa: BLE001 (every failure is a finding)
            errors.append(f"writer: {e!r}")
        finally:
            done.set()

    def reader():
        while not done.is_set():
            with cond:
                began_after = copies[0]
            try:
                with h5py.File(target, "r") as f:
                    tag = f.attrs["tag"]
                    if not np.array_equal(f["x"][...], want[tag]):
                        errors.append(f"version {tag}: wrong values")
                    seen[tag] += 1
            except Exception as e:         # noqa: BLE001 (every failure is a finding)
                errors.append(repr(e))
            with cond:
                read_after[0] = max(read_after[0], began_after)
                cond.notify_all()

    threads = [threading.Thread(target=writer, daemon=True)] + [
        threading.Thread(target=reader, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(deadline - time.monotonic(), 0) + 60)
    assert not any(t.is_alive() for t in threads), f"hung: {copies} replacements, {seen}"
    assert not errors, errors[:5]
    # each version had an open of its own (begun after it was made, ended before the next
    # replacement began), so both were seen
    assert copies[0] == COPIES and min(seen.values()) > 0, (copies, seen)
    assert held.attrs["tag"] == "A" and np.array_equal(held["x"][...], want["A"])
    held.close()


def test_reads_ask_no_attributes(mount_bucket):
    """A version's size and bytes never change, so the kernel keeps them: 2000 small reads of
    a column, as HDF5 makes them, cost no GETATTR each (the debug log lists every request)."""
    m = mount_bucket(BUCKET, "-d", "-o", "user=test_user1,ttl=60")
    path = m.path(f"{HOME}/sample2.h5")
    size = os.stat(path).st_size
    data = path.read_bytes()
    assert len(data) == size
    before = m.log().count("opcode: GETATTR")
    with open(path, "rb") as f:
        for i in range(2000):
            f.seek((i * 4099) % (size - 8))
            assert f.read(8) == data[(i * 4099) % (size - 8):][:8]
    assert m.log().count("opcode: GETATTR") - before <= 2
