#!/usr/bin/env bash
# Installs the S3 server of the tests, s3rver pinned by tests/s3/package-lock.json, into
# tests/s3/node_modules with `npm ci` (nothing global). Does nothing when that exact lock is
# installed already. Needs node and npm (scripts/install-deps.sh installs Debian's when missing).
set -euo pipefail
cd "$(dirname "$0")/../tests/s3"
for tool in node npm; do
  command -v "$tool" >/dev/null || {
    echo "install-s3rver: $tool is not on PATH (run scripts/install-deps.sh)" >&2; exit 1; }
done
stamp=node_modules/.h5osfs-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f node_modules/s3rver/package.json ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "install-s3rver: npm ci in tests/s3" >&2
# No install scripts: s3rver and its dependencies are plain JavaScript.
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
# s3rver's listings need DES, which OpenSSL 3 keeps in its legacy provider.
NODE_OPTIONS=--openssl-legacy-provider node -e '
  const v = require("s3rver/package.json").version;
  require("crypto").createCipheriv("des", Buffer.alloc(8), Buffer.alloc(8));
  console.error(`install-s3rver: s3rver ${v} installed in tests/s3/node_modules`);'
echo "$want" >"$stamp"
