//! The one place the journal's current format ([`v2`]) meets the engine's state
//! ([`EngineSnapshot`]). An engine refactor changes this file, never `v1.rs`/`v2.rs`.

use super::{v2, JournalFormatError};
use crate::consumers::{ConsumerKind, ConsumerRef};
use crate::observe::{Incident, IncidentAction, IncidentOutcome, Stamp};
use crate::recovery::{
    ActionId, AwaitTimer, BlockedRecreation, BlockedStep, DeviceRecord, DiskInfo, DriverReset,
    EngineSnapshot, Episode, Fault, FreshQp, Hold, InFlight, InFlightKind, IscsiNode,
    KernelBugHold, Origin, Phase, PortId, PortRecord, PortState, Portal, PortalRecord,
    ReconnectTimer, Recreation, RecreationState, SelfTestProgress, SelfTestRecord, SelfTestVerdict,
    SessionKey, SessionOp, SessionRecord, SessionState, Stage, StuckEvidence, TaskId, TimerKind,
};
use crate::reset_plan::{AuxFacts, ParentFacts, RecreateFrom, SoftType};
use crate::time::Instant;

impl v2::JournalFile {
    /// The on-disk form of `snapshot`.
    pub(crate) fn from_snapshot(s: &EngineSnapshot) -> Self {
        v2::JournalFile {
            version: 2,
            taken_at: s.taken_at.0,
            next_id: s.next_id,
            rng: s.rng,
            paused: s.paused,
            recreating: s.recreating.clone(),
            ports: s.ports.iter().map(port_out).collect(),
            sessions: s.sessions.iter().map(session_out).collect(),
            devices: s.devices.iter().map(device_out).collect(),
            portals: s
                .portals
                .iter()
                .map(|p| v2::PortalProbe {
                    portal: portal_out(&p.portal),
                    consecutive_ok: p.consecutive_ok,
                    inflight: p.inflight.map(|id| id.0),
                    inflight_started: ms(p.inflight_started),
                    ok_started: p.ok_started.iter().map(|t| t.0).collect(),
                    newest_started: ms(p.newest_started),
                })
                .collect(),
            inflight: s
                .inflight
                .iter()
                .map(|i| v2::InFlight {
                    id: i.id.0,
                    kind: match &i.kind {
                        InFlightKind::Probe(p) => v2::InFlightKind::Probe(portal_out(p)),
                        InFlightKind::Recreate(d) => v2::InFlightKind::Recreate(d.clone()),
                        InFlightKind::Logout(k) => v2::InFlightKind::Logout(key_out(k)),
                        InFlightKind::Login(k) => v2::InFlightKind::Login(key_out(k)),
                        InFlightKind::Rescan(k) => v2::InFlightKind::Rescan(key_out(k)),
                        InFlightKind::OperatorLogout(n) => {
                            v2::InFlightKind::OperatorLogout(node_out(n))
                        }
                        InFlightKind::SelfTest(p) => v2::InFlightKind::SelfTest(port_id_out(p)),
                        InFlightKind::OperatorLogin(n) => {
                            v2::InFlightKind::OperatorLogin(node_out(n))
                        }
                    },
                    deadline: i.deadline.0,
                })
                .collect(),
            incidents: Vec::new(),
            kernel_bugs: s
                .kernel_bugs
                .iter()
                .map(|k| v2::KernelBug {
                    module: k.module.clone(),
                    report: k.report.clone(),
                    at: k.at.0,
                    all_devices: k.all_devices,
                    lifted_for: k.lifted_for.clone(),
                })
                .collect(),
        }
    }

    /// The on-disk form of `snapshot` with the daemon's incident list.
    pub(crate) fn from_parts(s: &EngineSnapshot, incidents: &[Incident]) -> Self {
        v2::JournalFile {
            incidents: incidents.iter().map(incident_out).collect(),
            ..Self::from_snapshot(s)
        }
    }

    /// The incidents this file holds, oldest first.
    pub fn incidents(&self) -> Vec<Incident> {
        self.incidents.iter().map(incident_in).collect()
    }

