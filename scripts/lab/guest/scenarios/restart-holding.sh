source /lab/guest/scenarios/kfield-common.sh
# Restart while holding. (a) With the default configuration and other-sessions = "wait"
# (default), rxe_ini's QP 1 goes to ERR by the kernel's own doing while its iSCSI session is
# healthy (peer_trip in kfield-common.sh: another RDMA peer of the port powered off); the daemon
# must hold for an operator instead of re-creating the device under a healthy session, and a
# restart must keep holding: no re-creation before, during or 10 s after the restarted daemon's
# first scan (it would re-create within 1 s of it: 3 probes 0.25 s apart), the session untouched. (b) A pause survives a restart.
scenario_restart_holding() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	local t0=$(now) sid0=$(session_sid)
	peer_trip 60
	[ -n "$T_TRIP" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 60 s of the peer's CM attempt"; return; }
	check "the session stayed LOGGED_IN while QP 1 went to ERR" session_logged_in
	wait_log "$SOUT/daemon.log" "would drop [0-9]+ healthy session" 30 ||
		fail "no hold alert (re-creating would drop a healthy session) within 30 s of QP 1 in ERR"
	python3 /lab/guest/ctl.py $SOCK '{"cmd":"status"}' > "$SOUT/status-holding.txt" 2>&1
	check "the daemon saw the stuck QP 1 (kernel records)" grep -q "kernel log: $INI_RXE: .* origin=kernel" "$SOUT/daemon.log"
	check "held: no re-creation with a healthy session on the device" [ "$(recreations_since $t0)" = 0 ]
	daemon_stop
	daemon_start daemon-2 || { fail "daemon did not restart"; return; }
	wait_log "$SOUT/daemon-2.log" "first scan done" 30 || fail "the restarted daemon finished no first scan within 30 s"
	sleep 10
	check "after restart: still no re-creation" [ "$(recreations_since $t0)" = 0 ]
	check "after restart: session untouched (sid $sid0 -> $(session_sid))" [ "$(session_sid)" = "$sid0" ]
	check "after restart: session LOGGED_IN" session_logged_in
	check "QP 1 still in ERR (nothing re-created it)" [ "$(gsi_state $INI_RXE)" = ERR ]
	# (b) pause, restart, still paused
	$IG pause > "$SOUT/pause.txt" 2>&1
	daemon_stop
	daemon_start daemon-3 || { fail "daemon did not restart"; return; }
	python3 /lab/guest/ctl.py $SOCK '{"cmd":"status"}' > "$SOUT/status-after-restart.txt" 2>&1
	check "a pause survives a restart" grep -q '"paused":true' "$SOUT/status-after-restart.txt"
	$IG resume > /dev/null 2>&1
	daemon_stop
	# the next scenario's baseline needs a working QP 1: re-create rxe_ini by hand
	rdma link delete $INI_RXE && rdma link add $INI_RXE type rxe netdev $INI_IF
	wait_logged_in 60 > /dev/null
}
