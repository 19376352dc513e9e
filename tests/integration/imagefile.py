"""Read and write h5osfs's kept image files (src/image/image_file.c), to forge them in tests.

A local file in cache_dir/images/ is the raw encoding; the copy in the bucket
(db/A-B/.h5osfs-image) is that encoding deflated behind "H5OSFSZ1" and the raw length. decode()
and encode() round-trip every byte, so a test can change one field of a genuine image and keep
its stamp: exactly what someone who can write the bucket can do.

The dataset's codec is kept as opaque bytes (struct codec_spec as the daemon lays it out), and
so are the 32-byte ref_piece structs, read as (chunk, off, size, uri, sub)."""
import struct
import zlib

MAGIC = b"H5OSFSIM"
SHARED_MAGIC = b"H5OSFSZ1"
MAX_RANK = 32
CODEC_BYTES = 48            # sizeof(struct codec_spec) on x86-64 and aarch64 (LP64)
PIECE = struct.Struct("<QQIII4x")
SEGMENT_BYTES, SEGMENT_CHUNK = 1, 2
HSDS, POISON, REF_CONTIG, REF_PIECES = range(4)


class _Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        assert self.at + n <= len(self.data), "truncated image"
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def str(self):
        n = self.u64()
        return None if n == 0 else self.take(n)[:-1].decode()


def _dataset(r):
    d = {"id": r.str(), "path": r.str(), "key_prefix": r.str(), "origin": r.u64(),
         "rank": r.u64(), "partition_count": r.u64()}
    for name in ("dims", "chunk_dims", "grid", "sub_dims"):
        d[name] = [0] * MAX_RANK
    for k in range(MAX_RANK):
        for name in ("dims", "chunk_dims", "grid", "sub_dims"):
            d[name][k] = r.u64()
    d["itemsize"], d["chunk_bytes"] = r.u64(), r.u64()
    d["codec"] = r.take(CODEC_BYTES)
    n = r.u64()
    d["fill"] = r.take(n) if n else None
    d["uris"] = [r.str() for _ in range(r.u64())]
    d["contig_off"], d["contig_size"] = r.u64(), r.u64()
    n = r.u64()
    d["pieces"] = [PIECE.unpack(r.take(PIECE.size)) for _ in range(n)]
    d["n_sub"] = r.u64()
    d["pooled"] = r.u64()      # format 2: its pieces are whole pool objects
    d["kept_file"], d["kept_etag"] = r.str(), r.str()   # format 3: a version's pool file
    return d


def decode(raw):
    """The fields of a raw (local) image file, as a dict."""
    r = _Reader(raw)
    assert r.take(8) == MAGIC
    img = {"format": r.u64(), "stamp": r.take(32), "size": r.u64(), "segments": []}
    for _ in range(r.u64()):
        s = {"off": r.u64(), "len": r.u64(), "kind": r.u64(), "dset": r.u64()}
        if s["kind"] == SEGMENT_BYTES:
            s["bytes"] = r.take(s["len"])
        else:
            s["chunk"] = r.u64()
        img["segments"].append(s)
    img["datasets"] = [_dataset(r) for _ in range(r.u64())]
    img["objects"] = [(r.u64(), r.str()) for _ in range(r.u64())]
    img["omissions"] = [(r.u64(), r.str(), r.str(), r.str(), r.str()) for _ in range(r.u64())]
    assert r.at == len(raw), "bytes after the image"
    return img


class _Writer:
    def __init__(self):
        self.parts = []

    def u64(self, v):
        self.parts.append(struct.pack("<Q", v))

    def str(self, s):
        if s is None:
            self.u64(0)
        else:
            b = s.encode() + b"\0"
            self.u64(len(b))
            self.parts.append(b)

    def raw(self, b):
        self.parts.append(b)


def encode(img):
    """The raw bytes of img (a dict from decode, maybe changed)."""
    w = _Writer()
    w.raw(MAGIC)
    w.u64(img["format"])
    w.raw(img["stamp"])
    w.u64(img["size"])
    w.u64(len(img["segments"]))
    for s in img["segments"]:
        for name in ("off", "len", "kind", "dset"):
            w.u64(s[name])
        if s["kind"] == SEGMENT_BYTES:
            w.raw(s["bytes"])
        else:
            w.u64(s["chunk"])
    w.u64(len(img["datasets"]))
    for d in img["datasets"]:
        for name in ("id", "path", "key_prefix"):
            w.str(d[name])
        for name in ("origin", "rank", "partition_count"):
            w.u64(d[name])
        for k in range(MAX_RANK):
            for name in ("dims", "chunk_dims", "grid", "sub_dims"):
                w.u64(d[name][k])
        w.u64(d["itemsize"])
        w.u64(d["chunk_bytes"])
        w.raw(d["codec"])
        w.u64(len(d["fill"]) if d["fill"] is not None else 0)
        if d["fill"] is not None:
            w.raw(d["fill"])
        w.u64(len(d["uris"]))
        for u in d["uris"]:
            w.str(u)
        w.u64(d["contig_off"])
        w.u64(d["contig_size"])
        w.u64(len(d["pieces"]))
        for p in d["pieces"]:
            w.raw(PIECE.pack(*p))
        w.u64(d["n_sub"])
        w.u64(d["pooled"])
        w.str(d["kept_file"])
        w.str(d["kept_etag"])
    w.u64(len(img["objects"]))
    for addr, oid in img["objects"]:
        w.u64(addr)
        w.str(oid)
    w.u64(len(img["omissions"]))
    for kind, *texts in img["omissions"]:
        w.u64(kind)
        for t in texts:
            w.str(t)
    return b"".join(w.parts)


def inflate(shared):
    """The raw image inside a bucket copy."""
    assert shared[:8] == SHARED_MAGIC
    raw = zlib.decompress(shared[16:])
    assert len(raw) == struct.unpack("<Q", shared[8:16])[0]
    return raw


def deflate(raw):
    """A bucket copy of a raw image."""
    return SHARED_MAGIC + struct.pack("<Q", len(raw)) + zlib.compress(raw)
