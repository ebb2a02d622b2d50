//! What a classified signature means and what recovers it, for operators (`iser-guard
//! explain`) and for the reasons the daemon logs. Pure: the QP verdicts come from
//! [`crate::qp`]'s transition table, the recovery commands from the device attribution.

use serde::Serialize;

use super::types::{NamedDevices, RdmaDriver, Signature, SignatureKind, GSI_QPN};
use crate::qp::{
    explain_qp_transition, explain_transition, AttrMask, QpState, QpType, TransitionExplanation,
};

/// How serious a signature is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Seriousness {
    /// State news (port active, link up).
    Info,
    /// Something failed and may recover by itself (iSCSI reconnects, I/O errors).
    Warning,
    /// A forbidden QP transition or a stuck GSI QP: it will not recover by itself.
    Critical,
}

/// The explanation of one signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// One line: what happened, e.g. `irdma refused modify_qp of QP 1 (GSI): ERR -> RTS`.
    pub title: String,
    /// The kernel component that printed it (`irdma`, `ib_mad`, `libiscsi`, …).
    pub source: &'static str,
    /// How serious it is.
    pub severity: Seriousness,
    /// A forbidden QP transition or a stuck GSI QP: `explain` exits 1 when one is found.
    pub finding: bool,
    /// The record shows the GSI QP (QP 1) of its port stuck in ERR (or on its way there):
    /// only re-creating the RDMA device restores the port.
    pub stuck_gsi: bool,
    /// The verdict of the IB spec's QP state table on the reported transition, if the
    /// signature reports one.
    pub transition: Option<TransitionExplanation>,
    /// What it means, in sentences.
    pub meaning: Vec<String>,
    /// What recovers it, most specific first; commands in backquotes.
    pub recovery: Vec<String>,
}

