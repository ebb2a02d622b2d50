//! The standalone recovery lock: one holder at a time, a typed "held by pid N" refusal, and
//! release on drop.

use iser_guard::io::lock::{LockError, RecoveryLock, LOCK_FILE_NAME};

#[test]
fn second_acquire_is_refused_with_holder_pid_and_purpose() {
    let dir = tempfile::tempdir().unwrap();
    let held = RecoveryLock::try_acquire(dir.path(), "iser-guard recover rocep2s0f0").unwrap();
    assert_eq!(held.path(), dir.path().join(LOCK_FILE_NAME));

    // flock locks belong to the open file description: a second open in the same process
    // conflicts exactly as another process would.
    let err = RecoveryLock::try_acquire(dir.path(), "iser-guard reset-device x").unwrap_err();
    match &err {
        LockError::Held { pid, purpose, .. } => {
            assert_eq!(*pid, Some(std::process::id()));
            assert_eq!(purpose.as_deref(), Some("iser-guard recover rocep2s0f0"));
        }
        other => panic!("expected Held, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
    assert!(msg.contains("iser-guard recover rocep2s0f0"), "{msg}");

    drop(held);
    let again = RecoveryLock::try_acquire(dir.path(), "second").unwrap();
    let content = std::fs::read_to_string(again.path()).unwrap();
    assert_eq!(content, format!("{} second\n", std::process::id()));
}

#[test]
fn lock_held_by_another_process_names_that_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOCK_FILE_NAME);
    std::fs::write(&path, "").unwrap();
    // flock(1) holds the lock while its child runs; the child writes the record like we do
    // and then waits to be killed.
    let flock = std::path::Path::new("/usr/bin/flock");
    if !flock.exists() {
        eprintln!("flock(1) not installed; skipping the cross-process case");
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(flock)
        .process_group(0)
        .arg(&path)
        .arg("sh")
        .arg("-c")
        .arg(format!(
            "echo \"$$ manual run\" > {}; exec sleep 30",
            path.display()
        ))
        .spawn()
        .unwrap();
    // Wait until the holder has written its record (bounded: a liveness bound for a loaded
    // machine).
    let mut err = None;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < end {
        match RecoveryLock::try_acquire(dir.path(), "me") {
            // Until flock(1) holds the lock, our own probe may have left our pid in the
            // record: only the child's pid counts.
            Err(e @ LockError::Held { pid: Some(p), .. }) if p != std::process::id() => {
                err = Some(e);
                break;
            }
            Err(LockError::Held { .. }) => {}
            Ok(l) => drop(l),
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The `sleep` inherits the locked descriptor: kill the whole group, not just flock(1).
    let pgid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    match err {
        Some(LockError::Held {
            pid: Some(pid),
            purpose,
            ..
        }) => {
            assert_ne!(pid, std::process::id());
            assert_eq!(purpose.as_deref(), Some("manual run"));
        }
        other => panic!("expected Held by the flock child, got {other:?}"),
    }
    // The holder is dead: the kernel releases its lock once the `sleep` grandchild, which
    // `wait` does not reap, is gone too (bounded wait).
    let mut last = None;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < end {
        match RecoveryLock::try_acquire(dir.path(), "after") {
            Ok(_) => return,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("lock never released after the holder died: {last:?}");
}

#[test]
fn missing_directory_is_a_typed_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = RecoveryLock::try_acquire(&dir.path().join("nope"), "x").unwrap_err();
    assert!(matches!(err, LockError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("nope"));
}
