source /lab/guest/scenarios/kfield-common.sh
source /lab/guest/nvme.sh
source /lab/guest/nfs.sh
# Three consumers on one RDMA device: the iSER session, an NVMe over RDMA controller (the
# kernel's nvmet-rdma target on rxe_tgt, nvme-rdma on rxe_ini) and an NFS over RDMA mount (the
# kernel's nfsd with an rdma listener, the client's proto=rdma mount), and the in-kernel field
# incident with the daemon on the shipped default configuration (plus the allow-list). The
# target's host goes away: the iSER connection fails, nvme-rdma's keep-alive fails and it
# reconnects every 2 s, and rxe_ini's QP 1 goes to ERR by the kernel's own doing. When the
# target answers again the daemon re-creates rxe_ini once. nvme-rdma deletes every controller
# of a removed device and never re-creates it (nvme-recreate-alone shows that without the
# daemon), so the daemon must remember the controller before the re-creation and connect it
# again with nvme-cli after it. The NFS client's transport (xprtrdma) reconnects by itself on a
# new device; the daemon checks that the mount answers. Judged: exactly one re-creation after
# the return; the iSER session logged in with direct I/O; the NVMe controller to the same
# subsystem live again, its namespace present and taking direct I/O; the NFS mount taking a
# write and a read again; the daemon's log names the controller and the mount.
scenario_mixed_consumers_kernel() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	nvmet_setup > "$SOUT/nvmet-setup.txt" 2>&1 || { lab_error "nvmet-rdma target setup failed ($(tail -1 "$SOUT/nvmet-setup.txt"))"; return; }
	nvme_connect || { lab_error "nvme connect over rxe_ini failed ($(tail -1 "$SOUT/nvme-connect.txt"))"; nvme_teardown; return; }
	log "  NVMe controller $(nvme_ctrl) ($(nvme_state)), namespace $(nvme_disk)"
	check "the NVMe namespace takes direct I/O before the incident" nvme_io_check
	nfsd_setup > "$SOUT/nfsd-setup.txt" 2>&1 || { lab_error "nfsd with an rdma listener failed ($(tail -1 "$SOUT/nfsd-setup.txt"))"; nvme_teardown; nfs_teardown; return; }
	nfs_mount || { lab_error "NFS over RDMA mount over rxe_ini failed ($(tail -1 "$SOUT/nfs-mount.txt"))"; nvme_teardown; nfs_teardown; return; }
	check "the NFS over RDMA mount takes a write and a read before the incident" nfs_io_check
	write_config 0
	daemon_start || { fail "daemon did not start"; nvme_teardown; nfs_teardown; return; }
	$IG status --json > "$SOUT/status-before.json" 2>&1
	check "status lists nvme_rdma among rxe_ini's consumers" grep -q nvme_rdma "$SOUT/status-before.json"
	check "status lists rpcrdma among rxe_ini's consumers" grep -q rpcrdma "$SOUT/status-before.json"
	kfield_watch_start
	kfield_outage 120
	[ -n "$T_ERR" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 120 s of the target going away"; kfield_watch_stop; nvme_teardown; nfs_teardown; return; }
	log "  NVMe controller $(nvme_state) while the target is away"
	[ "$KFIELD_REBOOT" = 1 ] && { target_reboot || lab_error "the target's reboot failed"; }
	sleep ${KFIELD_AWAY_S:-10}
	T_UP=$(now)
	target_on
	log "  target back (QP 1 $(gsi_state $INI_RXE), session $(session_state), NVMe $(nvme_state))"
	echo "T_DOWN=$T_DOWN T_ERR=$T_ERR T_UP=$T_UP" > "$SOUT/times.txt"
	local before=$(recreations_between $T_DOWN $T_UP)
	check "no re-creation of rxe_ini while the target was away (got $before)" [ "$before" = 0 ]
	field_wait_recovered 90
	# the NVMe controller: back when a controller to the same subsystem is live with its namespace
	local t0=$(now) nv=
	while python3 -c "import sys; sys.exit(0 if $(now)-$t0 < 60 else 1)"; do
		if [ "$(nvme_state)" = live ] && nvme_has_disk; then nv=$(now); break; fi
		sleep 0.25
	done
	# the NFS mount: back when a write and a read through it succeed again
	local nf=
	t0=$(now)
	while python3 -c "import sys; sys.exit(0 if $(now)-$t0 < 60 else 1)"; do
		if nfs_io_check; then nf=$(now); break; fi
		sleep 0.25
	done
	sleep 5 # a second re-creation would show here
	local n=$(recreations_since $T_UP) r=$(first_recreation_since $T_UP)
	check "exactly one re-creation after the target answered (got $n)" [ "$n" = 1 ]
	check "rxe_ini's new QP 1 in RTS" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "iSCSI direct-I/O write and read" direct_io_check
	check "the NVMe controller is live again ($(nvme_ctrl) $(nvme_state))" [ "$(nvme_state)" = live ]
	check "its namespace is present ($(nvme_disk))" nvme_has_disk
	check "NVMe direct-I/O write and read" nvme_io_check
	check "daemon still running" daemon_alive
	check "the daemon's log names the NVMe controller it connected again" grep -q "$NVME_NQN" "$SOUT/daemon.log"
	check "the NFS over RDMA mount takes a write and a read again" [ -n "$nf" ]
	check "the daemon's log names the NFS mount it checked" grep -q "$NFS_MNT" "$SOUT/daemon.log"
	[ -n "$r" ] && [ -n "$nv" ] && figure nvme_live_after_recreation_s $(elapsed ${r% *} $nv)
	[ -n "$nv" ] && figure nvme_live_after_target_back_s $(elapsed $T_UP $nv)
	[ -n "$nf" ] && figure nfs_io_after_target_back_s $(elapsed $T_UP $nf)
	local io=$(io_ok_after $T_UP)
	[ -n "$io" ] && figure iscsi_io_flowing_after_target_back_s $(elapsed $T_UP $io)
	$IG status --json > "$SOUT/status-after.json" 2>&1
	kfield_watch_stop
	cp $CONF "$SOUT/config.toml"
	daemon_stop
	nvme_teardown
	nfs_teardown
}
