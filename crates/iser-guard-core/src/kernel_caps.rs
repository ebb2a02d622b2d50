//! What the running kernel offers the daemon and what the daemon does with it: device events
//! subscribed or polled, the RDMA CM id table there or not, and the RDMA driver folder names
//! found. `status` shows it and the daemon's first log line says it, from one decision here;
//! the probing (SYS_GET, a RES_CM_ID_GET dump, sysfs) is I/O in `io::kernel_caps`.
//!
//! Why it matters: kernel 6.12 sends RDMA netlink device events (SYS_GET's MONITOR_MODE),
//! 6.1 and 6.8 (Ubuntu 24.04) do not, and there the daemon sees a device come and go only at
//! its next dump. Without RES_CM_ID_GET sessions are placed by route and memory alone.

use serde::Serialize;

use crate::reset_plan::{soft_type, DeviceFacts};

/// What the probe found, before any decision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapsProbe {
    /// The kernel release (`uname -r`), when it could be read.
    pub release: Option<String>,
    /// SYS_GET's answer: whether MONITOR_MODE is on, or why SYS_GET failed.
    pub monitor_mode: Option<Result<bool, String>>,
    /// Opening the event socket, when it was tried: why it failed.
    pub subscribe: Option<Result<(), String>>,
    /// A RES_CM_ID_GET dump of one device, when there was a device to ask: why it failed.
    pub cm_id_dump: Option<Result<(), String>>,
    /// The driver folder name of each RDMA device (see [`driver_folder`]).
    pub drivers: Vec<String>,
}

/// How the daemon learns that a device came or went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", content = "why", rename_all = "lowercase")]
pub enum DeviceEvents {
    /// The kernel sends device events and the daemon listens (dumps come sooner after one).
    Subscribed,
    /// Only the periodic dump (`poll.netlink`) shows it, for the reason given.
    Polled(String),
    /// RDMA netlink could not be asked (it is not there).
    Unknown,
}

/// Whether RES_CM_ID_GET answers (session placement by the kernel's own connection table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "why", rename_all = "lowercase")]
pub enum CmIdTable {
    /// The dump answered.
    Available,
    /// The dump failed: sessions are placed by route and memory.
    Unavailable(String),
    /// No RDMA device to ask.
    Unknown,
}

/// The decided capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelCaps {
    /// `uname -r`.
    pub release: Option<String>,
    /// Device events subscribed or polled.
    pub device_events: DeviceEvents,
    /// The CM id table.
    pub cm_id_table: CmIdTable,
    /// Driver folder names of the RDMA devices, sorted, each once.
    pub drivers: Vec<String>,
}

impl KernelCaps {
    /// The decision on what the probe found.
    pub fn decide(probe: &CapsProbe) -> Self {
        let device_events = match (&probe.monitor_mode, &probe.subscribe) {
            (None, _) => DeviceEvents::Unknown,
            (Some(Err(e)), _) => DeviceEvents::Polled(format!("SYS_GET failed: {e}")),
            (Some(Ok(false)), _) => DeviceEvents::Polled(
                "the kernel sends no RDMA netlink device events (they came with 6.12)".into(),
            ),
            (Some(Ok(true)), Some(Err(e))) => {
                DeviceEvents::Polled(format!("cannot subscribe to device events: {e}"))
            }
            // As the daemon's `topology::Poller::on_system_info`: MONITOR_MODE on, subscribe.
            (Some(Ok(true)), _) => DeviceEvents::Subscribed,
        };
        let cm_id_table = match &probe.cm_id_dump {
            None => CmIdTable::Unknown,
            Some(Ok(())) => CmIdTable::Available,
            Some(Err(e)) => CmIdTable::Unavailable(e.clone()),
        };
        let mut drivers = probe.drivers.clone();
        drivers.sort();
        drivers.dedup();
        KernelCaps {
            release: probe.release.clone(),
            device_events,
            cm_id_table,
            drivers,
        }
    }

    /// One line for the log and `status`: `device events polled (why), CM id table available,
    /// drivers irdma.gen_2, rxe`.
    pub fn summary(&self) -> String {
        let events = match &self.device_events {
            DeviceEvents::Subscribed => "device events subscribed".to_string(),
            DeviceEvents::Polled(why) => format!("device events polled ({why})"),
            DeviceEvents::Unknown => "device events unknown (no RDMA netlink to ask)".to_string(),
        };
        let cm = match &self.cm_id_table {
            CmIdTable::Available => "CM id table available".to_string(),
            CmIdTable::Unavailable(why) => {
                format!("CM id table unavailable ({why}; sessions placed by route)")
            }
            CmIdTable::Unknown => "CM id table unknown (no RDMA device to ask)".to_string(),
        };
        let drivers = if self.drivers.is_empty() {
            "no RDMA driver found".to_string()
        } else {
            format!("drivers {}", self.drivers.join(", "))
        };
        let kernel = self.release.as_deref().unwrap_or("unknown");
        format!("kernel {kernel}: {events}, {cm}, {drivers}")
    }
}

