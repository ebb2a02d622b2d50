# 6.12 guest, tiny init: the operator's commands, the control socket, restarts.
source /lab/guest/lib.sh
lab_up
run_scenarios netlink-view manual-standalone manual-daemon control-socket restart-holding
lab_down
