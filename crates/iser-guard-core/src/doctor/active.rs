//! `iser-guard doctor --active DEVICE`, as data: what the run will do ([`ActivePlan`]), what
//! each step did ([`ActiveReport`]), and the rules that judge it. The shell runs the steps
//! (the self-test, then one timed re-creation per method with the sessions logged in and a
//! direct-I/O read running) through the executors' traits and fills these in; whether a
//! method passed, and where the run must stop, is decided here.

use serde::Serialize;

use crate::reset_plan::ResetMethod;
use crate::selftest::SelfTestResult;

/// One iSCSI session the run watches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WatchedSession {
    /// Session id when the run started.
    pub sid: u32,
    /// Target IQN.
    pub target: String,
    /// Portal `ADDRESS:PORT`.
    pub portal: String,
    /// iface name.
    pub iface: String,
    /// The disk read with direct I/O during each re-creation (`sdb`), if it has one.
    pub disk: Option<String>,
}

/// What the run will do, for the operator to confirm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActivePlan {
    /// The device.
    pub device: String,
    /// Its ports.
    pub ports: Vec<u32>,
    /// The re-creation methods, in the order they will run, each on its own.
    pub methods: Vec<ResetMethod>,
    /// Methods the host does not offer, with why.
    pub skipped: Vec<String>,
    /// The sessions on the device.
    pub sessions: Vec<WatchedSession>,
    /// How long a session has to come back after a re-creation before the run logs it in
    /// itself, seconds.
    pub iscsid_grace_s: f64,
    /// How long a step may take before it counts as hung, seconds.
    pub step_timeout_s: f64,
}

impl ActivePlan {
    /// The plan in operator words, one line each.
    pub fn lines(&self) -> Vec<String> {
        let ports: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("{}/{p}", self.device))
            .collect();
        let mut out = vec![format!(
            "run the port self-test on {} (a new RDMA connection through rdma_cm, QPs walked \
             through every state)",
            ports.join(", ")
        )];
        let with = if self.sessions.is_empty() {
            "with no iSCSI session on it (none is placed on this device)".to_string()
        } else {
            format!(
                "with {} logged in and a direct-I/O read running on {}",
                self.sessions
                    .iter()
                    .map(|s| format!("session {} ({} at {})", s.sid, s.target, s.portal))
                    .collect::<Vec<_>>()
                    .join(", "),
                {
                    let disks: Vec<&str> = self
                        .sessions
                        .iter()
                        .filter_map(|s| s.disk.as_deref())
                        .collect();
                    if disks.is_empty() {
                        "no disk (the sessions have none)".to_string()
                    } else {
                        disks.join(", ")
                    }
                }
            )
        };
        for (i, m) in self.methods.iter().enumerate() {
            out.push(format!(
                "re-create {} ({} of {}) by this method alone: {m}: `{}`, then `{}`, {with}; \
                 time each step, keep the kernel's lines, read QP 1 of the new device, wait up \
                 to {} s for the sessions (then log them in), self-test the port again",
                self.device,
                i + 1,
                self.methods.len(),
                m.down_command(),
                m.up_command(),
                self.iscsid_grace_s
            ));
        }
        for s in &self.skipped {
            out.push(format!("not tried: {s}"));
        }
        out.push(format!(
            "stop at the first step that fails, or that takes more than {} s (hung)",
            self.step_timeout_s
        ));
        out
    }
}

/// One timed step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepRecord {
    /// What ran (`selftest rxe_ini/1`, `re-create: rdma link delete/add`, `sessions back`).
    pub name: String,
    /// How long it took, milliseconds.
    pub took_ms: u64,
    /// It did what it should.
    pub ok: bool,
    /// What happened.
    pub detail: String,
}

/// A session after a re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionBack {
    /// Target IQN.
    pub target: String,
    /// Portal.
    pub portal: String,
    /// Logged in again (by iscsid, or by the run's own login).
    pub back: bool,
    /// After how long, milliseconds from the end of the re-creation.
    pub after_ms: Option<u64>,
    /// `iscsid` or `iscsiadm login` (the run's, after the grace).
    pub by: Option<String>,
    /// Its session id afterwards.
    pub sid: Option<u32>,
}

/// The direct-I/O reads made while one re-creation ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IoRecord {
    /// The disks read.
    pub disks: Vec<String>,
    /// Reads that completed.
    pub ok: u64,
    /// Reads that failed (the first error is kept).
    pub failed: u64,
    /// The first error.
    pub first_error: Option<String>,
    /// The longest time without a completed read, milliseconds (the stall the re-creation
    /// caused).
    pub longest_stall_ms: u64,
    /// The last read, once everything was back, worked.
    pub ok_at_end: bool,
}

