//! `iser-guard explain`: decode kernel log lines, a whole saved log, or a QP transition
//! against the IB spec, and say what recovers it.
//!
//! Inputs: lines as arguments; a saved log with `--file PATH` or `-` (stdin) in /dev/kmsg
//! (`cat /dev/kmsg`), `dmesg -r` or plain `dmesg` format, detected per line by
//! [`crate::core::kmsg::parse_saved_line`]; or `--transition FROM:TO [--type T] [--mask M]`.
//!
//! Speed: a saved log is read whole and scanned like grep does: one multi-pattern search
//! over the entire buffer ([`signatures::next_anchor`]) finds the next line that can match
//! anything; only those lines are split, parsed and classified, and identical lines are
//! classified once (a cache keyed by text and `DEVICE=`). Repeats are summarised per
//! signature and device, never printed one by one. Output is buffered.
//!
//! A saved log may be gzip or zstd compressed (rotated logs: `kern.log.2.gz`); input that is
//! not text is refused ([`crate::io::saved_log`]).
//!
//! Exit codes ([`crate::error`]): 0 nothing forbidden found, 1 a forbidden transition or a
//! stuck GSI QP found (or, with `--transition`, the transition is not allowed), 64 bad
//! arguments, 65 input that is not text or a damaged compressed file, 66 file not found, 74
//! read error.

use crate::exit::ExitStatus;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;

use serde::Serialize;

use super::explain_subsystem::{SubsystemJson, SubsystemReport};
use super::Globals;
use crate::core::kmsg::{dict_line, parse_saved_line, LineFormat, RecordOrigin, Unproven};
use crate::core::qp::{explain_qp_transition, explain_transition, AttrMask, QpState, QpType};
use crate::core::signatures::subsystem::could_recognise as subsystem_could_recognise;
use crate::core::signatures::{
    self, explain, Explanation, NamedDevices, Seriousness, Signature, SignatureKind,
};
use crate::error::Error;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    iser-guard explain 'ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3'\n  \
    dmesg -r | iser-guard explain -\n  \
    iser-guard explain --file /var/log/kern.log --json\n  \
    iser-guard explain --file /var/log/kern.log.2.gz\n  \
    iser-guard explain --transition ERR:RTS --type GSI --mask STATE,CUR_STATE\n\n\
    Exit status: 0 nothing forbidden found, 1 a forbidden transition or stuck GSI QP found, \
    65 the input is not text (or a damaged .gz/.zst).")]
pub struct Args {
    /// Kernel log lines to explain (quote each one); a single `-` reads a saved log from
    /// standard input.
    #[arg(value_name = "LINE", conflicts_with_all = ["file", "transition"])]
    pub lines: Vec<String>,

    /// A saved kernel log: `cat /dev/kmsg`, `dmesg -r` or `dmesg` output, or kern.log; gzip
    /// or zstd compressed (rotated logs) is read as it is (`-` for stdin).
    #[arg(long, short = 'f', value_name = "PATH", conflicts_with = "transition")]
    pub file: Option<PathBuf>,

    /// Explain a QP state transition instead, as FROM:TO (e.g. `ERR:RTS`; names or the
    /// kernel's numbers).
    #[arg(long, value_name = "FROM:TO")]
    pub transition: Option<String>,

    /// QP type for `--transition` (SMI, GSI, RC, UC, UD, XRC_INI, XRC_TGT, RAW_PACKET, …).
    #[arg(
        long = "type",
        value_name = "TYPE",
        requires = "transition",
        default_value = "RC"
    )]
    pub qp_type: String,

    /// Attribute mask for `--transition`: names (`STATE,CUR_STATE`) or a number (`0x31`).
    #[arg(
        long,
        value_name = "MASK",
        requires = "transition",
        default_value = "STATE"
    )]
    pub mask: String,

    /// QP number for `--transition` (QP 0 is the SMI QP, QP 1 the GSI QP).
    #[arg(long, value_name = "N", requires = "transition")]
    pub qpn: Option<u32>,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args, _globals: &Globals) -> Result<ExitCode, Error> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let finding = if let Some(t) = &args.transition {
        run_transition(t, &args, &mut out)?
    } else {
        let (report, input) = match (&args.file, args.lines.as_slice()) {
            (Some(p), _) if p.as_os_str() == "-" => (scan_stdin()?, "stdin".to_string()),
            (Some(p), _) => {
                let ctx = || format!("cannot read {}", p.display());
                let f = std::fs::File::open(p).map_err(|e| Error::io(ctx(), e))?;
                let name = p.display().to_string();
                (scan_input(f, &name)?, name)
            }
            (None, [one]) if one == "-" => (scan_stdin()?, "stdin".to_string()),
            (None, []) => {
                return Err(Error::Usage(
                    "explain needs kernel log lines, `--file PATH` (or `-` for stdin), or \
                     `--transition FROM:TO`; see `iser-guard explain --help`"
                        .into(),
                ))
            }
            (None, lines) => {
                let joined = lines.join("\n");
                (
                    Findings::scan(joined.as_bytes(), true),
                    "arguments".to_string(),
                )
            }
        };
        if args.json {
            report.write_json(&input, &mut out)?;
        } else {
            report.write_text(&input, &mut out)?;
        }
        report.finding()
    };
    out.flush()
        .map_err(|e| Error::io("cannot write to stdout", e))?;
    Ok(ExitCode::from(if finding {
        ExitStatus::Finding.code()
    } else {
        ExitStatus::Ok.code()
    }))
}

fn scan_stdin() -> Result<Findings, Error> {
    scan_input(std::io::stdin().lock(), "standard input")
}

/// Reads a saved log: decompressed if it is gzip or zstd, refused if it is not text (exit
/// 65, never an all-clear about input that was not read), its lines capped. What the cap
/// cut is the command's to say (on stderr), not only the diagnostic log's.
fn scan_input<R: Read>(src: R, name: &str) -> Result<Findings, Error> {
    use crate::io::saved_log;
    let (text, _) = saved_log::open(src, name)?;
    let mut capped = crate::io::lines::CappedLines::new(text, name);
    let report = Findings::scan_reader(&mut capped).map_err(|e| saved_log::read_error(e, name))?;
    let cut = capped.stats();
    if cut.lines_cut > 0 {
        eprintln!(
            "iser-guard: {name}: {} line(s) longer than {} bytes were cut to that length",
            cut.lines_cut,
            crate::io::lines::MAX_LINE_BYTES
        );
    }
    Ok(report)
}

// ---- --transition --------------------------------------------------------------------------

