//! The daemon's injected dependencies: the clock, the kernel log and the RDMA topology
//! source. Production wiring picks the real ones ([`BootClock`], [`KmsgLog`],
//! [`HostTopology`]); tests pass their own.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use crate::core::nldev::CmIdEntry;
use crate::core::recovery::{from_topology_event, Observation};
use crate::core::session_map::RdmaPortNetdev;
use crate::core::time::Instant;
use crate::io::kmsg::{FdSource, KmsgError, KmsgEvent, KmsgReader};

/// The engine's time source.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Instant;
}

/// Milliseconds of CLOCK_BOOTTIME: monotonic, counts suspend, and shared by every process of
/// one boot, so instants journaled by a previous run of the daemon stay meaningful.
#[derive(Debug, Clone, Copy, Default)]
pub struct BootClock;

impl Clock for BootClock {
    fn now(&self) -> Instant {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec to the valid pointer we pass.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        if rc != 0 {
            return Instant::ZERO;
        }
        let ms = u64::try_from(ts.tv_sec)
            .unwrap_or(0)
            .saturating_mul(1000)
            .saturating_add(u64::try_from(ts.tv_nsec / 1_000_000).unwrap_or(0));
        Instant(ms)
    }
}

/// A boxed future, for object-safe async methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The kernel log: records one at a time, cancellation-safe.
pub trait KernelLog: Send {
    /// The next record or loss report.
    fn next(&mut self) -> BoxFuture<'_, Result<KmsgEvent, KmsgError>>;
    /// Saves the read position (bounded wait) at shutdown.
    fn save_cursor(&mut self, timeout: Duration);
}

/// The real /dev/kmsg reader ([`crate::io::kmsg`]).
pub struct KmsgLog(pub KmsgReader<FdSource>);

impl KernelLog for KmsgLog {
    fn next(&mut self) -> BoxFuture<'_, Result<KmsgEvent, KmsgError>> {
        Box::pin(self.0.next())
    }
    fn save_cursor(&mut self, timeout: Duration) {
        if let Err(e) = self.0.save_cursor(timeout) {
            tracing::warn!("cannot save the kernel-log cursor at shutdown: {e}");
        }
    }
}

/// What a topology source reports to the loop.
#[derive(Debug, Clone)]
pub enum TopologyReport {
    /// Facts for the engine and the current port → netdev map (for session placement).
    Update {
        /// Observations (trusted).
        observations: Vec<Observation>,
        /// Every RDMA port with its netdev.
        ports: Vec<RdmaPortNetdev>,
        /// Every RDMA CM id (RES_CM_ID_GET, for session placement); empty without netlink.
        cm_ids: Vec<CmIdEntry>,
    },
    /// RDMA netlink is not available: the source continues on sysfs alone.
    NetlinkUnavailable(String),
}

/// Watches RDMA devices and ports; runs on its own thread, reports through `tx` until `stop`.
pub trait TopologySource: Send {
    /// Starts watching. `refresh` asks for an immediate re-read (the engine's
    /// `RefreshTopology`).
    fn start(
        self: Box<Self>,
        tx: UnboundedSender<TopologyReport>,
        refresh: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
    );
}

/// The real source: RDMA netlink ([`crate::io::netlink::NldevWatcher`]) when the kernel has
/// it, plus sysfs (port netdevs; devices appearing and disappearing when netlink is missing).
#[derive(Debug, Clone)]
pub struct HostTopology {
    /// `paths.sysfs-root`.
    pub sysfs_root: PathBuf,
    /// `poll.netlink`.
    pub interval: Duration,
    /// Try RDMA netlink at all (false: sysfs only).
    pub use_netlink: bool,
}

/// The port → netdev map from a sysfs scan.
pub fn sysfs_ports(scan: &crate::io::sysfs::SysfsScan) -> Vec<RdmaPortNetdev> {
    let mut out = Vec::new();
    for d in &scan.devices {
        for p in &d.ports {
            for n in &p.netdevs {
                out.push(RdmaPortNetdev {
                    device: d.name.clone(),
                    port: p.n,
                    netdev: n.clone(),
                });
            }
        }
    }
    out
}

/// Devices as sysfs shows them, for the netlink-less diff: name → (parent, driver, ports).
type SysfsView = BTreeMap<String, (Option<String>, Option<String>, u32)>;

fn sysfs_view(scan: &crate::io::sysfs::SysfsScan) -> SysfsView {
    scan.devices
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                (
                    d.parent.pci_bdf().map(str::to_string),
                    d.parent.rdma_driver().map(str::to_string),
                    u32::try_from(d.ports.len()).unwrap_or(u32::MAX),
                ),
            )
        })
        .collect()
}

