# Shared by the doctor and doctor-active scenarios (issue 24), in the tiny and the systemd
# guest. The reports are judged by guest/doctor_check.py, which prints "CHECK 1|0 what" and
# "FIGURE name value" lines; what the kernel shows meanwhile (devwatch, the QP table, the
# session, direct I/O) is checked here.
source /lab/guest/scenarios/sd-common.sh

# dr_have ARG...: the binary's `doctor --help` mentions every ARG (else a lab error: an older
# binary was staged)
dr_have() {
	$IG doctor --help > "$SOUT/doctor-help.txt" 2>&1 || {
		lab_error "this binary has no doctor command ($(head -1 "$SOUT/doctor-help.txt"))"
		return 1
	}
	local a
	for a in "$@"; do
		grep -q -- "$a" "$SOUT/doctor-help.txt" || { lab_error "this binary's doctor has no $a"; return 1; }
	done
}
# dr_judge NAME doctor_check.py-ARGS...: the judge's lines become checks and figures (NAME_...)
dr_judge() {
	local name=$1 kind a b
	shift
	python3 /lab/guest/doctor_check.py "$@" > "$SOUT/judge-$name.txt" 2>&1 ||
		fail "$name: doctor_check.py $1 failed: $(tail -1 "$SOUT/judge-$name.txt")"
	while read -r kind a b; do
		case $kind in
		CHECK) check "$name: $b" [ "$a" = 1 ] ;;
		FIGURE) figure "${name}_$a" "$b" ;;
		esac
	done < "$SOUT/judge-$name.txt"
}
# dr_audit NAME DAEMON(none|running) [text]: `doctor --json` (and, with text, `doctor`) as an
# operator runs them; judged, and the kernel's state unchanged by them
dr_audit() {
	local name=$1 t0=$(now) rc trc
	timeout 90 $IG doctor --json < /dev/null > "$SOUT/$name.json" 2> "$SOUT/$name.err"
	rc=$?
	figure "${name}_json_s" "$(elapsed $t0)"
	log "  doctor --json -> exit $rc"
	dr_judge $name audit "$SOUT/$name.json" $rc "$(uname -r)" "${LAB_INIT:-tiny}" $2 \
		"$(kmod_model_on && echo lab || echo stock)"
	check "$name: nothing on stderr (the report is the output)" not test -s "$SOUT/$name.err"
	if [ "${3:-}" = text ]; then
		NO_COLOR=1 timeout 90 $IG doctor < /dev/null > "$SOUT/$name.txt" 2>> "$SOUT/$name.err"
		trc=$?
		dr_judge $name-text text "$SOUT/$name.txt" $trc "$SOUT/$name.json"
	fi
	check "$name: nothing re-created (devwatch: $(recreations_since $t0))" [ "$(recreations_since $t0)" = 0 ]
	check "$name: GSI QP of rxe_ini still in RTS" gsi_rts $INI_RXE
	check "$name: session still LOGGED_IN" session_logged_in
}
# the daemon of this guest: the lab's own (tiny) or the package's service (systemd)
dr_daemon_up() {
	if [ "${LAB_INIT:-tiny}" = systemd ]; then
		systemctl start $UNIT
		sd_wait_active 60
	else
		daemon_start
	fi
}
dr_daemon_down() {
	if [ "${LAB_INIT:-tiny}" = systemd ]; then
		systemctl stop $UNIT
		! sd_active
	else
		daemon_stop
		! daemon_alive
	fi
}