fn run_transition<W: Write>(spec: &str, args: &Args, out: &mut W) -> Result<bool, Error> {
    let (from, to) = spec
        .split_once(':')
        .or_else(|| spec.split_once("->"))
        .ok_or_else(|| {
            Error::Usage(format!(
                "--transition {spec:?}: expected FROM:TO, e.g. ERR:RTS"
            ))
        })?;
    let from: QpState = from
        .parse()
        .map_err(|e| Error::Usage(format!("--transition: {e}")))?;
    let to: QpState = to
        .parse()
        .map_err(|e| Error::Usage(format!("--transition: {e}")))?;
    let qp_type: QpType = args
        .qp_type
        .parse()
        .map_err(|e| Error::Usage(format!("--type: {e}")))?;
    let mask: AttrMask = args
        .mask
        .parse()
        .map_err(|e| Error::Usage(format!("--mask: {e}")))?;
    let e = match args.qpn {
        Some(n) => explain_qp_transition(n, from, to, qp_type, mask),
        None => explain_transition(from, to, qp_type, mask),
    };
    let w = |r: std::io::Result<()>| r.map_err(|e| Error::io("cannot write to stdout", e));
    if args.json {
        w(serde_json::to_writer_pretty(&mut *out, &e).map_err(std::io::Error::other))?;
        w(writeln!(out))?;
    } else {
        w(write!(out, "{e}"))?;
        if !e.allowed {
            w(writeln!(
                out,
                "Verdict: {from} -> {to} is not allowed for this QP."
            ))?;
        }
    }
    Ok(!e.allowed)
}

// ---- scanning a log ------------------------------------------------------------------------

/// One signature seen one or more times.
#[derive(Debug, Serialize)]
struct Group {
    /// How often.
    count: u64,
    /// First and last line numbers (1-based).
    first_line: usize,
    last_line: usize,
    /// First and last timestamps, microseconds since boot, when the format carries them.
    #[serde(skip_serializing_if = "Option::is_none")]
    first_usec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_usec: Option<u64>,
    /// Occurrences written by userspace (facility ≠ 0): could be forged.
    untrusted: u64,
    /// Occurrences whose format carries a priority that cannot prove kernel origin
    /// (`dmesg -r` below 8, see [`crate::core::kmsg::RecordRef::origin`]).
    unproven: u64,
    /// Occurrences proven written by the kernel (/dev/kmsg, facility 0).
    #[serde(skip)]
    kernel: u64,
    /// Distinct QP numbers folded into this group (rxe QP state lines are grouped by state).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    qps: Vec<u32>,
    /// The first line's text (without the timestamp).
    line: String,
    /// The first line's format.
    format: LineFormat,
    /// The operator alert the signature raises by itself (a kernel bug).
    #[serde(skip_serializing_if = "Option::is_none")]
    alert: Option<String>,
    signature: Signature,
    explanation: Explanation,
}

impl Group {
    /// How far the group's best occurrence can be trusted: 2 written by the kernel (a
    /// /dev/kmsg record of facility 0), 1 origin unproven (`dmesg -r` below 8, plain
    /// `dmesg`, syslog, journal text), 0 only userspace-written records (could be forged).
    fn trust_rank(&self) -> u8 {
        if self.kernel > 0 {
            2
        } else if self.untrusted < self.count {
            1
        } else {
            0
        }
    }
}

/// A line that carried an anchor but matched no signature (arguments mode only).
#[derive(Debug, Serialize)]
struct Unrecognised {
    line: usize,
    text: String,
}

/// Everything found in one input.
#[derive(Debug, Default)]
struct Findings {
    /// Lines in the input (non-empty ones, for arguments).
    lines: usize,
    /// Newlines consumed so far while scanning in chunks.
    newlines: usize,
    /// Lines that classified.
    recognised: u64,
    /// Lines whose format could not be parsed although they carried an anchor.
    unparsable: u64,
    /// The first such line and why.
    first_parse_error: Option<String>,
    groups: Vec<Group>,
    /// Group index by grouping key.
    index: HashMap<Signature, usize>,
    /// Classification cache: `text \n DEVICE` → group (None: not recognised).
    cache: HashMap<String, Option<usize>, LineHashBuilder>,
    /// The same for plain `dmesg` lines (`[ 5123.456789] text`), keyed by the raw bytes
    /// after the timestamp: a line seen before is counted without UTF-8 validation, prefix
    /// stripping or record parsing (its result depends on those bytes alone).
    raw_cache: HashMap<Vec<u8>, Option<usize>, LineHashBuilder>,
    unrecognised: Vec<Unrecognised>,
    /// The subsystem layer's events and oops/WARN reports.
    subsystem: SubsystemReport,
}

impl Findings {
    /// Scans a whole input. `per_line`: every line is an operator-given line (arguments);
    /// unrecognised ones are listed.
    fn scan(buf: &[u8], per_line: bool) -> Findings {
        let mut r = Findings::default();
        let mut scratch = String::new();
        if per_line {
            // Every line is looked at (to report the unrecognised ones), in order.
            let mut line_no = 0;
            let mut pos = 0;
            while pos < buf.len() {
                let end = memchr::memchr(b'\n', &buf[pos..]).map_or(buf.len(), |i| pos + i);
                line_no += 1;
                let line = trim_cr(&buf[pos..end]);
                if !line.iter().all(u8::is_ascii_whitespace) {
                    r.lines += 1;
                    let recognised = r
                        .line(buf, pos, end, line_no, true, &mut scratch)
                        .is_some_and(|(_, ok)| ok);
                    if !recognised {
                        r.unrecognised.push(Unrecognised {
                            line: line_no,
                            text: String::from_utf8_lossy(line).into_owned(),
                        });
                    }
                }
                pos = end + 1;
            }
            r.enrich();
            r.subsystem.finish();
            return r;
        }
        // Whole-log scan of an in-memory log: the same path as a file.
        Findings::scan_reader(buf).unwrap_or_else(|_| unreachable_read_error())
    }

    /// Scans a log from a reader in large chunks: the anchor search runs over each chunk
    /// as a whole (like grep), and only lines holding an anchor are parsed. Memory stays at
    /// about one chunk whatever the log's size.
    fn scan_reader<R: Read>(src: R) -> std::io::Result<Findings> {
        Findings::scan_reader_chunked(src, CHUNK)
    }

    fn scan_reader_chunked<R: Read>(mut src: R, chunk: usize) -> std::io::Result<Findings> {
        let mut r = Findings::default();
        let mut scratch = String::new();
        let mut chunk = chunk.max(1);
        let mut buf: Vec<u8> = Vec::with_capacity(chunk);
        let mut eof = false;
        let mut last_byte = None;
        loop {
            while !eof && buf.len() < chunk {
                let len = buf.len();
                buf.resize(chunk, 0);
                match src.read(&mut buf[len..]) {
                    Ok(0) => {
                        buf.truncate(len);
                        eof = true;
                    }
                    Ok(n) => buf.truncate(len + n),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(len),
                    Err(e) => return Err(e),
                }
            }
            // Process whole lines only, unless the input has ended.
            let limit = if eof {
                buf.len()
            } else {
                match memchr::memrchr(b'\n', &buf) {
                    Some(i) => i + 1,
                    None if chunk < MAX_CHUNK => {
                        // One line longer than the chunk: read more of it.
                        chunk = chunk.saturating_mul(2);
                        continue;
                    }
                    // An uncapped reader with a line longer than MAX_CHUNK: take it as it is.
                    None => buf.len(),
                }
            };
            // A record whose dictionary goes on past MAX_CHUNK is taken as it stands, so that
            // no input grows the buffer without bound (lines are capped by the caller).
            let whole = eof || chunk >= MAX_CHUNK;
            let consumed = r.scan_chunk(&buf[..limit], whole, &mut scratch);
            if let Some(b) = buf[..consumed].last() {
                last_byte = Some(*b);
            }
            buf.drain(..consumed);
            if eof {
                break;
            }
            if consumed == 0 {
                // A record whose dictionary continues past the chunk: read more.
                chunk = chunk.saturating_mul(2);
            }
        }
        r.lines = r.newlines + usize::from(last_byte.is_some_and(|b| b != b'\n'));
        r.enrich();
        r.subsystem.finish();
        Ok(r)
    }

