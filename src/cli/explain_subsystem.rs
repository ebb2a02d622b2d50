//! The part of `iser-guard explain` that reports the subsystem layer
//! (`core::signatures::subsystem`): lines of the RDMA, NIC, iSER/iSCSI, SCSI, block and NVMe
//! subsystems that match no signature, folded by subsystem, device and message shape, with
//! what they mean and what to look at next; and whole oops/WARN reports in those subsystems
//! as one entry each.
//!
//! The signatures' report (src/cli/explain.rs) decides the verdict and the exit code; this
//! part never changes either.

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use super::explain::LineHashBuilder;
use crate::core::signatures::subsystem::{
    self, explain_event, level_name, trace::TraceAssembler, trace::TraceEvent, Subsystem,
    SubsystemEvent, SubsystemExplanation,
};

/// At most this many distinct folded entries are kept (a huge log of many different lines
/// stays bounded in memory); the rest are counted.
const MAX_GROUPS: usize = 4096;
/// At most this many distinct texts are cached.
const MAX_CACHED: usize = 1 << 16;
/// At most this many entries are printed as text (all are in `--json`).
const MAX_TEXT_GROUPS: usize = 200;

/// One folded entry: a subsystem event seen one or more times.
#[derive(Debug, Serialize)]
pub(super) struct SubsystemGroup {
    count: u64,
    first_line: usize,
    last_line: usize,
    /// The first occurrence's text.
    line: String,
    event: SubsystemEvent,
    explanation: SubsystemExplanation,
}

/// One oops/WARN report, or several with the same header and first frame (folded).
#[derive(Debug, Serialize)]
pub(super) struct TraceEntry {
    /// The line of the first one's header (1-based).
    line: usize,
    /// How many such reports.
    count: u64,
    #[serde(flatten)]
    trace: TraceEvent,
}

/// What the subsystem layer found in one input.
#[derive(Debug, Default)]
pub(super) struct SubsystemReport {
    /// Lines recognised by the subsystem layer alone (no signature).
    pub recognised: u64,
    groups: Vec<SubsystemGroup>,
    index: HashMap<String, usize>,
    /// Texts seen before → their entry (None: not recognised), so a line repeated a million
    /// times is recognised once. The level is not in the key: a repeat counts with the
    /// first occurrence's level.
    cache: HashMap<String, Option<usize>, LineHashBuilder>,
    dropped: u64,
    assembler: TraceAssembler,
    /// The header line of the report being assembled.
    trace_start: usize,
    traces: Vec<TraceEntry>,
    trace_index: HashMap<String, usize>,
}

impl SubsystemReport {
    /// Feeds one line's text to the trace assembler: every line, in order, whether or not
    /// it is recognised otherwise. Cheap when no report is open and the line cannot open
    /// one.
    pub fn feed_trace(&mut self, text: &str, line_no: usize) {
        let opens = matches!(
            text.trim_start().as_bytes().first(),
            Some(b'-' | b'W' | b'B' | b'k' | b'O' | b'g' | b'U' | b'I' | b'K')
        );
        if !opens && !self.assembler.is_open() {
            return;
        }
        if let Some(done) = self.assembler.push(text) {
            self.add_trace(done);
        }
        if self.assembler.open_lines() == 1 {
            // This line opened a report.
            self.trace_start = line_no;
        }
    }

