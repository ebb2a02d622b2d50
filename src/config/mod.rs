//! The TOML configuration: /etc/iser-guard/config.toml unless `--config` says otherwise.
//!
//! Every table rejects unknown keys, so a typo is an error rather than a silently ignored
//! setting. `iser-guard check-config` reports every problem with its key path.
//! The documented default lives in `config/iser-guard.toml`; `Config::default()` must match it.
//!
//! Loading ([`load`]) runs in five steps, and steps 2–5 each report *every* problem they find,
//! not just the first, each with its key path and, where the key is in the file, its
//! line and column:
//!
//! 1. the file itself: it must be a regular file that only root can write or replace: every
//!    component from `/` to it, symlinks followed, is checked ([`crate::path_trust`]), since
//!    whoever can write or replace the file can make the daemon re-create RDMA devices and
//!    run programs as root;
//! 2. TOML syntax, with the parser's error recovery (`toml::de::DeTable::parse_recoverable`);
//! 3. schema: serde stops at the first error, so every key is deserialized on its own into its
//!    table's struct (one single-key table at a time). The serde derives stay the one source
//!    of truth for key names, types and `deny_unknown_fields`;
//! 4. semantics ([`Config::validate`]): ranges and relations between keys;
//! 5. trust of the paths the daemon runs or keeps state in ([`trust_problems`]): the
//!    executables in `paths.*`, `paths.state-dir` and the control socket's directory, by the
//!    same rules, and `paths.control-socket` must not name anything but a socket.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::core::severity::Severity;

mod load;

pub use load::{
    check_named, host_warnings, load, load_or_default, load_or_default_from, trust_problems,
};

/// Where the configuration is read from when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/iser-guard/config.toml";

/// The largest configuration file read (1 MiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The longest RDMA device name the kernel accepts: `IB_DEVICE_NAME_MAX` (64) minus the NUL.
pub const IB_DEVICE_NAME_MAX_LEN: usize = 63;

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// File-system locations; tests point these at fixtures.
    pub paths: Paths,
    /// How often the daemon looks at things that have no events.
    pub poll: Poll,
    /// Which RDMA devices may be acted on.
    pub devices: Devices,
    /// Recovery policy.
    pub recovery: Recovery,
    /// Where alerts go.
    pub alerts: Alerts,
    /// Trust settings for the kernel log.
    pub kmsg: Kmsg,
    /// Prometheus metrics (node_exporter textfile).
    pub metrics: MetricsConfig,
}

/// File-system locations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Paths {
    /// The kernel log device.
    pub kmsg: PathBuf,
    /// Root of the sysfs tree (`/sys`).
    pub sysfs_root: PathBuf,
    /// Where the journal and the kmsg cursor live.
    pub state_dir: PathBuf,
    /// The iscsiadm binary.
    pub iscsiadm: PathBuf,
    /// The daemon's control socket.
    pub control_socket: PathBuf,
    /// The file holding the current boot id.
    pub boot_id: PathBuf,
    /// The devlink binary (iproute2), used to toggle `enable_roce`/`enable_iwarp` on ice.
    pub devlink: PathBuf,
    /// The rdma binary (iproute2), used to delete and re-add rxe/siw links.
    pub rdma: PathBuf,
    /// The modprobe binary, used only when `recovery.allow-module-reload` is true.
    pub modprobe: PathBuf,
    /// nvme-cli's binary: `nvme connect` brings back the NVMe over RDMA controllers a
    /// re-creation deleted (`recovery.nvme-reconnect`).
    pub nvme: PathBuf,
    /// multipathd's client: the dm-multipath maps' paths are read with
    /// `multipathd show paths`, and a path still failed after a re-creation is reinstated
    /// with `multipathd reinstate path` (`recovery.multipath-last-path`).
    pub multipathd: PathBuf,
    /// Root of procfs (`/proc`): `iser-guard doctor` reads the kernel release, devices and
    /// modules there; the daemon and `status` read `self/mountinfo` (NFS over RDMA mounts).
    pub proc_root: PathBuf,
    /// Root of the device nodes (`/dev`): `doctor` lists `infiniband/` and reads the
    /// sessions' disks there.
    pub dev_root: PathBuf,
    /// Where the kernel's modules are installed (`/lib/modules`): `doctor` reads
    /// `RELEASE/modules.dep` and `modules.builtin`.
    pub modules_root: PathBuf,
    /// open-iscsi's configuration (`/etc/iscsi`): `doctor` reads `iscsid.conf` and `nodes/`.
    pub iscsi_dir: PathBuf,
    /// The service's unit file, whose device sandbox `doctor` checks.
    pub unit_file: PathBuf,
    /// The folder of the unit's drop-ins (`systemctl edit iser-guard` writes there).
    pub unit_dropins: PathBuf,
}

/// Poll intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Poll {
    /// RDMA netlink dump interval (also the safety net when monitor events exist).
    #[serde(with = "humantime_secs")]
    pub netlink: Duration,
    /// `iscsiadm -m session -P 3` interval.
    #[serde(with = "humantime_secs")]
    pub iscsi: Duration,
    /// Portal probe interval while waiting for a target.
    #[serde(with = "humantime_secs")]
    pub probe: Duration,
}

/// Device allow-list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Devices {
    /// RDMA device names (e.g. `rocep2s0f0`) that automatic recovery may re-create.
    /// Empty means none: the daemon then only alerts. Exact names only, no globs.
    pub allow: Vec<String>,
}

// The policy vocabulary lives in the pure core; the file maps onto it.
pub use iser_guard_core::consumers::{ConsumerAction, ConsumerKind, ConsumerPolicy};
pub use iser_guard_core::recovery::{
    OtherSessions, Policy, ProbeMethod, ResetWhen, SelfTestPolicy,
};

