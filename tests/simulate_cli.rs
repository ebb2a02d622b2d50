//! `iser-guard simulate` as an operator runs it: the alerts of the timeline carry the
//! severity syslog would get from the configuration (`--config`), and `--config` naming a
//! file that does not exist or does not load is an error, as for every command.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_iser-guard");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run iser-guard")
}

/// The `[severity]` of every ALERT line of a timeline.
fn alert_severities(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once("  ALERT    [").map(|(_, r)| r))
        .filter_map(|r| r.split_once(']').map(|(s, _)| s.to_string()))
        .collect()
}

#[test]
fn the_timeline_shows_the_configured_syslog_severities() {
    // Without --config: the built-in severities (fault crit, action warning, recovered
    // notice), never the engine's class words.
    let o = run(&["simulate", "field-incident"]);
    assert_eq!(o.status.code(), Some(0));
    let built_in = alert_severities(&o);
    assert!(built_in.contains(&"crit".to_string()), "{built_in:?}");
    assert!(built_in.contains(&"notice".to_string()), "{built_in:?}");
    for s in &built_in {
        assert!(
            ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"]
                .contains(&s.as_str()),
            "not a syslog severity: {s}"
        );
    }
    // With --config: the configured ones.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[alerts]\nseverity-fault = \"emerg\"\nseverity-action = \"err\"\n\
         severity-recovered = \"info\"\n",
    )
    .unwrap();
    let o = run(&[
        "--config",
        cfg.to_str().unwrap(),
        "simulate",
        "field-incident",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let configured = alert_severities(&o);
    let expected: Vec<String> = built_in
        .iter()
        .map(|s| match s.as_str() {
            "crit" => "emerg",
            "warning" => "err",
            "notice" => "info",
            other => other,
        })
        .map(str::to_string)
        .collect();
    assert_eq!(configured, expected);
}

#[test]
fn a_config_that_is_missing_or_invalid_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.toml");
    let o = run(&["--config", missing.to_str().unwrap(), "simulate"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(78), "{err}");
    assert!(err.contains("absent.toml does not exist"), "{err}");
    assert!(o.stdout.is_empty());
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[alerts]\nseverity-fault = \"loud\"\n").unwrap();
    let o = run(&["--config", bad.to_str().unwrap(), "simulate", "--list"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(78), "{err}");
    assert!(err.contains("alerts.severity-fault"), "{err}");
}
