"""Ingest cost follows the stored bytes, never the declared extent (issue 10, part 4).

A file whose datasets declare huge shapes but store little must be committed in time that
follows what it stores: a 1.4 KB file declaring a 9 EB contiguous dataset with no storage once
made `cp` hang for good (the daemon had to be killed), and an 18 GB unallocated contiguous
dataset took a minute, because the ingest read the declared extent chunk by chunk. The files
are made here with h5py (H5D_ALLOC_TIME_LATE, nothing written unless said), copied into a
real mount under a bound on the daemon's CPU time (what a walk of the extent would spend; a
loaded machine adds nothing to it, unlike to the wall clock), read back through the mount with
h5py against the source, and their objects checked against the spec (objcheck). While one long
commit runs, the daemon keeps answering other requests and other commits (no file may stall
it)."""
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import conftest
import objcheck

pytestmark = pytest.mark.backends("posix", "s3")

HOME = "home/test_user1"
# s of the daemon's CPU time for a copy or a change of a small file: about 0.1 s; before the
# fix the 180 GB of netcdf_like took over 100 s (the 18 GB: 14 s), the 9 EB for ever
CPU_LIMIT = 10
HANG_LIMIT = 120        # s: only a hang check (a commit that never ends: the daemon is killed)
ANSWERS_DURING = 3      # answers of each kind of request while a commit runs, at least
EB_ROWS = 2 ** 50       # x 8 KiB elements = 2^63 bytes, the largest extent HDF5 accepts


@pytest.fixture
def writable(bucket_copy, mount_bucket, tmp_path):
    return mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")


# ---- the files ----

def late_dcpl(layout, chunks=None, fill=None, dtype=None):
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_LATE)
    if chunks is not None:
        dcpl.set_chunk(chunks)
    else:
        dcpl.set_layout(layout)
    if fill is not None:
        dcpl.set_fill_value(np.array(fill, dtype=dtype))
    return dcpl


def late_dataset(f, name, shape, dtype, layout=h5py.h5d.CONTIGUOUS, chunks=None, fill=None,
                 maxshape=None):
    """A dataset that stores nothing: its storage is allocated at the first write, and none
    comes. maxshape None entries are unlimited."""
    dtype = np.dtype(dtype)
    mx = None if maxshape is None else tuple(h5py.h5s.UNLIMITED if m is None else m
                                             for m in maxshape)
    space = h5py.h5s.create_simple(tuple(shape), mx)
    h5py.h5d.create(f.id, name.encode(), h5py.h5t.py_create(dtype), space,
                    dcpl=late_dcpl(layout, chunks, fill, dtype))
    return f[name]


def make_contiguous_eb(path):
    """9 EB declared in contiguous layout (2^50 elements of 8 KiB), and 1 PB of bytes with a
    fill value: no storage at all."""
    with h5py.File(path, "w") as f:
        late_dataset(f, "huge", (EB_ROWS,), ("<f8", (1024,)))
        late_dataset(f, "bytes", (EB_ROWS,), "u1", fill=7)


def make_netcdf_like(path):
    """What netCDF-4 writes for fixed and unlimited dimensions with nothing written: dimension
    scales, a contiguous variable of 180 GB (the issue's 546-byte file declared 18 GB: 14 s;
    ten times that fails the time bound however fast the machine) and a chunked one along an
    unlimited time axis."""
    with h5py.File(path, "w", libver="earliest") as f:
        f.attrs["_NCProperties"] = np.bytes_(b"version=2,netcdf=4.9.0,hdf5=1.10.8")
        for name, n in (("time", 20000), ("lat", 1500), ("lon", 1500)):
            d = late_dataset(f, name, (n,), "<f4", maxshape=(None,) if name == "time" else None,
                             chunks=(1024,) if name == "time" else None)
            d.make_scale(name)
        fixed = late_dataset(f, "fixed", (20000, 1500, 1500), "<f4", fill=-9.5)
        temp = late_dataset(f, "temp", (20000, 1500, 1500), "<f4", chunks=(1, 1500, 1500),
                            fill=9.96921e36, maxshape=(None, 1500, 1500))
        for var in (fixed, temp):
            var.attrs["_FillValue"] = np.float32(var.fillvalue)
            for k, name in enumerate(("time", "lat", "lon")):
                var.dims[k].attach_scale(f[name])


def make_huge_maxshape(path):
    """Chunked, a tiny extent and a huge or unlimited maximum: nothing written."""
    with h5py.File(path, "w") as f:
        late_dataset(f, "tiny", (10,), "<f4", chunks=(4,), fill=3.5, maxshape=(2 ** 50,))
        late_dataset(f, "empty", (0,), "<i8", chunks=(16,), maxshape=(None,))
        late_dataset(f, "wide", (5, 7), "<i2", chunks=(2, 3), fill=-1,
                     maxshape=(None, 2 ** 40))


