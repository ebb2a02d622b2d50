//! The daemon's injected dependencies: the clock, the kernel log and the RDMA topology
//! source's trait, with the loop's timing helpers (signal, ticker, scheduler slice).
//! Production wiring picks the real ones ([`BootClock`], [`KmsgLog`],
//! [`crate::daemon::topology::HostTopology`]); tests pass their own.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Notify;

use crate::core::nldev::CmIdEntry;
use crate::core::recovery::Observation;
use crate::core::session_map::RdmaPortNetdev;
use crate::core::time::Instant;
use crate::io::kmsg::{FdSource, KmsgError, KmsgEvent, KmsgReader};
use crate::io::netlink::{precise_timer, Timer};

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
    /// multipathd's paths, read when they changed (`Ok(None)`: multipathd is not
    /// installed; `Err`: it did not answer, in words).
    Multipath(Result<Option<Vec<crate::core::multipath::MultipathPath>>, String>),
}

/// Reads multipathd's paths every `every` on a thread of its own (each read is a bounded
/// process run, never on the loop) and reports them to the loop when they or the error
/// change, until `stop` is raised or the loop is gone.
pub fn spawn_multipath_reader(
    restore: Arc<dyn crate::io::multipathd::MultipathRestore>,
    tx: UnboundedSender<TopologyReport>,
    stop: Arc<Signal>,
    every: Duration,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("iser-guard-mpath".into())
        .spawn(move || {
            let mut sent: Option<Result<Option<Vec<_>>, String>> = None;
            let slice = Duration::from_millis(100);
            while !stop.is_raised() {
                let now = restore.read().map_err(|e| e.to_string());
                if sent.as_ref() != Some(&now) {
                    if tx.send(TopologyReport::Multipath(now.clone())).is_err() {
                        return;
                    }
                    sent = Some(now);
                }
                let mut waited = Duration::ZERO;
                while waited < every && !stop.is_raised() {
                    std::thread::sleep(slice);
                    waited += slice;
                }
            }
        })
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

#[cfg(test)]
mod tests {
    use super::*;

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
