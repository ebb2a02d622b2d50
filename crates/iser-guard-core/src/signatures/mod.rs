//! Kernel log records → typed events (pure: no I/O, no clock).
//!
//! What it recognises (formats: shared reference kernel-facts §1, §1.6, §4.4; real lines from
//! the lab captures):
//! - the QP state machine: irdma `modify_qp invalid for qp_id=N, old_state=0xN,
//!   new_state=0xN` ([`SignatureKind::StuckQpTransition`]), the MAD layer's failed return to
//!   RTS ([`SignatureKind::MadRtsFailed`]), `Fatal error (N) on MAD QP (N)`, MAD start-up
//!   errors, irdma `abnormal ae_id`, the invalid-transition messages of bnxt_re (three
//!   lines), qedr (two lines), hns and rxe, and rxe's dynamic-debug QP state lines;
//! - ports and links: `infiniband D: set down|set active`, RoCE NIC link down/up;
//! - iSCSI/iSER: conn errors with their code, session recovery timeout, nopout/TMF/ping
//!   failures, `iser_err_comp`, iSER port events, task-init failures;
//! - SCSI and block: `FAILED Result: hostbyte=…`, `I/O error, dev sdX`, `rejecting I/O to
//!   offline device`;
//! - RDMA CM dynamic-debug errors (`REJECTED: invalid service ID`, `ADDR_ERROR`).
//!
//! Device attribution combines the printk prefix (`ice 0000:02:00.0 rocep2s0f0: `), words of
//! the message (`on device D port N`, `[sda]`) and the record's `DEVICE=` dictionary value.
//!
//! Cost: a record that matches nothing costs one multi-pattern scan of its bytes (see
//! [`prefilter`]); nothing is allocated or decoded for it.
//!
//! Under the signatures, [`subsystem`] recognises every line of the subsystems an RDMA
//! storage host depends on by its printk prefix, module tag or source path, for explaining
//! and counting only; the signatures stay the only source of actions.
//!
//! Entry points: [`classify`] (text + optional `DEVICE=` value), [`classify_bytes`],
//! [`classify_decoded`],
//! [`classify_record`] (a parsed /dev/kmsg [`Record`]), and for scanning whole saved logs
//! [`prefilter`] / [`next_anchor`].

mod classify;
mod device;
pub mod explain;
pub mod subsystem;
mod types;

pub use classify::{anchors, classify, classify_bytes, classify_decoded, next_anchor, prefilter};
pub use explain::{explain, operator_alert, Explanation, Seriousness};
pub use types::{
    IscsiErr, IserFailure, KernelBugKind, KernelEvent, NamedDevices, RdmaDriver, Signature,
    SignatureKind, GSI_QPN, SMI_QPN,
};

use crate::kmsg::Record;

/// Classifies a /dev/kmsg record: its text with its `DEVICE=` dictionary value. Records
/// written by userspace (facility ≠ 0) are classified too, but marked untrusted.
pub fn classify_record(record: &Record) -> Option<KernelEvent> {
    // The reader has decoded the escapes already: do not decode twice.
    let signature = classify_decoded(&record.text, record.dict_value("DEVICE"))?;
    Some(KernelEvent {
        seq: record.seq,
        usec: record.usec,
        level: record.level,
        trusted: record.is_kernel(),
        signature,
    })
}
