source /lab/guest/scenarios/field-common.sh
# The same incident with the default trust (userspace kmsg records are untrusted): the injected
# lines must trigger nothing. No re-creation during the outage nor 25 s after; at most one
# coalesced alert about untrusted records (README: "one coalesced warning alert instead").
# The outage is 15 s here (three field lines, enough to coalesce): nothing may happen whatever
# its length, and the 25 s after it cover the daemon's three probes of the returned target.
scenario_field_default_trust() {
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	local a0=$(wc -l < "$OUT/alerts.log" 2>/dev/null || echo 0)
	field_run 15
	sleep 25
	check "no re-creation of rxe_ini (untrusted records trigger nothing)" [ "$(recreations_since $T_DOWN)" = 0 ]
	check "daemon still running" daemon_alive
	tail -n +$((a0 + 1)) "$OUT/alerts.log" > "$SOUT/alerts.log" 2>/dev/null
	local u=$(grep -ci 'untrusted\|userspace\|written by' "$SOUT/alerts.log")
	figure untrusted_alerts $u
	check "at most one coalesced alert about untrusted records (got $u)" [ "$u" -le 1 ]
}
