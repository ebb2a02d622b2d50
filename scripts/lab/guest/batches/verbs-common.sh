# Verbs in the guest (issue 11), one short boot on either kernel (k612-verbs, k61-verbs):
# rdma-core's own tools prove verbs and rdma_cm on rxe (the reference), then iser-guard's
# selftest on both devices, before and after a re-creation of rxe_ini. Run by name:
# scripts/lab/run.sh batch k612-verbs (or k61-verbs), which source this file.
source /lab/guest/lib.sh
lab_up
run_scenarios verbs-tools selftest verbs-device-hold
lab_down