/// The driver folder name of a device: the auxiliary driver's folder (`irdma`,
/// `irdma.gen_2`, `mlx5_ib.rdma`) from the device's facts, else the RDMA driver the sysfs
/// scan found under its parent (`scanned`: an auxiliary driver beside the PCI function, or
/// the PCI driver), else `rxe`/`siw` for a software device, else the parent's bus driver.
pub fn driver_folder(facts: Option<&DeviceFacts>, scanned: Option<&str>) -> Option<String> {
    if let Some(dir) = facts
        .and_then(|f| f.aux.as_ref())
        .and_then(|a| a.driver_dir.clone())
    {
        return Some(dir);
    }
    if let Some(d) = scanned {
        return Some(d.to_string());
    }
    let facts = facts?;
    if let Some(kind) = soft_type(facts) {
        return Some(kind.name().to_string());
    }
    facts.parent.as_ref().and_then(|p| p.driver.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reset_plan::{AuxFacts, ParentFacts};

    fn facts(name: &str) -> DeviceFacts {
        DeviceFacts {
            name: name.into(),
            parent: None,
            aux: None,
            node_type: None,
            node_desc: None,
            netdevs: Vec::new(),
            soft_netdev: None,
        }
    }

    #[test]
    fn a_6_8_kernel_is_polled_with_its_cm_table() {
        let caps = KernelCaps::decide(&CapsProbe {
            release: Some("6.8.0-49-generic".into()),
            monitor_mode: Some(Ok(false)),
            subscribe: None,
            cm_id_dump: Some(Ok(())),
            drivers: vec!["irdma".into(), "rxe".into(), "irdma".into()],
        });
        assert!(matches!(caps.device_events, DeviceEvents::Polled(ref w) if w.contains("6.12")));
        assert_eq!(caps.cm_id_table, CmIdTable::Available);
        assert_eq!(caps.drivers, ["irdma", "rxe"]);
        assert_eq!(
            caps.summary(),
            "kernel 6.8.0-49-generic: device events polled (the kernel sends no RDMA netlink \
             device events (they came with 6.12)), CM id table available, drivers irdma, rxe"
        );
    }

    #[test]
    fn a_6_12_kernel_is_subscribed_unless_the_socket_fails() {
        let mut probe = CapsProbe {
            monitor_mode: Some(Ok(true)),
            ..CapsProbe::default()
        };
        assert_eq!(
            KernelCaps::decide(&probe).device_events,
            DeviceEvents::Subscribed
        );
        probe.subscribe = Some(Err("EPERM".into()));
        let caps = KernelCaps::decide(&probe);
        assert!(matches!(caps.device_events, DeviceEvents::Polled(ref w) if w.contains("EPERM")));
        assert_eq!(caps.cm_id_table, CmIdTable::Unknown);
        assert!(
            caps.summary().contains("no RDMA driver found"),
            "{}",
            caps.summary()
        );
    }

    #[test]
    fn a_failed_query_or_cm_dump_says_why() {
        let caps = KernelCaps::decide(&CapsProbe {
            monitor_mode: Some(Err("EOPNOTSUPP".into())),
            cm_id_dump: Some(Err("EOPNOTSUPP".into())),
            ..CapsProbe::default()
        });
        assert_eq!(
            caps.device_events,
            DeviceEvents::Polled("SYS_GET failed: EOPNOTSUPP".into())
        );
        assert!(caps
            .summary()
            .contains("CM id table unavailable (EOPNOTSUPP"));
        let none = KernelCaps::decide(&CapsProbe::default());
        assert_eq!(none.device_events, DeviceEvents::Unknown);
        assert!(none
            .summary()
            .starts_with("kernel unknown: device events unknown"));
    }

    #[test]
    fn driver_folder_prefers_the_auxiliary_folder_then_the_scan_then_soft_type_then_parent() {
        let mut aux = facts("rocep2s0f0");
        aux.aux = Some(AuxFacts {
            name: "ice.roce.0".into(),
            driver_dir: Some("irdma.gen_2".into()),
            module: Some("irdma".into()),
        });
        assert_eq!(
            driver_folder(Some(&aux), Some("ice")).as_deref(),
            Some("irdma.gen_2")
        );
        let mut rxe = facts("rxe0");
        rxe.soft_netdev = Some("veth0".into());
        assert_eq!(driver_folder(Some(&rxe), None).as_deref(), Some("rxe"));
        let mut pci = facts("mlx4_0");
        pci.parent = Some(ParentFacts {
            bus: "pci".into(),
            name: "0000:03:00.0".into(),
            driver: Some("mlx4_core".into()),
        });
        assert_eq!(
            driver_folder(Some(&pci), None).as_deref(),
            Some("mlx4_core")
        );
        // The scan's auxiliary driver beats the PCI function's own driver.
        assert_eq!(
            driver_folder(Some(&pci), Some("irdma")).as_deref(),
            Some("irdma")
        );
        assert_eq!(driver_folder(Some(&facts("unknown0")), None), None);
        assert_eq!(driver_folder(None, None), None);
    }
}
