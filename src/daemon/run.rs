//! The event loop: kernel log, RDMA topology, iscsiadm snapshots, timers, operator requests
//! and signals in; the engine's actions out, executed in order with the journal written
//! ahead of anything destructive.
//!
//! Every dependency comes in through [`Deps`] (kernel log, topology source, executors, clock,
//! notifier, address list, control socket), so tests drive the loop with doubles and
//! production picks the real ones explicitly ([`Deps::real`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::config::Config;
use crate::core::iscsi::{Parsed, SessionDetail};
use crate::core::recovery::{
    from_kernel_event, ActionId, ActionKind, Engine, OperatorCommand, Outcome, Phase, PortId,
    Portal, Trust,
};
use crate::core::session_map::{NetdevAddr, RdmaPortNetdev};
use crate::daemon::exec::{execute, syslog_alert, Executed};
use crate::daemon::notify::Notifier;
use crate::daemon::sessions::map_sessions;
use crate::daemon::sources::{Clock, KernelLog, Signal, TopologyReport, TopologySource};
use crate::error::{Error, EXIT_FINDING, EXIT_NOINPUT, EXIT_OK, EXIT_TEMPFAIL, EXIT_USAGE};
use crate::io::control::{ControlConnection, ControlServer, Reply, Request};
use crate::io::executors::Executors;
use crate::io::journal::Journal;
use crate::io::kmsg::KmsgEvent;

/// Lists the host's interface addresses (for placing sessions on RDMA ports).
pub type AddressLister = Arc<dyn Fn() -> std::io::Result<Vec<NetdevAddr>> + Send + Sync>;

/// Builds a device resetter for an operator command on a device outside `devices.allow`:
/// the operator's word overrides the allow-list for the device named.
pub type OperatorResetter =
    Arc<dyn Fn(&Config, &str) -> Arc<dyn crate::io::reset::DeviceResetter> + Send + Sync>;

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
    /// The control socket; `None` for the standalone manual commands.
    pub control: Option<ControlServer>,
    /// The resetter for operator commands on devices outside `devices.allow` (`None`: the
    /// executors' own resetter, which may refuse them).
    pub operator_resetter: Option<OperatorResetter>,
    /// Stops the loop like SIGTERM when it receives (tests; `None` in production, where
    /// the signals do it).
    pub shutdown: Option<tokio::sync::oneshot::Receiver<()>>,
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
    /// they run the operator's command only (automatic ones are reported "not run" to the
    /// engine and left to the daemon), so nothing is cut short when they exit.
    pub automatic_actions: bool,
}

impl Deps {
    /// The real dependencies for `cfg`. `daemon`: open the kernel log and bind the control
    /// socket (the standalone commands do neither). Must be called inside a tokio runtime.
    pub fn real(cfg: &Config, daemon: bool) -> Result<Deps, Error> {
        use crate::daemon::sources::{BootClock, HostTopology, KmsgLog};
        let (kernel_log, control) = if daemon {
            let reader =
                crate::io::kmsg::open(&crate::io::kmsg::OpenOptions::from_paths(&cfg.paths))?;
            let control = ControlServer::bind(&cfg.paths.control_socket)
                .map_err(|e| Error::Usage(format!("cannot open the control socket: {e}")))?;
            (
                Some(Box::new(KmsgLog(reader)) as Box<dyn KernelLog>),
                Some(control),
            )
        } else {
            (None, None)
        };
        Ok(Deps {
            kernel_log,
            topology: Box::new(HostTopology {
                sysfs_root: cfg.paths.sysfs_root.clone(),
                interval: cfg.poll.netlink,
                netlink: crate::daemon::sources::NetlinkAccess::Kernel,
            }),
            executors: Executors::from_config(cfg),
            clock: Arc::new(BootClock),
            notifier: if daemon {
                Notifier::from_env()
            } else {
                Notifier::silent()
            },
            addresses: Arc::new(crate::io::netif::addresses),
            control,
            operator_resetter: Some(Arc::new(|cfg: &Config, device: &str| {
                let mut rc = crate::io::reset::ResetConfig::from_config(cfg);
                if !rc.allow.iter().any(|a| a == device) {
                    rc.allow.push(device.to_string());
                }
                Arc::new(crate::io::reset::SysfsResetter::new(rc))
                    as Arc<dyn crate::io::reset::DeviceResetter>
            })),
            shutdown: None,
        })
    }
}

