#!/usr/bin/python3
"""Rewrite #include lines that name a header by a path it no longer has.

Headers live in include/h5osfs/MODULE/ (one folder per library, doc/design.md "Layers").
A branch written before that, merged after it, still includes "h5osfs/NAME.h", or a private
header by its bare name from a folder it has left ("ingest_int.h" in src/write). For every
tracked C file this rewrites

    #include "h5osfs/NAME.h"   -> "h5osfs/MODULE/NAME.h"
    #include "NAME.h"          -> "h5osfs/MODULE/NAME.h"  (no NAME.h beside the file)
    #include "../../src/.../NAME.h" -> "h5osfs/MODULE/NAME.h"

when exactly one include/h5osfs/*/NAME.h exists; anything else is left alone. Nothing else
in a file changes, so it can run on a merge before it is committed.

    tools/fix_includes.py [--check]    (--check: list what would change, exit 1 if anything)
"""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^(\s*#\s*include\s+")([^"]+)(")', re.M)


def module_headers(root):
    """{NAME.h: [MODULE, ...]} of include/h5osfs/MODULE/NAME.h."""
    found = {}
    top = os.path.join(root, "include", "h5osfs")
    for module in sorted(os.listdir(top)):
        folder = os.path.join(top, module)
        if os.path.isdir(folder):
            for name in os.listdir(folder):
                found.setdefault(name, []).append(module)
    return found


def new_name(path, name, headers, root):
    base = os.path.basename(name)
    if len(headers.get(base, [])) != 1:
        return None
    target = f"h5osfs/{headers[base][0]}/{base}"
    if name == target:
        return None
    if name == f"h5osfs/{base}" and not os.path.exists(os.path.join(root, "include", name)):
        return target
    beside = os.path.join(os.path.dirname(os.path.join(root, path)), name)
    if (name == base or name.startswith("../")) and not os.path.exists(beside):
        return target
    return None


def main():
    check = "--check" in sys.argv[1:]
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True, text=True).stdout.strip()
    headers = module_headers(root)
    files = subprocess.run(["git", "ls-files", "*.c", "*.h"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    changed = []
    for path in files:
        with open(os.path.join(root, path)) as f:
            text = f.read()

        def rewrite(m):
            name = new_name(path, m.group(2), headers, root)
            return m.group(1) + name + m.group(3) if name else m.group(0)
        new = INCLUDE.sub(rewrite, text)
        if new != text:
            changed.append(path)
            if not check:
                with open(os.path.join(root, path), "w") as f:
                    f.write(new)
    for path in changed:
        print(("would rewrite " if check else "rewrote ") + path)
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
