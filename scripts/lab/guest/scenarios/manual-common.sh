# Every manual command (status, qps, recover, reset-device, reconnect, pause, resume), run as an
# operator would, with their exit codes and their effect on the kernel's state.
# mrun NAME CMD...: runs with a 180 s bound, output in $SOUT/NAME.txt, sets MRC and MDUR
mrun() {
	local name=$1 t0=$(now)
	shift
	timeout 180 "$@" < /dev/null > "$SOUT/$name.txt" 2>&1
	MRC=$?
	MDUR=$(elapsed $t0)
	log "  $* -> exit $MRC in $MDUR s"
}
# after_recreate NAME T0: exactly one re-creation since T0, GSI RTS, session back, I/O
after_recreate() {
	local n i
	for i in $(seq 1 60); do session_logged_in && break; sleep 0.5; done
	n=$(recreations_since $2)
	check "$1: rxe_ini re-created exactly once (got $n)" [ "$n" = 1 ]
	check "$1: GSI QP in RTS" gsi_rts $INI_RXE
	check "$1: session LOGGED_IN" session_logged_in
	check "$1: direct I/O" direct_io_check
}
manual_suite() {
	local mode=$1 t0 sid0
	mrun status $IG status
	check "status exit 0 (got $MRC)" [ $MRC = 0 ]
	check "status names rxe_ini" grep -q $INI_RXE "$SOUT/status.txt"
	mrun qps $IG qps
	check "qps exit 0 (got $MRC)" [ $MRC = 0 ]
	check "qps lists rxe_ini's GSI QP" grep -q "link $INI_RXE/1 lqpn 1 type GSI" "$SOUT/qps.txt"
	mrun pause $IG pause
	if [ $mode = standalone ]; then
		check "pause without a daemon exits 69 (got $MRC)" [ $MRC = 69 ]
	else
		check "pause exits 0 (got $MRC)" [ $MRC = 0 ]
	fi
	mrun resume $IG resume
	if [ $mode = standalone ]; then
		check "resume without a daemon exits 69 (got $MRC)" [ $MRC = 69 ]
	else
		check "resume exits 0 (got $MRC)" [ $MRC = 0 ]
	fi
	t0=$(now)
	mrun reset-device-dry $IG reset-device $INI_RXE --dry-run
	check "reset-device --dry-run exit 0 (got $MRC)" [ $MRC = 0 ]
	check "reset-device --dry-run re-creates nothing" [ "$(recreations_since $t0)" = 0 ]
	mrun reset-device-noyes $IG reset-device $INI_RXE
	check "reset-device without --yes and no terminal exits 64 (got $MRC)" [ $MRC = 64 ]
	sid0=$(session_sid)
	mrun reconnect $IG reconnect --yes
	figure reconnect_s $MDUR
	check "reconnect --yes exit 0 (got $MRC)" [ $MRC = 0 ]
	sleep 1
	check "reconnect made a new session (sid $sid0 -> $(session_sid))" [ "$(session_sid)" != "$sid0" ]
	check "reconnect: session LOGGED_IN" session_logged_in
	check "reconnect: direct I/O" direct_io_check
	t0=$(now)
	mrun reset-device $IG reset-device $INI_RXE --yes
	figure reset_device_s $MDUR
	check "reset-device --yes exit 0 (got $MRC)" [ $MRC = 0 ]
	after_recreate reset-device $t0
	t0=$(now)
	mrun recover $IG recover $INI_RXE/1 --yes
	figure recover_s $MDUR
	check "recover --yes exit 0 (got $MRC)" [ $MRC = 0 ]
	after_recreate recover $t0
	check "recover probed the portal as its plan says" grep -qi 'probe' "$SOUT/recover.txt"
}
