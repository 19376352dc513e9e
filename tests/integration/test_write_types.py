"""Types HSDS has no class for are kept as close as its schema allows (issue 11.3), with the
change logged once per object: a bitfield as the unsigned integer of its size (its bits kept),
VAX floats as IEEE (the same values), a long double as a double (rounded). The files are real
ones from the HDF5 projects (tests/data/types/, copied from the shared corpus)."""
import re
import shutil
import subprocess

import h5py
import numpy as np
import pytest

from conftest import DATA

pytestmark = pytest.mark.backends("posix", "s3")

TYPES = DATA / "types"
HOME = "home/test_user1"


@pytest.fixture
def copied(bucket_copy, mount_bucket, tmp_path):
    """The log of a mount the four files were cp'd into; then a read-only mount of the bucket
    (a fresh daemon: nothing cached from the copy)."""
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/cache")
    for f in sorted(TYPES.glob("*.h5")):
        shutil.copyfile(f, m.path(f"{HOME}/{f.name}"))
    assert m.unmount() == 0
    return m.log(), mount_bucket(m, "-o", "user=test_user1,ro")


def h5dump_values(path, obj, attr=None):
    """The numbers h5dump prints (hex for bitfields) for a dataset or one of its attributes,
    with h5dump's own reading of the file: h5py cannot read a bitfield."""
    args = ["h5dump", "-y"] + (["-d", obj] if attr is None else ["-a", f"{obj}/{attr}"])
    out = subprocess.run(args + [str(path)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    data = out[out.index("DATA {") + len("DATA {"):]
    return [int(v, 0) for v in re.findall(r"0x[0-9a-f]+|\d+", data)]


def test_bitfields_keep_their_bits_as_unsigned_integers(copied):
    log, m = copied
    for name, obj, attr in [("bitfield_dset.h5", "/DS1", None),
                            ("bitfield_attr.h5", "/DS1", "A1")]:
        src = h5dump_values(TYPES / name, obj, attr)
        assert len(src) == 28, src                  # 4 x 7 one-byte fields
        with h5py.File(m.path(f"{HOME}/{name}"), "r") as f:
            mine = f[obj][()] if attr is None else f[obj].attrs[attr]
        assert mine.dtype == np.uint8
        assert mine.ravel().tolist() == src, name
        assert re.search(rf"{name}: /DS1: {'attribute .A1.' if attr else 'dataset'}: a 1-byte "
                         r"bitfield is stored as an unsigned integer", log), name


def test_non_ieee_floats_become_ieee(copied):
    log, m = copied
    vms = subprocess.run(["h5diff", str(TYPES / "tvms.h5"), m.path(f"{HOME}/tvms.h5")],
                         capture_output=True, text=True, timeout=60)
    assert vms.returncode == 0, vms.stdout + vms.stderr     # VAX G floats: the same values
    with h5py.File(TYPES / "tldouble_scalar.h5", "r") as s, \
            h5py.File(m.path(f"{HOME}/tldouble_scalar.h5"), "r") as f:
        names = [n for n in s if isinstance(s[n], h5py.Dataset)]
        assert names
        for n in names:
            assert s[n].dtype.base.itemsize > 8 and f[n].dtype.base == np.float64
            assert np.array_equal(f[n][()], s[n][()].astype(np.float64)), n
    assert "tvms.h5: /Array: dataset: a 8-byte float that is not IEEE" in log
    assert re.search(r"tldouble_scalar.h5: /\w+: dataset: a 16-byte float .* values rounded", log)
