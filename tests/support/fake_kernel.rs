//! A fake kernel endpoint for RDMA netlink tests: one end of a `socketpair(SOCK_SEQPACKET)`
//! speaking the netlink wire format, so the real client code (framing, sequence numbers,
//! deadlines) runs unchanged against scripted or replayed (captured) kernel answers.
//!
//! Shared by tests/nldev_socket.rs, tests/status_cli.rs and the examples idle_daemon and
//! soak_daemon (`#[path]` module).

#![allow(dead_code)]

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use iser_guard::io::netlink::FdTransport;
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

/// NLM_F_DUMP_INTR.
pub const NLM_F_DUMP_INTR: u16 = 0x10;

/// The kernel's port id in the captures (any value works: the client does not check it).
const PORTID: u32 = 399;

/// The kernel side of a socketpair.
pub struct FakeKernel {
    fd: OwnedFd,
}

/// A client transport and the fake kernel at the other end.
pub fn pair() -> (FdTransport, FakeKernel) {
    let (a, b) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .expect("socketpair");
    (
        FdTransport::from_fd(a).expect("transport"),
        FakeKernel { fd: b },
    )
}

impl FakeKernel {
    /// Waits (up to 10 s, so a broken test fails instead of hanging) for one request.
    pub fn recv(&self) -> Option<Vec<u8>> {
        let mut fds = [nix::poll::PollFd::new(
            self.fd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let n = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(10_000u16)).ok()?;
        if n == 0 {
            return None;
        }
        let mut buf = vec![0u8; 65536];
        let n = nix::unistd::read(&self.fd, &mut buf).ok()?;
        if n == 0 {
            return None;
        }
        buf.truncate(n);
        Some(buf)
    }

    /// Sends one datagram.
    pub fn send(&self, datagram: &[u8]) {
        nix::unistd::write(&self.fd, datagram).expect("fake kernel send");
    }

    /// Sends each message in its own datagram (as the real kernel does), with the sequence
    /// number of `request`.
    pub fn reply(&self, request: &[u8], messages: &[Vec<u8>]) {
        for m in messages {
            self.send(&with_seq(m, seq_of(request)));
        }
    }

    /// Serves requests until the client closes, answering from `replay`; unknown requests
    /// get NLMSG_ERROR -EINVAL like the kernel's unknown ops.
    pub fn serve(self, replay: Replay) {
        while let Some(req) = self.recv() {
            match replay.answer(&req) {
                Some(msgs) => self.reply(&req, msgs),
                None => self.send(&error_reply(&req, -22)),
            }
        }
    }
}

/// The sequence number of a message.
pub fn seq_of(msg: &[u8]) -> u32 {
    u32::from_ne_bytes(msg[8..12].try_into().unwrap())
}

/// A copy of `msg` with another sequence number and the kernel's port id.
pub fn with_seq(msg: &[u8], seq: u32) -> Vec<u8> {
    let mut m = msg.to_vec();
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m[12..16].copy_from_slice(&PORTID.to_ne_bytes());
    m
}

/// A copy of `msg` with extra header flags.
pub fn with_flags(msg: &[u8], flags: u16) -> Vec<u8> {
    let mut m = msg.to_vec();
    let f = u16::from_ne_bytes(m[6..8].try_into().unwrap()) | flags;
    m[6..8].copy_from_slice(&f.to_ne_bytes());
    m
}

/// NLMSG_ERROR with `errno` echoing the request's header (what the kernel sends, CAPPED
/// aside), built from the uapi layout: nlmsghdr + int error + the request's nlmsghdr.
pub fn error_reply(request: &[u8], errno: i32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&36u32.to_ne_bytes());
    m.extend_from_slice(&2u16.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&seq_of(request).to_ne_bytes());
    m.extend_from_slice(&PORTID.to_ne_bytes());
    m.extend_from_slice(&errno.to_ne_bytes());
    m.extend_from_slice(&request[..16]);
    m
}

/// NLMSG_DONE carrying `code` (20 bytes, NLM_F_MULTI), as in the captures.
pub fn done(seq: u32, code: i32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&20u32.to_ne_bytes());
    m.extend_from_slice(&3u16.to_ne_bytes());
    m.extend_from_slice(&2u16.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&PORTID.to_ne_bytes());
    m.extend_from_slice(&code.to_ne_bytes());
    m
}

/// The nldev fixtures folder (real kernel bytes, see its README).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/iser-guard-core/tests/fixtures/nldev")
}

