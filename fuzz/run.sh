#!/usr/bin/env bash
# Run the fuzz targets, each for N seconds, and merge what they found into fuzz/corpus/.
#
#   fuzz/run.sh [-t SECONDS] [-m] [TARGET...]      (default: 180 s, every target, in turn)
#     -t SECONDS  how long each target runs (default 180)
#     -m          afterwards, re-minimise the whole corpus (-merge=1 into an empty dir) instead
#                 of only adding the new inputs that bring new coverage
#   TARGET: one of fuzz/fuzz_*.c without .c (fuzz_codec, fuzz_image, ...; default: all)
#
# Builds first (fuzz/build.sh: meson, build-fuzz/fuzz/<target>). An empty fuzz/corpus/<target>/
# is seeded from fuzz/make_seeds.py (every seed must pass first). New inputs are collected in a scratch directory and merged
# into fuzz/corpus/<target>/ with -merge=1 (only those that add coverage, minimised). Crashes,
# leaks and timeouts land in fuzz/artifacts/ (crash-*, leak-*, timeout-*, oom-*) and make the
# script exit 1; the log is build-fuzz/fuzz/logs/<target>.log. Inputs in fuzz/regress/<target>/ (each
# once found a bug, since fixed) are run first every time. Two targets can run at once on two
# cores: start two run.sh with different targets.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin="$here/../build-fuzz/fuzz"
seconds=180
reminimise=0
while getopts "t:m" opt; do
    case "$opt" in
    t) seconds=$OPTARG ;;
    m) reminimise=1 ;;
    *) echo "usage: $0 [-t SECONDS] [-m] [TARGET...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for src in "$here"/fuzz_*.c; do
        targets+=("$(basename "$src" .c)")
    done
fi

# Inputs larger than these teach nothing the seeds do not (and slow every mutation down).
declare -A max_len=([fuzz_codec]=70000 [fuzz_hjson_types]=16384 [fuzz_image]=65536
                   [fuzz_s3_xml]=32768 [fuzz_credentials]=8192 [fuzz_domain_json]=8192
                   [fuzz_journal]=8192 [fuzz_image_file]=16384
                   [fuzz_vlist]=16384 [fuzz_vtable]=65536)

for t in "${targets[@]}"; do
    [ -f "$here/$t.c" ] || { echo "no such target: $t" >&2; exit 2; }
done
"$here/build.sh" >/dev/null || exit 1

# HDF5 1.10 keeps memory in its free lists and never frees some global state; what is left at
# exit inside libhdf5 alone is suppressed (fuzz/lsan.supp). Our own leaks are still reported.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:allocator_may_return_null=0}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

mkdir -p "$here/artifacts" "$bin/logs"
status=0
for t in "${targets[@]}"; do
    corpus="$here/corpus/$t"
    mkdir -p "$corpus"
    if [ -z "$(ls -A "$corpus")" ]; then
        seeds=$(mktemp -d)
        python3 "$here/make_seeds.py" "$seeds" >/dev/null || exit 1
        # a seed that fails is a finding (a merge would only leave it out without a word)
        if ! "$here/replay.sh" "$bin/$t" "$seeds/$t" >"$bin/logs/$t.seeds.log" 2>&1; then
            echo "== $t: a seed fails: see $bin/logs/$t.seeds.log" >&2
            rm -rf "$seeds"
            status=1
            continue
        fi
        "$bin/$t" -merge=1 -rss_limit_mb=2048 -timeout=10 "$corpus" "$seeds/$t" \
            >/dev/null 2>&1
        rm -rf "$seeds"
    fi
    new=$(mktemp -d)
    log="$bin/logs/$t.log"
    dict=()
    [ -f "$here/dict/$t.dict" ] && dict=(-dict="$here/dict/$t.dict")
    # inputs that once found a bug (fuzz/regress/<target>/) are run too, never merged
    regress=()
    [ -d "$here/regress/$t" ] && regress=("$here/regress/$t")
    echo "== $t: ${seconds}s, corpus $(ls "$corpus" | wc -l) inputs"
    # new inputs go to $new (the first directory); the corpus is only read
    (cd "$bin" && "./$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        -max_len="${max_len[$t]:-16384}" -print_final_stats=1 "${dict[@]}" \
        -artifact_prefix="$here/artifacts/$t-" "$new" "$corpus" "${regress[@]}") >"$log" 2>&1
    rc=$?
    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$log" | sed 's/^/   /'
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" |
        sed 's/^/   /'
    if [ $rc -ne 0 ]; then
        echo "   FAILED (exit $rc): see $log and fuzz/artifacts/"
        grep -E 'ERROR:|SUMMARY:|runtime error|Test unit written' "$log" | head -5 | sed 's/^/   /'
        status=1
    fi
    before=$(ls "$corpus" | wc -l)
    if [ "$reminimise" = 1 ]; then
        fresh=$(mktemp -d)
        "$bin/$t" -merge=1 -rss_limit_mb=2048 -timeout=10 "$fresh" "$corpus" "$new" \
            >>"$log" 2>&1 && rm -rf "$corpus" && mv "$fresh" "$corpus"
    else
        "$bin/$t" -merge=1 -rss_limit_mb=2048 -timeout=10 "$corpus" "$new" >>"$log" 2>&1
    fi
    echo "   corpus: $before -> $(ls "$corpus" | wc -l) inputs, $(du -sh "$corpus" | cut -f1)"
    rm -rf "$new"
done
exit $status
