//! `iser-guard doctor`: whether this host can be protected, judged from what was read of it.
//!
//! The shell reads the host into [`Facts`] (sysfs, /proc, RDMA netlink, iscsiadm, the unit
//! file, the daemon's control socket); [`audit`] judges them, one [`Check`] per thing looked
//! at, each with a [`CheckVerdict`], the evidence and what to do. Pure: the same facts always give
//! the same report, so every check is tested on fixture hosts.
//!
//! The checks, in the order they are reported ([`CheckKind`]): the kernel; each RDMA driver
//! (in-tree or not); each RDMA device (parent, auxiliary device, driver folder, netdevs,
//! ports); how each device would be re-created; QP 1 of each port; the RDMA CM consumers of
//! each port; the service's device sandbox; the modules iser-guard needs; the configuration
//! against the host; open-iscsi's settings that fight recovery; known kernel defects and
//! hazards ([`known`]); the running daemon against the kernel.
//!
//! [`active`] holds the types of `doctor --active` (one timed re-creation per method) and its
//! verdict.

pub mod active;
mod facts;
mod host;
mod iscsi;
pub mod known;
mod multipath;
mod nfs;
mod nvme;
pub mod parse;
mod rdma;

pub use facts::*;
pub use multipath::{multipath_check, MultipathFacts};
pub use nfs::{nfs_mount_check, NfsMountFacts};
pub use nvme::{nvme_reconnect_check, NvmeReconnectFacts};

use serde::Serialize;

/// How a check came out. Ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckVerdict {
    /// Fine for iser-guard.
    Ok,
    /// Could not be checked (the reason is in the evidence): not known to be fine.
    Unknown,
    /// Works, but something will get in the way of a recovery or of an operator.
    Warning,
    /// iser-guard cannot protect this part of the host as it is.
    Problem,
}

impl CheckVerdict {
    /// The word printed.
    pub fn name(self) -> &'static str {
        match self {
            CheckVerdict::Ok => "ok",
            CheckVerdict::Unknown => "unknown",
            CheckVerdict::Warning => "warning",
            CheckVerdict::Problem => "problem",
        }
    }
}

/// What a check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// The running kernel: release, taint.
    Kernel,
    /// One kernel module serving RDMA devices: version, in-tree or out-of-tree.
    Driver,
    /// One RDMA device: parent PCI function, auxiliary device, driver folder, netdevs, ports.
    Device,
    /// How one device would be re-created, and which way the daemon would use.
    Recreate,
    /// QP 1 (the GSI QP) of one port in the live QP table.
    GsiQp,
    /// The RDMA CM ids of one port, by consumer.
    CmIds,
    /// The service's device sandbox against the verbs and rdma_cm nodes.
    Sandbox,
    /// The kernel modules iser-guard needs.
    Modules,
    /// The configuration against this host.
    Config,
    /// open-iscsi settings that fight recovery.
    OpenIscsi,
    /// A known kernel defect or hazard that applies here.
    KnownIssue,
    /// The running daemon's view against the kernel's.
    Daemon,
}

impl CheckKind {
    /// Every kind, in report order.
    pub const ALL: [CheckKind; 12] = [
        CheckKind::Kernel,
        CheckKind::Driver,
        CheckKind::Device,
        CheckKind::Recreate,
        CheckKind::GsiQp,
        CheckKind::CmIds,
        CheckKind::Sandbox,
        CheckKind::Modules,
        CheckKind::Config,
        CheckKind::OpenIscsi,
        CheckKind::KnownIssue,
        CheckKind::Daemon,
    ];

    /// The name printed and used in JSON (`gsi-qp`).
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::Kernel => "kernel",
            CheckKind::Driver => "driver",
            CheckKind::Device => "device",
            CheckKind::Recreate => "recreate",
            CheckKind::GsiQp => "gsi-qp",
            CheckKind::CmIds => "cm-ids",
            CheckKind::Sandbox => "sandbox",
            CheckKind::Modules => "modules",
            CheckKind::Config => "config",
            CheckKind::OpenIscsi => "open-iscsi",
            CheckKind::KnownIssue => "known-issue",
            CheckKind::Daemon => "daemon",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What kind of check.
    pub check: CheckKind,
    /// What it is about: `host`, a device, `device/port`, a module, a node record.
    pub subject: String,
    /// How it came out.
    pub verdict: CheckVerdict,
    /// What was found, in one line.
    pub finding: String,
    /// What it was judged from (files, table rows, values).
    pub evidence: Vec<String>,
    /// What to do, when something should be done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

impl Check {
    fn new(
        check: CheckKind,
        subject: impl Into<String>,
        verdict: CheckVerdict,
        finding: impl Into<String>,
    ) -> Self {
        Check {
            check,
            subject: subject.into(),
            verdict,
            finding: finding.into(),
            evidence: Vec::new(),
            action: None,
        }
    }

    fn evidence(mut self, e: impl Into<String>) -> Self {
        self.evidence.push(e.into());
        self
    }

