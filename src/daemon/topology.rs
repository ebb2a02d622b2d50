//! The real RDMA topology source ([`HostTopology`]): RDMA netlink when the kernel has it,
//! sysfs for the port netdevs and, without netlink, for devices appearing and disappearing;
//! each dump or scan reported to the loop as a [`TopologyReport`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use crate::core::consumers::PortConsumers;
use crate::core::nldev::CmIdEntry;
use crate::core::recovery::{from_topology_event, Observation};
use crate::core::session_map::RdmaPortNetdev;
use crate::daemon::sources::{BootClock, Clock, Signal, TopologyReport, TopologySource};
use crate::io::netlink::{
    precise_timer, AsyncFdTransport, AsyncTransport, NetlinkError, NldevWatcher, StepEnd, Timer,
};

/// The watcher over the real sockets (or, in a harness, over a fake kernel's).
pub type Watcher = NldevWatcher<AsyncFdTransport, AsyncFdTransport>;

/// Opens a [`Watcher`] given `poll.netlink`, the sysfs root and now; runs inside the runtime.
pub type WatcherOpener = Box<
    dyn FnOnce(Duration, PathBuf, crate::core::time::Instant) -> Result<Watcher, NetlinkError>
        + Send,
>;

/// Where RDMA netlink comes from.
pub enum NetlinkAccess {
    /// The kernel's NETLINK_RDMA sockets.
    Kernel,
    /// None: sysfs only.
    Off,
    /// Sockets the caller provides (a harness with a fake kernel).
    Injected(WatcherOpener),
}

impl std::fmt::Debug for NetlinkAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NetlinkAccess::Kernel => "Kernel",
            NetlinkAccess::Off => "Off",
            NetlinkAccess::Injected(_) => "Injected",
        })
    }
}

/// The real source: RDMA netlink ([`crate::io::netlink::NldevWatcher`]) when the kernel has
/// it, plus sysfs (port netdevs; devices appearing and disappearing when netlink is missing).
///
/// One task, no thread: it waits on the netlink sockets and on one timer (the next dump, or
/// the next sysfs scan without netlink), so an idle host costs one wakeup per `poll.netlink`.
#[derive(Debug)]
pub struct HostTopology {
    /// `paths.sysfs-root`.
    pub sysfs_root: PathBuf,
    /// `poll.netlink`.
    pub interval: Duration,
    /// Where RDMA netlink comes from.
    pub netlink: NetlinkAccess,
    /// Told of each dump and scan ([`TopologySource::observe`]).
    pub metrics: crate::metrics::Metrics,
    /// `/proc/self/mountinfo` under `paths.proc-root`, read with each netlink report for
    /// the NFS over RDMA mounts (`None`: not read).
    pub mountinfo: Option<PathBuf>,
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

fn scan(root: &Path) -> crate::io::sysfs::SysfsScan {
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
        refresh: Arc<Signal>,
        stop: Arc<Signal>,
    ) {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(self.watch(tx, refresh, stop, precise_timer));
            }
            Err(e) => tracing::error!("cannot start the RDMA topology source: {e}"),
        }
    }

    fn observe(&mut self, metrics: crate::metrics::Metrics) {
        self.metrics = metrics;
    }
}

impl HostTopology {
    /// The source's task: netlink if it can be had, else (or once it is gone) sysfs, each
    /// waiting with a timer from `timers` ([`precise_timer`] in production, the runtime's in
    /// paused-clock tests).
    pub async fn watch(
        self,
        tx: UnboundedSender<TopologyReport>,
        refresh: Arc<Signal>,
        stop: Arc<Signal>,
        timers: fn() -> Box<dyn Timer>,
    ) {
        let HostTopology {
            sysfs_root,
            interval,
            netlink,
            metrics,
            mountinfo,
        } = self;
        let clock = BootClock;
        let now = move || clock.now();
        let opened = match netlink {
            NetlinkAccess::Kernel => Some(NldevWatcher::open(interval, sysfs_root.clone(), now())),
            NetlinkAccess::Injected(open) => Some(open(interval, sysfs_root.clone(), now())),
            NetlinkAccess::Off => None,
        };
        match opened {
            Some(Ok(w)) => {
                let mut w = w
                    .with_timer(timers())
                    .with_quiet_dumps(crate::core::topology::Poller::QUIET_FACTOR);
                let watched = watch_netlink_reading(
                    &mut w,
                    &now,
                    (&sysfs_root, mountinfo.as_deref()),
                    &tx,
                    &refresh,
                    &stop,
                    &metrics,
                )
                .await;
                match watched {
                    Ok(()) => return,
                    Err(e) => {
                        let _ = tx.send(TopologyReport::NetlinkUnavailable(e.to_string()));
                    }
                }
            }
            Some(Err(e)) => {
                let _ = tx.send(TopologyReport::NetlinkUnavailable(e.to_string()));
            }
            None => {}
        }
        metrics.source_up(crate::metrics::Source::Netlink, false);
        watch_sysfs_observed(
            &sysfs_root,
            interval,
            timers().as_mut(),
            &tx,
            &refresh,
            &stop,
            &metrics,
        )
        .await;
    }
}

