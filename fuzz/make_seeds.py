#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets from the project's test data.

    fuzz/make_seeds.py [OUTDIR]     (default: fuzz/seeds; fuzz/run.sh merges them into
                                     fuzz/corpus/<target>/ when that is empty)

Sources: the HSDS fixture bucket tests/data/hsds-v2/hsdstest (real .group.json, .dataset.json,
.datatype.json, .domain.json and chunk objects written by HSDS; ../shared/fixtures for more
.domain.json), the codec vectors tests/data/codec, and a real S3 server's answers
tests/data/s3-xml; hand-written where the project has no real data (AWS files, journal
records, shapes the fixtures lack). The
input formats are described at the top of each fuzz_*.c. Python's json writes what HSDS writes
(HSDS is Python): NaN and Infinity tokens, integers beyond int64.
"""
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")
BUCKET = os.path.join(DATA, "hsds-v2", "hsdstest")
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "seeds")

SEP = b"\n@@\n"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def obj_path(oid):
    """Storage path of a v2 id (spec §2.1): db/A-B/<cls>/C-D-E/.<kind>.json."""
    cls = oid[0]
    parts = oid[2:].split("-")
    base = os.path.join(BUCKET, "db", parts[0] + "-" + parts[1])
    if cls == "g" and is_root(oid):
        return os.path.join(base, ".group.json")
    kind = {"g": ".group.json", "d": ".dataset.json", "t": ".datatype.json"}[cls]
    return os.path.join(base, cls, "-".join(parts[2:]), kind)


def is_root(oid):
    d = oid[2:].replace("-", "")
    return all(int(d[i + 16], 16) == (int(d[i], 16) + 8) % 16 for i in range(16))


def load(oid):
    with open(obj_path(oid)) as f:
        return json.load(f)


def chunk_dir(oid):
    return os.path.dirname(obj_path(oid))


def chunks_of(oid):
    d = chunk_dir(oid)
    out = []
    for root, _, files in os.walk(d):
        for f in files:
            if f.startswith("."):
                continue
            p = os.path.join(root, f)
            out.append((os.path.relpath(p, d), p))
    return sorted(out)


def domains():
    out = []
    home = os.path.join(BUCKET, "home", "test_user1")
    for name in sorted(os.listdir(home)):
        if name.startswith("."):
            continue
        with open(os.path.join(home, name, ".domain.json")) as f:
            out.append((name, json.load(f)["root"]))
    return out


def all_objects(root):
    """id -> json of every object reachable from root by hard links."""
    seen, todo = {}, [root]
    while todo:
        oid = todo.pop(0)
        if oid in seen:
            continue
        try:
            seen[oid] = load(oid)
        except FileNotFoundError:
            continue
        for link in seen[oid].get("links", {}).values():
            if link.get("class", "H5L_TYPE_HARD") == "H5L_TYPE_HARD" and "id" in link:
                todo.append(link["id"])
    return seen


# ---- fuzz_codec ----

COMP = {"deflate": 4, "gzip": 4, "blosclz": 5, "lz4": 6, "lz4hc": 7, "zstd": 8}


def codec_header(b0, itemsize, flags, expect):
    assert itemsize <= 16
    return bytes([b0, itemsize, flags]) + struct.pack("<I", expect) + b"\0"


def filters_b0(filters):
    b0 = 0
    for f in filters or []:
        name = f.get("name", "") if isinstance(f, dict) else str(f)
        cls = f.get("class", "") if isinstance(f, dict) else ""
        if "SHUFFLE" in cls and "BIT" not in cls or name == "shuffle":
            b0 |= 0x30
        elif "BITSHUFFLE" in cls or name == "bitshuffle":
            b0 |= 0x20
        elif "DEFLATE" in cls:
            b0 |= COMP["gzip"]
        elif name in COMP:
            b0 |= COMP[name]
    return b0


def codec_seeds():
    kinds = {
        "bitshuffle": (0x20, 0),
        "shuffle": (0x10, 1),
        "zlib": (0x01, 0),
        "zlib-shuffle": (0x11, 0),
        "hdf5-shuffle": (0x10, 1),
        "hdf5-deflate": (0x01, 1),
        "hdf5-deflate-shuffle": (0x11, 1),
        "hdf5-bitshuffle": (0x20, 1),
    }
    for line in open(os.path.join(DATA, "codec", "vectors.txt")):
        if line.startswith("#") or not line.strip():
            continue
        kind, enc, raw, itemsize = line.split()
        if kind not in kinds:
            continue
        e, r = read(os.path.join(DATA, "codec", enc)), read(os.path.join(DATA, "codec", raw))
        if len(e) > 70000:
            continue
        b0, flags = kinds[kind]
        write("fuzz_codec", "vec-" + enc, codec_header(b0, int(itemsize), flags, len(r)) + e)
        # the alloc decoder on the same bytes, compared with the fixed one
        write("fuzz_codec", "vec-both-" + enc,
              codec_header(b0, int(itemsize), flags | 8, len(r)) + e)
    # zlib streams that decode past the alloc decoder's first 64 KiB buffer
    import zlib
    big = bytes(range(256)) * 800
    write("fuzz_codec", "gen-zlib-alloc-200k",
          codec_header(0x01, 4, 0x04 | 0x08, len(big)) + zlib.compress(big, 9))
    write("fuzz_codec", "gen-zlib-vlen-200k",
          codec_header(0x01, 0, 0x06, 300000) + zlib.compress(big, 9))
    for line in open(os.path.join(DATA, "codec", "fixtures.txt")):
        if line.startswith("#") or not line.strip():
            continue
        src, kind, obj, off, length, dset, itemsize, decoded, _ = line.split()
        off, length, itemsize, decoded = int(off), int(length), int(itemsize), int(decoded)
        if length > 70000:
            continue
        with open(os.path.join(DATA, obj), "rb") as f:
            f.seek(off)
            chunk = f.read(length)
        with open(os.path.join(DATA, dset)) as f:
            filters = json.load(f).get("creationProperties", {}).get("filters", [])
        flags = (1 if src == "hdf5" else 0) | (6 if kind == "vlen" else 0)
        limit = decoded if kind == "fixed" else 4096
        name = "fix-" + obj.replace("/", "_")[-40:]
        write("fuzz_codec", name, codec_header(filters_b0(filters), itemsize, flags, limit) + chunk)


# ---- fuzz_hjson_types ----

def dumps(v):
    return json.dumps(v).encode()


def hjson_seeds():
    n = 0
    hand = [
        {"type": "H5T_IEEE_F16LE", "shape": {"class": "H5S_SIMPLE", "dims": [4]},
         "value": [1.5, float("nan"), float("inf"), -65504.0]},
        {"type": {"class": "H5T_INTEGER", "base": "H5T_STD_U64BE"}, "value": 18446744073709551615},
        {"type": {"class": "H5T_INTEGER", "base": "H5T_STD_I64LE"}, "value": -9223372036854775808},
        {"type": {"class": "H5T_ENUM", "base": {"class": "H5T_INTEGER", "base": "H5T_STD_I8LE"},
                  "mapping": {"FALSE": 0, "TRUE": 1}},
         "shape": {"class": "H5S_SIMPLE", "dims": [3]}, "value": [True, False, 1]},
        {"type": {"class": "H5T_ARRAY", "dims": [2, 2], "base": {
            "class": "H5T_STRING", "charSet": "H5T_CSET_ASCII", "length": 3,
            "strPad": "H5T_STR_NULLPAD"}}, "value": [["ab", "cde"], ["fghi", ""]]},
        {"type": {"class": "H5T_COMPOUND", "fields": [
            {"name": "a", "type": "H5T_STD_I32LE"},
            {"name": "s", "type": {"class": "H5T_STRING", "charSet": "H5T_CSET_UTF8",
                                   "length": "H5T_VARIABLE"}},
            {"name": "v", "type": {"class": "H5T_VLEN", "base": "H5T_IEEE_F32LE"}},
            {"name": "r", "type": {"class": "H5T_REFERENCE", "base": "H5T_STD_REF_OBJ"}}]},
         "shape": {"class": "H5S_SIMPLE", "dims": [2]},
         "value": [[1, "x", [1.0, 2.0], "groups/g-5897df5c-0a297b92-d01f-57d482-a1f31a"],
                   [2, "", [], ""]]},
        {"type": {"class": "H5T_OPAQUE", "size": 4, "tag": "raw"}, "value": "AAECAw==",
         "encoding": "base64"},
        {"type": {"class": "H5T_VLEN", "base": {"class": "H5T_REFERENCE",
                                                "base": "H5T_STD_REF_OBJ"}},
         "value": [["datasets/d-5897df5c-0a297b92-76c1-4d1b3f-0a99df"]]},
        {"type": "H5T_IEEE_F64LE", "value": "-Infinity"},
        {"type": "H5T_IEEE_F32BE", "shape": {"class": "H5S_SIMPLE", "dims": [2, 2]},
         "value": [[1e39, -1e-50], ["1.5", "nan"]]},
    ]
    for h in hand:
        write("fuzz_hjson_types", "hand-%02d" % n, dumps(h))
        n += 1
    # stored bytes: a vlen string chunk and a reference chunk as HSDS stores them
    vstr = {"type": {"class": "H5T_STRING", "charSet": "H5T_CSET_UTF8", "length": "H5T_VARIABLE"},
            "shape": {"class": "H5S_SIMPLE", "dims": [2]}}
    write("fuzz_hjson_types", "stored-vstr",
          dumps(vstr) + b"\0" + struct.pack("<i", 3) + b"abc" + struct.pack("<i", 0))
    ref = {"type": {"class": "H5T_REFERENCE", "base": "H5T_STD_REF_OBJ"}}
    write("fuzz_hjson_types", "stored-ref",
          dumps(ref) + b"\0" + b"groups/g-5897df5c-0a297b92-d01f-57d482-a1f31a".ljust(48, b"\0"))

    for dirpath, _, files in os.walk(os.path.join(BUCKET, "home")):
        if ".domain.json" in files:
            rel = os.path.relpath(dirpath, BUCKET).replace("/", "_")
            write("fuzz_hjson_types", "domain-" + rel, read(os.path.join(dirpath, ".domain.json")))
    seen = set()
    for name, root in domains():
        for oid, obj in all_objects(root).items():
            for aname, attr in obj.get("attributes", {}).items():
                doc = {k: attr[k] for k in ("type", "shape", "value", "encoding") if k in attr}
                text = dumps(doc)
                if text in seen:
                    continue
                seen.add(text)
                write("fuzz_hjson_types", "attr-%s-%s" % (name[:-3], aname[:24]), text)
            if oid[0] == "t":
                write("fuzz_hjson_types", "type-" + oid[-6:], dumps({"type": obj["type"]}))
            if oid[0] != "d":
                continue
            cp = obj.get("creationProperties", {})
            if "fillValue" in cp:
                doc = {"type": obj["type"], "value": cp["fillValue"]}
                if cp.get("fillValue_encoding") == "base64":
                    doc["encoding"] = "base64"
                write("fuzz_hjson_types", "fill-" + oid[-6:], dumps(doc))
            # uncompressed chunks: the type, the chunk's shape, then its stored bytes
            if cp.get("filters"):
                continue
            dims = obj.get("layout", {}).get("dims")
            for rel, path in chunks_of(oid)[:1]:
                data = read(path)
                if len(data) > 8192:
                    continue
                doc = {"type": obj["type"]}
                if dims:
                    doc["shape"] = {"class": "H5S_SIMPLE", "dims": dims}
                write("fuzz_hjson_types", "chunk-%s-%s" % (name[:-3], oid[-6:]),
                      dumps(doc) + b"\0" + data)


# ---- fuzz_image ----

PLACE = {}


def placeholders(text, ids):
    for oid, ph in ids.items():
        text = text.replace(oid, ph)
    return text


def image_seed(name, root_json, dsets, dtype=None, extra=()):
    """dsets: [(id, json)] (at most 2); the root's links are cut to the objects included."""
    ids = {root_json["id"]: "@R"}
    for k, (oid, _) in enumerate(dsets):
        ids[oid] = "@D%d" % (k + 1)
    if dtype:
        ids[dtype[0]] = "@T1"
    root = dict(root_json)
    links = {}
    for lname, link in root.get("links", {}).items():
        if link.get("class", "H5L_TYPE_HARD") != "H5L_TYPE_HARD" or link.get("id") in ids:
            links[lname] = link
    for k, (oid, _) in enumerate(dsets):   # datasets found deeper are linked from the root
        if oid not in [l.get("id") for l in links.values()]:
            links["d%d" % (k + 1)] = {"id": oid, "class": "H5L_TYPE_HARD", "created": 1.0}
    if dtype and dtype[0] not in [l.get("id") for l in links.values()]:
        links["t1"] = {"id": dtype[0], "class": "H5L_TYPE_HARD", "created": 1.0}
    root["links"] = links
    parts = [dumps(root)]
    for k in range(2):
        parts.append(dumps(dsets[k][1]) if k < len(dsets) else b"")
    parts.append(dumps(dtype[1]) if dtype else b"")
    parts = [placeholders(p.decode(), ids).encode() for p in parts]
    budget = 60000
    for k, (oid, _) in enumerate(dsets):
        for rel, path in chunks_of(oid)[:3]:
            data = read(path)
            if len(data) > budget:
                continue
            budget -= len(data)
            parts.append(b"%d %s\n" % (k + 1, rel.encode()) + data)
    parts.extend(extra)
    write("fuzz_image", name, SEP.join(parts))


