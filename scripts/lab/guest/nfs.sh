# NFS over RDMA in the lab: the kernel's NFS server (nfsd) with an RDMA listener on rxe_tgt's
# address, and the kernel's client (nfs, rpcrdma/xprtrdma) mounting it over rxe_ini, beside the
# iSER session, so that one RDMA device carries NFS as a third consumer. Sourced by the
# scenarios that use it (after lib.sh); no other scenario sees an NFS mount. The export is a
# tmpfs directory; the mount is NFSv4.2 over RDMA on port 20049 (the IANA port of NFS/RDMA).
NFS_EXPORT=/srv/lab-nfs
NFS_MNT=/mnt/lab-nfs
NFS_RDMA_PORT=20049

# nfsd_setup: the export and nfsd's rdma listener on port 20049 (idempotent)
nfsd_setup() {
	modprobe nfsd || return 1
	modprobe rpcrdma || return 1
	mkdir -p $NFS_EXPORT /etc/exports.d
	mountpoint -q $NFS_EXPORT || mount -t tmpfs -o size=64m lab-nfs $NFS_EXPORT || return 1
	echo "$NFS_EXPORT $INI_IP(rw,no_root_squash,fsid=77,insecure)" > /etc/exports.d/lab.exports
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
	pgrep -x rpcbind > /dev/null || rpcbind || return 1
	pgrep -x rpc.mountd > /dev/null || rpc.mountd || return 1
	exportfs -ra || return 1
	[ "$(cat /proc/fs/nfsd/threads)" -gt 0 ] 2>/dev/null || rpc.nfsd 4 || return 1
	nfsd_listen
}
# nfsd_listen: the rdma listener (again after the target's device was re-created: svcrdma
# closes the listeners of a removed device)
nfsd_listen() {
	grep -q "^rdma $NFS_RDMA_PORT" /proc/fs/nfsd/portlist 2>/dev/null ||
		echo "rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist
}
# nfs_mount: the client's mount over rxe_ini (hard, the default: an operator's mount)
nfs_mount() {
	mkdir -p $NFS_MNT
	mount -t nfs -o vers=4.2,proto=rdma,port=$NFS_RDMA_PORT,clientaddr=$INI_IP \
		$TGT_IP:$NFS_EXPORT $NFS_MNT > "$SOUT/nfs-mount.txt" 2>&1 || return 1
	grep -q " $NFS_MNT nfs4 .*proto=rdma" /proc/self/mounts
}
# nfs_io_check: one bounded write, fsync and read back through the mount (a stuck mount
# leaves the child in D state; the check gives up after 10 s and says no)
nfs_io_check() {
	rm -f /tmp/nfs-io.out
	(dd if=/dev/urandom of=$NFS_MNT/probe bs=4k count=16 conv=fsync status=none &&
		cmp <(head -c 65536 $NFS_MNT/probe) $NFS_MNT/probe && echo ok) > /tmp/nfs-io.out 2>&1 &
	local p=$! i
	for i in $(seq 1 40); do kill -0 $p 2>/dev/null || break; sleep 0.25; done
	grep -qx ok /tmp/nfs-io.out
}
# nfs_teardown: the mount and the server gone (lazy: a mount stuck on a dead transport must
# not keep the next scenario waiting)
nfs_teardown() {
	umount -f -l $NFS_MNT 2>/dev/null
	echo "-rdma $NFS_RDMA_PORT" > /proc/fs/nfsd/portlist 2>/dev/null
	rpc.nfsd 0 2>/dev/null
	exportfs -ua 2>/dev/null
	rm -f /etc/exports.d/lab.exports
	true
}
