//! The daemon's loop, cut along its lifecycle: [`deps`] (what it talks to), [`startup`]
//! (journal resume or safe mode, sources started), the event loop here (kernel log, RDMA
//! topology, iscsiadm listings, timers, operator requests and signals in, fed to the core's
//! [`Driver`]), [`effects`] (what the driver hands out, run in order by executors that only
//! execute), [`inputs`] (each source into the driver), [`control`] (operator requests) and
//! [`shutdown`].
//!
//! The driver decides authorisation (dry-run, pause, `devices.allow`, the operator's
//! command) and puts the journal write ahead of anything destructive; the loop runs that
//! write on a blocking thread (two fsyncs never stall the loop) and reports it done before
//! the driver hands out the destructive effect. Every dependency comes in through [`Deps`],
//! so tests drive the loop with doubles and production picks the real ones explicitly
//! ([`Deps::real`]).

mod control;
mod deps;
mod effects;
mod inputs;
mod shutdown;
mod startup;
mod verbs;

use crate::exit::ExitStatus;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

pub use control::parse_portal_arg;
pub use deps::{driver_for, port_selftest, AddressLister, Deps, Mode, RouteLookup, Settings};

use crate::core::driver::{Driver, EffectId, EffectOutcome};
use crate::core::iscsi::{ParsedListing, SessionDetail};
use crate::core::nldev::CmIdEntry;
use crate::core::recovery::{PortId, Portal};
use crate::core::session_map::{Placer, RdmaPortNetdev};
use crate::daemon::exec::Executed;
use crate::daemon::notify::Notifier;
use crate::daemon::observe::{clocks, Observer, KERNEL_LOG};
use crate::daemon::sources::{Clock, Signal};
use crate::daemon::workers::{AlertQueue, WorkerPool};
use crate::error::Error;
use crate::io::control::Request;
use crate::io::executors::Executors;
use crate::io::journal::Journal;
use control::{progress, reply_task, Pendings};
use startup::{Inputs, SafeMode};

struct Finished {
    id: EffectId,
    executed: Executed,
}

struct Loop {
    /// Events, incidents and sources for `status`, `events` and `history`.
    obs: Observer,
    /// The verbs devices' sandbox lockout check (`None`: not checked).
    verbs_access: Option<verbs::VerbsAccess>,
    driver: Driver,
    settings: Settings,
    ex: Executors,
    clock: Arc<dyn Clock>,
    notifier: Notifier,
    addresses: AddressLister,
    routes: Arc<RouteLookup>,
    journal: Journal,
    /// The journal write running on a blocking thread, if any: the shutdown write waits
    /// for it, so the last snapshot written is the final one.
    journal_write: Option<tokio::task::JoinHandle<()>>,
    /// Executor work (actions, session listings, plans): a fixed set of threads.
    pool: WorkerPool,
    /// The one alert sender.
    alert_queue: AlertQueue,
    safe_mode: Option<SafeMode>,
    ports: Vec<RdmaPortNetdev>,
    /// The RDMA CM ids of the last topology poll (session placement).
    cm_ids: Vec<CmIdEntry>,
    /// Session placement with its memory (a vanished device keeps its sessions).
    placer: Placer,
    done_tx: UnboundedSender<Finished>,
    journal_tx: UnboundedSender<(EffectId, Result<(), String>)>,
    sessions_tx: UnboundedSender<Result<ParsedListing<SessionDetail>, String>>,
    sessions_inflight: bool,
    /// The listing in flight was asked for after the first topology report: its sessions
    /// can be placed on RDMA ports. Only such a listing completes the first scan.
    listing_placed: bool,
    sessions_again: bool,
    last_sessions_error: Option<String>,
    refresh_topology: Arc<Signal>,
    inflight: BTreeMap<EffectId, Option<PortId>>,
    /// Re-creations running on an executor thread, by effect: the device, and whether a
    /// step was reported blocked in the kernel (its final result then goes to the blocked
    /// record, not to the action).
    recreations: BTreeMap<EffectId, (String, bool)>,
    /// Which probe answers are news (entered and logged at info) and which are routine.
    probe_news: crate::core::observe::ProbeNews,
    /// Each portal's local address, from the last session snapshot (probe source).
    probe_from: BTreeMap<Portal, std::net::IpAddr>,
    pendings: Pendings,
    /// Plans being read on a worker: a one-shot loop waits for their answer.
    answering: usize,
    answered_tx: UnboundedSender<()>,
    netlink_warned: bool,
    status: String,
    /// Prometheus metrics (a no-op when `metrics.enabled` is false).
    metrics: crate::metrics::Metrics,
    /// The devices' asynchronous event listeners, if this daemon has them.
    witness: Option<crate::daemon::witness::Witness>,
    /// The subsystem layer's counting, ring entries and fatal-device alerts.
    kernel_events: crate::daemon::kernel_events::KernelEvents,
}

