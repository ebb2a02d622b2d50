//! The syslog severity (`<syslog.h>` numbering): the one severity of alerts, as configured
//! (`alerts.severity-*`), shown (`simulate`, `events`, the daemon's log) and sent to syslog.

/// A syslog severity (`<syslog.h>` numbering, RFC 5424 names without the `LOG_` prefix):
/// the one severity type of alerts, as configured (`alerts.severity-*`) and as sent.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// 0 (LOG_EMERG): the system is unusable.
    Emerg = 0,
    /// 1 (LOG_ALERT): action must be taken immediately, e.g. a port quarantined.
    Alert = 1,
    /// 2 (LOG_CRIT): critical, e.g. a device that did not come back.
    Crit = 2,
    /// 3 (LOG_ERR): a failed recovery step.
    Err = 3,
    /// 4 (LOG_WARNING): e.g. a stuck QP seen, waiting for the target.
    Warning = 4,
    /// 5 (LOG_NOTICE): normal but significant, e.g. a port recovered.
    Notice = 5,
    /// 6 (LOG_INFO): informational.
    Info = 6,
    /// 7 (LOG_DEBUG).
    Debug = 7,
}

impl Severity {
    /// The `<syslog.h>` number.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The name used in the configuration file.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Emerg => "emerg",
            Severity::Alert => "alert",
            Severity::Crit => "crit",
            Severity::Err => "err",
            Severity::Warning => "warning",
            Severity::Notice => "notice",
            Severity::Info => "info",
            Severity::Debug => "debug",
        }
    }
}

/// The syslog severity of each class of engine alert (`alerts.severity-fault`, `-action`,
/// `-recovered`, `-operator`): how an alert's class becomes the one severity it is shown
/// and sent with. The defaults are the configuration's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertSeverities {
    /// A port is stuck (fault detected, target gone, waiting).
    pub fault: Severity,
    /// iser-guard is acting, or would in dry-run.
    pub action: Severity,
    /// The port and its sessions are back.
    pub recovered: Severity,
    /// Automatic recovery gave up: an operator must act.
    pub operator: Severity,
}

impl Default for AlertSeverities {
    fn default() -> AlertSeverities {
        AlertSeverities {
            fault: Severity::Crit,
            action: Severity::Warning,
            recovered: Severity::Notice,
            operator: Severity::Alert,
        }
    }
}

impl AlertSeverities {
    /// The severity an alert of this class is shown and sent with.
    pub fn of(&self, class: crate::recovery::AlertClass) -> Severity {
        use crate::recovery::AlertClass as C;
        match class {
            C::Info => self.recovered,
            C::Warning => self.action,
            C::Error => self.fault,
            C::Critical => self.operator,
        }
    }
}
