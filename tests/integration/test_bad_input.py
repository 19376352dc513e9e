"""Buckets that HSDS would not have written: malformed domain objects, unusable names, stray
keys, symlinks. Each test builds its own small bucket (named hsdstest) in tmp_path, and runs on
both backends (conftest.py: [posix] mounts the directory, [s3] its upload) unless it is marked
posix_only."""
import errno
import json
import os
import stat

import pytest

from conftest import BUCKET, assert_unchanged, bucket_snapshot, list_like_aws

pytestmark = pytest.mark.backends("posix", "s3", "rgw")

DOMAIN_JSON = ".domain.json"
USER = ("-o", "user=test_user1")


def fixture_doc(rel):
    return json.loads((BUCKET / rel / DOMAIN_JSON).read_text())


def template_domain():
    """A domain object of the fixture (a dict), and its domain path."""
    rel = "home/test_user1/sample1.h5"
    return fixture_doc(rel), rel


def fixture_ids():
    """A dataset id and a non-root group id of the fixture, read from its db/ tree:
    db/<A-B>/d/<C-D-E> is dataset d-A-B-C-D-E, db/<A-B>/g/<C-D-E> group g-A-B-C-D-E."""
    dataset = group = None
    for dom in sorted((BUCKET / "db").iterdir()):
        for obj in sorted((dom / "d").iterdir()) if (dom / "d").is_dir() else []:
            dataset = dataset or f"d-{dom.name}-{obj.name}"
        for obj in sorted((dom / "g").iterdir()) if (dom / "g").is_dir() else []:
            group = group or f"g-{dom.name}-{obj.name}"
    assert dataset and group
    # a root group's id is its domain directory's; these are not it
    roots = {json.loads(p.read_text())["root"] for p in BUCKET.glob("home/**/.domain.json")
             if "root" in json.loads(p.read_text())}
    assert dataset not in roots and group not in roots
    return dataset, group


def make_bucket(tmp_path):
    """tmp_path/bucket/hsdstest with the fixture's /home folder and one good domain
    /home/good.h5 (a copy of a fixture domain object)."""
    bucket = tmp_path / "bucket" / "hsdstest"
    (bucket / "home" / "good.h5").mkdir(parents=True)
    (bucket / "home" / DOMAIN_JSON).write_bytes((BUCKET / "home" / DOMAIN_JSON).read_bytes())
    doc, rel = template_domain()
    (bucket / "home" / "good.h5" / DOMAIN_JSON).write_bytes(
        (BUCKET / rel / DOMAIN_JSON).read_bytes())
    return bucket


def assert_good_domain(m):
    doc, _ = template_domain()
    st = os.stat(m.path("/home/good.h5"))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644
    assert abs(st.st_mtime_ns - round(doc["lastModified"] * 1e9)) <= 1000
    assert os.getxattr(m.path("/home/good.h5"), "user.h5osfs.root") == doc["root"].encode()


def log_lines(m, text):
    return [line for line in m.log().splitlines() if text in line]


def assert_errno(expected, func, *args):
    with pytest.raises(OSError) as info:
        func(*args)
    assert info.value.errno == expected, (
        f"{func.__name__}: expected {errno.errorcode[expected]}, "
        f"got {errno.errorcode.get(info.value.errno, info.value.errno)}")


# ---- malformed domain objects ----

def good_bytes():
    doc, _ = template_domain()
    return json.dumps(doc).encode()


def with_doc(change):
    doc, _ = template_domain()
    change(doc)
    return json.dumps(doc).encode()


def set_key(key, value):
    return lambda doc: doc.__setitem__(key, value)


def set_acl_value(doc):
    doc["acls"]["test_user1"]["read"] = "yes"


def big_object():
    """A valid domain object, padded with whitespace past 2 MiB."""
    text = good_bytes()
    return text[:-1] + b" " * (2 << 20) + text[-1:]


