//! The event loop: kernel log, RDMA topology, iscsiadm snapshots, timers, operator requests
//! and signals in, fed to the core's [`Driver`]; the effects it returns out, run in order by
//! executors that only execute. The driver decides authorisation (dry-run, pause,
//! `devices.allow`, the operator's command) and puts the journal write ahead of anything
//! destructive; the loop runs that write on a blocking thread (two fsyncs never stall the
//! loop) and reports it done before the driver hands out the destructive effect.
//!
//! Every dependency comes in through [`Deps`] (kernel log, topology source, executors, clock,
//! notifier, address list, control socket), so tests drive the loop with doubles and
//! production picks the real ones explicitly ([`Deps::real`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::config::Config;
use crate::core::driver::{Driver, Effect, EffectId, EffectKind, EffectOutcome, Refusal};
use crate::core::iscsi::{Parsed, SessionDetail};
use crate::core::nldev::CmIdEntry;
use crate::core::observe::EventKind;
use crate::core::recovery::{
    from_kernel_event, ActionKind, Engine, EngineSnapshot, OperatorCommand, Outcome, Phase, PortId,
    Portal, Trust,
};
use crate::core::session_map::{HostFacts, NetdevAddr, Placer, RdmaPortNetdev};
use crate::daemon::exec::{execute, syslog_alert, Executed};
use crate::daemon::notify::Notifier;
use crate::daemon::observe::{clocks, Observer, ISCSIADM, KERNEL_LOG, RDMA_NETLINK};
use crate::daemon::read_ahead::ReadAhead;
use crate::daemon::sessions::map_sessions;
use crate::daemon::sources::{Clock, KernelLog, Signal, TopologyReport, TopologySource};
use crate::daemon::workers::{
    AlertQueue, WorkerPool, ALERT_QUEUE, EXECUTOR_QUEUE, EXECUTOR_THREADS,
};
use crate::error::{
    Error, EXIT_CONFIG, EXIT_FINDING, EXIT_NOINPUT, EXIT_OK, EXIT_TEMPFAIL, EXIT_USAGE,
};
use crate::io::control::{ControlConnection, ControlServer, Reply, Request};
use crate::io::executors::Executors;
use crate::io::journal::Journal;
use crate::io::kmsg::KmsgEvent;

/// Lists the host's interface addresses (for placing sessions on RDMA ports).
pub type AddressLister = Arc<dyn Fn() -> std::io::Result<Vec<NetdevAddr>> + Send + Sync>;

/// Names the netdev the kernel routes an address through (`ip route get`), for placing
/// sessions on RDMA ports; `Err` says why there is no answer.
pub type RouteLookup = Arc<dyn Fn(std::net::IpAddr) -> Result<String, String> + Send + Sync>;

/// How long an operator command may take before its client is told it is still running.
const OPERATOR_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// Everything the loop talks to.
pub struct Deps {
    /// The kernel log; `None` for the standalone manual commands.
    pub kernel_log: Option<Box<dyn KernelLog>>,
    /// RDMA devices and ports.
    pub topology: Box<dyn TopologySource>,
    /// The action executors.
    pub executors: Executors,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// systemd notifications.
    pub notifier: Notifier,
    /// The host's addresses.
    pub addresses: AddressLister,
    /// The route to a portal.
    pub routes: RouteLookup,
    /// The control socket; `None` for the standalone manual commands.
    pub control: Option<ControlServer>,
    /// Stops the loop like SIGTERM when it receives (tests; `None` in production, where
    /// the signals do it).
    pub shutdown: Option<tokio::sync::oneshot::Receiver<()>>,
    /// The devices' asynchronous event listeners and the channel their events arrive on
    /// (`None`: no such witness, as in a build without verbs or a standalone command).
    pub async_events: Option<crate::daemon::witness::Listeners>,
}

/// What the loop is for.
pub enum Mode {
    /// The daemon: run until SIGTERM/SIGINT.
    Daemon,
    /// A standalone manual command: run this request once the first scan is done, stream its
    /// replies to the sender, stop when it is finished.
    OneShot(Request, UnboundedSender<Reply>),
}

/// Settings that are not dependencies.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The configuration in force.
    pub config: Config,
    /// `--config`, for SIGHUP reloads.
    pub config_path: Option<PathBuf>,
    /// `--dry-run` on the command line: forces `recovery.dry-run` across reloads.
    pub force_dry_run: bool,
    /// Take the recovery lock (`paths.state-dir`) around each device re-creation. The
    /// standalone commands hold it for their whole run already, so they say `false`.
    pub take_lock: bool,
    /// Run the engine's automatic destructive actions. The standalone commands say `false`:
    /// they run the operator's command only (the driver refuses automatic ones and leaves
    /// them to the daemon), so nothing is cut short when they exit.
    pub automatic_actions: bool,
}

/// Route lookups for placement. They are joined with the port netdevs read under
/// `paths.sysfs-root`; when that is not the running kernel's `/sys` (a test tree, a copy),
/// this host's routing table describes another machine and is not consulted.
fn host_routes(sysfs_root: &std::path::Path) -> RouteLookup {
    if sysfs_root == std::path::Path::new("/sys") {
        Arc::new(|ip| crate::io::route::route_netdev(ip).map_err(|e| e.to_string()))
    } else {
        let why = format!(
            "route lookups are off: paths.sysfs-root ({}) is not this kernel's /sys",
            sysfs_root.display()
        );
        Arc::new(move |_| Err(why.clone()))
    }
}

impl Deps {
    /// The real dependencies for `cfg`. `daemon`: open the kernel log and bind the control
    /// socket (the standalone commands do neither). Must be called inside a tokio runtime.
    pub fn real(cfg: &Config, daemon: bool) -> Result<Deps, Error> {
        use crate::daemon::sources::{BootClock, HostTopology, KmsgLog};
        let (kernel_log, control) = if daemon {
            let kernel_log = if cfg.kmsg.enabled {
                let reader =
                    crate::io::kmsg::open(&crate::io::kmsg::OpenOptions::from_paths(&cfg.paths))?;
                Some(Box::new(KmsgLog(reader)) as Box<dyn KernelLog>)
            } else {
                tracing::warn!(
                    "the kernel log is off (kmsg.enabled = false): stuck QPs are seen in the \
                     RDMA netlink QP table only"
                );
                None
            };
            let control = ControlServer::bind(&cfg.paths.control_socket)
                .map_err(|e| Error::Usage(format!("cannot open the control socket: {e}")))?;
            (kernel_log, Some(control))
        } else {
            (None, None)
        };
        Ok(Deps {
            kernel_log,
            topology: Box::new(HostTopology {
                sysfs_root: cfg.paths.sysfs_root.clone(),
                interval: cfg.poll.netlink,
                netlink: crate::daemon::sources::NetlinkAccess::Kernel,
                metrics: crate::metrics::Metrics::disabled(),
            }),
            executors: Executors::from_config(cfg).with_selftest(port_selftest(cfg)),
            clock: Arc::new(BootClock),
            notifier: if daemon {
                Notifier::from_env()
            } else {
                Notifier::silent()
            },
            addresses: Arc::new(crate::io::netif::addresses),
            routes: host_routes(&cfg.paths.sysfs_root),
            control,
            shutdown: None,
            async_events: if daemon { async_events() } else { None },
        })
    }
}

/// The daemon's port self-test: `iser-guard selftest --json` run as a child of this binary
/// (librdmacm keeps the devices it used open for the life of a process, and an open
/// context on Soft-RoCE blocks the device's deletion), unless `recovery.selftest` is off.
pub fn port_selftest(cfg: &Config) -> Arc<dyn crate::io::selftest::PortSelfTest> {
    use crate::core::recovery::SelfTestPolicy;
    use crate::io::selftest::NoSelfTest;
    if cfg.recovery.selftest == SelfTestPolicy::Off {
        return Arc::new(NoSelfTest {
            reason: "recovery.selftest is off".into(),
        });
    }
    match crate::io::selftest_process::SubprocessSelfTest::current() {
        Ok(t) => Arc::new(crate::io::selftest::RetryOnReject { inner: t }),
        Err(e) => Arc::new(NoSelfTest {
            reason: format!("cannot find this program's own binary to run the self-test: {e}"),
        }),
    }
}

#[cfg(feature = "verbs")]
fn async_events() -> Option<crate::daemon::witness::Listeners> {
    Some(crate::daemon::witness::real())
}

#[cfg(not(feature = "verbs"))]
fn async_events() -> Option<crate::daemon::witness::Listeners> {
    None
}

struct Finished {
    id: EffectId,
    executed: Executed,
}

struct Pending {
    sink: UnboundedSender<Reply>,
    ports: BTreeSet<PortId>,
    /// A `reconnect`: it also waits for the operator logouts/logins of sessions on no RDMA
    /// port (they belong to no port, so `ports` does not cover them).
    session_ops: bool,
    /// How many operator session-op failures the engine had reported when it started.
    failures_before: usize,
    deadline: crate::core::time::Instant,
    what: String,
}

