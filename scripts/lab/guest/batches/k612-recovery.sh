# 6.12 guest, tiny init: the recovery scenarios (the kernel the "done" is judged on).
# The field incident happens inside the kernel (scripts/lab/kmod: the irdma-like rdma_rxe):
# the reference run without the daemon, the daemon on the default configuration, the same with
# its kernel log off (QP table alone), and a flapping target; field-default-trust is the one
# scenario that writes records into /dev/kmsg, to check that forged records trigger nothing.
source /lab/guest/lib.sh
lab_up
# zombie-iscsid-alone comes last: it is the one that leaves iscsid alone with a FAILED
# connection when the link returns, which has crashed 6.12 in iser_task_rsp
# (iscsi_complete_pdu NULL dereference, lab run of 2026-12-01): a crash there must not cost
# the product's scenarios.
run_scenarios netlink-view field-kernel-alone field-incident-kernel field-incident-qptable \
	field-incident-flap field-default-trust zombie dev-left-deleted dead-listener lab-selftest \
	zombie-iscsid-alone
lab_down
