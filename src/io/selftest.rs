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
