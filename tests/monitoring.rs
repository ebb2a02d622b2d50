//! The monitoring assets under packaging/monitoring/ against the metrics the daemon
//! exports: the Prometheus rules pass `promtool check rules` and their unit tests
//! (`promtool test rules`: the stuck-GSI rule must fire), the Grafana dashboard is a valid
//! dashboard whose every query is valid PromQL over metrics that exist, and the rules name
//! only metrics that exist.
//!
//! "Exist" is checked against a real exposition: a [`Metrics`] registry fed, through its
//! public update methods, one of everything the daemon reports (a dump with a stuck GSI QP
//! and an RC QP in SQE, a failed dump, kernel-log records and a loss, a planned and a
//! failed re-creation, an alert, a fault episode).

#[path = "support/promtool.rs"]
mod promtool;

use std::collections::BTreeSet;
use std::path::PathBuf;

use iser_guard::config::Config;
use iser_guard::core::driver::{Authority, Effect, EffectId, EffectKind, Refusal};
use iser_guard::core::nldev::{DeviceInfo, IbPortState, PhysState, PortInfo, QpEntry, QpTypeOrRaw};
use iser_guard::core::qp::{QpState, QpType};
use iser_guard::core::recovery::{
    Action, ActionId, ActionKind, Alert, AlertClass, Engine, Origin, Outcome, Phase, PortId,
    RecreateMethod, RecreateResult, Transition,
};
use iser_guard::core::time::Instant;
use iser_guard::core::topology::{DeviceObservation, Snapshot, Topology};
use iser_guard::metrics::{Metrics, Source};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn monitoring() -> PathBuf {
    root().join("packaging/monitoring")
}

fn qp(lqpn: u32, t: QpType, state: QpState) -> QpEntry {
    QpEntry {
        dev_index: 3,
        dev_name: "rocep2s0f0".into(),
        port: Some(1),
        lqpn,
        rqpn: None,
        qp_type: QpTypeOrRaw::Known(t),
        state,
        pid: None,
        kern_name: Some("ib_core".into()),
        sq_psn: None,
        rq_psn: None,
        path_mig_state: None,
        pdn: None,
    }
}

/// A dump of one E810 port whose GSI QP is in ERR, with an RC QP in SQE.
fn stuck_dump() -> Snapshot {
    Snapshot {
        devices: vec![DeviceObservation {
            info: DeviceInfo {
                index: 3,
                name: "rocep2s0f0".into(),
                port_count: 1,
                cap_flags: None,
                fw_version: None,
                node_guid: None,
                sys_image_guid: None,
                node_type: None,
                protocol: None,
                dim: None,
                name_assign_type: None,
                dev_type: None,
                parent_name: None,
            },
            parent: Some("pci:0000:02:00.0".into()),
            ports: vec![PortInfo {
                dev_index: 3,
                dev_name: "rocep2s0f0".into(),
                port: 1,
                state: IbPortState::Active,
                phys_state: PhysState::LinkUp,
                netdev_index: Some(4),
                netdev_name: Some("ens1f0".into()),
                cap_flags: None,
                subnet_prefix: None,
                lid: None,
                sm_lid: None,
                lmc: None,
            }],
            qps: Ok(vec![
                qp(1, QpType::Gsi, QpState::Err),
                qp(17, QpType::Rc, QpState::Sqe),
            ]),
        }],
    }
}

fn action(id: u64, kind: ActionKind) -> Action {
    Action {
        id: ActionId(id),
        port: Some(PortId {
            device: "rocep2s0f0".into(),
            port: 1,
        }),
        device: Some("rocep2s0f0".into()),
        origin: Origin::Automatic,
        reason: "test".into(),
        kind,
    }
}

fn recreate() -> ActionKind {
    ActionKind::RecreateDevice {
        device: "rocep2s0f0".into(),
        parent: None,
        driver: Some("irdma".into()),
        method: RecreateMethod::Auto,
        attempt: 1,
        remembered: None,
    }
}

