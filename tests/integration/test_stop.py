"""A stop signal while an unmounted daemon finishes its work: after the unmount, the daemon
deletes the objects of the domains it replaced or deleted (gc_drain). A SIGTERM then (systemd's
stop, a benchmark that will not wait) must still end in a clean exit with one log line saying
what stays in the bucket, not the default action's death by signal. On S3, where deleting a
few thousand objects takes seconds; a local bucket deletes them before a signal could come."""
import os

import h5py
import numpy as np
import pytest


pytestmark = pytest.mark.backends("s3")

HOME = "home/test_user1"
DATASETS = 1500                 # 3000 objects: a dataset's JSON and its chunk each


def test_sigterm_while_deleting_old_objects_exits_cleanly(mount_bucket, bucket_copy, tmp_path):
    src = tmp_path / "many.h5"
    with h5py.File(src, "w") as f:
        for i in range(DATASETS):
            f.create_dataset(f"d{i}", data=np.arange(16, dtype=np.int32) + i)
    m = mount_bucket(bucket_copy, "-o", "user=test_user1")
    m.path(f"{HOME}/many.h5").write_bytes(src.read_bytes())
    os.unlink(m.path(f"{HOME}/many.h5"))          # its root is queued for deletion
    rc = m.unmount(exit_timeout=0.5, terminate=True)
    assert m.terminated, "the deletion ended before the signal: nothing was tested"
    assert rc == 0, m.stderr()[-2000:]
    log = m.log()
    assert "stopped by a signal while finishing" in log
    assert "stay in the bucket" in log
