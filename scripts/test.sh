#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs the C unit tests (then once
# more under valgrind), replays the fuzz corpora, then the pytest integration tests against
# real FUSE mounts, on a posix bucket and on two local S3 servers, s3rver ([s3]) and Ceph RGW
# ([rgw]), both of which must be there: no silent skips.
#
#   scripts/test.sh            the whole suite (what .ci/run runs)
#   scripts/test.sh --quick    build, unit tests, and one test of each integration module
#                              (a few minutes: for development, not a substitute)
#
# Two pytest passes, run at the same time: one with the daemon built with AddressSanitizer and
# UBSan, which runs each test once (its posix instance, or its S3 one for S3-only tests: the
# daemon code under the sanitizers is the same whichever store serves the bytes, and the S3
# store's own code runs in the S3-only modules), and the plain pass, which runs every instance
# on every backend, as two processes sharing its tests. Each process lists its slowest tests
# and the end lists the time of every stage, so that growth is seen where it happens.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [ "${1:-}" = "--quick" ]; then
    quick=1
    shift
fi

stage_names=()
stage_secs=()
stage_cpu=()
report_stages() {
    local status=$?
    [ ${#stage_names[@]} -gt 0 ] || return 0
    echo "== stage times (scripts/test.sh): wall; CPU of the whole machine, and how busy it kept its $(nproc) cores =="
    for i in "${!stage_names[@]}"; do
        printf '%7ds  %14s  %s\n' "${stage_secs[$i]}" "${stage_cpu[$i]}" "${stage_names[$i]}"
    done
    printf '%7ds  %14s  total%s\n' "$SECONDS" "$(cpu_since "$cpu_at_start")" \
        "$([ "$status" -eq 0 ] || echo " (stopped by a failure)")"
}
trap report_stages EXIT

# "busy total" clock ticks of all cores since boot (/proc/stat: idle and iowait are not busy).
cpu_ticks() {
    local _ user nice system idle iowait irq softirq steal
    read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
    local busy=$((user + nice + system + irq + softirq + steal))
    echo "$busy $((busy + idle + iowait))"
}

# cpu_since "busy total": "Ns cpu, P%" since that reading: whether a stage was bound by the
# cores (near 100%) or by waiting (servers, mounts, sleeps), which says where time can be won.
cpu_since() {
    local busy0 total0 busy1 total1
    read -r busy0 total0 <<<"$1"
    read -r busy1 total1 <<<"$(cpu_ticks)"
    local hz
    hz=$(getconf CLK_TCK)
    printf '%ds cpu, %d%%' $(((busy1 - busy0) / hz)) \
        $((total1 > total0 ? 100 * (busy1 - busy0) / (total1 - total0) : 0))
}
cpu_at_start=$(cpu_ticks)

# stage NAME COMMAND...: run COMMAND, remembering how long it took and the CPU the machine
# spent meanwhile (also when it fails).
stage() {
    local name=$1 t0=$SECONDS cpu0 rc=0
    cpu0=$(cpu_ticks)
    shift
    "$@" || rc=$?
    stage_names+=("$name")
    stage_secs+=($((SECONDS - t0)))
    stage_cpu+=("$(cpu_since "$cpu0")")
    return "$rc"
}

stage "install what is missing" ./scripts/install-deps.sh
stage "build" ./scripts/build.sh
stage "format check" ./scripts/check-format.sh
stage "unit tests" meson test -C build --suite unit --print-errorlogs

# Each run keeps its files in a directory of its own, made fresh here, so two runs on one
# machine never share one: a fixed name let a second run (CI beside a developer's run) empty
# the first's buckets, or fail on a mount a killed run left behind. Mounts whose daemon died
# with an earlier run (ENOTCONN) are detached first; a pass removes its files when it passes
# (up to 11 GB of buckets and s3rver data).
TMPROOT="${TMPDIR:-/tmp}"
{ findmnt -rn -t fuse.h5osfs -o TARGET || true; } | while read -r target; do  # 1: none
    case "$target" in "$TMPROOT"/h5osfs-pytest-*)
        stat "$target" >/dev/null 2>&1 || fusermount3 -u -z "$target" || true ;;
    esac
done
TMPBASE="$(mktemp -d "$TMPROOT/h5osfs-pytest-XXXXXX")"
export H5OSFS_S3_REQUIRED=1
# Debian's interpreter, where python3-pytest, -h5py and -numpy live (not a python3 on PATH).
pytest=(/usr/bin/python3 -m pytest -p no:cacheprovider)

if [ "$quick" -eq 1 ]; then
    stage "integration smoke (one test per module)" "${pytest[@]}" -q --smoke \
        --basetemp "$TMPBASE/smoke" tests/integration "$@"
    rm -rf "$TMPBASE"
    exit 0
fi

stage "unit tests under valgrind" meson test -C build --suite unit --setup valgrind \
    --print-errorlogs
# The fuzz targets, built by clang with libFuzzer, ASan and UBSan from the same libraries as the
# daemon (fuzz/build.sh, which also builds the daemon and the unit tests with clang -Werror),
# replay every input of fuzz/corpus/ and fuzz/regress/ once: a parser change that breaks a
# target, or an input that once found a bug, fails here in seconds (fuzz/README.md). Without
# clang or its libFuzzer runtime this stops, saying which is missing: never a silent pass.
stage "fuzz build (clang)" ./fuzz/build.sh --no-install
stage "fuzz corpora replayed" meson test -C build-fuzz --suite fuzz --print-errorlogs
# The same build's unit tests: clang evaluates some things in another order than gcc (a test
# once passed with one and failed with the other), and its ASan and UBSan see the C code of
# every library without a daemon around it.
stage "unit tests (clang, ASan+UBSan)" meson test -C build-fuzz --suite unit --print-errorlogs

# The daemon built with AddressSanitizer and UBSan: a leak at exit or any undefined behaviour
# makes it exit non-zero, which every mount's teardown checks. Left out of this pass: the
# concurrency stress (minutes under ASan, and the plain pass runs it), test_packaging (it
# builds and mounts the .deb's own binary, not $H5OSFS_BIN), test_s3_infra (the test
# servers' own behaviour, no daemon code) and test_suite_cleanup (the suite's own tooling).
build_asan() {
    [ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined \
        -Db_lundef=false >/dev/null
    # test_s3_multipart and test_store_conformance run tests/store_put and
    # tests/store_conformance_s3 from beside the daemon: they are built here too
    ninja -C build-asan h5osfs tests/store_put tests/store_conformance_s3 >/dev/null
}
stage "ASan build" build_asan

# The two passes run at the same time, the plain one as two processes: each spends most of its
# time waiting on mounts, servers and child processes, so on two cores together they take
# little longer than the longest alone (bench/README.md, "The suite"). Each process has its own
# servers, buckets and directories. The sanitizer pass writes to a log printed when all have
# ended. All always run to the end, and the stage fails if any failed.
asan_pass() {
    local t0=$SECONDS rc=0
    env H5OSFS_BIN=build-asan/h5osfs UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "${pytest[@]}" -q tests/integration --one-backend --basetemp "$TMPBASE/asan" --remove-passed \
        --ignore tests/integration/test_s3_infra.py \
        --ignore tests/integration/test_packaging.py \
        --ignore tests/integration/test_suite_cleanup.py \
        -k "not concurrent_listing" --durations=30 </dev/null >"$TMPBASE/asan.log" 2>&1 || rc=$?
    echo "$((SECONDS - t0)) $rc" >"$TMPBASE/asan.status"
    return "$rc"
}

# The plain pass is two processes sharing its tests (tests/integration/claims.py): whichever is
# free takes the next module-on-a-backend nobody has taken, heaviest first. One prints as it
# goes, the other into a log printed when it has ended.
plain_half() {
    local half=$1 t0=$SECONDS rc=0
    shift
    "${pytest[@]}" -q --basetemp "$TMPBASE/plain-$half" --durations=15 --remove-passed \
        --claims "$TMPBASE/claims" tests/integration "$@" || rc=$?
    echo "$((SECONDS - t0)) $rc" >"$TMPBASE/plain-$half.status"
    return "$rc"
}

plain_pass() {
    local other_pid rc=0
    plain_half 2 "$@" </dev/null >"$TMPBASE/plain-2.log" 2>&1 &
    other_pid=$!
    plain_half 1 "$@" || rc=1
    wait "$other_pid" || rc=1
    echo "== integration, plain pass, its second process =="
    cat "$TMPBASE/plain-2.log"
    return "$rc"
}

# The sanitizer pass ends a minute or so before the plain one, which then runs on two
# processes for two cores, each often waiting. A third plain process takes its place and the
# groups nobody has claimed yet; it is not started when the plain pass has already ended.
# A passed sanitizer pass's files go meanwhile, not in the plain pass's way.
asan_then_plain() {
    local rc=0 rm_pid=
    asan_pass || rc=1
    if [ "$rc" -eq 0 ]; then
        nice -n 19 rm -rf --one-file-system "$TMPBASE/asan" &
        rm_pid=$!
    fi
    if [ -f "$TMPBASE/plain-1.status" ] && [ -f "$TMPBASE/plain-2.status" ]; then
        echo "0 not-started" >"$TMPBASE/plain-3.status"
        echo "(not started: the plain pass had ended)" >"$TMPBASE/plain-3.log"
    else
        plain_half 3 "$@" </dev/null >"$TMPBASE/plain-3.log" 2>&1 || rc=1
    fi
    [ -z "$rm_pid" ] || wait "$rm_pid" || true
    return "$rc"
}

all_passes() {
    local asan_pid rc=0
    asan_then_plain "$@" &
    asan_pid=$!
    plain_pass "$@" || rc=1
    wait "$asan_pid" || rc=1
    echo "== integration, ASan+UBSan daemon, each test once (ran beside the plain pass) =="
    cat "$TMPBASE/asan.log"
    echo "== integration, plain pass, its third process (started when the ASan pass ended) =="
    cat "$TMPBASE/plain-3.log"
    local secs status
    for pass in asan plain-1 plain-2 plain-3; do
        read -r secs status <"$TMPBASE/$pass.status" || { secs=0; status=unknown; }
        stage_names+=("integration, $pass alone (exit $status)")
        stage_secs+=("$secs")
        stage_cpu+=("")
    done
    return "$rc"
}
stage "integration, three processes at once: ASan+UBSan (each test once) then plain, plain (every backend) in two" \
    all_passes "$@"
# What the tests' directories leave (each passed test's own are removed as it passes:
# --remove-passed, tests/integration/cleanup.py): modules' and servers' directories.
stage "removing the run's files" rm -rf --one-file-system "$TMPBASE"