struct Finished {
    id: ActionId,
    executed: Executed,
}

struct Pending {
    sink: UnboundedSender<Reply>,
    ports: BTreeSet<PortId>,
    deadline: crate::core::time::Instant,
    what: String,
}

#[derive(Default)]
struct Ready {
    topology: bool,
    sessions: bool,
    sent: bool,
}

struct Loop {
    engine: Engine,
    settings: Settings,
    ex: Executors,
    clock: Arc<dyn Clock>,
    notifier: Notifier,
    addresses: AddressLister,
    journal: Journal,
    ports: Vec<RdmaPortNetdev>,
    done_tx: UnboundedSender<Finished>,
    sessions_tx: UnboundedSender<Result<Parsed<SessionDetail>, String>>,
    sessions_inflight: bool,
    sessions_again: bool,
    last_sessions_error: Option<String>,
    refresh_topology: Arc<Signal>,
    inflight: BTreeMap<ActionId, Option<PortId>>,
    /// Each portal's local address, from the last session snapshot (probe source).
    probe_from: BTreeMap<Portal, std::net::IpAddr>,
    pendings: Vec<Pending>,
    operator_resetter: Option<OperatorResetter>,
    syslog_warned: Arc<AtomicBool>,
    netlink_warned: bool,
    ready: Ready,
    status: String,
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
    let engine = match journal.load()? {
        Some(snap) => {
            tracing::info!(
                journal = %journal.path().display(),
                "resuming from the journal"
            );
            Engine::resume(snap, policy, now).map_err(|e| Error::Data(e.to_string()))?
        }
        None => {
            tracing::info!("no journal yet: starting afresh");
            Engine::new(policy, u64::from(std::process::id()) ^ now.as_millis())
        }
    };
    let (done_tx, mut done_rx) = unbounded_channel();
    let (sessions_tx, mut sessions_rx) = unbounded_channel();
    let (topo_tx, mut topo_rx) = unbounded_channel();
    let refresh = Arc::new(Signal::default());
    let stop = Arc::new(Signal::default());
    deps.topology.start(topo_tx, refresh.clone(), stop.clone());
    let (ctrl_tx, mut ctrl_rx) = unbounded_channel::<(ControlConnection, Request)>();
    let control_task = deps.control.map(|server| {
        tracing::info!(socket = %server.path().display(), "control socket open");
        tokio::spawn(accept_loop(server, ctrl_tx))
    });
    let mut kernel_log = deps.kernel_log;
    let mut shutdown = deps.shutdown;
    let poll_iscsi = settings.config.poll.iscsi;
    let mut lp = Loop {
        engine,
        ex: deps.executors,
        clock: deps.clock,
        notifier: deps.notifier,
        addresses: deps.addresses,
        journal,
        ports: Vec::new(),
        done_tx,
        sessions_tx,
        sessions_inflight: false,
        sessions_again: false,
        last_sessions_error: None,
        refresh_topology: refresh,
        inflight: BTreeMap::new(),
        probe_from: BTreeMap::new(),
        pendings: Vec::new(),
        operator_resetter: deps.operator_resetter,
        syslog_warned: Arc::new(AtomicBool::new(false)),
        netlink_warned: false,
        ready: Ready::default(),
        status: String::new(),
        settings,
    };
    let (mut one_shot, one_shot_mode) = match mode {
        Mode::Daemon => (None, false),
        Mode::OneShot(req, sink) => (Some((req, sink)), true),
    };
    let mut command_issued = false;

