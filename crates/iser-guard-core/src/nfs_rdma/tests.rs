//! mountinfo lines as `show_mountinfo` writes them (fs/proc_namespace.c) with the super
//! options of `nfs_show_mount_options` (fs/nfs/super.c, in its order), placement by
//! rpcrdma's CM ids, and the check results' words.

use super::*;
use crate::nldev::SockAddr;

/// A host with a root file system, an NFSv4.2 mount over RDMA with a space in its path, an
/// NFSv3 one over RDMA on IPv6, an NFS mount over TCP and a tmpfs.
const MOUNTINFO: &str = "\
22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
25 22 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
83 22 0:47 / /mnt/nfs\\040data rw,relatime shared:45 - nfs4 192.0.2.10:/export/data rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma,port=20049,timeo=600,retrans=2,sec=sys,clientaddr=192.0.2.1,local_lock=none,addr=192.0.2.10
91 22 0:52 / /mnt/v3 rw,relatime shared:49 master:3 - nfs [2001:db8::10]:/srv rw,relatime,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma6,port=20049,timeo=600,retrans=2,sec=sys,mountaddr=2001:db8::10,mountvers=3,mountproto=tcp6,local_lock=none,addr=2001:db8::10
95 22 0:53 / /mnt/tcp rw,relatime shared:50 - nfs4 192.0.2.11:/ rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=192.0.2.1,local_lock=none,addr=192.0.2.11
97 22 0:54 / /run/user/1000 rw,nosuid,nodev,relatime shared:51 - tmpfs tmpfs rw,size=3275840k,mode=700
";

#[test]
fn the_nfs_over_rdma_mounts_of_a_mountinfo_are_read_and_others_are_not_ours() {
    let p = parse_mountinfo(MOUNTINFO);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    assert_eq!(p.mounts.len(), 2);
    let v4 = &p.mounts[0];
    assert_eq!(v4.mount_point, "/mnt/nfs data", "\\040 is a space");
    assert_eq!(v4.source, "192.0.2.10:/export/data");
    assert_eq!(v4.fstype, "nfs4");
    assert_eq!(v4.version.as_deref(), Some("4.2"));
    assert_eq!(v4.server, "192.0.2.10");
    assert_eq!(v4.port, Some(20049));
    assert_eq!(v4.client_addr.as_deref(), Some("192.0.2.1"));
    assert_eq!(v4.proto, "rdma");
    assert_eq!(v4.placed, None);
    let v3 = &p.mounts[1];
    assert_eq!(v3.mount_point, "/mnt/v3");
    assert_eq!(v3.fstype, "nfs");
    assert_eq!(v3.version.as_deref(), Some("3"));
    assert_eq!(v3.server, "2001:db8::10");
    assert_eq!(v3.proto, "rdma6");
    assert_eq!(v3.client_addr, None, "NFSv3 shows no clientaddr");
    assert_eq!(
        v4.describe(),
        "/mnt/nfs data (192.0.2.10:/export/data, nfs4 4.2)"
    );
}

#[test]
fn bad_lines_are_counted_skips_and_the_rest_is_read() {
    let text = format!(
        "garbage\n\
         1 2 3 4 5 6 7 8 9 10 11\n\
         83 22 0:47 / /mnt/x rw - nfs4 s:/ rw,proto=rdma,port=20049\n\
         83 22 0:47 / /mnt/y rw - nfs4 s:/ rw,proto=rdma,port=twenty,addr=192.0.2.10\n\
         \n{MOUNTINFO}"
    );
    let p = parse_mountinfo(&text);
    assert_eq!(p.mounts.len(), 2);
    let reasons: Vec<_> = p
        .skipped
        .iter()
        .map(|s| (s.line, s.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (1, MountinfoError::TooFewFields { found: 1 }),
            (2, MountinfoError::NoSeparator),
            (
                3,
                MountinfoError::NoServerAddress {
                    mount_point: "/mnt/x".into()
                }
            ),
            (
                4,
                MountinfoError::BadPort {
                    mount_point: "/mnt/y".into(),
                    text: "twenty".into()
                }
            ),
        ]
    );
    assert_eq!(
        p.skipped[0].to_string(),
        "mountinfo line 1: 1 fields, a mountinfo line has at least 10"
    );
}

#[test]
fn a_mount_without_a_port_option_matches_any_port() {
    let line =
        "83 22 0:47 / /mnt/p rw,relatime - nfs 192.0.2.10:/e rw,vers=3,proto=rdma,addr=192.0.2.10";
    let m = parse_line(line).unwrap().unwrap();
    assert_eq!(m.port, None);
    let mut ms = vec![m];
    place_mounts(
        &mut ms,
        &[row("rxe0", 1, "192.0.2.1", "192.0.2.10", 2049)],
        &[],
    );
    assert_eq!(ms[0].placed, Some(("rxe0".into(), 1)));
}

