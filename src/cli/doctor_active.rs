//! `iser-guard doctor --active DEVICE`: on a maintenance host, proves the re-creation of one
//! device on this hardware. Refuses beside a running daemon, holds the recovery lock, prints
//! the plan and asks (like the other destructive commands; `--yes`), runs it
//! ([`crate::doctor::active::run`]), prints each step with its time and writes a report file
//! (0600) with every CHAP secret redacted.

use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use super::daemon_view::{self, DaemonSide};
use super::doctor::Args;
use super::term::Steps;
use super::Globals;
use crate::core::doctor::active::ActiveReport;
use crate::core::doctor::parse::redact_iscsi_secrets;
use crate::core::doctor::{audit, AuditOutcome, Counts, Report};
use crate::doctor::active::{
    default_report_path, node_record_texts, plan, ActiveDeps, ActiveTiming, DirectDisks, KmsgLines,
    NetlinkGsi, PlanRefusal,
};
use crate::error::Error;
use crate::exit::ExitStatus;
use crate::io::iscsiadm::{IscsiAdm, Iscsiadm, SessionListing};
use crate::io::reset::{SysfsResetter, VerifyPolicy};

/// The report file.
#[derive(Serialize)]
struct ReportFile<'a> {
    /// Bumped when a reader would misread an older file.
    format: u32,
    /// This iser-guard.
    version: &'static str,
    /// Every step passed.
    passed: bool,
    /// The passive audit, as `doctor --json` gives it.
    doctor: DoctorPart<'a>,
    /// The run.
    active: &'a ActiveReport,
    /// `iscsiadm -m session -P 3` after the run, secrets redacted.
    sessions_after: String,
    /// The sessions' node records, secrets redacted: `[path, text]`.
    node_records: Vec<(String, String)>,
}

#[derive(Serialize)]
struct DoctorPart<'a> {
    outcome: AuditOutcome,
    counts: Counts,
    #[serde(flatten)]
    report: &'a Report,
}

fn refuse(code: ExitStatus, message: &str) -> ExitCode {
    eprintln!("iser-guard: doctor --active: {message}");
    code.into()
}

/// Runs `doctor --active DEVICE`.
pub fn run(device: &str, args: &Args, globals: &Globals) -> Result<ExitCode, Error> {
    let cfg = super::manual::config(globals)?;
    crate::config::check_device_name(device)
        .map_err(|e| Error::Usage(format!("`{device}` is not an RDMA device name: {e}")))?;
    match daemon_view::query(&cfg.paths.control_socket) {
        DaemonSide::NotRunning { .. } => {}
        DaemonSide::Running { snapshot } => {
            return Ok(refuse(
                ExitStatus::TempFail,
                &format!(
                    "an iser-guard daemon runs (pid {}): this is for a maintenance window, \
                     when nothing else acts on the device. `systemctl stop iser-guard` first, \
                     and start it again afterwards",
                    snapshot.daemon.pid
                ),
            ))
        }
        DaemonSide::Unreadable { socket, why } => {
            return Ok(refuse(
                ExitStatus::TempFail,
                &format!("something answers on {socket} ({why}): stop the iser-guard daemon first"),
            ))
        }
    }
    std::fs::create_dir_all(&cfg.paths.state_dir)
        .map_err(|e| Error::io(format!("create {}", cfg.paths.state_dir.display()), e))?;
    let _lock = crate::io::lock::RecoveryLock::try_acquire(
        &cfg.paths.state_dir,
        &format!("iser-guard doctor --active {device}"),
    )?;
    crate::io::lock::DaemonLock::refuse_if_running(&cfg.paths.state_dir)?;

    let (_, origin) = super::doctor::config(globals);
    let facts = super::doctor::facts(&cfg, &origin);
    let passive = audit(&facts);
    let verify = VerifyPolicy::default();
    let timing = ActiveTiming {
        recreate: cfg.recovery.reset_timeout + verify.gone_timeout + verify.back_timeout,
        grace: cfg.recovery.iscsid_grace,
        verify: cfg.recovery.verify_timeout,
        ..ActiveTiming::default()
    };
    let plan = match plan(&facts, device, &timing) {
        Ok(p) => p,
        Err(r @ PlanRefusal::NoDevice { .. }) => {
            return Ok(refuse(ExitStatus::NoInput, &r.to_string()))
        }
        Err(r @ PlanRefusal::NoMethod { .. }) => {
            return Ok(refuse(ExitStatus::Unavailable, &r.to_string()))
        }
    };
    println!("doctor --active will:");
    for l in plan.lines() {
        println!("  {l}");
    }
    if !super::manual::confirm(args.yes)? {
        eprintln!("iser-guard: not confirmed; nothing was changed");
        return Ok(ExitStatus::Finding.into());
    }
    let iscsi: Arc<dyn IscsiAdm> = Arc::new(Iscsiadm::new(
        cfg.paths.iscsiadm.clone(),
        cfg.recovery.iscsiadm_timeout,
    ));
    let mut deps = ActiveDeps {
        resetter: Arc::new(SysfsResetter::new(crate::compose::reset_config(&cfg))),
        selftest: crate::daemon::run::port_selftest(&cfg),
        iscsi: iscsi.clone(),
        gsi: Arc::new(NetlinkGsi),
        disks: Arc::new(DirectDisks {
            dev_root: cfg.paths.dev_root.clone(),
        }),
        kernel: Box::new(KmsgLines::open(&cfg.paths.kmsg)),
    };
    let steps = Steps::new();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(0))
        .unwrap_or(0);
    let started = super::when::utc(now_ms);
    let report = crate::doctor::active::run(&plan, &mut deps, &timing, started.clone(), &|m| {
        steps.step(m)
    });
    let passed = report.passed();
    let sessions_after = match iscsi.sessions(true) {
        Ok(SessionListing::Text(t)) => redact_iscsi_secrets(&t),
        Ok(SessionListing::NoSessions) => "iscsiadm: No active sessions.\n".into(),
        Err(e) => format!("(iscsiadm -m session -P 3 failed: {e})\n"),
    };
    let file = ReportFile {
        format: 1,
        version: env!("CARGO_PKG_VERSION"),
        passed,
        doctor: DoctorPart {
            outcome: passive.outcome(),
            counts: passive.counts(),
            report: &passive,
        },
        active: &report,
        sessions_after,
        node_records: node_record_texts(&cfg.paths.iscsi_dir, &plan),
    };
    let path = args
        .report
        .clone()
        .unwrap_or_else(|| default_report_path(&cfg.paths.state_dir, device, &started));
    let json = serde_json::to_vec_pretty(&file)
        .map_err(|e| Error::Data(format!("cannot encode the report: {e}")))?;
    match crate::io::atomic::write_atomic_mode(&path, &json, 0o600) {
        Ok(()) => steps.step(&format!("report written to {}", path.display())),
        Err(e) => eprintln!(
            "iser-guard: doctor --active: the report could not be written to {}: {e}",
            path.display()
        ),
    }
    if passed {
        steps.done(
            true,
            &format!(
                "doctor --active {device}: every method passed ({})",
                plan.methods
                    .iter()
                    .map(|m| m.kind())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        Ok(ExitStatus::Ok.into())
    } else {
        steps.done(
            false,
            &format!(
                "doctor --active {device}: {}",
                report.stopped.as_deref().unwrap_or("not every step passed")
            ),
        );
        Ok(ExitStatus::Finding.into())
    }
}
