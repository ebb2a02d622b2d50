#!/usr/bin/env bash
# Times `iser-guard explain --file` against GNU `grep -E -f` (one pattern per signature) over
# the same 2-million-line kernel log, built from the real lab captures in tests/fixtures/kmsg.
#
#   scripts/bench-explain-vs-grep.sh [LINES] [RUNS]      (defaults: 2000000 lines, 3 runs)
#
# Uses hyperfine when installed, else bash's `time`. Builds target/release/iser-guard first.
# Everything is written to a temporary directory that is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=${1:-2000000}
RUNS=${2:-3}
BIN=target/release/iser-guard

cargo build --release --quiet --bin iser-guard

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
LOG=$TMP/kern.log
PAT=$TMP/patterns

# The log: the real captures (plain dmesg format) and the field incident, repeated.
SRC=(tests/fixtures/kmsg/*.dmesg)
cat "${SRC[@]}" > "$TMP/one"
per=$(wc -l < "$TMP/one")
reps=$(( LINES / per + 1 ))
for _ in $(seq "$reps"); do cat "$TMP/one"; done | head -n "$LINES" > "$LOG"

# One extended regular expression per signature the classifier knows.
cat > "$PAT" <<'PATTERNS'
modify_qp invalid for qp_id=[0-9]+, old_state=0x[0-9a-f]+, new_state=0x[0-9a-f]+
(ib_mad_send_error|mad_error_handler) - ib_modify_qp to RTS ?: -?[0-9]+
Fatal error \([0-9]+\) on MAD QP \([0-9]+\)
Couldn't change QP[0-9]+ state to (INIT|RTR|RTS): -?[0-9]+
abnormal ae_id = 0x[0-9a-f]+ bool qp=[0-9]+ qp_id = [0-9]+
Invalid attribute mask: (0x)?[0-9a-f]+ specified
for qpn: (0x)?[0-9a-f]+ type: (0x)?[0-9a-f]+
curr_qp_state=0x[0-9a-f]+, new_qp_state=0x[0-9a-f]+
modify qp: invalid attribute mask=0x[0-9a-f]+ specified for
qpn=0x[0-9a-f]+ of type=0x[0-9a-f]+ old_qp_state=0x[0-9a-f]+, new_qp_state=0x[0-9a-f]+
ib_modify_qp_is_ok failed
failed to check modify qp state
invalid mask or state
qp#[0-9]+ state -> [A-Z]+
 connection[0-9]+:[0-9]+: detected conn error \([0-9]+\)
 session[0-9]+: session recovery timed out after [0-9]+ secs
 connection[0-9]+:[0-9]+: Could not send nopout
 connection[0-9]+:[0-9]+: Could not send TMF
 connection[0-9]+:[0-9]+: ping timeout of [0-9]+ secs expired, recv timeout [0-9]+
iser_err_comp: .* failure: .* \([0-9]+\) vend_err
iser_event_handler: async event .* \([0-9]+\) on device [^ ]+ port [0-9]+
iscsi_iser_task_init: Failed to init task .*, err = -?[0-9]+
\[sd[a-z]+\] (tag#[0-9]+ )?FAILED Result: hostbyte=
I/O error, dev [a-z0-9]+, sector
rejecting I/O to offline device
RDMA CM: [A-Z_]+: 
infiniband [^ ]+: set (down|active)$
NIC Link is (Down|up|Up)
: Link (up|down)$
PATTERNS

lines=$(wc -l < "$LOG")
size=$(du -h "$LOG" | cut -f1)
echo "log: $lines lines, $size ($((reps)) copies of ${#SRC[@]} capture logs, $per lines each)"
echo "grep matches: $(LC_ALL=C grep -c -E -f "$PAT" "$LOG") lines"
echo "explain:      $("$BIN" explain --file "$LOG" --json | sed -n 's/^  "recognised": \([0-9]*\),/\1/p') records recognised"
echo

GREP_C="LC_ALL=C grep -E -f $PAT $LOG > /dev/null"
GREP_U="LC_ALL=C.UTF-8 grep -E -f $PAT $LOG > /dev/null"
# explain exits 1 when it finds a stuck port (the field incident is in the log): not an error.
EXPLAIN="$BIN explain --file $LOG > /dev/null || [ \$? -eq 1 ]"

if command -v hyperfine > /dev/null; then
    hyperfine --warmup 1 --runs "$RUNS" -n 'grep -E -f (C locale)' "$GREP_C" \
        -n 'grep -E -f (UTF-8 locale)' "$GREP_U" -n 'iser-guard explain --file' "$EXPLAIN"
else
    timeit() {
        local name=$1 cmd=$2 best=""
        bash -c "$cmd" # warm-up (page cache)
        for i in $(seq "$RUNS"); do
            local s e
            s=$(date +%s%N)
            bash -c "$cmd"
            e=$(date +%s%N)
            local ms=$(( (e - s) / 1000000 ))
            printf '  %-28s run %d: %5d ms  (%d lines/s)\n' "$name" "$i" "$ms" \
                $(( lines * 1000 / (ms > 0 ? ms : 1) ))
            if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
        done
        printf '  %-28s best:  %5d ms  (%d lines/s)\n\n' "$name" "$best" \
            $(( lines * 1000 / (best > 0 ? best : 1) ))
    }
    timeit 'grep -E -f (C locale)' "$GREP_C"
    timeit 'grep -E -f (UTF-8 locale)' "$GREP_U"
    timeit 'iser-guard explain --file' "$EXPLAIN"
fi