#[test]
fn escapes_are_undone_and_a_lone_backslash_stays() {
    assert_eq!(unescape("/a\\040b\\011c\\012d\\134e"), "/a b\tc\nd\\e");
    assert_eq!(unescape("/a\\04"), "/a\\04");
    assert_eq!(unescape("/a\\9999"), "/a\\9999");
    assert_eq!(unescape("\\777"), "\\777", "not a byte");
    assert_eq!(unescape(""), "");
}

fn row(dev: &str, port: u32, src: &str, dst: &str, dport: u16) -> CmIdEntry {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    CmIdEntry {
        dev_index: 1,
        dev_name: dev.into(),
        port: Some(port),
        lqpn: Some(300),
        qp_type: None,
        ps: Some(0x0106),
        state: 5,
        src_addr: Some(SockAddr::from_socket_addr((ip(src), 40001).into())),
        dst_addr: Some(SockAddr::from_socket_addr((ip(dst), dport).into())),
        cm_idn: Some(7),
        pid: None,
        kern_name: Some("rpcrdma".into()),
    }
}

#[test]
fn mounts_are_placed_by_rpcrdmas_connection_to_their_server() {
    let mut ms = parse_mountinfo(MOUNTINFO).mounts;
    let mut nvme = row("rxe0", 1, "192.0.2.1", "192.0.2.10", 20049);
    nvme.kern_name = Some("nvme_rdma".into());
    let mut listener = row("rxe0", 1, "192.0.2.1", "192.0.2.10", 20049);
    listener.lqpn = None;
    let ids = vec![
        nvme,
        listener,
        row("rxe0", 1, "192.0.2.1", "192.0.2.10", 4420),
        row("rxe1", 1, "192.0.2.9", "192.0.2.10", 20049),
        row("rxe2", 2, "192.0.2.1", "192.0.2.10", 20049),
        row("rxe3", 1, "2001:db8::1", "2001:db8::10", 20049),
    ];
    place_mounts(&mut ms, &ids, &[]);
    assert_eq!(
        ms[0].placed,
        Some(("rxe2".into(), 2)),
        "rpcrdma's row to addr:port, from clientaddr"
    );
    assert_eq!(ms[1].placed, Some(("rxe3".into(), 1)));
    assert_eq!(on_device(&ms, "rxe2").count(), 1);
    assert_eq!(on_device(&ms, "rxe0").count(), 0);
}

#[test]
fn an_idle_transport_keeps_the_placement_it_had() {
    let mut before = parse_mountinfo(MOUNTINFO).mounts;
    place_mounts(
        &mut before,
        &[row("rxe0", 1, "192.0.2.1", "192.0.2.10", 20049)],
        &[],
    );
    let mut now = parse_mountinfo(MOUNTINFO).mounts;
    place_mounts(&mut now, &[], &before);
    assert_eq!(now[0].placed, Some(("rxe0".into(), 1)));
    assert_eq!(now[1].placed, None, "never placed");
}

#[test]
fn check_results_say_what_happened_and_have_a_label() {
    let r = NfsCheckResult::Answered { after_ms: 1500 };
    assert!(r.answered());
    assert_eq!(r.label(), "answered");
    assert_eq!(r.to_string(), "answered a stat after 1500 ms");
    let r = NfsCheckResult::NoAnswer {
        waited_s: 60,
        earlier_pending: false,
    };
    assert_eq!(r.label(), "no-answer");
    assert_eq!(r.to_string(), "did not answer a stat within 60 s");
    let r = NfsCheckResult::NoAnswer {
        waited_s: 60,
        earlier_pending: true,
    };
    assert!(r.to_string().contains("no second one was started"));
    let r = NfsCheckResult::Error {
        errno: "Stale file handle (os error 116)".into(),
    };
    assert_eq!(r.label(), "error");
    assert_eq!(
        r.to_string(),
        "stat failed: Stale file handle (os error 116)"
    );
    for r in [
        NfsCheckResult::Answered { after_ms: 1 },
        NfsCheckResult::NoAnswer {
            waited_s: 1,
            earlier_pending: false,
        },
        NfsCheckResult::Error { errno: "x".into() },
    ] {
        assert!(NfsCheckResult::LABELS.contains(&r.label()));
    }
}

#[test]
fn every_truncation_and_deletion_of_real_lines_reads_or_skips_without_a_panic() {
    for end in 0..=MOUNTINFO.len() {
        if MOUNTINFO.is_char_boundary(end) {
            let _ = parse_mountinfo(&MOUNTINFO[..end]);
        }
    }
    for at in 0..MOUNTINFO.len() {
        let mut t = MOUNTINFO.to_string();
        t.remove(at);
        let p = parse_mountinfo(&t);
        assert!(p.mounts.len() + p.skipped.len() <= 6);
    }
}