/// How one method's run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum MethodOutcome {
    /// The device came back, QP 1 in RTS, the sessions and their I/O back.
    Passed,
    /// A step failed.
    Failed {
        /// Which, and why.
        why: String,
    },
    /// A step did not finish within its time: the run stopped there (the step may still be
    /// blocked in the kernel).
    Hung {
        /// Which step.
        step: String,
        /// How long it had been running, milliseconds.
        after_ms: u64,
    },
}

/// One re-creation by one method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodRun {
    /// The method.
    pub method: ResetMethod,
    /// Its steps, timed, in order.
    pub steps: Vec<StepRecord>,
    /// The kernel's log lines printed while it ran (`[seconds] text`).
    pub kernel_lines: Vec<String>,
    /// QP 1's state on each port of the new device (`None`: not in the QP table).
    pub gsi_after: Vec<(u32, Option<String>)>,
    /// The sessions afterwards.
    pub sessions: Vec<SessionBack>,
    /// The direct-I/O reads.
    pub io: IoRecord,
    /// The self-test of each port afterwards.
    pub selftest_after: Vec<SelfTestResult>,
    /// How it ended.
    pub outcome: MethodOutcome,
}

/// Judges a method's record: the first thing that is not as it should be, or `Passed`.
/// A hang is decided by the runner (it is the one that stopped waiting).
pub fn judge(run: &MethodRun) -> MethodOutcome {
    if let Some(s) = run.steps.iter().find(|s| !s.ok) {
        return MethodOutcome::Failed {
            why: format!("{}: {}", s.name, s.detail),
        };
    }
    let not_rts: Vec<String> = run
        .gsi_after
        .iter()
        .filter(|(_, st)| st.as_deref() != Some("RTS"))
        .map(|(p, st)| format!("port {p}: {}", st.as_deref().unwrap_or("no QP 1")))
        .collect();
    if run.gsi_after.is_empty() || !not_rts.is_empty() {
        return MethodOutcome::Failed {
            why: format!(
                "QP 1 of the new device is not in RTS ({})",
                if not_rts.is_empty() {
                    "no port listed".to_string()
                } else {
                    not_rts.join(", ")
                }
            ),
        };
    }
    let missing: Vec<String> = run
        .sessions
        .iter()
        .filter(|s| !s.back)
        .map(|s| format!("{} at {}", s.target, s.portal))
        .collect();
    if !missing.is_empty() {
        return MethodOutcome::Failed {
            why: format!("sessions not back: {}", missing.join(", ")),
        };
    }
    if !run.io.disks.is_empty() && !run.io.ok_at_end {
        return MethodOutcome::Failed {
            why: format!(
                "direct-I/O reads of {} do not work after the re-creation{}",
                run.io.disks.join(", "),
                run.io
                    .first_error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ),
        };
    }
    if let Some(r) = run.selftest_after.iter().find_map(|r| match r {
        SelfTestResult::Ran(rep) if !rep.passed() => Some(rep),
        _ => None,
    }) {
        return MethodOutcome::Failed {
            why: format!(
                "self-test of {}/{} after the re-creation: {}",
                r.device,
                r.port,
                r.summary()
            ),
        };
    }
    MethodOutcome::Passed
}

/// The whole `--active` run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActiveReport {
    /// What was planned.
    pub plan: ActivePlan,
    /// When it started (UTC, as the shell's clock said).
    pub started: String,
    /// The self-test of each port before any re-creation.
    pub selftest: Vec<SelfTestResult>,
    /// Each method's run, in order; the run stops after the first that did not pass.
    pub methods: Vec<MethodRun>,
    /// Why it stopped before the end, if it did.
    pub stopped: Option<String>,
}

impl ActiveReport {
    /// Every step passed: the self-test and every method.
    pub fn passed(&self) -> bool {
        self.stopped.is_none()
            && !self.methods.is_empty()
            && self
                .methods
                .iter()
                .all(|m| m.outcome == MethodOutcome::Passed)
            && self.selftest.iter().all(|r| match r {
                SelfTestResult::Ran(rep) => rep.passed(),
                SelfTestResult::Unavailable { .. } => true,
            })
    }

