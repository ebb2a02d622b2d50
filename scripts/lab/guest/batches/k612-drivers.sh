# Run by name (not in `all`, whose budget is 30 minutes): what real drivers do that stock
# Soft-RoCE does not, modelled inside the kernel. recreate-hang: the daemon's own re-creation
# blocked in the kernel (a held verbs context on the lab's irdma-like rdma_rxe), about 3 min.
source /lab/guest/lib.sh
lab_up
run_scenarios recreate-hang
lab_down
