//! The RDMA netlink socket (NETLINK_RDMA): requests, dumps, monitor events.
