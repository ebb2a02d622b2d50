//! Re-creations by the device's own driver: irdma asks ice for a reset (`Requesting a
//! reset`), ice unplugs the RDMA device and plugs it in again with a fresh QP 1. The engine
//! starts no re-creation of its own while one is in progress, and verifies the port
//! afterwards exactly as after its own. Also: a NIC function that lost RDMA for a reason no
//! re-creation repairs (safe mode, a failed rebuild), said once.

use super::Engine;
use crate::recovery::action::{ActionKind, AlertClass, Origin};
use crate::recovery::input::PortId;
use crate::recovery::state::{DriverReset, FreshQp, Phase};
use std::time::Duration;

use crate::time::Instant;

/// How long a reset the driver asked for may take before the engine acts on its own, in
/// units of `recovery.device-wait`: ice's rebuild re-creates every VSI and VF first.
const REQUESTED_RESET_WAITS: u32 = 5;

impl Engine {
    pub(super) fn on_driver_reset_requested(&mut self, device: &str, now: Instant) {
        let d = self.device_or_create(device);
        let present = d.present;
        d.driver_reset = Some(DriverReset {
            since: now,
            requested: true,
        });
        let wait = self.driver_reset_wait(true).as_secs();
        self.alert(
            now,
            AlertClass::Warning,
            format!("driver-reset:{device}"),
            format!("the driver of {device} requested a reset: it re-creates the device itself"),
            format!(
                "irdma asked its NIC driver for a reset (after a control-QP failure or a \
                 hardware error); the NIC driver unplugs {device} and plugs it in again, which \
                 also gives QP 1 a fresh start. iser-guard starts no re-creation of its own \
                 for up to {wait}s meanwhile{}, and verifies the port once the device is back",
                if present {
                    ""
                } else {
                    " (the device is already gone)"
                }
            ),
            None,
        );
        self.mark_dirty(format!("{device}: its driver requested a reset"));
    }

    /// How long the engine leaves a re-creation to the driver.
    fn driver_reset_wait(&self, requested: bool) -> Duration {
        if requested {
            self.policy
                .device_wait
                .saturating_mul(REQUESTED_RESET_WAITS)
        } else {
            self.policy.device_wait
        }
    }

    /// Until when a re-creation by the driver of `device` holds the engine's own, if one is
    /// in progress.
    pub(super) fn driver_reset_hold(&self, device: &str, now: Instant) -> Option<Instant> {
        let reset = self.devices.get(device)?.driver_reset?;
        let until = reset.since.plus(self.driver_reset_wait(reset.requested));
        (until > now).then_some(until)
    }

    /// Holds `pid`'s re-creation while its device's driver re-creates it: true when held.
    pub(super) fn hold_for_driver_reset(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(until) = self.driver_reset_hold(&pid.device, now) else {
            return false;
        };
        if let Some(stage) = self.stage_mut(pid) {
            // Look again when the driver's time is up.
            if stage.deadline().is_none_or(|d| d > until || d <= now) {
                stage.set_deadline(Some(until));
            }
        }
        true
    }

    /// The device came back after its driver re-created it: the ports that were waiting
    /// for it are verified as after the engine's own re-creation (fresh QP 1 expected in
    /// RTS, sessions given iscsid's grace, then logged in and checked).
    pub(super) fn on_driver_recreated(&mut self, device: &str, reset: DriverReset, now: Instant) {
        let by = if reset.requested {
            "its driver's reset"
        } else {
            "its driver (it left and came back on its own)"
        };
        let secs = now.since(reset.since).as_secs();
        let mut verified = false;
        for pid in self.ports_of_device(device) {
            let waiting = matches!(
                self.phase(&pid),
                Some(Phase::Faulted | Phase::AwaitingTarget | Phase::AwaitingDevice)
            );
            if !waiting {
                continue;
            }
            let seen = self
                .gsi_rts_at
                .get(&pid)
                .is_some_and(|at| *at >= reset.since);
            if let Some(e) = self.episode_mut(&pid) {
                e.recreated = Some(if seen {
                    FreshQp::Seen
                } else {
                    FreshQp::Awaited
                });
                e.needs_recreate = false;
                e.selftest = None;
            }
            let grace = self.policy.iscsid_grace.as_secs();
            self.start_reconnect(
                &pid,
                true,
                format!(
                    "{device} was re-created by {by} after {secs}s: QP 1 is fresh; giving \
                     iscsid {grace}s to reconnect before logging sessions in"
                ),
                now,
            );
            verified = true;
        }
        if let Some(d) = self.devices.get_mut(device) {
            d.present = true;
        }
        self.persist(format!("{device} re-created by {by}"));
        if verified {
            self.push(
                None,
                Some(device.to_string()),
                Origin::Automatic,
                format!("{device} re-created by its driver: is its new QP 1 in RTS?"),
                ActionKind::RefreshTopology,
            );
            self.last_topology_request = Some(now);
        }
        for pid in self.ports_of_device(device) {
            self.evaluate(&pid, now);
        }
    }

    pub(super) fn on_nic_without_rdma(
        &mut self,
        pci: &str,
        what: &str,
        remedy: &str,
        now: Instant,
    ) {
        self.alert(
            now,
            AlertClass::Critical,
            format!("nic-no-rdma:[{pci}]"),
            format!("{pci}: {what}"),
            format!(
                "no re-creation repairs this, so iser-guard does not try; the iSER sessions \
                 on this function's ports stay down until it is fixed: {remedy}"
            ),
            None,
        );
    }
}