/// Recovery policy knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Recovery {
    /// Decide and alert, never act.
    pub dry_run: bool,
    /// When to re-create the device.
    pub reset_when: ResetWhen,
    /// Consecutive successful probes before the target counts as back.
    pub probe_successes: u32,
    /// How portals are probed.
    pub probe_method: ProbeMethod,
    /// Per-portal exceptions to `probe_method` (`"ip:port"` → method), e.g. an iSER-only
    /// portal probed by ARP/ND.
    pub portal_probe_method: BTreeMap<String, ProbeMethod>,
    /// Port probed when a portal names none.
    pub probe_port: u16,
    /// Probe timeout.
    #[serde(with = "humantime_secs")]
    pub probe_timeout: Duration,
    /// First back-off between attempts; doubles each time.
    #[serde(with = "humantime_secs")]
    pub backoff_initial: Duration,
    /// Back-off ceiling.
    #[serde(with = "humantime_secs")]
    pub backoff_max: Duration,
    /// Attempts before the port is quarantined.
    pub max_attempts: u32,
    /// Grace period for iscsid's own reconnect after the port is back.
    #[serde(with = "humantime_secs")]
    pub iscsid_grace: Duration,
    /// Policy when other sessions on the same device are healthy.
    pub other_sessions: OtherSessions,
    /// Allow `modprobe -r`/`modprobe` as the last resort (hits every device of the driver).
    pub allow_module_reload: bool,
    /// Timeout for one iscsiadm invocation.
    #[serde(with = "humantime_secs")]
    pub iscsiadm_timeout: Duration,
    /// How long a re-created device has to come back (registered again, QP 1 in RTS) before
    /// the attempt counts as failed.
    #[serde(with = "humantime_secs")]
    pub reset_timeout: Duration,
    /// How long the sessions and their disks have, after the reconnect, to be verified as
    /// logged in and running before the attempt counts as failed.
    #[serde(with = "humantime_secs")]
    pub verify_timeout: Duration,
    /// Self-test a re-created device's port (a new RDMA connection on it) before it counts
    /// as recovered: `auto` when the daemon has a self-test, or `off`.
    pub selftest: SelfTestPolicy,
    /// How long a vanished initiator device is awaited (it may come back by itself) before it
    /// is re-created from what was remembered of it.
    #[serde(with = "humantime_secs")]
    pub device_wait: Duration,
    /// `[recovery.consumers]`: per kind of RDMA consumer other than iSER, what a live one
    /// does to an automatic re-creation of its device (`wait`, the default, or `proceed`).
    pub consumers: BTreeMap<ConsumerKind, ConsumerAction>,
    /// After a re-creation, reconnect the NVMe over RDMA controllers remembered on the device
    /// with `nvme connect` (paths.nvme) and verify them.
    pub nvme_reconnect: bool,
    /// A device that carries the last usable path of a dm-multipath map: `wait` (the
    /// default: its automatic re-creation is held, with an alert naming the maps and
    /// paths) or `proceed`.
    pub multipath_last_path: ConsumerAction,
}

/// A syslog facility.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Facility {
    /// `daemon` (3), the default for system daemons.
    Daemon,
    /// `user` (1).
    User,
    /// `local0` (16).
    Local0,
    /// `local1` (17).
    Local1,
    /// `local2` (18).
    Local2,
    /// `local3` (19).
    Local3,
    /// `local4` (20).
    Local4,
    /// `local5` (21).
    Local5,
    /// `local6` (22).
    Local6,
    /// `local7` (23).
    Local7,
}

impl Facility {
    /// The numeric syslog facility (the PRI field is `facility * 8 + severity`).
    pub fn code(self) -> u8 {
        match self {
            Facility::User => 1,
            Facility::Daemon => 3,
            Facility::Local0 => 16,
            Facility::Local1 => 17,
            Facility::Local2 => 18,
            Facility::Local3 => 19,
            Facility::Local4 => 20,
            Facility::Local5 => 21,
            Facility::Local6 => 22,
            Facility::Local7 => 23,
        }
    }
}

/// Alert settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Alerts {
    /// Send alerts to syslog.
    pub syslog: bool,
    /// The syslog socket.
    pub syslog_socket: PathBuf,
    /// Syslog identifier.
    pub ident: String,
    /// Syslog facility of the alerts.
    pub facility: Facility,
    /// Minimum time between two identical alerts; repeats are counted and reported once.
    #[serde(with = "humantime_secs")]
    pub repeat_interval: Duration,
    /// Severity of "a port is stuck" (fault detected, target gone, waiting).
    pub severity_fault: Severity,
    /// Severity of "iser-guard is acting" (device re-created, sessions reconnected), and of
    /// what it would have done in dry-run.
    pub severity_action: Severity,
    /// Severity of "the port and its sessions are back".
    pub severity_recovered: Severity,
    /// Severity of "gave up, an operator must act" (quarantine, other sessions in the way,
    /// device not allow-listed).
    pub severity_operator: Severity,
}

impl Alerts {
    /// The configured syslog severity of each class of engine alert.
    pub fn severities(&self) -> crate::core::severity::AlertSeverities {
        crate::core::severity::AlertSeverities {
            fault: self.severity_fault,
            action: self.severity_action,
            recovered: self.severity_recovered,
            operator: self.severity_operator,
        }
    }

    /// The configured syslog severity for an engine alert of this class.
    pub fn syslog_severity(&self, class: iser_guard_core::recovery::AlertClass) -> Severity {
        self.severities().of(class)
    }
}

/// Kernel-log settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Kmsg {
    /// Read the kernel log at all. Off, stuck QPs are seen only in the RDMA netlink QP table
    /// (every `poll.netlink`), and nothing the kernel prints is explained or counted: for
    /// hosts whose sandbox denies /dev/kmsg, and to prove the QP table alone suffices.
    pub enabled: bool,
    /// Let records written by userspace (facility ≠ 0) trigger actions. Only for labs and
    /// end-to-end tests: anyone who can write /dev/kmsg could then forge a fault.
    pub trust_userspace_records: bool,
}

impl Default for Kmsg {
    fn default() -> Kmsg {
        Kmsg {
            enabled: true,
            trust_userspace_records: false,
        }
    }
}

/// Prometheus metrics, written for node_exporter's textfile collector.
/// (`metrics::Metrics` is the daemon's registry; the serde name stays `Metrics`, so a
/// wrong `[metrics]` table is reported as before.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
#[serde(rename = "Metrics")]
pub struct MetricsConfig {
    /// Write the metrics file.
    pub enabled: bool,
    /// The file, written atomically (temporary file + rename). node_exporter reads `*.prom`.
    pub textfile: PathBuf,
    /// How often the file is rewritten.
    #[serde(with = "humantime_secs")]
    pub interval: Duration,
    /// Also serve `/metrics` over HTTP on this loopback address (`127.0.0.1:9464`);
    /// non-loopback addresses are refused.
    pub listen: Option<std::net::SocketAddr>,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            kmsg: PathBuf::from("/dev/kmsg"),
            sysfs_root: PathBuf::from("/sys"),
            state_dir: PathBuf::from("/var/lib/iser-guard"),
            iscsiadm: PathBuf::from("/usr/sbin/iscsiadm"),
            control_socket: PathBuf::from("/run/iser-guard/control.sock"),
            boot_id: PathBuf::from("/proc/sys/kernel/random/boot_id"),
            devlink: PathBuf::from("/usr/sbin/devlink"),
            rdma: PathBuf::from("/usr/bin/rdma"),
            modprobe: PathBuf::from("/usr/sbin/modprobe"),
            nvme: PathBuf::from("/usr/sbin/nvme"),
            multipathd: PathBuf::from("/usr/sbin/multipathd"),
            proc_root: PathBuf::from("/proc"),
            dev_root: PathBuf::from("/dev"),
            modules_root: PathBuf::from("/lib/modules"),
            iscsi_dir: PathBuf::from("/etc/iscsi"),
            unit_file: PathBuf::from("/usr/lib/systemd/system/iser-guard.service"),
            unit_dropins: PathBuf::from("/etc/systemd/system/iser-guard.service.d"),
        }
    }
}

