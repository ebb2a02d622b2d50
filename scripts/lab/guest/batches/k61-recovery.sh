# Debian 12's own 6.1 guest, tiny init: the scenarios 6.1 survives (no link-loss outage: 6.1
# panics in iser_task_rsp when the link returns after one in which the connection failed).
source /lab/guest/lib.sh
lab_up
run_scenarios netlink-view field-incident dev-left-deleted dead-listener \
	lab-selftest
lab_down
