source /lab/guest/scenarios/dead-listener.sh
# The dead listener as most hosts see it: rdma_cm's dynamic debug OFF. The lab guest turns it
# on (dyndbg_setup), and with it 6.1 logs `RDMA CM: REJECTED: invalid service ID` for every
# rejected reconnect; without it neither 6.1 nor 6.12 prints that line (it is a pr_debug in
# drivers/infiniband/core/cma.c), so the daemon must recognise the dead listener from the
# login outcome, the CM id table or iscsid's errors alone. Same expectations as dead-listener
# (never logged out, rxe_ini not re-created, an alert names the target side, I/O back after
# the listener returns), plus: no REJECTED line reached the kernel log during the scenario.
# 6.1 only (k61-recovery): on 6.12 the target side locks up in LIO's isert in this scenario.
DYNDBG_CONTROL=/sys/kernel/debug/dynamic_debug/control
rejected_lines() { dmesg | grep -c 'RDMA CM: REJECTED' || true; }
scenario_dead_listener_no_dyndbg() {
	if [ -w $DYNDBG_CONTROL ]; then
		echo 'module rdma_cm -p' > $DYNDBG_CONTROL ||
			{ lab_error "cannot turn rdma_cm dynamic debug off"; return; }
		if grep -q '^drivers/infiniband/core/cma.c:[0-9]* \[rdma_cm\][^ ]* =p' $DYNDBG_CONTROL; then
			lab_error "rdma_cm dynamic debug still on"
			return
		fi
	fi
	grep ' \[rdma_cm\]' $DYNDBG_CONTROL 2>/dev/null > "$SOUT/dyndbg-rdma_cm.txt" || true
	local r0 r1
	r0=$(rejected_lines)
	scenario_dead_listener
	r1=$(rejected_lines)
	check "no \`RDMA CM: REJECTED\` line in the kernel log (dynamic debug off)" [ "$r1" = "$r0" ]
	# back to the lab's default for the scenarios that follow
	[ -w $DYNDBG_CONTROL ] && echo 'module rdma_cm +p' > $DYNDBG_CONTROL 2>/dev/null
	return 0
}
