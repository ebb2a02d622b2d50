//! The engine's state journal: one JSON file in the state directory, replaced atomically.
//!
//! The bytes are the journal's own versioned format (`core::journal`), never the engine's
//! internal types, so a newer release reads a journal the previous one wrote. Writing goes
//! through [`crate::io::atomic::write_atomic`]: after a crash the journal is either the old
//! or the new snapshot, never a mix. Loading: a missing journal is a fresh start; an
//! unreadable, corrupt or too-new one is a typed error. The daemon then keeps the file aside
//! ([`Journal::keep_aside`]: renamed with a UTC timestamp suffix, never deleted or
//! overwritten) and starts in safe mode.

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

/// The journal in one state directory. Clones share one write lock: every write goes
/// through the same temporary file (`.engine-journal.json.tmp`), so two writes that
/// overlapped (the shutdown write and one still running on a blocking thread) would
/// truncate each other's file and one `rename` would find it gone.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    write_lock: std::sync::Arc<std::sync::Mutex<()>>,
}

/// A journal as read: the engine's snapshot and the incident list.
pub type Loaded = (EngineSnapshot, Vec<crate::core::observe::Incident>);

impl Journal {
    /// The journal kept in `state_dir` (`paths.state-dir`).
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Journal {
            dir: state_dir.into(),
            write_lock: std::sync::Arc::default(),
        }
    }

    /// The journal file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(JOURNAL_FILE)
    }

    /// Replaces the journal with `snapshot`, atomically and durably.
    /// Writes never overlap (see [`Journal`]).
    pub fn save(&self, snapshot: &EngineSnapshot) -> Result<(), JournalError> {
        self.save_with_incidents(snapshot, &[])
    }

    /// Replaces the journal with `snapshot` and the daemon's incident list (what
    /// `iser-guard history` reads), atomically and durably.
    pub fn save_with_incidents(
        &self,
        snapshot: &EngineSnapshot,
        incidents: &[crate::core::observe::Incident],
    ) -> Result<(), JournalError> {
        // A writer that panicked left no half state behind the lock (the file is replaced
        // atomically), so a poisoned lock is still usable.
        let _one_writer = self
            .write_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        write_atomic(
            &self.path(),
            &format::encode_with_incidents(snapshot, incidents),
        )
        .map_err(|source| JournalError::Write { source })
    }

    /// The journaled snapshot, migrated from whichever version wrote it; `Ok(None)` if
    /// there is no journal yet.
    pub fn load(&self) -> Result<Option<EngineSnapshot>, JournalError> {
        Ok(self.load_with_incidents()?.map(|(s, _)| s))
    }

    /// The journaled snapshot and incident list; `Ok(None)` if there is no journal yet.
    pub fn load_with_incidents(&self) -> Result<Option<Loaded>, JournalError> {
        let path = self.path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(JournalError::Read { path, source }),
        };
        format::decode_with_incidents(&bytes)
            .map(Some)
            .map_err(|source| match source {
                JournalFormatError::Newer { .. } => JournalError::NewerFormat { path, source },
                _ => JournalError::Corrupt { path, source },
            })
    }
}

/// Why a journal could not be kept aside.
#[derive(Debug, thiserror::Error)]
#[error("cannot rename {from} to {to}: {source}")]
pub struct KeepAsideError {
    /// The journal.
    pub from: PathBuf,
    /// The name it was to get.
    pub to: PathBuf,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

impl JournalError {
    /// What is wrong, without the file name or advice (the daemon's safe-mode alert adds
    /// its own: the file is kept aside by then).
    pub fn problem(&self) -> String {
        match self {
            JournalError::Read { source, .. } => format!("it cannot be read ({source})"),
            JournalError::Write { source } => source.to_string(),
            JournalError::Corrupt { source, .. } => format!("it is corrupt ({source})"),
            JournalError::NewerFormat {
                source: JournalFormatError::Newer { found },
                ..
            } => format!(
                "it has format version {found}, written by a newer iser-guard release (this \
                 one knows up to version {})",
                format::VERSION
            ),
            JournalError::NewerFormat { source, .. } => source.to_string(),
        }
    }

