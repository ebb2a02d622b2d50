//! Runs one action the driver handed out ([`crate::core::driver::EffectKind::Run`]) on the
//! executors (blocking: call through `spawn_blocking`) and turns the executor's answer into
//! the engine's [`Outcome`], with a line for the log and the operator. Nothing here decides
//! whether the action may run: the driver did, once.

use crate::core::iscsi::NodeId;
use crate::core::recovery::{
    Action, ActionKind, IscsiNode, IscsiadmStatus, MethodFailure, Outcome, RecreateResult,
};
use crate::core::reset_plan::{ParentFacts, RecreateFrom};
use crate::core::selftest::SelfTestResult;
use crate::io::executors::Executors;
use crate::io::iscsiadm::{IscsiadmError, LoginOutcome, LogoutOutcome};
use crate::io::lock::RecoveryLock;
use crate::io::probe::ProbeSource;
use crate::io::reset::{OnBlocked, ResetOutcome};

/// The result of one executed action: the outcome for the engine and what happened, in
/// words.
#[derive(Debug, Clone)]
pub struct Executed {
    /// For `Engine::handle_outcome`.
    pub outcome: Outcome,
    /// One line for the log and the operator.
    pub summary: String,
    /// The re-creation method that ran (`aux-rebind`, …), when one did: for metrics.
    pub method: Option<&'static str>,
}

fn node_id(node: &IscsiNode) -> NodeId {
    NodeId {
        target: node.key.target.clone(),
        address: node.key.portal.ip().to_string(),
        port: node.key.portal.port(),
        iface: Some(node.key.iface.clone()),
    }
}

fn iscsiadm_status(e: &IscsiadmError) -> IscsiadmStatus {
    match e {
        IscsiadmError::Failed {
            status, message, ..
        } => crate::core::recovery::iscsiadm_outcome(*status, message),
        IscsiadmError::Hung { .. } => IscsiadmStatus::Timeout,
        other => IscsiadmStatus::Other {
            code: None,
            message: other.to_string(),
        },
    }
}

/// What a device known only by its parent PCI function (a journal from before devices'
/// recipes were remembered) can be re-created from: that function, as the resetter plans
/// for a present device. `None` for anything that is not a PCI address.
fn parent_recipe(parent: Option<&str>) -> Option<RecreateFrom> {
    let bdf = parent?;
    let is_bdf = bdf.len() == 12
        && bdf.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b':',
            10 => b == b'.',
            _ => b.is_ascii_hexdigit(),
        });
    is_bdf.then(|| RecreateFrom::Parent {
        parent: ParentFacts {
            bus: "pci".into(),
            name: bdf.to_string(),
            driver: None,
        },
        // Found again under the function by the resetter.
        aux: None,
        netdevs: Vec::new(),
    })
}

