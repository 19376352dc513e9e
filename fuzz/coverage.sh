#!/usr/bin/env bash
# Line and branch coverage of the project's sources reached by each fuzz target's corpus
# (clang source-based coverage: fuzz/build.sh --coverage builds them in build-fuzz-cov/, then
# every corpus input is run once).
#
#   fuzz/coverage.sh [TARGET...]     -> a summary table per target on stdout; HTML reports
#                                       in build-fuzz-cov/html/<target>/
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cov="$root/build-fuzz-cov"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for src in "$here"/fuzz_*.c; do
        targets+=("$(basename "$src" .c)")
    done
fi

"$here/build.sh" --coverage >/dev/null
ver=$(clang -dumpversion | cut -d. -f1)
profdata=$(command -v llvm-profdata-"$ver" || command -v llvm-profdata)
llvmcov=$(command -v llvm-cov-"$ver" || command -v llvm-cov)
# the targets' own sources and the system's headers are not what is measured
ignore='/fuzz/fuzz_[a-z0-9_]*\.c$|^/usr/'

for t in "${targets[@]}"; do
    work="$cov/profiles/$t"
    rm -rf "$work" && mkdir -p "$work"
    inputs=("$here/corpus/$t")
    [ -d "$here/regress/$t" ] && inputs+=("$here/regress/$t")
    # one profile file per process; -runs=0 runs every input once and exits
    (cd "$work" && LLVM_PROFILE_FILE="$work/%p.profraw" "$cov/fuzz/$t" -runs=0 \
        -rss_limit_mb=2048 -timeout=10 "${inputs[@]}" >/dev/null 2>&1) || true
    "$profdata" merge -sparse "$work"/*.profraw -o "$work/$t.profdata"
    echo "== $t"
    "$llvmcov" report "$cov/fuzz/$t" -instr-profile="$work/$t.profdata" \
        -ignore-filename-regex="$ignore" | sed -e "s|$cov/\.\./||" -e "s|$root/||"
    "$llvmcov" show "$cov/fuzz/$t" -instr-profile="$work/$t.profdata" -format=html \
        -ignore-filename-regex="$ignore" -output-dir="$cov/html/$t" >/dev/null
done
