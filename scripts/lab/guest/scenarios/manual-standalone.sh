source /lab/guest/scenarios/manual-common.sh
# Every manual command without a daemon (standalone, under the recovery lock).
scenario_manual_standalone() {
	write_config 0
	manual_suite standalone
}
