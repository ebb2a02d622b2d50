//! The RDMA netlink client against a fake kernel endpoint (a socketpair speaking the netlink
//! wire format), replaying real kernel bytes from crates/iser-guard-core/tests/fixtures/nldev (captures/nldevcap-*,
//! k612mon2) and scripted edge cases built from the uapi layout; then the model fed by it.

#[path = "support/fake_kernel.rs"]
mod fake_kernel;

use std::io;
use std::time::Duration;

use fake_kernel::*;
use iser_guard::core::nldev::{
    request, IbPortState, MonitorEvent, MonitorEventType, NldevCommand, NldevMessage,
};
use iser_guard::core::qp::{QpState, QpType};
use iser_guard::core::time::Instant;
use iser_guard::core::topology::{MatchedBy, Topology, TopologyEvent};
use iser_guard::io::netlink::{
    AsyncNldevClient, AsyncTransport, BlockingTransport, FdTransport, MonitorRead, NetlinkError,
    NldevClient, NldevMonitor, NldevWatcher, Skips, StepEnd,
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
    assert_eq!(ini.ports[0].state, IbPortState::Active);
    assert_eq!(ini.ports[0].netdev_name.as_deref(), Some("ini0"));
    assert_eq!(ini.ports[0].netdev_index, Some(3));
    let qps = ini.qps.as_ref().unwrap();
    let gsi = qps.iter().find(|q| q.is_gsi()).unwrap();
    assert_eq!((gsi.lqpn, gsi.state), (1, QpState::Rts));
    assert_eq!(gsi.kern_name.as_deref(), Some("ib_core"));
    let rc = qps.iter().find(|q| q.lqpn == 18).unwrap();
    assert_eq!(rc.qp_type.known(), Some(QpType::Rc));
    assert_eq!(rc.kern_name.as_deref(), Some("rdma_cm"));
    // GET, then PORT_GET, RES_QP_GET and RES_CM_ID_GET of each of the two devices.
    assert_eq!(c.stats().requests, 7);
    // The CM id table comes with the snapshot (session placement): ib_iser's connection.
    assert!(report
        .cm_ids
        .iter()
        .any(|c| c.dev_name == "rxe_ini" && c.kern_name.as_deref() == Some("ib_iser")));

    let mut model = Topology::new();
    let ev = model.apply_snapshot(report.snapshot, Instant(0));
    // Two devices appeared, each with its QP 1 in RTS.
    assert_eq!(ev.len(), 4, "two devices and their GSI QPs: {ev:#?}");
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, TopologyEvent::GsiReady { port: 1, .. }))
            .count(),
        2
    );
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
            device, old_index: 0, matched_by: MatchedBy::Netdev, .. },
            TopologyEvent::GsiReady { port: 1, device: ready }]
            if device.name == "rxe_ini" && device.index == 2 && ready.index == 2),
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

