//! Line caps for every reader of untrusted text (saved logs, stdin): no input can make a
//! line, and so memory, grow without bound. A line longer than the cap keeps its first
//! [`MAX_LINE_BYTES`] bytes; the rest of it, up to its newline, is counted and skipped.
//!
//! The kernel's own lines are far shorter (a /dev/kmsg record is at most 8 KiB with its
//! dictionary, `CONSOLE_EXT_LOG_MAX`), so only a wrong file or an attack reaches the cap:
//! `explain --file /dev/zero` then runs in constant memory instead of reading the device
//! whole.

use std::io::{self, Read};

/// The longest line kept (64 KiB).
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// What the cap cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapStats {
    /// Lines longer than the cap.
    pub lines_cut: u64,
    /// Bytes skipped from them.
    pub bytes_skipped: u64,
}

/// A reader passing its input through with every line cut at `cap` bytes.
#[derive(Debug)]
pub struct CappedLines<R> {
    inner: R,
    cap: usize,
    /// Bytes of the current line passed on so far.
    in_line: usize,
    /// Inside the skipped tail of a long line.
    skipping: bool,
    stats: CapStats,
    /// Names the input in the log line.
    what: String,
}

impl<R: Read> CappedLines<R> {
    /// Caps the lines of `inner` at [`MAX_LINE_BYTES`]; `what` names it in the log.
    pub fn new(inner: R, what: impl Into<String>) -> Self {
        Self::with_cap(inner, MAX_LINE_BYTES, what)
    }

    /// Caps the lines of `inner` at `cap` bytes (at least 1).
    pub fn with_cap(inner: R, cap: usize, what: impl Into<String>) -> Self {
        CappedLines {
            inner,
            cap: cap.max(1),
            in_line: 0,
            skipping: false,
            stats: CapStats::default(),
            what: what.into(),
        }
    }

    /// What was cut so far.
    pub fn stats(&self) -> CapStats {
        self.stats
    }

    /// Keeps the bytes of `buf[..n]` that are within the cap, compacted to the front.
    fn filter(&mut self, buf: &mut [u8], n: usize) -> usize {
        let mut w = 0;
        let mut r = 0;
        while r < n {
            let rest = &buf[r..n];
            let nl = memchr::memchr(b'\n', rest);
            let seg = nl.map_or(rest.len(), |i| i + 1);
            // Bytes of this segment before its newline (if any).
            let body = nl.unwrap_or(seg);
            let room = self.cap.saturating_sub(self.in_line);
            let keep = if self.skipping { 0 } else { body.min(room) };
            if keep < body {
                if !self.skipping {
                    self.skipping = true;
                    self.stats.lines_cut += 1;
                    if self.stats.lines_cut == 1 {
                        tracing::warn!(
                            input = %self.what,
                            cap = self.cap,
                            "a line longer than {} bytes: keeping its start, skipping the \
                             rest (counted)",
                            self.cap
                        );
                    }
                }
                self.stats.bytes_skipped += (body - keep) as u64;
            }
            buf.copy_within(r..r + keep, w);
            w += keep;
            self.in_line += keep;
            if nl.is_some() {
                buf[w] = b'\n';
                w += 1;
                self.in_line = 0;
                self.skipping = false;
            }
            r += seg;
        }
        w
    }
}

impl<R: Read> Read for CappedLines<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                return Ok(0);
            }
            let kept = self.filter(buf, n);
            // Everything read was the skipped tail of a long line: read on (0 would mean
            // end of input).
            if kept > 0 {
                return Ok(kept);
            }
        }
    }
}

impl<R> Drop for CappedLines<R> {
    fn drop(&mut self) {
        if self.stats.lines_cut > 0 {
            tracing::warn!(
                input = %self.what,
                lines_cut = self.stats.lines_cut,
                bytes_skipped = self.stats.bytes_skipped,
                "{} line(s) longer than {} bytes were cut; {} byte(s) skipped",
                self.stats.lines_cut,
                self.cap,
                self.stats.bytes_skipped
            );
        }
    }
}

/// A reader that hands out at most `n` bytes per read, like a pipe: the tests of every
/// reader built on these lines (here and `explain`) feed their input through it.
#[cfg(test)]
pub(crate) struct Trickle<'a>(pub(crate) &'a [u8], pub(crate) usize);

#[cfg(test)]
impl Read for Trickle<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.0.len().min(self.1).min(out.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(input: &[u8], cap: usize, trickle: usize) -> (Vec<u8>, CapStats) {
        let mut r = CappedLines::with_cap(Trickle(input, trickle), cap, "test");
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        (out, r.stats())
    }

    #[test]
    fn short_lines_pass_unchanged_long_ones_are_cut() {
        for trickle in [1, 2, 3, 7, 1000] {
            let (out, st) = capped(b"ab\ncdefgh\nij", 4, trickle);
            assert_eq!(out, b"ab\ncdef\nij", "trickle {trickle}");
            assert_eq!(
                st,
                CapStats {
                    lines_cut: 1,
                    bytes_skipped: 2
                }
            );
            let (out, st) = capped(b"abcd\n\nabcdefghij", 4, trickle);
            assert_eq!(out, b"abcd\n\nabcd");
            assert_eq!(st.lines_cut, 1);
            assert_eq!(st.bytes_skipped, 6);
        }
    }

    #[test]
    fn an_endless_line_costs_constant_memory() {
        // /dev/zero: no newline ever. The capped reader yields the cap, then reads on
        // without keeping anything; here the input ends after 8 MiB.
        let zeros = vec![0u8; 8 << 20];
        let mut r = CappedLines::new(&zeros[..], "zeros");
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(out.len(), MAX_LINE_BYTES);
        assert_eq!(r.stats().bytes_skipped, (8 << 20) - MAX_LINE_BYTES as u64);
    }
}
