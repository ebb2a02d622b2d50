//! Shutdown: bounded, never waiting for in-flight executors (their children are killed with
//! their process groups when the runtime drops them or on their own timeout). The last
//! journal write, the kernel-log cursor, the metrics exporter and the control socket, each
//! step named in the log when it is slow.

use crate::exit::ExitStatus;
use std::time::Duration;

use super::startup::{Inputs, Services};
use super::Loop;
use crate::daemon::observe::clocks;
use crate::io::control::Reply;

/// Stops everything the loop started and writes the final journal.
pub(super) async fn finish(mut lp: Loop, inputs: Inputs, services: Services) {
    let Services {
        stop,
        exporter,
        control_task,
    } = services;
    let mut kernel_log = inputs.kernel_log;
    lp.notifier.stopping();
    lp.obs.stop();
    if let Some(w) = lp.witness.as_mut() {
        w.shutdown();
    }
    stop.raise();
    for p in std::mem::take(&mut lp.pendings).into_values() {
        let _ = p.sink.send(Reply::Done {
            ok: false,
            message: format!("{}: interrupted, the recovery did not finish", p.what),
            exit_code: ExitStatus::TempFail.code(),
            detail: None,
        });
    }
    if let Some(write) = lp.journal_write.take() {
        // Two fsyncs at most; the journal's lock would serialise the writes anyway, but
        // only waiting keeps the older snapshot from landing last.
        let _ = shutdown_step("the journal write in flight", write).await;
    }
    if !lp.settings.read_only {
        let (journal, snapshot) = (lp.journal.clone(), lp.driver.engine().snapshot());
        lp.obs.sync(&snapshot, clocks(lp.now()));
        let incidents = lp.obs.incidents().to_vec();
        match shutdown_step(
            "the final journal write",
            tokio::task::spawn_blocking(move || journal.save_with_incidents(&snapshot, &incidents)),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("cannot write the journal at shutdown: {e}"),
            Err(e) => tracing::error!("cannot write the journal at shutdown: {e}"),
        }
    }
    if let Some(k) = kernel_log.take() {
        // Records read ahead and not yet handled are not replayed after a restart.
        if let Some(mut log) = shutdown_step("the kernel-log reader", k.stop()).await {
            log.save_cursor(Duration::from_millis(500));
        }
    }
    kill_children();
    if let Some(x) = exporter {
        shutdown_step("the metrics exporter", x.stop()).await;
    }
    if let Some(t) = control_task {
        t.abort();
        let _ = shutdown_step("the control socket", t).await;
    }
    // Let reply tasks flush their last line.
    tokio::time::sleep(Duration::from_millis(20)).await;
    tracing::info!("stopped");
}

/// Awaits one step of the shutdown, saying which one when it is slow: systemd kills the
/// daemon 30 s after SIGTERM (TimeoutStopSec), and a stop that hangs must name its step in
/// the journal. (A test run once saw a stop take over 20 s after a `reset-device` through the
/// daemon, on a loaded machine, with nothing logged after "SIGTERM: stopping".)
async fn shutdown_step<F: std::future::Future>(what: &str, step: F) -> F::Output {
    let started = std::time::Instant::now();
    tokio::pin!(step);
    loop {
        match tokio::time::timeout(Duration::from_secs(2), &mut step).await {
            Ok(out) => {
                if started.elapsed() >= Duration::from_secs(1) {
                    tracing::warn!(
                        "stopping: {what} took {:.1} s",
                        started.elapsed().as_secs_f64()
                    );
                }
                return out;
            }
            Err(_) => tracing::warn!(
                "stopping: still waiting for {what} after {:.0} s",
                started.elapsed().as_secs_f64()
            ),
        }
    }
}

/// Kills the process groups of our children still running (an iscsiadm or devlink that an
/// abandoned executor thread is waiting for): the runner puts each child in its own group,
/// so nothing outlives the daemon. Read from /proc: `ppid` and `pgrp` of every process.
fn kill_children() {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.split_whitespace().skip(1);
        let ppid: Option<u32> = f.next().and_then(|s| s.parse().ok());
        let pgrp: Option<i32> = f.next().and_then(|s| s.parse().ok());
        if ppid == Some(me) && pgrp == Some(pid) {
            tracing::info!(
                pid,
                "killing a child still running at shutdown (with its process group)"
            );
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
