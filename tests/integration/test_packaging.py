"""The Debian package: built from a copy of the tree with dpkg-buildpackage, its contents
checked, then installed and used the ways packaging/README.md shows: `mount -t fuse.h5osfs`,
fstab lines (mount -T FSTAB MNT reads them as mount(8) reads /etc/fstab), and the
h5osfs@.service template's command lines. Each mount reads a domain with h5py and compares
its datasets with the source .h5 file the domain was loaded from.

Installing: `dpkg -i` runs inside a private mount namespace with overlays on /usr, /etc, /var,
/srv and /mnt (pkgroot.py), so the package's /usr/bin/h5osfs is where mount.fuse3 finds it
(the shell's default PATH: mount(8) gives helpers no PATH) while the machine, its dpkg
database and the binary the other tests run are left as they were, also when a test dies.

The package build takes a minute or two (the C unit tests are left to meson test:
DEB_BUILD_OPTIONS=nocheck); scripts/test.sh runs this module in its plain pass only.
"""
import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUCKET, DATA, REPO

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="dpkg -i and mount(8) need root")

SOURCE = DATA / "hsds-v2" / "source" / "sample1.h5"
DOMAIN = "home/test_user1/sample1.h5"     # only test_user1 may read it (no default entry)
PKGROOT = Path(__file__).with_name("pkgroot.py")