#[derive(Default)]
struct Ready {
    topology: bool,
    sessions: bool,
    /// A session snapshot was read (not only attempted): with `topology`, the first
    /// complete scan that ends safe mode's hold.
    sessions_read: bool,
    sent: bool,
}

/// The daemon started without a usable journal (corrupt, unreadable, newer format): it runs
/// on a fresh engine, re-learns sessions from iscsiadm, and the driver refuses automatic
/// destructive actions until the first complete scan.
#[derive(Debug, Clone)]
struct SafeMode {
    /// What was wrong with the journal.
    problem: String,
    /// Where the journal was kept, or why it could not be moved.
    kept: Result<PathBuf, String>,
}

impl SafeMode {
    fn kept_words(&self) -> String {
        match &self.kept {
            Ok(p) => format!("kept as {}", p.display()),
            Err(e) => format!("could not be kept aside ({e}); it is still in place"),
        }
    }

    /// The operator alert for it.
    fn alert(&self, journal: &std::path::Path, cfg: &Config) -> crate::io::syslog::Alert {
        let look = match &self.kept {
            Ok(p) => p.display().to_string(),
            Err(_) => journal.display().to_string(),
        };
        crate::io::syslog::Alert {
            severity: cfg.alerts.severity_operator,
            what: format!(
                "iser-guard started in safe mode: the state journal {} was not usable",
                journal.display()
            ),
            why: format!(
                "{}; the file was {}. Remembered sessions are re-learned from iscsiadm and \
                 no automatic destructive action is taken before the first complete scan of \
                 RDMA devices and iSCSI sessions",
                self.problem,
                self.kept_words()
            ),
            todo: format!(
                "inspect {look} (a newer release's journal: run that release again, or leave \
                 it; this daemon carries on with a fresh journal); delete the kept file when \
                 done, and check `iser-guard status`"
            ),
        }
    }
}

/// Moves an unusable journal aside (UTC-stamped name, never deleted) and says what happened.
fn keep_journal_aside(journal: &Journal, what: &str, problem: String) -> SafeMode {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let kept = journal.keep_aside(what, unix).map_err(|e| e.to_string());
    let mode = SafeMode { problem, kept };
    tracing::error!(
        journal = %journal.path().display(),
        "the state journal is not usable: {}; the file was {}; starting in safe mode",
        mode.problem,
        mode.kept_words()
    );
    mode
}

struct Loop {
    /// Events, incidents and sources for `status`, `events` and `history`.
    obs: Observer,
    driver: Driver,
    settings: Settings,
    ex: Executors,
    clock: Arc<dyn Clock>,
    notifier: Notifier,
    addresses: AddressLister,
    routes: RouteLookup,
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
    sessions_tx: UnboundedSender<Result<Parsed<SessionDetail>, String>>,
    sessions_inflight: bool,
    /// The listing in flight was asked for after the first topology report: its sessions
    /// can be placed on RDMA ports. Only such a listing completes the first scan.
    listing_placed: bool,
    sessions_again: bool,
    last_sessions_error: Option<String>,
    refresh_topology: Arc<Signal>,
    inflight: BTreeMap<EffectId, Option<PortId>>,
    /// Each portal's local address, from the last session snapshot (probe source).
    probe_from: BTreeMap<Portal, std::net::IpAddr>,
    pendings: Vec<Pending>,
    netlink_warned: bool,
    ready: Ready,
    status: String,
    /// Prometheus metrics (a no-op when `metrics.enabled` is false).
    metrics: crate::metrics::Metrics,
    /// The devices' asynchronous event listeners, if this daemon has them.
    witness: Option<crate::daemon::witness::Witness>,
}

/// The driver the loop runs `engine` in: the core's [`Driver`], the same type the simulator's
/// harness runs ([`crate::sim::Harness::driver`]). Automatic destructive actions run unless
/// `settings` says this is a standalone manual command.
pub fn driver_for(engine: Engine, settings: &Settings) -> Driver {
    Driver::new(engine, settings.automatic_actions)
}

/// Applies `--dry-run` to a configuration.
fn effective(mut cfg: Config, force_dry_run: bool) -> Config {
    if force_dry_run {
        cfg.recovery.dry_run = true;
    }
    cfg
}

