//! Kernel-log records about RDMA devices the host has never shown: no port is made for
//! them. Each such record is counted, alerted once per window (kind `unknown-device`), and
//! the last few sightings are kept, bounded, so a device that appears later (a record read
//! before the first topology scan, or a device registered just after its driver logged) is
//! still acted on when it shows up.
//!
//! Why: a port made per record let a driver bug (or a forger, with
//! `kmsg.trust-userspace-records`) naming 60 000 distinct devices build 60 000 ports, each
//! costing every later input its share (journal view, timers, status), until the loop fell
//! behind the kernel ring (issue 12). A device neither RDMA netlink nor sysfs lists has
//! nothing to recover: its re-creation has no recipe, and no session sits on it.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Engine;
use crate::recovery::action::AlertClass;
use crate::recovery::input::StuckEvidence;
use crate::time::Instant;

/// Sightings kept (distinct device and port): older ones are forgotten first.
pub(super) const MAX_UNKNOWN_SIGHTINGS: usize = 64;

/// How long a sighting is kept for a device that has not appeared.
pub(super) const UNKNOWN_SIGHTING_MEMORY: Duration = Duration::from_secs(600);

/// One device (and port, if the record named one) seen in records before it was known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sighting {
    pub(super) first: Instant,
    pub(super) last: Instant,
    pub(super) records: u64,
    pub(super) evidence: StuckEvidence,
}

/// The bounded summary of records about unknown devices (not journaled: after a restart
/// the first scan shows what exists, and the kernel log is read on from its cursor).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UnknownDevices {
    kept: BTreeMap<(String, Option<u32>), Sighting>,
    /// Records about unknown devices, in all.
    records: u64,
    /// Sightings forgotten to keep the bound (the oldest first) or because they expired.
    forgotten: u64,
}

impl UnknownDevices {
    /// Counts one record and keeps its sighting, forgetting the oldest beyond the bound.
    fn note(&mut self, device: &str, port: Option<u32>, evidence: StuckEvidence, now: Instant) {
        self.records = self.records.saturating_add(1);
        let key = (device.to_string(), port);
        if let Some(s) = self.kept.get_mut(&key) {
            s.last = now;
            s.records = s.records.saturating_add(1);
            s.evidence = evidence;
            return;
        }
        if self.kept.len() >= MAX_UNKNOWN_SIGHTINGS {
            // Linear in the bound (64), not in the storm.
            if let Some(oldest) = self
                .kept
                .iter()
                .min_by_key(|(_, s)| s.last)
                .map(|(k, _)| k.clone())
            {
                self.kept.remove(&oldest);
                self.forgotten = self.forgotten.saturating_add(1);
            }
        }
        self.kept.insert(
            key,
            Sighting {
                first: now,
                last: now,
                records: 1,
                evidence,
            },
        );
    }

    /// Takes the live sightings of `device` (it is known now), dropping expired ones.
    fn take(&mut self, device: &str, now: Instant) -> Vec<(Option<u32>, Sighting)> {
        let keys: Vec<(String, Option<u32>)> = self
            .kept
            .range((device.to_string(), None)..)
            .take_while(|((d, _), _)| d == device)
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(s) = self.kept.remove(&k) {
                if now.since(s.last) <= UNKNOWN_SIGHTING_MEMORY {
                    out.push((k.1, s));
                } else {
                    self.forgotten = self.forgotten.saturating_add(1);
                }
            }
        }
        out
    }

    /// Records about unknown devices since the start.
    #[cfg(test)]
    fn records(&self) -> u64 {
        self.records
    }

    /// Sightings kept now (at most [`MAX_UNKNOWN_SIGHTINGS`]).
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.kept.len()
    }

    /// Sightings forgotten (bound or expiry).
    #[cfg(test)]
    fn forgotten(&self) -> u64 {
        self.forgotten
    }
}

impl Engine {
    /// Whether topology (RDMA netlink, sysfs), a session placement, the journal or an
    /// operator command has ever named `device`: only those get ports.
    pub(super) fn device_known(&self, device: &str) -> bool {
        self.devices.contains_key(device)
    }

