//! The daemon's injected dependencies: the clock, the kernel log and the RDMA topology
//! source. Production wiring picks the real ones ([`BootClock`], [`KmsgLog`],
//! [`HostTopology`]); tests pass their own.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Notify;

use crate::core::nldev::CmIdEntry;
use crate::core::recovery::{from_topology_event, Observation};
use crate::core::session_map::RdmaPortNetdev;
use crate::core::time::Instant;
use crate::io::kmsg::{FdSource, KmsgError, KmsgEvent, KmsgReader};
use crate::io::netlink::{
    precise_timer, AsyncFdTransport, AsyncTransport, NetlinkError, NldevWatcher, StepEnd, Timer,
};

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
    /// Registers the log's descriptor with the current runtime (the reader's own thread,
    /// src/daemon/read_ahead.rs), so its readiness does not depend on the runtime it was
    /// opened in. Logs without a descriptor need nothing.
    fn rebind(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
    fn rebind(&mut self) -> std::io::Result<()> {
        self.0.rebind()
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

/// A flag one side raises and the other waits on without polling (the loop's "refresh the
/// topology now" and "stop"): an atomic bit plus a wakeup, so a raise is never lost and a
/// waiter costs nothing until it happens.
#[derive(Debug, Default)]
pub struct Signal {
    raised: AtomicBool,
    notify: Notify,
}

impl Signal {
    /// Raises the flag and wakes every waiter.
    pub fn raise(&self) {
        self.raised.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether the flag is up.
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    /// Lowers the flag; whether it was up.
    pub fn take(&self) -> bool {
        self.raised.swap(false, Ordering::SeqCst)
    }

    /// Completes once the flag is up (at once if it already is).
    pub async fn raised(&self) {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the check, so a raise between the check and the await wakes us.
            notified.as_mut().enable();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }
}

/// The scheduler slice the loop thread asks for: about what one wakeup of the loop costs
/// (a record is read, classified, logged and fed to the engine in tens of microseconds).
pub const LOOP_SLICE: Duration = Duration::from_micros(500);

/// Asks the kernel for a short scheduler slice on the calling thread (`sched_setattr`,
/// SCHED_OTHER with `sched_runtime` = `slice`, the nice value unchanged). On EEVDF kernels
/// (6.12 and later) a task's virtual deadline is its slice ahead, and a woken task with an
/// earlier deadline preempts the running one: with a short slice the loop runs as soon as
/// the kernel log wakes it instead of waiting for a CPU hog's slice to end, while its share
/// of the CPU (its weight) stays what it was. Older kernels ignore the field. Not a
/// real-time policy and no privilege needed.
pub fn request_short_slice(slice: Duration) -> std::io::Result<()> {
    /// `struct sched_attr`, SCHED_ATTR_SIZE_VER1 (include/uapi/linux/sched/types.h).
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        sched_policy: u32,
        sched_flags: u64,
        sched_nice: i32,
        sched_priority: u32,
        sched_runtime: u64,
        sched_deadline: u64,
        sched_period: u64,
        sched_util_min: u32,
        sched_util_max: u32,
    }
    // SAFETY: getpriority takes no pointers; -1 is also a valid nice value, so errno is
    // cleared first and checked after.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, 0);
        if *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        n
    };
    let attr = SchedAttr {
        size: u32::try_from(std::mem::size_of::<SchedAttr>()).unwrap_or(56),
        sched_policy: u32::try_from(libc::SCHED_OTHER).unwrap_or(0),
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX),
        sched_deadline: 0,
        sched_period: 0,
        sched_util_min: 0,
        sched_util_max: 0,
    };
    // SAFETY: pid 0 is the calling thread; `attr` is a valid sched_attr of the size it
    // declares, read by the kernel during the call only.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A periodic tick for the loop (the `poll.iscsi` session poll) on its own task and one
/// [`Timer`] ([`precise_timer`]: a timerfd). tokio's `interval` is a timer-wheel entry, and
/// the wheel wakes the thread at each level it cascades a far deadline through (three
/// wakeups for one 10 s tick); the timerfd wakes it once. The timer is armed once per
/// period on the ticker's task, not re-armed at every turn of the loop's `select!`.
///
/// Like `tokio::time::interval` with `MissedTickBehavior::Delay`: the first tick is at once,
/// each next one a period after the previous one was taken; a tick the loop has not taken
/// yet is not doubled.
#[derive(Debug)]
pub struct Ticker {
    rx: tokio::sync::mpsc::Receiver<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Ticker {
    /// Starts ticking every `period` (call inside the runtime).
    pub fn start(period: Duration) -> Ticker {
        Ticker::with_timer(period, precise_timer())
    }

    /// [`Ticker::start`] waiting with `timer` (tests: the runtime's, for a paused clock).
    pub fn with_timer(period: Duration, mut timer: Box<dyn Timer>) -> Ticker {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let task = tokio::spawn(async move {
            loop {
                if tx.send(()).await.is_err() {
                    return;
                }
                // The next period starts when the loop has taken this tick (Delay: never a
                // burst after a busy spell).
                match tx.reserve().await {
                    Ok(permit) => drop(permit),
                    Err(_) => return,
                }
                timer.sleep(period).await;
            }
        });
        Ticker { rx, task }
    }

    /// Completes at the next tick. Cancel-safe (a tick not taken stays for the next call).
    pub async fn tick(&mut self) {
        if self.rx.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches RDMA devices and ports as a task on the loop's runtime, reports through `tx`
/// until `stop` is raised or the loop is gone.
pub trait TopologySource: Send {
    /// Starts watching (called inside the runtime). `refresh` asks for an immediate re-read
    /// (the engine's `RefreshTopology`).
    fn start(
        self: Box<Self>,
        tx: UnboundedSender<TopologyReport>,
        refresh: Arc<Signal>,
        stop: Arc<Signal>,
    );

    /// Report each dump or scan to `metrics` (called before [`TopologySource::start`]).
    /// Sources without a model of their own ignore it.
    fn observe(&mut self, _metrics: crate::metrics::Metrics) {}
}

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
                let watched = watch_netlink_observed(
                    &mut w,
                    &now,
                    &sysfs_root,
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
    metrics.source_up(crate::metrics::Source::Netlink, true);
    let mut first = true;
    let mut sent_cm_ids: Vec<CmIdEntry> = Vec::new();
    let mut recipes = super::recipes::Recipes::new(sysfs_root);
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
        // A new connection changes the CM id table alone (no topology event).
        let cm_changed = w.cm_ids() != sent_cm_ids.as_slice();
        if end == StepEnd::Woken || (events.is_empty() && !first && !forced && !cm_changed) {
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
        let ports = sysfs_ports(&w.take_scan().unwrap_or_else(|| scan(sysfs_root)));
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

    #[tokio::test(start_paused = true)]
    async fn the_ticker_ticks_at_once_then_every_period_after_the_tick_was_taken() {
        use crate::io::netlink::RuntimeTimer;
        let start = tokio::time::Instant::now();
        let mut t = Ticker::with_timer(Duration::from_secs(10), Box::new(RuntimeTimer));
        let at = |i: tokio::time::Instant| (i - start).as_millis();
        t.tick().await;
        assert_eq!(at(tokio::time::Instant::now()), 0);
        t.tick().await;
        assert_eq!(at(tokio::time::Instant::now()), 10_000);
        // Taken 25 s late: one tick waiting (not two), the next 10 s after it was taken.
        tokio::time::sleep(Duration::from_secs(25)).await;
        t.tick().await;
        assert_eq!(at(tokio::time::Instant::now()), 35_000);
        t.tick().await;
        assert_eq!(at(tokio::time::Instant::now()), 45_000);
    }

    #[test]
    fn boot_clock_moves_forward() {
        let a = BootClock.now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(BootClock.now() > a);
    }
}
