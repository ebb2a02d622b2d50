//! The open-iscsi settings that fight a recovery, judged per node record (what iscsid uses
//! for its session) and for iscsid.conf (the defaults of records made later):
//!
//! - `node.session.timeo.replacement_timeout`: 0 fails I/O at the first connection error;
//!   shorter than the least time iser-guard needs once the target is back, it fails I/O for
//!   every outage that needs a re-creation;
//! - `node.conn[0].timeo.login_timeout` against `recovery.iscsid-grace`: an iscsid login
//!   attempt pending when the device is re-created lasts its whole login timer (docs/lab.md:
//!   ib_iser leaves a connecting endpoint pending), so a timer as long as the grace makes
//!   iser-guard log the session out and in while iscsid is still at it;
//! - the NOP-Out timers: 0 turns them off, and a dead connection (the zombie session that
//!   stays LOGGED_IN) is then noticed only when I/O times out;
//! - `node.startup`: `onboot` marks a boot (root) session, which a logout would take away
//!   from under the system; `manual` sessions are not logged in again after a reboot;
//! - `node.session.reopen_max`: non-zero makes iscsid give up re-opening, leaving the
//!   session to iser-guard's login.
//!
//! Values missing from a record are open-iscsi's defaults (its etc/iscsid.conf).

use super::parse::IscsiSettings;
use super::{Check, CheckKind, CheckVerdict, ConfigFacts, Facts};

const REPLACEMENT: &str = "node.session.timeo.replacement_timeout";
const LOGIN: &str = "node.conn[0].timeo.login_timeout";
const NOOP_INTERVAL: &str = "node.conn[0].timeo.noop_out_interval";
const NOOP_TIMEOUT: &str = "node.conn[0].timeo.noop_out_timeout";
const STARTUP: &str = "node.startup";
const REOPEN_MAX: &str = "node.session.reopen_max";

/// open-iscsi's defaults for the keys judged here.
fn default_of(key: &str) -> &'static str {
    match key {
        REPLACEMENT => "120",
        LOGIN => "15",
        NOOP_INTERVAL | NOOP_TIMEOUT => "5",
        STARTUP => "manual",
        REOPEN_MAX => "0",
        _ => "",
    }
}

/// The value of `key` and whether it was written in the file.
fn value<'a>(s: &'a IscsiSettings, key: &str) -> (&'a str, bool) {
    match s.get(key) {
        Some(v) => (v, true),
        None => (default_of(key), false),
    }
}

/// One judged setting.
struct Finding {
    verdict: CheckVerdict,
    line: String,
    action: Option<String>,
}

fn shown(key: &str, v: &str, written: bool) -> String {
    if written {
        format!("{key} = {v}")
    } else {
        format!("{key} = {v} (open-iscsi's default)")
    }
}

fn int(v: &str) -> Option<i64> {
    v.trim().parse().ok()
}

/// Judges one set of settings. `live`: they are a session's (a node record with a session).
fn judge(s: &IscsiSettings, cfg: &ConfigFacts, live: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let ok = |line: String| Finding {
        verdict: CheckVerdict::Ok,
        line,
        action: None,
    };

    let (v, w) = value(s, REPLACEMENT);
    let least = cfg.target_back_s + cfg.iscsid_grace_s;
    out.push(match int(v) {
        Some(0) => Finding {
            verdict: CheckVerdict::Warning,
            line: format!(
                "{}: I/O fails at the first connection error",
                shown(REPLACEMENT, v, w)
            ),
            action: Some(format!(
                "set {REPLACEMENT} above {least:.0} s (120 is open-iscsi's default) unless \
                 dm-multipath fails the path over"
            )),
        },
        Some(t) if t < 0 => ok(format!(
            "{}: I/O waits for the session however long it takes",
            shown(REPLACEMENT, v, w)
        )),
        // An i64 of seconds against a few hundred: the cast is exact for every value that
        // could compare below.
        #[allow(clippy::cast_precision_loss)]
        Some(t) if (t as f64) < least => Finding {
            verdict: CheckVerdict::Warning,
            line: format!(
                "{}: shorter than the {least:.0} s iser-guard needs at least once the target is \
                 back (recovery.probe-successes × poll.probe + recovery.iscsid-grace)",
                shown(REPLACEMENT, v, w)
            ),
            action: Some(format!(
                "applications get I/O errors in every outage that needs a re-creation: raise \
                 {REPLACEMENT} above {least:.0} s, unless dm-multipath fails the path over"
            )),
        },
        Some(_) => ok(shown(REPLACEMENT, v, w)),
        None => Finding {
            verdict: CheckVerdict::Unknown,
            line: format!("{}: not a number", shown(REPLACEMENT, v, w)),
            action: None,
        },
    });

    let (v, w) = value(s, LOGIN);
    out.push(match int(v) {
        #[allow(clippy::cast_precision_loss)]
        Some(t) if (t as f64) >= cfg.iscsid_grace_s => Finding {
            verdict: CheckVerdict::Warning,
            line: format!(
                "{}: not shorter than recovery.iscsid-grace ({} s)",
                shown(LOGIN, v, w),
                cfg.iscsid_grace_s
            ),
            action: Some(format!(
                "an iscsid login pending at the re-creation lasts its whole timer, so iser-guard \
                 would log the session out and in while iscsid is still trying: set \
                 recovery.iscsid-grace to at least {} s, or shorten {LOGIN}",
                t + 5
            )),
        },
        Some(_) => ok(format!(
            "{} (< recovery.iscsid-grace {} s)",
            shown(LOGIN, v, w),
            cfg.iscsid_grace_s
        )),
        None => Finding {
            verdict: CheckVerdict::Unknown,
            line: format!("{}: not a number", shown(LOGIN, v, w)),
            action: None,
        },
    });

    for key in [NOOP_INTERVAL, NOOP_TIMEOUT] {
        let (v, w) = value(s, key);
        out.push(match int(v) {
            Some(0) => Finding {
                verdict: CheckVerdict::Warning,
                line: format!("{}: NOP-Outs are off", shown(key, v, w)),
                action: Some(format!(
                    "a dead connection (a session that stays LOGGED_IN while every I/O fails) \
                     is noticed only when I/O times out: set {key} to 5 (open-iscsi's default)"
                )),
            },
            Some(_) => ok(shown(key, v, w)),
            None => Finding {
                verdict: CheckVerdict::Unknown,
                line: format!("{}: not a number", shown(key, v, w)),
                action: None,
            },
        });
    }

    let (v, w) = value(s, STARTUP);
    out.push(match v {
        "onboot" => Finding {
            verdict: CheckVerdict::Warning,
            line: format!("{}: a boot (root) session", shown(STARTUP, v, w)),
            action: Some(
                "logging a boot session out takes its disks away from under the system: keep \
                 this port out of devices.allow, or make sure the root file system is not on it"
                    .into(),
            ),
        },
        "manual" if live => Finding {
            verdict: CheckVerdict::Warning,
            line: format!(
                "{}: not logged in again after a reboot",
                shown(STARTUP, v, w)
            ),
            action: Some(format!(
                "`iscsiadm -m node -T TARGET -p PORTAL -o update -n {STARTUP} -v automatic` \
                 (iser-guard logs it back in after a recovery either way)"
            )),
        },
        _ => ok(shown(STARTUP, v, w)),
    });

    let (v, w) = value(s, REOPEN_MAX);
    out.push(match int(v) {
        Some(0) | None => ok(shown(REOPEN_MAX, v, w)),
        Some(_) => Finding {
            verdict: CheckVerdict::Warning,
            line: format!(
                "{}: iscsid gives up re-opening the session",
                shown(REOPEN_MAX, v, w)
            ),
            action: Some(format!(
                "after that many attempts only iser-guard's login brings the session back: set \
                 {REOPEN_MAX} to 0 (retry for ever, open-iscsi's default)"
            )),
        },
    });
    out
}

