//! Operator requests on the control socket: status, reload, and the operator commands,
//! each answered on its own connection. What a command will do and when it is finished are
//! the driver's to say ([`crate::core::driver::Driver::plan`],
//! [`crate::core::driver::Driver::poll_verdict`]); this file carries requests in and answers
//! out, and reads the re-creation methods a plan needs from the host on a worker.

use std::collections::BTreeMap;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::deps::{effective, port_selftest};
use super::Loop;
use crate::core::driver::{CommandId, CommandPlan, MethodSteps, RecreateMethods, Verdict};
use crate::core::observe::EventKind;
use crate::core::recovery::{OperatorCommand, PortId};
use crate::daemon::observe::clocks;
use crate::exit::ExitStatus;
use crate::io::control::{ControlConnection, ControlServer, Reply, Request};
use crate::io::reset::ResetPlan;

/// An accepted command awaiting its verdict, and who follows it.
pub(super) struct PendingCommand {
    pub(super) sink: UnboundedSender<Reply>,
    /// The ports it concerns (their transitions are streamed to the client).
    pub(super) ports: Vec<PortId>,
    /// The command, as typed.
    pub(super) what: String,
}

/// The commands awaiting their verdict.
pub(super) type Pendings = BTreeMap<CommandId, PendingCommand>;

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

fn done(sink: &UnboundedSender<Reply>, ok: bool, message: impl Into<String>, code: ExitStatus) {
    let _ = sink.send(Reply::Done {
        ok,
        message: message.into(),
        exit_code: code.code(),
        detail: None,
    });
}

/// The exit status of a refused command.
fn refused(e: &crate::core::recovery::CommandError) -> ExitStatus {
    use crate::core::recovery::CommandError as E;
    match e {
        E::UnknownDevice { .. } | E::UnknownPort { .. } | E::NoMatchingSessions => {
            ExitStatus::NoInput
        }
        E::NothingToRecreateFrom(_) => ExitStatus::Unavailable,
        // Try again once the kernel has let the blocked step go.
        E::RecreationBlocked { .. } => ExitStatus::TempFail,
    }
}

/// The driver's plan type for the methods the resetter read from sysfs.
fn methods_of(p: &ResetPlan) -> RecreateMethods {
    RecreateMethods {
        methods: p
            .methods
            .iter()
            .map(|m| MethodSteps {
                method: m.method.to_string(),
                steps: m.steps.clone(),
            })
            .collect(),
        skipped: p.skipped.clone(),
    }
}

