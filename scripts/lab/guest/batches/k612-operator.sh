# 6.12 guest, tiny init: the operator's commands, the control socket, restarts, the port
# self-test (issue 11), what a held verbs context does to a device's deletion, doctor's
# audit and --active run (issue 24), and the daemon's own re-creation blocked by a held verbs
# context (recreate-hang, issue 22: about 3 min). (The netlink view runs in k612-recovery on
# the same kernel.)
source /lab/guest/lib.sh
lab_up
run_scenarios manual-standalone manual-daemon control-socket restart-holding selftest \
	verbs-device-hold doctor doctor-active recreate-hang
lab_down
