# 6.12 guest, tiny init: the operator's commands, the control socket, restarts, the port
# self-test (issue 11), what a held verbs context does to a device's deletion. (The netlink
# view runs in k612-recovery on the same kernel; doctor and doctor-active run on 6.12 in the
# systemd batch, against the installed package; the daemon's own re-creation blocked by a
# held verbs context, recreate-hang, about 3 min, in batch k612-drivers, run by name: the
# whole run has a 30-minute budget.)
source /lab/guest/lib.sh
lab_up
run_scenarios manual-standalone manual-daemon control-socket restart-holding selftest \
	verbs-device-hold
lab_down
