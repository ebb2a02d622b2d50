//! The RDMA devices' asynchronous event channels (PORT_ERR, PORT_ACTIVE, GID_CHANGE,
//! DEVICE_FATAL) as a witness next to the kernel log and netlink.
//!
//! Owns which devices are listened to, and the one rule that keeps a listener from doing
//! harm: a listener holds a verbs context open on its device, and the kernel deletes a
//! device only after every user context is gone or disassociated (`ib_uverbs_remove_one`).
//! Drivers without `disassociate_ucontext` (Soft-RoCE rxe, siw) therefore block any
//! `rdma link delete` or module unload while the daemon listens (lab, 6.12 and 6.1: still
//! blocked after 10 s, done within 2 s of the holder closing it). So:
//! - only hardware devices (a parent function, as the device's re-creation recipe says) are
//!   listened to; irdma and mlx5, the field's drivers, disassociate;
//! - only devices in `devices.allow` (the ones the engine may act on);
//! - a device is released before the daemon re-creates it, and listened to again after.

use std::collections::BTreeSet;

use crate::core::recovery::Observation;
use crate::core::reset_plan::RecreateFrom;
use crate::core::selftest::AsyncEvent;

/// Where asynchronous events come from (the verbs listeners; a double in tests).
pub trait AsyncEventSource: Send {
    /// Listen on exactly `devices` (start missing listeners, stop the others, restart
    /// ended ones).
    fn sync(&mut self, devices: &[String]);
    /// Close `device`'s listener now (before it is re-created).
    fn release(&mut self, device: &str);
    /// Stop every listener.
    fn shutdown(&mut self);
}

/// The listeners and what decides their set.
pub struct Witness {
    source: Box<dyn AsyncEventSource>,
    allow: BTreeSet<String>,
    /// Devices whose recipe says hardware (a parent function).
    hardware: BTreeSet<String>,
    /// Devices released for a re-creation, until the topology shows them again.
    released: BTreeSet<String>,
    listening: Vec<String>,
}

impl Witness {
    /// Listens for devices in `allow` only.
    pub fn new(source: Box<dyn AsyncEventSource>, allow: BTreeSet<String>) -> Witness {
        Witness {
            source,
            allow,
            hardware: BTreeSet::new(),
            released: BTreeSet::new(),
            listening: Vec::new(),
        }
    }

    /// Learns from one topology observation which devices are hardware.
    pub fn observe(&mut self, obs: &Observation) {
        if let Observation::DeviceRecipe { device, recipe } = obs {
            if matches!(recipe, RecreateFrom::Parent { .. }) {
                self.hardware.insert(device.clone());
            } else {
                self.hardware.remove(device);
            }
        }
    }

    /// After a topology update: listen on the present, allowed hardware devices.
    pub fn sync(&mut self, present: &BTreeSet<String>) {
        // A released device that the topology no longer shows was deleted: it is listened
        // to again once it is back (the next update that shows it).
        self.released.retain(|d| present.contains(d));
        let want: Vec<String> = present
            .iter()
            .filter(|d| self.allow.contains(*d) && self.hardware.contains(*d))
            .filter(|d| !self.released.contains(*d))
            .cloned()
            .collect();
        if want != self.listening {
            tracing::info!(devices = %want.join(", "), "asynchronous event listeners");
        }
        self.source.sync(&want);
        self.listening = want;
    }

    /// Before the daemon re-creates `device`.
    pub fn release(&mut self, device: &str) {
        if self.listening.iter().any(|d| d == device) {
            self.source.release(device);
            self.listening.retain(|d| d != device);
            self.released.insert(device.to_string());
        }
    }

    /// A new configuration (its allow-list).
    pub fn set_allow(&mut self, allow: BTreeSet<String>) {
        self.allow = allow;
    }

    /// Stops every listener.
    pub fn shutdown(&mut self) {
        self.source.shutdown();
    }
}

/// Listeners and the channel their events arrive on.
pub type Listeners = (
    Box<dyn AsyncEventSource>,
    tokio::sync::mpsc::UnboundedReceiver<AsyncEvent>,
);

/// The real listeners (libibverbs' async event fds) and the channel their events arrive on.
#[cfg(feature = "verbs")]
pub fn real() -> Listeners {
    struct Verbs(crate::io::selftest_verbs::AsyncEvents);
    impl AsyncEventSource for Verbs {
        fn sync(&mut self, devices: &[String]) {
            self.0.sync(devices);
        }
        fn release(&mut self, device: &str) {
            self.0.release(device);
        }
        fn shutdown(&mut self) {
            self.0.shutdown();
        }
    }
    let (std_tx, std_rx) = std::sync::mpsc::channel::<AsyncEvent>();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    // The listeners deliver on a std channel; one thread, asleep in recv() while nothing
    // happens, hands events to the loop. It ends when the listeners' sender is dropped.
    let spawned = std::thread::Builder::new()
        .name("iser-guard-evts".into())
        .spawn(move || {
            while let Ok(ev) = std_rx.recv() {
                if tx.send(ev).is_err() {
                    break;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("no asynchronous event witness: cannot start its thread: {e}");
    }
    let events = crate::io::selftest_verbs::start_async_events(&[], std_tx);
    (Box::new(Verbs(events)), rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Default, Clone)]
    struct Calls(Arc<Mutex<Vec<String>>>);

    impl AsyncEventSource for Calls {
        fn sync(&mut self, devices: &[String]) {
            self.0
                .lock()
                .unwrap()
                .push(format!("sync {}", devices.join(",")));
        }
        fn release(&mut self, device: &str) {
            self.0.lock().unwrap().push(format!("release {device}"));
        }
        fn shutdown(&mut self) {
            self.0.lock().unwrap().push("shutdown".into());
        }
    }

    fn hw(device: &str) -> Observation {
        Observation::DeviceRecipe {
            device: device.into(),
            recipe: RecreateFrom::Parent {
                parent: crate::core::reset_plan::ParentFacts {
                    bus: "pci".into(),
                    name: "0000:02:00.0".into(),
                    driver: Some("ice".into()),
                },
                aux: None,
                netdevs: vec!["ens2f0np0".into()],
            },
        }
    }

    fn rxe(device: &str) -> Observation {
        Observation::DeviceRecipe {
            device: device.into(),
            recipe: RecreateFrom::SoftLink {
                kind: crate::core::reset_plan::SoftType::Rxe,
                netdev: "ini0".into(),
            },
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn listens_on_allowed_hardware_only_and_releases_before_a_recreation() {
        let calls = Calls::default();
        let mut w = Witness::new(Box::new(calls.clone()), set(&["rocep2s0f0", "rxe_ini"]));
        w.observe(&hw("rocep2s0f0"));
        w.observe(&hw("rocep2s0f1"));
        w.observe(&rxe("rxe_ini"));
        let present = set(&["rocep2s0f0", "rocep2s0f1", "rxe_ini"]);
        w.sync(&present);
        // rxe_ini: software (its open context would block its deletion); f1: not allowed.
        w.release("rocep2s0f0");
        w.sync(&present);
        // Deleted by the re-creation, then back.
        w.sync(&set(&["rocep2s0f1", "rxe_ini"]));
        w.sync(&present);
        assert_eq!(
            *calls.0.lock().unwrap(),
            vec![
                "sync rocep2s0f0",
                "release rocep2s0f0",
                "sync ",
                "sync ",
                "sync rocep2s0f0",
            ]
        );
    }
}
