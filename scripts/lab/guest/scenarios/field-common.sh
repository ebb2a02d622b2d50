# The field incident, as close as Soft-RoCE allows: the target becomes unreachable (netem drops
# everything tgt0 sends: no TCP answer on 3260, no RDMA reply), the initiator's GSI QP is
# "stuck" (the lab's stand-in, see gsi_stuck_on in lib.sh: no RDMA CM handshake can leave
# rxe_ini until the device is re-created) and the field lines name rxe_ini in the kernel log
# (written into /dev/kmsg every 5 s while the target is away, as the field log repeats them).
# field_run OUTAGE_S WATCH_S: runs the outage; sets T_DOWN, T_UP.
field_run() {
	local outage=$1 i
	io_start "$(iscsi_disk)"
	sleep 3
	T_DOWN=$(now)
	log "  target unreachable (netem on $TGT_IF), GSI stand-in on, field lines every 5 s for $outage s"
	tc qdisc replace dev $TGT_IF root netem loss 100%
	gsi_stuck_on
	gsi_stuck_watch
	sleep 3
	for i in $(seq 1 $((outage / 5))); do
		inject_field_lines
		sleep 5
	done
	T_UP=$(now)
	tc qdisc del dev $TGT_IF root
	log "  target back (session $(session_state), re-creations so far $(recreations_since $T_DOWN))"
	echo "T_DOWN=$T_DOWN T_UP=$T_UP" > "$SOUT/times.txt"
}
# field_wait_recovered MAX_S: until rxe_ini was re-created after T_UP, the session is logged in
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
# pending_attempt_wait: seconds iscsid's connect attempt that was pending at the re-creation
# still had on its login timer after it (0 when none was), from the kernel's own lines and
# clock (the guest's printk clock drifts from its wall clock by seconds under TCG): the
# re-creation is the last `infiniband rxe_ini: set active`; an iscsid attempt under the
# stand-in creates one rxe_ini QP (`qp#N ... state -> INIT`, once: it never connects), and
# nothing else does before the re-creation. Under the stand-in each attempt lasts the login
# timer and the re-creation does not end it (lab.md, "Stand-ins"); in the field that attempt
# has failed at once, so this wait is the lab's, not the daemon's. Prints nothing when the
# kernel log shows no re-creation.
pending_attempt_wait() {
	local timer
	timer=$(iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -I iser -o show 2>/dev/null |
		awk -F' = ' '$1=="node.conn[0].timeo.login_timeout"{print $2}')
	dmesg > "$SOUT/dmesg-attempts.txt"
	python3 - "${timer:-15}" "$INI_RXE" "$SOUT/dmesg-attempts.txt" <<'PY'
import re, sys
timer, dev, path = float(sys.argv[1]), sys.argv[2], sys.argv[3]
stamp = re.compile(r"^\[\s*([0-9.]+)\] (.*)$")
# 6.12: "rxe_ini: qp#19 rxe_qp_from_attr: state -> INIT"; 6.1: "rdma_rxe: qp#19 state -> INIT"
qp_init = re.compile(r"^(?:%s: qp#(\d+) rxe_qp_from_attr:|rdma_rxe: qp#(\d+)) state -> INIT$" % re.escape(dev))
active = "infiniband %s: set active" % dev
lines = [(float(m.group(1)), m.group(2).rstrip()) for m in map(stamp.match, open(path, errors="replace")) if m]
recreated = [t for t, text in lines if text == active]
if recreated:
    r = recreated[-1]
    attempts = [t for t, text in lines
                if t < r and (m := qp_init.match(text)) and (m.group(1) or m.group(2)) not in ("0", "1")]
    last = attempts[-1] if attempts else None
    print("%.2f" % (last + timer - r if last is not None and r - last < timer else 0.0))
PY
}
