# NVMe over RDMA in the lab: the kernel's own target (nvmet, nvmet-rdma) on rxe_tgt, the
# kernel's host (nvme-rdma) on rxe_ini through nvme-cli, beside the iSER session, so that one
# RDMA device carries two consumers. Sourced by the scenarios that use it (after lib.sh); no
# other scenario sees an NVMe controller. The target is configured through configfs directly
# (nvmetcli is not in the image): a 64 MiB file-backed namespace, any host allowed.
NVME_NQN=nqn.2014-08.org.example.lab:nvme0
NVME_PORT=4420
NVME_BACKING=/var/tmp/lab-nvme0.img
NVMET=/sys/kernel/config/nvmet

# nvmet_setup: the subsystem, its namespace and an RDMA port on $TGT_IP:$NVME_PORT (idempotent)
nvmet_setup() {
	modprobe nvmet || return 1
	modprobe nvmet-rdma || return 1
	local s=$NVMET/subsystems/$NVME_NQN p=$NVMET/ports/1
	if [ ! -d $s ]; then
		truncate -s 64M $NVME_BACKING
		mkdir $s && echo 1 > $s/attr_allow_any_host
		mkdir $s/namespaces/1
		echo -n $NVME_BACKING > $s/namespaces/1/device_path
		echo 1 > $s/namespaces/1/enable
	fi
	if [ ! -d $p ]; then
		mkdir $p
		echo rdma > $p/addr_trtype
		echo ipv4 > $p/addr_adrfam
		echo $TGT_IP > $p/addr_traddr
		echo $NVME_PORT > $p/addr_trsvcid
		ln -s $s $p/subsystems/$NVME_NQN
	fi
}

# nvme_connect: the host's controller to the lab's subsystem over rxe_ini (short kato and
# reconnect delay: the field's defaults are 5 s and 10 s, a lab incident lasts a minute)
nvme_connect() {
	modprobe nvme-rdma || return 1
	nvme connect --transport=rdma --traddr=$TGT_IP --trsvcid=$NVME_PORT --nqn=$NVME_NQN \
		--host-traddr=$INI_IP --keep-alive-tmo=5 --reconnect-delay=2 --ctrl-loss-tmo=600 \
		> "$SOUT/nvme-connect.txt" 2>&1 || return 1
	local i
	for i in $(seq 1 40); do nvme_disk > /dev/null && return 0; sleep 0.25; done
	return 1
}

# nvme_ctrl: the controller (nvmeN) connected to $NVME_NQN over RDMA, or nothing
nvme_ctrl() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] || continue
		[ "$(cat $c/subsysnqn)" = $NVME_NQN ] && [ "$(cat $c/transport)" = rdma ] && { basename $c; return 0; }
	done
	return 1
}
# nvme_state: that controller's state (live, connecting, resetting, deleting...), or none
nvme_state() {
	local c
	c=$(nvme_ctrl) || { echo none; return; }
	cat /sys/class/nvme/$c/state 2>/dev/null || echo none
}
# nvme_disk: the block device (/dev/nvmeXnY) of the lab's namespace, or nothing. With native
# NVMe multipath (Debian's default) the controller's child nvmeXcYnZ is a hidden path node with
# no /dev entry; the block device is the subsystem's head nvmeXnZ. Only a real block device
# counts: a dd to a missing /dev path would write a regular file and "succeed".
nvme_disk() {
	local c s n
	c=$(nvme_ctrl) || return 1
	for s in /sys/class/nvme-subsystem/*; do
		[ "$(cat $s/subsysnqn 2>/dev/null)" = $NVME_NQN ] || continue
		[ -e $s/$c ] || continue
		for n in $s/nvme*n*; do
			[ -e "$n" ] || continue
			[ -b /dev/$(basename $n) ] && { echo /dev/$(basename $n); return 0; }
		done
	done
	for n in /sys/class/nvme/$c/nvme*n*; do
		[ -e "$n" ] || continue
		[ -b /dev/$(basename $n) ] && { echo /dev/$(basename $n); return 0; }
	done
	return 1
}
nvme_has_disk() { nvme_disk > /dev/null; }
# nvme_io_check: one bounded direct-I/O write and read on the namespace
nvme_io_check() {
	local dev
	dev=$(nvme_disk) || return 1
	[ -b "$dev" ] || return 1
	(dd if=/dev/urandom of=$dev bs=4k count=32 oflag=direct conv=fsync status=none &&
		dd if=$dev of=/dev/null bs=4k count=32 iflag=direct status=none && echo ok) > /tmp/nvme-dio.out 2>&1 &
	local p=$! i
	for i in $(seq 1 40); do kill -0 $p 2>/dev/null || break; sleep 0.25; done
	grep -qx ok /tmp/nvme-dio.out
}
# nvme_teardown: the host's controllers and the target's port gone (the next scenario's
# baseline has no NVMe consumer on rxe_ini)
nvme_teardown() {
	nvme disconnect --nqn=$NVME_NQN > /dev/null 2>&1
	rm -f $NVMET/ports/1/subsystems/$NVME_NQN 2>/dev/null
	rmdir $NVMET/ports/1 2>/dev/null
	true
}
