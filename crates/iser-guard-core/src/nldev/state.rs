//! Small enums carried in RDMA_NLDEV attributes, with the names iproute2 prints.
//!
//! Every enum keeps unknown kernel values (`Other(u8)`) so nothing is lost and a value a
//! newer kernel adds is shown, not rejected.

use std::fmt;

use super::constants::*;

/// Logical port state (`enum ib_port_state`, RDMA_NLDEV_ATTR_PORT_STATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IbPortState {
    /// IB_PORT_NOP (0).
    Nop,
    /// IB_PORT_DOWN (1).
    Down,
    /// IB_PORT_INIT (2).
    Init,
    /// IB_PORT_ARMED (3).
    Armed,
    /// IB_PORT_ACTIVE (4).
    Active,
    /// IB_PORT_ACTIVE_DEFER (5).
    ActiveDefer,
    /// A value this version does not know.
    Other(u8),
}

impl From<u8> for IbPortState {
    fn from(v: u8) -> Self {
        match v {
            IB_PORT_NOP => IbPortState::Nop,
            IB_PORT_DOWN => IbPortState::Down,
            IB_PORT_INIT => IbPortState::Init,
            IB_PORT_ARMED => IbPortState::Armed,
            IB_PORT_ACTIVE => IbPortState::Active,
            IB_PORT_ACTIVE_DEFER => IbPortState::ActiveDefer,
            other => IbPortState::Other(other),
        }
    }
}

impl From<IbPortState> for u8 {
    fn from(s: IbPortState) -> u8 {
        match s {
            IbPortState::Nop => IB_PORT_NOP,
            IbPortState::Down => IB_PORT_DOWN,
            IbPortState::Init => IB_PORT_INIT,
            IbPortState::Armed => IB_PORT_ARMED,
            IbPortState::Active => IB_PORT_ACTIVE,
            IbPortState::ActiveDefer => IB_PORT_ACTIVE_DEFER,
            IbPortState::Other(v) => v,
        }
    }
}

impl IbPortState {
    /// The name `rdma link` prints (`NOP`, `DOWN`, `INIT`, `ARMED`, `ACTIVE`, `ACTIVE_DEFER`,
    /// else `UNKNOWN`).
    pub fn name(self) -> &'static str {
        match self {
            IbPortState::Nop => "NOP",
            IbPortState::Down => "DOWN",
            IbPortState::Init => "INIT",
            IbPortState::Armed => "ARMED",
            IbPortState::Active => "ACTIVE",
            IbPortState::ActiveDefer => "ACTIVE_DEFER",
            IbPortState::Other(_) => "UNKNOWN",
        }
    }
}

impl fmt::Display for IbPortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Physical port state (`enum ib_port_phys_state`, RDMA_NLDEV_ATTR_PORT_PHYS_STATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PhysState {
    /// 0: not a kernel value; iproute2 prints `NOP`.
    Nop,
    /// IB_PORT_PHYS_STATE_SLEEP (1).
    Sleep,
    /// IB_PORT_PHYS_STATE_POLLING (2).
    Polling,
    /// IB_PORT_PHYS_STATE_DISABLED (3).
    Disabled,
    /// IB_PORT_PHYS_STATE_PORT_CONFIGURATION_TRAINING (4); iproute2 prints `ARMED`.
    PortConfigurationTraining,
    /// IB_PORT_PHYS_STATE_LINK_UP (5).
    LinkUp,
    /// IB_PORT_PHYS_STATE_LINK_ERROR_RECOVERY (6); iproute2 prints `LINK_ERROR_RECOVER`.
    LinkErrorRecovery,
    /// IB_PORT_PHYS_STATE_PHY_TEST (7).
    PhyTest,
    /// OPA offline (9).
    OpaOffline,
    /// OPA test (11).
    OpaTest,
    /// A value this version does not know.
    Other(u8),
}

impl From<u8> for PhysState {
    fn from(v: u8) -> Self {
        match v {
            0 => PhysState::Nop,
            IB_PORT_PHYS_STATE_SLEEP => PhysState::Sleep,
            IB_PORT_PHYS_STATE_POLLING => PhysState::Polling,
            IB_PORT_PHYS_STATE_DISABLED => PhysState::Disabled,
            IB_PORT_PHYS_STATE_PORT_CONFIGURATION_TRAINING => PhysState::PortConfigurationTraining,
            IB_PORT_PHYS_STATE_LINK_UP => PhysState::LinkUp,
            IB_PORT_PHYS_STATE_LINK_ERROR_RECOVERY => PhysState::LinkErrorRecovery,
            IB_PORT_PHYS_STATE_PHY_TEST => PhysState::PhyTest,
            9 => PhysState::OpaOffline,
            11 => PhysState::OpaTest,
            other => PhysState::Other(other),
        }
    }
}

impl From<PhysState> for u8 {
    fn from(s: PhysState) -> u8 {
        match s {
            PhysState::Nop => 0,
            PhysState::Sleep => IB_PORT_PHYS_STATE_SLEEP,
            PhysState::Polling => IB_PORT_PHYS_STATE_POLLING,
            PhysState::Disabled => IB_PORT_PHYS_STATE_DISABLED,
            PhysState::PortConfigurationTraining => IB_PORT_PHYS_STATE_PORT_CONFIGURATION_TRAINING,
            PhysState::LinkUp => IB_PORT_PHYS_STATE_LINK_UP,
            PhysState::LinkErrorRecovery => IB_PORT_PHYS_STATE_LINK_ERROR_RECOVERY,
            PhysState::PhyTest => IB_PORT_PHYS_STATE_PHY_TEST,
            PhysState::OpaOffline => 9,
            PhysState::OpaTest => 11,
            PhysState::Other(v) => v,
        }
    }
}

impl PhysState {
    /// The name `rdma link` prints (its `phys_state_to_str` table; `UNKNOWN` beyond it).
    pub fn name(self) -> &'static str {
        match self {
            PhysState::Nop => "NOP",
            PhysState::Sleep => "SLEEP",
            PhysState::Polling => "POLLING",
            PhysState::Disabled => "DISABLED",
            PhysState::PortConfigurationTraining => "ARMED",
            PhysState::LinkUp => "LINK_UP",
            PhysState::LinkErrorRecovery => "LINK_ERROR_RECOVER",
            PhysState::PhyTest => "PHY_TEST",
            PhysState::OpaOffline => "OPA_OFFLINE",
            PhysState::OpaTest => "OPA_TEST",
            PhysState::Other(_) => "UNKNOWN",
        }
    }
}

