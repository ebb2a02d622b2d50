//! Kernel bug reports (oops, `kernel BUG at`, `WARNING:`, KASAN, panic, a hung iSCSI task):
//! nothing the agent can repair, and a device re-creation under a kernel bug may make it
//! worse. The engine alerts the operator (critical, once per repeat interval per module) and
//! holds automatic re-creation on the devices the module concerns until an operator command.

use super::Engine;
use crate::recovery::action::AlertClass;
use crate::recovery::state::KernelBugHold;
use crate::time::Instant;

/// Modules every RDMA device and iSER session goes through: a bug in one holds every device.
const SHARED_MODULES: &[&str] = &[
    "ib_iser",
    "ib_core",
    "libiscsi",
    "scsi_transport_iscsi",
    "rdma_cm",
    "ib_cm",
    "iw_cm",
    "ib_uverbs",
    "rdma_ucm",
    "ib_umad",
];

impl Engine {
    pub(super) fn on_kernel_bug(&mut self, module: Option<String>, report: String, now: Instant) {
        let all_devices = module
            .as_deref()
            .is_none_or(|m| SHARED_MODULES.contains(&m));
        match self.kernel_bugs.iter_mut().find(|k| k.module == module) {
            Some(k) => {
                // A new report after the operator lifted the hold for some devices holds
                // them again: the bug is still there.
                if !k.lifted_for.is_empty() {
                    k.lifted_for.clear();
                    self.mark_dirty(format!("kernel bug again: {report}"));
                }
            }
            None => {
                self.kernel_bugs.push(KernelBugHold {
                    module: module.clone(),
                    report: report.clone(),
                    at: now,
                    all_devices,
                    lifted_for: Vec::new(),
                });
                self.mark_dirty(format!("kernel bug: {report}"));
            }
        }
        let scope = match (&module, all_devices) {
            (_, true) => "every RDMA device".to_string(),
            (Some(m), false) => format!("the RDMA devices of {m} (and those of unknown driver)"),
            (None, false) => "every RDMA device".to_string(),
        };
        let key = format!("kernel-bug:{}", module.as_deref().unwrap_or("kernel"));
        self.alert(
            now,
            AlertClass::Critical,
            key,
            format!("kernel bug: {report}: automatic re-creation held on {scope}"),
            format!(
                "the kernel reported {report}. This is a kernel bug, not a fault of the device, \
                 the target or the network: no automatic repair applies, and re-creating a \
                 device under it can make it worse, so iser-guard will not re-create {scope} on \
                 its own until an operator command. Save the whole report (journalctl -k -b or \
                 the serial console), report it to the kernel or distribution, and reboot the \
                 host if the module is wedged."
            ),
            Some(
                "iser-guard resume   (lifts the hold everywhere; `iser-guard recover DEVICE` \
                 acts on one device)"
                    .to_string(),
            ),
        );
    }

    /// The kernel bug that holds automatic re-creation of `device`, if any.
    pub(super) fn kernel_bug_hold(&self, device: &str) -> Option<&KernelBugHold> {
        let driver = self.devices.get(device).and_then(|d| d.driver.as_deref());
        self.kernel_bugs.iter().find(|k| k.concerns(device, driver))
    }

    /// The kernel bugs automatic re-creation is held on.
    pub fn kernel_bugs(&self) -> &[KernelBugHold] {
        &self.kernel_bugs
    }

    /// The kernel bug report holding automatic re-creation of `device`, if any.
    pub(crate) fn kernel_bug_holding(&self, device: &str) -> Option<&KernelBugHold> {
        self.kernel_bug_hold(device)
    }

    /// `resume`: every kernel-bug hold is lifted.
    pub(super) fn lift_kernel_bugs(&mut self) {
        if !self.kernel_bugs.is_empty() {
            for k in std::mem::take(&mut self.kernel_bugs) {
                // A report after the operator's word is news: alerted at once.
                self.gate.reset(&format!(
                    "kernel-bug:{}",
                    k.module.as_deref().unwrap_or("kernel")
                ));
            }
            self.mark_dirty("kernel-bug holds lifted by the operator".into());
        }
    }

    /// `recover`/`reset-device DEVICE`: the operator's word lifts the holds for that device.
    pub(super) fn lift_kernel_bugs_for(&mut self, device: &str) {
        let mut changed = false;
        for k in &mut self.kernel_bugs {
            if !k.lifted_for.iter().any(|d| d == device) {
                k.lifted_for.push(device.to_string());
                changed = true;
            }
        }
        if changed {
            self.mark_dirty(format!(
                "kernel-bug hold lifted for {device} by the operator"
            ));
        }
    }
}
