"""External links between domains of one bucket resolve inside the mount, whatever form the
bucket stores the target domain in: a bare file name (as hsload keeps it), an absolute domain
path, or an hdf5:// domain URL."""
import json
import shutil

import h5py
import numpy as np
import pytest

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

HOME = "home/test_user1"


def link_group(bucket, root, name):
    """The .group.json (path, parsed) of the group of domain root that holds link name."""
    for p in (bucket / "db" / root[2:19]).rglob(".group.json"):
        g = json.loads(p.read_text())
        if name in g["links"]:
            return p, g
    raise KeyError(name)


@pytest.mark.parametrize("form", ["/home/test_user1/sample2.h5",
                                  "hdf5://home/test_user1/sample2.h5"])
def test_external_link_to_a_domain_path_resolves_in_the_mount(bucket_copy, mount_bucket, form):
    # sample1 one folder deeper, so that the link must climb: ../sample2.h5
    src = bucket_copy / HOME / "sample1.h5" / ".domain.json"
    dst = bucket_copy / HOME / "deeper" / "sample1.h5"
    dst.mkdir(parents=True)
    shutil.copy(src, dst / ".domain.json")
    folder = json.loads((bucket_copy / HOME / ".domain.json").read_text())
    (bucket_copy / HOME / "deeper" / ".domain.json").write_text(json.dumps(folder))
    root = json.loads(src.read_text())["root"]
    path, g = link_group(bucket_copy, root, "ext_to_sample2")
    g["links"]["ext_to_sample2"]["h5domain"] = form
    path.write_text(json.dumps(g))

    m = mount_bucket(bucket_copy, "-o", "user=test_user1")
    with h5py.File(m.path(f"{HOME}/deeper/sample1.h5"), "r") as f:
        link = f["g2"].get("ext_to_sample2", getlink=True)
        assert link.filename == "../sample2.h5"
        linked = f["g2/ext_to_sample2"][()]
    with h5py.File(m.path(f"{HOME}/sample2.h5"), "r") as f:
        assert np.array_equal(linked, f["contiguous_int64"][()])
