# The target's listener dead, then restored: deleting and re-adding rxe_tgt kills LIO's iSER
# listener (every reconnect is then rejected: "RDMA CM: REJECTED: invalid service ID", a
# pr_debug on 6.1); only toggling iser on the portal brings it back. The initiator cannot fix
# it. Expected for 45 s: the session is never logged out (it stays known to iscsid), rxe_ini is
# not re-created, an alert names the target side; after the toggle, the session is back and I/O
# flows within 30 s.
scenario_dead_listener() {
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	io_start "$(iscsi_disk)"
	sleep 3
	local a0=$(wc -l < "$OUT/alerts.log" 2>/dev/null || echo 0)
	local sid0=$(session_sid) t0=$(now) gone=0 end
	rdma link delete $TGT_RXE
	rdma link add $TGT_RXE type rxe netdev $TGT_IF
	end=$(deadline 45)
	while before $end; do
		session_sid > /dev/null || gone=$((gone + 1))
		sleep 0.5
	done
	check "the session was never logged out while the listener was dead" [ $gone = 0 ]
	check "no re-creation of rxe_ini" [ "$(recreations_since $t0)" = 0 ]
	tail -n +$((a0 + 1)) "$OUT/alerts.log" > "$SOUT/alerts.log" 2>/dev/null
	check "an alert names the target's listener" grep -qi 'listener\|target side\|target-side' "$SOUT/alerts.log"
	local t1=$(now) io=
	echo 0 > $NP/iser
	echo 1 > $NP/iser
	end=$(deadline 30)
	while before $end; do
		io=$(io_ok_after $t1)
		[ -n "$io" ] && session_logged_in && break
		sleep 0.5
	done
	figure io_flowing_after_listener_restored_s $(since $t1 "$io" never_within_30)
	check "I/O flowing within 30 s of the listener's return" [ -n "$io" ]
	check "session LOGGED_IN" session_logged_in
	check "daemon still running" daemon_alive
}
