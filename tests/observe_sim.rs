//! The observer on a simulated field incident, through the production driver: the status
//! document shows the phases, reasons, next steps and holds as the engine has them, and the
//! incident list records start, detection, first action and recovery. Bounds: the event
//! ring and the incident list never grow past their capacity.

#[path = "scenarios/util.rs"]
#[allow(dead_code)]
mod util;

use std::time::Duration;

use iser_guard::core::observe::{
    snapshot::DaemonContext, Clocks, DaemonSnapshot, EventRing, IncidentLog, IncidentOutcome,
};
use iser_guard::core::recovery::{Phase, PortId};
use iser_guard::core::time::Instant;
use iser_guard::sim::{scenarios, Harness};

/// 2026-12-01 21:00:00 UTC at the simulation's time zero.
const EPOCH_MS: u64 = 1_796_158_800_000;

fn clocks(h: &Harness) -> Clocks {
    Clocks {
        mono: h.now,
        unix_ms: EPOCH_MS + h.now.as_millis(),
    }
}

fn doc(h: &Harness) -> DaemonSnapshot {
    DaemonSnapshot::build(
        &h.driver,
        DaemonContext {
            version: "test".into(),
            pid: 1,
            started: Instant::ZERO,
            clocks: clocks(h),
            status: String::new(),
            safe_mode: None,
            sources: Vec::new(),
            events_kept: 0,
            events_dropped: 0,
            portal_probes: h.host.portal_probes(),
        },
    )
}

/// Feeds what the harness recorded since the last call into the observer's pieces, as the
/// daemon's loop does with the driver's transitions and effects.
struct Feed {
    transitions: usize,
    actions: usize,
    plans: usize,
    incidents: IncidentLog,
    ring: EventRing,
}

impl Feed {
    fn new() -> Feed {
        Feed {
            transitions: 0,
            actions: 0,
            plans: 0,
            incidents: IncidentLog::default(),
            ring: EventRing::default(),
        }
    }

    fn catch_up(&mut self, h: &Harness) {
        let c = clocks(h);
        // In the order they happened (a transition before an action of the same instant).
        let mut items: Vec<(Instant, usize, usize)> = Vec::new();
        for (n, t) in h.transitions.iter().enumerate().skip(self.transitions) {
            items.push((t.at, 0, n));
        }
        for (n, (at, _)) in h.actions.iter().enumerate().skip(self.actions) {
            items.push((*at, 1, n));
        }
        items.sort();
        for (_, kind, n) in items {
            if kind == 0 {
                let t = &h.transitions[n];
                self.ring.transition(c.stamp(t.at), t);
                self.incidents.on_transition(t, h.engine().port(&t.port), c);
            } else {
                let (at, a) = &h.actions[n];
                self.incidents.on_action(a, None, c.stamp(*at));
            }
        }
        self.transitions = h.transitions.len();
        self.actions = h.actions.len();
        for (at, a, r) in &h.plans[self.plans..] {
            self.ring.not_run(c.stamp(*at), a, r);
            self.incidents.on_action(a, Some(r), c.stamp(*at));
        }
        self.plans = h.plans.len();
        for p in h.engine().ports() {
            self.incidents.observe(p, c);
        }
    }
}

