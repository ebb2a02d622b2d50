source /lab/guest/scenarios/kfield-common.sh
# iscsid's own recovery timeline, no daemon (open-iscsi's login retries changed between 2.1.8,
# Debian 12, and 2.1.9, Ubuntu 24.04; Debian 13 has 2.1.11): the lab's irdma-like QP 1 is
# switched off (QP 1 stays healthy: the outage is the target's alone), the target's host is
# unreachable for 20 s, then back. Figures: the open-iscsi version, when iscsid reported the
# connection error after the power-off, the recovery attempts iscsid counted, and the seconds
# from the target's return to LOGGED_IN and to I/O flowing. Judged: the session fails while
# the target is away and comes back by itself within 60 s of its return (what the engine's
# recovery.iscsid-grace leaves to iscsid before it logs a session in itself).
scenario_iscsid_timeline() {
	local model=$(cat /sys/module/rdma_rxe/parameters/irdma_gsi_devs 2>/dev/null) l0 st w io end
	echo > /sys/module/rdma_rxe/parameters/irdma_gsi_devs 2>/dev/null # a newline: no device
	figure open_iscsi_version "$(iscsiadm --version 2>/dev/null | awk '{print $NF}')"
	l0=$(wc -l < "$OUT/iscsid.log" 2>/dev/null || echo 0)
	io_start "$(iscsi_disk)"
	sleep 3
	T_DOWN=$(now)
	target_off
	sleep 20
	st=$(session_state)
	T_UP=$(now)
	target_on
	echo "T_DOWN=$T_DOWN T_UP=$T_UP" > "$SOUT/times.txt"
	figure session_state_at_return "$st"
	check "the session failed while the target was away (got $st)" [ "$st" != LOGGED_IN ]
	w=$(wait_logged_in 60)
	figure logged_in_after_target_back_s "$w"
	check "iscsid brought the session back by itself within 60 s ($w)" session_logged_in
	end=$(deadline 30)
	while before $end; do
		io=$(io_ok_after $T_UP)
		[ -n "$io" ] && break
		sleep 0.5
	done
	figure io_flowing_after_target_back_s $(since $T_UP "$io" never_within_30)
	check "direct-I/O write and read" direct_io_check
	io_stop
	# iscsid's lines since the power-off, with their arrival time (lib.sh: iscsid_start)
	tail -n +$((l0 + 1)) "$OUT/iscsid.log" > "$SOUT/iscsid.log" 2>/dev/null
	local first=$(grep -m1 'Kernel reported iSCSI connection' "$SOUT/iscsid.log" | cut -d' ' -f1)
	[ -n "$first" ] && figure conn_error_after_target_off_s $(elapsed $T_DOWN $first)
	figure recovery_attempts "$(grep -o 'after recovery ([0-9]* attempts)' "$SOUT/iscsid.log" | tail -1 | grep -o '[0-9]*')"
	printf '%s' "$model" > /sys/module/rdma_rxe/parameters/irdma_gsi_devs 2>/dev/null
}
