source /lab/guest/scenarios/zombie-common.sh
# With the daemon (devices.allow = ["rxe_ini"], default trust: the DID_ABORT lines are the
# kernel's own): I/O flows again within 60 s of the link's return, with no device re-creation
# (a zombie session is repaired by logging it out and in), unless the outage put rxe_ini's
# QP 1 in ERR (the lab's irdma-like model): then exactly one re-creation.
scenario_zombie() {
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	dmesg -C
	zombie_run
	local io end=$(deadline 60)
	while before $end; do
		io=$(io_ok_after $(python3 -c "print($T_UP + 1)"))
		[ -n "$io" ] && break
		sleep 0.5
	done
	figure zombie_formed $(zombie_seen && echo yes || echo no)
	figure io_flowing_after_link_up_s $(since $T_UP "$io" never_within_60)
	check "I/O flowing within 60 s of the link's return" [ -n "$io" ]
	check "session LOGGED_IN" session_logged_in
	check "direct-I/O write and read" direct_io_check
	# With the lab's irdma-like QP 1, the outage itself can put rxe_ini's QP 1 in ERR (iscsid's
	# CM reconnects send MADs while the target's neighbour entry is gone: run of 2026-12-02
	# 22:36): then the port is the field incident, and exactly one re-creation after the
	# link's return is right. Otherwise a zombie is repaired without one.
	local n=$(recreations_since $T_DOWN)
	if dmesg | grep -q 'modify_qp invalid for qp_id=1'; then
		figure qp1_err_in_outage yes
		check "QP 1 went to ERR in the outage: exactly one re-creation (got $n)" [ "$n" = 1 ]
	else
		figure qp1_err_in_outage no
		check "no re-creation of rxe_ini for a zombie session (got $n)" [ "$n" = 0 ]
	fi
	check "daemon still running" daemon_alive
}
