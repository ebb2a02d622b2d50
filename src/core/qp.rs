//! IB queue-pair states, types and attribute masks, and the transition table of the IB spec
//! as Linux implements it (`qp_state_table` in drivers/infiniband/core/verbs.c).

use serde::{Deserialize, Serialize};

/// QP state, numbered as the kernel's `enum ib_qp_state` (RESET 0 … ERR 6), plus libibverbs'
/// `IBV_QPS_UNKNOWN` (7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum QpState {
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
    Unknown = 7,
}

impl QpState {
    /// Every state, in kernel order.
    pub const ALL: [QpState; 8] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
        QpState::Unknown,
    ];

    /// The state with the kernel's number, if any.
    pub fn from_kernel(n: u32) -> Option<QpState> {
        QpState::ALL.get(usize::try_from(n).ok()?).copied()
    }

    /// The name iproute2 prints (`RESET`, `INIT`, `RTR`, `RTS`, `SQD`, `SQE`, `ERR`).
    pub fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
            QpState::Unknown => "UNKNOWN",
        }
    }
}

impl std::fmt::Display for QpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// QP type, numbered as the kernel's `enum ib_qp_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum QpType {
    Smi = 0,
    Gsi = 1,
    Rc = 2,
    Uc = 3,
    Ud = 4,
    RawIpv6 = 5,
    RawEthertype = 6,
    RawPacket = 8,
    XrcIni = 9,
    XrcTgt = 10,
    Driver = 0xff,
}

impl QpType {
    /// The type with the kernel's number, if any.
    pub fn from_kernel(n: u32) -> Option<QpType> {
        Some(match n {
            0 => QpType::Smi,
            1 => QpType::Gsi,
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            5 => QpType::RawIpv6,
            6 => QpType::RawEthertype,
            8 => QpType::RawPacket,
            9 => QpType::XrcIni,
            10 => QpType::XrcTgt,
            0xff => QpType::Driver,
            _ => return None,
        })
    }

    /// The name iproute2 prints (`SMI`, `GSI`, `RC`, `UC`, `UD`, `RAW_IPV6`, …).
    pub fn name(self) -> &'static str {
        match self {
            QpType::Smi => "SMI",
            QpType::Gsi => "GSI",
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
            QpType::RawIpv6 => "RAW_IPV6",
            QpType::RawEthertype => "RAW_ETHERTYPE",
            QpType::RawPacket => "RAW_PACKET",
            QpType::XrcIni => "XRC_INI",
            QpType::XrcTgt => "XRC_TGT",
            QpType::Driver => "DRIVER",
        }
    }
}

impl std::fmt::Display for QpType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
