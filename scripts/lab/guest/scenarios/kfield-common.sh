# The field incident inside the kernel (the lab's rdma_rxe, scripts/lab/kmod): the target is
# "powered off" (netem drops everything tgt0 sends, so its host stops answering ARP, TCP and
# RDMA), and rxe_ini's QP 1 fails the way irdma's does: a CM MAD sent while the target's
# neighbour entry is no longer valid completes with an error and moves QP 1 to ERR, every
# ERR->RTS request is refused with irdma's line, and nothing walks it back. No line is
# injected and the daemon runs the shipped default configuration (plus the allow-list).

# kfield_watch_start: every 0.5 s "<epoch> qp1=<state> neigh=<state> session=<state>" into
# $SOUT/qp1.log (one process: the timeline of the incident from the kernel's own view)
kfield_watch_start() {
	python3 - "$INI_RXE" "$TGT_IP" "$INI_IF" "$SOUT/qp1.log" <<'PY' &
import json, glob, subprocess, sys, time
dev, ip, ifname, path = sys.argv[1:5]
def run(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, timeout=5).stdout
    except Exception:
        return ""
with open(path, "a", buffering=1) as out:
    while True:
        qp = "none"
        try:
            for q in json.loads(run("rdma", "resource", "show", "qp", "-j") or "[]"):
                if q.get("ifname") == dev and q.get("lqpn") == 1:
                    qp = q.get("state", "?")
        except ValueError:
            qp = "?"
        n = run("ip", "neigh", "show", ip, "dev", ifname).split()
        neigh = n[-1] if n else "none"
        sess = "none"
        for s in glob.glob("/sys/class/iscsi_session/session*/state"):
            sess = open(s).read().strip()
        out.write("%.3f qp1=%s neigh=%s session=%s\n" % (time.time(), qp, neigh, sess))
        time.sleep(0.5)
PY
	KWATCH_PID=$!
}
kfield_watch_stop() {
	[ -n "${KWATCH_PID:-}" ] && kill $KWATCH_PID 2>/dev/null
	KWATCH_PID=
}
# kfield_first EPOCH PATTERN: epoch of the first watch line after EPOCH matching PATTERN
kfield_first() {
	awk -v t="$1" -v p="$2" '$1>t && $0~p{print $1; exit}' "$SOUT/qp1.log"
}
# cm_trace_start / cm_trace_stop: the kernel's RDMA CM and MAD tracepoints (what QP 1 sends,
# when) into $SOUT/trace.txt
cm_trace_start() {
	local T=/sys/kernel/debug/tracing
	[ -d $T/events ] || return 0
	echo > $T/trace
	for e in ib_cma ib_cm ib_mad; do [ -d $T/events/$e ] && echo 1 > $T/events/$e/enable; done
	echo 1 > $T/tracing_on
}
cm_trace_stop() {
	local T=/sys/kernel/debug/tracing
	[ -d $T/events ] || return 0
	cat $T/trace > "$SOUT/trace.txt"
	for e in ib_cma ib_cm ib_mad; do [ -d $T/events/$e ] && echo 0 > $T/events/$e/enable; done
}
# target_off / target_on: the target's host stops / resumes answering (links stay up)
# (sch_netem is loaded once by kfield_outage: a modprobe per flap took 0.3-0.6 s under TCG
# and stretched the flapping target's up windows to a second)
target_off() { tc qdisc replace dev $TGT_IF root netem loss 100%; }
target_on() { tc qdisc del dev $TGT_IF root 2>/dev/null; true; }
# KFIELD_REBOOT (default 1): the powered-off target reboots while it is away (target_reboot);
# 0 keeps its kernel state, as a network partition would (the lab's target shares the
# initiator's kernel, so its RDMA CM then still holds the old connection at the return).
KFIELD_REBOOT=${KFIELD_REBOOT-1}
# target_reboot: while it is away, the target's host restarts: its RDMA device is re-created
# (every RDMA CM connection and listener of the old one is gone, as after a power cycle) and
# LIO's iSER listener is started again on the new one. A powered-off host keeps no connection
# state; the lab's target shares the guest's kernel, and without this its CM would still
# hold the old iSER connection when the initiator reconnects (REJECTED: stale conn: the
# initiator's re-created device reuses the old QP numbers). Runs behind the netem blackhole:
# nothing the target does reaches the initiator.
target_reboot() {
	rdma link delete $TGT_RXE && rdma link add $TGT_RXE type rxe netdev $TGT_IF || return 1
	echo 0 > $NP/iser 2>/dev/null
	echo 1 > $NP/iser
	# nvmet-rdma's listener (guest/nvme.sh), when a scenario serves NVMe over RDMA: unlinking
	# the port's last subsystem disables the port, linking it again listens on the new device
	local nq=/sys/kernel/config/nvmet/ports/1/subsystems
	if [ -d $nq ] && [ -n "${NVME_NQN:-}" ] && [ -L $nq/$NVME_NQN ]; then
		rm $nq/$NVME_NQN && ln -s /sys/kernel/config/nvmet/subsystems/$NVME_NQN $nq/$NVME_NQN || return 1
	fi
	# nfsd's rdma listener (guest/nfs.sh), when a scenario serves NFS over RDMA
	if [ -n "${NFS_RDMA_PORT:-}" ] && [ -e /proc/fs/nfsd/portlist ]; then
		nfsd_listen || return 1
	fi
	[ "$(cat $NP/iser)" = 1 ] && [ "$(gsi_state $TGT_RXE)" = RTS ]
}
# kfield_outage MAX_S: the target goes away (T_DOWN) until rxe_ini's QP 1 is in ERR (T_ERR),
# at most MAX_S; sets T_ERR empty when it never was
kfield_outage() {
	modprobe sch_netem
	io_start "$(iscsi_disk)"
	sleep 3
	T_DOWN=$(now)
	log "  target powered off (netem loss 100% on $TGT_IF)"
	target_off
	local end=$(deadline $1)
	T_ERR=
	while before $end; do
		T_ERR=$(kfield_first $T_DOWN 'qp1=ERR')
		[ -n "$T_ERR" ] && break
		sleep 0.5
	done
	if [ -n "$T_ERR" ]; then
		log "  rxe_ini's QP 1 in ERR $(elapsed $T_DOWN $T_ERR) s after the target went away"
		figure qp1_err_after_target_off_s $(elapsed $T_DOWN $T_ERR)
	fi
}
# kfield_lines_since KERNEL_S: the field's two lines for rxe_ini in the kernel log after the
# printk time KERNEL_S: "<irdma-like> <mad>" counts
kfield_lines_since() {
	dmesg > "$SOUT/dmesg-lines.txt"
	python3 - "$1" "$INI_RXE" "$SOUT/dmesg-lines.txt" <<'PY'
import re, sys
t0, dev, path = float(sys.argv[1]), sys.argv[2], sys.argv[3]
stamp = re.compile(r"^\[\s*([0-9.]+)\] (.*)$")
a = b = 0
for line in open(path, errors="replace"):
    m = stamp.match(line)
    if not m or float(m.group(1)) <= t0:
        continue
    text = m.group(2).rstrip()
    if text == "%s: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3" % dev:
        a += 1
    if text == "infiniband %s: ib_mad_send_error - ib_modify_qp to RTS: -22" % dev:
        b += 1
print(a, b)
PY
}
# kernel_now: the printk clock now (seconds since boot), to compare with dmesg's stamps
kernel_now() { cut -d' ' -f1 /proc/uptime; }
# peer_trip: rxe_ini's QP 1 goes to ERR by the kernel's own doing while the iSCSI session
# stays healthy: another RDMA peer of the port (192.0.2.9; the kernel still has its MAC from
# an earlier exchange, as a STALE neighbour entry) has powered off, and a CM connection to it
# (rping) is attempted. The REQ leaves (the entry is valid), the kernel's neighbour probes go
# unanswered (FAILED), and the CM's next retransmission is the send that cannot reach its
# destination: QP 1 in ERR, the field's lines, and the established iSER connection untouched.
# Sets T_TRIP (empty when QP 1 did not go to ERR within MAX_S, default 60).
PEER_IP=192.0.2.9
peer_trip() {
	local max=${1:-60}
	ip route replace $PEER_IP/32 dev $INI_IF src $INI_IP table 200
	ip neigh replace $PEER_IP lladdr 02:00:00:00:00:09 dev $INI_IF nud stale
	local t0=$(now)
	timeout $max rping -c -a $PEER_IP -I $INI_IP -C 1 -v > "$SOUT/rping-peer.txt" 2>&1 &
	local end=$(deadline $max)
	T_TRIP=
	while before $end; do
		[ "$(gsi_state $INI_RXE)" = ERR ] && { T_TRIP=$(now); break; }
		sleep 0.5
	done
	[ -n "$T_TRIP" ] && figure qp1_err_after_peer_connect_s $(elapsed $t0 $T_TRIP)
	ip route del $PEER_IP/32 table 200 2>/dev/null
	true
}
# field_wait_recovered MAX_S: until rxe_ini was re-created after T_DOWN, the session is logged in
# and an I/O round that started after the re-creation succeeded; prints nothing
field_wait_recovered() {
	local t0=$(now) r
	while python3 -c "import sys; sys.exit(0 if $(now)-$t0 < $1 else 1)"; do
		r=$(first_recreation_since $T_DOWN | cut -d' ' -f1)
		if [ -n "$r" ] && session_logged_in && [ -n "$(io_ok_after $r)" ]; then return 0; fi
		sleep 0.5
	done
	return 1
}