    /// Scans one chunk of whole lines (the input's tail when `eof`). Returns how many bytes
    /// were consumed: all of them, or up to the start of a /dev/kmsg record whose dictionary
    /// lines may continue in the next chunk.
    fn scan_chunk(&mut self, buf: &[u8], eof: bool, scratch: &mut String) -> usize {
        let mut pos = 0;
        let mut counted = 0; // newlines in [0, counted) are in `nl`
        let mut nl = 0usize;
        let consumed = loop {
            let Some(hit) = signatures::next_anchor(buf, pos) else {
                self.gap(buf, pos, buf.len(), &mut nl, &mut counted);
                break buf.len();
            };
            let start = memchr::memrchr(b'\n', &buf[..hit]).map_or(0, |i| i + 1);
            let end = memchr::memchr(b'\n', &buf[hit..]).map_or(buf.len(), |i| hit + i);
            self.gap(buf, pos, start, &mut nl, &mut counted);
            nl += count_newlines(&buf[counted..start]);
            counted = start;
            match self.line(buf, start, end, self.newlines + nl + 1, eof, scratch) {
                Some((next, _)) => {
                    // The line itself holds no newline: count only what it consumed after
                    // its end (its own newline, a record's dictionary lines), so that a
                    // log dense with matching lines is not counted twice.
                    let next = next.min(buf.len());
                    if next > end {
                        nl += count_newlines(&buf[end..next]);
                        counted = next;
                    }
                    pos = next;
                }
                None => break start,
            }
        };
        nl += count_newlines(&buf[counted..consumed]);
        self.newlines += nl;
        consumed
    }

    /// The lines in `from..to`, which hold no signature anchor: the subsystem layer's only
    /// (each line's number is counted as the anchor lines' are).
    fn gap(&mut self, buf: &[u8], from: usize, to: usize, nl: &mut usize, counted: &mut usize) {
        let mut p = from;
        while p < to {
            let e = memchr::memchr(b'\n', &buf[p..to]).map_or(to, |i| p + i);
            let raw = trim_cr(&buf[p..e]);
            if !raw.is_empty() {
                *nl += count_newlines(&buf[*counted..p]);
                *counted = p;
                let line_no = self.newlines + *nl + 1;
                if let Some((_, tail_at)) = plain_dmesg_stamp(raw) {
                    // Plain dmesg, the commonest saved format: the text is what follows the
                    // timestamp, and a line seen before is a cache hit without parsing.
                    if let Ok(text) = std::str::from_utf8(&raw[tail_at..]) {
                        self.subsystem.feed_trace(text, line_no);
                        if subsystem_could_recognise(text) {
                            self.subsystem.line(text, None, None, line_no);
                        }
                    }
                } else if let Ok(text) = std::str::from_utf8(raw) {
                    if let Ok(rec) = parse_saved_line(strip_log_prefix(text)) {
                        let t = rec.unescaped_text();
                        self.subsystem.feed_trace(&t, line_no);
                        self.subsystem.line(&t, rec.level, None, line_no);
                    }
                }
            }
            p = e + 1;
        }
    }

    /// Completes the device attribution of groups from other groups naming the same RDMA
    /// device: the MAD line names only `rocep2s0f0`, the irdma line of the same incident
    /// also its PCI function and parent driver, which select the recovery command.
    ///
    /// Facts are only lent by a line at least as trustworthy as the one that borrows them
    /// ([`Group::trust_rank`]): a line written by userspace (possibly forged) lends nothing,
    /// and a line of unproven origin lends nothing to a line the kernel provably wrote.
    fn enrich(&mut self) {
        let mut known: HashMap<String, (u8, NamedDevices)> = HashMap::new();
        for g in &self.groups {
            let d = &g.signature.device;
            let rank = g.trust_rank();
            if rank == 0 {
                continue;
            }
            if let (Some(name), true) = (&d.rdma_dev, d.pci.is_some()) {
                match known.get(name) {
                    Some((r, _)) if *r >= rank => {}
                    _ => {
                        known.insert(name.clone(), (rank, d.clone()));
                    }
                }
            }
        }
        for g in &mut self.groups {
            let rank = g.trust_rank();
            let d = &mut g.signature.device;
            let Some((src_rank, src)) = d.rdma_dev.as_ref().and_then(|n| known.get(n)) else {
                continue;
            };
            if d.pci.is_none() && *src_rank >= rank {
                d.pci.clone_from(&src.pci);
                if src.driver.as_deref() != Some("infiniband") {
                    d.driver.clone_from(&src.driver);
                }
                g.explanation = explain(&g.signature);
            }
        }
    }

