# Run by name (not in `all`): zombie's reference run without the daemon on 6.12. It leaves
# iscsid alone with a FAILED connection when the link returns, which crashes 6.12 in
# iser_task_rsp (iscsi_complete_pdu NULL dereference) in most runs: the host side gives that
# crash the verdict KERNEL-BUG (docs/lab.md, "Kernel facts").
source /lab/guest/lib.sh
lab_up
run_scenarios zombie-iscsid-alone
lab_down
