//! The TOML configuration: /etc/iser-guard/config.toml unless `--config` says otherwise.
//!
//! Every table rejects unknown keys, so a typo is an error rather than a silently ignored
//! setting. `iser-guard check-config` reports every problem with its key path.
//! The documented default lives in `config/iser-guard.toml`; `Config::default()` must match it.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where the configuration is read from when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/iser-guard/config.toml";

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
    /// Empty means none: the daemon then only alerts.
    pub allow: Vec<String>,
}

/// When to re-create the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResetWhen {
    /// Wait until the target's portal answers again (default).
    TargetBack,
    /// Re-create as soon as the stuck QP is seen.
    Immediately,
}

/// How a target portal is probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeMethod {
    /// TCP connect to the portal's port.
    Tcp,
    /// Never probe; treat the target as present.
    None,
}

/// What to do when other sessions on the device are still healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OtherSessions {
    /// Do not disrupt them; alert and wait for an operator (default).
    Wait,
    /// Re-create the device anyway.
    Proceed,
}

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
    /// Minimum time between two identical alerts; repeats are counted and reported once.
    #[serde(with = "humantime_secs")]
    pub repeat_interval: Duration,
}

/// Kernel-log trust settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Kmsg {
    /// Let records written by userspace (facility ≠ 0) trigger actions. Only for labs and
    /// end-to-end tests: anyone who can write /dev/kmsg could then forge a fault.
    pub trust_userspace_records: bool,
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
        }
    }
}

impl Default for Poll {
    fn default() -> Self {
        Poll {
            netlink: Duration::from_secs(5),
            iscsi: Duration::from_secs(10),
            probe: Duration::from_secs(5),
        }
    }
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            dry_run: false,
            reset_when: ResetWhen::TargetBack,
            probe_successes: 3,
            probe_method: ProbeMethod::Tcp,
            probe_port: 3260,
            probe_timeout: Duration::from_secs(2),
            backoff_initial: Duration::from_secs(30),
            backoff_max: Duration::from_secs(600),
            max_attempts: 3,
            iscsid_grace: Duration::from_secs(20),
            other_sessions: OtherSessions::Wait,
            allow_module_reload: false,
            iscsiadm_timeout: Duration::from_secs(30),
        }
    }
}

impl Default for Alerts {
    fn default() -> Self {
        Alerts {
            syslog: true,
            syslog_socket: PathBuf::from("/dev/log"),
            ident: "iser-guard".to_string(),
            repeat_interval: Duration::from_secs(300),
        }
    }
}

/// Durations are written in the file as a number of seconds (integer or fractional).
mod humantime_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        if d.subsec_nanos() == 0 {
            s.serialize_u64(d.as_secs())
        } else {
            s.serialize_f64(d.as_secs_f64())
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Secs {
            Int(u64),
            Float(f64),
        }
        match Secs::deserialize(d)? {
            Secs::Int(s) => Ok(Duration::from_secs(s)),
            Secs::Float(f) if f.is_finite() && (0.0..1e9).contains(&f) => {
                Ok(Duration::from_secs_f64(f))
            }
            Secs::Float(f) => Err(serde::de::Error::custom(format!(
                "{f} is not a valid number of seconds (must be finite, non-negative, below 1e9)"
            ))),
        }
    }
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file has problems; each names its key path.
    #[error("configuration {path} has {} problem(s):\n{}", problems.len(), problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every problem found.
        problems: Vec<String>,
    },
}
