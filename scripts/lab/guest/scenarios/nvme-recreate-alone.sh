source /lab/guest/nvme.sh
# Reference run without the daemon: what re-creating an RDMA device does to NVMe over RDMA.
# An NVMe controller to the lab's nvmet-rdma subsystem runs over rxe_ini beside the iSER
# session; rxe_ini is re-created by hand (rdma link delete/add, what the daemon does). The
# kernel's nvme-rdma deletes every controller on a removed device (nvme_rdma_remove_one ->
# nvme_delete_ctrl, drivers/nvme/host/rdma.c) and nothing re-creates it: 30 s later the
# controller and its namespace are still gone, while iscsid brings the iSER session back by
# itself. Judged: the lab shows the loss the daemon must prevent (ERROR when NVMe over RDMA
# could not be set up: nothing said about the product).
scenario_nvme_recreate_alone() {
	nvmet_setup > "$SOUT/nvmet-setup.txt" 2>&1 || { lab_error "nvmet-rdma target setup failed ($(tail -1 "$SOUT/nvmet-setup.txt"))"; return; }
	nvme_connect || { lab_error "nvme connect over rxe_ini failed ($(tail -1 "$SOUT/nvme-connect.txt"))"; nvme_teardown; return; }
	local c=$(nvme_ctrl) d=$(nvme_disk)
	log "  NVMe controller $c ($(nvme_state)), namespace $d"
	check "the NVMe namespace takes direct I/O before the re-creation" nvme_io_check
	rdma resource show cm_id > "$SOUT/cm-ids-before.txt" 2>&1
	check "the CM id table lists nvme_rdma on rxe_ini" grep -q "link $INI_RXE/1 .*nvme_rdma" "$SOUT/cm-ids-before.txt"
	local t0=$(now)
	rdma link delete $INI_RXE && rdma link add $INI_RXE type rxe netdev $INI_IF
	local end=$(deadline 30) gone=
	while before $end; do
		if ! nvme_ctrl > /dev/null; then gone=$(now); break; fi
		sleep 0.25
	done
	[ -n "$gone" ] && figure nvme_ctrl_gone_after_recreation_s $(elapsed $t0 $gone)
	check "nvme-rdma deleted the controller with the device" [ -n "$gone" ]
	sleep 30
	check "30 s later the controller has not come back ($(nvme_state))" not nvme_ctrl
	check "nor its namespace" not nvme_has_disk
	local w=$(wait_logged_in 60)
	check "the iSER session came back by itself ($w)" session_logged_in
	nvme_teardown
}
