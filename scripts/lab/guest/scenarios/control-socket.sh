# The control socket spoken directly (JSON lines, guest/ctl.py), and SIGHUP.
scenario_control_socket() {
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	local c="python3 /lab/guest/ctl.py $SOCK"
	$c '{"cmd":"status"}' > "$SOUT/status-1.txt" 2>&1
	check "status over the socket: done ok" grep -q '"type":"done","ok":true' "$SOUT/status-1.txt"
	check "status names rxe_ini" grep -q $INI_RXE "$SOUT/status-1.txt"
	$c '{"cmd":"pause"}' > "$SOUT/pause.txt" 2>&1
	check "pause over the socket: exit 0" [ $? = 0 ]
	$c '{"cmd":"status"}' > "$SOUT/status-paused.txt" 2>&1
	check "status says paused" grep -q '"paused":true' "$SOUT/status-paused.txt"
	$c '{"cmd":"resume"}' > "$SOUT/resume.txt" 2>&1
	check "resume over the socket: exit 0" [ $? = 0 ]
	$c '{"cmd":"status"}' > "$SOUT/status-resumed.txt" 2>&1
	check "status no longer says paused" not grep -qi '"paused":true' "$SOUT/status-resumed.txt"
	$c '{"cmd":"bogus"}' > "$SOUT/bogus.txt" 2>&1
	check "an unknown request is refused without killing the daemon" daemon_alive
	# SIGHUP with a valid, changed file
	EXTRA_CONFIG=$'[poll]\nprobe = 2' write_config 0
	kill -HUP $DAEMON_PID
	sleep 3
	check "SIGHUP: valid configuration reloaded" grep -qi 'configuration reloaded' "$SOUT/daemon.log"
	# SIGHUP with an invalid file: the old configuration stays
	EXTRA_RECOVERY='max-attempts = 0' write_config 0
	kill -HUP $DAEMON_PID
	sleep 3
	check "SIGHUP: invalid configuration refused, daemon running" daemon_alive
	check "SIGHUP: invalid configuration logged" grep -qi 'invalid' "$SOUT/daemon.log"
	$c '{"cmd":"status"}' > "$SOUT/status-after-hup.txt" 2>&1
	check "status over the socket after the refused reload" grep -q '"type":"done","ok":true' "$SOUT/status-after-hup.txt"
	write_config 0
	daemon_stop
	check "SIGTERM: exit 0 (got $DAEMON_STOP_RC)" [ "$DAEMON_STOP_RC" = 0 ]
}
