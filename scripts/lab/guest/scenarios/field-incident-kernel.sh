source /lab/guest/scenarios/kfield-common.sh
# The field incident inside the kernel, with the daemon on the shipped default configuration
# (only devices.allow = ["rxe_ini"] and the lab's device wait added; userspace records are not
# trusted and nothing is injected). The target goes away, rxe_ini's QP 1 goes to ERR by the
# kernel's own doing (the lab's irdma-like rdma_rxe), the kernel prints the field's lines.
# Judged:
#   (ii) the daemon sees the fault in the kernel's own records (origin kernel);
#   (iv) no re-creation while the target is away, exactly one after it answers, the new QP 1
#        in RTS, the session back, a direct-I/O write and read succeed;
#   (v)  the self-test, run by hand, fails while QP 1 is in ERR and passes after;
#   the raw figure: the target's return to I/O flowing, nothing subtracted (goal <= 5 s).
# KFIELD_KMSG=off runs (iii) instead: the daemon's kernel-log source off (kmsg.enabled =
# false), so the stuck port can only be seen in the netlink QP table (field-incident-qptable).
scenario_field_incident_kernel() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	local kmsg=${KFIELD_KMSG:-on}
	if [ "$kmsg" = off ]; then
		EXTRA_CONFIG=$(printf '[kmsg]\nenabled = false\n%s' "${EXTRA_CONFIG:-}") write_config 0
	else
		write_config 0
	fi
	daemon_start || { fail "daemon did not start"; return; }
	kfield_watch_start
	kfield_outage 120
	[ -n "$T_ERR" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 120 s of the target going away"; kfield_watch_stop; return; }
	# the daemon's view of the fault: from the kernel's own records, or the QP table alone
	local end=$(deadline 30) seen=
	while before $end; do
		if [ "$kmsg" = on ]; then
			grep -q "kernel log: $INI_RXE: .* origin=kernel" "$SOUT/daemon.log" && { seen=$(now); break; }
		else
			grep -q "port=$INI_RXE/1 .*the QP table shows QP 1 (GSI) in ERR" "$SOUT/daemon.log" && { seen=$(now); break; }
		fi
		sleep 0.5
	done
	if [ "$kmsg" = on ]; then
		check "the daemon saw the stuck QP 1 in the kernel's own records (origin kernel)" [ -n "$seen" ]
		check "no userspace record was needed (none trusted)" not grep -q "trusted by kmsg.trust-userspace-records" "$SOUT/daemon.log"
	else
		check "the daemon saw the stuck port with its kernel log off (QP table alone)" [ -n "$seen" ]
		check "the daemon read no kernel-log record" not grep -q "kernel log: " "$SOUT/daemon.log"
		check "the daemon said its kernel log is off" grep -q "kernel log is off" "$SOUT/daemon.log"
	fi
	# when the daemon logged it (its lines carry their arrival time: guest/stamp.py), from
	# the power-off, beside qp1_err_after_target_off_s (the QP-table watcher's, 0.5 s steps)
	local first
	if [ "$kmsg" = on ]; then
		first=$(grep -m1 "kernel log: $INI_RXE: .* origin=kernel" "$SOUT/daemon.log" | cut -d' ' -f1)
	else
		first=$(grep -m1 "port=$INI_RXE/1 .*the QP table shows QP 1 (GSI) in ERR" "$SOUT/daemon.log" | cut -d' ' -f1)
	fi
	[ -n "$first" ] && figure daemon_saw_fault_after_target_off_s $(elapsed $T_DOWN $first)
	# (v) while QP 1 is in ERR
	$IG selftest $INI_RXE/1 --json > "$SOUT/selftest-stuck.json" 2> "$SOUT/selftest-stuck.err"
	local rc=$?
	check "the self-test by hand fails while QP 1 is in ERR (exit $rc)" [ $rc = 1 ]
	if [ "$KFIELD_REBOOT" = 1 ]; then
		target_reboot || lab_error "the target's reboot (rxe_tgt re-created, iSER listener restarted) failed"
		log "  target rebooted while away (rxe_tgt re-created, iSER listener restarted)"
	fi
	# the target stays away 10 s more (40 probe rounds: none may re-create)
	sleep ${KFIELD_AWAY_S:-10}
	if [ -n "${KFIELD_FLAP:-}" ]; then
		local i t_flap=$(now)
		log "  target flapping: up 0.4 s, down 1.6 s, ${KFIELD_FLAP} times"
		python3 /lab/guest/flap.py $TGT_IF 0.4 1.6 $KFIELD_FLAP "$SOUT/flap.log"
		# the longest time the target answered, as handed to tc
		local up_max=$(awk '$2=="on"{t=$1} $2=="off"&&t{d=$1-t; if(d>m)m=d} END{printf "%.2f", m}' "$SOUT/flap.log")
		figure flap_longest_up_s $up_max
		python3 -c "import sys; sys.exit(0 if $up_max < 0.5 else 1)" ||
			lab_error "the flapping target answered $up_max s at a stretch (meant 0.4 s; >= 0.5 s is not a flap for 3 probes 0.25 s apart)"
		local during=$(recreations_between $t_flap $(now))
		figure recreations_while_flapping $during
		check "no re-creation while the target flapped (got $during)" [ "$during" = 0 ]
	fi
	T_UP=$(now)
	target_on
	log "  target back (QP 1 $(gsi_state $INI_RXE), session $(session_state))"
	echo "T_DOWN=$T_DOWN T_ERR=$T_ERR T_UP=$T_UP" > "$SOUT/times.txt"
	local before=$(recreations_between $T_DOWN $T_UP)
	check "no re-creation of rxe_ini while the target was away (got $before)" [ "$before" = 0 ]
	field_wait_recovered 90
	sleep 5 # a second re-creation would show here (the port is Healthy: only a new fault would)
	local n r rt io
	n=$(recreations_since $T_UP)
	r=$(first_recreation_since $T_UP)
	check "exactly one re-creation after the target answered (got $n)" [ "$n" = 1 ]
	check "rxe_ini's new QP 1 in RTS" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "direct-I/O write and read" direct_io_check
	check "daemon still running" daemon_alive
	if [ -n "$r" ]; then
		rt=$(elapsed $T_UP ${r% *})
		figure recreate_after_target_back_s $rt
		local ms=$(grep -o 're-created by .* in [0-9]* ms' "$SOUT/daemon.log" | tail -1 | grep -o '[0-9]* ms$' | cut -d' ' -f1)
		figure recreation_s $(python3 -c "print('%.2f' % (${ms:-0}/1000))")
		io=$(io_ok_after ${r% *})
		if [ -n "$io" ]; then
			figure io_flowing_after_target_back_s $(elapsed $T_UP $io)
			figure io_flowing_after_recreation_s $(elapsed ${r% *} $io)
		else
			figure io_flowing_after_target_back_s never
		fi
	else
		figure io_flowing_after_target_back_s never
	fi
	# (v) after the re-creation
	$IG selftest $INI_RXE/1 --json > "$SOUT/selftest-after.json" 2> "$SOUT/selftest-after.err"
	rc=$?
	check "the self-test by hand passes after the re-creation (exit $rc)" [ $rc = 0 ]
	kfield_watch_stop
	cp $CONF "$SOUT/config.toml"
}
