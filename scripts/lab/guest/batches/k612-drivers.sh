# Run by name (not in `all`, whose budget is 30 minutes): what real drivers do that stock
# Soft-RoCE does not, modelled inside the kernel. recreate-hang: the daemon's own re-creation
# blocked in the kernel (a held verbs context on the lab's irdma-like rdma_rxe), about 3 min.
# iser-only-portal: the field incident with the portal's TCP listener gone (tc drops TCP to
# 3260 on tgt0), recovered through the neighbour (ARP/ND) probe, about 3 min.
source /lab/guest/lib.sh
lab_up
run_scenarios recreate-hang iser-only-portal
lab_down