impl Default for Poll {
    fn default() -> Self {
        Poll {
            netlink: Duration::from_secs(5),
            iscsi: Duration::from_secs(10),
            probe: Duration::from_millis(250),
        }
    }
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            dry_run: false,
            reset_when: ResetWhen::TargetBack,
            probe_successes: 3,
            probe_method: ProbeMethod::Auto,
            portal_probe_method: BTreeMap::new(),
            probe_port: 3260,
            probe_timeout: Duration::from_millis(200),
            backoff_initial: Duration::from_secs(30),
            backoff_max: Duration::from_secs(600),
            max_attempts: 3,
            iscsid_grace: Duration::from_secs(20),
            other_sessions: OtherSessions::Wait,
            allow_module_reload: false,
            iscsiadm_timeout: Duration::from_secs(30),
            reset_timeout: Duration::from_secs(60),
            verify_timeout: Duration::from_secs(60),
            selftest: SelfTestPolicy::Auto,
            device_wait: Duration::from_secs(60),
            consumers: BTreeMap::new(),
            nvme_reconnect: true,
            multipath_last_path: ConsumerAction::Wait,
        }
    }
}

impl Default for Alerts {
    fn default() -> Self {
        let severities = crate::core::severity::AlertSeverities::default();
        Alerts {
            syslog: true,
            syslog_socket: PathBuf::from("/dev/log"),
            ident: "iser-guard".to_string(),
            facility: Facility::Daemon,
            repeat_interval: Duration::from_secs(300),
            severity_fault: severities.fault,
            severity_action: severities.action,
            severity_recovered: severities.recovered,
            severity_operator: severities.operator,
        }
    }
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: false,
            textfile: PathBuf::from("/var/lib/prometheus/node-exporter/iser-guard.prom"),
            interval: Duration::from_secs(15),
            listen: None,
        }
    }
}

/// Durations are written in the file as a number of seconds (integer or fractional).
mod humantime_secs {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    /// Largest accepted value, in seconds (about 31 years): keeps `Duration` arithmetic far
    /// from overflow in the daemon.
    const MAX_SECS: u64 = 1_000_000_000;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        if d.subsec_nanos() == 0 {
            s.serialize_u64(d.as_secs())
        } else {
            s.serialize_f64(d.as_secs_f64())
        }
    }

    struct Secs;

    impl Visitor<'_> for Secs {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number of seconds (e.g. 30 or 0.5)")
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            if v > MAX_SECS {
                return Err(E::custom(format!(
                    "{v} seconds is too large (at most {MAX_SECS})"
                )));
            }
            Ok(Duration::from_secs(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!(
                    "{v} is negative; expected a number of seconds ≥ 0"
                ))),
            }
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            // The range check also rejects NaN.
            if v.is_finite() && (0.0..=MAX_SECS as f64).contains(&v) {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(E::custom(format!(
                    "{v} is not a valid number of seconds (must be finite, ≥ 0, ≤ {MAX_SECS})"
                )))
            }
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(Secs)
    }
}

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Dotted key path, e.g. `recovery.backoff-max` or `devices.allow[2]`; empty for a
    /// problem with the file as a whole (e.g. a TOML syntax error before any key).
    pub key: String,
    /// 1-based line in the file, when the problem is at a place in the file.
    pub line: Option<usize>,
    /// 1-based column (in characters), when `line` is known.
    pub col: Option<usize>,
    /// What is wrong and, where it helps, what is accepted.
    pub message: String,
}

impl Problem {
    /// A problem at a key, with no position yet.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            key: key.into(),
            line: None,
            col: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.col) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: ")?,
            (Some(l), None) => write!(f, "line {l}: ")?,
            _ => {}
        }
        if self.key.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

/// Where the configuration in use came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// Read from this file.
    File(PathBuf),
    /// Built-in defaults, because `--config` was not given and the default file is absent.
    Defaults,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::File(p) => write!(f, "{}", p.display()),
            ConfigSource::Defaults => write!(
                f,
                "built-in defaults ({DEFAULT_CONFIG_PATH} does not exist)"
            ),
        }
    }
}

fn format_problems(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a configuration could not be used. All variants map to exit code 78 (EX_CONFIG):
/// even the permission refusal is a problem of the configuration file, not of the caller's
/// privileges (EX_NOPERM, 77, is kept for "run me as root").
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file named by `--config` does not exist.
    #[error(
        "configuration {path} does not exist: check the path (without --config, \
         {DEFAULT_CONFIG_PATH} is read if it exists, else the built-in defaults are used)"
    )]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The file could not be read.
    #[error("cannot read configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a regular file (a directory, FIFO, device…).
    #[error("refusing configuration {path}: it is a {kind}, not a regular file")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The file, or a directory on the way to it, could be written or replaced by someone
    /// other than root (see [`crate::path_trust`]).
    #[error(
        "refusing configuration {path}: {}; whoever can write or replace it could make \
         iser-guard re-create RDMA devices and run programs as root",
        refusals.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Untrusted {
        /// The file.
        path: PathBuf,
        /// Every reason, outermost component first.
        refusals: Vec<crate::core::path_trust::PathRefusal>,
    },
    /// The trust walk of the file failed (a component cannot be looked at).
    #[error("refusing configuration {path}: {source}")]
    Unwalkable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::core::path_trust::WalkError,
    },
    /// The built-in defaults name paths that cannot be trusted.
    #[error(
        "the built-in defaults ({DEFAULT_CONFIG_PATH} does not exist) have {} problem(s):\n{}",
        problems.len(),
        format_problems(problems)
    )]
    DefaultsUntrusted {
        /// Every problem found.
        problems: Vec<Problem>,
    },
    /// The file has problems; each names its key path.
    #[error("configuration {path} has {} problem(s):\n{}", problems.len(), format_problems(problems))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

impl ConfigError {
    /// The problems as a list: one per problem for `Invalid`, one key-less problem otherwise.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            ConfigError::Invalid { problems, .. } | ConfigError::DefaultsUntrusted { problems } => {
                problems.clone()
            }
            ConfigError::Untrusted { path, refusals } => refusals
                .iter()
                .map(|r| {
                    Problem::new(
                        "",
                        format!("refusing configuration {}: {r}", path.display()),
                    )
                })
                .collect(),
            other => vec![Problem::new("", other.to_string())],
        }
    }
}

/// Parses and validates configuration text; every problem is returned, with positions,
/// in file order.
///
/// Keys with a schema problem are left out (as if absent) and the rest is still checked
/// semantically, so one run shows everything; a relation check may then compare against
/// a default in place of the broken key. After a TOML syntax error, only the syntax errors
/// and the schema problems before it are reported: past it, the parser's recovery may
/// attribute keys to the wrong table.
pub fn parse_str(text: &str) -> Result<Config, Vec<Problem>> {
    parse_spanned(text).map(|(c, _)| c)
}

/// Where each key's value is in the text, by key path.
type Spans = BTreeMap<String, Range<usize>>;