def invalid_utf8():
    text = good_bytes()
    owner = b'"test_user1"'
    assert owner in text
    return text.replace(owner, b'"test_\xff\xfeuser1"', 1)


MALFORMED = {
    "truncated": lambda: good_bytes()[: len(good_bytes()) // 2],
    "array": lambda: json.dumps([template_domain()[0]]).encode(),
    "string": lambda: json.dumps("home/x.h5").encode(),
    "number": lambda: b"42",
    "null": lambda: b"null",
    "empty": lambda: b"",
    "root_not_an_id": lambda: with_doc(set_key("root", "not-an-id")),
    "root_not_a_string": lambda: with_doc(set_key("root", 12)),
    "root_dataset_id": lambda: with_doc(set_key("root", fixture_ids()[0])),
    "root_non_root_group_id": lambda: with_doc(set_key("root", fixture_ids()[1])),
    "owner_missing": lambda: with_doc(lambda d: d.pop("owner")),
    "acls_not_an_object": lambda: with_doc(set_key("acls", ["test_user1"])),
    "acl_value_not_boolean": lambda: with_doc(set_acl_value),
    "invalid_utf8": invalid_utf8,
    "two_mib": big_object,
    "directory": None,
}
POSIX_ONLY_VARIANTS = {
    "directory": "a directory where the object should be: S3 has no directories (an empty "
                 "one cannot be uploaded, and a key below it would make it a prefix)",
}


@pytest.mark.parametrize("variant", [
    pytest.param(v, marks=pytest.mark.posix_only(reason=POSIX_ONLY_VARIANTS[v]))
    if v in POSIX_ONLY_VARIANTS else v for v in MALFORMED])
def test_malformed_domain_object(tmp_path, mount_bucket, variant):
    bucket = make_bucket(tmp_path)
    target = bucket / "home" / "x.h5" / DOMAIN_JSON
    target.parent.mkdir()
    if MALFORMED[variant] is None:
        target.mkdir()
    else:
        data = MALFORMED[variant]()
        target.write_bytes(data)
        if variant == "two_mib":
            assert len(data) > 2 << 20 and isinstance(json.loads(data), dict)
    before = bucket_snapshot(bucket)
    m = mount_bucket(bucket, *USER)
    x = m.path("/home/x.h5")
    for _ in range(3):
        with os.scandir(m.path("/home")) as it:
            entries = {e.name: e for e in it}
        assert sorted(entries) == ["good.h5", "x.h5"]
        assert entries["x.h5"].is_file(follow_symlinks=False)
        assert not entries["x.h5"].is_dir(follow_symlinks=False)
        st = os.stat(x)
        assert stat.S_ISREG(st.st_mode), oct(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0, oct(st.st_mode)
        assert os.lstat(x).st_mode == st.st_mode
    assert not os.access(x, os.R_OK)
    assert_errno(errno.EIO, os.open, x, os.O_RDONLY)
    assert_errno(errno.ENODATA, os.getxattr, x, "user.h5osfs.root")
    assert_errno(errno.ENOTDIR, os.listdir, x)
    key = "home/x.h5/.domain.json"
    lines = log_lines(m, key)
    assert len(lines) == 1, lines
    assert m.proc.poll() is None, "the daemon died"
    assert_good_domain(m)
    assert m.unmount() == 0
    assert_unchanged(m, before)


def test_malformed_folder_object_hides_nothing_else(tmp_path, mount_bucket):
    """A broken folder object (/home) shows as a mode-0 file; the root still lists."""
    bucket = make_bucket(tmp_path)
    (bucket / "home" / DOMAIN_JSON).write_bytes(b"{")
    m = mount_bucket(bucket, *USER)
    assert os.listdir(m.mnt) == ["home"]
    st = os.stat(m.path("/home"))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0
    assert len(log_lines(m, "home/.domain.json")) == 1


# ---- strings HSDS takes and jansson does not ----

def with_strings_hsds_takes(doc, owner_tail):
    """A NUL and lone surrogates in strings of a domain object: the owner, an ACL's user, a
    member no one reads (json.dumps writes them as \\u0000 and \\udc80, HSDS keeps them)."""
    doc["owner"] = doc["owner"] + owner_tail
    doc["acls"]["nobody\udc80"] = {"read": True}
    doc["note\x00"] = ["\x00", "\udc80"]
    return json.dumps(doc).encode()


@pytest.mark.posix_only(reason="the parser reads the same bytes from every store")
def test_nul_and_lone_surrogates_cost_no_folder_or_domain(tmp_path, mount_bucket):
    bucket = make_bucket(tmp_path)
    folder = bucket / "home" / DOMAIN_JSON
    folder.write_bytes(with_strings_hsds_takes(json.loads(folder.read_text()), "\x00"))
    good = bucket / "home" / "good.h5" / DOMAIN_JSON
    good.write_bytes(with_strings_hsds_takes(json.loads(good.read_text()), "\udc80"))
    assert b"\\u0000" in folder.read_bytes() and b"\\udc80" in good.read_bytes()
    before = bucket_snapshot(bucket)
    m = mount_bucket(bucket, *USER)
    assert os.listdir(m.mnt) == ["home"]
    assert stat.S_ISDIR(os.stat(m.path("/home")).st_mode)
    assert os.listdir(m.path("/home")) == ["good.h5"]
    assert_good_domain(m)
    # the owner is only shown: a NUL as '?', a string with a lone surrogate as its JSON text
    owner = template_domain()[0]["owner"].encode()
    assert os.getxattr(m.path("/home/good.h5"), "user.h5osfs.owner") == owner + b"\\udc80"
    folder_owner = json.loads((BUCKET / "home" / DOMAIN_JSON).read_text())["owner"].encode()
    assert os.getxattr(m.path("/home"), "user.h5osfs.owner") == folder_owner + b"?"
    assert not log_lines(m, "unusable"), m.log()
    assert m.unmount() == 0
    assert_unchanged(m, before)


@pytest.mark.posix_only(reason="the parser and writer see the same bytes from every store")
def test_lone_surrogate_in_an_acl_is_inherited_as_stored(tmp_path, mount_bucket):
    """A folder made below one whose ACLs name a user with a lone surrogate inherits that
    ACL with the user's name as HSDS stored it, not as whatever the parser made of it."""
    bucket = make_bucket(tmp_path)
    folder = bucket / "home" / DOMAIN_JSON
    doc = json.loads(folder.read_text())
    doc["acls"]["test_user1"] = {"create": True, "read": True, "update": True,
                                 "delete": True, "readACL": True, "updateACL": True}
    doc["acls"]["nobody\udc80"] = {"read": True, "update": True}
    folder.write_text(json.dumps(doc))
    m = mount_bucket(bucket, *USER)
    os.mkdir(m.path("/home/sub"))
    assert m.unmount() == 0
    text = (bucket / "home" / "sub" / DOMAIN_JSON).read_text()
    assert json.loads(text)["acls"]["nobody\udc80"] == {
        k: k in ("read", "update")
        for k in ("create", "read", "update", "delete", "readACL", "updateACL")}, text
    assert '"nobody\\udc80": {' in text, text


# ---- names ----

def add_domain(bucket, rel):
    """A copy of the template domain object at key <rel>/.domain.json (rel str or bytes)."""
    d = os.path.join(os.fsencode(bucket), os.fsencode(rel))
    os.makedirs(d)
    with open(os.path.join(d, DOMAIN_JSON.encode()), "wb") as f:
        f.write(good_bytes())


NOT_UTF8 = "not UTF-8: an S3 key is a UTF-8 string, so no S3 bucket can hold this name"


@pytest.mark.parametrize("name", [
    pytest.param(b"bad\xffname.h5", id="invalid_utf8",
                 marks=pytest.mark.posix_only(reason=NOT_UTF8)),
    pytest.param(b"bad\xc0\xafname.h5", id="overlong_utf8",
                 marks=pytest.mark.posix_only(reason=NOT_UTF8)),
    pytest.param(b"bad\nname.h5", id="newline"),
    pytest.param(b"bad\x7fname.h5", id="del"),
    # XML 1.0 cannot hold it: S3 lists such a key only URL-encoded (encoding-type=url, which
    # h5osfs asks for); before, it made the whole folder's listing EIO on a real S3 server
    pytest.param(b"bad\x01name.h5", id="control",
                 marks=pytest.mark.not_on("s3", reason="s3rver ignores encoding-type=url and "
                                          "sends the key raw, which no XML parser takes"))])
def test_unusable_name_is_hidden(tmp_path, mount_bucket, name):
    bucket = make_bucket(tmp_path)
    add_domain(bucket, b"home/" + name)
    before = bucket_snapshot(bucket)
    m = mount_bucket(bucket, *USER)
    for _ in range(3):
        assert os.listdir(m.path("/home")) == ["good.h5"]
        assert os.listdir(os.fsencode(m.path("/home"))) == [b"good.h5"]
    assert_errno(errno.ENOENT, os.stat, os.path.join(os.fsencode(m.path("/home")), name))
    assert_errno(errno.ENOENT, os.stat, os.path.join(os.fsencode(m.path("/home")), name,
                                                     DOMAIN_JSON.encode()))
    # one line names the key (the log escapes the unusable bytes, so match around them)
    lines = [line for line in m.log().splitlines() if "home/bad" in line and "name.h5" in line]
    assert len(lines) == 1, m.log()
    assert_good_domain(m)
    assert m.unmount() == 0
    assert_unchanged(m, before)


def test_longest_name_is_shown(tmp_path, mount_bucket):
    """Names are limited to 255 bytes (the backing filesystem's limit too, so a longer name
    cannot be stored in a POSIX bucket at all); a 255-byte name, multi-byte characters
    included, is shown; a longer one is not found."""
    bucket = make_bucket(tmp_path)
    name = "é" * 124 + "x.h5"
    assert len(name.encode()) == 252
    name = name + "abc"
    assert len(name.encode()) == 255
    add_domain(bucket, f"home/{name}")
    m = mount_bucket(bucket, *USER)
    assert sorted(os.listdir(m.path("/home"))) == sorted(["good.h5", name])
    assert stat.S_ISREG(os.stat(m.path("/home") / name).st_mode)
    with pytest.raises(OSError) as info:
        os.stat(m.path("/home") / ("y" * 300))
    assert info.value.errno in (errno.ENOENT, errno.ENAMETOOLONG)
    assert m.log().count("hidden") == 0


def test_stray_keys_are_hidden(tmp_path, mount_bucket, backend):
    bucket = make_bucket(tmp_path)
    (bucket / "home" / "notes.txt").write_text("not a domain\n")
    (bucket / "notes.txt").write_text("not a domain\n")
    (bucket / "home" / "empty").mkdir()
    (bucket / "home" / "stray" / "sub").mkdir(parents=True)
    (bucket / "home" / "stray" / "sub" / "file.txt").write_text("x\n")
    (bucket / "home" / "summary").mkdir()
    (bucket / "home" / "summary" / ".info.json").write_text("{}")
    (bucket / "db").mkdir()
    add_domain(bucket, "db/hidden.h5")
    # on s3, home/stray/ and db/ are listed too, as AWS would
    list_like_aws(backend, lambda key, data: (bucket / key).write_bytes(data), "home/stray", "db")
    before = bucket_snapshot(bucket)
    m = mount_bucket(bucket, *USER)
    assert os.listdir(m.mnt) == ["home"]
    assert os.listdir(m.path("/home")) == ["good.h5"]
    for rel in ("/home/notes.txt", "/notes.txt", "/home/empty", "/home/stray",
                "/home/stray/sub", "/home/stray/sub/file.txt", "/home/summary", "/db",
                "/db/hidden.h5"):
        assert_errno(errno.ENOENT, os.stat, m.path(rel))
    assert_good_domain(m)
    assert m.unmount() == 0
    assert_unchanged(m, before)


def test_prefix_without_domain_object_is_a_directory(tmp_path, mount_bucket, backend):
    bucket = make_bucket(tmp_path)
    add_domain(bucket, "a/b/c.h5")
    list_like_aws(backend, lambda key, data: (bucket / key).write_bytes(data), "a", "a/b")
    doc, _ = template_domain()
    m = mount_bucket(bucket, *USER)
    assert sorted(os.listdir(m.mnt)) == ["a", "home"]
    assert os.listdir(m.path("/a")) == ["b"]
    assert os.listdir(m.path("/a/b")) == ["c.h5"]
    for rel in ("/a", "/a/b"):
        st = os.stat(m.path(rel))
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o555, rel
        assert_errno(errno.ENODATA, os.getxattr, m.path(rel), "user.h5osfs.owner")
    st = os.stat(m.path("/a/b/c.h5"))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644
    assert abs(st.st_mtime_ns - round(doc["lastModified"] * 1e9)) <= 1000
    assert os.getxattr(m.path("/a/b/c.h5"), "user.h5osfs.root") == doc["root"].encode()


def symlink_bucket(tmp_path):
    """A bucket with symlinks leading outside it: to /etc, to a directory holding a valid
    domain, to a domain directory, and a .domain.json that is a symlink to one outside."""
    bucket = make_bucket(tmp_path)
    outside = tmp_path / "outside"
    add_domain(outside, "x.h5")
    (bucket / "home" / "etc").symlink_to("/etc")
    (bucket / "home" / "dir").symlink_to(outside)
    (bucket / "home" / "dom.h5").symlink_to(outside / "x.h5")
    (bucket / "home" / "file.h5").mkdir()
    (bucket / "home" / "file.h5" / DOMAIN_JSON).symlink_to(outside / "x.h5" / DOMAIN_JSON)
    (bucket / "top").symlink_to(outside)
    return bucket


SYMLINKED = ["/home/etc", "/home/etc/passwd", "/home/dir", "/home/dir/x.h5", "/home/dom.h5",
             "/home/file.h5", "/top", "/top/x.h5"]


NO_SYMLINKS = "symlinks in the bucket directory: S3 has no symlinks (an upload would copy the file)"


@pytest.mark.posix_only(reason=NO_SYMLINKS)
def test_symlinks_are_not_followed(tmp_path, mount_bucket):
    bucket = symlink_bucket(tmp_path)
    before = bucket_snapshot(bucket)
    m = mount_bucket(bucket, *USER)
    assert os.listdir(m.mnt) == ["home"]
    assert os.listdir(m.path("/home")) == ["good.h5"]
    for rel in SYMLINKED:
        with pytest.raises(OSError):
            os.stat(m.path(rel))
        with pytest.raises(OSError):
            os.listdir(m.path(rel))
    assert m.proc.poll() is None
    assert_good_domain(m)
    assert m.unmount() == 0
    assert_unchanged(m, before)


@pytest.mark.posix_only(reason=NO_SYMLINKS)
def test_symlinks_are_hidden_like_other_stray_keys(tmp_path, mount_bucket):
    """What the listing hides, stat must not find: ENOENT, as for every other hidden key
    (not EIO, which says that the store failed)."""
    bucket = symlink_bucket(tmp_path)
    m = mount_bucket(bucket, *USER)
    assert os.listdir(m.path("/home")) == ["good.h5"]
    got = {}
    for rel in SYMLINKED:
        try:
            os.stat(m.path(rel))
            got[rel] = "found"
        except OSError as e:
            got[rel] = errno.errorcode[e.errno]
    assert got == {rel: "ENOENT" for rel in SYMLINKED}
