source /lab/guest/scenarios/doctor-common.sh
source /lab/guest/scenarios/manual-common.sh
# `iser-guard doctor --active rxe_ini` on the real kernel (issue 24), with the session logged in.
# Expected:
#  - beside a running daemon (the lab's, or the package's service): exit 75, nothing done;
#    without --yes and no terminal: the plan printed, exit 64; an unknown device: exit 66 naming
#    rxe_ini; none of these re-creates anything;
#  - with the daemon stopped, `--yes`: exit 0; the plan is rdma link delete/add on ini0 (the
#    only method: module reload is off), the self-test passes before and after,
#    the re-creation is timed step by step, QP 1 of the new device is in RTS, the session comes
#    back, the direct-I/O reads work at the end, the kernel lines kept include the session's
#    connection error; exactly one re-creation (devwatch); afterwards QP 1 in RTS, the session
#    LOGGED_IN, direct I/O;
#  - the report file, in the state directory by default, is 0600 and holds the audit,
#    iscsiadm's listing and the session's node record, whose CHAP password (set for this
#    scenario; authmethod stays None) is redacted.
# Figures: each step's time, the session's return and by whom, failed reads, the longest stall.
DR_SECRET=LabChapS3cretX9
dr_node() { iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -I iser "$@"; }
scenario_doctor_active() {
	dr_have --active --report || return
	[ "${LAB_INIT:-tiny}" = systemd ] || write_config 0
	dr_node -o update -n node.session.auth.password -v $DR_SECRET > "$SOUT/node-update.txt" 2>&1
	if ! grep -rqs "node.session.auth.password = $DR_SECRET" /etc/iscsi/nodes/$IQN; then
		lab_error "the CHAP password did not reach the node record ($(head -1 "$SOUT/node-update.txt"))"
		return
	fi
	local t0=$(now) t1 rc
	if dr_daemon_up; then
		mrun active-beside-daemon $IG doctor --active $INI_RXE --yes
		check "beside a running daemon: exit 75 (got $MRC)" [ $MRC = 75 ]
		check "beside a running daemon: it says to stop it" grep -q 'systemctl stop iser-guard' "$SOUT/active-beside-daemon.txt"
	else
		fail "the daemon did not start"
	fi
	dr_daemon_down || { lab_error "the daemon did not stop"; return; }
	mrun active-noyes $IG doctor --active $INI_RXE
	check "without --yes and no terminal: exit 64 (got $MRC)" [ $MRC = 64 ]
	check "without --yes: the plan printed first" grep -q "delete and re-add rxe link $INI_RXE on $INI_IF" "$SOUT/active-noyes.txt"
	mrun active-nodev $IG doctor --active nosuch_dev --yes
	check "an unknown device: exit 66 (got $MRC)" [ $MRC = 66 ]
	check "an unknown device: the message names rxe_ini" grep -q "it has .*$INI_RXE" "$SOUT/active-nodev.txt"
	check "the refusals re-created nothing (devwatch: $(recreations_since $t0))" [ "$(recreations_since $t0)" = 0 ]

	t1=$(now)
	# the report where it goes by default (<state-dir>/doctor-active-rxe_ini-TIME.json), copied
	# into the results
	timeout 300 $IG doctor --active $INI_RXE --yes < /dev/null > "$SOUT/active.txt" 2>&1
	rc=$?
	figure active_s "$(elapsed $t1)"
	log "  doctor --active $INI_RXE --yes -> exit $rc"
	sed 's/^/    /' "$SOUT/active.txt"
	check "doctor --active exit 0 (got $rc)" [ $rc = 0 ]
	local report
	report=$(sed -n 's/.*report written to //p' "$SOUT/active.txt" | tail -1)
	check "the report went to the state directory ($report)" grep -q "^$STATE/doctor-active-$INI_RXE-[0-9]*T[0-9]*Z\\.json$" <<< "$report"
	check "the report file is 0600 (got $(stat -c %a "$report" 2>/dev/null))" [ "$(stat -c %a "$report" 2>/dev/null)" = 600 ]
	cp "$report" "$SOUT/report.json" 2>/dev/null
	dr_judge active active "$SOUT/report.json" $DR_SECRET
	after_recreate doctor-active $t1
	dr_node -o update -n node.session.auth.password -v "" > /dev/null 2>&1
	if [ "${LAB_INIT:-tiny}" = systemd ]; then
		systemctl start $UNIT
		check "service active again" sd_wait_active 60
	fi
}