impl BlockingTransport for Overflowing {
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

#[tokio::test]
async fn the_async_client_reads_the_real_6_12_snapshot_over_a_socketpair() {
    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let mut c = AsyncNldevClient::new(t.into_async().unwrap());
    let report = c.snapshot(&no_parent).await.unwrap();
    let names: Vec<_> = report
        .snapshot
        .devices
        .iter()
        .map(|d| d.info.name.as_str())
        .collect();
    assert_eq!(names, ["rxe_ini", "rxe_tgt"]);
    assert_eq!(c.stats().requests, 7);
    assert!(report
        .cm_ids
        .iter()
        .any(|c| c.dev_name == "rxe_tgt" && c.kern_name.as_deref() == Some("ib_isert")));
    drop(c);
    h.join().unwrap();
}

#[tokio::test]
async fn the_async_client_times_out_on_a_silent_kernel() {
    let (t, _k) = pair();
    let mut c = AsyncNldevClient::new(t.into_async().unwrap()).with_timeout(SHORT);
    let err = c.devices(&mut Skips::default()).await.unwrap_err();
    assert!(matches!(err, NetlinkError::Timeout { .. }), "{err:?}");
}

#[tokio::test]
async fn the_watcher_subscribes_dumps_and_follows_events() {
    use iser_guard::core::topology::MonitorSupport;
    use std::cell::Cell;

    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let (mon_t, mon_k) = pair();
    let mut mon = Some(NldevMonitor::new(mon_t.into_async().unwrap()));
    let empty_sysfs = tempfile::tempdir().unwrap();
    let mut w = NldevWatcher::new(
        AsyncNldevClient::new(t.into_async().unwrap()),
        Box::new(move || mon.take().ok_or(NetlinkError::Closed)),
        Duration::from_secs(5),
        empty_sysfs.path().to_path_buf(),
        Instant(0),
    );
    let now = Cell::new(0u64);
    let clock = || Instant(now.get());
    let at_once = || std::future::ready(());

    // First step: SYS_GET (6.12: monitor mode 1), subscribe, initial dump.
    let (ev, end) = w.step(&clock, at_once()).await.unwrap();
    assert_eq!(end, StepEnd::Dumped);
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
    assert!(
        w.take_scan().is_some(),
        "the dump's sysfs scan is kept for the port map"
    );

    // Nothing due, nothing on the event socket: the wake future ends the wait.
    let (ev, end) = w.step(&clock, at_once()).await.unwrap();
    assert_eq!((ev.len(), end), (0, StepEnd::Woken));

    // The kernel says rxe_ini was unregistered (real 6.12 event bytes): the model follows
    // and the next dump is brought forward.
    mon_k.send(&monitor_events()[4]);
    now.set(1_000);
    let (ev, end) = w
        .step(&clock, tokio::time::sleep(Duration::from_secs(2)))
        .await
        .unwrap();
    assert_eq!(end, StepEnd::Monitor);
    assert!(
        matches!(ev.as_slice(), [TopologyEvent::DeviceDisappeared { device }] if device.name == "rxe_ini"),
        "{ev:#?}"
    );
    assert_eq!(w.poller().next_deadline(), Some(Instant(1_250)));
    assert!(w.topology().device("rxe_ini").is_none());

    // At the deadline the watcher dumps again.
    now.set(1_250);
    let (_, end) = w.step(&clock, at_once()).await.unwrap();
    assert_eq!(end, StepEnd::Dumped);
    assert!(w.topology().device("rxe_ini").is_some());
    assert!(w.last_error().is_none());
    // SYS_GET + 7 dump requests, twice.
    assert_eq!(w.client().stats().requests, 15);
    drop(w);
    h.join().unwrap();
}

/// An event socket that overflows once, then fails for good.
struct OverflowThenFail(u8);

impl AsyncTransport for OverflowThenFail {
    fn send(&mut self, _: &[u8]) -> impl std::future::Future<Output = io::Result<()>> {
        std::future::ready(Ok(()))
    }
    fn recv(
        &mut self,
        _: Option<tokio::time::Instant>,
    ) -> impl std::future::Future<Output = io::Result<Option<Vec<u8>>>> {
        self.0 += 1;
        std::future::ready(match self.0 {
            1 => Err(io::Error::from_raw_os_error(libc::ENOBUFS)),
            _ => Err(io::Error::from_raw_os_error(libc::EBADF)),
        })
    }
}

#[tokio::test]
async fn the_watcher_resyncs_after_an_overflow_and_falls_back_to_polling() {
    use iser_guard::core::topology::MonitorSupport;
    use std::cell::Cell;

    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let mut mon = Some(NldevMonitor::new(OverflowThenFail(0)));
    let empty_sysfs = tempfile::tempdir().unwrap();
    let mut w = NldevWatcher::new(
        AsyncNldevClient::new(t.into_async().unwrap()),
        Box::new(move || mon.take().ok_or(NetlinkError::Closed)),
        Duration::from_secs(5),
        empty_sysfs.path().to_path_buf(),
        Instant(0),
    );
    let now = Cell::new(0u64);
    let clock = || Instant(now.get());
    let at_once = || std::future::ready(());
    // Initial dump; then the event socket reports ENOBUFS: a dump is due at once.
    assert_eq!(w.step(&clock, at_once()).await.unwrap().1, StepEnd::Dumped);
    assert_eq!(w.step(&clock, at_once()).await.unwrap().1, StepEnd::Monitor);
    assert_eq!(w.poller().next_deadline(), Some(Instant(0)));
    // The resync dump; then the event socket fails: polling continues alone.
    now.set(10);
    assert_eq!(w.step(&clock, at_once()).await.unwrap().1, StepEnd::Dumped);
    assert_eq!(w.step(&clock, at_once()).await.unwrap().1, StepEnd::Monitor);
    assert_eq!(w.poller().monitor(), MonitorSupport::Unsupported);
    assert_eq!(w.poller().next_deadline(), Some(Instant(5_010)));
    assert_eq!(w.topology().devices().len(), 2);
    drop(w);
    h.join().unwrap();
}

#[tokio::test]
async fn the_watcher_dumps_the_cm_id_table_with_the_qp_table() {
    for kernel in ["k61", "k612"] {
        let (t, h) = serve(Replay::default().moment(&format!("{kernel}/nldev-1-loggedin")));
        let empty_sysfs = tempfile::tempdir().unwrap();
        let mut w = NldevWatcher::new(
            AsyncNldevClient::new(t.into_async().unwrap()),
            Box::new(|| Err::<NldevMonitor<OverflowThenFail>, _>(NetlinkError::Closed)),
            Duration::from_secs(5),
            empty_sysfs.path().to_path_buf(),
            Instant(0),
        );
        assert_eq!(
            w.step(&|| Instant(0), std::future::ready(()))
                .await
                .unwrap()
                .1,
            StepEnd::Dumped
        );
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

// --- The poll schedule in virtual time -------------------------------------------------
//
// The daemon's topology source (`watch_netlink`) over an in-process kernel double that
// answers from the same captured bytes at once, on a paused runtime clock: the timers are
// the real ones, time only moves when every task waits, so the tests see exactly when each
// request is sent and that nothing is sent in between.

mod virtual_time {
    use super::*;
    use iser_guard::core::recovery::Observation;
    use iser_guard::daemon::sources::{Signal, TopologyReport};
    use iser_guard::daemon::topology::{watch_netlink, HostTopology, NetlinkAccess};
    use iser_guard::io::netlink::RuntimeTimer;
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    /// RDMA_NLDEV_CMD_GET (client 5, op 1): the first request of every dump.
    const NLDEV_GET: u16 = 0x1401;
    const NLM_F_DUMP: u16 = 0x300;

    /// (virtual ms, message type, flags) of every request sent.
    type Log = Arc<Mutex<Vec<(u64, u16, u16)>>>;

    /// Answers each request from a [`Replay`] at once (as the real kernel does within
    /// `send()`/`recv()`), or never (`silent`).
    struct ReplayKernel {
        replay: Arc<Mutex<Replay>>,
        queue: VecDeque<Vec<u8>>,
        log: Log,
        start: tokio::time::Instant,
        silent: bool,
    }

    impl AsyncTransport for ReplayKernel {
        fn send(&mut self, d: &[u8]) -> impl std::future::Future<Output = io::Result<()>> {
            let kind = u16::from_ne_bytes([d[4], d[5]]);
            let flags = u16::from_ne_bytes([d[6], d[7]]);
            let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap();
            self.log.lock().unwrap().push((ms, kind, flags));
            if !self.silent {
                match self.replay.lock().unwrap().answer(d) {
                    Some(msgs) => self
                        .queue
                        .extend(msgs.iter().map(|m| with_seq(m, seq_of(d)))),
                    None => self.queue.push_back(error_reply(d, -22)),
                }
            }
            std::future::ready(Ok(()))
        }

        fn recv(
            &mut self,
            deadline: Option<tokio::time::Instant>,
        ) -> impl std::future::Future<Output = io::Result<Option<Vec<u8>>>> {
            let next = self.queue.pop_front();
            async move {
                if next.is_some() {
                    return Ok(next);
                }
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
                Ok(None)
            }
        }
    }

    /// An event socket fed by a channel.
    struct ChannelEvents(UnboundedReceiver<Vec<u8>>);

    impl AsyncTransport for ChannelEvents {
        fn send(&mut self, _: &[u8]) -> impl std::future::Future<Output = io::Result<()>> {
            std::future::ready(Ok(()))
        }
        async fn recv(
            &mut self,
            deadline: Option<tokio::time::Instant>,
        ) -> io::Result<Option<Vec<u8>>> {
            let got = match deadline {
                Some(d) => match tokio::time::timeout_at(d, self.0.recv()).await {
                    Ok(got) => got,
                    Err(_) => return Ok(None),
                },
                None => self.0.recv().await,
            };
            // A closed channel reads as a closed socket (an empty datagram).
            Ok(Some(got.unwrap_or_default()))
        }
    }

    struct Setup {
        watcher: NldevWatcher<ReplayKernel, ChannelEvents>,
        /// What the kernel double answers (a test may change it mid-run).
        replay: Arc<Mutex<Replay>>,
        log: Log,
        events: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
        start: tokio::time::Instant,
        _sysfs: tempfile::TempDir,
    }

    fn setup(silent: bool) -> Setup {
        let start = tokio::time::Instant::now();
        let replay = Arc::new(Mutex::new(
            Replay::default().moment("k612/nldev-1-loggedin"),
        ));
        let log = Log::default();
        let kernel = ReplayKernel {
            replay: replay.clone(),
            queue: VecDeque::new(),
            log: log.clone(),
            start,
            silent,
        };
        let (events, rx) = unbounded_channel();
        let mut mon = Some(NldevMonitor::new(ChannelEvents(rx)));
        let sysfs = tempfile::tempdir().unwrap();
        let watcher = NldevWatcher::new(
            AsyncNldevClient::new(kernel),
            Box::new(move || mon.take().ok_or(NetlinkError::Closed)),
            Duration::from_secs(5),
            sysfs.path().to_path_buf(),
            Instant(0),
        );
        Setup {
            watcher,
            replay,
            log,
            events,
            start,
            _sysfs: sysfs,
        }
    }

    /// Instants (virtual ms) at which a dump started.
    fn dumps(log: &Log) -> Vec<u64> {
        log.lock()
            .unwrap()
            .iter()
            .filter(|(_, kind, flags)| *kind == NLDEV_GET && flags & NLM_F_DUMP == NLM_F_DUMP)
            .map(|(ms, _, _)| *ms)
            .collect()
    }

    /// Runs `watch_netlink` on `s` for `for_ms` of virtual time, with `during` running next
    /// to it; returns the reports it sent.
    async fn run_for(
        s: &mut Setup,
        for_ms: u64,
        refresh: &Signal,
        during: impl std::future::Future<Output = ()>,
    ) -> Vec<TopologyReport> {
        let start = s.start;
        let clock = move || Instant(u64::try_from(start.elapsed().as_millis()).unwrap());
        let (tx, mut rx) = unbounded_channel();
        let stop = Signal::default();
        let sysfs = s._sysfs.path().to_path_buf();
        let watch = watch_netlink(&mut s.watcher, &clock, &sysfs, &tx, refresh, &stop);
        let bounded = tokio::time::timeout(Duration::from_millis(for_ms), async {
            tokio::join!(watch, during).0
        });
        if let Ok(r) = bounded.await {
            panic!("watch_netlink ended early: {r:?}");
        }
        let mut out = Vec::new();
        while let Ok(r) = rx.try_recv() {
            out.push(r);
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_source_dumps_once_per_interval_and_sends_nothing_between() {
        let mut s = setup(false);
        let reports = run_for(&mut s, 60_500, &Signal::default(), async {}).await;
        let at = dumps(&s.log);
        assert_eq!(
            at.len(),
            13,
            "one dump at start, then one every 5 s: {at:?}"
        );
        for pair in at.windows(2) {
            let gap = pair[1] - pair[0];
            assert!((5_000..=5_010).contains(&gap), "{at:?}");
        }
        // Every request belongs to a dump: SYS_GET once, then 7 per dump (GET, and PORT_GET,
        // RES_QP_GET, RES_CM_ID_GET of each of the two devices); none in between.
        assert_eq!(s.log.lock().unwrap().len(), 1 + 13 * 7);
        // One report (the first dump); the others changed nothing, so the loop hears nothing.
        // It says both devices appeared, each with its GSI QP's state, and the consumers of
        // each port (ib_iser on rxe_ini, ib_isert on rxe_tgt).
        assert_eq!(reports.len(), 1, "{reports:#?}");
        assert!(
            matches!(&reports[0], TopologyReport::Update { observations, ports, cm_ids }
            if observations.len() == 5 && ports.is_empty()
                && cm_ids.iter().any(|c| c.kern_name.as_deref() == Some("ib_iser")))
        );
        let TopologyReport::Update { observations, .. } = &reports[0] else {
            unreachable!()
        };
        let Some(Observation::Consumers { ports }) = observations.last() else {
            panic!("no consumers in {observations:#?}")
        };
        let seen: Vec<(String, u32, String)> = ports
            .iter()
            .flat_map(|p| {
                p.consumers
                    .iter()
                    .map(move |c| (p.device.clone(), p.port, c.describe()))
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("rxe_ini".into(), 1, "ib_iser (1 connection, live)".into()),
                (
                    "rxe_tgt".into(),
                    1,
                    "ib_isert (1 connection, 1 listener, live)".into()
                )
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_cm_id_table_alone_is_reported() {
        let mut s = setup(false);
        let replay = s.replay.clone();
        // At 2 s ib_iser's connection on rxe_ini goes away (its CM id dump ends empty: the
        // captured NLMSG_DONE only); devices, ports and GSI QPs stay as they were.
        let logout = async move {
            tokio::time::sleep(Duration::from_millis(2_000)).await;
            let edited = std::mem::take(&mut *replay.lock().unwrap()).edit(
                "k612/nldev-1-loggedin/10-res-cm-id-get-dump-dev0.hex",
                |replies| {
                    let done = replies.pop().unwrap();
                    *replies = vec![done];
                },
            );
            *replay.lock().unwrap() = edited;
        };
        let reports = run_for(&mut s, 6_000, &Signal::default(), logout).await;
        let iser = |r: &TopologyReport| match r {
            TopologyReport::Update { cm_ids, .. } => cm_ids
                .iter()
                .filter(|c| c.kern_name.as_deref() == Some("ib_iser"))
                .count(),
            other => panic!("{other:?}"),
        };
        // The first dump, then the 5 s dump: no topology event, but the table changed.
        assert_eq!(reports.len(), 2, "{reports:#?}");
        assert_eq!(iser(&reports[0]), 1);
        assert_eq!(iser(&reports[1]), 0);
        // The only observation: the consumers, without ib_iser now.
        assert!(
            matches!(&reports[1], TopologyReport::Update { observations, cm_ids, .. }
            if matches!(observations.as_slice(), [Observation::Consumers { ports }]
                if ports.iter().all(|p| p.device == "rxe_tgt"))
                && cm_ids.iter().any(|c| c.dev_name == "rxe_tgt"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_device_event_brings_one_dump_forward_by_the_debounce() {
        let mut s = setup(false);
        let events = s.events.clone();
        let burst = async move {
            tokio::time::sleep(Duration::from_millis(7_000)).await;
            // REGISTER and NETDEV_ATTACH of the same device (real 6.12 bytes): one dump.
            let all = monitor_events();
            events.send(all[4].clone()).unwrap();
            events.send(all[5].clone()).unwrap();
            events.send(all[6].clone()).unwrap();
        };
        let reports = run_for(&mut s, 13_000, &Signal::default(), burst).await;
        let at = dumps(&s.log);
        assert_eq!(at.len(), 4, "{at:?}");
        assert_eq!(at[0], 0);
        assert!((5_000..5_010).contains(&at[1]), "{at:?}");
        assert!((7_250..7_260).contains(&at[2]), "{at:?}");
        assert!((12_250..12_270).contains(&at[3]), "{at:?}");
        // The first dump, then the events as they came (device gone, re-created), then the
        // dump after them (the model already knew).
        assert!(reports.len() >= 2, "{reports:#?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refresh_dumps_at_once_and_restarts_the_interval() {
        let mut s = setup(false);
        let refresh = Arc::new(Signal::default());
        let r = refresh.clone();
        let ask = async move {
            tokio::time::sleep(Duration::from_millis(2_000)).await;
            r.raise();
        };
        let reports = run_for(&mut s, 8_000, &refresh, ask).await;
        let at = dumps(&s.log);
        assert_eq!(at.len(), 3, "{at:?}");
        assert!((2_000..2_010).contains(&at[1]), "{at:?}");
        assert!((7_000..7_020).contains(&at[2]), "{at:?}");
        // A forced dump is always reported, changes or not (the engine waits for it).
        assert_eq!(reports.len(), 2, "{reports:#?}");
        assert!(!refresh.is_raised());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_kernel_fails_each_request_after_5_s_and_is_retried_an_interval_later() {
        let mut s = setup(true);
        let _ = run_for(&mut s, 16_000, &Signal::default(), async {}).await;
        let log = s.log.lock().unwrap().clone();
        let times: Vec<u64> = log.iter().map(|(ms, _, _)| *ms).collect();
        // SYS_GET at 0 (times out at 5 s: no device events assumed), the dump at 5 s (times
        // out at 10 s), the next dump one interval after that failure.
        assert_eq!(times.len(), 3, "{log:?}");
        assert!((5_000..5_010).contains(&times[1]), "{log:?}");
        assert!((15_000..15_030).contains(&times[2]), "{log:?}");
        assert!(matches!(
            s.watcher.last_error(),
            Some(NetlinkError::Timeout { timeout, .. }) if *timeout == Duration::from_secs(5)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn without_rdma_netlink_one_report_says_so_then_sysfs_is_scanned_each_interval() {
        let root = tempfile::tempdir().unwrap();
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/e810");
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", fixture.display()))
            .arg(root.path())
            .status()
            .unwrap();
        assert!(copied.success());
        let source = Box::new(HostTopology {
            sysfs_root: root.path().to_path_buf(),
            interval: Duration::from_secs(5),
            netlink: NetlinkAccess::Injected(Box::new(|_, _, _| Err(NetlinkError::Unavailable))),
            metrics: iser_guard::metrics::Metrics::disabled(),
            mountinfo: None,
        });
        let (tx, mut rx) = unbounded_channel();
        let (refresh, stop) = (Arc::new(Signal::default()), Arc::new(Signal::default()));
        // The runtime's timers, which the paused clock drives (production uses a timerfd).
        tokio::spawn(source.watch(tx, refresh.clone(), stop.clone(), || Box::new(RuntimeTimer)));
        tokio::time::sleep(Duration::from_millis(7_000)).await;
        let mut first = Vec::new();
        while let Ok(r) = rx.try_recv() {
            first.push(r);
        }
        assert!(
            matches!(first.as_slice(), [TopologyReport::NetlinkUnavailable(m), TopologyReport::Update { ports, .. }]
                if m.contains("not available") && ports.len() == 1),
            "{first:#?}"
        );
        // The device goes away; the next scan (at 10 s) reports it, nothing before.
        std::fs::remove_file(root.path().join("class/infiniband/rocep2s0f0")).unwrap();
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        assert!(rx.try_recv().is_err(), "no scan between intervals");
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let gone = rx.try_recv().unwrap();
        assert!(
            matches!(&gone, TopologyReport::Update { observations, .. }
                if matches!(observations.as_slice(), [iser_guard::core::recovery::Observation::DeviceGone { device }] if device == "rocep2s0f0")),
            "{gone:#?}"
        );
        // A refresh scans at once; stop ends the task.
        refresh.raise();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(matches!(rx.try_recv(), Ok(TopologyReport::Update { .. })));
        stop.raise();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(rx.is_closed() || rx.try_recv().is_err());
    }
    /// The metrics hear of every dump of the captured 6.12 host (rxe_ini and rxe_tgt, QP 1
    /// in RTS, an iSER connection), while the loop hears only of the first: exporting
    /// them costs the loop no wakeup on an idle host.
    #[tokio::test(start_paused = true)]
    async fn every_dump_reaches_the_metrics_and_only_changes_reach_the_loop() {
        let mut s = setup(false);
        let start = s.start;
        let clock = move || Instant(u64::try_from(start.elapsed().as_millis()).unwrap());
        let (tx, mut rx) = unbounded_channel();
        let (refresh, stop) = (Signal::default(), Signal::default());
        let metrics = iser_guard::metrics::Metrics::new();
        let sysfs = s._sysfs.path().to_path_buf();
        let watch = iser_guard::daemon::topology::watch_netlink_observed(
            &mut s.watcher,
            &clock,
            &sysfs,
            &tx,
            &refresh,
            &stop,
            &metrics,
        );
        let _ = tokio::time::timeout(Duration::from_millis(12_500), watch).await;
        let mut reports = 0;
        while rx.try_recv().is_ok() {
            reports += 1;
        }
        assert_eq!(reports, 1);
        let text = metrics.encode();
        for want in [
            "iser_guard_netlink_dumps_total{result=\"ok\"} 3\n",
            "iser_guard_netlink_requests_total 22\n",
            "iser_guard_rdma_devices 2\n",
            "iser_guard_rdma_port_state{device=\"rxe_ini\",port=\"1\",state=\"ACTIVE\"} 1\n",
            "iser_guard_gsi_qp_state{device=\"rxe_ini\",port=\"1\",state=\"RTS\"} 1\n",
            "iser_guard_gsi_qp_state{device=\"rxe_ini\",port=\"1\",state=\"ERR\"} 0\n",
            "iser_guard_rdma_port_stuck{device=\"rxe_ini\",port=\"1\"} 0\n",
            "iser_guard_qps{device=\"rxe_ini\",type=\"GSI\",state=\"RTS\"} 1\n",
            "iser_guard_source_up{source=\"netlink\"} 1\n",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
        assert!(text.contains("iser_guard_last_success_timestamp_seconds{source=\"netlink\"}"));
    }
}

#[tokio::test]
async fn a_timerfd_sleep_fires_once_and_a_dropped_one_is_disarmed() {
    use iser_guard::io::netlink::{Timer, TimerFd};
    let mut t = TimerFd::new().unwrap();
    let start = std::time::Instant::now();
    t.sleep(Duration::from_millis(30)).await;
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(30), "{took:?}");
    // A sleep cancelled before its deadline leaves nothing armed: the next one waits its
    // own full time, not the stale deadline.
    let _ =
        tokio::time::timeout(Duration::from_millis(5), t.sleep(Duration::from_millis(20))).await;
    let start = std::time::Instant::now();
    t.sleep(Duration::from_millis(40)).await;
    assert!(start.elapsed() >= Duration::from_millis(40));
}
