# 6.12 guest, tiny init: the recovery scenarios (the kernel the "done" is judged on).
source /lab/guest/lib.sh
lab_up
run_scenarios netlink-view field-incident field-iscsid-alone field-default-trust \
	zombie zombie-iscsid-alone dev-left-deleted dead-listener \
	lab-selftest
lab_down
