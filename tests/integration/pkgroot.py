"""Runs one mount of the installed h5osfs package in a private mount namespace, so that the
machine itself is left as it was: test_packaging.py starts it as

    unshare --mount --propagation private /usr/bin/python3 pkgroot.py SCENARIO.json

Inside, /usr, /etc, /var, /srv and /mnt get a writable overlay (upper layers in the scenario's
work directory), `dpkg -i` installs the .deb into them (so /usr/bin/h5osfs, the unit and dpkg's
database exist only here), and /root is a directory of the work directory (mount.fuse3 gives a
daemon without HOME /root: its ~/.aws and ~/.cache). Then the scenario mounts the bucket
- "mount": with mount(8) and the arguments given (mount -t fuse.h5osfs ..., or mount -T FSTAB
  MNT for fstab lines), which runs fuse3's mount.fuse helper, which runs `h5osfs` from the
  shell's default PATH; or
- "unit": with the command lines of the installed h5osfs@.service for an instance, run as
  systemd would run them (see Unit), where systemd is not PID 1;
reads one domain with h5py, unmounts, and prints one JSON object: what was mounted, by which
binary, a digest of the domain's datasets, and how the daemon ended. Anything that fails
unmounts, stops the daemon and prints {"error": ...} with exit status 1.
"""
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

OVERLAID = ("/usr", "/etc", "/var", "/srv", "/mnt")
UNIT_DIR = Path("/lib/systemd/system")
# What systemd gives a system service without User=: this PATH and no HOME.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, **kw)


def install(deb, work):
    for d in OVERLAID:
        up, wk = work / "overlay" / d.strip("/"), work / "overlay" / (d.strip("/") + ".work")
        up.mkdir(parents=True)
        wk.mkdir()
        run(["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={d},upperdir={up},workdir={wk}", d])
    home = work / "root"
    home.mkdir(exist_ok=True)
    run(["mount", "--bind", str(home), "/root"])
    run(["dpkg", "--log=/dev/null", "--no-triggers", "-i", str(deb)])


def mount_entry(mnt):
    """(fstype, source) of the mount on mnt, or None."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, right = line.split(" - ", 1)
        if left.split()[4] == str(mnt):
            fstype, source = right.split()[:2]
            return fstype, source
    return None


def wait_mounted(mnt, proc=None, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if mount_entry(mnt):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the daemon exited with {proc.returncode} before mounting")
        time.sleep(0.1)
    raise RuntimeError(f"{mnt} not mounted after {timeout} s")


def daemon_of(mnt):
    """The pid of the h5osfs serving mnt (its command line names the mountpoint)."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"h5osfs" and str(mnt).encode() in argv:
            return int(p.name)
    return None


def describe_daemon(pid):
    return {"exe": os.readlink(f"/proc/{pid}/exe"),
            "argv": [a.decode() for a in
                     Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]],
            "home": _environ(pid).get("HOME")}


def _environ(pid):
    env = {}
    for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        if b"=" in item:
            k, v = item.decode(errors="replace").split("=", 1)
            env[k] = v
    return env


def wait_gone(pid, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.1)
    return False


def domain_digest(path):
    """{dataset: sha256 of its shape and values}, references left out."""
    import h5py
    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and not h5py.check_dtype(ref=obj.dtype):
            if obj.dtype.names and any(h5py.check_dtype(ref=obj.dtype[n])
                                       for n in obj.dtype.names):
                return
            value = obj[()]
            text = repr((obj.shape, value.tolist() if hasattr(value, "tolist") else value))
            out[name] = hashlib.sha256(text.encode()).hexdigest()
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return out


