//! Startup: the state directory, the journal resumed (or kept aside for safe mode), the
//! worker threads, the input sources started, and the [`Loop`] built on all of it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::control::accept_loop;
use super::deps::{driver_for, effective, Deps, Settings};
use super::{Finished, Loop};
use crate::config::Config;
use crate::core::driver::EffectId;
use crate::core::iscsi::{ParsedListing, SessionDetail};
use crate::core::recovery::Engine;
use crate::core::session_map::Placer;
use crate::daemon::observe::Observer;
use crate::daemon::read_ahead::ReadAhead;
use crate::daemon::sources::{Signal, TopologyReport};
use crate::daemon::workers::{
    AlertQueue, WorkerPool, ALERT_QUEUE, EXECUTOR_QUEUE, EXECUTOR_THREADS,
};
use crate::error::Error;
use crate::io::control::{ControlConnection, Request};
use crate::io::journal::Journal;

/// The receiving ends the event loop waits on.
pub(super) struct Inputs {
    pub(super) done: UnboundedReceiver<Finished>,
    pub(super) journal: UnboundedReceiver<(EffectId, Result<(), String>)>,
    pub(super) sessions: UnboundedReceiver<Result<ParsedListing<SessionDetail>, String>>,
    /// A plan read on a worker was answered.
    pub(super) answered: UnboundedReceiver<()>,
    pub(super) topology: UnboundedReceiver<TopologyReport>,
    pub(super) control: UnboundedReceiver<(ControlConnection, Request)>,
    pub(super) kernel_log: Option<ReadAhead>,
    pub(super) async_events:
        Option<tokio::sync::mpsc::UnboundedReceiver<crate::core::selftest::AsyncEvent>>,
    pub(super) shutdown: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// What runs beside the loop and is stopped at shutdown.
pub(super) struct Services {
    /// Stops the topology source.
    pub(super) stop: Arc<Signal>,
    pub(super) exporter: Option<crate::metrics::Exporter>,
    pub(super) control_task: Option<tokio::task::JoinHandle<()>>,
}

/// A started loop with its inputs and services.
pub(super) struct Started {
    pub(super) lp: Loop,
    pub(super) inputs: Inputs,
    pub(super) services: Services,
}

/// The daemon started without a usable journal (corrupt, unreadable, newer format): it runs
/// on a fresh engine, re-learns sessions from iscsiadm, and the driver refuses automatic
/// destructive actions until the first complete scan.
#[derive(Debug, Clone)]
pub(super) struct SafeMode {
    /// What was wrong with the journal.
    pub(super) problem: String,
    /// Where the journal was kept, or why it could not be moved.
    pub(super) kept: Result<PathBuf, String>,
    /// A newer release wrote it (else it is corrupt or unreadable): the advice differs.
    pub(super) newer: bool,
}

impl SafeMode {
    pub(super) fn kept_words(&self) -> String {
        match &self.kept {
            Ok(p) => format!("kept as {}", p.display()),
            Err(e) => format!("could not be kept aside ({e}); it is still in place"),
        }
    }

