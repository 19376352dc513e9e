#!/usr/bin/env bash
# Installs what bench/bench_read_all.py needs beyond the build and test dependencies: the
# contenders s3fs-fuse (Debian's s3fs) and curl (the plain-GETs baseline). Nothing when both are
# there already. Runs as root or through sudo. The tests do not need these.
set -euo pipefail
"$(dirname "$0")/install-deps.sh"
packages=(s3fs curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-bench-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
