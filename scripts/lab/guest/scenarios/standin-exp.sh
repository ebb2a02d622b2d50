# An experiment on the GSI stand-in (no daemon): does a route rule that refuses rxe_ini's
# RoCE packets to the target (`ip rule ... ipproto 17 prohibit`: rxe's route lookup for
# every packet it sends, the CM MADs of QP 1 included, fails) make iscsid's attempts fail at
# once, as a MAD on a QP 1 in ERR does in the field? The tc drop makes each attempt last
# iscsid's login timer instead. Figures: iscsid's attempts (rxe `state -> INIT` of new QPs on
# rxe_ini) while the target is back and the rule holds, and the time from the re-creation to
# LOGGED_IN. Result (run 20261202T043822Z, 6.12): no; the attempts still began 15 s apart and
# the first after the re-creation 15 s after the one it interrupted, as with the tc filter.
scenario_standin_exp() {
	dmesg -C
	tc qdisc replace dev $TGT_IF root netem loss 100%
	ip rule add pref 40 to $TGT_IP ipproto 17 prohibit || fail "ip rule with ipproto 17 refused"
	log "  blackhole + rule on"
	sleep 25
	tc qdisc del dev $TGT_IF root
	local tup=$(now)
	log "  target back (session $(session_state))"
	sleep 20
	log "  20 s after the target's return: session $(session_state)"
	session_logged_in && fail "the rule did not hold: the session came back through it"
	rdma resource show qp lqpn 1 > "$SOUT/qp1.txt" 2>&1
	dmesg > "$SOUT/dmesg-before-recreate.txt"
	figure new_ini_qps_while_rule_held "$(grep -c "$INI_RXE: qp#[0-9]* rxe_qp_from_attr: state -> INIT" "$SOUT/dmesg-before-recreate.txt")"
	ip rule > "$SOUT/rules.txt"
	local tr=$(now)
	rdma link delete $INI_RXE
	rdma link add $INI_RXE type rxe netdev $INI_IF
	ip rule del pref 40
	log "  re-created, rule off"
	local w=$(wait_logged_in 40)
	figure logged_in_after_recreate_s "$w"
	session_logged_in || fail "session not back within 40 s of the re-creation"
}
