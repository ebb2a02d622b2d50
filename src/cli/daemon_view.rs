//! The engine's view in `iser-guard status`: the running daemon's
//! [`DaemonSnapshot`], asked for on its control socket, rendered next to the kernel's view.
//! No daemon (socket absent or refused) is a plain statement, never a failure of `status`;
//! an answer that cannot be read (too long, not the protocol, a newer format) says so the
//! same way.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::term::{Colour, Style};
use super::when::duration_ms;
use crate::core::observe::{DaemonSnapshot, PortView, SourceState, Stamp, SNAPSHOT_FORMAT};
use crate::core::recovery::Phase;
use crate::io::control::{request, ControlError, Reply, Request};

/// How long `status` waits for the daemon.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// What the daemon said, or why it said nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum DaemonSide {
    /// A daemon answered with its state.
    Running {
        /// Its state.
        snapshot: Box<DaemonSnapshot>,
    },
    /// No daemon listens on the socket.
    NotRunning {
        /// The socket.
        socket: String,
    },
    /// Something answered, or refused us, and its state cannot be shown.
    Unreadable {
        /// The socket.
        socket: String,
        /// Why.
        why: String,
    },
}

/// Asks the daemon listening on `socket` for its state.
pub fn query(socket: &Path) -> DaemonSide {
    from_reply(
        request(socket, &Request::Status, STATUS_TIMEOUT, |_| {}),
        socket,
    )
}

/// The daemon side of `status` from the control socket's answer.
pub fn from_reply(reply: Result<Reply, ControlError>, socket: &Path) -> DaemonSide {
    let socket_s = socket.display().to_string();
    let unreadable = |why: String| DaemonSide::Unreadable {
        socket: socket_s.clone(),
        why,
    };
    match reply {
        Err(ControlError::NotRunning { .. }) => DaemonSide::NotRunning {
            socket: socket_s.clone(),
        },
        Err(e) => unreadable(e.to_string()),
        Ok(Reply::Done {
            detail: Some(detail),
            ..
        }) => {
            let format = detail.get("format").and_then(serde_json::Value::as_u64);
            match format {
                Some(f) if f > u64::from(SNAPSHOT_FORMAT) => unreadable(format!(
                    "the daemon's state has format {f}, newer than this iser-guard reads (up \
                     to {SNAPSHOT_FORMAT}): it runs a newer release"
                )),
                None => unreadable(
                    "the daemon answered without a typed state (an older release): restart \
                     it on this release"
                        .into(),
                ),
                Some(_) => match serde_json::from_value::<DaemonSnapshot>(detail) {
                    Ok(s) => DaemonSide::Running {
                        snapshot: Box::new(s),
                    },
                    Err(e) => unreadable(format!("the daemon's state cannot be read: {e}")),
                },
            }
        }
        Ok(Reply::Done { message, .. }) => {
            unreadable(format!("the daemon answered without its state: {message}"))
        }
        Ok(Reply::Progress { message }) => unreadable(format!(
            "the daemon answered with a progress line instead of its state: {message}"
        )),
        Ok(Reply::Event { .. }) => {
            unreadable("the daemon answered with an event instead of its state".into())
        }
    }
}

fn ago(now: Stamp, then: Stamp) -> String {
    duration_ms(now.mono.0.saturating_sub(then.mono.0))
}

fn until(now: Stamp, then: Stamp) -> String {
    if then.mono <= now.mono {
        "now".to_string()
    } else {
        format!("in {}", duration_ms(then.mono.0 - now.mono.0))
    }
}

/// The colour of a phase.
pub fn phase_colour(p: Phase) -> Colour {
    match p {
        Phase::Healthy => Colour::Green,
        Phase::Quarantined | Phase::RecreationBlocked => Colour::Red,
        _ => Colour::Yellow,
    }
}

