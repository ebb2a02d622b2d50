source /lab/guest/scenarios/sd-common.sh
# The package scripts/build-deb.sh built (on Debian 12), installed as an operator would:
# `apt install ./iser-guard_….deb`, which resolves its Depends against what the host has (the
# guest has no network: every dependency must already be there, as on a host with rdma-core
# and open-iscsi). The transcript (apt-install.txt: the package's Depends, apt's simulation,
# the install, the RDMA libraries installed) is kept: on Debian 13 and Ubuntu 24.04 librdmacm1
# is librdmacm1t64. Then: installed, enabled, started; the lab's configuration
# (devices.allow = ["rxe_ini"]) and a restart.
scenario_sd_install() {
	local deb=$(ls /lab/deb/1-*.deb | head -1) rc
	[ -n "$deb" ] || { lab_error "no .deb staged"; return; }
	cp "$deb" /tmp/ # apt reads a local package as the user _apt: not from the 9p share
	deb=/tmp/$(basename "$deb")
	{
		echo "# $(. /etc/os-release; echo "$PRETTY_NAME"), $(dpkg-query -W -f '${Package} ${Version}' apt)"
		echo "# Depends of $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
		echo "\$ apt-get install --simulate $deb"
		apt-get install --simulate "$deb" 2>&1
		echo "\$ apt-get install -y $deb"
	} > "$SOUT/apt-install.txt"
	DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" >> "$SOUT/apt-install.txt" 2>&1
	rc=$?
	{
		echo "# exit $rc"
		echo "# RDMA libraries on this host:"
		dpkg-query -W 'librdmacm*' 'libibverbs*' 2>&1
	} >> "$SOUT/apt-install.txt"
	figure apt_install_exit $rc
	check "apt install of the package exit 0 (dependencies resolved)" [ $rc = 0 ]
	check "unit enabled" [ "$(systemctl is-enabled $UNIT)" = enabled ]
	check "unit active after install" sd_wait_active 60
	write_config 0
	systemctl restart $UNIT
	check "unit active with the lab configuration" sd_wait_active 60
	systemctl show $UNIT > "$SOUT/unit-show.txt"
	systemd-analyze security $UNIT > "$SOUT/security.txt" 2>&1
	figure security_exposure "$(tail -1 "$SOUT/security.txt" | grep -o '[0-9]\+\.[0-9]\+ [A-Z]\+' | head -1 | tr ' ' '_')"
}
