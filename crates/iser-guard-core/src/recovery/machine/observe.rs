//! Detection: kernel-log records and RDMA netlink facts, which port they concern, and the
//! fault they mean (stuck GSI QP, zombie I/O errors, recovery timeouts). Untrusted records
//! only raise the coalesced warning.

use super::Engine;
use crate::qp::QpState;
use crate::recovery::action::AlertClass;
use crate::recovery::input::{
    CmAddrCause, IoErrorKind, Observation, PortId, RecreateResult, SessionState, StuckEvidence,
    Trust,
};
use crate::recovery::state::{Fault, FreshQp, Phase, Stage};
use crate::signatures::explain::errno_name;
use crate::time::Instant;

impl Engine {
    /// A kernel-log record or RDMA netlink fact.
    pub fn handle_observation(&mut self, obs: Observation, trust: Trust, now: Instant) {
        self.now = now;
        self.stats.observations += 1;
        if trust == Trust::Untrusted && !self.policy.trust_userspace {
            self.stats.ignored_untrusted += 1;
            // One coalesced alert for every forged record, whatever its signature: the point
            // is that someone writes into /dev/kmsg, not each line they wrote.
            self.alert_coalesced(
                now,
                AlertClass::Warning,
                "untrusted".to_string(),
                format!(
                    "ignored kernel-log record(s) written by userspace, the first: {}",
                    obs.describe()
                ),
                "it looks like a fault, but it was written into /dev/kmsg by a process, not by \
                 the kernel, so it cannot trigger recovery (kmsg.trust-userspace-records = false). \
                 Find out who writes such records."
                    .to_string(),
                None,
            );
            self.finish();
            return;
        }
        match obs {
            Observation::GsiQpStuck {
                device,
                port,
                evidence,
            } => self.on_gsi_stuck(&device, port, evidence, now),
            Observation::GsiQpState {
                device,
                port,
                state,
            } => {
                let pid = PortId::new(device.clone(), port);
                if state == QpState::Err {
                    self.gsi_rts_at.remove(&pid);
                    self.on_gsi_stuck(&device, Some(port), StuckEvidence::QpTable, now);
                } else if state == QpState::Rts {
                    self.gsi_rts_at.insert(pid.clone(), now);
                    self.on_gsi_rts(&pid, now);
                }
            }
            Observation::PortDown { device, port } => {
                if let Some(p) = self.ports.get_mut(&PortId::new(device, port)) {
                    p.link_up = false;
                }
            }
            Observation::PortUp { device, port } => {
                if let Some(p) = self.ports.get_mut(&PortId::new(device, port)) {
                    p.link_up = true;
                }
            }
            Observation::DeviceGone { device } => self.on_device_gone(&device, now),
            Observation::DeviceAppeared {
                device,
                parent,
                driver,
                ports: _,
            } => self.on_device_appeared(&device, parent, driver, now),
            Observation::DeviceRecipe { device, recipe } => self.remember_recipe(&device, recipe),
            Observation::DeviceRenamed { from, to } => self.rename_device(&from, &to, now),
            Observation::ConnError { sid, .. } => {
                self.mark_troubled(sid);
                self.request_sessions(now, false)
            }
            Observation::SessionRecoveryTimedOut { sid } => {
                self.mark_troubled(sid);
                if let Some(key) = self.by_sid.get(&sid).cloned() {
                    let mut pid = None;
                    if let Some(rec) = self.sessions.get_mut(&key) {
                        rec.state = SessionState::Free;
                        pid = Some(rec.port.clone());
                    }
                    if let Some(pid) = pid {
                        self.report_quarantined_losses(&pid, now);
                        if self.phase(&pid) == Some(Phase::Healthy) {
                            self.enter_fault(
                                &pid,
                                Fault::SessionsDown,
                                format!(
                                    "session {sid} ({key}) gave up recovering (iscsid's \
                                     replacement_timeout expired): its disks now fail I/O"
                                ),
                                now,
                            );
                        }
                    }
                }
                self.request_sessions(now, true);
            }
            Observation::IoError { disk, kind } => self.on_io_error(&disk, kind, now),
            Observation::KernelBug { module, report } => self.on_kernel_bug(module, report, now),
            // The line names no session: re-read them all so the one whose connection the
            // QP belonged to is seen FAILED without waiting for iscsid's conn error. Nothing
            // destructive follows from this line alone.
            Observation::IserQpEvent { .. } => self.request_sessions(now, false),
            Observation::CmRejectedInvalidServiceId => self.on_cm_rejected(now),
            Observation::AsyncEvent(ev) => self.on_async_event(ev, now),
            Observation::DriverResetRequested { device } => {
                self.on_driver_reset_requested(&device, now)
            }
            Observation::NicWithoutRdma { pci, what, remedy } => {
                self.on_nic_without_rdma(&pci, &what, &remedy, now)
            }
            Observation::DriverStack { conditions } => self.on_driver_stack(conditions, now),
            Observation::DriverStackSaid { condition } => self.on_driver_stack_said(condition, now),
            Observation::NvmeControllers { controllers } => {
                self.nvme = Some(controllers);
            }
            Observation::NfsMounts { mounts } => {
                self.nfs = Some(mounts);
            }
            Observation::MultipathPaths { paths } => self.on_multipath_paths(paths, now),
            Observation::Consumers { ports } => {
                if self.consumers.as_ref() != Some(&ports) {
                    self.consumers = Some(ports);
                    // A consumer that went away or broke may lift a hold.
                    self.evaluate_all(now);
                }
            }
            Observation::CmAddrError { status } => {
                match CmAddrCause::of(status) {
                    CmAddrCause::LocalDeviceMissing => {}
                    CmAddrCause::PortalUnresolved => {
                        // What iscsid's reconnects to a target that is away log: the probes
                        // and the sessions' states say the same; nothing to alert or do.
                        self.finish();
                        return;
                    }
                    CmAddrCause::Other => {
                        self.alert_coalesced(
                            now,
                            AlertClass::Error,
                            format!("cm-addr-error:{status}"),
                            format!(
                                "RDMA CM address resolution failed (status {}): iSCSI \
                                 reconnects fail on this host before reaching the target",
                                errno_name(status)
                            ),
                            "the kernel found no usable route or source address for a \
                             portal (`ip route get` with the portal's address shows the route \
                             it would take); nothing is re-created for it"
                                .to_string(),
                            None,
                        );
                        self.finish();
                        return;
                    }
                }
                let explained = self.recreating.is_some()
                    || self.blocked_recreations().next().is_some()
                    || self.ports.values().any(|p| {
                        matches!(p.phase(), Phase::AwaitingDevice | Phase::RecreationBlocked)
                    });
                if explained {
                    // Expected while a device is being re-created or known to be gone.
                    self.finish();
                    return;
                }
                self.alert_coalesced(
                    now,
                    AlertClass::Error,
                    format!("cm-addr-error:{status}"),
                    format!(
                        "RDMA CM cannot acquire a local RDMA device (status {}): an \
                         initiator RDMA device is missing",
                        errno_name(status)
                    ),
                    "iSCSI reconnects fail before leaving this host: the RDMA device that owns \
                     the source address is gone. iser-guard waits for it to come back and \
                     re-creates it if it does not."
                        .to_string(),
                    Some("rdma link show".to_string()),
                );
                self.request_topology(now);
            }
        }
        self.finish();
    }

