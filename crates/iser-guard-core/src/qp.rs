//! IB queue-pair states, types and attribute masks, and the transition table of the IB spec
//! as Linux implements it (`qp_state_table` and `ib_modify_qp_is_ok()` in
//! drivers/infiniband/core/verbs.c).
//!
//! This module owns:
//! - [`QpState`], [`QpType`] and [`AttrMask`] with the kernel's and libibverbs' numbers, and
//!   their parsers (`"ERR"`, `"0x6"`, `"GSI"`, `"STATE,CUR_STATE"`, `"0x3"` …);
//! - the transition table, as [`rule`] (required and optional attributes of one transition);
//! - [`check_transition`], which says whether the kernel's core would accept a
//!   `modify_qp(from → to, type, mask)` and, if not, why, as a typed [`TransitionError`];
//! - [`explain_transition`], the same verdict plus what an operator can do about it.
//!
//! Everything here is pure: no I/O, no clock.
//!
//! The table is the one of current kernels (≥ 4.x, still the same in 6.x). Two facts worth
//! knowing when reading kernel logs:
//! - Older kernels (before the table lost it) also allowed RESET→ERR; current ones do not.
//! - Drivers call `ib_modify_qp_is_ok()` with *their own* idea of the current state. irdma
//!   ignores `IB_QP_CUR_STATE` and uses its cached state, which is how the MAD layer's
//!   SQE→RTS request on QP 1 turns into the forbidden ERR→RTS of the field incident.

use std::fmt;
use std::str::FromStr;

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

// ---------------------------------------------------------------------------------------------
// Parsing of states and types
// ---------------------------------------------------------------------------------------------

/// Why a QP state, type or attribute mask could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QpParseError {
    /// The text names no QP state.
    #[error(
        "unknown QP state '{0}': expected RESET, INIT, RTR, RTS, SQD, SQE, ERR, UNKNOWN \
         or the kernel's number 0..7"
    )]
    UnknownState(String),
    /// The text names no QP type.
    #[error(
        "unknown QP type '{0}': expected SMI, GSI, RC, UC, UD, RAW_IPV6, RAW_ETHERTYPE, \
         RAW_PACKET, XRC_INI, XRC_TGT, DRIVER or the kernel's number"
    )]
    UnknownType(String),
    /// One token of an attribute mask names no attribute.
    #[error(
        "unknown QP attribute '{token}' in mask '{input}': expected names such as STATE, \
         CUR_STATE, PKEY_INDEX (optionally prefixed IBV_QP_ or IB_QP_) or a number like 0x31"
    )]
    UnknownAttribute {
        /// The offending token, as written.
        token: String,
        /// The whole mask text.
        input: String,
    },
    /// A numeric token does not fit in 32 bits or is not a number.
    #[error("invalid number '{token}' in mask '{input}': a mask is a 32-bit value such as 0x31")]
    InvalidNumber {
        /// The offending token, as written.
        token: String,
        /// The whole mask text.
        input: String,
    },
}

/// Parses a decimal or `0x` hexadecimal unsigned number.
fn parse_number(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if hex.is_empty() {
            return None;
        }
        u32::from_str_radix(hex, 16).ok()
    } else if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// Upper-cases, trims and turns `-` into `_`, then strips the first matching prefix.
fn normalise(s: &str, prefixes: &[&str]) -> String {
    let up = s.trim().to_ascii_uppercase().replace('-', "_");
    for p in prefixes {
        if let Some(rest) = up.strip_prefix(p) {
            return rest.to_string();
        }
    }
    up
}

impl FromStr for QpState {
    type Err = QpParseError;

    /// Accepts the names iproute2 prints (`ERR`, case-insensitive, also `IB_QPS_ERR` and
    /// `IBV_QPS_ERR`, and `ERROR`) and the kernel's numbers in decimal or hex (`6`, `0x6`,
    /// as irdma prints them).
    fn from_str(s: &str) -> Result<Self, QpParseError> {
        if let Some(n) = parse_number(s) {
            return QpState::from_kernel(n).ok_or_else(|| QpParseError::UnknownState(s.into()));
        }
        let n = normalise(s, &["IBV_QPS_", "IB_QPS_"]);
        Ok(match n.as_str() {
            "RESET" | "RST" => QpState::Reset,
            "INIT" => QpState::Init,
            "RTR" => QpState::Rtr,
            "RTS" => QpState::Rts,
            "SQD" => QpState::Sqd,
            "SQE" => QpState::Sqe,
            "ERR" | "ERROR" => QpState::Err,
            "UNKNOWN" => QpState::Unknown,
            _ => return Err(QpParseError::UnknownState(s.into())),
        })
    }
}

impl FromStr for QpType {
    type Err = QpParseError;

