#!/usr/bin/env bash
# Measures the daemon under a kernel-log flood of records each naming a different RDMA
# device: records lost by the kernel-log reader, alerts delivered to syslog, threads and RSS
# before, at peak and after.
#
# Usage (as root, once: it floods the one kernel ring every reader on the host shares):
#   scripts/daemon-flood.sh                    # 60 000 records, default config (untrusted)
#   N=20000 TRUST=true scripts/daemon-flood.sh # kmsg.trust-userspace-records = true
#
# The daemon runs the release binary against fakes in a temporary directory: an empty sysfs
# tree, a stub iscsiadm that reports no sessions, a syslog socket read by a counter, a
# private control socket and state directory. Records go through the real /dev/kmsg (one
# open+write per record so the printk_devkmsg ratelimit, which is per open file, does not
# drop them; level 7 so the console stays quiet: a console print per record would
# slow the injector to a few hundred records per second), as fast as perl writes them.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-60000}
TRUST=${TRUST:-false}
BIN=${BIN:-target/release/iser-guard}

if [ "$(id -u)" != 0 ]; then
    echo "daemon-flood: needs root (writes to /dev/kmsg)" >&2
    exit 77
fi
[ -x "$BIN" ] || cargo build --release --locked >&2

tmp=$(mktemp -d)
daemon=
counter=
cleanup() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null || true
    [ -n "$counter" ] && kill "$counter" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/sys/class/infiniband" "$tmp/state" "$tmp/bin" "$tmp/run"
cat >"$tmp/bin/iscsiadm" <<'EOF'
#!/bin/sh
echo "iscsiadm: No active sessions." >&2
exit 21
EOF
chmod 755 "$tmp/bin/iscsiadm"
cat >"$tmp/config.toml" <<EOF
[paths]
kmsg = "/dev/kmsg"
sysfs-root = "$tmp/sys"
state-dir = "$tmp/state"
iscsiadm = "$tmp/bin/iscsiadm"
control-socket = "$tmp/run/control.sock"

[alerts]
syslog-socket = "$tmp/syslog.sock"

[kmsg]
trust-userspace-records = $TRUST
EOF

# Syslog receiver: counts datagrams, keeps the ones that report coalescing.
python3 - "$tmp/syslog.sock" "$tmp/syslog.count" "$tmp/syslog.coalesced" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); s.settimeout(0.2)
n, last = 0, 0.0
with open(sys.argv[3], "w") as keep:
    while True:
        try:
            d = s.recv(65536); n += 1
            if b"coalesced" in d:
                keep.write(d.decode(errors="replace") + "\n"); keep.flush()
        except socket.timeout:
            pass
        if time.time() - last > 0.2:
            open(sys.argv[2], "w").write(str(n)); last = time.time()
EOF
counter=$!
for _ in $(seq 50); do [ -S "$tmp/syslog.sock" ] && break; sleep 0.1; done

ISER_GUARD_LOG=info NO_COLOR=1 "$BIN" --config "$tmp/config.toml" daemon \
    >/dev/null 2>"$tmp/daemon.log" &
daemon=$!
for _ in $(seq 100); do
    grep -q "first scan done" "$tmp/daemon.log" && break
    sleep 0.1
done
grep -q "first scan done" "$tmp/daemon.log" || { cat "$tmp/daemon.log" >&2; exit 1; }
sleep 1

threads() { awk '/^Threads:/ {print $2}' "/proc/$daemon/status"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status"; }
t_before=$(threads); r_before=$(rss_kb)

# Peak sampler.
(
    peak_t=0 peak_r=0
    while kill -0 "$daemon" 2>/dev/null && [ ! -e "$tmp/stop-sampling" ]; do
        t=$(threads 2>/dev/null || echo 0); r=$(rss_kb 2>/dev/null || echo 0)
        [ "$t" -gt "$peak_t" ] && peak_t=$t
        [ "$r" -gt "$peak_r" ] && peak_r=$r
        echo "$peak_t $peak_r" >"$tmp/peak"
        sleep 0.1
    done
) &
sampler=$!

start=$(date +%s.%N)
perl -MTime::HiRes=time -e '
    my ($n) = @ARGV;
    my $t0 = time;
    for my $i (0 .. $n - 1) {
        open(my $fh, ">", "/dev/kmsg") or die "open /dev/kmsg: $!";
        syswrite($fh, "<7>ice 0000:02:00.0 flood$i: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3\n")
            or die "write: $!";
        close($fh);
    }
    printf STDERR "injected %d records in %.2f s\n", $n, time - $t0;
' "$N" 2>"$tmp/inject"
# Let the daemon handle what it read ahead (until its log stops growing, at most 60 s) and
# the sender report the coalesced alerts.
prev=-1
for _ in $(seq 60); do
    now=$(grep -c 'kernel log: ' "$tmp/daemon.log" || true)
    [ "$now" = "$prev" ] && break
    prev=$now
    sleep 1
done
sleep 2
touch "$tmp/stop-sampling"; wait "$sampler" 2>/dev/null || true
t_after=$(threads); r_after=$(rss_kb)
read -r t_peak r_peak <"$tmp/peak"
kill -TERM "$daemon"; wait "$daemon" || true; daemon=
sleep 0.5

cp "$tmp/daemon.log" "${KEEP_LOG:-/dev/null}" 2>/dev/null || true
lost=$( { grep 'kernel log records lost' "$tmp/daemon.log" || true; } | { grep -o 'count=[0-9]*' || true; } | cut -d= -f2 | awk '{s += $1} END {print s + 0}')
overruns=$(grep -c 'kernel log records lost\|overrun before the first record' "$tmp/daemon.log" || true)
seen=$(grep -c 'kernel log: ' "$tmp/daemon.log" || true)
coalesce_logs=$(grep -c 'coalesced because the alert queue was full' "$tmp/daemon.log" || true)
echo "records injected: $(cat "$tmp/inject")"
echo "records read by the daemon (logged observations): $seen"
echo "records lost (sequence gaps): ${lost:-0} in $overruns gap report(s)"
echo "syslog datagrams received: $(cat "$tmp/syslog.count")"
echo "coalescing reports: $coalesce_logs in the log, $(grep -c . "$tmp/syslog.coalesced" || true) in syslog"
{ grep -m1 . "$tmp/syslog.coalesced" || true; } | cut -c1-300
echo "threads: before $t_before, peak $t_peak, after $t_after"
echo "RSS (KiB): before $r_before, peak $r_peak, after $r_after"
echo "elapsed: $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