/// Runs the loop until a stop signal (daemon) or the end of the command (one-shot). Returns
/// the exit code.
pub async fn run(settings: Settings, deps: Deps, mode: Mode) -> Result<u8, Error> {
    let settings = Settings {
        config: effective(settings.config, settings.force_dry_run),
        ..settings
    };
    let cfg = &settings.config;
    std::fs::create_dir_all(&cfg.paths.state_dir)
        .map_err(|e| Error::io(format!("create {}", cfg.paths.state_dir.display()), e))?;
    let journal = Journal::new(&cfg.paths.state_dir);
    let now = deps.clock.now();
    let policy = cfg.policy();
    let seed = u64::from(std::process::id()) ^ now.as_millis();
    // An unusable journal never stops the daemon (systemd would restart it in a loop and
    // leave the host unprotected): it is kept aside and the daemon starts in safe mode.
    let (loaded, incidents) = match journal.load_with_incidents() {
        Ok(Some((snap, incidents))) => (Ok(Some(snap)), incidents),
        Ok(None) => (Ok(None), Vec::new()),
        Err(e) => (Err(e), Vec::new()),
    };
    let (engine, safe_mode) = match loaded {
        Ok(Some(snap)) => match Engine::resume(snap, policy.clone(), now) {
            Ok(engine) => {
                tracing::info!(
                    journal = %journal.path().display(),
                    "resuming from the journal"
                );
                (engine, None)
            }
            Err(e) => (
                Engine::new(policy, seed),
                Some(keep_journal_aside(
                    &journal,
                    "corrupt",
                    format!("its state cannot be resumed ({e})"),
                )),
            ),
        },
        Ok(None) => {
            tracing::info!("no journal yet: starting afresh");
            (Engine::new(policy, seed), None)
        }
        Err(e) => (
            Engine::new(policy, seed),
            Some(keep_journal_aside(&journal, &e.kind_word(), e.problem())),
        ),
    };
    let pool = WorkerPool::new("iser-guard-exec", EXECUTOR_THREADS, EXECUTOR_QUEUE)
        .map_err(|e| Error::io("start the executor threads", e))?;
    let alert_queue =
        AlertQueue::new(ALERT_QUEUE).map_err(|e| Error::io("start the alert sender", e))?;
    let (done_tx, mut done_rx) = unbounded_channel();
    let (journal_tx, mut journal_rx) = unbounded_channel();
    let (sessions_tx, mut sessions_rx) = unbounded_channel();
    let (topo_tx, mut topo_rx) = unbounded_channel();
    let refresh = Arc::new(Signal::default());
    let stop = Arc::new(Signal::default());
    // Only the daemon exports metrics: a standalone command must not overwrite its file.
    let metrics =
        crate::metrics::Metrics::for_config(&settings.config.metrics, matches!(mode, Mode::Daemon));
    let exporter = crate::metrics::Exporter::start(&settings.config.metrics, &metrics).await;
    let mut topology = deps.topology;
    topology.observe(metrics.clone());
    topology.start(topo_tx, refresh.clone(), stop.clone());
    let (ctrl_tx, mut ctrl_rx) = unbounded_channel::<(ControlConnection, Request)>();
    let control_task = deps.control.map(|server| {
        tracing::info!(socket = %server.path().display(), "control socket open");
        tokio::spawn(accept_loop(server, ctrl_tx))
    });
    let mut kernel_log = deps.kernel_log.map(ReadAhead::start);
    metrics.source_up(crate::metrics::Source::Kmsg, kernel_log.is_some());
    let mut shutdown = deps.shutdown;
    let poll_iscsi = settings.config.poll.iscsi;
    let mut driver = driver_for(engine, &settings);
    if let Some(mode) = &safe_mode {
        driver.hold_until_first_scan(format!("the state journal {}", mode.kept_words()));
        let alert = mode.alert(&journal.path(), &settings.config);
        let sent = deps.executors.alerts.is_some();
        crate::logging::daemon_alert(&alert, "safe-mode", sent);
        metrics.alert("safe-mode", alert.severity);
        if let Some(sink) = deps.executors.alerts.clone() {
            alert_queue.send(sink, alert);
        }
    }
    let obs = Observer::new(now, incidents, kernel_log.is_some());
    let (witness, mut async_rx) = match deps.async_events {
        Some((source, rx)) => {
            let allow = settings.config.devices.allow.iter().cloned().collect();
            (
                Some(crate::daemon::witness::Witness::new(source, allow)),
                Some(rx),
            )
        }
        None => (None, None),
    };
    let mut lp = Loop {
        obs,
        driver,
        ex: deps.executors,
        clock: deps.clock,
        notifier: deps.notifier,
        addresses: deps.addresses,
        routes: deps.routes,
        journal,
        journal_write: None,
        pool,
        alert_queue,
        safe_mode,
        ports: Vec::new(),
        cm_ids: Vec::new(),
        placer: Placer::new(),
        done_tx,
        journal_tx,
        sessions_tx,
        sessions_inflight: false,
        listing_placed: false,
        sessions_again: false,
        last_sessions_error: None,
        refresh_topology: refresh,
        inflight: BTreeMap::new(),
        probe_from: BTreeMap::new(),
        pendings: Vec::new(),
        netlink_warned: false,
        ready: Ready::default(),
        status: String::new(),
        metrics: metrics.clone(),
        witness,
        settings,
    };
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
    let mut session_tick = crate::daemon::sources::Ticker::start(poll_iscsi);
    let watchdog = crate::daemon::notify::watchdog_interval();
    let mut watchdog_tick =
        tokio::time::interval(watchdog.map_or(Duration::from_secs(3600), |w| {
            (w / 2).max(Duration::from_millis(100))
        }));
    let mut exit_code = EXIT_OK;

    loop {
        lp.pump();
        lp.check_pendings();
        if lp.driver.held_until_scan().is_some() && lp.ready.topology && lp.ready.sessions_read {
            lp.driver.first_scan_complete();
            tracing::warn!(
                "safe mode: first complete scan done; automatic destructive actions are allowed again"
            );
        }
        lp.update_status();
        lp.metrics.engine(lp.driver.engine());
        if !lp.ready.sent && lp.ready.topology && lp.ready.sessions {
            lp.ready.sent = true;
            // Nothing destructive runs before the engine hears this (issue 9.10).
            let now = lp.clock.now();
            lp.driver.handle(
                crate::core::recovery::Input::ScanComplete(crate::core::recovery::ScanComplete {
                    qp_table_available: !lp.netlink_warned,
                }),
                now,
            );
            lp.pump();
            tracing::info!(status = %lp.status, "first scan done: ready");
            lp.notifier.ready(&lp.status);
        }
        if lp.ready.sent && !command_issued {
            if let Some((req, sink)) = one_shot.take() {
                command_issued = true;
                lp.operator(req, sink);
                lp.pump();
                lp.check_pendings();
            }
        }
        if one_shot_mode && command_issued && lp.pendings.is_empty() {
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
                    kernel_log = None;
                }
            },
            ev = async_next => match ev {
                Some(ev) => lp.on_async_event(ev),
                None => async_rx = None,
            },
            Some(f) = done_rx.recv() => lp.on_finished(f),
            Some((id, written)) = journal_rx.recv() => {
                let now = lp.clock.now();
                lp.driver.handle_effect_outcome(id, EffectOutcome::Journal(written), now);
            }
            Some(s) = sessions_rx.recv() => lp.on_sessions(s),
            Some(t) = topo_rx.recv() => lp.on_topology(t),
            Some((conn, req)) = ctrl_rx.recv() => {
                // A client that gave up before its command was taken does not get it run.
                if conn.client_gone() {
                    tracing::info!(?req, "control client went away before its command was taken; not run");
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
            _ = session_tick.tick() => lp.request_sessions(),
            _ = watchdog_tick.tick(), if watchdog.is_some() => lp.notifier.watchdog(),
        }
    }

    // Shutdown: bounded, never waiting for in-flight executors (their children are killed
    // with their process groups when the runtime drops them or on their own timeout).
    lp.notifier.stopping();
    lp.obs.stop();
    if let Some(w) = lp.witness.as_mut() {
        w.shutdown();
    }
    stop.raise();
    for p in lp.pendings.drain(..) {
        let _ = p.sink.send(Reply::Done {
            ok: false,
            message: format!("{}: interrupted, the recovery did not finish", p.what),
            exit_code: EXIT_TEMPFAIL,
            detail: None,
        });
    }
    if let Some(write) = lp.journal_write.take() {
        // Two fsyncs at most; the journal's lock would serialise the writes anyway, but
        // only waiting keeps the older snapshot from landing last.
        let _ = shutdown_step("the journal write in flight", write).await;
    }
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
    Ok(exit_code)
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

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal, Error> {
    tokio::signal::unix::signal(kind).map_err(|e| Error::io("install a signal handler", e))
}

async fn accept_loop(server: ControlServer, tx: UnboundedSender<(ControlConnection, Request)>) {
    loop {
        match server.accept().await {
            Ok(pair) => {
                if tx.send(pair).is_err() {
                    return;
                }
            }
            Err(e) => tracing::warn!("control connection refused: {e}"),
        }
    }
}

/// A task writing replies to one control connection; returns its sender.
fn reply_task(mut conn: ControlConnection) -> UnboundedSender<Reply> {
    let (tx, mut rx): (UnboundedSender<Reply>, UnboundedReceiver<Reply>) = unbounded_channel();
    tokio::spawn(async move {
        while let Some(r) = rx.recv().await {
            let res = match &r {
                Reply::Progress { message } => conn.progress(message).await,
                Reply::Event { event } => conn.event(event).await,
                Reply::Done {
                    ok,
                    message,
                    exit_code,
                    detail,
                } => {
                    let res = conn.done(*ok, message, *exit_code, detail.clone()).await;
                    if let Err(e) = res {
                        tracing::debug!("control client went away: {e}");
                    }
                    return;
                }
            };
            if let Err(e) = res {
                tracing::debug!("control client went away: {e}");
                return;
            }
        }
    });
    tx
}

fn progress(sink: &UnboundedSender<Reply>, message: impl Into<String>) {
    let _ = sink.send(Reply::Progress {
        message: message.into(),
    });
}

fn done(sink: &UnboundedSender<Reply>, ok: bool, message: impl Into<String>, code: u8) {
    let _ = sink.send(Reply::Done {
        ok,
        message: message.into(),
        exit_code: code,
        detail: None,
    });
}

impl Loop {
    fn now(&self) -> crate::core::time::Instant {
        self.clock.now()
    }

    /// Tells the operators following `port` (or all, for port-less events).
    fn tell(&self, port: Option<&PortId>, message: &str) {
        for p in &self.pendings {
            if port.is_none_or(|id| p.ports.contains(id)) {
                progress(&p.sink, message);
            }
        }
    }

    /// Drains the driver's effects (starting them in order) and the engine's transitions.
    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(effect) = self.driver.poll_effect(self.now()) {
                progressed = true;
                self.start(effect);
            }
            while let Some(t) = self.driver.poll_transition() {
                progressed = true;
                self.obs.transition(&t, &self.driver, clocks(self.now()));
                self.metrics.transition(&t);
                tracing::info!(
                    port = %t.port,
                    from = %t.from,
                    to = %t.to,
                    why = %t.reason,
                    "transition"
                );
                self.tell(
                    Some(&t.port),
                    &format!("{}: {} -> {}: {}", t.port, t.from, t.to, t.reason),
                );
            }
            if !progressed {
                break;
            }
        }
    }

    /// Starts one effect. Executors only execute: what may run was decided by the driver.
    fn start(&mut self, effect: Effect) {
        self.metrics.effect(&effect, &self.settings.config.alerts);
        let id = effect.id;
        match effect.kind {
            EffectKind::WriteJournal { snapshot, reason } => {
                tracing::debug!(%reason, "writing the journal");
                self.write_journal(id, snapshot, reason);
            }
            EffectKind::Plan { action, refusal } => {
                let port = action.port.clone();
                self.obs.not_run(&action, &refusal, clocks(self.now()));
                tracing::warn!(action = %action, id = %action.id, why = %action.reason, "not run: {refusal}");
                self.tell(port.as_ref(), &format!("not run: {action}: {refusal}"));
                if let (
                    ActionKind::RecreateDevice {
                        device, remembered, ..
                    },
                    Refusal::DryRun,
                ) = (&action.kind, &refusal)
                {
                    self.log_reset_plan(device.clone(), remembered.clone());
                }
            }
            EffectKind::Run { action, authority } => {
                let port = action.port.clone();
                if !matches!(action.kind, ActionKind::PersistState { .. }) {
                    self.obs.decided(&action, &authority, clocks(self.now()));
                }
                tracing::info!(
                    action = %action,
                    id = %action.id,
                    origin = ?action.origin,
                    allowed_by = %authority,
                    why = %action.reason,
                    "decided"
                );
                match &action.kind {
                    ActionKind::Alert(alert) => {
                        let cfg = &self.settings.config.alerts;
                        crate::logging::alert(alert, port.as_ref(), cfg, self.ex.alerts.is_some());
                        self.tell(port.as_ref(), &format!("alert: {}", alert.summary));
                        if let Some(sink) = self.ex.alerts.clone() {
                            // Never waits: a full queue coalesces (the sender reports the
                            // count), so the loop goes straight back to the kernel log.
                            let msg = syslog_alert(alert, &self.settings.config.alerts);
                            self.alert_queue.send(sink, msg);
                        }
                    }
                    ActionKind::RefreshSessions => self.request_sessions(),
                    ActionKind::RefreshTopology => self.refresh_topology.raise(),
                    // The driver turns these into journal effects.
                    ActionKind::PersistState { .. } => {}
                    _ => {
                        if let (ActionKind::RecreateDevice { device, .. }, Some(w)) =
                            (&action.kind, self.witness.as_mut())
                        {
                            // Our own listener's open context would hold the deletion up.
                            w.release(device);
                        }
                        self.tell(port.as_ref(), &format!("running: {action}"));
                        self.inflight.insert(id, port);
                        let ex = self.ex.clone();
                        let lock_dir = self
                            .settings
                            .take_lock
                            .then(|| self.settings.config.paths.state_dir.clone());
                        let tx = self.done_tx.clone();
                        let probe_from = match &action.kind {
                            ActionKind::ProbePortal { portal, .. } => {
                                self.probe_from.get(portal).copied()
                            }
                            _ => None,
                        };
                        let refused_tx = tx.clone();
                        let what = action.to_string();
                        let job = move || {
                            let executed = execute(&ex, &action, lock_dir.as_deref(), probe_from);
                            if let Some(executed) = executed {
                                let _ = tx.send(Finished { id, executed });
                            }
                        };
                        if let Err(full) = self.pool.submit(job) {
                            // Answered at once so the engine is not left waiting.
                            tracing::error!("not run: {what}: {full}");
                            let _ = refused_tx.send(Finished {
                                id,
                                executed: Executed {
                                    outcome: Outcome::NotRun {
                                        reason: full.to_string(),
                                    },
                                    summary: format!("{what}: not run: {full}"),
                                    method: None,
                                },
                            });
                        }
                    }
                }
            }
        }
    }

    /// The journal write (atomic write, two fsyncs) on a blocking thread; its result comes
    /// back to the loop, which reports it to the driver. The driver hands out nothing after
    /// it (in particular no destructive effect) until then.
    fn write_journal(&mut self, id: EffectId, snapshot: Box<EngineSnapshot>, reason: String) {
        self.obs.sync(&snapshot, clocks(self.now()));
        let incidents = self.obs.incidents().to_vec();
        let journal = self.journal.clone();
        let tx = self.journal_tx.clone();
        // The driver hands out one journal write at a time: the previous one is done.
        self.journal_write = Some(tokio::task::spawn_blocking(move || {
            let written = journal
                .save_with_incidents(&snapshot, &incidents)
                .map_err(|e| {
                    tracing::error!("cannot write the journal ({reason}): {e}");
                    e.to_string()
                });
            let _ = tx.send((id, written));
        }));
    }

    /// Logs what a planned (dry-run) re-creation would do, from the resetter's own plan.
    fn log_reset_plan(
        &self,
        device: String,
        remembered: Option<crate::core::reset_plan::RecreateFrom>,
    ) {
        let resetter = self.ex.resetter.clone();
        let plan = move || match resetter.plan_from(&device, remembered.as_ref()) {
            Ok(plan) => {
                for m in &plan.methods {
                    tracing::info!(%device, method = %m.method, steps = %m.steps.join("; "), "dry-run plan");
                }
            }
            Err(e) => tracing::info!(%device, "dry-run plan: {e}"),
        };
        if let Err(full) = self.pool.submit(plan) {
            tracing::info!("dry-run plan not logged: {full}");
        }
    }

    fn on_finished(&mut self, f: Finished) {
        let port = self.inflight.remove(&f.id).flatten();
        self.obs
            .finished(port.as_ref(), &f.executed.summary, clocks(self.now()));
        tracing::info!(id = %f.id, outcome = ?f.executed.outcome, "{}", f.executed.summary);
        self.tell(port.as_ref(), &f.executed.summary);
        self.metrics
            .executed(f.id, &f.executed.outcome, f.executed.method);
        let now = self.now();
        self.driver
            .handle_effect_outcome(f.id, EffectOutcome::Action(f.executed.outcome), now);
    }

    fn request_sessions(&mut self) {
        if self.sessions_inflight {
            self.sessions_again = true;
            return;
        }
        self.sessions_inflight = true;
        self.listing_placed = self.ready.topology;
        let iscsi = self.ex.iscsi.clone();
        let tx = self.sessions_tx.clone();
        let job = move || {
            let r = iscsi.session_details().map_err(|e| e.to_string());
            let _ = tx.send(r);
        };
        if let Err(full) = self.pool.submit(job) {
            // The next tick asks again.
            tracing::warn!("iSCSI sessions not listed now: {full}");
            self.sessions_inflight = false;
        }
    }

    fn on_sessions(&mut self, r: Result<Parsed<SessionDetail>, String>) {
        self.sessions_inflight = false;
        self.metrics.iscsiadm_listing(r.is_ok());
        // A listing taken before the ports were known placed nothing: the first scan (and
        // a one-shot command) waits for the one asked for when the topology came.
        let placed = self.listing_placed;
        if placed {
            self.ready.sessions = true;
        }
        match r {
            Ok(parsed) => {
                self.obs.source_ok(ISCSIADM, clocks(self.now()));
                self.last_sessions_error = None;
                for s in &parsed.skipped {
                    tracing::warn!("iscsiadm output: skipped {s}");
                }
                let addrs = match (self.addresses)() {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("cannot list the host's addresses: {e}");
                        Vec::new()
                    }
                };
                let mut routes = BTreeMap::new();
                for ip in crate::daemon::sessions::portal_addresses(&parsed.items) {
                    match (self.routes)(ip) {
                        Ok(netdev) => {
                            routes.insert(ip, netdev);
                        }
                        Err(e) => tracing::debug!(%ip, "no route to the portal: {e}"),
                    }
                }
                let facts = HostFacts {
                    cm_ids: &self.cm_ids,
                    routes: &routes,
                    addrs: &addrs,
                    ports: &self.ports,
                };
                // Before the first topology report the ports are unknown: place with a
                // scratch copy so nothing is remembered or warned about from that.
                let mapped = if self.ready.topology {
                    map_sessions(&parsed.items, &facts, &mut self.placer)
                } else {
                    map_sessions(&parsed.items, &facts, &mut self.placer.clone())
                };
                if self.ready.topology {
                    for w in &mapped.warnings {
                        tracing::warn!("{w}");
                    }
                }
                let list = mapped.sessions;
                for s in &list {
                    if let Some(ip) = s.local_ip.as_deref().and_then(|ip| ip.parse().ok()) {
                        self.probe_from.insert(s.key.portal.clone(), ip);
                    }
                }
                tracing::debug!(sessions = list.len(), "iscsiadm session snapshot");
                let now = self.now();
                self.driver.handle_sessions(list, now);
                if placed {
                    self.ready.sessions_read = true;
                }
            }
            Err(e) => {
                self.obs.source_failed(ISCSIADM, e.clone());
                if self.last_sessions_error.as_deref() != Some(e.as_str()) {
                    tracing::warn!("cannot list iSCSI sessions: {e}");
                }
                self.last_sessions_error = Some(e);
            }
        }
        if std::mem::take(&mut self.sessions_again) {
            self.request_sessions();
        }
    }

    /// One event from a device's asynchronous event channel: a trusted witness (it comes
    /// from the kernel through uverbs).
    fn on_async_event(&mut self, ev: crate::core::selftest::AsyncEvent) {
        let now = self.now();
        tracing::info!(event = %ev, "asynchronous event");
        self.obs.async_event(&ev, clocks(now));
        self.driver.handle_observation(
            crate::core::recovery::Observation::AsyncEvent(ev),
            Trust::Trusted,
            now,
        );
    }

    fn on_topology(&mut self, t: TopologyReport) {
        match t {
            TopologyReport::Update {
                observations,
                ports,
                cm_ids,
            } => {
                let first = !self.ready.topology;
                self.ready.topology = true;
                if !self.netlink_warned {
                    self.obs.source_ok(RDMA_NETLINK, clocks(self.now()));
                }
                let changed = self.ports != ports || self.cm_ids != cm_ids;
                self.ports = ports;
                self.cm_ids = cm_ids;
                let now = self.now();
                for obs in observations {
                    tracing::info!(observation = %obs.describe(), "RDMA topology");
                    if let Some(w) = self.witness.as_mut() {
                        w.observe(&obs);
                    }
                    self.driver.handle_observation(obs, Trust::Trusted, now);
                }
                if let Some(w) = self.witness.as_mut() {
                    w.sync(&self.ports.iter().map(|p| p.device.clone()).collect());
                }
                if changed || first {
                    // Sessions may now be placed differently; on the first report, the
                    // listing that completes the first scan (any earlier one was taken
                    // before the ports were known).
                    self.request_sessions();
                }
            }
            TopologyReport::NetlinkUnavailable(why) => {
                self.obs.source_failed(RDMA_NETLINK, why.clone());
                self.metrics
                    .source_up(crate::metrics::Source::Netlink, false);
                if !self.netlink_warned {
                    self.netlink_warned = true;
                    tracing::warn!(
                        "{why}; continuing on the kernel log and sysfs alone: stuck GSI QPs are \
                         then seen in kernel-log records only (sysfs has no QP table)"
                    );
                }
            }
        }
    }

    fn on_kmsg(&mut self, ev: KmsgEvent) {
        match ev {
            KmsgEvent::Record(r) => {
                self.obs.source_ok(KERNEL_LOG, clocks(self.now()));
                let Some(kev) = crate::core::signatures::classify_record(&r) else {
                    self.metrics.kmsg_record(None, true);
                    return;
                };
                let converted = from_kernel_event(&kev);
                self.metrics.kmsg_record(
                    Some(kev.signature.kind.name()),
                    converted.as_ref().is_none_or(|(_, t)| *t == Trust::Trusted),
                );
                let Some((obs, trust)) = converted else {
                    tracing::debug!(
                        kind = kev.signature.kind.name(),
                        "kernel log record with nothing to act on"
                    );
                    return;
                };
                let origin = if trust == Trust::Trusted {
                    "kernel".to_string()
                } else if self.settings.config.kmsg.trust_userspace_records {
                    format!(
                        "userspace (facility {}), trusted by kmsg.trust-userspace-records",
                        r.facility
                    )
                } else {
                    format!("userspace (facility {}), untrusted", r.facility)
                };
                tracing::info!(
                    seq = r.seq,
                    kind = kev.signature.kind.name(),
                    origin = %origin,
                    "kernel log: {}",
                    obs.describe()
                );
                let now = self.now();
                self.driver.handle_observation(obs, trust, now);
            }
            KmsgEvent::Lost {
                count,
                next_seq,
                overrun,
            } => {
                tracing::warn!(
                    ?count,
                    next_seq,
                    overrun,
                    "kernel-log records were lost; re-checking devices and sessions"
                );
                self.metrics.kmsg_lost(count);
                self.refresh_topology.raise();
                self.request_sessions();
            }
        }
    }

    /// Reads the configuration again (SIGHUP, or `iser-guard reload` on the control socket);
    /// `Err` carries why the new file was refused, and the old configuration stays in force.
    fn reload(&mut self) -> Result<String, String> {
        self.notifier.reloading();
        let path = self.settings.config_path.clone();
        let outcome = match crate::config::load_or_default(path.as_deref()) {
            Ok((cfg, source)) => {
                let cfg = effective(cfg, self.settings.force_dry_run);
                for w in cfg.warnings() {
                    tracing::warn!("configuration: {w}");
                }
                let now = self.now();
                self.driver.set_policy(cfg.policy(), now);
                self.ex = Executors::from_config(&cfg).with_selftest(port_selftest(&cfg));
                if let Some(w) = self.witness.as_mut() {
                    w.set_allow(cfg.devices.allow.iter().cloned().collect());
                }
                tracing::info!(%source, "SIGHUP: configuration reloaded");
                self.obs.note(
                    EventKind::Daemon,
                    format!("configuration reloaded from {source}"),
                    clocks(now),
                );
                self.settings.config = cfg;
                Ok(format!("configuration reloaded from {source}"))
            }
            Err(e) => {
                tracing::error!(
                    "SIGHUP: the new configuration is invalid; keeping the one in force: {e}"
                );
                for p in e.problems() {
                    tracing::error!("configuration problem: {p}");
                }
                Err(format!(
                    "the new configuration is refused; the one in force is kept: {e}"
                ))
            }
        };
        self.notifier.ready(&self.status);
        outcome
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
            let held = if self.driver.held_until_scan().is_some() {
                "automatic destructive actions held until the first complete scan"
            } else {
                "first complete scan done"
            };
            s.push_str(&format!(
                " (safe mode: started without its journal, which was {}; {held})",
                mode.kept_words()
            ));
        }
        if s != self.status {
            self.status = s;
            self.notifier.status(&self.status);
        }
    }

    fn port_phase(&self, id: &PortId) -> Option<Phase> {
        self.driver.engine().port(id).map(|p| p.phase())
    }

    fn check_pendings(&mut self) {
        let now = self.now();
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pendings) {
            let engine = self.driver.engine();
            let busy = self
                .inflight
                .values()
                .any(|port| port.as_ref().is_some_and(|id| p.ports.contains(id)))
                || (p.session_ops && engine.operator_session_ops() > 0);
            let phases: Vec<(PortId, Option<Phase>)> = p
                .ports
                .iter()
                .map(|id| (id.clone(), self.port_phase(id)))
                .collect();
            let settled = phases
                .iter()
                .all(|(_, ph)| matches!(ph, Some(Phase::Healthy | Phase::Quarantined) | None));
            if !busy && settled {
                let mut failed: Vec<String> = phases
                    .iter()
                    .filter(|(_, ph)| *ph == Some(Phase::Quarantined))
                    .map(|(id, _)| {
                        let why = self.driver.engine().port(id).map(|r| r.reason.clone());
                        format!("{id}: {}", why.unwrap_or_default())
                    })
                    .collect();
                if p.session_ops {
                    let all = self.driver.engine().operator_failures();
                    failed.extend(all.iter().skip(p.failures_before).cloned());
                }
                if failed.is_empty() {
                    done(
                        &p.sink,
                        true,
                        format!("{}: done, every port is healthy", p.what),
                        EXIT_OK,
                    );
                } else {
                    done(
                        &p.sink,
                        false,
                        format!("{}: failed: {}", p.what, failed.join("; ")),
                        EXIT_FINDING,
                    );
                }
            } else if now >= p.deadline {
                done(
                    &p.sink,
                    false,
                    format!(
                        "{}: still in progress after {} s; the daemon carries on, follow it in its log",
                        p.what,
                        OPERATOR_DEADLINE.as_secs()
                    ),
                    EXIT_TEMPFAIL,
                );
            } else {
                keep.push(p);
            }
        }
        self.pendings = keep;
    }

    /// Serves an operator request on the same engine.
    fn operator(&mut self, req: Request, sink: UnboundedSender<Reply>) {
        tracing::info!(request = ?req, "operator request");
        let now = self.now();
        if !matches!(req, Request::Status | Request::Events { .. }) {
            self.obs.note(
                EventKind::Operator,
                format!("operator: iser-guard {req}"),
                clocks(now),
            );
        }
        let (cmd, what, dry_run) = match req {
            Request::Status => {
                let safe = self.safe_mode.as_ref().map(|m| {
                    let kept = m.kept.as_ref().map(|p| p.display().to_string());
                    (m.problem.clone(), kept.map_err(Clone::clone))
                });
                let doc = self
                    .obs
                    .snapshot(&self.driver, &self.status, safe, clocks(now));
                let _ = sink.send(Reply::Done {
                    ok: true,
                    message: self.status.clone(),
                    exit_code: EXIT_OK,
                    detail: serde_json::to_value(doc).ok(),
                });
                return;
            }
            Request::Events { .. } => {
                done(
                    &sink,
                    false,
                    "events are answered by the daemon only",
                    EXIT_USAGE,
                );
                return;
            }
            Request::Reload => {
                match self.reload() {
                    Ok(msg) => done(&sink, true, msg, EXIT_OK),
                    Err(msg) => done(&sink, false, msg, EXIT_CONFIG),
                }
                return;
            }
            Request::Pause => (OperatorCommand::Pause, "pause".to_string(), false),
            Request::Resume => (OperatorCommand::Resume, "resume".to_string(), false),
            Request::Recover {
                device,
                port,
                dry_run,
            } => {
                let what = match port {
                    Some(n) => format!("recover {device}/{n}"),
                    None => format!("recover {device}"),
                };
                (OperatorCommand::Recover { device, port }, what, dry_run)
            }
            Request::ResetDevice { device, dry_run } => {
                let what = format!("reset-device {device}");
                (OperatorCommand::ResetDevice { device }, what, dry_run)
            }
            Request::Reconnect {
                target,
                portal,
                dry_run,
            } => {
                let portal = match portal.as_deref().map(parse_portal_arg).transpose() {
                    Ok(p) => p,
                    Err(e) => {
                        done(&sink, false, e, EXIT_USAGE);
                        return;
                    }
                };
                (
                    OperatorCommand::Reconnect { target, portal },
                    "reconnect".to_string(),
                    dry_run,
                )
            }
        };
        let destructive = !matches!(cmd, OperatorCommand::Pause | OperatorCommand::Resume);
        if !dry_run && destructive && self.settings.config.recovery.dry_run {
            progress(
                &sink,
                "the daemon runs in dry-run mode (recovery.dry-run or --dry-run): it changes \
                 nothing, so this is what it would do",
            );
        }
        if dry_run || (destructive && self.settings.config.recovery.dry_run) {
            self.dry_run(cmd, what, sink);
            return;
        }
        let failures_before = self.driver.engine().operator_failures().len();
        match self.driver.handle_command(cmd.clone(), now) {
            Err(e) => done(&sink, false, format!("{what}: refused: {e}"), EXIT_NOINPUT),
            Ok((command, msg)) => {
                tracing::info!(%command, "operator: {msg}");
                if matches!(cmd, OperatorCommand::Pause | OperatorCommand::Resume) {
                    done(&sink, true, msg, EXIT_OK);
                    return;
                }
                progress(&sink, msg);
                let ports = self.command_ports(&cmd);
                self.pendings.push(Pending {
                    sink,
                    ports,
                    session_ops: matches!(cmd, OperatorCommand::Reconnect { .. }),
                    failures_before,
                    deadline: now.plus(OPERATOR_DEADLINE),
                    what,
                });
            }
        }
    }

    fn command_ports(&self, cmd: &OperatorCommand) -> BTreeSet<PortId> {
        match cmd {
            OperatorCommand::Recover { device, port } => self
                .driver
                .engine()
                .ports()
                .filter(|p| &p.id.device == device && port.is_none_or(|n| p.id.port == n))
                .map(|p| p.id.clone())
                .collect(),
            OperatorCommand::ResetDevice { device } => self
                .driver
                .engine()
                .ports()
                .filter(|p| &p.id.device == device)
                .map(|p| p.id.clone())
                .collect(),
            OperatorCommand::Reconnect { target, portal } => self
                .driver
                .engine()
                .sessions()
                .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
                .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
                .map(|s| s.port.clone())
                .collect(),
            OperatorCommand::Pause | OperatorCommand::Resume => BTreeSet::new(),
        }
    }

    /// What a command would do, changing nothing.
    fn dry_run(&mut self, cmd: OperatorCommand, what: String, sink: UnboundedSender<Reply>) {
        match cmd {
            OperatorCommand::Recover { device, .. } | OperatorCommand::ResetDevice { device } => {
                let resetter = self.ex.resetter.clone();
                let sessions: Vec<String> = self
                    .driver
                    .engine()
                    .sessions()
                    .filter(|s| s.port.device == device)
                    .map(|s| s.key.to_string())
                    .collect();
                let remembered = self
                    .driver
                    .engine()
                    .devices()
                    .find(|d| d.name == device)
                    .and_then(|d| d.remembered.clone());
                let busy = sink.clone();
                let job = move || match resetter.plan_from(&device, remembered.as_ref()) {
                    Ok(plan) => {
                        progress(
                            &sink,
                            format!("dry run: would re-create {device}, trying in order:"),
                        );
                        for m in &plan.methods {
                            progress(&sink, format!("  {}:", m.method));
                            for s in &m.steps {
                                progress(&sink, format!("    {s}"));
                            }
                        }
                        for s in &plan.skipped {
                            progress(&sink, format!("  not applicable: {s}"));
                        }
                        for s in &sessions {
                            progress(&sink, format!("then reconnect if still down: {s}"));
                        }
                        done(
                            &sink,
                            true,
                            format!("{what}: dry run, nothing was changed"),
                            EXIT_OK,
                        );
                    }
                    Err(e) => done(&sink, false, format!("{what}: {e}"), e.exit_code()),
                };
                if let Err(full) = self.pool.submit(job) {
                    done(
                        &busy,
                        false,
                        format!("busy: {full}; try again"),
                        EXIT_TEMPFAIL,
                    );
                }
            }
            OperatorCommand::Reconnect { target, portal } => {
                let keys: Vec<String> = self
                    .driver
                    .engine()
                    .sessions()
                    .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
                    .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
                    .map(|s| s.key.to_string())
                    .collect();
                if keys.is_empty() {
                    done(
                        &sink,
                        false,
                        "no iSCSI session matches; `iscsiadm -m session` lists the sessions",
                        EXIT_NOINPUT,
                    );
                    return;
                }
                for k in keys {
                    progress(&sink, format!("dry run: would log out and in {k}"));
                }
                done(
                    &sink,
                    true,
                    format!("{what}: dry run, nothing was changed"),
                    EXIT_OK,
                );
            }
            OperatorCommand::Pause | OperatorCommand::Resume => {
                done(&sink, true, format!("dry run: would {what}"), EXIT_OK)
            }
        }
    }
}

