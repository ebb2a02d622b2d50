# 6.12 guest, tiny init: the daemon's own re-creations with the port self-test in Verifying
# (issue 11: the engine uses the self-test), plus the self-test command itself. A short
# batch for checking a change to the verification path; `all` covers the same scenarios.
source /lab/guest/lib.sh
lab_up
run_scenarios netlink-view field-incident-kernel dev-left-deleted selftest
lab_down
