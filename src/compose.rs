//! The composition root: the I/O layer's option structs built from the configuration, in
//! one place. The `io` modules take their own options and know nothing of [`Config`]; the
//! daemon, the standalone commands and the CLI build them here.

use crate::config::{Alerts, Config, Paths};
use crate::io::executors::{ExecutorOptions, Executors, ProbeOptions};
use crate::io::kmsg::OpenOptions;
use crate::io::reset::ResetConfig;
use crate::io::syslog::SyslogSink;

/// The kernel log at `paths.kmsg`, its cursor in `paths.state-dir`.
pub fn kmsg_options(paths: &Paths) -> OpenOptions {
    OpenOptions::new(
        paths.kmsg.clone(),
        paths.state_dir.clone(),
        paths.boot_id.clone(),
    )
}

/// The syslog sink of `[alerts]`.
pub fn syslog_sink(alerts: &Alerts) -> SyslogSink {
    SyslogSink::new(alerts.syslog_socket.clone(), alerts.ident.clone())
}

/// The resetter's tools (`paths.sysfs-root`, `paths.devlink`, `paths.rdma`,
/// `paths.modprobe`, `recovery.allow-module-reload`). `devices.allow` and
/// `recovery.dry-run` are the driver's to apply, not the resetter's.
pub fn reset_config(cfg: &Config) -> ResetConfig {
    ResetConfig::new(
        cfg.paths.sysfs_root.clone(),
        cfg.paths.devlink.clone(),
        cfg.paths.rdma.clone(),
        cfg.paths.modprobe.clone(),
        cfg.recovery.allow_module_reload,
    )
}

/// `recovery.probe-timeout` and `recovery.probe-port`.
pub fn probe_options(cfg: &Config) -> ProbeOptions {
    ProbeOptions {
        timeout: cfg.recovery.probe_timeout,
        port: cfg.recovery.probe_port,
    }
}

/// The real executors for `cfg`.
pub fn executors(cfg: &Config) -> Executors {
    Executors::real(ExecutorOptions {
        reset: reset_config(cfg),
        iscsiadm: (cfg.paths.iscsiadm.clone(), cfg.recovery.iscsiadm_timeout),
        syslog: cfg.alerts.syslog.then(|| syslog_sink(&cfg.alerts)),
        probe: probe_options(cfg),
    })
}
