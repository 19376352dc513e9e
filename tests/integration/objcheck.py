#!/usr/bin/python3
"""objcheck: validate the objects of HSDS domains in a POSIX bucket directory against the
storage format (spec/hsds-format.md, "the spec" below: §1-§7, §10), field by field.

    /usr/bin/python3 tests/integration/objcheck.py BUCKET_DIR [DOMAIN_PATH] [--fill-chunks=error]

As a module: check(bucket_dir, domain=None, fill_chunks="warning") -> Report, whose .problems
(and .warnings) are strings "KEY: FIELD: what is wrong"; problems(bucket_dir, domain=None, ...)
is the list of problems alone.

What is checked, per domain (every .domain.json of the bucket, or the one named):
- .domain.json (§3.1): members root?, owner, acls, created, lastModified in that order; each ACL
  holds the six booleans in ACL_KEYS order; folders have no root.
- ids and keys (§1, §2.1): v2 ids, lowercase, 8-8-4-6-6; rotation-valid root; every object
  under db/A-B/ of its root with the key its id gives; every object's `root` is the domain's.
- schema v1 domains (§11: a v1 root): v1 ids, lowercase, 8-4-4-4-12, in every object and link;
  every object and chunk at the top-level key <first 5 hex of MD5(id)>-<id>. v1 objects cannot
  be found by a prefix, so the domain's objects are the top-level keys whose JSON names its root
  (and its chunks those of its datasets). Every top-level key that looks like a v1 object key
  must carry the right hash.
- JSON bytes (§3.0): exactly Python json.dumps() of the parsed value, no duplicate members.
- required members and their order: group/dataset/datatype (§3.2, §3.4, §3.5), attributes
  (§3.6), links (§3.3; hard link targets exist in the domain).
- types (§4), shapes (§3.4, §3.6), layouts (§5.3: top level H5D_CHUNKED with integer dims of the
  shape's rank), filters (§5.2: normalised objects with class, id and name from the table).
- chunks (§2.4, §5.6, §6, §7): key belongs to an existing dataset, index inside the grid
  (maxdims; 0 = unlimited), partition directory right, bytes decode (blosc frame sniffing, zlib
  fallback, bitshuffle framing) to exactly prod(chunk dims) x itemsize bytes for fixed-size
  types or to a well-formed vlen stream; parts outside the dataspace hold the fill value (§6.1);
  a chunk equal to the fill value everywhere is reported (a warning by default, since HSDS
  itself may store such chunks; fill_chunks="error" for writers that promise not to).
- linked layouts (§8): a file_uri "<bucket>/<key>" naming this bucket names an object that
  exists, and every byte range the layout gives (offset/size, the chunk map) lies inside it;
  db/A-B/.h5osfs-file (h5osfs's linked file, which HSDS skips) is the one non-HSDS key allowed
  under a root, and only when a layout of the domain links to it.

Warnings are things the spec allows but that are worth knowing (unreachable objects, chunks
entirely outside the current extent, unknown extra members, ...).
"""
import argparse
import base64
import ctypes
import ctypes.util
import hashlib
import json
import math
import os
import re
import sys
import zlib
from pathlib import Path

import numpy as np

HEX = "0123456789abcdef"
ROT = {c: HEX[(i + 8) % 16] for i, c in enumerate(HEX)}
ACL_KEYS = ("create", "read", "update", "delete", "readACL", "updateACL")
PRIMES = (29, 31, 37, 41, 43, 47, 53, 59, 61, 67)

# Spec/fixture disagreement: §4 lists the names with LE|BE only, but the HSDS fixture holds a
# vlen base "H5T_STD_I32" (h5pyd writes vlen bases without the byte order, and HSDS's name
# parser, like hdf5-json's getNumpyTypename, takes a missing suffix as little-endian). HSDS
# serves it, so the names without a suffix are accepted here too.
INT_NAMES = {f"H5T_STD_{s}{n}{e}" for s in "IU" for n in (8, 16, 32, 64)
             for e in ("LE", "BE", "")}
FLOAT_NAMES = {f"H5T_IEEE_F{n}{e}" for n in (16, 32, 64) for e in ("LE", "BE", "")}
PREDEFINED = INT_NAMES | FLOAT_NAMES

# §5.2 filter table: class -> (id, name)
FILTERS = {
    "H5Z_FILTER_NONE": (0, "none"), "H5Z_FILTER_DEFLATE": (1, "gzip"),
    "H5Z_FILTER_SHUFFLE": (2, "shuffle"), "H5Z_FILTER_FLETCHER32": (3, "fletcher32"),
    "H5Z_FILTER_SZIP": (4, "szip"), "H5Z_FILTER_NBIT": (5, "nbit"),
    "H5Z_FILTER_SCALEOFFSET": (6, "scaleoffset"), "H5Z_FILTER_LZF": (32000, "lzf"),
    "H5Z_FILTER_BLOSC": (32001, "blosclz"), "H5Z_FILTER_SNAPPY": (32003, "snappy"),
    "H5Z_FILTER_LZ4": (32004, "lz4"), "H5Z_FILTER_LZ4HC": (32005, "lz4hc"),
    "H5Z_FILTER_BITSHUFFLE": (32008, "bitshuffle"), "H5Z_FILTER_ZSTD": (32015, "zstd"),
}
FILTER_BY_ID = {v[0]: (k, v[1]) for k, v in FILTERS.items()}
FILTER_BY_NAME = {v[1]: (k, v[0]) for k, v in FILTERS.items()}
FILTER_BY_NAME["deflate"] = ("H5Z_FILTER_DEFLATE", 1)
# storUtil.getSupportedFilters (bitshuffle is served but refused at creation: a warning)
SUPPORTED_FILTER_NAMES = {"shuffle", "fletcher32", "nbit", "scaleoffset", "blosclz", "lz4",
                          "lz4hc", "snappy", "gzip", "zstd", "deflate"}
COMPRESSOR_CLASSES = {"H5Z_FILTER_DEFLATE", "H5Z_FILTER_SZIP", "H5Z_FILTER_SCALEOFFSET",
                      "H5Z_FILTER_LZF", "H5Z_FILTER_BLOSC", "H5Z_FILTER_SNAPPY",
                      "H5Z_FILTER_LZ4", "H5Z_FILTER_LZ4HC", "H5Z_FILTER_ZSTD"}
USER_COMPRESSORS = {"gzip", "szip", "lzf", "blosclz", "snappy", "lz4", "lz4hc", "zstd"}

DOMAIN_ORDER = ("root", "owner", "acls", "created", "lastModified")
GROUP_ORDER = ("id", "root", "created", "lastModified", "links", "attributes",
               "creationProperties")
DATASET_ORDER = ("id", "root", "created", "lastModified", "type", "shape", "attributes",
                 "creationProperties", "layout")
DATATYPE_ORDER = ("id", "root", "created", "lastModified", "type", "attributes")
ATTR_ORDER = ("type", "shape", "value", "created")
LINK_ORDER = {"H5L_TYPE_HARD": ("id", "class", "created"),
              "H5L_TYPE_SOFT": ("h5path", "class", "created"),
              "H5L_TYPE_EXTERNAL": ("h5path", "h5domain", "class", "created")}
INFO_REQUIRED = ("allocated_bytes", "lastModified", "num_groups", "num_datatypes", "datasets",
                 "num_chunks")
MAX_VLEN_ELEMENT = 1_000_000
VLEN = "variable"      # check_type() of a variable-length type

# h5osfs's local bucket writes an object under this name, then renames it into place: never
# a key (src/store/posix.c)
TMP_PREFIX = ".h5osfs-tmp."
CDE_RE = re.compile(r"^[0-9a-f]{4}-[0-9a-f]{6}-[0-9a-f]{6}$")
INDEX_RE = re.compile(r"^(0|[1-9][0-9]*)(_(0|[1-9][0-9]*))*$")


