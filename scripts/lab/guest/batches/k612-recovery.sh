# 6.12 guest, tiny init: the recovery scenarios (the kernel the "done" is judged on).
source /lab/guest/lib.sh
lab_up
# zombie-iscsid-alone comes last: it is the one that leaves iscsid alone with a FAILED
# connection when the link returns, which has crashed 6.12 in iser_task_rsp
# (iscsi_complete_pdu NULL dereference, lab run of 2026-12-01): a crash there must not cost
# the product's scenarios. lab-selftest then needs a second boot (k612-rest).
run_scenarios netlink-view field-incident field-iscsid-alone field-default-trust \
	zombie dev-left-deleted dead-listener lab-selftest zombie-iscsid-alone
lab_down
