# Debian 13 (trixie), tiny init: the field incident inside trixie's own 6.12 kernel (the
# lab's irdma-like rdma_rxe built from trixie's kernel packages): the reference run, the
# daemon on the default configuration and the same with its kernel log off; then iscsid's
# own recovery timeline (open-iscsi 2.1.11; Debian 12 has 2.1.8, Ubuntu 24.04 2.1.9), to lay
# beside the same scenario on Debian 12 (batch k612-drivers). Run by name:
# scripts/lab/run.sh batch trixie-recovery.
source /lab/guest/lib.sh
lab_up
run_scenarios netlink-view field-kernel-alone field-incident-kernel field-incident-qptable \
	iscsid-timeline
lab_down
