#!/usr/bin/env bash
# The fuzz build, defined once for scripts/test.sh (CI), run.sh and coverage.sh: meson in
# build-fuzz/ at the top of the tree, clang, -Dfuzz=true, ASan + UBSan, -Werror like every
# build. Everything there is built: the fuzz targets (fuzz/meson.build, from the daemon's own
# static libraries; no source is listed here) and, compiled by clang, the daemon and the unit
# tests too, so CI keeps every source -Werror clean for clang as well as gcc.
#
#   fuzz/build.sh [--coverage] [--no-install]
#     --coverage    also build-fuzz-cov/: the targets with clang's source-based coverage
#                   instead of the sanitizers, for fuzz/coverage.sh
#     --no-install  never call apt-get: say what is missing and fail (CI, after
#                   scripts/install-deps.sh, which installs clang and libFuzzer's runtime)
#
# Output: build-fuzz/fuzz/<target> (and build-fuzz-cov/fuzz/<target>), one per fuzz/fuzz_*.c.
# The project's libraries must be installed as for any build (scripts/install-deps.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
coverage=0
install=1
for a in "$@"; do
    case "$a" in
    --coverage) coverage=1 ;;
    --no-install) install=0 ;;
    *) echo "usage: $0 [--coverage] [--no-install]" >&2; exit 2 ;;
    esac
done

export CC=${CC:-clang}

apt_install() {
    if [ "$install" = 0 ]; then
        echo "fuzz/build.sh: missing $*: the fuzz targets cannot be built" \
             "(scripts/install-deps.sh installs them)" >&2
        exit 1
    fi
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    echo "installing: $*" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >&2
}

# clang itself, then its libFuzzer runtime: on Debian 12 libclang_rt.fuzzer-x86_64.a comes
# with libclang-rt-<N>-dev (clang 14: libclang-rt-14-dev).
command -v "$CC" >/dev/null || apt_install clang
clang_major=$("$CC" -dumpversion | cut -d. -f1)
fuzzer_rt="$("$CC" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
[ -f "$fuzzer_rt" ] || apt_install "libclang-rt-${clang_major}-dev"

quietly() {  # run a command; only when it fails, show what it said
    local out
    if ! out=$("$@" 2>&1); then
        printf '%s\n' "$out" >&2
        echo "fuzz/build.sh: failed: $*" >&2
        exit 1
    fi
}

setup() {   # dir, meson options...
    local dir=$1
    shift
    # (LLVM_PROFILE_FILE: the coverage build's compiler checks run programs that would leave
    # a default.profraw here.) An existing directory gets the options again: one configured
    # otherwise (say without -Dfuzz=true) would have no fuzz test, and replaying nothing passes.
    if [ -f "$root/$dir/build.ninja" ]; then
        quietly meson configure "$root/$dir" -Dfuzz=true "$@"
    else
        LLVM_PROFILE_FILE=/dev/null quietly meson setup "$root/$dir" "$root" -Dfuzz=true "$@"
    fi
    quietly ninja -C "$root/$dir"
    echo "built $dir/fuzz/: $(cd "$here" && ls fuzz_*.c | sed 's/\.c$//' | tr '\n' ' ')"
}

setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
if [ "$coverage" = 1 ]; then
    cov='-fprofile-instr-generate -fcoverage-mapping'
    setup build-fuzz-cov -Db_sanitize=none -Dbuildtype=debug "-Dc_args=$cov" "-Dc_link_args=$cov"
fi
