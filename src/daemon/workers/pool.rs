//! The executor pool: a fixed set of threads fed through a bounded queue; a full queue
//! refuses the job at once.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use super::{EXECUTOR_QUEUE, EXECUTOR_THREADS};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The executor job queue is full: the job was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the executor queue is full ({EXECUTOR_QUEUE} jobs waiting for {EXECUTOR_THREADS} threads)"
)]
pub struct QueueFull;

/// A fixed set of threads running blocking jobs in order of submission.
///
/// Idle workers wait on one condition variable and a job wakes exactly one of them. (A
/// channel receiver behind a mutex, as before, woke two threads per job: the one waiting in
/// `recv` and, when it let the mutex go, the next one queued on it, only for it to wait
/// again: one wasted wakeup per session listing on an idle host.)
#[derive(Debug, Clone)]
pub struct WorkerPool {
    shared: Arc<PoolShared>,
    /// The last clone dropped closes the queue (the workers finish what is queued and stop).
    _closer: Arc<PoolCloser>,
    threads: usize,
}

#[derive(Default)]
struct PoolQueue {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct PoolShared {
    queue: Mutex<PoolQueue>,
    wake: Condvar,
    capacity: usize,
}

impl std::fmt::Debug for PoolShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolShared")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl PoolShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolQueue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug)]
struct PoolCloser(Arc<PoolShared>);

impl Drop for PoolCloser {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.wake.notify_all();
    }
}

impl WorkerPool {
    /// Starts `threads` threads named `name-N` with room for `queue` waiting jobs.
    pub fn new(name: &str, threads: usize, queue: usize) -> std::io::Result<WorkerPool> {
        let shared = Arc::new(PoolShared {
            queue: Mutex::new(PoolQueue::default()),
            wake: Condvar::new(),
            capacity: queue,
        });
        for n in 0..threads.max(1) {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn(move || worker(&shared))?;
        }
        Ok(WorkerPool {
            _closer: Arc::new(PoolCloser(shared.clone())),
            shared,
            threads: threads.max(1),
        })
    }

    /// Queues `job`; never blocks. `Err(QueueFull)`: it will not run.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> Result<(), QueueFull> {
        let mut q = self.shared.lock();
        if q.jobs.len() >= self.shared.capacity {
            return Err(QueueFull);
        }
        q.jobs.push_back(Box::new(job));
        drop(q);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// The number of threads.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

fn worker(shared: &PoolShared) {
    loop {
        let job = {
            let mut q = shared.lock();
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                if q.closed {
                    // Every pool handle is gone: the daemon is stopping.
                    return;
                }
                q = shared.wake.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        // A panicking job (a bug) must not shrink the pool.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            tracing::error!("an executor job panicked; the worker carries on");
        }
    }
}
