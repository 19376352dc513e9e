#!/usr/bin/env bash
# Build the libFuzzer targets with clang (ASan + UBSan) straight from the project's sources,
# without meson. Usage: fuzz/build.sh [--coverage] [--no-install]
#   --coverage    also build fuzz/out/cov/<target>: clang source-based coverage instead of the
#                 sanitizers, for fuzz/coverage.sh
#   --no-install  never call apt-get; fail if something is missing
# Output: fuzz/out/<target> (fuzz_codec, fuzz_hjson_types, fuzz_image).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out="$here/out"
coverage=0
install=1
for a in "$@"; do
    case "$a" in
    --coverage) coverage=1 ;;
    --no-install) install=0 ;;
    *) echo "usage: $0 [--coverage] [--no-install]" >&2; exit 2 ;;
    esac
done

CC=${CC:-clang}

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
if ! command -v "$CC" >/dev/null; then
    apt_install clang
fi
clang_major=$("$CC" -dumpversion | cut -d. -f1)
fuzzer_rt="$("$CC" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
if [ ! -f "$fuzzer_rt" ]; then
    apt_install "libclang-rt-${clang_major}-dev"
fi

# the libraries the sources use (the same as meson.build's dependencies)
need=()
for pc in hdf5:libhdf5-dev jansson:libjansson-dev blosc:libblosc-dev liblz4:liblz4-dev \
          zlib:zlib1g-dev libcrypto:libssl-dev; do
    pkg-config --exists "${pc%%:*}" 2>/dev/null || need+=("${pc#*:}")
done
command -v pkg-config >/dev/null || need+=(pkg-config)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"

deps="hdf5 jansson blosc liblz4 zlib libcrypto"
dep_cflags=$(pkg-config --cflags $deps)
dep_libs="$(pkg-config --libs $deps) -lpthread -lm"

common=(-std=c11 -D_GNU_SOURCE -DFUSE_USE_VERSION=312 '-DH5OSFS_VERSION="fuzz"'
        -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter
        -I"$root/include" -I"$root/src/image" -I"$root/src/codec" -I"$root/src/schema")
sanitize=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
cov=(-fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping)

util=(src/util/log.c src/util/strmap.c src/util/why.c)
schema=(src/schema/id.c src/schema/key.c src/schema/domain.c src/schema/hjson.c
        src/schema/h5type.c src/schema/h5type_desc.c src/schema/h5value.c
        src/schema/h5value_json.c)
codec=(src/codec/codec.c src/codec/bitshuffle.c)
store=(src/store/store.c src/store/posix.c src/store/posix_list.c)
image=(src/image/extent.c src/image/vfd.c src/image/build.c src/image/build_data.c
       src/image/refs.c src/image/image.c)
cache=(src/cache/chunk_cache.c src/cache/prefetch.c)

declare -A sources=(
    [fuzz_codec]="${util[*]} ${codec[*]}"
    [fuzz_hjson_types]="${util[*]} ${schema[*]}"
    [fuzz_image]="${util[*]} ${schema[*]} ${codec[*]} ${store[*]} ${image[*]} ${cache[*]}"
)

# Objects are compiled once per flavour into out/obj/<flavour>/, each source only when it (or
# a header) is newer than its object; a header change rebuilds everything.
newest_header=$(find "$root/include" "$root/src" -name '*.h' -printf '%T@\n' | sort -n | tail -1)

compile() {   # flavour src -> prints the object path
    local flavour=$1 src=$2 flags
    local obj="$out/obj/$flavour/${src//\//_}.o"
    if [ "$flavour" = cov ]; then flags=("${cov[@]}"); else flags=("${sanitize[@]}"); fi
    mkdir -p "$out/obj/$flavour"
    if [ ! -f "$obj" ] || [ "$root/$src" -nt "$obj" ] ||
       awk -v h="$newest_header" -v o="$(stat -c %Y "$obj")" 'BEGIN { exit !(h > o) }'; then
        # fuzz targets' own sources are fuzzer-instrumented; the project's sources too
        "$CC" "${common[@]}" "${flags[@]}" $dep_cflags -c "$root/$src" -o "$obj" >&2
    fi
    echo "$obj"
}

build_flavour() {   # flavour dir
    local flavour=$1 dir=$2 flags
    if [ "$flavour" = cov ]; then flags=("${cov[@]}"); else flags=("${sanitize[@]}"); fi
    mkdir -p "$dir"
    for target in "${!sources[@]}"; do
        objs=()
        for src in fuzz/$target.c ${sources[$target]}; do
            objs+=("$(compile "$flavour" "$src")")
        done
        "$CC" "${flags[@]}" "${objs[@]}" $dep_libs -o "$dir/$target"
        echo "built $dir/$target"
    done
}

cd "$root"
build_flavour asan "$out"
if [ "$coverage" = 1 ]; then
    build_flavour cov "$out/cov"
fi