    /// The engine's snapshot of this file; a value the engine's types cannot hold (a portal
    /// address that is not an IP address) is [`JournalFormatError::Value`].
    pub(crate) fn into_snapshot(self) -> Result<EngineSnapshot, JournalFormatError> {
        Ok(EngineSnapshot {
            version: EngineSnapshot::VERSION,
            taken_at: Instant(self.taken_at),
            next_id: self.next_id,
            rng: self.rng,
            paused: self.paused,
            kernel_bugs: self
                .kernel_bugs
                .into_iter()
                .map(|k| KernelBugHold {
                    module: k.module,
                    report: k.report,
                    at: Instant(k.at),
                    all_devices: k.all_devices,
                    lifted_for: k.lifted_for,
                })
                .collect(),
            recreating: self.recreating,
            ports: self
                .ports
                .into_iter()
                .map(port_in)
                .collect::<Result<_, _>>()?,
            sessions: self
                .sessions
                .into_iter()
                .map(session_in)
                .collect::<Result<_, _>>()?,
            devices: self
                .devices
                .into_iter()
                .map(device_in)
                .collect::<Result<_, _>>()?,
            portals: self
                .portals
                .into_iter()
                .map(|p| {
                    Ok(PortalRecord {
                        portal: portal_in(p.portal)?,
                        consecutive_ok: p.consecutive_ok,
                        inflight: p.inflight.map(ActionId),
                        inflight_started: at(p.inflight_started),
                        ok_started: p.ok_started.into_iter().map(Instant).collect(),
                        newest_started: at(p.newest_started),
                    })
                })
                .collect::<Result<_, JournalFormatError>>()?,
            inflight: self
                .inflight
                .into_iter()
                .map(|i| {
                    Ok(InFlight {
                        id: ActionId(i.id),
                        kind: match i.kind {
                            v2::InFlightKind::Probe(p) => InFlightKind::Probe(portal_in(p)?),
                            v2::InFlightKind::Recreate(d) => InFlightKind::Recreate(d),
                            v2::InFlightKind::Logout(k) => InFlightKind::Logout(key_in(k)?),
                            v2::InFlightKind::Login(k) => InFlightKind::Login(key_in(k)?),
                            v2::InFlightKind::Rescan(k) => InFlightKind::Rescan(key_in(k)?),
                            v2::InFlightKind::OperatorLogout(n) => {
                                InFlightKind::OperatorLogout(node_in(n)?)
                            }
                            v2::InFlightKind::SelfTest(p) => InFlightKind::SelfTest(port_id_in(p)),
                            v2::InFlightKind::OperatorLogin(n) => {
                                InFlightKind::OperatorLogin(node_in(n)?)
                            }
                        },
                        deadline: Instant(i.deadline),
                    })
                })
                .collect::<Result<_, JournalFormatError>>()?,
        })
    }
}

fn port_id_out(p: &PortId) -> v2::PortId {
    v2::PortId {
        device: p.device.clone(),
        port: p.port,
    }
}

fn port_id_in(p: v2::PortId) -> PortId {
    PortId::new(p.device, p.port)
}

fn portal_out(p: &Portal) -> v2::Portal {
    v2::Portal {
        address: p.ip().to_string(),
        port: p.port(),
    }
}

fn portal_in(p: v2::Portal) -> Result<Portal, JournalFormatError> {
    Portal::parse(&p.address, p.port).map_err(|e| JournalFormatError::Value {
        field: "portal",
        reason: e.to_string(),
    })
}

fn key_out(k: &SessionKey) -> v2::SessionKey {
    v2::SessionKey {
        target: k.target.clone(),
        portal: portal_out(&k.portal),
        iface: k.iface.clone(),
    }
}

fn key_in(k: v2::SessionKey) -> Result<SessionKey, JournalFormatError> {
    Ok(SessionKey {
        target: k.target,
        portal: portal_in(k.portal)?,
        iface: k.iface,
    })
}

fn node_out(n: &IscsiNode) -> v2::Node {
    v2::Node {
        key: key_out(&n.key),
        transport: n.transport.clone(),
    }
}

fn node_in(n: v2::Node) -> Result<IscsiNode, JournalFormatError> {
    Ok(IscsiNode {
        key: key_in(n.key)?,
        transport: n.transport,
    })
}

fn keys_out(keys: &[SessionKey]) -> Vec<v2::SessionKey> {
    keys.iter().map(key_out).collect()
}

fn keys_in(keys: Vec<v2::SessionKey>) -> Result<Vec<SessionKey>, JournalFormatError> {
    keys.into_iter().map(key_in).collect()
}

fn origin_out(o: Origin) -> v2::Origin {
    match o {
        Origin::Automatic => v2::Origin::Automatic,
        Origin::Operator => v2::Origin::Operator,
    }
}

fn origin_in(o: v2::Origin) -> Origin {
    match o {
        v2::Origin::Automatic => Origin::Automatic,
        v2::Origin::Operator => Origin::Operator,
    }
}

fn phase_out(p: Phase) -> v2::Phase {
    match p {
        Phase::Healthy => v2::Phase::Healthy,
        Phase::Faulted => v2::Phase::Faulted,
        Phase::AwaitingTarget => v2::Phase::AwaitingTarget,
        Phase::AwaitingDevice => v2::Phase::AwaitingDevice,
        Phase::ResettingDevice => v2::Phase::ResettingDevice,
        Phase::Reconnecting => v2::Phase::Reconnecting,
        Phase::Verifying => v2::Phase::Verifying,
        Phase::Quarantined => v2::Phase::Quarantined,
        Phase::RecreationBlocked => v2::Phase::RecreationBlocked,
    }
}

fn phase_in(p: v2::Phase) -> Phase {
    match p {
        v2::Phase::Healthy => Phase::Healthy,
        v2::Phase::Faulted => Phase::Faulted,
        v2::Phase::AwaitingTarget => Phase::AwaitingTarget,
        v2::Phase::AwaitingDevice => Phase::AwaitingDevice,
        v2::Phase::ResettingDevice => Phase::ResettingDevice,
        v2::Phase::Reconnecting => Phase::Reconnecting,
        v2::Phase::Verifying => Phase::Verifying,
        v2::Phase::Quarantined => Phase::Quarantined,
        v2::Phase::RecreationBlocked => Phase::RecreationBlocked,
    }
}

