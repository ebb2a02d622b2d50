source /lab/guest/scenarios/sd-common.sh
# Automatic re-creation from inside the service: rxe_ini deleted and left deleted; the service
# adds it back on the netdev it remembered (`rdma link add rxe_ini type rxe netdev ini0`) after
# recovery.device-wait (the lab's 10 s; the product's default is 60 s): not back before it, back
# within it + 60 s.
scenario_sd_dev_left_deleted() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local t0=$(now) back= i end wait=$(device_wait_s) bound
	bound=$((wait + 60))
	rdma link delete $INI_RXE
	end=$(deadline $bound)
	while before $end; do
		dev_present $INI_RXE && { back=$(now); break; }
		sleep 0.5
	done
	for i in $(seq 1 60); do session_logged_in && break; sleep 0.5; done
	figure device_wait_s $wait
	figure device_back_after_delete_s $(since $t0 "$back" never_within_$bound)
	sd_journal_since $t0 > "$SOUT/journal.txt"
	check "rxe_ini back within the device wait + 60 s ($bound s)" [ -n "$back" ]
	[ -n "$back" ] && check "rxe_ini not re-created before the device wait ($wait s) was over ($(elapsed $t0 $back) s)" \
		python3 -c "import sys; sys.exit(0 if $back - $t0 >= $wait - 0.5 else 1)"
	check "rxe_ini re-created by the service (rdma link add on its remembered netdev)" \
		grep -q "brought back by \`rdma link add $INI_RXE type rxe netdev $INI_IF\`" "$SOUT/journal.txt"
	check "session LOGGED_IN" session_logged_in
	check "direct I/O" direct_io_check
}
