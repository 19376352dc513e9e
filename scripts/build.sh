#!/usr/bin/env bash
# Configures (once) and builds h5osfs in ./build (optimised: debugoptimized).
# A sanitizer build: meson setup build-asan -Db_sanitize=address,undefined && ninja -C build-asan
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
ninja -C build >/dev/null
echo "built build/h5osfs"