    let mut sigterm = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sigint = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sighup = signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut session_tick = tokio::time::interval(poll_iscsi);
    session_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let watchdog = crate::daemon::notify::watchdog_interval();
    let mut watchdog_tick =
        tokio::time::interval(watchdog.map_or(Duration::from_secs(3600), |w| {
            (w / 2).max(Duration::from_millis(100))
        }));
    let mut exit_code = EXIT_OK;

    loop {
        lp.pump();
        lp.check_pendings();
        lp.update_status();
        if !lp.ready.sent && lp.ready.topology && lp.ready.sessions {
            lp.ready.sent = true;
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
            .engine
            .next_timeout()
            .map_or(Duration::from_secs(3600), |t| t.since(now));
        let kmsg_next = async {
            match kernel_log.as_mut() {
                Some(k) => Some(k.next().await),
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
            _ = sighup.recv() => lp.reload(),
            ev = kmsg_next => match ev {
                Some(Ok(ev)) => lp.on_kmsg(ev),
                Some(Err(e)) => {
                    tracing::error!("the kernel log failed: {e}; continuing on RDMA netlink, sysfs and iscsiadm alone");
                    kernel_log = None;
                }
                None => {}
            },
            Some(f) = done_rx.recv() => lp.on_finished(f),
            Some(s) = sessions_rx.recv() => lp.on_sessions(s),
            Some(t) = topo_rx.recv() => lp.on_topology(t),
            Some((conn, req)) = ctrl_rx.recv() => {
                let sink = reply_task(conn);
                lp.operator(req, sink);
            }
            _ = tokio::time::sleep(sleep) => {
                let now = lp.clock.now();
                lp.engine.handle_timeout(now);
            }
            _ = session_tick.tick() => lp.request_sessions(),
            _ = watchdog_tick.tick(), if watchdog.is_some() => lp.notifier.watchdog(),
        }
    }

    // Shutdown: bounded, never waiting for in-flight executors (their children are killed
    // with their process groups when the runtime drops them or on their own timeout).
    lp.notifier.stopping();
    stop.raise();
    for p in lp.pendings.drain(..) {
        let _ = p.sink.send(Reply::Done {
            ok: false,
            message: format!("{}: interrupted, the recovery did not finish", p.what),
            exit_code: EXIT_TEMPFAIL,
            detail: None,
        });
    }
    if let Err(e) = lp.journal.save(&lp.engine.snapshot()) {
        tracing::error!("cannot write the journal at shutdown: {e}");
    }
    if let Some(k) = kernel_log.as_mut() {
        k.save_cursor(Duration::from_millis(500));
    }
    kill_children();
    if let Some(t) = control_task {
        t.abort();
        let _ = t.await;
    }
    // Let reply tasks flush their last line.
    tokio::time::sleep(Duration::from_millis(20)).await;
    tracing::info!("stopped");
    Ok(exit_code)
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

    /// Drains the engine's actions (executing them in order) and transitions.
    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            let mut persist_failed: Option<String> = None;
            while let Some(action) = self.engine.poll_action() {
                progressed = true;
                let port = action.port.clone();
                tracing::info!(
                    action = %action,
                    id = %action.id,
                    origin = ?action.origin,
                    why = %action.reason,
                    "decided"
                );
                if let Some(reason) = &persist_failed {
                    if action.kind.is_destructive() {
                        tracing::error!(action = %action, "not run: the journal could not be written");
                        let now = self.now();
                        self.engine.handle_outcome(
                            action.id,
                            Outcome::NotRun {
                                reason: reason.clone(),
                            },
                            now,
                        );
                        continue;
                    }
                }
                if !self.settings.automatic_actions
                    && action.kind.is_destructive()
                    && action.origin == crate::core::recovery::Origin::Automatic
                {
                    tracing::info!(action = %action, "not run: a standalone manual command leaves automatic actions to the daemon");
                    let now = self.now();
                    self.engine.handle_outcome(
                        action.id,
                        Outcome::NotRun {
                            reason: "a standalone manual command leaves automatic actions to \
                                     the daemon"
                                .into(),
                        },
                        now,
                    );
                    continue;
                }
                match &action.kind {
                    ActionKind::PersistState { reason } => {
                        if let Err(e) = self.journal.save(&self.engine.snapshot()) {
                            tracing::error!("cannot write the journal ({reason}): {e}");
                            let now = self.now();
                            self.engine.handle_outcome(
                                action.id,
                                Outcome::PersistFailed {
                                    reason: e.to_string(),
                                },
                                now,
                            );
                            persist_failed = Some(format!("the journal could not be written: {e}"));
                        }
                    }
                    ActionKind::Alert(alert) => {
                        tracing::warn!(
                            severity = %alert.severity,
                            count = alert.count,
                            remedy = alert.remedy.as_deref().unwrap_or(""),
                            "ALERT {}: {}",
                            alert.summary,
                            alert.detail
                        );
                        self.tell(port.as_ref(), &format!("alert: {}", alert.summary));
                        if let Some(sink) = self.ex.alerts.clone() {
                            let msg = syslog_alert(alert, &self.settings.config.alerts);
                            let warned = self.syslog_warned.clone();
                            tokio::task::spawn_blocking(move || {
                                if let Err(e) = sink.send(&msg) {
                                    if !e.is_unavailable() {
                                        tracing::warn!("{e}");
                                    } else if !warned.swap(true, Ordering::Relaxed) {
                                        tracing::warn!("{e}");
                                    }
                                }
                            });
                        }
                    }
                    ActionKind::RefreshSessions => self.request_sessions(),
                    ActionKind::RefreshTopology => self.refresh_topology.raise(),
                    _ => {
                        self.tell(port.as_ref(), &format!("running: {action}"));
                        self.inflight.insert(action.id, port);
                        let mut ex = self.ex.clone();
                        if let (
                            ActionKind::RecreateDevice { device, .. },
                            crate::core::recovery::Origin::Operator,
                            Some(make),
                        ) = (&action.kind, action.origin, &self.operator_resetter)
                        {
                            let cfg = &self.settings.config;
                            if !cfg.devices.allow.iter().any(|a| a == device) {
                                tracing::info!(%device, "operator command: devices.allow does not list {device}; the operator's word overrides it");
                                ex.resetter = make(cfg, device);
                            }
                        }
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
                        tokio::task::spawn_blocking(move || {
                            let executed = execute(&ex, &action, lock_dir.as_deref(), probe_from);
                            if let Some(executed) = executed {
                                let _ = tx.send(Finished {
                                    id: action.id,
                                    executed,
                                });
                            }
                        });
                    }
                }
            }
            while let Some(t) = self.engine.poll_transition() {
                progressed = true;
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

    fn on_finished(&mut self, f: Finished) {
        let port = self.inflight.remove(&f.id).flatten();
        tracing::info!(id = %f.id, outcome = ?f.executed.outcome, "{}", f.executed.summary);
        self.tell(port.as_ref(), &f.executed.summary);
        let now = self.now();
        self.engine.handle_outcome(f.id, f.executed.outcome, now);
    }

    fn request_sessions(&mut self) {
        if self.sessions_inflight {
            self.sessions_again = true;
            return;
        }
        self.sessions_inflight = true;
        let iscsi = self.ex.iscsi.clone();
        let tx = self.sessions_tx.clone();
        tokio::task::spawn_blocking(move || {
            let r = iscsi.session_details().map_err(|e| e.to_string());
            let _ = tx.send(r);
        });
    }

    fn on_sessions(&mut self, r: Result<Parsed<SessionDetail>, String>) {
        self.sessions_inflight = false;
        self.ready.sessions = true;
        match r {
            Ok(parsed) => {
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
                let (list, _) = map_sessions(&parsed.items, &addrs, &self.ports);
                for s in &list {
                    if let Some(ip) = s.local_ip.as_deref().and_then(|ip| ip.parse().ok()) {
                        self.probe_from.insert(s.key.portal.clone(), ip);
                    }
                }
                tracing::debug!(sessions = list.len(), "iscsiadm session snapshot");
                let now = self.now();
                self.engine.handle_sessions(list, now);
            }
            Err(e) => {
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

    fn on_topology(&mut self, t: TopologyReport) {
        match t {
            TopologyReport::Update {
                observations,
                ports,
            } => {
                let first = !self.ready.topology;
                self.ready.topology = true;
                let changed = self.ports != ports;
                self.ports = ports;
                let now = self.now();
                for obs in observations {
                    tracing::info!(observation = %obs.describe(), "RDMA topology");
                    self.engine.handle_observation(obs, Trust::Trusted, now);
                }
                if changed && !first {
                    // Sessions may now be placed differently.
                    self.request_sessions();
                }
            }
            TopologyReport::NetlinkUnavailable(why) => {
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
                let Some(kev) = crate::core::signatures::classify_record(&r) else {
                    return;
                };
                let Some((obs, trust)) = from_kernel_event(&kev) else {
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
                self.engine.handle_observation(obs, trust, now);
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
                self.refresh_topology.raise();
                self.request_sessions();
            }
        }
    }

    fn reload(&mut self) {
        self.notifier.reloading();
        let path = self.settings.config_path.clone();
        match crate::config::load_or_default(path.as_deref()) {
            Ok((cfg, source)) => {
                let cfg = effective(cfg, self.settings.force_dry_run);
                for w in cfg.warnings() {
                    tracing::warn!("configuration: {w}");
                }
                let now = self.now();
                self.engine.set_policy(cfg.policy(), now);
                self.ex = Executors::from_config(&cfg);
                tracing::info!(%source, "SIGHUP: configuration reloaded");
                self.settings.config = cfg;
            }
            Err(e) => {
                tracing::error!(
                    "SIGHUP: the new configuration is invalid; keeping the one in force: {e}"
                );
                for p in e.problems() {
                    tracing::error!("configuration problem: {p}");
                }
            }
        }
        self.notifier.ready(&self.status);
    }

    fn update_status(&mut self) {
        let mut parts: Vec<String> = self
            .engine
            .ports()
            .map(|p| format!("{} {}", p.id, p.phase))
            .collect();
        if parts.is_empty() {
            parts.push("no RDMA port with iSCSI sessions known".into());
        }
        let mut s = parts.join(", ");
        if self.engine.is_paused() {
            s.push_str(" (paused)");
        }
        if s != self.status {
            self.status = s;
            self.notifier.status(&self.status);
        }
    }

    fn port_phase(&self, id: &PortId) -> Option<Phase> {
        self.engine.port(id).map(|p| p.phase)
    }

    fn check_pendings(&mut self) {
        let now = self.now();
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pendings) {
            let busy = self
                .inflight
                .values()
                .any(|port| port.as_ref().is_some_and(|id| p.ports.contains(id)));
            let phases: Vec<(PortId, Option<Phase>)> = p
                .ports
                .iter()
                .map(|id| (id.clone(), self.port_phase(id)))
                .collect();
            let settled = phases
                .iter()
                .all(|(_, ph)| matches!(ph, Some(Phase::Healthy | Phase::Quarantined) | None));
            if !busy && settled {
                let failed: Vec<String> = phases
                    .iter()
                    .filter(|(_, ph)| *ph == Some(Phase::Quarantined))
                    .map(|(id, _)| {
                        let why = self.engine.port(id).map(|r| r.reason.clone());
                        format!("{id}: {}", why.unwrap_or_default())
                    })
                    .collect();
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
        let (cmd, what, dry_run) = match req {
            Request::Status => {
                let ports: Vec<serde_json::Value> = self
                    .engine
                    .ports()
                    .map(|p| {
                        serde_json::json!({
                            "port": p.id.to_string(),
                            "phase": p.phase.to_string(),
                            "reason": p.reason,
                            "hold": p.hold.as_ref().map(|h| format!("{h:?}")),
                        })
                    })
                    .collect();
                let _ = sink.send(Reply::Done {
                    ok: true,
                    message: self.status.clone(),
                    exit_code: EXIT_OK,
                    detail: Some(serde_json::json!({
                        "paused": self.engine.is_paused(),
                        "ports": ports,
                    })),
                });
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
        match self.engine.handle_command(cmd.clone(), now) {
            Err(e) => done(&sink, false, format!("{what}: refused: {e}"), EXIT_NOINPUT),
            Ok(msg) => {
                tracing::info!("operator: {msg}");
                if matches!(cmd, OperatorCommand::Pause | OperatorCommand::Resume) {
                    done(&sink, true, msg, EXIT_OK);
                    return;
                }
                progress(&sink, msg);
                let ports = self.command_ports(&cmd);
                self.pendings.push(Pending {
                    sink,
                    ports,
                    deadline: now.plus(OPERATOR_DEADLINE),
                    what,
                });
            }
        }
    }

    fn command_ports(&self, cmd: &OperatorCommand) -> BTreeSet<PortId> {
        match cmd {
            OperatorCommand::Recover { device, port } => self
                .engine
                .ports()
                .filter(|p| &p.id.device == device && port.is_none_or(|n| p.id.port == n))
                .map(|p| p.id.clone())
                .collect(),
            OperatorCommand::ResetDevice { device } => self
                .engine
                .ports()
                .filter(|p| &p.id.device == device)
                .map(|p| p.id.clone())
                .collect(),
            OperatorCommand::Reconnect { target, portal } => self
                .engine
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
                let resetter = match &self.operator_resetter {
                    Some(make) => make(&self.settings.config, &device),
                    None => self.ex.resetter.clone(),
                };
                let sessions: Vec<String> = self
                    .engine
                    .sessions()
                    .filter(|s| s.port.device == device)
                    .map(|s| s.key.to_string())
                    .collect();
                tokio::task::spawn_blocking(move || match resetter.plan(&device) {
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
                });
            }
            OperatorCommand::Reconnect { target, portal } => {
                let keys: Vec<String> = self
                    .engine
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
    Ok(Portal::new(addr.ip().to_string(), addr.port()))
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
    use crate::io::probe::ProbeResult;

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
        let text = format!(
            "[paths]\nstate-dir = {:?}\ncontrol-socket = {:?}\n[poll]\niscsi = 0.2\nprobe = 0.1\n\
             [devices]\nallow = [\"rocep2s0f0\"]\n[recovery]\nprobe-successes = 2\n\
             probe-timeout = 0.1\niscsid-grace = 0.2\n[kmsg]\ntrust-userspace-records = {trust}\n",
            state.display().to_string(),
            state.join("control.sock").display().to_string(),
        );
        crate::config::parse_str(&text).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stuck_gsi_record_recreates_the_device_and_logs_the_session_back_in() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), false);
        let doubles = Doubles::default();
        let portal: std::net::SocketAddr = "192.0.2.2:3260".parse().unwrap();
        doubles.prober.push(
            portal,
            std::iter::repeat_n(
                ProbeResult::Reachable {
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
            control: None,
            operator_resetter: None,
            shutdown: Some(stop_rx),
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
        while host.logins.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < end, "no login");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            doubles.resetter.calls(),
            vec![("rocep2s0f0".to_string(), false)]
        );
        assert_eq!(
            host.logins.lock().unwrap()[0].target,
            "iqn.2003-01.org.example.lab:tgt0"
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
}
