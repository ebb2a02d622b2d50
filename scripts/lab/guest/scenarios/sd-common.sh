# systemd guest helpers: the daemon is the .deb's iser-guard.service under its real hardening.
UNIT=iser-guard.service
sd_active() { [ "$(systemctl is-active $UNIT)" = active ]; }
sd_wait_active() {
	local i
	for i in $(seq 1 ${1:-60}); do sd_active && return 0; sleep 0.5; done
	return 1
}
sd_pid() { systemctl show -p MainPID --value $UNIT; }
sd_journal_since() { journalctl -u $UNIT --no-pager -o short-monotonic --since "@${1%.*}"; }
