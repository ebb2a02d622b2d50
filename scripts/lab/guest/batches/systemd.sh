# 6.12 guest booted with systemd as PID 1: the .deb and the service under its real hardening.
source /lab/guest/lib.sh
lab_up
run_scenarios sd-install sd-reset-device sd-dev-left-deleted sd-reload sd-reload-refused \
	sd-nonroot sd-write-access sd-observe sd-restart sd-config-error sd-upgrade sd-stop-purge
lab_down