    /// Handles the line at `start..end` (line number `line_no`). Returns where scanning
    /// continues (after the record's dictionary lines) and whether it was recognised.
    fn line(
        &mut self,
        buf: &[u8],
        start: usize,
        end: usize,
        line_no: usize,
        eof: bool,
        scratch: &mut String,
    ) -> Option<(usize, bool)> {
        let raw = trim_cr(&buf[start..end]);
        // Fast path: a plain dmesg line whose text (after the timestamp) was seen before.
        let plain = plain_dmesg_stamp(raw);
        if let Some((usec, tail_at)) = plain {
            if let Some(&slot) = raw.get(tail_at..).and_then(|t| self.raw_cache.get(t)) {
                let next = (end + 1).min(buf.len().max(end));
                let text = std::str::from_utf8(&raw[tail_at..]).unwrap_or("");
                self.subsystem.feed_trace(text, line_no);
                let by_sub = slot.is_none() && self.subsystem.line(text, None, None, line_no);
                return Some((
                    next,
                    self.count_hit(slot, line_no, Some(usec), None) || by_sub,
                ));
            }
        }
        // Validation alone is much cheaper than `from_utf8_lossy`'s chunking; lossy only
        // for the rare invalid line.
        let text = match std::str::from_utf8(raw) {
            Ok(t) => std::borrow::Cow::Borrowed(t),
            Err(_) => String::from_utf8_lossy(raw),
        };
        let mut next = (end + 1).min(buf.len().max(end));
        let rec = match parse_saved_line(strip_log_prefix(&text)) {
            Ok(r) => r,
            Err(e) => {
                self.unparsable += 1;
                if self.first_parse_error.is_none() {
                    self.first_parse_error = Some(format!("line {line_no}: {e}"));
                }
                return Some((next, false));
            }
        };
        // A /dev/kmsg record: its ` KEY=VALUE` dictionary lines follow.
        let mut device: Option<String> = None;
        if rec.format == LineFormat::Kmsg {
            while buf.get(next) == Some(&b' ') {
                let e = memchr::memchr(b'\n', &buf[next..]).map_or(buf.len(), |i| next + i);
                let l = String::from_utf8_lossy(trim_cr(&buf[next..e]));
                match dict_line(&l) {
                    Some((k, v)) => {
                        if k == "DEVICE" {
                            device = Some(v.to_string());
                        }
                        next = e + 1;
                    }
                    None => break,
                }
            }
            if next >= buf.len() && !eof {
                // The dictionary may go on in the next chunk: come back with more input.
                return None;
            }
        }
        scratch.clear();
        scratch.push_str(rec.text);
        scratch.push('\n');
        if let Some(d) = &device {
            scratch.push_str(d);
        }
        let slot = match self.cache.get(scratch.as_str()) {
            Some(s) => *s,
            None => {
                let s = signatures::classify(rec.text, device.as_deref()).map(|sig| {
                    let key = group_key(&sig);
                    let qp = folded_qp(&sig.kind);
                    let i = match self.index.get(&key) {
                        Some(i) => *i,
                        None => {
                            let i = self.groups.len();
                            self.groups.push(Group {
                                count: 0,
                                first_line: line_no,
                                last_line: line_no,
                                first_usec: rec.usec,
                                last_usec: rec.usec,
                                untrusted: 0,
                                unproven: 0,
                                kernel: 0,
                                qps: Vec::new(),
                                line: rec.unescaped_text().trim_end().to_string(),
                                format: rec.format,
                                alert: signatures::operator_alert(&sig),
                                explanation: explain(&sig),
                                signature: sig,
                            });
                            self.index.insert(key, i);
                            i
                        }
                    };
                    if let (Some(q), Some(g)) = (qp, self.groups.get_mut(i)) {
                        if !g.qps.contains(&q) && g.qps.len() < MAX_QPS_LISTED {
                            g.qps.push(q);
                        }
                    }
                    i
                });
                self.cache.insert(scratch.clone(), s);
                s
            }
        };
        if let (Some((usec, tail_at)), LineFormat::Dmesg) = (plain, rec.format) {
            // Only what parsed as plain dmesg (a journal short-monotonic line was stripped
            // to another format) and with the same timestamp the fast path will read.
            if rec.usec == Some(usec) {
                if let Some(tail) = raw.get(tail_at..) {
                    self.raw_cache.insert(tail.to_vec(), slot);
                }
            }
        }
        let origin = rec.origin();
        let text = rec.unescaped_text();
        self.subsystem.feed_trace(&text, line_no);
        let by_sub = slot.is_none()
            && self
                .subsystem
                .line(&text, rec.level, device.as_deref(), line_no);
        Some((
            next,
            self.count_hit(slot, line_no, rec.usec, Some(origin)) || by_sub,
        ))
    }

    /// Counts one occurrence of a classified line (`slot`: its group, `None` when it was
    /// not recognised). `origin` `None`: no priority (plain dmesg). Returns `slot.is_some()`.
    fn count_hit(
        &mut self,
        slot: Option<usize>,
        line_no: usize,
        usec: Option<u64>,
        origin: Option<RecordOrigin>,
    ) -> bool {
        let Some(i) = slot else {
            return false;
        };
        self.recognised += 1;
        if let Some(g) = self.groups.get_mut(i) {
            g.count += 1;
            g.last_line = line_no;
            if usec.is_some() {
                g.last_usec = usec;
                g.first_usec = g.first_usec.or(usec);
            }
            match origin {
                Some(RecordOrigin::Kernel) => g.kernel += 1,
                Some(RecordOrigin::Userspace(_)) => g.untrusted += 1,
                Some(RecordOrigin::Unproven(Unproven::PriorityWithoutFacility)) => g.unproven += 1,
                Some(RecordOrigin::Unproven(Unproven::NoPriority)) | None => {}
            }
        }
        true
    }

    fn finding(&self) -> bool {
        self.groups.iter().any(|g| g.explanation.finding)
    }

    fn write_text<W: Write>(&self, input: &str, out: &mut W) -> Result<(), Error> {
        let io = |e| Error::io("cannot write to stdout", e);
        self.text(input, out).map_err(io)
    }

