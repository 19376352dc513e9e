"""An h5py r+ writer in a child process that reads the chunk of one element, waits, then
changes that element of its copy and closes: what a user's r+ does while HSDS (or another
writer) changes the bucket meanwhile. HDF5 leaves a file whose close failed half-closed and
h5py then crashes at exit, so the writer runs in a child that reports its close and leaves
with os._exit."""
import subprocess
import sys

_SCRIPT = r"""
import os, re, sys
import h5py
f = h5py.File(sys.argv[1], "r+")
name = sys.argv[2]
i, v, chunk = (int(a) for a in sys.argv[3:6])
lo = i // chunk * chunk
copy = f[name][lo:lo + chunk]
print("read", flush=True)
sys.stdin.readline()
copy[i - lo] = v
f[name][lo:lo + chunk] = copy
try:
    f.close()
    print("closed", flush=True)
except Exception as e:
    m = re.search(r"errno = (\d+)", str(e))
    print("errno", m.group(1) if m else repr(e), flush=True)
os._exit(0)
"""


class ChunkWriter:
    """h5py.File(path, "r+") in a child that has read the chunk (chunk elements, 1-D) holding
    dataset[index] when the constructor returns; change() sets dataset[index] = value and
    closes: -> "closed" or "errno N"."""

    def __init__(self, path, dataset, index, value, chunk):
        self.proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(path), dataset,
                                      str(index), str(value), str(chunk)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "read"

    def change(self):
        out, _ = self.proc.communicate("go\n", timeout=120)
        return out.strip()
