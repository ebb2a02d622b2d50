//! The engine's state journal: one JSON file in the state directory, replaced atomically.
//!
//! The bytes are the journal's own versioned format (`core::journal`), never the engine's
//! internal types, so a newer release reads a journal the previous one wrote. Writing goes
//! through [`crate::io::atomic::write_atomic`]: after a crash the journal is either the old
//! or the new snapshot, never a mix. Loading: a missing journal is a fresh start; an
//! unreadable, corrupt or too-new one is a typed error (never silently replaced, so no
//! remembered session is lost).

use std::fs;
use std::path::PathBuf;

use crate::core::journal::{self as format, JournalFormatError};
use crate::core::recovery::EngineSnapshot;
use crate::io::atomic::{write_atomic, AtomicWriteError};

/// The journal's file name inside the state directory.
pub const JOURNAL_FILE: &str = "engine-journal.json";

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading failed.
    #[error(
        "state journal {path}: read failed: {source}; check the state directory (paths.state-dir)"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing failed (which step is in the source).
    #[error("state journal: {source}; check the state directory (paths.state-dir)")]
    Write {
        /// The failed step.
        #[source]
        source: AtomicWriteError,
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
        /// What is wrong with it.
        #[source]
        source: JournalFormatError,
    },
    /// The file was written by a newer release in a format this one does not know.
    #[error(
        "state journal {path}: {source}; it was left untouched (to move it aside: \
         mv {path} {path}.newer)"
    )]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// The version found, in the source.
        #[source]
        source: JournalFormatError,
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
        write_atomic(&self.path(), &format::encode(snapshot))
            .map_err(|source| JournalError::Write { source })
    }

    /// The journaled snapshot, migrated from whichever version wrote it; `Ok(None)` if
    /// there is no journal yet.
    pub fn load(&self) -> Result<Option<EngineSnapshot>, JournalError> {
        let path = self.path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(JournalError::Read { path, source }),
        };
        format::decode(&bytes)
            .map(Some)
            .map_err(|source| match source {
                JournalFormatError::Newer { .. } => JournalError::NewerFormat { path, source },
                _ => JournalError::Corrupt { path, source },
            })
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
    fn a_journal_from_a_newer_release_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        fs::write(j.path(), br#"{"version": 99, "ports": []}"#).unwrap();
        let e = j.load().unwrap_err();
        assert!(matches!(e, JournalError::NewerFormat { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("version 99") && msg.contains("newer release"),
            "{msg}"
        );
        assert!(j.path().exists());
    }

    #[test]
    fn an_unwritable_directory_is_a_write_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        fs::write(&file, b"x").unwrap();
        let j = Journal::new(&file);
        let snap = Engine::new(Policy::default(), 1).snapshot();
        assert!(matches!(j.save(&snap), Err(JournalError::Write { .. })));
    }
}
