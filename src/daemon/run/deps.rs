//! The loop's composition root: every dependency it talks to ([`Deps`]), the settings that
//! are not dependencies ([`Settings`]), what the loop is for ([`Mode`]), and the real ones
//! picked explicitly for production ([`Deps::real`]). Tests and the simulator pass doubles.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use crate::config::Config;
use crate::core::driver::Driver;
use crate::core::recovery::Engine;
use crate::core::session_map::NetdevAddr;
use crate::daemon::notify::Notifier;
use crate::daemon::sources::{Clock, KernelLog, TopologySource};
use crate::error::Error;
use crate::io::control::{ControlServer, Reply, Request};
use crate::io::executors::Executors;

/// Lists the host's interface addresses (for placing sessions on RDMA ports).
pub type AddressLister = Arc<dyn Fn() -> std::io::Result<Vec<NetdevAddr>> + Send + Sync>;

/// Route lookups for placing sessions on RDMA ports, shared with the loop.
pub use crate::io::route::RouteLookup;

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
    pub routes: Arc<RouteLookup>,
    /// The control socket; `None` for the standalone manual commands.
    pub control: Option<ControlServer>,
    /// Stops the loop like SIGTERM when it receives (tests; `None` in production, where
    /// the signals do it).
    pub shutdown: Option<tokio::sync::oneshot::Receiver<()>>,
    /// The devices' asynchronous event listeners and the channel their events arrive on
    /// (`None`: no such witness, as in a build without verbs or a standalone command).
    pub async_events: Option<crate::daemon::witness::Listeners>,
    /// Where the verbs devices are checked for a sandbox lockout (`None`: not checked, as
    /// in a standalone command).
    pub verbs_access: Option<crate::io::verbs_access::LockoutWatch>,
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
    /// Write nothing: no state directory, no journal, no cursor (the one-shot loop that
    /// answers a manual command's plan, which must change nothing on the host).
    pub read_only: bool,
}

/// Route lookups for placement. They are joined with the port netdevs read under
/// `paths.sysfs-root`; when that is not the running kernel's `/sys` (a test tree, a copy),
/// this host's routing table describes another machine and is not consulted.
fn host_routes(sysfs_root: &std::path::Path) -> Arc<RouteLookup> {
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
        use crate::daemon::sources::{BootClock, KmsgLog};
        use crate::daemon::topology::HostTopology;
        let (kernel_log, control) = if daemon {
            let kernel_log = if cfg.kmsg.enabled {
                let reader = crate::io::kmsg::open(&crate::compose::kmsg_options(&cfg.paths))?;
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
                netlink: crate::daemon::topology::NetlinkAccess::Kernel,
                metrics: crate::metrics::Metrics::disabled(),
                mountinfo: Some(cfg.paths.proc_root.join("self/mountinfo")),
            }),
            executors: crate::compose::executors(cfg).with_selftest(port_selftest(cfg)),
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
            verbs_access: daemon
                .then(|| crate::io::verbs_access::LockoutWatch::new(cfg.paths.dev_root.clone())),
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
        // A self-test that meets a sandbox lockout of the verbs devices says so as
        // "unavailable", never as a failed port (crate::io::verbs_access).
        Ok(t) => Arc::new(crate::io::verbs_access::SandboxAware {
            inner: crate::io::selftest::RetryOnReject { inner: t },
            watch: crate::io::verbs_access::LockoutWatch::new(cfg.paths.dev_root.clone()),
        }),
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

/// The driver the loop runs `engine` in: the core's [`Driver`], the same type the simulator's
/// harness runs ([`crate::sim::Harness::driver`]). Automatic destructive actions run unless
/// `settings` says this is a standalone manual command.
pub fn driver_for(engine: Engine, settings: &Settings) -> Driver {
    Driver::new(engine, settings.automatic_actions)
}

/// Applies `--dry-run` to a configuration.
pub(super) fn effective(mut cfg: Config, force_dry_run: bool) -> Config {
    if force_dry_run {
        cfg.recovery.dry_run = true;
    }
    cfg
}