fn evidence_out(e: StuckEvidence) -> v2::StuckEvidence {
    match e {
        StuckEvidence::ModifyQpInvalid => v2::StuckEvidence::ModifyQpInvalid,
        StuckEvidence::MadRtsFailed => v2::StuckEvidence::MadRtsFailed,
        StuckEvidence::MadQpFatal => v2::StuckEvidence::MadQpFatal,
        StuckEvidence::QpTable => v2::StuckEvidence::QpTable,
        StuckEvidence::MadPortOpenFailed => v2::StuckEvidence::MadPortOpenFailed,
        StuckEvidence::AsyncDeviceFatal => v2::StuckEvidence::AsyncDeviceFatal,
    }
}

fn evidence_in(e: v2::StuckEvidence) -> StuckEvidence {
    match e {
        v2::StuckEvidence::ModifyQpInvalid => StuckEvidence::ModifyQpInvalid,
        v2::StuckEvidence::MadRtsFailed => StuckEvidence::MadRtsFailed,
        v2::StuckEvidence::MadQpFatal => StuckEvidence::MadQpFatal,
        v2::StuckEvidence::QpTable => StuckEvidence::QpTable,
        v2::StuckEvidence::MadPortOpenFailed => StuckEvidence::MadPortOpenFailed,
        v2::StuckEvidence::AsyncDeviceFatal => StuckEvidence::AsyncDeviceFatal,
    }
}

fn fault_out(f: &Fault) -> v2::Fault {
    match f {
        Fault::GsiStuck { evidence } => v2::Fault::GsiStuck {
            evidence: evidence_out(*evidence),
        },
        Fault::DeviceGone => v2::Fault::DeviceGone,
        Fault::SessionsDown => v2::Fault::SessionsDown,
        Fault::Zombie { session } => v2::Fault::Zombie {
            session: key_out(session),
        },
        Fault::Operator => v2::Fault::Operator,
    }
}

fn fault_in(f: v2::Fault) -> Result<Fault, JournalFormatError> {
    Ok(match f {
        v2::Fault::GsiStuck { evidence } => Fault::GsiStuck {
            evidence: evidence_in(evidence),
        },
        v2::Fault::DeviceGone => Fault::DeviceGone,
        v2::Fault::SessionsDown => Fault::SessionsDown,
        v2::Fault::Zombie { session } => Fault::Zombie {
            session: key_in(session)?,
        },
        v2::Fault::Operator => Fault::Operator,
    })
}

fn consumers_out(c: &[ConsumerRef]) -> Vec<v2::Consumer> {
    c.iter()
        .map(|c| v2::Consumer {
            port: c.port,
            kind: c.kind.key().to_string(),
            owner: c.owner.clone(),
            live: c.live,
        })
        .collect()
}

fn consumers_in(c: Vec<v2::Consumer>) -> Result<Vec<ConsumerRef>, JournalFormatError> {
    c.into_iter()
        .map(|c| {
            Ok(ConsumerRef {
                port: c.port,
                kind: ConsumerKind::from_key(&c.kind).ok_or_else(|| JournalFormatError::Value {
                    field: "consumer kind",
                    reason: format!("{:?} is not a consumer kind", c.kind),
                })?,
                owner: c.owner,
                live: c.live,
            })
        })
        .collect()
}

fn hold_out(h: &Hold) -> v2::Hold {
    match h {
        Hold::Paused => v2::Hold::Paused,
        Hold::DryRun => v2::Hold::DryRun,
        Hold::NotAllowed => v2::Hold::NotAllowed,
        Hold::OtherSessionsHealthy {
            sessions,
            consumers,
        } => v2::Hold::OtherSessionsHealthy {
            sessions: keys_out(sessions),
            consumers: consumers_out(consumers),
        },
        Hold::LastMultipathPath { paths } => v2::Hold::LastMultipathPath {
            paths: super::multipath_map::out(paths, &[]),
        },
        Hold::WaitingForSlot { busy } => v2::Hold::WaitingForSlot { busy: busy.clone() },
        Hold::NoPortalKnown => v2::Hold::NoPortalKnown,
        Hold::KernelBug { module, report } => v2::Hold::KernelBug {
            module: module.clone(),
            report: report.clone(),
        },
    }
}

fn hold_in(h: v2::Hold) -> Result<Hold, JournalFormatError> {
    Ok(match h {
        v2::Hold::Paused => Hold::Paused,
        v2::Hold::DryRun => Hold::DryRun,
        v2::Hold::NotAllowed => Hold::NotAllowed,
        v2::Hold::OtherSessionsHealthy {
            sessions,
            consumers,
        } => Hold::OtherSessionsHealthy {
            sessions: keys_in(sessions)?,
            consumers: consumers_in(consumers)?,
        },
        v2::Hold::LastMultipathPath { paths } => Hold::LastMultipathPath {
            paths: super::multipath_map::paths_in(&paths)?,
        },
        v2::Hold::WaitingForSlot { busy } => Hold::WaitingForSlot { busy },
        v2::Hold::NoPortalKnown => Hold::NoPortalKnown,
        v2::Hold::KernelBug { module, report } => Hold::KernelBug { module, report },
    })
}

fn timer_out(t: TimerKind) -> v2::TimerKind {
    match t {
        TimerKind::ProbeRound => v2::TimerKind::ProbeRound,
        TimerKind::Backoff => v2::TimerKind::Backoff,
        TimerKind::Grace => v2::TimerKind::Grace,
        TimerKind::SessionRefresh => v2::TimerKind::SessionRefresh,
    }
}

