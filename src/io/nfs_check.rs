//! Checking NFS over RDMA mounts after a device re-creation: a `stat` of each remembered
//! mount point that makes the client ask the server (`statx` with `AT_STATX_FORCE_SYNC`:
//! NFS revalidates the attributes with a GETATTR instead of answering from its cache), so
//! xprtrdma has to connect again over the new device for it to return.
//!
//! A stat of a hard NFS mount whose server does not answer waits in D state for as long as
//! it takes, and no signal ends it. So each stat runs on a thread of its own that the
//! checker never joins: the checker waits for its answer until the window's end and then
//! abandons it (counted, [`StatNfsCheck::abandoned`]), and the mount point stays marked
//! pending until that stat returns, so a later check never starts a second one behind it.
//! Within the window a failed stat (a soft mount's EIO or ETIMEDOUT while the transport
//! reconnects) is tried again every [`RETRY`].
//!
//! [`NfsCheck`] is the small trait the executor calls; tests and the simulated host pass a
//! double or a [`StatNfsCheck`] over a stat double.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as WallInstant};

use crate::core::nfs_rdma::{NfsCheckReport, NfsCheckResult, NfsRdmaMount};

/// The pause before a failed stat is tried again.
pub const RETRY: Duration = Duration::from_secs(1);

/// How often a mount with a stat still pending from an earlier check is looked at again.
const PENDING_POLL: Duration = Duration::from_millis(200);

/// Checks remembered mounts.
pub trait NfsCheck: Send + Sync {
    /// One report per mount, in order; returns within about `window` whatever the mounts do.
    fn check(&self, mounts: &[NfsRdmaMount], window: Duration) -> Vec<NfsCheckReport>;
}

/// One stat of a path: `Ok` when it returned, the OS error otherwise. May block forever.
pub type StatFn = Arc<dyn Fn(&Path) -> std::io::Result<()> + Send + Sync>;

/// `statx(AT_FDCWD, path, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS)`: the attributes from the
/// server, not the client's cache.
pub fn statx_force_sync(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed statx is a valid buffer for the kernel to fill.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path that outlives the call; `buf` is writable.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_STATX_FORCE_SYNC,
            libc::STATX_BASIC_STATS,
            &mut buf,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The real checker (over [`statx_force_sync`]), or one over a stat double.
pub struct StatNfsCheck {
    stat: StatFn,
    retry: Duration,
    /// Mount points with a stat still running (across checks).
    pending: Arc<Mutex<BTreeSet<PathBuf>>>,
    abandoned: Arc<AtomicU64>,
}

impl Default for StatNfsCheck {
    fn default() -> Self {
        StatNfsCheck::new(Arc::new(statx_force_sync), RETRY)
    }
}

impl std::fmt::Debug for StatNfsCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatNfsCheck")
            .field("pending", &self.pending_now())
            .field("abandoned", &self.abandoned())
            .finish_non_exhaustive()
    }
}

impl StatNfsCheck {
    /// A checker doing `stat`, trying a failed one again after `retry`.
    pub fn new(stat: StatFn, retry: Duration) -> Self {
        StatNfsCheck {
            stat,
            retry,
            pending: Arc::default(),
            abandoned: Arc::default(),
        }
    }

    /// Stats abandoned so far (still hanging, or returned after their check gave up).
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// The mount points with a stat running now.
    pub fn pending_now(&self) -> Vec<PathBuf> {
        lock(&self.pending).iter().cloned().collect()
    }

    /// Starts a stat of `path` on a thread of its own, unless one is running: `None` then.
    fn start(&self, path: &Path) -> Option<mpsc::Receiver<std::io::Result<()>>> {
        if !lock(&self.pending).insert(path.to_path_buf()) {
            return None;
        }
        let (tx, rx) = mpsc::channel();
        let (stat, pending, p) = (self.stat.clone(), self.pending.clone(), path.to_path_buf());
        let spawned = std::thread::Builder::new()
            .name("nfs-stat".into())
            .spawn(move || {
                let r = stat(&p);
                // Unmarked before the answer is sent: a retry right after it may start.
                lock(&pending).remove(&p);
                let _ = tx.send(r);
            });
        if let Err(e) = spawned {
            lock(&self.pending).remove(path);
            let (tx, rx) = mpsc::channel();
            let _ = tx.send(Err(e));
            return Some(rx);
        }
        Some(rx)
    }

    fn check_one(&self, mount: &NfsRdmaMount, window: Duration) -> NfsCheckResult {
        let started = WallInstant::now();
        let deadline = started + window;
        let path = PathBuf::from(&mount.mount_point);
        let waited_s = window.as_secs();
        loop {
            let Some(rx) = self.start(&path) else {
                // A stat from an earlier check still hangs: wait for it to return, never
                // start a second one.
                let now = WallInstant::now();
                if now >= deadline {
                    return NfsCheckResult::NoAnswer {
                        waited_s,
                        earlier_pending: true,
                    };
                }
                std::thread::sleep(PENDING_POLL.min(deadline - now));
                continue;
            };
            let left = deadline.saturating_duration_since(WallInstant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(())) => {
                    return NfsCheckResult::Answered {
                        after_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    }
                }
                Ok(Err(e)) => {
                    let now = WallInstant::now();
                    if now + self.retry >= deadline {
                        return NfsCheckResult::Error {
                            errno: e.to_string(),
                        };
                    }
                }
                Err(_) => {
                    self.abandoned.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        mount = %mount.mount_point,
                        "stat of an NFS over RDMA mount did not return within {waited_s} s; \
                         left running"
                    );
                    return NfsCheckResult::NoAnswer {
                        waited_s,
                        earlier_pending: false,
                    };
                }
            }
            std::thread::sleep(self.retry);
        }
    }
}

impl NfsCheck for StatNfsCheck {
    fn check(&self, mounts: &[NfsRdmaMount], window: Duration) -> Vec<NfsCheckReport> {
        // Every mount at once: the whole check ends within the window. The scoped threads
        // only wait on channels with a deadline; the stats themselves are never joined.
        std::thread::scope(|s| {
            let handles: Vec<_> = mounts
                .iter()
                .map(|m| s.spawn(move || self.check_one(m, window)))
                .collect();
            mounts
                .iter()
                .zip(handles)
                .map(|(m, h)| NfsCheckReport {
                    mount: m.clone(),
                    result: h.join().unwrap_or_else(|_| NfsCheckResult::Error {
                        errno: "the check's thread panicked".into(),
                    }),
                })
                .collect()
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A scripted checker for tests: answers queued results in order, every mount answers
/// otherwise; remembers the mounts of every call.
#[derive(Debug, Default)]
pub struct ScriptedNfsCheck {
    answers: Mutex<std::collections::VecDeque<NfsCheckResult>>,
    calls: Mutex<Vec<Vec<NfsRdmaMount>>>,
}

impl ScriptedNfsCheck {
    /// Queues the result of the next mount.
    pub fn answer(&self, r: NfsCheckResult) {
        lock(&self.answers).push_back(r);
    }

    /// The mounts of every call.
    pub fn calls(&self) -> Vec<Vec<NfsRdmaMount>> {
        lock(&self.calls).clone()
    }
}

impl NfsCheck for ScriptedNfsCheck {
    fn check(&self, mounts: &[NfsRdmaMount], _window: Duration) -> Vec<NfsCheckReport> {
        lock(&self.calls).push(mounts.to_vec());
        mounts
            .iter()
            .map(|m| NfsCheckReport {
                mount: m.clone(),
                result: lock(&self.answers)
                    .pop_front()
                    .unwrap_or(NfsCheckResult::Answered { after_ms: 0 }),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
