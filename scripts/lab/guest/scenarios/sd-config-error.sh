source /lab/guest/scenarios/sd-common.sh
# A broken configuration: the daemon itself exits 78 before READY=1 (the unit has no
# ExecStartPre); systemd must not restart it in a loop (RestartPreventExitStatus=78).
scenario_sd_config_error() {
	local t0=$(now)
	EXTRA_RECOVERY='max-attempts = 0' write_config 0
	systemctl restart $UNIT > "$SOUT/restart.txt" 2>&1
	# RestartSec=5s: once the unit has failed, a restart loop would show within 5 s (7 s given)
	local end=$(deadline 30)
	until [ "$(systemctl is-active $UNIT)" = failed ] || ! before $end; do sleep 0.25; done
	sleep 7
	local n=$(systemctl show -p NRestarts --value $UNIT)
	local st=$(systemctl is-active $UNIT)
	figure restarts_after_failing $n
	check "not restarted in a loop (NRestarts=$n)" [ "${n:-0}" -le 1 ]
	check "state failed, not activating (got $st)" [ "$st" = failed ]
	sd_journal_since $t0 > "$SOUT/journal.txt"
	check "journal names the problem" grep -q 'max-attempts' "$SOUT/journal.txt"
	write_config 0
	systemctl reset-failed $UNIT
	systemctl start $UNIT
	sd_wait_active 60 || lab_error "the service does not start again with a good configuration"
}
