#!/usr/bin/python3
"""The layering the build declares is the one the code has (doc/design.md, "Layers").

meson.build passes, for every static library of the project, its layer and the libraries it
links (link_with):

    layering.py LAYER... -- --lib LAYER LIB.a [LINKED.a...] [SOURCE.c...] --lib ...

where the LAYERs before "--" are the layers from the bottom up. With nm, each library's calls
into the project are read off its objects (the symbols they use and another library of the
project defines), and the test fails, naming the library and the symbols, when

- a library calls into one it does not link (the build would only link by luck of the order);
- a library links one that sits in a higher layer (an upward call);
- a library links one it calls nothing of (a declared dependency that is not real).

The tree shows the libraries: library NAME (libh5osfs_NAME.a) is the folder src/NAME/ of the
source tree, and the test fails, naming the file, when

- a source file of a library lies outside that library's folder (src/NAME/ and the folders
  below it);
- a folder holds source files of two libraries.

Symbols no library of the project defines come from system libraries and are not checked
here: linking the programs checks them.

Inside a library, "--one-way LIB LOWER UPPER" (after the libraries) says that source file
LOWER.c of LIB calls nothing UPPER.c defines (UPPER calls LOWER, never the reverse): the test
fails, naming the symbols, when it does. It keeps a broken cycle broken (store: s3.c calls
s3_multipart.c, which calls nothing of s3.c). "*" for LOWER is every other file of LIB (UPPER
is called by none of them: it only calls, as ingest.c runs the steps of an ingest); "*" for
UPPER is every other file too (LOWER calls none of them: a leaf every file may use).

Files of a library that call each other round (A calls B, ... calls A: a strongly connected
group of the graph "A calls B" of its objects) are a cycle. "--cycle LIB FILE,FILE,..." lists a
cycle that is still there, and the test fails on every other: a new cycle, a listed one that
grew, and a listed one that shrank or is gone (list what remains, so the list only shrinks).
To see the cycles of built libraries and the calls that make them:

    tests/layering.py --cycles build/src/*/libh5osfs_*.a
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def name_of(path):
    """libh5osfs_image.a -> image"""
    base = os.path.basename(path)
    for prefix in ("libh5osfs_", "lib"):
        if base.startswith(prefix):
            base = base[len(prefix):]
            break
    return base[:-2] if base.endswith(".a") else base


def symbols(path, *flags):
    nm = os.environ.get("NM", "nm")
    out = subprocess.run([nm, "--format=posix", *flags, path], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        # "name type [value size]"; thin archives also print "archive[member]:" lines
        if len(fields) >= 2 and not fields[0].endswith(":"):
            names.add(fields[0])
    return names


def member_symbols(path, *flags):
    """{object file name: symbols} of an archive, as symbols() gives them for the whole."""
    nm = os.environ.get("NM", "nm")
    out = subprocess.run([nm, "--format=posix", *flags, path], check=True,
                         capture_output=True, text=True).stdout
    members, current = {}, None
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 1 and fields[0].endswith("]:"):
            current = os.path.basename(fields[0][fields[0].rindex("[") + 1:-2])
            members[current] = set()
        elif len(fields) >= 2 and current is not None:
            members[current].add(fields[0])
    return members


def parse_rules(tokens):
    """["--one-way", LIB, LOWER, UPPER, "--cycle", LIB, "A,B", ...] ->
    ([(LIB, LOWER, UPPER)], {LIB: [frozenset({A, B})]})."""
    rules, cycles, i = [], {}, 0
    while i < len(tokens):
        if tokens[i] == "--one-way" and len(tokens) >= i + 4:
            rules.append(tuple(tokens[i + 1:i + 4]))
            i += 4
        elif tokens[i] == "--cycle" and len(tokens) >= i + 3:
            cycles.setdefault(tokens[i + 1], []).append(frozenset(tokens[i + 2].split(",")))
            i += 3
        else:
            sys.exit("layering.py: expected --one-way LIB LOWER UPPER or --cycle LIB FILE,FILE..., "
                     f"got {' '.join(tokens[i:i + 4])}")
    return rules, cycles


def stem_of(member):
    """ingest_base.c.o -> ingest_base"""
    return member[:-len(".c.o")] if member.endswith(".c.o") else member


def one_way_pairs(lib, lower, upper, used, defined):
    """The (LOWER, UPPER) object pairs a rule names, "*" standing for every other object."""
    stems = sorted({stem_of(m) for m in used} | {stem_of(m) for m in defined})
    for stem in (lower, upper):
        if stem != "*" and stem not in stems:
            return None, f"--one-way {lib} {lower} {upper}: no object {stem}.c in {lib}"
    if lower == "*" and upper == "*":
        return None, f"--one-way {lib} * *: name one of the two files"
    lows = [s for s in stems if s != upper] if lower == "*" else [lower]
    ups = [s for s in stems if s != lower] if upper == "*" else [upper]
    return [(low, up) for low in lows for up in ups], None


def check_one_way(libs, rules):
    paths = {name_of(lib["path"]): lib["path"] for lib in libs}
    problems = []
    for lib, lower, upper in rules:
        if lib not in paths:
            problems.append(f"--one-way {lib} {lower} {upper}: no library {lib}")
            continue
        defined = {stem_of(m): s for m, s in
                   member_symbols(paths[lib], "--defined-only", "--extern-only").items()}
        used = {stem_of(m): s for m, s in member_symbols(paths[lib], "--undefined-only").items()}
        pairs, error = one_way_pairs(lib, lower, upper, used, defined)
        if error:
            problems.append(error)
            continue
        for low, up in pairs:
            back = sorted(used.get(low, set()) & defined.get(up, set()))
            if back:
                problems.append(f"{lib}: {low}.c calls {up}.c, which is to call it, not be "
                                f"called (--one-way {lower} {upper}): {' '.join(back)}")
    return problems


def parse(argv):
    if "--" not in argv:
        sys.exit("usage: layering.py LAYER... -- --lib LAYER LIB.a [LINKED.a...] [SOURCE.c...] ... "
                 "[--one-way LIB LOWER UPPER]... [--cycle LIB FILE,FILE...]...\n"
                 "       layering.py --cycles LIB.a...")
    split = argv.index("--")
    layers, rest = argv[:split], argv[split + 1:]
    tail = min([rest.index(o) for o in ("--one-way", "--cycle") if o in rest] + [len(rest)])
    rest, (rules, cycles) = rest[:tail], parse_rules(rest[tail:])
    libs = []
    for token in rest:
        if token == "--lib":
            libs.append({"layer": None, "path": None, "links": [], "sources": []})
        elif not libs:
            sys.exit(f"layering.py: '{token}' before the first --lib")
        elif libs[-1]["layer"] is None:
            if token not in layers:
                sys.exit(f"layering.py: unknown layer '{token}' (layers: {' '.join(layers)})")
            libs[-1]["layer"] = token
        elif libs[-1]["path"] is None:
            libs[-1]["path"] = token
        elif token.endswith(".c"):
            libs[-1]["sources"].append(os.path.relpath(os.path.realpath(token), ROOT))
        else:
            libs[-1]["links"].append(name_of(token))
    return layers, libs, rules, cycles


def check(layers, libs):
    rank = {}
    defined, used = {}, {}
    for lib in libs:
        name = name_of(lib["path"])
        rank[name] = layers.index(lib["layer"])
        defined[name] = symbols(lib["path"], "--defined-only", "--extern-only")
        used[name] = symbols(lib["path"], "--undefined-only") - defined[name]
    owner = {}
    for name, syms in defined.items():
        for sym in syms:
            owner.setdefault(sym, name)
    problems = []
    for lib in libs:
        name = name_of(lib["path"])
        calls = {}
        for sym in sorted(used[name]):
            if sym in owner:
                calls.setdefault(owner[sym], []).append(sym)
        for callee, syms in sorted(calls.items()):
            if callee not in lib["links"]:
                problems.append(f"{name} calls {callee} without linking it: {' '.join(syms)}")
        for linked in lib["links"]:
            if linked not in rank:
                problems.append(f"{name} links {linked}, which is not in the layering")
            elif rank[linked] > rank[name]:
                problems.append(f"{name} ({layers[rank[name]]}) links {linked}, a layer above "
                                f"it ({layers[rank[linked]]}): an upward call")
            elif linked not in calls:
                problems.append(f"{name} links {linked} but calls nothing of it")
    return problems


def check_folders(libs):
    """Each library's sources in its own folder src/NAME/, no folder shared by two libraries."""
    problems = []
    owners = {}   # folder -> {library: [its files there]}
    for lib in libs:
        name = name_of(lib["path"])
        home = os.path.join("src", name)
        for source in lib["sources"]:
            if os.path.commonpath([home, source]) != home:
                problems.append(f"{name}: {source} lies outside {home}/, the folder of library "
                                f"{name} (meson.build lists it there)")
            folder = os.path.dirname(source)
            owners.setdefault(folder, {}).setdefault(name, []).append(os.path.basename(source))
    for folder, by_lib in sorted(owners.items()):
        if len(by_lib) > 1:
            held = "; ".join(f"{name}: {' '.join(files)}" for name, files in sorted(by_lib.items()))
            problems.append(f"{folder}/ holds sources of {len(by_lib)} libraries ({held}): "
                            "one folder per library")
    return problems