/// [`parse_str`], also returning the span of every key's value.
fn parse_spanned(text: &str) -> Result<(Config, Spans), Vec<Problem>> {
    let lines = LineIndex::new(text);
    let (doc, syntax_errors) = DeTable::parse_recoverable(text);
    let mut problems: Vec<Problem> = syntax_errors
        .iter()
        // A few parser errors carry no span (toml's "recursion limit" on deeply nested
        // input): they are placed at the end of the text, so every problem says where.
        .map(|e| {
            let at = e.span().or(Some(text.len()..text.len()));
            lines.problem("", at, e.message())
        })
        .collect();

    // Schema, key by key, on what the parser could recover.
    let mut spans = BTreeMap::new();
    let root_span = doc.span();
    let good = check_schema(
        doc.get_ref(),
        root_span.clone(),
        &lines,
        &mut problems,
        &mut spans,
    );

    // After a syntax error the parser's recovery may put keys in the wrong table: keep only
    // the schema problems before the first syntax error, and skip the semantic checks (the
    // recovered document is incomplete).
    if let Some(first) = syntax_errors
        .iter()
        .filter_map(|e| e.span())
        .map(|s| s.start)
        .min()
    {
        let first_line = lines.position(first).0;
        problems.retain(|p| p.key.is_empty() || p.line.is_some_and(|l| l < first_line));
        return Err(sorted(problems));
    }
    if !syntax_errors.is_empty() {
        return Err(sorted(problems));
    }

    // Every remaining key deserialized on its own, so their whole does too.
    let config =
        match Config::deserialize(toml::de::Deserializer::from(Spanned::new(root_span, good))) {
            Ok(c) => c,
            Err(e) => {
                problems.push(lines.problem("", e.span(), e.message()));
                return Err(sorted(problems));
            }
        };

    for mut p in config.validate() {
        if let Some(span) = spans.get(&p.key) {
            let (l, c) = lines.position(span.start);
            p.line = Some(l);
            p.col = Some(c);
        }
        problems.push(p);
    }
    if problems.is_empty() {
        Ok((config, spans))
    } else {
        Err(sorted(problems))
    }
}

/// File order; problems without a position (semantic ones on defaulted keys) last.
fn sorted(mut problems: Vec<Problem>) -> Vec<Problem> {
    problems.sort_by_key(|p| (p.line.is_none(), p.line, p.col));
    problems
}

/// The sections of [`Config`] and how to check one key of each. `tests::every_section_checked`
/// proves this list matches the struct.
const SECTIONS: &[&str] = &[
    "paths", "poll", "devices", "recovery", "alerts", "kmsg", "metrics",
];

/// Deserializes a single-key table into `section`'s struct: an error names exactly that key.
fn check_section_key(section: &str, one: Spanned<DeTable<'_>>) -> Result<(), toml::de::Error> {
    let de = toml::de::Deserializer::from(one);
    match section {
        "paths" => Paths::deserialize(de).map(drop),
        "poll" => Poll::deserialize(de).map(drop),
        "devices" => Devices::deserialize(de).map(drop),
        "recovery" => Recovery::deserialize(de).map(drop),
        "alerts" => Alerts::deserialize(de).map(drop),
        "kmsg" => Kmsg::deserialize(de).map(drop),
        "metrics" => MetricsConfig::deserialize(de).map(drop),
        // Not a section: let the top-level struct say so (it lists the valid ones).
        _ => Config::deserialize(de).map(drop),
    }
}

fn single<'i>(
    key: &Spanned<std::borrow::Cow<'i, str>>,
    value: &Spanned<DeValue<'i>>,
    span: Range<usize>,
) -> Spanned<DeTable<'i>> {
    let mut t = DeTable::new();
    t.insert(key.clone(), value.clone());
    Spanned::new(span, t)
}

/// Checks every key of the document against the schema; records the span of every value by
/// key path (for positions of semantic problems). Returns the document without the keys
/// that have problems.
fn check_schema<'i>(
    root: &DeTable<'i>,
    root_span: Range<usize>,
    lines: &LineIndex,
    problems: &mut Vec<Problem>,
    spans: &mut BTreeMap<String, Range<usize>>,
) -> DeTable<'i> {
    let mut good_root = DeTable::new();
    for (name, value) in root.iter() {
        let section = name.get_ref().as_ref();
        let table = match value.get_ref() {
            DeValue::Table(t) if SECTIONS.contains(&section) => t,
            _ => {
                // Unknown top-level key, or a known section given as a non-table.
                if let Err(e) = check_section_key("", single(name, value, root_span.clone())) {
                    let span = e.span().unwrap_or_else(|| name.span());
                    problems.push(lines.problem(section, Some(span), e.message()));
                }
                continue;
            }
        };
        spans.insert(section.to_string(), name.span());
        let mut good = DeTable::new();
        for (key, v) in table.iter() {
            let path = format!("{section}.{}", key.get_ref());
            spans.insert(path.clone(), v.span());
            if let DeValue::Array(items) = v.get_ref() {
                for (i, item) in items.iter().enumerate() {
                    spans.insert(format!("{path}[{i}]"), item.span());
                }
            }
            match check_section_key(section, single(key, v, value.span())) {
                Ok(()) => {
                    good.insert(key.clone(), v.clone());
                }
                Err(e) => {
                    // Unknown keys carry no span of their own: point at the key.
                    let span = e.span().unwrap_or_else(|| key.span());
                    problems.push(lines.problem(&path, Some(span), e.message()));
                }
            }
        }
        good_root.insert(
            name.clone(),
            Spanned::new(value.span(), DeValue::Table(good)),
        );
    }
    good_root
}

