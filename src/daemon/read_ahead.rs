//! The kernel log read on a thread of its own, ahead of the loop.
//!
//! The loop runs on one thread (src/cli/daemon.rs: a current-thread runtime, so an idle
//! daemon wakes once per timer). A reader *task* on that runtime only runs when the loop
//! yields, so under a storm of records the loop handles slowly (each is classified, logged
//! and fed to the engine; a storm naming thousands of distinct devices makes every one
//! costlier) the reader read about as fast as the loop handled, and the ring overwrote the
//! rest: 55 000 of 60 000 records lost in scripts/daemon-flood.sh with trusted records.
//! On its own thread the reader drains /dev/kmsg into the queue as fast as the kernel
//! writes, whatever the loop is doing; the queue holds [`KMSG_READ_AHEAD`] records, past
//! which the reader waits and the ring's loss is detected and reported as usual.
//!
//! The thread runs a current-thread runtime of its own with the kernel log re-registered
//! in it ([`KernelLog::rebind`]), so its readiness does not depend on the busy loop's
//! reactor. It parks in epoll when the log is quiet: no wakeup on an idle host.

use std::time::Duration;

use crate::daemon::sources::KernelLog;
use crate::io::kmsg::{KmsgError, KmsgEvent};

/// Kernel-log records read ahead of the loop. Worst case ≈ 65 536 × ~250 bytes ≈ 16 MB.
pub const KMSG_READ_AHEAD: usize = 65_536;

/// One read of the kernel log: a record or a loss report, or the error that ends it.
type KmsgRead = Result<KmsgEvent, KmsgError>;

/// The reader and the queue it fills.
pub struct ReadAhead {
    /// Records and loss reports, in order; an `Err` is the last item.
    pub rx: tokio::sync::mpsc::Receiver<KmsgRead>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::sync::oneshot::Receiver<Box<dyn KernelLog>>,
}

/// Reads until stopped, the queue's receiver is gone, or the log fails (then waits to be
/// stopped, so the log can be given back).
async fn pump(
    mut log: Box<dyn KernelLog>,
    tx: tokio::sync::mpsc::Sender<KmsgRead>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> Box<dyn KernelLog> {
    loop {
        // `next` is cancel-safe (io::kmsg): stopping between records loses none.
        let ev = tokio::select! {
            _ = &mut stopped => return log,
            ev = log.next() => ev,
        };
        let failed = ev.is_err();
        tokio::select! {
            _ = &mut stopped => return log,
            sent = tx.send(ev) => if sent.is_err() { return log; },
        }
        if failed {
            // The loop reports it and carries on without the kernel log.
            let _ = stopped.await;
            return log;
        }
    }
}

impl ReadAhead {
    /// Starts the reader on its own thread; if no thread or runtime can be had, as a task
    /// of the current runtime (what it was before), with a warning. Must be called inside
    /// a tokio runtime.
    pub fn start(log: Box<dyn KernelLog>) -> ReadAhead {
        let (tx, rx) = tokio::sync::mpsc::channel(KMSG_READ_AHEAD);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        // The log moves into the thread only once its runtime exists, so a failure here
        // still has it to fall back on.
        let (log_tx, log_rx) = std::sync::mpsc::sync_channel::<(Box<dyn KernelLog>, _, _)>(1);
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<bool>(1);
        let spawned = std::thread::Builder::new()
            .name("kmsg-reader".into())
            .spawn(move || {
                // The reader is the first of the two wakeups between a kernel record and the
                // loop's decision: it gets the loop's short slice too, so it preempts a CPU
                // hog when the record comes (it was started with the default slice).
                if let Err(e) =
                    crate::daemon::sources::request_short_slice(crate::daemon::sources::LOOP_SLICE)
                {
                    tracing::debug!("no short scheduler slice for the kernel-log reader: {e}");
                }
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let Ok(rt) = rt else {
                    let _ = ready_tx.send(false);
                    return;
                };
                let _ = ready_tx.send(true);
                let Ok((mut log, tx, stopped)) = log_rx.recv() else {
                    return;
                };
                let log = rt.block_on(async move {
                    if let Err(e) = log.rebind() {
                        tracing::warn!(
                            "cannot move the kernel-log reader to its thread's runtime: {e}"
                        );
                    }
                    pump(log, tx, stopped).await
                });
                let _ = done_tx.send(log);
            });
        let on_thread = spawned.is_ok() && ready_rx.recv().unwrap_or(false);
        if on_thread {
            if let Err(std::sync::mpsc::SendError((log, tx, stopped))) =
                log_tx.send((log, tx, stopped))
            {
                // The thread is gone already: read on this runtime instead.
                return Self::on_task(log, tx, stopped, rx, stop);
            }
            return ReadAhead {
                rx,
                stop: Some(stop),
                done,
            };
        }
        tracing::warn!(
            "cannot start the kernel-log reader's thread; reading it on the loop's thread \
             (a storm the loop handles slowly may then overrun the ring)"
        );
        Self::on_task(log, tx, stopped, rx, stop)
    }

    fn on_task(
        log: Box<dyn KernelLog>,
        tx: tokio::sync::mpsc::Sender<KmsgRead>,
        stopped: tokio::sync::oneshot::Receiver<()>,
        rx: tokio::sync::mpsc::Receiver<KmsgRead>,
        stop: tokio::sync::oneshot::Sender<()>,
    ) -> ReadAhead {
        let (done_tx, done) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let log = pump(log, tx, stopped).await;
            let _ = done_tx.send(log);
        });
        ReadAhead {
            rx,
            stop: Some(stop),
            done,
        }
    }

    /// Stops the reader and gives the kernel log back (to save its cursor), waiting 500 ms
    /// at most.
    pub async fn stop(mut self) -> Option<Box<dyn KernelLog>> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(Duration::from_millis(500), self.done)
            .await
            .ok()?
            .ok()
    }
}
