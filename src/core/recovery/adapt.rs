//! Adapters from the parsers' types to the engine's inputs (pure).
//!
//! - [`from_kernel_event`]: a classified kernel-log record ([`KernelEvent`]) → an
//!   [`Observation`] and its [`Trust`] (userspace-written records are `Untrusted`);
//! - [`from_topology_event`]: a change of the RDMA netlink model ([`TopologyEvent`]) →
//!   observations (always trusted: the kernel answered us directly).
//!
//! Records that name no RDMA device, session or disk the engine can act on give nothing.

use crate::core::qp::QpState;
use crate::core::signatures::{KernelEvent, SignatureKind};
use crate::core::topology::{Topology, TopologyEvent, UnstuckReason};

use super::input::{IoErrorKind, Observation, StuckEvidence, Trust};

/// The engine observation for one classified kernel-log record, if it carries one.
pub fn from_kernel_event(ev: &KernelEvent) -> Option<(Observation, Trust)> {
    let trust = if ev.trusted {
        Trust::Trusted
    } else {
        Trust::Untrusted
    };
    let dev = &ev.signature.device;
    let kind = &ev.signature.kind;
    let obs = if kind.is_stuck_gsi() {
        let evidence = match kind {
            SignatureKind::StuckQpTransition { .. } => StuckEvidence::ModifyQpInvalid,
            SignatureKind::MadRtsFailed { .. } => StuckEvidence::MadRtsFailed,
            _ => StuckEvidence::MadQpFatal,
        };
        Observation::GsiQpStuck {
            device: dev.rdma_dev.clone()?,
            port: dev.port,
            evidence,
        }
    } else {
        match kind {
            SignatureKind::IbPortDown | SignatureKind::IserPortError => Observation::PortDown {
                device: dev.rdma_dev.clone()?,
                port: dev.port?,
            },
            SignatureKind::IbPortActive | SignatureKind::IserPortActive => Observation::PortUp {
                device: dev.rdma_dev.clone()?,
                port: dev.port?,
            },
            SignatureKind::IscsiConnError { code } => Observation::ConnError {
                sid: dev.iscsi_session?,
                code: code.0,
            },
            SignatureKind::IscsiSessionRecoveryTimedOut { .. } => {
                Observation::SessionRecoveryTimedOut {
                    sid: dev.iscsi_session?,
                }
            }
            SignatureKind::ScsiCommandFailed { hostbyte, .. } if hostbyte == "DID_ABORT" => {
                Observation::IoError {
                    disk: dev.disk.clone()?,
                    kind: IoErrorKind::DidAbort,
                }
            }
            SignatureKind::BlockIoError { .. } => Observation::IoError {
                disk: dev.disk.clone()?,
                kind: IoErrorKind::IoError,
            },
            SignatureKind::ScsiRejectingOffline => Observation::IoError {
                disk: dev.disk.clone()?,
                kind: IoErrorKind::Offline,
            },
            SignatureKind::RdmaCmRejected { reason } if reason.contains("invalid service ID") => {
                Observation::CmRejectedInvalidServiceId
            }
            SignatureKind::RdmaCmAddrError { status, .. } => Observation::CmAddrError {
                status: status.unwrap_or(-19),
            },
            _ => return None,
        }
    };
    Some((obs, trust))
}

/// The engine observations for one change of the RDMA model. `topology` is the model after
/// the change (for a device's parent, driver and port count).
pub fn from_topology_event(ev: &TopologyEvent, topology: &Topology) -> Vec<Observation> {
    let appeared = |name: &str| {
        let d = topology.device(name);
        Observation::DeviceAppeared {
            device: name.to_string(),
            parent: d
                .and_then(|d| d.parent.as_deref())
                .map(|p| p.strip_prefix("pci:").unwrap_or(p).to_string()),
            driver: None,
            ports: d.map_or(1, |d| u32::try_from(d.ports.len()).unwrap_or(u32::MAX)),
        }
    };
    match ev {
        TopologyEvent::DeviceAppeared { device } => vec![appeared(&device.name)],
        TopologyEvent::DeviceDisappeared { device } => vec![Observation::DeviceGone {
            device: device.name.clone(),
        }],
        TopologyEvent::DeviceRecreated {
            device, old_name, ..
        } => {
            let mut out = Vec::new();
            if *old_name != device.name {
                out.push(Observation::DeviceRenamed {
                    from: old_name.clone(),
                    to: device.name.clone(),
                });
            }
            out.push(appeared(&device.name));
            out
        }
        TopologyEvent::DeviceRenamed { device, old_name } => vec![Observation::DeviceRenamed {
            from: old_name.clone(),
            to: device.name.clone(),
        }],
        TopologyEvent::PortDown { device, port, .. } => vec![Observation::PortDown {
            device: device.name.clone(),
            port: *port,
        }],
        TopologyEvent::PortActive { device, port } => vec![Observation::PortUp {
            device: device.name.clone(),
            port: *port,
        }],
        TopologyEvent::PortStuck(stuck) => vec![Observation::GsiQpState {
            device: stuck.device.name.clone(),
            port: stuck.port,
            state: QpState::Err,
        }],
        TopologyEvent::PortUnstuck {
            device,
            port,
            reason: UnstuckReason::QpRecovered,
        } => vec![Observation::GsiQpState {
            device: device.name.clone(),
            port: *port,
            state: QpState::Rts,
        }],
        TopologyEvent::PortUnstuck { .. } | TopologyEvent::QpError { .. } => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::kmsg::Record;
    use crate::core::signatures::classify_record;

    fn record(facility: u8, text: &str) -> Record {
        let line = format!("{},1,100,-;{text}", u32::from(facility) * 8 + 3);
        Record::parse(line.as_bytes()).unwrap()
    }

    #[test]
    fn field_lines_become_a_stuck_gsi_qp_with_the_record_trust() {
        let r = record(
            0,
            "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3",
        );
        let (obs, trust) = from_kernel_event(&classify_record(&r).unwrap()).unwrap();
        assert_eq!(trust, Trust::Trusted);
        assert_eq!(
            obs,
            Observation::GsiQpStuck {
                device: "rocep2s0f0".into(),
                port: None,
                evidence: StuckEvidence::ModifyQpInvalid
            }
        );
        let r = record(
            1,
            "infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22",
        );
        let (obs, trust) = from_kernel_event(&classify_record(&r).unwrap()).unwrap();
        assert_eq!(trust, Trust::Untrusted);
        assert!(matches!(
            obs,
            Observation::GsiQpStuck {
                evidence: StuckEvidence::MadRtsFailed,
                ..
            }
        ));
    }

    #[test]
    fn iscsi_and_disk_lines_map_to_sessions_and_disks() {
        let cases = [
            (
                " connection2:0: detected conn error (1022)",
                Observation::ConnError { sid: 2, code: 1022 },
            ),
            (
                " session5: session recovery timed out after 120 secs",
                Observation::SessionRecoveryTimedOut { sid: 5 },
            ),
            (
                "I/O error, dev sda, sector 128 op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2",
                Observation::IoError {
                    disk: "sda".into(),
                    kind: IoErrorKind::IoError,
                },
            ),
        ];
        for (text, want) in cases {
            let ev = classify_record(&record(0, text)).unwrap();
            assert_eq!(from_kernel_event(&ev).map(|(o, _)| o), Some(want), "{text}");
        }
    }

    #[test]
    fn records_without_an_actionable_subject_give_nothing() {
        let ev = classify_record(&record(0, " connection3:0: Could not send nopout")).unwrap();
        assert_eq!(from_kernel_event(&ev), None);
    }
}
