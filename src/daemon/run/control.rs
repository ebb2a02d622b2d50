//! Operator requests on the control socket: status, reload, pause/resume and the recovery
//! commands, each answered on its own connection; commands in progress wait here until the
//! ports they concern have settled.

use crate::exit::ExitStatus;
use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::deps::{effective, port_selftest};
use super::Loop;
use crate::core::observe::EventKind;
use crate::core::recovery::{OperatorCommand, Phase, PortId, Portal};
use crate::daemon::observe::clocks;

use crate::io::control::{ControlConnection, ControlServer, Reply, Request};

/// How long an operator command may take before its client is told it is still running.
const OPERATOR_DEADLINE: Duration = Duration::from_secs(15 * 60);

pub(super) struct Pending {
    pub(super) sink: UnboundedSender<Reply>,
    pub(super) ports: BTreeSet<PortId>,
    /// A `reconnect`: it also waits for the operator logouts/logins of sessions on no RDMA
    /// port (they belong to no port, so `ports` does not cover them).
    session_ops: bool,
    /// How many operator session-op failures the engine had reported when it started.
    failures_before: usize,
    deadline: crate::core::time::Instant,
    pub(super) what: String,
}

pub(super) async fn accept_loop(
    server: ControlServer,
    tx: UnboundedSender<(ControlConnection, Request)>,
) {
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
pub(super) fn reply_task(mut conn: ControlConnection) -> UnboundedSender<Reply> {
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

pub(super) fn progress(sink: &UnboundedSender<Reply>, message: impl Into<String>) {
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
    /// Reads the configuration again (SIGHUP, or `iser-guard reload` on the control socket);
    /// `Err` carries why the new file was refused, and the old configuration stays in force.
    pub(super) fn reload(&mut self) -> Result<String, String> {
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
                self.ex = crate::compose::executors(&cfg).with_selftest(port_selftest(&cfg));
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

    pub(super) fn check_pendings(&mut self) {
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
                        ExitStatus::Ok.code(),
                    );
                } else {
                    done(
                        &p.sink,
                        false,
                        format!("{}: failed: {}", p.what, failed.join("; ")),
                        ExitStatus::Finding.code(),
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
                    ExitStatus::TempFail.code(),
                );
            } else {
                keep.push(p);
            }
        }
        self.pendings = keep;
    }

    /// Serves an operator request on the same engine.
    pub(super) fn operator(&mut self, req: Request, sink: UnboundedSender<Reply>) {
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
                    exit_code: ExitStatus::Ok.code(),
                    detail: serde_json::to_value(doc).ok(),
                });
                return;
            }
            Request::Events { .. } => {
                done(
                    &sink,
                    false,
                    "events are answered by the daemon only",
                    ExitStatus::Usage.code(),
                );
                return;
            }
            Request::Reload => {
                match self.reload() {
                    Ok(msg) => done(&sink, true, msg, ExitStatus::Ok.code()),
                    Err(msg) => done(&sink, false, msg, ExitStatus::Config.code()),
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
                        done(&sink, false, e, ExitStatus::Usage.code());
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
            Err(e) => done(
                &sink,
                false,
                format!("{what}: refused: {e}"),
                ExitStatus::NoInput.code(),
            ),
            Ok((command, msg)) => {
                tracing::info!(%command, "operator: {msg}");
                if matches!(cmd, OperatorCommand::Pause | OperatorCommand::Resume) {
                    done(&sink, true, msg, ExitStatus::Ok.code());
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
                            ExitStatus::Ok.code(),
                        );
                    }
                    Err(e) => done(&sink, false, format!("{what}: {e}"), e.status().code()),
                };
                if let Err(full) = self.pool.submit(job) {
                    done(
                        &busy,
                        false,
                        format!("busy: {full}; try again"),
                        ExitStatus::TempFail.code(),
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
                        ExitStatus::NoInput.code(),
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
                    ExitStatus::Ok.code(),
                );
            }
            OperatorCommand::Pause | OperatorCommand::Resume => done(
                &sink,
                true,
                format!("dry run: would {what}"),
                ExitStatus::Ok.code(),
            ),
        }
    }
}

/// `ip`, `ip:port`, `[v6]:port` → the engine's portal (port 3260 when none is given).
pub fn parse_portal_arg(s: &str) -> Result<Portal, String> {
    let addr = crate::io::probe::parse_portal(s, crate::io::probe::ISCSI_PORT)
        .map_err(|e| e.to_string())?;
    Ok(Portal::from(addr))
}
