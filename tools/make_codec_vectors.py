#!/usr/bin/python3
"""Write the codec test vectors into tests/data/codec/ (spec/hsds-format.md §6.4-§6.6, §8.3).

    apt-get install -y bitshuffle python3-h5py python3-numpy
    HDF5_PLUGIN_PATH=/usr/lib/x86_64-linux-gnu/hdf5/serial/plugins \
        /usr/bin/python3 tools/make_codec_vectors.py [tests/data]

The encoders are other people's code on purpose, so the C decoder is checked against them and not
against itself: bitshuffle's compress_lz4/bitshuffle (the functions HSDS calls), numpy for the
byte shuffle (numcodecs' Shuffle is the same transpose), zlib, and HDF5's own filters through
h5py (shuffle, deflate, and the bitshuffle plugin 32008 when HDF5_PLUGIN_PATH finds it).

Outputs (all small; the C test never needs Python):
  vectors.txt   one case a line: <kind> <encoded file> <raw file> <itemsize>
  fixtures.txt  one HSDS fixture chunk a line with the CRC-32 of its decoded bytes, computed
                from the source .h5 files the fixture bucket was loaded from (see its header)
  *.raw / *.bs / *.bt / *.shuf / *.zlib / *.h5bs / *.h5shuf / *.h5zlib   the vectors
"""
import json
import os
import struct
import sys
import zlib

import numpy as np
import bitshuffle
import h5py

HSDS_BLOCK_ELEMS = 2048  # HSDS config bit_shuffle_default_blocksize (spec §6.6)

OUT_REL = "codec"
HSDS_REL = "hsds-v2"


def rng_values(n, dtype, seed):
    """Smooth-ish values with noise: compressible enough to give multi-byte LZ4 matches."""
    rng = np.random.default_rng(seed)
    base = np.cumsum(rng.integers(-3, 4, size=n))
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (base * 0.25 + rng.normal(0, 0.01, size=n)).astype(dt)
    if dt.kind == "u":
        return (base - base.min()).astype(dt)
    return base.astype(dt)


def hsds_bitshuffle(arr):
    """storUtil._shuffle code 2: 12-byte big-endian header, then bitshuffle's LZ4 blocks."""
    arr = np.ascontiguousarray(arr)
    header = struct.pack(">QI", arr.nbytes, HSDS_BLOCK_ELEMS * arr.dtype.itemsize)
    return header + bitshuffle.compress_lz4(arr, HSDS_BLOCK_ELEMS).tobytes()


def byte_shuffle(raw, itemsize):
    """numcodecs Shuffle: shuffled byte j*count + i = element i byte j."""
    a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, itemsize)
    return a.T.tobytes()


class Writer:
    def __init__(self, outdir):
        self.outdir = outdir
        self.lines = []

    def put(self, name, data):
        with open(os.path.join(self.outdir, name), "wb") as f:
            f.write(data)

    def case(self, kind, stem, ext, encoded, raw, itemsize):
        self.put(stem + ext, encoded)
        self.put(stem + ".raw", raw)
        self.lines.append(f"{kind} {stem}{ext} {stem}.raw {itemsize}")


def hsds_bitshuffle_cases(w):
    cases = [
        ("bs_i32_20", np.arange(20, dtype="<i4")),       # the spec's example: 51 bytes
        ("bs_i32_5000", rng_values(5000, "<i4", 1)),     # blocks of 2048, 2048, 904
        ("bs_f64_1003", rng_values(1003, "<f8", 2)),     # N mod 8 = 3: 24 raw bytes at the end
        ("bs_u16_4099", rng_values(4099, "<u2", 3)),     # no final block, 3 raw elements
        ("bs_u8_2053", rng_values(2053, "u1", 4)),       # itemsize 1
        ("bs_s3_777", np.frombuffer(rng_values(777 * 3, "u1", 5).tobytes(), dtype="S3")),
        ("bs_i32_7", np.arange(7, dtype="<i4")),         # no block at all, all raw
        ("bs_f32_16384", rng_values(16384, "<f4", 6)),   # 8 full blocks, nothing left
    ]
    for stem, arr in cases:
        enc = hsds_bitshuffle(arr)
        back = bitshuffle.decompress_lz4(np.frombuffer(enc[12:], dtype=np.uint8), arr.shape,
                                         arr.dtype, HSDS_BLOCK_ELEMS)
        assert back.tobytes() == arr.tobytes(), stem
        w.case("bitshuffle", stem, ".bs", enc, arr.tobytes(), arr.dtype.itemsize)
    assert len(hsds_bitshuffle(np.arange(20, dtype="<i4"))) == 51


