//! Bounded blocking work for the daemon loop: a fixed pool of executor threads and one alert
//! sender, each fed through a bounded queue the loop never waits on.
//!
//! Why not `tokio::task::spawn_blocking`: tokio's blocking pool grows a thread per call that
//! finds no idle one, up to 512. A storm of 20 000 kernel-log records each naming a
//! different device gave 20 000 alerts, each a blocking syslog send (up to a 1 s timeout),
//! and the daemon went from 6 to 517 threads; the loop, which also reads the kernel log,
//! fell behind the ring. Here the number of threads is fixed at start, a full queue is
//! answered at once (the job is refused, or the alert coalesced and counted), and the loop
//! goes back to reading.

mod alert_queue;
mod pool;
#[cfg(test)]
mod tests;

pub use alert_queue::{AlertQueue, Queued};
pub use pool::{QueueFull, WorkerPool};

/// Executor threads: enough for a probe, an iscsiadm call and a re-creation to overlap on a
/// few devices (the engine runs one re-creation at a time).
pub const EXECUTOR_THREADS: usize = 4;
/// Executor jobs queued beyond the running ones before new ones are refused.
pub const EXECUTOR_QUEUE: usize = 256;
/// Alerts queued for the sender before new ones are coalesced into a count.
pub const ALERT_QUEUE: usize = 64;
