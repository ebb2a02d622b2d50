# The zombie session (6.12): tgt0's link down for 40 s, then up. On 6.12 this usually leaves the
# session LOGGED_IN while every I/O fails with DID_ABORT, for as long as watched; only a logout
# and login repair it. (On 6.1 the same outage panics the kernel in iser_task_rsp when the
# connection failed during it, so the lab does not run it there.)
zombie_run() {
	io_start "$(iscsi_disk)"
	sleep 3
	T_DOWN=$(now)
	ip link set $TGT_IF down
	sleep 40
	T_UP=$(now)
	ip link set $TGT_IF up
	log "  link back (session $(session_state))"
	echo "T_DOWN=$T_DOWN T_UP=$T_UP" > "$SOUT/times.txt"
}
# zombie_seen: I/O failed with DID_ABORT after the link returned while the session said LOGGED_IN
zombie_seen() { dmesg | grep -q 'DID_ABORT'; }
