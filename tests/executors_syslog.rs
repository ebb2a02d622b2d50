//! Syslog alerts: exact datagram bytes and priority against a temporary socket, and a typed
//! error (never a panic) when there is no receiver.

use std::os::unix::net::UnixDatagram;

use iser_guard::core::severity::Severity;
use iser_guard::io::syslog::{
    format_datagram, AlertMessage, AlertSink, SyslogError, SyslogSink, FACILITY_DAEMON,
    MAX_MESSAGE_BYTES,
};

fn alert(severity: Severity) -> AlertMessage {
    AlertMessage {
        severity,
        what: "RDMA device rocep2s0f0 port 1: GSI QP 1 stuck in ERR".into(),
        why: "every ERR->RTS modify fails with EINVAL, so no iSER login can succeed".into(),
        todo: "iser-guard will re-create the device when 192.0.2.2:3260 answers; run `iser-guard status`".into(),
    }
}

fn recv(sock: &UnixDatagram) -> Vec<u8> {
    let mut buf = vec![0u8; 65536];
    let n = sock.recv(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn sends_rfc3164_datagram_with_daemon_facility_and_each_severity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let rx = UnixDatagram::bind(&path).unwrap();
    rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let sink = SyslogSink::new(&path, "iser-guard");
    let pid = std::process::id();
    // daemon = 3 → PRI = 24 + severity.
    for (sev, pri) in [
        (Severity::Alert, 25),
        (Severity::Crit, 26),
        (Severity::Err, 27),
        (Severity::Warning, 28),
        (Severity::Notice, 29),
        (Severity::Info, 30),
    ] {
        sink.send(&alert(sev)).unwrap();
        let got = String::from_utf8(recv(&rx)).unwrap();
        assert_eq!(
            got,
            format!(
                "<{pri}>iser-guard[{pid}]: RDMA device rocep2s0f0 port 1: GSI QP 1 stuck in ERR: \
                 every ERR->RTS modify fails with EINVAL, so no iSER login can succeed; \
                 iser-guard will re-create the device when 192.0.2.2:3260 answers; run \
                 `iser-guard status`"
            )
        );
    }
}

#[test]
fn newlines_are_flattened_and_long_messages_cut_at_a_char_boundary() {
    let mut a = alert(Severity::Err);
    a.what = "line one\nline two".into();
    a.why = "é".repeat(MAX_MESSAGE_BYTES); // 2 bytes each: forces a cut inside the text
    a.todo = String::new();
    let bytes = format_datagram(FACILITY_DAEMON, "ig", 7, &a);
    let s = String::from_utf8(bytes).expect("cut must keep valid UTF-8");
    assert!(
        s.starts_with("<27>ig[7]: line one line two: é"),
        "{}",
        &s[..40]
    );
    assert!(s.ends_with('…'));
    let body = s.split_once("]: ").unwrap().1;
    assert!(body.len() <= MAX_MESSAGE_BYTES, "{}", body.len());
    assert!(!s.contains('\n'));
}

#[test]
fn no_receiver_is_a_typed_unavailable_error() {
    let dir = tempfile::tempdir().unwrap();
    let sink = SyslogSink::new(dir.path().join("no-such-log"), "iser-guard");
    let err = sink.send(&alert(Severity::Alert)).unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains("no-such-log"));
    // And it stays an error, not a panic, on every later call.
    assert!(matches!(
        sink.send(&alert(Severity::Info)),
        Err(SyslogError::Unavailable { .. })
    ));
}

#[test]
fn reconnects_after_the_receiver_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let rx = UnixDatagram::bind(&path).unwrap();
    let sink = SyslogSink::new(&path, "iser-guard");
    sink.send(&alert(Severity::Notice)).unwrap();
    recv(&rx);
    // journald restarts: the old socket goes away, a new one appears at the same path.
    drop(rx);
    std::fs::remove_file(&path).unwrap();
    let rx2 = UnixDatagram::bind(&path).unwrap();
    rx2.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    sink.send(&alert(Severity::Notice)).unwrap();
    let got = String::from_utf8(recv(&rx2)).unwrap();
    assert!(got.starts_with("<29>iser-guard["), "{got}");
}

#[test]
fn a_stream_socket_is_reported_unavailable() {
    // Some old syslog daemons listen on a SOCK_STREAM /dev/log; connecting a datagram socket
    // to it fails with EPROTOTYPE.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let err = SyslogSink::new(&path, "x")
        .send(&alert(Severity::Info))
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
}
