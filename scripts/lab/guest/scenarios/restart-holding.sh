# Restart while holding. (a) With the trusted lab config and other-sessions = "wait" (default),
# the field lines for rxe_ini while its session is healthy make the daemon hold for an operator
# instead of re-creating; a restart must keep holding: no re-creation before, during or 30 s
# after the restart, the session untouched. (b) A pause survives a restart.
scenario_restart_holding() {
	write_config 1
	daemon_start || { fail "daemon did not start"; return; }
	local t0=$(now) sid0=$(session_sid) i
	for i in 1 2 3; do inject_field_lines; sleep 2; done
	sleep 15
	python3 /lab/guest/ctl.py $SOCK '{"cmd":"status"}' > "$SOUT/status-holding.txt" 2>&1
	check "held: no re-creation with a healthy session on the device" [ "$(recreations_since $t0)" = 0 ]
	daemon_stop
	daemon_start daemon-2 || { fail "daemon did not restart"; return; }
	sleep 30
	check "after restart: still no re-creation" [ "$(recreations_since $t0)" = 0 ]
	check "after restart: session untouched (sid $sid0 -> $(session_sid))" [ "$(session_sid)" = "$sid0" ]
	check "after restart: session LOGGED_IN" session_logged_in
	# (b) pause, restart, still paused
	$IG pause > "$SOUT/pause.txt" 2>&1
	daemon_stop
	daemon_start daemon-3 || { fail "daemon did not restart"; return; }
	python3 /lab/guest/ctl.py $SOCK '{"cmd":"status"}' > "$SOUT/status-after-restart.txt" 2>&1
	check "a pause survives a restart" grep -q '"paused":true' "$SOUT/status-after-restart.txt"
	$IG resume > /dev/null 2>&1
}
