//! Pure adapters from the parsers' types to the engine's inputs.
//!
//! [`from_kernel_event`] turns a classified /dev/kmsg record (`core::signatures`) into an
//! [`Observation`] and its [`Trust`]; records the engine has no use for give `None`.
//! [`from_topology_event`] does the same for the RDMA netlink model (`core::topology`),
//! whose facts are always trusted. [`session_from_detail`] and [`iscsiadm_outcome`] adapt
//! the iscsiadm parsers (`core::iscsi`).

use super::input::{
    DiskInfo, IoErrorKind, IscsiadmOutcome, Observation, PortId, Portal, SessionInfo, SessionKey,
    SessionState, StuckEvidence, Trust,
};
use crate::iscsi;
use crate::qp::QpState;
use crate::signatures::{KernelEvent, SignatureKind};
use crate::topology::{Topology, TopologyEvent, UnstuckReason};

/// What one kernel-log record says to the engine: its signature, and the observation it
/// makes with its trust (`None`: recognised, nothing to act on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelReading {
    /// The classified record.
    pub event: crate::signatures::KernelEvent,
    /// The engine's observation, with whether it may trigger actions.
    pub observation: Option<(Observation, Trust)>,
}

/// The door for kernel-log records, shared by the daemon and the simulated host: a record
/// (text, facility, level, `DEVICE=` dictionary) → its reading; `None` for a record no
/// signature recognises.
pub fn read_record(record: &crate::kmsg::Record) -> Option<KernelReading> {
    let event = crate::signatures::classify_record(record)?;
    let observation = from_kernel_event(&event);
    Some(KernelReading { event, observation })
}

/// The engine's view of a classified kernel record, if it has one.
///
/// A record only becomes an observation when it names what the engine needs to attribute
/// it (the RDMA device of a stuck QP, the session of a conn error, the disk of an I/O error);
/// `RDMA CM` lines name nothing and are host-wide by nature.
pub(crate) fn from_kernel_event(ev: &KernelEvent) -> Option<(Observation, Trust)> {
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
            // The port has no GSI QP at all: to the engine the same as a stuck one (it needs
            // another re-creation, within the same attempt budget).
            SignatureKind::MadPortOpenFailed { port, .. } => Observation::GsiQpStuck {
                device: dev.rdma_dev.clone()?,
                port: Some(*port),
                evidence: StuckEvidence::MadPortOpenFailed,
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
            SignatureKind::ScsiCommandFailed { hostbyte, .. } => Observation::IoError {
                disk: dev.disk.clone()?,
                kind: if hostbyte == "DID_ABORT" {
                    IoErrorKind::DidAbort
                } else {
                    IoErrorKind::IoError
                },
            },
            SignatureKind::BlockIoError { .. }
            | SignatureKind::BufferIoError { .. }
            | SignatureKind::ScsiCommandTimedOut { .. } => Observation::IoError {
                disk: dev.disk.clone()?,
                kind: IoErrorKind::IoError,
            },
            SignatureKind::BlockRequestError { status, .. } => Observation::IoError {
                disk: dev.disk.clone()?,
                kind: if status == "device offline" {
                    IoErrorKind::Offline
                } else {
                    IoErrorKind::IoError
                },
            },
            SignatureKind::ScsiDeviceOfflined | SignatureKind::ScsiRejectingDead => {
                Observation::IoError {
                    disk: dev.disk.clone()?,
                    kind: IoErrorKind::Offline,
                }
            }
            SignatureKind::ScsiRejectingOffline => Observation::IoError {
                disk: dev.disk.clone()?,
                kind: IoErrorKind::Offline,
            },
            SignatureKind::RdmaCmRejected { reason } if reason.contains("invalid service ID") => {
                Observation::CmRejectedInvalidServiceId
            }
            SignatureKind::DriverResetRequested { .. } => Observation::DriverResetRequested {
                device: dev.rdma_dev.clone()?,
            },
            SignatureKind::NicSafeMode => Observation::DriverStackSaid {
                condition: crate::driver_stack::StackCondition::SafeMode {
                    pci: dev.pci.clone()?,
                },
            },
            SignatureKind::NicRebuildFailed => Observation::NicWithoutRdma {
                pci: dev.pci.clone()?,
                what: "ice could not rebuild the function after a reset: no netdev and no RDMA \
                       device until the driver is reloaded"
                    .to_string(),
                remedy: "reload the driver on a maintenance window (modprobe -r irdma ice; \
                         modprobe ice) or reboot: iser-guard cannot re-create a device whose \
                         function is down"
                    .to_string(),
            },
            SignatureKind::RdmaCmAddrError { status, .. } => {
                Observation::CmAddrError { status: (*status)? }
            }
            SignatureKind::IserPortError | SignatureKind::IbPortDown => Observation::PortDown {
                device: dev.rdma_dev.clone()?,
                port: dev.port.unwrap_or(1),
            },
            SignatureKind::IserPortActive | SignatureKind::IbPortActive => Observation::PortUp {
                device: dev.rdma_dev.clone()?,
                port: dev.port.unwrap_or(1),
            },
            SignatureKind::KernelBug {
                what,
                module,
                function,
                location,
                detail,
            } => {
                let at = [function.as_deref(), location.as_deref(), detail.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(", ");
                let mut report = what.describe().to_string();
                if let Some(m) = module {
                    report.push_str(&format!(" in {m}"));
                }
                if !at.is_empty() {
                    report.push_str(&format!(" ({at})"));
                }
                Observation::KernelBug {
                    module: module.clone(),
                    report,
                }
            }
            SignatureKind::IserQpEvent { event, name } => Observation::IserQpEvent {
                event: *event,
                name: name.clone(),
            },
            // ib_iser registers an event handler on every device it uses and prints each
            // event (iser_event_handler, drivers/infiniband/ulp/iser/iser_verbs.c): a
            // DEVICE_FATAL there is the kernel's own copy of what the verbs listener reads
            // (the kernel dispatches it on a driver's fatal error, not on unregistration,
            // which kernel clients learn through their remove callback). The port it prints
            // is not meaningful for a device event.
            SignatureKind::IserAsyncEvent { event: 8, .. } => {
                Observation::AsyncEvent(crate::selftest::AsyncEvent {
                    device: dev.rdma_dev.clone()?,
                    port: None,
                    kind: crate::selftest::AsyncEventKind::DeviceFatal,
                })
            }
            _ => return None,
        }
    };
    Some((obs, trust))
}