/// Settings the running daemon cannot take over without a restart: the sockets and files
/// it opened at start, and the metrics exporter it started.
fn needs_restart(old: &crate::config::Config, new: &crate::config::Config) -> Vec<&'static str> {
    let (a, b) = (&old.paths, &new.paths);
    let mut out = Vec::new();
    if a.control_socket != b.control_socket {
        out.push("paths.control-socket");
    }
    if a.kmsg != b.kmsg {
        out.push("paths.kmsg");
    }
    if a.state_dir != b.state_dir {
        out.push("paths.state-dir");
    }
    if a.sysfs_root != b.sysfs_root {
        out.push("paths.sysfs-root");
    }
    if a.boot_id != b.boot_id {
        out.push("paths.boot-id");
    }
    if old.metrics != new.metrics {
        out.push("[metrics]");
    }
    if old.kmsg.enabled != new.kmsg.enabled {
        out.push("kmsg.enabled");
    }
    if old.poll.netlink != new.poll.netlink {
        out.push("poll.netlink");
    }
    if old.poll.iscsi != new.poll.iscsi {
        out.push("poll.iscsi");
    }
    out
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
                let restart = needs_restart(&self.settings.config, &cfg);
                if !restart.is_empty() {
                    let why = format!(
                        "the new configuration is refused; the one in force is kept: {} \
                         changed, which takes effect only when the daemon starts (systemctl \
                         restart iser-guard)",
                        restart.join(", ")
                    );
                    tracing::error!("reload: {why}");
                    self.notifier.ready(&self.status);
                    return Err(why);
                }
                for w in cfg.warnings() {
                    tracing::warn!("configuration: {w}");
                }
                let now = self.now();
                self.driver.set_policy(cfg.policy(), now);
                self.ex = crate::compose::executors(&cfg).with_selftest(port_selftest(&cfg));
                if let Some(w) = self.witness.as_mut() {
                    w.set_allow(cfg.devices.allow.iter().cloned().collect());
                }
                tracing::info!(%source, "configuration reloaded");
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
                    "reload: the new configuration is invalid; keeping the one in force: {e}"
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

    /// Answers every verdict the driver has due.
    pub(super) fn check_pendings(&mut self) {
        let now = self.now();
        while let Some((id, verdict)) = self.driver.poll_verdict(now) {
            let Some(p) = self.pendings.remove(&id) else {
                continue;
            };
            let (ok, code) = match &verdict {
                Verdict::Done { .. } => (true, ExitStatus::Ok),
                Verdict::Failed { .. } => (false, ExitStatus::Finding),
                Verdict::StillRunning { .. } => (false, ExitStatus::TempFail),
            };
            tracing::info!("operator command: {}", verdict.message());
            done(&p.sink, ok, verdict.message(), code);
        }
    }

    /// Serves an operator request on the same driver.
    pub(super) fn operator(&mut self, req: Request, sink: UnboundedSender<Reply>) {
        tracing::info!("operator request: iser-guard {req}");
        let now = self.now();
        if !matches!(
            req,
            Request::Status | Request::Events { .. } | Request::Plan { .. }
        ) {
            self.obs.note(
                EventKind::Operator,
                format!("operator: iser-guard {req}"),
                clocks(now),
            );
        }
        match req {
            Request::Status => {
                let safe = self.safe_mode.as_ref().map(|m| {
                    let kept = m.kept.as_ref().map(|p| p.display().to_string());
                    (m.problem.clone(), kept.map_err(Clone::clone))
                });
                let doc = self.obs.snapshot(
                    &self.driver,
                    &self.status,
                    safe,
                    clocks(now),
                    &self.ex.probes,
                );
                let _ = sink.send(Reply::Done {
                    ok: true,
                    message: self.status.clone(),
                    exit_code: ExitStatus::Ok.code(),
                    detail: serde_json::to_value(doc).ok(),
                });
            }
            Request::Events { .. } => done(
                &sink,
                false,
                "events are answered by the daemon only",
                ExitStatus::Usage,
            ),
            Request::Reload => match self.reload() {
                Ok(msg) => done(&sink, true, msg, ExitStatus::Ok),
                Err(msg) => done(&sink, false, msg, ExitStatus::Config),
            },
            Request::Pause => self.run_command(OperatorCommand::Pause, sink),
            Request::Resume => self.run_command(OperatorCommand::Resume, sink),
            Request::Plan { command } => self.answer_plan(command, sink, false),
            Request::Run { command } => {
                let destructive =
                    !matches!(command, OperatorCommand::Pause | OperatorCommand::Resume);
                if destructive && self.settings.config.recovery.dry_run {
                    progress(
                        &sink,
                        "the daemon runs in dry-run mode (recovery.dry-run or --dry-run): it \
                         changes nothing, so this is what it would do",
                    );
                    self.answer_plan(command, sink, true);
                } else {
                    self.run_command(command, sink);
                }
            }
        }
    }

    /// Starts `cmd` on the driver; its verdict is answered by [`Loop::check_pendings`].
    fn run_command(&mut self, cmd: OperatorCommand, sink: UnboundedSender<Reply>) {
        let now = self.now();
        let what = cmd.to_string();
        match self.driver.start_command(cmd, now) {
            Err(e) => done(&sink, false, format!("{what}: refused: {e}"), refused(&e)),
            Ok((id, msg)) => {
                tracing::info!(%id, "operator: {msg}");
                // The operator following this command sees the portal's next answer, even
                // when it is the one the log already has.
                self.probe_news.forget_answers();
                match self.driver.command_ports(id) {
                    None => done(&sink, true, msg, ExitStatus::Ok),
                    Some(ports) => {
                        progress(&sink, msg);
                        let ports = ports.iter().cloned().collect();
                        self.pendings
                            .insert(id, PendingCommand { sink, ports, what });
                    }
                }
            }
        }
    }

    /// Answers what `cmd` would do: the driver's plan, with the device's re-creation methods
    /// read from sysfs on a worker. `dry_run`: the answer of a command the daemon will not
    /// run (it says so); otherwise the answer to a plan request.
    fn answer_plan(&mut self, cmd: OperatorCommand, sink: UnboundedSender<Reply>, dry_run: bool) {
        let plan = match self.driver.plan(&cmd) {
            Ok(p) => p,
            Err(e) => {
                done(&sink, false, format!("{cmd}: refused: {e}"), refused(&e));
                return;
            }
        };
        let read = plan.device_to_read().map(|d| {
            let remembered = self
                .driver
                .engine()
                .devices()
                .find(|r| r.name == d)
                .and_then(|r| r.remembered.clone());
            (d.to_string(), remembered)
        });
        let resetter = self.ex.resetter.clone();
        let answered = self.answered_tx.clone();
        let busy = sink.clone();
        let job = move || {
            let plan: CommandPlan = match read {
                None => plan,
                Some((device, remembered)) => {
                    match resetter.plan_from(&device, remembered.as_ref()) {
                        Ok(p) => plan.with_methods(methods_of(&p)),
                        Err(e) => {
                            done(&sink, false, format!("{}: {e}", plan.what), e.status());
                            let _ = answered.send(());
                            return;
                        }
                    }
                }
            };
            let message = if dry_run {
                format!("{}: dry run, nothing was changed", plan.what)
            } else {
                plan.what.clone()
            };
            let _ = sink.send(Reply::Done {
                ok: true,
                message,
                exit_code: ExitStatus::Ok.code(),
                detail: serde_json::to_value(&plan).ok(),
            });
            let _ = answered.send(());
        };
        self.answering += 1;
        if let Err(full) = self.pool.submit(job) {
            self.answering -= 1;
            done(
                &busy,
                false,
                format!("busy: {full}; try again"),
                ExitStatus::TempFail,
            );
        }
    }
}

/// `ip`, `ip:port`, `[v6]:port` → the engine's portal (port 3260 when none is given).
pub fn parse_portal_arg(s: &str) -> Result<crate::core::recovery::Portal, String> {
    let addr = crate::io::probe::parse_portal(s, crate::io::probe::ISCSI_PORT)
        .map_err(|e| e.to_string())?;
    Ok(crate::core::recovery::Portal::from(addr))
}

#[cfg(test)]
mod tests {
    use super::needs_restart;
    use crate::config::Config;

    #[test]
    fn the_kernel_log_switch_needs_a_restart_and_the_probe_cadence_does_not() {
        let old = Config::default();
        let mut new = old.clone();
        new.kmsg.enabled = false;
        assert_eq!(needs_restart(&old, &new), ["kmsg.enabled"]);
        let mut new = old.clone();
        new.poll.probe = std::time::Duration::from_secs(2);
        assert!(needs_restart(&old, &new).is_empty());
    }
}
