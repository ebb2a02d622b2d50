//! The controllers' sysfs text as the kernel writes it (drivers/nvme/host/core.c and
//! fabrics.c: one value and a newline per file), placement and the connect arguments.

use super::*;
use crate::nldev::SockAddr;

fn files(name: &str, address: &str) -> NvmeCtrlFiles {
    let mut attrs = BTreeMap::new();
    for (k, v) in [
        ("transport", "rdma\n"),
        ("address", address),
        ("subsysnqn", "nqn.2014-08.org.example:lab-nvme\n"),
        (
            "hostnqn",
            "nqn.2014-08.org.nvmexpress:uuid:0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e\n",
        ),
        ("hostid", "0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e\n"),
        ("state", "live\n"),
        ("queue_count", "5\n"),
        ("sqsize", "127\n"),
        ("ctrl_loss_tmo", "600\n"),
        ("reconnect_delay", "10\n"),
        ("kato", "5\n"),
        ("cntrltype", "io\n"),
    ] {
        attrs.insert(k.to_string(), v.to_string());
    }
    NvmeCtrlFiles {
        name: name.into(),
        attrs,
        namespaces: vec![
            ("nvme0c0n1".into(), Some("1\n".into())),
            ("nvme0c0n2".into(), Some("2\n".into())),
        ],
    }
}

const ADDR: &str = "traddr=192.0.2.10,trsvcid=4420,host_traddr=192.0.2.1\n";

#[test]
fn an_address_attribute_reads_as_the_kernel_writes_it() {
    let a = parse_fabrics_address(ADDR).unwrap();
    assert_eq!(a.traddr, "192.0.2.10");
    assert_eq!(a.trsvcid.as_deref(), Some("4420"));
    assert_eq!(a.host_traddr.as_deref(), Some("192.0.2.1"));
    assert_eq!(a.host_iface, None);
    let a = parse_fabrics_address("traddr=fe80::1,trsvcid=4421\n").unwrap();
    assert_eq!(a.traddr, "fe80::1");
    assert!(parse_fabrics_address("trsvcid=4420\n").is_err());
    assert!(parse_fabrics_address("garbage").is_err());
    assert!(parse_fabrics_address("").is_err());
}

#[test]
fn an_rdma_controller_is_remembered_with_its_connect_parameters() {
    let c = read_ctrl_files(&files("nvme0", ADDR)).unwrap().unwrap();
    assert_eq!(c.name, "nvme0");
    assert_eq!(c.state, "live");
    assert_eq!(c.io_queues, Some(4), "queue_count counts the admin queue");
    assert_eq!(
        c.queue_size,
        Some(128),
        "sqsize is the queue size minus one"
    );
    assert_eq!(c.ctrl_loss_tmo, Some(600));
    assert_eq!(c.kato, Some(5));
    assert_eq!(
        c.namespaces,
        vec![
            NvmeNsRef {
                block: "nvme0n1".into(),
                nsid: Some(1)
            },
            NvmeNsRef {
                block: "nvme0n2".into(),
                nsid: Some(2)
            },
        ]
    );
    assert_eq!(
        connect_args(&c),
        [
            "connect",
            "--transport=rdma",
            "--traddr=192.0.2.10",
            "--trsvcid=4420",
            "--host-traddr=192.0.2.1",
            "--nqn=nqn.2014-08.org.example:lab-nvme",
            "--hostnqn=nqn.2014-08.org.nvmexpress:uuid:0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e",
            "--hostid=0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e",
            "--nr-io-queues=4",
            "--queue-size=128",
            "--ctrl-loss-tmo=600",
            "--reconnect-delay=10",
            "--keep-alive-tmo=5",
        ]
    );
}

#[test]
fn ctrl_loss_tmo_off_reconnects_forever_and_missing_files_are_left_to_nvme_cli() {
    let mut f = files("nvme3", "traddr=192.0.2.10,trsvcid=4420\n");
    f.attrs.insert("ctrl_loss_tmo".into(), "off\n".into());
    f.attrs.remove("kato");
    f.attrs.remove("hostid");
    let c = read_ctrl_files(&f).unwrap().unwrap();
    assert_eq!(c.ctrl_loss_tmo, Some(-1));
    let args = connect_args(&c);
    assert!(args.contains(&"--ctrl-loss-tmo=-1".to_string()));
    assert!(!args.iter().any(|a| a.starts_with("--keep-alive-tmo")));
    assert!(!args.iter().any(|a| a.starts_with("--hostid")));
    assert!(!args.iter().any(|a| a.starts_with("--host-traddr")));
}

#[test]
fn other_transports_and_discovery_controllers_are_not_remembered() {
    let mut f = files("nvme1", ADDR);
    f.attrs.insert("transport".into(), "tcp\n".into());
    assert_eq!(read_ctrl_files(&f).unwrap(), None);
    let mut f = files("nvme2", ADDR);
    f.attrs.insert("cntrltype".into(), "discovery\n".into());
    assert_eq!(read_ctrl_files(&f).unwrap(), None);
    let mut f = files("nvme4", ADDR);
    f.attrs.insert("transport".into(), "pcie\n".into());
    f.attrs.remove("address");
    assert_eq!(read_ctrl_files(&f).unwrap(), None);
}