    fn text<W: Write>(&self, input: &str, out: &mut W) -> std::io::Result<()> {
        writeln!(
            out,
            "{input}: {} line{}, {} recognised, {} distinct event{}{}",
            self.lines,
            plural(self.lines as u64),
            self.recognised,
            self.groups.len(),
            plural(self.groups.len() as u64),
            if self.subsystem.recognised > 0 {
                format!(
                    "; {} more explained by subsystem",
                    self.subsystem.recognised
                )
            } else {
                String::new()
            }
        )?;
        if self.unparsable > 0 {
            writeln!(
                out,
                "skipped {} line{} whose format could not be parsed (first: {})",
                self.unparsable,
                plural(self.unparsable),
                self.first_parse_error.as_deref().unwrap_or("?")
            )?;
        }
        for u in &self.unrecognised {
            writeln!(out, "\nline {}: not recognised: {}", u.line, u.text.trim())?;
        }
        for (n, g) in self.groups.iter().enumerate() {
            let e = &g.explanation;
            let more = if g.qps.len() > 1 {
                format!(" (and {} more QPs)", g.qps.len() - 1)
            } else {
                String::new()
            };
            writeln!(
                out,
                "\n[{}] {}{more}{}",
                n + 1,
                e.title,
                if e.finding {
                    "  ** FORBIDDEN / STUCK **"
                } else {
                    ""
                }
            )?;
            let mut seen = format!(
                "{} time{}, line{} {}",
                g.count,
                plural(g.count),
                if g.first_line == g.last_line { "" } else { "s" },
                if g.first_line == g.last_line {
                    g.first_line.to_string()
                } else {
                    format!("{}-{}", g.first_line, g.last_line)
                }
            );
            match (g.first_usec, g.last_usec) {
                (Some(a), Some(b)) if a == b => seen.push_str(&format!(", at {}", secs(a))),
                (Some(a), Some(b)) => seen.push_str(&format!(", at {} .. {}", secs(a), secs(b))),
                _ => {}
            }
            writeln!(out, "    seen:     {seen}")?;
            if g.qps.len() > 1 {
                let list: Vec<String> = g.qps.iter().map(u32::to_string).collect();
                writeln!(
                    out,
                    "    QPs:      {}{}",
                    list.join(", "),
                    if g.qps.len() >= MAX_QPS_LISTED {
                        ", …"
                    } else {
                        ""
                    }
                )?;
            }
            if g.untrusted > 0 {
                writeln!(
                    out,
                    "    trust:    {} written by userspace (not facility 0): could be forged; \
                     the daemon never acts on those",
                    g.untrusted
                )?;
            }
            if g.unproven > 0 {
                writeln!(
                    out,
                    "    trust:    {} from `dmesg -r` with a priority below 8, which cannot \
                     prove kernel origin (older util-linux printed facility|level, so a \
                     userspace record could look like facility 0): reported, never an action \
                     trigger; read /dev/kmsg (`cat /dev/kmsg`) for records whose origin counts",
                    g.unproven
                )?;
            }
            writeln!(
                out,
                "    source:   {}, {}",
                e.source,
                severity_name(e.severity)
            )?;
            writeln!(
                out,
                "    device:   {}",
                describe_device(&g.signature.device)
            )?;
            if let Some(t) = &e.transition {
                // The verdict, why, and the notes; the table's generic recovery advice is
                // already folded into this explanation's own recovery lines.
                let body = t.to_string();
                let mut lines = body.lines();
                if let Some(first) = lines.next() {
                    writeln!(out, "    spec:     {first}")?;
                }
                for l in lines.map(str::trim_start) {
                    if !l.starts_with("recovery:") {
                        writeln!(out, "              {l}")?;
                    }
                }
                if !t.allowed {
                    writeln!(
                        out,
                        "              => {} -> {} is forbidden by the IB spec{}",
                        t.from,
                        t.to,
                        match t.qpn {
                            Some(q) => format!(" for QP {q} ({})", t.qp_type),
                            None => String::new(),
                        }
                    )?;
                }
            }
            for m in &e.meaning {
                writeln!(out, "    meaning:  {m}")?;
            }
            for r in &e.recovery {
                writeln!(out, "    recovery: {r}")?;
            }
            writeln!(out, "    line:     {}", g.line)?;
        }
        self.subsystem.write_text(out)?;
        writeln!(out)?;
        for (n, g) in self.groups.iter().enumerate() {
            if let Some(a) = &g.alert {
                writeln!(out, "Alert [{}]: {a}", n + 1)?;
            }
        }
        let mut stuck: Vec<String> = self
            .groups
            .iter()
            .filter(|g| g.explanation.stuck_gsi)
            .map(|g| {
                let d = &g.signature.device;
                d.rdma_dev.clone().unwrap_or_else(|| d.label())
            })
            .collect();
        stuck.sort();
        stuck.dedup();
        for d in &stuck {
            writeln!(
                out,
                "Verdict: the GSI QP (QP 1) of {d} is stuck in ERR: ERR -> RTS is forbidden by \
                 the IB spec, so the port can make no new RDMA connection; the RDMA device \
                 must be re-created: `iser-guard reset-device {d}`"
            )?;
        }
        let mut other = false;
        for (n, g) in self.groups.iter().enumerate() {
            let e = &g.explanation;
            if e.finding && !e.stuck_gsi {
                other = true;
                writeln!(
                    out,
                    "Verdict: forbidden QP transition [{}]: {} ({})",
                    n + 1,
                    e.title,
                    g.signature.device.label()
                )?;
            }
        }
        if stuck.is_empty() && !other {
            writeln!(
                out,
                "Verdict: no forbidden QP transition and no stuck GSI QP in this input."
            )?;
        }
        Ok(())
    }

    fn write_json<W: Write>(&self, input: &str, out: &mut W) -> Result<(), Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            input: &'a str,
            lines: usize,
            recognised: u64,
            unparsable: u64,
            #[serde(skip_serializing_if = "Option::is_none")]
            first_parse_error: Option<&'a str>,
            finding: bool,
            events: &'a [Group],
            subsystem: SubsystemJson<'a>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            unrecognised: &'a [Unrecognised],
        }
        let o = Out {
            input,
            lines: self.lines,
            recognised: self.recognised,
            unparsable: self.unparsable,
            first_parse_error: self.first_parse_error.as_deref(),
            finding: self.finding(),
            events: &self.groups,
            subsystem: self.subsystem.json(),
            unrecognised: &self.unrecognised,
        };
        serde_json::to_writer_pretty(&mut *out, &o)
            .map_err(|e| Error::io("cannot write to stdout", std::io::Error::other(e)))?;
        writeln!(out).map_err(|e| Error::io("cannot write to stdout", e))
    }
}

/// The grouping key: the signature without per-occurrence details (SCSI tags, sectors, the
/// QP numbers of rxe's per-connection QP state lines), so a storm of I/O errors on one disk
/// or of connection QPs going to ERR is one group.
fn group_key(sig: &Signature) -> Signature {
    let mut k = sig.clone();
    match &mut k.kind {
        SignatureKind::ScsiCommandFailed { tag, .. } => *tag = None,
        SignatureKind::BlockIoError { sector, .. } => *sector = None,
        SignatureKind::RxeQpState { qp, .. } if folded_qp(&sig.kind).is_some() => *qp = u32::MAX,
        _ => {}
    }
    k
}

/// At most this many distinct QP numbers are listed per group.
const MAX_QPS_LISTED: usize = 64;

/// The QP number a group folds (rxe QP state lines of any QP but the GSI QP).
fn folded_qp(kind: &SignatureKind) -> Option<u32> {
    match kind {
        SignatureKind::RxeQpState { qp, .. } if *qp != signatures::GSI_QPN => Some(*qp),
        _ => None,
    }
}

fn describe_device(d: &NamedDevices) -> String {
    let mut parts = Vec::new();
    if let Some(v) = &d.rdma_dev {
        parts.push(format!("RDMA device {v}"));
    }
    if let Some(v) = d.port {
        parts.push(format!("port {v}"));
    }
    if let Some(v) = &d.netdev {
        parts.push(format!("netdev {v}"));
    }
    if let Some(v) = d.ifindex {
        parts.push(format!("ifindex {v}"));
    }
    if let Some(v) = &d.pci {
        parts.push(format!("PCI {v}"));
    }
    if let Some(v) = &d.parent {
        parts.push(format!("parent {v}"));
    }
    if let Some(v) = &d.disk {
        parts.push(format!("disk {v}"));
    }
    if let Some(v) = &d.scsi_hctl {
        parts.push(format!("SCSI {v}"));
    }
    if let Some(v) = d.scsi_host {
        parts.push(format!("SCSI host{v}"));
    }
    match (d.iscsi_session, d.iscsi_conn) {
        (Some(s), Some(c)) => parts.push(format!("iSCSI connection{s}:{c}")),
        (Some(s), None) => parts.push(format!("iSCSI session{s}")),
        _ => {}
    }
    if let Some(v) = &d.devnum {
        parts.push(format!("devnum {v}"));
    }
    if let Some(v) = &d.other {
        parts.push(v.clone());
    }
    if let Some(v) = &d.driver {
        parts.push(format!("driver {v}"));
    }
    if parts.is_empty() {
        "not named by the line".to_string()
    } else {
        parts.join(", ")
    }
}

fn severity_name(s: Seriousness) -> &'static str {
    match s {
        Seriousness::Info => "info",
        Seriousness::Warning => "warning",
        Seriousness::Critical => "critical",
    }
}