def file_calls(path):
    """{file: {file it calls: [symbols]}} of the objects of library path (stems, no ".c.o")."""
    defined = {stem_of(m): s for m, s in
               member_symbols(path, "--defined-only", "--extern-only").items()}
    used = {stem_of(m): s for m, s in member_symbols(path, "--undefined-only").items()}
    calls = {}
    for caller in sorted(set(defined) | set(used)):
        calls[caller] = {}
        for callee, syms in sorted(defined.items()):
            met = used.get(caller, set()) & syms
            if callee != caller and met:
                calls[caller][callee] = sorted(met)
    return calls


def cycles_of(calls):
    """The groups of two or more files that call each other round, each a frozenset."""
    reach = {}
    for start in calls:
        seen, todo = set(), [start]
        while todo:
            for callee in calls.get(todo.pop(), {}):
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
        reach[start] = seen
    groups = set()
    for f in calls:
        group = frozenset({f} | {g for g in reach[f] if f in reach[g]})
        if len(group) > 1:
            groups.add(group)
    return sorted(groups, key=lambda g: sorted(g))


def describe(lib, group, calls):
    inside = [f"  {a}.c -> {b}.c: {' '.join(calls[a][b])}"
              for a in sorted(group) for b in sorted(group) if b in calls[a]]
    return "\n".join([f"{lib}: {','.join(sorted(group))}"] + inside)


