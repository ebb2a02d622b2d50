# Debian 13 (trixie: its own 6.12 kernel, systemd 257, rdma-core with librdmacm1t64, open-iscsi
# 2.1.11), booted with systemd as PID 1: the stand-in for Ubuntu 24.04 (the field's release,
# not reachable from the build machines). The .deb built on Debian 12 is installed with apt
# as an operator would (sd-install keeps the transcript), then the service-level scenarios
# of the systemd batch. Run by name: scripts/lab/run.sh batch trixie-systemd.
source /lab/guest/lib.sh
lab_up
run_scenarios sd-install sd-reset-device doctor sd-dev-left-deleted sd-reload \
	sd-reload-refused sd-nonroot sd-write-access sd-observe sd-restart sd-config-error \
	late-modules sd-upgrade sd-stop-purge
lab_down
