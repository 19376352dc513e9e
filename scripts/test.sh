#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs the C unit tests (then once
# more under valgrind), then the pytest integration tests against real FUSE mounts, on a
# posix bucket and on a local S3 server (which must be there: no silent skips).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
meson test -C build --suite unit --print-errorlogs
meson test -C build --suite unit --setup valgrind --print-errorlogs
export H5OSFS_S3_REQUIRED=1
# Debian's interpreter, where python3-pytest, -h5py and -numpy live (not a python3 on PATH).
exec /usr/bin/python3 -m pytest -p no:cacheprovider tests/integration "$@"
