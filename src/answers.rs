//! Executor answers → the core's outcomes, in one place. What iscsiadm, the resetter
//! (rdma/devlink/sysfs), the prober and the port self-test answered becomes the engine's
//! [`Outcome`] here, and only here: the daemon's executor (src/daemon/exec.rs) and the
//! simulated host (src/sim/host.rs) both call these, so a scenario exercises the same
//! translation the daemon runs. Each function also gives the answer in words (for the log and
//! the operator); running the tools and deciding whether to run them are elsewhere.

use crate::core::recovery::{IscsiadmOutcome, MethodFailure, Outcome, RecreateResult};
use crate::core::selftest::SelfTestResult;
use crate::io::iscsiadm::{IscsiadmError, LoginOutcome, LogoutOutcome};
use crate::io::reset::{Recreated, ResetError, ResetOutcome};

/// An answer translated: the outcome for the engine and what happened, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// For `Engine::handle_outcome`.
    pub outcome: Outcome,
    /// What happened, in words (without the action's name).
    pub summary: String,
}

fn answer(outcome: Outcome, summary: impl Into<String>) -> Answer {
    Answer {
        outcome,
        summary: summary.into(),
    }
}

/// The engine's reading of an iscsiadm failure.
pub fn iscsiadm_error(e: &IscsiadmError) -> IscsiadmOutcome {
    match e {
        IscsiadmError::Failed {
            status, message, ..
        } => crate::core::recovery::iscsiadm_outcome(*status, message),
        IscsiadmError::Hung { .. } => IscsiadmOutcome::Timeout,
        other => IscsiadmOutcome::Other {
            code: None,
            message: other.to_string(),
        },
    }
}

/// `iscsiadm --login`'s answer.
pub fn login(r: &Result<LoginOutcome, IscsiadmError>) -> Answer {
    match r {
        Ok(LoginOutcome::LoggedIn) => {
            answer(Outcome::Iscsiadm(IscsiadmOutcome::Success), "logged in")
        }
        Ok(LoginOutcome::AlreadyLoggedIn) => answer(
            Outcome::Iscsiadm(IscsiadmOutcome::AlreadyLoggedIn),
            "already logged in",
        ),
        Err(e) => answer(Outcome::Iscsiadm(iscsiadm_error(e)), e.to_string()),
    }
}

/// `iscsiadm --logout`'s answer.
pub fn logout(r: &Result<LogoutOutcome, IscsiadmError>) -> Answer {
    match r {
        Ok(LogoutOutcome::LoggedOut) => {
            answer(Outcome::Iscsiadm(IscsiadmOutcome::Success), "logged out")
        }
        Ok(LogoutOutcome::NotLoggedIn) => answer(
            Outcome::Iscsiadm(IscsiadmOutcome::NotFound),
            "was not logged in",
        ),
        Err(e) => answer(Outcome::Iscsiadm(iscsiadm_error(e)), e.to_string()),
    }
}

/// `iscsiadm --rescan`'s answer.
pub fn rescan(r: &Result<(), IscsiadmError>) -> Answer {
    match r {
        Ok(()) => answer(Outcome::Iscsiadm(IscsiadmOutcome::Success), "rescanned"),
        Err(e) => answer(Outcome::Iscsiadm(iscsiadm_error(e)), e.to_string()),
    }
}

/// The recovery lock could not be taken: the re-creation did not run.
pub fn lock_refused(reason: &str) -> Answer {
    answer(
        Outcome::Recreate(RecreateResult::Failed {
            reason: reason.to_string(),
        }),
        format!("not run: {reason}"),
    )
}

/// A re-creation that worked, for the engine (also what a late result, one that returned
/// after its step was reported blocked, is recorded as).
pub fn recreated(r: &Recreated) -> RecreateResult {
    RecreateResult::Recreated {
        name: r.new_name.clone(),
        mode_restored: r.mode_restored.clone(),
        method: Some(r.method.to_string()),
        failed_before: r.failed_before.iter().map(|f| f.in_words()).collect(),
    }
}

