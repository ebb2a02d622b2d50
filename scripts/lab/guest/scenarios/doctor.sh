source /lab/guest/scenarios/doctor-common.sh
# `iser-guard doctor` (read-only) on the real kernel (issue 24), in the tiny guest without and
# with the daemon, in the systemd guest beside the package's service. Expected:
#  - exit 2 (warnings only: iser-task-rsp-crash applies to 6.1 and 6.12 with iSER; the tiny
#    guest has no unit), the JSON's exit_code and counts agreeing with its checks; no problem;
#  - rdma_rxe: the lab's module (scripts/lab/kmod) read as out-of-tree (a warning, and the
#    out-of-tree-driver row), the stock one as in-tree;
#  - rxe_ini: Soft-RoCE on ini0, re-created by `rdma link` delete/add, QP 1 in RTS, ib_iser's
#    CM id on port 1; devices.allow matches; the portal's session listed; every module loaded;
#  - systemd: the installed unit's sandbox ok; the daemon's view read and not in disagreement;
#  - the text report: one line per check, the same exit code;
#  - read-only: no re-creation (devwatch), QP 1 in RTS, the session LOGGED_IN, nothing on stderr.
# The reports stay in the results (doctor*.json, doctor*.txt).
scenario_doctor() {
	dr_have --json || return
	if [ "${LAB_INIT:-tiny}" = systemd ]; then
		sd_wait_active 10 || { lab_error "the service is not active (sd-install runs first)"; return; }
		dr_audit doctor running text
		check "service still active" sd_active
	else
		write_config 0
		dr_audit doctor none text
		if daemon_start; then
			dr_audit doctor-daemon running
		else
			fail "the daemon did not start: $(tail -2 "$SOUT/daemon.log")"
		fi
	fi
}
