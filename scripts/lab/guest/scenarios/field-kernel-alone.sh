source /lab/guest/scenarios/kfield-common.sh
# Reference run of the in-kernel field incident, without the daemon (the field's "only a
# reboot"): the target goes away and rxe_ini's QP 1 goes to ERR by the kernel's own doing; the
# kernel prints the field's two lines itself; 2 minutes after the target's return QP 1 is still
# in ERR and the session has not come back. Then, by hand: the port self-test fails while
# QP 1 is in ERR; re-creating rxe_ini (rdma link delete/add) gives a new QP 1 in RTS, the
# self-test passes and iscsid brings the session back. Judged: the lab reproduced the field
# failure (ERROR when it did not: the model did not trip, nothing said about the product).
scenario_field_kernel_alone() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	kfield_watch_start
	cm_trace_start
	local k0=$(kernel_now)
	kfield_outage 120
	[ -n "$T_ERR" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 120 s of the target going away"; kfield_watch_stop; cm_trace_stop; return; }
	[ "$KFIELD_REBOOT" = 1 ] && { target_reboot || lab_error "the target's reboot (rxe_tgt re-created, iSER listener restarted) failed"; }
	sleep 5
	T_UP=$(now)
	local ku=$(kernel_now)
	target_on
	log "  target back; watching 120 s without a daemon"
	echo "T_DOWN=$T_DOWN T_ERR=$T_ERR T_UP=$T_UP" > "$SOUT/times.txt"
	sleep 120
	local st=$(gsi_state $INI_RXE) lines_before lines_after
	check "rxe_ini's QP 1 still in ERR 2 minutes after the target's return (got $st)" [ "$st" = ERR ]
	check "the session has not come back by itself ($(session_state))" not session_logged_in
	check "no I/O round succeeded after the target's return" [ -z "$(io_ok_after $T_UP)" ]
	lines_before=$(kfield_lines_since $k0)
	lines_after=$(kfield_lines_since $ku)
	figure field_lines_since_target_off "${lines_before// /+}"
	figure field_lines_since_target_back "${lines_after// /+}"
	check "the kernel printed irdma's refusal and the MAD layer's line itself after the target's return (got ${lines_after/ / and })" \
		python3 -c "import sys; a, b = map(int, '$lines_after'.split()); sys.exit(0 if a >= 1 and b >= 1 else 1)"
	io_stop
	# fixtures for the simulated host: the kernel's own records of the incident and the raw
	# RDMA netlink dumps with QP 1 in ERR (tests/fixtures/{kmsg,nldev}/README.md)
	python3 /lab/guest/kmsg_capture.py "$SOUT/kmsg-incident.txt" $k0 > /dev/null 2>&1
	python3 /lab/guest/nldev_capture.py "$SOUT/nldev-gsi-err" "rxe_ini's QP 1 in ERR (lab irdma-like rdma_rxe), 2 min after the target's return" > /dev/null 2>&1
	rdma resource show qp -j > "$SOUT/rdma-qp-json-gsi-err.txt" 2>&1
	# (v) the self-test by hand, on the stuck port and on the re-created one
	$IG selftest $INI_RXE/1 --json > "$SOUT/selftest-stuck.json" 2> "$SOUT/selftest-stuck.err"
	local rc=$?
	figure selftest_stuck_exit $rc
	check "the self-test fails while QP 1 is in ERR (exit $rc)" [ $rc = 1 ]
	local t_rc=$(now)
	rdma link delete $INI_RXE && rdma link add $INI_RXE type rxe netdev $INI_IF
	local end=$(deadline 30)
	while before $end && [ "$(gsi_state $INI_RXE)" != RTS ]; do sleep 0.25; done
	check "re-created by hand: the new QP 1 is in RTS" gsi_rts $INI_RXE
	python3 /lab/guest/nldev_capture.py "$SOUT/nldev-recreated" "rxe_ini re-created by hand (rdma link delete/add): a fresh QP 1" > /dev/null 2>&1
	$IG selftest $INI_RXE/1 --json > "$SOUT/selftest-after.json" 2> "$SOUT/selftest-after.err"
	rc=$?
	if [ $rc != 0 ]; then
		# the first connect right after a re-creation may be REJECTED by the CM (docs/lab.md)
		sleep 3
		$IG selftest $INI_RXE/1 --json > "$SOUT/selftest-after-2.json" 2> "$SOUT/selftest-after-2.err"
		rc=$?
	fi
	figure selftest_after_recreation_exit $rc
	check "the self-test passes after the re-creation (exit $rc)" [ $rc = 0 ]
	local w=$(wait_logged_in 60)
	figure session_back_after_manual_recreation_s $w
	check "iscsid brought the session back after the re-creation ($w)" session_logged_in
	check "direct-I/O write and read after the re-creation" direct_io_check
	kfield_watch_stop
	cm_trace_stop
}
