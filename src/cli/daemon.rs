//! `iser-guard daemon`: the recovery daemon (what the systemd service starts).

use std::process::ExitCode;

use super::Globals;
use crate::daemon::run::{run as run_loop, Deps, Mode, Settings};
use crate::error::Error;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Decide and alert, never act (overrides `recovery.dry-run`, also across reloads).
    #[arg(long)]
    pub dry_run: bool,
    /// Stay in the foreground. The daemon never forks (systemd `Type=notify` runs it as is);
    /// accepted so init scripts can say it explicitly.
    #[arg(long)]
    pub foreground: bool,
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let (config, source) = crate::config::load_or_default(globals.config.as_deref())?;
    // The first line says what this kernel offers: on 6.1 and 6.8 no device events (the
    // daemon polls every `poll.netlink`), on 6.12 subscribed; the watcher acts on the same
    // SYS_GET answer and warns if subscribing fails later.
    let mut nldev = crate::io::netlink::NldevClient::open();
    let caps = crate::io::kernel_caps::detect(
        nldev.as_mut().map_err(|e| &*e),
        &config.paths.sysfs_root,
        &config.paths.proc_root,
    );
    drop(nldev);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        poll_netlink = ?config.poll.netlink,
        "starting on {}",
        caps.summary()
    );
    tracing::info!(%source, "configuration loaded");
    for w in config.warnings() {
        tracing::warn!("configuration: {w}");
    }
    for w in crate::config::host_warnings(&config) {
        tracing::warn!("host: {w}");
    }
    // A module reload the process cannot do is refused now, not in the middle of a recovery
    // (src/io/caps.rs says why the setting is not simply refused under systemd).
    if config.recovery.allow_module_reload {
        if let Some(why) = crate::io::caps::module_reload_refusal(&config.paths.proc_root) {
            return Err(Error::Config(crate::config::ConfigError::Invalid {
                path: match &source {
                    crate::config::ConfigSource::File(p) => p.clone(),
                    crate::config::ConfigSource::Defaults => {
                        crate::config::DEFAULT_CONFIG_PATH.into()
                    }
                },
                problems: vec![crate::config::Problem::new(
                    "recovery.allow-module-reload",
                    why,
                )],
            }));
        }
    }
    // Never beside a standalone manual recovery (one device, one journal), nor beside
    // another daemon; held until the process exits.
    std::fs::create_dir_all(&config.paths.state_dir)
        .map_err(|e| Error::io(format!("create {}", config.paths.state_dir.display()), e))?;
    let _daemon_lock = crate::io::lock::DaemonLock::acquire(&config.paths.state_dir)?;
    // One thread runs the loop and every source (kernel log, netlink, control socket): an
    // idle daemon then wakes once per timer, not once per worker hand-off. What may block
    // (iscsiadm, device re-creation, probes) already runs on the blocking pool, whose threads
    // stay parked between the session polls instead of being re-created for each one.
    let rt = tokio::runtime::Builder::new_current_thread()
        .thread_keep_alive(std::time::Duration::from_secs(300))
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the async runtime", e))?;
    let settings = Settings {
        config,
        config_path: globals.config.clone(),
        force_dry_run: args.dry_run,
        take_lock: true,
        automatic_actions: true,
        read_only: false,
    };
    let code = rt.block_on(async {
        let deps = Deps::real(&settings.config, true)?;
        run_loop(settings, deps, Mode::Daemon).await
    });
    // In-flight executors (an iscsiadm, a device re-creation) must not hold the exit: their
    // threads are abandoned; iscsiadm runs in its own process group with its own timeout.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    Ok(ExitCode::from(code?))
}