    /// Accepts the names iproute2 prints (`GSI`, case-insensitive, also with `IB_QPT_` /
    /// `IBV_QPT_` prefixes and `-` for `_`), libibverbs' `XRC_SEND`/`XRC_RECV` for the XRC
    /// initiator and target, and the kernel's numbers (`1`, `0xff`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(n) = parse_number(s) {
            return QpType::from_kernel(n).ok_or_else(|| QpParseError::UnknownType(s.into()));
        }
        let n = normalise(s, &["IBV_QPT_", "IB_QPT_"]);
        Ok(match n.as_str() {
            "SMI" => QpType::Smi,
            "GSI" => QpType::Gsi,
            "RC" => QpType::Rc,
            "UC" => QpType::Uc,
            "UD" => QpType::Ud,
            "RAW_IPV6" => QpType::RawIpv6,
            "RAW_ETHERTYPE" | "RAW_ETY" => QpType::RawEthertype,
            "RAW_PACKET" | "RAW_ETH" => QpType::RawPacket,
            "XRC_INI" | "XRC_SEND" | "XRC" => QpType::XrcIni,
            "XRC_TGT" | "XRC_RECV" => QpType::XrcTgt,
            "DRIVER" => QpType::Driver,
            _ => return Err(QpParseError::UnknownType(s.into())),
        })
    }
}

impl QpType {
    /// Every type, in kernel order.
    pub const ALL: [QpType; 11] = [
        QpType::Smi,
        QpType::Gsi,
        QpType::Rc,
        QpType::Uc,
        QpType::Ud,
        QpType::RawIpv6,
        QpType::RawEthertype,
        QpType::RawPacket,
        QpType::XrcIni,
        QpType::XrcTgt,
        QpType::Driver,
    ];

    /// True for the special QPs the kernel's MAD layer creates and owns on every port:
    /// QP 0 (SMI) and QP 1 (GSI). Userspace can never modify them.
    pub(crate) fn is_kernel_owned_special(self) -> bool {
        matches!(self, QpType::Smi | QpType::Gsi)
    }

