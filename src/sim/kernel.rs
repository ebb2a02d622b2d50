//! The simulated kernel log: the real message formats (reference kernel-facts §1 and §4,
//! lab captures KEY-LINES.txt), each as the record /dev/kmsg gives: its level and, for a
//! `dev_printk`-family message, the dictionary the kernel attaches (`SUBSYSTEM=`,
//! `DEVICE=+<subsystem>:<name>`). The harness reads these records through the real
//! kernel-log door of the core (`core::recovery::read_record`), with the dictionary, so a
//! format drift here fails the tests and scenarios exercise the `DEVICE=` attribution the
//! daemon uses.

/// Syslog levels the messages below are printed at.
pub const ERR: u8 = 3;
const WARNING: u8 = 4;
const INFO: u8 = 6;

/// One kernel-log record as /dev/kmsg gives it (the facility is the writer's: see
/// `HostEvent::Lines`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRecord {
    /// Syslog level (`prio & 7`).
    pub level: u8,
    /// The message text.
    pub text: String,
    /// The dictionary (` KEY=VALUE` lines), empty for a plain `printk`.
    pub dict: Vec<(String, String)>,
}

impl KernelRecord {
    /// A plain `printk`/`pr_*` message: no dictionary.
    pub fn plain(level: u8, text: impl Into<String>) -> Self {
        KernelRecord {
            level,
            text: text.into(),
            dict: Vec::new(),
        }
    }

    /// A `dev_printk`-family message on `name` of class/bus `subsystem`: the kernel adds
    /// `SUBSYSTEM=` and `DEVICE=+<subsystem>:<name>`.
    pub fn device(level: u8, subsystem: &str, name: &str, text: impl Into<String>) -> Self {
        KernelRecord {
            level,
            text: text.into(),
            dict: vec![
                ("SUBSYSTEM".into(), subsystem.into()),
                ("DEVICE".into(), format!("+{subsystem}:{name}")),
            ],
        }
    }

    /// An RDMA device's `ibdev_err` (its ib_device is in class `infiniband`).
    pub fn ibdev_err(device: &str, text: impl Into<String>) -> Self {
        Self::device(ERR, "infiniband", device, text)
    }

    /// What a userspace writer of /dev/kmsg produces with the same text: the kernel
    /// attaches no dictionary to a written record.
    pub fn written(self) -> Self {
        KernelRecord {
            dict: Vec::new(),
            ..self
        }
    }
}

/// `ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3`
/// (irdma `ibdev_warn`, prefix = parent driver, PCI function, ib device).
pub fn modify_qp_invalid(pci: &str, device: &str) -> KernelRecord {
    KernelRecord::device(
        WARNING,
        "infiniband",
        device,
        format!("ice {pci} {device}: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3"),
    )
}

/// The same refusal by the lab's irdma-like rdma_rxe (scripts/lab/kmod): `ibdev_warn` of a
/// device without a parent prints the device name alone, as captured
/// (`rxe_ini: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3`).
pub fn modify_qp_invalid_unparented(device: &str) -> KernelRecord {
    KernelRecord::device(
        WARNING,
        "infiniband",
        device,
        format!("{device}: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3"),
    )
}

/// `infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22` (MAD `dev_err`).
pub fn mad_send_error(device: &str) -> KernelRecord {
    KernelRecord::ibdev_err(
        device,
        format!("infiniband {device}: ib_mad_send_error - ib_modify_qp to RTS: -22"),
    )
}

/// ` connection1:0: ping timeout of 5 secs expired, …` (leading space: no driver string).
/// (`iscsi_conn_printk(KERN_ERR)` on the connection's class device.)
pub fn ping_timeout(sid: u32) -> KernelRecord {
    KernelRecord::device(
        ERR,
        "iscsi_connection",
        &format!("connection{sid}:0"),
        format!(
            " connection{sid}:0: ping timeout of 5 secs expired, recv timeout 5, last rx \
             4294898978, last ping 4294900232, now 4294901504"
        ),
    )
}

/// ` connection1:0: detected conn error (1022)`.
pub fn conn_error(sid: u32, code: u32) -> KernelRecord {
    KernelRecord::device(
        ERR,
        "iscsi_connection",
        &format!("connection{sid}:0"),
        format!(" connection{sid}:0: detected conn error ({code})"),
    )
}

