//! The persisted /dev/kmsg position: the last sequence number handed on, with the boot it
//! belongs to, in `<state dir>/kmsg.cursor`.
//!
//! Sequence numbers restart at 0 on every boot, so a position means nothing without its boot
//! id (`/proc/sys/kernel/random/boot_id`, configurable as `paths.boot-id`). The file is small
//! JSON, written atomically (temporary file, fsync, rename, fsync of the directory) so a
//! crash leaves either the old or the new position, never a torn one.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Name of the daemon's cursor file inside the state directory.
pub const CURSOR_FILE_NAME: &str = "kmsg.cursor";

/// Name of `iser-guard watch`'s cursor file: its own, so that running `watch` never moves the
/// daemon's position.
pub const WATCH_CURSOR_FILE_NAME: &str = "watch-kmsg.cursor";

/// Where the kernel log was left off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KmsgCursor {
    /// The boot id the sequence number belongs to.
    pub boot_id: String,
    /// The last sequence number handed on.
    pub seq: u64,
}

/// Why the cursor or the boot id could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    /// Reading or writing a file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The cursor file exists but does not hold a cursor.
    #[error(
        "kmsg cursor {path} is corrupt ({reason}); delete it to start from the end of the log"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The boot id file is empty.
    #[error("boot id file {0} is empty (check paths.boot-id in the configuration)")]
    EmptyBootId(PathBuf),
}

/// The cursor file of a state directory.
#[derive(Debug, Clone)]
pub struct CursorFile {
    path: PathBuf,
}

impl CursorFile {
    /// The daemon's cursor file in `state_dir`.
    pub fn in_state_dir(state_dir: &Path) -> Self {
        Self::named(state_dir, CURSOR_FILE_NAME)
    }

    /// The cursor file `name` in `state_dir`.
    pub fn named(state_dir: &Path, name: &str) -> Self {
        CursorFile {
            path: state_dir.join(name),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved cursor; `Ok(None)` if there is none yet.
    pub fn load(&self) -> Result<Option<KmsgCursor>, CursorError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(CursorError::Io {
                    what: "cannot read kmsg cursor",
                    path: self.path.clone(),
                    source,
                })
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| CursorError::Corrupt {
                path: self.path.clone(),
                reason: e.to_string(),
            })
    }

    /// Saves `cursor` atomically, creating the state directory if needed.
    pub fn save(&self, cursor: &KmsgCursor) -> Result<(), CursorError> {
        let io_err = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| CursorError::Io { what, path, source }
        };
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(io_err("cannot create state directory", dir))?;
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = self.path.with_file_name(tmp_name);
        let mut body = serde_json::to_vec(cursor).map_err(|e| CursorError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        body.push(b'\n');
        let mut f = fs::File::create(&tmp).map_err(io_err("cannot create", &tmp))?;
        f.write_all(&body).map_err(io_err("cannot write", &tmp))?;
        f.sync_all().map_err(io_err("cannot fsync", &tmp))?;
        drop(f);
        fs::rename(&tmp, &self.path).map_err(io_err("cannot rename into", &self.path))?;
        // Make the rename itself durable.
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("cannot fsync", dir))?;
        Ok(())
    }
}

/// Reads the current boot id (one line, e.g. `3f1c…-…`), trimmed.
pub fn read_boot_id(path: &Path) -> Result<String, CursorError> {
    let text = fs::read_to_string(path).map_err(|source| CursorError::Io {
        what: "cannot read boot id",
        path: path.to_path_buf(),
        source,
    })?;
    let id = text.trim();
    if id.is_empty() {
        return Err(CursorError::EmptyBootId(path.to_path_buf()));
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_then_load_round_trips_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let f = CursorFile::in_state_dir(&state);
        assert!(f.load().unwrap().is_none());
        let c = KmsgCursor {
            boot_id: "b1".into(),
            seq: 42,
        };
        f.save(&c).unwrap();
        f.save(&KmsgCursor { seq: 43, ..c }).unwrap();
        assert_eq!(f.load().unwrap().unwrap().seq, 43);
        let names: Vec<_> = fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(CURSOR_FILE_NAME)]);
    }

    #[test]
    fn corrupt_cursor_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = CursorFile::in_state_dir(dir.path());
        fs::write(f.path(), "{\"boot_id\":\"x\"").unwrap();
        let e = f.load().unwrap_err();
        assert!(matches!(e, CursorError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("delete it"));
    }

    #[test]
    fn boot_id_is_trimmed_and_must_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("boot_id");
        fs::write(&p, "abc-def\n").unwrap();
        assert_eq!(read_boot_id(&p).unwrap(), "abc-def");
        fs::write(&p, "\n").unwrap();
        assert!(matches!(read_boot_id(&p), Err(CursorError::EmptyBootId(_))));
        assert!(matches!(
            read_boot_id(&dir.path().join("missing")),
            Err(CursorError::Io { .. })
        ));
    }
}