/// What the recognition layers make of one saved kernel-log line, in any format `explain`
/// reads (plain dmesg, `dmesg -T/-H/-r`, /dev/kmsg, syslog, journal): the signature, and the
/// subsystem event. Used by `examples/recall.rs` to measure recognition on real published
/// lines.
#[derive(Debug, Clone, Default)]
pub struct LineVerdict {
    /// The signature the line matches, if any (what the engine may act on).
    pub signature: Option<crate::core::signatures::Signature>,
    /// The line's subsystem event, if it is a line of an RDMA storage host's subsystems.
    pub subsystem: Option<crate::core::signatures::subsystem::SubsystemEvent>,
}

impl LineVerdict {
    /// Recognised by either layer.
    pub fn recognised(&self) -> bool {
        self.signature.is_some() || self.subsystem.is_some()
    }
}

/// See [`LineVerdict`]. A line whose format does not parse is recognised by neither.
pub fn recognise_saved_line(line: &str) -> LineVerdict {
    let Ok(rec) = parse_saved_line(strip_log_prefix(line)) else {
        return LineVerdict::default();
    };
    let text = rec.unescaped_text();
    LineVerdict {
        signature: signatures::classify(rec.text, None),
        subsystem: crate::core::signatures::subsystem::recognise(&text, rec.level, None),
    }
}

/// Strips what syslog, journald and dmesg's human time formats put before the kernel's
/// text, so pasted lines parse like `dmesg` output:
/// - syslog and journal: `Nov 29 14:00:00 host kernel: [ 5123.456789] text`,
///   `2026-11-29T14:00:00+00:00 host kernel: text`, `[ 5123.456789] host kernel: text`
///   (`journalctl -o short-monotonic`);
/// - `dmesg -T`: `[Sun Nov 29 14:00:00 2026] text`;
/// - `dmesg -H`: `[Nov29 14:00] text` (`%b%e %H:%M`, so also `[Dec 1 14:00]`) and the
///   relative lines after it, `[  +0.000123] text`;
/// - `dmesg --time-format iso`: `2026-11-29T14:00:00,123456+00:00 text`;
/// - `dmesg -x` (`--decode`): `kern  :err   : ` before any of the dmesg forms;
/// - `talosctl dmesg`: `10.5.0.3: kern:    info: [2022-07-28T11:49:42.489473063Z]: text`.
///
/// Only the kernel facility's lines are unwrapped by the last two: a `user` line was written
/// by a process and stays unread.
///
/// Called for every line that holds an anchor, so it works on bytes without allocating.
fn strip_log_prefix(line: &str) -> &str {
    static KERNEL: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
    // Lines quoted in mail and bug reports are often indented (`        [177617.25] …`).
    let line = line.trim_start_matches([' ', '\t']);
    let line = strip_dmesg_decode(line).unwrap_or(line);
    if let Some(text) = strip_rfc5424(line) {
        return text;
    }
    let b = line.as_bytes();
    let head = &b[..b.len().min(96)];
    // Plain dmesg, the commonest saved format, first and without a search:
    // "[ 5123.456789] text", or journalctl's short-monotonic "[ 5123.456789] host kernel: ".
    if b.first() == Some(&b'[') {
        if let Some(close) = memchr::memchr(b']', head) {
            let ts = &head[1..close];
            let plain = ts.iter().any(u8::is_ascii_digit)
                && ts
                    .iter()
                    .all(|c| c.is_ascii_digit() || matches!(c, b' ' | b'.'));
            if plain {
                let after = close + 1;
                let word_at = after + 1;
                if b.get(after) == Some(&b' ') {
                    if let Some(sp) = memchr::memchr(b' ', &b[word_at..]) {
                        let tail = &b[word_at + sp..];
                        if sp > 0 && tail.starts_with(b" kernel: ") {
                            return line.get(word_at + sp + " kernel: ".len()..).unwrap_or(line);
                        }
                    }
                }
                return line;
            }
        }
    }
    if let Some(text) = strip_talosctl(line) {
        return text;
    }
    // syslog/journal: "... <host> kernel: " within the first few words.
    if let Some(i) = KERNEL
        .get_or_init(|| memchr::memmem::Finder::new(b" kernel: "))
        .find(head)
    {
        let words = head[..i]
            .split(|c| *c == b' ')
            .filter(|w| !w.is_empty())
            .count();
        if words <= 5 {
            return line.get(i + " kernel: ".len()..).unwrap_or(line);
        }
    }
    match b.first() {
        Some(b'[') => {
            let Some(close) = memchr::memchr(b']', head) else {
                return line;
            };
            if b.get(close + 1) != Some(&b' ') {
                return line;
            }
            let ts = &head[1..close];
            if is_human_dmesg_time(ts) {
                return line.get(close + 2..).unwrap_or(line);
            }
            line
        }
        Some(b'0'..=b'9') if is_iso_time(head) => match memchr::memchr(b' ', head) {
            Some(sp) => line.get(sp + 1..).unwrap_or(line),
            None => line,
        },
        _ => line,
    }
}

/// RFC 5424 syslog (rsyslog's `RSYSLOG_SyslogProtocol23Format`, syslog-ng's `syslog()`
/// destination): `<6>1 2020-12-02T21:55:55.868531+01:00 host kernel - - - text` → `text`,
/// for the kernel's lines only (APP-NAME `kernel`, no structured data).
fn strip_rfc5424(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('<')?;
    let close = rest.find('>')?;
    if close == 0 || close > 3 || !rest[..close].bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let rest = rest[close + 1..].strip_prefix("1 ")?;
    let mut fields = rest.splitn(6, ' ');
    let (_time, _host) = (fields.next()?, fields.next()?);
    let (app, _procid, _msgid) = (fields.next()?, fields.next()?, fields.next()?);
    let sd_and_msg = fields.next()?;
    if app != "kernel" {
        return None;
    }
    let msg = sd_and_msg.strip_prefix('-')?;
    Some(msg.strip_prefix(' ').unwrap_or(msg))
}

/// A syslog level's name as `dmesg -x` (`warn`) and talosctl (`warning`) print it.
fn is_level_name(w: &str) -> bool {
    matches!(
        w,
        "emerg" | "alert" | "crit" | "err" | "warn" | "warning" | "notice" | "info" | "debug"
    )
}

/// `dmesg -x`: `kern  :err   : rest` (facility and level each padded to six columns) →
/// `rest`.
fn strip_dmesg_decode(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("kern")?
        .trim_start_matches(' ')
        .strip_prefix(':')?;
    let head = &rest.as_bytes()[..rest.len().min(8)];
    let colon = memchr::memchr(b':', head)?;
    if !is_level_name(rest[..colon].trim_end_matches(' ')) {
        return None;
    }
    rest[colon + 1..].strip_prefix(' ')
}

