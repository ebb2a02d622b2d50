# Run by name (not in `all`): dm-multipath over an iSER path and a TCP path to the target's
# LUN through the in-kernel field incident (multipath-kernel), with the daemon on defaults.
source /lab/guest/lib.sh
lab_up
run_scenarios multipath-kernel
lab_down
