"""How the daemon ends when its connection to the kernel ends as aborted.

A worker's read of /dev/fuse that races the kernel's teardown at an unmount can fail with
ECONNABORTED instead of ENODEV (seen under load: a daemon whose unmount had succeeded exited 1,
"fuse: reading device: Software caused connection abort", which systemd shows as a failed
unit). The race cannot be made on demand, so its outcome is: a shim preloaded into the daemon
turns the ENODEV of its reads of /dev/fuse into ECONNABORTED. After an unmount the daemon must
end cleanly; when the connection was aborted with the mount still in place (the admin's
`echo 1 > /sys/fs/fuse/connections/N/abort`, which libfuse reads as ENODEV, as an unmount), it
must exit non-zero and say so, with the shim or without.
"""
import errno
import os
import shutil
import subprocess
import textwrap

import pytest

import harness
from conftest import BUCKET

SHIM = textwrap.dedent("""\
    #define _GNU_SOURCE
    #include <dlfcn.h>
    #include <errno.h>
    #include <unistd.h>

    /* what a read racing the kernel's teardown returns: ECONNABORTED, not ENODEV */
    ssize_t read(int fd, void *buf, size_t n)
    {
        static ssize_t (*real)(int, void *, size_t);
        if (!real)
            real = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
        ssize_t r = real(fd, buf, n);
        if (r < 0 && errno == ENODEV)
            errno = ECONNABORTED;
        return r;
    }
    """)

LIBFUSE_LINE = "reading device: Software caused connection abort"


@pytest.fixture
def shim(tmp_path):
    """-> the shim's path, built here."""
    if harness.sanitized():    # its runtime must be the first library loaded
        pytest.skip("the ASan runtime must come first: the shim cannot be preloaded")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the shim")
    src, lib = tmp_path / "shim.c", tmp_path / "shim.so"
    src.write_text(SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], check=True,
                   capture_output=True, timeout=120)
    return lib


@pytest.fixture
def start(tmp_path):
    """Factory: start(preload=None) -> harness.Daemon; preload: a library for LD_PRELOAD."""
    daemons = []

    def start_one(preload=None):
        mnt = tmp_path / f"mnt{len(daemons)}"
        mnt.mkdir()
        env = dict(os.environ, **({"LD_PRELOAD": str(preload)} if preload else {}))
        d = harness.Daemon(["-o", "user=test_user1", "-o", f"cache_dir={tmp_path}/cache"],
                           BUCKET, mnt, tmp_path / f"h5osfs{len(daemons)}.log", env=env)
        daemons.append(d)
        return d

    yield start_one
    harness.finish_all(daemons)


def test_a_connection_aborted_at_the_unmount_is_a_clean_end(start, shim):
    d = start(shim)
    assert os.path.getsize(d.path("home/test_user1/sample1.h5")) > 0
    problems = d.finish()
    assert LIBFUSE_LINE in d.stderr(), "the shim did not act: nothing was tested"
    assert problems == [], problems
    assert "the connection ended as aborted while the kernel unmounted it" in d.log()


def abort_connection(mnt):
    """What an admin does to a hung mount, with fusectl mounted in a mount namespace of its
    own (the machine's /sys stays as it was)."""
    conn = os.minor(os.stat(mnt).st_dev)
    subprocess.run(["unshare", "--mount", "sh", "-c",
                    "mount -t fusectl none /sys/fs/fuse/connections && "
                    f"echo 1 > /sys/fs/fuse/connections/{conn}/abort"],
                   check=True, capture_output=True, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="aborting a connection needs root (fusectl)")
@pytest.mark.parametrize("read_error", ["ENODEV", "ECONNABORTED"])
def test_a_connection_aborted_under_a_mount_is_an_error(start, read_error, request):
    d = start(request.getfixturevalue("shim") if read_error == "ECONNABORTED" else None)
    assert os.listdir(d.path("home/test_user1"))
    abort_connection(d.mnt)
    assert d.proc.wait(timeout=60) != 0
    assert "the kernel aborted the connection while mounted" in d.log()
    # libfuse leaves a dead connection's mount in place (it cannot tell it from an unmount)
    with pytest.raises(OSError) as e:
        os.statvfs(d.mnt)
    assert e.value.errno == errno.ENOTCONN
    subprocess.run(["fusermount3", "-u", str(d.mnt)], check=True, timeout=60)
