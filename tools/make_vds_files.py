#!/usr/bin/python3
"""Write the virtual-dataset test files of tests/data/vds/ (issue 27.1) with h5py.

- frames_1.h5, frames_2.h5: /entry/data, 3 frames of 4x5 int32 each (values that tell the
  frame and pixel apart).
- master.h5: /entry/data, a VDS stacking both files' /entry/data (relative names, as detector
  masters store them), fill value -1.
- same_file.h5: /a (7) and /b (5) float64, and /stacked, a VDS of shape (2, 8) made of /a[1:7]
  and /b[0:5:2] placed across the rows at offsets that do not fall on any chunk boundary, plus
  /points, two elements picked with a stride (HDF5 refuses point selections in a mapping, so
  h5py makes a hyperslab of them), /blocks, whose virtual selection is not one regular
  hyperslab (two blocks), /unlimited, a mapping with an unlimited count, and /strings, a VDS
  of variable-length strings.
- missing_source.h5: /v, a VDS whose source file (gone.h5) does not exist, fill value 7.
- printf.h5: /p, a printf-style mapping (source file "block_%b.h5", one file per block of 2
  along an unlimited dimension), over block_0.h5 and block_1.h5.
- versioned.h5: versioned-hdf5's layout (issue 27.1), as its published design describes it:
  /_version_data/data1/raw_data (the unique chunks, appended) and hash_table, and
  /_version_data/versions/<v>/data1, VDS whose chunk-aligned mappings point into raw_data of
  the same file ("."); each version after the first rewrites some chunks, which are appended.

append_version(f, name, changes) is the writer of a later commit, for an r+ of such a file:
the new chunks appended to raw_data and hash_table, a new version group whose VDS maps every
chunk as the current version has it but the changed ones.

Small (KBs) and deterministic: run it again and the files hold the same values.
Usage: tools/make_vds_files.py [OUTDIR]  (default tests/data/vds)
       tools/make_vds_files.py --versioned-mib N FILE  (a versioned.h5 of about N MiB of raw
       data, incompressible, for measuring what the bucket holds)
"""
import hashlib
import sys
from pathlib import Path

import h5py
import numpy as np

FRAMES, ROWS, COLS = 3, 4, 5


def frames(path, first):
    with h5py.File(path, "w", libver=("earliest", "v110")) as f:
        data = np.arange(FRAMES * ROWS * COLS, dtype=np.int32).reshape(FRAMES, ROWS, COLS)
        f.create_dataset("entry/data", data=data + 1000 * first)


def master(path):
    layout = h5py.VirtualLayout(shape=(2 * FRAMES, ROWS, COLS), dtype=np.int32)
    for i, name in enumerate(["frames_1.h5", "frames_2.h5"]):
        layout[i * FRAMES:(i + 1) * FRAMES] = h5py.VirtualSource(
            name, "entry/data", shape=(FRAMES, ROWS, COLS))
    with h5py.File(path, "w", libver=("earliest", "v110")) as f:
        f.create_virtual_dataset("entry/data", layout, fillvalue=-1)
        f["entry"].attrs["note"] = "frames of two files"


def same_file(path):
    with h5py.File(path, "w", libver=("earliest", "v110")) as f:
        f.create_dataset("a", data=np.arange(7, dtype=np.float64) + 0.5, chunks=(3,))
        f.create_dataset("b", data=np.arange(5, dtype=np.float64) * -2.0)
        f.create_dataset("grow", data=np.arange(6, dtype=np.int16), maxshape=(None,),
                         chunks=(4,))
        layout = h5py.VirtualLayout(shape=(2, 8), dtype=np.float64)
        layout[0, 1:7] = h5py.VirtualSource(".", "a", shape=(7,))[1:7]
        layout[1, 0:6:2] = h5py.VirtualSource(".", "b", shape=(5,))[0:5:2]
        f.create_virtual_dataset("stacked", layout, fillvalue=np.nan)
        pts = h5py.VirtualLayout(shape=(4,), dtype=np.float64)
        pts[[0, 3]] = h5py.VirtualSource(".", "a", shape=(7,))[[2, 5]]
        f.create_virtual_dataset("points", pts, fillvalue=0.25)
        blocks(f)
        unlimited(f)
        text = f.create_dataset("text", data=np.array(["a", "bb", "ccc"], dtype=object),
                                dtype=h5py.string_dtype())
        strings = h5py.VirtualLayout(shape=(4,), dtype=h5py.string_dtype())
        strings[1:4] = h5py.VirtualSource(".", text.name, shape=(3,), dtype=text.dtype)
        f.create_virtual_dataset("strings", strings)


