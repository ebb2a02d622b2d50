//! A saved kernel log opened as text, whatever logrotate left it as: plain, gzip
//! (`kern.log.2.gz`) or zstd (`.zst`), told apart by their first bytes, not by the file's
//! name (stdin has none). Input that is not text (a binary journal file, random bytes) is
//! refused instead of being read as lines that match nothing: "no forbidden transition in
//! this input" must never be said about input that was never read.
//!
//! Only the start of the input is judged (the first [`HEAD_BYTES`] after decompression), as
//! grep and file(1) do; lines are capped afterwards by [`super::lines`].

use std::io::{self, Chain, Cursor, Read};

/// How much of the (decompressed) input is looked at to tell text from binary.
pub const HEAD_BYTES: usize = 8192;

/// How the saved log was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip (RFC 1952; members one after another, as `cat a.gz b.gz` makes, are all read).
    Gzip,
    /// Zstandard frames.
    Zstd,
}

impl Compression {
    /// From the input's first bytes (their magic numbers).
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "text",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// Why a saved log cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SavedLogError {
    /// The input, once decompressed, is not text.
    #[error(
        "{name} is not text: its first bytes hold binary data ({why}), so nothing in it was \
         explained. Give it the text of the log: kern.log and its rotated .gz and .zst files \
         are read as they are; a systemd journal file first through `journalctl -k --file \
         FILE | iser-guard explain -`"
    )]
    NotText {
        /// The input.
        name: String,
        /// What gave it away.
        why: String,
    },
    /// A compressed input whose compressed data is damaged.
    #[error("{name} is a damaged {format} file ({source}); nothing after the damage was read")]
    Damaged {
        /// The input.
        name: String,
        /// `gzip`, `zstd`.
        format: &'static str,
        /// The decoder's words.
        source: io::Error,
    },
    /// Reading failed.
    #[error("cannot read {name}: {source}")]
    Read {
        /// The input.
        name: String,
        /// The OS error.
        source: io::Error,
    },
}

/// Why `head` (the first bytes of an input) is not text, or `None` when it is: more than one
/// byte in twenty is a control character no log line holds (NUL included) or not part of
/// valid UTF-8. A kernel log escapes its unprintable bytes (`\x1b`), so its text holds few
/// of them; a line of junk among lines of text (a crash's NULs in a syslog file) is skipped
/// later as one unparsable line, and a sequence cut by the end of `head` is not held against
/// it.
pub fn not_text(head: &[u8]) -> Option<String> {
    let control = head
        .iter()
        .filter(|&&b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b)) || b == 0x7f)
        .count();
    let mut invalid = 0usize;
    let mut rest = head;
    while let Err(e) = std::str::from_utf8(rest) {
        match e.error_len() {
            Some(n) => {
                invalid += n;
                rest = &rest[e.valid_up_to() + n..];
            }
            // A character cut by the end of the head.
            None => break,
        }
    }
    let odd = control + invalid;
    (odd * 20 > head.len()).then(|| {
        format!(
            "{odd} of its first {} bytes are control characters or not UTF-8",
            head.len()
        )
    })
}

/// A reader of the saved log's text: the head already read, then the rest.
pub type Text<'a> = Chain<Cursor<Vec<u8>>, Decoded<'a>>;

/// Opens `src` (named `name` in messages) as text: decompressed when its magic says so, and
/// refused when its start is not text. Errors of the decompressor while reading on come back
/// as `InvalidData` I/O errors carrying a [`SavedLogError::Damaged`]; [`read_error`] turns
/// any read error into the right [`SavedLogError`].
pub fn open<'a, R: Read + 'a>(
    src: R,
    name: &str,
) -> Result<(Text<'a>, Compression), SavedLogError> {
    let read = |source| SavedLogError::Read {
        name: name.to_string(),
        source,
    };
    let mut src = io::BufReader::new(src);
    let magic = fill(&mut src, 4).map_err(read)?;
    let format = Compression::detect(&magic);
    let raw = Cursor::new(magic).chain(src);
    let mut decoded = match format {
        Compression::None => Decoded {
            inner: Box::new(raw),
            format,
            name: name.to_string(),
        },
        Compression::Gzip => Decoded {
            inner: Box::new(flate2::read::MultiGzDecoder::new(raw)),
            format,
            name: name.to_string(),
        },
        Compression::Zstd => Decoded {
            inner: Box::new(ZstdFrames::new(raw)),
            format,
            name: name.to_string(),
        },
    };
    let head = fill(&mut decoded, HEAD_BYTES).map_err(|e| read_error(e, name))?;
    if let Some(why) = not_text(&head) {
        return Err(SavedLogError::NotText {
            name: name.to_string(),
            why,
        });
    }
    Ok((Cursor::new(head).chain(decoded), format))
}