    pub(super) fn on_gsi_stuck(
        &mut self,
        device: &str,
        port: Option<u32>,
        evidence: StuckEvidence,
        now: Instant,
    ) {
        if !self.device_known(device) {
            // No port for a device nobody has shown (see unknown.rs): counted and kept.
            self.on_unknown_device(device, port, evidence, now);
            return;
        }
        self.gsi_stuck_known(device, port, evidence, None, now);
    }

    /// [`Engine::on_gsi_stuck`] for a known device; `seen_before` says when the records
    /// came before the device was known.
    pub(super) fn gsi_stuck_known(
        &mut self,
        device: &str,
        port: Option<u32>,
        evidence: StuckEvidence,
        seen_before: Option<String>,
        now: Instant,
    ) {
        let pids = match port {
            Some(p) => vec![PortId::new(device, p)],
            None => {
                let known: Vec<PortId> = self
                    .ports_of_device(device)
                    .into_iter()
                    .filter(|pid| self.ports.get(pid).is_some_and(|p| !p.sessions.is_empty()))
                    .collect();
                if known.is_empty() {
                    let all = self.ports_of_device(device);
                    if all.is_empty() {
                        vec![PortId::new(device, 1)]
                    } else {
                        all
                    }
                } else {
                    known
                }
            }
        };
        for pid in pids {
            let mut reason = format!(
                "{}: QP 1 (GSI) carries the RDMA CM handshakes every iSER login needs, so no \
                 session can reconnect on {pid} until the device is re-created",
                evidence.describe()
            );
            if let Some(before) = &seen_before {
                reason.push_str(&format!(" ({before})"));
            }
            self.enter_fault(&pid, Fault::GsiStuck { evidence }, reason, now);
        }
    }

