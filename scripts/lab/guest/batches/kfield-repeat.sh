# Experiment (run by name): the raw figure's spread. field-incident-kernel (the default,
# reset-when = target-back) and field-incident-early (reset-when = immediately) alternately,
# four times each on one guest: where in open-iscsi's reconnect cycle (address resolution,
# then a 3 s ISCSI_CONN_ERR_REOPEN_DELAY, connections polled once a second) the target
# returns decides most of the figure. Each run's figures are appended to figures.txt (a
# scenario's folder holds its last run only).
export KFIELD_REBOOT=0 # the target keeps its state (what the first measurements had)
source /lab/guest/lib.sh
lab_up
run_scenarios field-incident-kernel field-incident-early field-incident-kernel field-incident-early \
	field-incident-kernel field-incident-early field-incident-kernel field-incident-early
lab_down