fn timer_in(t: v2::TimerKind) -> TimerKind {
    match t {
        v2::TimerKind::ProbeRound => TimerKind::ProbeRound,
        v2::TimerKind::Backoff => TimerKind::Backoff,
        v2::TimerKind::Grace => TimerKind::Grace,
        v2::TimerKind::SessionRefresh => TimerKind::SessionRefresh,
    }
}

fn ms(i: Option<Instant>) -> Option<u64> {
    i.map(|i| i.0)
}

fn at(ms: Option<u64>) -> Option<Instant> {
    ms.map(Instant)
}

/// The engine's port onto the flat v2 record: the state's own data goes into the fields v2
/// has for it, and fields a state does not have are written empty (as the flat record held
/// them after a transition).
fn port_out(p: &PortRecord) -> v2::Port {
    let ep = p.episode();
    let (verify_recreate, ops_not_before) = match p.stage() {
        Some(Stage::ResettingDevice { verify_until }) => (verify_until.is_some(), None),
        Some(Stage::Reconnecting { ops_not_before, .. }) => (false, *ops_not_before),
        Some(Stage::Verifying { list_asked_at, .. }) => (false, *list_asked_at),
        _ => (false, None),
    };
    v2::Port {
        id: port_id_out(&p.id),
        phase: phase_out(p.phase()),
        fault: ep.map(|e| fault_out(&e.fault)),
        reason: p.reason.clone(),
        since: p.since.0,
        fault_since: ep.map(|e| e.since.0),
        attempts: ep.map_or(0, |e| e.attempts),
        hold: p.hold.as_ref().map(hold_out),
        wake: p.wake().map(|(k, t)| (timer_out(k), t.0)),
        deadline: ms(p.deadline()),
        target_back_at: ms(ep.and_then(|e| e.target_back_at)),
        listener_gone: ep.is_some_and(|e| e.listener_gone),
        listener_rejected_at: ms(p.listener_rejected_at),
        needs_recreate: ep.is_some_and(|e| e.needs_recreate),
        recreated: ep.is_some_and(Episode::was_recreated),
        verify_recreate,
        evidence: ep.map_or(0, |e| e.evidence),
        link_up: p.link_up,
        origin: origin_out(p.origin()),
        skip_target_wait: ep.is_some_and(|e| e.skip_target_wait),
        ops_not_before: ms(ops_not_before),
        sessions: keys_out(&p.sessions),
        targeted: keys_out(ep.map_or(&[][..], |e| &e.targeted)),
        probes_count_from: ms(ep.and_then(|e| e.probes_count_from)),
        awaiting_fresh_qp: ep.is_some_and(Episode::awaiting_fresh_qp),
        attempt_recreated: ep.is_some_and(|e| e.attempt_recreated),
        hold_alerted_at: ms(p.hold_alerted_at),
        selftest: ep.and_then(|e| e.selftest.as_ref()).map(progress_out),
        last_selftest: p.last_selftest.as_ref().map(selftest_out),
    }
}

fn progress_out(p: &SelfTestProgress) -> v2::SelfTestProgress {
    match p {
        SelfTestProgress::Running(id) => v2::SelfTestProgress::Running(id.0),
        SelfTestProgress::Passed { summary } => v2::SelfTestProgress::Passed(summary.clone()),
        SelfTestProgress::Unavailable { reason } => {
            v2::SelfTestProgress::Unavailable(reason.clone())
        }
    }
}

fn progress_in(p: v2::SelfTestProgress) -> SelfTestProgress {
    match p {
        v2::SelfTestProgress::Running(id) => SelfTestProgress::Running(ActionId(id)),
        v2::SelfTestProgress::Passed(summary) => SelfTestProgress::Passed { summary },
        v2::SelfTestProgress::Unavailable(reason) => SelfTestProgress::Unavailable { reason },
    }
}

fn selftest_out(r: &SelfTestRecord) -> v2::SelfTestRecord {
    v2::SelfTestRecord {
        at: r.at.0,
        verdict: match r.verdict {
            SelfTestVerdict::Passed => v2::SelfTestVerdict::Passed,
            SelfTestVerdict::Failed => v2::SelfTestVerdict::Failed,
            SelfTestVerdict::Unavailable => v2::SelfTestVerdict::Unavailable,
        },
        summary: r.summary.clone(),
        steps: r.steps,
        took_ms: r.took_ms,
    }
}

fn selftest_in(r: v2::SelfTestRecord) -> SelfTestRecord {
    SelfTestRecord {
        at: Instant(r.at),
        verdict: match r.verdict {
            v2::SelfTestVerdict::Passed => SelfTestVerdict::Passed,
            v2::SelfTestVerdict::Failed => SelfTestVerdict::Failed,
            v2::SelfTestVerdict::Unavailable => SelfTestVerdict::Unavailable,
        },
        summary: r.summary,
        steps: r.steps,
        took_ms: r.took_ms,
    }
}