#[test]
fn the_field_incident_shows_in_the_status_document_and_the_incident_list() {
    let s = scenarios::find("field-incident").unwrap();
    let mut h = s.harness(7);
    let mut feed = Feed::new();
    let port = scenarios::field_port();
    // Healthy before the target goes away (at 60 s).
    h.run_until(Instant::ZERO.plus(Duration::from_secs(50)), util::MAX_STEPS)
        .unwrap();
    feed.catch_up(&h);
    let d = doc(&h);
    let p = d.ports.iter().find(|p| p.port == port.to_string()).unwrap();
    assert_eq!(p.phase, Phase::Healthy, "{p:#?}");
    assert_eq!(p.sessions.len(), 1);
    assert!(
        p.sessions[0].healthy && p.sessions[0].placed_by.is_some(),
        "{p:#?}"
    );
    assert!(p.holds.is_empty(), "the field device is allowed: {p:#?}");
    // During the outage: not healthy, with its reason, fault, next step and probes.
    let mut seen_waiting = false;
    for secs in (70..240).step_by(10) {
        h.run_until(
            Instant::ZERO.plus(Duration::from_secs(secs)),
            util::MAX_STEPS,
        )
        .unwrap();
        feed.catch_up(&h);
        let d = doc(&h);
        let p = d.ports.iter().find(|p| p.port == port.to_string()).unwrap();
        assert_ne!(p.phase, Phase::Healthy, "at {secs} s: {p:#?}");
        assert!(!p.why.is_empty(), "{p:#?}");
        assert!(p.fault.is_some() && p.fault_since.is_some(), "{p:#?}");
        assert_eq!(p.max_attempts, h.policy.max_attempts);
        if p.phase == Phase::AwaitingTarget {
            seen_waiting = true;
            assert!(
                p.next.is_some(),
                "a waiting port says when it probes: {p:#?}"
            );
            assert!(!p.portals.is_empty(), "{p:#?}");
            assert!(p.since.mono <= d.daemon.now.mono);
            assert_eq!(p.since.unix_ms, EPOCH_MS + p.since.mono.as_millis());
        }
        // The document is what the control socket carries: it round-trips through JSON.
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["format"], 1);
        let back: DaemonSnapshot = serde_json::from_value(json).unwrap();
        assert_eq!(back, d);
    }
    assert!(seen_waiting, "the port never waited for the target");
    // Back: recovered by one re-creation.
    h.run_until(Instant::ZERO.plus(s.duration), util::MAX_STEPS)
        .unwrap();
    feed.catch_up(&h);
    let d = doc(&h);
    let p = d.ports.iter().find(|p| p.port == port.to_string()).unwrap();
    assert_eq!(p.phase, Phase::Healthy, "{p:#?}");
    let incidents = feed.incidents.incidents();
    assert_eq!(incidents.len(), 1, "{incidents:#?}");
    let i = &incidents[0];
    assert_eq!(i.outcome, IncidentOutcome::Recovered, "{i:#?}");
    assert!(
        i.started.mono >= Instant::ZERO.plus(Duration::from_secs(60)),
        "{i:#?}"
    );
    assert!(i.detected >= i.started, "{i:#?}");
    let first = i.first_action.as_ref().expect("a first action");
    assert!(first.run && first.what.contains("re-create"), "{i:#?}");
    assert!(first.at >= i.detected, "{i:#?}");
    // The target came back at 240 s: recovery after that, and the time adds up.
    let recovered = i.recovered.unwrap();
    assert!(
        recovered.mono >= Instant::ZERO.plus(Duration::from_secs(240)),
        "{i:#?}"
    );
    assert_eq!(
        i.time_to_recover_ms(),
        Some(recovered.mono.as_millis() - i.started.mono.as_millis())
    );
    assert!(i.local, "QP 1 stuck is a local cause: {i:#?}");
    assert_eq!(i.attempts, 1, "{i:#?}");
    // The simulated figures (docs/history/observe.md): the first sign at 70 s
    // (sessions down), QP 1 seen stuck 3 s later, back 20 s after the target's return.
    eprintln!("{i:#?}");
    // The ring holds every transition of the episode, in order, with reasons.
    let transitions: Vec<_> = feed
        .ring
        .iter()
        .filter(|e| e.port.as_deref() == Some(&port.to_string()))
        .collect();
    assert!(transitions.len() >= 3, "{transitions:#?}");
    assert!(transitions.iter().all(|e| e.reason.is_some()));
    assert!(transitions.windows(2).all(|w| w[0].seq < w[1].seq));
}

#[test]
fn a_device_not_allowed_shows_its_hold_and_a_planned_first_action() {
    let s = scenarios::find("field-incident").unwrap();
    let (host, mut policy) = (s.build)();
    policy.allow.clear();
    let mut h = Harness::new(host, policy, 7);
    let mut feed = Feed::new();
    h.run_until(Instant::ZERO.plus(s.duration), util::MAX_STEPS)
        .unwrap();
    feed.catch_up(&h);
    let d = doc(&h);
    let port = PortId::new(scenarios::FIELD_DEVICE, 1).to_string();
    let p = d.ports.iter().find(|p| p.port == port).unwrap();
    let hold = p
        .holds
        .iter()
        .find(|h| h.kind == "not-allowed")
        .unwrap_or_else(|| panic!("{p:#?}"));
    assert!(hold.why.contains("devices.allow"), "{hold:?}");
    assert!(
        hold.why
            .contains(&format!("iser-guard recover {}", scenarios::FIELD_DEVICE)),
        "{hold:?}"
    );
    let i = &feed.incidents.incidents()[0];
    let first = i.first_action.as_ref().unwrap();
    assert!(!first.run, "not allowed: planned only: {i:#?}");
    assert!(
        feed.ring.iter().any(|e| e.kind.word() == "not-run"),
        "the refusal is in the ring"
    );
}

