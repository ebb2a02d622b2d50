#!/usr/bin/env bash
# Soak test: the daemon's real loop for N minutes against misbehaving fakes, with invariants
# checked continuously. Run on purpose (not in CI): it writes to the one real kernel ring,
# so nothing else on the host may inject into /dev/kmsg meanwhile.
#
# Usage (as root):
#   scripts/soak.sh [MINUTES]          # default 30
#   SEED=7 KEEP=/tmp/soak scripts/soak.sh 5
#
# What runs: examples/soak_daemon.rs (Deps::real and the loop `iser-guard daemon` runs; only
# the RDMA netlink sockets are a fake kernel's, answering from the lab's 6.12 captures:
# rxe_ini on ini0, rxe_tgt on tgt0) with the real /dev/kmsg, a fake sysfs, the stub rdma that
# deletes and re-adds rxe_ini, a stub iscsiadm around tests/fixtures/stubs/iscsiadm-host (one
# iSER session to a loopback portal), a syslog socket read here, and its own control socket
# and state directory. Faults and chaos, each at random times (SEED makes them repeatable):
#   - rxe_ini's GSI QP goes to ERR in the netlink QP table, sometimes with the field's
#     kernel-log record (written into /dev/kmsg; the config trusts userspace records here);
#   - the portal's listener (127.0.0.1) goes away and comes back;
#   - the session fails (iscsiadm reports it FAILED);
#   - rxe_ini vanishes (as `rdma link delete` by someone else) and may come back;
#   - iscsiadm fails (exit 4) or hangs (killed by the daemon's iscsiadm-timeout) at random;
#   - the fake kernel answers errors (-EBUSY, -ENOMEM, -ENOBUFS), interrupted dumps
#     (NLM_F_DUMP_INTR) and -ENODEV for the vanished device;
#   - storms of unrelated kernel-log records (throttled), and overruns: a burst larger than
#     the ring written while the daemon is down;
#   - SIGKILL of the daemon at random points, and a restart.
# Invariants (a violation is printed at once and counted; exit 1 if any):
#   - never two re-creations in flight (the stub rdma sees a second delete from a live daemon
#     before the first one's add);
#   - no re-creation while the target has been down for more than 3 s (reset-when =
#     "target-back"; 3 s covers a listener that went away right after the last good probe);
#   - no session lost silently: each failed session is logged in again, or an alert names
#     it, within 180 s;
#   - alerts bounded: at most ALERT_BOUND (default 60) syslog alerts in any minute;
#   - RSS and fd count flat: each sample at most 2x (and 16 MiB over) the first steady
#     sample's RSS, and at most 16 fds over its fd count;
#   - no panic, every restart ready again within 30 s, and a clean exit on SIGTERM at the end.
# Load: the injection is throttled (records at most 2000/s, in bursts); the daemon polls
# netlink every second. About 5-10 % of one core on average.
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES=${1:-${MINUTES:-30}}
SEED=${SEED:-$RANDOM}
PROFILE=${PROFILE:-release}
ALERT_BOUND=${ALERT_BOUND:-60}

if [ "$(id -u)" != 0 ]; then
    echo "soak: needs root (writes to /dev/kmsg)" >&2
    exit 77
fi
flag=; [ "$PROFILE" = release ] && flag=--release
BIN_DIR=target/$PROFILE
if [ ! -x "$BIN_DIR/examples/soak_daemon" ] || [ ! -x "$BIN_DIR/iser-guard" ]; then
    cargo build $flag --locked --bin iser-guard --example soak_daemon >&2
fi
DAEMON=$(pwd)/$BIN_DIR/examples/soak_daemon
STUBS=$(pwd)/tests/fixtures/stubs

# One writer of test records into the kernel ring at a time on this host (the same lock the
# /dev/kmsg tests take: tests/support/kmsg_lock.rs).
LOCK_DIR=/run/lock; [ -d "$LOCK_DIR" ] || LOCK_DIR=${TMPDIR:-/tmp}
exec 8>"$LOCK_DIR/iser-guard-tests-kmsg.lock"
flock 8

T=${KEEP:-$(mktemp -d)}
mkdir -p "$T"
chmod 755 "$T"
echo "soak: $MINUTES minute(s), seed $SEED, in $T" >&2

