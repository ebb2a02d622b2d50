//! Reading and reinstating against a scripted multipathd whose answers follow the format
//! (`show paths raw format`, print.c's wildcards) and its `ok`/`fail` replies.

use super::*;
use crate::core::multipath::{DmPathState, Hcil};
use std::sync::Arc;

fn remembered(dev: &str, lun: u64) -> MultipathPathRef {
    MultipathPathRef {
        map: "mpatha".into(),
        dev: dev.into(),
        hcil: Some(Hcil {
            host: 7,
            channel: 0,
            target: 0,
            lun,
        }),
        port: 1,
        link: "session s1".into(),
        dm: DmPathState::Active,
    }
}

fn carriers(devs: &[&str]) -> Vec<BlockCarrier> {
    devs.iter()
        .map(|d| BlockCarrier {
            block: d.to_string(),
            device: "mlx5_0".into(),
            port: 1,
            link: "session s1".into(),
        })
        .collect()
}

fn restore(cli: Arc<ScriptedMultipathd>) -> MultipathdRestore {
    MultipathdRestore {
        client: cli,
        poll: Duration::from_millis(1),
        reinstate_wait: Duration::from_millis(5),
    }
}

#[test]
fn reads_with_the_documented_format_and_parses() {
    let cli = Arc::new(ScriptedMultipathd::default());
    cli.answer(Ok("mpatha|sdb|8:16|7:0:0:1|active|running|ready\n".into()));
    let paths = read_paths(cli.as_ref(), COMMAND_TIMEOUT).unwrap().unwrap();
    assert_eq!(paths.len(), 1);
    assert_eq!(
        cli.calls(),
        vec![vec![
            "show".to_string(),
            "paths".into(),
            "raw".into(),
            "format".into(),
            "%m|%d|%D|%i|%t|%o|%T".into()
        ]]
    );
}

#[test]
fn not_installed_is_no_maps_and_no_call() {
    let cli = ScriptedMultipathd {
        missing: true,
        ..Default::default()
    };
    assert_eq!(read_paths(&cli, COMMAND_TIMEOUT).unwrap(), None);
    assert!(cli.calls().is_empty());
}

#[test]
fn a_daemon_that_refuses_or_does_not_answer_is_a_clear_error() {
    let cli = ScriptedMultipathd::default();
    cli.answer(Ok("fail\n".into()));
    let e = read_paths(&cli, COMMAND_TIMEOUT).unwrap_err();
    assert!(
        e.to_string().contains("refused `show paths raw format"),
        "{e}"
    );
    cli.answer(Err(MultipathdError::NotAnswering(
        "Code(1): ux_socket_connect: Connection refused".into(),
    )));
    let e = read_paths(&cli, COMMAND_TIMEOUT).unwrap_err();
    assert_eq!(
        e.to_string(),
        "multipathd did not answer: Code(1): ux_socket_connect: Connection refused"
    );
}

#[test]
fn an_empty_answer_is_no_maps() {
    let cli = ScriptedMultipathd::default();
    cli.answer(Ok(String::new()));
    assert_eq!(read_paths(&cli, COMMAND_TIMEOUT).unwrap(), Some(Vec::new()));
}

#[test]
fn a_path_the_checker_reinstates_is_active_without_a_reinstate() {
    let cli = Arc::new(ScriptedMultipathd::default());
    cli.answer(Ok(
        "mpatha|sdb|8:16|7:0:0:1|failed|running|i/o pending\n".into()
    ));
    cli.answer(Ok("mpatha|sdb|8:16|7:0:0:1|active|running|ready\n".into()));
    let r = restore(cli.clone()).restore(
        &[remembered("sdb", 1)],
        &carriers(&["sdb"]),
        Duration::from_secs(5),
    );
    assert_eq!(r[0].result, PathBackResult::Active { dev: "sdb".into() });
    assert!(cli.calls().iter().all(|c| c[0] == "show"));
}

