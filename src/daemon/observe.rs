//! The daemon's observer: the event ring, the incident list and the sources' last polls,
//! fed by the loop (transitions, decisions, outcomes, operator requests), and the control
//! socket's `status` and `events` answers built from them with the core's
//! [`DaemonSnapshot`]. Everything here is bounded: the ring ([`EVENT_RING_CAPACITY`]), the
//! incident list ([`INCIDENTS_KEPT`]), each follower's queue ([`FOLLOWER_QUEUE`]; a follower
//! that falls behind is told so and dropped) and the followers themselves (one control
//! connection each, under the socket's connection cap).

use crate::exit::ExitStatus;
use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::core::driver::{Authority, Driver, Refusal};
use crate::core::observe::{
    snapshot::DaemonContext, Clocks, DaemonSnapshot, Event, EventKind, EventRing, Incident,
    IncidentLog, SourceState, SourceView, EVENT_RING_CAPACITY, INCIDENTS_KEPT,
};
use crate::core::recovery::{Action, EngineSnapshot, PortId, Transition};
use crate::core::time::Instant;
use crate::io::control::{ControlConnection, Reply};

/// Events queued for one `events --follow` client before it counts as fallen behind.
pub const FOLLOWER_QUEUE: usize = 256;

/// How long one line to a follower may take to write.
const FOLLOWER_WRITE_DEADLINE: Duration = Duration::from_secs(5);

/// Events `events --follow` replays before streaming, when no `--since` is given.
const FOLLOW_BACKLOG: usize = 10;

/// The daemon's sources, by the name status shows.
pub const KERNEL_LOG: &str = "kernel-log";
/// RDMA netlink (devices, ports, the QP table).
pub const RDMA_NETLINK: &str = "rdma-netlink";
/// `iscsiadm -m session -P 3`.
pub const ISCSIADM: &str = "iscsiadm";
/// The verbs devices (`/dev/infiniband`): can the daemon open them?
pub const VERBS_DEVICES: &str = "verbs-devices";

/// The wall clock now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Both clocks at `mono` (the loop's clock, read just before).
pub fn clocks(mono: Instant) -> Clocks {
    Clocks {
        mono,
        unix_ms: unix_ms_now(),
    }
}

struct Follower {
    tx: mpsc::Sender<Reply>,
}

/// The observer.
pub struct Observer {
    started: Instant,
    ring: EventRing,
    incidents: IncidentLog,
    sources: BTreeMap<&'static str, SourceView>,
    followers: Vec<Follower>,
}

impl Observer {
    /// A new observer; `incidents` come from the journal, `kernel_log` says whether this
    /// loop reads one (the standalone commands do not).
    pub fn new(started: Instant, incidents: Vec<Incident>, kernel_log: bool) -> Observer {
        let mut sources = BTreeMap::new();
        for name in [KERNEL_LOG, RDMA_NETLINK, ISCSIADM] {
            let state = if name == KERNEL_LOG && !kernel_log {
                SourceState::Off
            } else {
                SourceState::Never
            };
            sources.insert(
                name,
                SourceView {
                    name: name.to_string(),
                    state,
                    last_ok: None,
                    last_error: None,
                },
            );
        }
        Observer {
            started,
            ring: EventRing::new(EVENT_RING_CAPACITY),
            incidents: IncidentLog::restore(incidents, INCIDENTS_KEPT),
            sources,
            followers: Vec::new(),
        }
    }

    /// The incident list, oldest first (what the journal keeps).
    pub fn incidents(&self) -> &[Incident] {
        self.incidents.incidents()
    }

    /// The event ring.
    pub fn ring(&self) -> &EventRing {
        &self.ring
    }

    fn publish(&mut self, event: Event) {
        let reply = Reply::Event {
            event: Box::new(event),
        };
        // A follower whose queue is full fell behind: dropping its sender ends its task,
        // which tells the client so.
        self.followers
            .retain(|f| f.tx.try_send(reply.clone()).is_ok());
    }

