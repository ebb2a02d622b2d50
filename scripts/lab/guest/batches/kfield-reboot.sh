# Experiment (run by name): kfield-repeat with a target that reboots while away
# (kfield-common.sh: target_reboot), so that no stale RDMA CM state of the target meets the
# initiator's reconnect.
export KFIELD_REBOOT=1
source /lab/guest/lib.sh
lab_up
run_scenarios field-incident-kernel field-incident-early field-incident-kernel field-incident-early \
	field-incident-kernel field-incident-early field-incident-kernel field-incident-early
lab_down
