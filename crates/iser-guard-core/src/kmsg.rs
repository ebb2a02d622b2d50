//! Kernel log records: the /dev/kmsg record format and the saved-log formats operators paste.
//!
//! # Formats understood
//!
//! * **/dev/kmsg records** (Documentation/ABI/testing/dev-kmsg, kernel/printk/printk.c
//!   `info_print_ext_header`, `msg_add_ext_text`, `msg_add_dict_text`):
//!
//!   ```text
//!   6,401,10063342,-;infiniband rxe_ini: set active
//!    SUBSYSTEM=infiniband
//!    DEVICE=+infiniband:rxe_ini
//!   ```
//!
//!   The header is `prio,seq,usec,flags[,more fields];` where `prio = facility << 3 | level`,
//!   `flags` is `-` or `c` (a fragment of a continued line; kernels before 4.x also wrote `+`)
//!   and further comma fields (e.g. `caller=T123` with `CONFIG_PRINTK_CALLER`) are ignored.
//!   The text ends at `\n`. Every byte below 0x20, at or above 0x7f, and the backslash itself
//!   is written as `\xNN`, so a record is always one line of printable ASCII. Dictionary lines
//!   follow, each ` KEY=VALUE\n` with the value escaped the same way.
//! * **Saved logs** for `explain --file`, one line at a time, format detected per line:
//!   `dmesg -r` (`<6>[   26.397686] text`), plain `dmesg` and serial consoles
//!   (`[   26.397686] text`), `cat /dev/kmsg` dumps (records as above, dictionary lines
//!   attached to the record before them), and bare text lines.
//!
//! # Two representations
//!
//! * [`RecordRef`] borrows from the input and never allocates: the text stays escaped
//!   ([`RecordRef::unescaped_text`] decodes lazily, borrowing when there is nothing to decode),
//!   the dictionary is a borrowed slice parsed on demand ([`Dict`]). [`SavedLog`] yields these,
//!   so scanning a multi-million-line log costs a line split and a header parse per line.
//! * [`Record`] owns its decoded text and dictionary: what the live reader (`crate::io::kmsg`)
//!   hands to the daemon. [`Record::to_kmsg`] writes one back in /dev/kmsg syntax.
//!
//! Nothing here does I/O; bad input gives a typed [`KmsgParseError`], never a panic.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;

/// The syslog facility of kernel records. Only records of this facility may trigger actions:
/// anything else was written by userspace and could be forged.
pub const KERNEL_FACILITY: u8 = 0;

/// The facility the kernel gives records written to /dev/kmsg by userspace without a
/// facility of their own (`LOG_USER`): `<3>text` written by a process becomes prio 11.
pub const USER_FACILITY: u8 = 1;

/// Largest `prio` value: the kernel stores the facility in a `u8`.
const MAX_PRIO: u32 = (u8::MAX as u32) << 3 | 7;

/// How many bytes of offending input an error message quotes.
const QUOTE_LEN: usize = 40;

/// One kernel log record, owned and decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// Syslog facility (`prio >> 3`); 0 for the kernel.
    pub facility: u8,
    /// Syslog level (`prio & 7`): 0 emerg … 7 debug.
    pub level: u8,
    /// The kernel's 64-bit sequence number.
    pub seq: u64,
    /// Monotonic timestamp in microseconds since boot.
    pub usec: u64,
    /// The record is a fragment of a continued line (flag `c`).
    pub continuation: bool,
    /// The message text, `\xNN` escapes decoded.
    pub text: String,
    /// Dictionary (` KEY=VALUE` lines) in order, e.g. `SUBSYSTEM=infiniband`.
    pub dict: Vec<(String, String)>,
}

impl Record {
    /// Written by the kernel itself (facility 0), so it may trigger actions.
    pub fn is_kernel(&self) -> bool {
        self.facility == KERNEL_FACILITY
    }

    /// The value of a dictionary key.
    pub fn dict_value(&self, key: &str) -> Option<&str> {
        self.dict
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The syslog priority as the kernel writes it: `facility << 3 | level`.
    pub fn prio(&self) -> u32 {
        u32::from(self.facility) << 3 | u32::from(self.level & 7)
    }

    /// Parses one record as returned by one `read()` of /dev/kmsg (header line, then
    /// dictionary lines). Shorthand for [`parse_record`] + [`RecordRef::to_record`].
    pub fn parse(buf: &[u8]) -> Result<Record, KmsgParseError> {
        let r = parse_record(buf)?;
        // parse_record only returns complete records, so to_record cannot fail; map the
        // impossible case to an error rather than panicking.
        r.to_record().ok_or(KmsgParseError::Empty)
    }

    /// Writes the record in /dev/kmsg syntax, escaping the text and dictionary values like
    /// the kernel does: `prio,seq,usec,flags;text\n` then ` KEY=VALUE\n` per entry.
    ///
    /// Keys are written verbatim: they must be non-empty, without `=`, spaces or newlines
    /// (the kernel only uses `SUBSYSTEM` and `DEVICE`), or the output will not parse back.
    pub fn to_kmsg(&self) -> String {
        let mut out = String::with_capacity(32 + self.text.len() + 32 * self.dict.len());
        let flag = if self.continuation { 'c' } else { '-' };
        out.push_str(&format!(
            "{},{},{},{};",
            self.prio(),
            self.seq,
            self.usec,
            flag
        ));
        escape_into(self.text.as_bytes(), &mut out);
        out.push('\n');
        for (k, v) in &self.dict {
            out.push(' ');
            out.push_str(k);
            out.push('=');
            escape_into(v.as_bytes(), &mut out);
            out.push('\n');
        }
        out
    }
}

/// Appends `bytes` to `out` escaped the way the kernel escapes /dev/kmsg text: every byte
/// below `' '`, at or above 0x7f, and `\` becomes `\xNN` (lower-case hex).
pub(crate) fn escape_into(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        if !(b' '..0x7f).contains(&b) || b == b'\\' {
            out.push('\\');
            out.push('x');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push(char::from(b));
        }
    }
}