/// Executes an action that expects an outcome (probe, re-creation, iscsiadm, port
/// self-test). `lock_dir`:
/// where the recovery lock lives (`paths.state-dir`); a device re-creation holds it (`None`:
/// the caller holds it already).
/// Returns `None` for actions that have no outcome (the caller handles those itself).
/// `probe_from`: the local address of the sessions to that portal (their iface IP), so the
/// probe leaves through the iSER interface; `None` lets routing choose. `on_blocked`: told
/// when a re-creation step is blocked in the kernel (the call itself returns only once the
/// step has returned and the re-creation is finished: the executor thread waits with it).
pub fn execute(
    ex: &Executors,
    action: &Action,
    lock_dir: Option<&std::path::Path>,
    probe_from: Option<std::net::IpAddr>,
    on_blocked: OnBlocked<'_>,
) -> Option<Executed> {
    let done = |outcome, summary: String| {
        Some(Executed {
            outcome,
            summary: format!("{action}: {summary}"),
            method: None,
        })
    };
    let with_method = |executed: Option<Executed>, method: Option<&'static str>| {
        executed.map(|e| Executed { method, ..e })
    };
    match &action.kind {
        ActionKind::ProbePortal { portal, timeout } => {
            let addr = portal.socket_addr();
            let source = ProbeSource {
                local_ip: probe_from.filter(|ip| ip.is_ipv4() == addr.is_ipv4()),
                device: None,
            };
            let (verdict, summary) = ex.probes.probe(addr, &source, *timeout);
            done(Outcome::Probe(verdict), summary)
        }
        ActionKind::RecreateDevice {
            device,
            parent,
            remembered,
            ..
        } => {
            let purpose = format!("iser-guard: re-creating {device}");
            let _lock = match lock_dir.map(|d| RecoveryLock::try_acquire(d, &purpose)) {
                None => None,
                Some(Ok(l)) => Some(l),
                Some(Err(e)) => {
                    return done(
                        Outcome::Recreate(RecreateResult::Failed {
                            reason: e.to_string(),
                        }),
                        format!("not run: {e}"),
                    )
                }
            };
            let remembered = remembered
                .clone()
                .or_else(|| parent_recipe(parent.as_deref()));
            let result = ex
                .resetter
                .recreate_watched(device, remembered.as_ref(), on_blocked);
            let method = reset_method(&result);
            let executed = match result {
                Ok(ResetOutcome::Recreated(r)) => {
                    let result = RecreateResult::Recreated {
                        name: r.new_name.clone(),
                        mode_restored: r.mode_restored.clone(),
                        method: Some(r.method.to_string()),
                        failed_before: r.failed_before.iter().map(|f| f.in_words()).collect(),
                    };
                    // What failed first is part of what happened: the operator confirmed
                    // a plan whose first method is not the one that worked.
                    let failed = match &result {
                        RecreateResult::Recreated { failed_before, .. }
                            if !failed_before.is_empty() =>
                        {
                            format!(", after {}", MethodFailure::words(failed_before))
                        }
                        _ => String::new(),
                    };
                    let summary = if r.brought_back {
                        format!(
                            "{device} was gone: brought back by `{}` in {} ms{failed}; the \
                             device is {} again",
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
                    done(Outcome::Recreate(result), summary)
                }
                // Asked to run, the resetter only planned: nothing happened to the device.
                // Not a failed re-creation (dry-run is the driver's, decided before this).
                Ok(ResetOutcome::DryRun(plan)) => done(
                    Outcome::NotRun {
                        reason: format!(
                            "the resetter returned a plan ({} method(s)) instead of running",
                            plan.methods.len()
                        ),
                    },
                    "not run: the resetter only planned".into(),
                ),
                Err(e) if e.is_unsupported() => done(
                    Outcome::Recreate(RecreateResult::Unsupported {
                        reason: e.to_string(),
                    }),
                    e.to_string(),
                ),
                Err(e) => done(
                    Outcome::Recreate(RecreateResult::Failed {
                        reason: e.to_string(),
                    }),
                    e.to_string(),
                ),
            };
            with_method(executed, method)
        }
        ActionKind::IscsiLogin { node, .. } => {
            let id = node_id(node);
            let mut result = ex.iscsi.login(&id);
            if let Err(e) = &result {
                if e.is_no_record() {
                    tracing::warn!(node = %node.key, "no node record: restoring it with -o new, then logging in");
                    result = match ex.iscsi.create_node(&id) {
                        Ok(_) => ex.iscsi.login(&id),
                        Err(e) => Err(e),
                    };
                }
            }
            match result {
                Ok(LoginOutcome::LoggedIn) => done(
                    Outcome::Iscsiadm(IscsiadmStatus::Success),
                    "logged in".into(),
                ),
                Ok(LoginOutcome::AlreadyLoggedIn) => done(
                    Outcome::Iscsiadm(IscsiadmStatus::AlreadyLoggedIn),
                    "already logged in".into(),
                ),
                Err(e) => done(Outcome::Iscsiadm(iscsiadm_status(&e)), e.to_string()),
            }
        }
        ActionKind::IscsiLogout { node, .. } => match ex.iscsi.logout(&node_id(node)) {
            Ok(LogoutOutcome::LoggedOut) => done(
                Outcome::Iscsiadm(IscsiadmStatus::Success),
                "logged out".into(),
            ),
            Ok(LogoutOutcome::NotLoggedIn) => done(
                Outcome::Iscsiadm(IscsiadmStatus::NotFound),
                "was not logged in".into(),
            ),
            Err(e) => done(Outcome::Iscsiadm(iscsiadm_status(&e)), e.to_string()),
        },
        ActionKind::IscsiRescan { sid, .. } => match ex.iscsi.rescan(*sid) {
            Ok(()) => done(
                Outcome::Iscsiadm(IscsiadmStatus::Success),
                "rescanned".into(),
            ),
            Err(e) => done(Outcome::Iscsiadm(iscsiadm_status(&e)), e.to_string()),
        },
        ActionKind::SelfTestPort {
            device,
            port,
            timeout,
        } => {
            // Blocks up to `timeout` (verbs calls, a CM connect): this runs on a worker,
            // never on the loop thread.
            let result = ex.selftest.run(device, *port, *timeout);
            let summary = match &result {
                SelfTestResult::Ran(r) => r.summary(),
                SelfTestResult::Unavailable { reason } => format!("unavailable: {reason}"),
            };
            done(Outcome::SelfTest(result), summary)
        }
        ActionKind::RefreshSessions
        | ActionKind::RefreshTopology
        | ActionKind::Alert(_)
        | ActionKind::PersistState { .. } => None,
    }
}

/// The re-creation method a resetter's answer names: the one that worked, or the one that
/// failed after changing something.
fn reset_method(r: &Result<ResetOutcome, crate::io::reset::ResetError>) -> Option<&'static str> {
    use crate::io::reset::ResetError as E;
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

/// The syslog form of an engine alert, with the configured severities.
pub fn syslog_alert(
    a: &crate::core::recovery::Alert,
    cfg: &crate::config::Alerts,
) -> crate::io::syslog::Alert {
    let severity = cfg.syslog_severity(a.severity);
    let what = if a.count > 1 {
        format!("{} ({} times)", a.summary, a.count)
    } else {
        a.summary.clone()
    };
    crate::io::syslog::Alert {
        severity,
        what,
        why: a.detail.clone(),
        todo: a
            .remedy
            .as_ref()
            .map(|r| format!("run `{r}`"))
            .unwrap_or_default(),
    }
}
