//! The iscsiadm session list: remembered sessions, the port each one is kept on, and which
//! vanished sessions are forgotten (a clean logout) or kept to be restored.

use std::collections::{BTreeMap, BTreeSet};

use super::queries::describe_session;
use super::Engine;
use crate::recovery::input::{PortId, SessionInfo, SessionKey};
use crate::recovery::state::{Fault, Phase, SessionRecord, Stage};
use crate::time::Instant;

impl Engine {
    /// A full `iscsiadm -m session -P 3` snapshot, sessions mapped to their RDMA ports.
    pub fn handle_sessions(&mut self, list: Vec<SessionInfo>, now: Instant) {
        self.now = now;
        self.last_sessions_at = Some(now);
        self.by_sid.clear();
        self.by_disk.clear();
        let mut unmapped = 0u64;
        let mut seen: BTreeSet<SessionKey> = BTreeSet::new();
        let mut touched: BTreeSet<PortId> = BTreeSet::new();
        let mut unplaced = BTreeMap::new();
        for info in list {
            // A session this scan could not place keeps the placement it had: a scan that
            // cannot place it is no evidence that it moved or went away.
            let known = self.sessions.get(&info.key).map(|r| r.port.clone());
            let port = match (info.rdma.clone(), known) {
                (Some(port), Some(old)) if port != old && !self.may_move(&old) => old,
                (Some(port), _) => port,
                (None, Some(old)) => {
                    unmapped += 1;
                    old
                }
                (None, None) => {
                    unmapped += 1;
                    unplaced.insert(info.key.clone(), info);
                    continue;
                }
            };
            seen.insert(info.key.clone());
            self.by_sid.insert(info.sid, info.key.clone());
            for d in &info.disks {
                self.by_disk.insert(d.name.clone(), info.key.clone());
            }
            match self.sessions.get_mut(&info.key) {
                Some(rec) => {
                    let moved = rec.port != port;
                    let changed = moved
                        || !rec.present
                        || rec.state != info.state
                        || rec.disks != info.disks
                        || rec.sid != Some(info.sid);
                    let old_port = rec.port.clone();
                    rec.present = true;
                    rec.state = info.state;
                    rec.disks = info.disks;
                    rec.sid = Some(info.sid);
                    rec.transport = info.transport;
                    // A scan that placed it by the kernel's word updates the evidence; one
                    // that kept the remembered port keeps the evidence it had.
                    if info.rdma.is_some() {
                        if let Some(e) = &info.placed_by {
                            rec.placed_by = Some(e.describe());
                        }
                    }
                    if rec.is_healthy() {
                        rec.troubled = false;
                    }
                    if moved {
                        rec.port = port.clone();
                        if let Some(p) = self.ports.get_mut(&old_port) {
                            p.sessions.retain(|k| k != &info.key);
                        }
                        self.port_or_create(&port, now)
                            .sessions
                            .push(info.key.clone());
                        touched.insert(old_port);
                    }
                    if changed {
                        touched.insert(port);
                    }
                }
                None => {
                    self.sessions.insert(
                        info.key.clone(),
                        SessionRecord {
                            key: info.key.clone(),
                            transport: info.transport,
                            port: port.clone(),
                            sid: Some(info.sid),
                            present: true,
                            state: info.state,
                            disks: info.disks,
                            io_errors: Vec::new(),
                            op: None,
                            reported: false,
                            troubled: false,
                            placed_by: info.placed_by.as_ref().map(|e| e.describe()),
                        },
                    );
                    self.port_or_create(&port, now)
                        .sessions
                        .push(info.key.clone());
                    self.mark_dirty(format!("remembered session {}", info.key));
                    touched.insert(port);
                }
            }
        }
        self.stats.unmapped_sessions = unmapped;
        self.unplaced = unplaced;
        // Sessions that vanished: a clean logout of a healthy session is forgotten; anything
        // else (iscsid dropped a failing session) is kept so it can be restored.
        let mut forget = Vec::new();
        for rec in self.sessions.values_mut() {
            if rec.present && !seen.contains(&rec.key) {
                rec.present = false;
                touched.insert(rec.port.clone());
                let port_healthy = self
                    .ports
                    .get(&rec.port)
                    .is_some_and(|p| p.phase() == Phase::Healthy);
                // Evidence of a clean logout: it vanished while LOGGED_IN with running disks,
                // on a healthy port, with no error seen since, and not by our own hand.
                if rec.is_healthy_when_last_seen()
                    && !rec.troubled
                    && port_healthy
                    && rec.op.is_none()
                {
                    forget.push(rec.key.clone());
                }
            }
        }
        for key in forget {
            if let Some(rec) = self.sessions.remove(&key) {
                if let Some(p) = self.ports.get_mut(&rec.port) {
                    p.sessions.retain(|k| k != &key);
                }
                self.mark_dirty(format!("forgot session {key}: logged out cleanly"));
            }
        }
        // Ports waiting for a fresh list before logging sessions out and in.
        for p in self.ports.values() {
            if matches!(
                p.stage(),
                Some(
                    Stage::Reconnecting {
                        ops_not_before: Some(_),
                        ..
                    } | Stage::Verifying { .. }
                )
            ) {
                touched.insert(p.id.clone());
            }
        }
        for pid in touched {
            let Some(p) = self.ports.get(&pid) else {
                continue;
            };
            if p.phase() == Phase::Quarantined {
                self.report_quarantined_losses(&pid, now);
                continue;
            }
            if p.phase() == Phase::Healthy {
                let down: Vec<String> = p
                    .sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .filter(|s| !s.is_up())
                    .map(describe_session)
                    .collect();
                if !down.is_empty() {
                    self.enter_fault(
                        &pid,
                        Fault::SessionsDown,
                        format!("session(s) down: {}", down.join("; ")),
                        now,
                    );
                }
            } else {
                self.evaluate(&pid, now);
            }
        }
        self.finish();
    }

    /// A session placed on `old` may be placed elsewhere by a scan only while `old` is
    /// healthy and its device present: while a port recovers (its device gone or being
    /// re-created, its sessions failed), a scan that places the session on another device
    /// guesses, and the other device must never be blamed.
    pub(super) fn may_move(&self, old: &PortId) -> bool {
        let healthy = self
            .ports
            .get(old)
            .is_none_or(|p| p.phase() == Phase::Healthy);
        let present = self.devices.get(&old.device).is_none_or(|d| d.present);
        healthy && present
    }
}