/// A flat v2 record onto the engine's port. Combinations the flat record could hold and the
/// engine's state cannot (episode fields on a healthy port, a timer of another stage, a
/// verification deadline without a lost outcome) are dropped: no engine ever read them in
/// that state. A port that is not healthy and has no fault recorded recovers from
/// "sessions down", the fault the engine assumed for it.
fn port_in(p: v2::Port) -> Result<PortRecord, JournalFormatError> {
    let phase = phase_in(p.phase);
    let wake = p.wake.map(|(k, t)| (timer_in(k), Instant(t)));
    let deadline = at(p.deadline);
    let ops_not_before = at(p.ops_not_before);
    let stage = match phase {
        Phase::Healthy => None,
        Phase::Faulted => Some(Stage::Faulted),
        Phase::AwaitingTarget => Some(Stage::AwaitingTarget {
            deadline,
            timer: wake.and_then(|(k, at)| match k {
                TimerKind::ProbeRound => Some((AwaitTimer::ProbeRound, at)),
                TimerKind::Backoff => Some((AwaitTimer::Backoff, at)),
                TimerKind::Grace | TimerKind::SessionRefresh => None,
            }),
        }),
        Phase::AwaitingDevice => Some(Stage::AwaitingDevice { deadline }),
        Phase::ResettingDevice => Some(Stage::ResettingDevice {
            verify_until: deadline.filter(|_| p.verify_recreate),
        }),
        Phase::Reconnecting => Some(Stage::Reconnecting {
            timer: wake.and_then(|(k, at)| match k {
                TimerKind::Grace => Some((ReconnectTimer::Grace, at)),
                TimerKind::Backoff => Some((ReconnectTimer::Backoff, at)),
                TimerKind::SessionRefresh => Some((ReconnectTimer::SessionRefresh, at)),
                TimerKind::ProbeRound => None,
            }),
            ops_not_before,
        }),
        Phase::Verifying => Some(Stage::Verifying {
            deadline,
            list_asked_at: ops_not_before,
        }),
        Phase::Quarantined => Some(Stage::Quarantined),
        Phase::RecreationBlocked => Some(Stage::RecreationBlocked {
            next_report: deadline,
        }),
    };
    let since = Instant(p.since);
    let state = match stage {
        None => PortState::Healthy,
        Some(stage) => PortState::Recovering {
            episode: Episode {
                fault: p
                    .fault
                    .map(fault_in)
                    .transpose()?
                    .unwrap_or(Fault::SessionsDown),
                since: at(p.fault_since).unwrap_or(since),
                origin: origin_in(p.origin),
                attempts: p.attempts,
                attempt_recreated: p.attempt_recreated,
                needs_recreate: p.needs_recreate,
                recreated: p.recreated.then_some(if p.awaiting_fresh_qp {
                    FreshQp::Awaited
                } else {
                    FreshQp::Seen
                }),
                skip_target_wait: p.skip_target_wait,
                listener_gone: p.listener_gone,
                probes_count_from: at(p.probes_count_from),
                target_back_at: at(p.target_back_at),
                evidence: p.evidence,
                targeted: keys_in(p.targeted)?,
                selftest: p.selftest.map(progress_in),
            },
            stage,
        },
    };
    Ok(PortRecord {
        id: port_id_in(p.id),
        state,
        reason: p.reason,
        since,
        hold: p.hold.map(hold_in).transpose()?,
        hold_alerted_at: at(p.hold_alerted_at),
        listener_rejected_at: at(p.listener_rejected_at),
        link_up: p.link_up,
        sessions: keys_in(p.sessions)?,
        last_selftest: p.last_selftest.map(selftest_in),
    })
}

fn state_out(s: SessionState) -> v2::SessionState {
    match s {
        SessionState::LoggedIn => v2::SessionState::LoggedIn,
        SessionState::Failed => v2::SessionState::Failed,
        SessionState::Free => v2::SessionState::Free,
        SessionState::Unknown => v2::SessionState::Unknown,
    }
}

fn state_in(s: v2::SessionState) -> SessionState {
    match s {
        v2::SessionState::LoggedIn => SessionState::LoggedIn,
        v2::SessionState::Failed => SessionState::Failed,
        v2::SessionState::Free => SessionState::Free,
        v2::SessionState::Unknown => SessionState::Unknown,
    }
}

fn op_out(o: &SessionOp) -> v2::SessionOp {
    match o {
        SessionOp::LoggingOut(id) => v2::SessionOp::LoggingOut(id.0),
        SessionOp::LoggedOut => v2::SessionOp::LoggedOut,
        SessionOp::LoggingIn(id) => v2::SessionOp::LoggingIn(id.0),
        SessionOp::Done => v2::SessionOp::Done,
        SessionOp::Failed(why) => v2::SessionOp::Failed(why.clone()),
    }
}

fn op_in(o: v2::SessionOp) -> SessionOp {
    match o {
        v2::SessionOp::LoggingOut(id) => SessionOp::LoggingOut(ActionId(id)),
        v2::SessionOp::LoggedOut => SessionOp::LoggedOut,
        v2::SessionOp::LoggingIn(id) => SessionOp::LoggingIn(ActionId(id)),
        v2::SessionOp::Done => SessionOp::Done,
        v2::SessionOp::Failed(why) => SessionOp::Failed(why),
    }
}

