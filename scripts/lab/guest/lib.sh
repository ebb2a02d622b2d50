#!/bin/bash
# Guest-side helpers shared by every batch and scenario (sourced).
#
# Topology (everything in the initial network namespace: on 6.1 rdma_rxe opens its UDP 4791
# socket only there, and 6.12 behaves the same for two namespaces): one veth pair, ini0
# 192.0.2.1 (initiator, RDMA device rxe_ini) <-> tgt0 192.0.2.2 (target, rxe_tgt), and policy
# routing that forces traffic between the two local addresses over the veth instead of lo.
# The LIO iSER target (rtslib) serves a 64 MiB ramdisk; open-iscsi logs in over iface iser.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
OUT=${OUT:-/tmp/out}
INI_IF=ini0 TGT_IF=tgt0 INI_IP=192.0.2.1 TGT_IP=192.0.2.2
INI_RXE=rxe_ini TGT_RXE=rxe_tgt PORT=3260
IQN=iqn.2003-01.org.example.lab:tgt0
NP=/sys/kernel/config/target/iscsi/$IQN/tpgt_1/np/$TGT_IP:$PORT
IG=/usr/sbin/iser-guard
CONF=/etc/iser-guard/config.toml
SOCK=/run/iser-guard/control.sock
STATE=/var/lib/iser-guard
mkdir -p "$OUT"

now() { date +%s.%N | cut -c1-14; }
up() { cut -d' ' -f1 /proc/uptime; }
log() { echo "[$(up)] $*"; }
# since T0 EPOCH LABEL: EPOCH - T0, or LABEL when EPOCH is empty (it never happened)
since() { if [ -n "$2" ]; then elapsed $1 $2; else echo $3; fi; }
# deadline S: an epoch S seconds from now; before EPOCH: true while now < EPOCH. Loops are bounded
# by time, not by a count: under TCG on a loaded host one iteration can take seconds.
deadline() { python3 -c "print($(now) + $1)"; }
before() { python3 -c "import sys; sys.exit(0 if $(now) < $1 else 1)"; }
# elapsed A [B]: B - A in seconds with 2 decimals (B defaults to now)
elapsed() { python3 -c "print('%.2f' % (${2:-$(now)} - $1))"; }