class Unit:
    """The parts of a systemd service file this package's unit uses, run as systemd runs them:
    specifiers %i, %I and %%; Environment= (quoted assignments) then EnvironmentFile= (a
    leading '-': may be missing), later ones overriding; CacheDirectory=; Exec*= lines split
    as systemd splits them, "${VAR}" replaced inside a word and a word "$VAR" split at
    whitespace, a leading '-' ignoring the command's failure. Anything else in [Service]
    that would change how the commands run is refused, so a unit that grows one fails the
    test instead of being run differently from systemd."""

    KNOWN = {"Type", "Environment", "EnvironmentFile", "CacheDirectory", "CacheDirectoryMode",
             "ExecStartPre", "ExecStart", "ExecStop", "ExecStopPost", "Restart"}

    def __init__(self, path, instance):
        self.instance = instance
        self.service = {}
        section = None
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            key, value = (s.strip() for s in line.split("=", 1))
            if section == "[Service]":
                if key not in self.KNOWN:
                    raise RuntimeError(f"the emulation does not know {key}=")
                self.service.setdefault(key, []).append(self.specifiers(value))
        if self.service.get("Type", ["simple"]) != ["simple"]:
            raise RuntimeError(f"Type={self.service['Type']}: only simple is emulated")
        self.env = {"PATH": SYSTEMD_PATH}
        for assignments in self.service.get("Environment", []):
            for a in shlex.split(assignments):
                k, v = a.split("=", 1)
                self.env[k] = v
        for name in self.service.get("EnvironmentFile", []):
            optional = name.startswith("-")
            path = Path(name.lstrip("-"))
            if not path.exists():
                if optional:
                    continue
                raise RuntimeError(f"EnvironmentFile {path} is missing")
            for line in path.read_text().splitlines():
                line = line.strip()
                if line and line[0] not in "#;":
                    k, v = line.split("=", 1)
                    self.env[k.strip()] = " ".join(shlex.split(v))

    def specifiers(self, value):
        def one(m):
            spec = m.group(1)
            if spec == "%":
                return "%"
            if spec in "iI":
                return self.instance
            raise RuntimeError(f"specifier %{spec} is not emulated")
        return re.sub(r"%(.)", one, value)

    def command(self, line):
        """(argv, failure_ignored)."""
        ignore = line.startswith("-")
        line = line.lstrip("-")
        if line[:1] in "@:+!":
            raise RuntimeError(f"prefix {line[0]} is not emulated")
        argv = []
        for word in shlex.split(line):
            m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
            if m:
                argv += self.env.get(m.group(1), "").split()
                continue
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                               lambda v: self.env.get(v.group(1), ""), word))
        return argv, ignore

    def run_each(self, key):
        for line in self.service.get(key, []):
            argv, ignore = self.command(line)
            rc = subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL,
                                capture_output=True, timeout=60).returncode
            if rc != 0 and not ignore:
                raise RuntimeError(f"{key} {argv} exited with {rc}")

    def make_cache_directories(self):
        mode = int(self.service.get("CacheDirectoryMode", ["0755"])[0], 8)
        for names in self.service.get("CacheDirectory", []):
            for name in names.split():
                d = Path("/var/cache") / name
                d.mkdir(parents=True, exist_ok=True)
                d.chmod(mode)


def mount_with_mount8(s, work):
    mnt = Path(s["mountpoint"])
    mnt.mkdir(parents=True, exist_ok=True)
    done = run(s["command"], env=s.get("env") or {})
    wait_mounted(mnt)
    pid = daemon_of(mnt)
    result = {"mount_stderr": done.stderr}
    try:
        result.update(describe(mnt, pid, s["read"]))
    finally:
        run(["umount", str(mnt)])
    result["daemon_gone"] = wait_gone(pid) if pid else None
    return result


def describe(mnt, pid, read):
    return {"entry": mount_entry(mnt), "daemon": describe_daemon(pid) if pid else None,
            "digest": domain_digest(mnt / read)}


def mount_with_unit(s, work):
    for path, text in s.get("files", {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
        Path(path).chmod(0o600)
    unit = Unit(UNIT_DIR / "h5osfs@.service", s["instance"])
    unit.make_cache_directories()
    unit.run_each("ExecStartPre")
    argv, _ = unit.command(unit.service["ExecStart"][0])
    log = open(work / "unit-daemon.log", "w")
    proc = subprocess.Popen(argv, env=unit.env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
    mnt = Path(argv[-1])
    result = {"argv": argv, "env_keys": sorted(unit.env)}
    try:
        wait_mounted(mnt, proc)
        result.update(describe(mnt, proc.pid, s["read"]))
        unit.run_each("ExecStop")
        result["exit_status"] = proc.wait(timeout=20)
        unit.run_each("ExecStopPost")
    finally:
        if proc.poll() is None:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
            proc.kill()
            proc.wait()
        result["log"] = (work / "unit-daemon.log").read_text()[-4000:]
    return result


def cleanup_mounts(mountpoints):
    for mnt in mountpoints:
        pid = daemon_of(mnt)
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        if pid:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def main():
    s = json.loads(Path(sys.argv[1]).read_text())
    work = Path(s["work"])
    try:
        install(Path(s["deb"]), work)
        for path, text in s.get("root_files", {}).items():
            p = work / "root" / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        for target, source in s.get("binds", {}).items():
            Path(target).mkdir(parents=True, exist_ok=True)
            run(["mount", "--bind", source, target])
        result = (mount_with_unit if s["kind"] == "unit" else mount_with_mount8)(s, work)
    except Exception as e:  # everything is reported to the test, which fails on it
        detail = getattr(e, "stderr", "") or ""
        log = work / "unit-daemon.log"
        if log.exists():
            detail += "\ndaemon's output: " + log.read_text()[-2000:]
        cleanup_mounts([s.get("mountpoint") or f"/mnt/hdf/{s.get('instance')}"])
        print(json.dumps({"error": f"{type(e).__name__}: {e} {detail}".strip()}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