def blocks(f):
    """/blocks (3, 4): /a[0:5] placed in two blocks, [0, 0:2] and [2, 1:4], a selection no
    regular hyperslab states (h5py's VirtualLayout cannot say it, its low-level calls can)."""
    vspace = h5py.h5s.create_simple((3, 4))
    vspace.select_hyperslab((0, 0), (1, 2))
    vspace.select_hyperslab((2, 1), (1, 3), op=h5py.h5s.SELECT_OR)
    sspace = h5py.h5s.create_simple((7,))
    sspace.select_hyperslab((0,), (5,))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_fill_value(np.array(-1.0))
    dcpl.set_virtual(vspace, b".", b"a", sspace)
    space = h5py.h5s.create_simple((3, 4))
    h5py.h5d.create(f.id, b"blocks", h5py.h5t.IEEE_F64LE, space, dcpl=dcpl).close()


def unlimited(f):
    """/unlimited: one mapping with an unlimited count, so that the VDS follows /grow as it
    grows (what HDF5 makes for appending writers); h5py's VirtualLayout cannot say it, its
    low-level calls can."""
    vspace = h5py.h5s.create_simple((6,), (h5py.h5s.UNLIMITED,))
    vspace.select_hyperslab((0,), (h5py.h5s.UNLIMITED,), (1,), (1,))
    sspace = h5py.h5s.create_simple((6,), (h5py.h5s.UNLIMITED,))
    sspace.select_hyperslab((0,), (h5py.h5s.UNLIMITED,), (1,), (1,))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_fill_value(np.array(-5, dtype=np.int16))
    dcpl.set_virtual(vspace, b".", b"grow", sspace)
    space = h5py.h5s.create_simple((6,), (h5py.h5s.UNLIMITED,))
    h5py.h5d.create(f.id, b"unlimited", h5py.h5t.NATIVE_INT16, space, dcpl=dcpl).close()


def printf(folder):
    """printf.h5: /p follows block_0.h5, block_1.h5, ... (HDF5 substitutes the block number for
    %b), two elements each, for as many files as it finds."""
    for b in range(2):
        with h5py.File(folder / f"block_{b}.h5", "w", libver=("earliest", "v110")) as f:
            f["d"] = np.full((2,), 10 * (b + 1), dtype=np.int32)
    vspace = h5py.h5s.create_simple((4,), (h5py.h5s.UNLIMITED,))
    vspace.select_hyperslab((0,), (h5py.h5s.UNLIMITED,), (2,), (2,))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_fill_value(np.array(-1, dtype=np.int32))
    dcpl.set_virtual(vspace, b"block_%b.h5", b"d", h5py.h5s.create_simple((2,)))
    space = h5py.h5s.create_simple((4,), (h5py.h5s.UNLIMITED,))
    with h5py.File(folder / "printf.h5", "w", libver=("earliest", "v110")) as f:
        h5py.h5d.create(f.id, b"p", h5py.h5t.STD_I32LE, space, dcpl=dcpl).close()


def missing_source(path):
    layout = h5py.VirtualLayout(shape=(5,), dtype=np.int64)
    layout[:] = h5py.VirtualSource("gone.h5", "x", shape=(5,))
    with h5py.File(path, "w", libver=("earliest", "v110")) as f:
        f.create_virtual_dataset("v", layout, fillvalue=7)


