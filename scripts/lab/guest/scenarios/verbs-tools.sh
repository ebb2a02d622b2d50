# The guest can do verbs and rdma_cm on Soft-RoCE, proven with rdma-core's own tools before
# iser-guard's `selftest` is involved (issue 11); their times are the reference for the
# selftest's figures:
#  - the user-space stack is there: libibverbs1, librdmacm1 and ibverbs-providers (the rxe
#    provider, librxe; debootstrap installs no Recommends, and without a provider
#    ibv_get_device_list finds no device at all), ib_uverbs and rdma_ucm loaded, the device
#    nodes /dev/infiniband/uverbsN and /dev/infiniband/rdma_cm present (devtmpfs: no udev);
#  - `ibv_devices` lists rxe_ini and rxe_tgt, `ibv_devinfo -d rxe_ini` shows port 1 ACTIVE;
#  - `ibv_rc_pingpong` (RC QPs walked RESET->INIT->RTR->RTS by hand, the out-of-band exchange
#    over TCP): server and client both on rxe_ini (-g: the GID index of 192.0.2.1), and client
#    rxe_ini to server rxe_tgt across the veth;
#  - rdma_cm: `rping` (RC, rdma_cm connect, RDMA read/write), `rdma_server`/`rdma_client`
#    (rdma_cm RC send/recv), `ucmatose` (two rdma_cm RC connections) and `udaddy` (UD through
#    rdma_cm), `cmtime` (each rdma_cm step timed, 10 connections), each server on 192.0.2.1
#    (rxe_ini); `rping -I 192.0.2.1` too (both ends on rxe_ini, as the self-test connects).
#    With the lab's policy routing a client
#    connecting to 192.0.2.1 leaves through tgt0, so its side is rxe_tgt: both devices, and the
#    GSI QPs' CM handshake between them, are exercised.
# Every tool runs bounded (30 s); figures: each one's wall time.

