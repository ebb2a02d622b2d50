//! `iser-guard selftest` without RDMA hardware: this machine's kernel has no ib_uverbs, so
//! libibverbs lists no device and the command must say so and exit 69. On a machine with
//! RDMA devices these tests skip (the lab runs the real self-test on Soft-RoCE).

use std::process::Command;

fn has_uverbs() -> bool {
    std::fs::read_dir("/sys/class/infiniband_verbs")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

fn selftest(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("selftest")
        .args(args)
        .env("ISER_GUARD_LOG", "off")
        .output()
        .expect("run iser-guard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn no_rdma_devices_is_a_clear_message_and_exit_69() {
    if has_uverbs() {
        eprintln!("skipped: this machine has uverbs devices; the lab tests the real self-test");
        return;
    }
    let (code, out, err) = selftest(&["rxe_ini/1"]);
    assert_eq!(code, 69, "stdout {out} stderr {err}");
    assert!(out.is_empty(), "{out}");
    if cfg!(feature = "verbs") {
        assert!(err.contains("no RDMA devices"), "{err}");
    } else {
        assert!(err.contains("built without verbs"), "{err}");
    }
}

#[test]
fn json_says_unavailable_with_exit_69() {
    if has_uverbs() {
        eprintln!("skipped: this machine has uverbs devices; the lab tests the real self-test");
        return;
    }
    let (code, out, _) = selftest(&["rxe_ini", "--json", "--timeout", "2"]);
    assert_eq!(code, 69);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["device"], "rxe_ini");
    assert_eq!(v["port"], 1);
    assert!(
        v["unavailable"].as_str().is_some_and(|r| !r.is_empty()),
        "{v}"
    );
}

#[test]
fn a_malformed_target_or_timeout_is_a_usage_error() {
    assert_eq!(selftest(&["rxe_ini/zero"]).0, 64);
    assert_eq!(selftest(&["rxe_ini/1", "--timeout", "0"]).0, 64);
}

#[test]
fn the_daemons_child_process_runner_reads_the_cli_back() {
    use iser_guard::core::selftest::SelfTestResult;
    use iser_guard::io::selftest::PortSelfTest;
    use iser_guard::io::selftest_process::SubprocessSelfTest;
    if has_uverbs() {
        eprintln!("skipped: this machine has uverbs devices; the lab tests the real self-test");
        return;
    }
    let t = SubprocessSelfTest {
        exe: env!("CARGO_BIN_EXE_iser-guard").into(),
    };
    let started = std::time::Instant::now();
    match t.run("rxe_ini", 1, std::time::Duration::from_secs(2)) {
        SelfTestResult::Unavailable { reason } => assert!(
            reason.contains("no RDMA devices") || reason.contains("built without verbs"),
            "{reason}"
        ),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(7));
}

/// Issue item: `--timeout 0` was refused with "must be between 0 and 3600", which 0 is.
#[test]
fn a_zero_timeout_is_refused_with_words_that_exclude_zero() {
    let (code, _, err) = selftest(&["rocep2s0f0/1", "--timeout", "0"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("more than 0 and at most 3600"), "{err}");
    assert!(!err.contains("between 0 and"), "{err}");
}