    /// The type of the special QP with this number, if it is one: QP 0 is the SMI QP and
    /// QP 1 the GSI QP on every port.
    pub(crate) fn of_special_qpn(qpn: u32) -> Option<QpType> {
        match qpn {
            0 => Some(QpType::Smi),
            1 => Some(QpType::Gsi),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Attribute masks
// ---------------------------------------------------------------------------------------------

/// A `modify_qp` attribute mask (`enum ibv_qp_attr_mask` / `enum ib_qp_attr_mask`): which
/// fields of the attribute struct a modify sets. The bit values are the same in libibverbs
/// and the kernel.
///
/// Bits without a name (21–24 are reserved, they once were the kernel's SMAC/VID bits) are
/// kept, so a mask read from a log round-trips; the kernel rejects them in every transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct AttrMask(pub u32);

/// One named attribute bit: the mask, its short name and its libibverbs / kernel names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrInfo {
    /// The bit.
    pub mask: AttrMask,
    /// Short name, as used on iser-guard's command line (`PKEY_INDEX`).
    pub name: &'static str,
    /// The libibverbs name (`IBV_QP_PKEY_INDEX`).
    pub verbs_name: &'static str,
    /// The kernel name (`IB_QP_PKEY_INDEX`).
    pub kernel_name: &'static str,
}

macro_rules! attrs {
    ($( $(#[$doc:meta])* $konst:ident = $bit:expr, $name:literal; )*) => {
        impl AttrMask {
            $( $(#[$doc])* pub const $konst: AttrMask = AttrMask(1 << $bit); )*
            /// Every named attribute, in bit order.
            pub const NAMED: &'static [AttrInfo] = &[
                $( AttrInfo {
                    mask: AttrMask(1 << $bit),
                    name: $name,
                    verbs_name: concat!("IBV_QP_", $name),
                    kernel_name: concat!("IB_QP_", $name),
                }, )*
            ];
        }
    };
}

attrs! {
    /// `IBV_QP_STATE` (bit 0): the target state; without it no transition happens.
    STATE = 0, "STATE";
    /// `IBV_QP_CUR_STATE` (bit 1): the caller's idea of the current state. Only legal when
    /// the QP is in RTR, RTS, SQD or SQE, and only where the table lists it as optional.
    CUR_STATE = 1, "CUR_STATE";
    /// `IBV_QP_EN_SQD_ASYNC_NOTIFY` (bit 2).
    EN_SQD_ASYNC_NOTIFY = 2, "EN_SQD_ASYNC_NOTIFY";
    /// `IBV_QP_ACCESS_FLAGS` (bit 3).
    ACCESS_FLAGS = 3, "ACCESS_FLAGS";
    /// `IBV_QP_PKEY_INDEX` (bit 4).
    PKEY_INDEX = 4, "PKEY_INDEX";
    /// `IBV_QP_PORT` (bit 5).
    PORT = 5, "PORT";
    /// `IBV_QP_QKEY` (bit 6).
    QKEY = 6, "QKEY";
    /// `IBV_QP_AV` (bit 7): the primary path's address vector.
    AV = 7, "AV";
    /// `IBV_QP_PATH_MTU` (bit 8).
    PATH_MTU = 8, "PATH_MTU";
    /// `IBV_QP_TIMEOUT` (bit 9).
    TIMEOUT = 9, "TIMEOUT";
    /// `IBV_QP_RETRY_CNT` (bit 10).
    RETRY_CNT = 10, "RETRY_CNT";
    /// `IBV_QP_RNR_RETRY` (bit 11).
    RNR_RETRY = 11, "RNR_RETRY";
    /// `IBV_QP_RQ_PSN` (bit 12).
    RQ_PSN = 12, "RQ_PSN";
    /// `IBV_QP_MAX_QP_RD_ATOMIC` (bit 13).
    MAX_QP_RD_ATOMIC = 13, "MAX_QP_RD_ATOMIC";
    /// `IBV_QP_ALT_PATH` (bit 14).
    ALT_PATH = 14, "ALT_PATH";
    /// `IBV_QP_MIN_RNR_TIMER` (bit 15).
    MIN_RNR_TIMER = 15, "MIN_RNR_TIMER";
    /// `IBV_QP_SQ_PSN` (bit 16).
    SQ_PSN = 16, "SQ_PSN";
    /// `IBV_QP_MAX_DEST_RD_ATOMIC` (bit 17).
    MAX_DEST_RD_ATOMIC = 17, "MAX_DEST_RD_ATOMIC";
    /// `IBV_QP_PATH_MIG_STATE` (bit 18).
    PATH_MIG_STATE = 18, "PATH_MIG_STATE";
    /// `IBV_QP_CAP` (bit 19): never valid in a modify of the core table.
    CAP = 19, "CAP";
    /// `IBV_QP_DEST_QPN` (bit 20).
    DEST_QPN = 20, "DEST_QPN";
    /// `IBV_QP_RATE_LIMIT` / `IB_QP_RATE_LIMIT` (bit 25): packet pacing, raw packet QPs only.
    RATE_LIMIT = 25, "RATE_LIMIT";
}

impl AttrMask {
    /// The empty mask.
    pub const EMPTY: AttrMask = AttrMask(0);

    /// The mask the MAD layer uses after a send error on QP 0/1: `STATE | CUR_STATE`
    /// (asking SQE→RTS).
    pub const MAD_SQE_TO_RTS: AttrMask = AttrMask(Self::STATE.0 | Self::CUR_STATE.0);

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// True if no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True if every bit of `other` is set in `self`.
    pub const fn contains(self, other: AttrMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if any bit of `other` is set in `self`.
    pub const fn intersects(self, other: AttrMask) -> bool {
        self.0 & other.0 != 0
    }

    /// Bits of `self` that are not in `other`.
    pub const fn difference(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 & !other.0)
    }

    /// Bits in either mask.
    pub const fn union(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 | other.0)
    }

    /// All named bits.
    pub fn all_named() -> AttrMask {
        Self::NAMED
            .iter()
            .fold(AttrMask::EMPTY, |m, a| m.union(a.mask))
    }

    /// The named attributes set in this mask, in bit order.
    pub fn named(self) -> impl Iterator<Item = &'static AttrInfo> {
        Self::NAMED.iter().filter(move |a| self.contains(a.mask))
    }

    /// Bits set in this mask that have no name (reserved bits).
    pub(crate) fn unnamed_bits(self) -> AttrMask {
        self.difference(Self::all_named())
    }

    /// The short names of the set attributes, plus `0x…` for unnamed bits.
    pub fn names(self) -> Vec<String> {
        let mut v: Vec<String> = self.named().map(|a| a.name.to_string()).collect();
        let rest = self.unnamed_bits();
        if !rest.is_empty() {
            v.push(format!("{:#x}", rest.0));
        }
        v
    }

    /// Looks up one attribute by name: `PKEY_INDEX`, `pkey_index`, `IBV_QP_PKEY_INDEX`,
    /// `IB_QP_PKEY_INDEX`, `pkey-index`.
    pub fn from_name(name: &str) -> Option<AttrMask> {
        let n = normalise(name, &["IBV_QP_", "IB_QP_"]);
        Self::NAMED.iter().find(|a| a.name == n).map(|a| a.mask)
    }
}

impl std::ops::BitOr for AttrMask {
    type Output = AttrMask;
    fn bitor(self, rhs: AttrMask) -> AttrMask {
        self.union(rhs)
    }
}

impl std::ops::BitOrAssign for AttrMask {
    fn bitor_assign(&mut self, rhs: AttrMask) {
        self.0 |= rhs.0;
    }
}

impl std::ops::BitAnd for AttrMask {
    type Output = AttrMask;
    fn bitand(self, rhs: AttrMask) -> AttrMask {
        AttrMask(self.0 & rhs.0)
    }
}

impl fmt::Display for AttrMask {
    /// `STATE|CUR_STATE`; unnamed bits as hex (`STATE|0x200000`); `none` for the empty mask.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&self.names().join("|"))
    }
}

impl FromStr for AttrMask {
    type Err = QpParseError;

    /// Parses names separated by `,`, `|`, `+` or whitespace (`STATE,CUR_STATE`,
    /// `IBV_QP_STATE | IBV_QP_PKEY_INDEX`), numbers (`0x31`, `49`) or a mix; `none` or the
    /// empty string is the empty mask. Names are case-insensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut mask = AttrMask::EMPTY;
        for token in s.split([',', '|', '+', ' ', '\t']) {
            let t = token.trim();
            if t.is_empty() || t.eq_ignore_ascii_case("none") {
                continue;
            }
            if t.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                let n = parse_number(t).ok_or_else(|| QpParseError::InvalidNumber {
                    token: t.into(),
                    input: s.into(),
                })?;
                mask |= AttrMask(n);
            } else {
                mask |= AttrMask::from_name(t).ok_or_else(|| QpParseError::UnknownAttribute {
                    token: t.into(),
                    input: s.into(),
                })?;
            }
        }
        Ok(mask)
    }
}

