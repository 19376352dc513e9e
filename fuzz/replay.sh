#!/usr/bin/env bash
# Run a fuzz target once over every input of the given directories (missing ones are skipped):
# what `meson test --suite fuzz` does for each target. The inputs go to libFuzzer as file
# arguments, in batches (the argument list has a length limit); libFuzzer runs each file once.
#
#   fuzz/replay.sh TARGET DIR...
#
# Exit 0 when every input ran clean. Otherwise 1 and the failing batch's output, where the
# "Running: <file>" line before the report names the input.
set -uo pipefail

[ $# -ge 2 ] || { echo "usage: $0 TARGET DIR..." >&2; exit 2; }
target=$1
shift
dirs=()
for d in "$@"; do
    [ -d "$d" ] && dirs+=("$d")
done
[ ${#dirs[@]} -gt 0 ] || { echo "$target: none of $* exists" >&2; exit 1; }

# Crash, leak and timeout inputs are written into $work, not into the source tree.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
find "${dirs[@]}" -type f -print0 | sort -z >"$work/inputs"
total=$(tr -cd '\0' <"$work/inputs" | wc -c)
[ "$total" -gt 0 ] || { echo "$target: no inputs in ${dirs[*]}" >&2; exit 1; }

start=$EPOCHREALTIME
status=0
# sh -c: $0 is the scratch directory, $1 the target, the rest one batch of inputs
xargs -0 -n 256 sh -c '
    target=$1
    shift
    out=$(mktemp "$0/batch.XXXXXX")
    if ! "$target" -rss_limit_mb=2048 -timeout=30 -artifact_prefix="$0/" "$@" >"$out" 2>&1
    then
        echo "== FAILED: a batch of $# inputs; its output:" >&2
        cat "$out" >&2
        exit 1
    fi
    rm -f "$out"' "$work" "$target" <"$work/inputs" || status=1
end=$EPOCHREALTIME
echo "$(basename "$target"): $total inputs in" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s:" \
    "$([ $status = 0 ] && echo ok || echo FAILED)"
exit $status
