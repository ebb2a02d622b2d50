source /lab/guest/scenarios/sd-common.sh
# Late modules under the service's sandbox: ib_uverbs and rdma_ucm load after iser-guard.service
# started. systemd resolved DeviceAllow=char-infiniband_verbs and /dev/infiniband/rdma_cm at the
# start, when neither existed, so the device cgroup denies them (EPERM) until a restart. Then a
# recovery that needs the self-test: `reset-device rxe_ini` through the service (the port is
# self-tested in Verifying, recovery.selftest = "auto").
#
# How the modules are made late: lab_up loaded them (rxe_setup) before the .deb's service first
# started, and the unit pulls in and starts after rdma-core's rdma-load-modules@rdma.service,
# which would load them again at the service's start. So: the service is stopped, that unit is
# masked for this scenario only (--runtime: gone at the next boot, unmasked at the end), the two
# modules are unloaded (ib_uverbs stays when rdma_rxe depends on it: the figure late_modules
# says which were late; one is enough for the lockout), the service starts, then they load.
#
# Judged: the daemon says in its journal, in one alert and in status (source verbs-devices)
# that the verbs devices are locked out by its sandbox, with the restart that fixes it; the
# self-test in the recovery is "unavailable" with the same words (not a verdict on the port),
# never a failed attempt; exactly one re-creation; the session back; no quarantine. After
# `systemctl restart iser-guard`, status shows verbs-devices ok and no new lockout alert.
scenario_late_modules() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local t0=$(now) m late= i
	systemctl stop $UNIT
	systemctl mask --runtime rdma-load-modules@rdma.service > /dev/null 2>&1
	for m in rdma_ucm ib_uverbs; do
		modprobe -r $m 2> "$SOUT/modprobe-r-$m.txt" && late="$late $m"
	done
	lsmod > "$SOUT/lsmod-before-start.txt"
	figure late_modules "$(echo $late | tr ' ' ',')"
	if [ -z "$late" ]; then
		lab_error "neither rdma_ucm nor ib_uverbs could be unloaded: $(cat "$SOUT"/modprobe-r-*.txt | tr '\n' ' ')"
		systemctl unmask --runtime rdma-load-modules@rdma.service > /dev/null 2>&1
		modprobe ib_uverbs; modprobe rdma_ucm
		systemctl start $UNIT
		return
	fi
	systemctl start $UNIT
	sd_wait_active 60 || { lab_error "service did not start with the modules unloaded"; }
	local t_load=$(now)
	modprobe ib_uverbs
	modprobe rdma_ucm
	for i in $(seq 1 40); do
		[ -e /dev/infiniband/rdma_cm ] && ls /dev/infiniband/uverbs* > /dev/null 2>&1 && break
		sleep 0.25
	done
	ls -l /dev/infiniband > "$SOUT/dev-infiniband.txt" 2>&1
	# the daemon sees the new devices at its next session poll (poll.iscsi, 10 s)
	local seen=
	for i in $(seq 1 60); do
		sd_journal_since $t_load > "$SOUT/journal.txt"
		grep -q "locked out by the service's sandbox" "$SOUT/journal.txt" && { seen=$(now); break; }
		sleep 0.5
	done
	check "the daemon said the verbs devices are locked out by its sandbox" [ -n "$seen" ]
	[ -n "$seen" ] && figure lockout_said_after_load_s $(elapsed $t_load $seen)
	$IG status --json > "$SOUT/status-locked.json" 2>/dev/null
	local vstate=$(jq -r '.daemon.snapshot.daemon.sources[] | select(.name == "verbs-devices") | .state' "$SOUT/status-locked.json" 2>/dev/null)
	check "status: source verbs-devices failing (got ${vstate:-nothing})" [ "$vstate" = failing ]
	check "status names the restart that fixes it" \
		grep -q "systemctl restart iser-guard" "$SOUT/status-locked.json"
	# a recovery that needs the self-test
	local t1=$(now)
	timeout 240 $IG reset-device $INI_RXE --yes > "$SOUT/reset-device.txt" 2>&1
	local rc=$?
	check "reset-device --yes exit 0 (got $rc)" [ $rc = 0 ]
	for i in $(seq 1 60); do session_logged_in && break; sleep 0.5; done
	sleep 10 # a second re-creation (a failed self-test's retry) would show here
	check "rxe_ini re-created exactly once (got $(recreations_since $t1))" [ "$(recreations_since $t1)" = 1 ]
	check "session LOGGED_IN" session_logged_in
	check "direct I/O" direct_io_check
	sd_journal_since $t_load > "$SOUT/journal.txt"
	check "the self-test's verdict: unavailable, not a verdict on the port" \
		grep -q "not a verdict on $INI_RXE/1" "$SOUT/journal.txt"
	check "no failed self-test counted against the port" not grep -q "self-test of $INI_RXE/1 failed" "$SOUT/journal.txt"
	check "no quarantine" not grep -q "to=Quarantined" "$SOUT/journal.txt"
	local alerts=$(grep -c "ALERT the verbs devices are locked out by the service's sandbox" "$SOUT/journal.txt")
	check "one lockout alert (got $alerts)" [ "$alerts" = 1 ]
	$IG status --json > "$SOUT/status-after-reset.json" 2>/dev/null
	local st=$(jq -r --arg p "$INI_RXE/1" '.daemon.snapshot.ports[] | select(.port == $p) | .last_selftest.result' "$SOUT/status-after-reset.json" 2>/dev/null)
	check "status: the port's last self-test unavailable (got ${st:-nothing})" [ "$st" = unavailable ]
	# the fix the daemon named
	local t2=$(now)
	systemctl restart $UNIT
	check "active again after the restart" sd_wait_active 60
	sleep 2
	$IG status --json > "$SOUT/status-restarted.json" 2>/dev/null
	vstate=$(jq -r '.daemon.snapshot.daemon.sources[] | select(.name == "verbs-devices") | .state' "$SOUT/status-restarted.json" 2>/dev/null)
	check "after the restart: source verbs-devices ok (got ${vstate:-nothing})" [ "$vstate" = ok ]
	sd_journal_since $t2 > "$SOUT/journal-restarted.txt"
	check "no lockout after the restart" not grep -q "locked out by the service's sandbox" "$SOUT/journal-restarted.txt"
	$IG selftest $INI_RXE/1 --json > "$SOUT/selftest-after.json" 2>&1
	check "the self-test passes by hand" [ $? = 0 ]
	systemctl unmask --runtime rdma-load-modules@rdma.service > /dev/null 2>&1
	sd_journal_since $t0 > "$SOUT/journal-all.txt"
}
