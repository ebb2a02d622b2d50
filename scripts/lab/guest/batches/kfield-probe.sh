# Experiment (run by name): the in-kernel field incident scenarios on a fresh guest.
source /lab/guest/lib.sh
lab_up
run_scenarios ${KFIELD_SCENARIOS:-field-incident-kernel field-incident-qptable field-incident-flap field-kernel-alone}
lab_down