    /// A stuck GSI QP reported for a device never shown: counted, alerted once per window
    /// (the gate coalesces the kind whatever the number of devices), kept for later.
    pub(super) fn on_unknown_device(
        &mut self,
        device: &str,
        port: Option<u32>,
        evidence: StuckEvidence,
        now: Instant,
    ) {
        self.unknown.note(device, port, evidence, now);
        self.stats.unknown_device_records = self.stats.unknown_device_records.saturating_add(1);
        let named = match port {
            Some(p) => format!("{device}/{p}"),
            None => device.to_string(),
        };
        self.alert_coalesced(
            now,
            AlertClass::Warning,
            format!("unknown-device:{named}"),
            format!(
                "kernel-log record(s) about an RDMA device the host does not show, the first: \
                 {named}: {}",
                evidence.describe()
            ),
            format!(
                "neither RDMA netlink nor sysfs lists {device}, so there is no port to recover \
                 and nothing to re-create it from. iser-guard keeps the last \
                 {MAX_UNKNOWN_SIGHTINGS} such devices for {} min and acts on the record if the \
                 device appears by then. Many distinct names at once point at a driver \
                 flooding the log (or, with kmsg.trust-userspace-records, at a process writing \
                 into /dev/kmsg).",
                UNKNOWN_SIGHTING_MEMORY.as_secs() / 60
            ),
            Some("rdma link show".to_string()),
        );
    }

    /// `device` is known now: the records seen about it before count as if they came now.
    pub(super) fn replay_unknown(&mut self, device: &str, now: Instant) {
        for (port, s) in self.unknown.take(device, now) {
            let before = format!(
                "{} kernel-log record(s) {} s before RDMA device {device} was seen",
                s.records,
                now.since(s.first).as_secs()
            );
            self.gsi_stuck_known(device, port, s.evidence, Some(before), now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_bounded_and_forgets_the_oldest_first() {
        let mut u = UnknownDevices::default();
        for i in 0..10_000u64 {
            u.note(
                &format!("flood{i}"),
                None,
                StuckEvidence::ModifyQpInvalid,
                Instant(i),
            );
        }
        assert_eq!(u.records(), 10_000);
        assert_eq!(u.kept(), MAX_UNKNOWN_SIGHTINGS);
        assert_eq!(u.forgotten(), 10_000 - MAX_UNKNOWN_SIGHTINGS as u64);
        // The newest are kept, the oldest gone.
        assert_eq!(u.take("flood9999", Instant(10_000)).len(), 1);
        assert!(u.take("flood0", Instant(10_000)).is_empty());
    }

    #[test]
    fn repeats_of_one_device_keep_one_sighting_with_its_count() {
        let mut u = UnknownDevices::default();
        for t in 0..5 {
            u.note("irdma9", Some(1), StuckEvidence::MadRtsFailed, Instant(t));
        }
        u.note("irdma9", Some(2), StuckEvidence::MadRtsFailed, Instant(6));
        u.note("irdma90", None, StuckEvidence::MadRtsFailed, Instant(7));
        assert_eq!(u.kept(), 3);
        let taken = u.take("irdma9", Instant(8));
        assert_eq!(
            taken.len(),
            2,
            "both ports of irdma9, not irdma90: {taken:?}"
        );
        assert_eq!(taken[0].0, Some(1));
        assert_eq!(taken[0].1.records, 5);
        assert_eq!(u.kept(), 1);
    }

    #[test]
    fn an_expired_sighting_is_not_replayed() {
        let mut u = UnknownDevices::default();
        u.note("irdma9", None, StuckEvidence::MadRtsFailed, Instant::ZERO);
        let late = Instant::ZERO.plus(UNKNOWN_SIGHTING_MEMORY + Duration::from_secs(1));
        assert!(u.take("irdma9", late).is_empty());
        assert_eq!(u.forgotten(), 1);
    }
}
