#!/usr/bin/python3
"""Check that HSDS reads what h5osfs's codec_encode writes (spec/hsds-format.md §6.4-§6.6).

    apt-get install -y python3-numcodecs bitshuffle python3-numpy
    ninja -C build
    /usr/bin/python3 tools/check_codec_encode.py [--build build] [--write-vectors tests/data]

A tiny C program, linked with build/src/codec/libh5osfs_codec.a, runs codec_encode (through
codec_spec_from_filters, as the daemon does) on inputs this script makes. Every result is then
read the way HSDS's storUtil._uncompress reads a chunk (numcodecs cbuffer_metainfo to sniff a
blosc frame, numcodecs Blosc().decode, then bitshuffle.decompress_lz4 behind the 12-byte
header) and compared with the input; and each input is also encoded the way storUtil._compress
does (numcodecs Blosc(cname, clevel, shuffle).encode, bitshuffle.compress_lz4) to see whether
our bytes are HSDS's bytes.

Shuffle without a compressor is the one case HSDS cannot read back: it stores such chunks
unshuffled and unshuffles them on read (its bug, §6.5). We store them as HSDS does; the script
checks that our bytes equal HSDS's and reports the case apart.

--write-vectors DIR writes a selection of our frames with what numcodecs/bitshuffle decoded
from them into DIR/codec/ (encode.txt: <fixed|vlen> <itemsize> <frame> <decoding> <filters>),
which tests/unit/test_codec.c reads without Python. Exit status 0 only if every check passed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import numcodecs
import numcodecs.blosc
import bitshuffle

HSDS_BLOCK_ELEMS = 2048  # config bit_shuffle_default_blocksize (§6.6)

# HSDS lets numcodecs compress with several blosc threads (setBloscThreads). A frame of several
# blocks then holds them in the order the threads finished, so HSDS's own bytes vary from run to
# run (and with snappy, c-blosc's threaded path even gives up and stores the chunk). Bytes are
# compared with the single-threaded path, which is deterministic and what codec_encode calls;
# any of these frames decodes the same.
numcodecs.blosc.use_threads = False

# (filter name, class, id) as HSDS stores h5py's and h5pyd's filter entries (§5.2)
COMPRESSORS = {
    "gzip": ("H5Z_FILTER_DEFLATE", 1),
    "lz4": ("H5Z_FILTER_USER", 32004),
    "lz4hc": ("H5Z_FILTER_USER", 32005),
    "zstd": ("H5Z_FILTER_USER", 32015),
    "blosclz": ("H5Z_FILTER_USER", 32001),
    "snappy": ("H5Z_FILTER_USER", 32003),
}
SHUFFLES = {
    "shuffle": {"class": "H5Z_FILTER_SHUFFLE", "id": 2, "name": "shuffle"},
    "bitshuffle": {"class": "H5Z_FILTER_BITSHUFFLE", "id": 32008, "name": "bitshuffle"},
}
DTYPES = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8", 3: "S3"}
ITEMSIZES = [1, 2, 4, 8, 3]
COUNTS = [1, 7, 8, 515, 2047, 2048, 2049, 2061]

# The filter lists of the fixture bucket, exactly as HSDS stored them.
FIXTURE_FILTERS = [
    [{"class": "H5Z_FILTER_SHUFFLE", "id": 2, "name": "shuffle"},
     {"class": "H5Z_FILTER_DEFLATE", "id": 1, "level": 6, "name": "gzip"}],
    [{"class": "H5Z_FILTER_USER", "name": "lz4", "level": 5, "id": 32004}],
    [{"class": "H5Z_FILTER_USER", "name": "zstd", "level": 5, "id": 32015}],
]

ENCODER_C = r"""
#include "h5osfs/codec/codec.h"

#include <blosc.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (p = malloc((size_t)n + 1)) && fread(p, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
    } else {
        free(p);
        p = NULL;
    }
    if (f)
        fclose(f);
    return p;
}