/// `talosctl dmesg`: `<node>: kern: <level>: [<ISO 8601 time>]: text` → `text`; with one
/// node (or `--nodes` unset) talosctl prints no `<node>: `.
fn strip_talosctl(line: &str) -> Option<&str> {
    let after_node = match line.strip_prefix("kern:") {
        Some(_) => line,
        None => {
            let b = line.as_bytes();
            let sp = memchr::memchr(b' ', &b[..b.len().min(96)])?;
            if sp < 2 || b[sp - 1] != b':' {
                return None;
            }
            &line[sp + 1..]
        }
    };
    let rest = after_node.strip_prefix("kern:")?.trim_start_matches(' ');
    let colon = memchr::memchr(b':', &rest.as_bytes()[..rest.len().min(8)])?;
    if !is_level_name(&rest[..colon]) {
        return None;
    }
    let stamped = rest[colon + 1..].strip_prefix(" [")?;
    let sb = stamped.as_bytes();
    let close = memchr::memchr(b']', &sb[..sb.len().min(40)])?;
    if !is_iso_time(&sb[..close]) {
        return None;
    }
    stamped[close + 1..].strip_prefix(": ")
}

/// The timestamp of a plain `dmesg` line, `[ 5123.456789] `: microseconds and where the
/// text starts. Reads exactly what the kmsg parser's `[seconds.micros]` reader accepts (a
/// fraction of up to six digits scaled to microseconds; longer ones are left to it).
fn plain_dmesg_stamp(b: &[u8]) -> Option<(u64, usize)> {
    if b.first() != Some(&b'[') {
        return None;
    }
    let mut i = 1;
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    let mut secs: u64 = 0;
    let int_start = i;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        secs = secs.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        i += 1;
    }
    if i == int_start || i - int_start > 12 || b.get(i) != Some(&b'.') {
        return None;
    }
    i += 1;
    let frac_start = i;
    let mut frac: u64 = 0;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        frac = frac * 10 + u64::from(d - b'0');
        i += 1;
        if i - frac_start > 6 {
            return None;
        }
    }
    let digits = i - frac_start;
    if digits == 0 || b.get(i) != Some(&b']') {
        return None;
    }
    for _ in digits..6 {
        frac *= 10;
    }
    i += 1;
    if b.get(i) == Some(&b' ') {
        i += 1;
    }
    Some((secs.checked_mul(1_000_000)?.checked_add(frac)?, i))
}