/// Decodes `\xNN` escapes. Borrows when `s` has no backslash (the common case). A backslash
/// not followed by two hex digits is kept as it is. Decoded bytes that are not UTF-8 are
/// replaced with U+FFFD.
pub fn unescape(s: &str) -> Cow<'_, str> {
    if !s.as_bytes().contains(&b'\\') {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\\' && b.get(i + 1) == Some(&b'x') {
            if let (Some(h), Some(l)) = (
                b.get(i + 2).and_then(|&d| hex_val(d)),
                b.get(i + 3).and_then(|&d| hex_val(d)),
            ) {
                out.push(h << 4 | l);
                i += 4;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

fn hex_val(d: u8) -> Option<u8> {
    match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        b'A'..=b'F' => Some(d - b'A' + 10),
        _ => None,
    }
}

/// Which syntax a line was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LineFormat {
    /// A /dev/kmsg record (`6,401,10063342,-;text`): text and dictionary are `\xNN`-escaped.
    Kmsg,
    /// `dmesg -r`: `<6>[   26.397686] text` (the timestamp may be absent: `dmesg -r -t`).
    DmesgRaw,
    /// Plain `dmesg` or a serial console: `[   26.397686] text`.
    Dmesg,
    /// Anything else: the whole line is the text.
    Bare,
}

/// Why a record or line could not be parsed. Each variant names what is wrong; the quoted
/// input is cut to a few dozen bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KmsgParseError {
    /// The record is empty.
    #[error("empty kernel log record")]
    Empty,
    /// The record is not UTF-8 (the kernel only writes printable ASCII to /dev/kmsg).
    #[error("kernel log record is not valid UTF-8 (the kernel escapes non-ASCII bytes as \\xNN)")]
    InvalidUtf8,
    /// No `;` ends the header.
    #[error("kernel log record has no ';' after its header `prio,seq,usec,flags`: {0:?}")]
    MissingSemicolon(String),
    /// The header has fewer than four comma-separated fields.
    #[error("kernel log record header lacks the {field} field: {header:?}")]
    MissingField {
        /// The absent field (`seq`, `usec` or `flags`).
        field: &'static str,
        /// The header.
        header: String,
    },
    /// The priority is not a number, or too large for a facility byte.
    #[error("bad priority {0:?}: expected a number 0..=2047 (facility << 3 | level)")]
    BadPrio(String),
    /// The sequence number is not an unsigned 64-bit number.
    #[error("bad sequence number {0:?}: expected an unsigned 64-bit number")]
    BadSeq(String),
    /// The timestamp is not an unsigned 64-bit number of microseconds.
    #[error("bad timestamp {0:?}: expected microseconds since boot")]
    BadUsec(String),
    /// The flags field is neither `-` nor `c`.
    #[error("bad flags {0:?}: expected '-' or 'c'")]
    BadFlags(String),
    /// A dictionary line is not ` KEY=VALUE`.
    #[error("bad dictionary line {0:?}: expected ' KEY=VALUE'")]
    BadDictLine(String),
    /// A `[seconds.micros]` timestamp does not fit in 64 bits of microseconds.
    #[error("bad timestamp {0:?}: does not fit in 64 bits of microseconds")]
    BadTimestamp(String),
}

fn quote(s: &str) -> String {
    let mut end = s.len().min(QUOTE_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default().to_string()
}

/// The dictionary of a record: zero or more ` KEY=VALUE` lines, borrowed from the input and
/// parsed on demand. Values are still escaped (see [`unescape`]). Copying it is free.
///
/// The kernel attaches at most `SUBSYSTEM` and `DEVICE` (forms `b<maj>:<min>`,
/// `c<maj>:<min>`, `n<ifindex>`, `+subsys:devname`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dict<'a> {
    /// The dictionary lines, separated by `\n`, each validated by [`dict_line`].
    raw: &'a str,
}

impl<'a> Dict<'a> {
    /// The empty dictionary.
    pub const EMPTY: Dict<'static> = Dict { raw: "" };

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The entries in order, as `(key, escaped value)`.
    pub fn iter(&self) -> DictIter<'a> {
        DictIter { rest: self.raw }
    }

    /// The escaped value of the first entry named `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The decoded value of the first entry named `key`.
    pub fn get_unescaped(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key).map(unescape)
    }

    /// The raw dictionary lines as they appeared in the input.
    pub fn as_raw(&self) -> &'a str {
        self.raw
    }
}

impl<'a> IntoIterator for Dict<'a> {
    type Item = (&'a str, &'a str);
    type IntoIter = DictIter<'a>;
    fn into_iter(self) -> DictIter<'a> {
        self.iter()
    }
}

