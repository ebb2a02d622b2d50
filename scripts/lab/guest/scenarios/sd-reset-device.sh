source /lab/guest/scenarios/sd-common.sh
# reset-device through the control socket: the re-creation (`rdma link delete/add`) runs inside
# the hardened service.
scenario_sd_reset_device() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local t0=$(now) t1 i
	timeout 180 $IG reset-device $INI_RXE --yes > "$SOUT/reset-device.txt" 2>&1
	local rc=$?
	t1=$(now)
	figure reset_device_s $(elapsed $t0 $t1)
	check "reset-device --yes exit 0 (got $rc)" [ $rc = 0 ]
	for i in $(seq 1 60); do session_logged_in && break; sleep 0.5; done
	check "rxe_ini re-created exactly once (got $(recreations_since $t0))" [ "$(recreations_since $t0)" = 1 ]
	check "GSI QP in RTS" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "direct I/O" direct_io_check
	sd_journal_since $t0 > "$SOUT/journal.txt"
	check "no permission error in the service's journal" not grep -qi 'permission denied\|operation not permitted\|EPERM\|EACCES' "$SOUT/journal.txt"
	check "service still active" sd_active
}
