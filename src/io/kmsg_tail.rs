//! The kernel log's newest lines, read without waiting: `doctor --active` marks the end of
//! the log before a step and collects what the kernel printed during it. Blocking and
//! non-blocking at once: it never waits for a record, it takes the ones already there.
//!
//! The daemon's reader ([`crate::io::kmsg`]) follows the log for ever, keeps a cursor and
//! counts losses; this one only needs "everything since the mark", so it is a plain file
//! descriptor, `SEEK_END` to mark, and reads until `EAGAIN`.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::unistd::Whence;

use crate::core::kmsg::Record;
use crate::io::kmsg::READ_BUFFER_SIZE;

/// An open kernel log, positioned at its end.
#[derive(Debug)]
pub struct KmsgTail {
    fd: OwnedFd,
    buf: Vec<u8>,
}

/// The most lines kept per take (a storm of repeats must not make the report huge).
pub const MAX_LINES: usize = 2000;

impl KmsgTail {
    /// Opens the log at `path` (normally /dev/kmsg) positioned at its end.
    pub fn open(path: &Path) -> io::Result<KmsgTail> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut t = KmsgTail {
            fd,
            buf: vec![0; READ_BUFFER_SIZE],
        };
        t.mark()?;
        Ok(t)
    }

    /// Forgets everything before now.
    pub fn mark(&mut self) -> io::Result<()> {
        match nix::unistd::lseek(&self.fd, 0, Whence::SeekEnd) {
            Ok(_) | Err(Errno::ESPIPE) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The records printed since the mark, as `[seconds.micros] text` (records written by
    /// user space are marked `(user space)`); at most [`MAX_LINES`], then a count of the rest.
    pub fn take(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let mut dropped = 0u64;
        loop {
            match nix::unistd::read(&self.fd, &mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    let line = match Record::parse(&self.buf[..n]) {
                        Ok(r) => format!(
                            "[{:>5}.{:06}] {}{}",
                            r.usec / 1_000_000,
                            r.usec % 1_000_000,
                            r.text,
                            if r.is_kernel() { "" } else { " (user space)" }
                        ),
                        Err(e) => format!("(a record that could not be read: {e})"),
                    };
                    if out.len() < MAX_LINES {
                        out.push(line);
                    } else {
                        dropped += 1;
                    }
                }
                // Overwritten before we read them: say so and go on from the next one.
                Err(Errno::EPIPE) => {
                    out.push("(records were lost: the kernel's ring overran)".into())
                }
                Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        if dropped > 0 {
            out.push(format!("({dropped} more lines left out)"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A FIFO stands in for /dev/kmsg: one small write drained before the next is one read,
    /// as one record is there. (It cannot seek: `mark` accepts that, as on a pipe.)
    #[test]
    fn takes_what_was_printed_since_the_mark_one_record_per_line_and_marks_user_space() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("kmsg");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let mut tail = KmsgTail::open(&fifo).unwrap();
        let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        assert!(tail.take().is_empty(), "nothing printed yet, and no wait");

        w.write_all(b"6,101,5012345,-; connection1:0: detected conn error (1011)\n")
            .unwrap();
        assert_eq!(
            tail.take(),
            ["[    5.012345]  connection1:0: detected conn error (1011)"]
        );
        // Facility 1 (user space), as `echo ... > /dev/kmsg` writes: kept, and said so.
        w.write_all(b"12,102,6000000,-;infiniband rxe_ini: forged\n")
            .unwrap();
        assert_eq!(
            tail.take(),
            ["[    6.000000] infiniband rxe_ini: forged (user space)"]
        );
        // A record that cannot be read is a line that says so, never a failed take.
        w.write_all(b"not a record\n").unwrap();
        let lines = tail.take();
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("(a record that could not be read: "),
            "{lines:?}"
        );
        tail.mark().unwrap();
        assert!(tail.take().is_empty());
    }

    #[test]
    fn a_log_that_cannot_be_opened_is_an_error_not_a_panic() {
        let e = KmsgTail::open(Path::new("/nonexistent/kmsg")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