/// Iterator over a [`Dict`]'s `(key, escaped value)` pairs.
#[derive(Debug, Clone)]
pub struct DictIter<'a> {
    rest: &'a str,
}

impl<'a> Iterator for DictIter<'a> {
    type Item = (&'a str, &'a str);
    fn next(&mut self) -> Option<Self::Item> {
        while !self.rest.is_empty() {
            let (line, rest) = match self.rest.split_once('\n') {
                Some((l, r)) => (l, r),
                None => (self.rest, ""),
            };
            self.rest = rest;
            if let Some(kv) = dict_line(line) {
                return Some(kv);
            }
        }
        None
    }
}

/// Splits a dictionary line ` KEY=VALUE` (a trailing `\r` is dropped) into key and escaped
/// value. The key must be non-empty ASCII letters, digits or `_`.
pub fn dict_line(line: &str) -> Option<(&str, &str)> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let body = line.strip_prefix(' ')?;
    let (key, value) = body.split_once('=')?;
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    Some((key, value))
}

/// Who wrote a record, as far as its format can prove it ([`RecordRef::origin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "origin", content = "facility")]
pub enum RecordOrigin {
    /// A /dev/kmsg record of facility 0: written by the kernel. The only origin that may
    /// trigger an action.
    Kernel,
    /// Written into /dev/kmsg by a process (facility ≠ 0): could be forged.
    Userspace(u8),
    /// The format cannot prove who wrote it: reported, never an action trigger.
    Unproven(Unproven),
}

/// Why a record's origin is unproven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unproven {
    /// No priority at all (plain `dmesg`, syslog, journal text, bare lines).
    NoPriority,
    /// A `dmesg -r` priority below 8: a level without a trustworthy facility.
    PriorityWithoutFacility,
}

/// One kernel log record or saved-log line, borrowed from the input. Fields a format does
/// not carry are `None` (plain `dmesg` has no priority or sequence number; bare text has
/// nothing but text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The syntax the record was written in.
    pub format: LineFormat,
    /// Syslog facility (`prio >> 3`), when the format carries a priority.
    pub facility: Option<u8>,
    /// Syslog level (`prio & 7`), when the format carries a priority.
    pub level: Option<u8>,
    /// The kernel's sequence number (only /dev/kmsg records carry one).
    pub seq: Option<u64>,
    /// Microseconds since boot, when the format carries a timestamp.
    pub usec: Option<u64>,
    /// A fragment of a continued line (flag `c`; /dev/kmsg records only).
    pub continuation: bool,
    /// The text as written: `\xNN`-escaped for [`LineFormat::Kmsg`], verbatim otherwise.
    /// Signature prefilters can match on it directly (the messages iser-guard looks for
    /// contain nothing that is escaped).
    pub text: &'a str,
    /// The dictionary (empty unless the format is [`LineFormat::Kmsg`]).
    pub dict: Dict<'a>,
}

impl<'a> RecordRef<'a> {
    /// A bare text line.
    pub fn bare(text: &'a str) -> Self {
        RecordRef {
            format: LineFormat::Bare,
            facility: None,
            level: None,
            seq: None,
            usec: None,
            continuation: false,
            text,
            dict: Dict::EMPTY,
        }
    }

    /// The text with `\xNN` escapes decoded (only /dev/kmsg records are escaped). Borrows
    /// unless there is something to decode.
    pub fn unescaped_text(&self) -> Cow<'a, str> {
        match self.format {
            LineFormat::Kmsg => unescape(self.text),
            _ => Cow::Borrowed(self.text),
        }
    }

    /// Known to be written by the kernel: a /dev/kmsg record of facility 0. Nothing else is
    /// (see [`RecordRef::origin`]).
    pub fn is_kernel(&self) -> bool {
        self.origin() == RecordOrigin::Kernel
    }

    /// What the record's format proves about who wrote it. Only a /dev/kmsg record proves
    /// kernel origin (facility 0). A `dmesg -r` priority below 8 does not: util-linux's
    /// `dmesg -r` built the priority with glibc's `LOG_MAKEPRI(fac, level)`, which expects a
    /// pre-shifted facility, so until util-linux added `LOG_RAW_FAC_PRI` (2023, glibc bug
    /// 30563) a userspace record of facility 1–7 came out as `facility | level`, i.e. below
    /// 8, looking like the kernel's. A priority of 8 or more does prove userspace origin
    /// (the kernel's facility 0 never yields one, either way of printing).
    pub fn origin(&self) -> RecordOrigin {
        match (self.format, self.facility) {
            (LineFormat::Kmsg, Some(KERNEL_FACILITY)) => RecordOrigin::Kernel,
            (LineFormat::Kmsg | LineFormat::DmesgRaw, Some(f)) if f != KERNEL_FACILITY => {
                RecordOrigin::Userspace(f)
            }
            (LineFormat::DmesgRaw, _) => RecordOrigin::Unproven(Unproven::PriorityWithoutFacility),
            _ => RecordOrigin::Unproven(Unproven::NoPriority),
        }
    }

    /// The escaped value of a dictionary key.
    pub fn dict_value(&self, key: &str) -> Option<&'a str> {
        self.dict.get(key)
    }

    /// The owned, decoded [`Record`]; `None` unless the record carries a priority, sequence
    /// number and timestamp (i.e. it came from /dev/kmsg).
    pub fn to_record(&self) -> Option<Record> {
        Some(Record {
            facility: self.facility?,
            level: self.level?,
            seq: self.seq?,
            usec: self.usec?,
            continuation: self.continuation,
            text: self.unescaped_text().into_owned(),
            dict: self
                .dict
                .iter()
                .map(|(k, v)| (k.to_string(), unescape(v).into_owned()))
                .collect(),
        })
    }
}

