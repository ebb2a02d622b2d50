//! The RDMA netlink client against a fake kernel endpoint (a socketpair speaking the netlink
//! wire format), replaying real kernel bytes from tests/fixtures/nldev (captures/nldevcap-*,
//! k612mon2) and scripted edge cases built from the uapi layout; then the model fed by it.

#[path = "support/fake_kernel.rs"]
mod fake_kernel;

use std::io;
use std::time::Duration;

use fake_kernel::*;
use iser_guard::core::nldev::{
    request, MonitorEvent, MonitorEventType, NldevCommand, NldevMessage, PortState,
};
use iser_guard::core::qp::{QpState, QpType};
use iser_guard::core::time::Instant;
use iser_guard::core::topology::{MatchedBy, Topology, TopologyEvent};
use iser_guard::io::netlink::{
    FdTransport, MonitorRead, NetlinkError, NldevClient, NldevMonitor, Skips, Transport,
};

fn no_parent(_: &str) -> Option<String> {
    None
}

#[test]
fn device_dump_from_real_6_12_bytes() {
    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let mut c = NldevClient::new(t);
    let mut skips = Skips::default();
    let devs = c.devices(&mut skips).unwrap();
    let names: Vec<_> = devs.iter().map(|d| (d.index, d.name.as_str())).collect();
    assert_eq!(names, [(0, "rxe_ini"), (1, "rxe_tgt")]);
    assert_eq!(skips, Skips::default());
    drop(c);
    h.join().unwrap();
}

#[test]
fn system_info_says_whether_monitor_events_exist() {
    for (kernel, monitor) in [("k612", true), ("k61", false)] {
        let (t, h) = serve(Replay::default().moment(&format!("{kernel}/nldev-1-loggedin")));
        let mut c = NldevClient::new(t);
        let sys = c.system_info().unwrap();
        assert_eq!(sys.supports_monitor(), monitor, "{kernel}");
        drop(c);
        h.join().unwrap();
    }
}

#[test]
fn full_snapshot_of_the_lab_host_has_the_gsi_qps_in_rts() {
    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let mut c = NldevClient::new(t);
    let report = c.snapshot(&no_parent).unwrap();
    assert_eq!(report.skips, Skips::default());
    let devs = &report.snapshot.devices;
    assert_eq!(devs.len(), 2);
    let ini = &devs[0];
    assert_eq!(ini.info.name, "rxe_ini");
    assert_eq!(ini.ports.len(), 1);
    assert_eq!(ini.ports[0].state, PortState::Active);
    assert_eq!(ini.ports[0].netdev_name.as_deref(), Some("ini0"));
    assert_eq!(ini.ports[0].netdev_index, Some(3));
    let qps = ini.qps.as_ref().unwrap();
    let gsi = qps.iter().find(|q| q.is_gsi()).unwrap();
    assert_eq!((gsi.lqpn, gsi.state), (1, QpState::Rts));
    assert_eq!(gsi.kern_name.as_deref(), Some("ib_core"));
    let rc = qps.iter().find(|q| q.lqpn == 18).unwrap();
    assert_eq!(rc.qp_type.known(), Some(QpType::Rc));
    assert_eq!(rc.kern_name.as_deref(), Some("rdma_cm"));
    // GET, 2 x PORT_GET, 2 x RES_QP_GET.
    assert_eq!(c.stats().requests, 5);

    let mut model = Topology::new();
    let ev = model.apply_snapshot(report.snapshot, Instant(0));
    assert_eq!(ev.len(), 2, "two devices appeared: {ev:#?}");
    assert_eq!(model.stuck_ports().count(), 0);
    drop(c);
    h.join().unwrap();
}