mkdir -p "$T/sys/class/infiniband" "$T/sys/devices/virtual/infiniband" "$T/sys/module" \
    "$T/bin" "$T/state" "$T/run" "$T/world" "$T/stash"
for pair in rxe_ini:ini0 rxe_tgt:tgt0; do
    name=${pair%:*} netdev=${pair#*:}
    d="$T/sys/devices/virtual/infiniband/$name"
    mkdir -p "$d/ports/1/gid_attrs/ndevs"
    echo "$netdev" >"$d/ports/1/gid_attrs/ndevs/0"
    echo "4: ACTIVE" >"$d/ports/1/state"
    echo "1: CA" >"$d/node_type"
    echo "rxe" >"$d/node_desc"
    echo "$netdev" >"$d/parent"
    ln -s "$d" "$T/sys/class/infiniband/$name"
done
W=$T/world
echo present >"$W/device"
echo RTS >"$W/gsi"
echo up >"$W/target"
echo 5 >"$W/nl-chaos"
echo "5 3" >"$W/iscsiadm-chaos"
: >"$W/violations"

# The re-creation tool: moves rxe_ini out of and back into sysfs and the fake kernel's view,
# and checks the first two invariants. SOAK_CHAOS=1: the soak itself (a device vanishing).
cat >"$T/bin/rdma" <<'EOF'
#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
T=$here/..; W=$T/world; sys=$T/sys; stash=$T/stash
virt=$sys/devices/virtual/infiniband
chaos=${SOAK_CHAOS:-0}
exec 9>"$W/rdma.lock"; flock 9
now=$(date +%s.%N)
printf '%s rdma %s chaos=%s ppid=%s\n' "$now" "$*" "$chaos" "$PPID" >>"$here/argv.log"
violation() { printf '%s %s\n' "$now" "$*" >>"$W/violations"; }
case "$1 $2" in
"link delete")
    name=$3
    [ -e "$sys/class/infiniband/$name" ] || { echo "error: Wrong device name" >&2; exit 1; }
    if [ "$chaos" = 0 ]; then
        if [ -f "$W/recreating" ]; then
            holder=$(cat "$W/recreating")
            if kill -0 "$holder" 2>/dev/null; then
                violation "two re-creations in flight: delete of $name by $PPID while $holder's is not done"
            fi
        fi
        echo "$PPID" >"$W/recreating"
        set -- $(cat "$W/target")
        if [ "$1" = down ] && awk -v a="$2" -v b="$now" 'BEGIN {exit !(b - a > 3)}'; then
            violation "re-creation of $name while the target has been down since $2 (reset-when = target-back)"
        fi
        echo "$now" >>"$W/recreations"
    fi
    mv "$virt/$name" "$stash/$name"
    rm -f "$sys/class/infiniband/$name"
    echo absent >"$W/device"
    exit 0 ;;
"link add")
    name=$3; netdev=$7
    if [ -e "$sys/class/infiniband/$name" ]; then echo "error: File exists" >&2; exit 1; fi
    [ -d "$stash/$name" ] && mv "$stash/$name" "$virt/$name"
    ln -s "$virt/$name" "$sys/class/infiniband/$name"
    echo RTS >"$W/gsi"
    echo present >"$W/device"
    [ "$chaos" = 0 ] && rm -f "$W/recreating"
    exit 0 ;;
esac
echo "rdma stub: unknown command: $*" >&2
exit 1
EOF
# iscsiadm: fails or hangs at random (percentages in world/iscsiadm-chaos), else the
# stateful stub of the e2e tests.
cat >"$T/bin/iscsiadm" <<'EOF'
#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
read -r fail hang <"$here/../world/iscsiadm-chaos"
r=$(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 100 ))
if [ "$r" -lt "$fail" ]; then
    echo "iscsiadm: initiator reported error (4 - encountered connection failure)" >&2
    exit 4
fi
if [ "$r" -lt $((fail + hang)) ]; then
    sleep 60
    exit 0
