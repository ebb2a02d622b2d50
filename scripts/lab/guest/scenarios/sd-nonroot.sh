source /lab/guest/scenarios/sd-common.sh
# An unprivileged caller of the operator commands, with the packaged service running: the
# config file (0640 root) and the control socket (0600 root) are closed to it, and the
# documented exit code is 77 (permission denied), never 78 (configuration error).
scenario_sd_nonroot() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local rc cmd
	for cmd in pause resume reload; do
		setpriv --reuid=65534 --regid=65534 --clear-groups $IG $cmd > "$SOUT/$cmd-nobody.txt" 2>&1
		rc=$?
		figure ${cmd}_nonroot_rc $rc
		check "non-root '$cmd' exits 77 (got $rc)" [ $rc = 77 ]
	done
	check "the refusal says why" grep -qi 'permission denied' "$SOUT/pause-nobody.txt"
	python3 /lab/guest/ctl.py $SOCK '{"cmd":"status"}' > "$SOUT/daemon-status.txt" 2>&1
	check "the daemon answers status" grep -q '"paused"' "$SOUT/daemon-status.txt"
	check "automatic actions not paused by the refused call" not grep -q '"paused": *true' "$SOUT/daemon-status.txt"
	check "service still active" sd_active
}