/// The [`SavedLogError`] for an error met while reading a [`Text`].
pub fn read_error(e: io::Error, name: &str) -> SavedLogError {
    let name = name.to_string();
    if !e.get_ref().is_some_and(|inner| inner.is::<Damage>()) {
        return SavedLogError::Read { name, source: e };
    }
    let kind = e.kind();
    match e.into_inner().map(|b| b.downcast::<Damage>()) {
        Some(Ok(d)) => SavedLogError::Damaged {
            name,
            format: d.format,
            source: d.source,
        },
        Some(Err(other)) => SavedLogError::Read {
            name,
            source: io::Error::new(kind, other),
        },
        None => SavedLogError::Read {
            name,
            source: kind.into(),
        },
    }
}

/// Reads until `n` bytes or the end of the input.
fn fill<R: Read>(src: &mut R, n: usize) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(n);
    src.take(n as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// The decompressed stream (or the plain one), with the decoder's errors marked as damage.
pub struct Decoded<'a> {
    inner: Box<dyn Read + 'a>,
    format: Compression,
    name: String,
}

impl std::fmt::Debug for Decoded<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoded")
            .field("format", &self.format)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Zstandard frames one after another (`zstd` writes one per file; `cat a.zst b.zst` makes
/// two), decoded as one stream; the first frame header is read on the first read, so that
/// its errors are the decoder's like every other.
enum ZstdFrames<R: io::BufRead> {
    /// Before the next frame header.
    Between(R, Box<ruzstd::FrameDecoder>),
    /// Inside a frame.
    In(ruzstd::StreamingDecoder<R, Box<ruzstd::FrameDecoder>>),
    /// After an error or the end.
    Done,
}

impl<R: io::BufRead> ZstdFrames<R> {
    fn new(src: R) -> Self {
        ZstdFrames::Between(src, Box::new(ruzstd::FrameDecoder::new()))
    }
}

impl<R: io::BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match std::mem::replace(self, ZstdFrames::Done) {
                ZstdFrames::Done => return Ok(0),
                ZstdFrames::Between(mut src, decoder) => {
                    if src.fill_buf()?.is_empty() {
                        return Ok(0);
                    }
                    let frame = ruzstd::StreamingDecoder::new_with_decoder(src, decoder)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                    *self = ZstdFrames::In(frame);
                }
                ZstdFrames::In(mut frame) => {
                    let n = frame.read(buf)?;
                    if n > 0 || buf.is_empty() {
                        *self = ZstdFrames::In(frame);
                        return Ok(n);
                    }
                    let (src, decoder) = frame.into_parts();
                    *self = ZstdFrames::Between(src, decoder);
                }
            }
        }
    }
}

/// A decoder's complaint about its compressed data.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
struct Damage {
    format: &'static str,
    source: io::Error,
}

