#!/usr/bin/python3
"""Convert an HSDS schema v2 bucket directory into the schema v1 bucket HSDS would have written
for the same domains (shared/spec/hsds-format.md §11; §1-§2 for v2).

    /usr/bin/python3 tools/v2_to_v1.py SRC_BUCKET DST_BUCKET [--listing FILE]

    e.g. tools/v2_to_v1.py tests/data/hsds-v2/hsdstest tests/data/hsds-v1/hsdstest \
             --listing tests/data/hsds-v1/LISTING.txt

What changes:
- every object id "<c>-<8-8-4-6-6 hex>" becomes "<c>-<uuid1-shaped 8-4-4-4-12 hex>", derived from
  SHA-256 of the v2 id (so reruns give identical output, and one v2 id always gets one v1 id;
  the version nibble is 1 and the variant bits 10, as uuid.uuid1() makes them);
- every object and chunk is stored at the top level under "<first 5 hex of MD5(id)>-<id>",
  chunk ids being "c-" + the v1 dataset id without "d-" + "_" + index string (a partition N
  makes it "c<N>-..."); nothing under db/ remains and no .info.json is written (v1 has none);
- every JSON string that is an id or an HDF5 object reference "groups/<id>", "datasets/<id>",
  "datatypes/<id>" (a domain's root, "id", "root", hard links, chunk_table, attribute values)
  is rewritten; the JSON keeps HSDS's serialisation (json.dumps defaults) byte for byte;
- chunks of uncompressed datasets whose type holds references get their ids rewritten in
  place (a v1 id is exactly as long as a v2 id);
- every other key (domain .domain.json files, linked HDF5 files) is copied, with the ids in
  .domain.json rewritten.

Anything the script does not understand stops it with an error (an id-like string in an
unexpected place, references in a compressed chunk, a key of the db/ tree it cannot parse), so
a v1 bucket it writes holds no v2 id. Standard library only.
"""
import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

V2_HEX = r"[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{6}-[0-9a-f]{6}"
V2_ID = re.compile(rf"[gdt]-{V2_HEX}")
V2_ANYWHERE = re.compile(V2_HEX)
V2_ANYWHERE_BYTES = re.compile(rb"([gdt])-(" + V2_HEX.encode() + rb")")
REFERENCE = re.compile(rf"^(?:(groups|datasets|datatypes)/)?({V2_ID.pattern})$")
REF_COLLECTION = {"groups": "g", "datasets": "d", "datatypes": "t"}
JSON_NAME = {".group.json": "g", ".dataset.json": "d", ".datatype.json": "t"}
DOMAIN_JSON = ".domain.json"


class Unsupported(Exception):
    pass


# ---- ids and keys ----

def v1_id(v2):
    """The v1 id standing for v2 id v2: same class, a uuid1-shaped body from SHA-256."""
    if not V2_ID.fullmatch(v2):
        raise Unsupported(f"{v2!r} is not a v2 object id")
    h = hashlib.sha256(b"h5osfs v2_to_v1 " + v2.encode()).hexdigest()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"{v2[0]}-{h[0:8]}-{h[8:12]}-1{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def v1_chunk_id(v2_dset, index, partition=None):
    body = v1_id(v2_dset)[2:]
    return f"c{'' if partition is None else partition}-{body}_{index}"


def v1_key(obj_id):
    """§11: <first 5 lowercase hex of MD5(UTF-8 of the whole id)>-<id>, at the top level."""
    return hashlib.md5(obj_id.encode("utf-8")).hexdigest()[:5] + "-" + obj_id


def rot(digit):
    return "%x" % ((int(digit, 16) + 8) % 16)


