# dm-multipath in the lab: the target's LUN reached over two paths, the iSER session on rxe_ini
# and a second session over TCP (iface default) to the same portal, both disks of one map built
# by multipathd. Sourced by the scenarios that use it (after lib.sh). The tiny guest runs no
# udev; multipathd needs its database for the paths' WWIDs, so systemd-udevd runs while a
# scenario of this file does. Only this scenario's guest ever has a map.
MPATH_CONF=/etc/multipath.conf

# mpath_setup: udevd, the TCP session beside the iSER one, multipathd and the map (idempotent)
mpath_setup() {
	pgrep -x systemd-udevd > /dev/null || /lib/systemd/systemd-udevd --daemon || return 1
	udevadm trigger --action=add --subsystem-match=block > /dev/null 2>&1
	udevadm settle -t 10
	cat > $MPATH_CONF <<'CONF'
defaults {
	user_friendly_names yes
	find_multipaths no
	polling_interval 2
}
blacklist {
	devnode "^(vd|nvme|loop|ram|zram)"
}
CONF
	iscsiadm -m node -o new -T $IQN -p $TGT_IP:$PORT -I default > /dev/null 2>&1
	timeout 60 iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -I default --login > /tmp/login-tcp.txt 2>&1 || return 1
	udevadm settle -t 10
	modprobe dm-multipath || return 1
	pgrep -x multipathd > /dev/null || multipathd || return 1
	local i
	for i in $(seq 1 40); do
		[ "$(mpath_paths | wc -l)" = 2 ] && return 0
		multipathd reconfigure > /dev/null 2>&1
		sleep 0.5
	done
	return 1
}
# mpath_paths: "<dev> <dm state> <checker state>" for each path of a map
mpath_paths() {
	multipathd show paths raw format "%d %m %t %T" 2>/dev/null | awk '$2 != "[orphan]" && NF >= 4 {print $1, $3, $4}'
}
# mpath_map: the map's /dev/mapper path, or nothing
mpath_map() {
	local m
	m=$(multipathd show maps raw format "%n" 2>/dev/null | head -1)
	[ -n "$m" ] && [ -b /dev/mapper/$m ] && echo /dev/mapper/$m
}
mpath_active() { [ "$(mpath_paths | awk '$2 == "active"' | wc -l)" = 2 ]; }
# mpath_io_check: one bounded direct-I/O write and read through the map
mpath_io_check() {
	local dev
	dev=$(mpath_map) || return 1
	(dd if=/dev/urandom of=$dev bs=4k count=32 oflag=direct conv=fsync status=none &&
		dd if=$dev of=/dev/null bs=4k count=32 iflag=direct status=none && echo ok) > /tmp/mpath-dio.out 2>&1 &
	local p=$! i
	for i in $(seq 1 40); do kill -0 $p 2>/dev/null || break; sleep 0.25; done
	grep -qx ok /tmp/mpath-dio.out
}
# mpath_teardown: the map, multipathd, the TCP session and its node record gone
mpath_teardown() {
	multipath -F > /dev/null 2>&1
	multipathd shutdown > /dev/null 2>&1
	timeout 30 iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -I default -u > /dev/null 2>&1
	iscsiadm -m node -T $IQN -p $TGT_IP:$PORT -I default -o delete > /dev/null 2>&1
	rm -f $MPATH_CONF
	true
}
