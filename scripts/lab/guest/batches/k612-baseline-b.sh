# 6.12 guest, tiny init: the second half of the baseline run of 2026-12-01 (the first boot was
# stopped when a loaded host slowed the guest to about 0.4x real time): the scenarios the
# first boot had not reached, most important first.
source /lab/guest/lib.sh
lab_up
run_scenarios dev-left-deleted dead-listener manual-daemon control-socket restart-holding \
	manual-standalone lab-selftest
lab_down
