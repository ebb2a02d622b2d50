source /lab/guest/scenarios/zombie-common.sh
# With the daemon (devices.allow = ["rxe_ini"], default trust: the DID_ABORT lines are the
# kernel's own): I/O flows again within 60 s of the link's return, with no device re-creation
# (a zombie session is repaired by logging it out and in).
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
	check "no re-creation of rxe_ini for a zombie session" [ "$(recreations_since $T_DOWN)" = 0 ]
	check "daemon still running" daemon_alive
}
