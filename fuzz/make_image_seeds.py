#!/usr/bin/env python3
"""Write the seeds of fuzz_image_file: kept images of its fixed domain (fuzz/fuzz_image_file.c).

    fuzz/make_image_seeds.py [TARGET]   (default: build-fuzz/fuzz/fuzz_image_file)

The genuine image is the one a build makes (the target writes it when FUZZ_IMAGE_FILE_SEED is
set); the others change its fields with tests/integration/imagefile.py, as a bucket writer can:
into fuzz/corpus/fuzz_image_file/ the well-formed linked layouts a build makes (contiguous,
chunk map, sub-chunks; a version's pool file with the etag it kept, issue 26), into
fuzz/regress/fuzz_image_file/ the forgeries of issue 24 and their neighbours, each of which
the checks must reject (the first three crashed the daemon), and a pool file without its etag.
"""
import copy
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import imagefile  # noqa: E402

TARGET = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build-fuzz", "fuzz",
                                                             "fuzz_image_file")
LINKED = "linked/f.h5"
FOREIGN = "d-11111111-99999999-76c1-4d1b3f-0a99df"     # a dataset of another root


def genuine():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seed")
        subprocess.run([TARGET], env=dict(os.environ, FUZZ_IMAGE_FILE_SEED=path), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(path, "rb") as f:
            return f.read()


def variant(img, change):
    img = copy.deepcopy(img)
    d1, d2 = img["datasets"]
    change(d1, d2)
    return imagefile.encode(img)


def contiguous(d1, d2):
    d1.update(origin=imagefile.REF_CONTIG, uris=[LINKED], contig_off=100, contig_size=40)


def chunk_map(d1, d2):
    d1.update(origin=imagefile.REF_PIECES, uris=[LINKED], n_sub=1,
              pieces=[(0, 0, 16, 0, 0), (2, 16, 16, 0, 0)])


def sub_chunks(d1, d2):
    d2.update(origin=imagefile.REF_PIECES, uris=[LINKED], n_sub=2,
              pieces=[(0, 0, 3, 0, 0), (0, 10, 3, 0, 1), (3, 20, 3, 0, 0)])
    d2["sub_dims"][:2] = [1, 3]


def itemsize(d1, d2):
    d1.update(origin=imagefile.REF_CONTIG, uris=[LINKED], contig_off=0, contig_size=65536,
              itemsize=160001, fill=bytes(160001))


def sub_dim_0(d1, d2):
    sub_chunks(d1, d2)
    d2["sub_dims"][0] = 0


def rank_0(d1, d2):
    contiguous(d1, d2)
    d1["rank"] = 0


def foreign_id(d1, d2):
    d1["id"] = FOREIGN


def foreign_prefix(d1, d2):
    d1["id"] = FOREIGN
    d1["key_prefix"] = "db/11111111-99999999/d/76c1-4d1b3f-0a99df/"


def short_extent(d1, d2):
    d1.update(chunk_bytes=8)     # chunks of 2 elements, whose extents are still 16 bytes
    d1["chunk_dims"][0], d1["grid"][0] = 2, 5


def piece_outside(d1, d2):
    chunk_map(d1, d2)
    d1["pieces"][1] = (3, 16, 16, 0, 0)


def uri_outside(d1, d2):
    chunk_map(d1, d2)
    d1["pieces"][1] = (2, 16, 16, 1, 0)


def grid(d1, d2):
    d2["grid"][1] = 1


def kept_etag(d1, d2):
    """A version's pool file with the etag it kept (issue 26): here not the file's, so every
    read of it is EIO."""
    chunk_map(d1, d2)
    d1.update(kept_file=LINKED, kept_etag="0123456789abcdef")


def kept_file_alone(d1, d2):
    chunk_map(d1, d2)
    d1.update(kept_file=LINKED, kept_etag=None)


CORPUS = {"genuine": None, "contiguous": contiguous, "chunk_map": chunk_map,
          "sub_chunks": sub_chunks, "issue26-kept_etag": kept_etag}
REGRESS = {"itemsize": itemsize, "sub_dim_0": sub_dim_0, "rank_0": rank_0,
           "foreign_id": foreign_id, "foreign_prefix": foreign_prefix,
           "short_extent": short_extent, "piece_outside": piece_outside,
           "uri_outside": uri_outside, "grid": grid, "issue26-kept_file_alone": kept_file_alone}


def main():
    raw = genuine()
    img = imagefile.decode(raw)
    assert imagefile.encode(img) == raw
    for where, seeds in (("corpus", CORPUS), ("regress", REGRESS)):
        out = os.path.join(HERE, where, "fuzz_image_file")
        os.makedirs(out, exist_ok=True)
        for name, change in seeds.items():
            fname = name if name.startswith("issue") else "issue24-" + name
            with open(os.path.join(out, fname), "wb") as f:
                f.write(raw if change is None else variant(img, change))


if __name__ == "__main__":
    main()