def transpose_cases(w):
    """Bit transposition alone (one block of n elements, n a multiple of 8)."""
    for stem, arr in [("bt_i32_64", rng_values(64, "<i4", 7)),
                      ("bt_u8_8", np.arange(8, dtype="u1") * 37),
                      ("bt_f64_24", rng_values(24, "<f8", 8)),
                      ("bt_s3_16", np.frombuffer(rng_values(48, "u1", 9).tobytes(), dtype="S3"))]:
        enc = bitshuffle.bitshuffle(arr, arr.shape[0]).tobytes()
        w.case("transpose", stem, ".bt", enc, arr.tobytes(), arr.dtype.itemsize)


def shuffle_cases(w):
    for stem, arr in [("shuf_i32_100", rng_values(100, "<i4", 10)),
                      ("shuf_f64_33", rng_values(33, "<f8", 11)),
                      ("shuf_s3_10", np.frombuffer(rng_values(30, "u1", 12).tobytes(), "S3"))]:
        raw = arr.tobytes()
        w.case("shuffle", stem, ".shuf", byte_shuffle(raw, arr.dtype.itemsize), raw,
               arr.dtype.itemsize)
    arr = rng_values(1000, "<f4", 13)
    w.case("zlib", "zlib_f32_1000", ".zlib", zlib.compress(arr.tobytes(), 6), arr.tobytes(), 4)
    raw = arr.tobytes()
    w.case("zlib-shuffle", "zlibshuf_f32_1000", ".zlib",
           zlib.compress(byte_shuffle(raw, 4), 6), raw, 4)


def h5_chunk(path, name, arr, **kwargs):
    """The filtered bytes of the single chunk of a dataset HDF5 writes with kwargs."""
    with h5py.File(path, "w") as f:
        f.create_dataset(name, data=arr, chunks=arr.shape, **kwargs)
    with h5py.File(path, "r") as f:
        d = f[name]
        assert d[...].tobytes() == arr.tobytes()
        _, data = d.id.read_direct_chunk((0,) * arr.ndim)
        return bytes(data)


def hdf5_cases(w, tmp):
    arr = rng_values(999, "<i4", 14)
    w.case("hdf5-shuffle", "h5shuf_i32_999", ".h5shuf", h5_chunk(tmp, "x", arr, shuffle=True),
           arr.tobytes(), 4)
    arr = rng_values(500, "<f8", 15)
    w.case("hdf5-deflate", "h5zlib_f64_500", ".h5zlib",
           h5_chunk(tmp, "x", arr, compression="gzip", compression_opts=4), arr.tobytes(), 8)
    arr = rng_values(2000, "<f4", 16)
    w.case("hdf5-deflate-shuffle", "h5zlibshuf_f32_2000", ".h5zlib",
           h5_chunk(tmp, "x", arr, compression="gzip", shuffle=True), arr.tobytes(), 4)
    if not h5py.h5z.filter_avail(32008):
        print("bitshuffle HDF5 plugin not found (HDF5_PLUGIN_PATH): skipping .h5bs vectors")
        os.unlink(tmp)
        return
    # Default block size: 8192 bytes / itemsize elements (1024 for f64, 4096 for u16), not
    # HSDS's 2048, so the decoder must take it from the header; then an explicit 256.
    for stem, arr, opts in [("h5bs_i32_5000", rng_values(5000, "<i4", 17), (0, 2)),
                            ("h5bs_f64_3001", rng_values(3001, "<f8", 18), (0, 2)),
                            ("h5bs_u16_9999", rng_values(9999, "<u2", 19), (0, 2)),
                            ("h5bs_i32_1001_b256", rng_values(1001, "<i4", 20), (256, 2))]:
        enc = h5_chunk(tmp, "x", arr, compression=32008, compression_opts=opts)
        w.case("hdf5-bitshuffle", stem, ".h5bs", enc, arr.tobytes(), arr.dtype.itemsize)
    os.unlink(tmp)