    /// The operator alert for it.
    fn alert(&self, journal: &std::path::Path, cfg: &Config) -> crate::io::syslog::AlertMessage {
        let look = match &self.kept {
            Ok(p) => p.display().to_string(),
            Err(_) => journal.display().to_string(),
        };
        crate::io::syslog::AlertMessage {
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
            todo: if self.newer {
                format!(
                    "inspect {look} (a newer release's journal: run that release again, or \
                     leave it; this daemon carries on with a fresh journal); delete the kept \
                     file when done, and check `iser-guard status`"
                )
            } else {
                format!(
                    "inspect {look} (a damaged journal: look for disk or file-system errors \
                     in the kernel log; this daemon carries on with a fresh journal); delete \
                     the kept file when done, and check `iser-guard status`"
                )
            },
        }
    }
}

/// Moves an unusable journal aside (UTC-stamped name, never deleted) and says what happened.
fn keep_journal_aside(journal: &Journal, what: &str, problem: String, newer: bool) -> SafeMode {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let kept = journal.keep_aside(what, unix).map_err(|e| e.to_string());
    let mode = SafeMode {
        problem,
        kept,
        newer,
    };
    tracing::error!(
        journal = %journal.path().display(),
        "the state journal is not usable: {}; the file was {}; starting in safe mode",
        mode.problem,
        mode.kept_words()
    );
    mode
}

/// Opens the state, resumes the engine and starts every input source. `daemon`: this is the
/// daemon (it exports metrics; a standalone command must not overwrite their file).
pub(super) async fn start(settings: Settings, deps: Deps, daemon: bool) -> Result<Started, Error> {
    let settings = Settings {
        config: effective(settings.config, settings.force_dry_run),
        ..settings
    };
    let cfg = &settings.config;
    if !settings.read_only {
        std::fs::create_dir_all(&cfg.paths.state_dir)
            .map_err(|e| Error::io(format!("create {}", cfg.paths.state_dir.display()), e))?;
    }
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
            Err(_) if settings.read_only => (Engine::new(policy, seed), None),
            Err(e) => (
                Engine::new(policy, seed),
                Some(keep_journal_aside(
                    &journal,
                    "corrupt",
                    format!("its state cannot be resumed ({e})"),
                    false,
                )),
            ),
        },
        Ok(None) => {
            tracing::info!("no journal yet: starting afresh");
            (Engine::new(policy, seed), None)
        }
        // A plan reads what it can and moves nothing aside.
        Err(_) if settings.read_only => (Engine::new(policy, seed), None),
        Err(e) => (
            Engine::new(policy, seed),
            Some(keep_journal_aside(
                &journal,
                &e.kind_word(),
                e.problem(),
                matches!(e, crate::io::journal::JournalError::NewerFormat { .. }),
            )),
        ),
    };
    let pool = WorkerPool::new("iser-guard-exec", EXECUTOR_THREADS, EXECUTOR_QUEUE)
        .map_err(|e| Error::io("start the executor threads", e))?;
    let alert_queue =
        AlertQueue::new(ALERT_QUEUE).map_err(|e| Error::io("start the alert sender", e))?;
    let (done_tx, done_rx) = unbounded_channel();
    let (journal_tx, journal_rx) = unbounded_channel();
    let (sessions_tx, sessions_rx) = unbounded_channel();
    let (answered_tx, answered_rx) = unbounded_channel();
    let (topo_tx, topo_rx) = unbounded_channel();
    let refresh = Arc::new(Signal::default());
    let stop = Arc::new(Signal::default());
    // Only the daemon exports metrics: a standalone command must not overwrite its file.
    let metrics = crate::metrics::Metrics::for_config(&settings.config.metrics, daemon);
    let exporter = crate::metrics::Exporter::start(&settings.config.metrics, &metrics).await;
    let mut topology = deps.topology;
    topology.observe(metrics.clone());
    if daemon {
        // A standalone command reads no maps: its plan names the paths the daemon knows.
        if let Err(e) = crate::daemon::sources::spawn_multipath_reader(
            deps.executors.multipath.clone(),
            topo_tx.clone(),
            stop.clone(),
            settings
                .config
                .poll
                .iscsi
                .max(std::time::Duration::from_secs(1)),
        ) {
            tracing::warn!(
                "cannot start the multipathd reader: {e}; dm-multipath maps are not watched"
            );
        }
    }
    topology.start(topo_tx, refresh.clone(), stop.clone());
    let (ctrl_tx, ctrl_rx) = unbounded_channel::<(ControlConnection, Request)>();
    let control_task = deps.control.map(|server| {
        tracing::info!(socket = %server.path().display(), "control socket open");
        tokio::spawn(accept_loop(server, ctrl_tx))
    });
    let kernel_log = deps.kernel_log.map(ReadAhead::start);
    metrics.source_up(crate::metrics::Source::Kmsg, kernel_log.is_some());
    let shutdown = deps.shutdown;
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
    let (witness, async_rx) = match deps.async_events {
        Some((source, rx)) => {
            let allow = settings.config.devices.allow.iter().cloned().collect();
            (
                Some(crate::daemon::witness::Witness::new(source, allow)),
                Some(rx),
            )
        }
        None => (None, None),
    };
    let lp = Loop {
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
        recreations: BTreeMap::new(),
        probe_news: Default::default(),
        probe_from: BTreeMap::new(),
        pendings: Default::default(),
        answering: 0,
        answered_tx,
        netlink_warned: false,
        status: String::new(),
        metrics: metrics.clone(),
        witness,
        kernel_events: crate::daemon::kernel_events::KernelEvents::new(),
        verbs_access: deps.verbs_access.map(super::verbs::VerbsAccess::new),
        settings,
    };
    Ok(Started {
        lp,
        inputs: Inputs {
            done: done_rx,
            journal: journal_rx,
            sessions: sessions_rx,
            answered: answered_rx,
            topology: topo_rx,
            control: ctrl_rx,
            kernel_log,
            async_events: async_rx,
            shutdown,
        },
        services: Services {
            stop,
            exporter,
            control_task,
        },
    })
}