/// The resetter's answer for `device`.
pub fn recreate(device: &str, r: &Result<ResetOutcome, ResetError>) -> Answer {
    match r {
        Ok(ResetOutcome::Recreated(r)) => {
            let result = recreated(r);
            // What failed first is part of what happened: the operator confirmed a plan whose
            // first method is not the one that worked.
            let failed = match &result {
                RecreateResult::Recreated { failed_before, .. } if !failed_before.is_empty() => {
                    format!(", after {}", MethodFailure::words(failed_before))
                }
                _ => String::new(),
            };
            let summary = if r.brought_back {
                format!(
                    "{device} was gone: brought back by `{}` in {} ms{failed}; the device is {} \
                     again",
                    r.method.up_command(),
                    r.took_ms,
                    r.new_name
                )
            } else {
                format!(
                    "re-created by {} in {} ms{failed}; the device is {} again",
                    r.method, r.took_ms, r.new_name
                )
            };
            answer(Outcome::Recreate(result), summary)
        }
        // Asked to run, the resetter only planned: nothing happened to the device. Not a
        // failed re-creation (dry-run is the driver's, decided before this).
        Ok(ResetOutcome::DryRun(plan)) => answer(
            Outcome::NotRun {
                reason: format!(
                    "the resetter returned a plan ({} method(s)) instead of running",
                    plan.methods.len()
                ),
            },
            "not run: the resetter only planned",
        ),
        // Nothing to re-create the device from: the engine quarantines at once.
        Err(e) if e.is_unsupported() => answer(
            Outcome::Recreate(RecreateResult::Unsupported {
                reason: e.to_string(),
            }),
            e.to_string(),
        ),
        Err(e) => answer(
            Outcome::Recreate(RecreateResult::Failed {
                reason: e.to_string(),
            }),
            e.to_string(),
        ),
    }
}

/// The re-creation method a resetter's answer names: the one that worked, or the one that
/// failed after changing something (for metrics).
pub fn reset_method(r: &Result<ResetOutcome, ResetError>) -> Option<&'static str> {
    use ResetError as E;
    match r {
        Ok(ResetOutcome::Recreated(r)) => Some(r.method.kind()),
        Ok(ResetOutcome::DryRun(_)) => None,
        Err(
            E::DidNotDisappear { method, .. }
            | E::UpStepFailed { method, .. }
            | E::CheckBlocked { method, .. },
        )
        | Err(E::DidNotReturn { method, .. } | E::NotBroughtBack { method, .. }) => {
            Some(method.kind())
        }
        Err(E::AllMethodsFailed { failures, .. }) => failures.last().map(|f| f.method.kind()),
        // Only a devlink toggle checks the mode.
        Err(E::ModeNotRestored { .. }) => Some("devlink-toggle"),
        Err(
            E::NoMethod { .. } | E::NoSuchDevice { .. } | E::ParentGone { .. } | E::Sysfs { .. },
        ) => None,
    }
}

/// The port self-test's answer.
pub fn self_test(result: SelfTestResult) -> Answer {
    let summary = match &result {
        SelfTestResult::Ran(r) => r.summary(),
        SelfTestResult::Unavailable { reason } => format!("unavailable: {reason}"),
    };
    answer(Outcome::SelfTest(result), summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::iscsi::IscsiadmStatus as Exit;
    use std::time::Duration;

    #[test]
    fn a_hung_iscsiadm_is_a_timeout() {
        let e = IscsiadmError::Hung {
            command: "iscsiadm -m node --login".into(),
            timeout: Duration::from_secs(30),
        };
        assert_eq!(
            login(&Err(e)).outcome,
            Outcome::Iscsiadm(IscsiadmOutcome::Timeout)
        );
    }

    #[test]
    fn a_refused_login_is_an_authentication_failure() {
        let e = IscsiadmError::Failed {
            command: "iscsiadm -m node --login".into(),
            status: Exit::from_code(24),
            message: "initiator reported error (24 - iSCSI login failed due to authorization \
                      failure)"
                .into(),
        };
        assert_eq!(
            login(&Err(e)).outcome,
            Outcome::Iscsiadm(IscsiadmOutcome::AuthFailed)
        );
    }

    #[test]
    fn a_logout_without_a_session_is_not_found() {
        assert_eq!(
            logout(&Ok(LogoutOutcome::NotLoggedIn)).outcome,
            Outcome::Iscsiadm(IscsiadmOutcome::NotFound)
        );
    }

    #[test]
    fn a_device_nothing_can_recreate_is_unsupported() {
        let e = ResetError::NoSuchDevice {
            device: "mlx5_0".into(),
            root: "/sys".into(),
        };
        let a = recreate("mlx5_0", &Err(e));
        assert!(matches!(
            a.outcome,
            Outcome::Recreate(RecreateResult::Unsupported { .. })
        ));
    }
}