# --- fixture chunks: the CRC-32 of what each chunk must decode to, from the source files ---

def dataset_json(bucket, key_dir):
    with open(os.path.join(bucket, key_dir, ".dataset.json")) as f:
        return json.load(f)


def expected_chunk(src_arr, fill, dims, index):
    """The full chunk `index` of chunk shape dims: the source slice, padded with the fill value."""
    chunk = np.full(dims, fill, dtype=src_arr.dtype)
    lo = [i * d for i, d in zip(index, dims)]
    sel = tuple(slice(a, min(a + d, n)) for a, d, n in zip(lo, dims, src_arr.shape))
    part = src_arr[sel]
    chunk[tuple(slice(0, s) for s in part.shape)] = part
    return chunk.tobytes()


# (domain root dir, dataset dir, chunk index, source file, source dataset path)
HSDS_CHUNKS = [
    ("5081627e-84cc3427", "139d-6ef9a2-d2a124", "0_0", "sample3.h5", "noise_f32"),
    ("2dd05233-5ca263d5", "49e2-7c3388-4c6169", "0_0", "sample3.h5", "noise_f32"),
    ("1e526a9c-e25565c6", "7f3d-fb50af-05c311", "0_0", "sample3.h5", "noise_f32"),
    ("2dd05233-5ca263d5", "7c10-802727-d6128d", "0", "sample3.h5", "sub/small_u16"),
    ("1e526a9c-e25565c6", "4e48-de71f6-588226", "0", "sample3.h5", "sub/small_u16"),
    ("2dd05233-5ca263d5", "346b-a35040-52759d", "0_0", "sample3.h5", "ramp_i32"),
    ("1e526a9c-e25565c6", "ddf6-3b09ca-00206a", "0_0", "sample3.h5", "smooth_f64_contig"),
    ("5897df5c-0a297b92", "2f32-94e6d8-2b038e", "0_0", "sample2.h5", "chunked_f32_gzip"),
    ("55dd170e-0f0e83c7", "17c3-59469d-50f91a", "0_0", "sample2.h5", "chunked_f32_gzip"),
    ("5897df5c-0a297b92", "3429-31a752-46224c", "0_0", "sample2.h5", "multichunk_f32_gzip"),
    ("5897df5c-0a297b92", "3429-31a752-46224c", "3_1", "sample2.h5", "multichunk_f32_gzip"),
    ("55dd170e-0f0e83c7", "654b-f76e9f-f45ed8", "0_0_0", "sample2.h5", "cube_u8"),
    ("55dd170e-0f0e83c7", "199b-36ecd7-790cd7", "0_0", "sample2.h5", "extendible"),
    ("55dd170e-0f0e83c7", "5b74-8ac658-8b844e", "0", "sample2.h5", "contig_fill"),
    ("55dd170e-0f0e83c7", "0299-577e48-a604af", "0", "sample2.h5", "fixed_str"),
    ("ed8fa543-b000e2e7", "854a-e2de3c-877306", "0_0", "partial_expected.h5", "data"),
    ("ed8fa543-b000e2e7", "854a-e2de3c-877306", "1_2", "partial_expected.h5", "data"),
]

# vlen chunks: the zstd domain's chunk must decode to the uncompressed domain's chunk (the vlen
# stream of §6.3). ((compressed: root, dataset dir, index), (uncompressed: root, dataset dir))
HSDS_VLEN_CHUNKS = [
    (("55dd170e-0f0e83c7", "351d-d84cd3-b9ee43", "0"), ("5897df5c-0a297b92", "1347-2543cc-5f90c3")),
    (("55dd170e-0f0e83c7", "3c79-224da1-7511a4", "0"), ("5897df5c-0a297b92", "c5a1-b7c722-0b0435")),
]

