//! `iser-guard watch`: follow the kernel log (or replay a saved one) and print classified
//! events as they come, each flagged trusted or untrusted.
//!
//! Live mode reads `paths.kmsg` with [`crate::io::kmsg`], keeping its own cursor
//! ([`crate::io::cursor::WATCH_CURSOR_FILE_NAME`] in `paths.state-dir`, never the daemon's):
//! the first run starts at the end of the log, a restart resumes after the last record shown,
//! a reboot starts at the beginning of the retained log; `--from-start` always starts there.
//! SIGTERM and SIGINT end it at once (the reader never blocks in `read()`), after saving
//! the cursor.
//!
//! A record written by userspace (facility ≠ 0) is printed like any other but flagged
//! `untrusted: written by userspace, facility N`: the daemon never acts on it unless
//! `kmsg.trust-userspace-records` is set.

use std::borrow::Cow;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

use super::Globals;
use crate::config::Config;
use crate::core::kmsg::{
    unescape, LineFormat, Record, RecordOrigin, RecordRef, SavedLog, Unproven,
};
use crate::core::signatures::subsystem::trace::{TraceAssembler, TraceEvent};
use crate::core::signatures::subsystem::{self, explain_event, level_name};
use crate::core::signatures::{self, Signature};
use crate::error::Error;
use crate::io::cursor::WATCH_CURSOR_FILE_NAME;
use crate::io::kmsg::{self as kmsg_io, KmsgEvent, KmsgStats, OpenOptions};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Replay a saved log (/dev/kmsg dump, `dmesg -r` or `dmesg` output; `-` for stdin)
    /// instead of following the kernel log.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Start at the oldest record the kernel still holds instead of where the last `watch`
    /// stopped (or, on its first run, at the end).
    #[arg(long)]
    pub from_start: bool,
    /// Print every record, not only the recognised ones (the default prints only records
    /// that match a known kernel message).
    #[arg(long)]
    pub all: bool,
}

/// How long a shutdown waits for the final cursor save.
const CURSOR_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// Syslog level names, by level number.
const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// Syslog facility names, by facility number (RFC 5424 numbering as in glibc's syslog.h).
fn facility_name(f: u8) -> Cow<'static, str> {
    const NAMES: [&str; 16] = [
        "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
        "authpriv", "ftp", "fac12", "fac13", "fac14", "fac15",
    ];
    match NAMES.get(usize::from(f)) {
        Some(n) => Cow::Borrowed(n),
        None if (16..24).contains(&f) => Cow::Owned(format!("local{}", f - 16)),
        None => Cow::Owned(format!("fac{f}")),
    }
}

/// Whether a record may be believed, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RecordTrust {
    /// Facility 0: written by the kernel.
    Kernel,
    /// Written by userspace, but `kmsg.trust-userspace-records` is set.
    TrustedByConfig(u8),
    /// Written by userspace.
    Userspace(u8),
    /// A saved-log line without a priority: its origin cannot be told.
    Unknown,
    /// A `dmesg -r` line with a priority below 8: a level, but no facility to trust
    /// (`RecordRef::origin`, `Unproven::PriorityWithoutFacility`).
    NoFacility,
}

impl RecordTrust {
    /// From what the record's format proves ([`RecordRef::origin`], the one rule `explain`
    /// also follows): only a /dev/kmsg record of facility 0 is the kernel's.
    fn of(origin: RecordOrigin, trust_userspace: bool) -> RecordTrust {
        match origin {
            RecordOrigin::Kernel => RecordTrust::Kernel,
            RecordOrigin::Userspace(f) if trust_userspace => RecordTrust::TrustedByConfig(f),
            RecordOrigin::Userspace(f) => RecordTrust::Userspace(f),
            RecordOrigin::Unproven(Unproven::PriorityWithoutFacility) => RecordTrust::NoFacility,
            RecordOrigin::Unproven(Unproven::NoPriority) => RecordTrust::Unknown,
        }
    }

