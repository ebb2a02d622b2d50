//! Reconnect and verify against a fixture sysfs tree and a scripted nvme-cli.

use super::*;
use crate::core::nvme_fabrics::NvmeNsRef;
use std::fs;

fn write_ctrl(root: &Path, name: &str, state: &str) {
    let d = root.join("class/nvme").join(name);
    let ns = format!("{name}c{}n1", &name[4..]);
    fs::create_dir_all(d.join(&ns)).unwrap();
    for (k, v) in [
        ("transport", "rdma"),
        ("address", "traddr=192.0.2.10,trsvcid=4420"),
        ("subsysnqn", "nqn.2014-08.org.example:lab-nvme"),
        ("state", state),
        ("cntrltype", "io"),
    ] {
        fs::write(d.join(k), format!("{v}\n")).unwrap();
    }
    fs::write(d.join(&ns).join("nsid"), "1\n").unwrap();
}

fn remembered() -> NvmeRdmaController {
    NvmeRdmaController {
        name: "nvme0".into(),
        address: crate::core::nvme_fabrics::parse_fabrics_address("traddr=192.0.2.10,trsvcid=4420")
            .unwrap(),
        subsysnqn: "nqn.2014-08.org.example:lab-nvme".into(),
        hostnqn: None,
        hostid: None,
        state: "live".into(),
        io_queues: Some(4),
        queue_size: None,
        ctrl_loss_tmo: None,
        reconnect_delay: None,
        kato: None,
        namespaces: vec![NvmeNsRef {
            block: "nvme0n1".into(),
            nsid: Some(1),
        }],
        placed: Some(("rocep2s0f0".into(), 1)),
    }
}

fn ok_read(_: &Path) -> std::io::Result<()> {
    Ok(())
}

fn failed_read(_: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from_raw_os_error(5))
}

fn restore(root: &Path, cli: Arc<ScriptedNvmeCli>, read: BlockRead) -> NvmeCliRestore {
    NvmeCliRestore {
        connector: cli,
        sysfs_root: root.to_path_buf(),
        dev_root: root.join("dev"),
        enabled: true,
        read,
    }
}

#[test]
fn a_deleted_controller_is_connected_again_and_verified() {
    let t = tempfile::tempdir().unwrap();
    let cli = Arc::new(ScriptedNvmeCli::default());
    let root = t.path().to_path_buf();
    // What the kernel shows after the connect: a new controller, renumbered.
    cli.on_call(move |_| write_ctrl(&root, "nvme1", "live"));
    let r = restore(t.path(), cli.clone(), ok_read).restore(&[remembered()], Duration::ZERO);
    assert_eq!(
        r[0].result,
        NvmeBackResult::Back {
            now: "nvme1".into()
        }
    );
    assert_eq!(
        cli.calls(),
        [[
            "connect",
            "--transport=rdma",
            "--traddr=192.0.2.10",
            "--trsvcid=4420",
            "--nqn=nqn.2014-08.org.example:lab-nvme",
            "--nr-io-queues=4"
        ]]
    );
}

#[test]
fn a_failed_connect_a_controller_not_live_and_a_failed_read_are_each_said() {
    let t = tempfile::tempdir().unwrap();
    let cli = Arc::new(ScriptedNvmeCli::default());
    cli.answer(Err(
        "Code(1): Failed to write to /dev/nvme-fabrics: Connection refused".into(),
    ));
    let r = restore(t.path(), cli.clone(), ok_read).restore(&[remembered()], Duration::ZERO);
    assert!(
        matches!(&r[0].result, NvmeBackResult::ConnectFailed { reason } if reason.contains("Connection refused")),
        "{:?}",
        r[0].result
    );
    write_ctrl(t.path(), "nvme1", "connecting");
    let r = restore(t.path(), cli.clone(), ok_read).restore(&[remembered()], Duration::ZERO);
    assert_eq!(r[0].result.label(), "not-live");
    fs::write(t.path().join("class/nvme/nvme1/state"), "live\n").unwrap();
    let r = restore(t.path(), cli, failed_read).restore(&[remembered()], Duration::ZERO);
    assert!(
        matches!(&r[0].result, NvmeBackResult::ReadFailed { namespace, .. } if namespace == "nvme1n1"),
        "{:?}",
        r[0].result
    );
}

#[test]
fn without_nvme_cli_or_when_disabled_nothing_is_connected() {
    let t = tempfile::tempdir().unwrap();
    let cli = Arc::new(ScriptedNvmeCli {
        missing: true,
        ..Default::default()
    });
    let r = restore(t.path(), cli.clone(), ok_read).restore(&[remembered()], Duration::ZERO);
    assert_eq!(r[0].result, NvmeBackResult::NoNvmeCli);
    let mut off = restore(t.path(), cli.clone(), ok_read);
    off.enabled = false;
    assert_eq!(
        off.restore(&[remembered()], Duration::ZERO)[0].result,
        NvmeBackResult::Disabled
    );
    assert!(cli.calls().is_empty());
}

#[test]
fn a_connect_refused_while_the_port_comes_up_is_tried_again_until_the_deadline() {
    let t = tempfile::tempdir().unwrap();
    let cli = Arc::new(ScriptedNvmeCli::default());
    cli.answer(Err(
        "Code(1): Failed to write to /dev/nvme-fabrics: Connection refused".into(),
    ));
    let root = t.path().to_path_buf();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    // The second connect succeeds and the controller appears.
    cli.on_call(move |_| {
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            write_ctrl(&root, "nvme1", "live");
        }
    });
    let r =
        restore(t.path(), cli.clone(), ok_read).restore(&[remembered()], Duration::from_secs(5));
    assert_eq!(
        r[0].result,
        NvmeBackResult::Back {
            now: "nvme1".into()
        }
    );
    assert_eq!(cli.calls().len(), 2);
}
