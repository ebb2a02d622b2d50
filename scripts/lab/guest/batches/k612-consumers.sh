# Run by name (not in `all`, whose budget is 30 minutes): every RDMA consumer on the device.
# nvme-recreate-alone: what a re-creation does to NVMe over RDMA without the daemon (the
# reference); mixed-consumers-kernel: iSER, NVMe over RDMA and NFS over RDMA on rxe_ini
# through the in-kernel field incident, with the daemon on the default configuration.
source /lab/guest/lib.sh
lab_up
run_scenarios nvme-recreate-alone mixed-consumers-kernel
lab_down
