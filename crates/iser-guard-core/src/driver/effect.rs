//! What the driver hands to executors, and what they report back.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::recovery::{Action, EngineSnapshot, Hold, Outcome};

/// Correlates an effect with its outcome. Unique for the life of one driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EffectId(pub u64);

impl fmt::Display for EffectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "effect {}", self.0)
    }
}

/// Identifies one operator command the driver accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CommandId(pub u64);

impl fmt::Display for CommandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "command #{}", self.0)
    }
}

/// What allowed an action to run. Decided once, by the driver, and carried on the effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Authority {
    /// The action changes nothing on the host (probe, refresh, alert): always allowed.
    Harmless,
    /// An automatic action on a device listed in `devices.allow`.
    AllowList {
        /// The allow-list entry that names the device.
        entry: String,
    },
    /// An operator command that names this device (overrides the allow-list for it only).
    Operator {
        /// The command.
        command: CommandId,
        /// The device it names.
        device: String,
    },
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authority::Harmless => f.write_str("harmless"),
            Authority::AllowList { entry } => write!(f, "devices.allow lists {entry}"),
            Authority::Operator { command, device } => {
                write!(f, "operator {command} names {device}")
            }
        }
    }
}

/// Why a destructive action was not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// `recovery.dry-run`: planned only.
    DryRun,
    /// `iser-guard pause` is in effect (automatic actions only).
    Paused,
    /// Automatic, on a device `devices.allow` does not list.
    NotAllowed {
        /// The device.
        device: String,
    },
    /// Asked for by an operator episode, but no live operator command names the device
    /// (and `devices.allow` does not list it).
    NotNamedByOperator {
        /// The device.
        device: String,
    },
    /// A standalone manual command runs the operator's command only; automatic actions
    /// are the daemon's.
    LeftToDaemon,
    /// The journal could not be written ahead of it.
    JournalFailed {
        /// The OS error, in words.
        reason: String,
    },
    /// Safe mode (the daemon started without a usable journal): automatic destructive
    /// actions wait for the first complete scan of devices and sessions.
    SafeMode {
        /// Why the daemon is in safe mode, in words.
        reason: String,
    },
}

impl Refusal {
    /// The hold the engine shows for this refusal; `None`: the engine is told
    /// [`Outcome::NotRun`] instead (the action may be retried later).
    pub fn hold(&self) -> Option<Hold> {
        match self {
            Refusal::DryRun => Some(Hold::DryRun),
            Refusal::Paused => Some(Hold::Paused),
            Refusal::NotAllowed { .. } | Refusal::NotNamedByOperator { .. } => {
                Some(Hold::NotAllowed)
            }
            Refusal::LeftToDaemon | Refusal::JournalFailed { .. } | Refusal::SafeMode { .. } => {
                None
            }
        }
    }

    /// The outcome the engine is told for an action refused this way.
    pub fn outcome(&self, plan: String) -> Outcome {
        match self.hold() {
            Some(hold) => Outcome::Planned { hold, plan },
            None => Outcome::NotRun {
                reason: self.to_string(),
            },
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::DryRun => f.write_str("dry-run (recovery.dry-run or --dry-run): planned only"),
            Refusal::Paused => f.write_str("automatic actions are paused (iser-guard resume)"),
            Refusal::NotAllowed { device } => write!(f, "devices.allow does not list {device}"),
            Refusal::NotNamedByOperator { device } => write!(
                f,
                "no operator command names {device} and devices.allow does not list it"
            ),
            Refusal::LeftToDaemon => {
                f.write_str("a standalone manual command leaves automatic actions to the daemon")
            }
            Refusal::JournalFailed { reason } => {
                write!(f, "the journal could not be written: {reason}")
            }
            Refusal::SafeMode { reason } => write!(
                f,
                "safe mode ({reason}): no automatic destructive action before the first \
                 complete scan of devices and sessions"
            ),
        }
    }
}

/// One thing for an executor to do (or, for [`EffectKind::Plan`], to show).
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    /// Correlation id for [`crate::driver::Driver::handle_effect_outcome`].
    pub id: EffectId,
    /// What.
    pub kind: EffectKind,
}

/// The effects.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectKind {
    /// Write `snapshot` to the journal (atomic write: fsync of the file, then of its
    /// directory) and report [`EffectOutcome::Journal`]. The driver hands out nothing else
    /// until that outcome is in: a destructive effect never starts before its journal entry.
    WriteJournal {
        /// The engine's state to write.
        snapshot: Box<EngineSnapshot>,
        /// Why (the engine's reason, or the destructive action it precedes).
        reason: String,
    },
    /// Execute `action`. Report [`EffectOutcome::Action`] when `action.kind.expects_outcome()`;
    /// the other actions (alerts, refreshes) report nothing.
    Run {
        /// The engine's action.
        action: Action,
        /// What allowed it.
        authority: Authority,
    },
    /// The action was not run: a dry-run plan, or a refusal. Nothing to execute and nothing
    /// to report (the driver already told the engine); executors may render the plan (the
    /// device resetter's steps) for the operator.
    Plan {
        /// The engine's action.
        action: Action,
        /// Why it was not run.
        refusal: Refusal,
    },
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            EffectKind::WriteJournal { reason, .. } => write!(f, "write the journal: {reason}"),
            EffectKind::Run { action, authority } => write!(f, "{action} [{authority}]"),
            EffectKind::Plan { action, refusal } => write!(f, "not run: {action} ({refusal})"),
        }
    }
}

/// What an executor reports for an effect.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectOutcome {
    /// For [`EffectKind::WriteJournal`]: written and synced, or the error in words.
    Journal(Result<(), String>),
    /// For [`EffectKind::Run`] of an action that expects an outcome.
    Action(Outcome),
}
