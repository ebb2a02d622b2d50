//! Incidents: one per fault episode of a port, from its first sign to its recovery, kept in
//! the engine journal (bounded to [`INCIDENTS_KEPT`]) so `iser-guard history` can show them
//! after restarts and reboots.
//!
//! The journal is a snapshot of the engine's state, not a log: without this list an episode
//! leaves no trace once its port is healthy again. The list is built from what the engine
//! already decides (transitions, the port's fault, the first repair action), never from log
//! lines, and it never feeds a decision.
//!
//! The moments of an incident:
//! - **started**: the port left Healthy (the first sign: a kernel record, a QP in ERR in the
//!   QP table, sessions down, the device gone, an operator's command);
//! - **detected**: the cause that decides the recovery was known. When the first sign is
//!   already a local cause (GSI QP 1 stuck, device gone, a zombie session, an operator), that
//!   is the start; when it was sessions going down, it is when a local cause was found (the
//!   field incident: the target went away, later QP 1 was seen stuck), or the start when none
//!   ever was (the target side, recovered by iscsid or a reconnect);
//! - **first action**: the first destructive action decided for the port (a re-creation, a
//!   logout or login), run or only planned (dry-run, not allowed, paused);
//! - **recovered**: the port was verified healthy again;
//! - **outcome**: ongoing, recovered, or quarantined (automatic recovery stopped; an
//!   operator's later recovery still closes it as recovered, with the quarantine kept).

use serde::{Deserialize, Serialize};

use super::{read, Clocks, Stamp};
use crate::driver::Refusal;
use crate::recovery::{Action, ActionKind, Fault, Phase, PortId, PortRecord, Transition};

/// Incidents the journal keeps: the oldest finished ones go first.
pub const INCIDENTS_KEPT: usize = 64;

/// How an incident ended, so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IncidentOutcome {
    /// The port is still recovering.
    Ongoing,
    /// The port was verified healthy again.
    Recovered,
    /// Automatic recovery stopped; an operator must act.
    Quarantined,
}

impl IncidentOutcome {
    /// The word shown.
    pub fn word(self) -> &'static str {
        match self {
            IncidentOutcome::Ongoing => "ongoing",
            IncidentOutcome::Recovered => "recovered",
            IncidentOutcome::Quarantined => "quarantined",
        }
    }
}

/// The first repair action of an incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentAction {
    /// When it was decided.
    pub at: Stamp,
    /// What, in words.
    pub what: String,
    /// Run (true) or only planned/refused (false: dry-run, not allowed, paused).
    pub run: bool,
}

/// One incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incident {
    /// Its number, from 1.
    pub id: u64,
    /// `device/port`.
    pub port: String,
    /// The first sign.
    pub started: Stamp,
    /// What the first sign was, in words.
    pub first_sign: String,
    /// When the cause that decides the recovery was known.
    pub detected: Stamp,
    /// That cause, in words.
    pub cause: String,
    /// The cause is on this host (QP 1 stuck, device gone, zombie session, operator); false
    /// while only sessions going down is known.
    pub local: bool,
    /// The first repair action.
    pub first_action: Option<IncidentAction>,
    /// When the port was quarantined, if it was.
    pub quarantined: Option<Stamp>,
    /// When it was verified healthy again.
    pub recovered: Option<Stamp>,
    /// How it ended, so far.
    pub outcome: IncidentOutcome,
    /// Repair attempts used.
    pub attempts: u32,
    /// The reason of its last transition.
    pub last_reason: String,
    /// How its device was last re-created (the reason the port left re-creation: the
    /// method that worked, and any that failed before it); absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recreation: Option<String>,
}

impl Incident {
    /// From the first sign to detection, in milliseconds.
    pub fn time_to_detect_ms(&self) -> u64 {
        self.detected
            .mono
            .as_millis()
            .saturating_sub(self.started.mono.as_millis())
    }

    /// From the first sign to recovery, in milliseconds (`None` until recovered).
    pub fn time_to_recover_ms(&self) -> Option<u64> {
        self.recovered.map(|r| {
            r.mono
                .as_millis()
                .saturating_sub(self.started.mono.as_millis())
        })
    }

    /// Still open.
    pub fn is_open(&self) -> bool {
        self.recovered.is_none()
    }
}

/// Faults with a local cause the daemon acts on (as opposed to sessions merely down).
fn local_cause(f: &Fault) -> bool {
    !matches!(f, Fault::SessionsDown)
}

/// The incident list, oldest first, bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentLog {
    incidents: Vec<Incident>,
    next_id: u64,
    capacity: usize,
    dropped: u64,
}

impl Default for IncidentLog {
    fn default() -> Self {
        IncidentLog::new(INCIDENTS_KEPT)
    }
}

