"""Files come back as they went in (issue 27): what a `cp` into a mount must keep that HSDS's
type and attribute JSON can hold, though h5pyd (hsload) drops it. Files made here with h5py's
low-level API; posix only (what is checked is the ingest and the image, the same on every
store)."""
import shutil
import subprocess

import h5py
import numpy as np
from h5py import h5a, h5d, h5s, h5t

HOME = "home/test_user1"


def copied_in(bucket_copy, mount_bucket, tmp_path, *sources):
    """A read-only mount (a fresh daemon) of the bucket the sources were cp'd into."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    for src in sources:
        shutil.copyfile(src, m.path(f"{HOME}/{src.name}"))
    assert m.unmount() == 0
    return mount_bucket(m, "-o", "user=test_user1,ro")


def h5dump_header(path):
    out = subprocess.run(["h5dump", "-H", str(path)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return out.split("\n", 1)[1]        # the first line names the file


# ---- one-byte types keep their byte order (part 3) ----

def write_big_endian_bytes(path):
    """Big-endian 1-byte integers and an enum over one: datasets, attributes, compound
    members (numpy has no byte order for them, so h5py's high-level API makes them LE)."""
    colour = h5t.enum_create(h5t.STD_U8BE)
    for name, value in [(b"RED", 0), (b"GREEN", 1), (b"BLUE", 200)]:
        colour.enum_insert(name, value)
    record = h5t.create(h5t.COMPOUND, 3)
    record.insert(b"a", 0, h5t.STD_I8BE)
    record.insert(b"b", 1, h5t.STD_U8BE)
    record.insert(b"c", 2, colour)
    four = h5s.create_simple((4,))
    with h5py.File(path, "w") as f:
        for name, tid, values in [
                (b"i8be", h5t.STD_I8BE, np.array([-128, -1, 0, 127], np.int8)),
                (b"u8be", h5t.STD_U8BE, np.array([0, 1, 200, 255], np.uint8)),
                (b"enum_u8be", colour, np.array([0, 1, 200, 1], np.uint8)),
                (b"compound", record,
                 np.array([(-1, 2, 200)] * 4, [("a", "i1"), ("b", "u1"), ("c", "u1")]))]:
            h5d.create(f.id, name, tid, four).write(h5s.ALL, h5s.ALL, values)
        g = f.create_group("g")
        h5a.create(g.id, b"attr_i8be", h5t.STD_I8BE, four).write(
            np.array([-3, -2, -1, 0], np.int8))
        h5a.create(g.id, b"attr_enum", colour, h5s.create(h5s.SCALAR)).write(
            np.array(200, np.uint8))


def type_orders(tid):
    """The byte orders of an HDF5 type and of its members, depth first."""
    cls = tid.get_class()
    if cls == h5t.COMPOUND:
        return [o for k in range(tid.get_nmembers()) for o in type_orders(tid.get_member_type(k))]
    if cls == h5t.ENUM:
        return type_orders(tid.get_super())
    return [tid.get_order()]


def test_one_byte_big_endian_types_keep_their_byte_order(bucket_copy, mount_bucket, tmp_path):
    src = tmp_path / "be_bytes.h5"
    write_big_endian_bytes(src)
    m = copied_in(bucket_copy, mount_bucket, tmp_path, src)
    mounted = m.path(f"{HOME}/{src.name}")
    assert h5dump_header(mounted) == h5dump_header(src)
    with h5py.File(src, "r") as a, h5py.File(mounted, "r") as b:
        for name in ["i8be", "u8be", "enum_u8be", "compound"]:
            assert type_orders(b[name].id.get_type()) == type_orders(a[name].id.get_type())
            assert np.array_equal(b[name][()], a[name][()]), name
        for name in ["attr_i8be", "attr_enum"]:
            assert type_orders(b["g"].attrs.get_id(name).get_type()) == [h5t.ORDER_BE]
            assert np.array_equal(b["g"].attrs[name], a["g"].attrs[name]), name
