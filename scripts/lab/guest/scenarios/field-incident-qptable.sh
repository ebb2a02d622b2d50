source /lab/guest/scenarios/field-incident-kernel.sh
# (iii) The in-kernel field incident with the daemon's kernel-log source off
# (kmsg.enabled = false): the stuck port can only be seen in the RDMA netlink QP table (QP 1
# of type GSI in ERR). The same expectations as field-incident-kernel otherwise.
scenario_field_incident_qptable() {
	KFIELD_KMSG=off scenario_field_incident_kernel
}
