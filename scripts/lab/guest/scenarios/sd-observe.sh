source /lab/guest/scenarios/sd-common.sh
# What an operator sees of the service on a real systemd and kernel (issue 10): the metrics
# textfile in node_exporter's directory with the real RDMA devices and QPs, `status` showing
# the engine's view next to the kernel's, and journal entries at their priorities (an error
# found by `journalctl -p err`, no colour codes).
scenario_sd_observe() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local t0=$(now) prom=/var/lib/prometheus/node-exporter/iser-guard.prom end
	mkdir -p /var/lib/prometheus/node-exporter
	rm -f $prom
	EXTRA_CONFIG=$'[metrics]\nenabled = true\ninterval = 2' write_config 0
	# The unit allows 5 starts in 300 s (StartLimitBurst), deliberate ones included: with
	# doctor-active's stop and start and sd-write-access's restart before it, this scenario's
	# second restart met the limit (run of 2026-12-02 19:08). An operator who restarts that
	# often runs the same command.
	systemctl reset-failed $UNIT
	systemctl restart $UNIT
	sd_wait_active 60 || { lab_error "service not active after restart"; return; }
	end=$(deadline 30)
	while before $end && ! grep -q 'iser_guard_qps' $prom 2>/dev/null; do sleep 1; done
	cp $prom "$SOUT/iser-guard.prom" 2>/dev/null
	check "metrics textfile written by the service" grep -q '^iser_guard_build_info' $prom
	check "metrics count the real QPs of $INI_RXE" grep -q "^iser_guard_qps{.*device=\"$INI_RXE\"" $prom
	check "metrics show the GSI QP of $INI_RXE" grep -q "^iser_guard_gsi_qp_state{.*device=\"$INI_RXE\"" $prom
	check "metrics textfile readable by node_exporter (0644)" [ "$(stat -c %a $prom)" = 644 ]
	$IG status > "$SOUT/status.txt" 2>&1
	check "status shows the daemon's engine view" grep -q 'Daemon (engine view)' "$SOUT/status.txt"
	check "status shows the engine's view of $INI_RXE/1" grep -q "$INI_RXE/1.*Healthy" "$SOUT/status.txt"
	$IG history > "$SOUT/history.txt" 2>&1
	check "history answers" [ $? = 0 ]
	# An error-level entry: a configuration the daemon refuses on reload.
	EXTRA_RECOVERY='max-attempts = 0' write_config 0
	systemctl reload $UNIT > /dev/null 2>&1
	sleep 2
	journalctl -u $UNIT --no-pager -o cat -p err --since "@${t0%.*}" > "$SOUT/journal-err.txt"
	check "journalctl -p err finds the refused configuration" grep -q 'max-attempts' "$SOUT/journal-err.txt"
	journalctl -u $UNIT --no-pager -o cat --since "@${t0%.*}" > "$SOUT/journal-all.txt"
	check "no colour codes in the journal" not grep -q $'\x1b\\[' "$SOUT/journal-all.txt"
	check "no INFO line at priority err" not grep -q 'INFO' "$SOUT/journal-err.txt"
	write_config 0
	systemctl restart $UNIT
	sd_wait_active 60 || lab_error "service not active after the final restart"
	# Two restarts here after sd-write-access's: clear the unit's start counter, or the next
	# scenario's restart meets StartLimitBurst (start-limit-hit, seen in the first run).
	systemctl reset-failed $UNIT
}
