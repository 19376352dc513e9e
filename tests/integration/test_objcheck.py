"""objcheck.py, the bucket checker the write-path tests rely on: it must find nothing wrong with
the bucket the real HSDS wrote (tests/data/hsds-v2/hsdstest), and it must find each defect of a
copy of that bucket in which one thing was broken. No mount is needed."""
import json
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import objcheck
from conftest import BUCKET

HOME = "home/test_user1"
CHECKER = Path(__file__).resolve().parent / "objcheck.py"


def domain_root(bucket, domain):
    return json.loads((bucket / domain / ".domain.json").read_text())["root"]


def obj_key(bucket, domain, h5path):
    """The key (a Path in the bucket) of the JSON object at h5path of a domain, by its links."""
    root = domain_root(bucket, domain)
    base = bucket / "db" / root[2:19]
    key, obj_id = base / ".group.json", root
    for name in [p for p in h5path.split("/") if p]:
        link = json.loads(key.read_text())["links"][name]
        obj_id = link["id"]
        kind = obj_id[0]
        key = base / kind / obj_id[20:] / {"g": ".group.json", "d": ".dataset.json",
                                           "t": ".datatype.json"}[kind]
    return key


def rel(bucket, path):
    return path.relative_to(bucket).as_posix()


def load(path):
    return json.loads(path.read_text())


def dump(path, obj):
    path.write_text(json.dumps(obj))


def assert_flagged(bucket, key, pattern, **kw):
    """objcheck reports a problem naming key whose text matches pattern."""
    probs = objcheck.problems(bucket, **kw)
    hits = [p for p in probs if p.startswith(key + ":") and re.search(pattern, p)]
    assert hits, f"no problem for {key} matching {pattern!r}; problems: {probs}"
    return probs


# ---- the real HSDS bucket is clean ----

def test_fixture_bucket_has_no_problems():
    rep = objcheck.check(BUCKET)
    assert rep.problems == []
    # HSDS stored two chunks that hold only the fill value (a NaN-filled dataset that was
    # never written, and an all-zero one): allowed for HSDS, so warnings only
    assert all("fill value" in w for w in rep.warnings), rep.warnings
    assert len(rep.warnings) == 2


@pytest.mark.parametrize("domain", objcheck.domain_paths(BUCKET))
def test_each_fixture_domain_alone(domain):
    assert objcheck.problems(BUCKET, domain) == []


def test_cli_exit_status(bucket_copy):
    ok = subprocess.run([sys.executable, str(CHECKER), str(BUCKET), f"/{HOME}/sample1.h5"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().endswith("0 problems, 0 warnings")
    key = obj_key(bucket_copy, f"{HOME}/sample1.h5", "/")
    g = load(key)
    del g["created"]
    dump(key, g)
    bad = subprocess.run([sys.executable, str(CHECKER), str(bucket_copy)],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert f"PROBLEM {rel(bucket_copy, key)}: created: required member missing" in bad.stdout


def test_fill_chunks_as_errors():
    probs = objcheck.problems(BUCKET, fill_chunks="error")
    assert len(probs) == 2 and all("fill value" in p for p in probs)


# ---- one defect each ----

S1, S2, S3 = f"{HOME}/sample1.h5", f"{HOME}/sample2.h5", f"{HOME}/sample3.h5"


def test_domain_json_missing_owner(bucket_copy):
    p = bucket_copy / S1 / ".domain.json"
    d = load(p)
    del d["owner"]
    dump(p, d)
    assert_flagged(bucket_copy, f"{S1}/.domain.json", "owner: required member missing")


def test_domain_json_member_order(bucket_copy):
    p = bucket_copy / S1 / ".domain.json"
    d = load(p)
    dump(p, {"owner": d["owner"], "root": d["root"], **d})
    assert_flagged(bucket_copy, f"{S1}/.domain.json", "member order")


def test_acl_members_out_of_order_and_not_boolean(bucket_copy):
    p = bucket_copy / HOME / ".domain.json"
    d = load(p)
    user = next(iter(d["acls"]))
    acl = d["acls"][user]
    d["acls"][user] = {"read": acl["read"], **acl}
    dump(p, d)
    assert_flagged(bucket_copy, f"{HOME}/.domain.json", rf"acls\['{user}'\]: members")
    d["acls"][user] = dict(acl, update=1)
    dump(p, d)
    assert_flagged(bucket_copy, f"{HOME}/.domain.json", r"\.update: not a boolean")


def test_root_id_not_rotation_valid(bucket_copy):
    p = bucket_copy / S1 / ".domain.json"
    d = load(p)
    r = d["root"]
    d["root"] = r[:-1] + ("0" if r[-1] != "0" else "1")
    dump(p, d)
    assert_flagged(bucket_copy, f"{S1}/.domain.json", "root: not a v2 root group id")


def test_uppercase_id(bucket_copy):
    key = obj_key(bucket_copy, S2, "/")
    g = load(key)
    g["links"]["bool"]["id"] = g["links"]["bool"]["id"].upper().replace("D-", "d-", 1)
    dump(key, g)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"links\['bool'\]\.id: not a v2")


def test_id_does_not_match_key(bucket_copy):
    key = obj_key(bucket_copy, S2, "/compound")
    d = load(key)
    d["id"] = d["id"][:-1] + ("0" if d["id"][-1] != "0" else "1")
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "id: .* the key says")


def test_wrong_root(bucket_copy):
    key = obj_key(bucket_copy, S2, "/compound")
    d = load(key)
    d["root"] = domain_root(bucket_copy, S3)
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "root: .*the domain's root is")


