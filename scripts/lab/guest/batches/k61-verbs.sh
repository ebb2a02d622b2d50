# verbs-common.sh on 6.1, run by name: scripts/lab/run.sh batch k61-verbs
source /lab/guest/batches/verbs-common.sh