# --- verdicts -------------------------------------------------------------------------------
# Each scenario runs in its own folder ($SOUT) and ends with exactly one verdict line:
#   VERDICT <name> PASS|FAIL|ERROR <reason>
# FAIL is the product's; ERROR means the lab could not establish the scenario's precondition
# (the run says nothing about the product then).
SCEN=none
FAILS=()
scen_begin() {
	SCEN=$1
	SOUT=$OUT/$SCEN
	mkdir -p "$SOUT"
	FAILS=()
	SCEN_T0=$(now)
	log "=== scenario $SCEN"
}
# check COND-DESCRIPTION CMD...: records a failed expectation (the scenario goes on)
check() {
	local what=$1
	shift
	if "$@"; then log "  ok: $what"; else log "  FAILED: $what"; FAILS+=("$what"); fi
}
not() { ! "$@"; }
# no_blame_of DEV: no alert of this scenario names DEV, and no daemon log line does except the
# topology's observations of it ("RDMA topology observation=..."), which name every device.
no_blame_of() {
	! grep -q "$1" "$SOUT/alerts.log" 2>/dev/null &&
		! grep "$1" "$SOUT/daemon.log" 2>/dev/null | grep -v "RDMA topology observation=" | grep -q .
}
fail() { log "  FAILED: $*"; FAILS+=("$*"); }
verdict() {
	local v r
	if [ -n "${SCEN_ERROR:-}" ]; then
		v=ERROR r="lab: $SCEN_ERROR"
	elif [ ${#FAILS[@]} -eq 0 ]; then
		v=PASS r="${SCEN_PASS_REASON:-${1:-all expectations met}}"
	else
		v=FAIL r=$(IFS=';'; echo "${FAILS[*]}")
	fi
	echo "VERDICT $SCEN $v $r" | tee -a "$OUT/verdicts.txt" "$SOUT/verdict.txt"
	echo "scenario_s $SCEN $(elapsed "$SCEN_T0")" >> "$OUT/figures.txt"
	SCEN_ERROR= SCEN_PASS_REASON=
}
# figure NAME VALUE: one measured figure of the current scenario
figure() { echo "FIGURE $SCEN $1 $2" | tee -a "$OUT/figures.txt"; }
lab_error() { SCEN_ERROR=$*; log "  LAB ERROR: $*"; }

# --- one-time setup ---------------------------------------------------------------------------
net_setup() {
	ip link add $INI_IF type veth peer name $TGT_IF
	ip addr add $INI_IP/24 dev $INI_IF
	ip addr add $TGT_IP/24 dev $TGT_IF
	for i in all default $INI_IF $TGT_IF; do
		sysctl -qw net.ipv4.conf.$i.accept_local=1 net.ipv4.conf.$i.rp_filter=0
	done
	# The initiator's neighbour entries age faster than Linux's defaults (reachable 15-45 s,
	# first probe 5 s after a stale entry is used): the in-kernel field incident trips when a
	# QP 1 send meets the target's entry FAILED (scripts/lab/kmod), which took 10-38 s after the
	# power-off with the defaults and 5-20 s with these; the kernel's path is the same
	# (REACHABLE, STALE, DELAY, PROBE, FAILED), only its timers are shorter. A healthy target
	# answers the extra unicast probes; no entry is invalid while it does.
	sysctl -qw net.ipv4.neigh.$INI_IF.base_reachable_time_ms=5000 \
		net.ipv4.neigh.$INI_IF.delay_first_probe_time=1
	ip link set $INI_IF up
	ip link set $TGT_IF up
	ip rule add pref 100 lookup local
	ip rule del pref 0 lookup local
	ip rule add pref 50 iif lo lookup 200
	net_routes
}
# net_routes: the two host routes that force traffic between the ends over the veth. Taking a
# link down deletes the routes through it (the zombie scenarios' `ip link set tgt0 down`);
# without the one through tgt0 the target's replies went via lo, past the blackhole's netem
# (lab-selftest on 6.12, 2026-12-02: netem on tgt0 dropped 0 packets while the portal answered
# TCP). Restored (and said) whenever missing.
net_routes() {
	local r dst dev src
	for r in "$TGT_IP $INI_IF $INI_IP" "$INI_IP $TGT_IF $TGT_IP"; do
		read -r dst dev src <<< "$r"
		if ! ip route show table 200 | grep -q "^$dst dev $dev "; then
			[ "${SCEN:-none}" != none ] && log "baseline: table 200 had lost the route to $dst via $dev (restored)"
			ip route replace $dst/32 dev $dev src $src table 200
		fi
	done
	ip route flush cache
}

# The lab's rdma_rxe (scripts/lab/kmod): Debian's own rxe with QP 1 of rxe_ini failing the way
# irdma's does (ERR on a send whose neighbour entry is gone, ERR->RTS refused with irdma's
# line). Every other device and QP is stock rxe. Loaded instead of the image's rdma_rxe; its
# dependencies come from the image. KMOD_MODEL= names the modelled devices (default rxe_ini).
rxe_load() {
	local d=/lab/kmod/$(uname -r) m
	if [ ! -f $d/rdma_rxe.ko ]; then
		echo "no lab module for $(uname -r) (run.sh kmod)" > "$OUT/kmod.txt"
		log "LAB: $(cat "$OUT/kmod.txt"); loading the image's stock rdma_rxe"
		modprobe rdma_rxe
		return 1
	fi
	for m in $(sed -n 's/^depends=//p' $d/modinfo.txt | tr ',' ' '); do modprobe $m; done
	insmod $d/rdma_rxe.ko irdma_gsi_devs=${KMOD_MODEL-$INI_RXE}
	{ cat $d/modinfo.txt; echo "irdma_gsi_devs=$(cat /sys/module/rdma_rxe/parameters/irdma_gsi_devs)"; } > "$OUT/kmod.txt"
	log "lab rdma_rxe loaded: irdma-like QP 1 on $(cat /sys/module/rdma_rxe/parameters/irdma_gsi_devs)"
}
# kmod_model_on: the irdma-like QP 1 is in force for rxe_ini
kmod_model_on() {
	grep -qw "$INI_RXE" /sys/module/rdma_rxe/parameters/irdma_gsi_devs 2>/dev/null
}
rxe_setup() {
	rxe_load
	modprobe rdma_ucm
	modprobe ib_uverbs
	modprobe ib_umad 2>/dev/null
	rdma link add $INI_RXE type rxe netdev $INI_IF
	rdma link add $TGT_RXE type rxe netdev $TGT_IF
	sleep 1
}

target_setup() {
	mkdir -p /etc/target
	modprobe target_core_mod
	modprobe target_core_file
	modprobe target_core_iblock
	modprobe iscsi_target_mod
	modprobe ib_isert
	python3 /lab/guest/lio-setup.py $IQN $TGT_IP $PORT
}

iscsid_start() {
	modprobe ib_iser
	modprobe iscsi_tcp
	modprobe sd_mod
	modprobe sg # no udev in the tiny guest: no modalias autoloading
	mkdir -p /run/lock/iscsi /var/lib/iscsi
	if [ "${LAB_INIT:-tiny}" = systemd ]; then
		systemctl start iscsid.service
	else
		# each line with its arrival time (stamp.py): iscsid -f prints none
		iscsid -f > >(python3 /lab/guest/stamp.py > "$OUT/iscsid.log") 2>&1 &
		ISCSID_PID=$!
		sleep 0.5
	fi
}

# the rdma_cm rejections and rxe QP state changes are pr_debug: enable only those formats
dyndbg_setup() {
	local C=/sys/kernel/debug/dynamic_debug/control
	[ -w $C ] || return 0
	echo 'module rdma_cm +p' > $C 2>/dev/null
	echo 'module rdma_rxe format "state ->" +p' > $C 2>/dev/null
	echo 'module rdma_rxe format "lab irdma model" +p' > $C 2>/dev/null
}

syslog_start() {
	[ "${LAB_INIT:-tiny}" = systemd ] && return 0
	python3 /lab/guest/syslogd.py /dev/log "$OUT/alerts.log" &
	SYSLOG_PID=$!
}

# devwatch (guest/devwatch.py): rxe_ini's presence and identity every 50 ms. A re-creation is
# a new identity (a re-created device is a new sysfs node, and gets a new RDMA device index
# while its netdev keeps its own). Lines: "<epoch> present <inode>" or "<epoch> absent".
devwatch_start() {
	python3 /lab/guest/devwatch.py $INI_RXE >> "$OUT/devwatch.log" 2>&1 &
	DEVWATCH_PID=$!
}
# recreations_since EPOCH: how many times rxe_ini came back with a new index after EPOCH
recreations_since() {
	python3 - "$OUT/devwatch.log" "$1" <<'EOP'
import sys
t0 = float(sys.argv[2]); idx = None; n = 0
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 2: continue
    t = float(p[0])
    if p[1] == "present":
        if idx is not None and p[2] != idx and t > t0: n += 1
        idx = p[2]
print(n)
EOP
}
# recreations_between A B: re-creations (index changes) of rxe_ini that became visible in [A, B]
recreations_between() {
	python3 - "$OUT/devwatch.log" "$1" "$2" <<'EOP'
import sys
a, b = float(sys.argv[2]), float(sys.argv[3]); idx = None; n = 0
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 2: continue
    t = float(p[0])
    if p[1] == "present":
        if idx is not None and p[2] != idx and a < t <= b: n += 1
        idx = p[2]
print(n)
EOP
}
# first_recreation_since EPOCH: epoch at which rxe_ini first came back (new index) after EPOCH,
# and the time it was absent: "<epoch> <absent_s>" or nothing
first_recreation_since() {
	python3 - "$OUT/devwatch.log" "$1" <<'EOP'
import sys
t0 = float(sys.argv[2]); idx = None; gone = None
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 2: continue
    t = float(p[0])
    if p[1] == "absent":
        gone = t
    elif p[1] == "present":
        if idx is not None and p[2] != idx and t > t0:
            print("%.3f %.2f" % (t, t - (gone if gone else t))); break
        idx = p[2]
EOP
}

# I/O loop: 16 × 4 KiB direct write + direct read on the iSCSI disk every 0.5 s. Lines:
# "<start> <end> ok|fail <error>". A stalled dd (session FAILED: I/O is queued until the
# replacement timeout) stalls the loop: its completion time is when I/O flows again.
io_start() {
	local dev=$1
	(
		while true; do
			t0=$(now)
			if timeout -s KILL 150 dd if=/dev/urandom of=$dev bs=4k count=16 oflag=direct conv=fsync status=none 2>/tmp/io.err &&
				timeout -s KILL 150 dd if=$dev of=/dev/null bs=4k count=16 iflag=direct status=none 2>>/tmp/io.err; then
				echo "$t0 $(now) ok"
			else
				echo "$t0 $(now) fail $(tr '\n' ' ' < /tmp/io.err | cut -c1-160)"
			fi
			sleep 0.5
		done
	) >> "$OUT/io.log" 2>&1 &
	IO_PID=$!
}
io_stop() {
	[ -n "${IO_PID:-}" ] && kill $IO_PID 2>/dev/null
	IO_PID=
}
# io_ok_after EPOCH: epoch of the end of the first successful I/O round that ended after EPOCH
# and started after the last failed one (I/O flowing again), or nothing
io_ok_after() {
	awk -v t="$1" '$2>t && $3=="ok"{print $2; exit}' "$OUT/io.log"
}
# one direct-I/O write and read, bounded (a stalled dd is left behind, not waited for)
direct_io_check() {
	local dev
	dev=$(iscsi_disk) || return 1
	(dd if=/dev/urandom of=$dev bs=4k count=32 oflag=direct conv=fsync status=none &&
		dd if=$dev of=/dev/null bs=4k count=32 iflag=direct status=none && echo ok) > /tmp/dio.out 2>&1 &
	local p=$! i
	for i in $(seq 1 40); do kill -0 $p 2>/dev/null || break; sleep 0.25; done
	grep -qx ok /tmp/dio.out
}

# --- iSCSI state ------------------------------------------------------------------------------
iscsi_disk() {
	local d
	for d in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
		[ -e "$d" ] && { echo /dev/$(basename $d); return 0; }
	done
	return 1
}
wait_disk() {
	local i
	for i in $(seq 1 60); do iscsi_disk && return 0; sleep 0.25; done
	return 1
}
# session_sid: the sid of the (one) session of $IQN, or nothing
session_sid() {
	local s
	for s in /sys/class/iscsi_session/session*; do
		[ -e $s/targetname ] || continue
		[ "$(cat $s/targetname)" = $IQN ] && { basename $s | sed 's/session//'; return 0; }
	done
	return 1
}
session_state() {
	local sid
	sid=$(session_sid) || { echo none; return; }
	cat /sys/class/iscsi_session/session$sid/state 2>/dev/null || echo none
}
session_logged_in() { [ "$(session_state)" = LOGGED_IN ]; }
# wait_log FILE REGEX MAX: waits until FILE has a line matching REGEX (grep -E), at most MAX s;
# what a scenario waits for is evidence, not time (false when it never came)
wait_log() {
	local end=$(deadline $3)
	until grep -qE "$2" "$1" 2>/dev/null; do before $end || return 1; sleep 0.25; done
}
# wait_logged_in MAX: seconds until the session is LOGGED_IN, or "timeout"
wait_logged_in() {
	local t0=$(now)
	while ! session_logged_in; do
		python3 -c "import sys; sys.exit(0 if $(now)-$t0 > $1 else 1)" && { echo timeout; return 1; }
		sleep 0.25
	done
	elapsed $t0
}
iser_login() {
	timeout 30 iscsiadm -m discovery -t st -p $TGT_IP:$PORT -I iser > /tmp/discovery.txt 2>&1
	if ! grep -q "$IQN" /tmp/discovery.txt; then
		# iSER SendTargets discovery sometimes fails on LIO under CPU contention ("Unable to
		# accept text parameter length ... MaxXmitDataSegmentLength 0"): a static node record
		iscsiadm -m node -o new -T $IQN -p $TGT_IP:$PORT -I iser >> /tmp/discovery.txt 2>&1
	fi
	timeout 60 iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -I iser --login > /tmp/login.txt 2>&1
}
iser_logout_all() { timeout 30 iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -u > /dev/null 2>&1; }
# gsi_state DEV: the state of DEV's QP 1 in the netlink QP table ("none" when absent)
gsi_state() {
	rdma resource show qp -j 2>/dev/null |
		jq -r "[.[] | select(.ifname==\"$1\" and .lqpn==1)][0].state // \"none\""
}
# gsi_rts DEV: the GSI QP (lqpn 1) of DEV is in RTS in the netlink QP table
gsi_rts() {
	rdma resource show qp -j 2>/dev/null |
		jq -e ".[] | select(.ifname==\"$1\" and .lqpn==1 and .type==\"GSI\" and .state==\"RTS\")" > /dev/null
}
dev_present() { rdma link show -j 2>/dev/null | jq -e ".[] | select(.ifname==\"$1\")" > /dev/null; }

# --- network faults ---------------------------------------------------------------------------
# target unreachable, links up: netem drops every packet both ways (no 6.1 panic, unlike a link
# loss whose connection fails during the outage)
blackhole_on() {
	modprobe sch_netem
	tc qdisc replace dev $TGT_IF root netem loss 100%
	tc qdisc replace dev $INI_IF root netem loss 100%
}
blackhole_off() {
	tc qdisc del dev $TGT_IF root 2>/dev/null
	tc qdisc del dev $INI_IF root 2>/dev/null
	true
}
# the field lines, naming rxe_ini, written into /dev/kmsg (userspace records: facility 1): only
# field-default-trust does this, to check that forged records trigger nothing
inject_field_lines() {
	echo "<3>infiniband $INI_RXE: ib_mad_send_error - ib_modify_qp to RTS: -22" > /dev/kmsg
}

# --- the daemon -------------------------------------------------------------------------------
# The lab's recovery.device-wait (the product's default is 60 s): how long the daemon waits for a
# vanished initiator device to come back by itself before it re-creates it. The deleted-device
# scenarios wait that long for nothing, so the lab shortens it, when the binary knows the key
# (lab_probe_config; older binaries reject unknown keys and keep 60 s). Bounds follow it.
LAB_DEVICE_WAIT_WANT=10
lab_probe_config() {
	local bin=/lab/bin/iser-guard
	printf '[recovery]\ndevice-wait = %s\n' $LAB_DEVICE_WAIT_WANT > /tmp/probe-config.toml
	chmod 0640 /tmp/probe-config.toml
	if $bin check-config --config /tmp/probe-config.toml > /tmp/probe-config.out 2>&1; then
		LAB_DEVICE_WAIT=$LAB_DEVICE_WAIT_WANT
	else
		LAB_DEVICE_WAIT=
	fi
	echo "device_wait=${LAB_DEVICE_WAIT:-60 (binary default: no recovery.device-wait key)}" > "$OUT/lab-config.txt"
}
# device_wait_s: the device wait the daemon runs with
device_wait_s() { echo ${LAB_DEVICE_WAIT:-60}; }
# write_config [trust] : the daemon's real config file. trust=1: the lab-only configuration
# that trusts userspace kmsg records. devices.allow = ["rxe_ini"] in both, the lab's device
# wait, and EXTRA_RECOVERY (more [recovery] lines), EXTRA_CONFIG (more sections).
write_config() {
	mkdir -p /etc/iser-guard
	{
		echo "[devices]"
		echo "allow = [\"$INI_RXE\"]"
		if [ "${1:-0}" = 1 ]; then
			echo "[kmsg]"
			echo "trust-userspace-records = true"
		fi
		if [ -n "${LAB_DEVICE_WAIT:-}" ] || [ -n "${EXTRA_RECOVERY:-}" ]; then
			echo "[recovery]"
			[ -n "${LAB_DEVICE_WAIT:-}" ] && echo "device-wait = $LAB_DEVICE_WAIT"
			[ -n "${EXTRA_RECOVERY:-}" ] && printf '%s\n' "$EXTRA_RECOVERY"
		fi
		[ -n "${EXTRA_CONFIG:-}" ] && printf '%s\n' "$EXTRA_CONFIG"
	} > $CONF
	chmod 0640 $CONF
}
daemon_start() {
	local tag=${1:-daemon}
	# each line stamped with its arrival time (guest/stamp.py); $! is the daemon's pid
	NO_COLOR=1 $IG --log ${LAB_DAEMON_LOG:-info} daemon > >(python3 -u /lab/guest/stamp.py >> "$SOUT/$tag.log") 2>&1 &
	DAEMON_PID=$!
	# ready when the control socket answers (the first scan is done before it serves) and the
	# status command shows the daemon's view. status exits 1 when it finds a stuck port (a
	# restart while QP 1 is in ERR, restart-holding): that is an answer too, only 2+ is not.
	local end rc
	end=$(deadline 60)
	while before $end; do
		if [ -S $SOCK ] && python3 /lab/guest/ctl.py $SOCK '{"cmd":"status"}' > /dev/null 2>&1; then
			rc=0
			$IG status --json > /dev/null 2>&1 || rc=$?
			[ $rc -le 1 ] && return 0
		fi
		kill -0 $DAEMON_PID 2>/dev/null || { log "daemon exited: $(tail -3 "$SOUT/$tag.log")"; return 1; }
		sleep 0.25
	done
	log "daemon not ready within 60 s (control socket or status did not answer)"
	return 1
}
daemon_stop() {
	[ -n "${DAEMON_PID:-}" ] || return 0
	kill -TERM $DAEMON_PID 2>/dev/null
	local i
	for i in $(seq 1 60); do kill -0 $DAEMON_PID 2>/dev/null || break; sleep 0.25; done
	kill -0 $DAEMON_PID 2>/dev/null && { log "daemon did not stop on SIGTERM"; kill -KILL $DAEMON_PID; }
	wait $DAEMON_PID 2>/dev/null
	DAEMON_STOP_RC=$?
	DAEMON_PID=
}
daemon_alive() { [ -n "${DAEMON_PID:-}" ] && kill -0 $DAEMON_PID 2>/dev/null; }

# --- the baseline every scenario starts from ------------------------------------------------
# No daemon, no fault, both RDMA devices present, the portal's iSER listener on, one session
# LOGGED_IN with working direct I/O, a fresh state directory. Sets SCEN_ERROR when it cannot.
baseline() {
	daemon_stop
	io_stop
	blackhole_off
	ip link set $TGT_IF up
	ip link set $INI_IF up
	net_routes
	dev_present $INI_RXE || rdma link add $INI_RXE type rxe netdev $INI_IF
	dev_present $TGT_RXE || rdma link add $TGT_RXE type rxe netdev $TGT_IF
	# a QP 1 left in ERR by an earlier scenario (the lab's irdma-like rdma_rxe) is what only
	# a re-creation fixes
	local d
	for d in $INI_RXE $TGT_RXE; do
		if [ "$(gsi_state $d)" != RTS ]; then
			log "baseline: $d's QP 1 was $(gsi_state $d) (re-created)"
			rdma link delete $d && rdma link add $d type rxe netdev $([ $d = $INI_RXE ] && echo $INI_IF || echo $TGT_IF)
			sleep 1
		fi
	done
	[ "$(cat $NP/iser 2>/dev/null)" = 1 ] || { echo 1 > $NP/iser; }
	# a fresh state directory per scenario; under systemd the package's service owns it
	[ "${LAB_INIT:-tiny}" = systemd ] || rm -rf $STATE /run/iser-guard
	if ! session_logged_in || ! direct_io_check; then
		log "baseline: re-establishing the session ($(session_state))"
		iser_logout_all
		sleep 1
		if [ "$(cat $NP/iser)" = 1 ] && ! session_sid > /dev/null; then
			echo 0 > $NP/iser
			echo 1 > $NP/iser
		fi
		iser_login
		wait_disk > /dev/null
	fi
	if session_logged_in && direct_io_check; then
		log "baseline: sid $(session_sid) LOGGED_IN, disk $(iscsi_disk), I/O ok"
		return 0
	fi
	lab_error "baseline not reached: session $(session_state), I/O check failed"
	return 1
}

# base setup of a batch
lab_up() {
	log "kernel $(uname -r), init ${LAB_INIT:-tiny}"
	uname -r > "$OUT/kernel.txt"
	net_setup
	rxe_setup
	target_setup > "$OUT/target-setup.txt" 2>&1
	dyndbg_setup
	iscsid_start
	syslog_start
	if [ "${LAB_INIT:-tiny}" = tiny ]; then
		install -m 0755 /lab/bin/iser-guard $IG
	fi
	$IG --version > "$OUT/iser-guard-version.txt" 2>&1
	lab_probe_config
	devwatch_start
	iser_login
	wait_disk > /dev/null
	log "session $(session_state) disk $(iscsi_disk || echo none)"
}
lab_down() {
	baseline > /dev/null 2>&1
	[ -n "${DEVWATCH_PID:-}" ] && kill $DEVWATCH_PID
	dmesg > "$OUT/dmesg-final.txt"
}
# run_scenarios NAME...: source guest/scenarios/NAME.sh, run scenario_NAME after a baseline
run_scenarios() {
	local s
	for s in "$@"; do
		source /lab/guest/scenarios/$s.sh
		scen_begin $s
		if baseline; then
			"scenario_${s//-/_}"
		fi
		daemon_stop
		io_stop
		dmesg > "$SOUT/dmesg.txt"
		verdict
	done
}