/// A captured exchange: the request as sent and every received message, in order.
pub struct Capture {
    pub request: Vec<u8>,
    pub replies: Vec<Vec<u8>>,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Reads a capture `.hex` file (relative to the fixtures folder).
pub fn capture(rel: &str) -> Capture {
    let text = std::fs::read_to_string(fixtures().join(rel)).expect(rel);
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(unhex);
    let request = lines.next().expect("request line");
    Capture {
        request,
        replies: lines.collect(),
    }
}

/// The monitor event messages of `k612mon2/rdma-netlink-events.hex`, in order.
pub fn monitor_events() -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(fixtures().join("k612mon2/rdma-netlink-events.hex"))
        .expect("events");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(" hex=").map(|(_, h)| unhex(h.trim())))
        .collect()
}

/// Answers keyed by the request's type and attributes (sequence number ignored).
#[derive(Default)]
pub struct Replay {
    answers: HashMap<(u16, Vec<u8>), Vec<Vec<u8>>>,
}

fn key(request: &[u8]) -> (u16, Vec<u8>) {
    (
        u16::from_ne_bytes(request[4..6].try_into().unwrap()),
        request[16..].to_vec(),
    )
}

impl Replay {
    /// Answers a request like the captured one with the captured replies.
    pub fn with(mut self, c: Capture) -> Self {
        self.answers.insert(key(&c.request), c.replies);
        self
    }

    /// Every `NN-*.hex` of a capture moment folder (e.g. `k612/nldev-1-loggedin`).
    pub fn moment(mut self, dir: &str) -> Self {
        let mut names: Vec<_> = std::fs::read_dir(fixtures().join(dir))
            .expect(dir)
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".hex") && !n.contains("-err-"))
            .collect();
        names.sort();
        for n in names {
            self = self.with(capture(&format!("{dir}/{n}")));
        }
        self
    }

    /// Replaces the answer to a request like `c.request`.
    pub fn answer(&self, request: &[u8]) -> Option<&Vec<Vec<u8>>> {
        self.answers.get(&key(request))
    }

    /// Changes the captured replies of one request with `f`.
    pub fn edit(mut self, rel: &str, f: impl FnOnce(&mut Vec<Vec<u8>>)) -> Self {
        let c = capture(rel);
        let k = key(&c.request);
        let mut replies = self.answers.remove(&k).unwrap_or(c.replies);
        f(&mut replies);
        self.answers.insert(k, replies);
        self
    }
}

/// Starts a fake kernel serving `replay` on a thread; returns the client end.
pub fn serve(replay: Replay) -> (FdTransport, std::thread::JoinHandle<()>) {
    let (t, k) = pair();
    let h = std::thread::spawn(move || k.serve(replay));
    (t, h)
}

/// Short deadline for tests that expect a timeout (no timing is asserted).
pub const SHORT: Duration = Duration::from_millis(200);

/// Sets the GSI QP of a captured RES_QP_GET reply to `state`: the entry's last attribute is
/// RES_STATE (type 27, u8, `05 00 1b 00 <state> 00 00 00`); the GSI entry is the last one
/// in the captures (lqpn 1 after the RC QP), so its RES_STATE is the message's last 8 bytes.
pub fn set_last_qp_state(msg: &mut [u8], state: u8) {
    let n = msg.len();
    assert_eq!(
        &msg[n - 8..n - 4],
        &[5, 0, 0x1b, 0],
        "last attribute is RES_STATE"
    );
    msg[n - 4] = state;
}

/// The daemon's RDMA netlink source on two fake-kernel socketpairs (dump requests, device
/// events), for a daemon loop run against a fake kernel: the real async client and monitor,
/// only the sockets are not the kernel's. The first call takes the sockets; a later one (a
/// re-open after a failure) gets `Closed`.
pub fn injected_netlink(
    requests: FdTransport,
    events: FdTransport,
) -> iser_guard::daemon::topology::NetlinkAccess {
    use iser_guard::io::netlink::{AsyncNldevClient, NetlinkError, NldevMonitor, NldevWatcher};
    let mut sockets = Some((requests, events));
    iser_guard::daemon::topology::NetlinkAccess::Injected(Box::new(move |interval, root, now| {
        let (requests, events) = sockets.take().ok_or(NetlinkError::Closed)?;
        let register = |e: std::io::Error| NetlinkError::Os {
            op: "register",
            source: e,
        };
        let client = AsyncNldevClient::new(requests.into_async().map_err(register)?);
        let mut monitor = Some(NldevMonitor::new(events.into_async().map_err(register)?));
        Ok(NldevWatcher::new(
            client,
            Box::new(move || monitor.take().ok_or(NetlinkError::Closed)),
            interval,
            root,
            now,
        ))
    }))
}
