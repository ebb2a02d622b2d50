//! The process runner: exit codes, signals, bounded capture, spawn errors, deadline kill.

use std::time::Duration;

use iser_guard::io::process::{run, Exit, Invocation, RunError};

fn sh(script: &str, timeout: Duration) -> Invocation {
    Invocation::new("/bin/sh", ["-c", script], timeout)
}

#[test]
fn exit_code_and_both_streams_are_captured() {
    let out = run(&sh(
        "echo out; echo err >&2; exit 3",
        Duration::from_secs(20),
    ))
    .unwrap();
    assert_eq!(out.exit, Exit::Code(3));
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert!(!out.truncated);
    assert_eq!(out.last_words(), "err");
    assert!(!out.success());
}

#[test]
fn killed_by_a_foreign_signal_is_reported_as_such() {
    let out = run(&sh("kill -TERM $$", Duration::from_secs(20))).unwrap();
    assert_eq!(out.exit, Exit::Signal(15));
}

#[test]
fn output_beyond_the_limit_is_dropped_but_drained() {
    let mut inv = sh(
        "head -c 200000 /dev/zero | tr '\\0' x; echo done >&2",
        Duration::from_secs(20),
    );
    inv.capture_limit = 1000;
    let out = run(&inv).unwrap();
    assert_eq!(
        out.exit,
        Exit::Code(0),
        "the child must not block on a full pipe"
    );
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.truncated);
    assert_eq!(out.stderr, "done\n");
}

#[test]
fn missing_program_is_a_spawn_error() {
    let err = run(&Invocation::new(
        "/nonexistent/x",
        ["a"],
        Duration::from_secs(1),
    ))
    .unwrap_err();
    assert!(matches!(err, RunError::Spawn { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/x"));
}

#[test]
fn deadline_kills_and_keeps_partial_output() {
    // The deadline is what is tested; it must leave the shell time to write its two lines on
    // a loaded machine (they take milliseconds), and 3 s cuts the 600 s short all the same.
    let err = run(&sh(
        "echo started; echo why >&2; sleep 600",
        Duration::from_secs(3),
    ))
    .unwrap_err();
    match err {
        RunError::Timeout { stdout, stderr, .. } => {
            assert_eq!(stdout, "started\n");
            assert_eq!(stderr, "why\n");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_background_helper_cannot_hold_the_command_open() {
    // The shell exits at once but leaves a helper holding stdout; the runner kills the group
    // instead of waiting 600 s for end-of-file.
    let out = run(&sh("sleep 600 & echo bye", Duration::from_secs(20))).unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(out.stdout, "bye\n");
}
