//! Kernel capabilities as `status` shows them: the probe (`io::kernel_caps`) against a fake
//! kernel replaying real 6.1 and 6.12 bytes (crates/iser-guard-core/tests/fixtures/nldev), the
//! driver folder names from the fake sysfs trees (tests/fixtures/sysfs), and the release from
//! a fake /proc.

#[path = "support/fake_kernel.rs"]
mod fake_kernel;

use std::path::{Path, PathBuf};

use fake_kernel::*;
use iser_guard::cli::status::{gather_with_caps, StatusReport};
use iser_guard::core::kernel_caps::{CmIdTable, DeviceEvents};
use iser_guard::io::netlink::{NetlinkError, NldevClient};

fn sysfs(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

/// A /proc with just `sys/kernel/osrelease`.
fn proc_with(release: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sys/kernel")).unwrap();
    std::fs::write(
        dir.path().join("sys/kernel/osrelease"),
        format!("{release}\n"),
    )
    .unwrap();
    dir
}

fn status_of(moment: &str, release: &str) -> StatusReport {
    let proc = proc_with(release);
    let (t, h) = serve(Replay::default().moment(moment));
    let g = gather_with_caps(Ok(NldevClient::new(t)), &sysfs("rxe"), proc.path());
    h.join().unwrap();
    StatusReport::build(&g)
}

#[test]
fn on_6_1_device_events_are_polled_and_the_cm_id_table_is_there() {
    let r = status_of("k61/nldev-1-loggedin", "6.1.0-28-amd64");
    let caps = r.capabilities.as_ref().expect("capabilities");
    assert_eq!(caps.release.as_deref(), Some("6.1.0-28-amd64"));
    assert!(
        matches!(&caps.device_events, DeviceEvents::Polled(why) if why.contains("no RDMA netlink device events")),
        "{:?}",
        caps.device_events
    );
    assert_eq!(caps.cm_id_table, CmIdTable::Available);
    assert_eq!(caps.drivers, ["rxe"]);
    let text = r.render_text();
    assert!(
        text.contains("Kernel 6.1.0-28-amd64: device events polled"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["capabilities"]["device_events"]["mode"], "polled");
    assert_eq!(json["capabilities"]["cm_id_table"]["state"], "available");
    assert_eq!(json["capabilities"]["drivers"][0], "rxe");
}

#[test]
fn on_6_12_device_events_are_subscribed() {
    let r = status_of("k612/nldev-1-loggedin", "6.12.12+bpo-amd64");
    let caps = r.capabilities.as_ref().expect("capabilities");
    assert_eq!(caps.device_events, DeviceEvents::Subscribed);
    assert_eq!(caps.cm_id_table, CmIdTable::Available);
    assert!(
        r.render_text()
            .contains("device events subscribed, CM id table available, drivers rxe"),
        "{}",
        r.render_text()
    );
}

#[test]
fn without_rdma_netlink_only_the_driver_folders_are_known() {
    for (tree, want) in [
        ("e810", vec!["irdma"]),
        ("e810-k618", vec!["irdma.gen_2"]),
        ("mlx5", vec!["mlx5_ib.rdma"]),
    ] {
        let proc = proc_with("6.8.0-49-generic");
        let g = gather_with_caps::<iser_guard::io::netlink::FdTransport>(
            Err(NetlinkError::Unavailable),
            &sysfs(tree),
            proc.path(),
        );
        let caps = g.caps.expect("capabilities");
        assert_eq!(caps.device_events, DeviceEvents::Unknown, "{tree}");
        assert_eq!(caps.cm_id_table, CmIdTable::Unknown, "{tree}");
        assert_eq!(caps.drivers, want, "{tree}");
    }
}

#[test]
fn the_daemons_first_log_line_names_the_kernel_and_its_capabilities() {
    // The real binary: the line comes right after the configuration is read, before anything
    // that needs root (the kernel log), so it is there even when the daemon cannot go on.
    let dir = tempfile::tempdir().unwrap();
    let proc = proc_with("6.8.0-49-generic");
    let p = |rel: &str| format!("{:?}", dir.path().join(rel).display().to_string());
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[paths]\nkmsg = {}\nsysfs-root = {:?}\nproc-root = {:?}\nstate-dir = {}\n\
             control-socket = {}\n",
            p("kmsg"),
            sysfs("e810-k618").display().to_string(),
            proc.path().display().to_string(),
            p("state"),
            p("control.sock"),
        ),
    )
    .unwrap();
    // A FIFO as the kernel log (a regular file is refused as paths.kmsg).
    nix::unistd::mkfifo(
        &dir.path().join("kmsg"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(&config)
        .arg("daemon")
        .env("ISER_GUARD_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("NOTIFY_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stderr.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        first.contains("starting on kernel 6.8.0-49-generic: device events "),
        "{first}"
    );
    assert!(first.contains("drivers irdma.gen_2"), "{first}");
    // On this machine RDMA netlink may or may not exist; either way the line says which.
    assert!(
        ["subscribed", "polled", "unknown (no RDMA netlink to ask)"]
            .iter()
            .any(|m| first.contains(&format!("device events {m}"))),
        "{first}"
    );
}
