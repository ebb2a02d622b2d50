#!/usr/bin/env bash
# Measures how often an idle iser-guard daemon wakes up and how much CPU it uses.
#
# Usage: scripts/measure-idle.sh [options] -- COMMAND [ARGS...]
#   -s SECONDS   measured window (default 60)
#   -w SECONDS   settling time before the window (default 10)
#   --kmsg PATH  the kernel log the daemon reads (default: a FIFO nobody writes to, so other
#                processes' records do not count as the daemon's wakeups; /dev/kmsg for real)
#   --sysfs DIR  paths.sysfs-root (default: an empty directory)
#   --set K=V    extra `[section] key = value` line, e.g. --set poll.iscsi=10 (repeatable)
#   --rusage     also send SIGUSR1 at both ends of the window and read the `rusage: csw=N
#                cpu_us=N` lines the command prints (examples/idle_daemon does): the whole
#                process's counts, threads that exited inside the window included
# In COMMAND, `{config}` is replaced by the path of the lab configuration this script writes
# (state and control socket in a temporary directory, syslog off, iscsiadm a stub that says
# "No active sessions" with exit 21, as the real one does on a host without sessions).
#
# Examples:
#   scripts/measure-idle.sh -- target/release/iser-guard --config {config} daemon
#   scripts/measure-idle.sh -- target/release/examples/idle_daemon --config {config} --qps 300
#
# Figures: wakeups/s = voluntary + nonvoluntary context switches of every thread in
# /proc/PID/task/*/status over the window (a thread that exits inside the window takes its
# count with it: the thread count at both ends is printed); CPU = utime+stime of
# /proc/PID/stat (clock ticks) and, finer, the run time of every thread from
# /proc/PID/task/*/schedstat (ns). Only the daemon's own pid is counted: children it runs
# (iscsiadm) and the fake kernel of idle_daemon are other processes.
set -euo pipefail

secs=60
warm=10
kmsg=
sysfs=
sets=()
rusage=
while [ $# -gt 0 ]; do
    case "$1" in
        -s) secs=$2; shift 2 ;;
        -w) warm=$2; shift 2 ;;
        --kmsg) kmsg=$2; shift 2 ;;
        --sysfs) sysfs=$2; shift 2 ;;
        --set) sets+=("$2"); shift 2 ;;
        --rusage) rusage=1; shift ;;
        --) shift; break ;;
        *) echo "measure-idle: unknown option $1" >&2; exit 64 ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: measure-idle.sh [options] -- COMMAND [ARGS...]" >&2; exit 64; }

tmp=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    exec 3>&- 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "$kmsg" ]; then
    kmsg=$tmp/kmsg
    mkfifo "$kmsg"
    # Held open read-write so the daemon's reads wait instead of seeing end of file.
    exec 3<>"$kmsg"
fi
if [ -z "$sysfs" ]; then
    sysfs=$tmp/sysfs
    mkdir -p "$sysfs"
fi
mkdir -p "$tmp/state"
cat >"$tmp/iscsiadm" <<'EOF'
#!/bin/sh
echo "iscsiadm: No active sessions." >&2
exit 21
EOF
chmod +x "$tmp/iscsiadm"

{
    echo "[paths]"
    echo "kmsg = \"$kmsg\""
    echo "sysfs-root = \"$sysfs\""
    echo "state-dir = \"$tmp/state\""
    echo "iscsiadm = \"$tmp/iscsiadm\""
    echo "control-socket = \"$tmp/control.sock\""
    echo "[alerts]"
    echo "syslog = false"
    echo "[kmsg]"
    echo "trust-userspace-records = false"
} >"$tmp/config.toml"
for kv in "${sets[@]+"${sets[@]}"}"; do
    key=${kv%%=*}
    val=${kv#*=}
    # A second [section] header for the same table is invalid TOML: use dotted keys instead.
    sed -i "1i ${key} = ${val}" "$tmp/config.toml"
done

cmd=()
for a in "$@"; do cmd+=("${a//\{config\}/$tmp/config.toml}"); done
"${cmd[@]}" >"$tmp/out.log" 2>&1 &
pid=$!
sleep "$warm"
kill -0 "$pid" 2>/dev/null || { echo "measure-idle: the command exited:" >&2; cat "$tmp/out.log" >&2; exit 1; }

# tid name ctxt-switches run-ns, one line per thread.
snapshot() {
    local t
    for t in /proc/"$pid"/task/*; do
        [ -r "$t/status" ] || continue
        awk -v tid="${t##*/}" -v run="$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0)" '
            /^Name:/ { name = $2 }
            /^voluntary_ctxt_switches:/ { v = $2 }
            /^nonvoluntary_ctxt_switches:/ { n = $2 }
            END { print tid, name, v + n, run }' "$t/status" 2>/dev/null || true
    done
}
ticks() { sed 's/.*) //' /proc/"$pid"/stat | awk '{ print $12 + $13 }'; }

ru_line() { sleep 0.2; grep '^rusage:' "$tmp/out.log" | tail -1; }
[ -z "$rusage" ] || { kill -USR1 "$pid"; ru0=$(ru_line); }
before=$(snapshot)
t0=$(ticks)
start=$(date +%s.%N)
sleep "$secs"
after=$(snapshot)
t1=$(ticks)
[ -z "$rusage" ] || { kill -USR1 "$pid"; ru1=$(ru_line); }
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
hz=$(getconf CLK_TCK)

echo "command: $*"
echo "window: ${elapsed%????????} s after ${warm} s settling; threads: $(echo "$before" | wc -l) at start, $(echo "$after" | wc -l) at end"
join <(echo "$before" | sort) <(echo "$after" | sort) | awk -v s="$elapsed" -v ticks="$((t1 - t0))" -v hz="$hz" '
    { w = $6 - $3; r = $7 - $4; tw += w; tr += r
      printf "  thread %-8s %-18s %7.2f wakeups/s  %8.3f ms on CPU\n", $1, $2, w / s, r / 1e6 }
    END {
      printf "wakeups/s (all threads): %.2f\n", tw / s
      printf "CPU: %.4f %% of one core (schedstat %.1f ms); utime+stime %d ticks = %.3f %%\n",
             tr / 1e9 / s * 100, tr / 1e6, ticks, ticks / hz / s * 100
    }'
# Threads born inside the window (their switches are counted from zero).
join -v 2 <(echo "$before" | sort) <(echo "$after" | sort) | awk -v s="$elapsed" '
    { printf "  new thread %-8s %-14s %7.2f wakeups/s\n", $1, $2, $3 / s }'
if [ -n "$rusage" ]; then
    echo "$ru0 $ru1" | sed 's/[a-z_]*=//g; s/rusage://g' | awk -v s="$elapsed" '
        { printf "getrusage (whole process, exited threads included): %.2f wakeups/s, %.4f %% of one core\n",
                 ($3 - $1) / s, ($4 - $2) / 1e6 / s * 100 }'
fi