/// Parses one /dev/kmsg record as returned by one `read()`: the header line, then dictionary
/// lines. Strict: every dictionary line must be ` KEY=VALUE`.
pub fn parse_record(buf: &[u8]) -> Result<RecordRef<'_>, KmsgParseError> {
    let s = std::str::from_utf8(buf).map_err(|_| KmsgParseError::InvalidUtf8)?;
    parse_record_str(s)
}

/// [`parse_record`] on text already known to be UTF-8.
pub(crate) fn parse_record_str(s: &str) -> Result<RecordRef<'_>, KmsgParseError> {
    let (line, rest) = match s.split_once('\n') {
        Some((l, r)) => (l, r),
        None => (s, ""),
    };
    let mut rec = parse_kmsg_line(line)?;
    let dict = rest.strip_suffix('\n').unwrap_or(rest);
    for l in dict.split('\n') {
        if !l.is_empty() && dict_line(l).is_none() {
            return Err(KmsgParseError::BadDictLine(quote(l)));
        }
    }
    rec.dict = Dict { raw: dict };
    Ok(rec)
}

/// Parses the header line of a /dev/kmsg record (no dictionary), e.g.
/// `6,401,10063342,-;infiniband rxe_ini: set active`. A trailing `\r` is dropped.
pub(crate) fn parse_kmsg_line(line: &str) -> Result<RecordRef<'_>, KmsgParseError> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.is_empty() {
        return Err(KmsgParseError::Empty);
    }
    let semi = memchr::memchr(b';', line.as_bytes())
        .ok_or_else(|| KmsgParseError::MissingSemicolon(quote(line)))?;
    let header = line.get(..semi).unwrap_or_default();
    let text = line.get(semi + 1..).unwrap_or_default();
    let mut fields = header.split(',');
    let missing = |field| KmsgParseError::MissingField {
        field,
        header: quote(header),
    };
    let prio_s = fields.next().unwrap_or_default();
    let prio = parse_u64(prio_s)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|&p| p <= MAX_PRIO)
        .ok_or_else(|| KmsgParseError::BadPrio(quote(prio_s)))?;
    let seq_s = fields.next().ok_or_else(|| missing("seq"))?;
    let seq = parse_u64(seq_s).ok_or_else(|| KmsgParseError::BadSeq(quote(seq_s)))?;
    let usec_s = fields.next().ok_or_else(|| missing("usec"))?;
    let usec = parse_u64(usec_s).ok_or_else(|| KmsgParseError::BadUsec(quote(usec_s)))?;
    let flags = fields.next().ok_or_else(|| missing("flags"))?;
    // Further fields (`caller=T123`, future additions) are deliberately ignored.
    let continuation = match flags {
        "-" => false,
        // `+` is what kernels before 4.x wrote for a fragment following a fragment.
        "c" | "+" => true,
        other => return Err(KmsgParseError::BadFlags(quote(other))),
    };
    let (facility, level) = split_prio(prio);
    Ok(RecordRef {
        format: LineFormat::Kmsg,
        facility: Some(facility),
        level: Some(level),
        seq: Some(seq),
        usec: Some(usec),
        continuation,
        text,
        dict: Dict::EMPTY,
    })
}

fn split_prio(prio: u32) -> (u8, u8) {
    // prio <= MAX_PRIO, so the facility fits; saturate rather than trust that blindly.
    let facility = u8::try_from(prio >> 3).unwrap_or(u8::MAX);
    let level = u8::try_from(prio & 7).unwrap_or(7);
    (facility, level)
}

/// A non-empty run of ASCII digits as a u64 (no sign, no spaces, no overflow).
fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// Parses `[   26.397686]` at the start of `s`. Returns the microseconds and the rest after
/// the `]` and one following space; `Ok(None)` if `s` does not start with such a timestamp;
/// an error if it does but the value overflows.
fn parse_bracket_ts(s: &str) -> Result<Option<(u64, &str)>, KmsgParseError> {
    let b = s.as_bytes();
    if b.first() != Some(&b'[') {
        return Ok(None);
    }
    let mut i = 1;
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let int_end = i;
    if int_end == int_start || b.get(i) != Some(&b'.') {
        return Ok(None);
    }
    i += 1;
    let frac_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let frac_end = i;
    if frac_end == frac_start || b.get(i) != Some(&b']') {
        return Ok(None);
    }
    let bad = || KmsgParseError::BadTimestamp(quote(s.get(..=i).unwrap_or(s)));
    let secs = parse_u64(s.get(int_start..int_end).unwrap_or_default()).ok_or_else(bad)?;
    // Scale the fraction to exactly six digits (dmesg prints six; be lenient).
    let frac = s.get(frac_start..frac_end).unwrap_or_default();
    let mut micros: u64 = 0;
    for k in 0..6 {
        let d = frac.as_bytes().get(k).map_or(0, |d| u64::from(d - b'0'));
        micros = micros * 10 + d;
    }
    let usec = secs
        .checked_mul(1_000_000)
        .and_then(|v| v.checked_add(micros))
        .ok_or_else(bad)?;
    let rest = s.get(i + 1..).unwrap_or_default();
    let rest = strip_caller(rest);
    Ok(Some((usec, rest.strip_prefix(' ').unwrap_or(rest))))
}

