//! One way to replace a small state file so a crash leaves either the old or the new
//! content, never a torn mix: write a temporary file next to it, `fsync` it, `rename` it over
//! the target, then `fsync` the directory (the rename is durable only once the directory
//! entry is). Used by the engine journal and the kmsg cursor.
//!
//! The file is created mode 0600: state files are the daemon's own.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Which step of an atomic replace failed.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path} failed: {source}")]
pub struct AtomicWriteError {
    /// The step: `create directory`, `create`, `chmod`, `write`, `fsync`, `rename`, `fsync directory`.
    pub op: &'static str,
    /// The file or directory the step was on.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

/// The temporary file `write_atomic` uses for `path`: hidden, in the same directory (a
/// rename is atomic only within one file system).
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` atomically and durably, creating its directory if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    write_atomic_mode(path, bytes, 0o600)
}

/// [`write_atomic`] with the file created with `mode` (before the umask) instead of 0600:
/// for files other users read (the metrics textfile, read by node_exporter).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AtomicWriteError> {
    let err = |op: &'static str, p: &Path| {
        let path = p.to_path_buf();
        move |source| AtomicWriteError { op, path, source }
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(err("create directory", dir))?;
    let tmp = temp_path(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(err("create", &tmp))?;
    // Exactly `mode`, whatever the umask (the service's may be 0077) or a leftover
    // temporary file's mode.
    f.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(err("chmod", &tmp))?;
    f.write_all(bytes).map_err(err("write", &tmp))?;
    f.sync_all().map_err(err("fsync", &tmp))?;
    drop(f);
    fs::rename(&tmp, path).map_err(err("rename", path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(err("fsync directory", dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state").join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(names(p.parent().unwrap()), vec!["f.json".to_string()]);
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_stale_temporary_from_a_crash_is_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        fs::write(temp_path(&p), b"half-written garbage that is longer").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(names(dir.path()), vec!["f".to_string()]);
    }

    #[test]
    fn a_failed_step_names_the_step_and_the_path_and_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_dir = dir.path().join("plain");
        fs::write(&not_a_dir, b"x").unwrap();
        let e = write_atomic(&not_a_dir.join("f"), b"y").unwrap_err();
        assert_eq!(e.op, "create directory");
        assert_eq!(e.path, not_a_dir);
        // A target that is a directory cannot be replaced; the old content stays.
        let target = dir.path().join("target");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), b"keep").unwrap();
        let e = write_atomic(&target, b"y").unwrap_err();
        assert_eq!(e.op, "rename");
        assert_eq!(fs::read(target.join("inside")).unwrap(), b"keep");
    }

    #[test]
    fn temp_path_is_hidden_and_beside_the_file() {
        assert_eq!(
            temp_path(Path::new("/var/lib/x/kmsg.cursor")),
            PathBuf::from("/var/lib/x/.kmsg.cursor.tmp")
        );
    }
}
