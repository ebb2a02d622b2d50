//! The composition root: the I/O layer's option structs built from the configuration, in
//! one place. The `io` modules take their own options and know nothing of [`Config`]; the
//! daemon, the standalone commands and the CLI build them here.

use crate::config::{Alerts, Config, Paths};
use crate::io::executors::{ExecutorOptions, Executors, ProbeOptions};
use crate::io::kmsg::OpenOptions;
use crate::io::probe::parse_portal;
use crate::io::probe_choice::ProbeMethods;
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

/// `recovery.probe-timeout`, `recovery.probe-port` and the probe methods.
pub fn probe_options(cfg: &Config) -> ProbeOptions {
    let r = &cfg.recovery;
    ProbeOptions {
        timeout: r.probe_timeout,
        port: r.probe_port,
        methods: ProbeMethods {
            global: r.probe_method,
            // Checked by `Config::validate`: a key that does not parse never gets here.
            per_portal: r
                .portal_probe_method
                .iter()
                .filter_map(|(k, m)| Some((parse_portal(k, r.probe_port).ok()?, *m)))
                .collect(),
        },
    }
}

/// The real executors for `cfg`.
pub fn executors(cfg: &Config) -> Executors {
    Executors::real(ExecutorOptions {
        reset: reset_config(cfg),
        iscsiadm: (cfg.paths.iscsiadm.clone(), cfg.recovery.iscsiadm_timeout),
        syslog: cfg.alerts.syslog.then(|| syslog_sink(&cfg.alerts)),
        probe: probe_options(cfg),
        nvme: crate::io::nvme_cli::NvmeCliRestore::new(
            cfg.paths.nvme.clone(),
            cfg.paths.sysfs_root.clone(),
            cfg.paths.dev_root.clone(),
            cfg.recovery.nvme_reconnect,
        ),
        multipath: crate::io::multipathd::MultipathdRestore::new(cfg.paths.multipathd.clone()),
    })
}
