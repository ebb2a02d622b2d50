source /lab/guest/scenarios/field-common.sh
# The same incident with iscsid alone (no daemon): the reference figure. With the GSI QP stuck
# nothing re-creates the device, so iscsid cannot log in again; this scenario measures it (its
# verdict says whether the lab reproduced the incident: storage must NOT come back by itself).
scenario_field_iscsid_alone() {
	field_run 30
	local t=$(wait_logged_in 30)
	local io=$(io_ok_after $T_UP)
	figure io_flowing_after_target_back_s $(since $T_UP "$io" never_within_30)
	figure session_logged_in_after_target_back_s $t
	SCEN_PASS_REASON="reference run: the incident was reproduced, storage did not come back by itself"
	if session_logged_in && [ -n "$io" ]; then
		lab_error "storage came back without a re-creation: the GSI stand-in did not hold"
	fi
}
