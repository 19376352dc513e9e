#!/usr/bin/env bash
# Line and branch coverage of the project's sources reached by each fuzz target's corpus
# (clang source-based coverage: fuzz/build.sh --coverage, then every corpus input run once).
#
#   fuzz/coverage.sh [TARGET...]     -> a summary table per target on stdout; HTML reports
#                                       in fuzz/out/cov/html/<target>/
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_codec fuzz_hjson_types fuzz_image)

"$here/build.sh" --coverage >/dev/null
ver=$(clang -dumpversion | cut -d. -f1)
profdata=$(command -v llvm-profdata-"$ver" || command -v llvm-profdata)
llvmcov=$(command -v llvm-cov-"$ver" || command -v llvm-cov)

for t in "${targets[@]}"; do
    work="$here/out/cov/$t.d"
    rm -rf "$work" && mkdir -p "$work"
    inputs=("$here/corpus/$t")
    [ -d "$here/regress/$t" ] && inputs+=("$here/regress/$t")
    # one profile file per process; -runs=0 runs every input once and exits
    (cd "$work" && LLVM_PROFILE_FILE="$work/%p.profraw" "$here/out/cov/$t" -runs=0 \
        -rss_limit_mb=2048 -timeout=10 "${inputs[@]}" >/dev/null 2>&1) || true
    "$profdata" merge -sparse "$work"/*.profraw -o "$work/$t.profdata"
    echo "== $t"
    "$llvmcov" report "$here/out/cov/$t" -instr-profile="$work/$t.profdata" \
        -ignore-filename-regex='fuzz/|/usr/' | sed "s|$root/||"
    "$llvmcov" show "$here/out/cov/$t" -instr-profile="$work/$t.profdata" -format=html \
        -ignore-filename-regex='fuzz/|/usr/' -output-dir="$here/out/cov/html/$t" >/dev/null
done
