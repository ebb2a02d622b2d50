//! Manual recovery commands: `recover`, `reset-device`, `reconnect`, `pause`, `resume`.
//!
//! With a daemon running they go through its control socket and the daemon runs them on its
//! own driver (progress lines streamed back). Without one, they run standalone on the same
//! code path (the daemon's loop in one-shot mode: the core's driver around an engine, the
//! executors, the first scan, then the command until its ports settle) under the recovery
//! lock, so two recoveries never race. The driver authorises the command for the device it
//! names; nothing here edits `devices.allow`. `--dry-run` only reads: the plan from sysfs and
//! the session list.

use crate::exit::ExitStatus;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use super::term::Steps;
use super::Globals;
use crate::config::Config;
use crate::daemon::run::{parse_portal_arg, run as run_loop, Deps, Mode, Settings};
use crate::error::Error;
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

/// How long a client waits for the daemon's next line (a re-creation can take minutes).
const REPLY_TIMEOUT: Duration = Duration::from_secs(16 * 60);

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

/// Prints what will be done and asks on the terminal unless `--yes`.
fn confirm(plan: &[String], yes: bool) -> Result<bool, Error> {
    println!("iser-guard will:");
    for l in plan {
        println!("  {l}");
    }
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

/// The steps of a device re-creation, as the plan from sysfs says; for a device that is gone,
/// from what the daemon's journal remembers about it (a deleted device leaves nothing in
/// sysfs).
fn reset_steps(cfg: &Config, device: &str) -> Result<Vec<String>, Error> {
    let remembered = crate::io::journal::Journal::new(&cfg.paths.state_dir)
        .load()
        .ok()
        .flatten()
        .and_then(|snap| {
            snap.devices
                .into_iter()
                .find(|d| d.name == device)
                .and_then(|d| d.remembered)
        });
    let plan = crate::compose::executors(cfg)
        .resetter
        .plan_from(device, remembered.as_ref())?;
    let mut out = vec![format!("re-create RDMA device {device}, trying in order:")];
    for m in &plan.methods {
        out.push(format!("  {}: {}", m.method, m.steps.join("; ")));
    }
    Ok(out)
}

fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// Sends `req` to the daemon; `Ok(None)` when no daemon runs.
fn via_daemon(cfg: &Config, req: &Request) -> Result<Option<u8>, Error> {
    let steps = Steps::new();
    match request(&cfg.paths.control_socket, req, REPLY_TIMEOUT, |m| {
        steps.step(m)
    }) {
        Ok(Reply::Done {
            ok,
            message,
            exit_code,
            ..
        }) => {
            steps.done(ok, &message);
            Ok(Some(exit_code))
        }
        Ok(Reply::Progress { .. } | Reply::Event { .. }) => Ok(Some(ExitStatus::Finding.code())),
        Err(ControlError::NotRunning { .. }) => Ok(None),
        Err(e @ ControlError::PermissionDenied { .. }) => Err(Error::NoPermission(e.to_string())),
        Err(e) => Err(Error::Data(e.to_string())),
    }
}

/// Runs `req` standalone: lock, one-shot loop, printed progress.
fn standalone(cfg: &Config, req: Request) -> Result<u8, Error> {
    println!(
        "no iser-guard daemon is running ({} is not answering): running the command here",
        cfg.paths.control_socket.display()
    );
    std::fs::create_dir_all(&cfg.paths.state_dir)
        .map_err(|e| Error::io(format!("create {}", cfg.paths.state_dir.display()), e))?;
    let purpose = format!("iser-guard {}", describe(&req));
    let _lock = crate::io::lock::RecoveryLock::try_acquire(&cfg.paths.state_dir, &purpose)?;
    // The same driver as the daemon's: the operator's command authorises the device it
    // names (overriding `devices.allow` for it only); automatic actions are left to the daemon.
    let cfg = cfg.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the async runtime", e))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Reply>();
    let steps = Steps::new();
    let settings = Settings {
        config: cfg.clone(),
        config_path: None,
        force_dry_run: false,
        take_lock: false,
        automatic_actions: false,
    };
    let result = rt.block_on(async move {
        let printer = tokio::spawn(async move {
            let mut code = ExitStatus::Finding.code();
            while let Some(r) = rx.recv().await {
                match r {
                    Reply::Progress { message } => steps.step(&message),
                    Reply::Event { .. } => {}
                    Reply::Done {
                        ok,
                        message,
                        exit_code,
                        ..
                    } => {
                        steps.done(ok, &message);
                        code = exit_code;
                    }
                }
            }
            code
        });
        let deps = Deps::real(&cfg, false)?;
        let loop_code = run_loop(settings, deps, Mode::OneShot(req, tx)).await?;
        let code = printer.await.unwrap_or(ExitStatus::Finding.code());
        Ok::<u8, Error>(if loop_code != ExitStatus::Ok.code() {
            loop_code
        } else {
            code
        })
    });
    rt.shutdown_timeout(Duration::from_millis(200));
    result
}

fn describe(req: &Request) -> String {
    match req {
        Request::Recover { device, port, .. } => match port {
            Some(p) => format!("recover {device}/{p}"),
            None => format!("recover {device}"),
        },
        Request::ResetDevice { device, .. } => format!("reset-device {device}"),
        Request::Reconnect { .. } => "reconnect".into(),
        Request::Pause => "pause".into(),
        Request::Resume => "resume".into(),
        Request::Status => "status".into(),
        Request::Events { .. } => "events".into(),
        Request::Reload => "reload".into(),
    }
}

/// Dry run without a daemon: the plan and the matching sessions, read-only.
fn standalone_dry_run(
    cfg: &Config,
    device: Option<&str>,
    filter: Option<(&Option<String>, &Option<String>)>,
) -> Result<u8, Error> {
    println!("no iser-guard daemon is running: dry run from this host's sysfs and iscsiadm");
    if let Some(d) = device {
        for l in reset_steps(cfg, d)? {
            println!("dry run: would {l}");
        }
    }
    let ex = crate::compose::executors(cfg);
    let sessions = ex.iscsi.session_details()?;
    let mut n = 0;
    for s in &sessions.items {
        let Some(node) = s.node_id() else { continue };
        if let Some((target, portal)) = filter {
            if target.as_ref().is_some_and(|t| *t != node.target) {
                continue;
            }
            if let Some(p) = portal {
                let want = parse_portal_arg(p).map_err(Error::Usage)?;
                if crate::core::recovery::Portal::parse(&node.address, node.port).ok() != Some(want)
                {
                    continue;
                }
            }
        }
        n += 1;
        println!(
            "dry run: would log out and in if still down: {} {} (sid {})",
            node.target,
            node.portal_arg(),
            s.sid
        );
    }
    if filter.is_some() && n == 0 {
        eprintln!("iser-guard: no iSCSI session matches; `iscsiadm -m session` lists the sessions");
        return Ok(ExitStatus::NoInput.code());
    }
    println!("dry run: nothing was changed");
    Ok(ExitStatus::Ok.code())
}

/// `iser-guard recover`.
pub fn recover(a: RecoverArgs, g: &Globals) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    let (device, port) = parse_target(&a.target)?;
    let req = Request::Recover {
        device: device.clone(),
        port,
        dry_run: a.dry_run,
    };
    if a.dry_run {
        return match via_daemon(&cfg, &req)? {
            Some(c) => Ok(exit(c)),
            None => Ok(exit(standalone_dry_run(&cfg, Some(&device), None)?)),
        };
    }
    let mut plan = vec![format!(
        "check that the target portals of {}'s iSCSI sessions answer",
        a.target
    )];
    plan.extend(reset_steps(&cfg, &device)?);
    plan.push("log its iSCSI sessions out and in if iscsid does not reconnect them".into());
    plan.push("verify every session is LOGGED_IN with running disks".into());
    confirm_then_run(&cfg, &plan, a.yes, req)
}

