//! Operator commands (`pause`, `resume`, `recover`, `reset-device`, `reconnect`), including
//! the logout/login of live sessions no port holds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{CommandError, Engine};
use crate::recovery::action::{ActionKind, AlertClass, IscsiNode, Origin};
use crate::recovery::input::{IscsiadmOutcome, OperatorCommand, PortId, SessionInfo, SessionKey};
use crate::recovery::state::{Episode, Fault, Hold, InFlight, InFlightKind, Phase, Stage};
use crate::time::Instant;

impl Engine {
    /// An operator command. Returns what will happen, in words.
    pub fn handle_command(
        &mut self,
        cmd: OperatorCommand,
        now: Instant,
    ) -> Result<String, CommandError> {
        self.now = now;
        let r = self.command(cmd, now);
        self.finish();
        r
    }

    pub(super) fn command(
        &mut self,
        cmd: OperatorCommand,
        now: Instant,
    ) -> Result<String, CommandError> {
        match cmd {
            OperatorCommand::Pause => {
                self.paused = true;
                self.mark_dirty("paused by the operator".into());
                self.alert(
                    now,
                    AlertClass::Info,
                    "paused".into(),
                    "automatic recovery paused by the operator".into(),
                    "detection and alerts continue; no device is re-created and no session is \
                     logged out or in until `iser-guard resume`"
                        .into(),
                    Some("iser-guard resume".into()),
                );
                Ok("automatic actions paused; detection and alerts continue".into())
            }
            OperatorCommand::Resume => {
                self.paused = false;
                self.gate.reset("paused");
                self.lift_kernel_bugs();
                for p in self.ports.values_mut() {
                    if matches!(p.hold, Some(Hold::Paused | Hold::KernelBug { .. })) {
                        p.hold = None;
                    }
                }
                self.mark_dirty("resumed by the operator".into());
                self.evaluate_all(now);
                Ok("automatic actions resumed".into())
            }
            OperatorCommand::Recover { device, port } => {
                let pids = self.command_ports(&device, port)?;
                self.recreatable(&device)?;
                self.refuse_if_blocked(&device)?;
                self.lift_kernel_bugs_for(&device);
                for pid in &pids {
                    self.operator_episode(pid, true, false, now);
                }
                Ok(format!(
                    "recovering {}: check the target, re-create {device}, reconnect, verify",
                    join_ports(&pids)
                ))
            }
            OperatorCommand::ResetDevice { device } => {
                let pids = self.command_ports(&device, None)?;
                self.recreatable(&device)?;
                self.refuse_if_blocked(&device)?;
                self.lift_kernel_bugs_for(&device);
                for pid in &pids {
                    self.operator_episode(pid, true, true, now);
                }
                Ok(format!(
                    "re-creating {device} now, then reconnecting its sessions"
                ))
            }
            OperatorCommand::Reconnect { target, portal } => {
                let keys: Vec<SessionKey> = self
                    .sessions
                    .values()
                    .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
                    .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
                    .map(|s| s.key.clone())
                    .collect();
                // Live sessions iscsiadm reports that no port holds (not placed on an RDMA
                // port): the operator's word still applies to them.
                let unplaced: Vec<SessionInfo> = self
                    .unplaced
                    .values()
                    .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
                    .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
                    .cloned()
                    .collect();
                if keys.is_empty() && unplaced.is_empty() {
                    return Err(CommandError::NoMatchingSessions);
                }
                let n_unplaced = unplaced.len();
                if !unplaced.is_empty() {
                    self.reconnect_unplaced(unplaced, now);
                }
                if keys.is_empty() {
                    return Ok(format!("logging {n_unplaced} session(s) out and in"));
                }
                let mut pids = BTreeSet::new();
                // The operator's picks on a healthy port open its episode below.
                let mut picks: BTreeMap<PortId, Vec<SessionKey>> = BTreeMap::new();
                for k in &keys {
                    if let Some(s) = self.sessions.get_mut(k) {
                        s.op = None;
                        pids.insert(s.port.clone());
                        if let Some(p) = self.ports.get_mut(&s.port) {
                            let targeted = match p.episode_mut() {
                                Some(e) => &mut e.targeted,
                                None => picks.entry(s.port.clone()).or_default(),
                            };
                            if !targeted.contains(k) {
                                targeted.push(k.clone());
                            }
                        }
                    }
                }
                for pid in &pids {
                    let picked = picks.remove(pid).unwrap_or_default();
                    let mut opened = None;
                    if let Some(p) = self.ports.get_mut(pid) {
                        p.hold = None;
                        let quarantined = p.phase() == Phase::Quarantined;
                        match p.episode_mut() {
                            Some(e) => {
                                for k in picked {
                                    if !e.targeted.contains(&k) {
                                        e.targeted.push(k);
                                    }
                                }
                                e.origin = Origin::Operator;
                                e.attempts = 0;
                                if quarantined {
                                    e.fault = Fault::Operator;
                                    e.since = now;
                                }
                            }
                            None => {
                                let mut e = Episode::new(Fault::Operator, now, Origin::Operator);
                                e.targeted = picked;
                                opened = Some(e);
                            }
                        }
                    }
                    self.reconnect_from(
                        pid,
                        opened,
                        false,
                        "operator asked: iser-guard reconnect".into(),
                        now,
                    );
                    self.evaluate(pid, now);
                }
                Ok(format!(
                    "logging {} session(s) out and in",
                    keys.len() + n_unplaced
                ))
            }
        }
    }