    fn trusted(&self) -> bool {
        matches!(self, RecordTrust::Kernel | RecordTrust::TrustedByConfig(_))
    }

    /// The flag printed next to the record; `None` for kernel records.
    fn note(&self) -> Option<String> {
        match self {
            RecordTrust::Kernel => None,
            RecordTrust::TrustedByConfig(f) => Some(format!(
                "written by userspace, facility {f}, trusted by kmsg.trust-userspace-records"
            )),
            RecordTrust::Userspace(f) => {
                Some(format!("untrusted: written by userspace, facility {f}"))
            }
            RecordTrust::Unknown => {
                Some("untrusted: origin unknown (no priority in this line)".into())
            }
            RecordTrust::NoFacility => Some(
                "untrusted: origin unproven (a dmesg -r priority below 8 carries no facility: \
                 older util-linux printed userspace records that way too)"
                    .into(),
            ),
        }
    }
}

/// One output line of `--json`.
#[derive(Debug, Serialize)]
struct JsonRecord<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    facility: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    level: Option<u8>,
    format: LineFormat,
    trusted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    text: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dict: Vec<(&'a str, Cow<'a, str>)>,
    /// The recognised event, `null` when the record matched no signature.
    event: Option<serde_json::Value>,
    /// The subsystem layer's event and its explanation, for a record of the RDMA storage
    /// stack that matched no signature.
    #[serde(skip_serializing_if = "Option::is_none")]
    subsystem: Option<serde_json::Value>,
}

/// One output line of `--json` for a whole oops/WARN report in the RDMA storage stack,
/// printed when the report ends.
#[derive(Debug, Serialize)]
struct JsonTrace<'a> {
    trace: &'a TraceEvent,
    summary: String,
}

/// One output line of `--json` for lost records.
#[derive(Debug, Serialize)]
struct JsonLost {
    /// `null` when the kernel could not tell how many.
    lost: Option<u64>,
    next_seq: u64,
    overrun: bool,
}

/// A record in the form the printer needs, from either the live reader or a saved log.
struct View<'a> {
    line: Option<usize>,
    format: LineFormat,
    facility: Option<u8>,
    level: Option<u8>,
    seq: Option<u64>,
    usec: Option<u64>,
    /// Decoded text.
    text: Cow<'a, str>,
    /// Decoded dictionary.
    dict: Vec<(&'a str, Cow<'a, str>)>,
}

impl<'a> View<'a> {
    fn live(r: &'a Record) -> Self {
        View {
            line: None,
            format: LineFormat::Kmsg,
            facility: Some(r.facility),
            level: Some(r.level),
            seq: Some(r.seq),
            usec: Some(r.usec),
            text: Cow::Borrowed(&r.text),
            dict: r
                .dict
                .iter()
                .map(|(k, v)| (k.as_str(), Cow::Borrowed(v.as_str())))
                .collect(),
        }
    }

    /// Who wrote the record, as far as its format proves it.
    fn origin(&self) -> RecordOrigin {
        RecordRef {
            format: self.format,
            facility: self.facility,
            level: self.level,
            ..RecordRef::bare("")
        }
        .origin()
    }

    fn saved(line: usize, r: &RecordRef<'a>) -> Self {
        View {
            line: Some(line),
            format: r.format,
            facility: r.facility,
            level: r.level,
            seq: r.seq,
            usec: r.usec,
            text: r.unescaped_text(),
            dict: r.dict.iter().map(|(k, v)| (k, unescape(v))).collect(),
        }
    }
}

/// Classifies a record with the signature catalogue ([`crate::core::signatures`]): the
/// decoded text and the `DEVICE=` dictionary value. Returns the human summary and the JSON
/// form of the event.
fn classify(view: &View<'_>) -> Option<(String, serde_json::Value)> {
    let device = view
        .dict
        .iter()
        .find(|(k, _)| *k == "DEVICE")
        .map(|(_, v)| v.as_ref());
    // The view holds decoded text: decoding it again would misread a literal `\x41`.
    let sig = signatures::classify_decoded(&view.text, device)?;
    Some((summary(&sig), event_json(&sig)))
}