fi
# A login needs the RDMA CM handshake on QP 1, the device and the target: it times out
# without them (ISCSI_ERR_TRANS_TIMEOUT), as on the lab's kernel.
case "$*" in
*--login)
    W=$here/../world
    if [ "$(cat "$W/gsi")" = ERR ] || [ "$(cat "$W/device")" = absent ] || [ "$(cut -d' ' -f1 "$W/target")" = down ]; then
        printf '%s\n' "$*" >>"$here/argv.log"
        portal=$(cat "$here/portal")
        sed -e "s/192\.0\.2\.2,3260/${portal%:*},${portal##*:}/g" "$here/fixtures/login-timeout.txt"
        sed -e "s/192\.0\.2\.2,3260/${portal%:*},${portal##*:}/g" "$here/fixtures/login-timeout.err" >&2
        exit 8
    fi ;;
esac
exec "$here/iscsiadm-host" "$@"
EOF
cp "$STUBS/iscsiadm-host" "$T/bin/iscsiadm-host"
for tool in devlink modprobe; do cp "$STUBS/$tool" "$T/bin/$tool"; done
ln -s "$STUBS/iscsiadm.d" "$T/bin/fixtures"
chmod 755 "$T/bin/"*
echo LOGGED_IN >"$T/bin/state"

cat >"$T/config.toml" <<EOF
[paths]
kmsg = "/dev/kmsg"
sysfs-root = "$T/sys"
state-dir = "$T/state"
iscsiadm = "$T/bin/iscsiadm"
control-socket = "$T/run/control.sock"
devlink = "$T/bin/devlink"
rdma = "$T/bin/rdma"
modprobe = "$T/bin/modprobe"

[poll]
netlink = 1
iscsi = 2
probe = 0.5

[devices]
allow = ["rxe_ini"]

[recovery]
reset-when = "target-back"
probe-successes = 2
probe-timeout = 0.3
iscsid-grace = 1
backoff-initial = 1
backoff-max = 8
max-attempts = 100
iscsiadm-timeout = 5

[alerts]
syslog-socket = "$T/syslog.sock"

[kmsg]
trust-userspace-records = true
EOF
"$BIN_DIR/iser-guard" check-config "$T/config.toml" >/dev/null

# Portal: a loopback port nobody uses.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "127.0.0.1:$port" >"$T/bin/portal"

exec python3 - "$T" "$DAEMON" "$MINUTES" "$SEED" "$port" "$ALERT_BOUND" <<'PY'
import os, random, signal, socket, subprocess, sys, threading, time

T, DAEMON, MINUTES, SEED, PORT, ALERT_BOUND = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
W = os.path.join(T, "world")
rng = random.Random(SEED)
start = time.time()
end = start + MINUTES * 60
# A short run compresses every interval so each kind of chaos still happens.
SCALE = 1.0 if MINUTES >= 10 else 0.35
lock = threading.Lock()
events = {}
violations = []
alerts = []          # (time, text)
figures = {"records_injected": 0, "restarts": 0, "ready_after_restart": 0}

def now():
    return time.time()

def stamp():
    return "%7.1f" % (now() - start)

def count(kind, n=1):
    with lock:
        events[kind] = events.get(kind, 0) + n

def violation(text):
    with lock:
        violations.append((now() - start, text))
    print(f"{stamp()} VIOLATION {text}", flush=True)

def say(text):
    print(f"{stamp()} {text}", flush=True)

def write(name, text):
    with open(os.path.join(W, name), "w") as f:
        f.write(text + "\n")

def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""

def every(lo, hi):
    return rng.uniform(lo * SCALE, hi * SCALE)

# ---- syslog: every alert the daemon sends ---------------------------------------------
sock_path = os.path.join(T, "syslog.sock")
syslog = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
syslog.bind(sock_path)
syslog.settimeout(0.5)
reader_stop = threading.Event()
def syslog_reader():
    while not reader_stop.is_set():
        try:
            d = syslog.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return
        with lock:
            alerts.append((now(), d.decode(errors="replace")))
reader = threading.Thread(target=syslog_reader, daemon=True)
reader.start()
def drain_syslog():
    # The final checks read every alert the daemon sent before it exited: the reader may
    # not have taken the last ones from the socket yet, so they are drained here first.
    reader_stop.set()
    reader.join()
    syslog.setblocking(False)
    while True:
        try:
            d = syslog.recv(65536)
        except OSError:
            return
        with lock:
            alerts.append((now(), d.decode(errors="replace")))