def test_dataset_member_missing(bucket_copy):
    key = obj_key(bucket_copy, S2, "/compound")
    d = load(key)
    del d["attributes"]
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "attributes: required member missing")


def test_dataset_member_order(bucket_copy):
    key = obj_key(bucket_copy, S2, "/compound")
    d = load(key)
    d = {"shape": d["shape"], **{k: v for k, v in d.items() if k != "shape"}}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"\(members\): member order")


def test_group_member_order(bucket_copy):
    key = obj_key(bucket_copy, S1, "/")
    g = load(key)
    g = {k: g[k] for k in ("id", "root", "created", "lastModified", "attributes", "links")}
    dump(key, g)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "member order")


def test_attribute_member_missing_and_order(bucket_copy):
    key = obj_key(bucket_copy, S2, "/chunked_f32_gzip")
    d = load(key)
    name = next(iter(d["attributes"]))
    a = d["attributes"][name]
    d["attributes"][name] = {k: a[k] for k in ("type", "shape", "value")}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key),
                   rf"attributes\['{name}'\]\.created: required member missing")
    d["attributes"][name] = {k: a[k] for k in ("shape", "type", "value", "created")}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), rf"attributes\['{name}'\]: member order")


def test_attribute_value_of_the_wrong_shape(bucket_copy):
    key = obj_key(bucket_copy, S1, "/")
    g = load(key)
    name, a = next((n, a) for n, a in g["attributes"].items()
                   if a["shape"]["class"] == "H5S_SIMPLE" and a["value"])
    a["value"] = a["value"][:-1]
    dump(key, g)
    assert_flagged(bucket_copy, rel(bucket_copy, key), rf"attributes\['{name}'\]\.value: ")


def test_link_members(bucket_copy):
    key = obj_key(bucket_copy, S1, "/")
    g = load(key)
    name, link = next((n, ln) for n, ln in g["links"].items() if ln["class"] == "H5L_TYPE_HARD")
    g["links"][name] = {"class": link["class"], "id": link["id"], "created": link["created"]}
    dump(key, g)
    assert_flagged(bucket_copy, rel(bucket_copy, key), rf"links\['{name}'\]: member order")
    del g["links"][name]["created"]
    dump(key, g)
    assert_flagged(bucket_copy, rel(bucket_copy, key),
                   rf"links\['{name}'\]\.created: required member missing")


def test_external_link_uses_domain_instead_of_h5domain(bucket_copy):
    for key in (bucket_copy / "db").rglob(".group.json"):
        g = load(key)
        ext = [n for n, ln in g["links"].items() if ln["class"] == "H5L_TYPE_EXTERNAL"]
        if ext:
            break
    link = g["links"][ext[0]]
    g["links"][ext[0]] = {"h5path": link["h5path"], "domain": link["h5domain"],
                          "class": link["class"], "created": link["created"]}
    dump(key, g)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"\.h5domain: required member missing")


