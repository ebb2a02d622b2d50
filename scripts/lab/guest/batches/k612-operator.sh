# 6.12 guest, tiny init: the operator's commands, the control socket, restarts, the port
# self-test (issue 11), what a held verbs context does to a device's deletion, doctor's
# audit and --active run. (The netlink view runs in k612-recovery on the same kernel; the
# daemon's own re-creation blocked by a held verbs context, recreate-hang, about 3 min, in
# batch k612-drivers, run by name: the whole run has a 30-minute budget.)
source /lab/guest/lib.sh
lab_up
run_scenarios manual-standalone manual-daemon control-socket restart-holding selftest \
	verbs-device-hold doctor doctor-active
lab_down