/// Byte offset → (line, column), both 1-based; columns count characters.
struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts.get(line - 1).copied().unwrap_or(0);
        let col = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count())
            + 1;
        (line, col)
    }

    fn problem(&self, key: &str, span: Option<Range<usize>>, message: &str) -> Problem {
        let (line, col) = match span {
            Some(s) => {
                let (l, c) = self.position(s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        Problem {
            key: key.to_string(),
            line,
            col,
            message: message.trim().to_string(),
        }
    }
}

/// Is `name` acceptable as an RDMA device name in the allow-list?
///
/// The kernel's rules (`IB_DEVICE_NAME_MAX` = 64 with the NUL; `ib_device_rename` and
/// `rdma link add` reject `%`, sysfs rejects `/`) plus ours: no whitespace or control
/// characters (they could never match a name from netlink and are surely a typo), not `.`
/// or `..`, and no glob characters, because the allow-list takes exact names only: a glob
/// would silently extend automatic recovery to devices added later.
pub fn check_device_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty device name".into());
    }
    if name.len() > IB_DEVICE_NAME_MAX_LEN {
        return Err(format!(
            "device name is {} bytes long; the kernel allows at most {IB_DEVICE_NAME_MAX_LEN}",
            name.len()
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("`{name}` is not a device name"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '%'))
    {
        return Err(format!(
            "`{}` contains {c:?}, which RDMA device names cannot contain",
            name.escape_debug()
        ));
    }
    if name.contains(['*', '?', '[', ']']) {
        return Err(format!(
            "`{name}` looks like a glob; the allow-list takes exact device names only \
             (list each device, e.g. `rocep2s0f0`)"
        ));
    }
    Ok(())
}

/// Accepted range of a duration key, with its key path.
fn check_range(problems: &mut Vec<Problem>, key: &str, d: Duration, min: Duration, max: Duration) {
    if d < min || d > max {
        problems.push(Problem::new(
            key,
            format!(
                "{} s is out of range; expected {} s to {} s",
                d.as_secs_f64(),
                min.as_secs_f64(),
                max.as_secs_f64()
            ),
        ));
    }
}

fn check_path(problems: &mut Vec<Problem>, key: &str, p: &Path) {
    let s = p.as_os_str().as_encoded_bytes();
    if s.is_empty() {
        problems.push(Problem::new(key, "empty path"));
    } else if s.contains(&0) {
        problems.push(Problem::new(key, "path contains a NUL character"));
    } else if !p.is_absolute() {
        problems.push(Problem::new(
            key,
            format!(
                "`{}` is relative; use an absolute path (the daemon's working directory is /)",
                p.display()
            ),
        ));
    }
}

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

const fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

impl Config {
    /// The recovery policy this configuration asks for: the file's `[recovery]`,
    /// `[devices]`, `[kmsg]`, `[poll]` and `[alerts]` mapped onto the core's vocabulary.
    /// Engine-only bounds keep the core's defaults.
    pub fn policy(&self) -> Policy {
        let r = &self.recovery;
        Policy {
            dry_run: r.dry_run,
            reset_when: r.reset_when,
            probe_successes: r.probe_successes.max(1),
            probe_method: r.probe_method,
            probe_interval: self.poll.probe.max(Duration::from_millis(100)),
            probe_timeout: r.probe_timeout,
            backoff_initial: r.backoff_initial,
            backoff_max: r.backoff_max.max(r.backoff_initial),
            max_attempts: r.max_attempts.max(1),
            iscsid_grace: r.iscsid_grace,
            other_sessions: r.other_sessions,
            consumers: ConsumerPolicy {
                kinds: r.consumers.clone(),
            },
            iscsiadm_timeout: r.iscsiadm_timeout,
            allow: self.devices.allow.iter().cloned().collect(),
            trust_userspace: self.kmsg.trust_userspace_records,
            alert_repeat_interval: self.alerts.repeat_interval,
            session_refresh: self.poll.iscsi.max(Duration::from_millis(100)),
            selftest: r.selftest,
            recreate_timeout: r.reset_timeout,
            verify_timeout: r.verify_timeout,
            device_wait: r.device_wait,
            multipath_last_path: r.multipath_last_path,
            ..Policy::default()
        }
    }

    /// Semantic checks: ranges and relations between keys. Every problem is returned; key
    /// paths are those of the file (`recovery.backoff-max`, `devices.allow[1]`).
    pub fn validate(&self) -> Vec<Problem> {
        let mut p = Vec::new();
        let pa = &self.paths;
        for (key, path) in [
            ("paths.kmsg", &pa.kmsg),
            ("paths.sysfs-root", &pa.sysfs_root),
            ("paths.state-dir", &pa.state_dir),
            ("paths.iscsiadm", &pa.iscsiadm),
            ("paths.control-socket", &pa.control_socket),
            ("paths.boot-id", &pa.boot_id),
            ("paths.devlink", &pa.devlink),
            ("paths.rdma", &pa.rdma),
            ("paths.modprobe", &pa.modprobe),
            ("paths.nvme", &pa.nvme),
            ("paths.multipathd", &pa.multipathd),
            ("paths.proc-root", &pa.proc_root),
            ("paths.dev-root", &pa.dev_root),
            ("paths.modules-root", &pa.modules_root),
            ("paths.iscsi-dir", &pa.iscsi_dir),
            ("paths.unit-file", &pa.unit_file),
            ("paths.unit-dropins", &pa.unit_dropins),
            ("alerts.syslog-socket", &self.alerts.syslog_socket),
            ("metrics.textfile", &self.metrics.textfile),
        ] {
            check_path(&mut p, key, path);
        }
        // sun_path is 108 bytes including the NUL.
        if pa.control_socket.as_os_str().len() > 107 {
            p.push(Problem::new(
                "paths.control-socket",
                "longer than 107 bytes, the limit of a Unix socket path",
            ));
        }

        let poll = &self.poll;
        check_range(
            &mut p,
            "poll.netlink",
            poll.netlink,
            millis(100),
            secs(3600),
        );
        check_range(&mut p, "poll.iscsi", poll.iscsi, millis(100), secs(3600));
        check_range(&mut p, "poll.probe", poll.probe, millis(100), secs(3600));

        let mut seen = BTreeSet::new();
        for (i, name) in self.devices.allow.iter().enumerate() {
            let key = format!("devices.allow[{i}]");
            if let Err(m) = check_device_name(name) {
                p.push(Problem::new(key, m));
            } else if !seen.insert(name.as_str()) {
                p.push(Problem::new(key, format!("`{name}` is listed twice")));
            }
        }

        let r = &self.recovery;
        if r.consumers.contains_key(&ConsumerKind::Iser) {
            p.push(Problem::new(
                "recovery.consumers.iser",
                "iSER sessions are brought back by iser-guard; whether healthy ones hold a \
                 re-creation is recovery.other-sessions",
            ));
        }
        let mut portals = BTreeSet::new();
        for (text, method) in &r.portal_probe_method {
            let key = format!("recovery.portal-probe-method.\"{text}\"");
            match crate::io::probe::parse_portal(text, r.probe_port) {
                Err(e) => p.push(Problem::new(key, e.to_string())),
                Ok(addr) if !portals.insert(addr) => {
                    p.push(Problem::new(key, format!("{addr} is listed twice")))
                }
                Ok(_) if *method == ProbeMethod::None => p.push(Problem::new(
                    key,
                    "\"none\" is for recovery.probe-method only (it turns probing off for \
                     every portal); per portal: \"tcp\", \"neighbour\" or \"auto\"",
                )),
                Ok(_) => {}
            }
        }
        if r.probe_successes < 1 || r.probe_successes > 100 {
            p.push(Problem::new(
                "recovery.probe-successes",
                format!("{} is out of range; expected 1 to 100", r.probe_successes),
            ));
        }
        if r.probe_port == 0 {
            p.push(Problem::new(
                "recovery.probe-port",
                "port 0 cannot be probed; the iSCSI default is 3260",
            ));
        }
        check_range(
            &mut p,
            "recovery.probe-timeout",
            r.probe_timeout,
            millis(10),
            secs(60),
        );
        if r.probe_timeout > poll.probe && poll.probe >= millis(100) {
            p.push(Problem::new(
                "recovery.probe-timeout",
                format!(
                    "{} s is longer than poll.probe ({} s): probes would overlap",
                    r.probe_timeout.as_secs_f64(),
                    poll.probe.as_secs_f64()
                ),
            ));
        }
        check_range(
            &mut p,
            "recovery.backoff-initial",
            r.backoff_initial,
            secs(1),
            secs(86400),
        );
        check_range(
            &mut p,
            "recovery.backoff-max",
            r.backoff_max,
            secs(1),
            secs(86400),
        );
        if r.backoff_initial > r.backoff_max {
            p.push(Problem::new(
                "recovery.backoff-max",
                format!(
                    "{} s is below recovery.backoff-initial ({} s); the ceiling must be at least \
                     the first back-off",
                    r.backoff_max.as_secs_f64(),
                    r.backoff_initial.as_secs_f64()
                ),
            ));
        }
        if r.max_attempts < 1 || r.max_attempts > 100 {
            p.push(Problem::new(
                "recovery.max-attempts",
                format!("{} is out of range; expected 1 to 100", r.max_attempts),
            ));
        }
        check_range(
            &mut p,
            "recovery.iscsid-grace",
            r.iscsid_grace,
            secs(0),
            secs(3600),
        );
        check_range(
            &mut p,
            "recovery.iscsiadm-timeout",
            r.iscsiadm_timeout,
            secs(1),
            secs(600),
        );
        check_range(
            &mut p,
            "recovery.reset-timeout",
            r.reset_timeout,
            secs(1),
            secs(600),
        );
        check_range(
            &mut p,
            "recovery.verify-timeout",
            r.verify_timeout,
            secs(1),
            secs(3600),
        );
        check_range(
            &mut p,
            "recovery.device-wait",
            r.device_wait,
            secs(1),
            secs(3600),
        );

        let a = &self.alerts;
        if a.ident.is_empty() {
            p.push(Problem::new("alerts.ident", "empty syslog identifier"));
        } else if a.ident.len() > 32
            || !a
                .ident
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            p.push(Problem::new(
                "alerts.ident",
                format!(
                    "`{}` is not a valid syslog tag: use at most 32 of A-Z a-z 0-9 - _ .",
                    a.ident.escape_debug()
                ),
            ));
        }
        check_range(
            &mut p,
            "alerts.repeat-interval",
            a.repeat_interval,
            secs(0),
            secs(86400),
        );

        let m = &self.metrics;
        if let Some(Err(e)) = m.listen.as_ref().map(check_listen) {
            p.push(Problem::new("metrics.listen", e));
        }
        if m.textfile.extension().is_none_or(|e| e != "prom") {
            p.push(Problem::new(
                "metrics.textfile",
                "node_exporter's textfile collector reads only files ending in `.prom`",
            ));
        }
        check_range(&mut p, "metrics.interval", m.interval, secs(1), secs(3600));
        p
    }

    /// Valid but noteworthy settings, for `check-config` and the daemon's start-up log.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.devices.allow.is_empty() {
            w.push(
                "devices.allow is empty: no device will be re-created automatically; stuck \
                 ports are only alerted"
                    .to_string(),
            );
        }
        if self.recovery.dry_run {
            w.push("recovery.dry-run is on: decisions are alerted, never carried out".into());
        }
        if self.metrics.listen.is_some() && !self.metrics.enabled {
            w.push("metrics.listen is set but metrics.enabled is false: nothing is served".into());
        }
        if !self.kmsg.enabled {
            w.push(format!(
                "kmsg.enabled is off: the kernel log is not read; a stuck QP is seen only in the \
                 RDMA netlink QP table, up to poll.netlink ({} s) later, and kernel lines are \
                 neither explained nor counted",
                self.poll.netlink.as_secs_f64()
            ));
        }
        if self.kmsg.trust_userspace_records {
            w.push(
                "kmsg.trust-userspace-records is on: anyone who can write /dev/kmsg can forge \
                 a fault and trigger a device re-creation (labs and tests only)"
                    .into(),
            );
        }
        if self.recovery.allow_module_reload {
            w.push(
                "recovery.allow-module-reload is on: the last resort reloads the driver module, \
                 which re-creates every device of that driver; the packaged service needs the \
                 drop-in /usr/share/doc/iser-guard/examples/module-reload.conf for it \
                 (ProtectKernelModules=no, CAP_SYS_MODULE), else the daemon refuses to start"
                    .into(),
            );
        }
        let proceed: Vec<&str> = self
            .recovery
            .consumers
            .iter()
            .filter(|(_, a)| **a == ConsumerAction::Proceed)
            .map(|(k, _)| k.key())
            .collect();
        if !proceed.is_empty() {
            w.push(format!(
                "[recovery.consumers] {} = \"proceed\": live RDMA consumers of these kinds lose \
                 their connections to a re-creation, and iser-guard does not bring them back",
                proceed.join(", ")
            ));
        }
        if self.recovery.multipath_last_path == ConsumerAction::Proceed {
            w.push(
                "recovery.multipath-last-path = \"proceed\": a re-creation may take the last \
                 usable path of a dm-multipath map, whose I/O then queues or fails until the \
                 paths are back"
                    .into(),
            );
        }
        if self.recovery.other_sessions == OtherSessions::Proceed {
            w.push(
                "recovery.other-sessions = \"proceed\": healthy sessions on the same device \
                 are disrupted by a re-creation"
                    .into(),
            );
        }
        if !self.alerts.syslog {
            w.push("alerts.syslog is off: alerts go only to the daemon's log (stderr)".into());
        }
        if self.recovery.probe_method == ProbeMethod::None
            && self.recovery.reset_when == ResetWhen::TargetBack
        {
            w.push(
                "recovery.probe-method = \"none\" treats every target as present, so \
                 reset-when = \"target-back\" acts at once"
                    .into(),
            );
        }
        w
    }
}