def test_dangling_hard_link(bucket_copy):
    key = obj_key(bucket_copy, S2, "/")
    g = load(key)
    target = g["links"]["compound"]["id"]
    g["links"]["compound"]["id"] = target[:-6] + "abcdef"
    dump(key, g)
    probs = assert_flagged(bucket_copy, rel(bucket_copy, key),
                           r"links\['compound'\]\.id: hard link to .* not an object")
    assert not any("compound" in p and "reachable" in p for p in probs)   # that's a warning
    rep = objcheck.check(bucket_copy)
    assert any("not reachable from the root group" in w for w in rep.warnings)


def test_invalid_type(bucket_copy):
    key = obj_key(bucket_copy, S2, "/compound")
    d = load(key)
    d["type"]["fields"][0]["type"] = {"class": "H5T_INTEGER", "base": "H5T_STD_I24LE"}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"type\.fields\[0\]\.type\.base")
    d = load(key)
    d["type"] = {"class": "H5T_ENUM", "base": "H5T_STD_I8LE", "mapping": {"A": 0}}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "enum base must be an H5T_INTEGER object")


def test_top_level_type_as_bare_name(bucket_copy):
    key = obj_key(bucket_copy, S3, "/sub/small_u16")
    d = load(key)
    d["type"] = d["type"]["base"]
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "type: top-level type is the bare name")


def test_layout_not_chunked_or_wrong_rank(bucket_copy):
    key = obj_key(bucket_copy, S3, "/ramp_i32")
    d = load(key)
    d["layout"] = {"class": "H5D_CONTIGUOUS"}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "layout.class: top-level layout must be")
    d["layout"] = {"class": "H5D_CHUNKED", "dims": [256]}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "layout.dims: must be 2 integers")
    d["layout"] = {"class": "H5D_CHUNKED", "dims": [256.0, 256]}
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "layout.dims: must be 2 integers")


def test_shape_maxdims_below_dims(bucket_copy):
    key = obj_key(bucket_copy, S3, "/ramp_i32")
    d = load(key)
    d["shape"]["maxdims"] = [256, 100]
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"shape\.maxdims\[1\]: 100 < dims")


def test_filter_not_normalised(bucket_copy):
    key = obj_key(bucket_copy, S2, "/chunked_f32_gzip")
    d = load(key)
    filters = d["creationProperties"]["filters"]
    del filters[0]["name"]
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"filters\[0\]\.name: missing")
    d["creationProperties"]["filters"] = ["H5Z_FILTER_DEFLATE"]
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"filters\[0\]: not normalised")
    d["creationProperties"]["filters"] = [{"class": "H5Z_FILTER_DEFLATE", "id": 2,
                                           "name": "gzip"}]
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), r"filters\[0\]\.id: 2, the table says 1")


@pytest.mark.parametrize("style", ["indent", "compact", "sorted", "ascii", "float", "newline"])
def test_not_json_dumps_bytes(bucket_copy, style):
    """Bytes that parse to the same value but are not what json.dumps writes (sorted keys
    parse to another order: that is a member-order problem)."""
    key = obj_key(bucket_copy, S2, "/chunked_f32_gzip")
    d = load(key)
    text = {"indent": lambda: json.dumps(d, indent=1),
            "compact": lambda: json.dumps(d, separators=(",", ":")),
            "sorted": lambda: json.dumps(d, sort_keys=True),
            "ascii": lambda: json.dumps(dict(d, attributes={"é": {}})).replace(r"\u00e9", "é"),
            "float": lambda: json.dumps(d).replace(repr(d["created"]),
                                                   f"{d['created']:.17e}", 1),
            "newline": lambda: json.dumps(d) + "\n"}[style]()
    key.write_bytes(text.encode())
    assert_flagged(bucket_copy, rel(bucket_copy, key),
                   "member order" if style == "sorted" else r"not json\.dumps\(\)")


def test_nan_tokens_are_json_dumps(bucket_copy):
    """The fixture's NaN fill value is written as the bare token NaN: that is json.dumps."""
    hits = [p for p in (BUCKET / "db").rglob(".dataset.json") if b"NaN" in p.read_bytes()]
    assert hits
    assert objcheck.problems(BUCKET) == []


def test_zero_byte_json(bucket_copy):
    key = obj_key(bucket_copy, S3, "/sub")
    key.write_bytes(b"")
    assert_flagged(bucket_copy, rel(bucket_copy, key), "0-byte JSON")


