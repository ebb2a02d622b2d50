#!/usr/bin/env bash
# Stress run of the tests that start daemons, threads or child processes: each test target
# runs N times in a row while CPU-bound hogs keep every core busy, so a test that asserts
# what a daemon, thread or child has not written yet (a race a warm, idle machine hides)
# fails here instead of on a fresh CI machine. Run it on purpose, not in CI: it loads the
# machine for minutes. See docs/dev/stress-tests.md.
#
# Usage:
#   scripts/stress-tests.sh [N]                  # every target below, N runs each (default 10)
#   scripts/stress-tests.sh 30 daemon_e2e        # only these targets
#   HOGS=2 NICE=19 scripts/stress-tests.sh 10    # hogs (default: one per core), niceness
#   KEEP=/tmp/stress scripts/stress-tests.sh 5   # keep every run's output there
#
# Targets: the integration tests under tests/ by file name, and `lib` for the unit tests of
# the iser-guard crate (its daemon workers, process runner and control socket use threads).
# The tests run from the binaries cargo built (one `cargo test --no-run` first), one
# target at a time (the daemon tests share the one real /dev/kmsg), as the user running the
# script (as root the /dev/kmsg and daemon end-to-end tests run; otherwise they skip).
# Both the tests and the hogs run under `nice -n $NICE` (default 19): a nice-19 hog still
# loads nice-19 tests, which is the point, and leaves other work on the machine alone.
#
# Output: one line per run (target, run, PASS/FAIL, seconds), then per target the pass
# count and the min/median/max wall time; the output of failed runs is kept (path shown).
# Exit status: 0 when every run passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-10}
shift || true
NICE=${NICE:-19}
HOGS=${HOGS:-$(nproc)}
DEFAULT_TARGETS=(
    daemon_e2e observe_daemon metrics_daemon daemon_selftest daemon_loop kmsg_live control_socket
    journal_log nldev_socket executors_reset executors_lock executors_iscsiadm
    executors_process executors_probe executors_syslog manual_cli selftest_cli soak_smoke lib
)
if [ $# -gt 0 ]; then
    TARGETS=("$@")
else
    TARGETS=("${DEFAULT_TARGETS[@]}")
fi
OUT=${KEEP:-$(mktemp -d)}
mkdir -p "$OUT"

# Build once; map each target to its test binary.
args=()
for t in "${TARGETS[@]}"; do
    if [ "$t" = lib ]; then args+=(--lib); else args+=(--test "$t"); fi
done
echo "stress: building ${#TARGETS[@]} target(s)" >&2
nice -n "$NICE" cargo test --locked --no-run --message-format=json "${args[@]}" \
    > "$OUT/build.json"
declare -A BIN
while IFS=$'\t' read -r name kind exe; do
    if [ "$kind" = lib ] && [ "$name" = iser_guard ]; then BIN[lib]=$exe; fi
    if [ "$kind" = test ]; then BIN[$name]=$exe; fi
done < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["target"]["kind"][0], m["executable"], sep="\t")
' "$OUT/build.json")
for t in "${TARGETS[@]}"; do
    [ -n "${BIN[$t]:-}" ] || { echo "stress: no test binary for $t" >&2; exit 2; }
done

# The hogs: CPU-bound loops, ended (by their own pids) whatever ends this script.
hogs=()
stop_hogs() {
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${hogs[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop_hogs EXIT
for _ in $(seq "$HOGS"); do
    nice -n "$NICE" sh -c 'while :; do :; done' &
    hogs+=($!)
done
echo "stress: $HOGS hog(s) at nice $NICE (pids ${hogs[*]}), $N run(s) per target, output in $OUT" >&2

failed=0
summary=()
for t in "${TARGETS[@]}"; do
    pass=0
    times=()
    for i in $(seq "$N"); do
        log=$OUT/$t.$i.log
        s=$(date +%s%N)
        if nice -n "$NICE" "${BIN[$t]}" > "$log" 2>&1; then rc=0; else rc=$?; fi
        e=$(date +%s%N)
        secs=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
        times+=("$secs")
        if [ "$rc" = 0 ]; then
            pass=$((pass + 1))
            printf '%-20s run %3d/%d  PASS  %6s s\n' "$t" "$i" "$N" "$secs"
            [ -n "${KEEP:-}" ] || rm -f "$log"
        else
            failed=$((failed + 1))
            printf '%-20s run %3d/%d  FAIL  %6s s  (exit %s; output: %s)\n' "$t" "$i" "$N" \
                "$secs" "$rc" "$log"
            grep -E '^test .* FAILED$|panicked at' "$log" | head -n 5 | sed 's/^/    /' || true
        fi
    done
    stats=$(printf '%s\n' "${times[@]}" | sort -n | awk '
        { v[NR] = $1 }
        END { printf "min %.1f s, median %.1f s, max %.1f s", v[1], v[int((NR + 1) / 2)], v[NR] }')
    summary+=("$(printf '%-20s %3d of %d passed; %s' "$t" "$pass" "$N" "$stats")")
done

echo
echo "stress: $HOGS hog(s), nice $NICE, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${summary[@]}"
if [ "$failed" -gt 0 ]; then
    echo "stress: $failed failed run(s); their output is in $OUT"
    exit 1
fi
echo "stress: every run passed"
[ -n "${KEEP:-}" ] || rm -rf "$OUT"
