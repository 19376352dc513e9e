#!/usr/bin/env bash
# Installs what building and testing h5osfs needs on Debian 12, and nothing when it is
# all there already. Runs as root (CI) or through sudo.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config
  libfuse3-dev fuse3
  libjansson-dev libhdf5-dev hdf5-tools zlib1g-dev libdeflate-dev
  libcurl4-openssl-dev libssl-dev libexpat1-dev
  libblosc-dev liblz4-dev libzstd-dev uuid-dev
  python3-pytest python3-h5py python3-numpy
  valgrind
  # the fuzz targets' build (meson -Dfuzz=true, fuzz/README.md): clang and its libFuzzer
  # runtime (libclang_rt.fuzzer-x86_64.a, in Debian 12's libclang-rt-14-dev)
  clang libclang-rt-14-dev
  # scripts/check-format.sh: the C sources pass .clang-format
  clang-format
  # the Debian package that tests/integration/test_packaging.py builds and mounts
  dpkg-dev debhelper
  # HDF5 filter plugins for LZF and bitshuffle (libh5LZF.so, libh5bshuf.so): the corpus has
  # files that use them, and ingest decodes a source's filters through HDF5
  bitshuffle
  # ncdump: the corpus round trip compares what netCDF's reader prints (attribute order)
  netcdf-bin
  python3-xarray
  python3-netcdf4
  # the Zarr view and kerchunk references (issue 28) are read back with zarr, fsspec and dask
  python3-zarr python3-numcodecs python3-fsspec python3-dask
  # fsspec over HTTP (kerchunk references read from an S3 endpoint, h5py over fsspec)
  python3-aiohttp
  # Ceph RGW, the second S3 server of the suite (tests/s3/rgw.py starts a one-host cluster:
  # one mon, one OSD in memory, radosgw); nothing of it starts by itself without systemd
  ceph-mon ceph-osd radosgw ceph-common
)
# The S3 test server (s3rver, installed by install-s3rver.sh) runs on Node.js: Debian's
# nodejs 18 works, but a node already on PATH (any packaging) is used as it is.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The pinned S3 test server, into tests/s3/node_modules (npm ci, only when the lock changed).
"$(dirname "$0")/install-s3rver.sh"