impl Serialize for AttrMask {
    /// As its display form (`"STATE|CUR_STATE"`), so JSON output is readable.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AttrMask {
    /// From a string ([`AttrMask::from_str`]) or a number.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Num(u32),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Num(n) => Ok(AttrMask(n)),
            Repr::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The transition table
// ---------------------------------------------------------------------------------------------

/// What one `from → to` transition of one QP type requires and allows, besides `STATE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TransitionRule {
    /// The state the QP is in.
    pub from: QpState,
    /// The state asked for.
    pub to: QpState,
    /// The QP's type.
    pub qp_type: QpType,
    /// Attributes that must be in the mask (besides `STATE`).
    pub required: AttrMask,
    /// Attributes that may be in the mask.
    pub optional: AttrMask,
}

impl TransitionRule {
    /// Every attribute the mask may contain: required, optional and `STATE`.
    pub fn permitted(&self) -> AttrMask {
        self.required | self.optional | AttrMask::STATE
    }
}

/// True if the core table has the `from → to` transition at all (for any type).
///
/// RESET is reachable from every state and ERR from every state except RESET; ERR leads only
/// to RESET or ERR.
pub(crate) fn is_valid_transition(from: QpState, to: QpState) -> bool {
    use QpState::*;
    matches!(
        (from, to),
        (Reset | Init | Rtr | Rts | Sqd | Sqe | Err, Reset)
            | (Init | Rtr | Rts | Sqd | Sqe | Err, Err)
            | (Reset, Init)
            | (Init, Init)
            | (Init, Rtr)
            | (Rtr, Rts)
            | (Rts, Rts)
            | (Rts, Sqd)
            | (Sqd, Rts)
            | (Sqd, Sqd)
            | (Sqe, Rts)
    )
}

/// The states the core table lets a QP in `from` move to, in kernel order.
pub fn valid_targets(from: QpState) -> Vec<QpState> {
    QpState::ALL
        .iter()
        .copied()
        .filter(|&to| is_valid_transition(from, to))
        .collect()
}

/// Attribute groups that recur in the table, named for readability.
mod groups {
    use super::AttrMask as M;

    /// RESET→INIT (required) and INIT→INIT (optional) of connected QPs.
    pub(crate) const CONN_INIT: M = M(M::PKEY_INDEX.0 | M::PORT.0 | M::ACCESS_FLAGS.0);
    /// RESET→INIT and INIT→INIT of UD QPs.
    pub(crate) const UD_INIT: M = M(M::PKEY_INDEX.0 | M::PORT.0 | M::QKEY.0);
    /// The datagram special QPs' (SMI/GSI) keys.
    pub(crate) const PKEY_QKEY: M = M(M::PKEY_INDEX.0 | M::QKEY.0);
    /// INIT→RTR required, UC and XRC initiator.
    pub(crate) const RTR_BASE: M = M(M::AV.0 | M::PATH_MTU.0 | M::DEST_QPN.0 | M::RQ_PSN.0);
    /// INIT→RTR required, RC and XRC target (they have a responder side).
    pub(crate) const RTR_RESPONDER: M =
        M(RTR_BASE.0 | M::MAX_DEST_RD_ATOMIC.0 | M::MIN_RNR_TIMER.0);
    /// INIT→RTR optional, connected types.
    pub(crate) const RTR_CONN_OPT: M = M(M::ALT_PATH.0 | M::ACCESS_FLAGS.0 | M::PKEY_INDEX.0);
    /// RTR→RTS required, RC and XRC initiator (they have a requester side).
    pub(crate) const RTS_REQUESTER: M =
        M(M::TIMEOUT.0 | M::RETRY_CNT.0 | M::RNR_RETRY.0 | M::SQ_PSN.0 | M::MAX_QP_RD_ATOMIC.0);
    /// Optional into RTS (RTR→RTS, RTS→RTS, SQD→RTS) for datagram types.
    pub(crate) const RTS_DGRAM_OPT: M = M(M::CUR_STATE.0 | M::QKEY.0);
    /// Optional into RTS for UC and XRC initiator.
    pub(crate) const RTS_UC_OPT: M =
        M(M::CUR_STATE.0 | M::ALT_PATH.0 | M::ACCESS_FLAGS.0 | M::PATH_MIG_STATE.0);
    /// Optional into RTS for RC and XRC target.
    pub(crate) const RTS_RC_OPT: M = M(RTS_UC_OPT.0 | M::MIN_RNR_TIMER.0);
}