/// Columns padded by their plain width, then painted (escape codes never shift them).
fn table(rows: &[Vec<(String, Option<Colour>)>], style: Style) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; n];
    for r in rows {
        for (w, (c, _)) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, (text, colour)) in r.iter().enumerate() {
            let pad = if i + 1 == r.len() {
                0
            } else {
                widths[i] - text.chars().count() + 2
            };
            match colour {
                Some(c) => line.push_str(&style.paint(*c, text)),
                None => line.push_str(text),
            }
            line.push_str(&" ".repeat(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn port_details(out: &mut String, p: &PortView, now: Stamp, style: Style) {
    let _ = writeln!(out, "    why: {}", p.why);
    if let Some(f) = &p.fault {
        let since = p
            .fault_since
            .map(|s| format!(" (since {} ago)", ago(now, s)))
            .unwrap_or_default();
        let _ = writeln!(out, "    fault: {f}{since}");
    }
    if let Some(d) = &p.deadline {
        let _ = writeln!(out, "    gives up {}: {}", until(now, d.at), d.what);
    }
    for h in &p.holds {
        // On a healthy port, daemon-wide conditions are only what would stop an action.
        if p.phase == Phase::Healthy && !h.active && h.kind != "not-allowed" {
            continue;
        }
        let word = if h.active { "held" } else { "would be held" };
        let _ = writeln!(
            out,
            "    {}: {}: {}",
            style.paint(Colour::Yellow, word),
            h.kind,
            h.why
        );
    }
    for n in &p.notes {
        let _ = writeln!(out, "    note: {n}");
    }
    for f in &p.in_flight {
        let _ = writeln!(out, "    in flight: {f}");
    }
    if let Some(t) = &p.last_selftest {
        let colour = match t.result.as_str() {
            "passed" => Colour::Green,
            "failed" => Colour::Red,
            _ => Colour::Yellow,
        };
        let _ = writeln!(
            out,
            "    last self-test {} ago: {} ({} step(s), {}): {}",
            ago(now, t.at),
            style.paint(colour, &t.result),
            t.steps,
            duration_ms(t.took_ms),
            t.summary
        );
    }
    for s in &p.sessions {
        let sid = s.sid.map(|n| format!(" sid {n}")).unwrap_or_default();
        let disks = if s.disks.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.disks.join(", "))
        };
        let state = if s.present {
            s.state.clone()
        } else {
            format!("{} when last listed, not listed now", s.state)
        };
        let state = style.paint(
            if s.healthy {
                Colour::Green
            } else {
                Colour::Yellow
            },
            &state,
        );
        let _ = writeln!(
            out,
            "    session {} {} iface {}{sid}: {state}{disks}",
            s.target, s.portal, s.iface
        );
        if let Some(by) = &s.placed_by {
            let _ = writeln!(out, "      placed by {by}");
        }
        if let Some(r) = &s.reconnect {
            let _ = writeln!(out, "      reconnect: {r}");
        }
    }
    for pt in &p.portals {
        let _ = writeln!(
            out,
            "    portal {}: {} probe(s) ok in a row{}",
            pt.portal,
            pt.consecutive_ok,
            if pt.probing { ", probing" } else { "" }
        );
        if let Some(pr) = &pt.probe {
            let _ = writeln!(out, "      probed by {}: {}", pr.method, pr.why);
        }
    }
}

/// The engine's view, in text.
pub fn render(side: &DaemonSide, style: Style) -> String {
    let mut out = String::new();
    let s = match side {
        DaemonSide::NotRunning { socket } => {
            let _ = writeln!(
                out,
                "Daemon: not running (nothing listens on {socket}); the view above is the \
                 kernel's only"
            );
            return out;
        }
        DaemonSide::Unreadable { socket, why } => {
            let _ = writeln!(
                out,
                "Daemon: its state could not be read on {socket}: {why}; the view above is \
                 the kernel's only"
            );
            return out;
        }
        DaemonSide::Running { snapshot } => snapshot,
    };
    let d = &s.daemon;
    let now = d.now;
    let _ = writeln!(
        out,
        "Daemon (engine view): iser-guard {}, pid {}, up {}{}",
        d.version,
        d.pid,
        duration_ms(d.uptime_ms),
        if d.scan_complete {
            ""
        } else {
            ", first scan not complete yet"
        }
    );
    let mut modes = Vec::new();
    if d.paused {
        modes.push(style.paint(Colour::Yellow, "PAUSED (iser-guard resume)"));
    }
    if d.dry_run {
        modes.push(style.paint(Colour::Yellow, "DRY-RUN (decides, changes nothing)"));
    }
    // Safe mode is a mode only while it holds actions; after the first complete scan the
    // daemon runs as usual, and the kept journal is a note.
    let mut journal_note = None;
    if let Some(m) = &d.safe_mode {
        let kept = m
            .journal_kept
            .as_deref()
            .map(|k| format!("kept as {k}"))
            .or_else(|| {
                m.keep_failed
                    .as_ref()
                    .map(|e| format!("not kept aside: {e}"))
            })
            .unwrap_or_default();
        if m.held_until_first_scan {
            modes.push(style.paint(
                Colour::Yellow,
                &format!(
                    "SAFE MODE ({}; journal {kept}; automatic destructive actions held until \
                     the first complete scan)",
                    m.problem
                ),
            ));
        } else {
            journal_note = Some(format!(
                "started without its journal ({}; {kept}); safe mode ended at the first \
                 complete scan",
                m.problem
            ));
        }
    }
    for bug in &d.kernel_bugs {
        modes.push(style.paint(
            Colour::Red,
            &format!("KERNEL BUG ({bug}): automatic re-creation held (iser-guard resume lifts it)"),
        ));
    }
    if modes.is_empty() {
        modes.push("on".to_string());
    }
    let _ = writeln!(out, "  automatic actions: {}", modes.join(", "));
    if let Some(note) = journal_note {
        let _ = writeln!(out, "  journal: {note}");
    }
    if let Some(r) = &d.recreating {
        let _ = writeln!(out, "  re-creating: {r}");
    }
    for c in &d.driver_stack {
        let colour = if c.condition.function_without_rdma().is_some() {
            Colour::Red
        } else {
            Colour::Yellow
        };
        let _ = writeln!(
            out,
            "  driver stack: {} ({})",
            style.paint(colour, &c.summary),
            c.remedy
        );
    }
    let sources: Vec<String> = d
        .sources
        .iter()
        .map(|src| match src.state {
            SourceState::Ok => format!(
                "{} ok{}",
                src.name,
                src.last_ok
                    .map(|t| format!(" ({} ago)", ago(now, t)))
                    .unwrap_or_default()
            ),
            SourceState::Never if src.name == "kernel-log" => {
                format!("{} open, no record read yet", src.name)
            }
            SourceState::Never => format!("{} not polled yet", src.name),
            SourceState::Off => format!("{} off", src.name),
            SourceState::Failing => style.paint(
                Colour::Yellow,
                &format!(
                    "{} failing: {}{}",
                    src.name,
                    src.last_error.as_deref().unwrap_or("?"),
                    src.last_ok
                        .map(|t| format!(" (last ok {} ago)", ago(now, t)))
                        .unwrap_or_default()
                ),
            ),
        })
        .collect();
    if sources.is_empty() {
        out.push_str("  sources: none reported\n");
    } else {
        let _ = writeln!(out, "  sources: {}", sources.join("; "));
    }
    let _ = writeln!(
        out,
        "  events: {} kept, {} dropped (`iser-guard events`)",
        d.events_kept, d.events_dropped
    );
    out.push_str(&render_multipath(s.multipath.as_deref()));
    if s.ports.is_empty() {
        out.push_str("\nThe daemon knows no RDMA port with iSCSI sessions.\n");
        return out;
    }
    let mut rows = vec![["PORT", "PHASE", "SINCE", "ATTEMPTS", "NEXT"]
        .iter()
        .map(|h| (h.to_string(), None))
        .collect::<Vec<_>>()];
    for p in &s.ports {
        rows.push(vec![
            (p.port.clone(), None),
            (p.phase.to_string(), Some(phase_colour(p.phase))),
            (ago(now, p.since), None),
            (format!("{}/{}", p.attempts, p.max_attempts), None),
            (
                p.next
                    .as_ref()
                    .map(|n| format!("{} {}", n.what, until(now, n.at)))
                    .unwrap_or_else(|| "-".to_string()),
                None,
            ),
        ]);
    }
    out.push('\n');
    let rendered = table(&rows, style);
    let mut lines = rendered.lines();
    if let Some(h) = lines.next() {
        let _ = writeln!(out, "{h}");
    }
    for (p, line) in s.ports.iter().zip(lines) {
        let _ = writeln!(out, "{line}");
        port_details(&mut out, p, now, style);
    }
    out
}

/// The dm-multipath paths per RDMA port (`dm-multipath paths:` and a line per path), from
/// the daemon's last read of multipathd; nothing while it never read any.
pub fn render_multipath(ports: Option<&[crate::core::observe::MultipathPortView]>) -> String {
    let Some(ports) = ports else {
        return String::new();
    };
    if ports.is_empty() {
        return "  dm-multipath: no map\n".to_string();
    }
    let mut out =
        String::from("  dm-multipath paths (a re-creation of a port's device takes its paths):\n");
    for v in ports {
        let on = v.port.as_deref().unwrap_or("not over RDMA");
        for p in &v.paths {
            let _ = writeln!(out, "    {on}: {} {}", p.map, p.describe());
        }
    }
    out
}

#[cfg(test)]
mod multipath_tests {
    use super::*;

    #[test]
    fn paths_are_listed_per_port() {
        assert_eq!(render_multipath(None), "");
        assert_eq!(render_multipath(Some(&[])), "  dm-multipath: no map\n");
        let paths = crate::core::multipath::parse_paths(
            "mpatha|sdb|8:16|7:0:0:1|active|running|ready\nmpatha|sdz|8:400|2:0:0:1|failed|running|faulty\n",
        )
        .paths;
        let views = [
            crate::core::observe::MultipathPortView {
                port: Some("rocep2s0f0/1".into()),
                paths: vec![paths[0].clone()],
            },
            crate::core::observe::MultipathPortView {
                port: None,
                paths: vec![paths[1].clone()],
            },
        ];
        assert_eq!(
            render_multipath(Some(&views)),
            "  dm-multipath paths (a re-creation of a port's device takes its paths):\n    \
             rocep2s0f0/1: mpatha sdb (8:16, 7:0:0:1) active ready running\n    not over \
             RDMA: mpatha sdz (8:400, 2:0:0:1) failed faulty running\n"
        );
    }
}
