# What a process holding a verbs context on rxe_ini does to its re-creation: the daemon's
# async-event listener (issue 11) keeps one open on every device, and the kernel's uverbs
# waits at unregistration for every user context of a driver that cannot disassociate them
# (ib_uverbs_remove_one waits unless the driver has disassociate_ucontext; see
# drivers/infiniband/core/uverbs_main.c). rdma-core's ibv_asyncwatch holds the context here.
# Measured, not judged (PASS unless the lab fails): whether `rdma link delete rxe_ini` returns
# within 10 s while ibv_asyncwatch runs, how long it takes once ibv_asyncwatch is killed, and
# which async events ibv_asyncwatch printed. rxe_ini is re-added and the session brought back.
scenario_verbs_device_hold() {
	ibv_asyncwatch -d $INI_RXE > "$SOUT/asyncwatch.txt" 2>&1 &
	local aw=$! t0 t1 dp done_s=
	sleep 2
	kill -0 $aw 2>/dev/null || { lab_error "ibv_asyncwatch -d rxe_ini did not start: $(head -3 "$SOUT/asyncwatch.txt")"; return; }
	t0=$(now)
	(rdma link delete $INI_RXE > "$SOUT/delete.txt" 2>&1; echo "rc=$? at $(now)" >> "$SOUT/delete.txt") &
	dp=$!
	local end=$(deadline 10)
	while before $end && kill -0 $dp 2>/dev/null; do sleep 0.2; done
	if kill -0 $dp 2>/dev/null; then
		figure delete_with_context_open "blocked_10s"
		log "  rdma link delete rxe_ini still blocked after 10 s with ibv_asyncwatch's context open ($(cat /proc/$(pgrep -n -x rdma)/wchan 2>/dev/null))"
		t1=$(now)
		kill $aw 2>/dev/null
		end=$(deadline 30)
		while before $end && kill -0 $dp 2>/dev/null; do sleep 0.2; done
		kill -0 $dp 2>/dev/null && { lab_error "rdma link delete still blocked 30 s after ibv_asyncwatch was killed"; return; }
		figure delete_after_context_closed_s $(elapsed $t1)
	else
		figure delete_with_context_open "returned_$(elapsed $t0)s"
		sleep 1
		kill -0 $aw 2>/dev/null && figure asyncwatch_after_delete running || figure asyncwatch_after_delete exited
		kill $aw 2>/dev/null
	fi
	wait $aw 2>/dev/null
	log "  delete: $(tr '\n' ' ' < "$SOUT/delete.txt"); asyncwatch printed: $(tr '\n' ' ' < "$SOUT/asyncwatch.txt" | cut -c1-300)"
	figure asyncwatch_events "$(grep -o 'event_type [A-Z_]*\|IBV_EVENT_[A-Z_]*\|event [A-Za-z_ ]*' "$SOUT/asyncwatch.txt" | sort | uniq -c | tr -s ' ' | tr '\n' ';' | tr ' ' '_')"
	rdma link add $INI_RXE type rxe netdev $INI_IF
	wait_logged_in 60 > /dev/null || { iser_login; wait_logged_in 30 > /dev/null; }
	check "session back after rxe_ini's re-add" session_logged_in
}