# vt_run NAME CMD...: bounded run, output in $SOUT/NAME.txt, sets VRC and VDUR, one figure
vt_run() {
	local name=$1 t0=$(now)
	shift
	timeout 30 "$@" < /dev/null > "$SOUT/$name.txt" 2>&1
	VRC=$?
	VDUR=$(elapsed $t0)
	log "  $* -> exit $VRC in $VDUR s"
	figure "${name}_s" "$VDUR"
}
# vt_pair [-k] NAME SERVER_CMD -- CLIENT_CMD: server in the background, the client after the
# server is listening (a fixed short wait: these tools print nothing when ready), then both
# must exit 0. -k: the server does not exit by itself (cmtime's): it is stopped 2 s after the
# client and only the client is judged. Sets VRC (client) and VSRC (server).
vt_pair() {
	local keep=0 name srv=() cli=()
	[ "$1" = -k ] && { keep=1; shift; }
	name=$1
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	timeout 40 "${srv[@]}" < /dev/null > "$SOUT/$name-server.txt" 2>&1 &
	local sp=$!
	sleep 1.5
	vt_run "$name-client" "${cli[@]}"
	if [ $keep = 1 ]; then
		sleep 2
		kill $sp 2>/dev/null
	fi
	wait $sp
	VSRC=$?
	log "  server ${srv[*]} -> exit $VSRC"
	if [ $keep = 1 ]; then
		check "$name: client exit 0 (got $VRC)" [ "$VRC" = 0 ]
	else
		check "$name: client exit 0 (got $VRC), server exit 0 (got $VSRC)" [ "$VRC:$VSRC" = 0:0 ]
	fi
}
# gid_index DEV ADDR: the index of DEV port 1's IPv4-mapped GID of ADDR (0 when IPv6 is off,
# 1 when the link-local IPv6 GID comes first)
gid_index() {
	local want f
	want=$(python3 -c "import ipaddress,sys; b=ipaddress.IPv6Address('::ffff:'+sys.argv[1]).packed.hex(); print(':'.join(b[i:i+4] for i in range(0,32,4)))" "$2")
	for f in /sys/class/infiniband/$1/ports/1/gids/*; do
		[ "$(cat $f 2>/dev/null)" = "$want" ] && { basename $f; return 0; }
	done
	return 1
}
vt_txpackets() { echo "$(cat /sys/class/net/$INI_IF/statistics/tx_packets) $(cat /sys/class/net/$TGT_IF/statistics/tx_packets)"; }
scenario_verbs_tools() {
	local p m
	dpkg-query -W libibverbs1 librdmacm1 ibverbs-providers rdma-core ibverbs-utils rdmacm-utils > $SOUT/packages.txt 2>&1
	for p in libibverbs1 librdmacm1 ibverbs-providers ibverbs-utils rdmacm-utils; do
		check "package $p installed" grep -q "^$p[:[:space:]]" $SOUT/packages.txt
	done
	ls -l /usr/lib/x86_64-linux-gnu/libibverbs/ /etc/libibverbs.d/ > $SOUT/providers.txt 2>&1
	check "the rxe provider (librxe) is installed" grep -q 'librxe' $SOUT/providers.txt
	for m in ib_uverbs rdma_ucm rdma_cm rdma_rxe; do
		check "module $m loaded" [ -d /sys/module/$m ]
	done
	ls -l /dev/infiniband/ > $SOUT/dev-infiniband.txt 2>&1
	check "/dev/infiniband/rdma_cm exists" [ -c /dev/infiniband/rdma_cm ]
	check "two uverbs nodes (got $(ls /dev/infiniband/ 2>/dev/null | grep -c uverbs))" [ "$(ls /dev/infiniband/ 2>/dev/null | grep -c uverbs)" -ge 2 ]

	vt_run ibv_devices ibv_devices
	check "ibv_devices exit 0 and lists rxe_ini and rxe_tgt" \
		bash -c "[ $VRC = 0 ] && grep -qw $INI_RXE $SOUT/ibv_devices.txt && grep -qw $TGT_RXE $SOUT/ibv_devices.txt"
	vt_run ibv_devinfo ibv_devinfo -d $INI_RXE
	check "ibv_devinfo -d rxe_ini: port 1 PORT_ACTIVE" grep -q 'state:.*PORT_ACTIVE' $SOUT/ibv_devinfo.txt
	vt_run ibv_devinfo_v ibv_devinfo -v -d $INI_RXE

	local gi gt
	gi=$(gid_index $INI_RXE $INI_IP) || { fail "no GID of $INI_IP on $INI_RXE/1"; gi=1; }
	gt=$(gid_index $TGT_RXE $TGT_IP) || { fail "no GID of $TGT_IP on $TGT_RXE/1"; gt=1; }
	log "  GID index: $INI_RXE $gi ($INI_IP), $TGT_RXE $gt ($TGT_IP)"
	figure gid_index_rxe_ini "$gi"
	# RC by hand (ibv_modify_qp RESET->INIT->RTR->RTS): both ends on rxe_ini, then across.
	# The veth's packet counters around the first say whether rxe sent rxe_ini's packets to
	# itself through the network (out of tgt0, by the policy routing) or inside the driver.
	local tx0 tx1
	tx0=$(vt_txpackets)
	vt_pair rc_pingpong_ini_ini ibv_rc_pingpong -d $INI_RXE -g $gi -n 100 -- \
		ibv_rc_pingpong -d $INI_RXE -g $gi -n 100 127.0.0.1
	tx1=$(vt_txpackets)
	log "  veth tx packets (ini0 tgt0) before/after rxe_ini<->rxe_ini: $tx0 / $tx1"
	figure self_connect_veth_tx_packets "$(python3 -c "import sys; a=sys.argv[1].split(); b=sys.argv[2].split(); print('ini0=%d,tgt0=%d' % (int(b[0])-int(a[0]), int(b[1])-int(a[1])))" "$tx0" "$tx1")"
	vt_pair rc_pingpong_ini_tgt ibv_rc_pingpong -d $TGT_RXE -g $gt -n 100 -p 18516 -- \
		ibv_rc_pingpong -d $INI_RXE -g $gi -n 100 -p 18516 $TGT_IP
	grep -h 'bytes in' $SOUT/rc_pingpong_*-client.txt | sed 's/^/  /'
	# rdma_cm
	vt_pair rping rping -s -a $INI_IP -C 10 -v -- rping -c -a $INI_IP -C 10 -v
	check "rping: 10 pings echoed" [ "$(grep -c 'ping data' $SOUT/rping-client.txt)" -ge 10 ]
	vt_pair rping_self rping -s -a $INI_IP -C 10 -v -- rping -c -I $INI_IP -a $INI_IP -C 10 -v
	vt_pair rdma_cm_rc rdma_server -s $INI_IP -- rdma_client -s $INI_IP
	vt_pair ucmatose ucmatose -b $INI_IP -c 2 -C 10 -- ucmatose -s $INI_IP -c 2 -C 10
	vt_pair udaddy udaddy -b $INI_IP -- udaddy -s $INI_IP
	# per-step rdma_cm times (resolve addr/route, create QP, connect, disconnect, destroy) for
	# 10 connections: the reference for the self-test's cm steps
	vt_pair -k cmtime cmtime -b $INI_IP -c 10 -- cmtime -s $INI_IP -c 10
	rdma resource show cm_id > $SOUT/cm_id-after.txt 2>&1
	# the tools' own QPs are gone afterwards; rxe_ini's GSI QP still in RTS
	check "rxe_ini's GSI QP still RTS after the tools" gsi_rts $INI_RXE
	check "the iSER session untouched: LOGGED_IN" session_logged_in
	check "the iSER session untouched: direct I/O" direct_io_check
}
