//! The simulator and the daemon run one driver: the core's `Driver`, built by the daemon's
//! own constructor and held by the simulator's harness, with the simulated run going
//! through it (its counters and plans show the driver's decisions, not the harness's).

use std::any::{Any, TypeId};

use iser_guard::config::Config;
use iser_guard::core::driver::{Driver, Refusal};
use iser_guard::core::recovery::{ActionKind, Engine};
use iser_guard::daemon::run::{driver_for, Settings};
use iser_guard::sim::scenarios;

fn type_of<T: Any>(_: &T) -> TypeId {
    TypeId::of::<T>()
}

#[test]
fn the_simulator_and_the_daemon_run_the_same_driver() {
    let h = scenarios::find("field-incident")
        .unwrap()
        .run(7, 20_000)
        .unwrap();
    let settings = Settings {
        config: Config::default(),
        config_path: None,
        force_dry_run: false,
        take_lock: true,
        automatic_actions: true,
        read_only: false,
    };
    let daemon = driver_for(Engine::new(settings.config.policy(), 1), &settings);
    assert_eq!(type_of(&h.driver), TypeId::of::<Driver>());
    assert_eq!(type_of(&daemon), type_of(&h.driver));
    assert!(daemon.automatic_actions() && h.driver.automatic_actions());
    // The simulated incident went through the driver: it journaled and ran the re-creation.
    let stats = h.driver.stats();
    assert!(stats.destructive_run >= 1, "{stats:?}");
    assert!(stats.journal_writes >= 1, "{stats:?}");
    assert_eq!(h.unjournaled_destructive, 0);
}

#[test]
fn a_simulated_dry_run_is_a_driver_plan_never_a_failed_recreation() {
    let h = scenarios::find("dry-run").unwrap().run(7, 20_000).unwrap();
    assert!(h.plans.iter().any(
        |(_, a, r)| matches!(a.kind, ActionKind::RecreateDevice { .. }) && *r == Refusal::DryRun
    ));
    assert_eq!(h.driver.stats().destructive_run, 0);
    let port = h.engine().ports().next().unwrap();
    assert_eq!(port.attempts(), 0, "a plan counted as an attempt");
}
