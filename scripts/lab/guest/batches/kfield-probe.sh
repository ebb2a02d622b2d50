# Experiment (run by name): the in-kernel field incident on a fresh guest, with the probe
# cadence under study.
source /lab/guest/lib.sh
lab_up
export EXTRA_CONFIG=$(printf '[poll]\nprobe = 0.5\n') EXTRA_RECOVERY='probe-timeout = 0.5'
LAB_DAEMON_LOG=debug run_scenarios field-incident-kernel
run_scenarios field-incident-kernel field-incident-flap
lab_down
