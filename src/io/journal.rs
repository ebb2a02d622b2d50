//! The engine's state journal: one JSON file in the state directory, replaced atomically.
//!
//! Writing: a temporary file in the same directory, `fsync`, `rename` over the journal, then
//! `fsync` of the directory, so after a crash the journal is either the old or the new
//! snapshot, never a mix. Loading: a missing journal is a fresh start; an unreadable or
//! corrupt one is a typed error (never silently replaced, so no remembered session is lost).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::core::recovery::EngineSnapshot;

/// The journal's file name inside the state directory.
pub const JOURNAL_FILE: &str = "engine-journal.json";

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// An OS error.
    #[error(
        "state journal {path}: {op} failed: {source}; check the state directory (paths.state-dir)"
    )]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not a valid journal.
    #[error(
        "state journal {path} is corrupt ({source}); it was left untouched. Move it aside \
         (mv {path} {path}.corrupt) to start afresh: remembered sessions are then re-learned \
         from iscsiadm"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// The journal in one state directory.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// The journal kept in `state_dir` (`paths.state-dir`).
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Journal {
            dir: state_dir.into(),
        }
    }

    /// The journal file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(JOURNAL_FILE)
    }

    /// Replaces the journal with `snapshot`, atomically and durably.
    pub fn save(&self, snapshot: &EngineSnapshot) -> Result<(), JournalError> {
        let bytes = serde_json::to_vec_pretty(snapshot).map_err(|e| JournalError::Io {
            path: self.path(),
            op: "serialize",
            source: std::io::Error::other(e),
        })?;
        self.save_bytes(&bytes)
    }

    fn save_bytes(&self, bytes: &[u8]) -> Result<(), JournalError> {
        let path = self.path();
        let tmp = self.dir.join(format!(".{JOURNAL_FILE}.tmp"));
        let io = |op: &'static str, p: &Path| {
            let p = p.to_path_buf();
            move |source| JournalError::Io {
                path: p,
                op,
                source,
            }
        };
        fs::create_dir_all(&self.dir).map_err(io("create directory", &self.dir))?;
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io("create", &tmp))?;
        f.write_all(bytes).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("fsync", &tmp))?;
        drop(f);
        fs::rename(&tmp, &path).map_err(io("rename", &path))?;
        // The rename is durable only once the directory entry is.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io("fsync directory", &self.dir))?;
        Ok(())
    }

    /// The journaled snapshot; `Ok(None)` if there is no journal yet.
    pub fn load(&self) -> Result<Option<EngineSnapshot>, JournalError> {
        let path = self.path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(JournalError::Io {
                    path,
                    op: "read",
                    source,
                })
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| JournalError::Corrupt { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::recovery::{Engine, Policy};

    #[test]
    fn save_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path().join("state"));
        assert!(j.load().unwrap().is_none());
        let snap = Engine::new(Policy::default(), 7).snapshot();
        j.save(&snap).unwrap();
        assert_eq!(j.load().unwrap(), Some(snap.clone()));
        // A second save replaces the first and leaves no temporary file behind.
        j.save(&snap).unwrap();
        let names: Vec<_> = fs::read_dir(dir.path().join("state"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(JOURNAL_FILE)]);
    }

    #[test]
    fn a_corrupt_journal_is_a_typed_error_and_is_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        fs::write(j.path(), b"{\"version\": 1, \"ports\": [tru").unwrap();
        match j.load() {
            Err(JournalError::Corrupt { path, .. }) => assert_eq!(path, j.path()),
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert!(j.path().exists());
        let msg = j.load().unwrap_err().to_string();
        assert!(msg.contains("mv "), "{msg}");
    }

    #[test]
    fn an_unwritable_directory_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        fs::write(&file, b"x").unwrap();
        let j = Journal::new(&file);
        let snap = Engine::new(Policy::default(), 1).snapshot();
        assert!(matches!(j.save(&snap), Err(JournalError::Io { .. })));
    }
}