impl Read for Decoded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            // The decoders report bad data as InvalidData/InvalidInput/Other, a truncated
            // stream as UnexpectedEof; the file's own read errors pass through unchanged.
            let damage = self.format != Compression::None
                && matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData
                        | io::ErrorKind::InvalidInput
                        | io::ErrorKind::UnexpectedEof
                        | io::ErrorKind::Other
                );
            if damage {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    Damage {
                        format: self.format.name(),
                        source: e,
                    },
                )
            } else {
                e
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const LOG: &str = "[ 5.000000] ice 0000:02:00.0 rocep2s0f0: modify_qp invalid\n";

    fn read_all(src: &[u8]) -> Result<(String, Compression), SavedLogError> {
        let (mut text, format) = open(src, "input")?;
        let mut out = Vec::new();
        text.read_to_end(&mut out)
            .map_err(|e| read_error(e, "input"))?;
        Ok((String::from_utf8(out).expect("utf-8"), format))
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).expect("gzip");
        e.finish().expect("gzip")
    }

    /// As logrotate's `compresscmd zstd` makes it (scripts/setup.sh installs zstd).
    fn zstd(data: &[u8]) -> Vec<u8> {
        let mut child = std::process::Command::new("zstd")
            .args(["-q", "-c", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("zstd(1) runs");
        let mut stdin = child.stdin.take().expect("stdin");
        let data = data.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&data));
        let out = child.wait_with_output().expect("zstd");
        writer.join().expect("writer").expect("write");
        assert!(out.status.success());
        out.stdout
    }

    #[test]
    fn plain_gzip_and_zstd_logs_read_as_the_same_text() {
        let big = LOG.repeat(1000);
        assert_eq!(
            read_all(big.as_bytes()).expect("plain"),
            (big.clone(), Compression::None)
        );
        assert_eq!(
            read_all(&gzip(big.as_bytes())).expect("gzip"),
            (big.clone(), Compression::Gzip)
        );
        // Two gzip members one after another (`cat a.gz b.gz`): both are read.
        let mut two = gzip(LOG.as_bytes());
        two.extend(gzip(LOG.as_bytes()));
        assert_eq!(read_all(&two).expect("two").0, LOG.repeat(2));
        let z = zstd(big.as_bytes());
        assert_eq!(read_all(&z).expect("zstd"), (big, Compression::Zstd));
        let mut two = zstd(LOG.as_bytes());
        two.extend(zstd(LOG.as_bytes()));
        assert_eq!(read_all(&two).expect("two frames").0, LOG.repeat(2));
        assert_eq!(read_all(b"").expect("empty").0, "");
    }

    #[test]
    fn binary_input_is_not_text_and_a_kernel_log_is() {
        assert!(not_text(LOG.as_bytes()).is_none());
        assert!(not_text("ümlaut \x1b[1m résumé\r\n\tx".as_bytes()).is_none());
        assert!(not_text(&[0u8; 4096]).is_some());
        // One line of junk among text is not enough.
        let mut junk = LOG.repeat(4).into_bytes();
        junk.extend_from_slice(b"\xff\xfe\x00 binary junk\n");
        assert!(not_text(&junk).is_none());
        // Bytes from a fixed xorshift: what random data looks like.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24).to_le_bytes()[0]
            })
            .collect();
        assert!(not_text(&random).is_some());
        // A UTF-8 character cut by the end of the head is not held against it.
        let mut cut = LOG.as_bytes().to_vec();
        cut.extend_from_slice(&"é".as_bytes()[..1]);
        assert!(not_text(&cut).is_none());
        let e = read_all(&random).expect_err("not text");
        assert!(matches!(e, SavedLogError::NotText { .. }), "{e}");
        // Compressed binary is judged after decompression.
        let e = read_all(&gzip(&random)).expect_err("not text");
        assert!(matches!(e, SavedLogError::NotText { .. }), "{e}");
    }

    #[test]
    fn a_damaged_or_cut_compressed_file_is_called_damaged() {
        let big = LOG.repeat(1000);
        let gz = gzip(big.as_bytes());
        let e = read_all(&gz[..gz.len() / 2]).expect_err("cut");
        assert!(
            matches!(e, SavedLogError::Damaged { format: "gzip", .. }),
            "{e}"
        );
        let mut z = zstd(big.as_bytes());
        let n = z.len();
        z[n / 2..].fill(0xa5);
        let e = read_all(&z).expect_err("damaged");
        assert!(
            matches!(
                e,
                SavedLogError::Damaged { format: "zstd", .. } | SavedLogError::NotText { .. }
            ),
            "{e}"
        );
    }
}