def test_duplicate_member(bucket_copy):
    key = obj_key(bucket_copy, S3, "/sub")
    text = key.read_text()
    key.write_text(text[:-1] + ', "attributes": {}}')
    assert_flagged(bucket_copy, rel(bucket_copy, key), "attributes: duplicate member")


def chunk_of(bucket, domain, h5path, index):
    return obj_key(bucket, domain, h5path).parent / index


def test_truncated_blosc_chunk(bucket_copy):
    c = chunk_of(bucket_copy, f"{HOME}/sample3_z_gzip.h5", "/ramp_i32", "0_0")
    c.write_bytes(c.read_bytes()[:-100])
    assert_flagged(bucket_copy, rel(bucket_copy, c), "does not decode: blosc frame says")


def test_truncated_raw_chunk(bucket_copy):
    c = chunk_of(bucket_copy, S3, "/ramp_i32", "0_0")
    c.write_bytes(c.read_bytes()[:-4])
    assert_flagged(bucket_copy, rel(bucket_copy, c), r"decodes to 262140 bytes, .* = 262144")


def test_short_blosc_frame_of_a_valid_encoding(bucket_copy):
    """A well-formed blosc frame of the wrong length (an edge chunk written short, §6.1)."""
    import ctypes
    c = chunk_of(bucket_copy, f"{HOME}/sample3_z_lz4.h5", "/sub/small_u16", "0")
    raw = objcheck.blosc_decode(c.read_bytes())[:-2]
    lib = objcheck.blosc_lib()
    lib.blosc_compress.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
                                   ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t]
    out = ctypes.create_string_buffer(len(raw) + 64)
    n = lib.blosc_compress(5, 0, 1, len(raw), raw, out, len(out))
    assert n > 0
    c.write_bytes(out.raw[:n])
    assert_flagged(bucket_copy, rel(bucket_copy, c), r"decodes to 1998 bytes")


def test_zlib_stream_fallback(bucket_copy):
    """A gzip dataset's chunk may be a bare zlib stream (what HDF5's deflate stores, §6.5)."""
    c = chunk_of(bucket_copy, f"{HOME}/sample3_z_gzip.h5", "/ramp_i32", "0_0")
    raw = objcheck.blosc_decode(c.read_bytes())
    c.write_bytes(zlib.compress(raw, 4))
    assert objcheck.problems(bucket_copy) == []
    c.write_bytes(zlib.compress(raw, 4)[:-10])
    assert_flagged(bucket_copy, rel(bucket_copy, c), "zlib")
    c.write_bytes(zlib.compress(raw[:-8], 4))
    assert_flagged(bucket_copy, rel(bucket_copy, c), r"decodes to 262136 bytes")


def test_lz4_chunk_that_is_not_blosc(bucket_copy):
    c = chunk_of(bucket_copy, f"{HOME}/sample3_z_lz4.h5", "/sub/small_u16", "0")
    c.write_bytes(b"\x01" + c.read_bytes()[1:])        # blosc version byte 1: not sniffed
    assert_flagged(bucket_copy, rel(bucket_copy, c), "not a blosc frame, and the lz4")


def test_chunk_outside_the_grid(bucket_copy):
    c = chunk_of(bucket_copy, S3, "/ramp_i32", "0_0")
    shutil.copy(c, c.parent / "1_0")
    assert_flagged(bucket_copy, rel(bucket_copy, c.parent / "1_0"), "outside the grid")
    (c.parent / "1_0").unlink()
    shutil.copy(c, c.parent / "0")
    assert_flagged(bucket_copy, rel(bucket_copy, c.parent / "0"), "rank 1 for a rank-2")
    (c.parent / "0").unlink()
    shutil.copy(c, c.parent / "00_0")
    assert_flagged(bucket_copy, rel(bucket_copy, c.parent / "00_0"), "not decimal numbers")


def test_chunk_beyond_the_extent_of_an_unlimited_dataset_is_a_warning(bucket_copy):
    c = chunk_of(bucket_copy, S2, "/extendible", "0_0")
    shutil.copy(c, c.parent / "5_0")
    rep = objcheck.check(bucket_copy)
    assert rep.problems == []
    assert any("5_0: chunk entirely outside the current extent" in w for w in rep.warnings)


