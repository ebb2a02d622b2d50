//! `iser-guard check-config [PATH] [--json]`: validates a configuration file the way the
//! daemon loads it, and prints either the effective settings or every problem.
//!
//! Exit codes: 0 valid; 78 (EX_CONFIG) invalid, unreadable, missing (when named), not a
//! regular file or world-writable, or naming something that cannot be the kernel log. The
//! daemon runs the same checks before it reports ready and exits 78 with the same problems,
//! which systemd does not retry. What the host lacks (the kernel log, an executable
//! iscsiadm, the syslog socket) is warned about: the file may be checked on another host.

use crate::exit::ExitStatus;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::Globals;
use crate::config::{self, Config, ConfigError, ConfigSource, ProbeMethod};
use crate::error::Error;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to check [default: --config, else /etc/iser-guard/config.toml; when that does
    /// not exist, the built-in defaults are what the daemon would use, and they are checked].
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// Print the result as one JSON object: `{"ok":true,"source":…,"config":…,"warnings":[…]}`
    /// or `{"ok":false,"path":…,"problems":[{"key","line","col","message"}]}`.
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let explicit = args.path.as_deref().or(globals.config.as_deref());
    match config::load_or_default(explicit) {
        Ok((cfg, source)) => {
            // The file's own warnings, then what this host lacks that the daemon needs.
            let mut warnings = cfg.warnings();
            warnings.extend(config::host_warnings(&cfg));
            if args.json {
                print_json(&ok_json(&cfg, &source, &warnings));
            } else {
                print!("{}", summary(&cfg, &source, &warnings));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if args.json => {
            let path = explicit.unwrap_or(Path::new(config::DEFAULT_CONFIG_PATH));
            print_json(&err_json(path, &e));
            Ok(ExitCode::from(ExitStatus::Config.code()))
        }
        Err(e) => Err(e.into()),
    }
}

fn print_json(v: &serde_json::Value) {
    // Serializing a `Value` cannot fail.
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn ok_json(cfg: &Config, source: &ConfigSource, warnings: &[String]) -> serde_json::Value {
    let path = match source {
        ConfigSource::File(p) => serde_json::Value::String(p.display().to_string()),
        ConfigSource::Defaults => serde_json::Value::Null,
    };
    serde_json::json!({
        "ok": true,
        "path": path,
        "source": source.to_string(),
        "config": serde_json::to_value(cfg).unwrap_or(serde_json::Value::Null),
        "warnings": warnings,
    })
}

fn err_json(path: &Path, e: &ConfigError) -> serde_json::Value {
    serde_json::json!({
        "ok": false,
        "path": path.display().to_string(),
        "problems": e.problems(),
    })
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The name an enum has in the file (its serde name), e.g. `target-back`.
fn name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".into(),
    }
}

fn secs(d: std::time::Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// The human summary: `OK: <source>`, then one line per aspect, then `warnings`.
pub fn summary(cfg: &Config, source: &ConfigSource, warnings: &[String]) -> String {
    let r = &cfg.recovery;
    let a = &cfg.alerts;
    let mut out = format!("OK: {source}\n");
    let mut line = |k: &str, v: String| out.push_str(&format!("  {k:<22} {v}\n"));
    line(
        "automatic recovery",
        if cfg.devices.allow.is_empty() {
            "none (devices.allow is empty: alert only)".into()
        } else {
            cfg.devices.allow.join(", ")
        },
    );
    line("dry-run", yes_no(r.dry_run).into());
    let how = |m: ProbeMethod| match m {
        ProbeMethod::Tcp => "tcp",
        ProbeMethod::Neighbour => "neighbour (ARP/ND on the portal's netdev)",
        ProbeMethod::Auto => {
            "auto (tcp; ARP/ND per portal once TCP is refused while the host answers)"
        }
        ProbeMethod::None => "none",
    };
    let mut probe = match r.probe_method {
        ProbeMethod::None => "none (targets count as present)".into(),
        m => format!(
            "{} to port {} (default), {} in a row, every {}, timeout {}",
            how(m),
            r.probe_port,
            r.probe_successes,
            secs(cfg.poll.probe),
            secs(r.probe_timeout)
        ),
    };
    for (portal, m) in &r.portal_probe_method {
        probe.push_str(&format!("; {portal}: {}", how(*m)));
    }
    line("reset when", name(&r.reset_when));
    line("probe", probe);
    line(
        "back-off",
        format!(
            "{} doubling to {}, {} attempt(s), then quarantine",
            secs(r.backoff_initial),
            secs(r.backoff_max),
            r.max_attempts
        ),
    );
    line("other sessions", name(&r.other_sessions));
    line("module reload", yes_no(r.allow_module_reload).into());
    line(
        "timeouts",
        format!(
            "iscsid grace {}, iscsiadm {}, reset {}, verify {}, device wait {}",
            secs(r.iscsid_grace),
            secs(r.iscsiadm_timeout),
            secs(r.reset_timeout),
            secs(r.verify_timeout),
            secs(r.device_wait)
        ),
    );
    line(
        "polling",
        format!(
            "netlink {}, iscsi {}",
            secs(cfg.poll.netlink),
            secs(cfg.poll.iscsi)
        ),
    );
    line(
        "alerts",
        if a.syslog {
            format!(
                "syslog {} as {} ({}); fault {}, action {}, recovered {}, operator {}; \
                 repeats every {}",
                a.syslog_socket.display(),
                a.ident,
                name(&a.facility),
                a.severity_fault.name(),
                a.severity_action.name(),
                a.severity_recovered.name(),
                a.severity_operator.name(),
                secs(a.repeat_interval)
            )
        } else {
            "syslog off".into()
        },
    );
    line(
        "kernel log",
        if cfg.kmsg.enabled {
            format!(
                "{}, userspace records {}",
                cfg.paths.kmsg.display(),
                if cfg.kmsg.trust_userspace_records {
                    "TRUSTED"
                } else {
                    "untrusted"
                }
            )
        } else {
            "off (kmsg.enabled = false): stuck QPs from the netlink QP table only".to_string()
        },
    );
    line(
        "metrics",
        if cfg.metrics.enabled {
            let mut m = format!(
                "{} every {}",
                cfg.metrics.textfile.display(),
                secs(cfg.metrics.interval)
            );
            if let Some(addr) = cfg.metrics.listen {
                m.push_str(&format!(", http://{addr}/metrics"));
            }
            m
        } else {
            "off".into()
        },
    );
    line("state", cfg.paths.state_dir.display().to_string());
    line(
        "control socket",
        cfg.paths.control_socket.display().to_string(),
    );
    for w in warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_defaults_says_alert_only() {
        let cfg = Config::default();
        let s = summary(&cfg, &ConfigSource::Defaults, &cfg.warnings());
        assert!(s.starts_with("OK: built-in defaults"), "{s}");
        assert!(
            s.contains("none (devices.allow is empty: alert only)"),
            "{s}"
        );
        assert!(s.contains("warning: devices.allow is empty"), "{s}");
        assert!(s.contains("(daemon)"), "{s}");
    }

    #[test]
    fn json_failure_lists_problems() {
        let e = ConfigError::Invalid {
            path: "/x".into(),
            problems: vec![config::Problem::new("a.b", "bad")],
        };
        let v = err_json(Path::new("/x"), &e);
        assert_eq!(v["ok"], false);
        assert_eq!(v["problems"][0]["key"], "a.b");
        assert_eq!(v["problems"][0]["line"], serde_json::Value::Null);
    }
}