    /// A port's transition.
    pub fn transition(&mut self, t: &Transition, driver: &Driver, clocks: Clocks) {
        let at = clocks.stamp(t.at);
        let ev = self.ring.transition(at, t).clone();
        self.incidents
            .on_transition(t, driver.engine().port(&t.port), clocks);
        self.publish(ev);
    }

    /// An action the driver let run; an alert with the severity `severities` gives it.
    pub fn decided(
        &mut self,
        action: &Action,
        authority: &Authority,
        severities: &crate::core::severity::AlertSeverities,
        clocks: Clocks,
    ) {
        let ev = self
            .ring
            .decided(clocks.now(), action, authority, severities)
            .clone();
        self.incidents.on_action(action, None, clocks.now());
        self.publish(ev);
    }

    /// A destructive action planned or refused instead of run.
    pub fn not_run(&mut self, action: &Action, refusal: &Refusal, clocks: Clocks) {
        let ev = self.ring.not_run(clocks.now(), action, refusal).clone();
        self.incidents
            .on_action(action, Some(refusal), clocks.now());
        self.publish(ev);
    }

    /// An action finished.
    pub fn finished(&mut self, port: Option<&PortId>, summary: &str, clocks: Clocks) {
        let ev = self
            .ring
            .push(
                clocks.now(),
                port.map(ToString::to_string),
                EventKind::Finished,
                summary.to_string(),
                None,
            )
            .clone();
        self.publish(ev);
    }

    /// An event from a device's asynchronous event channel (the verbs listener), entered
    /// as a witness; the daemon feeds the same event to the driver as
    /// `Observation::AsyncEvent` with `Trust::Trusted` (it comes from the kernel through
    /// uverbs).
    pub fn async_event(&mut self, ev: &crate::core::selftest::AsyncEvent, clocks: Clocks) {
        let ev = self.ring.async_event(clocks.now(), ev).clone();
        self.publish(ev);
    }

    /// An operator request, or something the daemon says about itself.
    pub fn note(&mut self, kind: EventKind, message: String, clocks: Clocks) {
        let ev = self
            .ring
            .push(clocks.now(), None, kind, message, None)
            .clone();
        self.publish(ev);
    }

    /// Shows `name` among the sources from now on (not polled yet).
    pub fn watch_source(&mut self, name: &'static str) {
        self.sources.entry(name).or_insert_with(|| SourceView {
            name: name.to_string(),
            state: SourceState::Never,
            last_ok: None,
            last_error: None,
        });
    }

    /// A source answered.
    pub fn source_ok(&mut self, name: &'static str, clocks: Clocks) {
        if let Some(s) = self.sources.get_mut(name) {
            s.state = SourceState::Ok;
            s.last_ok = Some(clocks.now());
            s.last_error = None;
        }
    }

    /// A source failed (or is not available).
    pub fn source_failed(&mut self, name: &'static str, error: String) {
        if let Some(s) = self.sources.get_mut(name) {
            s.state = SourceState::Failing;
            s.last_error = Some(error);
        }
    }

    /// Brings the incident list up to date with a snapshot about to be journaled.
    pub fn sync(&mut self, snapshot: &EngineSnapshot, clocks: Clocks) {
        for p in &snapshot.ports {
            self.incidents.observe(p, clocks);
        }
    }

    /// The `status` document.
    pub fn snapshot(
        &self,
        driver: &Driver,
        status: &str,
        safe_mode: Option<(String, Result<String, String>)>,
        clocks: Clocks,
        probes: &crate::io::probe_choice::PortalProbes,
    ) -> DaemonSnapshot {
        let portal_probes = driver
            .engine()
            .snapshot()
            .portals
            .iter()
            .map(|r| (r.portal.to_string(), probes.view(r.portal.socket_addr())))
            .collect();
        DaemonSnapshot::build(
            driver,
            DaemonContext {
                version: env!("CARGO_PKG_VERSION").to_string(),
                pid: std::process::id(),
                started: self.started,
                clocks,
                status: status.to_string(),
                safe_mode,
                sources: self.sources.values().cloned().collect(),
                events_kept: self.ring.len(),
                events_dropped: self.ring.dropped(),
                portal_probes,
            },
        )
    }