/// `(required, optional)` of the core table, for a valid transition and a type it covers.
fn table_masks(from: QpState, to: QpState, t: QpType) -> (AttrMask, AttrMask) {
    use groups::*;
    use QpState::*;
    use QpType::*;
    let none = AttrMask::EMPTY;
    match (from, to) {
        (Reset, Init) => {
            let req = match t {
                Ud => UD_INIT,
                RawPacket => AttrMask::PORT,
                Uc | Rc | XrcIni | XrcTgt => CONN_INIT,
                Smi | Gsi => PKEY_QKEY,
                RawIpv6 | RawEthertype | Driver => none,
            };
            (req, none)
        }
        (Init, Init) => {
            let opt = match t {
                Ud => UD_INIT,
                Uc | Rc | XrcIni | XrcTgt => CONN_INIT,
                Smi | Gsi => PKEY_QKEY,
                RawPacket | RawIpv6 | RawEthertype | Driver => none,
            };
            (none, opt)
        }
        (Init, Rtr) => match t {
            Uc | XrcIni => (RTR_BASE, RTR_CONN_OPT),
            Rc | XrcTgt => (RTR_RESPONDER, RTR_CONN_OPT),
            Ud | Smi | Gsi => (none, PKEY_QKEY),
            RawPacket | RawIpv6 | RawEthertype | Driver => (none, none),
        },
        (Rtr, Rts) => match t {
            Ud | Smi | Gsi => (AttrMask::SQ_PSN, RTS_DGRAM_OPT),
            Uc => (AttrMask::SQ_PSN, RTS_UC_OPT),
            Rc => (RTS_REQUESTER, RTS_RC_OPT),
            XrcIni => (RTS_REQUESTER, RTS_UC_OPT),
            XrcTgt => (AttrMask::TIMEOUT | AttrMask::SQ_PSN, RTS_RC_OPT),
            RawPacket => (none, AttrMask::RATE_LIMIT),
            RawIpv6 | RawEthertype | Driver => (none, none),
        },
        (Rts, Rts) => match t {
            Ud | Smi | Gsi => (none, RTS_DGRAM_OPT),
            Uc | XrcIni => (none, RTS_UC_OPT),
            Rc | XrcTgt => (none, RTS_RC_OPT),
            RawPacket => (none, AttrMask::RATE_LIMIT),
            RawIpv6 | RawEthertype | Driver => (none, none),
        },
        (Rts, Sqd) => match t {
            Ud | Uc | Rc | XrcIni | XrcTgt | Smi | Gsi => (none, AttrMask::EN_SQD_ASYNC_NOTIFY),
            RawPacket | RawIpv6 | RawEthertype | Driver => (none, none),
        },
        (Sqd, Rts) => match t {
            Ud | Smi | Gsi => (none, RTS_DGRAM_OPT),
            Uc | XrcIni => (none, RTS_UC_OPT),
            Rc | XrcTgt => (none, RTS_RC_OPT),
            RawPacket | RawIpv6 | RawEthertype | Driver => (none, none),
        },
        (Sqd, Sqd) => {
            let common = AttrMask::ALT_PATH
                | AttrMask::ACCESS_FLAGS
                | AttrMask::PKEY_INDEX
                | AttrMask::PATH_MIG_STATE;
            let opt = match t {
                Ud | Smi | Gsi => PKEY_QKEY,
                Uc => common | AttrMask::AV,
                Rc => {
                    common
                        | AttrMask::PORT
                        | AttrMask::AV
                        | AttrMask::TIMEOUT
                        | AttrMask::RETRY_CNT
                        | AttrMask::RNR_RETRY
                        | AttrMask::MAX_QP_RD_ATOMIC
                        | AttrMask::MAX_DEST_RD_ATOMIC
                        | AttrMask::MIN_RNR_TIMER
                }
                XrcIni => {
                    common
                        | AttrMask::PORT
                        | AttrMask::AV
                        | AttrMask::TIMEOUT
                        | AttrMask::RETRY_CNT
                        | AttrMask::RNR_RETRY
                        | AttrMask::MAX_QP_RD_ATOMIC
                }
                XrcTgt => {
                    common
                        | AttrMask::PORT
                        | AttrMask::AV
                        | AttrMask::TIMEOUT
                        | AttrMask::MAX_DEST_RD_ATOMIC
                        | AttrMask::MIN_RNR_TIMER
                }
                RawPacket | RawIpv6 | RawEthertype | Driver => none,
            };
            (none, opt)
        }
        (Sqe, Rts) => {
            let opt = match t {
                Ud | Smi | Gsi => RTS_DGRAM_OPT,
                Uc => AttrMask::CUR_STATE | AttrMask::ACCESS_FLAGS,
                // RC and XRC QPs never enter SQE (a send error takes them to ERR), so the
                // table lists nothing for them.
                Rc | XrcIni | XrcTgt | RawPacket | RawIpv6 | RawEthertype | Driver => none,
            };
            (none, opt)
        }
        // RESET and ERR targets (and RESET→RESET, ERR→ERR) take no attributes.
        _ => (none, none),
    }
}

