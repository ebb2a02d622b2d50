# 6.12 guest booted with systemd as PID 1: the .deb and the service under its real hardening;
# doctor and doctor-active (issue 24) audit the installed package's host and re-create rxe_ini
# with the service stopped, then start it again. late-modules (issue 22): ib_uverbs and rdma_ucm
# loaded after the service started (the sandbox's lockout named, the self-test not read as a
# broken port), then the restart that fixes it.
source /lab/guest/lib.sh
lab_up
run_scenarios sd-install sd-reset-device doctor doctor-active sd-dev-left-deleted sd-reload \
	sd-reload-refused sd-nonroot sd-write-access sd-observe sd-restart sd-config-error \
	late-modules sd-upgrade sd-stop-purge
lab_down
