//! The real port self-test and asynchronous event source, from the verbs crate
//! (`iser-guard-verbs`, cargo feature `verbs`).
//!
//! - [`VerbsSelfTest`] runs the self-test in this process (what `iser-guard selftest`
//!   does). The daemon should prefer [`super::selftest_process::SubprocessSelfTest`]:
//!   librdmacm keeps the device it used open for the life of the process, and on Soft-RoCE
//!   (no `disassociate_ucontext`) an open device makes `rdma link delete` wait for it.
//! - [`start_async_events`] starts one asynchronous event listener per device, delivering
//!   into a std channel; see [`AsyncEvents`] for restarts and release before a reset.

use std::sync::mpsc::Sender;
use std::time::Duration;

use super::selftest::PortSelfTest;
use crate::core::selftest::{AsyncEvent, SelfTestResult};

pub use iser_guard_verbs::events::{AsyncEventHub, AsyncEventListener, ListenerEnd};

/// The in-process self-test (libibverbs + librdmacm).
#[derive(Debug, Clone, Copy, Default)]
pub struct VerbsSelfTest;

impl PortSelfTest for VerbsSelfTest {
    fn run(&self, device: &str, port: u32, timeout: Duration) -> SelfTestResult {
        iser_guard_verbs::selftest::run(device, port, timeout)
    }
}

/// Asynchronous event listeners for the daemon's allowed devices.
pub struct AsyncEvents {
    hub: AsyncEventHub,
}

/// Starts listeners for `devices` (those that cannot be opened now are logged and tried
/// again at the next [`AsyncEvents::sync`]).
pub fn start_async_events(devices: &[String], tx: Sender<AsyncEvent>) -> AsyncEvents {
    let mut me = AsyncEvents {
        hub: AsyncEventHub::with_channel(tx),
    };
    me.sync(devices);
    me
}

impl AsyncEvents {
    /// Listens on exactly `devices`: call after a device appeared, was re-created or
    /// renamed (netlink REGISTER / RENAME) and after a reset. Listeners whose device went
    /// away (DEVICE_FATAL, fd error) are restarted here.
    pub fn sync(&mut self, devices: &[String]) {
        for (d, e) in self.hub.sync(devices) {
            tracing::debug!(device = %d, error = %e, "no asynchronous event listener (yet)");
        }
    }

    /// Closes `device` before it is re-created: on drivers without disassociate
    /// (rxe, siw) the kernel waits for every open context before it deletes the device.
    /// Returns within 200 ms.
    pub fn release(&mut self, device: &str) {
        if let Some(end) = self.hub.release(device) {
            tracing::debug!(device, "asynchronous event listener released: {end}");
        }
    }

    /// Devices listened to.
    pub fn devices(&self) -> Vec<String> {
        self.hub.devices()
    }

    /// Stops every listener (within 200 ms; also on drop).
    pub fn shutdown(&mut self) {
        self.hub.shutdown();
    }
}
