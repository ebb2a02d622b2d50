//! Manual recovery commands: `recover`, `reset-device`, `reconnect`, `pause`, `resume`.
//!
//! Each builds the core's [`OperatorCommand`] and asks for the driver's plan: from the
//! daemon, or, when none answers, from a one-shot loop here (the same driver after a first
//! scan of this host, writing nothing). It prints the plan, asks for confirmation unless
//! `--yes`, and sends the command: to the daemon, or to a one-shot loop under the recovery
//! lock, so two recoveries never race. `--dry-run` stops after the plan. What a command does
//! and when it is finished are the driver's to say; nothing here edits `devices.allow`.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use super::term::Steps;
use super::Globals;
use crate::config::Config;
use crate::core::driver::{CommandPlan, REPLY_TIMEOUT};
use crate::core::recovery::OperatorCommand;
use crate::daemon::run::{parse_portal_arg, run as run_loop, Deps, Mode, Settings};
use crate::error::Error;
use crate::exit::ExitStatus;
use crate::io::control::{request, ControlError, Reply, Request};

/// `recover` arguments.
#[derive(Debug, clap::Args)]
pub struct RecoverArgs {
    /// The RDMA device, optionally with a port: `rocep2s0f0` or `rocep2s0f0/1`.
    #[arg(value_name = "DEVICE[/PORT]")]
    pub target: String,
    /// Show what would be done; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `reset-device` arguments.
#[derive(Debug, clap::Args)]
pub struct ResetDeviceArgs {
    /// The RDMA device, e.g. `rocep2s0f0`.
    pub device: String,
    /// Show what would be done; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `reconnect` arguments.
#[derive(Debug, clap::Args)]
pub struct ReconnectArgs {
    /// Only sessions of this target IQN.
    #[arg(long, value_name = "IQN")]
    pub target: Option<String>,
    /// Only sessions to this portal (`ip`, `ip:port`, `[v6]:port`).
    #[arg(long, value_name = "ADDR")]
    pub portal: Option<String>,
    /// Show what would be done; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `pause` / `resume` arguments.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {}

/// The configuration; one that cannot be opened for lack of permission means the caller is
/// not root, which every manual command needs (exit 77, not 78: the file is not at fault).
pub(crate) fn config(g: &Globals) -> Result<Config, Error> {
    match crate::config::load_or_default(g.config.as_deref()) {
        Ok((cfg, _)) => Ok(cfg),
        Err(e) if is_permission_denied(&e) => Err(not_root(e)),
        Err(e) => Err(e.into()),
    }
}

/// The configuration could not be read because the caller may not read it.
pub(crate) fn is_permission_denied(e: &crate::config::ConfigError) -> bool {
    matches!(e, crate::config::ConfigError::Read { source, .. }
        if source.kind() == std::io::ErrorKind::PermissionDenied)
}

/// The error for a caller that is not root.
pub(crate) fn not_root(e: impl std::fmt::Display) -> Error {
    Error::NoPermission(format!("{e} (this command is for root)"))
}

/// `DEVICE` or `DEVICE/PORT`.
fn parse_target(s: &str) -> Result<(String, Option<u32>), Error> {
    let (dev, port) = match s.split_once('/') {
        Some((d, p)) => {
            let n: u32 = p.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::Usage(format!("`{s}`: the port after `/` must be a number from 1"))
            })?;
            (d, Some(n))
        }
        None => (s, None),
    };
    crate::config::check_device_name(dev)
        .map_err(|e| Error::Usage(format!("`{dev}` is not an RDMA device name: {e}")))?;
    Ok((dev.to_string(), port))
}

/// Asks on the terminal unless `--yes`.
pub(crate) fn confirm(yes: bool) -> Result<bool, Error> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "not confirmed: there is no terminal to ask on; pass --yes to proceed".into(),
        ));
    }
    print!("Proceed? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::io("read the confirmation", e))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES"))
}

/// Prints a plan: `iser-guard will:` and its lines, or, for a dry run, each line as what
/// would be done.
fn print_plan(plan: &CommandPlan, dry_run: bool) {
    if !dry_run {
        println!("iser-guard will:");
    }
    for l in plan.lines() {
        match (dry_run, l.starts_with("  ")) {
            (true, false) => println!("dry run: would {l}"),
            (true, true) => println!("  {l}"),
            (false, _) => println!("  {l}"),
        }
    }
}