/// One of everything, through the public update methods.
fn full_exposition() -> String {
    let m = Metrics::new();
    let cfg = Config::default();
    let mut topology = Topology::new();
    topology.apply_snapshot(stuck_dump(), Instant(1_000));
    topology.apply_snapshot(stuck_dump(), Instant(6_000));
    m.source_up(Source::Netlink, true);
    m.source_up(Source::Kmsg, true);
    m.netlink_dump(None, &topology, Default::default());
    m.netlink_dump(
        Some(&iser_guard::io::netlink::NetlinkError::Overrun),
        &topology,
        Default::default(),
    );
    m.sysfs_scan();
    m.iscsiadm_listing(true);
    m.iscsiadm_listing(false);
    m.kmsg_record(Some("stuck_qp_transition"), false);
    m.kmsg_record(None, true);
    m.kmsg_lost(Some(5));
    m.effect(
        &Effect {
            id: EffectId(1),
            kind: EffectKind::Plan {
                action: action(1, recreate()),
                refusal: Refusal::DryRun,
            },
        },
        &cfg.alerts,
    );
    m.effect(
        &Effect {
            id: EffectId(2),
            kind: EffectKind::Run {
                action: action(2, recreate()),
                authority: Authority::AllowList {
                    entry: "rocep2s0f0".into(),
                },
            },
        },
        &cfg.alerts,
    );
    m.executed(
        EffectId(2),
        &Outcome::Recreate(RecreateResult::Failed {
            reason: "test".into(),
        }),
        Some("devlink-toggle"),
    );
    m.effect(
        &Effect {
            id: EffectId(4),
            kind: EffectKind::Run {
                action: action(4, recreate()),
                authority: Authority::AllowList {
                    entry: "rocep2s0f0".into(),
                },
            },
        },
        &cfg.alerts,
    );
    m.executed(
        EffectId(4),
        &Outcome::Recreate(RecreateResult::Recreated {
            name: "rocep2s0f0".into(),
            mode_restored: None,
            method: None,
            failed_before: Vec::new(),
        }),
        Some("aux-rebind"),
    );
    m.effect(
        &Effect {
            id: EffectId(3),
            kind: EffectKind::Run {
                action: action(
                    3,
                    ActionKind::Alert(Alert {
                        severity: AlertClass::Error,
                        summary: "s".into(),
                        detail: "d".into(),
                        remedy: None,
                        count: 1,
                        key: "fault:rocep2s0f0/1:gsi".into(),
                    }),
                ),
                authority: Authority::Harmless,
            },
        },
        &cfg.alerts,
    );
    let port = PortId {
        device: "rocep2s0f0".into(),
        port: 1,
    };
    for (at, from, to) in [
        (1_000, Phase::Healthy, Phase::Faulted),
        (61_000, Phase::Verifying, Phase::Healthy),
    ] {
        m.transition(&Transition {
            at: Instant(at),
            port: port.clone(),
            from,
            to,
            reason: "test".into(),
        });
    }
    m.engine(&Engine::new(cfg.policy(), 1));
    m.encode()
}

/// Metric names an exposition defines, with the series names of histograms.
fn defined(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (w.next(), w.next(), w.next(), w.next())
        {
            names.insert(name.to_string());
            if kind == "histogram" {
                for s in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{s}"));
                }
            }
        }
    }
    names
}

/// `iser_guard_*` metric names a PromQL expression uses.
fn referenced(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(pos) = expr.get(i..).and_then(|s| s.find("iser_guard_")) {
        let start = i + pos;
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        out.insert(expr[start..end].to_string());
        i = end;
    }
    out
}

