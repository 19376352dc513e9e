#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs the C unit tests (then once
# more under valgrind), then the pytest integration tests against real FUSE mounts.
# Tests over ../shared/corpus run when it is present and say so when it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
meson test -C build --suite unit --print-errorlogs
meson test -C build --suite unit --setup valgrind --print-errorlogs
# Debian's interpreter, where python3-pytest, -h5py and -numpy live (not a python3 on PATH).
exec /usr/bin/python3 -m pytest -p no:cacheprovider tests/integration "$@"
