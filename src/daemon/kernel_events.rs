//! The daemon's use of the subsystem layer (`core::signatures::subsystem`): every kernel-log
//! record of the RDMA storage stack is counted per subsystem, device and level; the most
//! severe ones (errors and worse, and whole oops/WARN reports) go into the events ring beside
//! the engine's decisions; a fatal firmware or device error raises one alert per device.
//!
//! Nothing here acts: the signatures, through the engine, stay the only source of actions.
//! Only records the kernel wrote (facility 0, or any when `kmsg.trust-userspace-records`)
//! reach the ring or raise an alert; a forged record is counted like any other, no more.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::core::kmsg::Record;
use crate::core::nvme_fabrics::NvmeRdmaController;
use crate::core::signatures::subsystem::{
    self, explain_event, level_name, trace::TraceAssembler, Subsystem,
};
use crate::core::time::Instant;

/// A fatal device error on the same device raises at most one alert in this long.
pub const FATAL_ALERT_REPEAT: Duration = Duration::from_secs(10 * 60);
/// Distinct device labels counted per subsystem; past it a device counts as `other` (the
/// metric's cardinality stays bounded on a host with hundreds of disks).
pub const MAX_DEVICES_PER_SUBSYSTEM: usize = 64;
/// At most this many ring entries per minute (a storm of errors keeps the engine's own
/// entries in the ring); the rest are counted only.
pub const MAX_RING_PER_MINUTE: u32 = 20;

/// What one record gave.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Noted {
    /// Counter labels: subsystem, device (bounded), level name.
    pub counts: Vec<(&'static str, String, &'static str)>,
    /// Entries for the events ring: (subsystem, level, message).
    pub ring: Vec<(Subsystem, u8, String)>,
    /// An operator alert for a fatal device error: (what, why, what to do).
    pub alert: Option<(String, String, String)>,
}

/// See the module header.
#[derive(Debug, Default)]
pub struct KernelEvents {
    assembler: TraceAssembler,
    devices: HashMap<Subsystem, HashSet<String>>,
    last_alert: HashMap<String, Instant>,
    ring_minute: (u64, u32),
}

impl KernelEvents {
    /// A new tracker.
    pub fn new() -> KernelEvents {
        KernelEvents::default()
    }

    /// Takes one record. `signature`: a signature recognised it (the engine hears it; the
    /// subsystem layer only counts it then). `trusted`: the record may reach the ring and
    /// raise an alert.
    pub fn record(&mut self, r: &Record, signature: bool, trusted: bool, now: Instant) -> Noted {
        self.record_with(r, signature, trusted, now, &[])
    }

    /// [`Self::record`], with the NVMe over RDMA controllers as last placed: a line of a
    /// controller placed on an RDMA port (`nvme nvme0: Failed reconnect attempt 3/300`)
    /// names that port in its ring entry, so the port's trouble reads in one place.
    pub fn record_with(
        &mut self,
        r: &Record,
        signature: bool,
        trusted: bool,
        now: Instant,
        nvme: &[NvmeRdmaController],
    ) -> Noted {
        let mut out = Noted::default();
        let device = r.dict_value("DEVICE");
        if let Some(t) = self.assembler.push(&r.text) {
            if trusted && self.ring_allows(now) {
                out.ring.push((t.subsystem, 2, t.summary()));
            }
        }
        let Some(ev) = subsystem::recognise(&r.text, Some(r.level), device) else {
            return out;
        };
        let label = self.device_label(ev.subsystem, ev.device.label());
        out.counts
            .push((ev.subsystem.name(), label.clone(), level_name(ev.level)));
        if !trusted || signature {
            return out;
        }
        let x = explain_event(&ev);
        if ev.fatal_device_error {
            let key = ev.device.label();
            let due = self
                .last_alert
                .get(&key)
                .is_none_or(|at| now.since(*at) >= FATAL_ALERT_REPEAT);
            if due {
                self.last_alert.insert(key, now);
                out.alert = Some((
                    format!(
                        "fatal device error on {}: {}",
                        ev.device.label(),
                        ev.message
                    ),
                    x.meaning.clone(),
                    x.driver_action.clone().unwrap_or_else(|| x.next.clone()),
                ));
            }
        }
        if ev.level <= 3 && self.ring_allows(now) {
            out.ring.push((
                ev.subsystem,
                ev.level,
                format!("{}: {}{}", x.title, x.meaning, nvme_port(&ev, nvme)),
            ));
        }
        out
    }

    fn device_label(&mut self, s: Subsystem, label: String) -> String {
        let seen = self.devices.entry(s).or_default();
        if seen.contains(&label) {
            return label;
        }
        if seen.len() >= MAX_DEVICES_PER_SUBSYSTEM {
            return "other".to_string();
        }
        seen.insert(label.clone());
        label
    }

    fn ring_allows(&mut self, now: Instant) -> bool {
        let minute = now.0 / 60_000;
        if self.ring_minute.0 != minute {
            self.ring_minute = (minute, 0);
        }
        if self.ring_minute.1 >= MAX_RING_PER_MINUTE {
            return false;
        }
        self.ring_minute.1 += 1;
        true
    }
}

