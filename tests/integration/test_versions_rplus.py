"""Issue 26 goal G2 (doc/versions.md §4.2): a one-element r+ of a versioned domain costs the
store no more requests than the same r+ of an unversioned one, plus a few: the chunks the
writer did not change are named in the new version as the base version's chunk table names
them, neither read, hashed nor looked up in the pool again. Every version still reads the
values it had."""
import json
import os
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import hsds_bucket  # noqa: E402

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"
CHUNKS, PER = 200, 256
# What a versioned commit adds whatever the number of chunks: the list (head, get, put_if,
# size put), the version's domain object and folders, its table and JSON, its image's
# measurement (a few gets), one LIST per 1,000 chunk keys of the new root.
CONSTANT = 40
COMMIT_KINDS = ("get", "head", "copy", "put", "list")  # not the collector's delayed deletes
# s: the unmount waits while the collector deletes the replaced roots (some 1,200 objects,
# one request each); a bound on what must happen, not on how soon
DRAIN_TIMEOUT = 600


def commit_requests(m):
    got = json.loads(m.path(".h5osfs-stats").read_text())["store"]["requests"]
    return sum(got.get(k, 0) for k in COMMIT_KINDS)


def summarised(m, domain):
    """Waits until the domain's current root has its .info.json: the last request of the
    background summary that follows each commit (it reads every chunk on a local bucket), so
    that no count below includes part of one."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        root = json.loads(m.get(f"{domain}/.domain.json"))["root"]
        if m.get(f"db/{root[2:19]}/.info.json") is not None:
            return
        time.sleep(0.05)
    raise AssertionError(f"{domain}: no .info.json for root {root} within 60 s")


def r_plus(m, domain, index, value):
    before = commit_requests(m)
    with h5py.File(m.path(domain), "r+") as f:
        f["data"][index] = value
    summarised(m, domain)
    return commit_requests(m) - before


@pytest.mark.not_on("rgw", reason="request counts of the same code; s3rver covers S3's ETags")
def test_versioned_r_plus_costs_what_an_unversioned_one_does(bucket_copy, mount_bucket,
                                                              tmp_path):
    """Two domains of CHUNKS chunk objects on one mount, one below a folder that keeps
    versions; the same three one-element r+ on each. The first makes version 1 of the kept
    one (it seals every chunk); the next two are counted. Each r+ replaces the root its
    domain named, which the collector deletes 30 s later with a GET and LISTs of its own: a
    descriptor open on the domain from before the r+ to the end of the counting keeps that
    root in use, so the collector postpones it and no count takes in its requests, however
    long the test runs."""
    values = np.arange(CHUNKS * PER, dtype="f4")
    kept, plain = f"{HOME}/kept/v.h5", f"{HOME}/plain.h5"
    for domain in (kept, plain):
        hsds_bucket.make_domain(str(bucket_copy), "/" + domain, "f4", (CHUNKS * PER,), (PER,),
                                lambda idx: values[idx[0] * PER:(idx[0] + 1) * PER].tobytes(),
                                user="test_user1")
    hsds_bucket.put(str(bucket_copy), f"{HOME}/kept/.domain.json",
                    {"owner": "test_user1", "acls": {"test_user1": hsds_bucket.acl_all()},
                     "created": time.time(), "lastModified": time.time()})
    m = mount_bucket(bucket_copy, "-o", f"user=test_user1,ttl=0,cache_dir={tmp_path}/c1")
    os.setxattr(m.path(f"{HOME}/kept"), "user.h5osfs.versions", b"on")

    expected, want, holds = [], values.copy(), []
    try:
        for n, index in enumerate((3, 5 + 50 * PER, 7 + 150 * PER)):
            want = want.copy()
            want[index] = -1 - n
            holds.append(os.open(m.path(kept), os.O_RDONLY))
            versioned = r_plus(m, kept, index, want[index])
            holds.append(os.open(m.path(plain), os.O_RDONLY))
            unversioned = r_plus(m, plain, index, want[index])
            if n > 0:
                assert versioned <= unversioned + CONSTANT, (n, versioned, unversioned)
            expected.append(want)
    finally:
        for fd in holds:
            os.close(fd)
    assert f"{CHUNKS - 1} named as the base version names them" in m.log()

    def check(mount):
        for number, want in enumerate(expected, 1):
            with h5py.File(mount.path(f"{HOME}/kept/.versions/v.h5/{number}.h5"), "r") as f:
                assert np.array_equal(f["data"][:], want), number
        with h5py.File(mount.path(kept), "r") as f:
            assert np.array_equal(f["data"][:], expected[-1])
    check(m)
    assert m.unmount(exit_timeout=DRAIN_TIMEOUT) == 0
    check(mount_bucket(m, "-o", f"user=test_user1,ro,cache_dir={tmp_path}/fresh"))
