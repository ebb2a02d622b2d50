source /lab/guest/scenarios/kfield-common.sh
# Forged records (injection on purpose: what this scenario checks is that records written into
# /dev/kmsg by userspace trigger nothing). The target becomes unreachable for 15 s and the
# field's lines naming rxe_ini are written into /dev/kmsg every 5 s (facility 1), while
# rxe_ini's QP 1 itself stays healthy (the lab's irdma-like rdma_rxe is switched off for this
# scenario, so the kernel's own records say nothing). With the default trust: no re-creation
# during the outage nor 10 s after (the daemon would re-create within 2 s of the target's
# return: 3 probes 0.25 s apart), at most one coalesced alert about untrusted records
# (README: "one coalesced warning alert instead").
scenario_field_default_trust() {
	local model=$(cat /sys/module/rdma_rxe/parameters/irdma_gsi_devs 2>/dev/null)
	echo > /sys/module/rdma_rxe/parameters/irdma_gsi_devs 2>/dev/null # a newline: no device
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	local a0=$(wc -l < "$OUT/alerts.log" 2>/dev/null || echo 0) i
	io_start "$(iscsi_disk)"
	sleep 3
	T_DOWN=$(now)
	tc qdisc replace dev $TGT_IF root netem loss 100%
	for i in 1 2 3; do inject_field_lines; sleep 5; done
	T_UP=$(now)
	tc qdisc del dev $TGT_IF root
	sleep 10
	check "no re-creation of rxe_ini (untrusted records trigger nothing)" [ "$(recreations_since $T_DOWN)" = 0 ]
	check "rxe_ini's QP 1 is in RTS: nothing in the kernel failed" gsi_rts $INI_RXE
	check "daemon still running" daemon_alive
	tail -n +$((a0 + 1)) "$OUT/alerts.log" > "$SOUT/alerts.log" 2>/dev/null
	local u=$(grep -ci 'untrusted\|userspace\|written by' "$SOUT/alerts.log")
	figure untrusted_alerts $u
	check "at most one coalesced alert about untrusted records (got $u)" [ "$u" -le 1 ]
	printf '%s' "$model" > /sys/module/rdma_rxe/parameters/irdma_gsi_devs 2>/dev/null
}