#[test]
fn a_path_still_failed_after_the_wait_is_reinstated() {
    let cli = Arc::new(ScriptedMultipathd::default());
    let reinstated = Arc::new(Mutex::new(false));
    let r2 = reinstated.clone();
    // Re-logged in as sdg (new SCSI host 9), failed in the map until reinstated.
    cli.on_call(move |args| {
        if args[0] == "reinstate" {
            *r2.lock().unwrap() = true;
            return Some(Ok("ok\n".into()));
        }
        let dm = if *r2.lock().unwrap() {
            "active"
        } else {
            "failed"
        };
        Some(Ok(format!("mpatha|sdg|8:96|9:0:0:1|{dm}|running|ready\n")))
    });
    let r = restore(cli.clone()).restore(
        &[remembered("sdb", 1)],
        &carriers(&["sdg"]),
        Duration::from_millis(20),
    );
    assert_eq!(
        r[0].result,
        PathBackResult::Reinstated { dev: "sdg".into() }
    );
    assert!(cli
        .calls()
        .contains(&vec!["reinstate".into(), "path".into(), "sdg".into()]));
}

#[test]
fn a_refused_reinstate_is_reported_with_multipathd_s_word() {
    let cli = Arc::new(ScriptedMultipathd::default());
    cli.on_call(|args| {
        Some(Ok(if args[0] == "reinstate" {
            "fail\n".into()
        } else {
            "mpatha|sdb|8:16|7:0:0:1|failed|running|ready\n".into()
        }))
    });
    let r = restore(cli).restore(
        &[remembered("sdb", 1)],
        &carriers(&["sdb"]),
        Duration::from_millis(5),
    );
    assert_eq!(
        r[0].result,
        PathBackResult::Failed {
            dev: "sdb".into(),
            reason: "multipathd reinstate path sdb: fail".into()
        }
    );
}

#[test]
fn a_path_whose_disk_is_not_back_is_not_reinstated() {
    let cli = Arc::new(ScriptedMultipathd::default());
    cli.on_call(|_| Some(Ok("mpatha|sdb|8:16|7:0:0:1|failed|offline|faulty\n".into())));
    let r = restore(cli.clone()).restore(
        &[remembered("sdb", 1), remembered("sdc", 2)],
        &carriers(&["sdb"]),
        Duration::from_millis(5),
    );
    assert_eq!(r[0].result.label(), "failed");
    assert_eq!(r[1].result, PathBackResult::Missing);
    assert!(cli.calls().iter().all(|c| c[0] == "show"));
}

#[test]
fn multipathd_gone_during_the_wait_fails_every_path_with_why() {
    let cli = Arc::new(ScriptedMultipathd::default());
    cli.on_call(|_| Some(Err(MultipathdError::NotAnswering("timed out".into()))));
    let r = restore(cli).restore(&[remembered("sdb", 1)], &carriers(&["sdb"]), Duration::ZERO);
    assert_eq!(
        r[0].result,
        PathBackResult::Failed {
            dev: "sdb".into(),
            reason: "multipathd did not answer: timed out".into()
        }
    );
}

#[test]
fn sysfs_maps_are_the_dm_devices_with_an_mpath_uuid() {
    let root = tempfile::tempdir().unwrap();
    for (dm, uuid, name) in [
        (
            "dm-0",
            "mpath-3600140554e9c5f4d3a845a5a0a7f1b2c\n",
            "mpatha\n",
        ),
        ("dm-1", "LVM-Qx2v0c7AbCdEfGh\n", "vg0-root\n"),
        (
            "dm-2",
            "part1-mpath-3600140554e9c5f4d3a845a5a0a7f1b2c\n",
            "mpatha1\n",
        ),
    ] {
        let d = root.path().join("block").join(dm).join("dm");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("uuid"), uuid).unwrap();
        std::fs::write(d.join("name"), name).unwrap();
    }
    assert_eq!(sysfs_maps(root.path()), vec!["mpatha".to_string()]);
    assert!(sysfs_maps(&root.path().join("none")).is_empty());
}