    pub(super) fn on_gsi_rts(&mut self, pid: &PortId, now: Instant) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        if matches!(
            p.stage(),
            Some(Stage::ResettingDevice {
                verify_until: Some(_)
            })
        ) {
            let device = pid.device.clone();
            self.on_recreate_done(
                &device,
                RecreateResult::Recreated {
                    name: device.clone(),
                    mode_restored: None,
                    method: None,
                    failed_before: Vec::new(),
                },
                now,
            );
            // That sighting was the fresh QP 1 itself.
            if let Some(e) = self.episode_mut(pid) {
                if e.recreated.is_some() {
                    e.recreated = Some(FreshQp::Seen);
                }
            }
            return;
        }
        let phase = p.phase();
        let Some(e) = p.episode_mut() else {
            return;
        };
        if e.awaiting_fresh_qp() {
            e.recreated = Some(FreshQp::Seen);
            self.mark_dirty(format!("{pid}: the new QP 1 is in RTS"));
            self.evaluate(pid, now);
            return;
        }
        if e.needs_recreate
            && matches!(e.fault, Fault::GsiStuck { .. })
            && matches!(phase, Phase::Faulted | Phase::AwaitingTarget)
        {
            e.needs_recreate = false;
            e.fault = Fault::SessionsDown;
            p.reason = format!(
                "QP 1 of {pid} is back in RTS without a re-creation (someone re-created the \
                 device, or the driver recovered): no re-creation needed"
            );
            self.mark_dirty(format!("{pid}: QP 1 back in RTS"));
            self.evaluate(pid, now);
        }
    }

    pub(super) fn on_io_error(&mut self, disk: &str, kind: IoErrorKind, now: Instant) {
        let Some(key) = self.by_disk.get(disk).cloned() else {
            return;
        };
        if let Some(rec) = self.sessions.get_mut(&key) {
            rec.troubled = true;
        }
        if kind == IoErrorKind::Offline {
            self.request_sessions(now, false);
            return;
        }
        let window = self.policy.zombie_window;
        let threshold = usize::try_from(self.policy.zombie_io_errors.max(1)).unwrap_or(usize::MAX);
        let Some(rec) = self.sessions.get_mut(&key) else {
            return;
        };
        let pid = rec.port.clone();
        let port_healthy = self
            .ports
            .get(&pid)
            .is_some_and(|p| p.phase() == Phase::Healthy);
        if !rec.is_up() || !port_healthy {
            return; // Expected while the session is down; iscsid or the engine handles it.
        }
        rec.io_errors.retain(|t| now.since(*t) <= window);
        rec.io_errors.push(now);
        let n_errors = rec.io_errors.len();
        self.mark_dirty(format!(
            "{disk}: I/O error {n_errors} on a LOGGED_IN session"
        ));
        let Some(rec) = self.sessions.get_mut(&key) else {
            return;
        };
        if rec.io_errors.len() >= threshold {
            let n = rec.io_errors.len();
            let sid = rec.sid.map(|s| s.to_string()).unwrap_or_else(|| "?".into());
            let reason = format!(
                "session {sid} {key} reports LOGGED_IN but {n} I/O errors on {disk} within {}s: \
                 a zombie session iscsid will not repair; logging that one session out and in \
                 (no device re-creation)",
                window.as_secs()
            );
            self.enter_fault(&pid, Fault::Zombie { session: key }, reason, now);
        }
    }

    /// A session seen with trouble (connection error, recovery timeout) is not forgotten if
    /// it vanishes: that was no clean logout.
    pub(super) fn mark_troubled(&mut self, sid: u32) {
        if let Some(key) = self.by_sid.get(&sid).cloned() {
            if let Some(rec) = self.sessions.get_mut(&key) {
                rec.troubled = true;
            }
        }
    }
}
