//! The persisted /dev/kmsg position: the last sequence number handed on, with the boot it
//! belongs to, in `<state dir>/kmsg.cursor`.
//!
//! Sequence numbers restart at 0 on every boot, so a position means nothing without its boot
//! id (`/proc/sys/kernel/random/boot_id`, configurable as `paths.boot-id`). The file is small
//! JSON, written with [`write_atomic`] (temporary file, fsync, rename, fsync of the directory)
//! so a crash leaves either the old or the new position, never a torn one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::io::atomic::write_atomic;

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
    /// Replacing the cursor file failed (the step and path are in the source).
    #[error("cannot save kmsg cursor: {0}")]
    Save(#[source] crate::io::atomic::AtomicWriteError),
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
    /// The background save did not finish in time (a very slow disk); the previous position
    /// stays in place, so a restart replays a few records rather than skipping any.
    #[error("saving the kmsg cursor {path} did not finish within {timeout:?}")]
    Timeout {
        /// The file.
        path: PathBuf,
        /// How long was waited.
        timeout: Duration,
    },
    /// The last background save failed (already logged when it happened).
    #[error("saving the kmsg cursor failed: {0}")]
    SaveFailed(String),
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

    /// Saves `cursor` atomically ([`write_atomic`]), creating the state directory if needed.
    pub fn save(&self, cursor: &KmsgCursor) -> Result<(), CursorError> {
        let mut body = serde_json::to_vec(cursor).map_err(|e| CursorError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        body.push(b'\n');
        write_atomic(&self.path, &body).map_err(CursorError::Save)
    }
}

/// Saves cursors on a background thread, so that the kernel-log reader never waits for a
/// disk (`fsync` can take seconds on a busy one) and a shutdown waits only a bounded time.
/// Only the newest submitted cursor matters: older pending ones are replaced.
#[derive(Debug)]
pub struct CursorSaver {
    shared: Arc<(Mutex<SaverState>, Condvar)>,
    path: PathBuf,
}

#[derive(Debug, Default)]
struct SaverState {
    pending: Option<KmsgCursor>,
    in_flight: bool,
    stop: bool,
    errors: u64,
    last_error: Option<String>,
}

impl CursorSaver {
    /// Starts the saver thread for `file`.
    pub fn spawn(file: CursorFile) -> io::Result<Self> {
        let shared = Arc::new((Mutex::new(SaverState::default()), Condvar::new()));
        let path = file.path().to_path_buf();
        let worker = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("kmsg-cursor".into())
            .spawn(move || save_loop(&file, &worker))?;
        Ok(CursorSaver { shared, path })
    }

    /// Queues `cursor` to be saved (replacing any queued one). Never blocks on I/O.
    pub fn submit(&self, cursor: KmsgCursor) {
        let (lock, cv) = &*self.shared;
        lock.lock().unwrap_or_else(PoisonError::into_inner).pending = Some(cursor);
        cv.notify_all();
    }

    /// Failed saves so far.
    pub fn errors(&self) -> u64 {
        let (lock, _) = &*self.shared;
        lock.lock().unwrap_or_else(PoisonError::into_inner).errors
    }

    /// Waits until everything submitted is on disk, at most `timeout`.
    pub fn flush(&self, timeout: Duration) -> Result<(), CursorError> {
        let (lock, cv) = &*self.shared;
        let deadline = Instant::now() + timeout;
        let mut st = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while st.pending.is_some() || st.in_flight {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(CursorError::Timeout {
                    path: self.path.clone(),
                    timeout,
                });
            }
            st = cv
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        match st.last_error.take() {
            Some(e) => Err(CursorError::SaveFailed(e)),
            None => Ok(()),
        }
    }
}

impl Drop for CursorSaver {
    fn drop(&mut self) {
        // Not joined: a save stuck in fsync must not hold up the process. Whatever is queued
        // is still written if the process lives on; if it exits first, the rename has not
        // happened and the previous cursor stays valid.
        let (lock, cv) = &*self.shared;
        lock.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        cv.notify_all();
    }
}

fn save_loop(file: &CursorFile, shared: &(Mutex<SaverState>, Condvar)) {
    let (lock, cv) = shared;
    let mut st = lock.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(cursor) = st.pending.take() {
            st.in_flight = true;
            drop(st);
            let result = file.save(&cursor);
            st = lock.lock().unwrap_or_else(PoisonError::into_inner);
            st.in_flight = false;
            match result {
                Ok(()) => st.last_error = None,
                Err(e) => {
                    tracing::warn!("{e}; will retry with the next position");
                    st.errors += 1;
                    st.last_error = Some(e.to_string());
                }
            }
            cv.notify_all();
        } else if st.stop {
            return;
        } else {
            st = cv.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
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
    fn saver_writes_the_newest_cursor_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let file = CursorFile::in_state_dir(dir.path());
        let saver = CursorSaver::spawn(file.clone()).unwrap();
        for seq in 0..100 {
            saver.submit(KmsgCursor {
                boot_id: "b".into(),
                seq,
            });
        }
        saver.flush(Duration::from_secs(30)).unwrap();
        assert_eq!(file.load().unwrap().unwrap().seq, 99);
        assert_eq!(saver.errors(), 0);

        // A state dir that cannot be created: counted, reported by flush.
        let blocker = dir.path().join("not-a-dir");
        fs::write(&blocker, "").unwrap();
        let bad = CursorSaver::spawn(CursorFile::in_state_dir(&blocker.join("state"))).unwrap();
        bad.submit(KmsgCursor {
            boot_id: "b".into(),
            seq: 1,
        });
        assert!(matches!(
            bad.flush(Duration::from_secs(30)),
            Err(CursorError::SaveFailed(_))
        ));
        assert_eq!(bad.errors(), 1);
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
