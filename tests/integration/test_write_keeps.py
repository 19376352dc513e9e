"""A change made through a domain's file keeps what the file did not show (issue 12, defect
2): a dataset the image could only show as a placeholder or had to leave out, an attribute or a
link it could not make. The user could neither see nor change those, so an r+ commit that only
adds an attribute carries them over unchanged into the new version, chunks included; before,
such a commit deleted them ("2 deleted")."""
import json

import h5py
import pytest

from test_image import domain_file, domain_objects, object_json_path
from test_image_bad_input import BAD_DOMAIN, BAD_PATH, DATASET_CASES, set_key

pytestmark = pytest.mark.posix_only(reason="compares the objects in the bucket directory")

HOME = "home/test_user1"


def rooted(doc, root):
    """doc with the root's 16 digits in every id replaced by R: versions compared by content."""
    a, b = root.split("-")[1:3]
    return json.loads(json.dumps(doc).replace(root, "ROOT").replace(f"-{a}-{b}-", "-R-"))


def dataset_dir(bucket, root, obj_id):
    return object_json_path(bucket, obj_id, root).parent


def kept_state(bucket, root, obj_id, *roots):
    """(the object's JSON text with the digits of root (and of roots) abstracted, {chunk name:
    bytes}). An object that cannot be parsed is carried as its bytes: the old root's digits
    stay in it."""
    d = dataset_dir(bucket, root, obj_id)
    text = (d / ".dataset.json").read_text()
    for r in (root,) + roots:
        a, b = r.split("-")[1:3]
        text = text.replace(r, "ROOT").replace(f"-{a}-{b}-", "-R-")
    chunks = {p.name: p.read_bytes() for p in d.iterdir() if not p.name.endswith(".json")}
    return text, chunks


def change_root_attribute(m):
    with h5py.File(domain_file(m, BAD_DOMAIN), "r+") as f:
        f.attrs["added"] = 7


def new_root_of(bucket):
    dom = json.loads((bucket / HOME / f"{BAD_DOMAIN}.h5" / ".domain.json").read_text())
    return dom["root"]


@pytest.mark.parametrize("case", ["unknown-type-class", "chunk-over-2GiB", "malformed-json",
                                  "rank-40"])
def test_change_carries_a_dataset_the_file_could_not_show(mount_bucket, bucket_copy, case):
    """A placeholder (reads fail with EIO) or a dataset left out: after an r+ commit that only
    adds an attribute to the root group, the new root has that dataset's object, byte for byte
    but for the root's digits in its ids, and every one of its chunks, linked from the same
    group under the same name."""
    root, ids = domain_objects(bucket_copy, BAD_DOMAIN)
    obj_id = ids[BAD_PATH]
    p = object_json_path(bucket_copy, obj_id, root)
    p.write_text(DATASET_CASES[case](p.read_text()))
    before = kept_state(bucket_copy, root, obj_id)
    assert before[1], "the dataset has chunks to keep"
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    change_root_attribute(m)
    new_root = new_root_of(bucket_copy)
    assert new_root != root
    a, b = new_root.split("-")[1:3]
    new_id = f"d-{a}-{b}-" + "-".join(obj_id.split("-")[3:])
    assert kept_state(bucket_copy, new_root, new_id, root) == before
    group = json.loads(object_json_path(bucket_copy, new_root, new_root).read_text())
    assert group["links"][BAD_PATH.lstrip("/")]["id"] == new_id
    with h5py.File(domain_file(m, BAD_DOMAIN), "r") as f:
        assert f.attrs["added"] == 7


def test_change_carries_an_attribute_the_file_could_not_show(mount_bucket, bucket_copy):
    root, ids = domain_objects(bucket_copy, BAD_DOMAIN)
    p = object_json_path(bucket_copy, ids[BAD_PATH], root)
    doc = json.loads(p.read_text())
    broken = {"type": {"class": "H5T_MYSTERY"}, "shape": {"class": "H5S_SCALAR"}, "value": 1,
              "created": 1700000000.0}
    doc["attributes"]["broken"] = broken
    p.write_text(json.dumps(doc))
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    change_root_attribute(m)
    new_root = new_root_of(bucket_copy)
    a, b = new_root.split("-")[1:3]
    new_id = f"d-{a}-{b}-" + "-".join(ids[BAD_PATH].split("-")[3:])
    now = json.loads(object_json_path(bucket_copy, new_id, new_root).read_text())
    assert now["attributes"]["broken"] == broken
    assert set(now["attributes"]) == set(doc["attributes"])


def test_change_carries_a_link_the_file_could_not_show(mount_bucket, bucket_copy):
    """A link to an object that is missing (HDF5 cannot make it) stays in its group."""
    root, _ = domain_objects(bucket_copy, BAD_DOMAIN)
    p = object_json_path(bucket_copy, root, root)
    doc = json.loads(p.read_text())
    a, b = root.split("-")[1:3]
    missing = f"d-{a}-{b}-0000-000000-000000"
    doc["links"]["dangling"] = {"class": "H5L_TYPE_HARD", "id": missing,
                                "created": 1700000000.0}
    p.write_text(json.dumps(doc))
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    change_root_attribute(m)
    new_root = new_root_of(bucket_copy)
    now = json.loads(object_json_path(bucket_copy, new_root, new_root).read_text())
    assert rooted(now["links"]["dangling"], new_root) == rooted(doc["links"]["dangling"], root)
    assert now["attributes"]["added"]["value"] == 7


@pytest.mark.parametrize("path,index,scalar", [("/vlen_str", "0", False),
                                               ("/scalar", "0", True)])
def test_change_carries_a_chunk_the_file_could_not_show(mount_bucket, bucket_copy, path,
                                                        index, scalar):
    """A chunk of variable-length (or scalar) data that cannot be decoded reads as EIO (or its
    scalar dataset is left out): the new version has that chunk object as it was stored."""
    root, ids = domain_objects(bucket_copy, BAD_DOMAIN)
    chunk = dataset_dir(bucket_copy, root, ids[path]) / index
    bad = chunk.read_bytes()[: len(chunk.read_bytes()) // 2]
    chunk.write_bytes(bad)
    m = mount_bucket(bucket_copy, "-o", "user=test_user1,ttl=0")
    change_root_attribute(m)
    new_root = new_root_of(bucket_copy)
    a, b = new_root.split("-")[1:3]
    new_id = f"d-{a}-{b}-" + "-".join(ids[path].split("-")[3:])
    assert (dataset_dir(bucket_copy, new_root, new_id) / index).read_bytes() == bad