/// The inside of a `dmesg -T` (`Sun Nov 29 14:00:00 2026`) or `dmesg -H` (`Nov29 14:00`,
/// `Dec 1 14:00`, `  +0.000123`) timestamp. The plain `[ 5123.456789]` is not one of them
/// (the kmsg parser reads it).
fn is_human_dmesg_time(ts: &[u8]) -> bool {
    let mut words = ts.split(|c| *c == b' ').filter(|w| !w.is_empty());
    let (Some(first), second) = (words.next(), words.next()) else {
        return false;
    };
    let colons = |w: &[u8]| w.iter().filter(|c| **c == b':').count();
    let clock =
        |w: &[u8], n: usize| colons(w) == n && w.iter().all(|c| c.is_ascii_digit() || *c == b':');
    // Relative: "+0.000123" (also "-0.000001" after a clock change).
    if second.is_none() && matches!(first.first(), Some(b'+' | b'-')) {
        let num = &first[1..];
        return num.contains(&b'.') && num.iter().all(|c| c.is_ascii_digit() || *c == b'.');
    }
    let Some(second) = second else {
        return false;
    };
    let third = words.next();
    let fourth = words.next();
    let fifth = words.next();
    let month = |w: &[u8]| w.len() >= 3 && w[..3].iter().all(u8::is_ascii_alphabetic);
    match (third, fourth, fifth, words.next()) {
        // -H: "Nov29 14:00"
        (None, None, None, None) => month(first) && clock(second, 1),
        // -H: "Dec 1 14:00"
        (Some(t), None, None, None) => {
            month(first) && second.iter().all(u8::is_ascii_digit) && clock(t, 1)
        }
        // -T: "Sun Nov 29 14:00:00 2026"
        (Some(_), Some(t), Some(y), None) => {
            month(first) && month(second) && clock(t, 2) && y.iter().all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

/// `2026-11-29T14:00:00,123456+00:00 ` (dmesg --time-format iso) without ` kernel: `.
fn is_iso_time(b: &[u8]) -> bool {
    b.len() > 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
}

/// The hasher of the classification cache, which hashes every line that holds an anchor:
/// std's SipHash cost about a tenth of `explain --file` on a log dense with matching lines.
/// A multiply-rotate hash over 8-byte words (FxHash's scheme), seeded per process from
/// std's `RandomState` so that a crafted log cannot rely on fixed collisions. Not a
/// cryptographic hash; the worst a collision storm can do is slow this one command down.
#[derive(Clone)]
pub(super) struct LineHashBuilder(u64);

impl Default for LineHashBuilder {
    fn default() -> Self {
        use std::hash::BuildHasher;
        LineHashBuilder(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64) | 1)
    }
}

impl std::hash::BuildHasher for LineHashBuilder {
    type Hasher = LineHasher;
    fn build_hasher(&self) -> LineHasher {
        LineHasher(self.0)
    }
}

pub(super) struct LineHasher(u64);

impl LineHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    #[inline]
    fn mix(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(Self::K);
    }
}

impl std::hash::Hasher for LineHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Two independent lanes over 16-byte blocks: the multiply chain is latency-bound,
        // so two chains run in about the time of one.
        let mut blocks = bytes.chunks_exact(16);
        let mut other = self.0 ^ 0x9e37_79b9_7f4a_7c15;
        for c in &mut blocks {
            let (x, y) = c.split_at(8);
            let (mut wx, mut wy) = ([0u8; 8], [0u8; 8]);
            wx.copy_from_slice(x);
            wy.copy_from_slice(y);
            self.mix(u64::from_le_bytes(wx));
            other = (other.rotate_left(5) ^ u64::from_le_bytes(wy)).wrapping_mul(Self::K);
        }
        self.mix(other);
        let mut chunks = blocks.remainder().chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let mut w = [0u8; 8];
            w[..tail.len()].copy_from_slice(tail);
            self.mix(u64::from_le_bytes(w) ^ ((tail.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn finish(&self) -> u64 {
        // A final avalanche (splitmix64's) so the table's low bits depend on every word.
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Bytes read per chunk of a saved log.
const CHUNK: usize = 1 << 20;

/// The most a chunk grows to hold one record and its dictionary lines.
const MAX_CHUNK: usize = 16 << 20;

#[cold]
fn unreachable_read_error() -> Findings {
    // Reading from a byte slice cannot fail; an empty report rather than a panic.
    Findings::default()
}

fn trim_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

fn count_newlines(b: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', b).count()
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn secs(usec: u64) -> String {
    format!("{}.{:06}s", usec / 1_000_000, usec % 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::io::lines::Trickle;

    fn summary(r: &Findings) -> Vec<(String, u64, usize, usize, Option<String>)> {
        r.groups
            .iter()
            .map(|g| {
                (
                    g.signature.kind.name().to_string(),
                    g.count,
                    g.first_line,
                    g.last_line,
                    g.signature.device.pci.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn syslog_journal_and_dmesg_t_prefixes_are_stripped() {
        let t = "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, \
                 new_state=0x3";
        for line in [
            format!("Nov 29 14:00:00 host kernel: [ 5123.456789] {t}"),
            format!("Nov  9 14:00:00 host kernel: {t}"),
            format!("2026-11-29T14:00:00.123456+00:00 host kernel: {t}"),
            format!("[Sun Nov 29 14:00:00 2026] {t}"),
        ] {
            let r = Findings::scan(line.as_bytes(), true);
            assert_eq!(r.recognised, 1, "{line}");
            let d = &r.groups[0].signature.device;
            assert_eq!(d.pci.as_deref(), Some("0000:02:00.0"), "{line}");
            assert_eq!(d.rdma_dev.as_deref(), Some("rocep2s0f0"), "{line}");
        }
        // Not a log prefix: left alone.
        assert_eq!(strip_log_prefix("[   1.000000] x"), "[   1.000000] x");
        assert_eq!(
            strip_log_prefix("a b c d e f g kernel: x"),
            "a b c d e f g kernel: x"
        );
    }

    #[test]
    fn dmesg_decode_and_talosctl_wrappers_are_stripped_for_the_kernel_facility_only() {
        let t = "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, \
                 new_state=0x3";
        // util-linux dmesg -x pads facility and level to six columns; -x combines with -T.
        // talosctl prints "<node>: <facility>: <level, right-aligned>: [<RFC 3339>]: ".
        for line in [
            format!("kern  :err   : [ 5123.456789] {t}"),
            format!("kern  :notice: [Sun Nov 29 14:00:00 2026] {t}"),
            format!("kern  :warn  : {t}"),
            format!("10.5.0.3: kern:    info: [2022-07-28T11:49:42.489473063Z]: {t}"),
            format!("node-a: kern: warning: [2024-01-01T00:00:00.000Z]: {t}"),
            // one node: no "<node>: "
            format!("kern: warning: [2024-10-29T13:44:17.655294812Z]: {t}"),
            // quoted in a mail, indented
            format!("        [177617.255969] {t}"),
            format!("\t[Sun Nov 29 14:00:00 2026] {t}"),
            // RFC 5424 syslog of the kernel
            format!("<3>1 2020-12-02T21:55:55.868531+01:00 stkub15 kernel - - - {t}"),
        ] {
            let r = Findings::scan(line.as_bytes(), true);
            assert_eq!(r.recognised, 1, "{line}");
            let d = &r.groups[0].signature.device;
            assert_eq!(d.pci.as_deref(), Some("0000:02:00.0"), "{line}");
            let v = recognise_saved_line(&line);
            assert_eq!(
                v.subsystem.as_ref().map(|e| e.subsystem.name()),
                Some("nic"),
                "{line}"
            );
        }
        // RFC 5424 lines of a process are not unwrapped.
        let user = format!("<14>1 2020-12-02T21:55:55.868531+01:00 h myapp - - - {t}");
        assert_eq!(strip_log_prefix(&user), user);
        // A process's line (facility user) is not unwrapped, and the wrapper's words are no
        // driver name.
        for line in [
            "user  :warn  : [ 12.000000] mlx5_core 0000:01:00.0: handle_hca_cap failed",
            "10.5.0.3: user: warning: [2024-02-19T20:45:36.959145652Z]: mlx5_core 0000:01:00.0: handle_hca_cap failed",
            "kern  :err   : [ 12.000000] usb 1-1: device descriptor read/64, error -71",
            "10.5.0.3: kern:    info: [2022-07-28T11:49:42.489473063Z]: cni0: port 1(veth32488a86) entered blocking state",
            "user: warning: [2024-02-19T20:45:36.959145652Z]: mlx5_core 0000:01:00.0: handle_hca_cap failed",
            "    [ 12.000000] usb 1-1: device descriptor read/64, error -71",
        ] {
            assert!(!recognise_saved_line(line).recognised(), "{line}");
        }
        assert_eq!(strip_dmesg_decode("kern  :bogus : x"), None);
        assert_eq!(
            strip_talosctl("10.5.0.3: kern:    info: [yesterday]: x"),
            None
        );
    }

    #[test]
    fn the_plain_dmesg_fast_path_reads_what_the_parser_reads() {
        for line in [
            "[ 5123.456789] x",
            "[    0.000000] x",
            "[1.5] x",
            "[ 12.1234567] x",
            "[12.] x",
            "[ 1.000001]x",
            "[ 99999999999999.000001] x",
        ] {
            let parsed = parse_saved_line(line).ok().and_then(|r| r.usec);
            // `None`: left to the slow path, which may still read it.
            if let Some((usec, at)) = plain_dmesg_stamp(line.as_bytes()) {
                assert_eq!(Some(usec), parsed, "{line}");
                assert_eq!(&line[at..], "x", "{line}");
            }
        }
        // Repeats of one line through the fast path: counted, first/last kept.
        let mut log = String::new();
        for i in 0..5u64 {
            log.push_str(&format!(
                "[{i:5}.000001] infiniband rxe_ini: Couldn't open port 1\n[{i:5}.000002] other\n"
            ));
        }
        let r = Findings::scan(log.as_bytes(), false);
        assert_eq!((r.lines, r.recognised, r.groups.len()), (10, 5, 1));
        let g = &r.groups[0];
        assert_eq!((g.count, g.first_line, g.last_line), (5, 1, 9));
        assert_eq!((g.first_usec, g.last_usec), (Some(1), Some(4_000_001)));
    }

    #[test]
    fn chunk_boundaries_do_not_change_the_result() {
        let mut log = String::new();
        for i in 0..40u32 {
            log.push_str(&format!("6,{i},{i}000,-;unrelated line number {i}\n"));
            log.push_str(&format!(
                "4,{},{i}001,-;rocep2s0f0: modify_qp invalid for qp_id=1, \
                 old_state=0x6, new_state=0x3\n SUBSYSTEM=pci\n DEVICE=+pci:0000:02:00.0\n",
                i + 1000
            ));
        }
        log.push_str("[   1.000000] infiniband rocep2s0f0: set down"); // no final newline
        let whole = Findings::scan_reader_chunked(log.as_bytes(), 1 << 20).expect("reads");
        assert_eq!(whole.lines, 161);
        assert_eq!(whole.recognised, 41);
        for chunk in [1, 7, 50, 64, 97, 300, 4096] {
            for trickle in [1, 13, 1 << 20] {
                let r = Findings::scan_reader_chunked(Trickle(log.as_bytes(), trickle), chunk)
                    .expect("reads");
                assert_eq!(r.lines, whole.lines, "chunk {chunk} trickle {trickle}");
                assert_eq!(r.recognised, whole.recognised, "chunk {chunk}");
                assert_eq!(
                    summary(&r),
                    summary(&whole),
                    "chunk {chunk} trickle {trickle}"
                );
            }
        }
        // The dictionary was attached every time: the PCI function comes only from DEVICE=.
        assert_eq!(whole.groups.len(), 2);
        assert_eq!(
            whole.groups[0].signature.device.pci.as_deref(),
            Some("0000:02:00.0")
        );
        assert_eq!(whole.groups[0].count, 40);
        assert_eq!(whole.groups[0].first_line, 2);
        assert_eq!(whole.groups[0].last_line, 158);
    }
}