/// Drops the printk caller field that dmesg prints right after the timestamp on kernels
/// built with CONFIG_PRINTK_CALLER (`[   32.435157][    T1] text`: a task id `T<pid>` or,
/// in interrupt context, a CPU `C<n>`), so the text starts where it does without it. Also
/// for a line whose timestamp was cut off (`[  T880] text`).
fn strip_caller(rest: &str) -> &str {
    // Some dmesg builds print a blank between the two brackets.
    let Some(inner) = rest.strip_prefix('[').or_else(|| rest.strip_prefix(" [")) else {
        return rest;
    };
    let Some(close) = inner.find(']') else {
        return rest;
    };
    let id = inner[..close].trim_start_matches(' ');
    let is_caller = id.len() >= 2
        && matches!(id.as_bytes()[0], b'T' | b'C')
        && id[1..].bytes().all(|b| b.is_ascii_digit());
    if is_caller {
        &inner[close + 1..]
    } else {
        rest
    }
}

/// Parses one line of a saved log in whichever format it is written (see [`LineFormat`]).
/// A /dev/kmsg record line gets an empty dictionary here: [`SavedLog`] attaches the
/// dictionary lines that follow it.
///
/// Detection: a line starting with digits then `,` is a /dev/kmsg record; `<N>` starts a
/// `dmesg -r` line; `[seconds.micros]` a `dmesg` line; anything else is bare text (leading
/// blanks dropped). Only lines that claim a structured format and break it are errors.
pub fn parse_saved_line(line: &str) -> Result<RecordRef<'_>, KmsgParseError> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let b = line.as_bytes();
    match b.first() {
        Some(b'0'..=b'9') => {
            let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
            if b.get(digits) == Some(&b',') {
                return parse_kmsg_line(line);
            }
        }
        Some(b'<') => {
            let digits = b.iter().skip(1).take_while(|c| c.is_ascii_digit()).count();
            if (1..=4).contains(&digits) && b.get(digits + 1) == Some(&b'>') {
                let prio_s = line.get(1..=digits).unwrap_or_default();
                let prio = parse_u64(prio_s)
                    .and_then(|p| u32::try_from(p).ok())
                    .filter(|&p| p <= MAX_PRIO)
                    .ok_or_else(|| KmsgParseError::BadPrio(quote(prio_s)))?;
                let (facility, level) = split_prio(prio);
                let rest = line.get(digits + 2..).unwrap_or_default();
                let (usec, text) = match parse_bracket_ts(rest)? {
                    Some((u, t)) => (Some(u), t),
                    None => (None, rest),
                };
                return Ok(RecordRef {
                    format: LineFormat::DmesgRaw,
                    facility: Some(facility),
                    level: Some(level),
                    usec,
                    text,
                    ..RecordRef::bare("")
                });
            }
        }
        Some(b'[') => {
            if let Some((usec, text)) = parse_bracket_ts(line)? {
                return Ok(RecordRef {
                    format: LineFormat::Dmesg,
                    usec: Some(usec),
                    text,
                    ..RecordRef::bare("")
                });
            }
        }
        _ => {}
    }
    let text = line.trim_start();
    let uncalled = strip_caller(text);
    if uncalled.len() != text.len() {
        return Ok(RecordRef::bare(uncalled.trim_start()));
    }
    Ok(RecordRef::bare(text))
}

/// A record of a saved log with the line it starts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry<'a> {
    /// 1-based line number of the record's first line.
    pub line: usize,
    /// The record.
    pub record: RecordRef<'a>,
}

/// A saved-log line that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub error: KmsgParseError,
}

/// Iterator over the records of a whole saved log, the format detected line by line (see
/// [`parse_saved_line`]). Dictionary lines (` KEY=VALUE`) after a /dev/kmsg record are
/// attached to it. Empty lines are skipped. It allocates nothing per line.
///
/// ```
/// use iser_guard_core::kmsg::{LineFormat, SavedLog};
///
/// let log = "6,401,10063342,-;infiniband rxe_ini: set active\n SUBSYSTEM=infiniband\n \
///            DEVICE=+infiniband:rxe_ini\n[   26.397686] plain dmesg line\n";
/// let entries: Vec<_> = SavedLog::new(log).collect::<Result<_, _>>().unwrap();
/// assert_eq!(entries.len(), 2);
/// assert_eq!(entries[0].record.dict.get("DEVICE"), Some("+infiniband:rxe_ini"));
/// assert_eq!(entries[1].line, 4);
/// assert_eq!(entries[1].record.format, LineFormat::Dmesg);
/// assert_eq!(entries[1].record.usec, Some(26_397_686));
/// ```
#[derive(Debug, Clone)]
pub struct SavedLog<'a> {
    bytes: &'a [u8],
    /// The same input as `str` when all of it is UTF-8 (then lines need no validation).
    text: Option<&'a str>,
    pos: usize,
    /// Number of the line starting at `pos` (1-based).
    line: usize,
}