fn session_out(s: &SessionRecord) -> v2::Session {
    v2::Session {
        key: key_out(&s.key),
        transport: s.transport.clone(),
        port: port_id_out(&s.port),
        sid: s.sid,
        present: s.present,
        state: state_out(s.state),
        disks: s
            .disks
            .iter()
            .map(|d| v2::Disk {
                name: d.name.clone(),
                state: d.state.clone(),
            })
            .collect(),
        io_errors: s.io_errors.iter().map(|t| t.0).collect(),
        op: s.op.as_ref().map(op_out),
        reported: s.reported,
        troubled: s.troubled,
        placed_by: s.placed_by.clone(),
    }
}

fn session_in(s: v2::Session) -> Result<SessionRecord, JournalFormatError> {
    Ok(SessionRecord {
        key: key_in(s.key)?,
        transport: s.transport,
        port: port_id_in(s.port),
        sid: s.sid,
        present: s.present,
        state: state_in(s.state),
        disks: s
            .disks
            .into_iter()
            .map(|d| DiskInfo::new(d.name, d.state))
            .collect(),
        io_errors: s.io_errors.into_iter().map(Instant).collect(),
        op: s.op.map(op_in),
        reported: s.reported,
        troubled: s.troubled,
        placed_by: s.placed_by,
    })
}

fn recreation_state_out(s: &RecreationState) -> v2::RecreationState {
    match s {
        RecreationState::InFlight => v2::RecreationState::InFlight,
        RecreationState::Completed => v2::RecreationState::Completed,
        RecreationState::Failed => v2::RecreationState::Failed,
    }
}

fn recreation_state_in(s: v2::RecreationState) -> RecreationState {
    match s {
        v2::RecreationState::InFlight => RecreationState::InFlight,
        v2::RecreationState::Completed => RecreationState::Completed,
        v2::RecreationState::Failed => RecreationState::Failed,
    }
}

fn device_out(d: &DeviceRecord) -> v2::Device {
    v2::Device {
        name: d.name.clone(),
        present: d.present,
        parent: d.parent.clone(),
        driver: d.driver.clone(),
        remembered: d.remembered.as_ref().map(recipe_out),
        recreation: d.recreation.as_ref().map(|r| v2::Recreation {
            id: r.id.0,
            attempt: r.attempt,
            started: r.started.0,
            state: recreation_state_out(&r.state),
            origin: origin_out(r.origin),
            consumers: consumers_out(&r.consumers),
            nvme_controllers: super::nvme_map::out(&r.nvme, &r.nvme_back),
            nfs_mounts: super::nfs_map::out(&r.nfs, &r.nfs_checks),
            multipath_paths: super::multipath_map::out(&r.multipath, &r.multipath_back),
        }),
        completed_recreations: d.completed_recreations,
        blocked: d.blocked.as_ref().map(|b| v2::BlockedRecreation {
            action: b.action.0,
            attempt: b.attempt,
            origin: origin_out(b.origin),
            since: b.since.0,
            step: b.step.step.clone(),
            blocked_ms: b.step.blocked_ms,
            task: b.step.task.clone(),
            uninterruptible: b.step.uninterruptible,
            stack: b.step.stack.clone(),
            pid: b.step.id.pid,
            tid: b.step.id.tid,
            start_time: b.step.id.start_time,
        }),
        driver_reset: d.driver_reset.map(|r| v2::DriverReset {
            since: r.since.0,
            requested: r.requested,
        }),
    }
}

fn recipe_out(r: &RecreateFrom) -> v2::Recipe {
    let aux_out = |a: &AuxFacts| v2::AuxDevice {
        name: a.name.clone(),
        driver_dir: a.driver_dir.clone(),
        module: a.module.clone(),
    };
    match r {
        RecreateFrom::SoftLink { kind, netdev } => v2::Recipe::SoftLink {
            kind: kind.name().to_string(),
            netdev: netdev.clone(),
        },
        RecreateFrom::Parent {
            parent,
            aux,
            netdevs,
        } => v2::Recipe::Parent {
            bus: parent.bus.clone(),
            name: parent.name.clone(),
            driver: parent.driver.clone(),
            aux: aux.as_ref().map(aux_out),
            netdevs: netdevs.clone(),
        },
    }
}

fn recipe_in(r: v2::Recipe) -> Result<RecreateFrom, JournalFormatError> {
    Ok(match r {
        v2::Recipe::SoftLink { kind, netdev } => RecreateFrom::SoftLink {
            kind: match kind.as_str() {
                "rxe" => SoftType::Rxe,
                "siw" => SoftType::Siw,
                other => {
                    return Err(JournalFormatError::Value {
                        field: "device recipe",
                        reason: format!("unknown software link type {other:?}"),
                    })
                }
            },
            netdev,
        },
        v2::Recipe::Parent {
            bus,
            name,
            driver,
            aux,
            netdevs,
        } => RecreateFrom::Parent {
            parent: ParentFacts { bus, name, driver },
            aux: aux.map(|a| AuxFacts {
                name: a.name,
                driver_dir: a.driver_dir,
                module: a.module,
            }),
            netdevs,
        },
    })
}

