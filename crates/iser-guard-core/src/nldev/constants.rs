//! Kernel constants of RDMA netlink, names kept verbatim from
//! `include/uapi/rdma/rdma_netlink.h` (the numbering is ABI: the kernel header says "don't change
//! the order or add anything between").
//!
//! Owns numbers only; what they mean is modelled in the sibling modules.

#![allow(missing_docs)] // the kernel names are the documentation; see rdma_netlink.h.

/// Netlink protocol number of RDMA netlink (`NETLINK_RDMA` in `linux/netlink.h`).
pub const NETLINK_RDMA: isize = 20;

// RDMA netlink clients (the upper bits of nlmsg_type).
pub const RDMA_NL_IWCM: u16 = 2;
pub const RDMA_NL_RSVD: u16 = 3;
pub const RDMA_NL_LS: u16 = 4;
pub const RDMA_NL_NLDEV: u16 = 5;

// Multicast groups. A socket joins group N with bind mask `1 << (N - 1)` (iproute2: `1 << 3`).
pub const RDMA_NL_GROUP_IWPM: u32 = 2;
pub const RDMA_NL_GROUP_LS: u32 = 3;
pub const RDMA_NL_GROUP_NOTIFY: u32 = 4;

/// `RDMA_NL_GET_CLIENT(type)`: bits 10..16 of `nlmsg_type`.
pub const fn rdma_nl_get_client(message_type: u16) -> u16 {
    (message_type >> 10) & 0x3f
}

/// `RDMA_NL_GET_OP(type)`: bits 0..10 of `nlmsg_type`.
pub const fn rdma_nl_get_op(message_type: u16) -> u16 {
    message_type & 0x3ff
}

/// `RDMA_NL_GET_TYPE(client, op)` = `(client << 10) + op`.
pub const fn rdma_nl_get_type(client: u16, op: u16) -> u16 {
    (client << 10) + op
}

// enum rdma_nldev_command
pub const RDMA_NLDEV_CMD_UNSPEC: u16 = 0;
pub const RDMA_NLDEV_CMD_GET: u16 = 1;
pub const RDMA_NLDEV_CMD_SET: u16 = 2;
pub const RDMA_NLDEV_CMD_NEWLINK: u16 = 3;
pub const RDMA_NLDEV_CMD_DELLINK: u16 = 4;
pub const RDMA_NLDEV_CMD_PORT_GET: u16 = 5;
pub const RDMA_NLDEV_CMD_SYS_GET: u16 = 6;
pub const RDMA_NLDEV_CMD_SYS_SET: u16 = 7;
// 8 is free to use (kernel comment).
pub const RDMA_NLDEV_CMD_RES_GET: u16 = 9;
pub const RDMA_NLDEV_CMD_RES_QP_GET: u16 = 10;
pub const RDMA_NLDEV_CMD_RES_CM_ID_GET: u16 = 11;
pub const RDMA_NLDEV_CMD_RES_CQ_GET: u16 = 12;
pub const RDMA_NLDEV_CMD_RES_MR_GET: u16 = 13;
pub const RDMA_NLDEV_CMD_RES_PD_GET: u16 = 14;
pub const RDMA_NLDEV_CMD_GET_CHARDEV: u16 = 15;
pub const RDMA_NLDEV_CMD_STAT_SET: u16 = 16;
pub const RDMA_NLDEV_CMD_STAT_GET: u16 = 17;
pub const RDMA_NLDEV_CMD_STAT_DEL: u16 = 18;
pub const RDMA_NLDEV_CMD_RES_QP_GET_RAW: u16 = 19;
pub const RDMA_NLDEV_CMD_RES_CQ_GET_RAW: u16 = 20;
pub const RDMA_NLDEV_CMD_RES_MR_GET_RAW: u16 = 21;
pub const RDMA_NLDEV_CMD_RES_CTX_GET: u16 = 22;
pub const RDMA_NLDEV_CMD_RES_SRQ_GET: u16 = 23;
pub const RDMA_NLDEV_CMD_STAT_GET_STATUS: u16 = 24;
pub const RDMA_NLDEV_CMD_RES_SRQ_GET_RAW: u16 = 25;
pub const RDMA_NLDEV_CMD_NEWDEV: u16 = 26;
pub const RDMA_NLDEV_CMD_DELDEV: u16 = 27;
pub const RDMA_NLDEV_CMD_MONITOR: u16 = 28;

