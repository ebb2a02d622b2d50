//! The attributes of one `modify_qp`, as plain Rust values, and the pure decision the
//! validating wrapper makes before any FFI call.
//!
//! [`ModifyAttrs`] records which fields are set, so its mask is exact by construction;
//! [`validate`] asks the core's IB spec table ([`check_transition`]) whether the kernel's
//! core would accept it; [`explain_kernel_refusal`] says what else a driver may want when
//! the kernel still answers EINVAL. All pure: tested without hardware.

use iser_guard_core::qp::{check_transition, rule, AttrMask, QpState, QpType, TransitionError};

/// A global route (GRH): mandatory in the AV on RoCE, optional on InfiniBand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalRoute {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Index of the source GID in the port's GID table (a RoCE v2 GID on RoCE).
    pub sgid_index: u8,
    /// Hop limit (IPv4 TTL on RoCE v2).
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label.
    pub flow_label: u32,
}

/// The primary path's address vector (`ibv_ah_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressVector {
    /// Destination LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Local port.
    pub port: u8,
    /// The GRH, required on RoCE.
    pub global: Option<GlobalRoute>,
}

/// The attributes of one modify; each setter adds its bit to the mask.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModifyAttrs {
    mask: AttrMask,
    /// Target state (always set: [`ModifyAttrs::to`]).
    pub state: Option<QpState>,
    /// `qp_access_flags`.
    pub access_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `port_num`.
    pub port: u8,
    /// `path_mtu` (`ibv_mtu`).
    pub path_mtu: u32,
    /// `dest_qp_num`.
    pub dest_qpn: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `cur_qp_state`.
    pub cur_state: Option<QpState>,
    /// `ah_attr`.
    pub av: Option<AddressVector>,
}

/// `IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ`.
pub const ACCESS_DEFAULT: u32 = 1 | 2 | 4;

impl ModifyAttrs {
    /// A modify to `state` (sets STATE).
    pub fn to(state: QpState) -> ModifyAttrs {
        ModifyAttrs {
            mask: AttrMask::STATE,
            state: Some(state),
            ..ModifyAttrs::default()
        }
    }

    /// The mask: exactly the attributes set.
    pub fn mask(&self) -> AttrMask {
        self.mask
    }

    /// The target state.
    pub fn target(&self) -> QpState {
        self.state.unwrap_or(QpState::Unknown)
    }

    fn with(mut self, bit: AttrMask, f: impl FnOnce(&mut Self)) -> Self {
        self.mask |= bit;
        f(&mut self);
        self
    }

    /// Sets `pkey_index`.
    pub fn pkey_index(self, v: u16) -> Self {
        self.with(AttrMask::PKEY_INDEX, |a| a.pkey_index = v)
    }
    /// Sets `port_num`.
    pub fn port(self, v: u8) -> Self {
        self.with(AttrMask::PORT, |a| a.port = v)
    }
    /// Sets `qp_access_flags`.
    pub fn access_flags(self, v: u32) -> Self {
        self.with(AttrMask::ACCESS_FLAGS, |a| a.access_flags = v)
    }
    /// Sets `path_mtu`.
    pub fn path_mtu(self, v: u32) -> Self {
        self.with(AttrMask::PATH_MTU, |a| a.path_mtu = v)
    }
    /// Sets `dest_qp_num`.
    pub fn dest_qpn(self, v: u32) -> Self {
        self.with(AttrMask::DEST_QPN, |a| a.dest_qpn = v)
    }
    /// Sets `rq_psn`.
    pub fn rq_psn(self, v: u32) -> Self {
        self.with(AttrMask::RQ_PSN, |a| a.rq_psn = v)
    }
    /// Sets `sq_psn`.
    pub fn sq_psn(self, v: u32) -> Self {
        self.with(AttrMask::SQ_PSN, |a| a.sq_psn = v)
    }
    /// Sets `max_dest_rd_atomic`.
    pub fn max_dest_rd_atomic(self, v: u8) -> Self {
        self.with(AttrMask::MAX_DEST_RD_ATOMIC, |a| a.max_dest_rd_atomic = v)
    }
    /// Sets `max_rd_atomic`.
    pub fn max_rd_atomic(self, v: u8) -> Self {
        self.with(AttrMask::MAX_QP_RD_ATOMIC, |a| a.max_rd_atomic = v)
    }
    /// Sets `min_rnr_timer`.
    pub fn min_rnr_timer(self, v: u8) -> Self {
        self.with(AttrMask::MIN_RNR_TIMER, |a| a.min_rnr_timer = v)
    }
    /// Sets `timeout`.
    pub fn timeout(self, v: u8) -> Self {
        self.with(AttrMask::TIMEOUT, |a| a.timeout = v)
    }
    /// Sets `retry_cnt`.
    pub fn retry_cnt(self, v: u8) -> Self {
        self.with(AttrMask::RETRY_CNT, |a| a.retry_cnt = v)
    }
    /// Sets `rnr_retry`.
    pub fn rnr_retry(self, v: u8) -> Self {
        self.with(AttrMask::RNR_RETRY, |a| a.rnr_retry = v)
    }
    /// Sets `cur_qp_state`.
    pub fn cur_state(self, v: QpState) -> Self {
        self.with(AttrMask::CUR_STATE, |a| a.cur_state = Some(v))
    }
    /// Sets the primary AV.
    pub fn av(self, v: AddressVector) -> Self {
        self.with(AttrMask::AV, |a| a.av = Some(v))
    }