impl IncidentLog {
    /// An empty list keeping at most `capacity` incidents (at least one).
    pub fn new(capacity: usize) -> Self {
        IncidentLog {
            incidents: Vec::new(),
            next_id: 1,
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    /// The list a journal held (oldest first), bounded again.
    pub fn restore(incidents: Vec<Incident>, capacity: usize) -> Self {
        let mut log = IncidentLog::new(capacity);
        log.next_id = incidents.iter().map(|i| i.id).max().unwrap_or(0) + 1;
        log.incidents = incidents;
        log.bound();
        log
    }

    /// Every incident, oldest first.
    pub fn incidents(&self) -> &[Incident] {
        &self.incidents
    }

    /// Incidents dropped to stay bounded since this list was built.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    fn open_mut(&mut self, port: &str) -> Option<&mut Incident> {
        self.incidents
            .iter_mut()
            .rev()
            .find(|i| i.port == port && i.is_open())
    }

    fn bound(&mut self) {
        while self.incidents.len() > self.capacity {
            let victim = self
                .incidents
                .iter()
                .position(|i| !i.is_open())
                .unwrap_or(0);
            self.incidents.remove(victim);
            self.dropped += 1;
        }
    }

    fn open(&mut self, port: &PortId, started: Stamp, first_sign: String, local: bool) {
        let id = self.next_id;
        self.next_id += 1;
        self.incidents.push(Incident {
            id,
            port: port.to_string(),
            started,
            cause: first_sign.clone(),
            local,
            first_sign,
            detected: started,
            first_action: None,
            quarantined: None,
            recovered: None,
            outcome: IncidentOutcome::Ongoing,
            attempts: 0,
            last_reason: String::new(),
            recreation: None,
        });
        self.bound();
    }

    /// A transition, with the port's record as it is now (after the input that caused it).
    pub fn on_transition(&mut self, t: &Transition, now: Option<&PortRecord>, clocks: Clocks) {
        let port = t.port.to_string();
        let at = clocks.stamp(t.at);
        if t.from == Phase::Healthy && t.to != Phase::Healthy && self.open_mut(&port).is_none() {
            let (sign, local) = match now.and_then(read::fault) {
                Some(f) => (f.describe(), local_cause(f)),
                None => (t.reason.clone(), true),
            };
            self.open(&t.port, at, sign, local);
        }
        if let Some(i) = self.open_mut(&port) {
            i.last_reason.clone_from(&t.reason);
            if t.from == Phase::ResettingDevice && t.to == Phase::Reconnecting {
                i.recreation = Some(t.reason.clone());
            }
            if t.to == Phase::Quarantined && i.quarantined.is_none() {
                i.quarantined = Some(at);
            }
            match t.to {
                Phase::Healthy => {
                    i.recovered = Some(at);
                    i.outcome = IncidentOutcome::Recovered;
                }
                Phase::Quarantined => i.outcome = IncidentOutcome::Quarantined,
                _ => i.outcome = IncidentOutcome::Ongoing,
            }
        }
        if let Some(p) = now.filter(|p| read::phase(p) != Phase::Healthy) {
            self.observe(p, clocks);
        }
    }

    /// The port's record as it is: opens an incident for a port found unhealthy without one
    /// (a journal written before incidents were kept), records a local cause found later,
    /// the attempts, a quarantine, a recovery. Idempotent.
    pub fn observe(&mut self, p: &PortRecord, clocks: Clocks) {
        let id = read::id(p);
        let port = id.to_string();
        let phase = read::phase(p);
        if phase == Phase::Healthy {
            if let Some(i) = self.open_mut(&port) {
                i.recovered = Some(clocks.stamp(read::since(p)));
                i.outcome = IncidentOutcome::Recovered;
            }
            return;
        }
        if self.open_mut(&port).is_none() {
            let started = clocks.stamp(read::fault_since(p).unwrap_or(read::since(p)));
            let (sign, local) = match read::fault(p) {
                Some(f) => (f.describe(), local_cause(f)),
                None => (read::reason(p).to_string(), true),
            };
            self.open(id, started, sign, local);
        }
        let Some(i) = self.open_mut(&port) else {
            return;
        };
        i.attempts = i.attempts.max(read::attempts(p));
        if let Some(f) = read::fault(p) {
            if local_cause(f) && !i.local {
                i.cause = f.describe();
                i.local = true;
                i.detected = clocks.stamp(read::since(p)).max(i.started);
            }
        }
        if phase == Phase::Quarantined {
            i.outcome = IncidentOutcome::Quarantined;
            if i.quarantined.is_none() {
                i.quarantined = Some(clocks.stamp(read::since(p)));
            }
        }
        if i.last_reason.is_empty() {
            i.last_reason = read::reason(p).to_string();
        }
    }

    /// A destructive action decided for its port, run (`refused` is `None`) or planned
    /// instead: the incident's first action if it has none; a re-creation counts its
    /// attempt (the engine resets its count once the port is healthy again).
    pub fn on_action(&mut self, action: &Action, refused: Option<&Refusal>, at: Stamp) {
        // A standalone command leaves automatic actions to the daemon: not this incident's
        // action (the daemon's own decision, if it runs, is).
        if !action.kind.is_destructive() || matches!(refused, Some(Refusal::LeftToDaemon)) {
            return;
        }
        let Some(port) = &action.port else {
            return;
        };
        if let Some(i) = self.open_mut(&port.to_string()) {
            if let (ActionKind::RecreateDevice { attempt, .. }, None) = (&action.kind, refused) {
                i.attempts = i.attempts.max(*attempt);
            }
            if i.first_action.is_none() {
                i.first_action = Some(IncidentAction {
                    at,
                    what: match refused {
                        None => action.to_string(),
                        Some(r) => format!("{action} (not run: {r})"),
                    },
                    run: refused.is_none(),
                });
            }
        }
    }
}
