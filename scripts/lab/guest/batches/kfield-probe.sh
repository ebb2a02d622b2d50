# Experiment (run by name): the in-kernel field incident's reference run alone, on a fresh guest.
source /lab/guest/lib.sh
lab_up
run_scenarios field-kernel-alone
lab_down
