# 6.12 guest, tiny init: a second boot for the scenarios a first boot did not reach (a kernel
# crash or the boot's timeout stopped it): the device left deleted, the dead listener, the
# operator commands with and without the daemon, the control socket, restart while holding,
# and the lab's self-test. Run by name: scripts/lab/run.sh batch k612-rest.
source /lab/guest/lib.sh
lab_up
run_scenarios dev-left-deleted dead-listener manual-daemon manual-standalone control-socket \
	restart-holding lab-selftest
lab_down
