//! The diagnostic log on stderr, in the form its reader needs:
//!
//! - on a terminal: tracing's usual format (time, coloured level, fields), without the Rust
//!   module path;
//! - otherwise (systemd's journal, a pipe, a file): one line per event, prefixed `<N>` with
//!   the event's syslog priority as sd-daemon(3) describes, no ANSI colour and no timestamp
//!   (journald stamps each line itself; a second time in the text only gets in the way).
//!   journald reads the prefix as the entry's PRIORITY, so `journalctl -p err -u iser-guard`
//!   finds the errors. Levels map to ERROR → 3 (err), WARN → 4 (warning), INFO → 6 (info),
//!   DEBUG and TRACE → 7 (debug). An event with a numeric `priority` field (0–7) uses that
//!   instead: the ALERT lines carry the syslog severity the alert was configured with.
//!
//! The choice: journal form when stderr is not a terminal, or when `JOURNAL_STREAM` names
//! stderr (systemd sets it to the `device:inode` of the stream it connected, see
//! systemd.exec(5)).
//!
//! Alerts ([`alert`]) are logged as one line: `ALERT <what>: <why>; <what to do>` with the
//! stable fields `alert_kind` (the alert's kind, the first word of its de-duplication key),
//! `message_id` ([`message_id`], 32 hex digits, stable per kind), `severity` (the syslog
//! severity configured for it), `sent` (`syslog` or `log only`), and, when the alert has
//! them, `device`, `port` and `next` (one command the operator can run as it stands).

use std::fmt;
use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How stderr lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStyle {
    /// A terminal: time, colours.
    Terminal,
    /// The journal or a pipe: `<N>` prefixes, no colour, no time.
    Journal,
}

impl LogStyle {
    /// The style for this process's stderr.
    pub fn detect() -> LogStyle {
        let journal_stream = std::env::var("JOURNAL_STREAM").ok();
        LogStyle::choose(
            std::io::stderr().is_terminal(),
            journal_stream.as_deref(),
            stderr_identity(),
        )
    }

    /// The decision (pure): `JOURNAL_STREAM` matching stderr's `(device, inode)` means the
    /// journal; a terminal means the terminal; anything else is written as for the journal.
    pub fn choose(
        is_terminal: bool,
        journal_stream: Option<&str>,
        stderr: Option<(u64, u64)>,
    ) -> LogStyle {
        if names_stderr(journal_stream, stderr) {
            return LogStyle::Journal;
        }
        if is_terminal {
            LogStyle::Terminal
        } else {
            LogStyle::Journal
        }
    }
}

/// Whether `JOURNAL_STREAM` (`device:inode`) names stderr: systemd connected it to the journal.
fn names_stderr(journal_stream: Option<&str>, stderr: Option<(u64, u64)>) -> bool {
    let named = journal_stream
        .and_then(|v| v.split_once(':'))
        .and_then(|(d, i)| Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?)));
    named.is_some() && named == stderr
}

/// Prints an operator command's error on stderr, `iser-guard: ` before its first line. When
/// stderr is systemd's journal (the command runs as the unit's `ExecReload=`) every line gets
/// the `<3>` prefix, so that journald files it as an error and `journalctl -p err` finds it
/// (a refused reload was found only as systemd's own "Reload failed" line, lab sd-observe,
/// 2026-12-02); on a terminal, a pipe or a file the text is as written.
pub fn print_error(text: &str) {
    let journal = names_stderr(
        std::env::var("JOURNAL_STREAM").ok().as_deref(),
        stderr_identity(),
    );
    eprint!("{}", error_lines(text, journal));
}

/// The lines [`print_error`] writes (pure).
pub fn error_lines(text: &str, journal: bool) -> String {
    let prefix = if journal { "<3>" } else { "" };
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let head = if i == 0 { "iser-guard: " } else { "" };
        out.push_str(&format!("{prefix}{head}{line}\n"));
    }
    out
}