def make_partially_written(path):
    """Huge chunked extents with a few chunks written: in HSDS's grid (1 MiB chunks, raw
    copies with gzip) and in another one (1000-element chunks, re-chunked). Storage is
    allocated chunk by chunk as written (H5D_ALLOC_TIME_INCR: late allocation of a chunked
    dataset allocates every chunk at the first write)."""
    with h5py.File(path, "w") as f:
        other = f.create_dataset("other_grid", shape=(2 ** 40,), dtype="<i2", chunks=(1000,),
                                 fillvalue=7)
        other[0:10] = np.arange(10, dtype="<i2")
        other[2 ** 39:2 ** 39 + 3000] = -3
        other[-5:] = 5
        same = f.create_dataset("same_grid", shape=(2 ** 30, 1024), dtype="<f4",
                                chunks=(256, 1024), compression="gzip", fillvalue=0.25)
        same[0:3] = np.linspace(0, 1, 3 * 1024, dtype="<f4").reshape(3, 1024)
        same[2 ** 29:2 ** 29 + 300] = 2.0


FILES = {
    "contiguous_eb": make_contiguous_eb,
    "netcdf_like": make_netcdf_like,
    "huge_maxshape": make_huge_maxshape,
    "partially_written": make_partially_written,
}


# ---- comparing through the mount ----

def probes(shape):
    """Selections at the start, the end, the middle and around 2^k of a dataset of shape."""
    if not shape or 0 in shape:
        return [()]
    out = []
    for frac in (0, 0.5, 1):
        start = tuple(min(int(n * frac), n - 1) for n in shape)
        out.append(tuple(slice(max(s - 2, 0), min(s + 3, n)) for s, n in zip(start, shape)))
    first = shape[0]
    for k in (29, 39, 49):
        if first > 2 ** k:
            out.append((slice(2 ** k - 2, min(2 ** k + 3001, first)),) +
                       tuple(slice(0, min(n, 4)) for n in shape[1:]))
    return out


def assert_same_datasets(src, mounted):
    with h5py.File(src, "r") as a, h5py.File(mounted, "r") as b:
        names = []
        a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
        assert names
        for name in names:
            x, y = a[name], b[name]
            assert (y.shape, y.dtype, y.maxshape) == (x.shape, x.dtype, x.maxshape), name
            if x.fillvalue is not None and x.dtype.subdtype is None:
                assert y.fillvalue == x.fillvalue, name
            for sel in probes(x.shape):
                np.testing.assert_array_equal(y[sel], x[sel], err_msg=f"{name}[{sel}]")
        for name in names:
            assert dict(b[name].attrs).keys() == dict(a[name].attrs).keys(), name


def stored_chunks(bucket, domain):
    """The chunk objects of the domain's current root (posix buckets)."""
    doc = json.loads((bucket / domain.lstrip("/") / ".domain.json").read_text())
    prefix = bucket / "db" / doc["root"][2:19]
    return [p for p in prefix.rglob("*") if p.is_file() and not p.name.endswith(".json")
            and not conftest.is_put_under_way(p)]


def cpu_seconds(pid):
    """User and system CPU time process pid has used so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def give_up(m, what):
    """A close() that waits for a commit cannot be interrupted (FUSE flush): only the daemon's
    end frees the caller, so a test that waited too long kills it, then fails."""
    m.proc.kill()
    pytest.fail(f"{what} did not finish within {HANG_LIMIT} s")


def costed_cp(m, src, dst):
    """cp src dst: -> the daemon's CPU seconds while it ran."""
    cpu = cpu_seconds(m.pid)
    cp = subprocess.Popen(["cp", str(src), str(dst)])
    try:
        rc = cp.wait(HANG_LIMIT)
    except subprocess.TimeoutExpired:
        try:
            give_up(m, f"cp {src.name}")
        finally:
            cp.wait(30)
    assert rc == 0
    return cpu_seconds(m.pid) - cpu


@pytest.mark.parametrize("name", sorted(FILES))
def test_cp_costs_what_the_file_stores(writable, tmp_path, name):
    src = tmp_path / f"{name}.h5"
    FILES[name](src)
    assert src.stat().st_size < 300_000     # the point: it stores little
    dst = writable.path(f"{HOME}/{name}.h5")
    cpu = costed_cp(writable, src, dst)
    assert cpu < CPU_LIMIT, f"the copy cost the daemon {cpu:.1f} s of CPU"
    assert_same_datasets(src, dst)
    if writable.backend == "posix":
        domain = f"/{HOME}/{name}.h5"
        assert objcheck.problems(writable.bucket, domain, fill_chunks="error") == []
        chunks = stored_chunks(writable.bucket, domain)
        if name != "partially_written":
            assert chunks == [], "a file that stores nothing stores no chunk"
        else:   # other_grid: 4 target chunks; same_grid: 3 written source chunks
            assert 1 <= len(chunks) <= 12, [p.name for p in chunks]