/// What asking the daemon gave.
enum DaemonAnswer {
    /// The daemon answered: its `done` line.
    Done {
        ok: bool,
        message: String,
        exit_code: u8,
        detail: Option<serde_json::Value>,
    },
    /// No daemon listens.
    NoDaemon,
}

/// Sends `req` to the daemon, printing its progress lines; [`DaemonAnswer::NoDaemon`] when no
/// daemon runs.
fn ask_daemon(cfg: &Config, req: &Request, steps: &Steps) -> Result<DaemonAnswer, Error> {
    match request(&cfg.paths.control_socket, req, REPLY_TIMEOUT, |m| {
        steps.step(m)
    }) {
        Ok(Reply::Done {
            ok,
            message,
            exit_code,
            detail,
        }) => Ok(DaemonAnswer::Done {
            ok,
            message,
            exit_code,
            detail,
        }),
        Ok(Reply::Progress { .. } | Reply::Event { .. }) => Err(Error::Data(
            "the daemon's answer ended without its final line".into(),
        )),
        Err(ControlError::NotRunning { .. }) => Ok(DaemonAnswer::NoDaemon),
        Err(e @ ControlError::PermissionDenied { .. }) => Err(Error::NoPermission(e.to_string())),
        Err(e) => Err(Error::Data(e.to_string())),
    }
}

/// Runs `req` in a one-shot loop on this host: the daemon's own loop around the core's
/// driver, started after a first scan. `read_only`: a plan, which writes nothing (no state
/// directory, no journal, no lock, no alert). Returns the loop's `done` line.
fn one_shot(
    cfg: &Config,
    req: Request,
    read_only: bool,
    steps: Steps,
) -> Result<DaemonAnswer, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the async runtime", e))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Reply>();
    let settings = Settings {
        config: cfg.clone(),
        config_path: None,
        force_dry_run: false,
        take_lock: false,
        automatic_actions: false,
        read_only,
    };
    let cfg = cfg.clone();
    let result = rt.block_on(async move {
        let printer = tokio::spawn(async move {
            let mut last = None;
            while let Some(r) = rx.recv().await {
                match r {
                    Reply::Progress { message } => steps.step(&message),
                    Reply::Event { .. } => {}
                    Reply::Done {
                        ok,
                        message,
                        exit_code,
                        detail,
                    } => {
                        last = Some(DaemonAnswer::Done {
                            ok,
                            message,
                            exit_code,
                            detail,
                        })
                    }
                }
            }
            last
        });
        let mut deps = Deps::real(&cfg, false)?;
        if read_only {
            deps.executors.alerts = None;
        }
        let loop_code = run_loop(settings, deps, Mode::OneShot(req, tx)).await?;
        let answer = printer.await.ok().flatten();
        Ok::<_, Error>(match answer {
            Some(a) => a,
            None => DaemonAnswer::Done {
                ok: false,
                message: "the command ended without an answer".into(),
                exit_code: if loop_code == ExitStatus::Ok.code() {
                    ExitStatus::Software.code()
                } else {
                    loop_code
                },
                detail: None,
            },
        })
    });
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

/// The standalone run of a command: refused while a daemon holds its lock without
/// answering, then under the recovery lock.
fn standalone(cfg: &Config, req: Request, steps: Steps) -> Result<DaemonAnswer, Error> {
    std::fs::create_dir_all(&cfg.paths.state_dir)
        .map_err(|e| Error::io(format!("create {}", cfg.paths.state_dir.display()), e))?;
    let purpose = format!("iser-guard {req}");
    let _lock = crate::io::lock::RecoveryLock::try_acquire(&cfg.paths.state_dir, &purpose)?;
    crate::io::lock::DaemonLock::refuse_if_running(&cfg.paths.state_dir)?;
    one_shot(cfg, req, false, steps)
}

