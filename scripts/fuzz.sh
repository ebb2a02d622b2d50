#!/usr/bin/env bash
# Runs the fuzz targets for a given time and records the figures. Run on purpose (a
# campaign keeps a core busy for its whole length), not in CI: CI only checks that the
# targets compile (scripts/test.sh).
#
# Usage:
#   scripts/fuzz.sh TARGET SECONDS     # one target, e.g. scripts/fuzz.sh control_request 600
#   scripts/fuzz.sh all SECONDS        # every target in fuzz/Cargo.toml, one after the other
#   scripts/fuzz.sh list               # the targets
# Environment:
#   JOBS=N       libFuzzer jobs per target (default 1: the machine may be shared)
#   FIGURES=F    where the figures go (default fuzz/figures.md, appended; one table row
#                per run: date, commit, target, seconds, runs, runs/s, corpus, crashes)
#   MAX_LEN=N    -max_len for libFuzzer (default: its own, 4096)
#
# Needs the nightly toolchain (sanitizer instrumentation). With cargo-fuzz installed
# (`cargo install cargo-fuzz`) it is used; without it the same build is done with cargo
# directly (the flags cargo-fuzz passes: sancov instrumentation, ASan, --cfg fuzzing).
# Corpora live in fuzz/corpus/TARGET (kept between runs), crashes in fuzz/artifacts/TARGET.
# Exit status: 0 when no target crashed, 1 when one did (its artifact is named), 2 on usage.
set -euo pipefail
cd "$(dirname "$0")/.."

targets() { sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^iser-guard-fuzz$'; }

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -ge 1 ] || usage
if [ "$1" = list ]; then
    targets
    exit 0
fi
[ $# -eq 2 ] || usage
what=$1 secs=$2
case "$secs" in '' | *[!0-9]*) usage ;; esac
if [ "$what" = all ]; then
    mapfile -t run < <(targets)
else
    targets | grep -qx "$what" || { echo "fuzz: no target $what (scripts/fuzz.sh list)" >&2; exit 2; }
    run=("$what")
fi

JOBS=${JOBS:-1}
FIGURES=${FIGURES:-fuzz/figures.md}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')

build() {
    local t=$1
    if cargo fuzz --help >/dev/null 2>&1; then
        cargo +nightly fuzz build --fuzz-dir fuzz "$t" >&2
        echo "fuzz/target/$triple/release/$t"
    else
        RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Zsanitizer=address \
-Cdebug-assertions -Coverflow-checks" \
            cargo +nightly build --release --manifest-path fuzz/Cargo.toml \
            --target "$triple" --bin "$t" >&2
        echo "fuzz/target/$triple/release/$t"
    fi
}

if [ ! -s "$FIGURES" ]; then
    {
        echo "| date (UTC) | commit | target | seconds | runs | runs/s | corpus | crashes |"
        echo "|---|---|---|---|---|---|---|---|"
    } >"$FIGURES"
fi

crashed=0
for t in "${run[@]}"; do
    bin=$(build "$t")
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    log=$(mktemp)
    args=(-max_total_time="$secs" -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/")
    [ -n "${MAX_LEN:-}" ] && args+=(-max_len="$MAX_LEN")
    [ "$JOBS" -gt 1 ] && args+=(-jobs="$JOBS" -workers="$JOBS")
    echo "fuzz: $t for $secs s" >&2
    rc=0
    "$bin" "${args[@]}" "fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | awk '{s += $1} END {print s + 0}')
    rate=$(awk -v r="$runs" -v s="$secs" 'BEGIN {printf "%.0f", (s > 0 ? r / s : 0)}')
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    crashes=$(find "fuzz/artifacts/$t" -type f -newer "$log" | wc -l)
    if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
        crashed=1
        echo "fuzz: $t FAILED (exit $rc); artifacts:" >&2
        find "fuzz/artifacts/$t" -type f -newer "$log" >&2
        tail -30 "$log" >&2
    fi
    row="| $(date -u +%F\ %H:%M) | $commit | $t | $secs | $runs | $rate | $corpus | $crashes |"
    echo "$row" | tee -a "$FIGURES"
    rm -f "$log"
done
exit "$crashed"