def test_change_of_a_declared_exabyte_costs_the_chunk_written(writable, tmp_path):
    """An r+ change of the committed 9 EB domain: the commit walks the chunks the file has,
    never its grid of 2^41 chunks."""
    src = tmp_path / "eb.h5"
    make_contiguous_eb(src)
    dst = writable.path(f"{HOME}/eb.h5")
    costed_cp(writable, src, dst)
    row = np.arange(1024, dtype="<f8")
    done = []

    def change():
        with h5py.File(dst, "r+") as f:
            f["huge"][2 ** 49] = row
            f["bytes"][-3:] = 1
        done.append(True)

    cpu = cpu_seconds(writable.pid)
    t = threading.Thread(target=change, daemon=True)
    t.start()
    t.join(HANG_LIMIT)
    if not done:
        give_up(writable, "the r+ change")
    cpu = cpu_seconds(writable.pid) - cpu
    assert cpu < CPU_LIMIT, f"the change cost the daemon {cpu:.1f} s of CPU"
    with h5py.File(dst, "r") as f:
        np.testing.assert_array_equal(f["huge"][2 ** 49], row)
        assert not f["huge"][2 ** 49 + 1].any() and not f["huge"][0].any()
        assert list(f["bytes"][-4:]) == [7, 1, 1, 1]
    if writable.backend == "posix":
        assert objcheck.problems(writable.bucket, f"/{HOME}/eb.h5", fill_chunks="error") == []
        assert len(stored_chunks(writable.bucket, f"/{HOME}/eb.h5")) == 2
    # the base stored no chunk: none was copied (a chunk of the base that is not in the store
    # reads as fill and is not counted)
    commits = [line for line in writable.log().splitlines() if "eb.h5: committed" in line]
    assert len(commits) == 2 and " 0 chunks copied in the store" in commits[-1], commits


# ---- no file stalls the daemon ----

def answered_within(op, limit):
    """op in a thread of its own: True when it returned within limit seconds."""
    t = threading.Thread(target=op, daemon=True)
    t.start()
    t.join(limit)
    return not t.is_alive()


def await_log(m, text, limit=60):
    deadline = time.monotonic() + limit
    while text not in m.log():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_long_commit_stalls_nothing_else(bucket_copy, mount_bucket, tmp_path):
    """While a commit runs, stat, readdir, reads, opens and other commits of the mount go on
    (the man page's rule). The commit of big.h5 is held at its start by the test hook
    H5OSFS_TEST_PAUSE_AT until each kind of request was answered ANSWERS_DURING times, so
    they were answered while it ran, however fast or loaded the machine: a request that waited
    for the commit would not be answered until the gate opens, and fails at its limit. No
    bound in seconds is asserted: under load every such bound failed now and then."""
    gate = tmp_path / "gate"
    gate.touch()
    writable = mount_bucket(bucket_copy, "-o",
                            f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache",
                            extra_env={"H5OSFS_TEST_PAUSE_AT": f"committing:{gate}"})
    small = tmp_path / "small.h5"
    with h5py.File(small, "w") as f:
        f["x"] = np.arange(100)
    fd = os.open(writable.path(f"{HOME}/big.h5"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    data = memoryview(small.read_bytes())
    while data:             # staged; the commit runs at close
        data = data[os.write(fd, data):]
    closer = threading.Thread(target=lambda: os.close(fd), daemon=True)
    closer.start()
    try:
        assert await_log(writable, "H5OSFS_TEST_PAUSE_AT=committing"), writable.log()[-3000:]
        copies = []
        other = writable.path(f"{HOME}/sample1.h5")

        def another_commit():
            copies.append(writable.path(f"{HOME}/s{len(copies)}.h5"))
            subprocess.run(["cp", str(small), str(copies[-1])], check=True,
                           timeout=HANG_LIMIT)

        ops = {
            "stat": lambda: os.stat(other),
            "readdir": lambda: os.listdir(writable.path(HOME)),
            "read": lambda: Path(other).read_bytes(),
            "open": lambda: h5py.File(writable.path(f"{HOME}/sample3.h5"), "r").close(),
            "another commit": another_commit,
        }
        for _ in range(ANSWERS_DURING):
            for name, op in ops.items():
                assert answered_within(op, HANG_LIMIT), f"{name} waited for the held commit"
        assert closer.is_alive(), "the commit was not held: nothing was tested"
    finally:
        gate.unlink()
    closer.join(HANG_LIMIT)
    if closer.is_alive():
        give_up(writable, "the commit of big.h5")
    with h5py.File(writable.path(f"{HOME}/big.h5"), "r") as f:
        assert list(f["x"][:3]) == [0, 1, 2]
    assert len(copies) == ANSWERS_DURING
    for path in copies:
        with h5py.File(path, "r") as f:
            assert list(f["x"][:3]) == [0, 1, 2]