/// The rule of the core table for `from → to` on a QP of `qp_type`, or `None` when the table
/// has no such transition: forbidden transitions, the UNKNOWN state, and DRIVER QPs (the
/// core table does not describe them; their driver validates on its own).
pub fn rule(from: QpState, to: QpState, qp_type: QpType) -> Option<TransitionRule> {
    if from == QpState::Unknown || to == QpState::Unknown || qp_type == QpType::Driver {
        return None;
    }
    if !is_valid_transition(from, to) {
        return None;
    }
    let (required, optional) = table_masks(from, to, qp_type);
    Some(TransitionRule {
        from,
        to,
        qp_type,
        required,
        optional,
    })
}

/// True if `IB_QP_CUR_STATE` may appear in a mask at all while the QP is in `from`
/// (`ib_modify_qp_is_ok()`: only RTR, RTS, SQD and SQE).
pub(crate) fn cur_state_allowed_from(from: QpState) -> bool {
    matches!(
        from,
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
    )
}

/// Why the kernel's core would refuse a `modify_qp`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransitionError {
    /// One of the states is UNKNOWN: nothing can be said until the real state is known.
    #[error(
        "{from} -> {to}: the QP state is UNKNOWN; query the QP (`rdma resource show qp`) \
         to learn its real state"
    )]
    UnknownState {
        /// The state the QP is in.
        from: QpState,
        /// The state asked for.
        to: QpState,
    },
    /// The mask has no `STATE` bit, so no transition is requested at all.
    #[error(
        "{from} -> {to}: the attribute mask ({mask}) lacks STATE, so the modify asks for no \
         state change; add STATE to request {to}"
    )]
    StateMissing {
        /// The state the QP is in.
        from: QpState,
        /// The state asked for.
        to: QpState,
        /// The mask given.
        mask: AttrMask,
    },
    /// The IB spec has no such transition.
    #[error(
        "{from} -> {to} is forbidden by the IB spec for any QP, here of type {qp_type} (kernel \
         qp_state_table): from {from} a QP can only go to {}",
        join_states(&valid_targets(*from))
    )]
    Forbidden {
        /// The state the QP is in.
        from: QpState,
        /// The state asked for.
        to: QpState,
        /// The QP's type.
        qp_type: QpType,
    },
    /// DRIVER QPs (vendor-specific, e.g. mlx5 DC) are validated by their driver, not by the
    /// core table.
    #[error(
        "{from} -> {to}: DRIVER QPs are validated by their driver, not by the core \
         qp_state_table; nothing can be said here"
    )]
    DriverDefined {
        /// The state the QP is in.
        from: QpState,
        /// The state asked for.
        to: QpState,
    },
    /// The transition exists, but the mask lacks required attributes and/or holds
    /// attributes the transition does not take.
    #[error("{}", describe_attr_error(*from, *to, *qp_type, *missing, *not_allowed))]
    Attributes {
        /// The state the QP is in.
        from: QpState,
        /// The state asked for.
        to: QpState,
        /// The QP's type.
        qp_type: QpType,
        /// Required attributes absent from the mask (may be empty).
        missing: AttrMask,
        /// Attributes in the mask the transition does not take (may be empty).
        not_allowed: AttrMask,
    },
}

fn join_states(states: &[QpState]) -> String {
    let names: Vec<&str> = states.iter().map(|s| s.name()).collect();
    names.join(", ")
}

fn describe_attr_error(
    from: QpState,
    to: QpState,
    t: QpType,
    missing: AttrMask,
    not_allowed: AttrMask,
) -> String {
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing required attributes {missing}"));
    }
    if !not_allowed.is_empty() {
        let mut s = format!("attributes not allowed {not_allowed}");
        if not_allowed.contains(AttrMask::CUR_STATE) && !cur_state_allowed_from(from) {
            s.push_str(&format!(
                " (CUR_STATE may only be given from RTR, RTS, SQD or SQE, not {from})"
            ));
        }
        parts.push(s);
    }
    format!("{from} -> {to} (QP type {t}): {}", parts.join("; "))
}