impl fmt::Display for PhysState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Monitor event type (`enum rdma_nl_notify_event_type`, RDMA_NLDEV_ATTR_EVENT_TYPE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MonitorEventType {
    /// RDMA_REGISTER_EVENT (0): a device was registered.
    Register,
    /// RDMA_UNREGISTER_EVENT (1): a device was unregistered.
    Unregister,
    /// RDMA_NETDEV_ATTACH_EVENT (2): a netdev was attached to a port.
    NetdevAttach,
    /// RDMA_NETDEV_DETACH_EVENT (3): a netdev was detached from a port.
    NetdevDetach,
    /// RDMA_RENAME_EVENT (4, kernel >= 6.13): a device was renamed.
    Rename,
    /// RDMA_NETDEV_RENAME_EVENT (5, kernel >= 6.13): an attached netdev was renamed.
    NetdevRename,
    /// A value this version does not know.
    Other(u8),
}

impl From<u8> for MonitorEventType {
    fn from(v: u8) -> Self {
        match v {
            RDMA_REGISTER_EVENT => MonitorEventType::Register,
            RDMA_UNREGISTER_EVENT => MonitorEventType::Unregister,
            RDMA_NETDEV_ATTACH_EVENT => MonitorEventType::NetdevAttach,
            RDMA_NETDEV_DETACH_EVENT => MonitorEventType::NetdevDetach,
            RDMA_RENAME_EVENT => MonitorEventType::Rename,
            RDMA_NETDEV_RENAME_EVENT => MonitorEventType::NetdevRename,
            other => MonitorEventType::Other(other),
        }
    }
}

impl From<MonitorEventType> for u8 {
    fn from(t: MonitorEventType) -> u8 {
        match t {
            MonitorEventType::Register => RDMA_REGISTER_EVENT,
            MonitorEventType::Unregister => RDMA_UNREGISTER_EVENT,
            MonitorEventType::NetdevAttach => RDMA_NETDEV_ATTACH_EVENT,
            MonitorEventType::NetdevDetach => RDMA_NETDEV_DETACH_EVENT,
            MonitorEventType::Rename => RDMA_RENAME_EVENT,
            MonitorEventType::NetdevRename => RDMA_NETDEV_RENAME_EVENT,
            MonitorEventType::Other(v) => v,
        }
    }
}

impl MonitorEventType {
    /// The name `rdma monitor` prints, without its brackets (`REGISTER`, …, `UNKNOWN`).
    pub fn name(self) -> &'static str {
        match self {
            MonitorEventType::Register => "REGISTER",
            MonitorEventType::Unregister => "UNREGISTER",
            MonitorEventType::NetdevAttach => "NETDEV_ATTACH",
            MonitorEventType::NetdevDetach => "NETDEV_DETACH",
            MonitorEventType::Rename => "RENAME",
            MonitorEventType::NetdevRename => "NETDEV_RENAME",
            MonitorEventType::Other(_) => "UNKNOWN",
        }
    }
}

impl fmt::Display for MonitorEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name `rdma resource show qp` prints for RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE
/// (`enum ib_mig_state`): `MIGRATED`, `REARM`, `ARMED`, else `UNKNOWN`.
pub fn path_mig_state_name(v: u8) -> &'static str {
    match v {
        IB_MIG_MIGRATED => "MIGRATED",
        IB_MIG_REARM => "REARM",
        IB_MIG_ARMED => "ARMED",
        _ => "UNKNOWN",
    }
}

/// The name `rdma resource show cm_id` prints for RDMA_NLDEV_ATTR_RES_STATE in a CM_ID entry
/// (`enum rdma_cm_state`), else `UNKNOWN`.
pub fn cm_state_name(v: u8) -> &'static str {
    const NAMES: [&str; 11] = [
        "IDLE",
        "ADDR_QUERY",
        "ADDR_RESOLVED",
        "ROUTE_QUERY",
        "ROUTE_RESOLVED",
        "CONNECT",
        "DISCONNECT",
        "ADDR_BOUND",
        "LISTEN",
        "DEVICE_REMOVAL",
        "DESTROYING",
    ];
    NAMES.get(usize::from(v)).copied().unwrap_or("UNKNOWN")
}

/// The name `rdma resource show cm_id` prints for RDMA_NLDEV_ATTR_RES_PS
/// (`enum rdma_ucm_port_space`), else `UNKNOWN`.
pub fn port_space_name(v: u32) -> &'static str {
    match v {
        0x0001 => "SDP",
        0x0002 => "IPOIB",
        0x0106 => "TCP",
        0x0111 => "UDP",
        0x013f => "IB",
        _ => "UNKNOWN",
    }
}
