//! `status` and `qps`: the library entry points against a fake kernel replaying real 6.12
//! bytes (crates/iser-guard-core/tests/fixtures/nldev), and the real binary on this machine (no RDMA netlink) with
//! fake sysfs trees (tests/fixtures/sysfs).

#[path = "support/fake_kernel.rs"]
mod fake_kernel;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use fake_kernel::*;
use iser_guard::cli::qps::{qp_table, Filter};
use iser_guard::cli::status::{gather, StatusReport};
use iser_guard::core::qp::{QpState, QpType};
use iser_guard::io::netlink::{FdTransport, NetlinkError, NldevClient};

fn sysfs(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

/// Runs `f` with a client talking to a fake kernel serving `replay`.
fn with_kernel<R>(replay: Replay, f: impl FnOnce(NldevClient<FdTransport>) -> R) -> R {
    let (t, h) = serve(replay);
    let r = f(NldevClient::new(t));
    h.join().unwrap();
    r
}

fn lab() -> Replay {
    Replay::default().moment("k612/nldev-1-loggedin")
}

/// The lab's moment 1 with rxe_tgt's GSI QP in ERR (RES_STATE of the captured entry set to
/// IB_QPS_ERR = 6).
fn lab_with_stuck_tgt() -> Replay {
    lab().edit("k612/nldev-1-loggedin/09-res-qp-get-dump-dev1.hex", |r| {
        set_last_qp_state(&mut r[0], 6)
    })
}

#[test]
fn status_of_the_healthy_lab_host_matches_rdma_link() {
    let g = with_kernel(lab(), |c| gather(Ok(c), &sysfs("rxe")));
    let r = StatusReport::build(&g);
    assert!(r.netlink.available);
    assert!(r.stuck_ports.is_empty());
    // `rdma link` of the same moment: link rxe_ini/1 state ACTIVE physical_state LINK_UP
    // netdev ini0; link rxe_tgt/1 … tgt0.
    let links: Vec<_> = r
        .devices
        .iter()
        .flat_map(|d| d.links.iter())
        .map(|l| {
            format!(
                "link {}/{} state {} physical_state {} netdev {}",
                l.ifname,
                l.port,
                l.state.as_deref().unwrap(),
                l.physical_state.as_deref().unwrap(),
                l.netdev.as_deref().unwrap()
            )
        })
        .collect();
    let expected: Vec<String> =
        std::fs::read_to_string(fixtures().join("k612/rdma-link-1-loggedin.txt"))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("link "))
            .map(|l| l.trim_end().to_string())
            .collect();
    assert_eq!(links, expected);
    // rxe_ini is in the sysfs fixture too; rxe_tgt only in netlink.
    assert_eq!(r.devices[0].seen_by, "netlink+sysfs");
    assert_eq!(
        r.devices[0].links[0].link_layer.as_deref(),
        Some("Ethernet")
    );
    assert_eq!(r.devices[1].seen_by, "netlink");
    let qps = r.devices[0].links[0].qps.as_ref().unwrap();
    assert_eq!(qps.get("RTS"), Some(&2));
    assert_eq!(r.exit(None).unwrap(), ExitCode::SUCCESS);
    let text = r.render_text();
    assert!(text.contains("RDMA netlink: ok"), "{text}");
    assert!(!text.contains("STUCK"), "{text}");
}

#[test]
fn status_reports_the_stuck_port_with_its_evidence_and_exits_1() {
    let g = with_kernel(lab_with_stuck_tgt(), |c| gather(Ok(c), &sysfs("rxe")));
    let r = StatusReport::build(&g);
    assert_eq!(r.stuck_ports.len(), 1);
    let s = &r.stuck_ports[0];
    assert_eq!((s.ifname.as_str(), s.ifindex, s.port), ("rxe_tgt", 1, 1));
    assert_eq!(s.netdev.as_deref(), Some("tgt0"));
    assert_eq!((s.qp.lqpn, s.qp.qp_type.as_str()), (1, "GSI"));
    assert_eq!(s.qp.state, "ERR");
    assert_eq!(s.qp.comm.as_deref(), Some("ib_core"));
    let tgt = r.devices.iter().find(|d| d.ifname == "rxe_tgt").unwrap();
    assert!(tgt.links[0].stuck);
    let text = r.render_text();
    assert!(
        text.contains("STUCK PORT rxe_tgt/1 (netdev tgt0)"),
        "{text}"
    );
    assert!(
        text.contains("evidence: link rxe_tgt/1 lqpn 1 type GSI state ERR sq-psn 3 comm [ib_core]"),
        "{text}"
    );
    assert_eq!(r.exit(None).unwrap(), ExitCode::from(1));
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["stuck_ports"][0]["qp"]["state"], "ERR");
    assert_eq!(json["stuck_ports"][0]["ifname"], "rxe_tgt");
}

