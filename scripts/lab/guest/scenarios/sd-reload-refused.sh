source /lab/guest/scenarios/sd-common.sh
# systemctl reload with a file the daemon refuses: ExecReload (`iser-guard reload`) gets the
# daemon's verdict over the control socket, so systemctl reports the failure with its reason,
# and the service keeps running on the configuration in force. Then a valid file reloads.
scenario_sd_reload_refused() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local t0=$(now) pid0=$(sd_pid) rc
	EXTRA_RECOVERY='max-attempts = 0' write_config 0
	systemctl reload $UNIT > "$SOUT/reload-refused.txt" 2>&1
	rc=$?
	figure reload_refused_rc $rc
	check "systemctl reload fails on a refused file (rc $rc)" [ $rc != 0 ]
	sleep 2
	sd_journal_since $t0 > "$SOUT/journal.txt"
	check "ExecReload names the problem in the journal" grep -q 'max-attempts' "$SOUT/journal.txt"
	check "the daemon says it keeps the configuration in force" grep -qi 'keeps the configuration in force\|keeping the one in force\|one in force is kept' "$SOUT/journal.txt"
	check "same process (pid $pid0 -> $(sd_pid))" [ "$(sd_pid)" = "$pid0" ]
	check "service still active ($(systemctl is-active $UNIT))" sd_active
	check "control socket still answers (status exit 0 or 1)" bash -c "$IG status > /dev/null 2>&1; [ \$? -le 1 ]"
	write_config 0
	systemctl reload $UNIT > "$SOUT/reload-valid.txt" 2>&1
	rc=$?
	check "systemctl reload of a valid file exit 0 (rc $rc)" [ $rc = 0 ]
	check "same process after the valid reload" [ "$(sd_pid)" = "$pid0" ]
	sd_journal_since $t0 > "$SOUT/journal.txt"
	check "journal: configuration reloaded" grep -qi 'configuration reloaded' "$SOUT/journal.txt"
}