/// `Ok` if `addr` may be listened on: a loopback address (127.0.0.0/8 or ::1).
pub fn check_listen(addr: &std::net::SocketAddr) -> Result<(), String> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!(
            "{addr} is not a loopback address: the metrics endpoint has no authentication and \
             listens on 127.0.0.1 or [::1] only (use node_exporter's textfile collector, \
             metrics.textfile, to export to the network)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_urgency_gets_its_configured_syslog_severity() {
        use iser_guard_core::recovery::AlertClass as U;
        let a = Config::default().alerts;
        assert_eq!(a.syslog_severity(U::Info), Severity::Notice);
        assert_eq!(a.syslog_severity(U::Warning), Severity::Warning);
        assert_eq!(a.syslog_severity(U::Error), Severity::Crit);
        assert_eq!(a.syslog_severity(U::Critical), Severity::Alert);
        let c =
            parse_str("[alerts]\nseverity-recovered = \"debug\"\nseverity-operator = \"emerg\"\n")
                .unwrap();
        assert_eq!(c.alerts.syslog_severity(U::Info), Severity::Debug);
        assert_eq!(c.alerts.syslog_severity(U::Critical), Severity::Emerg);
    }

    #[test]
    fn the_kernel_log_is_read_unless_switched_off_and_off_is_warned_about() {
        assert!(Config::default().kmsg.enabled);
        let off = parse_str("[kmsg]\nenabled = false\n").unwrap();
        assert!(!off.kmsg.enabled);
        assert!(
            off.warnings()
                .iter()
                .any(|w| w.contains("kmsg.enabled is off") && w.contains("QP table")),
            "{:?}",
            off.warnings()
        );
        assert!(!Config::default()
            .warnings()
            .iter()
            .any(|w| w.contains("kmsg.enabled")));
    }

    #[test]
    fn default_config_maps_to_the_cores_default_policy() {
        assert_eq!(Config::default().policy(), Policy::default());
    }

    #[test]
    fn device_wait_reaches_the_policy_and_is_bounded() {
        let c = parse_str("[recovery]\ndevice-wait = 10\n").expect("valid");
        assert_eq!(c.policy().device_wait, Duration::from_secs(10));
        let p = problems("[recovery]\ndevice-wait = 0\n");
        assert!(p.iter().any(|p| p.key == "recovery.device-wait"), "{p:?}");
    }

    const SHIPPED: &str = include_str!("../../config/iser-guard.toml");

    fn problems(text: &str) -> Vec<Problem> {
        match parse_str(text) {
            Ok(c) => panic!("expected problems, got {c:?}"),
            Err(p) => p,
        }
    }

    #[test]
    fn metrics_may_be_enabled_and_listen_on_loopback_only() {
        assert!(parse_str("[metrics]\nenabled = true\n").is_ok());
        assert!(parse_str("[metrics]\nenabled = true\nlisten = \"127.0.0.1:9464\"\n").is_ok());
        let problems =
            parse_str("[metrics]\nenabled = true\nlisten = \"0.0.0.0:9464\"\n").unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "metrics.listen");
        assert!(
            problems[0].message.contains("not a loopback address"),
            "{problems:?}"
        );
    }

    #[test]
    fn shipped_default_is_exactly_default() {
        assert_eq!(parse_str(SHIPPED), Ok(Config::default()));
    }

    #[test]
    fn default_is_valid() {
        assert_eq!(Config::default().validate(), vec![]);
    }

    #[test]
    fn empty_file_is_default() {
        assert_eq!(parse_str(""), Ok(Config::default()));
    }

    #[test]
    fn every_section_checked() {
        let t = toml::Table::try_from(Config::default()).expect("serializable");
        let keys: Vec<&str> = t.keys().map(String::as_str).collect();
        let mut want = SECTIONS.to_vec();
        want.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, want);
    }

    /// Every key of every section appears in the shipped file, documented.
    #[test]
    fn shipped_file_names_every_key() {
        let t = toml::Table::try_from(Config::default()).expect("serializable");
        let shipped: toml::Table = toml::from_str(SHIPPED).expect("shipped parses");
        for (section, v) in &t {
            let sec = shipped.get(section).and_then(|s| s.as_table());
            let sec = sec.unwrap_or_else(|| panic!("[{section}] missing from shipped file"));
            for key in v.as_table().expect("section is a table").keys() {
                // Empty arrays serialize, and `allow = []` is in the file.
                assert!(
                    sec.contains_key(key),
                    "{section}.{key} missing from shipped file"
                );
            }
        }
    }

    #[test]
    fn unknown_keys_rejected_in_every_table() {
        for section in SECTIONS {
            let text = format!("[{section}]\nno-such-key = 1\n");
            let p = problems(&text);
            assert_eq!(p.len(), 1, "{section}: {p:?}");
            assert_eq!(p[0].key, format!("{section}.no-such-key"));
            assert_eq!(
                (p[0].line, p[0].col),
                (Some(2), Some(1)),
                "{section}: {p:?}"
            );
            assert!(p[0].message.contains("unknown field"), "{}", p[0].message);
        }
        let p = problems("no-such-table = 1\n");
        assert_eq!(p[0].key, "no-such-table");
        assert!(p[0].message.contains("unknown field"));
        let p = problems("[no-such-table]\nx = 1\n");
        assert_eq!(p[0].key, "no-such-table");
    }

    #[test]
    fn reports_every_schema_problem_with_position() {
        let text = "\
[recovery]
dry-run = \"yes\"
max-attempts = -1
backof-max = 10

[poll]
netlink = \"5s\"

[alerts]
severity-fault = \"critical\"
";
        let p = problems(text);
        let got: Vec<(&str, Option<usize>)> = p.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert_eq!(
            got,
            vec![
                ("recovery.dry-run", Some(2)),
                ("recovery.max-attempts", Some(3)),
                ("recovery.backof-max", Some(4)),
                ("poll.netlink", Some(7)),
                ("alerts.severity-fault", Some(10)),
            ]
        );
        assert!(
            p[4].message.contains("unknown variant `critical`"),
            "{}",
            p[4].message
        );
        assert!(
            p[3].message.contains("number of seconds"),
            "{}",
            p[3].message
        );
        assert!(
            p[2].message.contains("unknown field `backof-max`"),
            "{}",
            p[2].message
        );
        assert_eq!(p[0].col, Some(11));
    }

    #[test]
    fn reports_every_semantic_problem_with_position() {
        let text = "\
[recovery]
backoff-initial = 60
backoff-max = 30
probe-successes = 0
max-attempts = 0
probe-port = 0

[devices]
allow = [\"rocep2s0f0\", \"mlx5 0\", \"rxe*\", \"rocep2s0f0\"]

[paths]
state-dir = \"var/lib/iser-guard\"

[alerts]
ident = \"\"
";
        let p = problems(text);
        let got: Vec<(&str, Option<usize>)> = p.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert_eq!(
            got,
            vec![
                ("recovery.backoff-max", Some(3)),
                ("recovery.probe-successes", Some(4)),
                ("recovery.max-attempts", Some(5)),
                ("recovery.probe-port", Some(6)),
                ("devices.allow[1]", Some(9)),
                ("devices.allow[2]", Some(9)),
                ("devices.allow[3]", Some(9)),
                ("paths.state-dir", Some(12)),
                ("alerts.ident", Some(15)),
            ]
        );
        assert_eq!(p[5].col, Some(34));
        assert!(p[6].message.contains("listed twice"), "{}", p[6].message);
    }

    #[test]
    fn schema_and_semantic_problems_together() {
        let p = problems("[recovery]\ndry-run = 1\nprobe-port = 0\n");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["recovery.dry-run", "recovery.probe-port"]);
    }

    #[test]
    fn semantic_problem_on_defaulted_key_has_no_position() {
        // probe-timeout keeps its default (0.2 s) but poll.probe drops below it.
        let p = problems("[poll]\nprobe = 0.15\n");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].key, "recovery.probe-timeout");
        assert_eq!(p[0].line, None);
    }

    #[test]
    fn syntax_error_has_position() {
        let p = problems("[recovery]\ndry-run = tru\n");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].line, Some(2), "{p:?}");
        assert_eq!(p[0].key, "");
    }

    #[test]
    fn schema_problems_before_a_syntax_error_are_kept() {
        let p = problems("[poll]\nnetlink = \"x\"\n[recovery\ndry-run = true\nbogus = 1\n");
        let got: Vec<(&str, Option<usize>)> = p.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert_eq!(got, [("poll.netlink", Some(2)), ("", Some(3))]);
    }

    #[test]
    fn durations_accept_int_and_float_and_reject_bad() {
        let c = parse_str("[poll]\nnetlink = 0.5\niscsi = 7\n").expect("valid");
        assert_eq!(c.poll.netlink, Duration::from_millis(500));
        assert_eq!(c.poll.iscsi, Duration::from_secs(7));
        for bad in ["-1", "-0.5", "nan", "inf", "1e12", "\"5\""] {
            let p = problems(&format!("[poll]\nnetlink = {bad}\n"));
            assert_eq!(p.len(), 1, "{bad}: {p:?}");
            assert_eq!(p[0].key, "poll.netlink");
        }
        let p = problems("[poll]\nnetlink = 0\n");
        assert!(p[0].message.contains("out of range"), "{:?}", p[0]);
    }

    #[test]
    fn device_names() {
        for ok in ["rocep2s0f0", "mlx5_0", "rxe0", "irdma-1", &"a".repeat(63)] {
            assert_eq!(check_device_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "a\tb",
            "mlx5_%d",
            "rxe*",
            "x?",
            &"a".repeat(64),
        ] {
            assert!(check_device_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn serialized_default_round_trips() {
        let text = toml::to_string(&Config::default()).expect("serializable");
        assert_eq!(parse_str(&text), Ok(Config::default()));
    }

    #[test]
    fn line_index_counts_chars() {
        let l = LineIndex::new("a\néé = 1\n");
        assert_eq!(l.position(0), (1, 1));
        assert_eq!(l.position(2), (2, 1));
        assert_eq!(l.position(6), (2, 3));
        assert_eq!(l.position(999), (3, 1));
    }

    #[test]
    fn problem_display() {
        let mut p = Problem::new("recovery.backoff-max", "too small");
        assert_eq!(p.to_string(), "recovery.backoff-max: too small");
        p.line = Some(3);
        p.col = Some(15);
        assert_eq!(
            p.to_string(),
            "line 3, column 15: recovery.backoff-max: too small"
        );
    }

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        p
    }

    #[test]
    fn load_or_default_sources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let absent = dir.path().join("absent.toml");
        // No --config and no default file: built-in defaults.
        let (c, src) = load_or_default_from(None, &absent).expect("defaults");
        assert_eq!((c, src), (Config::default(), ConfigSource::Defaults));
        // --config naming a missing file is an error.
        let e = load_or_default_from(Some(&absent), &absent).expect_err("missing");
        assert!(matches!(e, ConfigError::Missing { .. }), "{e}");
        // The default file, when present, is used (and validated).
        let good = write(dir.path(), "c.toml", "[recovery]\ndry-run = true\n", 0o640);
        let (c, src) = load_or_default_from(None, &good).expect("file");
        assert!(c.recovery.dry_run);
        assert_eq!(src, ConfigSource::File(good.clone()));
        let bad = write(dir.path(), "bad.toml", "x = 1\n", 0o640);
        let e = load_or_default_from(None, &bad).expect_err("invalid");
        assert!(matches!(e, ConfigError::Invalid { ref problems, .. } if problems.len() == 1));
    }

    #[test]
    fn load_refuses_world_writable_and_non_regular() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(dir.path(), "c.toml", "", 0o666);
        let e = load(&p).expect_err("world-writable");
        assert!(matches!(e, ConfigError::Untrusted { .. }), "{e}");
        assert!(e.to_string().contains("world-writable (mode 0666)"), "{e}");
        assert!(e.to_string().contains("chmod g-w,o-w"), "{e}");
        // Group-writable: refused too (StrictModes, sudo).
        let p = write(dir.path(), "g.toml", "", 0o660);
        let e = load(&p).expect_err("group-writable");
        assert!(e.to_string().contains("group-writable (mode 0660)"), "{e}");
        let p = write(dir.path(), "ok.toml", "", 0o640);
        assert_eq!(load(&p).expect("owner-only ok"), Config::default());
        // A world-writable directory: refused without the sticky bit, accepted with it.
        let open = dir.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        let p = write(&open, "c.toml", "", 0o640);
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = load(&p).expect_err("world-writable dir");
        assert!(
            e.to_string()
                .contains("is world-writable (mode 0777) without the sticky bit"),
            "{e}"
        );
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        assert_eq!(load(&p).expect("sticky dir ok"), Config::default());
        let big = write(dir.path(), "big.toml", &"#".repeat(2 << 20), 0o640);
        let e = load(&big).expect_err("too large");
        assert!(e.to_string().contains("larger than"), "{e}");
        let e = load(dir.path()).expect_err("directory");
        assert!(
            matches!(
                e,
                ConfigError::NotRegular {
                    kind: "directory",
                    ..
                }
            ),
            "{e}"
        );
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let e = load(&fifo).expect_err("fifo");
        assert!(
            matches!(e, ConfigError::NotRegular { kind: "FIFO", .. }),
            "{e}"
        );
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        fn secs_strategy() -> impl Strategy<Value = Duration> {
            prop_oneof![
                (0u64..100_000).prop_map(Duration::from_secs),
                (0u64..100_000_000).prop_map(Duration::from_millis),
            ]
        }

        proptest! {
            /// Whatever a valid or invalid configuration holds, writing it out and reading it
            /// back gives the same value or the same semantic problems, never something else.
            #[test]
            fn serialize_parse_round_trip(
                netlink in secs_strategy(),
                backoff_initial in secs_strategy(),
                backoff_max in secs_strategy(),
                max_attempts in 0u32..200,
                probe_port in any::<u16>(),
                dry_run in any::<bool>(),
                allow in proptest::collection::vec("[a-z0-9_ /*%]{0,8}", 0..4),
            ) {
                let mut c = Config::default();
                c.poll.netlink = netlink;
                c.recovery.backoff_initial = backoff_initial;
                c.recovery.backoff_max = backoff_max;
                c.recovery.max_attempts = max_attempts;
                c.recovery.probe_port = probe_port;
                c.recovery.dry_run = dry_run;
                c.devices.allow = allow;
                let text = toml::to_string(&c).expect("serializable");
                let want = c.validate();
                match parse_str(&text) {
                    Ok(back) => {
                        prop_assert!(want.is_empty(), "accepted but validate() says {want:?}");
                        prop_assert_eq!(back, c);
                    }
                    Err(got) => {
                        let mut got_keys: Vec<_> = got.iter().map(|p| p.key.clone()).collect();
                        let mut want_keys: Vec<_> = want.iter().map(|p| p.key.clone()).collect();
                        got_keys.sort();
                        want_keys.sort();
                        prop_assert_eq!(got_keys, want_keys);
                        prop_assert!(got.iter().all(|p| p.line.is_some()), "{got:?}");
                    }
                }
            }

            /// Arbitrary text never panics, and every problem has a position or a known key.
            #[test]
            fn arbitrary_text_never_panics(text in "[\\[\\]a-z=\"0-9.\\n #-]{0,200}") {
                if let Err(problems) = parse_str(&text) {
                    prop_assert!(!problems.is_empty());
                    for p in problems {
                        prop_assert!(p.line.is_some() || !p.key.is_empty(), "{p:?}");
                    }
                }
            }
        }
    }
}