/// Devices that appeared or vanished between two sysfs views (pure).
pub fn sysfs_diff(old: &SysfsView, new: &SysfsView) -> Vec<Observation> {
    let mut out = Vec::new();
    for name in old.keys().filter(|n| !new.contains_key(*n)) {
        out.push(Observation::DeviceGone {
            device: name.clone(),
        });
    }
    for (name, (parent, driver, ports)) in new.iter().filter(|(n, _)| !old.contains_key(*n)) {
        out.push(Observation::DeviceAppeared {
            device: name.clone(),
            parent: parent.clone(),
            driver: driver.clone(),
            ports: *ports,
        });
    }
    out
}

fn scan(root: &std::path::Path) -> crate::io::sysfs::SysfsScan {
    match crate::io::sysfs::scan(root) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot scan RDMA devices in sysfs: {e}");
            crate::io::sysfs::SysfsScan::default()
        }
    }
}

impl TopologySource for HostTopology {
    fn start(
        self: Box<Self>,
        tx: UnboundedSender<TopologyReport>,
        refresh: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
    ) {
        let spawned = std::thread::Builder::new()
            .name("iser-guard-topology".into())
            .spawn(move || self.run(&tx, &refresh, &stop));
        if let Err(e) = spawned {
            tracing::error!("cannot start the RDMA topology thread: {e}");
        }
    }
}

impl HostTopology {
    fn run(&self, tx: &UnboundedSender<TopologyReport>, refresh: &AtomicBool, stop: &AtomicBool) {
        let clock = BootClock;
        let now = || clock.now();
        if self.use_netlink {
            match crate::io::netlink::NldevWatcher::open(
                self.interval,
                self.sysfs_root.clone(),
                now(),
            ) {
                Ok(mut w) => {
                    let mut first = true;
                    let mut sent_cm_ids: Vec<CmIdEntry> = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let forced = refresh.swap(false, Ordering::Relaxed);
                        if forced {
                            w.request_dump(now());
                        }
                        match w.step(&now, Duration::from_millis(250)) {
                            Ok(events) => {
                                // A new connection changes the CM id table alone.
                                if events.is_empty()
                                    && !first
                                    && !forced
                                    && w.cm_ids() == sent_cm_ids.as_slice()
                                {
                                    continue;
                                }
                                sent_cm_ids = w.cm_ids().to_vec();
                                first = false;
                                let observations = events
                                    .iter()
                                    .flat_map(|e| from_topology_event(e, w.topology()))
                                    .collect();
                                let ports = sysfs_ports(&scan(&self.sysfs_root));
                                if tx
                                    .send(TopologyReport::Update {
                                        observations,
                                        ports,
                                        cm_ids: sent_cm_ids.clone(),
                                    })
                                    .is_err()
                                {
                                    return;
                                }
                            }
                            Err(e) => {
                                let _ = tx.send(TopologyReport::NetlinkUnavailable(e.to_string()));
                                break;
                            }
                        }
                    }
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(TopologyReport::NetlinkUnavailable(e.to_string()));
                }
            }
        }
        self.run_sysfs(tx, refresh, stop);
    }

    /// Sysfs alone: devices appearing and disappearing, port netdevs. No QP states (sysfs has
    /// no QP table): stuck ports are then known from the kernel log only.
    fn run_sysfs(
        &self,
        tx: &UnboundedSender<TopologyReport>,
        refresh: &AtomicBool,
        stop: &AtomicBool,
    ) {
        let mut view = SysfsView::new();
        let mut first = true;
        let tick = Duration::from_millis(100);
        let mut since = Duration::ZERO;
        while !stop.load(Ordering::Relaxed) {
            let forced = refresh.swap(false, Ordering::Relaxed);
            if first || forced || since >= self.interval {
                since = Duration::ZERO;
                let s = scan(&self.sysfs_root);
                let new = sysfs_view(&s);
                let observations = sysfs_diff(&view, &new);
                if first || forced || !observations.is_empty() {
                    let ports = sysfs_ports(&s);
                    if tx
                        .send(TopologyReport::Update {
                            observations,
                            ports,
                            cm_ids: Vec::new(),
                        })
                        .is_err()
                    {
                        return;
                    }
                }
                view = new;
                first = false;
            }
            std::thread::sleep(tick);
            since += tick;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_diff_reports_gone_then_appeared() {
        let mut a = SysfsView::new();
        a.insert("rocep2s0f0".into(), (Some("0000:02:00.0".into()), None, 1));
        let b = SysfsView::new();
        assert_eq!(
            sysfs_diff(&a, &b),
            vec![Observation::DeviceGone {
                device: "rocep2s0f0".into()
            }]
        );
        assert!(matches!(
            sysfs_diff(&b, &a).as_slice(),
            [Observation::DeviceAppeared { device, ports: 1, .. }] if device == "rocep2s0f0"
        ));
        assert!(sysfs_diff(&a, &a).is_empty());
    }

    #[test]
    fn boot_clock_moves_forward() {
        let a = BootClock.now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(BootClock.now() > a);
    }
}