# ---- the portal's listener, flapping -------------------------------------------------
class Portal:
    def __init__(self):
        self.sock = None
    def up(self):
        if self.sock:
            return
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", PORT))
        s.listen(64)
        self.sock = s
        threading.Thread(target=self.accept, args=(s,), daemon=True).start()
        write("target", "up")
    def accept(self, s):
        while True:
            try:
                c, _ = s.accept()
                c.close()
            except OSError:
                return
    def down(self):
        if not self.sock:
            return
        write("target", f"down {now():.3f}")
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.sock = None
portal = Portal()
portal.up()

# ---- kernel-log injection (one open + write per record: the per-open ratelimit) ------
def inject(lines, rate):
    n = 0
    t0 = now()
    for i, line in enumerate(lines):
        try:
            fd = os.open("/dev/kmsg", os.O_WRONLY)
            os.write(fd, line.encode())
            os.close(fd)
            n += 1
        except OSError:
            pass
        wait = t0 + (i + 1) / rate - now()
        if wait > 0:
            time.sleep(wait)
    with lock:
        figures["records_injected"] += n
    return n

def storm(n, rate, tag):
    return inject([f"<7>soak-{tag} {i}: pci 0000:00:01.1: BAR 4 [io  0xc0a0-0xc0af] soak filler\n" for i in range(n)], rate)

STUCK_RECORD = "<3>infiniband rxe_ini: ib_mad_send_error - ib_modify_qp to RTS: -22\n"

# ---- the daemon --------------------------------------------------------------------------
logf = open(os.path.join(T, "daemon.log"), "ab")
class Daemon:
    def __init__(self):
        self.p = None
        self.killed = False
        self.log_from = 0
    def start(self):
        logf.write(f"==== soak: start at {stamp()} ====\n".encode()); logf.flush()
        self.log_from = os.path.getsize(os.path.join(T, "daemon.log"))
        env = dict(os.environ, ISER_GUARD_LOG="info", NO_COLOR="1")
        self.p = subprocess.Popen([DAEMON, "--config", os.path.join(T, "config.toml"), "--world", W],
                                  stdout=subprocess.DEVNULL, stderr=logf, env=env)
        self.started = now()
        self.killed = False
        self.baseline = None
    def ready(self):
        with open(os.path.join(T, "daemon.log"), "rb") as f:
            f.seek(self.log_from)
            return b"first scan done" in f.read()
    def kill(self):
        self.killed = True
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        count("sigkill")
daemon = Daemon()

def reap():
    # Never leave the daemon behind, whatever ends this script.
    if daemon.p and daemon.p.poll() is None:
        daemon.p.kill()
        daemon.p.wait()
import atexit
atexit.register(reap)