    /// `reconnect` of live sessions no port holds: log each out, then in (operator origin).
    pub(super) fn reconnect_unplaced(&mut self, list: Vec<SessionInfo>, now: Instant) {
        let timeout = self.policy.iscsiadm_timeout;
        let mut batch = Vec::new();
        for s in list {
            let node = IscsiNode {
                key: s.key.clone(),
                transport: s.transport.clone(),
            };
            let id = self.alloc_id();
            let kind = InFlightKind::OperatorLogout(node.clone());
            self.inflight.insert(
                id,
                InFlight {
                    id,
                    kind,
                    deadline: now.plus(timeout + Duration::from_secs(10)),
                },
            );
            batch.push((
                id,
                format!(
                    "operator asked: iser-guard reconnect; session {} {} is not placed on an \
                     RDMA port, logging it out and in as asked",
                    s.sid, s.key
                ),
                ActionKind::IscsiLogout {
                    sid: s.sid,
                    node,
                    timeout,
                },
            ));
        }
        self.persist(format!(
            "about to log {} session(s) out/in (operator)",
            batch.len()
        ));
        for (id, reason, kind) in batch {
            self.push_with_id(id, None, None, Origin::Operator, reason, kind);
        }
    }

    pub(super) fn on_operator_logout(
        &mut self,
        node: IscsiNode,
        status: IscsiadmOutcome,
        now: Instant,
    ) {
        if !matches!(status, IscsiadmOutcome::Success | IscsiadmOutcome::NotFound) {
            self.operator_failures.push(format!(
                "{}: iscsiadm --logout: {status}; the session was left as it was",
                node.key
            ));
            self.alert(
                now,
                AlertClass::Error,
                format!("reconnect:{}", node.key),
                format!("reconnect of {}: the logout failed", node.key),
                format!("iscsiadm --logout: {status}; the session was left as it was"),
                None,
            );
            self.request_sessions(now, true);
            return;
        }
        let timeout = self.policy.iscsiadm_timeout;
        let id = self.alloc_id();
        self.inflight.insert(
            id,
            InFlight {
                id,
                kind: InFlightKind::OperatorLogin(node.clone()),
                deadline: now.plus(timeout + Duration::from_secs(10)),
            },
        );
        self.persist(format!("about to log {} in (operator)", node.key));
        let reason = format!(
            "operator asked: iser-guard reconnect; logging {} in",
            node.key
        );
        self.push_with_id(
            id,
            None,
            None,
            Origin::Operator,
            reason,
            ActionKind::IscsiLogin { node, timeout },
        );
    }

