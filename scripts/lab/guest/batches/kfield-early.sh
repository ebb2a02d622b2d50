# Experiment (run by name): the field incident with recovery.reset-when = "immediately"
# (scenarios/field-incident-early.sh), then the default for comparison, on one fresh guest.
source /lab/guest/lib.sh
lab_up
run_scenarios field-incident-early field-incident-kernel
lab_down
