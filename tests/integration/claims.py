"""Two pytest processes sharing one run's tests, each taking the next group nobody has taken.

scripts/test.sh runs the plain pass as two processes with `--claims DIR:first` and
`--claims DIR:last`: one walks the groups from the first, the other from the last, and each
runs a group only if it is the first to claim it (a file made with O_EXCL in DIR), so they
meet wherever the time of the groups puts the middle, with no table of test times to keep.
Most of a test's time is spent waiting on mounts, servers and child processes, so two
processes finish the pass in a little more than half of its time on two cores.

A group is a module's tests on one backend ([posix], [s3], [rgw]): what shares module
fixtures (the backend parameter is module-scoped). Each process collects every test, claims
every group it walks through, and runs its own in collection order; a group claimed by the
other is not run here and not reported here. The summary says how many groups each ran. A
process that stops early leaves claimed groups unrun and exits non-zero, so nothing is lost
silently. Without --claims nothing changes.
"""
import os
from pathlib import Path

import pytest


def add_option(parser):
    parser.getgroup("h5osfs").addoption(
        "--claims", metavar="DIR:first|last",
        help="share the tests with another process given the same DIR: run the groups (a "
        "module on a backend) this process claims first, walking from the first or the last")


def parse(value):
    directory, sep, end = value.rpartition(":")
    if not sep or not directory or end not in ("first", "last"):
        raise pytest.UsageError(f"--claims {value}: DIR:first or DIR:last")
    return Path(directory), end == "last"


def group_key(item):
    backend = getattr(getattr(item, "callspec", None), "params", {}).get("backend")
    return f"{item.nodeid.split('::', 1)[0]}[{backend or '-'}]"


def groups_of(items):
    """[[items of a group], ...] in the order of their first item."""
    groups = {}
    for item in items:
        groups.setdefault(group_key(item), []).append(item)
    return list(groups.values())


def claim(directory, key):
    """True when this process is the first to claim key."""
    name = key.replace("/", "%").replace("::", "%%")
    try:
        fd = os.open(directory / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)
    return True


def claimed_items(groups, take):
    """(item, the next item this process runs) for every item of the groups take() grants.
    The next group is claimed before the last item of a group runs: pytest tears down after
    an item what the next one it runs does not share, so it must know that item."""
    pending = None
    for group in groups:
        if not take(group):
            continue
        for item in group:
            if pending is not None:
                yield pending, item
            pending = item
    if pending is not None:
        yield pending, None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    value = session.config.getoption("--claims")
    if not value or session.config.option.collectonly or session.testsfailed:
        return None         # pytest's own loop (which stops on collection errors)
    directory, from_last = parse(value)
    directory.mkdir(parents=True, exist_ok=True)
    groups = groups_of(session.items)
    walk = list(reversed(groups)) if from_last else groups
    ran = []

    def take(group):
        mine = claim(directory, group_key(group[0]))
        if mine:
            ran.append(group_key(group[0]))
        return mine

    for item, nextitem in claimed_items(walk, take):
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
    session.config._h5osfs_claims = (len(ran), len(groups), str(directory))
    return True


def summary(terminalreporter, config):
    claims = getattr(config, "_h5osfs_claims", None)
    if claims is not None:
        ran, total, directory = claims
        terminalreporter.write_line(
            f"--claims: this process ran {ran} of the {total} groups (a module on a backend); "
            f"the process sharing {directory} ran the others")