impl<'a> SavedLog<'a> {
    /// Iterates over a log held as text.
    pub fn new(text: &'a str) -> Self {
        SavedLog {
            bytes: text.as_bytes(),
            text: Some(text),
            pos: 0,
            line: 1,
        }
    }

    /// Iterates over a log held as bytes (e.g. a file read whole). The input is validated as
    /// UTF-8 once; if that fails, each line is validated on its own and the lines that are
    /// not UTF-8 come out as [`KmsgParseError::InvalidUtf8`] errors.
    pub fn from_bytes(bytes: &'a [u8]) -> Self {
        SavedLog {
            bytes,
            text: std::str::from_utf8(bytes).ok(),
            pos: 0,
            line: 1,
        }
    }

    /// Byte offset in the input where the next line to be read starts.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Skips ahead to the line containing byte `offset`, so that the next item is the record
    /// of that line (a no-op if that line was already read). If `offset` falls in the
    /// dictionary lines of a /dev/kmsg record, the skip stops at the record itself. Line
    /// numbers stay right (the skipped newlines are counted).
    ///
    /// With a multi-pattern search over the whole buffer (e.g.
    /// `crate::signatures::next_anchor`) this parses only the lines that can match:
    ///
    /// ```
    /// use iser_guard_core::kmsg::SavedLog;
    ///
    /// let log = "[ 1.000000] eth0: up\n[ 2.000000] sd 2:0:0:0: rejecting I/O to offline device\n";
    /// let mut saved = SavedLog::new(log);
    /// let hit = log.find("rejecting I/O").unwrap();
    /// saved.skip_to(hit);
    /// let entry = saved.next().unwrap().unwrap();
    /// assert_eq!((entry.line, entry.record.usec), (2, Some(2_000_000)));
    /// assert_eq!(saved.position(), log.len());
    /// ```
    pub fn skip_to(&mut self, offset: usize) {
        let offset = offset.min(self.bytes.len());
        if offset <= self.pos {
            return;
        }
        let line_start = |at: usize, floor: usize| -> usize {
            let window = self.bytes.get(floor..at).unwrap_or_default();
            memchr::memrchr(b'\n', window).map_or(floor, |n| floor + n + 1)
        };
        let mut start = line_start(offset, self.pos);
        // Back up over dictionary lines to the record they belong to, if they do belong to
        // one (after anything else they are lines of their own).
        let mut owner = start;
        while owner > self.pos && self.line_is_dict(owner) {
            owner = line_start(owner - 1, self.pos);
        }
        if owner != start && self.line_is_kmsg_record(owner) {
            start = owner;
        }
        let skipped = self.bytes.get(self.pos..start).unwrap_or_default();
        self.line += memchr::memchr_iter(b'\n', skipped).count();
        self.pos = start;
    }

    fn line_is_dict(&self, start: usize) -> bool {
        let (end, _) = self.line_bounds(start);
        self.line_str(start, end)
            .is_some_and(|l| dict_line(l).is_some())
    }

    fn line_is_kmsg_record(&self, start: usize) -> bool {
        let (end, _) = self.line_bounds(start);
        self.line_str(start, end)
            .and_then(|l| parse_saved_line(l).ok())
            .is_some_and(|r| r.format == LineFormat::Kmsg)
    }

    /// The line at `start`: its end (exclusive, before `\n`) and the start of the next.
    fn line_bounds(&self, start: usize) -> (usize, usize) {
        let rest = self.bytes.get(start..).unwrap_or_default();
        match memchr::memchr(b'\n', rest) {
            Some(n) => (start + n, start + n + 1),
            None => (self.bytes.len(), self.bytes.len()),
        }
    }

    fn line_str(&self, start: usize, end: usize) -> Option<&'a str> {
        match self.text {
            // Line boundaries are ASCII `\n`, so these are char boundaries.
            Some(t) => t.get(start..end),
            None => std::str::from_utf8(self.bytes.get(start..end)?).ok(),
        }
    }
}

impl<'a> Iterator for SavedLog<'a> {
    type Item = Result<LogEntry<'a>, LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.pos >= self.bytes.len() {
                return None;
            }
            let start = self.pos;
            let line_no = self.line;
            let (end, next) = self.line_bounds(start);
            self.pos = next;
            self.line += 1;
            let Some(line) = self.line_str(start, end) else {
                return Some(Err(LineError {
                    line: line_no,
                    error: KmsgParseError::InvalidUtf8,
                }));
            };
            if line.is_empty() || line == "\r" {
                continue;
            }
            let mut record = match parse_saved_line(line) {
                Ok(r) => r,
                Err(error) => {
                    return Some(Err(LineError {
                        line: line_no,
                        error,
                    }))
                }
            };
            if record.format == LineFormat::Kmsg {
                // Attach the dictionary lines that follow.
                let dict_start = self.pos;
                let mut dict_end = dict_start;
                while self.bytes.get(self.pos) == Some(&b' ') {
                    let (e, n) = self.line_bounds(self.pos);
                    match self.line_str(self.pos, e) {
                        Some(l) if dict_line(l).is_some() => {
                            dict_end = e;
                            self.pos = n;
                            self.line += 1;
                        }
                        _ => break,
                    }
                }
                if dict_end > dict_start {
                    if let Some(raw) = self.line_str(dict_start, dict_end) {
                        record.dict = Dict { raw };
                    }
                }
            }
            return Some(Ok(LogEntry {
                line: line_no,
                record,
            }));
        }
    }
}