/// Completes when the loop wants the source to stop or is gone.
fn finished(tx: &UnboundedSender<TopologyReport>, stop: &Signal) -> bool {
    stop.is_raised() || tx.is_closed()
}

/// Follows RDMA netlink through `w` and reports to the loop: after the first dump, after a
/// forced refresh, and whenever the topology changed. Returns `Ok` when stopped (or the loop
/// is gone), the error when RDMA netlink itself is (then the caller falls back to sysfs).
pub async fn watch_netlink<T: AsyncTransport, M: AsyncTransport>(
    w: &mut NldevWatcher<T, M>,
    clock: &impl Fn() -> crate::core::time::Instant,
    sysfs_root: &Path,
    tx: &UnboundedSender<TopologyReport>,
    refresh: &Signal,
    stop: &Signal,
) -> Result<(), NetlinkError> {
    let off = crate::metrics::Metrics::disabled();
    watch_netlink_observed(w, clock, sysfs_root, tx, refresh, stop, &off).await
}

/// [`watch_netlink`], telling `metrics` of every dump (its result, the model after it, the
/// client's counters) and of every change between dumps. The loop hears only of changes;
/// the metrics hear of every dump, so QP counts and the last-poll time stay current on an
/// idle host without waking the loop.
pub async fn watch_netlink_observed<T: AsyncTransport, M: AsyncTransport>(
    w: &mut NldevWatcher<T, M>,
    clock: &impl Fn() -> crate::core::time::Instant,
    sysfs_root: &Path,
    tx: &UnboundedSender<TopologyReport>,
    refresh: &Signal,
    stop: &Signal,
    metrics: &crate::metrics::Metrics,
) -> Result<(), NetlinkError> {
    watch_netlink_reading(w, clock, (sysfs_root, None), tx, refresh, stop, metrics).await
}

/// [`watch_netlink_observed`], also reading the NFS over RDMA mounts from `roots.1` (a
/// mountinfo file) with each report, placed by rpcrdma's CM ids, sent when they change.
pub async fn watch_netlink_reading<T: AsyncTransport, M: AsyncTransport>(
    w: &mut NldevWatcher<T, M>,
    clock: &impl Fn() -> crate::core::time::Instant,
    roots: (&Path, Option<&Path>),
    tx: &UnboundedSender<TopologyReport>,
    refresh: &Signal,
    stop: &Signal,
    metrics: &crate::metrics::Metrics,
) -> Result<(), NetlinkError> {
    let (sysfs_root, mountinfo) = roots;
    metrics.source_up(crate::metrics::Source::Netlink, true);
    let mut first = true;
    let mut sent_cm_ids: Vec<CmIdEntry> = Vec::new();
    let mut sent_consumers: Option<Vec<PortConsumers>> = None;
    let mut sent_nvme: Vec<crate::core::nvme_fabrics::NvmeRdmaController> = Vec::new();
    let mut sent_nfs: Vec<crate::core::nfs_rdma::NfsRdmaMount> = Vec::new();
    let mut nfs_skips_said = false;
    let mut recipes = super::recipes::Recipes::new(sysfs_root);
    let mut stack = super::driver_stack::StackWatch::new(sysfs_root);
    loop {
        if finished(tx, stop) {
            return Ok(());
        }
        let forced = refresh.take();
        if forced {
            w.request_dump(clock());
        }
        let wake = async {
            tokio::select! {
                () = refresh.raised() => {}
                () = stop.raised() => {}
                () = tx.closed() => {}
            }
        };
        let (events, end) = w.step(clock, wake).await?;
        match end {
            StepEnd::Dumped => {
                metrics.netlink_dump(w.last_error(), w.topology(), w.client().stats())
            }
            StepEnd::Monitor if !events.is_empty() => metrics.topology_changed(w.topology()),
            StepEnd::Monitor | StepEnd::Woken => {}
        }
        // A new connection changes the CM id table alone (no topology event), a consumer's
        // QP going to ERR the QP table alone.
        let cm_changed = w.cm_ids() != sent_cm_ids.as_slice();
        let consumers = consumers_of(w);
        let consumers_changed = sent_consumers.as_ref() != Some(&consumers);
        // The NVMe over RDMA controllers (a few sysfs files each), placed by nvme_rdma's CM
        // ids; what a re-creation remembers to reconnect.
        let (mut nvme, skipped) = crate::io::sysfs::nvme::rdma_controllers(sysfs_root);
        for s in &skipped {
            tracing::debug!(skipped = %s, "NVMe controller not read");
        }
        crate::core::nvme_fabrics::place_controllers(&mut nvme, w.cm_ids(), &sent_nvme);
        let nvme_changed = nvme != sent_nvme;
        // The NFS over RDMA mounts (mountinfo), placed by rpcrdma's CM ids; what a
        // re-creation remembers to check. Read only once rpcrdma has a row (nothing can be
        // placed before) or mounts were sent: a host without NFS over RDMA (a container
        // host's thousands of mounts) pays nothing for it.
        let rpcrdma_seen = w
            .cm_ids()
            .iter()
            .any(|c| c.kern_name.as_deref() == Some("rpcrdma"));
        let (mut nfs, skipped) = mountinfo
            .filter(|_| rpcrdma_seen || !sent_nfs.is_empty())
            .map(crate::io::mountinfo::nfs_rdma_mounts)
            .unwrap_or_default();
        if !skipped.is_empty() && !nfs_skips_said {
            // Said once: the same lines would be skipped with every report.
            nfs_skips_said = true;
            for s in &skipped {
                tracing::warn!(skipped = %s, "mountinfo line not read");
            }
        }
        crate::core::nfs_rdma::place_mounts(&mut nfs, w.cm_ids(), &sent_nfs);
        let nfs_changed = nfs != sent_nfs;
        if end == StepEnd::Woken
            || (events.is_empty()
                && !first
                && !forced
                && !cm_changed
                && !consumers_changed
                && !nvme_changed
                && !nfs_changed)
        {
            continue;
        }
        first = false;
        if cm_changed {
            sent_cm_ids = w.cm_ids().to_vec();
        }
        let mut observations: Vec<Observation> = events
            .iter()
            .flat_map(|e| from_topology_event(e, w.topology()))
            .collect();
        // After the topology's own facts, so a re-created device's recipe follows its
        // appearance.
        observations.extend(recipes.changed(super::recipes::netlink_devices(w.topology())));
        if consumers_changed {
            observations.push(Observation::Consumers {
                ports: consumers.clone(),
            });
            sent_consumers = Some(consumers);
        }
        if nvme_changed {
            observations.push(Observation::NvmeControllers {
                controllers: nvme.clone(),
            });
            sent_nvme = nvme;
        }
        if nfs_changed {
            observations.push(Observation::NfsMounts {
                mounts: nfs.clone(),
            });
            sent_nfs = nfs;
        }
        let s = w.take_scan().unwrap_or_else(|| scan(sysfs_root));
        observations.extend(stack.changed(&s));
        let ports = sysfs_ports(&s);
        if tx
            .send(TopologyReport::Update {
                observations,
                ports,
                cm_ids: sent_cm_ids.clone(),
            })
            .is_err()
        {
            return Ok(());
        }
    }
}