#[test]
fn bad_files_are_named_errors_never_panics() {
    let mut f = files("nvme0", ADDR);
    f.attrs.remove("subsysnqn");
    assert_eq!(
        read_ctrl_files(&f).unwrap_err().to_string(),
        "/sys/class/nvme/nvme0/subsysnqn is missing"
    );
    let mut f = files("nvme0", ADDR);
    f.attrs.insert("queue_count".into(), "many\n".into());
    assert!(read_ctrl_files(&f)
        .unwrap_err()
        .to_string()
        .contains("queue_count: \"many\" is not a number"));
    let mut f = files("nvme0", "host_traddr=1.2.3.4\n");
    f.attrs.remove("transport");
    assert!(read_ctrl_files(&f).is_err());
}

#[test]
fn namespace_entries_name_their_block_device() {
    assert_eq!(namespace_block("nvme0n1").as_deref(), Some("nvme0n1"));
    assert_eq!(namespace_block("nvme2c5n3").as_deref(), Some("nvme2n3"));
    assert_eq!(namespace_block("nvme0"), None);
    assert_eq!(namespace_block("power"), None);
    assert_eq!(namespace_block("nvme0n"), None);
    assert_eq!(namespace_block("nvmecn1"), None);
}

fn cm_id(dev: &str, kern: &str, src: &str, dst: &str) -> CmIdEntry {
    CmIdEntry {
        dev_index: 1,
        dev_name: dev.into(),
        port: Some(1),
        lqpn: Some(200),
        qp_type: None,
        ps: Some(0x0106),
        state: 5,
        src_addr: Some(SockAddr::from_socket_addr(src.parse().unwrap())),
        dst_addr: Some(SockAddr::from_socket_addr(dst.parse().unwrap())),
        cm_idn: Some(1),
        pid: None,
        kern_name: Some(kern.into()),
    }
}

#[test]
fn a_controller_is_placed_by_nvme_rdmas_rows_of_the_cm_id_table() {
    let c = read_ctrl_files(&files("nvme0", ADDR)).unwrap().unwrap();
    let ids = [
        // ib_iser to the same address: not the controller's.
        cm_id(
            "rocep2s0f1",
            "ib_iser",
            "192.0.2.1:40000",
            "192.0.2.10:4420",
        ),
        cm_id(
            "rocep2s0f0",
            "nvme_rdma",
            "192.0.2.1:40001",
            "192.0.2.10:4420",
        ),
    ];
    let mut v = vec![c.clone()];
    place_controllers(&mut v, &ids, &[]);
    assert_eq!(v[0].placed, Some(("rocep2s0f0".into(), 1)));
    assert_eq!(on_device(&v, "rocep2s0f0").count(), 1);
    // From another source address: not this controller's connection.
    let other = [cm_id(
        "rocep2s0f0",
        "nvme_rdma",
        "192.0.2.7:40001",
        "192.0.2.10:4420",
    )];
    let mut w = vec![c.clone()];
    place_controllers(&mut w, &other, &[]);
    assert_eq!(w[0].placed, None);
    // Between reconnect attempts (no row): the last placement holds.
    let mut u = vec![c];
    place_controllers(&mut u, &[], &v);
    assert_eq!(u[0].placed, Some(("rocep2s0f0".into(), 1)));
}

#[test]
fn a_controller_is_back_when_live_with_its_namespaces() {
    let before = read_ctrl_files(&files("nvme0", ADDR)).unwrap().unwrap();
    assert_eq!(
        check_back(&before, &[]).unwrap_err(),
        NvmeBackResult::NotFound
    );
    let mut f = files("nvme1", ADDR);
    f.attrs.insert("state".into(), "connecting\n".into());
    let connecting = read_ctrl_files(&f).unwrap().unwrap();
    assert_eq!(
        check_back(&before, std::slice::from_ref(&connecting)).unwrap_err(),
        NvmeBackResult::NotLive {
            now: "nvme1".into(),
            state: "connecting".into()
        }
    );
    let mut f = files("nvme1", ADDR);
    // Renumbered: the subsystem came back as nvme1, its head as nvme1n1; found by NSID.
    f.namespaces = vec![("nvme1c1n1".into(), Some("1\n".into()))];
    let one = read_ctrl_files(&f).unwrap().unwrap();
    assert_eq!(
        check_back(&before, std::slice::from_ref(&one)).unwrap_err(),
        NvmeBackResult::NamespacesMissing {
            now: "nvme1".into(),
            missing: vec!["nvme0n2".into()]
        }
    );
    let mut f = files("nvme1", ADDR);
    f.namespaces = vec![
        ("nvme1c1n1".into(), Some("1\n".into())),
        ("nvme1c1n2".into(), Some("2\n".into())),
    ];
    let back = read_ctrl_files(&f).unwrap().unwrap();
    let now = [connecting, back];
    let (c, read) = check_back(&before, &now).unwrap();
    assert_eq!(c.name, "nvme1");
    assert_eq!(read, ["nvme1n1", "nvme1n2"]);
}