/// One line saying what the record means, e.g.
/// `stuck_qp_transition QP 1 ERR→RTS on rocep2s0f0 (GSI QP stuck in ERR: …)`.
fn summary(sig: &Signature) -> String {
    let mut s = sig.kind.name().to_string();
    if let Some((qp, from, to)) = sig.kind.transition() {
        match qp {
            Some(q) => s.push_str(&format!(" QP {q} {from}→{to}")),
            None => s.push_str(&format!(" {from}→{to}")),
        }
    }
    if !sig.device.is_empty() {
        s.push_str(&format!(" on {}", sig.device.label()));
    }
    if sig.kind.is_stuck_gsi() {
        s.push_str(" (GSI QP stuck in ERR: only re-creating the RDMA device recovers it)");
    }
    s
}

/// The event as JSON: the signature (`kind`, `device`) plus `name` and `stuck_gsi`.
fn event_json(sig: &Signature) -> serde_json::Value {
    let mut v = serde_json::to_value(sig).unwrap_or(serde_json::Value::Null);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("name".into(), sig.kind.name().into());
        obj.insert("stuck_gsi".into(), sig.kind.is_stuck_gsi().into());
    }
    v
}

/// Writes the output lines.
struct Printer<W: Write> {
    out: W,
    json: bool,
    all: bool,
    trust_userspace: bool,
    printed: u64,
    /// Assembles oops/WARN reports across records.
    traces: TraceAssembler,
}

/// The subsystem layer's view of a record no signature matched: a one-line summary and
/// the JSON form (event and explanation).
fn subsystem_event(view: &View<'_>) -> Option<(String, serde_json::Value)> {
    let device = view
        .dict
        .iter()
        .find(|(k, _)| *k == "DEVICE")
        .map(|(_, v)| v.as_ref());
    let ev = subsystem::recognise(&view.text, view.level, device)?;
    let x = explain_event(&ev);
    let summary = format!(
        "{} {}{}",
        ev.subsystem,
        level_name(ev.level),
        if ev.fatal_device_error {
            " FATAL DEVICE ERROR"
        } else {
            ""
        }
    );
    let json = serde_json::json!({ "event": ev, "explanation": x });
    Some((summary, json))
}

impl<W: Write> Printer<W> {
    fn record(&mut self, v: &View<'_>) -> io::Result<()> {
        if let Some(t) = self.traces.push(&v.text) {
            self.trace(&t)?;
        }
        let event = classify(v);
        let sub = if event.is_none() {
            subsystem_event(v)
        } else {
            None
        };
        if event.is_none() && sub.is_none() && !self.all {
            return Ok(());
        }
        let trust = RecordTrust::of(v.origin(), self.trust_userspace);
        if self.json {
            let rec = JsonRecord {
                line: v.line,
                seq: v.seq,
                usec: v.usec,
                facility: v.facility,
                level: v.level,
                format: v.format,
                trusted: trust.trusted(),
                note: trust.note(),
                text: &v.text,
                dict: v.dict.clone(),
                event: event.map(|(_, json)| json),
                subsystem: sub.as_ref().map(|(_, json)| json.clone()),
            };
            serde_json::to_writer(&mut self.out, &rec)?;
            self.out.write_all(b"\n")?;
        } else {
            let mut head = String::new();
            if let Some(l) = v.line {
                head.push_str(&format!("line {l} "));
            }
            if let Some(s) = v.seq {
                head.push_str(&format!("seq {s} "));
            }
            if let Some(u) = v.usec {
                head.push_str(&format!("[{:5}.{:06}] ", u / 1_000_000, u % 1_000_000));
            }
            if let (Some(f), Some(l)) = (v.facility, v.level) {
                let level = LEVELS.get(usize::from(l)).copied().unwrap_or("?");
                head.push_str(&format!("{}.{} ", facility_name(f), level));
            }
            let body = match (&event, &sub) {
                (Some((summary, _)), _) => format!("{summary} | {}", v.text),
                (None, Some((summary, _))) => format!("[{summary}] {}", v.text),
                (None, None) => v.text.to_string(),
            };
            let dict: Vec<String> = v.dict.iter().map(|(k, v)| format!("{k}={v}")).collect();
            write!(self.out, "{head}{body}")?;
            if !dict.is_empty() {
                write!(self.out, " {{{}}}", dict.join(" "))?;
            }
            if let Some(n) = trust.note() {
                write!(self.out, " ({n})")?;
            }
            writeln!(self.out)?;
        }
        self.printed += 1;
        Ok(())
    }

