"""Forged kept images (issue 24): an image is a cache of facts the daemon checks, never an
authority (src/image/image_check.c).

The copy of a domain's image in the bucket (db/A-B/.h5osfs-image, read by default:
bucket_images=read) carries a stamp that is a hash of public facts, so anyone who can write the
bucket can put one that matches; a file in cache_dir/images/ can be damaged. Each test takes a
genuine image, changes fields with imagefile.py (the stamp stays valid) and checks that the
mount rejects it in one log line, builds the domain again and reads the true values: the image
cannot make it read another domain's objects, nor index memory it does not own. Run these with
H5OSFS_BIN=build-asan/h5osfs (or the fuzz build's daemon) to see the memory cases checked by
the sanitizers too; the posix backend is enough (the store path is the one a build uses)."""
import json

import pytest

import imagefile
from test_image_cache import (ARGS, BUCKET_KEPT, BUILT, KEPT, WRITE, big_domain,  # noqa: F401
                              other_cache, read, shared_key)
from test_image_declared import USER, bucket_dir, dataset, dataset_key, make_domain  # noqa: F401

REJECTED = "not a usable built file"
LINKED = "linked/forged.bin"
LINKED_BYTES = bytes(range(256)) * 2600         # 665,600 bytes a forged layout may point at


def rejections(m):
    return [line for line in m.log().splitlines() if REJECTED in line]


def genuine(m, ids):
    """The fields of the image of big.h5 that mount m put into the bucket."""
    return imagefile.decode(imagefile.inflate(m.get(shared_key(ids))))


def dataset_of(img, ids, link):
    return next(d for d in img["datasets"] if d["id"] == ids[link])


@pytest.fixture
def secret(bucket_dir):  # noqa: F811
    """Domain secret.h5, which USER may not read, with a dataset shaped like big.h5's."""
    ids = make_domain(bucket_dir, "secret.h5", {"s": (dataset([4], [4]), {"0": b"SSSS"})})
    key = bucket_dir / f"home/{USER}/secret.h5/.domain.json"
    dom = json.loads(key.read_text())
    dom["owner"] = "someone_else"
    dom["acls"] = {"someone_else": dom["acls"][USER]}
    key.write_text(json.dumps(dom))
    return ids


@pytest.mark.parametrize("prefix", ["kept", "forged"])
def test_a_bucket_image_cannot_read_another_domain(mount_bucket, big_domain, secret, prefix):
    """The issue's ACL bypass: big.h5's image names secret.h5's dataset instead of d0 (keeping
    d0's chunk key prefix, or forging it too). USER, who cannot open secret.h5, reads d0's own
    values after one rejection and a build, never secret.h5's."""
    bucket, ids = big_domain
    m = mount_bucket(bucket, *ARGS, *WRITE)
    want = read(m, "big.h5")
    assert m.unmount() == 0
    img = genuine(m, ids)
    d0 = dataset_of(img, ids, "d0")
    d0["id"] = secret["s"]
    if prefix == "forged":
        d0["key_prefix"] = dataset_key(secret["s"]) + "/"
    m.put(shared_key(ids), imagefile.deflate(imagefile.encode(img)))

    m2 = mount_bucket(m, *ARGS, "-o", "ro", *other_cache(m, "reader"))
    with pytest.raises(PermissionError):
        (m2.path(f"home/{USER}/secret.h5")).read_bytes()
    assert read(m2, "big.h5") == want
    assert want["d0"] == ([0, 1, 2, 3], {})
    lines = rejections(m2)
    assert len(lines) == 1, m2.log()
    assert shared_key(ids) in lines[0]
    assert ("is not an object of" if prefix == "forged" else "are not those of its id") in lines[0]
    assert len([x for x in m2.log().splitlines() if f"big.h5: {BUILT}" in x]) == 1, m2.log()


def test_a_bucket_image_with_linked_datasets_is_built_again(mount_bucket, big_domain):
    """A copy from the bucket may not point a dataset at a file of the bucket: only the
    dataset's JSON may (even a well-formed linked layout is rejected)."""
    bucket, ids = big_domain
    m = mount_bucket(bucket, *ARGS, *WRITE)
    want = read(m, "big.h5")
    assert m.unmount() == 0
    m.put(LINKED, LINKED_BYTES)
    img = genuine(m, ids)
    d1 = dataset_of(img, ids, "d1")
    d1.update(origin=imagefile.REF_CONTIG, uris=[LINKED], contig_off=0, contig_size=4)
    m.put(shared_key(ids), imagefile.deflate(imagefile.encode(img)))

    m2 = mount_bucket(m, *ARGS, "-o", "ro", *other_cache(m, "reader"))
    assert read(m2, "big.h5") == want
    lines = rejections(m2)
    assert len(lines) == 1 and "reads linked files" in lines[0], m2.log()


def forge_itemsize(d):
    """The issue's heap overflow: elements far larger than the chunk (load_contiguous)."""
    d.update(origin=imagefile.REF_CONTIG, uris=[LINKED], contig_off=0,
             contig_size=len(LINKED_BYTES), itemsize=160001,
             fill=bytes(160001) if d["fill"] is not None else None)
    return "chunk of 4 bytes, 160001-byte elements"


def forge_sub_dim(d):
    """The issue's SIGFPE: a sub-chunk dimension of 0 (load_pieces divides by it)."""
    d.update(origin=imagefile.REF_PIECES, uris=[LINKED], n_sub=2, pieces=[(0, 0, 2, 0, 1)])
    d["sub_dims"][0] = 0
    return "sub-chunk dimension 0 (0) does not divide the chunk"


def forge_rank_0(d):
    """The issue's UBSan index -1: a linked dataset of rank 0 (load_contiguous)."""
    d.update(origin=imagefile.REF_CONTIG, uris=[LINKED], contig_off=0, contig_size=4, rank=0)
    return "rank 0"


@pytest.mark.parametrize("forge", [forge_itemsize, forge_sub_dim, forge_rank_0])
def test_a_damaged_kept_image_is_built_again(mount_bucket, big_domain, forge):
    """The issue's crashes, planted in cache_dir/images/ (where linked datasets are allowed, so
    only the checks of the fields stand between them and the reads): each is one rejection
    naming the field, then a build and the true values."""
    bucket, ids = big_domain
    m = mount_bucket(bucket, *ARGS)
    want = read(m, "big.h5")
    assert m.unmount() == 0
    m.put(LINKED, LINKED_BYTES)
    [kept] = list((m.cache_dir / "images").iterdir())
    img = imagefile.decode(kept.read_bytes())
    reason = forge(dataset_of(img, ids, "d0"))
    kept.write_bytes(imagefile.encode(img))

    m2 = mount_bucket(m, *ARGS)
    assert read(m2, "big.h5") == want
    lines = rejections(m2)
    assert len(lines) == 1, m2.log()
    assert str(kept) in lines[0] and reason in lines[0], lines[0]
    assert len([x for x in m2.log().splitlines() if f"big.h5: {BUILT}" in x]) == 1, m2.log()
    assert m2.unmount() == 0

    m3 = mount_bucket(m, *ARGS)                 # the build replaced it
    assert read(m3, "big.h5") == want
    assert rejections(m3) == [] and len([x for x in m3.log().splitlines() if KEPT in x]) == 1
