# The lab checks its own instruments before any product verdict depends on them:
#  - the blackhole makes the portal unreachable (TCP connect to 192.0.2.2:3260 fails) and
#    lifting it makes it reachable again;
#  - devwatch sees a re-creation of rxe_ini (the counts every verdict relies on);
#  - the GSI stand-in blocks an iSER login from rxe_ini (as a stuck QP 1 does), and a
#    re-creation of rxe_ini clears it, after which the login succeeds.
tcp_probe() { timeout 3 bash -c "exec 3<>/dev/tcp/$TGT_IP/$PORT" 2>/dev/null; }
scenario_lab_selftest() {
	check "portal answers TCP at baseline" tcp_probe
	tc qdisc replace dev $TGT_IF root netem loss 100%
	# The scenarios rely on the blackhole seconds after it is set: the check measures when
	# it holds (two probes in a row unanswered) and fails only when it does not hold within
	# 10 s.
	local tb=$(now) held=0 i
	for i in $(seq 1 10); do
		sleep 1
		if tcp_probe; then
			held=0
			# what carried the answer (2026-12-02: a lost table-200 route sent the
			# target's replies via lo; net_routes in lib.sh restores it now)
			{
				echo "== $(now) answered"
				tc -s qdisc show dev $TGT_IF
				tc -s qdisc show dev $INI_IF
				ip rule
				ip route get $TGT_IP
				ip route get $INI_IP from $TGT_IP
				ss -tnoi dst $TGT_IP or src $TGT_IP
			} >> "$SOUT/blackhole-diag.txt" 2>&1
		else
			held=$((held + 1))
		fi
		[ $held -ge 2 ] && break
	done
	if [ $held -ge 2 ]; then
		figure blackhole_held_after_s "$(elapsed $tb)"
	else
		fail "blackhole: portal still answers 10 s after netem was set"
	fi
	tc qdisc del dev $TGT_IF root
	check "portal answers after the blackhole" tcp_probe
	iser_logout_all
	gsi_stuck_on
	gsi_stuck_watch
	local t0=$(now)
	# 10 s: an iSER login takes 0.3-4 s here, also under load
	if timeout 10 iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -I iser --login > "$SOUT/login-standin.txt" 2>&1; then
		fail "GSI stand-in: an iSER login succeeded through it"
	fi
	log "  login under the stand-in failed after $(elapsed $t0) s (expected)"
	local t1=$(now)
	rdma link delete $INI_RXE
	rdma link add $INI_RXE type rxe netdev $INI_IF
	sleep 1
	check "devwatch counts the re-creation (got $(recreations_since $t1))" [ "$(recreations_since $t1)" = 1 ]
	local i
	for i in $(seq 1 60); do gsi_stuck_active || break; sleep 0.25; done # the watcher polls; TCG under load is slow
	check "re-creating rxe_ini clears the stand-in" not gsi_stuck_active
	# the login killed by the timeout above is still retried by iscsid: it succeeds now, or
	# (if iscsid gave up) a new login does
	wait_logged_in 30 > /dev/null || { iser_login; wait_logged_in 30 > /dev/null; }
	check "the session logs in after the re-creation" session_logged_in
	wait_disk > /dev/null
	check "I/O after the re-creation" direct_io_check
	[ ${#FAILS[@]} -eq 0 ] || lab_error "the lab's instruments do not work: ${FAILS[*]}"
	[ ${#FAILS[@]} -eq 0 ] && touch "$OUT/selftest-ok"
	FAILS=()
}