    pub(super) fn on_operator_login(
        &mut self,
        node: &IscsiNode,
        status: IscsiadmOutcome,
        now: Instant,
    ) {
        self.request_sessions(now, true);
        if matches!(
            status,
            IscsiadmOutcome::Success | IscsiadmOutcome::AlreadyLoggedIn
        ) {
            self.mark_dirty(format!("{}: reconnected (operator)", node.key));
            return;
        }
        self.operator_failures.push(format!(
            "{}: iscsiadm --login: {status}; the session is logged out now",
            node.key
        ));
        self.alert(
            now,
            AlertClass::Critical,
            format!("reconnect:{}", node.key),
            format!("reconnect of {}: the login failed", node.key),
            format!("iscsiadm --login: {status}; the session is logged out now"),
            Some(format!(
                "iscsiadm -m node -T {} -p {} -I {} --login",
                node.key.target, node.key.portal, node.key.iface
            )),
        );
    }

    pub(super) fn command_ports(
        &mut self,
        device: &str,
        port: Option<u32>,
    ) -> Result<Vec<PortId>, CommandError> {
        let known = self.ports_of_device(device);
        let pids: Vec<PortId> = match port {
            Some(n) => vec![PortId::new(device, n)],
            None => known.clone(),
        };
        if known.is_empty() && !self.devices.contains_key(device) && port.is_none() {
            return Err(CommandError::UnknownDevice {
                device: device.to_string(),
                known: self.devices.keys().cloned().collect(),
            });
        }
        if pids.is_empty() {
            return Ok(vec![PortId::new(device, 1)]);
        }
        Ok(pids)
    }

    pub(super) fn operator_episode(
        &mut self,
        pid: &PortId,
        recreate: bool,
        skip_wait: bool,
        now: Instant,
    ) {
        self.port_or_create(pid, now);
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        p.hold = None;
        let phase = p.phase();
        let opened = match p.episode_mut() {
            Some(e) => {
                e.origin = Origin::Operator;
                e.attempts = 0;
                e.listener_gone = false;
                e.needs_recreate = recreate;
                e.skip_target_wait = skip_wait;
                e.fault = Fault::Operator;
                e.since = now;
                None
            }
            None => {
                let mut e = Episode::new(Fault::Operator, now, Origin::Operator);
                e.needs_recreate = recreate;
                e.skip_target_wait = skip_wait;
                Some(e)
            }
        };
        if phase == Phase::ResettingDevice {
            return; // Already being re-created.
        }
        let what = if skip_wait {
            format!("operator asked: iser-guard reset-device {}", pid.device)
        } else {
            format!("operator asked: iser-guard recover {pid}")
        };
        self.transition_in(pid, opened, Stage::Faulted, what, now);
        self.evaluate(pid, now);
    }

    /// Operator logouts/logins of sessions on no RDMA port still in flight (`reconnect` of
    /// a session no port holds): its command is not finished before they are.
    pub(crate) fn operator_session_ops(&self) -> usize {
        self.inflight
            .values()
            .filter(|i| {
                matches!(
                    i.kind,
                    InFlightKind::OperatorLogout(_) | InFlightKind::OperatorLogin(_)
                )
            })
            .count()
    }

    /// The live sessions on no RDMA port that a `reconnect` filter selects.
    pub(crate) fn unplaced_matching(
        &self,
        target: &Option<String>,
        portal: &Option<crate::recovery::Portal>,
    ) -> Vec<SessionKey> {
        self.unplaced
            .values()
            .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
            .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
            .map(|s| s.key.clone())
            .collect()
    }

    /// Why operator logouts/logins of sessions on no RDMA port failed, oldest first.
    pub(crate) fn operator_failures(&self) -> &[String] {
        &self.operator_failures
    }
}

pub(super) fn join_ports(pids: &[PortId]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