static int encode_one(size_t itemsize, int vlen, const char *in, const char *out,
                      const char *filters)
{
    char why[256] = "";
    struct codec_spec s;
    json_t *j = json_loads(filters, 0, NULL);
    int rc = j ? codec_spec_from_filters(j, itemsize, vlen, CODEC_SOURCE_HSDS, &s, why,
                                         sizeof(why)) : -1;
    json_decref(j);
    size_t n = 0, elen = 0;
    unsigned char *data = rc ? NULL : slurp(in, &n), *enc = NULL;
    if (rc == 0 && !data)
        rc = -1;
    if (rc == 0)
        rc = codec_encode(&s, data, n, &enc, &elen, why, sizeof(why));
    FILE *o = rc ? NULL : fopen(out, "wb");
    if (rc == 0 && (!o || fwrite(enc, 1, elen, o) != elen))
        rc = -1;
    if (o && fclose(o))
        rc = -1;
    if (rc)
        fprintf(stderr, "%s: %s: rc %d (%s)\n", in, filters, rc, why);
    free(data);
    free(enc);
    return rc;
}

int main(int argc, char **argv)
{
    char line[8192], in[1024], out[1024], filters[4096];
    size_t itemsize;
    int vlen, bad = 0;
    FILE *m = argc == 2 ? fopen(argv[1], "r") : NULL;
    if (!m)
        return 2;
    printf("versions blosc=%s lz4=%s\n", blosc_get_version_string(), LZ4_versionString());
    while (fgets(line, sizeof(line), m)) {
        if (sscanf(line, "%zu %d %1023s %1023s %4095s", &itemsize, &vlen, in, out, filters) != 5)
            return 2;
        bad |= encode_one(itemsize, vlen, in, out, filters) != 0;
    }
    fclose(m);
    return bad;
}
"""


# --- HSDS's side: storUtil._compress / _uncompress, with what dsetUtil.getFilterOps gives ---

def filter_ops(filters):
    """getFilterOps for the lists made here: (blosc codec or None, level, shuffle code)."""
    comp = next((f for f in filters if f["class"] not in ("H5Z_FILTER_SHUFFLE",
                                                          "H5Z_FILTER_BITSHUFFLE")), None)
    shuf = next((f for f in filters if f["class"] in ("H5Z_FILTER_SHUFFLE",
                                                      "H5Z_FILTER_BITSHUFFLE")), None)
    compressor = None
    if comp:
        compressor = "zlib" if comp["class"] == "H5Z_FILTER_DEFLATE" else comp.get("name", "lz4")
    level = int(comp["level"]) if comp and "level" in comp else 5
    shuffle = {None: 0, "shuffle": 1, "bitshuffle": 2}[shuf["name"] if shuf else None]
    return compressor, level, shuffle


def hsds_shuffle_bits(data, dtype, shape):
    arr = np.frombuffer(data, dtype=dtype).reshape(shape)
    header = int(len(data)).to_bytes(8, "big") + \
        int(HSDS_BLOCK_ELEMS * dtype.itemsize).to_bytes(4, "big")
    return header + bitshuffle.compress_lz4(arr, HSDS_BLOCK_ELEMS).tobytes()


def hsds_compress(data, compressor, level, shuffle, dtype, shape):
    """storUtil._compress (without its silent fallback to raw bytes on a blosc error)."""
    if not compressor and shuffle != 2:
        return data
    if shuffle == 2:
        data = hsds_shuffle_bits(data, dtype, shape)
        shuffle = 0
    if compressor:
        return numcodecs.Blosc(cname=compressor, clevel=level, shuffle=shuffle).encode(data)
    return data


def hsds_uncompress(data, compressor, shuffle, dtype, shape):
    """storUtil._uncompress: sniff blosc, decode, then undo a shuffle still pending."""
    if compressor:
        if numcodecs.blosc.cbuffer_metainfo(data)[0] > 0:
            data = numcodecs.Blosc().decode(data)
            if shuffle == 1:
                shuffle = 0
        else:
            raise ValueError("not a blosc frame")
    if shuffle == 1:
        data = numcodecs.Shuffle(dtype.itemsize).decode(data)
    elif shuffle == 2:
        raw = np.frombuffer(data, dtype=np.uint8)
        total = int.from_bytes(raw[:8].tobytes(), "big")
        block = int.from_bytes(raw[8:12].tobytes(), "big") // dtype.itemsize
        if total != int(np.prod(shape)) * dtype.itemsize:
            raise ValueError(f"bitshuffle header states {total} bytes")
        data = bitshuffle.decompress_lz4(raw[12:], shape, dtype, block)
    return bytes(data)


# --- cases ---

def make_filters(compressor, level, shuffle):
    filters = [dict(SHUFFLES[shuffle])] if shuffle else []
    if compressor:
        cls, fid = COMPRESSORS[compressor]
        entry = {"class": cls, "id": fid, "level": level, "name": compressor}
        filters.append(entry)
    return filters


def make_data(count, itemsize, kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "random":
        return rng.integers(0, 256, size=count * itemsize, dtype=np.uint8).tobytes()
    base = np.cumsum(rng.integers(-2, 3, size=count)) + 1000
    arr = np.zeros((count, itemsize), dtype=np.uint8)
    for b in range(min(itemsize, 8)):
        arr[:, b] = (base >> (8 * b)) & 0xFF
    return arr.tobytes()


class Case:
    def __init__(self, name, filters, itemsize, data, vlen=False):
        self.name, self.filters, self.itemsize, self.data, self.vlen = \
            name, filters, itemsize, data, vlen
        self.encoded = None


def case_name(comp, shuf, level, kind, itemsize, count):
    dtype = DTYPES[itemsize].strip("<")
    return f"{comp or 'none'}_{shuf or 'none'}_l{level}_{kind}_{dtype}x{count}"


def all_cases():
    cases = []
    seed = 0
    for ci, comp in enumerate([None] + list(COMPRESSORS)):
        for si, shuf in enumerate([None, "shuffle", "bitshuffle"]):
            level = (ci * 3 + si) % 10
            for itemsize in ITEMSIZES:
                for count in COUNTS:
                    for kind in ("smooth", "random"):
                        seed += 1
                        cases.append(Case(case_name(comp, shuf, level, kind, itemsize, count),
                                          make_filters(comp, level, shuf), itemsize,
                                          make_data(count, itemsize, kind, seed)))
            for kind in ("smooth", "random"):  # 1 MiB of int32 at the default level
                seed += 1
                cases.append(Case(case_name(comp, shuf, 5, kind, 4, 262144),
                                  make_filters(comp, 5, shuf), 4,
                                  make_data(262144, 4, kind, seed)))
    for i, filters in enumerate(FIXTURE_FILTERS):
        cases.append(Case(f"fixture{i}_f4x4096", filters, 4, make_data(4096, 4, "smooth", 99 + i)))
    vlen = b"\x02\x00\x00\x00ab\x00\x00\x00\x00\x02\x00\x00\x00\xc3\xa9" * 50
    cases.append(Case("vlen_zstd_shuffle", make_filters("zstd", 5, "shuffle"), 0, vlen, True))
    return cases


def vector_selection(cases):
    """One modest case per filter combination HSDS can read back, the fixture lists, vlen."""
    by_name = {c.name: c for c in cases}
    out = []
    for ci, comp in enumerate([None] + list(COMPRESSORS)):
        for si, shuf in enumerate([None, "shuffle", "bitshuffle"]):
            if comp is None and shuf == "shuffle":
                continue  # HSDS cannot read these back (§6.5): no decoding to record
            itemsize = ITEMSIZES[(ci + si) % len(ITEMSIZES)]
            count = 2061 if shuf == "bitshuffle" else 515
            kind = "random" if (ci + si) % 4 == 3 else "smooth"
            out.append(by_name[case_name(comp, shuf, (ci * 3 + si) % 10, kind, itemsize, count)])
    out += [c for c in cases if c.name.startswith(("fixture", "vlen"))]
    return out


# --- running ---

def build_encoder(root, build, tmp):
    src = os.path.join(tmp, "encode.c")
    exe = os.path.join(tmp, "encode")
    with open(src, "w") as f:
        f.write(ENCODER_C)
    libs = [os.path.join(build, "src", "codec", "libh5osfs_codec.a")]
    util = os.path.join(build, "src", "util", "libh5osfs_util.a")
    if os.path.exists(util):
        libs.append(util)
    pkg = subprocess.run(["pkg-config", "--cflags", "--libs", "jansson", "blosc", "liblz4", "zlib"],
                         check=True, capture_output=True, text=True).stdout.split()
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
           "-I", os.path.join(root, "include"), src, "-o", exe] + libs + pkg
    subprocess.run(cmd, check=True)
    return exe


def run_encoder(exe, cases, tmp):
    manifest = os.path.join(tmp, "manifest.txt")
    with open(manifest, "w") as m:
        for i, c in enumerate(cases):
            c.in_path = os.path.join(tmp, f"{i}.in")
            c.out_path = os.path.join(tmp, f"{i}.out")
            with open(c.in_path, "wb") as f:
                f.write(c.data)
            filters = json.dumps(c.filters, separators=(",", ":"))
            m.write(f"{c.itemsize} {int(c.vlen)} {c.in_path} {c.out_path} {filters}\n")
    res = subprocess.run([exe, manifest], capture_output=True, text=True)
    sys.stderr.write(res.stderr)
    if res.returncode:
        raise SystemExit(f"the encoder failed (exit {res.returncode})")
    for c in cases:
        with open(c.out_path, "rb") as f:
            c.encoded = f.read()
    return res.stdout.split("\n", 1)[0].split(" ", 1)[1]  # "blosc=... lz4=..."


def check_case(c, stats):
    compressor, level, shuffle = filter_ops(c.filters)
    if c.vlen:
        shuffle = 0  # HSDS ignores shuffles for variable-length data
    dtype = np.dtype(DTYPES.get(c.itemsize, "u1"))
    shape = (len(c.data) // dtype.itemsize,)
    theirs = hsds_compress(c.data, compressor, level, shuffle, dtype, shape)
    same_bytes = theirs == c.encoded
    stats["identical to HSDS's bytes"] += same_bytes
    if not same_bytes:
        print(f"DIFFERENT BYTES {c.name}: ours {len(c.encoded)}, HSDS's {len(theirs)}")
    if not compressor and shuffle == 1:
        stats["shuffle without compressor (HSDS misreads its own, §6.5)"] += 1
        return same_bytes, None
    try:
        decoded = hsds_uncompress(c.encoded, compressor, shuffle, dtype, shape)
    except Exception as e:  # noqa: BLE001 - any failure of HSDS's decoders is a finding
        print(f"HSDS CANNOT READ {c.name}: {e}")
        return False, None
    ok = decoded == c.data
    stats["read back by HSDS's decoders, byte-exact"] += ok
    if not ok:
        print(f"HSDS READS DIFFERENT DATA {c.name}")
    return ok and same_bytes, decoded


def write_vectors(tests_data, cases, decodings, versions):
    outdir = os.path.join(tests_data, "codec")
    lines = []
    for c in vector_selection(cases):
        stem = "enc_" + c.name
        with open(os.path.join(outdir, stem + ".frame"), "wb") as f:
            f.write(c.encoded)
        with open(os.path.join(outdir, stem + ".raw"), "wb") as f:
            f.write(decodings[c.name])
        filters = json.dumps(c.filters, separators=(",", ":"))
        lines.append(f"{'vlen' if c.vlen else 'fixed'} {c.itemsize} {stem}.frame {stem}.raw "
                     f"{filters}")
    with open(os.path.join(outdir, "encode.txt"), "w") as f:
        f.write("# <fixed|vlen> <itemsize> <frame written by codec_encode> <what HSDS's decoders "
                "(numcodecs Blosc, bitshuffle) read from it> <filters>\n"
                "# written by tools/check_codec_encode.py with these libraries (the C test "
                "compares bytes only with the same):\n")
        f.write(f"# versions {versions}\n")
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} vectors written to {outdir}")


def main():
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--write-vectors", metavar="TESTS_DATA")
    args = ap.parse_args()
    print(f"numcodecs {numcodecs.__version__} (c-blosc {numcodecs.blosc.VERSION_STRING})")
    tmp = tempfile.mkdtemp(prefix="h5osfs-encode-")
    try:
        exe = build_encoder(root, os.path.abspath(args.build), tmp)
        cases = all_cases()
        versions = run_encoder(exe, cases, tmp)
    finally:
        shutil.rmtree(tmp)
    print(f"our encoder: {versions}")
    stats = {"identical to HSDS's bytes": 0, "read back by HSDS's decoders, byte-exact": 0,
             "shuffle without compressor (HSDS misreads its own, §6.5)": 0}
    decodings, failed = {}, 0
    for c in cases:
        ok, decoded = check_case(c, stats)
        failed += not ok
        if decoded is not None:
            decodings[c.name] = decoded
    print(f"{len(cases)} chunks encoded")
    for k, v in stats.items():
        print(f"  {v:5d} {k}")
    if args.write_vectors and not failed:
        write_vectors(args.write_vectors, cases, decodings, versions)
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
