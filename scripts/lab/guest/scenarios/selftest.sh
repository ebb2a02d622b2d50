source /lab/guest/scenarios/kfield-common.sh
source /lab/guest/scenarios/manual-common.sh
# `iser-guard selftest DEVICE[/PORT] --json` on the real kernel (issue 11): two RC QPs
# connected through rdma_cm on the port, then two QPs walked by hand RESET->INIT->RTR->RTS,
# reset and walked again, each step timed. Expected:
#  - selftest rxe_ini/1 passes (exit 0, "passed": true, every step ok), and rxe_tgt/1 too;
#  - a device that does not exist and a port that does not exist: exit 69, no report;
#  - `iser-guard reset-device rxe_ini --yes` (no daemon): one re-creation, GSI in RTS, the
#    session back; then selftest rxe_ini/1 passes on the new device;
#  - with rxe_ini's QP 1 in ERR inside the kernel (the lab's irdma-like rdma_rxe, a CM attempt
#    to a powered-off peer) selftest rxe_ini/1 fails (exit 1) at an rdma_cm step, within its
#    --timeout: the self-test sees what the field failure breaks; reset-device re-creates the
#    port and the self-test passes again.
# Figures: every step's time (ms) of each run, the total, the wall time of the command.

# st_run NAME TARGET [ARGS...]: selftest TARGET --json, output in $SOUT/NAME.json, rc in STRC,
# one figure per step (NAME_STEP_ms) and the total; the step table in $SOUT/NAME-steps.txt
st_run() {
	local name=$1 target=$2 t0=$(now)
	shift 2
	timeout 90 $IG selftest "$target" --json "$@" < /dev/null > "$SOUT/$name.json" 2> "$SOUT/$name.err"
	STRC=$?
	STDUR=$(elapsed $t0)
	log "  selftest $target $* -> exit $STRC in $STDUR s"
	figure "${name}_wall_s" "$STDUR"
	python3 - "$SOUT/$name.json" > "$SOUT/$name-steps.txt" 2>&1 <<'EOP'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no JSON report: %s" % e); sys.exit(0)
if "unavailable" in r:
    print("unavailable: %s" % r["unavailable"]); sys.exit(0)
for s in r.get("steps", []):
    us = s.get("took_us")
    if us is None:
        t = s.get("took", {})
        us = t.get("secs", 0) * 1e6 + t.get("nanos", 0) / 1e3
    print("STEP %s %.3f %s %s" % (s["name"], us / 1000.0, "ok" if s.get("ok") else "FAIL", s.get("detail", "")))
print("PASSED %s" % r.get("passed"))
print("TOTAL %.3f" % (r.get("total_us", 0) / 1000.0))
EOP
	local st ms ok rest
	while read -r st n ms ok rest; do
		[ "$st" = STEP ] && figure "${name}_${n}_ms" "$ms"
	done < "$SOUT/$name-steps.txt"
	figure "${name}_total_ms" "$(awk '$1=="TOTAL"{print $2}' "$SOUT/$name-steps.txt")"
	sed 's/^/    /' "$SOUT/$name-steps.txt"
}
st_passed() { [ "$STRC" = 0 ] && grep -qx 'PASSED True' "$SOUT/$1-steps.txt" && ! grep -q '^STEP .* FAIL ' "$SOUT/$1-steps.txt"; }

scenario_selftest() {
	if ! $IG selftest --help > "$SOUT/selftest-help.txt" 2>&1; then
		lab_error "this binary has no selftest command ($(head -1 "$SOUT/selftest-help.txt"))"
		return
	fi
	st_run ini rxe_ini/1
	check "selftest rxe_ini/1 passes (exit $STRC)" st_passed ini
	st_run tgt rxe_tgt/1
	check "selftest rxe_tgt/1 passes (exit $STRC)" st_passed tgt
	st_run nodev nosuch_dev/1
	check "selftest of a device that does not exist exits 69 (got $STRC)" [ "$STRC" = 69 ]
	st_run noport rxe_ini/2
	check "selftest of a port that does not exist exits 69 (got $STRC)" [ "$STRC" = 69 ]

	local t0=$(now)
	mrun reset-device $IG reset-device $INI_RXE --yes
	figure reset_device_s $MDUR
	check "reset-device --yes exit 0 (got $MRC)" [ $MRC = 0 ]
	after_recreate reset-device $t0
	st_run after_reset rxe_ini/1
	check "selftest rxe_ini/1 passes after the re-creation (exit $STRC)" st_passed after_reset

	# QP 1 stuck in ERR inside the kernel (the lab's irdma-like rdma_rxe, peer_trip in
	# kfield-common.sh: a CM attempt to a powered-off peer), the iSER session still up: the
	# self-test must fail at an rdma_cm step, within its --timeout, and pass again once the
	# device is re-created.
	if kmod_model_on; then
		peer_trip 60
		if [ -n "$T_TRIP" ]; then
			st_run stuck rxe_ini/1 --timeout 10
			check "with QP 1 in ERR selftest rxe_ini/1 fails with exit 1 (got $STRC)" [ "$STRC" = 1 ]
			check "with QP 1 in ERR the failing step is an rdma_cm one ($(grep -m1 ' FAIL ' "$SOUT/stuck-steps.txt" | cut -c1-120))" \
				grep -q '^STEP cm-[a-z-]* [0-9.]* FAIL ' "$SOUT/stuck-steps.txt"
			local t2=$(now)
			mrun reset-device-stuck $IG reset-device $INI_RXE --yes
			check "reset-device --yes on the stuck port exit 0 (got $MRC)" [ $MRC = 0 ]
			after_recreate reset-device-stuck $t2
			st_run after_stuck rxe_ini/1
			check "selftest rxe_ini/1 passes after the stuck port's re-creation (exit $STRC)" st_passed after_stuck
		else
			lab_error "rxe_ini's QP 1 did not go to ERR after a CM attempt to a powered-off peer"
		fi
	else
		lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"
	fi
	check "the iSER session untouched by the self-tests: LOGGED_IN" session_logged_in
	check "the iSER session untouched by the self-tests: direct I/O" direct_io_check
}
