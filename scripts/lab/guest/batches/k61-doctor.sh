# Run by name (not in `all`, whose budget is 30 minutes): doctor and doctor-active on Debian
# 12's 6.1 (`all` runs doctor-active on 6.12 only, in the systemd guest), a short boot.
source /lab/guest/lib.sh
lab_up
run_scenarios doctor doctor-active
lab_down
