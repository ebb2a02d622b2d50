source /lab/guest/scenarios/sd-common.sh
# dpkg -i the package scripts/build-deb.sh built: installed, enabled, started; then the lab's
# configuration (devices.allow = ["rxe_ini"]) and a restart.
scenario_sd_install() {
	local deb=$(ls /lab/deb/1-*.deb | head -1)
	[ -n "$deb" ] || { lab_error "no .deb staged"; return; }
	dpkg -i "$deb" > "$SOUT/dpkg-i.txt" 2>&1
	check "dpkg -i exit 0" [ $? = 0 ]
	check "unit enabled" [ "$(systemctl is-enabled $UNIT)" = enabled ]
	check "unit active after install" sd_wait_active 60
	write_config 0
	systemctl restart $UNIT
	check "unit active with the lab configuration" sd_wait_active 60
	systemctl show $UNIT > "$SOUT/unit-show.txt"
	systemd-analyze security $UNIT > "$SOUT/security.txt" 2>&1
	figure security_exposure "$(tail -1 "$SOUT/security.txt" | grep -o '[0-9]\+\.[0-9]\+ [A-Z]\+' | head -1 | tr ' ' '_')"
}