/// Prints a `done` line the way the progress printer does, and gives its exit status.
fn finish(answer: DaemonAnswer, steps: Steps) -> ExitCode {
    match answer {
        DaemonAnswer::Done {
            ok,
            message,
            exit_code,
            ..
        } => {
            steps.done(ok, &message);
            ExitCode::from(exit_code)
        }
        DaemonAnswer::NoDaemon => ExitCode::from(ExitStatus::Unavailable.code()),
    }
}

/// Plan, print, confirm, run: the one path of every recovery command.
fn operate(
    cfg: &Config,
    command: OperatorCommand,
    dry_run: bool,
    yes: bool,
) -> Result<ExitCode, Error> {
    let steps = Steps::new();
    let plan_req = Request::Plan {
        command: command.clone(),
    };
    let (answer, daemon) = match ask_daemon(cfg, &plan_req, &steps)? {
        DaemonAnswer::NoDaemon => {
            println!(
                "no iser-guard daemon is running ({} is not answering): {} here",
                cfg.paths.control_socket.display(),
                if dry_run {
                    "planning from this host's sysfs and iscsiadm"
                } else {
                    "running the command"
                }
            );
            (one_shot(cfg, plan_req, true, steps)?, false)
        }
        a => (a, true),
    };
    let plan: CommandPlan = match answer {
        DaemonAnswer::Done {
            ok: true,
            detail: Some(d),
            ..
        } => serde_json::from_value(d)
            .map_err(|e| Error::Data(format!("the plan cannot be read: {e}")))?,
        other => return Ok(finish(other, steps)),
    };
    print_plan(&plan, dry_run);
    if dry_run {
        println!("dry run: nothing was changed");
        return Ok(ExitCode::from(ExitStatus::Ok.code()));
    }
    if !confirm(yes)? {
        eprintln!("iser-guard: not confirmed; nothing was changed");
        return Ok(ExitCode::from(ExitStatus::Finding.code()));
    }
    let run = Request::Run { command };
    let answer = if daemon {
        match ask_daemon(cfg, &run, &steps)? {
            // The daemon stopped between the plan and the command: run it here.
            DaemonAnswer::NoDaemon => standalone(cfg, run, steps)?,
            a => a,
        }
    } else {
        standalone(cfg, run, steps)?
    };
    if let DaemonAnswer::Done {
        ok: true,
        detail: Some(_),
        message,
        ..
    } = &answer
    {
        // A daemon in dry-run mode answers a command with its plan, changing nothing.
        steps.done(true, message);
        return Ok(ExitCode::from(ExitStatus::Ok.code()));
    }
    Ok(finish(answer, steps))
}

/// `iser-guard recover`.
pub fn recover(a: RecoverArgs, g: &Globals) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    let (device, port) = parse_target(&a.target)?;
    operate(
        &cfg,
        OperatorCommand::Recover { device, port },
        a.dry_run,
        a.yes,
    )
}

/// `iser-guard reset-device`.
pub fn reset_device(a: ResetDeviceArgs, g: &Globals) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    let (device, _) = parse_target(&a.device)?;
    operate(
        &cfg,
        OperatorCommand::ResetDevice { device },
        a.dry_run,
        a.yes,
    )
}

/// `iser-guard reconnect`.
pub fn reconnect(a: ReconnectArgs, g: &Globals) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    let portal = a
        .portal
        .as_deref()
        .map(parse_portal_arg)
        .transpose()
        .map_err(Error::Usage)?;
    let command = OperatorCommand::Reconnect {
        target: a.target,
        portal,
    };
    operate(&cfg, command, a.dry_run, a.yes)
}

/// `iser-guard pause` / `resume`.
pub fn pause(_a: PauseArgs, g: &Globals, pause: bool) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    let req = if pause {
        Request::Pause
    } else {
        Request::Resume
    };
    let steps = Steps::new();
    match ask_daemon(&cfg, &req, &steps)? {
        DaemonAnswer::NoDaemon => {
            eprintln!(
                "iser-guard: the daemon is not running (nothing listens on {}): there are no \
                 automatic actions to {}. Manual commands still work; they run standalone.",
                cfg.paths.control_socket.display(),
                if pause { "pause" } else { "resume" }
            );
            Ok(ExitCode::from(ExitStatus::Unavailable.code()))
        }
        a => Ok(finish(a, steps)),
    }
}