    /// The self-test before the re-creations failed on a port: the run must stop there
    /// (a port that cannot make a new connection now proves nothing after a re-creation).
    pub fn selftest_failure(&self) -> Option<String> {
        self.selftest.iter().find_map(|r| match r {
            SelfTestResult::Ran(rep) if !rep.passed() => Some(format!(
                "the self-test of {}/{} failed before any re-creation: {}",
                rep.device,
                rep.port,
                rep.summary()
            )),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reset_plan::SoftType;
    use crate::selftest::{SelfTestReport, SelfTestStep};
    use std::time::Duration;

    fn method() -> ResetMethod {
        ResetMethod::RdmaLinkReadd {
            name: "rxe_ini".into(),
            kind: SoftType::Rxe,
            netdev: "ini0".into(),
        }
    }

    fn passing() -> MethodRun {
        MethodRun {
            method: method(),
            steps: vec![StepRecord {
                name: "re-create".into(),
                took_ms: 120,
                ok: true,
                detail: "back as rxe_ini".into(),
            }],
            kernel_lines: vec![],
            gsi_after: vec![(1, Some("RTS".into()))],
            sessions: vec![SessionBack {
                target: "iqn.t".into(),
                portal: "192.0.2.2:3260".into(),
                back: true,
                after_ms: Some(2400),
                by: Some("iscsid".into()),
                sid: Some(2),
            }],
            io: IoRecord {
                disks: vec!["sdb".into()],
                ok: 10,
                failed: 1,
                first_error: Some("EIO".into()),
                longest_stall_ms: 2600,
                ok_at_end: true,
            },
            selftest_after: vec![],
            outcome: MethodOutcome::Passed,
        }
    }

    #[test]
    fn a_method_passes_only_when_everything_is_back() {
        assert_eq!(judge(&passing()), MethodOutcome::Passed);
        let mut r = passing();
        r.gsi_after = vec![(1, Some("ERR".into()))];
        assert!(matches!(judge(&r), MethodOutcome::Failed { why } if why.contains("port 1: ERR")));
        let mut r = passing();
        r.gsi_after.clear();
        assert!(matches!(judge(&r), MethodOutcome::Failed { .. }));
        let mut r = passing();
        r.sessions[0].back = false;
        assert!(matches!(judge(&r), MethodOutcome::Failed { why } if why.contains("iqn.t")));
        let mut r = passing();
        r.io.ok_at_end = false;
        assert!(matches!(judge(&r), MethodOutcome::Failed { why } if why.contains("sdb")));
        let mut r = passing();
        r.steps[0].ok = false;
        assert!(matches!(judge(&r), MethodOutcome::Failed { why } if why.starts_with("re-create")));
        let mut r = passing();
        r.selftest_after = vec![SelfTestResult::Ran(SelfTestReport {
            device: "rxe_ini".into(),
            port: 1,
            steps: vec![SelfTestStep {
                name: "cm-connect".into(),
                took: Duration::from_millis(5),
                ok: false,
                detail: "REJECTED".into(),
            }],
        })];
        assert!(matches!(judge(&r), MethodOutcome::Failed { why } if why.contains("self-test")));
    }

    #[test]
    fn the_plan_says_every_method_and_the_stop_rule() {
        let p = ActivePlan {
            device: "rxe_ini".into(),
            ports: vec![1],
            methods: vec![method()],
            skipped: vec!["module reload: not used for software rxe devices".into()],
            sessions: vec![WatchedSession {
                sid: 1,
                target: "iqn.t".into(),
                portal: "192.0.2.2:3260".into(),
                iface: "iser".into(),
                disk: Some("sdb".into()),
            }],
            iscsid_grace_s: 20.0,
            step_timeout_s: 90.0,
        };
        let l = p.lines();
        assert!(l[0].contains("rxe_ini/1"));
        assert!(
            l[1].contains("rdma link delete rxe_ini") && l[1].contains("sdb"),
            "{l:?}"
        );
        assert!(l[2].starts_with("not tried:"));
        assert!(l[3].contains("90 s"));
    }

    #[test]
    fn a_report_passes_only_with_every_method_passed() {
        let plan = ActivePlan {
            device: "rxe_ini".into(),
            ports: vec![1],
            methods: vec![method()],
            skipped: vec![],
            sessions: vec![],
            iscsid_grace_s: 20.0,
            step_timeout_s: 90.0,
        };
        let mut r = ActiveReport {
            plan,
            started: "2026-12-03 10:00:00Z".into(),
            selftest: vec![SelfTestResult::Unavailable {
                reason: "built without verbs".into(),
            }],
            methods: vec![passing()],
            stopped: None,
        };
        assert!(r.passed());
        assert_eq!(r.selftest_failure(), None);
        r.methods[0].outcome = MethodOutcome::Hung {
            step: "re-create".into(),
            after_ms: 90_000,
        };
        assert!(!r.passed());
        r.methods.clear();
        assert!(!r.passed());
    }
}
