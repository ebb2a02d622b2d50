source /lab/guest/scenarios/sd-common.sh
# What the hardened service may write, measured inside its own mount namespace (nsenter into
# the main process's namespace, then a create-and-remove probe in each directory). Compared
# with what README.md and the unit say: only these are writable; the rest of /run, /run/lock
# and /etc (its own configuration directory included) are read-only.
scenario_sd_write_access() {
	sd_wait_active 10 || { lab_error "service not active"; return; }
	local pid=$(sd_pid) d
	mkdir -p /etc/iscsi /var/lib/iscsi /run/lock/iscsi /var/lib/prometheus/node-exporter
	systemctl restart $UNIT
	sd_wait_active 60 || { lab_error "service not active after restart"; return; }
	pid=$(sd_pid)
	writable() { nsenter -t $pid -m sh -c "f=\$1/.lab-w-\$\$; : > \$f 2>/dev/null && rm -f \$f" sh "$1"; }
	for d in /var/lib/iser-guard /run/iser-guard /etc/iscsi /var/lib/iscsi /run/lock/iscsi \
		/var/lib/prometheus/node-exporter /tmp /var/tmp; do
		check "writable in the unit: $d" writable $d
	done
	for d in /run /run/lock /run/systemd /etc /etc/iser-guard /usr /var/lib /var/log /root /home; do
		check "read-only in the unit: $d" not writable $d
	done
	nsenter -t $pid -m findmnt -no TARGET,OPTIONS -R / > "$SOUT/mounts-in-unit.txt" 2>&1
	systemctl show $UNIT -p ReadWritePaths -p ProtectSystem -p PrivateTmp > "$SOUT/unit-paths.txt"
}