/// `iser-guard reset-device`.
pub fn reset_device(a: ResetDeviceArgs, g: &Globals) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    let (device, _) = parse_target(&a.device)?;
    let req = Request::ResetDevice {
        device: device.clone(),
        dry_run: a.dry_run,
    };
    if a.dry_run {
        return match via_daemon(&cfg, &req)? {
            Some(c) => Ok(exit(c)),
            None => Ok(exit(standalone_dry_run(&cfg, Some(&device), None)?)),
        };
    }
    let mut plan = reset_steps(&cfg, &device)?;
    plan.push("then reconnect its iSCSI sessions if iscsid does not".into());
    confirm_then_run(&cfg, &plan, a.yes, req)
}

/// Asks for confirmation of a destructive `plan` on `device` (unless `--yes`), then runs
/// `req` through the daemon, or standalone when no daemon answers.
fn confirm_then_run(
    cfg: &Config,
    plan: &[String],
    yes: bool,
    req: Request,
) -> Result<ExitCode, Error> {
    if !confirm(plan, yes)? {
        eprintln!("iser-guard: not confirmed; nothing was changed");
        return Ok(exit(ExitStatus::Finding.code()));
    }
    let code = match via_daemon(cfg, &req)? {
        Some(c) => c,
        None => standalone(cfg, req)?,
    };
    Ok(exit(code))
}

/// `iser-guard reconnect`.
pub fn reconnect(a: ReconnectArgs, g: &Globals) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    if let Some(p) = &a.portal {
        parse_portal_arg(p).map_err(Error::Usage)?;
    }
    let req = Request::Reconnect {
        target: a.target.clone(),
        portal: a.portal.clone(),
        dry_run: a.dry_run,
    };
    if a.dry_run {
        return match via_daemon(&cfg, &req)? {
            Some(c) => Ok(exit(c)),
            None => Ok(exit(standalone_dry_run(
                &cfg,
                None,
                Some((&a.target, &a.portal)),
            )?)),
        };
    }
    let which = match (&a.target, &a.portal) {
        (None, None) => "every iSCSI session".to_string(),
        (t, p) => format!(
            "the iSCSI sessions{}{}",
            t.as_ref()
                .map(|t| format!(" of target {t}"))
                .unwrap_or_default(),
            p.as_ref()
                .map(|p| format!(" to portal {p}"))
                .unwrap_or_default()
        ),
    };
    let plan = vec![format!(
        "log {which} out and in (iscsiadm --logout, --login)"
    )];
    if !confirm(&plan, a.yes)? {
        eprintln!("iser-guard: not confirmed; nothing was changed");
        return Ok(exit(ExitStatus::Finding.code()));
    }
    let code = match via_daemon(&cfg, &req)? {
        Some(c) => c,
        None => standalone(&cfg, req)?,
    };
    Ok(exit(code))
}

/// `iser-guard pause` / `resume`.
pub fn pause(_a: PauseArgs, g: &Globals, pause: bool) -> Result<ExitCode, Error> {
    let cfg = config(g)?;
    let req = if pause {
        Request::Pause
    } else {
        Request::Resume
    };
    match via_daemon(&cfg, &req)? {
        Some(c) => Ok(exit(c)),
        None => {
            eprintln!(
                "iser-guard: the daemon is not running (nothing listens on {}): there are no \
                 automatic actions to {}. Manual commands still work; they run standalone.",
                cfg.paths.control_socket.display(),
                if pause { "pause" } else { "resume" }
            );
            Ok(exit(ExitStatus::Unavailable.code()))
        }
    }
}
