source /lab/guest/scenarios/sd-common.sh
# Upgrade: dpkg -i of the same package with a higher version; then the same file again.
# The service restarts once on the new files; nothing destructive follows; config kept.
scenario_sd_upgrade() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local deb=/lab/deb/2-upgrade.deb t0=$(now) pid0=$(sd_pid) sid0=$(session_sid)
	[ -f $deb ] || { lab_error "no upgrade .deb staged"; return; }
	cp $CONF "$SOUT/config-before.toml"
	dpkg -i $deb > "$SOUT/dpkg-upgrade.txt" 2>&1
	check "dpkg -i (upgrade) exit 0" [ $? = 0 ]
	check "new version installed ($(dpkg-query -W -f '${Version}' iser-guard))" bash -c "dpkg-query -W -f '\${Version}' iser-guard | grep -q lab1"
	check "active after the upgrade" sd_wait_active 60
	check "restarted on the new files" [ "$(sd_pid)" != "$pid0" ]
	check "configuration kept" cmp -s $CONF "$SOUT/config-before.toml"
	dpkg -i $deb > "$SOUT/dpkg-again.txt" 2>&1
	check "dpkg -i the same package again exit 0" [ $? = 0 ]
	check "active after the reinstall" sd_wait_active 60
	sleep 8 # the daemon would act within 2 s of its first scan
	check "no re-creation across the upgrade" [ "$(recreations_since $t0)" = 0 ]
	check "session untouched (sid $sid0 -> $(session_sid))" [ "$(session_sid)" = "$sid0" ]
	sd_journal_since $t0 > "$SOUT/journal.txt"
}