#[test]
fn qps_json_uses_the_keys_and_values_of_rdma_resource_show_qp() {
    let rows = with_kernel(lab(), |c| {
        qp_table(Ok(c), &sysfs("rxe"), &Filter::default())
    })
    .map_err(|(e, _)| e)
    .unwrap()
    .rows;
    let ours = serde_json::to_value(&rows).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(fixtures().join("k612/rdma-qp-json-1-loggedin.txt"))
            .unwrap()
            .lines()
            .find(|l| l.starts_with('['))
            .unwrap(),
    )
    .unwrap();
    let (ours, theirs) = (ours.as_array().unwrap(), theirs.as_array().unwrap());
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(theirs) {
        let (o, t) = (o.as_object().unwrap(), t.as_object().unwrap());
        let keys =
            |m: &serde_json::Map<String, serde_json::Value>| m.keys().cloned().collect::<Vec<_>>();
        // Same keys in the same order (iproute2 prints them in a fixed order).
        assert_eq!(keys(o), keys(t));
        for (k, v) in t {
            // iproute2 ran moments after the dump: PSNs may have moved.
            if !k.ends_with("-psn") {
                assert_eq!(&o[k], v, "key {k}");
            }
        }
    }
}

#[test]
fn qps_filters_by_device_state_and_type() {
    let filter = Filter {
        dev: None,
        state: Some(QpState::Err),
        qp_type: Some(QpType::Gsi),
    };
    let rows = with_kernel(lab_with_stuck_tgt(), |c| {
        qp_table(Ok(c), &sysfs("rxe"), &filter)
    })
    .map_err(|(e, _)| e)
    .unwrap()
    .rows;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].render_text(),
        "link rxe_tgt/1 lqpn 1 type GSI state ERR sq-psn 3 comm [ib_core]"
    );
    let filter = Filter {
        dev: Some("rxe_ini".into()),
        ..Filter::default()
    };
    let rows = with_kernel(lab(), |c| qp_table(Ok(c), &sysfs("rxe"), &filter))
        .map_err(|(e, _)| e)
        .unwrap()
        .rows;
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.ifname == "rxe_ini"));
}

#[test]
fn a_refused_qp_dump_is_shown_on_its_device_not_fatal() {
    // RES_QP_GET of rxe_tgt answered with NLMSG_ERROR -EPERM (built from the uapi layout).
    let replay = lab().edit("k612/nldev-1-loggedin/09-res-qp-get-dump-dev1.hex", |r| {
        let req = capture("k612/nldev-1-loggedin/09-res-qp-get-dump-dev1.hex").request;
        *r = vec![error_reply(&req, -libc::EPERM)];
    });
    let g = with_kernel(replay, |c| gather(Ok(c), &sysfs("rxe")));
    let r = StatusReport::build(&g);
    let tgt = r.devices.iter().find(|d| d.ifname == "rxe_tgt").unwrap();
    assert!(
        tgt.qp_error.as_deref().unwrap().contains("EPERM"),
        "{tgt:?}"
    );
    assert_eq!(tgt.links[0].qps, None);
    assert!(r.render_text().contains("rxe_tgt: QP table not read"));

    // qps shows the other device's QPs and says which are missing.
    let replay = lab().edit("k612/nldev-1-loggedin/09-res-qp-get-dump-dev1.hex", |r| {
        let req = capture("k612/nldev-1-loggedin/09-res-qp-get-dump-dev1.hex").request;
        *r = vec![error_reply(&req, -libc::EPERM)];
    });
    let table = with_kernel(replay, |c| {
        qp_table(Ok(c), &sysfs("rxe"), &Filter::default())
    })
    .map_err(|(e, _)| e)
    .unwrap();
    assert_eq!(table.rows.len(), 2);
    assert!(table.rows.iter().all(|r| r.ifname == "rxe_ini"));
    assert_eq!(table.incomplete.len(), 1);
    assert!(table.incomplete[0].starts_with("QPs of rxe_tgt not shown: the kernel refused"));
}

