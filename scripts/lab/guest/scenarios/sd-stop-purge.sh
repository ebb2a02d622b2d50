source /lab/guest/scenarios/sd-common.sh
scenario_sd_stop_purge() {
	local t0=$(now)
	systemctl stop $UNIT
	check "systemctl stop exit 0" [ $? = 0 ]
	check "inactive after stop ($(systemctl is-active $UNIT))" [ "$(systemctl is-active $UNIT)" = inactive ]
	check "clean exit status ($(systemctl show -p ExecMainStatus --value $UNIT))" [ "$(systemctl show -p ExecMainStatus --value $UNIT)" = 0 ]
	dpkg --purge iser-guard > "$SOUT/purge.txt" 2>&1
	check "dpkg --purge exit 0" [ $? = 0 ]
	check "state directory removed" [ ! -e /var/lib/iser-guard ]
	check "configuration removed" [ ! -e /etc/iser-guard/config.toml ]
	check "unit removed" not test -e /usr/lib/systemd/system/iser-guard.service -o -e /lib/systemd/system/iser-guard.service
	check "session untouched by stop and purge" session_logged_in
	sd_journal_since $t0 > "$SOUT/journal.txt"
}
