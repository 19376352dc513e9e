#!/usr/bin/env bash
# The C sources pass .clang-format (Debian 12's clang-format 14: another version may format
# some lines differently). Lists the files that do not and exits 1; `--fix` rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$fmt" ]; then
    echo "check-format: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
    exit 1
fi
if git rev-parse --git-dir >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.c' '*.h')
else
    mapfile -t files < <(find src include tests fuzz -name '*.[ch]' | sort)
fi
if [ "${1:-}" = "--fix" ]; then
    "$fmt" -i "${files[@]}"
    exit 0
fi
bad=()
for f in "${files[@]}"; do
    "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "check-format: not formatted as .clang-format says (scripts/check-format.sh --fix):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "check-format: ${#files[@]} files formatted as .clang-format says"