#[test]
fn without_netlink_status_shows_sysfs_and_qps_refuses() {
    let g = gather::<FdTransport>(Err(NetlinkError::Unavailable), &sysfs("e810-k618"));
    let r = StatusReport::build(&g);
    assert!(!r.netlink.available);
    let names: Vec<_> = r.devices.iter().map(|d| d.ifname.as_str()).collect();
    assert_eq!(names, ["rocep2s0f0", "rocep2s0f1"]);
    let f1 = &r.devices[1];
    assert_eq!(f1.driver.as_deref(), Some("irdma.gen_2"));
    assert_eq!(f1.pci.as_deref(), Some("0000:02:00.1"));
    assert_eq!(f1.aux_device.as_deref(), Some("ice.roce.1"));
    assert_eq!(f1.links[0].state.as_deref(), Some("DOWN"));
    assert_eq!(f1.links[0].physical_state.as_deref(), Some("DISABLED"));
    assert_eq!(f1.links[0].qps, None);
    assert_eq!(
        r.exit(Some(NetlinkError::Unavailable)).unwrap(),
        ExitCode::SUCCESS
    );
    let err = qp_table::<FdTransport>(
        Err(NetlinkError::Unavailable),
        &sysfs("e810"),
        &Filter::default(),
    )
    .unwrap_err();
    assert!(err.0.is_unavailable());
    assert_eq!(err.1.sysfs.devices.len(), 1);
}

// ---- the real binary ----

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iser-guard"))
}