// enum rdma_nldev_print_type
pub const RDMA_NLDEV_PRINT_TYPE_UNSPEC: u8 = 0;
pub const RDMA_NLDEV_PRINT_TYPE_HEX: u8 = 1;

// enum rdma_nldev_attr (value types as commented in the kernel header)
pub const RDMA_NLDEV_ATTR_UNSPEC: u16 = 0;
pub const RDMA_NLDEV_ATTR_PAD: u16 = RDMA_NLDEV_ATTR_UNSPEC;
pub const RDMA_NLDEV_ATTR_DEV_INDEX: u16 = 1; // u32
pub const RDMA_NLDEV_ATTR_DEV_NAME: u16 = 2; // string
pub const RDMA_NLDEV_ATTR_PORT_INDEX: u16 = 3; // u32 (GET replies: the port count)
pub const RDMA_NLDEV_ATTR_CAP_FLAGS: u16 = 4; // u64
pub const RDMA_NLDEV_ATTR_FW_VERSION: u16 = 5; // string
pub const RDMA_NLDEV_ATTR_NODE_GUID: u16 = 6; // u64
pub const RDMA_NLDEV_ATTR_SYS_IMAGE_GUID: u16 = 7; // u64
pub const RDMA_NLDEV_ATTR_SUBNET_PREFIX: u16 = 8; // u64
pub const RDMA_NLDEV_ATTR_LID: u16 = 9; // u32
pub const RDMA_NLDEV_ATTR_SM_LID: u16 = 10; // u32
pub const RDMA_NLDEV_ATTR_LMC: u16 = 11; // u8
pub const RDMA_NLDEV_ATTR_PORT_STATE: u16 = 12; // u8
pub const RDMA_NLDEV_ATTR_PORT_PHYS_STATE: u16 = 13; // u8
pub const RDMA_NLDEV_ATTR_DEV_NODE_TYPE: u16 = 14; // u8
pub const RDMA_NLDEV_ATTR_RES_SUMMARY: u16 = 15; // nested table
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY: u16 = 16; // nested table
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME: u16 = 17; // string
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR: u16 = 18; // u64
pub const RDMA_NLDEV_ATTR_RES_QP: u16 = 19; // nested table
pub const RDMA_NLDEV_ATTR_RES_QP_ENTRY: u16 = 20; // nested table
pub const RDMA_NLDEV_ATTR_RES_LQPN: u16 = 21; // u32
pub const RDMA_NLDEV_ATTR_RES_RQPN: u16 = 22; // u32
pub const RDMA_NLDEV_ATTR_RES_RQ_PSN: u16 = 23; // u32
pub const RDMA_NLDEV_ATTR_RES_SQ_PSN: u16 = 24; // u32
pub const RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE: u16 = 25; // u8
pub const RDMA_NLDEV_ATTR_RES_TYPE: u16 = 26; // u8
pub const RDMA_NLDEV_ATTR_RES_STATE: u16 = 27; // u8
pub const RDMA_NLDEV_ATTR_RES_PID: u16 = 28; // u32
pub const RDMA_NLDEV_ATTR_RES_KERN_NAME: u16 = 29; // string
pub const RDMA_NLDEV_ATTR_RES_CM_ID: u16 = 30; // nested table
pub const RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY: u16 = 31; // nested table
pub const RDMA_NLDEV_ATTR_RES_PS: u16 = 32; // u32
pub const RDMA_NLDEV_ATTR_RES_SRC_ADDR: u16 = 33; // __kernel_sockaddr_storage
pub const RDMA_NLDEV_ATTR_RES_DST_ADDR: u16 = 34; // __kernel_sockaddr_storage
pub const RDMA_NLDEV_ATTR_RES_CQ: u16 = 35; // nested table
pub const RDMA_NLDEV_ATTR_RES_CQ_ENTRY: u16 = 36; // nested table
pub const RDMA_NLDEV_ATTR_RES_CQE: u16 = 37; // u32
pub const RDMA_NLDEV_ATTR_RES_USECNT: u16 = 38; // u64
pub const RDMA_NLDEV_ATTR_RES_POLL_CTX: u16 = 39; // u8
pub const RDMA_NLDEV_ATTR_RES_MR: u16 = 40; // nested table
pub const RDMA_NLDEV_ATTR_RES_MR_ENTRY: u16 = 41; // nested table
pub const RDMA_NLDEV_ATTR_RES_RKEY: u16 = 42; // u32
pub const RDMA_NLDEV_ATTR_RES_LKEY: u16 = 43; // u32
pub const RDMA_NLDEV_ATTR_RES_IOVA: u16 = 44; // u64
pub const RDMA_NLDEV_ATTR_RES_MRLEN: u16 = 45; // u64
pub const RDMA_NLDEV_ATTR_RES_PD: u16 = 46; // nested table
pub const RDMA_NLDEV_ATTR_RES_PD_ENTRY: u16 = 47; // nested table
pub const RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY: u16 = 48; // u32
pub const RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY: u16 = 49; // u32
pub const RDMA_NLDEV_ATTR_NDEV_INDEX: u16 = 50; // u32
pub const RDMA_NLDEV_ATTR_NDEV_NAME: u16 = 51; // string
pub const RDMA_NLDEV_ATTR_DRIVER: u16 = 52; // nested table
pub const RDMA_NLDEV_ATTR_DRIVER_ENTRY: u16 = 53; // nested table
pub const RDMA_NLDEV_ATTR_DRIVER_STRING: u16 = 54; // string
pub const RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE: u16 = 55; // u8
pub const RDMA_NLDEV_ATTR_DRIVER_S32: u16 = 56; // s32
pub const RDMA_NLDEV_ATTR_DRIVER_U32: u16 = 57; // u32
pub const RDMA_NLDEV_ATTR_DRIVER_S64: u16 = 58; // s64
pub const RDMA_NLDEV_ATTR_DRIVER_U64: u16 = 59; // u64
pub const RDMA_NLDEV_ATTR_RES_PDN: u16 = 60; // u32
pub const RDMA_NLDEV_ATTR_RES_CQN: u16 = 61; // u32
pub const RDMA_NLDEV_ATTR_RES_MRN: u16 = 62; // u32
pub const RDMA_NLDEV_ATTR_RES_CM_IDN: u16 = 63; // u32
pub const RDMA_NLDEV_ATTR_RES_CTXN: u16 = 64; // u32
pub const RDMA_NLDEV_ATTR_LINK_TYPE: u16 = 65; // string
pub const RDMA_NLDEV_SYS_ATTR_NETNS_MODE: u16 = 66; // u8
pub const RDMA_NLDEV_ATTR_DEV_PROTOCOL: u16 = 67; // string
pub const RDMA_NLDEV_NET_NS_FD: u16 = 68; // u32
pub const RDMA_NLDEV_ATTR_CHARDEV_TYPE: u16 = 69; // string
pub const RDMA_NLDEV_ATTR_CHARDEV_NAME: u16 = 70; // string
pub const RDMA_NLDEV_ATTR_CHARDEV_ABI: u16 = 71; // u64
pub const RDMA_NLDEV_ATTR_CHARDEV: u16 = 72; // u64
pub const RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID: u16 = 73; // u64
pub const RDMA_NLDEV_ATTR_STAT_MODE: u16 = 74; // u32
pub const RDMA_NLDEV_ATTR_STAT_RES: u16 = 75; // u32
pub const RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK: u16 = 76; // u32
pub const RDMA_NLDEV_ATTR_STAT_COUNTER: u16 = 77; // nested table
pub const RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY: u16 = 78; // nested table
pub const RDMA_NLDEV_ATTR_STAT_COUNTER_ID: u16 = 79; // u32
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTERS: u16 = 80; // nested table
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY: u16 = 81; // nested table
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME: u16 = 82; // string
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE: u16 = 83; // u64
pub const RDMA_NLDEV_ATTR_DEV_DIM: u16 = 84; // u8
pub const RDMA_NLDEV_ATTR_RES_RAW: u16 = 85; // binary
pub const RDMA_NLDEV_ATTR_RES_CTX: u16 = 86; // nested table
pub const RDMA_NLDEV_ATTR_RES_CTX_ENTRY: u16 = 87; // nested table
pub const RDMA_NLDEV_ATTR_RES_SRQ: u16 = 88; // nested table
pub const RDMA_NLDEV_ATTR_RES_SRQ_ENTRY: u16 = 89; // nested table
pub const RDMA_NLDEV_ATTR_RES_SRQN: u16 = 90; // u32
pub const RDMA_NLDEV_ATTR_MIN_RANGE: u16 = 91; // u32
pub const RDMA_NLDEV_ATTR_MAX_RANGE: u16 = 92; // u32
pub const RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK: u16 = 93; // u8
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX: u16 = 94; // u32
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC: u16 = 95; // u8
pub const RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE: u16 = 96; // u8
pub const RDMA_NLDEV_ATTR_DRIVER_DETAILS: u16 = 97; // u8
pub const RDMA_NLDEV_ATTR_RES_SUBTYPE: u16 = 98; // string
pub const RDMA_NLDEV_ATTR_DEV_TYPE: u16 = 99; // u8
pub const RDMA_NLDEV_ATTR_PARENT_NAME: u16 = 100; // string
pub const RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE: u16 = 101; // u8
pub const RDMA_NLDEV_ATTR_EVENT_TYPE: u16 = 102; // u8
pub const RDMA_NLDEV_SYS_ATTR_MONITOR_MODE: u16 = 103; // u8