    /// A whole oops/WARN report in the RDMA storage stack ended.
    fn trace(&mut self, t: &TraceEvent) -> io::Result<()> {
        if self.json {
            serde_json::to_writer(
                &mut self.out,
                &JsonTrace {
                    trace: t,
                    summary: t.summary(),
                },
            )?;
            self.out.write_all(b"\n")?;
        } else {
            writeln!(self.out, "kernel report: {}", t.summary())?;
        }
        self.printed += 1;
        Ok(())
    }

    fn lost(&mut self, count: Option<u64>, next_seq: u64, overrun: bool) -> io::Result<()> {
        if self.json {
            serde_json::to_writer(
                &mut self.out,
                &JsonLost {
                    lost: count,
                    next_seq,
                    overrun,
                },
            )?;
            self.out.write_all(b"\n")
        } else {
            let why = if overrun {
                "the kernel's ring buffer overwrote them before they were read"
            } else {
                "they were no longer in the kernel's ring buffer"
            };
            let count = count.map_or_else(|| "some".to_string(), |c| c.to_string());
            writeln!(
                self.out,
                "-- {count} records lost before seq {next_seq}: {why}"
            )
        }
    }
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let (config, _source) = crate::config::load_or_default(globals.config.as_deref())?;
    let stdout = io::stdout();
    let mut printer = Printer {
        out: io::BufWriter::new(stdout.lock()),
        json: args.json,
        all: args.all,
        trust_userspace: config.kmsg.trust_userspace_records,
        printed: 0,
        traces: TraceAssembler::new(),
    };
    let result = match &args.file {
        Some(path) => replay(path, &mut printer),
        None => follow(&args, &config, &mut printer),
    };
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // `watch | head`: the reader went away; that is a normal end.
        Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::BrokenPipe => {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e),
    }
}

fn write_err(e: io::Error) -> Error {
    Error::io("writing to standard output", e)
}

/// Bytes read per chunk of a saved log.
const CHUNK: usize = 1 << 20;

/// The most a chunk grows to hold one record and its dictionary lines.
const MAX_CHUNK: usize = 16 << 20;

/// Where the last record of `buf` starts: the last line not beginning with a space (a
/// /dev/kmsg dictionary line), among the complete lines. What comes before it is whole
/// records; the record itself may go on in the next chunk. 0 when there is no such split.
fn last_record_start(buf: &[u8]) -> usize {
    let Some(last_nl) = memchr::memrchr(b'\n', buf) else {
        return 0;
    };
    let mut end = last_nl;
    loop {
        let start = memchr::memrchr(b'\n', &buf[..end]).map_or(0, |i| i + 1);
        if buf.get(start) != Some(&b' ') || start == 0 {
            return start;
        }
        end = start - 1;
    }
}

