//! The initiator's RDMA device going and coming back, and stage `AwaitingDevice`: wait
//! `device_wait` for it, then have it re-created from its parent. Renames follow udev.

use super::{CommandError, Engine};
use crate::recovery::action::AlertClass;
use crate::recovery::input::{PortId, StuckEvidence};
use crate::recovery::state::{DriverReset, Fault, InFlightKind, Phase};
use crate::time::Instant;

impl Engine {
    pub(super) fn on_device_gone(&mut self, device: &str, now: Instant) {
        self.device_or_create(device).present = false;
        self.gsi_rts_at.retain(|pid, _| pid.device != device);
        if self.recreating.as_deref() == Some(device) {
            return; // Expected: it is being re-created.
        }
        // Not the engine's doing: its driver is re-creating it (or it was removed).
        let d = self.device_or_create(device);
        if d.driver_reset.is_none() {
            d.driver_reset = Some(DriverReset {
                since: now,
                requested: false,
            });
        }
        for pid in self.ports_of_device(device) {
            // uverbs announces a device's unregistration as DEVICE_FATAL: a port faulted by
            // that event alone was watching the device go, not a dead device to re-create
            // at once. It waits for the device like any port whose device vanished.
            if let Some(e) = self.episode_mut(&pid) {
                let by_fatal_event = e.fault
                    == (Fault::GsiStuck {
                        evidence: StuckEvidence::AsyncDeviceFatal,
                    });
                if by_fatal_event && !e.was_recreated() {
                    e.needs_recreate = false;
                }
            }
            let has_sessions = self.ports.get(&pid).is_some_and(|p| !p.sessions.is_empty());
            if has_sessions {
                self.enter_fault(
                    &pid,
                    Fault::DeviceGone,
                    format!(
                        "RDMA device {device} disappeared: its sessions cannot reconnect until \
                         it is back"
                    ),
                    now,
                );
            }
        }
    }

    /// An operator's re-creation of `device` has something to go by: it is present, or what
    /// re-creates it was remembered (or its parent function is known).
    pub(crate) fn recreatable(&self, device: &str) -> Result<(), CommandError> {
        match self.devices.get(device) {
            Some(d) if !d.present && d.remembered.is_none() && d.parent.is_none() => {
                Err(CommandError::NothingToRecreateFrom(device.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// Keeps what re-creating `device` needs, learned while it exists (the only time it can
    /// be learned: a deleted device leaves nothing in sysfs or netlink). Journaled, so a
    /// restart while the device is gone still knows how to bring it back.
    pub(super) fn remember_recipe(
        &mut self,
        device: &str,
        recipe: crate::reset_plan::RecreateFrom,
    ) {
        let d = self.device_or_create(device);
        if d.remembered.as_ref() == Some(&recipe) {
            return;
        }
        d.remembered = Some(recipe);
        self.mark_dirty(format!("learned how to re-create {device}"));
    }

    pub(super) fn on_device_appeared(
        &mut self,
        device: &str,
        parent: Option<String>,
        driver: Option<String>,
        now: Instant,
    ) {
        let d = self.device_or_create(device);
        let was_present = d.present;
        d.present = true;
        if parent.is_some() {
            d.parent = parent;
        }
        if driver.is_some() {
            d.driver = driver;
        }
        // Records that named it before it was known count now (a fresh record starts as
        // present, so this comes before the return for a device that was present).
        self.replay_unknown(device, now);
        if was_present {
            return;
        }
        if let Some(reset) = self.device_or_create(device).driver_reset.take() {
            return self.on_driver_recreated(device, reset, now);
        }
        for pid in self.ports_of_device(device) {
            if self.phase(&pid) == Some(Phase::AwaitingDevice) {
                self.start_reconnect(
                    &pid,
                    true,
                    format!(
                        "RDMA device {device} is back; giving iscsid its grace period to reconnect"
                    ),
                    now,
                );
                self.evaluate(&pid, now);
            }
        }
    }

    /// AwaitingDevice: the device is back (reconnect), or the wait is over (re-create it).
    pub(super) fn step_awaiting_device(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let present = self.devices.get(&pid.device).is_none_or(|d| d.present);
        if present {
            self.start_reconnect(
                pid,
                true,
                format!("RDMA device {} is present again", pid.device),
                now,
            );
            return true;
        }
        if p.deadline().is_some_and(|d| d <= now) || p.needs_recreate() {
            if let Some(p) = self.ports.get_mut(pid) {
                if let Some(stage) = p.stage_mut() {
                    stage.set_deadline(None);
                }
                if let Some(e) = p.episode_mut() {
                    e.needs_recreate = true;
                }
            }
            return self.try_recreate(pid, now);
        }
        false
    }

    pub(super) fn enter_awaiting_device(&mut self, pid: &PortId, now: Instant) {
        let wait = self.policy.device_wait;
        if let Some(stage) = self.stage_mut(pid) {
            stage.set_deadline(Some(now.plus(wait)));
        }
        self.request_topology(now);
    }

    pub(super) fn rename_device(&mut self, from: &str, to: &str, now: Instant) {
        if from == to {
            return;
        }
        if let Some(mut d) = self.devices.remove(from) {
            d.name = to.to_string();
            self.devices.insert(to.to_string(), d);
        }
        if self.recreating.as_deref() == Some(from) {
            self.recreating = Some(to.to_string());
        }
        let moved: Vec<(PortId, Instant)> = self
            .gsi_rts_at
            .iter()
            .filter(|(pid, _)| pid.device == from)
            .map(|(pid, at)| (PortId::new(to, pid.port), *at))
            .collect();
        self.gsi_rts_at.retain(|pid, _| pid.device != from);
        self.gsi_rts_at.extend(moved);
        for pid in self.ports_of_device(from) {
            if let Some(mut p) = self.ports.remove(&pid) {
                let new = PortId::new(to, pid.port);
                p.id = new.clone();
                for k in &p.sessions {
                    if let Some(s) = self.sessions.get_mut(k) {
                        s.port = new.clone();
                    }
                }
                self.ports.insert(new, p);
            }
        }
        for i in self.inflight.values_mut() {
            if i.kind == InFlightKind::Recreate(from.to_string()) {
                i.kind = InFlightKind::Recreate(to.to_string());
            }
        }
        self.mark_dirty(format!("device {from} renamed to {to}"));
        if !self.policy.allows(to) && self.policy.allows(from) {
            self.alert(
                now,
                AlertClass::Warning,
                format!("renamed:{from}:{to}"),
                format!("RDMA device {from} is now named {to}, which is not in devices.allow"),
                format!(
                    "udev normally renames a re-created device back; check the rdma-core \
                     naming rules, and add \"{to}\" to devices.allow if this name is permanent"
                ),
                None,
            );
        }
    }
}
