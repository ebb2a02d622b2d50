# verbs-common.sh on 6.12, run by name: scripts/lab/run.sh batch k612-verbs
source /lab/guest/batches/verbs-common.sh
