"""netCDF readers on domains HSDS's own loader made (tests/data/hsds-v2/hsdsnc: hsload of 12
netCDF-4 and netCDF-readable HDF5 files, their sources in source/nc and `ncdump -h` of each
source in ncdump_h). hsload stores a dimension scale's CLASS and NAME as NULLPAD strings with
no terminator, which H5DSis_scale and netCDF reject (phony dimensions instead of the source's);
the image repairs that (doc/image.md, "Repairs") unless -o no_repairs. Both readers must see
the source: `ncdump -h` prints the same, xarray's open_dataset(...).identical(...) holds."""
import shutil
import subprocess

import pytest

from conftest import FIXTURE

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

# The file a reader sees is the image, byte for byte the same whichever store served the
# objects (test_image.py reads every fixture domain on every backend).
IMAGE_ONLY = pytest.mark.store_independent(reason="netCDF reads the image, the same bytes on "
                                           "every backend")

NC = FIXTURE / "hsdsnc"
SOURCES = FIXTURE / "source" / "nc"
CDL = FIXTURE / "ncdump_h"
FILES = sorted(p.name for p in SOURCES.iterdir())
ARGS = ("-o", "ro", "-o", "user=test_user1")
# hsload visits a group's links by name and gives them 'created' times in that order, so the
# source's native link order (which ncdump lists variables in) is not in the bucket
ORDER_LOST = {"nctest_netcdf4_classic.nc"}

# variables whose values are undefined in the source: never written, with fill time NEVER
# (netCDF's _NoFill), so netCDF returns whatever its buffer held (0x7ff80000 words here)
UNDEFINED = {"f03tst_open_mem.nc": ["var2"]}

needs_ncdump = pytest.mark.skipif(not shutil.which("ncdump"), reason="ncdump (netcdf-bin) is "
                                  "not installed: scripts/install-deps.sh installs it")


def ncdump_h(path):
    r = subprocess.run(["ncdump", "-h", str(path)], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout.split("\n", 1)[1] if r.returncode == 0 else r.stderr


@pytest.fixture
def nc_mount(mount_bucket):
    return mount_bucket(NC, *ARGS)


@needs_ncdump
@pytest.mark.parametrize("name", FILES)
@IMAGE_ONLY
def test_ncdump_sees_the_source(nc_mount, name):
    want = CDL.joinpath(name + ".cdl").read_text().split("\n", 1)[1]
    rc, got = ncdump_h(nc_mount.path(f"home/test_user1/nc/{name}"))
    assert rc == 0, got
    if name in ORDER_LOST:
        assert sorted(got.splitlines()) == sorted(want.splitlines())
        assert got != want, f"{name}: now equal: take it out of ORDER_LOST"
    else:
        assert got == want


@needs_ncdump
def test_no_repairs_shows_what_hsload_stored(mount_bucket):
    m = mount_bucket(NC, *ARGS, "-o", "no_repairs")
    rc, got = ncdump_h(m.path("home/test_user1/nc/ref_no_ncproperty.nc"))
    assert rc == 0 and "phony_dim_0 = 4" in got and "time = 4" not in got, got


@pytest.mark.parametrize("name", [n for n in FILES if n.endswith(".nc")])
@IMAGE_ONLY
def test_xarray_sees_the_source(nc_mount, name):
    xr = pytest.importorskip("xarray", reason="python3-xarray: scripts/install-deps.sh")
    pytest.importorskip("netCDF4", reason="python3-netcdf4: scripts/install-deps.sh")
    try:
        want = xr.open_dataset(SOURCES / name, engine="netcdf4", decode_times=False)
    except Exception as e:      # noqa: BLE001 (xarray cannot read every netCDF-4 file)
        pytest.skip(f"xarray cannot open the source itself: {e!r}"[:200])
    with want, xr.open_dataset(nc_mount.path(f"home/test_user1/nc/{name}"), engine="netcdf4",
                               decode_times=False) as got:
        got.load()
        want.load()
        for v in UNDEFINED.get(name, []):
            assert got[v].attrs == want[v].attrs and got[v].dims == want[v].dims
            got, want = got.drop_vars(v), want.drop_vars(v)
        assert got.identical(want), f"{got}\n---\n{want}"