def test_chunk_of_a_dataset_that_does_not_exist(bucket_copy):
    key = obj_key(bucket_copy, S3, "/ramp_i32")
    key.unlink()
    assert_flagged(bucket_copy, rel(bucket_copy, key.parent / "0_0"),
                   "chunk of a dataset that does not exist")


def test_stray_key_in_the_domain_prefix(bucket_copy):
    root = domain_root(bucket_copy, S3)
    stray = bucket_copy / "db" / root[2:19] / "g" / "notes.txt"
    stray.write_text("x")
    assert_flagged(bucket_copy, rel(bucket_copy, stray), "not a key of the v2 layout")


def test_edge_of_chunk_must_hold_the_fill_value(bucket_copy):
    """/extendible is [25, 4] in chunks of [32768, 4]: rows 25... are outside the dataspace."""
    c = chunk_of(bucket_copy, S2, "/extendible", "0_0")
    data = bytearray(c.read_bytes())
    data[30 * 32:30 * 32 + 8] = b"\x01" * 8
    c.write_bytes(bytes(data))
    assert_flagged(bucket_copy, rel(bucket_copy, c), r"outside the dataspace .* fill value")


def test_vlen_stream_damage(bucket_copy):
    key = obj_key(bucket_copy, S2, "/vlen_str")
    c = key.parent / "0"
    data = c.read_bytes()
    c.write_bytes(data[:-1])
    assert_flagged(bucket_copy, rel(bucket_copy, c), "variable-length stream")
    c.write_bytes(data + b"\0")
    assert_flagged(bucket_copy, rel(bucket_copy, c), "1 bytes after 6 elements")
    c.write_bytes(b"\xff\xff\xff\xff" + data[4:])
    assert_flagged(bucket_copy, rel(bucket_copy, c), "vlen count -1")


def test_fill_value_that_does_not_fit_the_type(bucket_copy):
    for key in (bucket_copy / "db").rglob(".dataset.json"):
        d = load(key)
        if d.get("creationProperties", {}).get("fillValue") == -999:
            break
    d["creationProperties"]["fillValue"] = "lots"
    dump(key, d)
    assert_flagged(bucket_copy, rel(bucket_copy, key), "fillValue: does not fit the type")


def test_folder_with_root_of_nothing(bucket_copy):
    p = bucket_copy / S3 / ".domain.json"
    root = domain_root(bucket_copy, S3)
    shutil.rmtree(bucket_copy / "db" / root[2:19])
    assert_flagged(bucket_copy, f"db/{root[2:19]}/.group.json", "root group .* is missing")
    assert p.exists()


def test_one_domain_only(bucket_copy):
    key = obj_key(bucket_copy, S1, "/")
    g = load(key)
    del g["links"]
    dump(key, g)
    assert objcheck.problems(bucket_copy, f"/{S2}") == []
    assert objcheck.problems(bucket_copy, S1)
    assert objcheck.problems(bucket_copy, "/home/nobody.h5") == [
        "home/nobody.h5/.domain.json: no such domain"]


def test_bitshuffle_chunks(bucket_copy):
    """Bitshuffle+LZ4 framing (§6.6), checked against Debian's bitshuffle module."""
    bitshuffle = pytest.importorskip("bitshuffle")
    import numpy as np
    key = obj_key(bucket_copy, S3, "/ramp_i32")
    d = load(key)
    d["creationProperties"]["filters"] = [{"class": "H5Z_FILTER_BITSHUFFLE", "id": 32008,
                                           "name": "bitshuffle"}]
    dump(key, d)
    c = key.parent / "0_0"
    arr = np.frombuffer(c.read_bytes(), "<i4")
    framed = (arr.nbytes.to_bytes(8, "big") + (2048 * 4).to_bytes(4, "big") +
              bitshuffle.compress_lz4(arr, 2048).tobytes())
    c.write_bytes(framed)
    rep = objcheck.check(bucket_copy)
    assert rep.problems == []
    assert any("bitshuffle: served by HSDS but refused" in w for w in rep.warnings)
    c.write_bytes(framed[:-3])
    assert_flagged(bucket_copy, rel(bucket_copy, c), "does not decode")
    c.write_bytes(framed[:8] + (2048 * 8).to_bytes(4, "big") + framed[12:])
    assert_flagged(bucket_copy, rel(bucket_copy, c), "does not decode")