def v2_id_of_key(key):
    """(class, id, chunk index or None, partition or None) of a key of the db/ tree (§2.1)."""
    parts = key.split("/")
    if parts[0] != "db" or len(parts) < 3 or not re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{8}",
                                                              parts[1]):
        raise Unsupported(f"{key}: not a v2 object key")
    ab = parts[1]
    if len(parts) == 3:
        if parts[2] == ".info.json":
            return "info", None, None, None
        if parts[2] != ".group.json":
            raise Unsupported(f"{key}: not a v2 object key")
        hexd = ab.replace("-", "")
        tail = "".join(rot(d) for d in hexd)
        return "g", f"g-{ab}-{tail[0:4]}-{tail[4:10]}-{tail[10:16]}", None, None
    coll, cde = parts[2], parts[3]
    if coll not in ("g", "d", "t") or not re.fullmatch(r"[0-9a-f]{4}-[0-9a-f]{6}-[0-9a-f]{6}",
                                                       cde):
        raise Unsupported(f"{key}: not a v2 object key")
    obj = f"{coll}-{ab}-{cde}"
    if len(parts) == 5 and JSON_NAME.get(parts[4]) == coll:
        return coll, obj, None, None
    if coll == "d" and len(parts) == 5 and re.fullmatch(r"\d+(_\d+)*", parts[4]):
        return "c", obj, parts[4], None
    if (coll == "d" and len(parts) == 6 and re.fullmatch(r"p\d+", parts[4]) and
            re.fullmatch(r"\d+(_\d+)*", parts[5])):
        return "c", obj, parts[5], int(parts[4][1:])
    raise Unsupported(f"{key}: not a v2 object key")


# ---- JSON ----

def rewrite_json(value, where):
    """value with every id and reference rewritten; any other id-like text is an error."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if V2_ANYWHERE.search(k):
                raise Unsupported(f"{where}: an id in a member name: {k!r}")
            out[k] = rewrite_json(v, where)
        return out
    if isinstance(value, list):
        return [rewrite_json(v, where) for v in value]
    if isinstance(value, str):
        m = REFERENCE.fullmatch(value)
        if m:
            coll, obj = m.groups()
            if coll and REF_COLLECTION[coll] != obj[0]:
                raise Unsupported(f"{where}: {value!r} names an object of another class")
            return (f"{coll}/" if coll else "") + v1_id(obj)
        if V2_ANYWHERE.search(value):
            raise Unsupported(f"{where}: an id inside {value!r}")
    return value


def dumps(obj):
    """HSDS's serialisation (storUtil.putStorJSONObj: json.dumps with its defaults)."""
    return json.dumps(obj).encode("utf-8")


def convert_json(data, where):
    doc = json.loads(data)
    if dumps(doc) != data:
        raise Unsupported(f"{where}: not in HSDS's serialisation (rewriting would change more "
                          "than ids)")
    return doc, dumps(rewrite_json(doc, where))


def has_reference(type_json):
    return "H5T_REFERENCE" in json.dumps(type_json)


def is_compressed(dset_doc):
    return bool(dset_doc.get("creationProperties", {}).get("filters"))


def rewrite_chunk(data, dset_doc, where):
    """The chunk's bytes with its reference values' ids rewritten (only raw chunks of
    datasets whose type holds references can have them)."""
    if not V2_ANYWHERE_BYTES.search(data):
        return data
    if not has_reference(dset_doc.get("type")):
        raise Unsupported(f"{where}: id-like bytes in a chunk of a type without references")
    if is_compressed(dset_doc):
        raise Unsupported(f"{where}: references in a compressed chunk")
    return V2_ANYWHERE_BYTES.sub(
        lambda m: v1_id(m.group(0).decode()).encode(), data)


# ---- the bucket ----

def bucket_files(src):
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if not p.is_file() or p.is_symlink():
                raise Unsupported(f"{p}: not a regular file")
            out.append(p.relative_to(src).as_posix())
    return sorted(out)


