#!/usr/bin/env bash
# Times `iser-guard explain --file` against GNU `grep -E -f` (one pattern per signature) over
# the same 2-million-line kernel log, built from the real lab captures in crates/iser-guard-core/tests/fixtures/kmsg.
#
#   scripts/bench-explain-vs-grep.sh [LINES] [RUNS]      (defaults: 2000000 lines, 3 runs)
#   DENSE=1 scripts/bench-explain-vs-grep.sh             (only the lines grep matches: every
#                                                         line is classified, the worst case)
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
Couldn't open port [0-9]+
Couldn't (create ib_mad|start port|post receive WRs)
Failed to (modify|destroy|create) HW QP
Failed to modify Shadow QP for QP1
WC error: [0-9]+, Message: 
\): dump error cqe
Unexpected event type [0-9]+ on QP 
iser_qp_event_callback: qp event 
iser: iser_[a-z_]+: (Failed to disconnect|failure connecting|rdma_create_id failed|rdma_resolve_addr failed|resolve route failed|device lookup/creation failed|failed to allocate an IB resource|ib_post_send failed|ib_post_recv (login )?failed)
qp#[0-9]+ ([a-z_]+: )?moved to error state
qp#[0-9]+ [a-z_]+: state -> [A-Z]+
rxe: set [^ ]+ (active|down)
Device offlined - not ready after error recovery
timing out command, waited [0-9]+s
rejecting I/O to dead device
failed: Result: hostbyte=
(timeout|recoverable transport|critical target|critical medium|device offline) error, dev 
Buffer I/O error on dev 
RIP: [0-9a-f]{4}:[^ ]+ \[(ib_iser|rdma_rxe|ib_core|rdma_cm|libiscsi|irdma|mlx5_ib|bnxt_re)
WARNING: CPU: [0-9]+ PID: [0-9]+ at (drivers/infiniband/|drivers/scsi/libiscsi)
kernel BUG at drivers/infiniband/
BUG: KASAN: 
\] Kernel panic - not syncing: 
INFO: task iscsi[^ ]*:[0-9]+ blocked for more than 
PATTERNS

# The log: the real captures (plain dmesg format), the field incident and the signature
# corpus (one line per signature), repeated; with DENSE=1 only the lines grep matches.
SRC=(crates/iser-guard-core/tests/fixtures/kmsg/*.dmesg crates/iser-guard-core/tests/fixtures/kmsg/corpus/lines.dmesg.log)
cat "${SRC[@]}" > "$TMP/one"
if [ -n "${DENSE:-}" ]; then
    LC_ALL=C grep -E -f "$PAT" "$TMP/one" > "$TMP/dense"
    mv "$TMP/dense" "$TMP/one"
fi
per=$(wc -l < "$TMP/one")
reps=$(( LINES / per + 1 ))
for _ in $(seq "$reps"); do cat "$TMP/one"; done | head -n "$LINES" > "$LOG"

lines=$(wc -l < "$LOG")
size=$(du -h "$LOG" | cut -f1)
echo "log: $lines lines, $size ($((reps)) copies of ${#SRC[@]} capture logs, $per lines each)"
echo "grep matches: $(LC_ALL=C grep -c -E -f "$PAT" "$LOG") lines"
echo "explain:      $("$BIN" explain --file "$LOG" --json | sed -n 's/^  "recognised": \([0-9]*\),/\1/p') records recognised"
echo

# Output goes to files, not /dev/null: GNU grep stops at the first match when its output is
# /dev/null (even with -c). `grep -c` is grep's cheapest full scan (it prints one number).
GREP_C="LC_ALL=C grep -c -E -f $PAT $LOG > $TMP/grep.out || true"
GREP_U="LC_ALL=C.UTF-8 grep -c -E -f $PAT $LOG > $TMP/grep.out || true"
# explain exits 1 when it finds a stuck port (the field incident is in the log): not an error.
EXPLAIN="$BIN explain --file $LOG > $TMP/explain.out || [ \$? -eq 1 ]"

if command -v hyperfine > /dev/null; then
    hyperfine --warmup 1 --runs "$RUNS" -n 'grep -E -f (C locale)' "$GREP_C" \
        -n 'grep -E -f (UTF-8 locale)' "$GREP_U" -n 'iser-guard explain --file' "$EXPLAIN"
else
    timeit() {
        local name=$1 cmd=$2 best=""
        bash -c "$cmd" # warm-up (page cache)
        for i in $(seq "$RUNS"); do
            local s e cpu
            s=$(date +%s%N)
            cpu=$( { TIMEFORMAT='%U user + %S sys'; time bash -c "$cmd" 2>/dev/null ; } 2>&1 | tail -n 1)
            e=$(date +%s%N)
            local ms=$(( (e - s) / 1000000 ))
            printf '  %-28s run %d: %5d ms wall  (%d lines/s), CPU user+sys: %s s\n' "$name" \
                "$i" "$ms" $(( lines * 1000 / (ms > 0 ? ms : 1) )) "$cpu"
            if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
        done
        printf '  %-28s best:  %5d ms  (%d lines/s)\n\n' "$name" "$best" \
            $(( lines * 1000 / (best > 0 ? best : 1) ))
    }
    timeit 'grep -E -f (C locale)' "$GREP_C"
    timeit 'grep -E -f (UTF-8 locale)' "$GREP_U"
    timeit 'iser-guard explain --file' "$EXPLAIN"
fi