# ---- samples: RSS and fds ------------------------------------------------------------
samples = {"rss_kb": [], "fds": []}
steady = {}
def sample():
    pid = daemon.p.pid
    try:
        rss = int([l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:")][0])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, IndexError):
        return
    samples["rss_kb"].append(rss)
    samples["fds"].append(fds)
    if now() - daemon.started < 20:
        return
    if not steady:
        steady.update(rss=rss, fds=fds)
        say(f"steady sample: RSS {rss} KiB, {fds} fds")
        return
    if rss > max(2 * steady["rss"], steady["rss"] + 16 * 1024):
        violation(f"RSS {rss} KiB, steady was {steady['rss']} KiB")
    if fds > steady["fds"] + 16:
        violation(f"{fds} open fds, steady was {steady['fds']}")

# ---- sessions lost silently ----------------------------------------------------------
episodes = []   # [t0, resolved]
def check_episodes():
    state = read(os.path.join(T, "bin", "state"))
    with lock:
        recent = list(alerts)
    for e in episodes:
        if e[1]:
            continue
        if state == "LOGGED_IN":
            e[1] = "logged in again"
        elif any(t >= e[0] and ("tgt0" in a or "session" in a) for t, a in recent):
            e[1] = "alerted"
        elif now() - e[0] > 180:
            e[1] = "lost"
            violation(f"the session failed at {e[0] - start:.1f} s and was neither logged in again nor alerted within 180 s")

# ---- alerts bounded ------------------------------------------------------------------
def check_alerts():
    with lock:
        last_minute = [a for a in alerts if a[0] > now() - 60]
    if len(last_minute) > ALERT_BOUND:
        violation(f"{len(last_minute)} alerts in the last minute (bound {ALERT_BOUND})")
        return True
    return False

# ---- iscsid: connections drop with the device, the target or QP 1, and come back on their own
STATE = os.path.join(T, "bin", "state")
def set_session(state):
    with open(STATE, "w") as f:
        f.write(state + "\n")
relogin_at = None
def iscsid():
    global relogin_at
    state = read(STATE)
    usable = (read(os.path.join(W, "device")) == "present" and read(os.path.join(W, "gsi")) != "ERR"
              and portal.sock is not None)
    if state == "LOGGED_IN" and not usable:
        set_session("FAILED")
        episodes.append([now(), None])
        count("connection-lost")
        relogin_at = None
    elif state == "FAILED" and usable:
        if relogin_at is None:
            relogin_at = now() + rng.uniform(2, 6)
        elif now() >= relogin_at:
            set_session("LOGGED_IN")
            count("iscsid-relogin")
            relogin_at = None
    elif state == "FAILED":
        relogin_at = None

# ---- the chaos schedule ----------------------------------------------------------------
due = {
    "gsi": now() + every(20, 60),
    "flap": now() + every(20, 60),
    "session": now() + every(40, 120),
    "vanish": now() + every(90, 240),
    "storm": now() + every(30, 90),
    "kill": now() + every(45, 120),
}
vanished_until = None
alert_flood_reported_at = 0

daemon.start()
deadline = now() + 30
while not daemon.ready():
    if now() > deadline or daemon.p.poll() is not None:
        print(open(os.path.join(T, "daemon.log")).read()[-3000:], file=sys.stderr)
        sys.exit("soak: the daemon did not start")
    time.sleep(0.2)
say("daemon ready")

last_sample = 0
stub_seen = 0
while now() < end:
    t = now()
    if daemon.p.poll() is not None and not daemon.killed:
        violation(f"the daemon exited on its own with status {daemon.p.returncode}")
        daemon.start()
    iscsid()
    if t - last_sample >= 5:
        last_sample = t
        sample()
        stub_lines = read(os.path.join(W, "violations")).splitlines()
        for line in stub_lines[stub_seen:]:
            violation("stub: " + line)
        stub_seen = len(stub_lines)
        check_episodes()
        if t - alert_flood_reported_at > 60 and check_alerts():
            alert_flood_reported_at = t
    if t >= due["gsi"]:
        due["gsi"] = t + every(40, 100)
        if read(os.path.join(W, "device")) == "present" and read(os.path.join(W, "gsi")) != "ERR":
            write("gsi", "ERR")
            count("gsi-stuck")
            if rng.random() < 0.5:
                inject([STUCK_RECORD], 10)
                count("gsi-stuck-record")
            say("fault: rxe_ini's QP 1 in ERR")
    if t >= due["flap"]:
        if portal.sock:
            portal.down()
            count("target-down")
            due["flap"] = t + every(5, 30)
            say("target down")
        else:
            portal.up()
            due["flap"] = t + every(20, 60)
            say("target up")
    if t >= due["session"]:
        due["session"] = t + every(60, 150)
        if read(os.path.join(T, "bin", "state")) == "LOGGED_IN":
            set_session("FAILED")
            episodes.append([t, None])
            count("session-failed")
            say("session FAILED")
    if t >= due["vanish"]:
        due["vanish"] = t + every(120, 300)
        if read(os.path.join(W, "device")) == "present" and not os.path.exists(os.path.join(W, "recreating")):
            subprocess.run([os.path.join(T, "bin", "rdma"), "link", "delete", "rxe_ini"],
                           env=dict(os.environ, SOAK_CHAOS="1"), stderr=subprocess.DEVNULL)
            vanished_until = t + every(10, 60)
            count("device-vanished")
            say("rxe_ini vanished")
    if vanished_until and t >= vanished_until:
        vanished_until = None
        if read(os.path.join(W, "device")) == "absent" and not os.path.exists(os.path.join(W, "recreating")):
            subprocess.run([os.path.join(T, "bin", "rdma"), "link", "add", "rxe_ini", "type", "rxe", "netdev", "ini0"],
                           env=dict(os.environ, SOAK_CHAOS="1"), stderr=subprocess.DEVNULL)
            count("device-back-by-itself")
            say("rxe_ini came back by itself")
    if t >= due["storm"]:
        due["storm"] = t + every(45, 120)
        n = storm(rng.randint(500, 3000), 2000, "storm")
        count("kmsg-storm")
        say(f"kernel-log storm: {n} records")
    if t >= due["kill"]:
        due["kill"] = t + every(45, 120)
        daemon.kill()
        say("SIGKILL")
        if rng.random() < 0.3:
            # Overrun: more than the ring holds while nobody reads it.
            n = storm(rng.randint(20000, 40000), 20000, "overrun")
            count("kmsg-overrun-burst")
            say(f"overrun burst while down: {n} records")
        time.sleep(rng.uniform(0.1, 3))
        daemon.start()
        figures["restarts"] += 1
        deadline = now() + 30
        while not daemon.ready() and now() < deadline and daemon.p.poll() is None:
            time.sleep(0.2)
        if daemon.ready():
            figures["ready_after_restart"] += 1
        else:
            violation("the daemon was not ready 30 s after a restart")
    time.sleep(0.5)

# ---- the end: SIGTERM, then the figures ---------------------------------------------------
portal.up()
daemon.p.send_signal(signal.SIGTERM)
try:
    rc = daemon.p.wait(timeout=10)
except subprocess.TimeoutExpired:
    rc = None
    violation("the daemon did not stop within 10 s of SIGTERM")
if rc not in (0, None):
    violation(f"the daemon exited with {rc} on SIGTERM")
drain_syslog()
check_episodes()
log = open(os.path.join(T, "daemon.log"), errors="replace").read()
if "panicked" in log:
    violation("a panic in the daemon's log")
for line in read(os.path.join(W, "violations")).splitlines()[stub_seen:]:
    violation("stub: " + line)
lost = 0
import re
for m in re.finditer(r"kernel log records lost count=(\d+)", log):
    lost += int(m.group(1))
recreations = len(read(os.path.join(W, "recreations")).splitlines()) if read(os.path.join(W, "recreations")) else 0
nl = read(os.path.join(W, "nl-stats")).split() or ["0"] * 4
with lock:
    per_minute = {}
    for t, _ in alerts:
        k = int((t - start) // 60)
        per_minute[k] = per_minute.get(k, 0) + 1
healthy = log.count("to=Healthy")
minutes = (now() - start) / 60
summary = f"""soak: {minutes:.1f} minute(s), seed {SEED}
  chaos events: {', '.join(f'{k} {v}' for k, v in sorted(events.items()))}
  SIGKILLs survived: {figures['ready_after_restart']} of {figures['restarts']} restarts ready again within 30 s
  re-creations by the daemon: {recreations}; transitions to Healthy: {healthy}; quarantines: {log.count('to=Quarantined')}
  sessions failed: {len(episodes)} ({', '.join(sorted(set(str(e[1]) for e in episodes))) or 'none'})
  kernel-log records injected: {figures['records_injected']}; reported lost by the daemon: {lost} (overrun bursts while down: {events.get('kmsg-overrun-burst', 0)})
  netlink requests answered: {nl[0]} ({nl[1]} error replies, {nl[2]} interrupted dumps, {nl[3]} -ENODEV for the vanished device)
  alerts: {len(alerts)} in syslog, at most {max(per_minute.values(), default=0)} in a minute
  RSS KiB: min {min(samples['rss_kb'], default=0)}, steady {steady.get('rss')}, max {max(samples['rss_kb'], default=0)}; fds: min {min(samples['fds'], default=0)}, steady {steady.get('fds')}, max {max(samples['fds'], default=0)}
  violations: {len(violations)}"""
print(summary, flush=True)
for t, v in violations:
    print(f"  - at {t:.1f} s: {v}")
open(os.path.join(T, "summary.txt"), "w").write(summary + "\n")
sys.exit(1 if violations else 0)
PY