/// Checks a `modify_qp(from → to)` of a `qp_type` QP with attribute `mask` the way the
/// kernel's `ib_modify_qp_is_ok()` does, plus the requirement that `STATE` is in the mask
/// (drivers only consult the table when it is).
///
/// Order of checks: UNKNOWN state, STATE missing, forbidden transition, DRIVER type, then
/// attributes (missing and not-allowed are reported together).
pub fn check_transition(
    from: QpState,
    to: QpState,
    qp_type: QpType,
    mask: AttrMask,
) -> Result<(), TransitionError> {
    if from == QpState::Unknown || to == QpState::Unknown {
        return Err(TransitionError::UnknownState { from, to });
    }
    if !mask.contains(AttrMask::STATE) {
        return Err(TransitionError::StateMissing { from, to, mask });
    }
    if !is_valid_transition(from, to) {
        return Err(TransitionError::Forbidden { from, to, qp_type });
    }
    let Some(r) = rule(from, to, qp_type) else {
        return Err(TransitionError::DriverDefined { from, to });
    };
    let missing = r.required.difference(mask);
    let mut not_allowed = mask.difference(r.permitted());
    // The kernel refuses CUR_STATE from RESET/INIT/ERR before it looks at the table; no
    // valid transition from those states lists it, so it already is in `not_allowed`, but
    // keep the rule explicit in case the table ever changes.
    if mask.contains(AttrMask::CUR_STATE) && !cur_state_allowed_from(from) {
        not_allowed |= AttrMask::CUR_STATE;
    }
    if missing.is_empty() && not_allowed.is_empty() {
        Ok(())
    } else {
        Err(TransitionError::Attributes {
            from,
            to,
            qp_type,
            missing,
            not_allowed,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Explanations for operators
// ---------------------------------------------------------------------------------------------

/// The verdict on one transition, with everything an operator needs to act on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransitionExplanation {
    /// The state the QP is in.
    pub from: QpState,
    /// The state asked for.
    pub to: QpState,
    /// The QP's type.
    pub qp_type: QpType,
    /// The QP number, when known (QP 1 is the kernel's GSI QP).
    pub qpn: Option<u32>,
    /// The mask given.
    pub mask: AttrMask,
    /// Whether the kernel's core would accept it.
    pub allowed: bool,
    /// Why not, when not allowed.
    pub error: Option<TransitionError>,
    /// The table's rule for this transition, if the table has one.
    pub rule: Option<TransitionRule>,
    /// Required attributes absent from the mask.
    pub missing: AttrMask,
    /// Attributes in the mask the transition does not take.
    pub not_allowed: AttrMask,
    /// States reachable from `from`.
    pub valid_targets: Vec<QpState>,
    /// Background an operator should know (what the kernel does here, which is usual).
    pub notes: Vec<String>,
    /// What brings the QP back (empty when allowed and nothing needs doing).
    pub recovery: Vec<String>,
}

/// Explains a transition: the verdict of [`check_transition`] plus the rule, the valid
/// targets, background notes and what recovers the QP. Pure; see
/// [`explain_qp_transition`] when the QP number is known.
pub fn explain_transition(
    from: QpState,
    to: QpState,
    qp_type: QpType,
    mask: AttrMask,
) -> TransitionExplanation {
    explain_inner(from, to, qp_type, mask, None)
}

/// Like [`explain_transition`], for a known QP number (e.g. from the irdma line
/// `modify_qp invalid for qp_id=1, …`): QP 0 and QP 1 are the kernel's SMI and GSI QPs.
///
/// Kernel lines do not carry the attribute mask. For QP 0/1 going to RTS it is the MAD
/// layer's [`AttrMask::MAD_SQE_TO_RTS`]; for a forbidden transition the mask does not
/// change the verdict.
///
/// ```
/// use iser_guard_core::qp::{explain_qp_transition, AttrMask, QpState, QpType};
///
/// // ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3
/// let from: QpState = "0x6".parse().unwrap();
/// let to: QpState = "0x3".parse().unwrap();
/// let x = explain_qp_transition(1, from, to, QpType::Gsi, AttrMask::MAD_SQE_TO_RTS);
/// assert!(!x.allowed);
/// assert!(x.to_string().contains("only re-creating the RDMA device re-creates the QP"));
/// ```
pub fn explain_qp_transition(
    qpn: u32,
    from: QpState,
    to: QpState,
    qp_type: QpType,
    mask: AttrMask,
) -> TransitionExplanation {
    explain_inner(from, to, qp_type, mask, Some(qpn))
}

const KERNEL_OWNED_RECOVERY: &str = "userspace cannot modify it (the MAD layer creates and owns \
     QP 0 and QP 1 of every port) and the kernel never walks it back through RESET: only \
     re-creating the RDMA device re-creates the QP (`iser-guard recover DEVICE` does that for \
     the one affected device)";

fn explain_inner(
    from: QpState,
    to: QpState,
    qp_type: QpType,
    mask: AttrMask,
    qpn: Option<u32>,
) -> TransitionExplanation {
    let verdict = check_transition(from, to, qp_type, mask);
    let r = rule(from, to, qp_type);
    let (missing, not_allowed) = match &verdict {
        Err(TransitionError::Attributes {
            missing,
            not_allowed,
            ..
        }) => (*missing, *not_allowed),
        _ => (AttrMask::EMPTY, AttrMask::EMPTY),
    };
    let kernel_owned =
        qp_type.is_kernel_owned_special() || qpn.and_then(QpType::of_special_qpn).is_some();
    let qp_label = match qpn {
        Some(n) => format!("QP {n} ({qp_type})"),
        None => format!("a QP of type {qp_type}"),
    };
    let mut notes = Vec::new();
    let mut recovery = Vec::new();

    if kernel_owned && to == QpState::Rts && matches!(from, QpState::Sqe | QpState::Err) {
        notes.push(
            "after a failed send on QP 0/1 the MAD layer asks SQE -> RTS with STATE|CUR_STATE, \
             assuming UD behaviour (a send error moves a UD QP to SQE); a driver that moved the \
             QP to ERR instead, or ignores CUR_STATE and checks its cached state (irdma), turns \
             it into a forbidden ERR -> RTS and fails with EINVAL (-22)"
                .to_string(),
        );
    }
    if from == QpState::Sqe && matches!(qp_type, QpType::Rc | QpType::XrcIni | QpType::XrcTgt) {
        notes.push(format!(
            "{qp_type} QPs never enter SQE: a send error takes them to ERR"
        ));
    }
    if from == QpState::Reset && to == QpState::Err {
        notes.push(
            "older kernels allowed RESET -> ERR; current ones do not: move to INIT first"
                .to_string(),
        );
    }

    match &verdict {
        Ok(()) if kernel_owned && from == QpState::Err => {
            notes.push(format!(
                "the spec allows this, but only the kernel may modify {qp_label} and the MAD \
                 layer never walks it back from ERR"
            ));
            recovery.push(format!("for {qp_label} {KERNEL_OWNED_RECOVERY}"));
        }
        Ok(()) => {}
        Err(TransitionError::UnknownState { .. }) => {
            recovery.push(
                "query the QP's real state (`rdma resource show qp`) and explain again with it"
                    .to_string(),
            );
        }
        Err(TransitionError::StateMissing { .. }) => {
            recovery.push(format!(
                "add STATE to the mask to request {to}; without it the modify only changes \
                 attributes and drivers treat it as {from} -> {from}"
            ));
        }
        Err(TransitionError::DriverDefined { .. }) => {
            recovery.push("check the driver's own modify_qp rules for this DRIVER QP".to_string());
        }
        Err(TransitionError::Forbidden { .. }) => {
            if from == QpState::Err {
                recovery.push(format!(
                    "from ERR the only way out is RESET, then RESET -> INIT -> RTR -> RTS \
                     with each step's required attributes{}",
                    if kernel_owned {
                        String::new()
                    } else {
                        " (or destroy and re-create the QP)".to_string()
                    }
                ));
            } else {
                recovery.push(format!(
                    "from {from} request one of: {}",
                    join_states(&valid_targets(from))
                ));
            }
            if kernel_owned {
                recovery.push(format!(
                    "for a kernel-owned QP such as {} {KERNEL_OWNED_RECOVERY}",
                    if qpn.is_some() {
                        qp_label.clone()
                    } else {
                        "QP 1 (GSI)".to_string()
                    }
                ));
            }
        }
        Err(TransitionError::Attributes { .. }) => {
            if !missing.is_empty() {
                recovery.push(format!(
                    "add {missing} to the mask and set the matching ibv_qp_attr fields"
                ));
            }
            if !not_allowed.is_empty() {
                let may = r.map(|r| r.optional).unwrap_or_default();
                recovery.push(format!(
                    "remove {not_allowed} from the mask; {from} -> {to} for QP type {qp_type} \
                     takes only {} as optional attributes",
                    may
                ));
                if not_allowed.contains(AttrMask::CUR_STATE) && !cur_state_allowed_from(from) {
                    recovery.push(
                        "CUR_STATE may only be given when the QP is in RTR, RTS, SQD or SQE"
                            .to_string(),
                    );
                }
            }
            if kernel_owned {
                recovery.push(format!(
                    "even with a correct mask, for {qp_label} {KERNEL_OWNED_RECOVERY}"
                ));
            }
        }
    }

    TransitionExplanation {
        from,
        to,
        qp_type,
        qpn,
        mask,
        allowed: verdict.is_ok(),
        error: verdict.err(),
        rule: r,
        missing,
        not_allowed,
        valid_targets: valid_targets(from),
        notes,
        recovery,
    }
}

impl fmt::Display for TransitionExplanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = match self.qpn {
            Some(n) => format!("QP {n} ({})", self.qp_type),
            None => format!("{} QP", self.qp_type),
        };
        writeln!(
            f,
            "{} -> {} on {} with mask {}: {}",
            self.from,
            self.to,
            who,
            self.mask,
            if self.allowed {
                "allowed by the IB spec"
            } else {
                "REJECTED"
            }
        )?;
        if let Some(e) = &self.error {
            writeln!(f, "  why: {e}")?;
        }
        if let Some(r) = &self.rule {
            writeln!(
                f,
                "  rule: requires STATE{}{}, optional {}",
                if r.required.is_empty() { "" } else { "|" },
                if r.required.is_empty() {
                    String::new()
                } else {
                    r.required.to_string()
                },
                r.optional
            )?;
        }
        if !self.missing.is_empty() {
            writeln!(f, "  missing: {}", self.missing)?;
        }
        if !self.not_allowed.is_empty() {
            writeln!(f, "  not allowed: {}", self.not_allowed)?;
        }
        if self.from != QpState::Unknown {
            writeln!(
                f,
                "  from {} the spec allows: {}",
                self.from,
                join_states(&self.valid_targets)
            )?;
        }
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        for r in &self.recovery {
            writeln!(f, "  recovery: {r}")?;
        }
        Ok(())
    }
}
