//! One test process at a time on the host's one kernel ring: the tests that write records
//! into the real /dev/kmsg (tests/daemon_e2e.rs, tests/kmsg_live.rs) take this host-wide
//! lock, so that a daemon one test starts (which may trust userspace records) never reads
//! the records another test process injects at the same moment: another target of the same
//! `cargo test`, a second checkout's test run, or scripts/stress-tests.sh. The lock is an
//! flock(2) on a fixed path, released when the test drops it or its process ends.
#![allow(dead_code)]

use std::os::fd::AsRawFd;

/// Held for as long as the test uses /dev/kmsg.
pub struct KmsgLock(std::fs::File);

/// Waits for the host-wide /dev/kmsg test lock and takes it.
pub fn acquire() -> KmsgLock {
    let dir = if std::path::Path::new("/run/lock").is_dir() {
        std::path::PathBuf::from("/run/lock")
    } else {
        std::env::temp_dir()
    };
    let path = dir.join("iser-guard-tests-kmsg.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    loop {
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if r == 0 {
            return KmsgLock(f);
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::Interrupted,
            "flock {}: {e}",
            path.display()
        );
    }
}