#[test]
fn the_full_exposition_passes_promtool_check_metrics() {
    let text = full_exposition();
    for name in [
        "iser_guard_rdma_port_stuck",
        "iser_guard_gsi_qp_state",
        "iser_guard_qps",
        "iser_guard_port_phase",
        "iser_guard_recoveries_failed_total",
        "iser_guard_fault_to_recovery_seconds",
    ] {
        assert!(defined(&text).contains(name), "{name} missing:\n{text}");
    }
    // The stuck GSI QP and the RC in SQE, as the rules read them.
    assert!(
        text.contains("iser_guard_rdma_port_stuck{device=\"rocep2s0f0\",port=\"1\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("iser_guard_gsi_qp_state{device=\"rocep2s0f0\",port=\"1\",state=\"ERR\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("iser_guard_qps{device=\"rocep2s0f0\",type=\"RC\",state=\"SQE\"} 1"),
        "{text}"
    );
    assert!(
        text.contains(
            "iser_guard_recoveries_failed_total{action=\"recreate_device\",method=\"devlink-toggle\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("iser_guard_fault_to_recovery_seconds_sum{fault=\"unknown\"} 60"),
        "{text}"
    );
    promtool::check_metrics(&text);
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = monitoring().join("prometheus");
    promtool::run(&dir, &["check", "rules", "iser-guard.rules.yml"]);
    // The stuck-GSI rule fires in these (and the others each have a case).
    let tests = std::fs::read_to_string(dir.join("iser-guard.rules.test.yml")).unwrap();
    assert!(tests.contains("alertname: IserGuardGsiQpStuck"));
    if let Some(out) = promtool::run(&dir, &["test", "rules", "iser-guard.rules.test.yml"]) {
        assert!(out.contains("SUCCESS"), "{out}");
    }
}

#[test]
fn the_rules_name_only_metrics_the_daemon_exports() {
    let have = defined(&full_exposition());
    let rules =
        std::fs::read_to_string(monitoring().join("prometheus/iser-guard.rules.yml")).unwrap();
    let used = referenced(&rules);
    assert!(used.contains("iser_guard_rdma_port_stuck"), "{used:?}");
    for name in &used {
        assert!(
            have.contains(name),
            "the rules use {name}, which is not exported"
        );
    }
}

/// Grafana's variables replaced by values PromQL accepts.
fn concrete(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__range", "1h")
        .replace("$instance", ".*")
}

#[test]
fn the_dashboard_is_valid_and_every_query_uses_exported_metrics() {
    let path = monitoring().join("grafana/iser-guard-dashboard.json");
    let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .expect("the dashboard is JSON");
    // What Grafana's import needs: a schema version, a title, a uid, panels with unique ids,
    // a type and a place on the grid.
    assert!(
        d["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion"
    );
    assert_eq!(d["title"], "iser-guard");
    assert!(d["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty() && u.len() <= 40));
    let panels = d["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let have = defined(&full_exposition());
    let mut exprs = Vec::new();
    for p in panels {
        let id = p["id"].as_u64().expect("panel id");
        assert!(ids.insert(id), "panel id {id} twice");
        assert!(p["type"].as_str().is_some(), "{p}");
        for k in ["x", "y", "w", "h"] {
            assert!(p["gridPos"][k].as_u64().is_some(), "gridPos.{k}: {p}");
        }
        assert!(p["gridPos"]["x"].as_u64().unwrap() + p["gridPos"]["w"].as_u64().unwrap() <= 24);
        if p["type"] == "row" {
            continue;
        }
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}", p["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            let used = referenced(expr);
            assert!(!used.is_empty(), "{}: {expr}", p["title"]);
            for name in used {
                assert!(
                    have.contains(&name),
                    "panel {:?} uses {name}, which is not exported",
                    p["title"]
                );
            }
            exprs.push((
                p["title"].as_str().unwrap_or("").to_string(),
                concrete(expr),
            ));
        }
    }
    // The panels the issue asks for.
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for wanted in [
        "Port state",
        "QPs by state",
        "Recoveries",
        "Time to recover",
    ] {
        assert!(titles.contains(&wanted), "{titles:?}");
    }
    // Every query parses as PromQL: promtool checks them as recording rules.
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (n, (_, e)) in exprs.iter().enumerate() {
        rules.push_str(&format!(
            "      - record: dashboard:query_{n}\n        expr: {}\n",
            serde_json::to_string(e).unwrap()
        ));
    }
    std::fs::write(dir.path().join("dashboard.rules.yml"), rules).unwrap();
    promtool::run(dir.path(), &["check", "rules", "dashboard.rules.yml"]);
}

#[test]
fn the_examples_are_where_the_package_installs_them() {
    for f in [
        "prometheus/iser-guard.rules.yml",
        "prometheus/iser-guard.rules.test.yml",
        "alertmanager/iser-guard-routes.yml",
        "grafana/iser-guard-dashboard.json",
        "rsyslog/60-iser-guard-forward.conf",
        "README.md",
    ] {
        assert!(monitoring().join(f).is_file(), "{f}");
    }
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(
            "[\"packaging/monitoring/**/*\", \"usr/share/doc/iser-guard/examples/monitoring/\", \"644\"]"
        ),
        "the .deb must ship packaging/monitoring"
    );
    let rsyslog =
        std::fs::read_to_string(monitoring().join("rsyslog/60-iser-guard-forward.conf")).unwrap();
    assert!(rsyslog.contains("$programname == 'iser-guard'"));
    // It filters on the facility its comment tells to configure, which the daemon accepts.
    assert!(rsyslog.contains("$syslogfacility-text == 'local5'"));
    assert!(iser_guard::config::parse_str("[alerts]\nfacility = \"local5\"\n").is_ok());
    let routes =
        std::fs::read_to_string(monitoring().join("alertmanager/iser-guard-routes.yml")).unwrap();
    assert!(routes.contains("service=\"iser-guard\""));
}

#[test]
fn docs_metrics_md_lists_every_metric_and_every_message_id() {
    let doc = std::fs::read_to_string(root().join("docs/guide/monitoring.md")).unwrap();
    for line in full_exposition().lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap();
            assert!(
                doc.contains(&format!("| `{name}` |")),
                "docs/guide/monitoring.md does not document {name}"
            );
        }
    }
    for kind in iser_guard::logging::ALERT_KINDS {
        let row = format!("| `{kind}` | `{}` |", iser_guard::logging::message_id(kind));
        assert!(doc.contains(&row), "docs/guide/monitoring.md lacks {row}");
    }
}

/// Runs `tool args`, or says it was not run when `tool` is not installed (these checks are
/// extra: CI installs promtool only). Returns stdout.
fn optional_tool(tool: &str, args: &[&str]) -> Option<String> {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
    if !found {
        eprintln!("NOTE: {tool} not installed: its check of packaging/monitoring was NOT run");
        return None;
    }
    let out = std::process::Command::new(tool)
        .args(args)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}\n{said}",
        out.status
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_alertmanager_example_routes_critical_alerts_to_on_call_when_amtool_is_there() {
    let cfg = monitoring().join("alertmanager/iser-guard-routes.yml");
    let cfg = cfg.to_str().unwrap();
    optional_tool("amtool", &["check-config", cfg]);
    let file = format!("--config.file={cfg}");
    for (labels, receiver) in [
        (
            &["service=iser-guard", "severity=critical"][..],
            "storage-oncall",
        ),
        (
            &["service=iser-guard", "severity=warning"][..],
            "storage-team",
        ),
        (&["job=other"][..], "default"),
    ] {
        let mut args = vec!["config", "routes", "test", file.as_str()];
        args.extend_from_slice(labels);
        if let Some(out) = optional_tool("amtool", &args) {
            assert_eq!(out.trim(), receiver, "{labels:?}");
        }
    }
}

#[test]
fn the_rsyslog_snippet_passes_rsyslogd_validation_when_rsyslogd_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rsyslog.conf");
    std::fs::write(
        &conf,
        format!(
            "module(load=\"imuxsock\" SysSock.Use=\"off\")\n$IncludeConfig {}\n",
            monitoring()
                .join("rsyslog/60-iser-guard-forward.conf")
                .display()
        ),
    )
    .unwrap();
    optional_tool("rsyslogd", &["-N1", "-f", conf.to_str().unwrap()]);
}