/// The engine's view of a change the RDMA netlink model (`core::topology`) noticed. The
/// model follows devices by parent and netdev, so a re-created device that came back under
/// another name is reported as a rename first. `topology` is the model after the change
/// (for a device's parent and port count).
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
        // Its QP 1 in RTS comes as `GsiReady` from the same dump (in ERR: `PortStuck`).
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
        // A (re)appeared device's QP 1, or one listed late: the engine verifies a
        // re-creation on it; a port whose QP 1 was never stuck has no PortUnstuck to say
        // so (lab: an operator reset-device of such a port looped Verifying/Reconnecting).
        TopologyEvent::GsiReady { device, port } => vec![Observation::GsiQpState {
            device: device.name.clone(),
            port: *port,
            state: QpState::Rts,
        }],
        TopologyEvent::PortUnstuck { .. } | TopologyEvent::QpError { .. } => Vec::new(),
    }
}

/// The engine's view of one `iscsiadm -m session -P 3` session (`core::iscsi`), mapped by
/// the daemon to the RDMA port it runs on (`None` if it could not be mapped). `None` when the
/// session names no portal, or one that is not an IP address.
pub fn session_from_detail(d: &iscsi::SessionDetail, rdma: Option<PortId>) -> Option<SessionInfo> {
    let node = d.node_id()?;
    let portal = Portal::parse(&node.address, node.port).ok()?;
    let state = session_state(d.session_state.as_ref());
    let disks = disks(d);
    let netdev = d.iface.netdev.clone().filter(|n| n != "default");
    Some(SessionInfo {
        sid: d.sid,
        key: SessionKey {
            target: node.target,
            portal,
            iface: node.iface.unwrap_or_else(|| "default".to_string()),
        },
        transport: d.transport().name().to_string(),
        netdev,
        local_ip: d.iface.ip_address.map(|ip| ip.to_string()),
        rdma,
        placed_by: None,
        state,
        disks,
    })
}

/// The engine's session state for the kernel's (`iSCSI Session State:`, sysfs
/// `iscsi_session/state`): the one mapping, used by [`session_from_detail`] and the daemon.
/// The kernel sets FAILED the moment a connection fails, so its word is enough; in every
/// capture a LOGGED_IN session also has its connection LOGGED IN.
pub fn session_state(parsed: Option<&iscsi::ListedSessionState>) -> SessionState {
    match parsed {
        Some(iscsi::ListedSessionState::LoggedIn) => SessionState::LoggedIn,
        Some(iscsi::ListedSessionState::Failed) => SessionState::Failed,
        Some(iscsi::ListedSessionState::Free) => SessionState::Free,
        Some(iscsi::ListedSessionState::Unknown | iscsi::ListedSessionState::Other(_)) | None => {
            SessionState::Unknown
        }
    }
}

