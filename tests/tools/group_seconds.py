#!/usr/bin/python3
"""Writes tests/integration/group_seconds.json from the JUnit XML of a plain pass run in one
process (`pytest --junitxml=F tests/integration`): the seconds each group (a module on a
backend, claims.py) took. The plain pass's two processes take the groups heaviest first, so
that they end together; a stale table costs balance only, never a test (an unknown group is
weighed as the median).

    tests/tools/group_seconds.py plain.xml > tests/integration/group_seconds.json
"""
import collections
import json
import re
import sys
import xml.etree.ElementTree as ET

BACKEND = re.compile(r"[\[-](posix|s3|rgw)[-\]]")


def main(path):
    seconds = collections.Counter()
    for case in ET.parse(path).iter("testcase"):
        module = case.get("classname").replace(".", "/") + ".py"
        backend = BACKEND.search(case.get("name"))
        seconds[f"{module}[{backend.group(1) if backend else '-'}]"] += float(case.get("time"))
    json.dump({k: round(v, 1) for k, v in sorted(seconds.items())}, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
