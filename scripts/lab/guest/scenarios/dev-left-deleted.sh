# The initiator's RDMA device deleted and left deleted (`rdma link delete rxe_ini`, nobody
# re-adds it). The README promises: a vanished initiator device whose sessions are known is
# awaited (recovery.device-wait: the lab's config sets 10 s, the product's default is 60 s),
# then re-created from its netdev, which the daemon remembered while the device existed (a
# deleted rxe device leaves nothing in sysfs or netlink). Expected: not back before the wait
# is over, back within the wait + 60 s: the daemon itself ran `rdma link add rxe_ini type rxe
# netdev ini0` (its log says "was gone: brought back by `rdma link add ...`"), rxe_ini is back
# on ini0, its GSI QP in RTS, the session LOGGED_IN, direct I/O works; no advice naming rxe_tgt
# (the target's device) for the initiator's session.
scenario_dev_left_deleted() {
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	io_start "$(iscsi_disk)"
	sleep 3
	local a0=$(wc -l < "$OUT/alerts.log" 2>/dev/null || echo 0)
	local t0=$(now) back= io= end wait=$(device_wait_s) bound
	bound=$((wait + 60))
	rdma link delete $INI_RXE
	end=$(deadline $bound)
	while before $end; do
		if [ -z "$back" ] && dev_present $INI_RXE; then back=$(now); fi
		if [ -n "$back" ] && session_logged_in; then io=$(io_ok_after $back); [ -n "$io" ] && break; fi
		sleep 0.5
	done
	figure device_wait_s $wait
	figure device_back_after_delete_s $(since $t0 "$back" never_within_$bound)
	figure io_flowing_after_delete_s $(since $t0 "$io" never_within_$bound)
	check "rxe_ini back within the device wait + 60 s ($bound s)" [ -n "$back" ]
	[ -n "$back" ] && check "rxe_ini not re-created before the device wait ($wait s) was over ($(elapsed $t0 $back) s)" \
		python3 -c "import sys; sys.exit(0 if $back - $t0 >= $wait - 0.5 else 1)"
	check "rxe_ini re-created by the daemon (rdma link add on its remembered netdev)" \
		grep -q "brought back by \`rdma link add $INI_RXE type rxe netdev $INI_IF\`" "$SOUT/daemon.log"
	check "rxe_ini's GSI QP in RTS" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "direct-I/O write and read" direct_io_check
	tail -n +$((a0 + 1)) "$OUT/alerts.log" > "$SOUT/alerts.log" 2>/dev/null
	# Blame = an alert naming the target's device, or a log line other than the topology's
	# plain observations of it (it appeared; its GSI QP is RTS), which name it by nature.
	check "no alert or log line blames rxe_tgt" no_blame_of "$TGT_RXE"
	check "daemon still running" daemon_alive
}