class Report:
    def __init__(self):
        self.problems = []
        self.warnings = []

    def bad(self, key, field, msg):
        self.problems.append(f"{key}: {field}: {msg}" if field else f"{key}: {msg}")

    def warn(self, key, field, msg):
        self.warnings.append(f"{key}: {field}: {msg}" if field else f"{key}: {msg}")


# ---------------------------------------------------------------------------------------------
# ids (§1) and keys (§2)

def id_hex(obj_id, prefixes="gdt"):
    """The 32 hex digits of a v2 object id whose class letter is one of prefixes, or None."""
    if not isinstance(obj_id, str):
        return None
    parts = obj_id.split("-")
    if len(parts) != 6 or parts[0] not in prefixes:
        return None
    if [len(p) for p in parts[1:]] != [8, 8, 4, 6, 6]:
        return None
    digits = "".join(parts[1:])
    if any(c not in HEX for c in digits):      # lowercase only (§1.3)
        return None
    return digits


def is_v1_id(obj_id):
    parts = obj_id.split("-") if isinstance(obj_id, str) else []
    return len(parts) == 6 and len(parts[2]) == 4


V1_ID_RE = re.compile(r"^([gdt])-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# a v1 key (§11, idUtil.getObjId): 5 hash characters, "-", then the id; chunks "c[N]-<uuid>_i_j"
V1_KEY_RE = re.compile(r"^([0-9a-f]{5})-(([gdtc])(\d*)-([0-9a-f-]{36})(?:_(\S+))?)$")


def v1_id_ok(obj_id, prefixes="gdt"):
    m = V1_ID_RE.match(obj_id) if isinstance(obj_id, str) else None
    return m is not None and m.group(1) in prefixes


def v1_key(obj_id):
    """§11: the first 5 lowercase hex digits of MD5(UTF-8 of the id), "-", the id."""
    return hashlib.md5(obj_id.encode("utf-8")).hexdigest()[:5] + "-" + obj_id


def id_ok(obj_id, prefixes="gdt"):
    """A valid id of either schema (v1 or v2) whose class is one of prefixes."""
    return id_hex(obj_id, prefixes) is not None or v1_id_ok(obj_id, prefixes)


def is_root_id(obj_id):
    h = id_hex(obj_id, "g")
    return h is not None and all(h[i] == ROT[h[i + 16]] for i in range(16))


def format_id(prefix, h):
    return f"{prefix}-{h[:8]}-{h[8:16]}-{h[16:20]}-{h[20:26]}-{h[26:]}"


def id_from_key(prefix_dir, kind, cde):
    """Object id from the db/A-B part and the C-D-E part of its key."""
    return f"{kind}-{prefix_dir}-{cde}"


# ---------------------------------------------------------------------------------------------
# JSON (§3.0)

class DuplicateMember(ValueError):
    pass


def _pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateMember(k)
        out[k] = v
    return out


def _constant(name):        # NaN, Infinity, -Infinity: kept as floats, dumped back as tokens
    return float(name.replace("Infinity", "inf"))


def load_json(path, key, rep):
    """The parsed object of a JSON key, or None (after reporting why). Checks that the bytes
    are exactly json.dumps() of the value: separators, escapes, float repr, member order."""
    data = Path(path).read_bytes()
    if not data:
        rep.bad(key, "", "0-byte JSON object (HSDS treats it as missing, §2.5)")
        return None
    try:
        text = data.decode("utf-8")
        obj = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except DuplicateMember as e:
        rep.bad(key, str(e), "duplicate member")
        return None
    except (UnicodeDecodeError, ValueError) as e:
        rep.bad(key, "", f"not JSON: {e}")
        return None
    if not isinstance(obj, dict):
        rep.bad(key, "", f"not a JSON object but {type(obj).__name__}")
        return None
    again = json.dumps(obj).encode()
    if again != data:
        at = next((i for i, (a, b) in enumerate(zip(again, data)) if a != b),
                  min(len(again), len(data)))
        rep.bad(key, "", f"bytes are not json.dumps() of the value (§3.0): first difference at "
                f"byte {at}: stored {data[max(0, at - 20):at + 20]!r}, "
                f"json.dumps {again[max(0, at - 20):at + 20]!r}")
    return obj


def check_order(key, field, obj, order, required, rep, extra="warn"):
    """obj's known members appear in the relative order given; required ones are present;
    unknown members are a warning (tolerated by HSDS, §3.0) or a problem."""
    if not isinstance(obj, dict):
        rep.bad(key, field, f"not an object: {obj!r:.60}")
        return False
    ok = True
    for m in required:
        if m not in obj:
            rep.bad(key, f"{field}.{m}" if field else m, "required member missing")
            ok = False
    known = [m for m in obj if m in order]
    want = sorted(known, key=order.index)
    if known != want:
        rep.bad(key, field or "(members)", f"member order {known}, HSDS writes {want}")
        ok = False
    unknown = [m for m in obj if m not in order]
    if unknown:
        (rep.warn if extra == "warn" else rep.bad)(key, field or "(members)",
                                                    f"unknown members {unknown}")
    return ok


def is_time(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_times(key, field, obj, rep, names=("created", "lastModified")):
    for n in names:
        if n in obj and not is_time(obj[n]):
            rep.bad(key, f"{field}.{n}" if field else n, f"not a number of seconds: {obj[n]!r}")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------------------------------------
# types (§4)

def check_type(key, field, t, rep, committed, top=False):
    """Validates type JSON t; returns its element size (VLEN for variable length, None if the
    type is invalid)."""
    if isinstance(t, str):
        if top:
            rep.bad(key, field, f"top-level type is the bare name {t!r}; HSDS stores an object")
        if t not in PREDEFINED:
            rep.bad(key, field, f"unknown predefined type name {t!r}")
            return None
        return int(re.search(r"(\d+)(LE|BE)?$", t).group(1)) // 8
    if not isinstance(t, dict) or "class" not in t:
        rep.bad(key, field, f"type is neither a predefined name nor an object with class: "
                f"{t!r:.80}")
        return None
    cls = t["class"]
    if "id" in t:       # committed-type use (§4 notes)
        if not id_ok(t["id"], "t"):
            rep.bad(key, f"{field}.id", f"not a datatype id: {t['id']!r}")
        else:
            committed.append((key, f"{field}.id", t["id"]))
    if cls in ("H5T_INTEGER", "H5T_FLOAT"):
        names = INT_NAMES if cls == "H5T_INTEGER" else FLOAT_NAMES
        if t.get("base") not in names:
            rep.bad(key, f"{field}.base", f"{cls} needs a predefined base, not {t.get('base')!r}")
            return None
        return int(re.search(r"(\d+)(LE|BE)?$", t["base"]).group(1)) // 8
    if cls == "H5T_STRING":
        size = None
        if t.get("charSet") not in ("H5T_CSET_ASCII", "H5T_CSET_UTF8"):
            rep.bad(key, f"{field}.charSet", f"bad or missing: {t.get('charSet')!r}")
        length = t.get("length")
        if length == "H5T_VARIABLE":
            size = VLEN
        elif is_int(length) and length > 0:
            size = length
        else:
            rep.bad(key, f"{field}.length", f"bad or missing: {length!r}")
            return None
        if "strPad" in t and t["strPad"] not in ("H5T_STR_NULLPAD", "H5T_STR_NULLTERM",
                                                 "H5T_STR_SPACEPAD"):
            rep.bad(key, f"{field}.strPad", f"bad: {t['strPad']!r}")
        return size
    if cls == "H5T_VLEN":
        base = t.get("base")
        if isinstance(base, dict):
            if base.get("class") not in ("H5T_INTEGER", "H5T_FLOAT", "H5T_STRING", "H5T_OPAQUE",
                                         "H5T_ENUM", "H5T_REFERENCE", "H5T_ARRAY"):
                rep.bad(key, f"{field}.base", f"vlen of {base.get('class')!r} is not allowed")
                return None
        elif base not in PREDEFINED:
            rep.bad(key, f"{field}.base", f"bad vlen base {base!r:.60}")
            return None
        bsize = check_type(key, f"{field}.base", base, rep, committed)
        if bsize is VLEN:
            rep.bad(key, f"{field}.base", "vlen of a variable-length type is not supported")
            return None
        return VLEN if bsize is not None else None
    if cls == "H5T_OPAQUE":
        if not (is_int(t.get("size")) and t["size"] > 0):
            rep.bad(key, f"{field}.size", f"opaque needs a size > 0, not {t.get('size')!r}")
            return None
        return t["size"]
    if cls == "H5T_ARRAY":
        dims = t.get("dims")
        dims = [dims] if is_int(dims) else dims
        if not (isinstance(dims, list) and dims and all(is_int(d) and d > 0 for d in dims)):
            rep.bad(key, f"{field}.dims", f"bad array dims {t.get('dims')!r}")
            return None
        base = t.get("base")
        if isinstance(base, dict) and base.get("class") not in ("H5T_INTEGER", "H5T_FLOAT",
                                                                "H5T_STRING", "H5T_ARRAY"):
            rep.bad(key, f"{field}.base", f"array of {base.get('class')!r} is not allowed")
            return None
        bsize = check_type(key, f"{field}.base", base, rep, committed)
        if bsize is None:
            return None
        return VLEN if bsize is VLEN else bsize * math.prod(dims)
    if cls == "H5T_ENUM":
        base = t.get("base")
        if not (isinstance(base, dict) and base.get("class") == "H5T_INTEGER"):
            rep.bad(key, f"{field}.base", f"enum base must be an H5T_INTEGER object: {base!r:.60}")
            return None
        mapping = t.get("mapping")
        if not (isinstance(mapping, dict) and mapping and
                all(is_int(v) for v in mapping.values())):
            rep.bad(key, f"{field}.mapping", "must be a non-empty name -> integer object")
        return check_type(key, f"{field}.base", base, rep, committed)
    if cls == "H5T_COMPOUND":
        fields = t.get("fields")
        if not (isinstance(fields, list) and fields):
            rep.bad(key, f"{field}.fields", "compound needs a non-empty fields list")
            return None
        total, names = 0, set()
        for i, f in enumerate(fields):
            ff = f"{field}.fields[{i}]"
            if not (isinstance(f, dict) and isinstance(f.get("name"), str) and "type" in f):
                rep.bad(key, ff, "a field is {name, type}")
                return None
            if not f["name"].isascii():
                rep.bad(key, f"{ff}.name", f"field name not ASCII: {f['name']!r}")
            if f["name"] in names:
                rep.bad(key, f"{ff}.name", f"duplicate field name {f['name']!r}")
            names.add(f["name"])
            s = check_type(key, f"{ff}.type", f["type"], rep, committed)
            if s is None:
                return None
            total = VLEN if (s is VLEN or total is VLEN) else total + s
        return total
    if cls == "H5T_REFERENCE":
        if t.get("base") == "H5T_STD_REF_OBJ":
            return 48
        if t.get("base") == "H5T_STD_REF_DSETREG":
            rep.bad(key, f"{field}.base", "region references are not usable (§4)")
            return None
        rep.bad(key, f"{field}.base", f"bad reference base {t.get('base')!r}")
        return None
    rep.bad(key, f"{field}.class", f"unknown type class {cls!r}")
    return None


def np_dtype(t):
    """numpy dtype of a valid fixed-size type (packed compounds, §6.2)."""
    if isinstance(t, str):
        m = re.match(r"H5T_(STD|IEEE)_([IUF])(\d+)(LE|BE)?$", t)
        kind = {"I": "i", "U": "u", "F": "f"}[m.group(2)]
        return np.dtype((">" if m.group(4) == "BE" else "<") + kind + str(int(m.group(3)) // 8))
    cls = t["class"]
    if cls in ("H5T_INTEGER", "H5T_FLOAT", "H5T_ENUM"):
        return np_dtype(t["base"])
    if cls == "H5T_STRING":
        return np.dtype(f"S{t['length']}")
    if cls == "H5T_OPAQUE":
        return np.dtype(f"V{t['size']}")
    if cls == "H5T_REFERENCE":
        return np.dtype("S48")
    if cls == "H5T_ARRAY":
        dims = t["dims"] if isinstance(t["dims"], list) else [t["dims"]]
        return np.dtype((np_dtype(t["base"]), tuple(dims)))
    if cls == "H5T_COMPOUND":
        return np.dtype([(f["name"], np_dtype(f["type"])) for f in t["fields"]])
    raise ValueError(cls)


def type_class(t):
    if isinstance(t, str):
        return "H5T_FLOAT" if t in FLOAT_NAMES else "H5T_INTEGER"
    return t.get("class")


def py_value(v, t):
    """A JSON element of type t as something numpy assigns to np_dtype(t)."""
    cls = type_class(t)
    if cls == "H5T_COMPOUND":
        if not (isinstance(v, list) and len(v) == len(t["fields"])):
            raise ValueError(f"compound value {v!r:.60} does not have {len(t['fields'])} fields")
        return tuple(py_value(x, f["type"]) for x, f in zip(v, t["fields"]))
    if cls == "H5T_ARRAY":
        return np.array(v, dtype=np_dtype(t["base"])) if not isinstance(t["base"], dict) or \
            t["base"].get("class") != "H5T_STRING" else np.array(
                [x.encode() if isinstance(x, str) else x for x in np.ravel(v)],
                dtype=np_dtype(t["base"])).reshape(np.shape(v))
    if cls in ("H5T_STRING", "H5T_REFERENCE", "H5T_OPAQUE"):
        if not isinstance(v, str):
            raise ValueError(f"{v!r:.60} is not a string")
        return v.encode("utf-8")
    if cls == "H5T_FLOAT":
        if isinstance(v, str):
            return float(v)     # "nan", "1.5" (§3.6 table)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ValueError(f"{v!r:.60} is not a number")
        return v
    if cls in ("H5T_INTEGER", "H5T_ENUM"):
        if isinstance(v, bool) and cls == "H5T_ENUM":
            return int(v)
        if not is_int(v):
            raise ValueError(f"{v!r:.60} is not an integer")
        return v
    raise ValueError(f"no JSON form for {cls}")


def fill_bytes(dset, size, key, rep):
    """The fill element's bytes of a fixed-size dataset (zeros by default; falsy fill values
    are ignored by HSDS, §5.1), or None when it cannot be built (reported)."""
    cp = dset.get("creationProperties") or {}
    zero = bytes(size)
    if "fillValue" not in cp:
        return zero
    fv, enc = cp["fillValue"], cp.get("fillValue_encoding")
    if enc == "base64":
        try:
            raw = base64.b64decode(fv, validate=True)
        except (ValueError, TypeError) as e:
            rep.bad(key, "creationProperties.fillValue", f"bad base64: {e}")
            return None
        if len(raw) != size:
            rep.bad(key, "creationProperties.fillValue", f"base64 fill of {len(raw)} bytes for an "
                    f"element of {size}")
            return None
        return raw
    if enc not in (None, "None"):
        rep.bad(key, "creationProperties.fillValue_encoding", f"unknown encoding {enc!r}")
        return None
    if not fv and not (isinstance(fv, float) and math.isnan(fv)):
        return zero
    try:
        a = np.zeros((), dtype=np_dtype(dset["type"]))
        a[()] = py_value(fv, dset["type"])
    except (ValueError, TypeError, OverflowError, KeyError) as e:
        rep.bad(key, "creationProperties.fillValue", f"does not fit the type: {e}")
        return None
    return a.tobytes()


# ---------------------------------------------------------------------------------------------
# values of attributes (§3.6)

def check_element(key, field, v, t, rep):
    """One JSON element of type t (light checks of its JSON kind, §3.6 table)."""
    try:
        cls = type_class(t)
        if cls == "H5T_VLEN":
            if not isinstance(v, list):
                raise ValueError(f"vlen element {v!r:.60} is not a list")
            for x in v:
                check_element(key, field, x, t["base"], rep)
        elif cls == "H5T_ARRAY":
            dims = t["dims"] if isinstance(t["dims"], list) else [t["dims"]]
            check_nesting(key, field, v, dims, t["base"], rep)
        elif cls == "H5T_COMPOUND":
            if not (isinstance(v, list) and len(v) == len(t["fields"])):
                raise ValueError(f"compound element {v!r:.60} does not have "
                                 f"{len(t['fields'])} fields")
            for x, f in zip(v, t["fields"]):
                check_element(key, field, x, f["type"], rep)
        elif cls == "H5T_STRING" and t.get("length") == "H5T_VARIABLE":
            if not isinstance(v, str):
                raise ValueError(f"{v!r:.60} is not a string")
        else:
            py_value(v, t)
    except ValueError as e:
        rep.bad(key, field, str(e))


def check_nesting(key, field, v, dims, t, rep):
    if not dims:
        check_element(key, field, v, t, rep)
        return
    if not (isinstance(v, list) and len(v) == dims[0]):
        rep.bad(key, field, f"value is not a list of {dims[0]} (shape {dims}): {v!r:.60}")
        return
    for x in v:
        check_nesting(key, field, x, dims[1:], t, rep)


def check_shape(key, field, shape, rep, attribute=False):
    """Returns (rank, dims, maxdims) with rank None for H5S_NULL, 0 for scalar; False if bad."""
    if not isinstance(shape, dict) or "class" not in shape:
        rep.bad(key, field, f"shape is not an object with class: {shape!r:.60}")
        return False
    cls = shape["class"]
    if cls in ("H5S_NULL", "H5S_SCALAR"):
        if "dims" in shape:
            rep.bad(key, f"{field}.dims", f"{cls} has no dims")
        return (None, None, None) if cls == "H5S_NULL" else (0, [], [])
    if cls != "H5S_SIMPLE":
        rep.bad(key, f"{field}.class", f"unknown shape class {cls!r}")
        return False
    dims = shape.get("dims")
    if not (isinstance(dims, list) and dims and all(is_int(d) and d >= 0 for d in dims)):
        rep.bad(key, f"{field}.dims", f"H5S_SIMPLE needs a non-empty list of integers >= 0: "
                f"{dims!r:.60}")
        return False
    maxdims = shape.get("maxdims")
    if maxdims is not None:
        if attribute:
            rep.bad(key, f"{field}.maxdims", "attribute shapes have no maxdims (§3.6)")
        elif not (isinstance(maxdims, list) and len(maxdims) == len(dims) and
                  all(is_int(m) and m >= 0 for m in maxdims)):
            rep.bad(key, f"{field}.maxdims", f"must be {len(dims)} integers >= 0 (0 = unlimited)"
                    f": {maxdims!r:.60}")
            maxdims = None
        else:
            for k, (d, m) in enumerate(zip(dims, maxdims)):
                if m and m < d:
                    rep.bad(key, f"{field}.maxdims[{k}]", f"{m} < dims[{k}] = {d}")
    return len(dims), dims, maxdims


def check_attributes(key, field, attrs, rep, committed):
    if not isinstance(attrs, dict):
        rep.bad(key, field, "attributes is not an object")
        return
    for name, a in attrs.items():
        af = f"{field}[{name!r}]"
        if not check_order(key, af, a, ATTR_ORDER + ("encoding",), ATTR_ORDER, rep):
            if not isinstance(a, dict) or not all(m in a for m in ATTR_ORDER):
                continue
        check_times(key, af, a, rep, ("created",))
        size = check_type(key, f"{af}.type", a["type"], rep, committed, top=True)
        shape = check_shape(key, f"{af}.shape", a["shape"], rep, attribute=True)
        if size is None or shape is False:
            continue
        rank, dims, _ = shape
        v = a["value"]
        if a.get("encoding") is not None:
            if a["encoding"] != "base64":
                rep.bad(key, f"{af}.encoding", f"unknown encoding {a['encoding']!r}")
            elif not isinstance(v, str):
                rep.bad(key, f"{af}.value", "base64 value is not a string")
            continue
        if rank is None:
            if v is not None:
                rep.bad(key, f"{af}.value", f"H5S_NULL attribute with a value {v!r:.40}")
        elif v is None:
            rep.warn(key, f"{af}.value", "null value (an attribute created without data)")
        elif rank == 0:
            # a bare element, or a one-element array (stored as sent, §3.6)
            if isinstance(v, list) and len(v) == 1 and type_class(a["type"]) not in (
                    "H5T_COMPOUND", "H5T_VLEN", "H5T_ARRAY"):
                v = v[0]
            check_element(key, f"{af}.value", v, a["type"], rep)
        else:
            check_nesting(key, f"{af}.value", v, dims, a["type"], rep)


# ---------------------------------------------------------------------------------------------
# chunk decoding (§6)

_blosc = None


def blosc_lib():
    global _blosc
    if _blosc is None:
        _blosc = ctypes.CDLL(ctypes.util.find_library("blosc") or "libblosc.so.1")
        _blosc.blosc_decompress.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        _blosc.blosc_decompress.restype = ctypes.c_int
        _blosc.blosc_cbuffer_sizes.argtypes = [ctypes.c_void_p] + [
            ctypes.POINTER(ctypes.c_size_t)] * 3
    return _blosc


_lz4 = None


def lz4_block_decode(src, size):
    global _lz4
    if _lz4 is None:
        _lz4 = ctypes.CDLL(ctypes.util.find_library("lz4") or "liblz4.so.1")
        _lz4.LZ4_decompress_safe.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                             ctypes.c_int]
        _lz4.LZ4_decompress_safe.restype = ctypes.c_int
    out = ctypes.create_string_buffer(size)
    n = _lz4.LZ4_decompress_safe(src, out, len(src), size)
    if n != size:
        raise ValueError(f"LZ4 block decodes to {n} bytes, expected {size}")
    return out.raw


def is_blosc_frame(data):
    """numcodecs' test as c-blosc 1.21 answers it: version byte 2, typesize != 0 (§6.5)."""
    return len(data) >= 16 and data[0] == 2 and data[3] != 0


def blosc_decode(data):
    nbytes, cbytes, blocksize = int.from_bytes(data[4:8], "little"), \
        int.from_bytes(data[12:16], "little"), int.from_bytes(data[8:12], "little")
    if cbytes != len(data):
        raise ValueError(f"blosc frame says {cbytes} bytes, the object has {len(data)}")
    out = ctypes.create_string_buffer(max(nbytes, 1))
    n = blosc_lib().blosc_decompress(data, out, nbytes)
    if n != nbytes or n < 0:
        raise ValueError(f"blosc_decompress returned {n} (frame: {nbytes} bytes, blocksize "
                         f"{blocksize})")
    return out.raw[:nbytes]


def zlib_decode(data):
    d = zlib.decompressobj()
    out = d.decompress(data) + d.flush()
    if not d.eof:
        raise ValueError("zlib stream is truncated")
    if d.unused_data:
        raise ValueError(f"{len(d.unused_data)} bytes after the end of the zlib stream")
    return out


def byte_unshuffle(data, itemsize):
    if itemsize <= 1:
        return data
    if len(data) % itemsize:
        raise ValueError(f"{len(data)} bytes are not a multiple of the element size {itemsize}")
    return np.frombuffer(data, np.uint8).reshape(itemsize, -1).T.tobytes()


def bitshuffle_decode(data, itemsize):
    """The bitshuffle+LZ4 framing of §6.6 back to the element bytes."""
    if len(data) < 12:
        raise ValueError("bitshuffle frame shorter than its 12-byte header")
    total = int.from_bytes(data[:8], "big")
    block = int.from_bytes(data[8:12], "big") // itemsize
    n = total // itemsize
    if block <= 0 or block % 8:
        raise ValueError(f"bitshuffle block of {block} elements")
    out, pos, done = [], 12, 0
    while n - done >= 8:
        count = min(block, (n - done) // 8 * 8)
        if pos + 4 > len(data):
            raise ValueError("bitshuffle stream is truncated")
        clen = int.from_bytes(data[pos:pos + 4], "big")
        raw = lz4_block_decode(data[pos + 4:pos + 4 + clen], count * itemsize)
        pos += 4 + clen
        bits = np.unpackbits(np.frombuffer(raw, np.uint8).reshape(itemsize * 8, count // 8),
                             axis=1, bitorder="little")          # [bit row][element]
        out.append(np.packbits(bits.T.reshape(count, itemsize, 8), axis=2,
                               bitorder="little").tobytes())
        done += count
    rest = (n - done) * itemsize
    out.append(data[pos:pos + rest])
    pos += rest
    if pos != len(data):
        raise ValueError(f"bitshuffle stream: {len(data) - pos} bytes left over")
    return b"".join(out), total


def filter_ops(filters):
    """(compressor name or None, shuffle: None | "shuffle" | "bitshuffle") per §5.2."""
    comp = shuffle = None
    for f in filters or []:
        if not isinstance(f, dict):
            continue
        cls, name = f.get("class"), f.get("name")
        if comp is None and (cls in COMPRESSOR_CLASSES or
                             (cls == "H5Z_FILTER_USER" and name in USER_COMPRESSORS)):
            comp = "gzip" if cls == "H5Z_FILTER_DEFLATE" else (name or "lz4")
        if shuffle is None and cls == "H5Z_FILTER_SHUFFLE":
            shuffle = "shuffle"
        if shuffle is None and cls == "H5Z_FILTER_BITSHUFFLE":
            shuffle = "bitshuffle"
    if comp == "scaleoffset":
        comp = None
    return comp, shuffle


def decode_chunk(data, filters, itemsize, vlen):
    """Chunk object bytes -> element bytes (§6.5). Raises ValueError."""
    comp, shuffle = filter_ops(filters)
    if vlen:
        shuffle = None
    unshuffled = False
    if comp:
        if is_blosc_frame(data):
            data = blosc_decode(data)
            unshuffled = True
        elif comp in ("gzip", "deflate", "zlib"):
            try:
                data = zlib_decode(data)
            except zlib.error as e:
                raise ValueError(f"neither a blosc frame nor a zlib stream ({e})") from None
        else:
            raise ValueError(f"not a blosc frame, and the {comp} compressor has no other "
                             "form HSDS decodes")
    if shuffle == "bitshuffle":
        data, _ = bitshuffle_decode(data, itemsize)
    elif shuffle == "shuffle" and not unshuffled:
        data = byte_unshuffle(data, itemsize)
    return data


def vlen_walker(t):
    """A function (buf, pos) -> pos that consumes one element of type t (§6.3)."""
    cls = type_class(t)
    if cls == "H5T_COMPOUND":
        parts = [vlen_walker(f["type"]) for f in t["fields"]]

        def walk(buf, pos):
            for p in parts:
                pos = p(buf, pos)
            return pos
        return walk
    if cls == "H5T_ARRAY":
        inner = vlen_walker(t["base"])
        n = math.prod(t["dims"] if isinstance(t["dims"], list) else [t["dims"]])

        def walk(buf, pos):
            for _ in range(n):
                pos = inner(buf, pos)
            return pos
        return walk
    if cls == "H5T_VLEN" or (cls == "H5T_STRING" and t.get("length") == "H5T_VARIABLE"):
        unit = np_dtype(t["base"]).itemsize if cls == "H5T_VLEN" else 1

        def walk(buf, pos):
            if pos + 4 > len(buf):
                raise ValueError(f"vlen count at byte {pos} runs past the end ({len(buf)})")
            count = int.from_bytes(buf[pos:pos + 4], "little", signed=True)
            if count < 0 or count > MAX_VLEN_ELEMENT:
                raise ValueError(f"vlen count {count} at byte {pos}")
            if count % unit:
                raise ValueError(f"vlen byte count {count} at byte {pos} is not a multiple of "
                                 f"the base size {unit}")
            if pos + 4 + count > len(buf):
                raise ValueError(f"vlen item at byte {pos} runs past the end")
            return pos + 4 + count
        return walk
    size = np_dtype(t).itemsize
    return lambda buf, pos: pos + size


# ---------------------------------------------------------------------------------------------
# the checker

class DomainChecker:
    def __init__(self, bucket, domain, rep, fill_chunks):
        self.bucket, self.domain, self.rep = Path(bucket), domain, rep
        self.fill_chunks = fill_chunks
        self.objects = {}       # id -> (kind, key, json)
        self.committed = []     # (key, field, t-id) uses of committed types
        self.hard = []          # (key, field, id) hard link targets
        self.tables = []        # (key, field, d-id) chunk tables
        self.linked = []        # (key, requested layout) of *_REF layouts with a file_uri
        self.own_file = None    # key of db/A-B/.h5osfs-file when there is one
        self.v1 = False         # a schema v1 domain (§11)

    def run(self):
        rep, dkey = self.rep, self.domain.strip("/") + "/.domain.json"
        d = load_json(self.bucket / dkey, dkey, rep)
        if d is None:
            return None
        check_order(dkey, "", d, DOMAIN_ORDER, DOMAIN_ORDER[1:], rep)
        check_times(dkey, "", d, rep)
        if "owner" in d and not isinstance(d["owner"], str):
            rep.bad(dkey, "owner", f"not a string: {d['owner']!r}")
        acls = d.get("acls")
        if acls is not None and not isinstance(acls, dict):
            rep.bad(dkey, "acls", "not an object")
        for user, acl in (acls or {}).items() if isinstance(acls, dict) else ():
            f = f"acls[{user!r}]"
            if not isinstance(acl, dict):
                rep.bad(dkey, f, "not an object")
                continue
            keys = [k for k in acl if k != "domain"]     # §3.1 quirk: a stray "domain"
            if keys != list(ACL_KEYS):
                rep.bad(dkey, f, f"members {keys}, HSDS writes {list(ACL_KEYS)}")
            for k in ACL_KEYS:
                if k in acl and not isinstance(acl[k], bool):
                    rep.bad(dkey, f"{f}.{k}", f"not a boolean: {acl[k]!r}")
        if "root" not in d:
            return None         # a folder
        root = d["root"]
        if isinstance(root, str) and is_v1_id(root):
            if not v1_id_ok(root, "g"):
                rep.bad(dkey, "root", f"not a v1 group id (g- and 8-4-4-4-12 lowercase hex): "
                        f"{root!r}")
                return None
            self.root, self.v1 = root, True
            self.check_v1_objects()
            return root
        if not is_root_id(root):
            rep.bad(dkey, "root", f"not a v2 root group id (8-8-4-6-6 lowercase hex, digits "
                    f"16-31 the +8 rotation of 0-15): {root!r}")
            return None
        self.root = root
        self.ab = root[2:19]
        self.check_objects()
        return root

    # -- walking db/A-B/

    def check_objects(self):
        rep, base = self.rep, self.bucket / "db" / self.ab
        rkey = f"db/{self.ab}/.group.json"
        if not (base / ".group.json").is_file():
            rep.bad(rkey, "", f"the root group of {self.domain} is missing")
        chunks = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                if name.startswith(TMP_PREFIX):
                    continue    # an atomic put under way (the summary is written after close)
                path = Path(dirpath) / name
                key = path.relative_to(self.bucket).as_posix()
                parts = path.relative_to(base).parts
                if parts == (".group.json",):
                    self.load_object("g", self.root, key, path)
                elif parts == (".h5osfs-file",):
                    self.own_file = key
                elif parts == (".info.json",):
                    info = load_json(path, key, rep)
                    if info is not None:
                        for m in INFO_REQUIRED:
                            if m not in info:
                                rep.bad(key, m, "required member of .info.json missing (§3.7)")
                elif len(parts) == 3 and (parts[0], parts[2]) in (
                        ("g", ".group.json"), ("t", ".datatype.json"), ("d", ".dataset.json")) \
                        and CDE_RE.match(parts[1]):
                    self.load_object(parts[0], id_from_key(self.ab, parts[0], parts[1]),
                                     key, path)
                elif parts[0] == "d" and len(parts) in (3, 4) and CDE_RE.match(parts[1]) and \
                        not name.endswith("json"):
                    chunks.append((id_from_key(self.ab, "d", parts[1]), parts[-1],
                                   parts[2] if len(parts) == 4 else None, key, path))
                else:
                    rep.bad(key, "", "not a key of the v2 layout (§2.1)")
        for kind, key, obj in list(self.objects.values()):
            {"g": self.check_group, "d": self.check_dataset,
             "t": self.check_datatype}[kind](key, obj)
        for dset_id, index, partition, key, path in chunks:
            self.check_chunk(dset_id, index, partition, key, path)
        self.check_references()

    # -- schema v1 (§11): everything at the top level

    def check_v1_objects(self):
        rep = self.rep
        chunks = []
        for key, m in v1_top_level_keys(self.bucket, rep):
            cls, body, index = m.group(3), m.group(5), m.group(6)
            path = self.bucket / key
            if cls == "c":
                if index is None:
                    rep.bad(key, "", "a chunk key without an index")
                    continue
                chunks.append(("d-" + body, index, m.group(4), key, path))
                continue
            if index is not None or m.group(4):
                rep.bad(key, "", "not a v1 object key (§11)")
                continue
            obj = load_json(path, key, rep)
            if obj is None or obj.get("root") != self.root:
                continue        # another domain's (or unreadable: reported)
            obj_id = m.group(2)
            if not v1_id_ok(obj_id):
                rep.bad(key, "id", f"not a v1 id (8-4-4-4-12 lowercase hex): {obj_id}")
                continue
            if obj.get("id") != obj_id:
                rep.bad(key, "id", f"{obj.get('id')!r}, the key says {obj_id}")
            self.objects[obj_id] = (cls, key, obj)
        if self.root not in self.objects:
            rep.bad(v1_key(self.root), "", f"the root group of {self.domain} is missing")
        for kind, key, obj in list(self.objects.values()):
            {"g": self.check_group, "d": self.check_dataset,
             "t": self.check_datatype}[kind](key, obj)
        for dset_id, index, partition, key, path in chunks:
            if dset_id in self.objects:
                self.check_chunk(dset_id, index, f"p{partition}" if partition else None, key,
                                 path)
        self.check_references()

    def load_object(self, kind, obj_id, key, path):
        rep = self.rep
        obj = load_json(path, key, rep)
        if obj is None:
            return
        if obj.get("id") != obj_id:
            rep.bad(key, "id", f"{obj.get('id')!r}, the key says {obj_id}")
        if obj.get("root") != self.root:
            rep.bad(key, "root", f"{obj.get('root')!r}, the domain's root is {self.root}")
        self.objects[obj_id] = (kind, key, obj)

    def check_common(self, key, obj, order, required):
        check_order(key, "", obj, order, required, self.rep)
        check_times(key, "", obj, self.rep)
        if "attributes" in obj:
            check_attributes(key, "attributes", obj["attributes"], self.rep, self.committed)

    def check_group(self, key, g):
        rep = self.rep
        self.check_common(key, g, GROUP_ORDER, GROUP_ORDER[:6])
        links = g.get("links")
        if not isinstance(links, dict):
            if links is not None:
                rep.bad(key, "links", "not an object")
            return
        for name, link in links.items():
            f = f"links[{name!r}]"
            if "/" in name or not name:
                rep.bad(key, f, "a link name is non-empty and has no '/'")
            if not isinstance(link, dict):
                rep.bad(key, f, "not an object")
                continue
            cls = link.get("class")
            if cls not in LINK_ORDER:
                rep.bad(key, f"{f}.class", f"missing or unknown link class {cls!r}")
                continue
            check_order(key, f, link, LINK_ORDER[cls], LINK_ORDER[cls], rep)
            check_times(key, f, link, rep, ("created",))
            if cls == "H5L_TYPE_HARD":
                if not (v1_id_ok if self.v1 else id_hex)(link.get("id")):
                    rep.bad(key, f"{f}.id", f"not a {'v1' if self.v1 else 'v2'} g-/d-/t- id: "
                            f"{link.get('id')!r}")
                else:
                    self.hard.append((key, f"{f}.id", link["id"]))
            else:
                for m in ("h5path", "h5domain") if cls == "H5L_TYPE_EXTERNAL" else ("h5path",):
                    if m in link and not isinstance(link[m], str):
                        rep.bad(key, f"{f}.{m}", "not a string")

    def check_datatype(self, key, t):
        self.check_common(key, t, DATATYPE_ORDER, DATATYPE_ORDER)
        if "type" in t:
            check_type(key, "type", t["type"], self.rep, self.committed, top=True)

    def check_dataset(self, key, d):
        rep = self.rep
        self.check_common(key, d, DATASET_ORDER, DATASET_ORDER[:7])
        d["_geometry"] = None
        if "type" not in d or "shape" not in d:
            return
        size = check_type(key, "type", d["type"], rep, self.committed, top=True)
        shape = check_shape(key, "shape", d["shape"], rep)
        cp = d.get("creationProperties")
        if cp is not None and not isinstance(cp, dict):
            rep.bad(key, "creationProperties", "not an object")
            cp = None
        filters = self.check_filters(key, (cp or {}).get("filters"))
        if cp and "layout" in cp:
            self.check_requested_layout(key, cp["layout"], shape)
        if shape is False:
            return
        rank, dims, maxdims = shape
        layout = d.get("layout")
        if rank is None:
            if layout is not None:
                rep.warn(key, "layout", "an H5S_NULL dataset with a layout")
            d["_geometry"] = "null"
            return
        if layout is None:
            rep.bad(key, "layout", "required for data I/O (§3.4, §10.3)")
            return
        if not isinstance(layout, dict) or layout.get("class") != "H5D_CHUNKED":
            rep.bad(key, "layout.class", f"top-level layout must be H5D_CHUNKED: {layout!r:.60}")
            return
        check_order(key, "layout", layout, ("class", "dims", "partition_count"),
                    ("class", "dims"), rep)
        cdims = layout.get("dims")
        want_rank = max(rank, 1)
        if not (isinstance(cdims, list) and len(cdims) == want_rank and
                all(is_int(c) and c >= 0 for c in cdims)):
            rep.bad(key, "layout.dims", f"must be {want_rank} integers: {cdims!r:.60}")
            return
        if rank == 0 and cdims != [1]:
            rep.bad(key, "layout.dims", f"a scalar dataset's chunk is [1], not {cdims}")
            return
        for k, c in enumerate(cdims):
            if c == 0 and (rank == 0 or dims[k] != 0 or (maxdims and maxdims[k] != 0)):
                rep.bad(key, f"layout.dims[{k}]", "0 (only for a zero extent)")
                return
        parts = layout.get("partition_count")
        if parts is not None and not (is_int(parts) and parts > 0):
            rep.bad(key, "layout.partition_count", f"not an integer > 0: {parts!r}")
            parts = None
        dims = dims if rank else [1]
        maxdims = maxdims if rank else [1]
        fill = None
        if size is not None and size is not VLEN:
            fill = fill_bytes(d, size, key, rep)
        d["_geometry"] = dict(dims=dims, maxdims=maxdims or dims, cdims=cdims, size=size,
                              filters=filters, partitions=parts, fill=fill, vlen=size is VLEN)

    def check_filters(self, key, filters):
        rep = self.rep
        if filters is None:
            return []
        if not isinstance(filters, list):
            rep.bad(key, "creationProperties.filters", "not a list")
            return []
        for i, f in enumerate(filters):
            ff = f"creationProperties.filters[{i}]"
            if not isinstance(f, dict):
                rep.bad(key, ff, f"not normalised to an object with class, id, name: {f!r}")
                continue
            cls, fid, name = f.get("class"), f.get("id"), f.get("name")
            for m in ("class", "id", "name"):
                if m not in f:
                    rep.bad(key, f"{ff}.{m}", "missing (§5.2: every stored filter carries "
                            "class, id and name)")
            if cls == "H5Z_FILTER_USER":
                row = FILTER_BY_NAME.get(name) or FILTER_BY_ID.get(fid)
                if row is None:
                    rep.bad(key, ff, f"unknown user filter id {fid!r} / name {name!r}")
                    continue
                want_id = FILTER_BY_NAME[name][1] if name in FILTER_BY_NAME else fid
                want_name = name if name in FILTER_BY_NAME else FILTER_BY_ID[fid][1]
            elif cls in FILTERS:
                want_id, want_name = FILTERS[cls]
                if cls == "H5Z_FILTER_DEFLATE" and name == "deflate":
                    want_name = "deflate"
            else:
                rep.bad(key, f"{ff}.class", f"unknown filter class {cls!r}")
                continue
            if "id" in f and fid != want_id:
                rep.bad(key, f"{ff}.id", f"{fid!r}, the table says {want_id}")
            if "name" in f and name != want_name:
                rep.bad(key, f"{ff}.name", f"{name!r}, the table says {want_name!r}")
            if name == "bitshuffle":
                rep.warn(key, ff, "bitshuffle: served by HSDS but refused at creation (§5.2)")
            elif name is not None and name not in SUPPORTED_FILTER_NAMES and name != "none":
                rep.bad(key, f"{ff}.name", f"{name!r} is not a filter HSDS supports")
            if "level" in f and not is_int(f["level"]):
                rep.bad(key, f"{ff}.level", f"not an integer: {f['level']!r}")
        comp, shuffle = filter_ops(filters)
        if shuffle == "shuffle" and comp is None:
            rep.warn(key, "creationProperties.filters", "shuffle without a compressor: HSDS "
                     "stores such chunks unshuffled but unshuffles on read (§6.5)")
        return filters

    def check_requested_layout(self, key, lay, shape):
        rep, f = self.rep, "creationProperties.layout"
        if not isinstance(lay, dict):
            rep.bad(key, f, "not an object")
            return
        cls = lay.get("class")
        need = {"H5D_CHUNKED": ("dims",), "H5D_CONTIGUOUS": (), "H5D_COMPACT": (),
                "H5D_CONTIGUOUS_REF": ("file_uri", "offset", "size"),
                "H5D_CHUNKED_REF": ("file_uri", "dims", "chunks"),
                "H5D_CHUNKED_REF_INDIRECT": ("dims", "chunk_table")}.get(cls)
        if need is None:
            rep.bad(key, f"{f}.class", f"unknown layout class {cls!r}")
            return
        for m in need:
            if m not in lay:
                rep.bad(key, f"{f}.{m}", f"required for {cls}")
        if cls == "H5D_COMPACT":
            rep.warn(key, f, "H5D_COMPACT datasets are unusable in HSDS (§5.3)")
        if "dims" in lay and shape:
            rank = shape[0] or 1
            if not (isinstance(lay["dims"], list) and len(lay["dims"]) == rank and
                    all(is_int(c) and c > 0 for c in lay["dims"])):
                rep.bad(key, f"{f}.dims", f"must be {rank} integers > 0: {lay['dims']!r:.60}")
        if cls == "H5D_CHUNKED_REF_INDIRECT" and "chunk_table" in lay:
            self.tables.append((key, f"{f}.chunk_table", lay["chunk_table"]))
        if isinstance(lay.get("file_uri"), str):
            self.linked.append((key, lay))

    # -- chunks

    def check_chunk(self, dset_id, index, partition, key, path):
        """Chunk index (a string) of dataset dset_id, in partition directory partition ("p<N>"
        or None), stored at key (path)."""
        rep = self.rep
        entry = self.objects.get(dset_id)
        if entry is None:
            rep.bad(key, "", f"chunk of a dataset that does not exist ({dset_id})")
            return
        g = entry[2].get("_geometry")
        if g is None:
            return              # the dataset's own problems are reported
        if g == "null":
            rep.bad(key, "", "chunk of an H5S_NULL dataset")
            return
        if not INDEX_RE.match(index):
            rep.bad(key, "", f"chunk index {index!r} is not decimal numbers joined by '_'")
            return
        idx = [int(x) for x in index.split("_")]
        if len(idx) != len(g["cdims"]):
            rep.bad(key, "", f"chunk index of rank {len(idx)} for a rank-{len(g['cdims'])} layout")
            return
        if partition is not None:
            p = partition
            if g["partitions"] is None:
                rep.bad(key, "", "partition directory without layout.partition_count")
            elif p != f"p{sum(i * PRIMES[k % 10] for k, i in enumerate(idx)) % g['partitions']}":
                rep.bad(key, "", f"chunk in partition {p}, §5.6 puts it elsewhere")
        elif g["partitions"] is not None:
            rep.bad(key, "", "chunk outside a p<N>/ directory of a partitioned dataset")
        for k, (i, c, m, d) in enumerate(zip(idx, g["cdims"], g["maxdims"], g["dims"])):
            if m and (c == 0 or i >= -(-m // c)):
                rep.bad(key, "", f"index {i} in dimension {k} is outside the grid of maxdims "
                        f"{g['maxdims']} / chunk {g['cdims']}")
                return
        outside = any(i * c >= d for i, c, d in zip(idx, g["cdims"], g["dims"]))
        if outside:
            rep.warn(key, "", f"chunk entirely outside the current extent {g['dims']}")
        if g["size"] is None:
            return              # an invalid type (reported): the bytes cannot be judged
        data = path.read_bytes()
        n = math.prod(g["cdims"])
        try:
            raw = decode_chunk(data, g["filters"], g["size"] or 1, g["vlen"])
        except (ValueError, OSError) as e:
            rep.bad(key, "", f"does not decode: {e}")
            return
        if g["vlen"]:
            walk = vlen_walker(entry[2]["type"])
            pos = 0
            try:
                for _ in range(n):
                    pos = walk(raw, pos)
            except ValueError as e:
                rep.bad(key, "", f"variable-length stream: {e}")
                return
            if pos != len(raw):
                rep.bad(key, "", f"variable-length stream: {len(raw) - pos} bytes after "
                        f"{n} elements")
                return
            cp = entry[2].get("creationProperties") or {}
            if not cp.get("fillValue") and not any(raw):
                self.fill_chunk(key)
            return
        want = n * g["size"]
        if len(raw) != want:
            rep.bad(key, "", f"decodes to {len(raw)} bytes, the chunk is {g['cdims']} x "
                    f"{g['size']} = {want} (§6.1)")
            return
        fill = g["fill"]
        if fill is None:
            return
        a = np.frombuffer(raw, np.uint8).reshape(*g["cdims"], g["size"])
        f = np.frombuffer(fill, np.uint8)
        if (a == f).all():
            self.fill_chunk(key)
            return
        if outside:
            return              # warned above; none of it is in the dataspace
        for k, (i, c, d) in enumerate(zip(idx, g["cdims"], g["dims"])):
            valid = max(0, min(c, d - i * c))
            if valid < c:
                sl = [slice(None)] * len(g["cdims"])
                sl[k] = slice(valid, None)
                if not (a[tuple(sl)] == f).all():
                    rep.bad(key, "", f"elements outside the dataspace (dimension {k} from "
                            f"{i * c + valid}) do not hold the fill value (§6.1)")
                    return

    def fill_chunk(self, key):
        msg = "every element is the fill value: such a chunk need not be stored (§7)"
        (self.rep.bad if self.fill_chunks == "error" else self.rep.warn)(key, "", msg)

    # -- references between objects

    def check_linked(self):
        """§8: a file_uri of this bucket names an object, and the ranges lie inside it."""
        rep, own_used = self.rep, False
        for key, lay in self.linked:
            f = "creationProperties.layout"
            bucket, _, target = lay["file_uri"].removeprefix("s3://").removeprefix(
                "file://").partition("/")
            if bucket != self.bucket.name:
                continue        # another bucket's file: not ours to judge
            own_used |= target == self.own_file
            path = self.bucket / target
            if not target or not path.is_file():
                rep.bad(key, f"{f}.file_uri", f"{lay['file_uri']}: no such object")
                continue
            size = path.stat().st_size
            ranges = []
            if lay.get("class") == "H5D_CONTIGUOUS_REF":
                ranges = [(lay.get("offset"), lay.get("size"))]
            elif lay.get("class") == "H5D_CHUNKED_REF" and isinstance(lay.get("chunks"), dict):
                ranges = [tuple(v) if isinstance(v, list) and len(v) == 2 else (None, None)
                          for v in lay["chunks"].values()]
            for off, n in ranges:
                if not (is_int(off) and is_int(n) and off >= 0 and n >= 0):
                    rep.bad(key, f, f"a range that is not two integers >= 0: {off!r}, {n!r}")
                elif off + n > size:
                    rep.bad(key, f, f"bytes {off}+{n} past the end of {target} ({size} bytes)")
        if self.own_file and not own_used:
            rep.bad(self.own_file, "", "a linked file no layout of the domain links to")

    def check_references(self):
        self.check_linked()
        rep = self.rep
        for key, field, target in self.hard:
            if target not in self.objects:
                rep.bad(key, field, f"hard link to {target}, which is not an object of "
                        "the domain")
        for key, field, target in self.committed:
            if self.objects.get(target, ("",))[0] != "t":
                rep.bad(key, field, f"committed type {target} does not exist in the domain")
        for key, field, target in self.tables:
            if self.objects.get(target, ("",))[0] != "d":
                rep.bad(key, field, f"chunk table {target} is not a dataset of the domain")
        reach, todo = set(), [self.root]
        while todo:
            oid = todo.pop()
            if oid in reach or oid not in self.objects:
                continue
            reach.add(oid)
            links = self.objects[oid][2].get("links")
            if isinstance(links, dict):
                todo += [ln.get("id") for ln in links.values() if isinstance(ln, dict)]
        used = {t for _, _, t in self.tables} | {t for _, _, t in self.committed}
        for oid, (kind, key, _) in sorted(self.objects.items()):
            if oid not in reach and oid not in used:
                rep.warn(key, "", "not reachable from the root group by hard links")


def v1_top_level_keys(bucket, rep):
    """(key, match) of every top-level key of the bucket that looks like a v1 object key; a key
    whose hash is not MD5 of its id is reported."""
    out = []
    for name in sorted(os.listdir(bucket)):
        m = V1_KEY_RE.match(name)
        if not m or not (Path(bucket) / name).is_file():
            continue
        if m.group(1) != v1_key(m.group(2))[:5]:
            rep.bad(name, "", f"the hash is {m.group(1)}, MD5 of the id gives "
                    f"{v1_key(m.group(2))[:5]} (§11)")
            continue
        out.append((name, m))
    return out


def domain_paths(bucket):
    """Every domain or folder of the bucket: '/' + the directory of each .domain.json."""
    out = []
    bucket = Path(bucket)
    for dirpath, dirnames, filenames in os.walk(bucket):
        rel = Path(dirpath).relative_to(bucket)
        if rel == Path("."):
            dirnames[:] = [d for d in dirnames if d != "db"]
        dirnames.sort()
        if ".domain.json" in filenames and rel != Path("."):
            out.append("/" + rel.as_posix())
    return out


def check(bucket, domain=None, fill_chunks="warning"):
    """Report of one domain (path such as /home/u/x.h5) or of every domain of the bucket."""
    if fill_chunks not in ("warning", "error"):
        raise ValueError(fill_chunks)
    rep = Report()
    bucket = Path(bucket)
    if domain is not None:
        domain = "/" + domain.strip("/")
        if not (bucket / domain.lstrip("/") / ".domain.json").is_file():
            rep.bad(domain.lstrip("/") + "/.domain.json", "", "no such domain")
            return rep
        domains = [domain]
    else:
        domains = domain_paths(bucket)
    roots = {}
    for dom in domains:
        root = DomainChecker(bucket, dom, rep, fill_chunks).run()
        if root is not None:
            if root in roots:
                rep.warn(dom.lstrip("/") + "/.domain.json", "root",
                         f"{root} is also the root of {roots[root]}")
            roots[root] = dom
            parent = Path(dom).parent
            if parent != Path("/") and not (bucket / str(parent).lstrip("/") /
                                            ".domain.json").is_file():
                rep.warn(dom.lstrip("/") + "/.domain.json", "",
                         f"the parent folder {parent} has no .domain.json (§10.1)")
    return rep


def problems(bucket, domain=None, fill_chunks="warning"):
    return check(bucket, domain, fill_chunks).problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bucket", help="the bucket directory (POSIX)")
    ap.add_argument("domain", nargs="?", help="one domain path (default: every domain)")
    ap.add_argument("--fill-chunks", choices=("warning", "error"), default="warning",
                    help="how to report chunks that hold only the fill value")
    ap.add_argument("-q", "--quiet", action="store_true", help="no warnings")
    args = ap.parse_args(argv)
    rep = check(args.bucket, args.domain, args.fill_chunks)
    for p in rep.problems:
        print(f"PROBLEM {p}")
    if not args.quiet:
        for w in rep.warnings:
            print(f"warning {w}")
    print(f"{len(rep.problems)} problems, {len(rep.warnings)} warnings")
    return 1 if rep.problems else 0


if __name__ == "__main__":
    sys.exit(main())
