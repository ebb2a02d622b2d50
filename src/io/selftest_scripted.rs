//! A scripted [`PortSelfTest`] for tests: answers queued results in order, records every
//! call, and says "unavailable" once nothing is queued (the daemon's behaviour without
//! verbs).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use crate::core::selftest::SelfTestResult;
use crate::io::selftest::PortSelfTest;

/// Queued self-test answers and the calls made.
#[derive(Debug, Default)]
pub struct ScriptedSelfTest {
    answers: Mutex<VecDeque<SelfTestResult>>,
    calls: Mutex<Vec<(String, u32, Duration)>>,
}

impl ScriptedSelfTest {
    /// Queues `results`, answered in order.
    pub fn push(&self, results: impl IntoIterator<Item = SelfTestResult>) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(results);
    }

    /// Every self-test asked for so far: device, port, timeout.
    pub fn calls(&self) -> Vec<(String, u32, Duration)> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl PortSelfTest for ScriptedSelfTest {
    fn run(&self, device: &str, port: u32, timeout: Duration) -> SelfTestResult {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).push((
            device.to_string(),
            port,
            timeout,
        ));
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
            .unwrap_or_else(|| SelfTestResult::Unavailable {
                reason: "nothing scripted".into(),
            })
    }
}