    /// A line no signature recognised: its subsystem event, if any, is folded in. Returns
    /// whether it was recognised.
    pub fn line(
        &mut self,
        text: &str,
        level: Option<u8>,
        dict_device: Option<&str>,
        line_no: usize,
    ) -> bool {
        // The cache key: the text, and the `DEVICE=` value when the record has one.
        let with_dict;
        let ck: &str = match dict_device {
            None => text,
            Some(d) => {
                with_dict = format!("{text}\n{d}");
                &with_dict
            }
        };
        if let Some(&slot) = self.cache.get(ck) {
            let Some(i) = slot else {
                return false;
            };
            self.recognised += 1;
            if let Some(g) = self.groups.get_mut(i) {
                g.count += 1;
                g.last_line = line_no;
            }
            return true;
        }
        let Some(ev) = subsystem::recognise(text, level, dict_device) else {
            self.remember(ck, None);
            return false;
        };
        self.recognised += 1;
        let key = format!("{}\n{}", ev.key(), fold(&ev.message));
        if let Some(&i) = self.index.get(&key) {
            self.remember(ck, Some(i));
            if let Some(g) = self.groups.get_mut(i) {
                g.count += 1;
                g.last_line = line_no;
                // The most severe occurrence is the one shown.
                if ev.level < g.event.level {
                    g.explanation = explain_event(&ev);
                    g.event = ev;
                }
            }
            return true;
        }
        if self.groups.len() >= MAX_GROUPS {
            self.dropped += 1;
            return true;
        }
        self.remember(ck, Some(self.groups.len()));
        self.index.insert(key, self.groups.len());
        self.groups.push(SubsystemGroup {
            count: 1,
            first_line: line_no,
            last_line: line_no,
            line: text.trim().to_string(),
            explanation: explain_event(&ev),
            event: ev,
        });
        true
    }

    /// Ends the input: an open report is closed.
    pub fn finish(&mut self) {
        if let Some(done) = self.assembler.finish() {
            self.add_trace(done);
        }
    }

    /// Folds a finished report into the entry of the same kind, header and first frame.
    fn add_trace(&mut self, t: TraceEvent) {
        let key = format!(
            "{} {} {}",
            t.what,
            t.first_frame.as_deref().unwrap_or(""),
            fold(&t.header)
        );
        if let Some(&i) = self.trace_index.get(&key) {
            if let Some(e) = self.traces.get_mut(i) {
                e.count += 1;
            }
            return;
        }
        if self.traces.len() >= MAX_GROUPS {
            self.dropped += 1;
            return;
        }
        self.trace_index.insert(key, self.traces.len());
        self.traces.push(TraceEntry {
            line: self.trace_start,
            count: 1,
            trace: t,
        });
    }

    /// Caches a text's entry; the cache stops growing at [`MAX_CACHED`] texts.
    fn remember(&mut self, text: &str, slot: Option<usize>) {
        if self.cache.len() < MAX_CACHED {
            self.cache.insert(text.to_string(), slot);
        }
    }

    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.traces.is_empty()
    }

    /// The text report: fatal device errors first, then the reports, then the entries by
    /// subsystem, most severe first.
    pub fn write_text<W: Write>(&self, out: &mut W) -> std::io::Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        writeln!(
            out,
            "\nSubsystem events (lines of the RDMA storage stack that match no signature; \
             explained, never acted on): {} line{}, {} distinct",
            self.recognised,
            if self.recognised == 1 { "" } else { "s" },
            self.groups.len()
        )?;
        for g in self.groups.iter().filter(|g| g.event.fatal_device_error) {
            writeln!(
                out,
                "\nFATAL DEVICE ERROR: {} (line {})",
                g.explanation.title, g.first_line
            )?;
            writeln!(out, "    meaning:  {}", g.explanation.meaning)?;
            if let Some(a) = &g.explanation.driver_action {
                writeln!(out, "    driver:   {a}")?;
            }
            writeln!(out, "    look at:  {}", g.explanation.next)?;
        }
        for t in &self.traces {
            let seen = if t.count == 1 {
                format!("line {}", t.line)
            } else {
                format!("{} times, first at line {}", t.count, t.line)
            };
            writeln!(out, "\n{} ({seen})", t.trace.summary())?;
            if t.trace.device != Default::default() {
                writeln!(out, "    device:   {}", t.trace.device.label())?;
            }
            writeln!(
                out,
                "    meaning:  a kernel bug or a broken assumption in this code, not something \
                 the agent can repair; save the whole report (`journalctl -k -b`) for the \
                 driver's maintainers"
            )?;
        }
        let mut order: Vec<&SubsystemGroup> = self.groups.iter().collect();
        order.sort_by_key(|g| (g.event.subsystem, g.event.level, g.first_line));
        let mut current: Option<Subsystem> = None;
        for (shown, g) in order.iter().enumerate() {
            if shown == MAX_TEXT_GROUPS {
                writeln!(
                    out,
                    "\n… {} more distinct subsystem events (`--json` lists them all)",
                    order.len() - MAX_TEXT_GROUPS
                )?;
                break;
            }
            if current != Some(g.event.subsystem) {
                current = Some(g.event.subsystem);
                writeln!(out, "\n[{}]", g.event.subsystem)?;
                writeln!(out, "    look at:  {}", g.explanation.next)?;
            }
            let seen = if g.count == 1 {
                format!("line {}", g.first_line)
            } else {
                format!("{} times, lines {}-{}", g.count, g.first_line, g.last_line)
            };
            writeln!(
                out,
                "  {:<7} {} ({seen})",
                level_name(g.event.level),
                g.explanation.title
            )?;
            if g.event.level <= 3 {
                writeln!(out, "          {}", g.explanation.meaning)?;
            }
        }
        if self.dropped > 0 {
            writeln!(
                out,
                "({} further distinct lines were counted but not kept)",
                self.dropped
            )?;
        }
        Ok(())
    }

    /// The JSON part: `subsystem_events`, `traces`.
    pub fn json(&self) -> SubsystemJson<'_> {
        SubsystemJson {
            recognised: self.recognised,
            events: &self.groups,
            traces: &self.traces,
            dropped: self.dropped,
        }
    }
}