/// Runs the loop until a stop signal (daemon) or the end of the command (one-shot). Returns
/// the exit code.
pub async fn run(settings: Settings, deps: Deps, mode: Mode) -> Result<u8, Error> {
    let daemon = matches!(mode, Mode::Daemon);
    let startup::Started {
        mut lp,
        mut inputs,
        services,
    } = startup::start(settings, deps, daemon).await?;
    if lp.verbs_access.is_some() {
        lp.obs.watch_source(crate::daemon::observe::VERBS_DEVICES);
    }
    lp.check_verbs_access();
    let exit_code = event_loop(&mut lp, &mut inputs, mode).await;
    shutdown::finish(lp, inputs, services).await;
    exit_code
}

/// The event loop proper: one input at a time to the driver, its effects started, until a
/// stop signal (daemon) or the end of the command (one-shot). Returns the exit code.
async fn event_loop(lp: &mut Loop, inputs: &mut Inputs, mode: Mode) -> Result<u8, Error> {
    let Inputs {
        done: ref mut done_rx,
        journal: ref mut journal_rx,
        sessions: ref mut sessions_rx,
        answered: ref mut answered_rx,
        topology: ref mut topo_rx,
        control: ref mut ctrl_rx,
        ref mut kernel_log,
        async_events: ref mut async_rx,
        ref mut shutdown,
    } = *inputs;
    let (mut one_shot, one_shot_mode) = match mode {
        Mode::Daemon => (None, false),
        Mode::OneShot(req, sink) => (Some((req, sink)), true),
    };
    let mut command_issued = false;
    if !one_shot_mode {
        // The loop thread only (the worker threads exist already): see request_short_slice.
        if let Err(e) =
            crate::daemon::sources::request_short_slice(crate::daemon::sources::LOOP_SLICE)
        {
            tracing::debug!("no short scheduler slice for the loop: {e}");
        }
    }

    let mut sigterm = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sigint = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sighup = signal(tokio::signal::unix::SignalKind::hangup())?;
    // On a timerfd (sources::Ticker): one wakeup per poll, not the timer wheel's three.
    let mut session_tick = crate::daemon::sources::Ticker::start(lp.settings.config.poll.iscsi);
    let watchdog = crate::daemon::notify::watchdog_interval();
    let mut watchdog_tick =
        tokio::time::interval(watchdog.map_or(Duration::from_secs(3600), |w| {
            (w / 2).max(Duration::from_millis(100))
        }));
    let mut exit_code = ExitStatus::Ok.code();

    loop {
        lp.pump();
        lp.check_pendings();
        // The first-scan rule is the driver's.
        if lp.driver.end_hold_if_scanned() {
            tracing::warn!(
                "safe mode: first complete scan done; automatic destructive actions are allowed again"
            );
        }
        lp.update_status();
        lp.metrics.engine(lp.driver.engine());
        // Nothing destructive runs before the engine hears the first scan is complete.
        let now = lp.clock.now();
        if lp.driver.complete_first_scan(!lp.netlink_warned, now) {
            lp.pump();
            tracing::info!(status = %lp.status, "first scan done: ready");
            lp.notifier.ready(&lp.status);
        }
        if lp.driver.first_scan_done() && !command_issued {
            if let Some((req, sink)) = one_shot.take() {
                command_issued = true;
                lp.operator(req, sink);
                lp.pump();
                lp.check_pendings();
            }
        }
        if one_shot_mode && command_issued && lp.pendings.is_empty() && lp.answering == 0 {
            break;
        }
        let now = lp.clock.now();
        let sleep = lp
            .driver
            .next_timeout()
            .map_or(Duration::from_secs(3600), |t| t.since(now));
        let kmsg_next = async {
            match kernel_log.as_mut() {
                Some(k) => k.rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let async_next = async {
            match async_rx.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let shutdown_requested = async {
            match shutdown.as_mut() {
                Some(rx) => {
                    let _ = rx.await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sigterm.recv() => { tracing::info!("SIGTERM: stopping"); break; }
            _ = shutdown_requested => { tracing::info!("shutdown requested: stopping"); break; }
            _ = sigint.recv() => {
                tracing::info!("SIGINT: stopping");
                if one_shot_mode { exit_code = 130; }
                break;
            }
            _ = sighup.recv() => {
                let _ = lp.reload();
            }
            ev = kmsg_next => match ev {
                Some(Ok(ev)) => lp.on_kmsg(ev),
                Some(Err(e)) => {
                    lp.obs.source_failed(KERNEL_LOG, e.to_string());
                    tracing::error!("the kernel log failed: {e}; continuing on RDMA netlink, sysfs and iscsiadm alone");
                    lp.metrics.source_up(crate::metrics::Source::Kmsg, false);
                    if let Some(k) = kernel_log.take() {
                        drop(k.stop().await);
                    }
                }
                None => {
                    lp.obs.source_failed(KERNEL_LOG, "the reader stopped".into());
                    tracing::error!("the kernel-log reader stopped; continuing on RDMA netlink, sysfs and iscsiadm alone");
                    lp.metrics.source_up(crate::metrics::Source::Kmsg, false);
                    *kernel_log = None;
                }
            },
            ev = async_next => match ev {
                Some(ev) => lp.on_async_event(ev),
                None => *async_rx = None,
            },
            Some(f) = done_rx.recv() => lp.on_finished(f),
            Some((id, written)) = journal_rx.recv() => {
                let now = lp.clock.now();
                lp.driver.handle_effect_outcome(id, EffectOutcome::Journal(written), now);
            }
            Some(s) = sessions_rx.recv() => lp.on_sessions(s),
            Some(()) = answered_rx.recv() => lp.answering = lp.answering.saturating_sub(1),
            Some(t) = topo_rx.recv() => lp.on_topology(t),
            Some((conn, req)) = ctrl_rx.recv() => {
                // A client that gave up before its command was taken does not get it run.
                if conn.client_gone() {
                    tracing::info!("control client went away before its request was taken; not run: {req}");
                } else if let Request::Events { since_unix_ms, after_seq, follow } = req {
                    let now = lp.clock.now();
                    lp.obs.serve_events(conn, since_unix_ms, after_seq, follow, clocks(now));
                } else {
                    let sink = reply_task(conn);
                    lp.operator(req, sink);
                }
            }
            _ = tokio::time::sleep(sleep) => {
                let now = lp.clock.now();
                lp.driver.handle_timeout(now);
            }
            _ = session_tick.tick() => {
                lp.request_sessions();
                lp.check_blocked_tasks();
            }
            _ = watchdog_tick.tick(), if watchdog.is_some() => lp.notifier.watchdog(),
        }
    }
    Ok(exit_code)
}

impl Loop {
    fn now(&self) -> crate::core::time::Instant {
        self.clock.now()
    }

    /// A blocked re-creation this daemon is not running (journaled by a previous one: its
    /// task outlived that daemon): once the task is gone, its result is unknown and the
    /// engine verifies the device as after a lost outcome.
    fn check_blocked_tasks(&mut self) {
        let ours: Vec<&str> = self
            .recreations
            .values()
            .filter(|(_, blocked)| *blocked)
            .map(|(d, _)| d.as_str())
            .collect();
        let proc_root = crate::compose::reset_config(&self.settings.config).proc_root;
        let gone: Vec<String> = self
            .driver
            .engine()
            .blocked_recreations()
            .filter(|(device, _)| !ours.contains(device))
            .filter(|(_, b)| {
                let id = b.step.id;
                !crate::io::task::TaskRef {
                    pid: id.pid,
                    tid: id.tid,
                    start_time: id.start_time,
                }
                .alive(&proc_root)
            })
            .map(|(device, _)| device.to_string())
            .collect();
        for device in gone {
            tracing::info!(%device, "the blocked re-creation's task of a previous daemon is gone");
            let now = self.now();
            self.driver.handle_recreation_returned(&device, None, now);
        }
    }

    /// Tells the operators following `port` (or all, for port-less events).
    fn tell(&self, port: Option<&PortId>, message: &str) {
        for p in self.pendings.values() {
            if port.is_none_or(|id| p.ports.contains(id)) {
                progress(&p.sink, message);
            }
        }
    }

    fn update_status(&mut self) {
        // Runs on every loop turn: named ports are capped and the rest counted by phase, so
        // a storm naming thousands of devices costs a count, not a string per port per
        // record (it made the loop fall behind the kernel log).
        const NAMED: usize = 8;
        let mut parts: Vec<String> = Vec::new();
        let mut others: Vec<(crate::core::recovery::Phase, usize)> = Vec::new();
        for p in self.driver.engine().ports() {
            if parts.len() < NAMED {
                parts.push(format!("{} {}", p.id, p.phase()));
            } else if let Some(c) = others.iter_mut().find(|(ph, _)| *ph == p.phase()) {
                c.1 += 1;
            } else {
                others.push((p.phase(), 1));
            }
        }
        if parts.is_empty() {
            parts.push("no RDMA port with iSCSI sessions known".into());
        }
        if !others.is_empty() {
            let counted: Vec<String> = others.iter().map(|(ph, n)| format!("{n} {ph}")).collect();
            parts.push(format!("and {} more", counted.join(", ")));
        }
        let mut s = parts.join(", ");
        if self.driver.engine().is_paused() {
            s.push_str(" (paused)");
        }
        if let Some(mode) = &self.safe_mode {
            if self.driver.held_until_scan().is_some() {
                s.push_str(&format!(
                    " (safe mode: started without its journal, which was {}; automatic \
                     destructive actions held until the first complete scan)",
                    mode.kept_words()
                ));
            } else {
                s.push_str(&format!(
                    " (started without its journal, which was {}; safe mode ended at the \
                     first complete scan)",
                    mode.kept_words()
                ));
            }
        }
        if s != self.status {
            self.status = s;
            self.notifier.status(&self.status);
        }
    }
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal, Error> {
    tokio::signal::unix::signal(kind).map_err(|e| Error::io("install a signal handler", e))
}