def check_cycles(libs, allowed):
    problems = []
    names = {name_of(lib["path"]) for lib in libs}
    for lib in sorted(set(allowed) - names):
        problems.append(f"--cycle {lib}: no library {lib}")
    for lib in libs:
        name = name_of(lib["path"])
        calls = file_calls(lib["path"])
        found = cycles_of(calls)
        listed = allowed.get(name, [])
        for group in found:
            if group in listed:
                continue
            wider = [old for old in listed if group < old]
            if wider:
                problems.append(f"{name}: the cycle {','.join(sorted(wider[0]))} shrank to "
                                f"{','.join(sorted(group))}: list that (--cycle) instead")
            else:
                problems.append("a new cycle (files calling each other round), break it:\n" +
                                describe(name, group, calls))
        for old in listed:
            if not any(group <= old for group in found):
                problems.append(f"{name}: the cycle {','.join(sorted(old))} is broken: "
                                "take it off the list (--cycle)")
    return problems


def print_cycles(paths):
    total = 0
    for path in paths:
        calls = file_calls(path)
        for group in cycles_of(calls):
            print(describe(name_of(path), group, calls))
            total += 1
    print(f"{total} cycles in {len(paths)} libraries")
    return 0


def main():
    if sys.argv[1:2] == ["--cycles"]:
        return print_cycles(sys.argv[2:])
    layers, libs, rules, cycles = parse(sys.argv[1:])
    problems = (check(layers, libs) + check_folders(libs) + check_one_way(libs, rules) +
                check_cycles(libs, cycles))
    for p in problems:
        print(p)
    folders = len({os.path.dirname(s) for lib in libs for s in lib["sources"]})
    print(f"{len(libs)} libraries in {len(layers)} layers and {folders} folders: "
          f"{'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