def versioned(path, chunk, chunks, versions, rewritten, seed=27, compression=None):
    """versions versions of /data1 (chunks chunks of chunk float64 each); each version after
    the first rewrites `rewritten` chunks. raw_data holds every unique chunk once, in the
    order written (compression: h5py's, with shuffle); hash_table one (sha256, [start, stop])
    row per raw chunk."""
    rng = np.random.default_rng(seed)
    current = rng.standard_normal(chunks * chunk)
    raw, rows, slots = [], [], []
    with h5py.File(path, "w", libver=("earliest", "v110")) as f:
        vdata = f.create_group("_version_data")
        vgroups = vdata.create_group("versions")
        vgroups.create_group("__first_version__")
        prev = "__first_version__"
        for v in range(versions):
            if v:
                for c in rng.choice(chunks, rewritten, replace=False):
                    current[c * chunk:(c + 1) * chunk] = rng.standard_normal(chunk)
                    slots[c] = None
            for c in range(chunks):
                if v == 0 or slots[c] is None:
                    piece = current[c * chunk:(c + 1) * chunk]
                    if v == 0:
                        slots.append(len(raw))
                    else:
                        slots[c] = len(raw)
                    raw.append(piece.copy())
                    rows.append(len(raw) - 1)
            name = f"r{v + 1}"
            group = vgroups.create_group(name)
            group.attrs["prev_version"] = prev
            group.attrs["timestamp"] = f"2026-11-29 10:{v:02d}:00.000000+0000"
            prev = name
            layout = h5py.VirtualLayout(shape=(chunks * chunk,), dtype=np.float64)
            source = h5py.VirtualSource(".", "/_version_data/data1/raw_data",
                                        shape=(chunks * chunk * versions,))
            for c in range(chunks):
                s0 = slots[c] * chunk
                layout[c * chunk:(c + 1) * chunk] = source[s0:s0 + chunk]
            if v == 0:
                ds = vdata.create_group("data1")
            data = np.concatenate(raw)
            if "raw_data" in ds:        # only the new chunks are written, as appended
                at = ds["raw_data"].shape[0]
                ds["raw_data"].resize((len(data),))
                ds["raw_data"][at:] = data[at:]
            else:
                ds.create_dataset("raw_data", data=data, maxshape=(None,), chunks=(chunk,),
                                  compression=compression, shuffle=compression is not None)
            group.create_virtual_dataset("data1", layout, fillvalue=0.0)
        hashes = np.zeros(len(raw), dtype=[("hash", "u1", (32,)), ("shape", "i8", (2,))])
        for i, piece in enumerate(raw):
            hashes[i]["hash"] = np.frombuffer(hashlib.sha256(piece.tobytes()).digest(),
                                              dtype=np.uint8)
            hashes[i]["shape"] = (i * chunk, (i + 1) * chunk)
        ds.create_dataset("hash_table", data=hashes, maxshape=(None,), chunks=(max(1, len(raw)),))
        vgroups.attrs["current_version"] = prev
    return len(raw) * chunk * 8


def append_version(f, name, changes, dataset="data1"):
    """Commit version `name` of /dataset in open file f as versioned-hdf5 does: the chunks of
    `changes` ({chunk number: its values}) appended to raw_data (and their rows to hash_table),
    then a VDS over raw_data mapping each chunk as the current version has it, the changed ones
    to their new place; current_version moves to it."""
    vgroups = f["_version_data/versions"]
    prev = vgroups.attrs["current_version"]
    raw = f[f"_version_data/{dataset}/raw_data"]
    table = f[f"_version_data/{dataset}/hash_table"]
    old = vgroups[prev][dataset]
    chunk = raw.chunks[0]
    slots = {}
    for vs in old.virtual_sources():
        start, block = vs.vspace.get_regular_hyperslab()[0][0], vs.vspace.get_regular_hyperslab()[3]
        for c in range(block[0] // chunk):
            slots[start // chunk + c] = vs.src_space.get_regular_hyperslab()[0][0] + c * chunk
    at = raw.shape[0]
    raw.resize((at + chunk * len(changes),))
    rows = table.shape[0]
    table.resize((rows + len(changes),))
    for i, (c, values) in enumerate(sorted(changes.items())):
        piece = np.asarray(values, dtype=raw.dtype)
        raw[at + i * chunk:at + (i + 1) * chunk] = piece
        table[rows + i] = (np.frombuffer(hashlib.sha256(piece.tobytes()).digest(), np.uint8),
                           (at + i * chunk, at + (i + 1) * chunk))
        slots[c] = at + i * chunk
    layout = h5py.VirtualLayout(shape=old.shape, dtype=raw.dtype)
    source = h5py.VirtualSource(".", raw.name, shape=raw.shape)
    for c, s0 in sorted(slots.items()):
        n = min(chunk, old.shape[0] - c * chunk)
        layout[c * chunk:c * chunk + n] = source[s0:s0 + n]
    group = vgroups.create_group(name)
    group.attrs["prev_version"] = prev
    group.attrs["timestamp"] = "2026-11-29 11:00:00.000000+0000"
    group.create_virtual_dataset(dataset, layout, fillvalue=old.fillvalue)
    vgroups.attrs["current_version"] = name


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--versioned-mib":
        mib, chunk = float(sys.argv[2]), 4096
        chunks = max(1, int(mib * 2**20 / (chunk * 8) / 1.45))   # 10 versions, 5% rewritten each
        raw = versioned(sys.argv[3], chunk, chunks, 10, max(1, chunks // 20))
        print(f"{sys.argv[3]}: {raw} bytes of raw data")
        return
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "tests/data/vds")
    out.mkdir(parents=True, exist_ok=True)
    frames(out / "frames_1.h5", 1)
    frames(out / "frames_2.h5", 2)
    master(out / "master.h5")
    same_file(out / "same_file.h5")
    missing_source(out / "missing_source.h5")
    printf(out)
    versioned(out / "versioned.h5", chunk=16, chunks=6, versions=3, rewritten=2)


if __name__ == "__main__":
    main()
