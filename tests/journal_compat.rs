//! Journals written by earlier releases are read by this one with nothing lost.
//!
//! Every file in tests/fixtures/journal/ was written by a released build (its name says which
//! format version and commit). Each must load through the daemon's `Journal`, resume an
//! engine, and, for files of the current version, re-encode to the same JSON: a field the new
//! code dropped or renamed would show up as a difference.

use std::path::{Path, PathBuf};

use iser_guard::core::journal::{self, JournalFormatError};
use iser_guard::core::recovery::{
    Engine, Fault, Phase, Policy, PortId, RecreationState, SessionOp, SessionState,
};
use iser_guard::core::time::Instant;
use iser_guard::io::journal::{Journal, JOURNAL_FILE};

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

fn version_of(bytes: &[u8]) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    v["version"].as_u64().unwrap()
}

#[test]
fn every_fixture_loads_resumes_and_re_encodes_unchanged() {
    for path in fixtures() {
        let bytes = std::fs::read(&path).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(JOURNAL_FILE), &bytes).unwrap();
        let snap = Journal::new(dir.path())
            .load()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .expect("present");
        Engine::resume(
            snap.clone(),
            Policy::default(),
            Instant(snap.taken_at.0 + 1),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(journal::decode(&journal::encode(&snap)).unwrap(), snap);
        if version_of(&bytes) == u64::from(journal::VERSION) {
            let again: serde_json::Value = serde_json::from_slice(&journal::encode(&snap)).unwrap();
            let before: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(again, before, "{}", path.display());
        }
    }
}

#[test]
fn the_main_574d355_journal_keeps_every_kind_of_state() {
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal/v1-main-574d355.json"),
    )
    .unwrap();
    let snap = journal::decode(&bytes).unwrap();
    assert!(snap.paused);
    assert_eq!(snap.recreating.as_deref(), Some("rxe0"));
    let phase = |d: &str| {
        snap.ports
            .iter()
            .find(|p| p.id == PortId::new(d, 1))
            .unwrap()
            .phase()
    };
    assert_eq!(phase("irdma0"), Phase::AwaitingTarget);
    assert_eq!(phase("irdma1"), Phase::AwaitingDevice);
    assert_eq!(phase("rxe0"), Phase::ResettingDevice);
    assert_eq!(phase("rxe1"), Phase::Reconnecting);
    let rxe0 = snap.ports.iter().find(|p| p.id.device == "rxe0").unwrap();
    assert!(matches!(rxe0.fault(), Some(Fault::GsiStuck { .. })));
    assert!(rxe0.needs_recreate());
    // Re-creations: one completed (never to be repeated), one in flight (to be verified).
    let dev = |d: &str| snap.devices.iter().find(|x| x.name == d).unwrap();
    assert_eq!(dev("rxe1").completed_recreations, 1);
    assert_eq!(
        dev("rxe1").recreation.as_ref().unwrap().state,
        RecreationState::Completed
    );
    assert_eq!(
        dev("rxe0").recreation.as_ref().unwrap().state,
        RecreationState::InFlight
    );
    assert!(!dev("irdma1").present);
    // Remembered sessions, with an IPv6 portal and a reconnect in progress.
    assert_eq!(snap.sessions.len(), 4);
    assert!(snap
        .sessions
        .iter()
        .any(|s| s.key.portal.ip().to_string() == "fd00::2" && s.state == SessionState::Failed));
    assert!(snap
        .sessions
        .iter()
        .any(|s| matches!(s.op, Some(SessionOp::LoggingIn(_)))));
    assert!(!snap.portals.is_empty());
    assert!(!snap.inflight.is_empty());
    // Resuming with the re-creation in flight verifies it instead of repeating it.
    let mut e = Engine::resume(snap, Policy::default(), Instant(50_000)).unwrap();
    let mut kinds = Vec::new();
    while let Some(a) = e.poll_action() {
        kinds.push(a.kind);
    }
    assert!(kinds
        .iter()
        .any(|k| matches!(k, iser_guard::core::recovery::ActionKind::RefreshTopology)));
    assert!(!kinds.iter().any(|k| matches!(
        k,
        iser_guard::core::recovery::ActionKind::RecreateDevice { .. }
    )));
}