fn device_in(d: v2::Device) -> Result<DeviceRecord, JournalFormatError> {
    Ok(DeviceRecord {
        driver_reset: d.driver_reset.map(|r| DriverReset {
            since: Instant(r.since),
            requested: r.requested,
        }),
        name: d.name,
        present: d.present,
        parent: d.parent,
        driver: d.driver,
        remembered: d.remembered.map(recipe_in).transpose()?,
        recreation: d
            .recreation
            .map(|r| {
                Ok::<_, JournalFormatError>(Recreation {
                    id: ActionId(r.id),
                    attempt: r.attempt,
                    started: Instant(r.started),
                    state: recreation_state_in(r.state),
                    origin: origin_in(r.origin),
                    consumers: consumers_in(r.consumers)?,
                    nvme: r
                        .nvme_controllers
                        .iter()
                        .map(super::nvme_map::controller_in)
                        .collect(),
                    nvme_back: super::nvme_map::reports_in(&r.nvme_controllers)?,
                    nfs: r.nfs_mounts.iter().map(super::nfs_map::mount_in).collect(),
                    nfs_checks: super::nfs_map::reports_in(&r.nfs_mounts)?,
                    multipath: super::multipath_map::paths_in(&r.multipath_paths)?,
                    multipath_back: super::multipath_map::reports_in(&r.multipath_paths)?,
                    multipath_asked: r.multipath_paths.iter().any(|p| p.result.is_some()),
                })
            })
            .transpose()?,
        completed_recreations: d.completed_recreations,
        blocked: d.blocked.map(|b| BlockedRecreation {
            action: ActionId(b.action),
            attempt: b.attempt,
            origin: origin_in(b.origin),
            since: Instant(b.since),
            step: BlockedStep {
                step: b.step,
                blocked_ms: b.blocked_ms,
                task: b.task,
                uninterruptible: b.uninterruptible,
                stack: b.stack,
                id: TaskId {
                    pid: b.pid,
                    tid: b.tid,
                    start_time: b.start_time,
                },
            },
        }),
    })
}

fn stamp_out(s: Stamp) -> v2::Stamp {
    v2::Stamp {
        mono: s.mono.0,
        unix_ms: s.unix_ms,
    }
}

fn stamp_in(s: v2::Stamp) -> Stamp {
    Stamp {
        mono: Instant(s.mono),
        unix_ms: s.unix_ms,
    }
}

fn incident_out(i: &Incident) -> v2::Incident {
    v2::Incident {
        id: i.id,
        port: i.port.clone(),
        started: stamp_out(i.started),
        first_sign: i.first_sign.clone(),
        detected: stamp_out(i.detected),
        cause: i.cause.clone(),
        local: i.local,
        first_action: i.first_action.as_ref().map(|a| v2::IncidentAction {
            at: stamp_out(a.at),
            what: a.what.clone(),
            run: a.run,
        }),
        quarantined: i.quarantined.map(stamp_out),
        recovered: i.recovered.map(stamp_out),
        outcome: match i.outcome {
            IncidentOutcome::Ongoing => v2::IncidentOutcome::Ongoing,
            IncidentOutcome::Recovered => v2::IncidentOutcome::Recovered,
            IncidentOutcome::Quarantined => v2::IncidentOutcome::Quarantined,
        },
        attempts: i.attempts,
        last_reason: i.last_reason.clone(),
        recreation: i.recreation.clone(),
    }
}