impl fmt::Display for LineFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LineFormat::Kmsg => "kmsg",
            LineFormat::DmesgRaw => "dmesg -r",
            LineFormat::Dmesg => "dmesg",
            LineFormat::Bare => "text",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dmesg_caller_field_is_not_part_of_the_text() {
        // CONFIG_PRINTK_CALLER: a task (`T1`) or a CPU in interrupt context (`C3`).
        let r = parse_saved_line("[   32.435157][    T1] rdma_rxe: loaded").unwrap();
        assert_eq!(r.text, "rdma_rxe: loaded");
        assert_eq!(r.usec, Some(32_435_157));
        let r = parse_saved_line("<6>[    1.000001][  C3] ice 0000:02:00.0: x").unwrap();
        assert_eq!(r.text, "ice 0000:02:00.0: x");
        // A bracket that is not a caller stays.
        let r = parse_saved_line("[    1.000001] [drm] Initialized").unwrap();
        assert_eq!(r.text, "[drm] Initialized");
        let r = parse_saved_line("[    1.000001][Tx] y").unwrap();
        assert_eq!(r.text, "[Tx] y");
        // With a blank between the brackets, and with the timestamp cut off.
        let r = parse_saved_line("[  272.067526] [   T1759] nvme nvme5: x").unwrap();
        assert_eq!(r.text, "nvme nvme5: x");
        let r = parse_saved_line("[  T880] ib_srpt MAD registration failed").unwrap();
        assert_eq!(r.text, "ib_srpt MAD registration failed");
    }

    #[test]
    fn parses_record_with_dictionary_and_caller() {
        let buf = b"3,1234,5678901,-,caller=T123;ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3\n SUBSYSTEM=pci\n DEVICE=+pci:0000:02:00.0\n";
        let r = parse_record(buf).unwrap();
        assert_eq!(r.format, LineFormat::Kmsg);
        assert_eq!((r.facility, r.level), (Some(0), Some(3)));
        assert_eq!((r.seq, r.usec), (Some(1234), Some(5_678_901)));
        assert!(!r.continuation);
        assert!(r.is_kernel());
        assert!(r.text.starts_with("ice 0000:02:00.0 rocep2s0f0: modify_qp"));
        let d: Vec<_> = r.dict.iter().collect();
        assert_eq!(
            d,
            vec![("SUBSYSTEM", "pci"), ("DEVICE", "+pci:0000:02:00.0")]
        );
        let owned = r.to_record().unwrap();
        assert_eq!(owned.dict_value("DEVICE"), Some("+pci:0000:02:00.0"));
        assert_eq!(owned.prio(), 3);
    }

    #[test]
    fn user_written_record_is_not_kernel() {
        let r = Record::parse(b"11,7,100,c;hello\n").unwrap();
        assert_eq!((r.facility, r.level), (USER_FACILITY, 3));
        assert!(r.continuation);
        assert!(!r.is_kernel());
    }

    #[test]
    fn escapes_decode_lazily() {
        let r = parse_record(b"6,92,564046,-;rcu: \\x09RCU restricting \\x5c path\n").unwrap();
        assert_eq!(r.text, "rcu: \\x09RCU restricting \\x5c path");
        assert_eq!(r.unescaped_text(), "rcu: \tRCU restricting \\ path");
        let plain = parse_record(b"6,1,2,-;nothing to decode").unwrap();
        assert!(matches!(plain.unescaped_text(), Cow::Borrowed(_)));
        // Malformed escapes stay literal; decoded non-UTF-8 becomes U+FFFD.
        assert_eq!(unescape("a\\xZZ\\x"), "a\\xZZ\\x");
        assert_eq!(unescape("\\xff!"), "\u{fffd}!");
        assert_eq!(unescape("\\xc3\\xa9"), "é");
    }

    #[test]
    fn errors_name_the_bad_part() {
        let e = |b: &[u8]| parse_record(b).unwrap_err();
        assert_eq!(e(b""), KmsgParseError::Empty);
        assert!(matches!(
            e(b"6,1,2,- no semicolon"),
            KmsgParseError::MissingSemicolon(_)
        ));
        assert_eq!(e(b"x,1,2,-;t"), KmsgParseError::BadPrio("x".into()));
        assert_eq!(e(b"2048,1,2,-;t"), KmsgParseError::BadPrio("2048".into()));
        assert_eq!(e(b"6,-1,2,-;t"), KmsgParseError::BadSeq("-1".into()));
        assert_eq!(
            e(b"6,99999999999999999999,2,-;t"),
            KmsgParseError::BadSeq("99999999999999999999".into())
        );
        assert_eq!(e(b"6,1,2.5,-;t"), KmsgParseError::BadUsec("2.5".into()));
        assert_eq!(e(b"6,1,2,x;t"), KmsgParseError::BadFlags("x".into()));
        assert!(matches!(
            e(b"6,1;t"),
            KmsgParseError::MissingField { field: "usec", .. }
        ));
        assert!(matches!(
            e(b"6,1,2;t"),
            KmsgParseError::MissingField { field: "flags", .. }
        ));
        assert!(matches!(
            e(b"6,1,2,-;t\nNOSPACE=1\n"),
            KmsgParseError::BadDictLine(_)
        ));
        assert!(matches!(
            e(b"6,1,2,-;t\n novalue\n"),
            KmsgParseError::BadDictLine(_)
        ));
        assert_eq!(e(b"6,1,2,-;\xff"), KmsgParseError::InvalidUtf8);
        let msg = e(b"6,1,2,x;t").to_string();
        assert!(
            msg.contains("bad flags") && msg.contains("'-' or 'c'"),
            "{msg}"
        );
    }

    #[test]
    fn saved_line_formats() {
        let r = parse_saved_line("<6>[   26.397686] iser: hello").unwrap();
        assert_eq!(r.format, LineFormat::DmesgRaw);
        assert_eq!(
            (r.facility, r.level, r.usec),
            (Some(0), Some(6), Some(26_397_686))
        );
        assert_eq!(r.text, "iser: hello");
        let r = parse_saved_line("<14>no timestamp").unwrap();
        assert_eq!((r.facility, r.level, r.usec), (Some(1), Some(6), None));
        assert_eq!(r.text, "no timestamp");
        let r = parse_saved_line("[    0.000000] Linux version").unwrap();
        assert_eq!(r.format, LineFormat::Dmesg);
        assert_eq!((r.facility, r.usec), (None, Some(0)));
        assert!(!r.is_kernel());
        let r = parse_saved_line("[ 1.5] short fraction").unwrap();
        assert_eq!(r.usec, Some(1_500_000));
        let r = parse_saved_line("Begin: Loading essential drivers ... [    5.038129] x").unwrap();
        assert_eq!(r.format, LineFormat::Bare);
        let r = parse_saved_line("8021q: 802.1Q VLAN Support v1.8").unwrap();
        assert_eq!(r.format, LineFormat::Bare);
        let r = parse_saved_line("[Sun Nov 29 14:17:56 2026] ctime stamp").unwrap();
        assert_eq!(r.format, LineFormat::Bare);
        let r = parse_saved_line("       dmesg(1) may have more information").unwrap();
        assert_eq!(r.text, "dmesg(1) may have more information");
        assert!(matches!(
            parse_saved_line("[99999999999999999.000000] x"),
            Err(KmsgParseError::BadTimestamp(_))
        ));
        assert!(matches!(
            parse_saved_line("<9999>x"),
            Err(KmsgParseError::BadPrio(_))
        ));
    }

    #[test]
    fn saved_log_attaches_dict_and_reports_bad_lines() {
        let log = "6,1,10,-;a\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:01.0\n\n \
                   not a dict line\n6,x,1,-;bad\n[ 1.000000] b\r\n";
        let items: Vec<_> = SavedLog::new(log).collect();
        assert_eq!(items.len(), 4);
        let a = items[0].as_ref().unwrap();
        assert_eq!((a.line, a.record.dict.iter().count()), (1, 2));
        let t = items[1].as_ref().unwrap();
        assert_eq!((t.line, t.record.text), (5, "not a dict line"));
        assert_eq!(
            items[2].as_ref().unwrap_err(),
            &LineError {
                line: 6,
                error: KmsgParseError::BadSeq("x".into())
            }
        );
        let b = items[3].as_ref().unwrap();
        assert_eq!((b.line, b.record.text), (7, "b"));
    }

    #[test]
    fn saved_log_from_bytes_skips_invalid_utf8_lines_only() {
        let log = b"6,1,10,-;ok\n[ 1.000000] caf\xe9\n[ 2.000000] fine\n";
        let items: Vec<_> = SavedLog::from_bytes(log).collect();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].as_ref().unwrap().record.text, "ok");
        assert_eq!(
            items[1].as_ref().unwrap_err().error,
            KmsgParseError::InvalidUtf8
        );
        assert_eq!(items[2].as_ref().unwrap().record.text, "fine");
    }

    #[test]
    fn skip_to_lands_on_the_record_owning_a_dictionary_line() {
        let log = "6,1,10,-;a\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:01.0\n[ 1.0] b\n[ 2.0] c\n";
        let mut s = SavedLog::new(log);
        s.skip_to(log.find("DEVICE").unwrap());
        let e = s.next().unwrap().unwrap();
        assert_eq!((e.line, e.record.seq), (1, Some(1)));
        assert_eq!(e.record.dict.get("DEVICE"), Some("+pci:0000:00:01.0"));
        s.skip_to(log.find("] c").unwrap());
        let e = s.next().unwrap().unwrap();
        assert_eq!((e.line, e.record.text), (5, "c"));
        // Backwards or past the end: harmless.
        s.skip_to(0);
        s.skip_to(usize::MAX);
        assert!(s.next().is_none());
    }

    #[test]
    fn to_kmsg_escapes_like_the_kernel() {
        let r = Record {
            facility: 0,
            level: 4,
            seq: 368,
            usec: 3_095_882,
            continuation: false,
            text: "a\nb\\c\té".into(),
            dict: vec![("DEVICE".into(), "+x:y z".into())],
        };
        assert_eq!(
            r.to_kmsg(),
            "4,368,3095882,-;a\\x0ab\\x5cc\\x09\\xc3\\xa9\n DEVICE=+x:y z\n"
        );
        assert_eq!(Record::parse(r.to_kmsg().as_bytes()).unwrap(), r);
    }
}