#[test]
fn a_field_the_format_does_not_have_is_refused_not_dropped() {
    let bytes = std::fs::read(fixtures().remove(0)).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["ports"][0]["surprise"] = serde_json::json!(1);
    let err = journal::decode(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            JournalFormatError::Invalid {
                version: Some(1),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_portal_that_is_not_an_address_is_a_typed_error() {
    let bytes = std::fs::read(fixtures().remove(0)).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["portals"][0]["portal"]["address"] = serde_json::json!("target.example");
    let err = journal::decode(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            JournalFormatError::Value {
                field: "portal",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("target.example"), "{err}");
}

/// Journal v2 (not yet released) keeps what re-creating each device needs: the engine must
/// still know it after a restart while the device is gone (issue 9, "dev-left-deleted").
#[test]
fn v2_round_trips_the_remembered_device_recipes() {
    use iser_guard::core::recovery::{Observation, Trust};
    use iser_guard::core::reset_plan::{AuxFacts, ParentFacts, RecreateFrom, SoftType};

    let rxe = RecreateFrom::SoftLink {
        kind: SoftType::Rxe,
        netdev: "ini0".into(),
    };
    let e810 = RecreateFrom::Parent {
        parent: ParentFacts {
            bus: "pci".into(),
            name: "0000:02:00.0".into(),
            driver: Some("ice".into()),
        },
        aux: Some(AuxFacts {
            name: "ice.roce.0".into(),
            driver_dir: Some("irdma.gen_2".into()),
            module: Some("irdma".into()),
        }),
        netdevs: vec!["ens1f0".into()],
    };
    let mut e = Engine::new(Policy::default(), 1);
    for (device, recipe) in [("rxe_ini", rxe.clone()), ("rocep2s0f0", e810.clone())] {
        e.handle_observation(
            Observation::DeviceRecipe {
                device: device.into(),
                recipe,
            },
            Trust::Trusted,
            Instant(1_000),
        );
    }
    let snap = e.snapshot();
    let bytes = journal::encode(&snap);
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["version"], 2);
    let dev = |name: &str| {
        json["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        dev("rxe_ini")["remembered"],
        serde_json::json!({"from": "soft-link", "kind": "rxe", "netdev": "ini0"})
    );
    assert_eq!(
        dev("rocep2s0f0")["remembered"]["aux"]["driver_dir"],
        "irdma.gen_2"
    );
    let back = journal::decode(&bytes).unwrap();
    assert_eq!(back, snap);
    let remembered = |name: &str| {
        back.devices
            .iter()
            .find(|d| d.name == name)
            .and_then(|d| d.remembered.clone())
    };
    assert_eq!(remembered("rxe_ini"), Some(rxe));
    assert_eq!(remembered("rocep2s0f0"), Some(e810));

    // A v2 file without the field (written before it existed) loads with nothing remembered.
    let mut old = json.clone();
    for d in old["devices"].as_array_mut().unwrap() {
        d.as_object_mut().unwrap().remove("remembered");
    }
    let snap = journal::decode(&serde_json::to_vec(&old).unwrap()).unwrap();
    assert!(snap.devices.iter().all(|d| d.remembered.is_none()));

    // An unknown link type is a typed error, not a panic or a silent drop.
    let mut bad = json;
    for d in bad["devices"].as_array_mut().unwrap() {
        if d["name"] == "rxe_ini" {
            d["remembered"]["kind"] = serde_json::json!("ib");
        }
    }
    assert!(matches!(
        journal::decode(&serde_json::to_vec(&bad).unwrap()),
        Err(JournalFormatError::Value { .. })
    ));
}
