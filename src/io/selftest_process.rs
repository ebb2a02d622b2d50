//! The port self-test in a child process (`iser-guard selftest DEV/PORT --json`): what the
//! daemon should use. A child cannot wedge the daemon (it is killed after its timeout plus
//! a grace period), and every device it opened is closed when it exits, so a later
//! re-creation of that device is never held up by the daemon (see
//! [`super::selftest_verbs`]). Needs no verbs in the daemon's own build.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::selftest::PortSelfTest;
use crate::core::selftest::{SelfTestReport, SelfTestResult, SelfTestStep};

/// Time the child gets beyond its own timeout before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// Runs `exe selftest DEVICE/PORT --json --timeout SECS`.
#[derive(Debug, Clone)]
pub struct SubprocessSelfTest {
    /// The iser-guard binary.
    pub exe: PathBuf,
}

impl SubprocessSelfTest {
    /// The running binary.
    pub fn current() -> std::io::Result<SubprocessSelfTest> {
        Ok(SubprocessSelfTest {
            exe: std::env::current_exe()?,
        })
    }
}

fn failed(device: &str, port: u32, took: Duration, detail: String) -> SelfTestResult {
    SelfTestResult::Ran(SelfTestReport {
        device: device.to_string(),
        port,
        steps: vec![SelfTestStep {
            name: "process".into(),
            took,
            ok: false,
            detail,
        }],
    })
}

/// What the child printed, as a result: `{"unavailable": reason}` or a report.
pub fn parse_output(stdout: &str) -> Option<SelfTestResult> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    if let Some(r) = v.get("unavailable").and_then(|r| r.as_str()) {
        return Some(SelfTestResult::Unavailable { reason: r.into() });
    }
    serde_json::from_value::<SelfTestReport>(v)
        .ok()
        .map(SelfTestResult::Ran)
}

impl PortSelfTest for SubprocessSelfTest {
    fn run(&self, device: &str, port: u32, timeout: Duration) -> SelfTestResult {
        let start = Instant::now();
        let mut child = match Command::new(&self.exe)
            .arg("selftest")
            .arg(format!("{device}/{port}"))
            .arg("--json")
            .arg("--timeout")
            .arg(format!("{:.3}", timeout.as_secs_f64()))
            .env("ISER_GUARD_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                return SelfTestResult::Unavailable {
                    reason: format!("cannot run {}: {e}", self.exe.display()),
                }
            }
        };
        // Read both pipes on threads so a chatty child never blocks on a full pipe.
        let out = child.stdout.take().map(|mut o| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = o.read_to_string(&mut s);
                s
            })
        });
        let err = child.stderr.take().map(|mut o| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = o.read_to_string(&mut s);
                s
            })
        });
        let limit = timeout + GRACE;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if start.elapsed() < limit => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let stdout = out.and_then(|t| t.join().ok()).unwrap_or_default();
        let stderr = err.and_then(|t| t.join().ok()).unwrap_or_default();
        let Some(status) = status else {
            return failed(
                device,
                port,
                start.elapsed(),
                format!(
                    "the self-test process did not end within {} s and was killed",
                    limit.as_secs()
                ),
            );
        };
        match parse_output(&stdout) {
            Some(r) => r,
            None => {
                let tail: String = stderr
                    .lines()
                    .last()
                    .unwrap_or("")
                    .chars()
                    .take(300)
                    .collect();
                failed(
                    device,
                    port,
                    start.elapsed(),
                    format!("the self-test process printed no report ({status}): {tail}"),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_and_reports_parse() {
        assert_eq!(
            parse_output(r#"{"device":"rxe_ini","port":1,"unavailable":"no RDMA devices"}"#),
            Some(SelfTestResult::Unavailable {
                reason: "no RDMA devices".into()
            })
        );
        let r = parse_output(
            r#"{"device":"rxe_ini","port":1,"passed":true,"steps":[{"name":"port","took":{"secs":0,"nanos":5000},"took_us":5,"ok":true,"detail":"ACTIVE"}]}"#,
        );
        match r {
            Some(SelfTestResult::Ran(rep)) => {
                assert!(rep.passed());
                assert_eq!(rep.steps[0].took, Duration::from_micros(5));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse_output("garbage"), None);
    }

    #[test]
    fn a_child_that_cannot_start_is_unavailable() {
        let t = SubprocessSelfTest {
            exe: "/nonexistent/iser-guard".into(),
        };
        assert!(matches!(
            t.run("rxe_ini", 1, Duration::from_secs(1)),
            SelfTestResult::Unavailable { .. }
        ));
    }
}
