#!/usr/bin/env bash
# Build the libFuzzer targets with meson: clang, -Dfuzz=true, ASan + UBSan, in build-fuzz/
# at the top of the tree (configured once), from the same static libraries as the daemon.
#
#   fuzz/build.sh [--coverage] [--no-install]
#     --coverage    also build-fuzz-cov/: the targets with clang's source-based coverage
#                   instead of the sanitizers, for fuzz/coverage.sh
#     --no-install  never call apt-get; fail if clang or its libFuzzer runtime is missing
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
        echo "missing: $* (run without --no-install, or install them)" >&2
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

targets=()
for src in "$here"/fuzz_*.c; do
    targets+=("fuzz/$(basename "$src" .c)")
done

setup() {   # dir, meson options...
    local dir=$1
    shift
    # (LLVM_PROFILE_FILE: the coverage build's compiler checks run programs that would leave
    # a default.profraw here)
    [ -f "$root/$dir/build.ninja" ] ||
        LLVM_PROFILE_FILE=/dev/null meson setup "$root/$dir" "$root" -Dfuzz=true "$@" >/dev/null
    ninja -C "$root/$dir" "${targets[@]}" >/dev/null
    echo "built ${targets[*]/#/$dir/}"
}

setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
if [ "$coverage" = 1 ]; then
    cov='-fprofile-instr-generate -fcoverage-mapping'
    setup build-fuzz-cov -Db_sanitize=none -Dbuildtype=debug "-Dc_args=$cov" "-Dc_link_args=$cov"
fi
