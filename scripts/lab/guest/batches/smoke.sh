# A quick check of the lab itself: setup, login, the instruments' self-test, the netlink view.
source /lab/guest/lib.sh
lab_up
run_scenarios lab-selftest netlink-view
lab_down