#[test]
fn a_moment_in_the_notes_is_an_age_not_the_engine_clock() {
    // The field incident on a device outside devices.allow: the target is back, nothing is
    // done. status said "the target counts as back since 241.005s" (the engine's raw
    // monotonic seconds, which no operator can place); it says how long, in words.
    let s = scenarios::find("field-incident").unwrap();
    let (host, mut policy) = (s.build)();
    policy.allow.clear();
    let mut h = Harness::new(host, policy, 7);
    h.run_until(Instant::ZERO.plus(s.duration), util::MAX_STEPS)
        .unwrap();
    let d = doc(&h);
    let port = PortId::new(scenarios::FIELD_DEVICE, 1).to_string();
    let p = d.ports.iter().find(|p| p.port == port).unwrap();
    let note = p
        .notes
        .iter()
        .find(|n| n.contains("target"))
        .unwrap_or_else(|| panic!("no note about the target: {:?}", p.notes));
    assert!(
        note.starts_with("the target has counted as back for ")
            && (note.ends_with(" s") || note.ends_with(" min")),
        "{note}"
    );
    for n in &p.notes {
        assert!(
            !n.split(' ').any(|w| w.ends_with('s')
                && w.trim_end_matches('s').contains('.')
                && w.trim_end_matches('s').parse::<f64>().is_ok()),
            "raw engine seconds in {n:?}"
        );
    }
}

#[test]
fn the_ring_and_the_incident_list_stay_bounded() {
    use iser_guard::core::observe::{EventKind, Stamp};
    let mut ring = EventRing::new(1024);
    for n in 0..5000u64 {
        ring.push(
            Stamp {
                mono: Instant(n),
                unix_ms: EPOCH_MS + n,
            },
            None,
            EventKind::Daemon,
            format!("event {n}"),
            None,
        );
    }
    assert_eq!(ring.len(), 1024);
    assert_eq!(ring.dropped(), 5000 - 1024);
    assert_eq!(ring.oldest().unwrap().seq, 5000 - 1024 + 1);
    assert_eq!(ring.after(4990).count(), 10);
    assert_eq!(ring.since(EPOCH_MS + 4000).count(), 1000);

    // 200 incidents on 200 ports, each recovered: the list keeps the last 64.
    use iser_guard::core::recovery::Transition;
    let mut log = IncidentLog::new(64);
    for n in 0..200u64 {
        let port = PortId::new(format!("dev{n}"), 1);
        let c = Clocks {
            mono: Instant(n * 1000),
            unix_ms: EPOCH_MS + n * 1000,
        };
        for (from, to) in [
            (Phase::Healthy, Phase::Faulted),
            (Phase::Faulted, Phase::Healthy),
        ] {
            log.on_transition(
                &Transition {
                    at: c.mono,
                    port: port.clone(),
                    from,
                    to,
                    reason: "test".into(),
                },
                None,
                c,
            );
        }
    }
    assert_eq!(log.incidents().len(), 64);
    assert_eq!(log.dropped(), 200 - 64);
    assert_eq!(log.incidents()[0].port, "dev136/1");
    assert!(log
        .incidents()
        .iter()
        .all(|i| i.outcome == IncidentOutcome::Recovered));
}

#[test]
fn the_status_document_lists_the_multipath_paths_per_port_and_the_recreation_s_results() {
    let h = scenarios::find("multipath-paths-reinstated")
        .unwrap()
        .run(7, util::MAX_STEPS)
        .unwrap();
    let d = doc(&h);
    let mp = d.multipath.as_ref().expect("multipathd was read");
    assert_eq!(mp[0].port.as_deref(), Some("rocep2s0f0/1"));
    assert_eq!(mp[0].paths[0].dev, "sda");
    assert_eq!(mp[1].port.as_deref(), Some("rocep2s0f1/1"));
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["multipath"][0]["paths"][0]["map"], "mpatha");
    let dev = d
        .devices
        .iter()
        .find(|v| v.name == scenarios::FIELD_DEVICE)
        .unwrap();
    let rec = dev.last_recreation.as_deref().unwrap();
    assert!(
        rec.contains("dm-multipath paths remembered: mpatha: sda on port 1 (failed"),
        "{rec}"
    );
    assert!(rec.contains("; multipath mpatha sda (session"), "{rec}");
    assert!(rec.contains("reinstated as sda"), "{rec}");
}