#[test]
fn deleted_and_readded_device_is_followed_across_its_new_index() {
    // The lab's moments 1 (rxe_ini = 0), 2 (deleted), 3 (re-added as index 2).
    let mut model = Topology::new();
    let mut all = Vec::new();
    for (i, moment) in [
        "nldev-1-loggedin",
        "nldev-2-inideleted",
        "nldev-3-inireadded",
    ]
    .iter()
    .enumerate()
    {
        let (t, h) = serve(Replay::default().moment(&format!("k612/{moment}")));
        let mut c = NldevClient::new(t);
        let snap = c.snapshot(&no_parent).unwrap().snapshot;
        all.push(model.apply_snapshot(snap, Instant(i as u64 * 5_000)));
        drop(c);
        h.join().unwrap();
    }
    assert!(
        matches!(all[1].as_slice(), [TopologyEvent::DeviceDisappeared { device }]
        if device.name == "rxe_ini" && device.index == 0)
    );
    assert!(
        matches!(all[2].as_slice(), [TopologyEvent::DeviceRecreated {
            device, old_index: 0, matched_by: MatchedBy::Netdev, .. }]
            if device.name == "rxe_ini" && device.index == 2),
        "{:#?}",
        all[2]
    );
}

#[test]
fn gsi_qp_in_err_is_reported_as_a_stuck_port() {
    // Built from the real 6.12 QP dump of rxe_tgt with the GSI entry's RES_STATE set to
    // IB_QPS_ERR (6): what an irdma port in the field report looks like.
    let replay = Replay::default()
        .moment("k612/nldev-1-loggedin")
        .edit("k612/nldev-1-loggedin/09-res-qp-get-dump-dev1.hex", |r| {
            set_last_qp_state(&mut r[0], 6)
        });
    let (t, h) = serve(replay);
    let mut c = NldevClient::new(t);
    let snap = c.snapshot(&no_parent).unwrap().snapshot;
    let mut model = Topology::new();
    let ev = model.apply_snapshot(snap, Instant(42));
    let stuck: Vec<_> = model.stuck_ports().collect();
    assert_eq!(stuck.len(), 1);
    assert_eq!(stuck[0].device.name, "rxe_tgt");
    assert_eq!(stuck[0].device.index, 1);
    assert_eq!(stuck[0].port, 1);
    assert_eq!(stuck[0].netdev.as_deref(), Some("tgt0"));
    assert_eq!(stuck[0].qp.state, QpState::Err);
    assert!(ev.iter().any(|e| matches!(e, TopologyEvent::PortStuck(_))));
    drop(c);
    h.join().unwrap();
}

#[test]
fn done_carrying_einval_is_a_typed_dump_error() {
    // captures: a RES_QP_GET dump without DEV_INDEX is answered by NLMSG_DONE carrying -22.
    let cap = capture("k612/nldev-1-loggedin/12-err-res-qp-get-dump-no-devindex.hex");
    let (t, k) = pair();
    let server = std::thread::spawn(move || {
        let req = k.recv().unwrap();
        k.reply(&req, &cap.replies);
    });
    let mut c = NldevClient::new(t);
    let req = request::request(NldevCommand::ResQpGet, vec![], request::DUMP_FLAGS, 0);
    let err = c.dump(req).unwrap_err();
    assert!(
        matches!(&err, NetlinkError::DumpFailed { errno: 22, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("EINVAL"), "{err}");
    server.join().unwrap();
}

#[test]
fn nlmsg_error_is_a_typed_kernel_error_with_the_ext_ack_text() {
    for (file, text) in [
        ("17-err-get-doit-devindex-4242.hex", None),
        (
            "18-err-get-doit-devindex-2byte-extack.hex",
            Some("Attribute failed policy validation"),
        ),
    ] {
        let cap = capture(&format!("k612/nldev-1-loggedin/{file}"));
        let (t, k) = pair();
        let server = std::thread::spawn(move || {
            let req = k.recv().unwrap();
            k.reply(&req, &cap.replies);
        });
        let mut c = NldevClient::new(t);
        let err = c.request(request::get_device(0, 4242)).unwrap_err();
        match &err {
            NetlinkError::Kernel { errno, ext_ack, .. } => {
                assert_eq!(*errno, 22);
                assert_eq!(ext_ack.as_deref(), text);
            }
            other => panic!("{file}: {other:?}"),
        }
        server.join().unwrap();
    }
}

#[test]
fn a_doit_returns_its_reply_after_the_ack() {
    let cap = capture("k612/nldev-1-loggedin/02-get-doit-dev0.hex");
    assert_eq!(cap.replies.len(), 2, "reply then ACK");
    let (t, k) = pair();
    let server = std::thread::spawn(move || {
        let req = k.recv().unwrap();
        k.reply(&req, &cap.replies);
    });
    let mut c = NldevClient::new(t);
    let replies: Vec<NldevMessage> = c.request(request::get_device(0, 0)).unwrap();
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].command, NldevCommand::Get);
    server.join().unwrap();
}

