source /lab/guest/scenarios/kfield-common.sh
# The field incident inside the kernel on an iSER portal with no TCP listener: the daemon must
# recover with the neighbour (ARP/ND) probe, which needs no listener.
#
# LIO cannot keep an iSER portal without its TCP one (np/<ip:port>/iser adds the iSER network
# portal as a child of the TCP portal; removing the portal directory removes both: see
# lio-setup.py and dead-listener.sh), and the image has no nftables or iptables. So the missing
# listener is modelled on the target side with tc alone: TCP to port 3260 arriving on tgt0 is
# dropped (an ingress u32 filter). iSER is untouched: its connections are RDMA CM over RoCEv2
# (UDP 4791), and the session's node record was made before the filter. A dropped SYN times
# out (an iSER-only array's host would answer with a reset instead, "refused"), and a time-out
# cannot tell a missing listener from a missing host, so `auto` keeps TCP here: the portal is
# configured for the neighbour probe (recovery.portal-probe-method), which is the operator's
# setting for such an array. `auto`'s switch on a refused connect is covered by the simulated
# scenario iser-only-portal and the probe-choice tests.
#
# Judged: while the target is away, no re-creation and no ARP answer; after it returns, the
# neighbour probe reports the host answering on ini0, exactly one re-creation, the session
# back, a direct-I/O write and read; status (JSON and text) names the portal's method
# "neighbour". The figure tcp_syns_dropped counts TCP packets to the portal the filter dropped
# meanwhile (expected 0: the configured neighbour probe makes no TCP connection).
tcp_listener_off() {
	tc qdisc add dev $TGT_IF ingress 2>/dev/null
	tc filter add dev $TGT_IF parent ffff: protocol ip prio 1 u32 \
		match ip protocol 6 0xff match ip dport $PORT 0xffff action drop
}
tcp_listener_on() { tc qdisc del dev $TGT_IF ingress 2>/dev/null; true; }
# the number of packets the ingress filter dropped so far
tcp_dropped() {
	tc -s filter show dev $TGT_IF parent ffff: 2>/dev/null |
		awk '/Sent [0-9]+ bytes [0-9]+ pkt/{for(i=1;i<=NF;i++) if($i=="pkt"){print $(i-1); exit}}'
}
scenario_iser_only_portal() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	EXTRA_RECOVERY="portal-probe-method = { \"$TGT_IP:$PORT\" = \"neighbour\" }" write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	tcp_listener_off
	# the model holds: a TCP connect to the portal gets no answer, iSER I/O still flows
	if timeout 3 bash -c "exec 3<>/dev/tcp/$TGT_IP/$PORT" 2>/dev/null; then
		lab_error "TCP to $TGT_IP:$PORT still connects with the ingress drop in place"
		tcp_listener_on
		return
	fi
	local d0=$(tcp_dropped)
	kfield_watch_start
	kfield_outage 120
	[ -n "$T_ERR" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 120 s of the target going away"; kfield_watch_stop; tcp_listener_on; return; }
	sleep ${KFIELD_AWAY_S:-10}
	$IG status --json > "$SOUT/status-away.json" 2>/dev/null
	T_UP=$(now)
	target_on
	log "  target back (QP 1 $(gsi_state $INI_RXE), session $(session_state))"
	local before=$(recreations_between $T_DOWN $T_UP)
	check "no re-creation of rxe_ini while the target was away (got $before)" [ "$before" = 0 ]
	# (from QP 1's ERR on: the kernel model trips it on the target's FAILED neighbour entry)
	check "no ARP/ND answer was reported while the target was away" \
		not awk -v a=$T_ERR -v t=$T_UP '$1>a && $1<t && /neighbour probe: the host answers ARP\/ND/{f=1} END{exit !f}' "$SOUT/daemon.log"
	field_wait_recovered 90
	sleep 10 # a second re-creation would show here
	local n r io
	n=$(recreations_since $T_UP)
	r=$(first_recreation_since $T_UP)
	check "the neighbour probe saw the host answer on $INI_IF" \
		grep -q "neighbour probe: the host answers ARP/ND on $INI_IF" "$SOUT/daemon.log"
	check "exactly one re-creation after the target answered (got $n)" [ "$n" = 1 ]
	check "rxe_ini's new QP 1 in RTS" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "direct-I/O write and read" direct_io_check
	$IG status --json > "$SOUT/status.json" 2>/dev/null
	local method=$(jq -r --arg p "$TGT_IP:$PORT" '[.daemon.snapshot.ports[].portals[] | select(.portal == $p) | .probe.method][0]' "$SOUT/status.json" 2>/dev/null)
	check "status names the portal's probe method neighbour (got ${method:-nothing})" [ "$method" = neighbour ]
	$IG status > "$SOUT/status.txt" 2>/dev/null
	check "status text says how the portal is probed" grep -q "probed by neighbour" "$SOUT/status.txt"
	local d1=$(tcp_dropped)
	figure tcp_syns_dropped $(( ${d1:-0} - ${d0:-0} ))
	check "daemon still running" daemon_alive
	if [ -n "$r" ]; then
		figure recreate_after_target_back_s $(elapsed $T_UP ${r% *})
		io=$(io_ok_after ${r% *})
		figure io_flowing_after_target_back_s $([ -n "$io" ] && elapsed $T_UP $io || echo never)
	else
		figure io_flowing_after_target_back_s never
	fi
	kfield_watch_stop
	tcp_listener_on
	cp $CONF "$SOUT/config.toml"
}
