//! RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV) codec.