    /// Answers `events`: the ring's entries (since `since_unix_ms` and after `after_seq`,
    /// or the last few when following with neither), then either `done` or, with `follow`,
    /// every new event. `done`'s detail says from when the ring is complete
    /// (`complete_since_unix_ms`: the daemon's start while nothing was dropped, else its
    /// oldest entry), so the client shows older moments from the journal only.
    pub fn serve_events(
        &mut self,
        conn: ControlConnection,
        since_unix_ms: Option<u64>,
        after_seq: Option<u64>,
        follow: bool,
        clocks: Clocks,
    ) {
        let backlog: Vec<Event> = match (since_unix_ms, after_seq, follow) {
            (None, None, true) => {
                let skip = self.ring.len().saturating_sub(FOLLOW_BACKLOG);
                self.ring.iter().skip(skip).cloned().collect()
            }
            _ => self
                .ring
                .iter()
                .filter(|e| since_unix_ms.is_none_or(|t| e.at.unix_ms >= t))
                .filter(|e| after_seq.is_none_or(|n| e.seq > n))
                .cloned()
                .collect(),
        };
        let complete_since = if self.ring.dropped() == 0 {
            Some(clocks.stamp(self.started).unix_ms)
        } else {
            self.ring.oldest().map(|e| e.at.unix_ms)
        };
        let detail = serde_json::json!({
            "kept": self.ring.len(),
            "dropped": self.ring.dropped(),
            "capacity": self.ring.capacity(),
            "complete_since_unix_ms": complete_since,
            "last_seq": self.ring.iter().last().map(|e| e.seq),
        });
        let rx = if follow {
            let (tx, rx) = mpsc::channel(FOLLOWER_QUEUE);
            self.followers.push(Follower { tx });
            Some(rx)
        } else {
            None
        };
        tokio::spawn(write_events(conn, backlog, detail, rx));
    }

    /// Tells every follower the daemon stops.
    pub fn stop(&mut self) {
        for f in self.followers.drain(..) {
            let _ = f.tx.try_send(Reply::Done {
                ok: true,
                message: "the daemon is stopping".into(),
                exit_code: ExitStatus::Ok.code(),
                detail: None,
            });
        }
    }
}

async fn write_events(
    mut conn: ControlConnection,
    backlog: Vec<Event>,
    detail: serde_json::Value,
    follow: Option<mpsc::Receiver<Reply>>,
) {
    for e in &backlog {
        if !matches!(
            tokio::time::timeout(FOLLOWER_WRITE_DEADLINE, conn.event(e)).await,
            Ok(Ok(()))
        ) {
            return;
        }
    }
    let Some(mut rx) = follow else {
        let msg = format!("{} event(s)", backlog.len());
        let _ = tokio::time::timeout(
            FOLLOWER_WRITE_DEADLINE,
            conn.done(true, &msg, ExitStatus::Ok.code(), Some(detail)),
        )
        .await;
        return;
    };
    loop {
        match rx.recv().await {
            Some(Reply::Event { event }) => {
                if !matches!(
                    tokio::time::timeout(FOLLOWER_WRITE_DEADLINE, conn.event(&event)).await,
                    Ok(Ok(()))
                ) {
                    return;
                }
            }
            Some(Reply::Done {
                ok,
                message,
                exit_code,
                detail,
            }) => {
                let _ = tokio::time::timeout(
                    FOLLOWER_WRITE_DEADLINE,
                    conn.done(ok, &message, exit_code, detail),
                )
                .await;
                return;
            }
            Some(Reply::Progress { message }) => {
                if !matches!(
                    tokio::time::timeout(FOLLOWER_WRITE_DEADLINE, conn.progress(&message)).await,
                    Ok(Ok(()))
                ) {
                    return;
                }
            }
            None => {
                let msg = format!(
                    "this client fell behind by more than {FOLLOWER_QUEUE} events and was \
                     dropped; run `iser-guard events --since 5m` to see what it missed"
                );
                let _ = tokio::time::timeout(
                    FOLLOWER_WRITE_DEADLINE,
                    conn.done(false, &msg, ExitStatus::TempFail.code(), None),
                )
                .await;
                return;
            }
        }
    }
}
