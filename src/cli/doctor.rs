//! `iser-guard doctor`: whether this host can be protected, one line per check with its
//! verdict (ok, warning, problem, unknown), the evidence and what to do; `--json` gives the
//! same. Read-only and safe at any time: it reads sysfs, /proc, the unit file, open-iscsi's
//! files, asks RDMA netlink, iscsiadm (`-m session -P 3`), `devlink dev param show` and the
//! daemon's control socket, and changes nothing.
//!
//! `doctor --active DEVICE` (a maintenance host only) proves the re-creation on this host's
//! hardware: see [`crate::doctor::active`].
//!
//! Exit codes: 0 every check ok; 1 a problem; 2 warnings (or checks it could not make) and no
//! problem ([`ExitStatus::DOCTOR_WARNINGS`]); 69 the host has no RDMA device. With `--active`:
//! 0 every step passed, 1 one failed or hung, 64 not confirmed without a terminal, 66 no such
//! device, 75 a daemon runs or another recovery holds the lock.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use super::daemon_view::{self, DaemonSide};
use super::term::{Colour, Style};
use super::Globals;
use crate::config::Config;
use crate::core::doctor::{
    audit, AuditOutcome, Check, CheckVerdict, Counts, DaemonWitness, Report,
};
use crate::doctor::{gather, ConfigOrigin, Sources, Witnesses};
use crate::error::Error;
use crate::exit::ExitStatus;
use crate::io::iscsiadm::Iscsiadm;
use crate::io::netlink::NldevClient;
use crate::io::process::SystemRunner;
use crate::io::reset::SysfsResetter;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as JSON (the same checks, verdicts, evidence and actions).
    #[arg(long)]
    pub json: bool,
    /// Maintenance hosts only: prove the re-creation of DEVICE on this host, once per method,
    /// with its sessions logged in and a direct-I/O read running, and write a report file.
    #[arg(long, value_name = "DEVICE")]
    pub active: Option<String>,
    /// With --active: do not ask for confirmation.
    #[arg(long, short = 'y', requires = "active")]
    pub yes: bool,
    /// With --active: where to write the report [default:
    /// <paths.state-dir>/doctor-active-DEVICE-TIME.json].
    #[arg(long, value_name = "PATH", requires = "active")]
    pub report: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    if let Some(device) = &args.active {
        return super::doctor_active::run(device, &args, globals);
    }
    let (cfg, origin) = config(globals);
    let report = passive(&cfg, &origin);
    let status = status_of(report.outcome());
    if args.json {
        println!("{}", to_json(&report, status)?);
    } else {
        print!("{}", render(&report, status, Style::stdout()));
    }
    Ok(status.into())
}

/// The configuration to audit, and where it came from. A file that cannot be used is
/// itself a finding (the audit goes on with the built-in defaults), never a reason to stop.
pub(crate) fn config(globals: &Globals) -> (Config, ConfigOrigin) {
    match crate::config::load_or_default(globals.config.as_deref()) {
        Ok((cfg, source)) => (
            cfg,
            ConfigOrigin {
                source: source.to_string(),
                ..ConfigOrigin::default()
            },
        ),
        Err(e) => {
            let source = globals
                .config
                .as_deref()
                .unwrap_or(std::path::Path::new(crate::config::DEFAULT_CONFIG_PATH))
                .display()
                .to_string();
            let origin = if super::manual::is_permission_denied(&e) {
                ConfigOrigin {
                    source,
                    problems: Vec::new(),
                    unread: Some(e.to_string()),
                }
            } else {
                ConfigOrigin {
                    source,
                    problems: e.problems().iter().map(ToString::to_string).collect(),
                    unread: None,
                }
            };
            (Config::default(), origin)
        }
    }
}

/// Reads this host and judges it.
pub(crate) fn passive(cfg: &Config, origin: &ConfigOrigin) -> Report {
    let mut report = audit(&facts(cfg, origin));
    report
        .checks
        .extend(crate::core::doctor::nvme_reconnect_check(&nvme_facts(cfg)));
    report
        .checks
        .extend(crate::core::doctor::nfs_mount_check(&nfs_facts(cfg)));
    report
        .checks
        .extend(crate::core::doctor::multipath_check(&multipath_facts(cfg)));
    report
}

/// The NFS over RDMA mounts (`self/mountinfo` under `paths.proc-root`), placed by the CM id
/// table when RDMA netlink answers, and the consumers per port, for the NFS check.
fn nfs_facts(cfg: &Config) -> crate::core::doctor::NfsMountFacts {
    let (mut mounts, _) =
        crate::io::mountinfo::nfs_rdma_mounts(&cfg.paths.proc_root.join("self/mountinfo"));
    let g = super::status::gather(NldevClient::open(), &cfg.paths.sysfs_root);
    crate::core::nfs_rdma::place_mounts(&mut mounts, &g.cm_ids, &[]);
    let consumers = g.netlink_error.is_none().then(|| {
        g.topology
            .as_ref()
            .map(|t| crate::core::consumers::of_topology(t, &g.cm_ids))
            .unwrap_or_default()
    });
    crate::core::doctor::NfsMountFacts { mounts, consumers }
}

/// The dm-multipath maps sysfs shows, and multipathd's paths (one bounded run), for the
/// multipath check.
fn multipath_facts(cfg: &Config) -> crate::core::doctor::MultipathFacts {
    let client = crate::io::multipathd::MultipathdProgram {
        program: cfg.paths.multipathd.clone(),
    };
    let present = crate::io::process::is_executable(&cfg.paths.multipathd);
    let read = crate::io::multipathd::read_paths(&client, crate::io::multipathd::COMMAND_TIMEOUT)
        .map_err(|e| e.to_string())
        .transpose();
    crate::core::doctor::MultipathFacts {
        sysfs_maps: crate::io::multipathd::sysfs_maps(&cfg.paths.sysfs_root),
        multipathd: cfg.paths.multipathd.display().to_string(),
        multipathd_present: present,
        read,
        proceed: cfg.recovery.multipath_last_path == crate::config::ConsumerAction::Proceed,
    }
}

