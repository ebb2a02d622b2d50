//! Lines the RDMA and storage subsystems print with no prefix at all: a `pr_err()` in a file
//! without a `pr_fmt`, a `printk(KERN_ERR …)`, the message of a `WARN()`. Nothing in such a
//! line names its origin, so the only honest way to recognise it is the kernel's own format
//! string. [`super::bare_formats::BARE_FORMATS`] holds those formats, generated from kernel
//! source trees by scripts/gen-bare-formats.py (which also says which formats are specific
//! enough to name a subsystem on their own); this module looks a line up in it.
//!
//! Matching: a line matches a format when the whole line (trailing blanks dropped) is the
//! format with each conversion (`%`) standing for any text. The table is sorted by a key,
//! the format's first word (or `%` and the word after a leading conversion), so a line
//! costs two binary searches and a few comparisons; nothing is allocated.

use super::bare_formats::BARE_FORMATS;
use super::Subsystem;

/// One format string of the kernel, as the generator wrote it.
pub(crate) struct BareFormat {
    /// The first word of the format, or `%` and the first word after its leading conversion.
    pub key: &'static str,
    /// The format's first line, each printf conversion written as `%`.
    pub format: &'static str,
    /// The subsystem whose sources print it.
    pub subsystem: Subsystem,
}

/// The format `t` is printed by, if it is one of the table's.
pub(crate) fn find(t: &str) -> Option<&'static BareFormat> {
    let t = t.trim_end();
    let mut words = t.split(' ');
    let first = words.next()?;
    if let Some(f) = candidates(first).find(|f| matches(f.format, t)) {
        return Some(f);
    }
    let second = words.next()?;
    let mut key = [0u8; 64];
    let k = conversion_key(second, &mut key)?;
    let found = candidates(k).find(|f| matches(f.format, t));
    found
}

/// Whether some format could match `t`, by its keys alone (the cheap pretest).
pub(crate) fn could_match(t: &str) -> bool {
    let mut words = t.split(' ');
    let Some(first) = words.next() else {
        return false;
    };
    if candidates(first).next().is_some() {
        return true;
    }
    let mut key = [0u8; 64];
    let found = words
        .next()
        .and_then(|w| conversion_key(w, &mut key))
        .is_some_and(|k| candidates(k).next().is_some());
    found
}

/// `%` followed by `word`, in `buf`; `None` when it does not fit (no key is that long).
fn conversion_key<'b>(word: &str, buf: &'b mut [u8; 64]) -> Option<&'b str> {
    let n = word.len() + 1;
    if n > buf.len() {
        return None;
    }
    buf[0] = b'%';
    buf[1..n].copy_from_slice(word.as_bytes());
    std::str::from_utf8(&buf[..n]).ok()
}

/// The formats whose key is `key`.
fn candidates(key: &str) -> impl Iterator<Item = &'static BareFormat> + '_ {
    let start = BARE_FORMATS.partition_point(|f| f.key < key);
    BARE_FORMATS[start..]
        .iter()
        .take_while(move |f| f.key == key)
}

/// `line` is `format` with each `%` standing for any text (possibly empty). The classic
/// wildcard walk: on a mismatch, the last `%` takes one more byte; linear in practice and
/// never worse than the product of the two lengths.
fn matches(format: &str, line: &str) -> bool {
    let (p, s) = (format.as_bytes(), line.as_bytes());
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < s.len() {
        if i < p.len() && p[i] == b'%' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == s[j] {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'%')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_by_key_and_each_key_is_its_formats_first_word() {
        assert!(BARE_FORMATS.windows(2).all(|w| w[0].key <= w[1].key));
        for f in BARE_FORMATS {
            match f.key.strip_prefix('%') {
                Some(word) => assert!(f.format.starts_with('%') && f.format.contains(word)),
                None => assert!(f.format.split(' ').next() == Some(f.key), "{}", f.format),
            }
        }
    }

    #[test]
    fn wildcards_stand_for_any_text_and_the_whole_line_must_match() {
        assert!(matches(
            "failed to drain send queue: %",
            "failed to drain send queue: -110"
        ));
        assert!(matches(
            "% timer already started! ep %",
            "x timer already started! ep y"
        ));
        assert!(matches("a % b % c", "a  b  c"));
        assert!(matches("a % c", "a b c c"));
        assert!(!matches(
            "failed to drain send queue: %",
            "failed to drain recv queue: -110"
        ));
        assert!(!matches("SoftiWARP attached", "SoftiWARP attached to eth0"));
    }

    #[test]
    fn lines_of_the_kernels_formats_are_found_with_their_subsystem() {
        let f = find("failed to drain send queue: -110").unwrap();
        assert_eq!(f.subsystem, Subsystem::RdmaCore);
        assert_eq!(
            find("SoftiWARP attached").unwrap().subsystem,
            Subsystem::RdmaDriver
        );
        // A leading conversion (a function name) is found by the word after it.
        let line = "iwpm_remote_info_cb: Could not find a matching request (seq = 5)";
        let f = find(line).unwrap();
        assert_eq!(f.format, "%: Could not find a matching request (seq = %)");
        assert!(could_match(line));
        assert!(find("failed to drain the pipes").is_none());
        assert!(find("").is_none());
    }
}
