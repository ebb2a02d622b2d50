source /lab/guest/scenarios/field-incident-kernel.sh
# A flapping target after the in-kernel field incident: once rxe_ini's QP 1 is in ERR, the
# target's host answers for 0.4 s, then not for 1.6 s, six times (12 s), then stays. The
# daemon (default configuration) must not re-create rxe_ini while the target flaps (it is
# "back" only after recovery.probe-successes consecutive answers, poll.probe apart: 3 × 0.25 s
# = answering for 0.5 s), and must re-create it exactly once after it stays, with the storage
# back as in field-incident-kernel.
scenario_field_incident_flap() {
	KFIELD_FLAP=6 scenario_field_incident_kernel
}
