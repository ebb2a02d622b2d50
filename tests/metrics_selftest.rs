//! The self-test series: `iser_guard_selftests_total{result}` counts every answer (zero from
//! the start), and a self-test that ran sets its port's last duration, success and time.

use std::time::Duration;

use iser_guard::config::Alerts;
use iser_guard::core::driver::{Authority, Effect, EffectId, EffectKind};
use iser_guard::core::recovery::{Action, ActionId, ActionKind, Origin, Outcome, PortId};
use iser_guard::core::selftest::{SelfTestReport, SelfTestResult, SelfTestStep};
use iser_guard::metrics::Metrics;

fn started(m: &Metrics, id: u64) {
    let action = Action {
        id: ActionId(id),
        port: Some(PortId::new("rxe_ini", 1)),
        device: Some("rxe_ini".into()),
        origin: Origin::Automatic,
        reason: "verifying".into(),
        kind: ActionKind::SelfTestPort {
            device: "rxe_ini".into(),
            port: 1,
            timeout: Duration::from_secs(10),
        },
    };
    let effect = Effect {
        id: EffectId(id),
        kind: EffectKind::Run {
            action,
            authority: Authority::Harmless,
        },
    };
    m.effect(&effect, &Alerts::default());
}

fn ran(ok: bool, ms: u64) -> Outcome {
    Outcome::SelfTest(SelfTestResult::Ran(SelfTestReport {
        device: "rxe_ini".into(),
        port: 1,
        steps: vec![SelfTestStep {
            name: "cm-connect".into(),
            took: Duration::from_millis(ms),
            ok,
            detail: String::new(),
        }],
    }))
}

#[test]
fn self_tests_are_counted_by_result_and_the_last_one_is_kept_per_port() {
    let m = Metrics::new();
    let text = m.encode();
    for r in ["passed", "failed", "unavailable"] {
        assert!(
            text.contains(&format!("iser_guard_selftests_total{{result=\"{r}\"}} 0\n")),
            "{text}"
        );
    }
    started(&m, 1);
    m.executed(EffectId(1), &ran(true, 250), None);
    started(&m, 2);
    m.executed(EffectId(2), &ran(false, 1500), None);
    started(&m, 3);
    m.executed(
        EffectId(3),
        &Outcome::SelfTest(SelfTestResult::Unavailable {
            reason: "no verbs".into(),
        }),
        None,
    );
    let text = m.encode();
    for (r, n) in [("passed", 1), ("failed", 1), ("unavailable", 1)] {
        assert!(
            text.contains(&format!(
                "iser_guard_selftests_total{{result=\"{r}\"}} {n}\n"
            )),
            "{text}"
        );
    }
    // The last one that ran (the failure): unavailable ones leave it as it was.
    assert!(
        text.contains(
            "iser_guard_selftest_last_duration_seconds{device=\"rxe_ini\",port=\"1\"} 1.5\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("iser_guard_selftest_last_success{device=\"rxe_ini\",port=\"1\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("iser_guard_selftest_last_timestamp_seconds{device=\"rxe_ini\",port=\"1\"}"),
        "{text}"
    );
    // A self-test is no recovery: the recovery counters did not move.
    assert!(
        !text.contains("iser_guard_recoveries_succeeded_total{"),
        "{text}"
    );
}