/// The binary tests expect this machine's kernel: no RDMA netlink.
fn no_rdma_here() -> bool {
    !Path::new("/sys/module/ib_core").exists()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn binary_status_with_nothing_at_all_exits_69() {
    if !no_rdma_here() {
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let root = empty.path().to_str().unwrap();
    let (code, out, err) = run(&["status", "--sysfs-root", root]);
    assert_eq!(code, 69, "{out}{err}");
    assert!(out.contains("RDMA netlink: unavailable"), "{out}");
    assert!(
        out.contains("no class/infiniband (ib_core not loaded)"),
        "{out}"
    );
    assert!(
        err.contains("RDMA netlink is not available on this kernel"),
        "{err}"
    );
}

#[test]
fn binary_status_shows_sysfs_devices_with_a_warning() {
    if !no_rdma_here() {
        return;
    }
    let root = sysfs("mixed");
    let (code, out, err) = run(&["status", "--sysfs-root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    for needle in [
        "rocep2s0f0  -      irdma         0000:02:00.0  1     ACTIVE  LINK_UP  enp2s0f0   ?",
        "mlx5_0      -      mlx5_ib.rdma  0000:03:00.0  1     DOWN    POLLING  ens3f0np0  ?",
        "rxe_ini     -      -             -             1     ACTIVE  LINK_UP  ini0       ?",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    assert!(
        err.contains("warning: RDMA netlink is not available"),
        "{err}"
    );
    assert!(
        err.contains("QP states, and so stuck ports, are unknown"),
        "{err}"
    );
}

#[test]
fn binary_status_json_reads_the_sysfs_root_from_the_config() {
    if !no_rdma_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[paths]\nsysfs-root = {:?}\n",
            sysfs("e810").to_str().unwrap()
        ),
    )
    .unwrap();
    let (code, out, err) = run(&["--config", cfg.to_str().unwrap(), "status", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["netlink"]["available"], false);
    let d = &v["devices"][0];
    assert_eq!(d["ifname"], "rocep2s0f0");
    assert_eq!(d["driver"], "irdma");
    assert_eq!(d["pci"], "0000:02:00.0");
    assert_eq!(d["aux_device"], "ice.roce.0");
    assert_eq!(d["fw"], "1.70");
    assert_eq!(d["seen_by"], "sysfs");
    let l = &d["links"][0];
    assert_eq!(l["state"], "ACTIVE");
    assert_eq!(l["physical_state"], "LINK_UP");
    assert_eq!(l["netdev"], "enp2s0f0");
    assert_eq!(l["link_layer"], "Ethernet");
}

#[test]
fn binary_qps_without_netlink_names_the_sysfs_devices_and_exits_69() {
    if !no_rdma_here() {
        return;
    }
    let root = sysfs("e810");
    let (code, out, err) = run(&["qps", "--sysfs-root", root.to_str().unwrap(), "--json"]);
    assert_eq!(code, 69, "{out}{err}");
    assert_eq!(out, "");
    assert!(err.contains("shows RDMA device(s) rocep2s0f0"), "{err}");
    assert!(
        err.contains("RDMA netlink is not available on this kernel"),
        "{err}"
    );
}

#[test]
fn binary_qps_rejects_unknown_states_and_types() {
    let (code, _, err) = run(&["qps", "--state", "BROKEN"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown QP state \"BROKEN\""), "{err}");
    let (code, _, err) = run(&["qps", "--type", "XYZ"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown QP type \"XYZ\"; one of SMI, GSI, RC"),
        "{err}"
    );
}

/// A configuration file that cannot be used (here a misspelt key, as after an edit the
/// daemon refused on reload) does not hide the kernel's view: status warns, names the
/// problem, uses the built-in paths and exits with the kernel view's code.
#[test]
fn binary_status_with_a_bad_config_warns_and_still_shows_the_kernel() {
    if !no_rdma_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[paths]\nsysfs-rot = \"/x\"\n").unwrap();
    let root = sysfs("mixed");
    let (code, out, err) = run(&[
        "--config",
        cfg.to_str().unwrap(),
        "status",
        "--sysfs-root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("rocep2s0f0"), "{out}");
    assert!(
        err.contains("sysfs-rot") && err.contains("uses the built-in paths"),
        "{err}"
    );
}

#[test]
fn status_json_lists_the_consumers_of_each_port_from_the_cm_id_table() {
    // The lab's moment 1: one iSER session from rxe_ini to LIO's iSER portal on rxe_tgt.
    let g = with_kernel(lab(), |c| gather(Ok(c), &sysfs("rxe")));
    let r = StatusReport::build(&g);
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    let ports = json["consumers"]
        .as_array()
        .expect("consumers listed per port");
    let port = |dev: &str| {
        ports
            .iter()
            .find(|p| p["device"] == dev && p["port"] == 1)
            .unwrap_or_else(|| panic!("no consumers entry for {dev}/1 in {json:#}"))
    };
    let ini = &port("rxe_ini")["consumers"];
    assert_eq!(ini.as_array().unwrap().len(), 1, "{ini:#}");
    assert_eq!(ini[0]["kind"], "iser", "{ini:#}");
    assert_eq!(ini[0]["live_connections"], 1, "{ini:#}");
    // The target side listens (isert) and holds the session's other end.
    let tgt = &port("rxe_tgt")["consumers"];
    assert!(
        tgt.as_array()
            .unwrap()
            .iter()
            .any(|c| c["listeners"].as_u64() > Some(0)),
        "{tgt:#}"
    );
    let text = r.render_text();
    assert!(text.contains("rxe_ini/1"), "{text}");
}

#[test]
fn binary_status_lists_the_nfs_over_rdma_mounts_of_the_proc_roots_mountinfo() {
    if !no_rdma_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc/self")).unwrap();
    std::fs::write(
        dir.path().join("proc/self/mountinfo"),
        "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n\
         83 22 0:47 / /mnt/nfs rw,relatime shared:45 - nfs4 192.0.2.10:/export \
         rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma,port=20049,\
         timeo=600,retrans=2,sec=sys,clientaddr=192.0.2.1,local_lock=none,addr=192.0.2.10\n",
    )
    .unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[paths]\nsysfs-root = {:?}\nproc-root = {:?}\n",
            sysfs("e810").to_str().unwrap(),
            dir.path().join("proc").to_str().unwrap()
        ),
    )
    .unwrap();
    let (code, out, err) = run(&["--config", cfg.to_str().unwrap(), "status", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = &v["nfs_mounts"][0];
    assert_eq!(m["mount_point"], "/mnt/nfs");
    assert_eq!(m["server"], "192.0.2.10");
    assert_eq!(m["port"], 20049);
    assert_eq!(m["proto"], "rdma");
    assert_eq!(m["placed"], serde_json::Value::Null, "no CM id table here");
    let (code, out, err) = run(&["--config", cfg.to_str().unwrap(), "status"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "  /mnt/nfs (192.0.2.10:/export, nfs4 4.2) on port not known (no rpcrdma \
             connection seen yet): server 192.0.2.10:20049 over rdma"
        ),
        "{out}"
    );
}