/// The session's attached disks with their state in iscsiadm's words (`Unknown` when the
/// state line is missing).
pub fn disks(d: &iscsi::SessionDetail) -> Vec<DiskInfo> {
    d.devices
        .iter()
        .filter_map(|dev| {
            let name = dev.disk.clone()?;
            let state = dev
                .state
                .as_ref()
                .map_or("Unknown", iscsi::DeviceState::name);
            Some(DiskInfo::new(name, state))
        })
        .collect()
}

/// The engine's outcome of an iscsiadm run, from the exit-code table
/// ([`iscsi::IscsiadmStatus`], the one place exit codes are given meaning) and the last line
/// it printed. The engine distinguishes only what changes its decision: success, already
/// logged in (15), no such session (2, 21), a time-out (8, 11, 33), a login refused for good
/// (19, 24), and anything else.
pub fn iscsiadm_outcome(status: iscsi::IscsiadmStatus, last_line: &str) -> IscsiadmOutcome {
    if status.is_success() {
        IscsiadmOutcome::Success
    } else if status.is_already_logged_in() {
        IscsiadmOutcome::AlreadyLoggedIn
    } else if status.classify() == iscsi::StatusClass::NotFound {
        IscsiadmOutcome::NotFound
    } else if status.is_timeout() {
        IscsiadmOutcome::Timeout
    } else if status.is_login_refused() {
        IscsiadmOutcome::AuthFailed
    } else {
        IscsiadmOutcome::Other {
            code: Some(status.code()),
            message: last_line.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signatures::classify;

    fn event(text: &str, trusted: bool) -> Option<(Observation, Trust)> {
        let signature = classify(text, None)?;
        from_kernel_event(&KernelEvent {
            seq: 1,
            usec: 1,
            level: 4,
            trusted,
            signature,
        })
    }

    #[test]
    fn ib_isers_device_fatal_line_is_the_async_event() {
        let line = "iser: iser_event_handler: async event device fatal (8) on device mlx5_0 port 0";
        let (o, t) = event(line, true).unwrap();
        assert_eq!(t, Trust::Trusted);
        assert_eq!(
            o,
            Observation::AsyncEvent(crate::selftest::AsyncEvent {
                device: "mlx5_0".into(),
                port: None,
                kind: crate::selftest::AsyncEventKind::DeviceFatal,
            })
        );
        let (_, t) = event(line, false).unwrap();
        assert_eq!(t, Trust::Untrusted, "a userspace copy stays untrusted");
        // Other device events ib_iser prints stay informational.
        let other =
            "iser: iser_event_handler: async event GID changed (18) on device mlx5_0 port 1";
        assert!(event(other, true).is_none());
    }

    #[test]
    fn the_field_lines_are_a_stuck_gsi_qp_on_rocep2s0f0() {
        let (o, t) = event(
            "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3",
            true,
        )
        .unwrap();
        assert_eq!(t, Trust::Trusted);
        assert!(
            matches!(o, Observation::GsiQpStuck { ref device, evidence: StuckEvidence::ModifyQpInvalid, .. } if device == "rocep2s0f0")
        );
        let (o, t) = event(
            "infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22",
            false,
        )
        .unwrap();
        assert_eq!(t, Trust::Untrusted);
        assert!(matches!(
            o,
            Observation::GsiQpStuck {
                evidence: StuckEvidence::MadRtsFailed,
                ..
            }
        ));
    }

    #[test]
    fn a_non_gsi_qp_refusal_is_not_a_stuck_port() {
        assert_eq!(
            event(
                "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=7, old_state=0x6, new_state=0x3",
                true
            ),
            None
        );
    }

    #[test]
    fn kernel_bugs_and_iser_qp_events_map_to_their_observations() {
        // arch/x86 show_ip "RIP: %04x:%pS"; kernel/panic.c "Kernel panic - not syncing: %s".
        let (o, t) = event("RIP: 0010:iser_conn_terminate+0x1c/0x90 [ib_iser]", true).unwrap();
        assert_eq!(t, Trust::Trusted);
        assert_eq!(
            o,
            Observation::KernelBug {
                module: Some("ib_iser".into()),
                report: "kernel oops in ib_iser (iser_conn_terminate+0x1c/0x90)".into(),
            }
        );
        let (o, _) = event("Kernel panic - not syncing: Fatal exception", true).unwrap();
        assert!(
            matches!(o, Observation::KernelBug { module: None, ref report } if report.contains("Fatal exception")),
            "{o:?}"
        );
        // A userspace copy keeps its (untrusted) origin: the engine counts and ignores it.
        let (_, t) = event("RIP: 0010:rxe_qp_do_cleanup+0x2c/0x1a0 [rdma_rxe]", false).unwrap();
        assert_eq!(t, Trust::Untrusted);
        // iser_verbs.c iser_qp_event_callback "qp event %s (%d)".
        assert_eq!(
            event(
                "iser: iser_qp_event_callback: qp event QP fatal error (1)",
                true
            )
            .map(|x| x.0),
            Some(Observation::IserQpEvent {
                event: 1,
                name: "QP fatal error".into(),
            })
        );
    }

    #[test]
    fn lab_lines_map_to_observations() {
        // Verbatim from the lab captures (KEY-LINES.txt).
        assert_eq!(
            event(" connection2:0: detected conn error (1022)", true).map(|x| x.0),
            Some(Observation::ConnError { sid: 2, code: 1022 })
        );
        assert_eq!(
            event(" session5: session recovery timed out after 120 secs", true).map(|x| x.0),
            Some(Observation::SessionRecoveryTimedOut { sid: 5 })
        );
        assert_eq!(
            event("sd 0:0:0:0: [sda] tag#57 FAILED Result: hostbyte=DID_ABORT driverbyte=DRIVER_OK cmd_age=0s", true).map(|x| x.0),
            Some(Observation::IoError { disk: "sda".into(), kind: IoErrorKind::DidAbort })
        );
        assert_eq!(
            event("I/O error, dev sda, sector 128 op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2", true).map(|x| x.0),
            Some(Observation::IoError { disk: "sda".into(), kind: IoErrorKind::IoError })
        );
        assert_eq!(
            event("RDMA CM: REJECTED: invalid service ID", true).map(|x| x.0),
            Some(Observation::CmRejectedInvalidServiceId)
        );
        assert_eq!(
            event(
                "RDMA CM: ADDR_ERROR: failed to acquire device. status -19",
                true
            )
            .map(|x| x.0),
            Some(Observation::CmAddrError { status: -19 })
        );
    }

    #[test]
    fn topology_events_map_to_observations() {
        use crate::topology::{DeviceKey, DeviceRef, MatchedBy};
        let dev = |name: &str, index| DeviceRef {
            key: DeviceKey(1),
            name: name.to_string(),
            index,
        };
        // An empty model: the observations then carry no parent (nothing known about it).
        let model = crate::topology::Topology::new();
        // A re-created device still under its kernel name, before udev renamed it back.
        let v = from_topology_event(
            &TopologyEvent::DeviceRecreated {
                device: dev("rocep2s0f0", 3),
                old_index: 0,
                old_name: "irdma0".into(),
                matched_by: MatchedBy::Parent,
            },
            &model,
        );
        assert_eq!(
            v.first(),
            Some(&Observation::DeviceRenamed {
                from: "irdma0".into(),
                to: "rocep2s0f0".into()
            })
        );
        assert_eq!(
            from_topology_event(
                &TopologyEvent::PortUnstuck {
                    device: dev("rocep2s0f0", 3),
                    port: 1,
                    reason: UnstuckReason::QpRecovered,
                },
                &model
            ),
            vec![Observation::GsiQpState {
                device: "rocep2s0f0".into(),
                port: 1,
                state: QpState::Rts
            }]
        );
        assert_eq!(
            from_topology_event(
                &TopologyEvent::DeviceDisappeared {
                    device: dev("rxe_ini", 0)
                },
                &model
            ),
            vec![Observation::DeviceGone {
                device: "rxe_ini".into()
            }]
        );
    }

    #[test]
    fn real_iscsiadm_tree_maps_to_session_info() {
        // Real capture (lab blackhole1/linkdown, see tests/fixtures/iscsi/README.md).
        let text = include_str!("../../tests/fixtures/iscsi/real-p3-failed-blocked.txt");
        let parsed = iscsi::parse_session_tree(text);
        let d = parsed.items.first().expect("one session");
        let port = PortId::new("rxe_ini", 1);
        let s = session_from_detail(d, Some(port.clone())).unwrap();
        assert_eq!(s.sid, 2);
        assert_eq!(s.state, SessionState::Failed);
        assert_eq!(s.key.target, "iqn.2003-01.org.example.lab:tgt0");
        assert_eq!(s.key.portal, Portal::new([192, 0, 2, 2], 3260));
        assert_eq!(s.key.iface, "iser");
        assert_eq!(s.transport, "iser");
        assert_eq!(s.rdma, Some(port));
        assert_eq!(s.disks.first().map(|d| d.name.as_str()), Some("sda"));
        assert_eq!(
            iscsiadm_outcome(iscsi::IscsiadmStatus::from_code(15), "already present"),
            IscsiadmOutcome::AlreadyLoggedIn
        );
    }
}

#[cfg(test)]
mod portal_tests {
    use super::*;

    #[test]
    fn portals_are_addresses_displayed_as_iscsiadm_prints_them() {
        let v4 = Portal::parse("192.0.2.2", 3260).unwrap();
        assert_eq!(v4, Portal::new([192, 0, 2, 2], 3260));
        assert_eq!(v4.to_string(), "192.0.2.2:3260");
        let v6 = Portal::parse("[fd00::2]", 3260).unwrap();
        assert_eq!(v6, Portal::parse("fd00:0::2", 3260).unwrap());
        assert_eq!(v6.to_string(), "[fd00::2]:3260");
        assert_eq!(v6.socket_addr().port(), 3260);
        let e = Portal::parse("target.example", 3260).unwrap_err();
        assert!(e.to_string().contains("target.example"), "{e}");
    }

    #[test]
    fn the_serde_form_keeps_address_and_port_fields() {
        let p = Portal::new([10, 0, 0, 5], 3261);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, r#"{"address":"10.0.0.5","port":3261}"#);
        assert_eq!(serde_json::from_str::<Portal>(&json).unwrap(), p);
        assert!(serde_json::from_str::<Portal>(r#"{"address":"nope","port":1}"#).is_err());
    }

    #[test]
    fn a_session_whose_portal_is_not_an_address_is_not_handed_to_the_engine() {
        let text = include_str!("../../tests/fixtures/iscsi/real-p3-failed-blocked.txt");
        let parsed = iscsi::parse_session_tree(text);
        let mut d = parsed.items.first().expect("one session").clone();
        assert!(session_from_detail(&d, None).is_some());
        for p in [&mut d.persistent_portal, &mut d.current_portal]
            .into_iter()
            .flatten()
        {
            p.address = "not-an-ip".into();
        }
        assert!(session_from_detail(&d, None).is_none());
    }
}

#[cfg(test)]
mod session_state_tests {
    use super::*;

    #[test]
    fn every_kernel_session_state_has_one_engine_state() {
        use iscsi::ListedSessionState as K;
        for (word, engine) in [
            ("LOGGED_IN", SessionState::LoggedIn),
            ("FAILED", SessionState::Failed),
            ("FREE", SessionState::Free),
            ("Unknown", SessionState::Unknown),
            ("SOMETHING_NEW", SessionState::Unknown),
        ] {
            let parsed = K::parse(word);
            assert_eq!(session_state(Some(&parsed)), engine, "{word}");
            // The engine's word is the kernel's for the states it knows.
            if engine != SessionState::Unknown {
                assert_eq!(engine.name(), word);
            }
        }
        assert_eq!(session_state(None), SessionState::Unknown);
    }

    #[test]
    fn disk_state_words_round_trip_through_the_parser() {
        for w in [
            "created",
            "running",
            "cancel",
            "deleted",
            "quiesce",
            "offline",
            "transport-offline",
            "blocked",
            "created-blocked",
            "Unknown",
            "something-new",
        ] {
            assert_eq!(iscsi::DeviceState::parse(w).name(), w);
        }
    }
}

#[cfg(test)]
mod iscsiadm_outcome_tests {
    use super::*;

    /// What the engine made of each exit code before the two tables were folded into one
    /// (the match that stood in `IscsiadmOutcome::from_exit_code`): unchanged for every code.
    fn before(code: i32, message: &str) -> IscsiadmOutcome {
        match code {
            0 => IscsiadmOutcome::Success,
            15 => IscsiadmOutcome::AlreadyLoggedIn,
            2 | 21 => IscsiadmOutcome::NotFound,
            8 | 11 | 33 => IscsiadmOutcome::Timeout,
            19 | 24 => IscsiadmOutcome::AuthFailed,
            _ => IscsiadmOutcome::Other {
                code: Some(code),
                message: message.to_string(),
            },
        }
    }

    #[test]
    fn every_exit_code_maps_as_before() {
        for code in -3..=40 {
            let via_table = iscsiadm_outcome(iscsi::IscsiadmStatus::from_code(code), "last");
            assert_eq!(via_table, before(code, "last"), "exit {code}");
            assert_eq!(IscsiadmOutcome::from_exit_code(code, "last"), via_table);
        }
    }
}

#[cfg(test)]
mod kernel_event_tests {
    use super::*;
    use crate::kmsg::Record;
    use crate::signatures::classify_record;

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