    /// RESET -> INIT of a connected QP: P_Key index 0, the port, local write plus remote
    /// read/write.
    pub fn rc_init(port: u8) -> Self {
        ModifyAttrs::to(QpState::Init)
            .pkey_index(0)
            .port(port)
            .access_flags(ACCESS_DEFAULT)
    }

    /// INIT -> RTR of an RC QP towards `dest_qpn` over `av`.
    pub fn rc_rtr(dest_qpn: u32, rq_psn: u32, path_mtu: u32, av: AddressVector) -> Self {
        ModifyAttrs::to(QpState::Rtr)
            .path_mtu(path_mtu)
            .dest_qpn(dest_qpn)
            .rq_psn(rq_psn)
            .max_dest_rd_atomic(1)
            .min_rnr_timer(12)
            .av(av)
    }

    /// RTR -> RTS of an RC QP: the requester's timeout and retries.
    pub fn rc_rts(sq_psn: u32) -> Self {
        ModifyAttrs::to(QpState::Rts)
            .timeout(14)
            .retry_cnt(7)
            .rnr_retry(7)
            .sq_psn(sq_psn)
            .max_rd_atomic(1)
    }
}

/// The decision of the validating `modify_qp`, made before any FFI call: the kernel's core
/// would accept `from -> attrs.target()` for a `qp_type` QP with this mask.
pub fn validate(
    from: QpState,
    qp_type: QpType,
    attrs: &ModifyAttrs,
) -> Result<(), TransitionError> {
    check_transition(from, attrs.target(), qp_type, attrs.mask())
}

/// The rule of a transition in words: `RESET -> INIT (RC) requires STATE|PKEY_INDEX|...,
/// takes optionally none`.
pub fn rule_text(from: QpState, to: QpState, qp_type: QpType) -> String {
    match rule(from, to, qp_type) {
        Some(r) => format!(
            "the IB spec rule for {from} -> {to} ({qp_type}) requires {}, takes optionally {}",
            r.required | AttrMask::STATE,
            r.optional
        ),
        None => format!("the IB spec table has no {from} -> {to} for {qp_type}"),
    }
}

/// What to say when the table accepted a modify and the kernel still answered `errno`:
/// the rule, and the driver-level requirements the table does not express.
pub fn explain_kernel_refusal(
    from: QpState,
    qp_type: QpType,
    attrs: &ModifyAttrs,
    errno: i32,
    roce: bool,
) -> String {
    let to = attrs.target();
    let mut s = rule_text(from, to, qp_type);
    s.push_str(&format!("; the mask {} satisfies it", attrs.mask()));
    let mut hints = Vec::new();
    if errno == libc::EINVAL {
        hints.push(format!(
            "the QP may no longer be in {from} (an error completion or the driver moved it; \
             query it and walk again from its real state)"
        ));
        if to == QpState::Rtr {
            if roce && attrs.av.is_some_and(|av| av.global.is_none()) {
                hints.push(
                    "RoCE needs a global route in the AV (is_global=1, sgid_index of a RoCE \
                     GID, hop_limit)"
                        .into(),
                );
            } else if roce {
                hints.push(
                    "on RoCE the sgid_index must name a valid RoCE GID of this port and the \
                     destination GID must be resolvable to a MAC address"
                        .into(),
                );
            }
            hints.push("path_mtu must not exceed the port's active MTU".into());
        }
        if to == QpState::Init {
            hints.push("the port number and the P_Key index must exist on the device".into());
        }
    }
    if !hints.is_empty() {
        s.push_str("; the driver may also want: ");
        s.push_str(&hints.join("; "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn av() -> AddressVector {
        AddressVector {
            dlid: 0,
            sl: 0,
            port: 1,
            global: Some(GlobalRoute {
                dgid: [0; 16],
                sgid_index: 1,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }),
        }
    }

    #[test]
    fn setters_build_the_exact_mask() {
        let a = ModifyAttrs::rc_init(1);
        assert_eq!(
            a.mask(),
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS
        );
        assert_eq!(a.target(), QpState::Init);
        assert_eq!(ModifyAttrs::to(QpState::Err).mask(), AttrMask::STATE);
    }

    #[test]
    fn the_walk_the_self_test_uses_passes_the_table() {
        let rc = QpType::Rc;
        assert_eq!(
            validate(QpState::Reset, rc, &ModifyAttrs::rc_init(1)),
            Ok(())
        );
        assert_eq!(
            validate(QpState::Init, rc, &ModifyAttrs::rc_rtr(7, 1, 3, av())),
            Ok(())
        );
        assert_eq!(validate(QpState::Rtr, rc, &ModifyAttrs::rc_rts(1)), Ok(()));
        assert_eq!(
            validate(QpState::Rts, rc, &ModifyAttrs::to(QpState::Err)),
            Ok(())
        );
        assert_eq!(
            validate(QpState::Err, rc, &ModifyAttrs::to(QpState::Reset)),
            Ok(())
        );
    }
}
