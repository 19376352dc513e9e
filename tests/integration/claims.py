"""Pytest processes sharing one run's tests, each taking the next group nobody has taken.

scripts/test.sh runs the plain pass as two processes with the same `--claims DIR`, and a third
joins when the sanitizer pass ends. All walk the groups in one order, heaviest first, and each
runs a group only if it is the first to claim it (a file made with O_EXCL in DIR): whichever is free takes the next, so they end
within about the time of the lightest groups of each other. The weights are the seconds each
group took in a measured run (group_seconds.json, written by tests/tools/group_seconds.py);
a group not in it weighs the median. A stale table costs balance only: every group is run
once whatever the weights. Most of a test's time is spent waiting on mounts, servers and
child processes, so two processes finish the pass in little more than half of its time.

A group is a module's tests on one backend ([posix], [s3], [rgw]): what shares module
fixtures (the backend parameter is module-scoped). Each process collects every test, tries to
claim every group in the walk, and runs the items of its own in collection order; a group
claimed by another is neither run nor reported here (pytest's progress percentages still
count every collected test, so each process ends short of 100%). The summary says how many
groups each ran. A process that stops early leaves claimed groups unrun and exits non-zero,
so nothing is lost silently. Without --claims nothing changes.
"""
import json
import os
import statistics
from pathlib import Path

import pytest


WEIGHTS = Path(__file__).with_name("group_seconds.json")


def add_option(parser):
    parser.getgroup("h5osfs").addoption(
        "--claims", metavar="DIR",
        help="share the tests with other processes given the same DIR: run the groups (a "
        "module on a backend) this process claims first, heaviest first")


def heaviest_first(groups):
    """groups, the heaviest first by group_seconds.json (ties: collection order)."""
    weights = json.loads(WEIGHTS.read_text()) if WEIGHTS.exists() else {}
    median = statistics.median(weights.values()) if weights else 0.0
    return sorted(groups, key=lambda g: -weights.get(group_key(g[0]), median))


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
    try:
        fd = os.open(directory / key.replace("/", "%"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
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
    directory = Path(value)
    directory.mkdir(parents=True, exist_ok=True)
    groups = groups_of(session.items)
    walk = heaviest_first(groups)
    ran = 0

    def take(group):
        nonlocal ran
        mine = claim(directory, group_key(group[0]))
        ran += mine
        return mine

    for item, nextitem in claimed_items(walk, take):
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
    session.config._h5osfs_claims = (ran, len(groups), str(directory))
    return True


def summary(terminalreporter, config):
    claims = getattr(config, "_h5osfs_claims", None)
    if claims is not None:
        ran, total, directory = claims
        terminalreporter.write_line(
            f"--claims: this process ran {ran} of the {total} groups (a module on a backend); "
            f"the processes sharing {directory} ran the others")