fn push_judged(out: &mut Vec<Check>, subject: String, what: &str, findings: Vec<Finding>) {
    let verdict = findings
        .iter()
        .map(|f| f.verdict)
        .max()
        .unwrap_or(CheckVerdict::Ok);
    let bad: Vec<&str> = findings
        .iter()
        .filter(|f| f.verdict > CheckVerdict::Ok)
        .map(|f| f.line.split(':').next().unwrap_or(""))
        .map(|l| l.split(" = ").next().unwrap_or(l))
        .collect();
    let actions: Vec<String> = findings.iter().filter_map(|f| f.action.clone()).collect();
    let mut c = Check::new(
        CheckKind::OpenIscsi,
        subject,
        verdict,
        if bad.is_empty() {
            format!("{what}: nothing fights a recovery")
        } else {
            format!(
                "{what}: {} {}",
                bad.join(", "),
                if bad.len() == 1 {
                    "needs attention"
                } else {
                    "need attention"
                }
            )
        },
    )
    .evidence_all(findings.into_iter().map(|f| f.line));
    if !actions.is_empty() {
        c = c.action(actions.join("; "));
    }
    out.push(c);
}

pub(super) fn settings(f: &Facts, out: &mut Vec<Check>) {
    let sessions = f.iscsi.sessions.as_ref().ok();
    let mut judged_any = false;
    match &f.iscsi.nodes {
        Ok(nodes) => {
            for n in nodes {
                let live = sessions.is_some_and(|s| {
                    s.iter()
                        .any(|s| s.target == n.target && s.portal == n.portal)
                });
                let subject = format!("{} {} {}", n.target, n.portal, n.iface);
                match &n.settings {
                    Ok(s) => {
                        let iser =
                            s.get("iface.transport_name") == Some("iser") || n.iface == "iser";
                        if !(live || iser) {
                            continue;
                        }
                        judged_any = true;
                        push_judged(
                            out,
                            subject,
                            if live {
                                "node record of a session"
                            } else {
                                "node record"
                            },
                            judge(s, &f.config, live),
                        );
                    }
                    Err(why) => {
                        judged_any = true;
                        out.push(
                            Check::new(
                                CheckKind::OpenIscsi,
                                subject,
                                CheckVerdict::Unknown,
                                "the node record could not be read",
                            )
                            .evidence(why.clone())
                            .action("run doctor as root (node records are readable by root only)"),
                        );
                    }
                }
            }
        }
        Err(why) => out.push(
            Check::new(
                CheckKind::OpenIscsi,
                "node records",
                CheckVerdict::Unknown,
                "the node records could not be listed",
            )
            .evidence(why.clone())
            .action("run doctor as root"),
        ),
    }
    match &f.iscsi.iscsid_conf {
        Ok(Some(s)) => {
            push_judged(
                out,
                "iscsid.conf".into(),
                "defaults for new node records",
                judge(s, &f.config, false),
            );
        }
        Ok(None) if !judged_any => out.push(
            Check::new(
                CheckKind::OpenIscsi,
                "iscsid.conf",
                CheckVerdict::Warning,
                format!(
                    "open-iscsi is not set up here ({}/iscsid.conf does not exist)",
                    f.paths.iscsi
                ),
            )
            .action("install open-iscsi (the package iser-guard depends on)"),
        ),
        Ok(None) => {}
        Err(why) => out.push(
            Check::new(
                CheckKind::OpenIscsi,
                "iscsid.conf",
                CheckVerdict::Unknown,
                "iscsid.conf could not be read",
            )
            .evidence(why.clone())
            .action("run doctor as root"),
        ),
    }
}