#[test]
fn interrupted_dumps_are_retried_then_given_up() {
    let cap = capture("k612/nldev-1-loggedin/01-get-dump.hex");
    let (t, k) = pair();
    let replies = cap.replies.clone();
    let server = std::thread::spawn(move || {
        // First attempt: the second device's message is marked NLM_F_DUMP_INTR.
        let req = k.recv().unwrap();
        let mut first = replies.clone();
        first[1] = with_flags(&first[1], NLM_F_DUMP_INTR);
        k.reply(&req, &first);
        // Second attempt: clean.
        let req = k.recv().unwrap();
        k.reply(&req, &replies);
        // Next dump: interrupted every time (the flag on DONE counts too).
        for _ in 0..3 {
            let req = k.recv().unwrap();
            let mut r = replies.clone();
            let last = r.len() - 1;
            r[last] = with_flags(&r[last], NLM_F_DUMP_INTR);
            k.reply(&req, &r);
        }
    });
    let mut c = NldevClient::new(t);
    let mut skips = Skips::default();
    assert_eq!(c.devices(&mut skips).unwrap().len(), 2);
    assert_eq!(c.stats().dump_retries, 1);
    let err = c.devices(&mut skips).unwrap_err();
    assert!(
        matches!(err, NetlinkError::Interrupted { attempts: 3, .. }),
        "{err:?}"
    );
    server.join().unwrap();
}

#[test]
fn several_messages_in_one_datagram_are_all_used() {
    let cap = capture("k612/nldev-1-loggedin/01-get-dump.hex");
    let (t, k) = pair();
    let server = std::thread::spawn(move || {
        let req = k.recv().unwrap();
        let seq = seq_of(&req);
        let mut d = Vec::new();
        for m in &cap.replies {
            d.extend(with_seq(m, seq));
            while d.len() % 4 != 0 {
                d.push(0);
            }
        }
        k.send(&d);
    });
    let mut c = NldevClient::new(t);
    assert_eq!(c.devices(&mut Skips::default()).unwrap().len(), 2);
    server.join().unwrap();
}

#[test]
fn late_replies_to_an_earlier_request_are_skipped() {
    let cap = capture("k612/nldev-1-loggedin/01-get-dump.hex");
    let (t, k) = pair();
    let server = std::thread::spawn(move || {
        let req = k.recv().unwrap();
        let seq = seq_of(&req);
        k.send(&with_seq(&cap.replies[0], seq.wrapping_sub(1)));
        k.reply(&req, &cap.replies);
    });
    let mut c = NldevClient::new(t).with_first_seq(77);
    assert_eq!(c.devices(&mut Skips::default()).unwrap().len(), 2);
    assert_eq!(c.stats().stale_replies, 1);
    server.join().unwrap();
}

#[test]
fn truncated_and_malformed_messages_are_typed_errors() {
    let cap = capture("k612/nldev-1-loggedin/01-get-dump.hex");
    let good = cap.replies[0].clone();
    let (t, k) = pair();
    let server = std::thread::spawn(move || {
        // 1: a message cut short (nlmsg_len 116, 40 bytes sent).
        let req = k.recv().unwrap();
        k.send(&with_seq(&good, seq_of(&req))[..40]);
        // 2: an attribute whose length runs past the message (DEV_NAME nla_len 12 -> 200).
        let req = k.recv().unwrap();
        let mut bad = with_seq(&good, seq_of(&req));
        bad[24] = 200;
        k.send(&bad);
        // 3: a datagram shorter than a netlink header.
        let req = k.recv().unwrap();
        k.send(&with_seq(&good, seq_of(&req))[..10]);
    });
    let mut c = NldevClient::new(t);
    for case in 1..=3 {
        let err = c.devices(&mut Skips::default()).unwrap_err();
        assert!(
            matches!(err, NetlinkError::Malformed { .. }),
            "case {case}: {err:?}"
        );
    }
    server.join().unwrap();
}