// enum rdma_nl_notify_event_type (kernel >= 6.12; the two rename events >= 6.13)
pub const RDMA_REGISTER_EVENT: u8 = 0;
pub const RDMA_UNREGISTER_EVENT: u8 = 1;
pub const RDMA_NETDEV_ATTACH_EVENT: u8 = 2;
pub const RDMA_NETDEV_DETACH_EVENT: u8 = 3;
pub const RDMA_RENAME_EVENT: u8 = 4;
pub const RDMA_NETDEV_RENAME_EVENT: u8 = 5;

// enum rdma_nl_name_assign_type
pub const RDMA_NAME_ASSIGN_TYPE_UNKNOWN: u8 = 0;
pub const RDMA_NAME_ASSIGN_TYPE_USER: u8 = 1;

// enum ib_port_state (include/rdma/ib_verbs.h), carried in RDMA_NLDEV_ATTR_PORT_STATE.
pub const IB_PORT_NOP: u8 = 0;
pub const IB_PORT_DOWN: u8 = 1;
pub const IB_PORT_INIT: u8 = 2;
pub const IB_PORT_ARMED: u8 = 3;
pub const IB_PORT_ACTIVE: u8 = 4;
pub const IB_PORT_ACTIVE_DEFER: u8 = 5;

// enum ib_port_phys_state, carried in RDMA_NLDEV_ATTR_PORT_PHYS_STATE.
pub const IB_PORT_PHYS_STATE_SLEEP: u8 = 1;
pub const IB_PORT_PHYS_STATE_POLLING: u8 = 2;
pub const IB_PORT_PHYS_STATE_DISABLED: u8 = 3;
pub const IB_PORT_PHYS_STATE_PORT_CONFIGURATION_TRAINING: u8 = 4;
pub const IB_PORT_PHYS_STATE_LINK_UP: u8 = 5;
pub const IB_PORT_PHYS_STATE_LINK_ERROR_RECOVERY: u8 = 6;
pub const IB_PORT_PHYS_STATE_PHY_TEST: u8 = 7;

// enum ib_mig_state, carried in RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE.
pub const IB_MIG_MIGRATED: u8 = 0;
pub const IB_MIG_REARM: u8 = 1;
pub const IB_MIG_ARMED: u8 = 2;

// Socket address families inside RDMA_NLDEV_ATTR_RES_{SRC,DST}_ADDR.
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;
/// `sizeof(struct __kernel_sockaddr_storage)` (`_K_SS_MAXSIZE`).
pub const K_SS_MAXSIZE: usize = 128;