/// The consumers per port of the watcher's CM id and QP tables (process names are the
/// loop's to fill in).
fn consumers_of<T: AsyncTransport, M: AsyncTransport>(
    w: &NldevWatcher<T, M>,
) -> Vec<PortConsumers> {
    crate::core::consumers::of_topology(w.topology(), w.cm_ids())
}

/// Sysfs alone: devices appearing and disappearing, port netdevs, scanned every `interval`
/// and at once on `refresh`. No QP states (sysfs has no QP table): stuck ports are then known
/// from the kernel log only.
pub async fn watch_sysfs(
    sysfs_root: &Path,
    interval: Duration,
    timer: &mut dyn Timer,
    tx: &UnboundedSender<TopologyReport>,
    refresh: &Signal,
    stop: &Signal,
) {
    let off = crate::metrics::Metrics::disabled();
    watch_sysfs_observed(sysfs_root, interval, timer, tx, refresh, stop, &off).await;
}

/// [`watch_sysfs`], counting each scan in `metrics`.
pub async fn watch_sysfs_observed(
    sysfs_root: &Path,
    interval: Duration,
    timer: &mut dyn Timer,
    tx: &UnboundedSender<TopologyReport>,
    refresh: &Signal,
    stop: &Signal,
    metrics: &crate::metrics::Metrics,
) {
    let mut view = SysfsView::new();
    let mut first = true;
    let mut recipes = super::recipes::Recipes::new(sysfs_root);
    let mut stack = super::driver_stack::StackWatch::new(sysfs_root);
    loop {
        if finished(tx, stop) {
            return;
        }
        let forced = refresh.take();
        let s = scan(sysfs_root);
        metrics.sysfs_scan();
        let new = sysfs_view(&s);
        let mut observations = sysfs_diff(&view, &new);
        observations
            .extend(recipes.changed(s.devices.iter().map(|d| (d.name.as_str(), Vec::new()))));
        observations.extend(stack.changed(&s));
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
        tokio::select! {
            () = timer.sleep(interval) => {}
            () = refresh.raised() => {}
            () = stop.raised() => return,
            () = tx.closed() => return,
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
}
