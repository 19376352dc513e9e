"""Does xarray see the same dataset in two netCDF files? Run as a separate process (xarray
keeps files open in caches, which would keep a mount busy):

    /usr/bin/python3 xarray_same.py ORIGINAL OTHER [VARIABLE_WITH_UNDEFINED_VALUES ...]

Exit 0: open_dataset(...).identical(...) holds (the variables named are compared by dims and
attributes only); 1: it does not (the two datasets are printed); 3: xarray cannot open the
original (not judged); 4: xarray or netCDF4 is missing."""
import sys


def main(original, other, *undefined):
    try:
        import xarray as xr
        import netCDF4  # noqa: F401 (the engine)
    except ImportError as e:
        print(f"missing: {e}")
        return 4
    try:
        want = xr.open_dataset(original, engine="netcdf4", decode_times=False)
        want.load()
    except Exception as e:      # noqa: BLE001 (xarray cannot read every netCDF-4 file)
        print(f"xarray cannot open the original: {e!r}"[:300])
        return 3
    got = xr.open_dataset(other, engine="netcdf4", decode_times=False)
    got.load()
    for v in undefined:
        if got[v].attrs != want[v].attrs or got[v].dims != want[v].dims:
            print(f"{v}: dims or attributes differ")
            return 1
        got, want = got.drop_vars(v), want.drop_vars(v)
    if got.identical(want):
        return 0
    print(f"{got}\n--- original:\n{want}")
    return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
