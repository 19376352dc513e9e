"""Keep this process computing with subnormal numbers.

Debian's bitshuffle HDF5 filter plugins (libh5LZF.so, libh5bshuf.so) are linked with
-ffast-math: loading one switches the loading thread to flush-to-zero and
denormals-are-zero. From then on Python parses 1.6e-314 as 0.0 and numpy compares two
different subnormals as equal, so a test would pass over wrong bytes or fail over right
ones. HDF5 loads a plugin once per process, so loading them all up front and then restoring
the default floating-point environment settles it for the whole run."""
import ctypes
import ctypes.util
import os
from pathlib import Path

SUBNORMAL = "1.594370487e-314"
_libm = ctypes.CDLL(ctypes.util.find_library("m"))
FE_DFL_ENV = ctypes.c_void_p(-1)      # glibc: ((const fenv_t *) -1)


def subnormals_kept():
    return float(SUBNORMAL) != 0.0


def restore_default():
    if _libm.fesetenv(FE_DFL_ENV) != 0:
        raise OSError("fesetenv(FE_DFL_ENV) failed")


def plugin_dirs():
    import h5py.h5pl
    dirs = [h5py.h5pl.get(i).decode() for i in range(h5py.h5pl.size())]
    dirs += os.environ.get("HDF5_PLUGIN_PATH", "").split(":")
    return [Path(d) for d in dirs if d and Path(d).is_dir()]


def load_plugins_then_restore():
    """Every HDF5 filter plugin loaded now, so none changes the mode mid-test."""
    for d in plugin_dirs():
        for lib in sorted(d.glob("*.so")):
            try:
                ctypes.CDLL(str(lib))
            except OSError:
                pass            # HDF5 would not load it either
    restore_default()
    assert subnormals_kept()