def copy_tree(dest):
    """The tree as it is in the work tree (tracked files and new ones git does not ignore),
    without build directories."""
    listing = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "-co",
                              "--exclude-standard"], capture_output=True, check=True).stdout
    for rel in filter(None, listing.decode().split("\0")):
        src = REPO / rel
        if src.is_file() or src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel, follow_symlinks=False)


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    for tool in ("dpkg-buildpackage", "dh", "unshare"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is missing: scripts/install-deps.sh installs it")
    top = tmp_path_factory.mktemp("pkg")
    src = top / "h5osfs"
    copy_tree(src)
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=2")
    build = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    debs = [p for p in top.glob("h5osfs_*.deb")]
    assert len(debs) == 1, list(top.iterdir())
    return debs[0]


def in_namespace(deb, work, scenario):
    """Runs pkgroot.py on the scenario in a mount namespace of its own; its JSON answer."""
    work.mkdir(parents=True, exist_ok=True)
    spec = work / "scenario.json"
    spec.write_text(json.dumps(dict(scenario, deb=str(deb), work=str(work))))
    done = subprocess.run(["unshare", "--mount", "--propagation", "private",
                           "/usr/bin/python3", str(PKGROOT), str(spec)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    lines = done.stdout.strip().splitlines()
    assert lines, f"pkgroot.py printed nothing (status {done.returncode}): {done.stderr}"
    result = json.loads(lines[-1])
    assert "error" not in result, result["error"] + "\n" + done.stderr[-2000:]
    assert done.returncode == 0, done.stderr
    return result


@pytest.fixture(scope="module")
def expected():
    """The source file's digest, as pkgroot.py takes it from the mounted domain."""
    import sys
    sys.path.insert(0, str(PKGROOT.parent))
    import pkgroot
    digest = pkgroot.domain_digest(SOURCE)
    assert len(digest) >= 6
    return digest


def assert_served_by_package(result, source, expected):
    # The kernel's source field is the bucket (h5osfs sets fsname=, see name_the_mount).
    assert result["entry"] == ["fuse.h5osfs", source], (result["entry"], source)
    assert source in result["daemon"]["argv"], result["daemon"]["argv"]
    assert result["daemon"]["exe"] == "/usr/bin/h5osfs"
    assert result["digest"] == expected


def test_package_contents(deb, tmp_path):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    paths = {line.split()[5] for line in listing.splitlines()}
    for p in ("./usr/bin/h5osfs", "./usr/share/man/man1/h5osfs.1.gz",
              "./lib/systemd/system/h5osfs@.service"):
        assert p in paths, listing
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                             text=True, check=True).stdout
    # mount -t fuse.h5osfs needs fuse3's mount.fuse (mount(8) tries mount.fuse.h5osfs, then
    # mount.fuse) and fusermount3; libfuse3 comes from the binary's shared libraries.
    assert "fuse3" in [d.strip().split()[0] for d in depends.split(",")], depends
    assert "libfuse3-3" in depends and "libhdf5" in depends, depends
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    unit = (tmp_path / "lib/systemd/system/h5osfs@.service").read_text()
    assert "ExecStart=/usr/bin/h5osfs " in unit
    assert "/usr/local" not in unit
    man = gzip.decompress((tmp_path / "usr/share/man/man1/h5osfs.1.gz").read_bytes()).decode()
    assert man == (REPO / "doc" / "h5osfs.1").read_text()
    assert ".SH MOUNT AND FSTAB" in man


def test_mount_t_fuse_h5osfs(deb, tmp_path, expected):
    """The command line packaging/README.md starts with, as root."""
    mnt = tmp_path / "mnt"
    r = in_namespace(deb, tmp_path / "ns", {
        "kind": "mount", "mountpoint": str(mnt), "read": DOMAIN,
        "command": ["mount", "-t", "fuse.h5osfs", str(BUCKET), str(mnt),
                    "-o", "ro,user=test_user1"]})
    assert_served_by_package(r, str(BUCKET), expected)
    assert "user=test_user1" in r["daemon"]["argv"][-1]
    assert r["daemon_gone"], "the daemon did not exit at umount"


def test_fstab_line_local_bucket(deb, tmp_path, expected):
    """The README's local fstab line: mount(8)'s own options (noauto, nofail, _netdev,
    x-systemd.*) never reach h5osfs, and hsds_user= names the HSDS user where user= would be
    mount(8)'s "user" keyword."""
    mnt = tmp_path / "mnt"
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{BUCKET} {mnt} fuse.h5osfs noauto,nofail,_netdev,"
                     "x-systemd.automount,x-systemd.idle-timeout=600,ro,allow_other,"
                     "hsds_user=test_user1 0 0\n")
    r = in_namespace(deb, tmp_path / "ns", {
        "kind": "mount", "mountpoint": str(mnt), "read": DOMAIN,
        "command": ["mount", "-T", str(fstab), str(mnt)]})
    assert_served_by_package(r, str(BUCKET), expected)
    opts = r["daemon"]["argv"][-1].split(",")
    assert "hsds_user=test_user1" in opts
    assert not {"noauto", "nofail", "_netdev"} & set(opts), opts
    assert not [o for o in opts if o.startswith("x-")], opts
    assert r["daemon_gone"]


def test_fstab_line_s3_profile(deb, tmp_path, s3_bucket, expected):
    """The README's S3 fstab line: an s3:// source through mount(8), the keys in a profile of
    root's ~/.aws/credentials (mount.fuse3 sets HOME=/root for a daemon started without one,
    as systemd starts mounts)."""
    srv = s3_bucket.server
    mnt = tmp_path / "mnt"
    fstab = tmp_path / "fstab"
    fstab.write_text(f"s3://{s3_bucket.name}/ {mnt} fuse.h5osfs noauto,_netdev,"
                     "x-systemd.automount,ro,hsds_user=test_user1,profile=hsds,"
                     f"endpoint={srv.endpoint} 0 0\n")
    creds = (f"[hsds]\naws_access_key_id = {srv.access_key}\n"
             f"aws_secret_access_key = {srv.secret_key}\n")
    r = in_namespace(deb, tmp_path / "ns", {
        "kind": "mount", "mountpoint": str(mnt), "read": DOMAIN,
        "root_files": {".aws/credentials": creds},
        "command": ["mount", "-T", str(fstab), str(mnt)]})
    assert_served_by_package(r, f"s3://{s3_bucket.name}/", expected)
    assert r["daemon"]["home"] == "/root"
    assert r["daemon_gone"]


def unit_run(deb, tmp_path, instance, env_file=None, files=None, binds=None):
    files = dict(files or {})
    if env_file is not None:
        files[f"/etc/h5osfs/{instance}.env"] = env_file
    return in_namespace(deb, tmp_path / "ns", {
        "kind": "unit", "instance": instance, "read": DOMAIN, "files": files,
        "binds": binds or {}})


def assert_unit_served(r, source, expected):
    assert_served_by_package(r, source, expected)
    assert r["argv"][0] == "/usr/bin/h5osfs"
    assert r["exit_status"] == 0, r["log"]
    assert "HOME" not in r["env_keys"]


def test_unit_local_bucket(deb, tmp_path, expected):
    """The default source /srv/hsds/INSTANCE; the env file only changes the options."""
    r = unit_run(deb, tmp_path, "hsdstest",
                 env_file="H5OSFS_OPTIONS=ro,allow_other,hsds_user=test_user1\n",
                 binds={"/srv/hsds/hsdstest": str(BUCKET)})
    assert_unit_served(r, "/srv/hsds/hsdstest", expected)
    assert "cache_dir=/var/cache/h5osfs/hsdstest" in r["argv"][3]


def test_unit_s3_keys_in_env_file(deb, tmp_path, s3_bucket, expected):
    srv = s3_bucket.server
    r = unit_run(deb, tmp_path, "s3test", env_file=(
        f"H5OSFS_SOURCE=s3://{s3_bucket.name}\n"
        f"H5OSFS_OPTIONS=ro,hsds_user=test_user1,endpoint={srv.endpoint}\n"
        f"AWS_ACCESS_KEY_ID={srv.access_key}\nAWS_SECRET_ACCESS_KEY={srv.secret_key}\n"))
    assert_unit_served(r, f"s3://{s3_bucket.name}", expected)


def test_unit_s3_credentials_file(deb, tmp_path, s3_bucket, expected):
    srv = s3_bucket.server
    creds = "/etc/h5osfs/s3test.credentials"
    r = unit_run(deb, tmp_path, "s3test", env_file=(
        f"H5OSFS_SOURCE=s3://{s3_bucket.name}\n"
        f"H5OSFS_OPTIONS=ro,hsds_user=test_user1,endpoint={srv.endpoint}\n"
        f"AWS_SHARED_CREDENTIALS_FILE={creds}\nAWS_PROFILE=hsds\n"),
        files={creds: f"[hsds]\naws_access_key_id = {srv.access_key}\n"
                      f"aws_secret_access_key = {srv.secret_key}\n"})
    assert_unit_served(r, f"s3://{s3_bucket.name}", expected)
