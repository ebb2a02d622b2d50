//! `iser-guard selftest DEVICE[/PORT]`: proves that new RDMA connections can be made on a
//! port: two RC QPs connected through rdma_cm (the CM / GSI path a stuck QP 1 breaks), then
//! two QPs walked by hand RESET -> INIT -> RTR -> RTS, reset and walked again, messages
//! exchanged at each stage (docs/history/verbs.md).
//!
//! Exit codes: 0 every step passed; 1 a step failed (the report names it); 69 no RDMA
//! device visible to libibverbs, no such device or port, or a build without the `verbs`
//! feature; 64 a malformed DEVICE/PORT or timeout.

use crate::exit::ExitStatus;
use std::process::ExitCode;
use std::time::Duration;

use super::Globals;
use crate::core::selftest::{SelfTestReport, SelfTestResult};
use crate::error::Error;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// RDMA device and port, e.g. `rxe_ini/1` (port 1 when omitted).
    #[arg(value_name = "DEVICE[/PORT]")]
    pub target: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Give up after this many seconds (the whole test; every wait is bounded by it).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub timeout: f64,
}

/// Splits `DEVICE[/PORT]`.
pub fn parse_target(s: &str) -> Result<(String, u32), Error> {
    let (dev, port) = match s.split_once('/') {
        Some((d, p)) => {
            let port: u32 = p.parse().ok().filter(|p| *p >= 1).ok_or_else(|| {
                Error::Usage(format!(
                    "selftest: port '{p}' in '{s}' is not a number from 1"
                ))
            })?;
            (d, port)
        }
        None => (s, 1),
    };
    if dev.is_empty() || dev.contains(char::is_whitespace) {
        return Err(Error::Usage(format!(
            "selftest: '{s}' is not DEVICE[/PORT] (e.g. rxe_ini/1)"
        )));
    }
    Ok((dev.to_string(), port))
}

/// Runs the subcommand.
pub fn run(args: Args, _globals: &Globals) -> Result<ExitCode, Error> {
    let (device, port) = parse_target(&args.target)?;
    if !(args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 3600.0) {
        return Err(Error::Usage(format!(
            "selftest: --timeout {} is out of range: give more than 0 and at most 3600 seconds",
            args.timeout
        )));
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let result = run_test(&device, port, timeout);
    Ok(ExitCode::from(report(&device, port, &result, args.json)))
}

#[cfg(feature = "verbs")]
fn run_test(device: &str, port: u32, timeout: Duration) -> SelfTestResult {
    use crate::io::selftest::PortSelfTest;
    crate::io::selftest_verbs::VerbsSelfTest.run(device, port, timeout)
}

#[cfg(not(feature = "verbs"))]
fn run_test(_device: &str, _port: u32, _timeout: Duration) -> SelfTestResult {
    SelfTestResult::Unavailable {
        reason: "this iser-guard was built without verbs (cargo feature `verbs`): the \
                 self-test is not available"
            .into(),
    }
}

/// Prints the result and gives the exit code.
fn report(device: &str, port: u32, result: &SelfTestResult, json: bool) -> u8 {
    match result {
        SelfTestResult::Unavailable { reason } => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "device": device, "port": port, "unavailable": reason })
                );
            }
            eprintln!("iser-guard: selftest {device}/{port}: {reason}");
            ExitStatus::Unavailable.code()
        }
        SelfTestResult::Ran(r) => {
            if json {
                println!("{}", to_json(r));
            } else {
                print!("{}", to_text(r));
            }
            if r.passed() {
                ExitStatus::Ok.code()
            } else {
                ExitStatus::Finding.code()
            }
        }
    }
}

/// The report as JSON: the core's `SelfTestReport` plus `passed`, `total_us` and each
/// step's `took_us` (so readers need not decode `took`).
pub fn to_json(r: &SelfTestReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("passed".into(), r.passed().into());
        o.insert("total_us".into(), micros(r.total()).into());
    }
    if let Some(steps) = v.get_mut("steps").and_then(|s| s.as_array_mut()) {
        for (s, step) in steps.iter_mut().zip(&r.steps) {
            if let Some(o) = s.as_object_mut() {
                o.insert("took_us".into(), micros(step.took).into());
            }
        }
    }
    v
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The report as text: one line per step with its time.
pub fn to_text(r: &SelfTestReport) -> String {
    let mut s = format!("self-test of {}/{}\n", r.device, r.port);
    for step in &r.steps {
        s.push_str(&format!(
            "  {:<16} {:>10.3} ms  {:<4} {}\n",
            step.name,
            step.took.as_secs_f64() * 1000.0,
            if step.ok { "ok" } else { "FAIL" },
            step.detail
        ));
    }
    s.push_str(&r.summary());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::selftest::SelfTestStep;

    #[test]
    fn targets_parse_with_and_without_port() {
        assert_eq!(parse_target("rxe_ini/1").unwrap(), ("rxe_ini".into(), 1));
        assert_eq!(parse_target("mlx5_0").unwrap(), ("mlx5_0".into(), 1));
        assert_eq!(parse_target("mlx5_0/2").unwrap(), ("mlx5_0".into(), 2));
        assert!(parse_target("rxe_ini/0").is_err());
        assert!(parse_target("rxe_ini/x").is_err());
        assert!(parse_target("/1").is_err());
    }

    #[test]
    fn text_and_json_list_every_step_with_its_time() {
        let r = SelfTestReport {
            device: "rxe_ini".into(),
            port: 1,
            steps: vec![
                SelfTestStep {
                    name: "cm-connect".into(),
                    took: Duration::from_micros(1500),
                    ok: true,
                    detail: "QP 17 connected to QP 18".into(),
                },
                SelfTestStep {
                    name: "walk-rtr".into(),
                    took: Duration::from_micros(20),
                    ok: false,
                    detail: "EINVAL".into(),
                },
            ],
        };
        let t = to_text(&r);
        assert!(t.contains("cm-connect"), "{t}");
        assert!(t.contains("1.500 ms  ok"), "{t}");
        assert!(t.contains("FAIL EINVAL"), "{t}");
        assert!(t.ends_with("failed at walk-rtr: EINVAL\n"), "{t}");
        let j = to_json(&r);
        assert_eq!(j["passed"], false);
        assert_eq!(j["steps"][0]["took_us"], 1500);
        assert_eq!(j["total_us"], 1520);
        // What the daemon's child-process runner reads back.
        let back = crate::io::selftest_process::parse_output(&j.to_string());
        assert_eq!(back, Some(SelfTestResult::Ran(r)));
    }
}