/// ` session1: session recovery timed out after 120 secs`.
/// (`iscsi_cls_session_printk(KERN_INFO)` on the session's class device.)
pub fn recovery_timed_out(sid: u32, secs: u32) -> KernelRecord {
    KernelRecord::device(
        INFO,
        "iscsi_session",
        &format!("session{sid}"),
        format!(" session{sid}: session recovery timed out after {secs} secs"),
    )
}

/// `sd 2:0:0:0: rejecting I/O to offline device`.
pub fn rejecting_offline(host: u32) -> KernelRecord {
    KernelRecord::device(
        ERR,
        "scsi",
        &format!("{host}:0:0:0"),
        format!("sd {host}:0:0:0: rejecting I/O to offline device"),
    )
}

/// `I/O error, dev sda, sector 0 op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2`.
/// (`blk_print_req_error`: a plain `printk`, no dictionary.)
pub fn io_error(disk: &str, sector: u64) -> KernelRecord {
    KernelRecord::plain(
        ERR,
        format!(
            "I/O error, dev {disk}, sector {sector} op 0x1:(WRITE) flags 0x8800 phys_seg 16 \
             prio class 2"
        ),
    )
}

/// `sd 2:0:0:0: [sda] tag#57 FAILED Result: hostbyte=DID_ABORT driverbyte=DRIVER_OK cmd_age=0s`.
/// (`scsi_print_result`: `sdev_prefix_printk(KERN_INFO)` on the SCSI device.)
pub fn did_abort(host: u32, disk: &str, tag: u32) -> KernelRecord {
    KernelRecord::device(
        INFO,
        "scsi",
        &format!("{host}:0:0:0"),
        format!(
            "sd {host}:0:0:0: [{disk}] tag#{tag} FAILED Result: hostbyte=DID_ABORT \
             driverbyte=DRIVER_OK cmd_age=0s"
        ),
    )
}

/// `RDMA CM: REJECTED: invalid service ID`.
pub const CM_REJECTED: &str = "RDMA CM: REJECTED: invalid service ID";

/// `RDMA CM: ADDR_ERROR: failed to acquire device. status -19`.
pub const CM_ADDR_ERROR: &str = "RDMA CM: ADDR_ERROR: failed to acquire device. status -19";
/// An attempt while the target's host does not answer ARP (rdma_cm dynamic debug; lab 6.12
/// and 6.1 with it on): address resolution times out.
pub const CM_ADDR_TIMEOUT: &str = "RDMA CM: ADDR_ERROR: failed to resolve IP. status -110";

/// One of the `RDMA CM:` lines above (or another of ib_iser's) as its record (ib_iser's
/// `iser_err`, a `pr_err`: no device, no dictionary).
pub fn cm(line: &str) -> KernelRecord {
    KernelRecord::plain(ERR, line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kmsg::Record;
    use crate::core::recovery::{read_record, IoErrorKind, Observation, StuckEvidence};
    use crate::core::signatures::classify;

    fn obs(r: &KernelRecord) -> Option<Observation> {
        let record = Record {
            facility: 0,
            level: r.level,
            seq: 1,
            usec: 1,
            continuation: false,
            text: r.text.clone(),
            dict: r.dict.clone(),
        };
        read_record(&record)?.observation.map(|(o, _)| o)
    }

    #[test]
    fn the_dictionary_names_the_device_the_text_names() {
        // What the daemon's classifier completes a record from when its text does not
        // name the device: the simulated records must say the same as their text.
        for r in [
            modify_qp_invalid("0000:02:00.0", "rocep2s0f0"),
            modify_qp_invalid_unparented("rocep2s0f0"),
            mad_send_error("rocep2s0f0"),
        ] {
            let device = r.dict.iter().find(|(k, _)| k == "DEVICE").map(|(_, v)| v);
            assert_eq!(device.map(String::as_str), Some("+infiniband:rocep2s0f0"));
        }
        assert!(io_error("sdb", 0).dict.is_empty());
        assert!(mad_send_error("rocep2s0f0").written().dict.is_empty());
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
            obs(&cm(CM_REJECTED)),
            Some(Observation::CmRejectedInvalidServiceId)
        );
        assert_eq!(
            obs(&cm(CM_ADDR_ERROR)),
            Some(Observation::CmAddrError { status: -19 })
        );
        assert!(classify(&ping_timeout(3).text, None).is_some());
        assert!(classify(&rejecting_offline(2).text, None).is_some());
    }
}
