//! The port self-test as the daemon and the CLI see it: one small trait, so the engine's
//! executor can ask for a self-test without knowing whether verbs were built in, and tests
//! and the simulator can stand in for the real one.

use std::time::Duration;

use crate::core::selftest::SelfTestResult;

/// Runs a self-test of one RDMA port (blocking: callers put it on a worker thread).
pub trait PortSelfTest: Send + Sync {
    /// Test `device`/`port`, giving up after `timeout` with a failed step.
    fn run(&self, device: &str, port: u32, timeout: Duration) -> SelfTestResult;
}

/// The self-test of a build without verbs, or of a host where libibverbs sees no device:
/// it never runs, and says why.
#[derive(Debug, Clone)]
pub struct NoSelfTest {
    /// Why it cannot run (operator words).
    pub reason: String,
}

impl PortSelfTest for NoSelfTest {
    fn run(&self, _device: &str, _port: u32, _timeout: Duration) -> SelfTestResult {
        SelfTestResult::Unavailable {
            reason: self.reason.clone(),
        }
    }
}

/// A self-test that tries once more when the first try's connect was REJECTED by the CM.
///
/// Why: in the lab (6.12, Soft-RoCE, target and initiator in one kernel) the self-test run
/// 0.5 s after the daemon re-created rxe_ini was rejected at cm-connect (`REJECTED`,
/// status 10, IB_CM_REJ_STALE_CONN) while iscsid's own session came back on the same port,
/// and the same test 10 s after a re-creation passed. A rejection is an answer from a CM, so
/// the GSI path works; the engine would otherwise count it as a failed attempt and
/// re-create a working port. One retry after [`REJECT_RETRY_AFTER`], within the same
/// timeout; a second rejection stands.
pub struct RetryOnReject<T> {
    /// The self-test to run.
    pub inner: T,
}

/// How long to wait before the second try.
pub const REJECT_RETRY_AFTER: Duration = Duration::from_secs(3);

fn rejected_at_connect(r: &SelfTestResult) -> bool {
    match r {
        SelfTestResult::Ran(report) => report
            .first_failure()
            .is_some_and(|s| s.name == "cm-connect" && s.detail.contains("REJECTED")),
        SelfTestResult::Unavailable { .. } => false,
    }
}

impl<T: PortSelfTest> PortSelfTest for RetryOnReject<T> {
    fn run(&self, device: &str, port: u32, timeout: Duration) -> SelfTestResult {
        let start = std::time::Instant::now();
        let first = self.inner.run(device, port, timeout);
        if !rejected_at_connect(&first) {
            return first;
        }
        let left = timeout.saturating_sub(start.elapsed() + REJECT_RETRY_AFTER);
        if left < Duration::from_secs(2) {
            return first;
        }
        if let SelfTestResult::Ran(r) = &first {
            tracing::warn!(
                device,
                port,
                "port self-test: {}; trying once more in {} ms",
                r.summary(),
                REJECT_RETRY_AFTER.as_millis()
            );
        }
        std::thread::sleep(REJECT_RETRY_AFTER);
        self.inner.run(device, port, left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::selftest::{SelfTestReport, SelfTestStep};
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Scripted {
        calls: AtomicU32,
        first_detail: &'static str,
    }

    impl PortSelfTest for Scripted {
        fn run(&self, device: &str, port: u32, _timeout: Duration) -> SelfTestResult {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let ok = n > 0;
            SelfTestResult::Ran(SelfTestReport {
                device: device.into(),
                port,
                steps: vec![SelfTestStep {
                    name: "cm-connect".into(),
                    took: Duration::from_millis(20),
                    ok,
                    detail: if ok {
                        "ok".into()
                    } else {
                        self.first_detail.into()
                    },
                }],
            })
        }
    }

    /// A retrying self-test whose first run fails at cm-connect with `first_detail`.
    fn scripted(first_detail: &'static str) -> RetryOnReject<Scripted> {
        RetryOnReject {
            inner: Scripted {
                calls: AtomicU32::new(0),
                first_detail,
            },
        }
    }

    fn passed(r: &SelfTestResult) -> bool {
        matches!(r, SelfTestResult::Ran(rep) if rep.passed())
    }

    #[test]
    fn a_rejected_connect_is_tried_once_more() {
        let t =
            scripted("rdma_cm: waiting for ESTABLISHED, got RDMA_CM_EVENT_REJECTED (status 10)");
        assert!(passed(&t.run("rxe_ini", 1, Duration::from_secs(10))));
        assert_eq!(t.inner.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn other_failures_and_short_budgets_are_not_retried() {
        let t = scripted("rdma_connect: no answer within 10 s");
        assert!(!passed(&t.run("rxe_ini", 1, Duration::from_secs(10))));
        assert_eq!(t.inner.calls.load(Ordering::SeqCst), 1);
        let t = scripted("got RDMA_CM_EVENT_REJECTED (status 10)");
        assert!(!passed(&t.run("rxe_ini", 1, Duration::from_secs(4))));
        assert_eq!(t.inner.calls.load(Ordering::SeqCst), 1);
    }
}
