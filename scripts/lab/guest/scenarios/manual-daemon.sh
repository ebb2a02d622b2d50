source /lab/guest/scenarios/manual-common.sh
# Every manual command with the daemon running (through its control socket).
scenario_manual_daemon() {
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	manual_suite daemon
	check "daemon still running" daemon_alive
}
