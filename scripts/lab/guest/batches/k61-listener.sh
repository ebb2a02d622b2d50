# Debian 12's own 6.1 guest, tiny init: the dead listener seen without the kernel's REJECTED
# line, on a fresh boot (in k61-recovery it runs after dead-listener, whose re-login can leave
# the disk offlined by a target-side protocol error, so its baseline is not always reachable).
source /lab/guest/lib.sh
lab_up
run_scenarios dead-listener-no-dyndbg
lab_down
