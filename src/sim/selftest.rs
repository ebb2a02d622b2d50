//! The simulated port self-test: what the verbs self-test would find on this host, from the
//! host's own state (the kernel's view), never from what the engine expects.
//!
//! - The device is gone (or being re-created): libibverbs lists no such device, so the
//!   self-test cannot run (`Unavailable`, as the real one says for a missing device).
//! - QP 1 of the port is in ERR (the field failure): rdma_cm's connect sends its REQ as a
//!   MAD through QP 1, so it fails at `cm-connect`; on irdma the MAD post also logs the
//!   captured `modify_qp invalid` / `ib_mad_send_error` lines.
//! - The registration's CM path is silently dead (scenario fault): the connect times out
//!   at the self-test's timeout with nothing in the log, as iscsid's reconnects do.
//! - Otherwise (a fresh device, QP 1 in RTS): every step passes in a few milliseconds.
//! - `SimHost::selftest_available = false`: the daemon has no verbs self-test.

use std::time::Duration;

use super::host::{Delivery, HostEvent, SimDriver, SimHost};
use super::kernel;
use crate::core::qp::QpState;
use crate::core::recovery::ActionId;
use crate::core::selftest::{SelfTestReport, SelfTestResult, SelfTestStep};
use crate::core::time::Instant;

fn step(name: &str, ms: u64, ok: bool, detail: &str) -> SelfTestStep {
    SelfTestStep {
        name: name.to_string(),
        took: Duration::from_millis(ms),
        ok,
        detail: detail.to_string(),
    }
}

impl SimHost {
    /// Runs a self-test of `device`/`port` (the executor's side of `SelfTestPort`): its
    /// outcome is delivered when its steps are done; kernel lines it causes come now.
    pub fn selftest(
        &mut self,
        device: &str,
        port: u32,
        timeout: Duration,
        id: ActionId,
        now: Instant,
    ) -> Vec<Delivery> {
        let mut out = Vec::new();
        let (result, after) = self.selftest_result(device, port, timeout, &mut out);
        self.schedule(
            now.plus(after),
            HostEvent::Deliver(Box::new(Delivery::Outcome {
                id,
                outcome: crate::answers::self_test(result).outcome,
            })),
        );
        out
    }

    fn selftest_result(
        &mut self,
        device: &str,
        port: u32,
        timeout: Duration,
        out: &mut Vec<Delivery>,
    ) -> (SelfTestResult, Duration) {
        if !self.selftest_available {
            let reason = "this iser-guard runs without a verbs self-test".to_string();
            return (SelfTestResult::Unavailable { reason }, Duration::ZERO);
        }
        let Some(d) = self
            .devices
            .get(device)
            .filter(|d| d.present && !d.recreating)
        else {
            let reason = format!("libibverbs lists no RDMA device named {device} (it is gone)");
            return (
                SelfTestResult::Unavailable { reason },
                Duration::from_millis(2),
            );
        };
        let idx = usize::try_from(port.saturating_sub(1)).unwrap_or(usize::MAX);
        let Some(gsi) = d.gsi.get(idx).copied() else {
            let reason = format!("{device} has no port {port}");
            return (
                SelfTestResult::Unavailable { reason },
                Duration::from_millis(2),
            );
        };
        let opened = [
            step("open-device", 1, true, "ibv_open_device: ok"),
            step("cm-resolve", 2, true, "rdma_resolve_addr/route: ok"),
        ];
        let report = |mut steps: Vec<SelfTestStep>| SelfTestReport {
            device: device.to_string(),
            port,
            steps: {
                let mut all = opened.to_vec();
                all.append(&mut steps);
                all
            },
        };
        if gsi == QpState::Err {
            if d.driver == SimDriver::Irdma {
                out.push(Delivery::Kmsg {
                    facility: 0,
                    record: kernel::modify_qp_invalid(&d.pci, &d.name),
                });
                out.push(Delivery::Kmsg {
                    facility: 0,
                    record: kernel::mad_send_error(&d.name),
                });
            }
            let r = report(vec![step(
                "cm-connect",
                1000,
                false,
                "rdma_connect: RDMA_CM_EVENT_UNREACHABLE (status -110): the connect request \
                 was never answered; the CM's MADs go through QP 1, which is in ERR",
            )]);
            let took = r.total();
            return (SelfTestResult::Ran(r), took);
        }
        if d.cm_silent {
            let secs = timeout.as_secs();
            let r = report(vec![SelfTestStep {
                name: "cm-connect".into(),
                took: timeout,
                ok: false,
                detail: format!(
                    "rdma_connect: no answer within {secs}s (RDMA_CM_EVENT_UNREACHABLE, status \
                     -110)"
                ),
            }]);
            let took = r.total();
            return (SelfTestResult::Ran(r), took);
        }
        let r = report(vec![
            step("cm-connect", 6, true, "rdma_connect: ESTABLISHED"),
            step("send-recv", 1, true, "64-byte send and receive completed"),
            step("qp-walk", 2, true, "RESET->INIT->RTR->RTS"),
            step(
                "qp-reuse",
                2,
                true,
                "ERR->RESET->INIT->RTR->RTS, send completed",
            ),
        ]);
        let took = r.total();
        (SelfTestResult::Ran(r), took)
    }
}
