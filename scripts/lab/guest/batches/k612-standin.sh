# 6.12 guest, tiny init: an experiment on the GSI stand-in, run by name only (see
# scenarios/standin-exp.sh). No daemon runs.
source /lab/guest/lib.sh
lab_up
run_scenarios standin-exp
lab_down
