source /lab/guest/scenarios/kfield-common.sh
# A re-creation that hangs in the kernel (issue 22, item 1). The field incident inside the
# kernel (the lab's rdma_rxe, as field-incident-kernel), and a program holding a verbs context
# on rxe_ini (rdma-core's ibv_asyncwatch) from before the target returns: the daemon's
# `rdma link delete rxe_ini` then blocks in the kernel (ib_uverbs_remove_one waits for every
# user context of a driver that cannot disassociate them; docs/lab.md, verbs-device-hold) for
# longer than the resetter's step deadline (30 s) and its kill grace. The holder is closed
# HANG_HOLD_S (default 60) seconds after the delete started.
# Judged:
#   - the daemon answers `status` on its control socket within 1 s throughout (polled every
#     second from before the target returns until the port is healthy again);
#   - it reports "re-creation of rxe_ini has been blocked in the kernel for N s" with the
#     blocked task's state and kernel stack, and the port goes to RecreationBlocked;
#   - no second writer: exactly one `rdma link delete` is ever started on rxe_ini while it
#     is blocked, and an operator `recover rxe_ini/1` meanwhile is refused (exit 75);
#   - once the holder is closed the step returns, and the daemon resumes: exactly one
#     re-creation, QP 1 in RTS, the session LOGGED_IN, direct I/O works.
scenario_recreate_hang() {
	kmod_model_on || { lab_error "the lab's irdma-like rdma_rxe is not loaded for $INI_RXE"; return; }
	command -v ibv_asyncwatch > /dev/null || { lab_error "ibv_asyncwatch (rdma-core's tests) is not in the image"; return; }
	local hold=${HANG_HOLD_S:-60}
	write_config 0
	daemon_start || { fail "daemon did not start"; return; }
	kfield_watch_start
	kfield_outage 120
	[ -n "$T_ERR" ] || { lab_error "rxe_ini's QP 1 did not go to ERR within 120 s of the target going away"; kfield_watch_stop; return; }
	# the holder, opened before the re-creation can start (the target is still away)
	ibv_asyncwatch -d $INI_RXE > "$SOUT/asyncwatch.txt" 2>&1 &
	local aw=$!
	sleep 2
	kill -0 $aw 2>/dev/null || { lab_error "ibv_asyncwatch -d rxe_ini did not start: $(head -3 "$SOUT/asyncwatch.txt")"; kfield_watch_stop; return; }
	# status over the control socket every second, each round trip timed inside python (its
	# start-up under TCG is not the daemon's latency): "<epoch> <ms> ok|error <detail>"
	python3 - $SOCK "$SOUT/status-latency.log" <<'PY' &
import json, socket, sys, time
path, out = sys.argv[1], sys.argv[2]
with open(out, "a", buffering=1) as f:
    while True:
        t0 = time.monotonic()
        ok, detail = "error", ""
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(path)
            s.sendall(b'{"cmd":"status"}\n')
            buf = b""
            while b'"type":"done"' not in buf:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
            s.close()
            ok = "ok" if b'"ok":true' in buf else "error"
        except Exception as e:
            detail = str(e).replace(" ", "_")
        f.write("%.3f %d %s %s\n" % (time.time(), (time.monotonic() - t0) * 1000, ok, detail))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
PY
	local poller=$!
	sleep ${KFIELD_AWAY_S:-10}
	T_UP=$(now)
	target_on
	log "  target back (QP 1 $(gsi_state $INI_RXE)); ibv_asyncwatch holds a context on $INI_RXE"
	# the daemon's delete starts once the target answered (3 probes); it must block
	local end=$(deadline 90) t_del= delpid=
	while before $end; do
		delpid=$(pgrep -n -f "rdma link delete $INI_RXE")
		[ -n "$delpid" ] && { t_del=$(now); break; }
		sleep 0.2
	done
	if [ -z "$t_del" ]; then
		fail "the daemon never ran rdma link delete $INI_RXE after the target returned"
		kill $aw $poller 2>/dev/null; kfield_watch_stop; return
	fi
	figure delete_started_after_target_back_s $(elapsed $T_UP $t_del)
	# blocked in the kernel: its state and wait channel, as the daemon will read them
	sleep 3
	log "  rdma link delete (pid $delpid): state $(awk '{print $3}' /proc/$delpid/stat 2>/dev/null), wchan $(cat /proc/$delpid/wchan 2>/dev/null)"
	end=$(deadline $((hold + 10)))
	local t_rep=
	while before $end; do
		grep -q "re-creation of $INI_RXE has been blocked in the kernel for" "$SOUT/daemon.log" && { t_rep=$(now); break; }
		sleep 0.5
	done
	check "the daemon reported the blocked re-creation" [ -n "$t_rep" ]
	[ -n "$t_rep" ] && figure blocked_reported_after_delete_s $(elapsed $t_del $t_rep)
	check "the port went to RecreationBlocked" grep -q "port=$INI_RXE/1 .*to=RecreationBlocked" "$SOUT/daemon.log"
	check "the report names the task's state" grep -q "uninterruptible sleep" "$SOUT/daemon.log"
	check "the report names the kernel stack (ib_uverbs_remove_one)" grep -q "ib_uverbs_remove_one" "$SOUT/daemon.log"
	# an operator's recover meanwhile would be a second writer: refused
	$IG recover $INI_RXE/1 --yes > "$SOUT/recover-blocked.txt" 2>&1
	local rc=$?
	check "recover rxe_ini while blocked: refused with exit 75 (got $rc)" [ $rc = 75 ]
	# hold until HANG_HOLD_S after the delete started, then let go
	python3 -c "import time; time.sleep(max(0.0, $t_del + $hold - time.time()))"
	local deletes=$(pgrep -c -f "rdma link delete $INI_RXE")
	check "one rdma link delete on rxe_ini while it is blocked (got $deletes)" [ "$deletes" = 1 ]
	local t_rel=$(now)
	kill $aw 2>/dev/null
	wait $aw 2>/dev/null
	log "  holder closed $(elapsed $t_del $t_rel) s after the delete started"
	end=$(deadline 120)
	local t_ok=
	while before $end; do
		if grep -q "port=$INI_RXE/1 .*to=Healthy" <(sed -n "/to=RecreationBlocked/,\$p" "$SOUT/daemon.log") &&
			session_logged_in; then
			t_ok=$(now)
			break
		fi
		sleep 0.5
	done
	check "healthy again after the holder closed" [ -n "$t_ok" ]
	[ -n "$t_ok" ] && figure healthy_after_holder_closed_s $(elapsed $t_rel $t_ok)
	check "the daemon said the re-creation is no longer blocked" grep -q "re-creation of $INI_RXE is no longer blocked" "$SOUT/daemon.log"
	sleep 10 # a second re-creation would show here
	kill $poller 2>/dev/null
	local n=$(recreations_since $T_UP)
	check "exactly one re-creation after the target answered (got $n)" [ "$n" = 1 ]
	check "rxe_ini's new QP 1 in RTS" gsi_rts $INI_RXE
	check "session LOGGED_IN" session_logged_in
	check "direct-I/O write and read" direct_io_check
	check "daemon still running" daemon_alive
	# the daemon's answers throughout
	local worst=$(awk 'BEGIN{m=0} {if($2>m)m=$2} END{print m}' "$SOUT/status-latency.log")
	local polls=$(wc -l < "$SOUT/status-latency.log") errors=$(grep -vc ' ok ' "$SOUT/status-latency.log")
	figure status_polls $polls
	figure status_worst_ms $worst
	check "status answered every time ($errors of $polls failed)" [ "$errors" = 0 ]
	check "status answered within 1 s throughout (worst $worst ms)" [ "$worst" -lt 1000 ]
	kfield_watch_stop
	cp $CONF "$SOUT/config.toml"
}
