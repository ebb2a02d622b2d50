//! One direct-I/O read of a block device: what `doctor --active` runs in a loop on each
//! session's disk while the device under it is re-created, so the report says how long I/O
//! stalled and whether it works afterwards. `O_DIRECT` bypasses the page cache, so every read
//! reaches the iSCSI session; 4 KiB at offset 0, into a 4 KiB-aligned buffer (the alignment
//! direct I/O needs for 512-byte and 4 KiB logical blocks alike). Reads only.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

const BLOCK: usize = 4096;

/// Reads the first 4 KiB of the block device at `path` with `O_DIRECT`.
pub fn read_direct(path: &Path) -> io::Result<()> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let mut buf = vec![0u8; 2 * BLOCK];
    let start = buf.as_ptr().align_offset(BLOCK);
    let aligned = buf
        .get_mut(start..start + BLOCK)
        .ok_or_else(|| io::Error::other("no aligned buffer"))?;
    let n = f.read_at(aligned, 0)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the device returned no data",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_on_a_file_system_with_direct_io_reads_and_a_missing_one_does_not() {
        // tmpfs refuses O_DIRECT on some kernels (EINVAL): either way the answer is an
        // io::Result, never a panic; a missing path is NotFound.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("disk");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let _ = read_direct(&p);
        let e = read_direct(&dir.path().join("nope")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
