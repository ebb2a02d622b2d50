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