fn incident_in(i: &v2::Incident) -> Incident {
    Incident {
        id: i.id,
        port: i.port.clone(),
        started: stamp_in(i.started),
        first_sign: i.first_sign.clone(),
        detected: stamp_in(i.detected),
        cause: i.cause.clone(),
        local: i.local,
        first_action: i.first_action.as_ref().map(|a| IncidentAction {
            at: stamp_in(a.at),
            what: a.what.clone(),
            run: a.run,
        }),
        quarantined: i.quarantined.map(stamp_in),
        recovered: i.recovered.map(stamp_in),
        outcome: match i.outcome {
            v2::IncidentOutcome::Ongoing => IncidentOutcome::Ongoing,
            v2::IncidentOutcome::Recovered => IncidentOutcome::Recovered,
            v2::IncidentOutcome::Quarantined => IncidentOutcome::Quarantined,
        },
        attempts: i.attempts,
        last_reason: i.last_reason.clone(),
        recreation: i.recreation.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant(ms)
    }

    fn key() -> SessionKey {
        SessionKey {
            target: "iqn.2003-01.org.example:storage".into(),
            portal: Portal::parse("192.0.2.2", 3260).unwrap(),
            iface: "default".into(),
        }
    }

    fn recovering(stage: Stage) -> PortRecord {
        let mut e = Episode::new(
            Fault::GsiStuck {
                evidence: StuckEvidence::QpTable,
            },
            t(1_000),
            Origin::Operator,
        );
        e.attempts = 2;
        e.attempt_recreated = true;
        e.needs_recreate = true;
        e.recreated = Some(FreshQp::Awaited);
        e.skip_target_wait = true;
        e.listener_gone = true;
        e.probes_count_from = Some(t(2_000));
        e.target_back_at = Some(t(3_000));
        e.evidence = 7;
        e.targeted = vec![key()];
        let mut p = PortRecord::new(PortId::new("rxe_ini", 1), t(500));
        p.state = PortState::Recovering { episode: e, stage };
        p.hold = Some(Hold::NoPortalKnown);
        p.hold_alerted_at = Some(t(4_000));
        p.listener_rejected_at = Some(t(4_500));
        p.link_up = false;
        p.sessions = vec![key()];
        p
    }

    #[test]
    fn every_state_and_its_data_survive_the_flat_v2_record() {
        let stages = [
            Stage::Faulted,
            Stage::AwaitingTarget {
                deadline: Some(t(9_000)),
                timer: Some((AwaitTimer::ProbeRound, t(8_000))),
            },
            Stage::AwaitingTarget {
                deadline: None,
                timer: Some((AwaitTimer::Backoff, t(8_000))),
            },
            Stage::AwaitingDevice {
                deadline: Some(t(9_000)),
            },
            Stage::ResettingDevice {
                verify_until: Some(t(9_000)),
            },
            Stage::resetting_device(),
            Stage::Reconnecting {
                timer: Some((ReconnectTimer::Grace, t(8_000))),
                ops_not_before: None,
            },
            Stage::Reconnecting {
                timer: Some((ReconnectTimer::SessionRefresh, t(8_000))),
                ops_not_before: Some(t(7_000)),
            },
            Stage::Reconnecting {
                timer: Some((ReconnectTimer::Backoff, t(8_000))),
                ops_not_before: None,
            },
            Stage::Verifying {
                deadline: Some(t(9_000)),
                list_asked_at: Some(t(7_000)),
            },
            Stage::Quarantined,
        ];
        let mut ports: Vec<PortRecord> = stages.into_iter().map(recovering).collect();
        ports.push(PortRecord::new(PortId::new("rxe_ini", 2), t(500)));
        for p in ports {
            let back = port_in(port_out(&p)).unwrap();
            assert_eq!(back, p, "{:?}", p.state);
        }
    }

    #[test]
    fn a_flat_record_loads_with_only_what_its_state_can_hold() {
        let mut flat = port_out(&recovering(Stage::awaiting_target()));
        // What the flat record could say and the state cannot: a reconnect timer and a
        // lost-outcome verification while waiting for the target.
        flat.wake = Some((v2::TimerKind::Grace, 8_000));
        flat.verify_recreate = true;
        flat.ops_not_before = Some(7_000);
        let p = port_in(flat).unwrap();
        assert_eq!(
            p.stage(),
            Some(&Stage::AwaitingTarget {
                deadline: None,
                timer: None
            })
        );
        let again = port_out(&p);
        assert_eq!(
            (again.wake, again.verify_recreate, again.ops_not_before),
            (None, false, None)
        );
    }

    #[test]
    fn a_healthy_flat_record_carries_no_episode() {
        let mut flat = port_out(&PortRecord::new(PortId::new("rxe_ini", 1), t(500)));
        flat.attempts = 3;
        flat.fault = Some(v2::Fault::SessionsDown);
        flat.targeted = vec![key_out(&key())];
        flat.wake = Some((v2::TimerKind::ProbeRound, 8_000));
        let p = port_in(flat).unwrap();
        assert_eq!(p.state, PortState::Healthy);
        assert_eq!((p.attempts(), p.wake()), (0, None));
    }

    #[test]
    fn a_recovering_flat_record_without_a_fault_recovers_from_sessions_down() {
        let mut flat = port_out(&recovering(Stage::Quarantined));
        flat.fault = None;
        flat.fault_since = None;
        let p = port_in(flat).unwrap();
        let e = p.episode().unwrap();
        assert_eq!((&e.fault, e.since), (&Fault::SessionsDown, p.since));
    }
    #[test]
    fn the_self_test_state_survives_v2_and_is_absent_when_there_is_none() {
        for progress in [
            SelfTestProgress::Running(ActionId(42)),
            SelfTestProgress::Passed {
                summary: "self-test of rxe_ini/1 passed: 6 steps in 14 ms".into(),
            },
            SelfTestProgress::Unavailable {
                reason: "no verbs".into(),
            },
        ] {
            let mut p = recovering(Stage::Verifying {
                deadline: Some(t(9_000)),
                list_asked_at: None,
            });
            if let Some(e) = p.episode_mut() {
                e.selftest = Some(progress.clone());
            }
            p.last_selftest = Some(SelfTestRecord {
                at: t(8_500),
                verdict: SelfTestVerdict::Failed,
                summary: "self-test of rxe_ini/1 failed at cm-connect: ETIMEDOUT".into(),
                steps: 3,
                took_ms: 10_003,
            });
            assert_eq!(port_in(port_out(&p)).unwrap(), p, "{progress:?}");
        }
        let inflight = InFlight {
            id: ActionId(42),
            kind: InFlightKind::SelfTest(PortId::new("rxe_ini", 1)),
            deadline: t(30_000),
        };
        let snap = EngineSnapshot {
            version: EngineSnapshot::VERSION,
            taken_at: t(1),
            next_id: 43,
            rng: 1,
            paused: false,
            recreating: None,
            ports: vec![],
            sessions: vec![],
            devices: vec![],
            portals: vec![],
            inflight: vec![inflight],
            kernel_bugs: vec![],
        };
        let file = v2::JournalFile::from_snapshot(&snap);
        assert_eq!(file.into_snapshot().unwrap(), snap);
        // A port without self-test state writes no self-test field: journals written
        // before self-tests and after read and re-encode the same.
        let plain = serde_json::to_string(&port_out(&recovering(Stage::Quarantined))).unwrap();
        assert!(!plain.contains("selftest"), "{plain}");
    }
}