/// `ip`, `ip:port`, `[v6]:port` → the engine's portal (port 3260 when none is given).
pub fn parse_portal_arg(s: &str) -> Result<Portal, String> {
    let addr = crate::io::probe::parse_portal(s, crate::io::probe::ISCSI_PORT)
        .map_err(|e| e.to_string())?;
    Ok(Portal::from(addr))
}

#[cfg(test)]
mod tests {
    //! The loop driven in-process through its injected dependencies: a kernel log fed by the
    //! test, a topology source that reports one E810 port, a stateful iscsiadm double, the
    //! scripted prober and resetter.

    use std::sync::Mutex;

    use super::*;
    use crate::core::iscsi::NodeId;
    use crate::core::kmsg::Record;
    use crate::daemon::sources::{BootClock, BoxFuture};
    use crate::io::executors::Doubles;
    use crate::io::iscsiadm::{
        IscsiAdm, IscsiadmError, LoginOutcome, LogoutOutcome, NodeOutcome, SessionListing,
    };
    use crate::io::kmsg::KmsgError;
    use crate::io::probe::TcpAnswer;

    struct ChannelLog(UnboundedReceiver<KmsgEvent>);
    impl KernelLog for ChannelLog {
        fn next(&mut self) -> BoxFuture<'_, Result<KmsgEvent, KmsgError>> {
            Box::pin(async move { self.0.recv().await.ok_or(KmsgError::Closed) })
        }
        fn save_cursor(&mut self, _: Duration) {}
    }

    struct OnePort;
    impl TopologySource for OnePort {
        fn start(
            self: Box<Self>,
            tx: UnboundedSender<TopologyReport>,
            _: Arc<Signal>,
            _: Arc<Signal>,
        ) {
            let _ = tx.send(TopologyReport::NetlinkUnavailable("no RDMA netlink".into()));
            let _ = tx.send(TopologyReport::Update {
                observations: vec![crate::core::recovery::Observation::DeviceAppeared {
                    device: "rocep2s0f0".into(),
                    parent: Some("0000:02:00.0".into()),
                    driver: Some("irdma".into()),
                    ports: 1,
                }],
                ports: vec![RdmaPortNetdev {
                    device: "rocep2s0f0".into(),
                    port: 1,
                    netdev: "ens1f0".into(),
                }],
                cm_ids: Vec::new(),
            });
        }
    }

    /// One session whose state follows logins and logouts.
    struct Host {
        state: Mutex<&'static str>,
        logins: Mutex<Vec<NodeId>>,
    }
    impl IscsiAdm for Host {
        fn sessions(&self, _: bool) -> Result<SessionListing, IscsiadmError> {
            let text = match *self.state.lock().unwrap() {
                "LOGGED_IN" => {
                    include_str!("../../tests/fixtures/stubs/iscsiadm.d/session-P3-loggedin.txt")
                }
                "FAILED" => {
                    include_str!("../../tests/fixtures/stubs/iscsiadm.d/session-P3-failed.txt")
                }
                _ => return Ok(SessionListing::NoSessions),
            };
            // The iface bound to the initiator's address, as `iscsiadm -m iface` would set it.
            Ok(SessionListing::Text(text.replace(
                "Iface IPaddress: [default]",
                "Iface IPaddress: 192.0.2.1",
            )))
        }
        fn login(&self, node: &NodeId) -> Result<LoginOutcome, IscsiadmError> {
            self.logins.lock().unwrap().push(node.clone());
            *self.state.lock().unwrap() = "LOGGED_IN";
            Ok(LoginOutcome::LoggedIn)
        }
        fn logout(&self, _: &NodeId) -> Result<LogoutOutcome, IscsiadmError> {
            *self.state.lock().unwrap() = "NONE";
            Ok(LogoutOutcome::LoggedOut)
        }
        fn rescan(&self, _: u32) -> Result<(), IscsiadmError> {
            Ok(())
        }
        fn create_node(&self, _: &NodeId) -> Result<NodeOutcome, IscsiadmError> {
            Ok(NodeOutcome::Written)
        }
        fn update_node(&self, _: &NodeId, _: &str, _: &str) -> Result<NodeOutcome, IscsiadmError> {
            Ok(NodeOutcome::Written)
        }
    }

    fn config(state: &std::path::Path, trust: bool) -> Config {
        crate::config::parse_str(&config_text(state, trust)).unwrap()
    }

    fn config_text(state: &std::path::Path, trust: bool) -> String {
        format!(
            "[paths]\nstate-dir = {:?}\ncontrol-socket = {:?}\n[poll]\niscsi = 0.2\nprobe = 0.1\n\
             [devices]\nallow = [\"rocep2s0f0\"]\n[recovery]\nprobe-successes = 2\n\
             probe-timeout = 0.1\niscsid-grace = 0.2\n[kmsg]\ntrust-userspace-records = {trust}\n",
            state.display().to_string(),
            state.join("control.sock").display().to_string(),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stuck_gsi_record_recreates_the_device_and_the_session_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), false);
        let doubles = Doubles::default();
        let portal: std::net::SocketAddr = "192.0.2.2:3260".parse().unwrap();
        doubles.prober.push(
            portal,
            std::iter::repeat_n(
                TcpAnswer::Reachable {
                    rtt: Duration::from_millis(1),
                },
                50,
            ),
        );
        let host = Arc::new(Host {
            state: Mutex::new("LOGGED_IN"),
            logins: Mutex::new(Vec::new()),
        });
        let mut ex = doubles.executors(&cfg);
        ex.iscsi = host.clone();
        let (log_tx, log_rx) = unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let deps = Deps {
            kernel_log: Some(Box::new(ChannelLog(log_rx))),
            topology: Box::new(OnePort),
            executors: ex,
            clock: Arc::new(BootClock),
            notifier: Notifier::silent(),
            addresses: Arc::new(|| {
                Ok(vec![NetdevAddr {
                    netdev: "ens1f0".into(),
                    ip: "192.0.2.1".parse().unwrap(),
                }])
            }),
            routes: Arc::new(|_| Err("no route in this test".into())),
            control: None,
            shutdown: Some(stop_rx),
            async_events: None,
        };
        let settings = Settings {
            config: cfg,
            config_path: None,
            force_dry_run: false,
            take_lock: true,
            automatic_actions: true,
        };
        let daemon = tokio::spawn(run(settings, deps, Mode::Daemon));
        // A forged (userspace) record first: ignored with the default config.
        let forged = "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";
        let rec = |facility: u32| {
            Record::parse(format!("{},10,100,-;{forged}", facility * 8 + 3).as_bytes()).unwrap()
        };
        log_tx.send(KmsgEvent::Record(rec(1))).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(doubles.resetter.calls().is_empty());
        // The kernel's own record: the target is away, then back.
        *host.state.lock().unwrap() = "FAILED";
        log_tx.send(KmsgEvent::Record(rec(0))).unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while doubles.resetter.calls().is_empty() {
            assert!(std::time::Instant::now() < end, "no re-creation");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            doubles.resetter.calls(),
            vec![("rocep2s0f0".to_string(), false)]
        );
        // iscsid logs the FAILED session back in by itself once QP 1 is fresh (as on the
        // real kernel); the engine never logs out a session iscsid still holds (issue 9.6).
        *host.state.lock().unwrap() = "LOGGED_IN";
        while !doubles
            .alerts
            .alerts()
            .iter()
            .any(|a| a.what.contains("storage is back"))
        {
            assert!(std::time::Instant::now() < end, "storage never back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            host.logins.lock().unwrap().is_empty(),
            "logged a held session in"
        );
        let probes = doubles.prober.calls();
        assert!(probes.len() >= 2);
        // Probes leave from the session's iface address (placed on ens1f0 → rocep2s0f0/1).
        assert!(probes
            .iter()
            .all(|(_, src)| src.local_ip == Some("192.0.2.1".parse().unwrap())));
        let alerts = doubles.alerts.alerts();
        assert!(
            alerts
                .iter()
                .any(|a| a.what.contains("re-creating RDMA device rocep2s0f0")),
            "{alerts:#?}"
        );
        // The journal was written ahead of the re-creation and names the device.
        let journal = std::fs::read_to_string(Journal::new(dir.path()).path()).unwrap();
        assert!(journal.contains("rocep2s0f0"));
        stop_tx.send(()).unwrap();
        let code = tokio::time::timeout(Duration::from_secs(5), daemon)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(code, EXIT_OK);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dry_run_daemon_plans_the_recreation_through_the_driver_and_never_calls_the_resetter()
    {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path(), false);
        cfg.recovery.dry_run = true;
        let doubles = Doubles::default();
        let portal: std::net::SocketAddr = "192.0.2.2:3260".parse().unwrap();
        doubles.prober.push(
            portal,
            std::iter::repeat_n(
                TcpAnswer::Reachable {
                    rtt: Duration::from_millis(1),
                },
                50,
            ),
        );
        let host = Arc::new(Host {
            state: Mutex::new("FAILED"),
            logins: Mutex::new(Vec::new()),
        });
        let mut ex = doubles.executors(&cfg);
        ex.iscsi = host.clone();
        let (log_tx, log_rx) = unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let deps = Deps {
            kernel_log: Some(Box::new(ChannelLog(log_rx))),
            topology: Box::new(OnePort),
            executors: ex,
            clock: Arc::new(BootClock),
            notifier: Notifier::silent(),
            addresses: Arc::new(|| {
                Ok(vec![NetdevAddr {
                    netdev: "ens1f0".into(),
                    ip: "192.0.2.1".parse().unwrap(),
                }])
            }),
            routes: Arc::new(|_| Err("no route in this test".into())),
            control: None,
            shutdown: Some(stop_rx),
            async_events: None,
        };
        let settings = Settings {
            config: cfg,
            config_path: None,
            force_dry_run: false,
            take_lock: true,
            automatic_actions: true,
        };
        let daemon = tokio::spawn(run(settings, deps, Mode::Daemon));
        let line = "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";
        let rec = Record::parse(format!("3,10,100,-;{line}").as_bytes()).unwrap();
        log_tx.send(KmsgEvent::Record(rec)).unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let planned = doubles.alerts.alerts().iter().any(|a| {
                a.what
                    .contains("dry-run: would re-create RDMA device rocep2s0f0")
            });
            if planned {
                break;
            }
            assert!(std::time::Instant::now() < end, "no dry-run plan alert");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Planned, not run: no executor touched the device or the sessions.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(doubles.resetter.calls().is_empty());
        assert!(host.logins.lock().unwrap().is_empty());
        assert!(!doubles
            .alerts
            .alerts()
            .iter()
            .any(|a| a.what.contains("not re-created") || a.what.contains("quarantined")));
        stop_tx.send(()).unwrap();
        let code = tokio::time::timeout(Duration::from_secs(5), daemon)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(code, EXIT_OK);
    }

    /// The loop on doubles with one healthy session, a control socket in `dir`, started on
    /// whatever journal `dir` holds. Returns the daemon task, its stop switch and the doubles.
    fn start_on(
        dir: &std::path::Path,
    ) -> (
        tokio::task::JoinHandle<Result<u8, Error>>,
        tokio::sync::oneshot::Sender<()>,
        Doubles,
        Config,
    ) {
        start_on_with(dir, None)
    }

    /// [`start_on`], reloading from `config_path` (`None`: the default path).
    fn start_on_with(
        dir: &std::path::Path,
        config_path: Option<std::path::PathBuf>,
    ) -> (
        tokio::task::JoinHandle<Result<u8, Error>>,
        tokio::sync::oneshot::Sender<()>,
        Doubles,
        Config,
    ) {
        let (daemon, stop, doubles, cfg, log_tx) = start_with_log(dir, config_path);
        std::mem::forget(log_tx);
        (daemon, stop, doubles, cfg)
    }

    /// A running test daemon: its task, its stop, its doubles, its configuration and the
    /// kernel log's sender.
    type Started = (
        tokio::task::JoinHandle<Result<u8, Error>>,
        tokio::sync::oneshot::Sender<()>,
        Doubles,
        Config,
        UnboundedSender<KmsgEvent>,
    );

    /// [`start_on_with`], keeping the kernel log's sender to feed records.
    fn start_with_log(dir: &std::path::Path, config_path: Option<std::path::PathBuf>) -> Started {
        let cfg = config(dir, false);
        let doubles = Doubles::default();
        let host = Arc::new(Host {
            state: Mutex::new("LOGGED_IN"),
            logins: Mutex::new(Vec::new()),
        });
        let mut ex = doubles.executors(&cfg);
        ex.iscsi = host;
        let (log_tx, log_rx) = unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let deps = Deps {
            kernel_log: Some(Box::new(ChannelLog(log_rx))),
            topology: Box::new(OnePort),
            executors: ex,
            clock: Arc::new(BootClock),
            notifier: Notifier::silent(),
            addresses: Arc::new(|| {
                Ok(vec![NetdevAddr {
                    netdev: "ens1f0".into(),
                    ip: "192.0.2.1".parse().unwrap(),
                }])
            }),
            routes: Arc::new(|_| Err("no route in this test".into())),
            control: Some(ControlServer::bind(&cfg.paths.control_socket).unwrap()),
            shutdown: Some(stop_rx),
            async_events: None,
        };
        let settings = Settings {
            config: cfg.clone(),
            config_path,
            force_dry_run: false,
            take_lock: true,
            automatic_actions: true,
        };
        (
            tokio::spawn(run(settings, deps, Mode::Daemon)),
            stop_tx,
            doubles,
            cfg,
            log_tx,
        )
    }

    /// A kernel oops in ib_iser read from the kernel log reaches the operator through the
    /// alert path at `alerts.severity-operator` (not only the daemon's log), and status
    /// shows the re-creation hold; a forged copy raises nothing of the kind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_kernel_oops_is_an_operator_alert_and_a_hold_in_status() {
        let dir = tempfile::tempdir().unwrap();
        let (daemon, stop, doubles, cfg, log_tx) = start_with_log(dir.path(), None);
        status(&cfg).await;
        let oops = "RIP: 0010:iser_conn_terminate+0x1c/0x90 [ib_iser]";
        // Facility 1 (user): written into /dev/kmsg by a process.
        let forged = Record::parse(format!("12,9,90,-;{oops}").as_bytes()).unwrap();
        log_tx.send(KmsgEvent::Record(forged)).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !doubles
                .alerts
                .alerts()
                .iter()
                .any(|a| a.what.starts_with("kernel bug:")),
            "{:#?}",
            doubles.alerts.alerts()
        );
        // Facility 0, level 4: the kernel's own register dump line.
        let rec = Record::parse(format!("4,10,100,-;{oops}").as_bytes()).unwrap();
        log_tx.send(KmsgEvent::Record(rec)).unwrap();
        let alerts = alerts_once(&doubles.alerts, |a| a.what.starts_with("kernel bug:")).await;
        let a = alerts
            .iter()
            .find(|a| a.what.starts_with("kernel bug:"))
            .unwrap_or_else(|| panic!("{alerts:#?}"));
        assert_eq!(a.severity, cfg.alerts.severity_operator);
        assert!(a.what.contains("ib_iser"), "{a:?}");
        assert!(a.what.contains("iser_conn_terminate"), "{a:?}");
        let st = status(&cfg).await;
        let bugs = st["detail"]["daemon"]["kernel_bugs"].to_string();
        assert!(bugs.contains("kernel oops in ib_iser"), "{st:#}");
        let holds = st["detail"]["ports"][0]["holds"].to_string();
        assert!(holds.contains("kernel-bug"), "{st:#}");
        stop.send(()).unwrap();
        daemon.await.unwrap().unwrap();
    }

    /// `iser-guard status` through the control socket, once the daemon answers.
    async fn status(cfg: &Config) -> serde_json::Value {
        let path = cfg.paths.control_socket.clone();
        let end = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let p = path.clone();
            let r = tokio::task::spawn_blocking(move || {
                crate::io::control::request(&p, &Request::Status, Duration::from_secs(5), |_| {})
            })
            .await
            .unwrap();
            match r {
                Ok(Reply::Done {
                    message, detail, ..
                }) => {
                    return serde_json::json!({ "message": message, "detail": detail });
                }
                other => {
                    assert!(std::time::Instant::now() < end, "no status: {other:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// `iser-guard reload` (what the unit's ExecReload runs) gets the daemon's verdict: a
    /// refused file is an error with its problem and exit 78, and the old file stays in force.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reload_over_the_control_socket_reports_a_refused_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, config_text(dir.path(), false)).unwrap();
        let (daemon, stop, _doubles, cfg) = start_on_with(dir.path(), Some(file.clone()));
        status(&cfg).await;
        let reload = |path: std::path::PathBuf| {
            tokio::task::spawn_blocking(move || {
                crate::io::control::request(&path, &Request::Reload, Duration::from_secs(5), |_| {})
            })
        };
        let sock = cfg.paths.control_socket.clone();
        match reload(sock.clone()).await.unwrap() {
            Ok(Reply::Done {
                ok: true,
                exit_code: 0,
                message,
                ..
            }) => {
                assert!(message.contains("reloaded"), "{message}")
            }
            other => panic!("a valid file was not reloaded: {other:?}"),
        }
        let bad = config_text(dir.path(), false)
            .replace("[recovery]\n", "[recovery]\nmax-attempts = 0\n");
        std::fs::write(&file, &bad).unwrap();
        match reload(sock.clone()).await.unwrap() {
            Ok(Reply::Done {
                ok: false,
                exit_code,
                message,
                ..
            }) => {
                assert_eq!(exit_code, EXIT_CONFIG);
                assert!(message.contains("max-attempts"), "{message}");
                assert!(message.contains("kept"), "{message}");
            }
            other => panic!("a refused file was reported as {other:?}"),
        }
        // Still serving, on the configuration it had.
        status(&cfg).await;
        stop.send(()).unwrap();
        let code = tokio::time::timeout(Duration::from_secs(5), daemon)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(code, EXIT_OK);
    }

    /// The alerts sent so far, once one matches `wanted` (or after 5 s): the alert thread
    /// sends them after the loop decided, so they may arrive after a status answer.
    async fn alerts_once(
        sink: &crate::io::syslog::RecordingSink,
        wanted: impl Fn(&crate::io::syslog::Alert) -> bool,
    ) -> Vec<crate::io::syslog::Alert> {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let alerts = sink.alerts();
            if alerts.iter().any(&wanted) || std::time::Instant::now() >= end {
                return alerts;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn kept_files(dir: &std::path::Path, what: &str) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("engine-journal.json.{what}-")))
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_corrupt_journal_is_kept_aside_and_the_daemon_runs_in_safe_mode() {
        let dir = tempfile::tempdir().unwrap();
        let corrupt = b"{\"version\": 1, \"ports\": [tru".to_vec();
        std::fs::write(Journal::new(dir.path()).path(), &corrupt).unwrap();
        let (daemon, stop, doubles, cfg) = start_on(dir.path());
        let st = status(&cfg).await;
        // Running, and it says so.
        let message = st["message"].as_str().unwrap();
        assert!(message.contains("safe mode"), "{st:#}");
        let safe = &st["detail"]["safe_mode"];
        let kept = PathBuf::from(safe["journal_kept"].as_str().unwrap());
        assert!(
            safe["problem"].as_str().unwrap().contains("corrupt"),
            "{st:#}"
        );
        // The file is kept, byte for byte, under a UTC-stamped name.
        assert_eq!(kept_files(dir.path(), "corrupt"), vec![kept.clone()]);
        assert_eq!(std::fs::read(&kept).unwrap(), corrupt);
        // One operator-severity alert names the kept file.
        let alerts = alerts_once(&doubles.alerts, |a| a.what.contains("safe mode")).await;
        let a = alerts
            .iter()
            .find(|a| a.what.contains("safe mode"))
            .unwrap_or_else(|| panic!("{alerts:#?}"));
        assert_eq!(a.severity, cfg.alerts.severity_operator);
        assert!(a.message().contains(&kept.display().to_string()), "{a:?}");
        // The first scan (one port, one session from iscsiadm) lifts the hold.
        let end = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let st = status(&cfg).await;
            if st["detail"]["safe_mode"]["held_until_first_scan"] == false {
                break;
            }
            assert!(std::time::Instant::now() < end, "hold never lifted: {st:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.send(()).unwrap();
        let code = tokio::time::timeout(Duration::from_secs(5), daemon)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(code, EXIT_OK);
        // A fresh journal was written at shutdown; the kept one is untouched.
        assert!(Journal::new(dir.path()).load().unwrap().is_some());
        assert_eq!(std::fs::read(&kept).unwrap(), corrupt);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_newer_journal_is_kept_aside_and_its_version_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            Journal::new(dir.path()).path(),
            br#"{"version": 999, "ports": []}"#,
        )
        .unwrap();
        let (daemon, stop, doubles, cfg) = start_on(dir.path());
        let st = status(&cfg).await;
        let problem = st["detail"]["safe_mode"]["problem"].as_str().unwrap();
        assert!(problem.contains("format version 999"), "{st:#}");
        assert_eq!(kept_files(dir.path(), "v999").len(), 1);
        let alerts = alerts_once(&doubles.alerts, |a| {
            a.message().contains("format version 999")
        })
        .await;
        assert!(
            alerts
                .iter()
                .any(|a| a.message().contains("format version 999")
                    && a.message().contains("engine-journal.json.v999-")),
            "{alerts:#?}"
        );
        stop.send(()).unwrap();
        let code = tokio::time::timeout(Duration::from_secs(5), daemon)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(code, EXIT_OK);
    }
}
