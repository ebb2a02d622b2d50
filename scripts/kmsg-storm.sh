#!/usr/bin/env bash
# Measures the CPU cost of `iser-guard watch` following a storm of kernel log records.
#
# Usage (as root): scripts/kmsg-storm.sh [watch options...]
#   RATE=10000 SECS=10 scripts/kmsg-storm.sh            # default: print recognised records only
#   scripts/kmsg-storm.sh --all --json                   # also format every record as JSON
#
# Starts the release binary's `watch` on the real /dev/kmsg, injects RATE records per second
# for SECS seconds (one write() per record, the device reopened for each record so that the
# printk_devkmsg ratelimit does not drop them; level 7 so the console stays quiet), then
# reads the watcher's utime+stime from /proc/PID/stat and its record counters from its log.
# The injector is perl (perl-base is essential on Debian/Ubuntu). Output goes to /dev/null.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-10000}
SECS=${SECS:-10}
BIN=${BIN:-target/release/iser-guard}

if [ "$(id -u)" != 0 ]; then
    echo "kmsg-storm: needs root (writes to /dev/kmsg)" >&2
    exit 77
fi
if [ ! -x "$BIN" ]; then
    cargo build --release --locked >&2
fi

tmp=$(mktemp -d)
watcher=
cleanup() {
    if [ -n "$watcher" ]; then kill "$watcher" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
printf '[paths]\nstate-dir = "%s/state"\n' "$tmp" >"$tmp/config.toml"

"$BIN" --config "$tmp/config.toml" --log info watch "$@" >/dev/null 2>"$tmp/err" &
watcher=$!
for _ in $(seq 100); do
    grep -q "following the kernel log" "$tmp/err" && break
    sleep 0.1
done
grep -q "following the kernel log" "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }

# utime + stime (fields 14 and 15; the command name in field 2 may contain spaces).
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
hz=$(getconf CLK_TCK)

t0=$(ticks "$watcher")
start=$(date +%s.%N)
perl -MTime::HiRes=time,sleep -e '
    my ($rate, $secs) = @ARGV;
    my $batch = $rate / 100;            # 100 batches per second
    my $n = 0;
    my $t0 = time;
    while (time - $t0 < $secs) {
        for (1 .. $batch) {
            open(my $fh, ">", "/dev/kmsg") or die "open /dev/kmsg: $!";
            syswrite($fh, "<7>kmsg-storm $n: pci 0000:00:01.1: BAR 4 [io  0xc0a0-0xc0af] storm filler\n")
                or die "write: $!";
            close($fh);
            $n++;
        }
        my $due = $t0 + $n / $rate;
        my $wait = $due - time;
        sleep($wait) if $wait > 0;
    }
    printf STDERR "injected %d records in %.2f s\n", $n, time - $t0;
' "$RATE" "$SECS" 2>"$tmp/inject"
# Let the watcher drain what is still queued.
sleep 1
t1=$(ticks "$watcher")
end=$(date +%s.%N)
kill -TERM "$watcher"
wait "$watcher" || true
watcher=

injected=$(grep -o 'injected [0-9]* records in [0-9.]* s' "$tmp/inject" || cat "$tmp/inject")
stats=$(grep -o 'stopping on .*' "$tmp/err" | tail -1)
records=$(echo "$stats" | grep -o 'records=[0-9]*' | grep -o '[0-9]*$' || echo 0)
awk -v t0="$t0" -v t1="$t1" -v hz="$hz" -v s="$start" -v e="$end" -v n="$records" \
    -v inj="$injected" -v args="$*" 'BEGIN {
    cpu = (t1 - t0) / hz; wall = e - s;
    printf "watch %s: %s\n", (args == "" ? "(default)" : args), inj;
    printf "  records read by watch: %d over %.2f s wall (incl. 1 s drain)\n", n, wall;
    printf "  watch CPU (utime+stime): %.2f s = %.1f%% of one core", cpu, 100 * cpu / wall;
    if (n > 0) printf ", %.2f us per record", 1e6 * cpu / n;
    printf "\n";
}'
echo "  counters: $stats"
