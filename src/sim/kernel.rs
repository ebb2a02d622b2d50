//! The simulated kernel log: the real message formats (reference kernel-facts §1 and §4,
//! lab captures KEY-LINES.txt). The harness classifies these lines with the real
//! kernel-log door of the core (`core::recovery::read_record`), so a format drift
//! here fails the tests.

/// `ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3`
/// (irdma `ibdev_warn`, prefix = parent driver, PCI function, ib device).
pub fn modify_qp_invalid(pci: &str, device: &str) -> String {
    format!("ice {pci} {device}: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3")
}

/// The same refusal by the lab's irdma-like rdma_rxe (scripts/lab/kmod): `ibdev_warn` of a
/// device without a parent prints the device name alone, as captured
/// (`rxe_ini: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3`).
pub fn modify_qp_invalid_unparented(device: &str) -> String {
    format!("{device}: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3")
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
/// An attempt while the target's host does not answer ARP (rdma_cm dynamic debug; lab 6.12
/// and 6.1 with it on): address resolution times out.
pub const CM_ADDR_TIMEOUT: &str = "RDMA CM: ADDR_ERROR: failed to resolve IP. status -110";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kmsg::Record;
    use crate::core::recovery::{read_record, IoErrorKind, Observation, StuckEvidence};
    use crate::core::signatures::classify;

    fn obs(text: &str) -> Option<Observation> {
        let record = Record {
            facility: 0,
            level: 3,
            seq: 1,
            usec: 1,
            continuation: false,
            text: text.to_string(),
            dict: Vec::new(),
        };
        read_record(&record)?.observation.map(|(o, _)| o)
    }

    #[test]
    fn every_simulated_line_is_recognised_by_the_real_classifier() {
        assert!(matches!(
            obs(&modify_qp_invalid("0000:02:00.0", "rocep2s0f0")),
            Some(Observation::GsiQpStuck { device, evidence: StuckEvidence::ModifyQpInvalid, .. })
                if device == "rocep2s0f0"
        ));
        assert!(matches!(
            obs(&mad_send_error("rocep2s0f0")),
            Some(Observation::GsiQpStuck {
                evidence: StuckEvidence::MadRtsFailed,
                ..
            })
        ));
        assert_eq!(
            obs(&conn_error(3, 1022)),
            Some(Observation::ConnError { sid: 3, code: 1022 })
        );
        assert_eq!(
            obs(&recovery_timed_out(3, 120)),
            Some(Observation::SessionRecoveryTimedOut { sid: 3 })
        );
        assert_eq!(
            obs(&did_abort(2, "sdb", 58)),
            Some(Observation::IoError {
                disk: "sdb".into(),
                kind: IoErrorKind::DidAbort
            })
        );
        assert_eq!(
            obs(&io_error("sdb", 0)),
            Some(Observation::IoError {
                disk: "sdb".into(),
                kind: IoErrorKind::IoError
            })
        );
        assert_eq!(
            obs(CM_REJECTED),
            Some(Observation::CmRejectedInvalidServiceId)
        );
        assert_eq!(
            obs(CM_ADDR_ERROR),
            Some(Observation::CmAddrError { status: -19 })
        );
        assert!(classify(&ping_timeout(3), None).is_some());
        assert!(classify(&rejecting_offline(2), None).is_some());
    }
}