/// ` (NVMe over RDMA controller nvme0 on rxe_ini/1)` for a line of a placed controller,
/// else nothing.
fn nvme_port(ev: &subsystem::SubsystemEvent, nvme: &[NvmeRdmaController]) -> String {
    if ev.subsystem != Subsystem::Nvme {
        return String::new();
    }
    let Some(name) = ev.device.other.as_deref() else {
        return String::new();
    };
    nvme.iter()
        .find(|c| c.name == name)
        .and_then(|c| c.placed.as_ref())
        .map(|(d, p)| format!(" (NVMe over RDMA controller {name} on {d}/{p})"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(level: u8, facility: u8, text: &str) -> Record {
        Record::parse(format!("{},1,100,-;{text}", facility * 8 + level).as_bytes()).unwrap()
    }

    // The mlx5 health format (health.c: mlx5_core_err with its "func:line:(pid N): ").
    const FATAL: &str = "mlx5_core 0000:08:00.0: poll_health:800:(pid 0): Fatal error 1 detected";

    #[test]
    fn a_fatal_device_error_alerts_once_per_device_and_interval() {
        let mut k = KernelEvents::new();
        let n = k.record(&rec(2, 0, FATAL), false, true, Instant(1_000));
        let (what, _why, todo) = n.alert.expect("alert");
        assert!(what.contains("0000:08:00.0"), "{what}");
        assert!(todo.contains("health recovery"), "{todo}");
        assert_eq!(n.counts, [("nic", "0000:08:00.0".to_string(), "crit")]);
        assert_eq!(n.ring.len(), 1);
        assert!(k
            .record(&rec(2, 0, FATAL), false, true, Instant(60_000))
            .alert
            .is_none());
        let later = Instant(1_000 + u64::try_from(FATAL_ALERT_REPEAT.as_millis()).unwrap());
        assert!(k
            .record(&rec(2, 0, FATAL), false, true, later)
            .alert
            .is_some());
    }

    #[test]
    fn a_forged_record_is_counted_but_neither_noted_nor_alerted() {
        let mut k = KernelEvents::new();
        let n = k.record(&rec(2, 1, FATAL), false, false, Instant(0));
        assert_eq!(n.counts.len(), 1);
        assert!(n.ring.is_empty() && n.alert.is_none());
    }

    #[test]
    fn information_is_counted_only_and_unrelated_lines_not_at_all() {
        let mut k = KernelEvents::new();
        let n = k.record(
            &rec(6, 0, "mlx5_core 0000:08:00.0: firmware version: 16.27.2048"),
            false,
            true,
            Instant(0),
        );
        assert_eq!(n.counts, [("nic", "0000:08:00.0".to_string(), "info")]);
        assert!(n.ring.is_empty());
        assert_eq!(
            k.record(
                &rec(6, 0, "usb 1-6: Manufacturer: Realtek"),
                false,
                true,
                Instant(0)
            ),
            Noted::default()
        );
    }

    #[test]
    fn a_placed_nvme_controllers_lines_name_its_rdma_port() {
        use crate::core::nvme_fabrics::{parse_fabrics_address, NvmeRdmaController};
        let c = NvmeRdmaController {
            name: "nvme0".into(),
            address: parse_fabrics_address("traddr=192.0.2.2,trsvcid=4420\n").unwrap(),
            subsysnqn: "nqn.2014-08.org.example.lab:nvme0".into(),
            hostnqn: None,
            hostid: None,
            state: "connecting".into(),
            io_queues: None,
            queue_size: None,
            ctrl_loss_tmo: None,
            reconnect_delay: None,
            kato: None,
            namespaces: Vec::new(),
            placed: Some(("rxe_ini".into(), 1)),
        };
        // nvme_rdma's line when the CM on a stuck port fails its connect (drivers/nvme/host/
        // rdma.c nvme_rdma_cm_handler: dev_err(ctrl->ctrl.device, ...)).
        let line = "nvme nvme0: rdma connection establishment failed (-104)";
        let mut k = KernelEvents::new();
        let n = k.record_with(
            &rec(3, 0, line),
            false,
            true,
            Instant(0),
            std::slice::from_ref(&c),
        );
        assert_eq!(n.counts, [("nvme", "nvme0".to_string(), "err")]);
        assert!(
            n.ring[0]
                .2
                .ends_with(" (NVMe over RDMA controller nvme0 on rxe_ini/1)"),
            "{}",
            n.ring[0].2
        );
        // Another controller, or none placed: no port named.
        let other = "nvme nvme1: rdma connection establishment failed (-104)";
        let n = k.record_with(&rec(3, 0, other), false, true, Instant(0), &[c]);
        assert!(!n.ring[0].2.contains(" on rxe_ini/1"), "{}", n.ring[0].2);
    }

    #[test]
    fn device_labels_and_ring_entries_are_bounded() {
        let mut k = KernelEvents::new();
        let mut labels = HashSet::new();
        let mut ring = 0;
        for i in 0..200u32 {
            let text = format!("sd 3:0:0:{i}: [sd{i}] tag#1 FAILED Result: hostbyte=DID_TRANSPORT_DISRUPTED driverbyte=DRIVER_OK");
            let n = k.record(&rec(3, 0, &text), false, true, Instant(5_000));
            labels.insert(n.counts[0].1.clone());
            ring += n.ring.len();
        }
        assert_eq!(labels.len(), MAX_DEVICES_PER_SUBSYSTEM + 1);
        assert!(labels.contains("other"));
        assert_eq!(ring, MAX_RING_PER_MINUTE as usize);
    }
}
