source /lab/guest/scenarios/kfield-common.sh
source /lab/guest/mpath.sh
# dm-multipath over the target's LUN: the iSER path on rxe_ini and a TCP path to the same
# portal, one map built by multipathd, and the in-kernel field incident with the daemon on the
# default configuration (plus the allow-list). The target's loss fails both paths, so the
# iSER path is no map's last usable path and the re-creation runs when the target is back.
# Judged: the daemon read the map (status names it); exactly one re-creation after the
# return; both paths active in the map again, the map taking direct I/O; the daemon's log
# reports the multipath check.
scenario_multipath_kernel() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	mpath_setup > "$SOUT/mpath-setup.txt" 2>&1 || { lab_error "no two-path map ($(mpath_paths | tr '\n' ';') $(tail -1 "$SOUT/mpath-setup.txt"))"; mpath_teardown; return; }
	mpath_paths > "$SOUT/paths-before.txt"
	log "  map $(mpath_map): $(tr '\n' ';' < "$SOUT/paths-before.txt")"
	check "the map takes direct I/O before the incident" mpath_io_check
	write_config 0
	daemon_start || { fail "daemon did not start"; mpath_teardown; return; }
	local t0=$(now) seen=
	while python3 -c "import sys; sys.exit(0 if $(now)-$t0 < 20 else 1)"; do
		$IG status --json > "$SOUT/status-before.json" 2>&1
		grep -q '"multipath"' "$SOUT/status-before.json" && grep -q "$(mpath_map | xargs basename)" "$SOUT/status-before.json" && { seen=1; break; }
		sleep 1
	done
	check "status shows the map's paths on rxe_ini" [ -n "$seen" ]
	kfield_watch_start
	kfield_outage 120
	[ -n "$T_ERR" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 120 s of the target going away"; kfield_watch_stop; mpath_teardown; return; }
	mpath_paths > "$SOUT/paths-away.txt"
	log "  paths while the target is away: $(tr '\n' ';' < "$SOUT/paths-away.txt")"
	[ "$KFIELD_REBOOT" = 1 ] && { target_reboot || lab_error "the target's reboot failed"; }
	sleep ${KFIELD_AWAY_S:-10}
	T_UP=$(now)
	target_on
	echo "T_DOWN=$T_DOWN T_ERR=$T_ERR T_UP=$T_UP" > "$SOUT/times.txt"
	local before=$(recreations_between $T_DOWN $T_UP)
	check "no re-creation of rxe_ini while the target was away (got $before)" [ "$before" = 0 ]
	field_wait_recovered 90
	local mp=
	t0=$(now)
	while python3 -c "import sys; sys.exit(0 if $(now)-$t0 < 60 else 1)"; do
		if mpath_active; then mp=$(now); break; fi
		sleep 0.5
	done
	sleep 5 # a second re-creation would show here
	mpath_paths > "$SOUT/paths-after.txt"
	local n=$(recreations_since $T_UP)
	check "exactly one re-creation after the target answered (got $n)" [ "$n" = 1 ]
	check "session LOGGED_IN" session_logged_in
	check "both paths active in the map again ($(tr '\n' ';' < "$SOUT/paths-after.txt"))" [ -n "$mp" ]
	check "the map takes direct I/O" mpath_io_check
	check "daemon still running" daemon_alive
	check "the daemon's log reports the multipath check" grep -qi "multipath" "$SOUT/daemon.log"
	[ -n "$mp" ] && figure multipath_active_after_target_back_s $(elapsed $T_UP $mp)
	local io=$(io_ok_after $T_UP)
	[ -n "$io" ] && figure iscsi_io_flowing_after_target_back_s $(elapsed $T_UP $io)
	$IG status --json > "$SOUT/status-after.json" 2>&1
	kfield_watch_stop
	cp $CONF "$SOUT/config.toml"
	daemon_stop
	mpath_teardown
}