/// The subsystem layer's part of `explain --json`.
#[derive(Debug, Serialize)]
pub(super) struct SubsystemJson<'a> {
    recognised: u64,
    events: &'a [SubsystemGroup],
    traces: &'a [TraceEntry],
    #[serde(skip_serializing_if = "is_zero")]
    dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The message with its numbers folded (`tag#31`, `sector 3979984`, `0x406`): repeats of
/// one message on one device are one entry.
fn fold(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut in_num = false;
    for c in message.chars() {
        if c.is_ascii_digit() {
            if !in_num {
                out.push('#');
                in_num = true;
            }
        } else if in_num && (c.is_ascii_hexdigit() || c == 'x') {
            // the rest of a hex number
        } else {
            in_num = false;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_fold_and_repeats_count_once() {
        assert_eq!(
            fold("tag#31 FAILED Result: cqn 0x406 sector 3979984"),
            "tag## FAILED Result: cqn # sector #"
        );
        let mut r = SubsystemReport::default();
        assert!(r.line("sd 2:0:0:0: [sdc] tag#31 FAILED Result: hostbyte=DID_TRANSPORT_DISRUPTED driverbyte=DRIVER_OK", None, None, 1));
        assert!(r.line("sd 2:0:0:0: [sdc] tag#35 FAILED Result: hostbyte=DID_TRANSPORT_DISRUPTED driverbyte=DRIVER_OK", None, None, 4));
        assert!(!r.line("usb 1-6: Manufacturer: Realtek", None, None, 5));
        assert_eq!(r.groups.len(), 1);
        assert_eq!(r.groups[0].count, 2);
        assert_eq!((r.groups[0].first_line, r.groups[0].last_line), (1, 4));
        let mut text = Vec::new();
        r.write_text(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("[scsi]"), "{text}");
        assert!(text.contains("2 times, lines 1-4"), "{text}");
    }

    #[test]
    fn a_report_is_one_entry_with_its_first_line() {
        let mut r = SubsystemReport::default();
        let lines = [
            "sd 2:0:0:0: [sdb] Attached SCSI disk",
            "------------[ cut here ]------------",
            "WARNING: CPU: 1 PID: 2873 at drivers/infiniband/core/cq.c:345 ib_free_cq+0x10a/0x150 [ib_core]",
            "Call Trace:",
            " iser_free_ib_conn_res+0x65/0x1a0 [ib_iser]",
            "---[ end trace 0000000000000000 ]---",
        ];
        for (i, l) in lines.iter().enumerate() {
            r.feed_trace(l, i + 1);
        }
        r.finish();
        assert_eq!(r.traces.len(), 1, "{:?}", r.traces);
        assert_eq!(r.traces[0].line, 2);
        assert_eq!(r.traces[0].trace.modules, ["ib_core", "ib_iser"]);
    }
}