/// Explains a signature.
pub fn explain(sig: &Signature) -> Explanation {
    let dev = &sig.device;
    let name = dev.rdma_dev.as_deref().unwrap_or("the RDMA device");
    let mut meaning = Vec::new();
    let mut recovery = Vec::new();
    let mut transition = None;
    let mut finding = false;
    let mut stuck = false;
    let (title, source, severity) = match &sig.kind {
        SignatureKind::StuckQpTransition { qp, from, to } => {
            let t = qp_verdict(*qp, *from, *to, None);
            let qt = t.qp_type;
            stuck = sig.kind.is_stuck_gsi();
            finding = !t.allowed || stuck;
            if sig.kind.is_stuck_gsi() {
                meaning.push(format!(
                    "QP {qp} is the GSI QP of {name}: it carries the RDMA CM handshakes every \
                     iSER login needs. irdma holds it in ERR and refuses ERR -> {to}; the IB \
                     spec allows only RESET or ERR from ERR, and nothing in the kernel ever \
                     walks QP 1 back through RESET -> INIT -> RTR -> RTS"
                ));
                meaning.push(format!(
                    "the GSI QP of {name} is stuck in ERR: no new RDMA connection (iSER login) \
                     can be made on this port until the RDMA device is re-created"
                ));
                recovery.extend(recreate_commands(dev, Some(RdmaDriver::Irdma)));
            } else {
                meaning.push(format!(
                    "irdma checks its own cached QP state ({from}) and ignores CUR_STATE; it \
                     refused the modify with EINVAL"
                ));
                recovery.extend(t.recovery.iter().cloned());
            }
            transition = Some(t);
            (
                format!(
                    "irdma refused modify_qp of QP {qp} ({qt}): {from} -> {to}{}",
                    if finding { " (forbidden)" } else { "" }
                ),
                "irdma",
                Seriousness::Critical,
            )
        }
        SignatureKind::MadRtsFailed { errno, legacy } => {
            finding = true;
            stuck = true;
            let asked = explain_qp_transition(
                GSI_QPN,
                QpState::Sqe,
                QpState::Rts,
                QpType::Gsi,
                AttrMask::MAD_SQE_TO_RTS,
            );
            meaning.push(format!(
                "after a failed send on its GSI QP (QP 1) the MAD layer asked SQE -> RTS with \
                 STATE|CUR_STATE, which the IB spec {} for a QP in SQE",
                if asked.allowed { "allows" } else { "refuses" }
            ));
            meaning.push(format!(
                "the driver refused with {}: it holds QP 1 in ERR, not SQE (irdma checks its \
                 cached state and ignores CUR_STATE), and ERR -> RTS is forbidden. The MAD \
                 layer never retries through RESET, so QP 1 of {name} stays in ERR: the port \
                 cannot make new RDMA connections",
                errno_name(*errno)
            ));
            // What the driver really saw: ERR -> RTS on the GSI QP.
            transition = Some(qp_verdict(
                GSI_QPN,
                QpState::Err,
                QpState::Rts,
                Some(AttrMask::MAD_SQE_TO_RTS),
            ));
            recovery.extend(recreate_commands(dev, None));
            (
                format!(
                    "MAD layer could not return QP 1 (GSI) of {name} to RTS: {errno}{}",
                    if *legacy { " (mad_error_handler)" } else { "" }
                ),
                "ib_mad",
                Seriousness::Critical,
            )
        }
        SignatureKind::MadQpFatal { event, qp } => {
            finding = *qp == GSI_QPN;
            stuck = finding;
            meaning.push(format!(
                "the driver reported {} on MAD QP {qp}: the QP is now in ERR{}",
                ib_event_name(*event),
                if *qp == GSI_QPN {
                    "; expect `ib_modify_qp to RTS: -22` next and a stuck port"
                } else {
                    ""
                }
            ));
            if *qp == GSI_QPN {
                recovery.extend(recreate_commands(dev, None));
            }
            (
                format!("fatal async event {event} on MAD QP {qp} of {name}"),
                "ib_mad",
                Seriousness::Critical,
            )
        }
        SignatureKind::MadQpStartFailed { qp, to, errno } => {
            finding = *qp == GSI_QPN;
            stuck = finding;
            meaning.push(format!(
                "opening the port, the MAD layer could not move its new QP {qp} to {to} ({}): \
                 the port has no working MAD QP",
                errno_name(*errno)
            ));
            recovery.extend(recreate_commands(dev, None));
            (
                format!("MAD layer could not start QP {qp} of {name} ({to}: {errno})"),
                "ib_mad",
                Seriousness::Critical,
            )
        }
        SignatureKind::IrdmaAsyncError {
            ae_id,
            is_qp,
            qp,
            ae_src,
        } => {
            let ae = irdma_ae_name(*ae_id);
            meaning.push(format!(
                "irdma's hardware raised async event {ae_id:#x}{} on {} {qp}{}: irdma moves the \
                 QP to ERR and flushes it",
                ae.map(|n| format!(" ({n})")).unwrap_or_default(),
                if *is_qp { "QP" } else { "CQ" },
                ae_src.map(|s| format!(", source {s}")).unwrap_or_default()
            ));
            if *is_qp && *qp == GSI_QPN {
                meaning.push(
                    "on QP 1 this is how the GSI QP reaches ERR (e.g. an ARP entry of a \
                     powered-off target was removed); watch for the stuck-port pair of lines"
                        .to_string(),
                );
            }
            (
                format!(
                    "irdma async error {ae_id:#x} on {} {qp} of {name}",
                    if *is_qp { "QP" } else { "CQ" }
                ),
                "irdma",
                Seriousness::Warning,
            )
        }
        SignatureKind::InvalidAttrMask { driver, mask } => {
            meaning.push(format!(
                "{driver} refused a modify_qp with attribute mask {}; the QP and states follow \
                 on the next line(s)",
                AttrMask(*mask)
            ));
            (
                format!("{driver} refused attribute mask {mask:#x}"),
                driver.module(),
                Seriousness::Warning,
            )
        }
        SignatureKind::RejectedQpInfo {
            driver,
            qp,
            qp_type,
        } => {
            let t = QpType::from_kernel(*qp_type)
                .map(|t| t.to_string())
                .unwrap_or_else(|| format!("type {qp_type}"));
            meaning.push(format!(
                "{driver} refused a modify_qp of QP {qp} ({t}); the states follow on the next \
                 line"
            ));
            (
                format!("{driver} refused modify_qp of QP {qp} ({t})"),
                driver.module(),
                Seriousness::Warning,
            )
        }
        SignatureKind::InvalidTransition {
            driver,
            qp,
            qp_type,
            from,
            to,
            mask,
        } => {
            let qt = qp_type.and_then(QpType::from_kernel);
            let t = match (qp, qt) {
                (Some(q), _) => qp_verdict_typed(*q, qt, *from, *to, mask.map(AttrMask)),
                (None, Some(t)) => explain_transition(*from, *to, t, state_mask(*mask)),
                (None, None) => explain_transition(*from, *to, QpType::Rc, state_mask(*mask)),
            };
            finding = !t.allowed;
            let gsi = *qp == Some(GSI_QPN) || qt == Some(QpType::Gsi);
            if gsi && *from == QpState::Err {
                finding = true;
                stuck = true;
                meaning.push(format!(
                    "the GSI QP of {name} is in ERR and only re-creating the device restores it"
                ));
                recovery.extend(recreate_commands(dev, Some(*driver)));
            } else {
                recovery.extend(t.recovery.iter().cloned());
            }
            if qp.is_none() && qt.is_none() {
                meaning.push(
                    "this line does not name the QP; the line before it does (`for qpn: …`)"
                        .to_string(),
                );
            }
            transition = Some(t);
            (
                format!(
                    "{driver} refused modify_qp{}: {from} -> {to}",
                    qp.map(|q| format!(" of QP {q}")).unwrap_or_default()
                ),
                driver.module(),
                Seriousness::Critical,
            )
        }
        SignatureKind::ModifyQpRejected { driver } => {
            meaning.push(format!(
                "{driver} refused a modify_qp whose transition or mask the IB spec does not \
                 allow (the line does not say which)"
            ));
            (
                format!("{driver} refused a modify_qp"),
                driver.module(),
                Seriousness::Warning,
            )
        }
        SignatureKind::RxeQpState { qp, state } => {
            if *qp == GSI_QPN && *state == QpState::Err {
                finding = true;
                stuck = true;
                meaning.push(format!(
                    "the GSI QP of {name} entered ERR; rxe re-creates it only with the device"
                ));
                recovery.extend(recreate_commands(dev, Some(RdmaDriver::Rxe)));
            } else {
                meaning.push(format!(
                    "rxe (dynamic debug) moved QP {qp} to {state}{}",
                    if *state == QpState::Err {
                        "; for an iSER RC QP this is a connection being torn down"
                    } else {
                        ""
                    }
                ));
            }
            (
                format!("rxe QP {qp} -> {state}"),
                "rdma_rxe",
                if finding {
                    Seriousness::Critical
                } else {
                    Seriousness::Info
                },
            )
        }
        SignatureKind::IbPortDown => {
            meaning.push(format!(
                "the RDMA core marked {name}'s port down (its netdev lost link): iSER \
                 connections on it fail until it is active again"
            ));
            (format!("{name} port down"), "ib_core", Seriousness::Warning)
        }
        SignatureKind::IbPortActive => {
            meaning.push(format!("the RDMA core marked {name}'s port active again"));
            (format!("{name} port active"), "ib_core", Seriousness::Info)
        }
        SignatureKind::NetdevLinkDown => {
            let n = dev.netdev.as_deref().unwrap_or("the interface");
            meaning.push(format!(
                "{n} lost link: the RDMA port on it goes down (PORT_ERR); the GSI QP is not \
                 touched by a link event"
            ));
            (format!("{n} link down"), "netdev", Seriousness::Warning)
        }
        SignatureKind::NetdevLinkUp { speed } => {
            let n = dev.netdev.as_deref().unwrap_or("the interface");
            meaning.push(format!("{n} has link again"));
            (
                format!(
                    "{n} link up{}",
                    speed
                        .as_ref()
                        .map(|s| format!(" ({s}bps)"))
                        .unwrap_or_default()
                ),
                "netdev",
                Seriousness::Info,
            )
        }
        SignatureKind::IscsiConnError { code } => {
            meaning.push(format!("iSCSI error {code}: {}", code.meaning()));
            meaning.push(
                "iscsid reconnects by itself; if every reconnect fails while the target is \
                 reachable, check the initiator's RDMA port for a stuck GSI QP \
                 (`iser-guard status`)"
                    .to_string(),
            );
            (
                format!("iSCSI {} error {code}", conn_label(dev)),
                "libiscsi",
                Seriousness::Warning,
            )
        }
        SignatureKind::IscsiSessionRecoveryTimedOut { secs } => {
            meaning.push(format!(
                "the session could not be re-established within its replacement timeout \
                 ({secs} s): its disks go offline and every I/O fails"
            ));
            recovery.push(
                "once the target and the RDMA path are back: `iser-guard reconnect` (or \
                 `iscsiadm -m node -T <target> -p <portal> --logout` then `--login`)"
                    .to_string(),
            );
            (
                format!(
                    "iSCSI {} recovery timed out after {secs} s",
                    conn_label(dev)
                ),
                "scsi_transport_iscsi",
                Seriousness::Critical,
            )
        }
        SignatureKind::IscsiNopoutFailed => {
            meaning.push(
                "libiscsi could not even queue a NOP-Out ping: the transport (RDMA device or \
                 port) is unusable"
                    .to_string(),
            );
            (
                format!("iSCSI {} could not send NOP-Out", conn_label(dev)),
                "libiscsi",
                Seriousness::Warning,
            )
        }
        SignatureKind::IscsiTmfFailed => {
            meaning.push(
                "SCSI error handling could not send a task-management request: the session \
                 is about to be reset (expect conn errors 1011/1021)"
                    .to_string(),
            );
            (
                format!("iSCSI {} could not send TMF", conn_label(dev)),
                "libiscsi",
                Seriousness::Warning,
            )
        }
        SignatureKind::IscsiPingTimeout {
            timeout_secs,
            recv_timeout_secs,
        } => {
            meaning.push(format!(
                "the target did not answer a NOP-Out within {timeout_secs} s (nothing received \
                 for {recv_timeout_secs} s): target or path unreachable; conn error 1022 follows"
            ));
            (
                format!("iSCSI {} ping timeout", conn_label(dev)),
                "libiscsi",
                Seriousness::Warning,
            )
        }
        SignatureKind::IserCompletionError {
            wr,
            status,
            status_code,
            vendor_err,
        } => {
            meaning.push(format!(
                "an iSER {wr} work request completed with {status} ({status_code}), vendor \
                 error {vendor_err:#x}: iSER fails the connection (1011) and iscsid reconnects"
            ));
            (
                format!("iSER {wr} completion failed: {status}"),
                "ib_iser",
                Seriousness::Warning,
            )
        }
        SignatureKind::IserPortError => {
            meaning.push(format!(
                "iSER was told {name}'s port went down (PORT_ERR): its connections will fail"
            ));
            (
                format!("iSER: {} port error", port_label(dev)),
                "ib_iser",
                Seriousness::Warning,
            )
        }
        SignatureKind::IserPortActive => {
            meaning.push(format!("iSER was told {name}'s port is active again"));
            (
                format!("iSER: {} port active", port_label(dev)),
                "ib_iser",
                Seriousness::Info,
            )
        }
        SignatureKind::IserAsyncEvent { event, name: ev } => {
            meaning.push(format!("iSER received async event {ev} ({event})"));
            (
                format!("iSER: {} async event {ev}", port_label(dev)),
                "ib_iser",
                Seriousness::Info,
            )
        }
        SignatureKind::IserTaskInitFailed { errno } => {
            meaning.push(format!(
                "iSER could not prepare a task ({}): the RDMA device under the connection is \
                 gone or unusable",
                errno_name(*errno)
            ));
            (
                format!("iSER task init failed: {errno}"),
                "ib_iser",
                Seriousness::Warning,
            )
        }
        SignatureKind::ScsiCommandFailed {
            hostbyte,
            driverbyte,
            ..
        } => {
            meaning.push(format!(
                "a SCSI command to {} failed with hostbyte {hostbyte}{}",
                disk_label(dev),
                driverbyte
                    .as_ref()
                    .map(|d| format!(", driverbyte {d}"))
                    .unwrap_or_default()
            ));
            if hostbyte == "DID_ABORT" {
                meaning.push(
                    "DID_ABORT after the path came back is the lab's \"dead session that looks \
                     logged in\": iscsid never repairs it"
                        .to_string(),
                );
                recovery
                    .push("log the session out and in again (`iser-guard reconnect`)".to_string());
            }
            (
                format!("SCSI command failed on {}: {hostbyte}", disk_label(dev)),
                "sd",
                Seriousness::Warning,
            )
        }
        SignatureKind::BlockIoError { op, .. } => {
            meaning.push(format!(
                "a {} request to {} failed: the application saw an I/O error",
                op.as_deref().unwrap_or("block"),
                disk_label(dev)
            ));
            (
                format!("I/O error on {}", disk_label(dev)),
                "block",
                Seriousness::Warning,
            )
        }
        SignatureKind::ScsiRejectingOffline => {
            meaning.push(format!(
                "{} is offline (its iSCSI session timed out): every I/O fails until the \
                 session is logged in again",
                disk_label(dev)
            ));
            recovery.push("`iser-guard reconnect` once the target is reachable".to_string());
            (
                format!("{} offline", disk_label(dev)),
                "scsi",
                Seriousness::Critical,
            )
        }
        SignatureKind::RdmaCmRejected { reason } => {
            meaning.push(format!("the target rejected an RDMA CM connect: {reason}"));
            if reason.contains("invalid service ID") {
                meaning.push(
                    "nothing listens on the target's iSER port: its iSER portal died (e.g. with \
                     its RDMA device); the initiator cannot fix this"
                        .to_string(),
                );
                recovery.push(
                    "on the target: re-enable iSER on the portal (LIO: write 0 then 1 to \
                     …/tpgt_N/np/<ip>:3260/iser)"
                        .to_string(),
                );
            }
            (
                "RDMA CM connect rejected".to_string(),
                "rdma_cm",
                Seriousness::Warning,
            )
        }
        SignatureKind::RdmaCmAddrError { reason, status } => {
            meaning.push(format!(
                "RDMA CM address resolution failed: {reason}{}",
                status
                    .map(|s| format!(" ({})", errno_name(s)))
                    .unwrap_or_default()
            ));
            if *status == Some(-19) {
                meaning.push(
                    "no RDMA device owns the source address: the local RDMA device is missing \
                     (deleted, or its driver unbound)"
                        .to_string(),
                );
                recovery.push(
                    "bring the RDMA device back (e.g. `rdma link add` for rxe, rebind the \
                     driver); sessions return by themselves once it exists"
                        .to_string(),
                );
            }
            (
                "RDMA CM address error".to_string(),
                "rdma_cm",
                Seriousness::Warning,
            )
        }
        SignatureKind::RdmaCmError {
            event,
            detail,
            status,
        } => {
            meaning.push(format!(
                "RDMA CM {event}: {detail}{}",
                status.map(|s| format!(" ({s})")).unwrap_or_default()
            ));
            (format!("RDMA CM {event}"), "rdma_cm", Seriousness::Warning)
        }
        SignatureKind::MadPortOpenFailed { port, agents } => {
            meaning.push(format!(
                "the MAD layer could not open port {port} of {name}{}: that port has no \
                 working GSI QP (QP 1), so no RDMA CM handshake and no iSER login can run on it",
                if *agents { " for its agents" } else { "" }
            ));
            meaning.push(
                "this is printed when a device registers: right after a re-creation it means \
                 the re-creation failed (the new device came up without its MAD QPs)"
                    .to_string(),
            );
            recovery.push(format!(
                "re-create the device once more (`iser-guard reset-device {name}`); if the \
                 same line returns, the driver or firmware cannot start the port: reload the \
                 driver or reset the NIC"
            ));
            (
                format!("MAD layer could not open {name} port {port}"),
                "ib_mad",
                Seriousness::Critical,
            )
        }
        SignatureKind::MadPortSetupFailed { step } => {
            meaning.push(format!(
                "opening a port of {name} failed at `Couldn't {step}`: the port will have no \
                 MAD QPs (`Couldn't open port N` follows)"
            ));
            (
                format!("MAD port set-up failed on {name}: {step}"),
                "ib_mad",
                Seriousness::Critical,
            )
        }
        SignatureKind::DriverQpCommandFailed { driver, op } => {
            let what = match op.as_str() {
                "modify_shadow_qp1" => "modify the shadow QP of QP 1 (GSI)",
                "destroy" => "destroy a QP",
                "create" => "create a QP",
                _ => "modify a QP",
            };
            meaning.push(format!(
                "{driver}'s firmware refused to {what} on {name}: the QP keeps its old state \
                 (a QP the consumer wanted in RESET or ERR may still be live, and a QP 1 \
                 shadow failure leaves the GSI path broken)"
            ));
            if op == "modify_shadow_qp1" {
                recovery.extend(recreate_commands(dev, Some(*driver)));
            }
            (
                format!("{driver}: failed to {what} on {name}"),
                driver.module(),
                Seriousness::Warning,
            )
        }
        SignatureKind::Mlx5ErrorCompletion { status, message } => {
            meaning.push(format!(
                "a work request on {name} completed in error{}: the QP it belongs to moved to \
                 ERR; its consumer (iSER, the MAD layer for QP 1) decides what follows",
                match (status, message) {
                    (Some(s), Some(m)) => format!(" ({m}, status {s})"),
                    (Some(s), None) => format!(" (status {s})"),
                    _ => String::new(),
                }
            ));
            (
                format!(
                    "mlx5 error completion on {name}{}",
                    message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
                "mlx5_ib",
                Seriousness::Warning,
            )
        }
        SignatureKind::UnexpectedQpEvent { driver, event, qp } => {
            meaning.push(format!(
                "{driver} received asynchronous event {event} on QP {qp:#x} and does not handle it"
            ));
            (
                format!("{driver}: unexpected event {event} on QP {qp:#x}"),
                driver.module(),
                Seriousness::Info,
            )
        }
        SignatureKind::IserQpEvent { event, name: ev } => {
            meaning.push(format!(
                "an iSER connection's RC QP got the asynchronous event {ev} ({event}){}",
                match event {
                    // QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, PATH_MIG_ERR, DEVICE_FATAL.
                    1..=3 | 7 | 8 => ": the QP is in ERR, its connection fails (1011) and \
                                      iscsid reconnects"
                        .to_string(),
                    5 => ": its send queue drained (the QP is being torn down)".to_string(),
                    _ => String::new(),
                }
            ));
            meaning.push(
                "the line names no device or session: the session's port is the one whose \
                 iSCSI connection fails next"
                    .to_string(),
            );
            (
                format!("iSER QP event: {ev} ({event})"),
                "ib_iser",
                if matches!(event, 1..=3 | 7 | 8) {
                    Seriousness::Warning
                } else {
                    Seriousness::Info
                },
            )
        }
        SignatureKind::IserConnFailure { what, errno } => {
            meaning.push(format!(
                "{}{}",
                what.describe(),
                errno
                    .map(|e| format!(" ({})", errno_name(e)))
                    .unwrap_or_default()
            ));
            (
                format!("iSER: {}", what.describe()),
                "ib_iser",
                Seriousness::Warning,
            )
        }
        SignatureKind::ScsiDeviceOfflined => {
            meaning.push(format!(
                "SCSI error handling gave up on {} and set it offline: every I/O fails with \
                 `rejecting I/O to offline device` until it is set running again",
                disk_label(dev)
            ));
            recovery.push(
                "once the session is logged in again: `echo running > \
                 /sys/class/scsi_device/H:C:T:L/device/state` (or log the session out and in: \
                 `iser-guard reconnect`)"
                    .to_string(),
            );
            (
                format!("{} offlined by SCSI error handling", disk_label(dev)),
                "scsi",
                Seriousness::Critical,
            )
        }
        SignatureKind::ScsiCommandTimedOut { secs } => {
            meaning.push(format!(
                "a command to {} used up its whole time budget ({secs} s, retries included) \
                 and is failed",
                disk_label(dev)
            ));
            (
                format!("SCSI command timed out on {}", disk_label(dev)),
                "scsi",
                Seriousness::Warning,
            )
        }
        SignatureKind::ScsiRejectingDead => {
            meaning.push(format!(
                "{} is being deleted (its session was logged out or removed): I/O to it fails",
                disk_label(dev)
            ));
            (
                format!("{} deleted", disk_label(dev)),
                "scsi",
                Seriousness::Warning,
            )
        }
        SignatureKind::BlockRequestError { status, op, .. } => {
            meaning.push(format!(
                "a {} request to {} failed with `{status}`{}",
                op.as_deref().unwrap_or("block"),
                disk_label(dev),
                match status.as_str() {
                    "recoverable transport" => {
                        ": the transport (the iSCSI session) was disrupted; dm-multipath \
                         retries on another path"
                    }
                    "device offline" => ": the disk is offline",
                    "timeout" => ": the command timed out",
                    _ => "",
                }
            ));
            (
                format!("{status} error on {}", disk_label(dev)),
                "block",
                Seriousness::Warning,
            )
        }
        SignatureKind::BufferIoError { block, what } => {
            meaning.push(format!(
                "a file system on {} {}{}",
                disk_label(dev),
                match what.as_deref() {
                    Some(w) if w.starts_with("lost") => format!("{w}: data was lost"),
                    Some(w) => format!("failed an {w}"),
                    None => "failed a buffer I/O".to_string(),
                },
                block
                    .map(|b| format!(" (logical block {b})"))
                    .unwrap_or_default()
            ));
            recovery.push(
                "after the session is back, check the file system (fsck) before trusting it"
                    .to_string(),
            );
            (
                format!("buffer I/O error on {}", disk_label(dev)),
                "fs",
                Seriousness::Warning,
            )
        }
        SignatureKind::KernelBug {
            what,
            module,
            function,
            location,
            detail,
        } => {
            let whr = [module.as_deref(), function.as_deref(), location.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ");
            meaning.push(format!(
                "{}{}{}: a kernel bug, not a fault of the device, the target or the network",
                what.describe(),
                if whr.is_empty() {
                    String::new()
                } else {
                    format!(" in {whr}")
                },
                detail
                    .as_ref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ));
            meaning.push(
                "no automatic repair applies: iser-guard does not act on it (re-creating a \
                 device under a kernel bug can make it worse)"
                    .to_string(),
            );
            recovery.push(
                "save the whole report (`journalctl -k -b` or the serial console), report it to \
                 the kernel or distribution, and reboot the host if the module is wedged"
                    .to_string(),
            );
            (
                format!(
                    "{}{}",
                    what.describe(),
                    module
                        .as_ref()
                        .map(|m| format!(" in {m}"))
                        .unwrap_or_default()
                ),
                "kernel",
                Seriousness::Critical,
            )
        }
        SignatureKind::IrdmaCqpFailed {
            command,
            op_code,
            status,
            maj,
            min,
        } => {
            meaning.push(format!(
                "irdma's control QP failed `{command}` (op_code {op_code}, status {}, major \
                 0x{maj:x}, minor 0x{min:x}): the device's firmware did not carry out a \
                 command; a timed-out control QP makes irdma request a reset of the function",
                errno_name(*status)
            ));
            recovery.push(
                "if irdma then logs `Requesting a reset`, the NIC driver re-creates the RDMA \
                 device by itself: iser-guard waits for it and verifies the port afterwards"
                    .to_string(),
            );
            (
                format!("irdma control QP command failed: {command}"),
                "irdma",
                Seriousness::Warning,
            )
        }
        SignatureKind::IrdmaSuspendTimeout { qp, last_ae } => {
            meaning.push(format!(
                "irdma gave up waiting for QP {qp} to reach SQD (last asynchronous event \
                 0x{last_ae:x}): the modify_qp returned -EBUSY"
            ));
            (
                format!("irdma: QP {qp} did not suspend in time"),
                "irdma",
                Seriousness::Warning,
            )
        }
        SignatureKind::DriverResetRequested { driver } => {
            meaning.push(format!(
                "{driver} asked its NIC driver to reset the function: the NIC driver unplugs \
                 the RDMA device and plugs it in again (a re-creation by the driver, with a \
                 fresh QP 1)"
            ));
            recovery.push(
                "nothing to do by hand: iser-guard starts no re-creation of its own while the \
                 driver's is in progress, and verifies the port once the device is back"
                    .to_string(),
            );
            (
                format!("{driver} requested a reset of its device"),
                "irdma",
                Seriousness::Warning,
            )
        }
        SignatureKind::NicRebuildFailed => {
            meaning.push(
                "ice could not rebuild the function after a reset: neither its netdev nor its \
                 RDMA device works until the driver is reloaded"
                    .to_string(),
            );
            recovery.push(
                "reload the driver on a maintenance window (`modprobe -r irdma ice && modprobe \
                 ice`), or reboot; iser-guard cannot re-create a device whose function is down"
                    .to_string(),
            );
            (
                "ice: rebuild after reset failed".to_string(),
                "ice",
                Seriousness::Critical,
            )
        }
        SignatureKind::NicSafeMode => {
            meaning.push(
                "ice runs without its DDP package (safe mode), which disables RDMA: the \
                 function has no RDMA device, so no iSER session can use it"
                    .to_string(),
            );
            recovery.push(
                "install the DDP package (/lib/firmware/intel/ice/ddp/ice.pkg, package \
                 linux-firmware) and reload ice"
                    .to_string(),
            );
            (
                "ice in safe mode: RDMA disabled".to_string(),
                "ice",
                Seriousness::Critical,
            )
        }
        SignatureKind::MultipathPath { map, path, failed } => {
            let map = map
                .as_deref()
                .map(|m| format!(" of map {m}"))
                .unwrap_or_default();
            if *failed {
                meaning.push(format!(
                    "dm-multipath failed path {path}{map}: its I/O goes to the other paths, \
                     or is queued when none is left"
                ));
            } else {
                meaning.push(format!("dm-multipath reinstated path {path}{map}"));
            }
            (
                format!(
                    "multipath: path {path} {}",
                    if *failed { "failed" } else { "reinstated" }
                ),
                "dm-multipath",
                if *failed {
                    Seriousness::Warning
                } else {
                    Seriousness::Info
                },
            )
        }
        SignatureKind::UnknownVariant { anchor } => {
            meaning.push(format!(
                "the line contains `{anchor}` but not in any format iser-guard knows: the \
                 kernel's wording changed; iser-guard will not act on it (please report it)"
            ));
            (
                format!("unknown variant of a known message (`{anchor}`)"),
                "kernel",
                Seriousness::Warning,
            )
        }
    };
    Explanation {
        title,
        source,
        severity: if finding {
            Seriousness::Critical
        } else {
            severity
        },
        finding,
        stuck_gsi: stuck,
        transition,
        meaning,
        recovery,
    }
}

/// The operator alert a signature raises by itself, whatever the engine does: a kernel bug
/// in a module this job depends on (ib_iser, rdma_rxe, ib_core, …) or a panic. The text
/// names the bug and says that no automatic repair applies. `None` for everything else.
pub fn operator_alert(sig: &Signature) -> Option<String> {
    let SignatureKind::KernelBug {
        what,
        module,
        function,
        location,
        detail,
    } = &sig.kind
    else {
        return None;
    };
    let at = [function.as_deref(), location.as_deref(), detail.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "kernel bug: {}{}{}: not repairable by the agent, no automatic repair applies; save \
         the full report (journalctl -k -b) and escalate it to the kernel or distribution",
        what.describe(),
        module
            .as_ref()
            .map(|m| format!(" in {m}"))
            .unwrap_or_default(),
        if at.is_empty() {
            String::new()
        } else {
            format!(" ({at})")
        }
    ))
}

/// The commands that re-create the RDMA device a record names, least disruptive first
/// (kernel-facts §2): for an ice (E810) parent the devlink `enable_roce` toggle, for mlx5 the
/// auxiliary unbind/bind, for rxe `rdma link delete/add`; always `iser-guard reset-device`.
pub fn recreate_commands(dev: &NamedDevices, driver: Option<RdmaDriver>) -> Vec<String> {
    let mut out = Vec::new();
    let name = dev.rdma_dev.as_deref();
    let label = name.unwrap_or("<rdma device>");
    out.push(format!(
        "only re-creating the RDMA device {label} re-creates its GSI QP: `iser-guard \
         reset-device {label}` does it for this one device"
    ));
    let parent = dev.driver.as_deref();
    let rxe = driver == Some(RdmaDriver::Rxe)
        || parent == Some("rdma_rxe")
        || name.is_some_and(|n| n.starts_with("rxe"));
    match (parent, dev.pci.as_deref()) {
        (Some("ice"), Some(pci)) => {
            out.push(format!(
                "by hand (ice/irdma, only this PCI function's RDMA, netdev untouched): \
                 `devlink dev param set pci/{pci} name enable_roce value false cmode runtime` \
                 then `devlink dev param set pci/{pci} name enable_roce value true cmode runtime`"
            ));
            out.push(
                "or unbind/bind the auxiliary device: `echo ice.roce.N > \
                 /sys/bus/auxiliary/drivers/irdma/unbind` then `…/bind` (driver folder \
                 `irdma.gen_2` from Linux 6.18; N from `ls /sys/bus/auxiliary/devices`)"
                    .to_string(),
            );
        }
        (Some("mlx5_core"), pci) => {
            out.push(format!(
                "by hand (mlx5): `echo mlx5_core.rdma.N > \
                 /sys/bus/auxiliary/drivers/mlx5_ib.rdma/unbind` then `…/bind` (N: the \
                 mlx5_core.rdma.* entry under /sys/bus/pci/devices/{}/)",
                pci.unwrap_or("<pci>")
            ));
        }
        _ if rxe => {
            out.push(format!(
                "by hand (rxe): `rdma link delete {label}` then `rdma link add {label} type \
                 rxe netdev {}`",
                dev.netdev.as_deref().unwrap_or("<netdev>")
            ));
        }
        (_, Some(pci)) => {
            out.push(format!(
                "by hand: unbind and bind the RDMA auxiliary device of PCI function {pci} \
                 (/sys/bus/auxiliary/drivers/<driver>/unbind, then bind), or reload the RDMA \
                 driver module"
            ));
        }
        _ => {
            out.push(
                "by hand: unbind/bind the device's RDMA auxiliary driver, `rdma link \
                 delete/add` for rxe/siw, or reload the RDMA driver module"
                    .to_string(),
            );
        }
    }
    out
}

/// The spec's verdict on `from -> to` of QP `qp` (QP 0/1 typed SMI/GSI; others assumed RC).
fn qp_verdict(
    qp: u32,
    from: QpState,
    to: QpState,
    mask: Option<AttrMask>,
) -> TransitionExplanation {
    qp_verdict_typed(qp, None, from, to, mask)
}

fn qp_verdict_typed(
    qp: u32,
    qp_type: Option<QpType>,
    from: QpState,
    to: QpState,
    mask: Option<AttrMask>,
) -> TransitionExplanation {
    let special = QpType::of_special_qpn(qp);
    let t = qp_type.or(special).unwrap_or(QpType::Rc);
    let mask = mask.unwrap_or(if special == Some(QpType::Gsi) {
        // The MAD layer is the only one modifying QP 1 after start-up.
        AttrMask::MAD_SQE_TO_RTS
    } else {
        AttrMask::STATE
    });
    explain_qp_transition(qp, from, to, t, mask)
}

fn state_mask(mask: Option<u32>) -> AttrMask {
    mask.map(AttrMask).unwrap_or(AttrMask::STATE)
}

fn conn_label(dev: &NamedDevices) -> String {
    match (dev.iscsi_session, dev.iscsi_conn) {
        (Some(s), Some(c)) => format!("connection{s}:{c}"),
        (Some(s), None) => format!("session{s}"),
        _ => "connection".to_string(),
    }
}

fn port_label(dev: &NamedDevices) -> String {
    match (&dev.rdma_dev, dev.port) {
        (Some(d), Some(p)) => format!("{d} port {p}"),
        (Some(d), None) => d.clone(),
        _ => "device".to_string(),
    }
}

fn disk_label(dev: &NamedDevices) -> String {
    match (&dev.disk, &dev.scsi_hctl) {
        (Some(d), Some(h)) => format!("{d} ({h})"),
        (Some(d), None) => d.clone(),
        (None, Some(h)) => h.clone(),
        (None, None) => "the disk".to_string(),
    }
}

/// `-22 (EINVAL)`-style names for the errnos these messages carry.
pub fn errno_name(errno: i32) -> String {
    let n = match errno.unsigned_abs() {
        1 => "EPERM",
        5 => "EIO",
        11 => "EAGAIN",
        12 => "ENOMEM",
        16 => "EBUSY",
        19 => "ENODEV",
        22 => "EINVAL",
        95 => "EOPNOTSUPP",
        103 => "ECONNABORTED",
        104 => "ECONNRESET",
        107 => "ENOTCONN",
        110 => "ETIMEDOUT",
        111 => "ECONNREFUSED",
        113 => "EHOSTUNREACH",
        _ => return errno.to_string(),
    };
    format!("{errno} {n}")
}

/// `enum ib_event_type` names.
fn ib_event_name(event: u32) -> String {
    let n = match event {
        0 => "CQ_ERR",
        1 => "QP_FATAL",
        2 => "QP_REQ_ERR",
        3 => "QP_ACCESS_ERR",
        4 => "COMM_EST",
        5 => "SQ_DRAINED",
        6 => "PATH_MIG",
        7 => "PATH_MIG_ERR",
        8 => "DEVICE_FATAL",
        9 => "PORT_ACTIVE",
        10 => "PORT_ERR",
        _ => return format!("event {event}"),
    };
    format!("{n} ({event})")
}

/// Names of the irdma async-event ids kernel-facts §1.4 mentions.
fn irdma_ae_name(ae: u32) -> Option<&'static str> {
    Some(match ae {
        0x0401 => "INVALID_ARP_ENTRY",
        0x0403 => "STALE_ARP_ENTRY",
        0x0406 => "INVALID_AH_ENTRY",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signatures::classify;

    #[test]
    fn field_pair_is_a_finding_with_devlink_commands() {
        let s = classify(
            "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3",
            None,
        )
        .expect("classified");
        let e = explain(&s);
        assert!(e.finding);
        assert_eq!(e.severity, Seriousness::Critical);
        assert!(e.title.contains("QP 1 (GSI): ERR -> RTS"), "{}", e.title);
        let t = e.transition.as_ref().expect("transition");
        assert!(!t.allowed);
        assert_eq!(t.qp_type, QpType::Gsi);
        let all = e.recovery.join("\n");
        assert!(all.contains("iser-guard reset-device rocep2s0f0"), "{all}");
        assert!(all.contains(
            "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime"
        ));
        assert!(all.contains("value true cmode runtime"));

        let s = classify(
            "infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22",
            None,
        )
        .expect("classified");
        let e = explain(&s);
        assert!(e.finding);
        assert!(e.meaning.join(" ").contains("-22 EINVAL"));
        assert!(!e.transition.expect("transition").allowed);
    }

    #[test]
    fn rxe_and_mlx5_recovery() {
        let dev = NamedDevices {
            rdma_dev: Some("rxe_ini".into()),
            netdev: Some("ini0".into()),
            ..NamedDevices::default()
        };
        let c = recreate_commands(&dev, Some(RdmaDriver::Rxe)).join("\n");
        assert!(c.contains("rdma link delete rxe_ini"));
        assert!(c.contains("rdma link add rxe_ini type rxe netdev ini0"));
        let dev = NamedDevices {
            driver: Some("mlx5_core".into()),
            pci: Some("0000:81:00.0".into()),
            rdma_dev: Some("mlx5_0".into()),
            ..NamedDevices::default()
        };
        let c = recreate_commands(&dev, None).join("\n");
        assert!(c.contains("mlx5_ib.rdma/unbind"));
        assert!(c.contains("0000:81:00.0"));
    }

    #[test]
    fn non_gsi_allowed_transition_is_not_a_finding() {
        let s = classify("rdma_rxe: qp#21 state -> ERR", None).expect("classified");
        let e = explain(&s);
        assert!(!e.finding);
        assert_eq!(e.severity, Seriousness::Info);
    }

    #[test]
    fn every_kind_explains_without_panicking() {
        for line in [
            "infiniband x: Fatal error (1) on MAD QP (1)",
            "infiniband x: Couldn't change QP1 state to RTS: -22",
            "x: abnormal ae_id = 0x401 bool qp=1 qp_id = 1, ae_src=5",
            "bnxt_re 0000:3b:00.0 bnxt_re0: Invalid attribute mask: 0x1 specified ",
            "bnxt_re 0000:3b:00.0 bnxt_re0: for qpn: 0x1 type: 0x1",
            "bnxt_re 0000:3b:00.0 bnxt_re0: curr_qp_state=0x6, new_qp_state=0x3",
            "qpn=0x1 of type=0x1 old_qp_state=0x6, new_qp_state=0x3",
            "hns_roce_hw_v2 0000:7d:00.0 hns_0: failed to check modify qp state",
            "infiniband rxe_ini: set down",
            "infiniband rxe_ini: set active",
            "ice 0000:02:00.0 enp2s0f0: NIC Link is Down",
            "mlx5_core 0000:81:00.0 enp129s0f0np0: Link up",
            " connection3:0: detected conn error (1011)",
            " session2: session recovery timed out after 120 secs",
            " connection3:0: Could not send nopout",
            " connection3:0: Could not send TMF.",
            " connection2:0: ping timeout of 5 secs expired, recv timeout 5, last rx 1",
            "iser: iser_err_comp: command failure: local protection error (4) vend_err 0",
            "iser: iser_event_handler: async event port error (10) on device rxe_ini port 1",
            "iser: iser_event_handler: async event port active (9) on device rxe_ini port 1",
            "iser: iser_event_handler: async event LID change (11) on device rxe_ini port 1",
            "iser: iscsi_iser_task_init: Failed to init task 0, err = -19",
            "sd 0:0:0:0: [sda] tag#57 FAILED Result: hostbyte=DID_ABORT driverbyte=DRIVER_OK",
            "I/O error, dev sda, sector 128 op 0x1:(WRITE) flags 0x8800",
            "sd 0:0:0:0: rejecting I/O to offline device",
            "RDMA CM: REJECTED: invalid service ID",
            "RDMA CM: ADDR_ERROR: failed to acquire device. status -19",
            "RDMA CM: ROUTE_ERROR: failed. status -110",
            "x: modify_qp invalid for qp_id=1 garbage",
            "rdma_rxe: qp#1 state -> ERR",
        ] {
            let s = classify(line, None).unwrap_or_else(|| panic!("{line}"));
            let e = explain(&s);
            assert!(!e.title.is_empty() && !e.meaning.is_empty(), "{line}");
        }
    }
}