/// `(st_dev, st_ino)` of stderr.
// The conversions are no-ops on x86_64 and not on every architecture libc supports.
#[allow(clippy::useless_conversion)]
fn stderr_identity() -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    let st = nix::sys::stat::fstat(std::io::stderr().as_fd()).ok()?;
    Some((
        u64::try_from(st.st_dev).ok()?,
        u64::try_from(st.st_ino).ok()?,
    ))
}

/// The syslog priority of a tracing level.
pub fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// Installs the stderr subscriber for `filter` (`info` when absent or invalid), in `style`.
/// A second call (tests running several commands in one process) changes nothing.
pub fn init(filter: Option<&str>, style: LogStyle) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter.unwrap_or("info"))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match style {
        // No module paths (`iser_guard::daemon::run::effects:`): the lines are for operators.
        LogStyle::Terminal => builder.with_target(false).try_init(),
        LogStyle::Journal => builder
            .with_ansi(false)
            .event_format(JournalFormat)
            .try_init(),
    };
}

/// The words of syslog priorities 0–7, for lines whose priority is not their level's.
const SEVERITY_WORDS: [&str; 8] = [
    "EMERG", "ALERT", "CRIT", "ERR", "WARNING", "NOTICE", "INFO", "DEBUG",
];

/// One `<N>`-prefixed line per event.
#[derive(Debug, Clone, Copy, Default)]
pub struct JournalFormat;

/// Finds a numeric `priority` field.
struct PriorityField(Option<u8>);

impl tracing::field::Visit for PriorityField {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "priority" {
            self.0 = u8::try_from(value).ok().filter(|p| *p <= 7);
        }
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        if field.name() == "priority" {
            self.0 = u8::try_from(value).ok().filter(|p| *p <= 7);
        }
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn fmt::Debug) {}
}

impl<S, N> FormatEvent<S, N> for JournalFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut p = PriorityField(None);
        event.record(&mut p);
        let mut body = String::new();
        ctx.field_format()
            .format_fields(Writer::new(&mut body), event)?;
        // One event, one journal entry: a newline inside would start an entry of the
        // stream's default priority.
        let body = body.replace(['\n', '\r'], " ");
        match p.0 {
            // An explicit priority (an alert's configured severity) is named as syslog
            // names it; the `priority=N` field itself is left out (it is the prefix).
            Some(pri) => {
                let body = body.replace(&format!(" priority={pri}"), "");
                writeln!(writer, "<{pri}>{} {body}", SEVERITY_WORDS[usize::from(pri)])
            }
            None => writeln!(
                writer,
                "<{}>{} {body}",
                priority(meta.level()),
                meta.level()
            ),
        }
    }
}

/// The `MESSAGE_ID` of an alert kind: 32 lower-case hex digits, the 128-bit FNV-1a hash of
/// `iser-guard:` followed by the kind. Stable across versions (the hash is fixed here and
/// docs/guide/monitoring.md lists the ids of every kind), so `journalctl MESSAGE_ID=`-style searches
/// (`journalctl -u iser-guard --grep message_id=…`) and log pipelines can key on it.
pub fn message_id(kind: &str) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    for b in b"iser-guard:".iter().chain(kind.as_bytes()) {
        h ^= u128::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    format!("{h:032x}")
}

/// Every alert kind (the first word of the engine's alert keys, and `safe-mode` and
/// `device-fatal`, the daemon's own), for the docs' MESSAGE_ID table.
pub const ALERT_KINDS: [&str; 23] = [
    "cm-addr-error",
    "cm-rejected",
    "device-fatal",
    "failed",
    "fault",
    "healthy",
    "hold",
    "journal-failed",
    "listener",
    "nfs-back",
    "nfs-not-back",
    "nvme-back",
    "nvme-not-back",
    "paused",
    "quarantine",
    "quarantine-down",
    "reconnect",
    "recreate",
    "renamed",
    "safe-mode",
    "selftest-unavailable",
    "unknown-device",
    "untrusted",
];