    fn evidence_all<I: IntoIterator<Item = S>, S: Into<String>>(mut self, e: I) -> Self {
        self.evidence.extend(e.into_iter().map(Into::into));
        self
    }

    fn action(mut self, a: impl Into<String>) -> Self {
        self.action = Some(a.into());
        self
    }
}

/// How many checks came out each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `ok`.
    pub ok: usize,
    /// `unknown`.
    pub unknown: usize,
    /// `warning`.
    pub warning: usize,
    /// `problem`.
    pub problem: usize,
}

/// What the whole audit says (the binary maps it to its exit status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditOutcome {
    /// Every check is ok.
    AllOk,
    /// No problem, but warnings or checks that could not be made.
    Warnings,
    /// At least one problem.
    Problems,
    /// The host has no RDMA device: there is nothing for iser-guard to protect.
    NoRdma,
}

/// The audit of one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The host has at least one RDMA device (in sysfs or RDMA netlink).
    pub rdma_present: bool,
    /// When there is none: why, in operator words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_rdma: Option<String>,
    /// Every check, in report order.
    pub checks: Vec<Check>,
}

impl Report {
    /// The counts by verdict.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for k in &self.checks {
            match k.verdict {
                CheckVerdict::Ok => c.ok += 1,
                CheckVerdict::Unknown => c.unknown += 1,
                CheckVerdict::Warning => c.warning += 1,
                CheckVerdict::Problem => c.problem += 1,
            }
        }
        c
    }

    /// The whole audit's outcome: no RDMA first (nothing else matters then), then the worst
    /// verdict; a check that could not be made counts as a warning.
    pub fn outcome(&self) -> AuditOutcome {
        let c = self.counts();
        if !self.rdma_present {
            AuditOutcome::NoRdma
        } else if c.problem > 0 {
            AuditOutcome::Problems
        } else if c.warning + c.unknown > 0 {
            AuditOutcome::Warnings
        } else {
            AuditOutcome::AllOk
        }
    }

    /// The checks about `subject`.
    pub fn about<'a>(&'a self, subject: &'a str) -> impl Iterator<Item = &'a Check> + 'a {
        self.checks.iter().filter(move |c| c.subject == subject)
    }

    /// The first check of `kind` about `subject`.
    pub fn find(&self, kind: CheckKind, subject: &str) -> Option<&Check> {
        self.checks
            .iter()
            .find(|c| c.check == kind && c.subject == subject)
    }
}

/// Judges `facts`: every check, in report order.
pub fn audit(facts: &Facts) -> Report {
    let mut checks = Vec::new();
    rdma::kernel(facts, &mut checks);
    rdma::drivers(facts, &mut checks);
    rdma::devices(facts, &mut checks);
    rdma::recreate(facts, &mut checks);
    rdma::gsi(facts, &mut checks);
    rdma::cm_ids(facts, &mut checks);
    host::sandbox(facts, &mut checks);
    host::modules(facts, &mut checks);
    host::config(facts, &mut checks);
    iscsi::settings(facts, &mut checks);
    rdma::known_issues(facts, &mut checks);
    host::daemon(facts, &mut checks);
    let rdma_present = !facts.rdma.devices.is_empty();
    Report {
        rdma_present,
        no_rdma: (!rdma_present).then(|| no_rdma_reason(facts)),
        checks,
    }
}

/// Why a host without RDMA devices has none, as precisely as the facts allow.
fn no_rdma_reason(f: &Facts) -> String {
    let netlink = match &f.rdma.netlink {
        Ok(()) => "RDMA netlink lists no device".to_string(),
        Err(e) => format!("RDMA netlink: {e}"),
    };
    let sysfs = if let Some(e) = &f.rdma.sysfs_error {
        format!("sysfs could not be read ({e})")
    } else if f.rdma.class_present {
        format!("{}/class/infiniband is empty", f.paths.sysfs)
    } else {
        format!(
            "{}/class/infiniband does not exist (no ib_core: the kernel has no RDMA support \
             loaded)",
            f.paths.sysfs
        )
    };
    format!(
        "this host has no RDMA device: {sysfs}, and {netlink}. iser-guard has nothing to \
         protect here; on an iSER host, load the NIC's RDMA driver (irdma, mlx5_ib) or add a \
         Soft-RoCE link (`rdma link add NAME type rxe netdev NETDEV`)"
    )
}

/// Whether iser-guard may re-create `device`: it is allow-listed, or sessions run on it
/// (an operator's `recover` would).
fn in_scope(f: &Facts, device: &str) -> bool {
    f.config.allow.iter().any(|a| a == device) || sessions_on(f, device) > 0
}

/// How many iSCSI sessions are placed on `device`.
fn sessions_on(f: &Facts, device: &str) -> usize {
    f.iscsi
        .sessions
        .as_ref()
        .map(|s| {
            s.iter()
                .filter(|s| s.port.as_ref().is_some_and(|(d, _)| d == device))
                .count()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
