source /lab/guest/scenarios/field-common.sh
# With the lab-only configuration (trust-userspace-records, devices.allow = ["rxe_ini"], the
# rest default: reset-when target-back, 3 probes 5 s apart): no re-creation before the target
# answers, exactly one after, the new GSI QP in RTS, the session back, direct I/O works, and
# I/O flows within poll.probe × probe-successes + 5 s = 20 s of the target's return, not
# counting the wait the lab's stand-in adds (pending_attempt_wait in field-common.sh).
scenario_field_incident() {
	write_config 1
	daemon_start || { fail "daemon did not start"; return; }
	field_run 30
	local before=$(recreations_between $T_DOWN $T_UP)
	check "no re-creation of rxe_ini while the target is unreachable (got $before)" [ "$before" = 0 ]
	field_wait_recovered 90
	sleep 10 # a second re-creation would show here
	local n r rt io
	n=$(recreations_since $T_UP)
	r=$(first_recreation_since $T_UP)
	check "exactly one re-creation after the target answered (got $n)" [ "$n" = 1 ]
	check "rxe_ini's new GSI QP (lqpn 1) in RTS" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "direct-I/O write and read" direct_io_check
	check "daemon still running" daemon_alive
	if [ -n "$r" ]; then
		rt=$(elapsed $T_UP ${r% *})
		figure recreate_after_target_back_s $rt
		# target-back gating: 3 consecutive successful probes 5 s apart take 10 s; the first may
		# have been sent up to probe-timeout (2 s) before the return and answered after it
		check "re-created only after 3 consecutive successful probes (>= 8 s after the return; got $rt s)" \
			python3 -c "import sys; sys.exit(0 if $rt >= 7.5 else 1)"
		# how long the re-creation took, as the daemon measured it (delete + add + back)
		local ms=$(grep -o 're-created by .* in [0-9]* ms' "$SOUT/daemon.log" | tail -1 | grep -o '[0-9]* ms$' | cut -d' ' -f1)
		figure recreation_s $(python3 -c "print('%.2f' % (${ms:-0}/1000))")
		io=$(io_ok_after ${r% *})
		[ -n "$io" ] && figure io_flowing_after_target_back_s $(elapsed $T_UP $io)
		# the wait the lab's stand-in adds and the field does not have (pending_attempt_wait)
		local w=$(pending_attempt_wait)
		figure iscsid_pending_attempt_wait_s ${w:-unknown}
		[ -n "$io" ] && figure io_flowing_after_target_back_without_pending_wait_s \
			$(python3 -c "print('%.2f' % ($io - $T_UP - ${w:-0}))")
		check "I/O flowing within 20 s of the target's return (poll.probe 5 × probe-successes 3 + 5), not counting the ${w:-0} s iscsid's pending attempt still had on its login timer" \
			python3 -c "import sys; sys.exit(0 if '${io}' and ${io:-0} - $T_UP - ${w:-0} <= 20 else 1)"
	else
		figure io_flowing_after_target_back_s never
	fi
	cp $CONF "$SOUT/config.toml"
}