/// Logs an engine alert as the ALERT line (see the module doc). `sent`: whether it goes to
/// syslog too. `device`, `port` and `next` are there only when the alert has them: an alert
/// about the host names no device, and one with nothing to run has no `next`.
pub fn alert(a: &crate::core::recovery::Alert, alerts: &crate::config::Alerts, sent: bool) {
    use crate::core::recovery::AlertSubject;
    let severity = alerts.syslog_severity(a.severity);
    let kind = crate::metrics::alert_kind(&a.key);
    let (device, port) = match a.subject() {
        AlertSubject::Port(p) => (Some(p.device), Some(p.port)),
        AlertSubject::Device(d) => (Some(d), None),
        AlertSubject::Host => (None, None),
    };
    let sent = if sent { "syslog" } else { "log only" };
    // The level only gates the line (the filter); its priority is the alert's severity.
    tracing::warn!(
        priority = u64::from(severity.code()),
        severity = severity.name(),
        alert_kind = kind,
        message_id = %message_id(kind),
        device = device.as_deref().map(tracing::field::display),
        port,
        count = a.count,
        next = a.remedy.as_deref(),
        sent,
        "ALERT {}: {}",
        a.summary,
        a.detail
    );
}

/// Logs an alert the daemon itself raises (not the engine: safe mode) as the ALERT line. Its
/// advice is prose, part of the message; it has no `next` command.
pub fn daemon_alert(a: &crate::io::syslog::AlertMessage, kind: &str, sent: bool) {
    let sent = if sent { "syslog" } else { "log only" };
    tracing::warn!(
        priority = u64::from(a.severity.code()),
        severity = a.severity.name(),
        alert_kind = kind,
        message_id = %message_id(kind),
        count = 1u64,
        sent,
        "ALERT {}",
        a.message()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_program_once_and_is_err_level_on_every_line_in_the_journal() {
        let text = "configuration x has 1 problem(s):\n  line 2: bad";
        assert_eq!(
            error_lines(text, false),
            "iser-guard: configuration x has 1 problem(s):\n  line 2: bad\n"
        );
        assert_eq!(
            error_lines(text, true),
            "<3>iser-guard: configuration x has 1 problem(s):\n<3>  line 2: bad\n"
        );
    }

    #[test]
    fn journal_form_when_journal_stream_names_stderr_or_stderr_is_no_terminal() {
        let me = Some((64769, 1234));
        assert_eq!(
            LogStyle::choose(true, Some("64769:1234"), me),
            LogStyle::Journal
        );
        // Inherited from a parent whose stream was another one: look at stderr itself.
        assert_eq!(
            LogStyle::choose(true, Some("64769:99"), me),
            LogStyle::Terminal
        );
        assert_eq!(
            LogStyle::choose(true, Some("garbage"), me),
            LogStyle::Terminal
        );
        assert_eq!(LogStyle::choose(true, None, me), LogStyle::Terminal);
        assert_eq!(LogStyle::choose(false, None, me), LogStyle::Journal);
        assert_eq!(LogStyle::choose(false, None, None), LogStyle::Journal);
    }

    #[test]
    fn levels_map_to_syslog_priorities() {
        assert_eq!(priority(&Level::ERROR), 3);
        assert_eq!(priority(&Level::WARN), 4);
        assert_eq!(priority(&Level::INFO), 6);
        assert_eq!(priority(&Level::DEBUG), 7);
        assert_eq!(priority(&Level::TRACE), 7);
    }

    #[test]
    fn message_ids_are_stable_distinct_and_32_hex_digits() {
        // Pinned: changing the derivation would break every search keyed on these.
        assert_eq!(message_id("fault"), "ef30f66c33437ee7457d83fbd41648ac");
        assert_eq!(message_id("hold"), "d7d0f03918676d4df0c78277f538d575");
        let ids: std::collections::BTreeSet<String> =
            ALERT_KINDS.iter().map(|k| message_id(k)).collect();
        assert_eq!(ids.len(), ALERT_KINDS.len());
        for id in &ids {
            assert_eq!(id.len(), 32);
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
    }
}
