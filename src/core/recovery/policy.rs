//! The recovery policy: the knobs of `[recovery]`, `[devices]`, `[kmsg]`, `[poll]` and
//! `[alerts]` the engine reads, plus a few engine-only bounds with documented defaults.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{Config, OtherSessions, ProbeMethod, ResetWhen};

/// Everything the engine decides by. Built from the configuration with
/// [`Policy::from_config`]; the engine-only fields keep their defaults unless the daemon
/// overrides them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// `recovery.dry-run`: decide and alert, never act.
    pub dry_run: bool,
    /// `recovery.reset-when`.
    pub reset_when: ResetWhen,
    /// `recovery.probe-successes`: consecutive successful probes before a target counts as back.
    pub probe_successes: u32,
    /// `recovery.probe-method`: `none` treats targets as present.
    pub probe_method: ProbeMethod,
    /// `poll.probe`: interval between probe rounds while waiting for a target.
    pub probe_interval: Duration,
    /// `recovery.probe-timeout`.
    pub probe_timeout: Duration,
    /// `recovery.backoff-initial`: first pause between attempts; doubles each time.
    pub backoff_initial: Duration,
    /// `recovery.backoff-max`.
    pub backoff_max: Duration,
    /// `recovery.max-attempts`: attempts before the port is quarantined.
    pub max_attempts: u32,
    /// `recovery.iscsid-grace`: time iscsid gets to reconnect on its own once the port is back.
    pub iscsid_grace: Duration,
    /// `recovery.other-sessions`.
    pub other_sessions: OtherSessions,
    /// `recovery.iscsiadm-timeout`.
    pub iscsiadm_timeout: Duration,
    /// `devices.allow`: the only devices automatic recovery may touch.
    pub allow: BTreeSet<String>,
    /// `kmsg.trust-userspace-records`.
    pub trust_userspace: bool,
    /// `alerts.repeat-interval`: identical alerts within it are counted, not repeated.
    pub alert_repeat_interval: Duration,
    /// Engine-only: identical alerts arriving within this window of the first are merged into
    /// one alert with a count (a storm of 10 000 lines gives one alert).
    pub alert_coalesce: Duration,
    /// Engine-only: how long a device re-creation may take before it is verified as failed.
    pub recreate_timeout: Duration,
    /// Engine-only: how long to wait for a vanished initiator device to come back by itself
    /// before re-creating it from its parent.
    pub device_wait: Duration,
    /// Engine-only: how long to wait for an unreachable target before quarantining the port.
    pub target_wait_max: Duration,
    /// Engine-only: how long sessions may take to show LOGGED_IN with running disks after
    /// the reconnect, before the attempt counts as failed.
    pub verify_timeout: Duration,
    /// Engine-only: I/O errors on a LOGGED_IN session's disks within `zombie_window` that
    /// make it a zombie session (logged out and in).
    pub zombie_io_errors: u32,
    /// Engine-only: see `zombie_io_errors`.
    pub zombie_window: Duration,
    /// `poll.iscsi`: session list refresh while a port is being recovered.
    pub session_refresh: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::from_config(&Config::default())
    }
}

impl Policy {
    /// The policy a configuration asks for.
    pub fn from_config(c: &Config) -> Self {
        let r = &c.recovery;
        Policy {
            dry_run: r.dry_run,
            reset_when: r.reset_when,
            probe_successes: r.probe_successes.max(1),
            probe_method: r.probe_method,
            probe_interval: c.poll.probe.max(Duration::from_millis(100)),
            probe_timeout: r.probe_timeout,
            backoff_initial: r.backoff_initial,
            backoff_max: r.backoff_max.max(r.backoff_initial),
            max_attempts: r.max_attempts.max(1),
            iscsid_grace: r.iscsid_grace,
            other_sessions: r.other_sessions,
            iscsiadm_timeout: r.iscsiadm_timeout,
            allow: c.devices.allow.iter().cloned().collect(),
            trust_userspace: c.kmsg.trust_userspace_records,
            alert_repeat_interval: c.alerts.repeat_interval,
            alert_coalesce: Duration::from_secs(2),
            recreate_timeout: Duration::from_secs(120),
            device_wait: Duration::from_secs(60),
            target_wait_max: Duration::from_secs(3600),
            verify_timeout: Duration::from_secs(60),
            zombie_io_errors: 3,
            zombie_window: Duration::from_secs(30),
            session_refresh: c.poll.iscsi.max(Duration::from_millis(100)),
        }
    }

    /// Automatic recovery may touch this device.
    pub fn allows(&self, device: &str) -> bool {
        self.allow.contains(device)
    }

    /// The pause before attempt `attempt` (from 1): `backoff_initial · 2^(attempt-1)`, capped
    /// at `backoff_max`, then jittered by up to ±20 % with `jitter` in [0, 1).
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(20);
        let base = self
            .backoff_initial
            .saturating_mul(1u32 << exp)
            .min(self.backoff_max);
        let factor = 0.8 + 0.4 * jitter.clamp(0.0, 1.0);
        base.mul_f64(factor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_jitters_within_20_percent() {
        let p = Policy::default();
        assert_eq!(p.backoff(1, 0.5), Duration::from_secs(30));
        assert_eq!(p.backoff(2, 0.5), Duration::from_secs(60));
        assert_eq!(p.backoff(30, 0.5), Duration::from_secs(600));
        assert_eq!(p.backoff(1, 0.0), Duration::from_secs(24));
        assert!(p.backoff(1, 0.999) < Duration::from_secs(36));
    }

    #[test]
    fn defaults_follow_the_config_defaults() {
        let p = Policy::default();
        assert!(!p.dry_run);
        assert_eq!(p.reset_when, ResetWhen::TargetBack);
        assert_eq!(p.probe_successes, 3);
        assert!(p.allow.is_empty());
        assert!(!p.trust_userspace);
    }
}
