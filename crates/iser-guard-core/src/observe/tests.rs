use super::*;
use crate::recovery::{
    Episode, Fault, Origin, Phase, PortId, PortRecord, PortState, Stage, StuckEvidence, Transition,
};
use crate::time::Instant;

const T0: u64 = 1_796_158_800_000;

fn clocks(ms: u64) -> Clocks {
    Clocks {
        mono: Instant(ms),
        unix_ms: T0 + ms,
    }
}

fn port() -> PortId {
    PortId::new("rocep2s0f0", 1)
}

/// The port's record as the engine would hold it in `phase` with `fault`.
fn record(phase: Phase, fault: Option<Fault>, since: u64, fault_since: u64) -> PortRecord {
    let mut p = PortRecord::new(port(), Instant(0));
    let stage = match phase {
        Phase::Healthy => None,
        Phase::Faulted => Some(Stage::Faulted),
        Phase::AwaitingTarget => Some(Stage::awaiting_target()),
        Phase::AwaitingDevice => Some(Stage::awaiting_device()),
        Phase::ResettingDevice => Some(Stage::resetting_device()),
        Phase::Reconnecting => Some(Stage::reconnecting()),
        Phase::Verifying => Some(Stage::verifying()),
        Phase::Quarantined => Some(Stage::Quarantined),
        Phase::RecreationBlocked => Some(Stage::RecreationBlocked { next_report: None }),
    };
    if let Some(stage) = stage {
        let fault = fault.unwrap_or(Fault::SessionsDown);
        let episode = Episode::new(fault, Instant(fault_since), Origin::Automatic);
        p.state = PortState::Recovering { episode, stage };
    }
    p.since = Instant(since);
    p
}

fn t(at: u64, from: Phase, to: Phase) -> Transition {
    Transition {
        at: Instant(at),
        port: port(),
        from,
        to,
        reason: format!("{from} to {to}"),
    }
}

#[test]
fn stamps_derive_wall_time_on_both_sides_of_now() {
    let c = clocks(10_000);
    assert_eq!(c.stamp(Instant(4_000)).unix_ms, T0 + 4_000);
    assert_eq!(c.stamp(Instant(12_500)).unix_ms, T0 + 12_500);
    assert_eq!(c.now(), c.stamp(Instant(10_000)));
    // Never below the epoch.
    let early = Clocks {
        mono: Instant(10_000),
        unix_ms: 5,
    };
    assert_eq!(early.stamp(Instant(0)).unix_ms, 0);
}

#[test]
fn a_local_cause_found_later_moves_detection_and_keeps_the_first_sign() {
    let mut log = IncidentLog::default();
    let down = record(Phase::Faulted, Some(Fault::SessionsDown), 70_000, 70_000);
    log.on_transition(
        &t(70_000, Phase::Healthy, Phase::Faulted),
        Some(&down),
        clocks(70_000),
    );
    let i = &log.incidents()[0];
    assert!(!i.local && i.detected == i.started, "{i:?}");
    let stuck = record(
        Phase::AwaitingTarget,
        Some(Fault::GsiStuck {
            evidence: StuckEvidence::ModifyQpInvalid,
        }),
        73_000,
        70_000,
    );
    log.on_transition(
        &t(73_000, Phase::Faulted, Phase::AwaitingTarget),
        Some(&stuck),
        clocks(73_000),
    );
    let i = &log.incidents()[0];
    assert!(i.local, "{i:?}");
    assert_eq!(i.time_to_detect_ms(), 3_000);
    assert!(i.cause.contains("GSI QP 1"), "{i:?}");
    assert!(i.first_sign.contains("sessions"), "{i:?}");
    // Observing the same state again changes nothing.
    let before = log.clone();
    log.observe(&stuck, clocks(80_000));
    assert_eq!(log, before);
}

#[test]
fn a_quarantine_then_an_operator_recovery_is_one_incident_recovered() {
    let mut log = IncidentLog::default();
    let fault = Some(Fault::DeviceGone);
    log.on_transition(
        &t(1_000, Phase::Healthy, Phase::AwaitingDevice),
        Some(&record(Phase::AwaitingDevice, fault.clone(), 1_000, 1_000)),
        clocks(1_000),
    );
    log.on_transition(
        &t(60_000, Phase::AwaitingDevice, Phase::Quarantined),
        Some(&record(Phase::Quarantined, fault.clone(), 60_000, 1_000)),
        clocks(60_000),
    );
    assert_eq!(log.incidents()[0].outcome, IncidentOutcome::Quarantined);
    assert!(log.incidents()[0].is_open());
    log.on_transition(
        &t(90_000, Phase::Quarantined, Phase::Faulted),
        Some(&record(
            Phase::Faulted,
            Some(Fault::Operator),
            90_000,
            90_000,
        )),
        clocks(90_000),
    );
    log.on_transition(
        &t(95_000, Phase::Faulted, Phase::Healthy),
        Some(&record(Phase::Healthy, None, 95_000, 0)),
        clocks(95_000),
    );
    assert_eq!(log.incidents().len(), 1, "{:?}", log.incidents());
    let i = &log.incidents()[0];
    assert_eq!(i.outcome, IncidentOutcome::Recovered);
    assert_eq!(i.quarantined.map(|q| q.mono), Some(Instant(60_000)));
    assert_eq!(i.time_to_recover_ms(), Some(94_000));
    // The next fault is a new incident.
    log.on_transition(
        &t(200_000, Phase::Healthy, Phase::Faulted),
        Some(&record(
            Phase::Faulted,
            Some(Fault::SessionsDown),
            200_000,
            200_000,
        )),
        clocks(200_000),
    );
    assert_eq!(log.incidents().len(), 2);
    assert_eq!(log.incidents()[1].id, 2);
}

#[test]
fn a_port_found_unhealthy_at_start_gets_its_incident_from_the_journaled_state() {
    // A journal written before incidents were kept: the daemon resumes mid-episode.
    let mut log = IncidentLog::restore(Vec::new(), INCIDENTS_KEPT);
    let p = record(
        Phase::AwaitingTarget,
        Some(Fault::GsiStuck {
            evidence: StuckEvidence::QpTable,
        }),
        50_000,
        40_000,
    );
    log.observe(&p, clocks(55_000));
    let i = &log.incidents()[0];
    assert_eq!(i.started.mono, Instant(40_000));
    assert!(i.local);
}

#[test]
fn the_journal_keeps_incidents_and_a_file_without_them_is_unchanged() {
    let snap = crate::recovery::Engine::new(crate::recovery::Policy::default(), 1).snapshot();
    // No incidents: the bytes are the plain encoding (no new key in files that have none).
    assert_eq!(
        crate::journal::encode_with_incidents(&snap, &[]),
        crate::journal::encode(&snap)
    );
    let mut log = IncidentLog::default();
    log.on_transition(
        &t(1_000, Phase::Healthy, Phase::Faulted),
        Some(&record(
            Phase::Faulted,
            Some(Fault::SessionsDown),
            1_000,
            1_000,
        )),
        clocks(1_000),
    );
    let bytes = crate::journal::encode_with_incidents(&snap, log.incidents());
    let (back, incidents) = crate::journal::decode_with_incidents(&bytes).unwrap();
    assert_eq!(back, snap);
    assert_eq!(incidents, log.incidents());
    // Read by the plain decoder too (the engine ignores them).
    assert_eq!(crate::journal::decode(&bytes).unwrap(), snap);
}
