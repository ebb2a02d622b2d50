source /lab/guest/scenarios/sd-common.sh
# systemctl restart with a healthy session: nothing destructive after the start.
scenario_sd_restart() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local t0=$(now) pid0=$(sd_pid) sid0=$(session_sid)
	systemctl restart $UNIT
	check "systemctl restart exit 0" [ $? = 0 ]
	check "active again" sd_wait_active 60
	check "new process" [ "$(sd_pid)" != "$pid0" ]
	sleep 8 # the daemon would act within 2 s of its first scan
	check "no re-creation after the restart" [ "$(recreations_since $t0)" = 0 ]
	check "session untouched (sid $sid0 -> $(session_sid))" [ "$(session_sid)" = "$sid0" ]
	sd_journal_since $t0 > "$SOUT/journal.txt"
}