#[test]
fn a_silent_kernel_times_out_instead_of_blocking() {
    let (t, k) = pair();
    let mut c = NldevClient::new(t).with_timeout(SHORT);
    let err = c.devices(&mut Skips::default()).unwrap_err();
    assert!(matches!(err, NetlinkError::Timeout { .. }), "{err:?}");
    // A dump that starts but never ends times out too.
    let cap = capture("k612/nldev-1-loggedin/01-get-dump.hex");
    let server = std::thread::spawn(move || {
        let _stale = k.recv().unwrap();
        let req = k.recv().unwrap();
        k.reply(&req, &cap.replies[..1]);
        k
    });
    let err = c.devices(&mut Skips::default()).unwrap_err();
    assert!(matches!(err, NetlinkError::Timeout { .. }), "{err:?}");
    drop(server.join().unwrap());
}

#[test]
fn a_closed_peer_is_reported_not_waited_on() {
    let (t, k) = pair();
    drop(k);
    let mut c = NldevClient::new(t);
    let err = c.devices(&mut Skips::default()).unwrap_err();
    assert!(
        matches!(err, NetlinkError::Closed | NetlinkError::Os { .. }),
        "{err:?}"
    );
}

#[test]
fn monitor_events_from_a_6_12_kernel_fold_into_the_model() {
    let (t, k) = pair();
    let events = monitor_events();
    assert_eq!(events.len(), 9);
    let server = std::thread::spawn(move || {
        for e in &events {
            k.send(e);
        }
        // A message the codec cannot decode (REGISTER whose DEV_NAME nla_len, byte 24, runs
        // past the message) is skipped and counted, not fatal.
        let mut bad = events[0].clone();
        bad[24] = 200;
        k.send(&bad);
        k
    });
    let mut mon = NldevMonitor::new(t);
    let mut model = Topology::new();
    let mut kinds = Vec::new();
    let mut changes = Vec::new();
    loop {
        match mon.next::<NldevMessage>(SHORT).unwrap() {
            MonitorRead::Events(msgs) => {
                for m in &msgs {
                    let ev = MonitorEvent::try_from(m).unwrap();
                    kinds.push((ev.event, ev.dev_index));
                    changes.extend(model.apply_monitor_event(&ev, Instant(0)));
                }
            }
            MonitorRead::Idle => break,
            MonitorRead::ResyncNeeded => panic!("no overflow here"),
        }
    }
    let _k = server.join().unwrap();
    use MonitorEventType::*;
    assert_eq!(
        kinds,
        [
            (Register, Some(0)),
            (NetdevAttach, Some(0)),
            (Register, Some(1)),
            (NetdevAttach, Some(1)),
            (Unregister, Some(0)),
            (Register, Some(2)),
            (NetdevAttach, Some(2)),
            (Unregister, Some(2)),
            (Unregister, Some(1)),
        ]
    );
    assert_eq!(mon.stats().events, 9);
    assert_eq!(mon.stats().malformed, 1);
    assert!(changes
        .iter()
        .any(|e| matches!(e, TopologyEvent::DeviceRecreated {
        device, old_index: 0, .. } if device.name == "rxe_ini" && device.index == 2)));
}

/// A transport whose receive fails with ENOBUFS once, as an overflowed netlink socket does.
struct Overflowing(bool);

impl Transport for Overflowing {
    fn send(&mut self, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn recv(&mut self, _: Duration) -> io::Result<Option<Vec<u8>>> {
        if std::mem::replace(&mut self.0, false) {
            Err(io::Error::from_raw_os_error(libc::ENOBUFS))
        } else {
            Ok(None)
        }
    }
}

#[test]
fn enobufs_on_the_event_socket_asks_for_a_resync() {
    let mut mon = NldevMonitor::new(Overflowing(true));
    assert_eq!(
        mon.next::<NldevMessage>(SHORT).unwrap(),
        MonitorRead::ResyncNeeded
    );
    assert_eq!(mon.next::<NldevMessage>(SHORT).unwrap(), MonitorRead::Idle);
    assert_eq!(mon.stats().overruns, 1);
}

#[test]
fn this_machine_has_no_rdma_netlink_and_says_so() {
    // The build machines have no RDMA in their kernel (no ib_core); elsewhere, skip.
    if std::path::Path::new("/sys/module/ib_core").exists() {
        return;
    }
    let err = FdTransport::open_requests().unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "RDMA netlink is not available on this kernel (no CONFIG_INFINIBAND, or ib_core is \
         not loaded: try `modprobe ib_core`)"
    );
    assert!(NldevClient::open().unwrap_err().is_unavailable());
    assert!(NldevMonitor::open().unwrap_err().is_unavailable());
}

