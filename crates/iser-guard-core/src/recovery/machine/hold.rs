//! Holds: a port that wants to act and may not (dry-run, pause, allow-list, other sessions,
//! one re-creation at a time, no portal known), each said once per repeat interval.

use super::Engine;
use crate::recovery::action::AlertClass;
use crate::recovery::input::PortId;
use crate::recovery::state::Hold;
use crate::time::Instant;

impl Engine {
    /// The authorisation hold the driver put on this port, if it still stands. The engine
    /// does not decide authorisation (dry-run, pause, allow-list): the driver does, once per
    /// action, and reports a refusal as [`Outcome::Planned`]; the hold it leaves stays until a
    /// transition, a policy reload, `resume` or an operator command clears it.
    pub(super) fn destructive_hold(&self, pid: &PortId) -> Option<Hold> {
        self.ports
            .get(pid)
            .and_then(|p| p.hold.clone())
            .filter(|h| matches!(h, Hold::DryRun | Hold::Paused | Hold::NotAllowed))
    }

    pub(super) fn set_hold(
        &mut self,
        pid: &PortId,
        hold: Hold,
        what: &str,
        why: &str,
        now: Instant,
    ) {
        let changed = self
            .ports
            .get(pid)
            .is_some_and(|p| p.hold.as_ref() != Some(&hold));
        let repeat = self.policy.alert_repeat_interval;
        let recent = self
            .ports
            .get(pid)
            .is_some_and(|p| p.hold_alerted_at.is_some_and(|t| now.since(t) < repeat));
        if !changed && recent {
            return; // Already decided and alerted within the repeat interval.
        }
        if let Some(p) = self.ports.get_mut(pid) {
            p.hold = Some(hold.clone());
            p.hold_alerted_at = Some(now);
        }
        let down = self.down_sessions_text(pid);
        let device = &pid.device;
        // `remedy` is one command line; what else the operator can do is `advice`, in words.
        let recover = Some(format!("iser-guard recover {pid}"));
        let (severity, kind, summary, remedy, advice) = match &hold {
            Hold::DryRun => (
                AlertClass::Warning,
                "dry-run",
                format!("dry-run: would {what}"),
                recover,
                Some("or set recovery.dry-run = false to let iser-guard do it".to_string()),
            ),
            Hold::Paused => (
                AlertClass::Info,
                "paused",
                format!("paused: would {what}"),
                Some("iser-guard resume".to_string()),
                None,
            ),
            Hold::NotAllowed => (
                // An operator-action alert (alerts.severity-operator), not a fault.
                AlertClass::Critical,
                "not-allowed",
                format!("{device} is not in devices.allow: will not {what}"),
                recover,
                Some(format!(
                    "or add \"{device}\" to devices.allow to let iser-guard do it on its own"
                )),
            ),
            Hold::OtherSessionsHealthy {
                sessions,
                consumers,
            } => {
                let mut what = Vec::new();
                if !sessions.is_empty() {
                    what.push(format!("{} healthy session(s)", sessions.len()));
                }
                if !consumers.is_empty() {
                    what.push(format!(
                        "the connections of {}",
                        consumers
                            .iter()
                            .map(|c| c.owner.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                let mut knobs = Vec::new();
                if !sessions.is_empty() {
                    knobs.push("recovery.other-sessions = \"proceed\"".to_string());
                }
                let mut kinds: Vec<&str> = consumers.iter().map(|c| c.kind.key()).collect();
                kinds.dedup();
                for k in kinds {
                    knobs.push(format!("[recovery.consumers] {k} = \"proceed\""));
                }
                (
                    AlertClass::Critical,
                    "other-sessions",
                    format!(
                        "{pid}: re-creating {device} would drop {}; waiting for the operator",
                        what.join(" and ")
                    ),
                    recover,
                    Some(format!("or set {}", knobs.join(" and "))),
                )
            }
            Hold::LastMultipathPath { paths } => (
                AlertClass::Critical,
                "multipath",
                format!(
                    "{pid}: re-creating {device} would take the last usable path of \
                     dm-multipath map(s) {}; waiting for another path or the operator",
                    crate::multipath::maps_of(paths).join(", ")
                ),
                recover,
                Some(
                    "or bring another path of the map(s) back, or set \
                     recovery.multipath-last-path = \"proceed\""
                        .to_string(),
                ),
            ),
            Hold::WaitingForSlot { busy } => (
                AlertClass::Info,
                "slot",
                format!("{pid}: waiting for the re-creation of {busy} to finish (one at a time)"),
                None,
                None,
            ),
            Hold::NoPortalKnown => (
                AlertClass::Critical,
                "no-portal",
                format!(
                    "{pid}: no target portal is known for this port, so iser-guard cannot tell \
                     when the target is back: will not {what} on its own"
                ),
                recover,
                Some(format!(
                    "once the target answers; first check that the iSCSI sessions of {device} \
                     are placed on {pid} (iser-guard status shows them)"
                )),
            ),
            Hold::KernelBug { report, .. } => (
                // Operator class: only an operator can judge a kernel bug.
                AlertClass::Critical,
                "kernel-bug",
                format!(
                    "{pid}: the kernel reported {report}: will not {what} on its own (a \
                     re-creation under a kernel bug can make it worse)"
                ),
                recover,
                Some("or iser-guard resume to lift every kernel-bug hold at once".to_string()),
            ),
        };
        if changed {
            self.mark_dirty(format!("{pid}: hold {kind}"));
        }
        let mut detail = format!("{why}. Sessions waiting: {down}");
        if let Hold::OtherSessionsHealthy {
            sessions,
            consumers,
        } = &hold
        {
            if !sessions.is_empty() {
                let list: Vec<String> = sessions.iter().map(|k| k.to_string()).collect();
                detail.push_str(&format!(
                    ". Healthy sessions that would drop: {}",
                    list.join("; ")
                ));
            }
            if !consumers.is_empty() {
                detail.push_str(&format!(
                    ". Live RDMA consumers iser-guard cannot bring back: {}",
                    crate::consumers::list(consumers)
                ));
            }
        }
        if let Hold::LastMultipathPath { paths } = &hold {
            detail.push_str(&format!(
                ". Usable paths all on {device}: {}",
                crate::multipath::list_paths(paths)
            ));
        }
        if let Some(advice) = advice {
            detail.push_str(&format!(". To act: the command below, {advice}"));
        }
        self.mark_reported(pid);
        self.alert(
            now,
            severity,
            format!("hold:{pid}:{kind}"),
            summary,
            detail,
            remedy,
        );
    }
}
