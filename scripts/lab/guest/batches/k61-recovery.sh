# Debian 12's own 6.1 guest, tiny init: the scenarios 6.1 survives (no link-loss outage: 6.1
# panics in iser_task_rsp when the link returns after one in which the connection failed).
# dead-listener-no-dyndbg runs here only: on 6.12 the target side locks up in LIO's isert
# (iscsit_build_pdu_and_seq_lists soft lockup) in the dead-listener scenario. The plain
# dead-listener (rdma_cm's REJECTED line on) runs on 6.12 only: on 6.1 it is the same scenario
# with more evidence, and its re-login once left the disk offlined for the next one.
# The field incident happens inside the kernel (scripts/lab/kmod): the reference run, the
# daemon on the default configuration, and the same with its kernel log off. doctor: the
# audit on 6.1 (doctor-active and the lab's own self-test run on 6.12 only: the whole run has
# a 30-minute budget).
source /lab/guest/lib.sh
lab_up
run_scenarios netlink-view field-kernel-alone field-incident-kernel field-incident-qptable \
	dev-left-deleted dead-listener-no-dyndbg selftest doctor
lab_down