def image_seeds():
    for name, root in domains():
        objs = all_objects(root)
        short = name[:-3]
        dsets = [(o, j) for o, j in objs.items() if o[0] == "d" and "_REF" not in
                 json.dumps(j.get("creationProperties", {}).get("layout", {}))]
        types = [(o, j) for o, j in objs.items() if o[0] == "t"]
        # the root with everything but datasets and types (groups are not carried: links to
        # them are left out, which is a path too)
        image_seed("%s-root" % short, objs[root], [], types[0] if types else None)
        for k in range(0, len(dsets), 2):
            image_seed("%s-%02d" % (short, k // 2), objs[root], dsets[k:k + 2],
                       types[(k // 2) % len(types)] if types else None)
    link_seeds()
    version_seeds()
    vector_seeds()
    vds_seeds()


def version_seeds():
    """A kept version: dataset D1 (uint8, 3 chunks of 1,024) named through the chunk table D2
    over the version pool @P: a version list naming the pool, its marker, the pool objects.
    Then the same with a forged table entry naming SECRET in another domain's pool, a marker
    of another domain, and a pool object whose bytes are not its key's; and the current
    domain in ref mode (its .domain.json says so and names the root), with and without a
    forged entry, and with an object that does not say ref."""
    import hashlib
    chunks = [bytes([(17 * k + i) % 251 for i in range(1024)]) for k in range(3)]
    md5s = [hashlib.md5(c).hexdigest() for c in chunks]
    def entries(uris):
        out = b""
        for uri, size in uris:
            out += struct.pack("<qi", 0, size) + uri + b"\0" * (128 - len(uri))
        return out
    uri = {"class": "H5T_STRING", "charSet": "H5T_CSET_ASCII", "strPad": "H5T_STR_NULLPAD",
           "length": 128}
    table = {"id": "@D2", "root": "@R", "created": 1.5, "lastModified": 1.5,
             "type": {"class": "H5T_COMPOUND", "fields": [
                 {"name": "offset", "type": {"class": "H5T_INTEGER", "base": "H5T_STD_I64LE"}},
                 {"name": "size", "type": {"class": "H5T_INTEGER", "base": "H5T_STD_I32LE"}},
                 {"name": "file_uri", "type": uri}]},
             "shape": {"class": "H5S_SIMPLE", "dims": [3], "maxdims": [3]}, "attributes": {},
             "creationProperties": {"filters": []},
             "layout": {"class": "H5D_CHUNKED", "dims": [3]}}
    dset = {"id": "@D1", "root": "@R", "created": 1.5, "lastModified": 1.5,
            "type": {"class": "H5T_INTEGER", "base": "H5T_STD_U8LE"},
            "shape": {"class": "H5S_SIMPLE", "dims": [3072], "maxdims": [3072]},
            "attributes": {},
            "creationProperties": {"fillValue": 0, "layout": {
                "class": "H5D_CHUNKED_REF_INDIRECT", "dims": [1024], "chunk_table": "@D2",
                "h5osfs": {"pool": "@P"}}},
            "layout": {"class": "H5D_CHUNKED", "dims": [1024]}}
    root = {"id": "@R", "root": "@R", "created": 1.5, "lastModified": 1.5,
            "links": {"x": {"id": "@D1", "class": "H5L_TYPE_HARD", "created": 1.5}},
            "attributes": {}, "h5osfs": {"pool": "@P"}}
    vlist = {"format": 1, "domain": "/home/fuzz/f.h5", "pool": "@P", "next": 2,
             "versions": [{"n": 1, "root": "@R", "time": 1764390000.5, "by": "fuzz@host",
                           "parent": 0, "size": 0, "stamp": "", "names": ["1.h5"],
                           "state": "kept"}]}
    # table entries are fixed-size: the harness's placeholders cannot grow inside them, so the
    # pools' key prefixes and SECRET's MD5 are spelled out (fuzz_image.c's init_pools)
    pool_key, other_key = b"db/0f0f0f0f-1e1e1e1e", b"db/a5a5a5a5-b6b6b6b6"
    text = b"H5OSFS-FUZZ-SECRET:"
    secret_md5 = hashlib.md5((text * (1024 // len(text) + 1))[:1024]).hexdigest().encode()
    good = [(b"fuzzb/" + pool_key + b"/c/" + m.encode(), 1024) for m in md5s]
    ref_domain = {"root": "@R", "owner": "fuzz", "created": 1.0, "lastModified": 1.0,
                  "acls": {"fuzz": {"read": True, "update": False}},
                  "h5osfs": {"current": "ref", "acls": {"fuzz": {"read": True, "update": True}}}}
    def seed(name, rows, marker=b'{"domain": "/home/fuzz/f.h5"}', pool_objs=None, domain=None):
        parts = [dumps(root), dumps(dset), dumps(table), b"",
                 b"2 0\n" + entries(rows), b"V\n" + dumps(vlist), b"M\n" + marker]
        if domain is not None:
            parts.append(b"D\n" + dumps(domain))
        for c in (chunks if pool_objs is None else pool_objs):
            parts.append(c if c.startswith(b"Q ") else b"P\n" + c)
        write("fuzz_image", name, SEP.join(parts))
    seed("version", good)
    seed("version-forged-entry",
         [good[0], (b"fuzzb/" + other_key + b"/c/" + secret_md5, 1024), good[2]])
    seed("version-foreign-marker", good, marker=b'{"domain": "/home/other.h5"}')
    # the current domain in ref mode names its head version's root and reads the pool
    seed("ref-current", good, domain=ref_domain)
    seed("ref-current-forged-entry",
         [good[0], (b"fuzzb/" + other_key + b"/c/" + secret_md5, 1024), good[2]],
         domain=ref_domain)
    seed("ref-current-not-ref", good, domain=dict(ref_domain, h5osfs={}))
    seed("version-forged-object", good,
         pool_objs=[chunks[0], b"Q " + md5s[1].encode() + b"\n" + chunks[2], chunks[2]])


def vector_seeds():
    """Datasets whose chunks are codec vectors: HSDS bitshuffle and a zlib stream (gzip
    filter, no blosc frame), which the fixture bucket does not have."""
    root = {"id": "@R", "root": "@R", "links": {
        "bs": {"id": "@D1", "class": "H5L_TYPE_HARD"},
        "gz": {"id": "@D2", "class": "H5L_TYPE_HARD"}}}
    def dset(oid, base, n, filters):
        return {"id": oid, "root": "@R", "type": {"class": "H5T_INTEGER" if "STD" in base
                                                   else "H5T_FLOAT", "base": base},
                "shape": {"class": "H5S_SIMPLE", "dims": [n]},
                "creationProperties": {"filters": filters},
                "layout": {"class": "H5D_CHUNKED", "dims": [n]}}
    codec = os.path.join(DATA, "codec")
    parts = [dumps(root),
             dumps(dset("@D1", "H5T_STD_I32LE", 5000,
                        [{"class": "H5Z_FILTER_BITSHUFFLE", "id": 32008, "name": "bitshuffle"}])),
             dumps(dset("@D2", "H5T_IEEE_F32LE", 1000,
                        [{"class": "H5Z_FILTER_SHUFFLE", "id": 2, "name": "shuffle"},
                         {"class": "H5Z_FILTER_DEFLATE", "id": 1, "name": "gzip", "level": 6}])),
             b"",
             b"1 0\n" + read(os.path.join(codec, "bs_i32_5000.bs")),
             b"2 0\n" + read(os.path.join(codec, "zlibshuf_f32_1000.zlib"))]
    write("fuzz_image", "vec-bitshuffle-zlib", SEP.join(parts))


def vds_seeds():
    """Virtual datasets (issue 27.1): D1 keeps an "h5osfs" member of mappings into D2 (".")
    and into other files, with every selection form the member has (doc/image.md)."""
    root = {"id": "@R", "root": "@R", "links": {
        "v": {"id": "@D1", "class": "H5L_TYPE_HARD"},
        "d2": {"id": "@D2", "class": "H5L_TYPE_HARD"}}}
    f64 = {"class": "H5T_FLOAT", "base": "H5T_IEEE_F64LE"}

    def hyper(start, stride, count, block, dims=None):
        h = {"class": "hyperslab", "start": start, "stride": stride, "count": count,
             "block": block}
        if dims is not None:
            h["dims"] = dims
        return h
    forms = {
        "regular": [{"file": ".", "dataset": "/d2", "src_select": hyper([1], [2], [3], [1], [7]),
                     "vds_select": hyper([0, 1], [1, 1], [1, 3], [1, 1])}],
        "all-blocks": [{"file": "other.h5", "dataset": "x", "src_select": {"class": "all"},
                        "vds_select": {"class": "blocks",
                                       "blocks": [[[0, 0], [0, 1]], [[2, 1], [2, 3]]]}}],
        "unlimited": [{"file": ".", "dataset": "d2",
                       "src_select": hyper([0], [1], ["H5S_UNLIMITED"], [1], [0]),
                       "vds_select": hyper([0, 0], [1, 1], ["H5S_UNLIMITED", 1], [1, 1])}],
        "printf": [{"file": "block_%b.h5", "dataset": "d", "src_select": {"class": "all"},
                    "vds_select": hyper([0, 0], [2, 1], ["H5S_UNLIMITED", 1], [2, 4])}],
    }
    for name, mappings in forms.items():
        unlimited = "H5S_UNLIMITED" in json.dumps(mappings)
        vds = {"id": "@D1", "root": "@R", "type": f64,
               "shape": {"class": "H5S_SIMPLE", "dims": [3, 4],
                         "maxdims": [0 if unlimited else 3, 4]},
               "creationProperties": {"fillValue": -1.0},
               "layout": {"class": "H5D_CHUNKED", "dims": [3, 4]},
               "h5osfs": {"virtual": mappings}}
        d2 = {"id": "@D2", "root": "@R", "type": f64,
              "shape": {"class": "H5S_SIMPLE", "dims": [7]},
              "layout": {"class": "H5D_CHUNKED", "dims": [7]}}
        chunk = b"".join(struct.pack("<d", i + 0.5) for i in range(7))
        write("fuzz_image", "vds-" + name,
              SEP.join([dumps(root), dumps(vds), dumps(d2), b"", b"2 0\n" + chunk]))


def link_seeds():
    """*_REF layouts of sample_link.h5, their ranges packed into a small linked file."""
    root = domains_by_name()["sample_link.h5"]
    objs = all_objects(root)
    h5 = read(os.path.join(BUCKET, "linked", "sample_link.h5"))
    uri = "fuzzb/linked/f.h5"
    for oid, j in objs.items():
        lay = j.get("creationProperties", {}).get("layout", {})
        cls = lay.get("class", "")
        if oid[0] != "d" or "_REF" not in cls:
            continue
        j = json.loads(json.dumps(j))
        lay = j["creationProperties"]["layout"]
        lay["file_uri"] = uri
        packed = b""
        extra_dsets = []
        if cls == "H5D_CONTIGUOUS_REF":
            packed = h5[lay["offset"]:lay["offset"] + lay["size"]]
            lay["offset"] = 0
        elif cls == "H5D_CHUNKED_REF":
            for idx, (off, size) in sorted(lay["chunks"].items()):
                lay["chunks"][idx] = [len(packed), size]
                packed += h5[off:off + size]
        else:   # INDIRECT: keep 4 entries of the chunk table, pack their ranges
            table_id = lay["chunk_table"]
            table = load(table_id)
            raw = read(os.path.join(chunk_dir(table_id), "0_0"))
            entries = [struct.unpack_from("<qi", raw, 12 * i) for i in range(len(raw) // 12)]
            out = b""
            for i, (off, size) in enumerate(entries):
                if i in (0, 1, 9, 63) and size > 0:
                    out += struct.pack("<qi", len(packed), size)
                    packed += h5[off:off + size]
                else:
                    out += struct.pack("<qi", 0, 0)
            extra_dsets = [(table_id, table)]
            table_chunk = b"2 0_0\n" + out
        name = "link-" + cls.lower().replace("h5d_", "")
        if extra_dsets:
            image_seed(name, objs[root], [(oid, j)] + extra_dsets, None,
                       [table_chunk, b"L x\n" + packed])
        else:
            image_seed(name, objs[root], [(oid, j)], None, [b"L x\n" + packed])


def domains_by_name():
    return dict(domains())


# ---- fuzz_s3_xml ----

S3_XML = os.path.join(DATA, "s3-xml")


def s3_xml_seeds():
    """The answers of a real S3 server (s3rver, tests/data/s3-xml), and AWS's documented
    shapes that s3rver does not send: a delete result with errors, an error with a request id,
    a listing out of order and one with entities."""
    for name in sorted(os.listdir(S3_XML)):
        if name.endswith(".xml"):
            write("fuzz_s3_xml", name, read(os.path.join(S3_XML, name)))
    write("fuzz_s3_xml", "aws-delete-errors.xml",
          b'<?xml version="1.0" encoding="UTF-8"?>\n'
          b'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
          b"<Deleted><Key>sample1.txt</Key></Deleted>"
          b"<Error><Key>sample2.txt</Key><Code>AccessDenied</Code><Message>Access Denied"
          b"</Message></Error><Error><Key>d</Key><Code>InternalError</Code></Error>"
          b"</DeleteResult>")
    write("fuzz_s3_xml", "aws-error-signature.xml",
          b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code>'
          b"<Message>The request signature we calculated does not match the signature you "
          b"provided.</Message><AWSAccessKeyId>AK</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256"
          b"&#x0A;20261124T131356Z</StringToSign><RequestId>4442587FB7D0A2F9</RequestId>"
          b"<HostId>aGVsbG8=</HostId></Error>")
    write("fuzz_s3_xml", "aws-list-v2-prefixes.xml",
          b'<?xml version="1.0" encoding="UTF-8"?>\n'
          b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
          b"<Name>b</Name><Prefix>pre/</Prefix><KeyCount>4</KeyCount><MaxKeys>4</MaxKeys>"
          b"<Delimiter>/</Delimiter><IsTruncated>true</IsTruncated><ContinuationToken>t0"
          b"</ContinuationToken><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4"
          b"vbOwM=</NextContinuationToken><StartAfter>pre/a</StartAfter>"
          b"<Contents><Key>pre/a &amp; b \xc3\xbc.txt</Key><LastModified>2026-11-21T23:14:46.1"
          b"23Z</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328-2&quot;</ETag>"
          b"<ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>312</Size><Owner><ID>x</ID>"
          b"<DisplayName>y</DisplayName></Owner><StorageClass>STANDARD</StorageClass>"
          b"</Contents><Contents><Key>pre/b</Key><Size>0</Size></Contents>"
          b"<CommonPrefixes><Prefix>pre/c/</Prefix></CommonPrefixes>"
          b"<CommonPrefixes><Prefix>pre/d/</Prefix></CommonPrefixes></ListBucketResult>")
    write("fuzz_s3_xml", "entities.xml",
          b'<?xml version="1.0"?><!DOCTYPE ListBucketResult [<!ENTITY k "<Contents><Key>e'
          b'</Key></Contents>">]><ListBucketResult>&k;<IsTruncated>false</IsTruncated>'
          b"</ListBucketResult>")
    write("fuzz_s3_xml", "proxy-page.html",
          b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>")


# ---- fuzz_credentials ----

def credentials_seeds():
    """AWS CLI files as people write them (aws configure, SSO, assume-role profiles)."""
    write("fuzz_credentials", "credentials",
          b"# comment\n[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
          b"aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n\n[x]\n"
          b"  aws_access_key_id=ASIAX  \naws_secret_access_key = secret = with equals\n"
          b"aws_session_token=IQoJb3JpZ2luX2VjEHAaCXVzLWVhc3QtMSJHMEUCIQ==\n")
    write("fuzz_credentials", "config",
          b"[default]\nregion = eu-west-1\noutput = json\n\n[profile x]\nregion=us-west-2\n"
          b"s3 =\n  max_concurrent_requests = 20\n  addressing_style = path\n"
          b"[profile sso]\nsso_start_url = https://d-1.awsapps.com/start\nsso_region = us-east-1\n"
          b"[sso-session s]\nsso_region=us-east-1\n")
    write("fuzz_credentials", "crlf",
          b"[x]\r\naws_access_key_id = AK\r\naws_secret_access_key = SK\r\n"
          b"region = ap-south-1\r\n; comment\r\n")
    token = b"IQoJb3JpZ2luX2VjE" + b"A" * 1100 + b"=="
    write("fuzz_credentials", "long-token",
          b"[x]\naws_access_key_id=ASIA\naws_secret_access_key=s\naws_session_token=" + token +
          b"\n[profile x]\nregion=eu-central-1\n")


# ---- fuzz_domain_json ----

def domain_json_seeds():
    """Every .domain.json HSDS wrote in the fixture buckets, and ACL shapes they lack: groups,
    the stray "domain" member of a PUT /acls/<user>, a user entry that denies what default
    allows."""
    fixtures = os.path.join(HERE, "..", "..", "shared", "fixtures", "hsds-v2")
    seen = set()
    for top in (os.path.join(DATA, "hsds-v2"), fixtures):
        for dirpath, _, files in sorted(os.walk(top)):
            if ".domain.json" in files:
                text = read(os.path.join(dirpath, ".domain.json"))
                if text not in seen:
                    seen.add(text)
                    rel = os.path.relpath(dirpath, top).replace("/", "_")
                    write("fuzz_domain_json", rel, text)
    all6 = {k: True for k in ("create", "read", "update", "delete", "readACL", "updateACL")}
    none6 = {k: False for k in all6}
    write("fuzz_domain_json", "groups", dumps({
        "root": "g-d64bf735-c43d061d-5ec3-7fbd4c-b58e95", "owner": "u1",
        "acls": {"u1": all6, "default": dict(none6, read=True),
                 "g:staff": dict(none6, update=True, create=True), "g:admin": all6,
                 "u2": dict(none6, domain="hsdstest/home/u1/x.h5"), "admin": none6},
        "created": 1708897646.0599918, "lastModified": 1708897646}))
    write("fuzz_domain_json", "folder-partial-acl", dumps({
        "owner": "admin", "acls": {"admin": all6, "default": {"read": True}}, "created": 1}))


# ---- fuzz_journal ----

def journal_seeds():
    """Records as journal_write writes them (compact JSON, these members in this order), for
    every mode and state, with the fixture's real root ids, and a record with no bucket."""
    roots = [root for _, root in domains()]
    def rec(bucket, domain, mode, state, base, new):
        o = {"bucket": bucket} if bucket is not None else {}
        o.update({"domain": domain, "mode": mode, "state": state, "base_root": base,
                  "new_root": new})
        return json.dumps(o, separators=(",", ":")).encode()
    sep = b"\n@@\n"
    write("fuzz_journal", "new-clean", rec("fuzzb", "/home/u/x.h5", "new", "clean", "", ""))
    write("fuzz_journal", "replace-committing",
          rec("fuzzb", "/home/test_user1/sample1.h5", "replace", "committing", roots[0],
              roots[1]))
    write("fuzz_journal", "change-dirty",
          rec("s3:http://127.0.0.1:9000/hsdstest/", "/home/test_user1/d.h5", "change",
              "dirty", roots[2], ""))
    write("fuzz_journal", "no-bucket", rec(None, "/a b/\u00fc.h5", "change", "dirty",
                                              "g-5897df5c-0a297b92-d01f-57d482-a1f31a", ""))
    write("fuzz_journal", "v1-root", rec("fuzzb", "/home/v1.h5", "change", "committing",
                                         "g-1e6d4e44-3e6e-11e4-8f3c-3c15c2da029e", ""))
    write("fuzz_journal", "several",
          rec("fuzzb", "/x.h5", "new", "dirty", "", "") + sep +
          rec("other", "/y.h5", "replace", "clean", roots[0], "") + sep +
          rec(None, "/z.h5", "new", "committing", "", roots[3]) + sep + b"{}")


# ---- fuzz_vlist ----

def vlist_seeds():
    """Version lists as vlist_dump writes them (a tag, a version being removed, a list being
    dropped, a malformed entry), pool markers (an owner, an mv's hand-over) and domain
    objects (ref mode naming the root read, and not). @P and @R are the target's fixed pool
    and root ids."""
    sep = b"\n@@\n"
    roots = [root for _, root in domains()]
    def entry(n, names, state="kept", **extra):
        e = {"n": n, "root": roots[n % len(roots)],
             "time": 1764390000.25 + n, "by": "u@host", "parent": n - 1,
             "base": "@R", "current": roots[(n + 1) % len(roots)],
             "size": 4096 * n, "stamp": "s1", "names": names, "state": state}
        e.update(extra)
        return e
    def vlist(entries, nxt, fmt=1, **extra):
        d = {"format": fmt, "domain": "/d/x.h5", "pool": "@P", "next": nxt}
        d.update(extra)
        d["versions"] = entries
        return dumps(d)
    marker = dumps({"domain": "/d/x.h5"})
    moving = dumps({"domain": "/e/y.h5", "moving_from": "/d/x.h5"})
    ref = dumps({"root": "@R", "owner": "u", "h5osfs": {"current": "ref", "acls": {}}})
    plain = dumps({"root": "@R", "owner": "u"})
    ops = b"paper\n2.h5\n\x03"
    three = vlist([entry(1, ["1.h5"]), entry(2, ["2.h5", "paper"]), entry(3, ["3.h5"])], 4)
    write("fuzz_vlist", "three-tagged", three + sep + marker + sep + ref + sep + ops)
    write("fuzz_vlist", "removing-moving",
          vlist([entry(1, [], "removing"), entry(4, ["4.h5"])], 5) + sep + moving + sep +
          plain + sep + b"t\n4.h5\n\x01")
    write("fuzz_vlist", "dropping",
          vlist([entry(1, ["1.h5"])], 2, fmt=2, dropping=True) + sep + b"" + sep + b"" + sep +
          b"x\n1.h5\n\x00")
    write("fuzz_vlist", "malformed-entry",
          vlist([entry(1, ["1.h5"]), {"n": 2, "root": "nope"}, entry(3, ["2.h5"])], 3) + sep +
          dumps({"domain": "/other.h5"}) + sep + ref + sep + b"3.h5\n1.h5\n\x02")
    write("fuzz_vlist", "empty", vlist([], 1) + sep + marker + sep + b"" + sep + b"a\nb\n")


# ---- fuzz_vtable ----

def vtable_json(grid, tile, deflate=True):
    """A version's chunk table as vtable_json writes it."""
    uri = {"class": "H5T_STRING", "charSet": "H5T_CSET_ASCII", "strPad": "H5T_STR_NULLPAD",
           "length": 128}
    doc = {"id": "d-5897df5c-0a297b92-d01f-57d482-a1f31a",
           "root": "g-5897df5c-0a297b92-d01f-57d482-a1f31a", "created": 1.5,
           "lastModified": 1.5,
           "type": {"class": "H5T_COMPOUND", "fields": [
               {"name": "offset", "type": {"class": "H5T_INTEGER", "base": "H5T_STD_I64LE"}},
               {"name": "size", "type": {"class": "H5T_INTEGER", "base": "H5T_STD_I32LE"}},
               {"name": "file_uri", "type": uri}]},
           "shape": {"class": "H5S_SIMPLE", "dims": grid, "maxdims": grid}, "attributes": {},
           "creationProperties": {"filters": [{"class": "H5Z_FILTER_DEFLATE", "id": 1,
                                               "level": 6, "name": "gzip"}] if deflate else []},
           "layout": {"class": "H5D_CHUNKED", "dims": tile}}
    return dumps(doc)


def vtable_entries(n, base=0):
    out = b""
    for i in range(n):
        uri = ("fuzzb/db/5897df5c-0a297b92/c/%032x" % (base + i)).encode()
        out += struct.pack("<qi", 0, 100 + i) + uri + b"\0" * (128 - len(uri))
    return out


def vtable_seeds():
    """Tables of one, three and four tiles (zlib streams and raw entries, an edge tile
    padded), and one tile missing."""
    sep = b"\n@@\n"
    write("fuzz_vtable", "one-tile", vtable_json([10], [10]) + sep +
          zlib.compress(vtable_entries(10), 6))
    rows = [zlib.compress(vtable_entries(50, 50 * r), 6) for r in range(3)]
    write("fuzz_vtable", "three-rows", vtable_json([3, 50], [1, 50]) + sep + sep.join(rows))
    write("fuzz_vtable", "raw", vtable_json([4], [4], deflate=False) + sep + vtable_entries(4))
    edge = zlib.compress(vtable_entries(3) + bytes(140), 6)
    write("fuzz_vtable", "edge", vtable_json([7], [4]) + sep +
          zlib.compress(vtable_entries(4), 6) + sep + edge)
    write("fuzz_vtable", "missing", vtable_json([2, 3], [1, 3]) + sep +
          zlib.compress(vtable_entries(3), 6))


def main():
    codec_seeds()
    hjson_seeds()
    image_seeds()
    s3_xml_seeds()
    credentials_seeds()
    domain_json_seeds()
    journal_seeds()
    vlist_seeds()
    vtable_seeds()


if __name__ == "__main__":
    main()
