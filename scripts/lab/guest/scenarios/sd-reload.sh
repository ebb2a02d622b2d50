source /lab/guest/scenarios/sd-common.sh
scenario_sd_reload() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local t0=$(now) pid0=$(sd_pid)
	EXTRA_CONFIG=$'[poll]\nprobe = 2' write_config 0
	systemctl reload $UNIT
	check "systemctl reload exit 0" [ $? = 0 ]
	sleep 3
	sd_journal_since $t0 > "$SOUT/journal.txt"
	check "journal: configuration reloaded" grep -qi 'configuration reloaded' "$SOUT/journal.txt"
	check "same process (pid $pid0 -> $(sd_pid))" [ "$(sd_pid)" = "$pid0" ]
	check "service active" sd_active
	write_config 0
	systemctl reload $UNIT
}