/// A RES_QP_GET reply of device 1 (`rxe_tgt`) with `n` RC QPs in RTS, numbered from
/// `first`, in the kernel's entry layout (PORT_INDEX, LQPN, KERN_NAME, SQ_PSN, TYPE, STATE).
fn qp_dump_message(seq: u32, first: u32, n: u32) -> Vec<u8> {
    use iser_guard::core::nldev::{encode, Nested, NldevAttribute as A, NldevNetlinkMessage};
    use netlink_packet_core::{NetlinkHeader, NetlinkPayload};
    let entries = (first..first + n)
        .map(|lqpn| {
            A::ResQpEntry(Nested::new(vec![
                A::PortIndex(1),
                A::ResLqpn(lqpn),
                A::ResKernName("rdma_cm".into()),
                A::ResSqPsn(lqpn * 7),
                A::ResType(2),
                A::ResState(3),
            ]))
        })
        .collect();
    let msg = NldevMessage::new(
        NldevCommand::ResQpGet,
        vec![
            A::DevIndex(1),
            A::DevName("rxe_tgt".into()),
            A::ResQp(Nested::new(entries)),
        ],
    );
    let mut header = NetlinkHeader::default();
    header.flags = 2; // NLM_F_MULTI
    header.sequence_number = seq;
    encode(&NldevNetlinkMessage::new(
        header,
        NetlinkPayload::InnerMessage(msg),
    ))
    .unwrap()
}

#[test]
fn a_datagram_larger_than_the_receive_buffer_is_read_whole() {
    // The kernel caps one message at what a u16 nest length allows (~64 KiB) and splits big
    // QP tables across messages; three ~28 KiB messages in one 84 KiB datagram exercise the
    // receive buffer's growth (it starts at 64 KiB).
    let (t, k) = pair();
    let server = std::thread::spawn(move || {
        let req = k.recv().unwrap();
        let seq = seq_of(&req);
        let mut d = Vec::new();
        for part in 0..3 {
            d.extend(qp_dump_message(seq, 2 + part * 500, 500));
        }
        assert!(d.len() > 64 * 1024, "{}", d.len());
        k.send(&d);
        k.send(&done(seq, 0));
    });
    let mut c = NldevClient::new(t);
    let qps = c.qps(1, &mut Skips::default()).unwrap();
    assert_eq!(qps.len(), 1500);
    assert_eq!(qps[1499].lqpn, 1501);
    assert_eq!(qps[1499].sq_psn, Some(1501 * 7));
    server.join().unwrap();
}

