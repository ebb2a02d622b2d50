//! The simulated kernel log: the real message formats (reference kernel-facts §1 and §4,
//! lab captures KEY-LINES.txt), and a small classifier from those lines to the engine's
//! [`Observation`]s.
//!
//! The classifier is the simulator's stand-in for `core::signatures` (built on its own
//! branch); once that lands, [`classify`] is replaced by the signatures parser plus the pure
//! adapter in `core::recovery`. It recognises exactly the lines below and nothing else.

use crate::core::recovery::{IoErrorKind, Observation, StuckEvidence};

/// `ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3`
/// (irdma `ibdev_warn`, prefix = parent driver, PCI function, ib device).
pub fn modify_qp_invalid(pci: &str, device: &str) -> String {
    format!("ice {pci} {device}: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3")
}

/// `infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22` (MAD `dev_err`).
pub fn mad_send_error(device: &str) -> String {
    format!("infiniband {device}: ib_mad_send_error - ib_modify_qp to RTS: -22")
}

/// ` connection1:0: ping timeout of 5 secs expired, …` (leading space: no driver string).
pub fn ping_timeout(sid: u32) -> String {
    format!(
        " connection{sid}:0: ping timeout of 5 secs expired, recv timeout 5, last rx 4294898978, \
         last ping 4294900232, now 4294901504"
    )
}

/// ` connection1:0: detected conn error (1022)`.
pub fn conn_error(sid: u32, code: u32) -> String {
    format!(" connection{sid}:0: detected conn error ({code})")
}

/// ` session1: session recovery timed out after 120 secs`.
pub fn recovery_timed_out(sid: u32, secs: u32) -> String {
    format!(" session{sid}: session recovery timed out after {secs} secs")
}

/// `sd 2:0:0:0: rejecting I/O to offline device`.
pub fn rejecting_offline(host: u32) -> String {
    format!("sd {host}:0:0:0: rejecting I/O to offline device")
}

/// `I/O error, dev sda, sector 0 op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2`.
pub fn io_error(disk: &str, sector: u64) -> String {
    format!("I/O error, dev {disk}, sector {sector} op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2")
}

/// `sd 2:0:0:0: [sda] tag#57 FAILED Result: hostbyte=DID_ABORT driverbyte=DRIVER_OK cmd_age=0s`.
pub fn did_abort(host: u32, disk: &str, tag: u32) -> String {
    format!(
        "sd {host}:0:0:0: [{disk}] tag#{tag} FAILED Result: hostbyte=DID_ABORT \
         driverbyte=DRIVER_OK cmd_age=0s"
    )
}

/// `RDMA CM: REJECTED: invalid service ID`.
pub const CM_REJECTED: &str = "RDMA CM: REJECTED: invalid service ID";

/// `RDMA CM: ADDR_ERROR: failed to acquire device. status -19`.
pub const CM_ADDR_ERROR: &str = "RDMA CM: ADDR_ERROR: failed to acquire device. status -19";

/// Classifies one kernel-log text (without the kmsg header) into an observation.
pub fn classify(text: &str) -> Option<Observation> {
    if let Some(rest) =
        text.strip_suffix(": modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3")
    {
        let device = rest.rsplit(' ').next()?;
        return Some(Observation::GsiQpStuck {
            device: device.to_string(),
            port: None,
            evidence: StuckEvidence::ModifyQpInvalid,
        });
    }
    if let Some(rest) = text.strip_prefix("infiniband ") {
        if let Some(device) = rest.strip_suffix(": ib_mad_send_error - ib_modify_qp to RTS: -22") {
            return Some(Observation::GsiQpStuck {
                device: device.to_string(),
                port: None,
                evidence: StuckEvidence::MadRtsFailed,
            });
        }
    }
    if let Some(rest) = text.strip_prefix(" connection") {
        let (ids, tail) = rest.split_once(": detected conn error (")?;
        let sid = ids.split(':').next()?.parse().ok()?;
        let code = tail.strip_suffix(')')?.parse().ok()?;
        return Some(Observation::ConnError { sid, code });
    }
    if let Some(rest) = text.strip_prefix(" session") {
        let (sid, tail) = rest.split_once(": ")?;
        if tail.starts_with("session recovery timed out after ") {
            return Some(Observation::SessionRecoveryTimedOut {
                sid: sid.parse().ok()?,
            });
        }
        return None;
    }
    if text.starts_with("sd ") && text.contains("hostbyte=DID_ABORT") {
        let disk = text.split_once(": [")?.1.split_once(']')?.0;
        return Some(Observation::IoError {
            disk: disk.to_string(),
            kind: IoErrorKind::DidAbort,
        });
    }
    if let Some(rest) = text.strip_prefix("I/O error, dev ") {
        let disk = rest.split_once(',')?.0;
        return Some(Observation::IoError {
            disk: disk.to_string(),
            kind: IoErrorKind::IoError,
        });
    }
    if text == CM_REJECTED {
        return Some(Observation::CmRejectedInvalidServiceId);
    }
    if let Some(status) =
        text.strip_prefix("RDMA CM: ADDR_ERROR: failed to acquire device. status ")
    {
        return Some(Observation::CmAddrError {
            status: status.trim().parse().ok()?,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_lines_classify_as_a_stuck_gsi_qp() {
        assert_eq!(
            classify(&modify_qp_invalid("0000:02:00.0", "rocep2s0f0")),
            Some(Observation::GsiQpStuck {
                device: "rocep2s0f0".into(),
                port: None,
                evidence: StuckEvidence::ModifyQpInvalid
            })
        );
        assert_eq!(
            classify("infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22"),
            Some(Observation::GsiQpStuck {
                device: "rocep2s0f0".into(),
                port: None,
                evidence: StuckEvidence::MadRtsFailed
            })
        );
    }

    #[test]
    fn lab_capture_lines_classify() {
        // Verbatim from captures/KEY-LINES.txt (linkdown40, blackhole1, rxeflap-dyndbg).
        assert_eq!(
            classify(" connection2:0: detected conn error (1022)"),
            Some(Observation::ConnError { sid: 2, code: 1022 })
        );
        assert_eq!(
            classify(" session5: session recovery timed out after 120 secs"),
            Some(Observation::SessionRecoveryTimedOut { sid: 5 })
        );
        assert_eq!(
            classify("sd 0:0:0:0: [sda] tag#57 FAILED Result: hostbyte=DID_ABORT driverbyte=DRIVER_OK cmd_age=0s"),
            Some(Observation::IoError { disk: "sda".into(), kind: IoErrorKind::DidAbort })
        );
        assert_eq!(
            classify("I/O error, dev sda, sector 128 op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2"),
            Some(Observation::IoError { disk: "sda".into(), kind: IoErrorKind::IoError })
        );
        assert_eq!(
            classify(CM_REJECTED),
            Some(Observation::CmRejectedInvalidServiceId)
        );
        assert_eq!(
            classify(CM_ADDR_ERROR),
            Some(Observation::CmAddrError { status: -19 })
        );
        assert_eq!(classify("infiniband rxe_ini: set active"), None);
        assert_eq!(classify(" connection3:0: Could not send nopout"), None);
    }
}