class Converter:
    def __init__(self, src):
        self.src = Path(src)
        self.out = {}           # v1 key -> bytes
        self.origin = {}        # v1 key -> v2 key
        self.docs = {}          # v2 id -> its JSON (v2)
        self.v1_docs = {}       # v1 id -> its JSON (v1)

    def put(self, key, data, v2_key):
        if key in self.out:
            raise Unsupported(f"{v2_key} and {self.origin[key]} both map to {key}")
        self.out[key] = data
        self.origin[key] = v2_key

    def run(self):
        keys = bucket_files(self.src)
        chunks = []
        for key in keys:
            data = (self.src / key).read_bytes()
            if not key.startswith("db/"):
                if key.endswith("/" + DOMAIN_JSON) or key == DOMAIN_JSON:
                    _, data = convert_json(data, key)
                elif V2_ANYWHERE_BYTES.search(data) and key.endswith(".json"):
                    raise Unsupported(f"{key}: ids in a key this script does not know")
                self.put(key, data, key)
                continue
            cls, obj, index, partition = v2_id_of_key(key)
            if cls == "info":
                continue                # scan summaries: v1 has none
            if cls == "c":
                chunks.append((key, obj, index, partition, data))
                continue
            doc, out = convert_json(data, key)
            if doc.get("id") != obj:
                raise Unsupported(f"{key}: holds id {doc.get('id')!r}, the key says {obj}")
            self.docs[obj] = doc
            self.v1_docs[v1_id(obj)] = json.loads(out)
            self.put(v1_key(v1_id(obj)), out, key)
        for key, dset, index, partition, data in chunks:
            if dset not in self.docs:
                raise Unsupported(f"{key}: a chunk of no dataset")
            data = rewrite_chunk(data, self.docs[dset], key)
            self.put(v1_key(v1_chunk_id(dset, index, partition)), data, key)
        return self.out

    def write(self, dst):
        dst = Path(dst)
        for key, data in self.out.items():
            p = dst / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    # ---- the listing ----

    def names(self):
        """v1 id -> "<domain>:<path>" (hard links followed from every domain's root, first
        path found breadth first, links in name order)."""
        names = {}
        for key in sorted(self.out):
            if not key.endswith("/" + DOMAIN_JSON):
                continue
            root = json.loads(self.out[key]).get("root")
            if not root:
                continue
            domain = "/" + key[:-len("/" + DOMAIN_JSON)]
            names.setdefault(root, f"{domain}:/")
            queue = [("", root)]
            while queue:
                path, gid = queue.pop(0)
                links = self.v1_docs.get(gid, {}).get("links", {})
                for name in sorted(links):
                    target = links[name].get("id")
                    if links[name].get("class", "H5L_TYPE_HARD") != "H5L_TYPE_HARD" or \
                            not target or target in names:
                        continue
                    names[target] = f"{domain}:{path}/{name}"
                    if target.startswith("g-"):
                        queue.append((f"{path}/{name}", target))
        for obj, doc in self.v1_docs.items():   # chunk tables are named by their dataset
            table = (doc.get("layout", {}).get("chunk_table") or doc.get(
                "creationProperties", {}).get("layout", {}).get("chunk_table"))
            if table and obj in names:
                names.setdefault(table, f"{names[obj]} (its chunk_table)")
        return names

    def listing(self):
        names = self.names()
        kinds = {"g": "GROUP", "d": "DATASET", "t": "DATATYPE"}
        lines = [f"HSDS schema v1 bucket made by tools/v2_to_v1.py from {self.src.name}/ "
                 "(sizes in bytes)", "=" * 78]
        for key in sorted(self.out):
            size = len(self.out[key])
            v2 = self.origin[key]
            m = re.fullmatch(r"[0-9a-f]{5}-(([gdtc])\d*-([0-9a-f-]{36}))(?:_(\S+))?", key)
            if not m:
                what = "DOMAIN" if key.endswith(DOMAIN_JSON) else "other"
                if what == "DOMAIN":
                    root = json.loads(self.out[key]).get("root")
                    what = f"DOMAIN root={root}" if root else "FOLDER"
                lines.append(f"{key}  [{size}]  # {what}")
                continue
            cls = m.group(2)
            if cls == "c":
                dset = "d-" + m.group(3)
                lines.append(f"{key}  [{size}]  # CHUNK {m.group(4)} of "
                             f"{names.get(dset, dset)}  (was {v2})")
            else:
                obj = m.group(1)
                lines.append(f"{key}  [{size}]  # {kinds[cls]} {names.get(obj, '(unlinked)')}"
                             f"  (was {v2})")
        return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="the v2 bucket directory")
    ap.add_argument("dst", help="the v1 bucket directory to make (must not exist)")
    ap.add_argument("--listing", help="also write an annotated listing of the v1 bucket here")
    args = ap.parse_args(argv)
    if os.path.exists(args.dst):
        print(f"{args.dst}: exists; remove it first", file=sys.stderr)
        return 2
    conv = Converter(args.src)
    try:
        conv.run()
    except Unsupported as e:
        print(f"v2_to_v1: {e}", file=sys.stderr)
        return 1
    conv.write(args.dst)
    if args.listing:
        Path(args.listing).write_text(conv.listing())
    return 0


if __name__ == "__main__":
    sys.exit(main())