#[test]
fn the_watcher_subscribes_dumps_and_follows_events() {
    use iser_guard::core::topology::MonitorSupport;
    use iser_guard::io::netlink::NldevWatcher;
    use std::cell::Cell;

    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let (mon_t, mon_k) = pair();
    let mut mon = Some(NldevMonitor::new(mon_t));
    let empty_sysfs = tempfile::tempdir().unwrap();
    let mut w = NldevWatcher::new(
        NldevClient::new(t),
        Box::new(move || mon.take().ok_or(NetlinkError::Closed)),
        Duration::from_secs(5),
        empty_sysfs.path().to_path_buf(),
        Instant(0),
    );
    let now = Cell::new(0u64);
    let clock = || Instant(now.get());

    // First step: SYS_GET (6.12: monitor mode 1), subscribe, initial dump.
    let ev = w.step(&clock, Duration::ZERO).unwrap();
    assert_eq!(w.poller().monitor(), MonitorSupport::Supported);
    let appeared: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            TopologyEvent::DeviceAppeared { device } => Some(device.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(appeared, ["rxe_ini", "rxe_tgt"]);
    assert_eq!(w.poller().next_deadline(), Some(Instant(5_000)));

    // The kernel says rxe_ini was unregistered (real 6.12 event bytes): the model follows
    // and the next dump is brought forward.
    mon_k.send(&monitor_events()[4]);
    now.set(1_000);
    let ev = w.step(&clock, Duration::from_secs(2)).unwrap();
    assert!(
        matches!(ev.as_slice(), [TopologyEvent::DeviceDisappeared { device }] if device.name == "rxe_ini"),
        "{ev:#?}"
    );
    assert_eq!(w.poller().next_deadline(), Some(Instant(1_250)));
    assert!(w.topology().device("rxe_ini").is_none());

    // At the deadline the watcher dumps again (SYS_GET + 5 dump requests so far, then 5 more).
    now.set(1_250);
    w.step(&clock, Duration::ZERO).unwrap();
    assert!(w.topology().device("rxe_ini").is_some());
    assert!(w.last_error().is_none());
    drop(w);
    h.join().unwrap();
}

/// An event socket that overflows once, then fails for good.
struct OverflowThenFail(u8);

impl Transport for OverflowThenFail {
    fn send(&mut self, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn recv(&mut self, _: Duration) -> io::Result<Option<Vec<u8>>> {
        self.0 += 1;
        match self.0 {
            1 => Err(io::Error::from_raw_os_error(libc::ENOBUFS)),
            _ => Err(io::Error::from_raw_os_error(libc::EBADF)),
        }
    }
}

#[test]
fn the_watcher_resyncs_after_an_overflow_and_falls_back_to_polling() {
    use iser_guard::core::topology::MonitorSupport;
    use iser_guard::io::netlink::NldevWatcher;
    use std::cell::Cell;

    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let mut mon = Some(NldevMonitor::new(OverflowThenFail(0)));
    let empty_sysfs = tempfile::tempdir().unwrap();
    let mut w = NldevWatcher::new(
        NldevClient::new(t),
        Box::new(move || mon.take().ok_or(NetlinkError::Closed)),
        Duration::from_secs(5),
        empty_sysfs.path().to_path_buf(),
        Instant(0),
    );
    let now = Cell::new(0u64);
    let clock = || Instant(now.get());
    // Initial dump, then the event socket reports ENOBUFS: a dump is due at once.
    w.step(&clock, Duration::from_secs(1)).unwrap();
    assert_eq!(w.poller().next_deadline(), Some(Instant(0)));
    // The resync dump; then the event socket fails: polling continues alone.
    now.set(10);
    w.step(&clock, Duration::from_secs(1)).unwrap();
    assert_eq!(w.poller().monitor(), MonitorSupport::Unsupported);
    assert_eq!(w.poller().next_deadline(), Some(Instant(5_010)));
    assert_eq!(w.topology().devices().len(), 2);
    drop(w);
    h.join().unwrap();
}

#[test]
fn the_watcher_dumps_the_cm_id_table_with_the_qp_table() {
    use iser_guard::io::netlink::NldevWatcher;

    for kernel in ["k61", "k612"] {
        let (t, h) = serve(Replay::default().moment(&format!("{kernel}/nldev-1-loggedin")));
        let empty_sysfs = tempfile::tempdir().unwrap();
        let mut w = NldevWatcher::new(
            NldevClient::new(t),
            Box::new(|| Err::<NldevMonitor<OverflowThenFail>, _>(NetlinkError::Closed)),
            Duration::from_secs(5),
            empty_sysfs.path().to_path_buf(),
            Instant(0),
        );
        w.step(&|| Instant(0), Duration::ZERO).unwrap();
        let iser: Vec<_> = w
            .cm_ids()
            .iter()
            .filter(|c| c.kern_name.as_deref() == Some("ib_iser"))
            .collect();
        assert_eq!(iser.len(), 1, "{kernel}");
        assert_eq!(iser[0].dev_name, "rxe_ini");
        assert_eq!(iser[0].port, Some(1));
        assert_eq!(iser[0].dst().unwrap().to_string(), "192.0.2.2:3260");
        assert!(w
            .cm_ids()
            .iter()
            .any(|c| c.dev_name == "rxe_tgt" && c.kern_name.as_deref() == Some("ib_isert")));
        drop(w);
        h.join().unwrap();
    }
}
