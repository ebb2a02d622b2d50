//! The one set of sysfs read primitives: attribute files, links, and the GID table's netdev
//! names. Both sysfs readers (the status/daemon scan in [`crate::io::sysfs`] and the reset
//! executor's [`crate::io::reset::Sysfs`]) use these, so both treat a file the same way:
//!
//! - absent: `None`, nothing to report (optional attributes come and go with drivers);
//! - unreadable or not UTF-8: `None`, and a [`SkippedPath`] with the reason;
//! - present: its content, trimmed (sysfs values end in a newline).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Something a reader skipped, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedPath {
    /// The file or directory.
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: String,
}

/// Records that `path` was skipped.
pub fn skip(skipped: &mut Vec<SkippedPath>, path: PathBuf, reason: impl Into<String>) {
    skipped.push(SkippedPath {
        path,
        reason: reason.into(),
    });
}

/// A small attribute file, trimmed; `Ok(None)` when absent.
pub fn read_attr(path: &Path) -> io::Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not valid UTF-8",
            )),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// An optional attribute: absent → `None`; unreadable → `None` and skipped with the reason.
pub fn read_opt(path: &Path, skipped: &mut Vec<SkippedPath>) -> Option<String> {
    match read_attr(path) {
        Ok(v) => v,
        Err(e) => {
            skip(skipped, path.to_path_buf(), format!("unreadable: {e}"));
            None
        }
    }
}

/// The last component of a symlink's target (`driver` → `irdma.gen_2`); `None` when `path`
/// is not a link or the name is not UTF-8.
pub fn link_name(path: &Path) -> Option<String> {
    let target = fs::read_link(path).ok()?;
    target.file_name()?.to_str().map(str::to_string)
}

/// Netdev names of a port's GID table (`ports/<n>/gid_attrs/ndevs/<i>`), in GID order,
/// deduplicated, from at most the first `max_slots` slots. Unused slots fail to read (the
/// kernel returns EINVAL) or are empty: that is normal, not something to report.
pub fn gid_ndevs(dir: &Path, max_slots: usize) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut slots: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .collect();
    slots.sort();
    let mut out: Vec<String> = Vec::new();
    for (_, path) in slots.into_iter().take(max_slots) {
        if let Ok(Some(name)) = read_attr(&path) {
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_absent_unreadable_and_present() {
        let dir = tempfile::tempdir().unwrap();
        let mut skipped = Vec::new();
        assert_eq!(read_opt(&dir.path().join("none"), &mut skipped), None);
        assert!(skipped.is_empty(), "absent is not a skip");
        std::fs::write(dir.path().join("v"), "4: ACTIVE\n").unwrap();
        assert_eq!(
            read_opt(&dir.path().join("v"), &mut skipped).as_deref(),
            Some("4: ACTIVE")
        );
        std::fs::write(dir.path().join("bad"), [0xff, 0xfe]).unwrap();
        assert_eq!(read_opt(&dir.path().join("bad"), &mut skipped), None);
        // A directory where a file was expected cannot be read either.
        assert_eq!(read_opt(dir.path(), &mut skipped), None);
        assert_eq!(skipped.len(), 2);
        assert!(skipped[0].reason.contains("UTF-8"), "{:?}", skipped[0]);
        assert!(skipped.iter().all(|s| s.reason.starts_with("unreadable: ")));
    }

    #[test]
    fn link_names_are_the_last_component_of_the_target() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("../../bus/pci/drivers/irdma", dir.path().join("driver"))
            .unwrap();
        assert_eq!(
            link_name(&dir.path().join("driver")).as_deref(),
            Some("irdma")
        );
        std::fs::write(dir.path().join("plain"), "x").unwrap();
        assert_eq!(link_name(&dir.path().join("plain")), None);
        assert_eq!(link_name(&dir.path().join("missing")), None);
    }

    #[test]
    fn gid_netdevs_in_slot_order_deduplicated_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (i, name) in [(0, "ens1f0\n"), (1, "ens1f0\n"), (2, ""), (10, "vlan10\n")] {
            std::fs::write(d.join(i.to_string()), name).unwrap();
        }
        // An unused slot that is not a file (EISDIR stands in for the kernel's EINVAL).
        std::fs::create_dir(d.join("3")).unwrap();
        std::fs::write(d.join("not-a-slot"), "x").unwrap();
        assert_eq!(gid_ndevs(d, usize::MAX), vec!["ens1f0", "vlan10"]);
        // Slots sort numerically: 10 comes after 3, so a bound of 4 stops before it.
        assert_eq!(gid_ndevs(d, 4), vec!["ens1f0"]);
        assert!(gid_ndevs(&d.join("absent"), 16).is_empty());
    }
}