    /// The word for the kept file's suffix: `corrupt`, `unreadable`, or `v<N>` for a newer
    /// format (so the operator sees which release wrote it).
    pub fn kind_word(&self) -> String {
        match self {
            JournalError::Read { .. } => "unreadable".into(),
            JournalError::Write { .. } | JournalError::Corrupt { .. } => "corrupt".into(),
            JournalError::NewerFormat {
                source: JournalFormatError::Newer { found },
                ..
            } => format!("v{found}"),
            JournalError::NewerFormat { .. } => "newer".into(),
        }
    }
}

/// `YYYYMMDDTHHMMSSZ` for seconds since the Unix epoch (UTC, proleptic Gregorian).
pub fn utc_stamp(unix_secs: u64) -> String {
    let days = i64::try_from(unix_secs / 86_400).unwrap_or(0);
    let rem = unix_secs % 86_400;
    // Days to civil date (Howard Hinnant's `civil_from_days`).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Journal {
    /// Moves the journal aside as `engine-journal.json.<what>-<UTC stamp>` (a `-N` suffix
    /// when that name is taken: nothing is ever overwritten) and returns the new path. The
    /// file is renamed, never copied or deleted, so the operator can inspect it.
    /// `unix_secs`: the wall-clock time for the name.
    pub fn keep_aside(&self, what: &str, unix_secs: u64) -> Result<PathBuf, KeepAsideError> {
        let from = self.path();
        let base = format!("{JOURNAL_FILE}.{what}-{}", utc_stamp(unix_secs));
        let mut to = self.dir.join(&base);
        for n in 1.. {
            // A hard link fails when the name exists, so an earlier kept file is never
            // replaced; then the original name is removed (the data stays, under `to`).
            match fs::hard_link(&from, &to) {
                Ok(()) => {
                    return fs::remove_file(&from)
                        .map(|()| to.clone())
                        .map_err(|source| KeepAsideError {
                            from: from.clone(),
                            to: to.clone(),
                            source,
                        })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => {
                    to = self.dir.join(format!("{base}-{n}"));
                }
                // No hard links here (some filesystems): a plain rename, after checking
                // the name is free.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EPERM | libc::EXDEV | libc::EOPNOTSUPP)
                    ) && !to.exists() =>
                {
                    return fs::rename(&from, &to)
                        .map(|()| to.clone())
                        .map_err(|source| KeepAsideError {
                            from: from.clone(),
                            to: to.clone(),
                            source,
                        })
                }
                Err(source) => return Err(KeepAsideError { from, to, source }),
            }
        }
        unreachable!("the loop returns")
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
    fn overlapping_saves_from_clones_all_succeed() {
        // The lab's standalone `reconnect`: the shutdown write ran while the loop's last
        // write was still on a blocking thread; both used the same temporary file and one
        // rename failed with ENOENT.
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        let snap = Engine::new(Policy::default(), 7).snapshot();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (j, snap) = (j.clone(), snap.clone());
                std::thread::spawn(move || {
                    (0..40)
                        .map(|_| j.save(&snap).map_err(|e| e.to_string()))
                        .filter(Result::is_err)
                        .count()
                })
            })
            .collect();
        let failed: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(failed, 0, "overlapping journal writes failed");
        assert_eq!(j.load().unwrap(), Some(snap));
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
    fn utc_stamps_match_known_dates() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000Z");
        assert_eq!(utc_stamp(1_796_154_921), "20261201T195521Z");
    }

    #[test]
    fn keeping_aside_renames_with_a_stamp_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        fs::write(j.path(), b"first").unwrap();
        let a = j.keep_aside("corrupt", 1_796_154_921).unwrap();
        assert_eq!(
            a.file_name().unwrap(),
            "engine-journal.json.corrupt-20261201T195521Z"
        );
        assert!(!j.path().exists());
        fs::write(j.path(), b"second").unwrap();
        let b = j.keep_aside("corrupt", 1_796_154_921).unwrap();
        assert_ne!(a, b);
        assert_eq!(fs::read(&a).unwrap(), b"first");
        assert_eq!(fs::read(&b).unwrap(), b"second");
        // Nothing to keep: a typed error naming both paths.
        let e = j.keep_aside("corrupt", 0).unwrap_err();
        assert!(e.to_string().contains(JOURNAL_FILE), "{e}");
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
