"""The command line: every mistake is exit status 1 with one line on stderr and nothing mounted;
-h and -V answer on stdout with status 0."""
import os
import re
import subprocess

import pytest

from conftest import BUCKET, REPO, h5osfs_bin, is_mounted


def run(*args):
    """h5osfs in the foreground (so that a wrongly accepted command line would block and time
    out instead of leaving a daemon behind)."""
    return subprocess.run([str(h5osfs_bin()), *map(str, args)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=10)


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path, monkeypatch):
    """The default cache_dir ($XDG_CACHE_HOME/h5osfs/<bucket's name>) below a fresh directory: a
    command line that gets as far as locking it must not meet another mount's lock."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture
def mnt(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    yield path
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", str(path)], timeout=10)
        pytest.fail(f"{path} was left mounted")


def assert_refused(result, mnt, *mentions):
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line of stderr, got {lines!r}"
    for text in mentions:
        assert str(text) in lines[0], (text, lines[0])
    assert result.stdout == ""
    if mnt is not None:
        assert not is_mounted(mnt)


def project_version():
    text = (REPO / "meson.build").read_text()
    return re.search(r"version\s*:\s*'([^']+)'", text).group(1)


def test_missing_bucket_dir(tmp_path, mnt):
    missing = tmp_path / "no-such-bucket"
    assert_refused(run("-f", missing, mnt), mnt, missing)


def test_bucket_is_a_file(tmp_path, mnt):
    file = tmp_path / "bucket-file"
    file.write_text("not a directory\n")
    assert_refused(run("-f", file, mnt), mnt, file)


def test_mountpoint_missing(tmp_path):
    missing = tmp_path / "no-such-mnt"
    assert_refused(run("-f", BUCKET, missing), None, missing)
    assert not missing.exists()


def test_mountpoint_is_a_file(tmp_path):
    file = tmp_path / "mnt-file"
    file.write_text("")
    assert_refused(run("-f", BUCKET, file), None, file)


def test_mountpoint_not_empty(mnt):
    (mnt / "keep").write_text("mine\n")
    assert_refused(run("-f", BUCKET, mnt), mnt, mnt)
    assert (mnt / "keep").read_text() == "mine\n"


def test_mountpoint_with_only_hidden_file_is_not_empty(mnt):
    (mnt / ".hidden").write_text("")
    assert_refused(run("-f", BUCKET, mnt), mnt, mnt)


@pytest.mark.parametrize("option", ["bogus_option", "ro,bogus_option"])
def test_unknown_option(mnt, option):
    assert_refused(run("-f", "-o", option, BUCKET, mnt), mnt, "bogus_option")


def test_unknown_dash_option(mnt):
    result = run("-f", "--bogus-flag", BUCKET, mnt)
    assert result.returncode == 1
    assert not is_mounted(mnt)


def test_no_arguments():
    result = run()
    assert_refused(result, None)


def test_only_bucket():
    assert_refused(run(BUCKET), None, "MOUNTPOINT")


def test_extra_argument(tmp_path, mnt):
    result = run("-f", BUCKET, mnt, tmp_path / "extra")
    assert result.returncode == 1
    assert not is_mounted(mnt)


@pytest.mark.parametrize("value", ["-1", "abc", "", "1e10", "nan", "inf", "5s"])
def test_bad_ttl(mnt, value):
    assert_refused(run("-f", "-o", f"ttl={value}", BUCKET, mnt), mnt, "ttl")


@pytest.mark.parametrize("value", ["12Q", "", "-1", "abc", "1KB", "99999999999T"])
def test_bad_cache_size(mnt, value):
    assert_refused(run("-f", "-o", f"cache_size={value}", BUCKET, mnt), mnt, "cache_size")


@pytest.mark.parametrize("opts", ["bucket_images=", "bucket_images=yes", "bucket_images=READ",
                                  "ro,bucket_images=write"])
def test_bad_bucket_images(mnt, opts):
    assert_refused(run("-f", "-o", opts, BUCKET, mnt), mnt, "bucket_images")


@pytest.mark.parametrize("opts", ["bucket_refs=", "bucket_refs=yes", "ro,bucket_refs=on"])
def test_bad_bucket_refs(mnt, opts):
    assert_refused(run("-f", "-o", opts, BUCKET, mnt), mnt, "bucket_refs")


@pytest.mark.parametrize("opts", ["paged_images=", "paged_images=1"])
def test_bad_paged_images(mnt, opts):
    assert_refused(run("-f", "-o", opts, BUCKET, mnt), mnt, "paged_images")


@pytest.mark.parametrize("opts", ["multipart_threshold=4M", "multipart_threshold=6G",
                                  "multipart_threshold=", "multipart_part_size=1M",
                                  "multipart_part_size=5368709121", "multipart_part_size=8X"])
def test_bad_multipart_sizes(mnt, opts):
    """S3's part limits (5 MiB to 5 GiB) bound both: a threshold under the smallest part would
    split objects S3 refuses to take in parts, one over 5 GiB would send PUTs S3 refuses."""
    name = opts.split("=")[0]
    assert_refused(run("-f", "-o", opts, BUCKET, mnt), mnt, name, "5M to 5G")


def test_empty_user(mnt):
    assert_refused(run("-f", "-o", "user=", BUCKET, mnt), mnt, "user")


@pytest.mark.parametrize("value, mention", [
    ("", "empty"), ("abc", "UID:NAME"), ("1001", "UID:NAME"), ("1001:", "1 to 255 bytes"),
    ("1001:alice:", "UID:NAME"), ("x:alice", "'x' is not a uid"), ("-5:alice", "not a uid"),
    ("4294967295:alice", "not a uid"), ("1001:alice:1001:bob", "uid 1001 is given twice"),
    ("1001:" + "n" * 256, "1 to 255 bytes"),
])
def test_bad_user_map(mnt, value, mention):
    assert_refused(run("-f", "-o", f"user_map={value}", BUCKET, mnt), mnt, "user_map", mention)


def test_user_map_of_the_mounting_user(mnt):
    """The mounting user's HSDS name is -o user=; mapping its uid as well would be ambiguous."""
    uid = os.getuid()
    assert_refused(run("-f", "-o", f"user_map={uid}:someone", BUCKET, mnt), mnt,
                   f"uid {uid} is the mounting user")


def test_empty_cache_dir(mnt):
    assert_refused(run("-f", "-o", "cache_dir=", BUCKET, mnt), mnt, "cache_dir")


def test_log_file_in_missing_directory(tmp_path, mnt):
    log = tmp_path / "no-such-dir" / "h5osfs.log"
    assert_refused(run("-f", "-o", f"log_file={log}", BUCKET, mnt), mnt, log)


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(flag):
    result = run(flag)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
    assert "user=" in result.stdout and "ttl=" in result.stdout
    for option in ("admin_user=", "cache_dir=", "cache_size=", "log_file=", "-o ro"):
        assert option in result.stdout, option


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag):
    result = run(flag)
    assert result.returncode == 0, result.stderr
    version = project_version()
    assert version == "0.1.0"
    assert f"h5osfs {version}" in result.stdout.splitlines()