/// The NVMe over RDMA controllers (placed by the CM id table when RDMA netlink answers),
/// nvme-cli and `recovery.nvme-reconnect`, for the NVMe check.
fn nvme_facts(cfg: &Config) -> crate::core::doctor::NvmeReconnectFacts {
    let (mut controllers, _) = crate::io::sysfs::nvme::rdma_controllers(&cfg.paths.sysfs_root);
    if !controllers.is_empty() {
        let cm_ids = super::status::gather(NldevClient::open(), &cfg.paths.sysfs_root).cm_ids;
        crate::core::nvme_fabrics::place_controllers(&mut controllers, &cm_ids, &[]);
    }
    crate::core::doctor::NvmeReconnectFacts {
        controllers,
        nvme_cli: cfg.paths.nvme.display().to_string(),
        nvme_cli_present: crate::io::process::is_executable(&cfg.paths.nvme),
        enabled: cfg.recovery.nvme_reconnect,
    }
}

/// Reads this host.
pub(crate) fn facts(cfg: &Config, origin: &ConfigOrigin) -> crate::core::doctor::Facts {
    let sources = Sources::of(cfg);
    let live = sources.is_live();
    let iscsi = Iscsiadm::new(cfg.paths.iscsiadm.clone(), cfg.recovery.iscsiadm_timeout);
    let resetter = SysfsResetter::new(crate::compose::reset_config(cfg));
    let route = move |ip: std::net::IpAddr| -> Result<String, String> {
        if live {
            crate::io::route::route_netdev(ip).map_err(|e| e.to_string())
        } else {
            Err("route lookups are off: the sysfs root is not this kernel's".into())
        }
    };
    let addresses = if live {
        crate::io::netif::addresses().unwrap_or_default()
    } else {
        Vec::new()
    };
    let daemon = witness(daemon_view::query(&cfg.paths.control_socket));
    gather(
        cfg,
        origin,
        Witnesses {
            netlink: NldevClient::open(),
            iscsi: &iscsi,
            resetter: &resetter,
            runner: &SystemRunner,
            addresses,
            routes: &route,
            daemon,
        },
    )
}

fn witness(side: DaemonSide) -> DaemonWitness {
    match side {
        DaemonSide::Running { snapshot } => DaemonWitness::Running { snapshot },
        DaemonSide::NotRunning { socket } => DaemonWitness::NotRunning { socket },
        DaemonSide::Unreadable { why, .. } => DaemonWitness::Unreadable { why },
    }
}

/// The documented exit status of an audit.
pub fn status_of(outcome: AuditOutcome) -> ExitStatus {
    match outcome {
        AuditOutcome::AllOk => ExitStatus::Ok,
        AuditOutcome::Warnings => ExitStatus::DOCTOR_WARNINGS,
        AuditOutcome::Problems => ExitStatus::Finding,
        AuditOutcome::NoRdma => ExitStatus::Unavailable,
    }
}

/// `doctor --json`.
#[derive(Serialize)]
struct JsonReport<'a> {
    outcome: AuditOutcome,
    exit_code: u8,
    counts: Counts,
    #[serde(flatten)]
    report: &'a Report,
}

/// The report as JSON.
pub fn to_json(report: &Report, status: ExitStatus) -> Result<String, Error> {
    super::status::to_json(&JsonReport {
        outcome: report.outcome(),
        exit_code: status.code(),
        counts: report.counts(),
        report,
    })
}

fn colour(v: CheckVerdict) -> Colour {
    match v {
        CheckVerdict::Ok => Colour::Green,
        CheckVerdict::Unknown => Colour::Dim,
        CheckVerdict::Warning => Colour::Yellow,
        CheckVerdict::Problem => Colour::Red,
    }
}

/// One check: its line (verdict, check, subject, finding), then its evidence and what to do,
/// indented.
pub fn render_check(c: &Check, style: Style) -> String {
    let mut s = String::new();
    let verdict = format!("{:<8}", c.verdict.name());
    let _ = writeln!(
        s,
        "{} {:<12} {}: {}",
        style.paint(colour(c.verdict), &verdict),
        c.check.name(),
        c.subject,
        c.finding
    );
    for e in &c.evidence {
        let _ = writeln!(s, "           {}", style.paint(Colour::Dim, e));
    }
    if let Some(a) = &c.action {
        let _ = writeln!(s, "           do: {a}");
    }
    s
}

/// The whole report as text.
pub fn render(report: &Report, status: ExitStatus, style: Style) -> String {
    let mut s = String::new();
    if let Some(why) = &report.no_rdma {
        let _ = writeln!(
            s,
            "{}\n",
            style.paint(Colour::Red, &format!("NO RDMA: {why}"))
        );
    }
    for c in &report.checks {
        s.push_str(&render_check(c, style));
    }
    let c = report.counts();
    let _ = writeln!(
        s,
        "\ndoctor: {} ok, {} warning(s), {} problem(s), {} unknown: {} (exit {})",
        c.ok,
        c.warning,
        c.problem,
        c.unknown,
        match report.outcome() {
            AuditOutcome::AllOk => "this host can be protected as it is",
            AuditOutcome::Warnings => "no problem; read the warnings",
            AuditOutcome::Problems =>
                "iser-guard cannot protect everything here as it is: see the problems",
            AuditOutcome::NoRdma => "this host has no RDMA device",
        },
        status.code()
    );
    s
}
