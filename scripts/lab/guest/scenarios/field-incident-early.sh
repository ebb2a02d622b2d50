source /lab/guest/scenarios/kfield-common.sh
# Experiment (batch kfield-early, run by name): the in-kernel field incident with
# recovery.reset-when = "immediately", to measure what re-creating rxe_ini while the target is
# still away does. The question it answers: with the target's neighbour entry FAILED, iscsid's
# reconnect waits in address resolution and sends no CM MAD, so does a QP 1 re-created during
# the outage stay in RTS until the target returns, and does the session then come back on
# iscsid's first attempt (no failed REQ, so no 3 s ISCSI_CONN_ERR_REOPEN_DELAY)?
# Judged: the storage comes back after the return (session, QP 1 in RTS, direct I/O). Counted,
# not judged: re-creations during the outage and after the return, QP 1's state at the return,
# and the raw figure (the target's return to I/O flowing).
scenario_field_incident_early() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	EXTRA_RECOVERY='reset-when = "immediately"' write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	kfield_watch_start
	kfield_outage 120
	[ -n "$T_ERR" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 120 s of the target going away"; kfield_watch_stop; return; }
	# the daemon re-creates at once; then the target stays away long enough for iscsid to try
	# again several times (a reconnect every ~4 s: address resolution, then the reopen delay)
	local end=$(deadline 30) r_out=
	while before $end; do
		r_out=$(first_recreation_since $T_ERR | cut -d' ' -f1)
		[ -n "$r_out" ] && break
		sleep 0.5
	done
	check "the daemon re-created rxe_ini while the target was away (reset-when = immediately)" [ -n "$r_out" ]
	[ -n "$r_out" ] && figure recreate_after_qp1_err_s $(elapsed $T_ERR $r_out)
	if [ "$KFIELD_REBOOT" = 1 ]; then
		target_reboot || lab_error "the target's reboot (rxe_tgt re-created, iSER listener restarted) failed"
	fi
	sleep ${KFIELD_AWAY_S:-20}
	T_UP=$(now)
	local qp_at_return=$(gsi_state $INI_RXE)
	figure qp1_at_return $qp_at_return
	figure recreations_while_away $(recreations_between $T_DOWN $T_UP)
	target_on
	log "  target back (QP 1 $qp_at_return, session $(session_state))"
	echo "T_DOWN=$T_DOWN T_ERR=$T_ERR T_UP=$T_UP" > "$SOUT/times.txt"
	local t0=$(now) io=
	while python3 -c "import sys; sys.exit(0 if $(now)-$t0 < 90 else 1)"; do
		if session_logged_in; then io=$(io_ok_after $T_UP); [ -n "$io" ] && break; fi
		sleep 0.5
	done
	sleep 5 # a re-creation after the return would show here
	figure recreations_after_return $(recreations_since $T_UP)
	if [ -n "$io" ]; then
		figure io_flowing_after_target_back_s $(elapsed $T_UP $io)
	else
		figure io_flowing_after_target_back_s never
	fi
	check "rxe_ini's QP 1 in RTS after the return" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "direct-I/O write and read" direct_io_check
	check "daemon still running" daemon_alive
	kfield_watch_stop
	cp $CONF "$SOUT/config.toml"
}
