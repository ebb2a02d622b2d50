//! The recovery policy: the knobs of `[recovery]`, `[devices]`, `[kmsg]`, `[poll]` and
//! `[alerts]` the engine reads, plus a few engine-only bounds with documented defaults.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Everything the engine decides by. The binary's config module maps the file onto it
/// (`Config::policy`); the engine-only fields keep their defaults unless the daemon
/// overrides them. `Policy::default()` is what the default configuration maps to (a test in
/// the binary's config module holds the two equal).
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
    /// `[recovery.consumers]`: what live RDMA consumers other than iSER do to an
    /// automatic re-creation, per kind.
    #[serde(default)]
    pub consumers: crate::consumers::ConsumerPolicy,
    /// `recovery.multipath-last-path`: what a device carrying the last usable path of a
    /// dm-multipath map does to an automatic re-creation of it (`wait`, or `proceed`).
    #[serde(default = "wait")]
    pub multipath_last_path: crate::consumers::ConsumerAction,
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
    /// `recovery.selftest`: run the port self-test while verifying a re-created device.
    #[serde(default)]
    pub selftest: SelfTestPolicy,
    /// Engine-only: how long one port self-test may take (it reports a failed step then).
    #[serde(default = "default_selftest_timeout")]
    pub selftest_timeout: Duration,
}

fn default_selftest_timeout() -> Duration {
    Duration::from_secs(10)
}

/// `recovery.selftest`: whether a re-created device's port is self-tested before it counts
/// as recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelfTestPolicy {
    /// Run it when the daemon has one (a self-test that is unavailable never blocks).
    #[default]
    Auto,
    /// Never run it: verification relies on the QP table and the sessions alone.
    Off,
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
    /// The target host's ARP/ND answer on the port's netdev (no TCP listener needed: iSER-only
    /// portals).
    Neighbour,
    /// TCP, and per portal the neighbour probe once TCP is refused (no listener) while the
    /// host answers ARP/ND, unless that portal has accepted TCP before.
    Auto,
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

impl Default for Policy {
    fn default() -> Self {
        Policy {
            dry_run: false,
            reset_when: ResetWhen::TargetBack,
            probe_successes: 3,
            probe_method: ProbeMethod::Auto,
            // 3 answers 0.25 s apart: the target counts as back once its portal has answered
            // for 0.5 s (the lab's flap, 0.4 s up in every 2 s, is not a return), and the
            // re-creation follows the return by 0.5-0.75 s. Why so short: after the
            // re-creation open-iscsi's next connect comes up to 3 s later
            // (ISCSI_CONN_ERR_REOPEN_DELAY, usr/initiator.c) and nothing can hasten it, so
            // the probes are the only share of the target's return to I/O that is ours to
            // cut. At 0.5 s (answered for 1 s) the lab's in-kernel field incident measured
            // 4.1-5.6 s raw; 5 s probes put the re-creation 10-15 s after the return
            // (docs/lab-results.md). A probe round costs one TCP SYN or one ARP/ND probe per
            // portal, and rounds run only while a port waits for its target.
            probe_interval: Duration::from_millis(250),
            // Shorter than the interval: a probe still in flight when the next round starts
            // makes that round skip its portal, so a timeout equal to the interval probed a
            // dead portal at half the rate (lab, 6.12). A LAN portal answers in milliseconds.
            probe_timeout: Duration::from_millis(200),
            backoff_initial: Duration::from_secs(30),
            backoff_max: Duration::from_secs(600),
            max_attempts: 3,
            iscsid_grace: Duration::from_secs(20),
            other_sessions: OtherSessions::Wait,
            consumers: crate::consumers::ConsumerPolicy::default(),
            multipath_last_path: crate::consumers::ConsumerAction::Wait,
            iscsiadm_timeout: Duration::from_secs(30),
            allow: BTreeSet::new(),
            trust_userspace: false,
            alert_repeat_interval: Duration::from_secs(300),
            alert_coalesce: Duration::from_secs(2),
            recreate_timeout: Duration::from_secs(60),
            device_wait: Duration::from_secs(60),
            target_wait_max: Duration::from_secs(3600),
            verify_timeout: Duration::from_secs(60),
            zombie_io_errors: 3,
            zombie_window: Duration::from_secs(30),
            session_refresh: Duration::from_secs(10),
            selftest: SelfTestPolicy::Auto,
            selftest_timeout: default_selftest_timeout(),
        }
    }
}

impl Policy {
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

/// `multipath_last_path`'s default in a serialized policy without it.
fn wait() -> crate::consumers::ConsumerAction {
    crate::consumers::ConsumerAction::Wait
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