# HDF5 chunks that H5D_CHUNKED_REF layouts point at: (root, dataset dir, source dataset)
LINKED = [("f9b4b1c7-5fba90ae", "787e-f3db34-1b3dae", "chunked_4_gzip_f32")]


def fixture_lines(tests_data):
    base = os.path.join(tests_data, HSDS_REL)
    bucket = os.path.join(base, "hsdstest")
    lines = []
    for root, dset, index, src, path in HSDS_CHUNKS:
        ddir = f"db/{root}/d/{dset}"
        meta = dataset_json(bucket, ddir)
        with h5py.File(os.path.join(base, "source", src), "r") as f:
            d = f[path]
            data = expected_chunk(d[...], d.fillvalue, meta["layout"]["dims"],
                                  [int(x) for x in index.split("_")])
            itemsize = d.dtype.itemsize
        obj = f"{HSDS_REL}/hsdstest/{ddir}/{index}"
        size = os.path.getsize(os.path.join(tests_data, obj))
        lines.append(f"hsds fixed {obj} 0 {size} {HSDS_REL}/hsdstest/{ddir}/.dataset.json "
                     f"{itemsize} {len(data)} {zlib.crc32(data):08x}")
    for (root, dset, index), raw in HSDS_VLEN_CHUNKS:
        ddir = f"db/{root}/d/{dset}"
        obj = f"{HSDS_REL}/hsdstest/{ddir}/{index}"
        with open(os.path.join(tests_data, obj), "rb") as f:
            frame = f.read()
        with open(os.path.join(bucket, f"db/{raw[0]}/d/{raw[1]}", index), "rb") as f:
            data = f.read()
        assert len(data) == struct.unpack("<I", frame[4:8])[0]  # blosc header: decoded size
        lines.append(f"hsds vlen {obj} 0 {len(frame)} {HSDS_REL}/hsdstest/{ddir}/.dataset.json "
                     f"0 {len(data)} {zlib.crc32(data):08x}")
    for root, dset, path in LINKED:
        ddir = f"db/{root}/d/{dset}"
        meta = dataset_json(bucket, ddir)
        layout = meta["creationProperties"]["layout"]
        with h5py.File(os.path.join(base, "source", "sample_link.h5"), "r") as f:
            d = f[path]
            arr, itemsize, fill = d[...], d.dtype.itemsize, d.fillvalue
        for index, (off, size) in sorted(layout["chunks"].items()):
            data = expected_chunk(arr, fill, meta["layout"]["dims"],
                                  [int(x) for x in index.split("_")])
            lines.append(f"hdf5 fixed {HSDS_REL}/hsdstest/linked/sample_link.h5 {off} {size} "
                         f"{HSDS_REL}/hsdstest/{ddir}/.dataset.json {itemsize} {len(data)} "
                         f"{zlib.crc32(data):08x}")
    return lines


def main():
    tests_data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
    outdir = os.path.join(tests_data, OUT_REL)
    os.makedirs(outdir, exist_ok=True)
    w = Writer(outdir)
    hsds_bitshuffle_cases(w)
    transpose_cases(w)
    shuffle_cases(w)
    hdf5_cases(w, os.path.join(outdir, "tmp-vectors.h5"))
    with open(os.path.join(outdir, "vectors.txt"), "w") as f:
        f.write("# <kind> <encoded> <raw> <itemsize>   (written by tools/make_codec_vectors.py)\n")
        f.write("\n".join(w.lines) + "\n")
    with open(os.path.join(outdir, "fixtures.txt"), "w") as f:
        f.write("# <source hsds|hdf5> <fixed|vlen> <object> <offset> <length> <dataset json> "
                "<itemsize> <decoded length> <crc32>\n"
                "# paths relative to tests/data; CRC-32 of the chunk as the source .h5 holds it, "
                "padded with the fill value (tools/make_codec_vectors.py)\n")
        f.write("\n".join(fixture_lines(tests_data)) + "\n")
    print(f"{len(w.lines)} vectors written to {outdir}")


if __name__ == "__main__":
    main()