/// Replays a saved log, streamed in chunks of whole records with every line capped
/// ([`crate::io::lines`]): memory stays at about one chunk whatever the input.
fn replay<W: Write>(path: &Path, printer: &mut Printer<W>) -> Result<(), Error> {
    let name = if path == Path::new("-") {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    let read_err = |e| Error::io(format!("reading {name}"), e);
    let input: Box<dyn io::Read> = if path == Path::new("-") {
        Box::new(io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(path).map_err(read_err)?)
    };
    // Rotated logs (.gz, .zst) are read as they are; input that is not text is refused.
    let (text, _) = crate::io::saved_log::open(input, &name)?;
    let mut src = crate::io::lines::CappedLines::new(text, name.clone());
    let mut bad = 0u64;
    let mut first_bad: Option<String> = None;
    let mut records = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut want = CHUNK;
    let mut eof = false;
    let mut lines_before = 0usize;
    loop {
        while !eof && buf.len() < want {
            let len = buf.len();
            buf.resize(want, 0);
            match io::Read::read(&mut src, &mut buf[len..]) {
                Ok(0) => {
                    buf.truncate(len);
                    eof = true;
                }
                Ok(n) => buf.truncate(len + n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => buf.truncate(len),
                Err(e) => return Err(crate::io::saved_log::read_error(e, &name).into()),
            }
        }
        let mut cut = if eof {
            buf.len()
        } else {
            last_record_start(&buf)
        };
        if cut == 0 && !eof {
            if want < MAX_CHUNK {
                // One record with a dictionary longer than the chunk: read more of it.
                want = want.saturating_mul(2);
                continue;
            }
            // Take it as it stands rather than grow without bound.
            cut = memchr::memrchr(b'\n', &buf).map_or(buf.len(), |i| i + 1);
        }
        for item in SavedLog::from_bytes(&buf[..cut]) {
            match item {
                Ok(entry) => {
                    records += 1;
                    // Every record is looked at: the subsystem layer and the oops/WARN
                    // reports need the lines no signature anchor is in.
                    printer
                        .record(&View::saved(lines_before + entry.line, &entry.record))
                        .map_err(write_err)?;
                }
                Err(mut e) => {
                    bad += 1;
                    e.line += lines_before;
                    warn!("{name}: skipping {e}");
                    first_bad.get_or_insert_with(|| e.to_string());
                }
            }
        }
        lines_before += memchr::memchr_iter(b'\n', &buf[..cut]).count();
        buf.drain(..cut);
        want = CHUNK;
        if eof && buf.is_empty() {
            break;
        }
    }
    if let Some(t) = printer.traces.finish() {
        printer.trace(&t).map_err(write_err)?;
    }
    printer.out.flush().map_err(write_err)?;
    let cut = src.stats();
    info!(
        records,
        printed = printer.printed,
        skipped = bad,
        long_lines_cut = cut.lines_cut,
        "replayed {name}"
    );
    // What was not shown is the command's to say, not only the log's.
    if let Some(first) = first_bad {
        eprintln!(
            "iser-guard: {name}: skipped {bad} line(s) that are not kernel-log records \
             (first: {first})"
        );
    }
    if cut.lines_cut > 0 {
        eprintln!(
            "iser-guard: {name}: {} line(s) longer than {} bytes were cut to that length",
            cut.lines_cut,
            crate::io::lines::MAX_LINE_BYTES
        );
    }
    Ok(())
}

/// Follows the kernel log until SIGTERM or SIGINT.
fn follow<W: Write>(args: &Args, config: &Config, printer: &mut Printer<W>) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the async runtime", e))?;
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate())
            .map_err(|e| Error::io("installing the SIGTERM handler", e))?;
        let mut int = signal(SignalKind::interrupt())
            .map_err(|e| Error::io("installing the SIGINT handler", e))?;
        let opts = OpenOptions {
            from_start: args.from_start,
            cursor_name: WATCH_CURSOR_FILE_NAME,
            ..crate::compose::kmsg_options(&config.paths)
        };
        let mut reader = kmsg_io::open(&opts)?;
        info!(path = %opts.kmsg.display(), "following the kernel log");
        let outcome = loop {
            tokio::select! {
                // Signals first: a storm of records must not delay the shutdown.
                biased;
                _ = term.recv() => break Ok("SIGTERM"),
                _ = int.recv() => break Ok("SIGINT"),
                ev = reader.next() => {
                    let written = match ev {
                        Ok(KmsgEvent::Record(r)) => printer.record(&View::live(&r)),
                        Ok(KmsgEvent::Lost { count, next_seq, overrun }) => {
                            printer.lost(count, next_seq, overrun)
                        }
                        Err(e) => break Err(Error::from(e)),
                    };
                    if let Err(e) = written.and_then(|()| printer.out.flush()) {
                        break Err(write_err(e));
                    }
                }
            }
        };
        // Bounded: the shutdown must not wait on a slow disk (the issue allows 1 s in all).
        if let Err(e) = reader.save_cursor(CURSOR_FLUSH_TIMEOUT) {
            warn!("{e}");
        }
        let stats: KmsgStats = reader.stats();
        match &outcome {
            Ok(signal) => info!(
                records = stats.records,
                parse_errors = stats.parse_errors,
                lost = stats.lost,
                overruns = stats.overruns,
                cursor_save_errors = stats.cursor_save_errors,
                "stopping on {signal}"
            ),
            Err(e) => warn!(
                records = stats.records,
                parse_errors = stats.parse_errors,
                lost = stats.lost,
                overruns = stats.overruns,
                cursor_save_errors = stats.cursor_save_errors,
                "stopping: {e}"
            ),
        }
        outcome.map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printer(json: bool) -> Printer<Vec<u8>> {
        Printer {
            out: Vec::new(),
            json,
            all: true,
            trust_userspace: false,
            printed: 0,
            traces: TraceAssembler::new(),
        }
    }

    /// The streamed replay prints exactly what parsing the whole log at once gives, with the
    /// same line numbers, when records and their dictionary lines straddle chunk ends.
    #[test]
    fn streamed_replay_matches_the_whole_log() {
        let kmsg =
            include_str!("../../crates/iser-guard-core/tests/fixtures/kmsg/field-incident.kmsg");
        let mut log = String::new();
        while log.len() < 3 * CHUNK {
            log.push_str(kmsg);
            log.push_str("[    1.000000] filler line to move the chunk boundaries\n");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, &log).unwrap();
        let mut streamed = printer(true);
        replay(&path, &mut streamed).unwrap();
        let mut whole = printer(true);
        for entry in SavedLog::from_bytes(log.as_bytes()).flatten() {
            whole
                .record(&View::saved(entry.line, &entry.record))
                .unwrap();
        }
        assert!(whole.printed > 1000, "{}", whole.printed);
        assert_eq!(streamed.printed, whole.printed);
        assert!(streamed.out == whole.out, "streamed output differs");
    }

    #[test]
    fn last_record_start_keeps_dictionary_lines_with_their_record() {
        assert_eq!(last_record_start(b"a\nb\n SUB=x\n DEV=y\n"), 2);
        assert_eq!(last_record_start(b"a\nb\nc"), 2);
        assert_eq!(last_record_start(b"a\n"), 0);
        assert_eq!(last_record_start(b"abc"), 0);
        assert_eq!(last_record_start(b" K=V\n K=W\n"), 0);
    }

    #[test]
    fn userspace_records_are_flagged_untrusted() {
        let r = Record::parse(
            b"11,9,1500000,-;infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22\n",
        )
        .unwrap();
        let mut p = printer(true);
        p.record(&View::live(&r)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p.out).unwrap();
        assert_eq!(v["trusted"], false);
        assert_eq!(v["facility"], 1);
        assert_eq!(v["note"], "untrusted: written by userspace, facility 1");
        assert_eq!(v["seq"], 9);
        assert_eq!(v["event"]["name"], "mad_rts_failed");
        assert_eq!(v["event"]["stuck_gsi"], true);
        assert_eq!(v["event"]["device"]["rdma_dev"], "rocep2s0f0");

        let mut p = printer(false);
        p.record(&View::live(&r)).unwrap();
        let line = String::from_utf8(p.out).unwrap();
        assert!(
            line.starts_with(
                "seq 9 [    1.500000] user.err mad_rts_failed QP 1 SQE→RTS on rocep2s0f0 (GSI"
            ),
            "{line}"
        );
        assert!(
            line.ends_with(
                "| infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22 \
                 (untrusted: written by userspace, facility 1)\n"
            ),
            "{line}"
        );
    }

    #[test]
    fn without_all_only_recognised_records_are_printed() {
        let mut p = printer(true);
        p.all = false;
        let plain = Record::parse(b"6,1,1,-;usb 1-6: Manufacturer: Realtek\n").unwrap();
        p.record(&View::live(&plain)).unwrap();
        assert!(p.out.is_empty());
        let irdma = Record::parse(
            b"3,2,2,-;ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3\n SUBSYSTEM=pci\n DEVICE=+pci:0000:02:00.0\n",
        )
        .unwrap();
        p.record(&View::live(&irdma)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p.out).unwrap();
        assert_eq!(v["trusted"], true);
        assert_eq!(v["event"]["name"], "stuck_qp_transition");
        assert_eq!(v["event"]["kind"]["qp"], 1);
        assert_eq!(v["event"]["device"]["pci"], "0000:02:00.0");
        assert_eq!(p.printed, 1);
        // A line of the RDMA stack no signature knows: the subsystem layer's event.
        p.out.clear();
        let rxe = Record::parse(b"6,3,3,-;rdma_rxe: loaded\n").unwrap();
        p.record(&View::live(&rxe)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p.out).unwrap();
        assert!(v["event"].is_null(), "{v}");
        assert_eq!(v["subsystem"]["event"]["subsystem"], "rdma-driver", "{v}");
        assert_eq!(v["subsystem"]["event"]["level"], 6, "{v}");
        assert!(
            v["subsystem"]["explanation"]["next"].as_str().is_some(),
            "{v}"
        );
        assert_eq!(p.printed, 2);
    }

    #[test]
    fn kernel_records_are_trusted_and_carry_their_dictionary() {
        let r = Record::parse(
            b"6,401,10063342,-;infiniband rxe_ini: set active\n SUBSYSTEM=infiniband\n DEVICE=+infiniband:rxe_ini\n",
        )
        .unwrap();
        let mut p = printer(true);
        p.record(&View::live(&r)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p.out).unwrap();
        assert_eq!(v["trusted"], true);
        assert!(v.get("note").is_none());
        assert_eq!(v["dict"][1][1], "+infiniband:rxe_ini");
        let mut p = printer(false);
        p.trust_userspace = true;
        let u = Record::parse(b"14,1,1,-;x\n").unwrap();
        p.record(&View::live(&u)).unwrap();
        assert!(String::from_utf8(p.out)
            .unwrap()
            .contains("trusted by kmsg.trust-userspace-records"));
    }

    /// `dmesg -r` prints `<prio>` with the level only for kernel records, but util-linux
    /// before `LOG_RAW_FAC_PRI` printed userspace ones below 8 as well: such a line proves
    /// nothing about who wrote it (as `explain` says), while one of 8 or more is userspace.
    #[test]
    fn a_dmesg_raw_priority_below_8_is_unproven_not_kernel() {
        let log = "<3>[ 1234.567890] infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22\n\
                   <11>[ 1234.600000] infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22\n";
        let mut p = printer(true);
        for entry in SavedLog::from_bytes(log.as_bytes()).flatten() {
            p.record(&View::saved(entry.line, &entry.record)).unwrap();
        }
        let out = String::from_utf8(p.out).unwrap();
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!(lines[0]["format"], "dmesg-raw", "{out}");
        assert_eq!(lines[0]["trusted"], false, "{out}");
        assert!(
            lines[0]["note"]
                .as_str()
                .unwrap()
                .contains("origin unproven"),
            "{out}"
        );
        assert_eq!(lines[1]["trusted"], false);
        assert_eq!(
            lines[1]["note"],
            "untrusted: written by userspace, facility 1"
        );
    }

    #[test]
    fn facility_names() {
        assert_eq!(facility_name(0), "kern");
        assert_eq!(facility_name(1), "user");
        assert_eq!(facility_name(17), "local1");
        assert_eq!(facility_name(200), "fac200");
    }
}
