//! The RDMA netlink socket (NETLINK_RDMA): requests, dumps and monitor events.
//!
//! This module owns the conversation with the kernel, not the message contents: it frames
//! datagrams into netlink messages, matches replies to requests by sequence number, follows
//! multi-part dumps to NLMSG_DONE, turns NLMSG_ERROR and a DONE carrying an errno into typed
//! errors, retries dumps the kernel marks NLM_F_DUMP_INTR, reports ENOBUFS on the event socket
//! as "resync needed", and puts a deadline on every wait. The attributes are decoded by the
//! codec (`crate::core::nldev`), plugged in as any [`NetlinkDeserializable`] message type.
//!
//! Kernel behaviour this follows (captures/nldevcap-k61 and -k612, lab.md):
//! - one netlink message per `recv()`, NLMSG_DONE alone in the last datagram; several messages
//!   per datagram are handled as well;
//! - a dump gets no ACK after DONE, so dumps are sent without NLM_F_ACK; a non-dump request gets
//!   its reply and then an ACK (NLMSG_ERROR with error 0, flag NLM_F_CAPPED);
//! - a dump the kernel refuses (RES_QP_GET or PORT_GET without DEV_INDEX) ends with an
//!   NLMSG_DONE carrying -22, not with an NLMSG_ERROR.
//!
//! The OS socket sits behind two small traits: [`BlockingTransport`] (blocking, with a deadline per
//! receive: the one-shot CLIs) and [`AsyncTransport`] (registered with tokio: the daemon,
//! which must never park a thread on a short tick). [`FdTransport`] and [`AsyncFdTransport`]
//! serve both the real netlink socket and, in tests, one end of a `socketpair` whose other
//! end plays the kernel. The conversation itself (sequence numbers, DONE, errors, retries) is
//! written once, over [`AsyncTransport`]: the blocking [`NldevClient`] runs it over
//! [`Blocking`], whose futures are always ready, so both clients behave identically.
//!
//! netlink-sys has a tokio socket (`TokioSocket`, feature `tokio_socket`); it is tokio's
//! `AsyncFd` around the same socket, as [`AsyncFdTransport`] is, but its receive has a fixed
//! buffer (a datagram larger than it is cut short) and its `from_raw_fd` panics on error, and
//! the feature pulls in futures-util. [`AsyncFdTransport`] keeps this module's
//! peek-the-length receive and also wraps a `socketpair` end for the fake kernel.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use netlink_packet_core::{
    NetlinkDeserializable, NetlinkMessage, NetlinkSerializable, NLMSG_DONE, NLMSG_ERROR,
    NLMSG_NOOP, NLMSG_OVERRUN, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST,
};

/// The netlink protocol number of RDMA netlink (`NETLINK_RDMA`).
pub const NETLINK_RDMA: isize = 20;
/// The multicast group of RDMA device events (`RDMA_NL_GROUP_NOTIFY`).
pub const RDMA_NL_GROUP_NOTIFY: u32 = 4;
/// Default deadline for one request (send to last reply).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times an interrupted dump is tried before giving up.
pub const DEFAULT_DUMP_ATTEMPTS: u32 = 3;

use crate::core::nldev::datagram::{
    describe_type, ext_ack_message, leading_i32, split_datagram, Frame,
};
use crate::core::nldev::MonitorEvent;
use crate::core::nldev::{
    request, CmIdEntry, DeviceInfo, NldevError, NldevMessage, PortInfo, QpDump, QpEntry, SysInfo,
};
use crate::core::topology::{
    DeviceObservation, PollAction, Poller, Snapshot, Topology, TopologyEvent,
};

/// Largest datagram accepted (the kernel's dump skbs are at most 32 KiB; leave room).
const MAX_DATAGRAM: usize = 1 << 20;

/// What can go wrong talking to the kernel's RDMA netlink.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// The kernel has no RDMA netlink: `socket(AF_NETLINK, …, NETLINK_RDMA)` failed with
    /// EPROTONOSUPPORT.
    #[error(
        "RDMA netlink is not available on this kernel (no CONFIG_INFINIBAND, or ib_core is not \
         loaded: try `modprobe ib_core`)"
    )]
    Unavailable,
    /// A socket call failed.
    #[error("RDMA netlink {op} failed: {source}")]
    Os {
        /// The call (`socket`, `bind`, `send`, `recv`, `poll`).
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// No complete answer before the deadline.
    #[error("no complete answer from the kernel to {request} within {timeout:?}")]
    Timeout {
        /// The request.
        request: String,
        /// The deadline that passed.
        timeout: Duration,
    },
    /// The kernel answered with NLMSG_ERROR.
    #[error("the kernel refused {request}: {}{}", errno_text(*.errno), ext_ack_text(.ext_ack))]
    Kernel {
        /// The request.
        request: String,
        /// The (positive) errno.
        errno: i32,
        /// The extended-ack message, if the kernel gave one.
        ext_ack: Option<String>,
    },
    /// The kernel ended a dump with an NLMSG_DONE carrying a negative errno (it does this,
    /// for example, for a QP dump without a device index).
    #[error("the kernel ended the {request} dump with an error: {}", errno_text(*.errno))]
    DumpFailed {
        /// The request.
        request: String,
        /// The (positive) errno.
        errno: i32,
    },
    /// Every attempt of a dump was marked NLM_F_DUMP_INTR (the table changed while dumping).
    #[error(
        "the {request} dump was interrupted {attempts} times in a row because the kernel's \
         tables kept changing; try again"
    )]
    Interrupted {
        /// The request.
        request: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The socket's receive buffer overflowed (ENOBUFS): messages were lost. On the event
    /// socket this means a full resync (dump) is needed.
    #[error(
        "the RDMA netlink socket overflowed (ENOBUFS): messages were lost, a full resync is needed"
    )]
    Overrun,
    /// A reply that cannot be framed or decoded.
    #[error("malformed RDMA netlink reply to {request}: {detail}")]
    Malformed {
        /// The request.
        request: String,
        /// What is wrong.
        detail: String,
    },
    /// The peer closed the socket (only a fake kernel does this).
    #[error("the RDMA netlink peer closed the socket")]
    Closed,
}

impl NetlinkError {
    /// Whether the error means the facility is missing rather than failing.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, NetlinkError::Unavailable)
    }

    /// The errno the kernel returned, for [`NetlinkError::Kernel`] and
    /// [`NetlinkError::DumpFailed`].
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Kernel { errno, .. } | NetlinkError::DumpFailed { errno, .. } => {
                Some(*errno)
            }
            _ => None,
        }
    }
}

fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EBUSY => "EBUSY",
        libc::EACCES => "EACCES",
        _ => "",
    };
    let desc = io::Error::from_raw_os_error(errno);
    if name.is_empty() {
        format!("errno {errno} ({desc})")
    } else {
        format!("{name} ({desc})")
    }
}

fn ext_ack_text(msg: &Option<String>) -> String {
    match msg {
        Some(m) => format!(": {m}"),
        None => String::new(),
    }
}

/// A datagram transport: the netlink socket, or a test double playing the kernel.
pub trait BlockingTransport {
    /// Sends one datagram (one or more netlink messages).
    fn send(&mut self, datagram: &[u8]) -> io::Result<()>;

    /// Receives one datagram, waiting at most `timeout`. `Ok(None)`: nothing arrived in time.
    /// An empty datagram means the peer closed the socket.
    fn recv(&mut self, timeout: Duration) -> io::Result<Option<Vec<u8>>>;
}

/// A datagram transport the daemon's loop waits on without a thread of its own: readiness
/// comes from the async runtime, deadlines from its timers.
pub trait AsyncTransport {
    /// Sends one datagram (one or more netlink messages).
    fn send(&mut self, datagram: &[u8]) -> impl Future<Output = io::Result<()>>;

    /// Receives one datagram, waiting until `deadline` at most (`None`: as long as it takes).
    /// `Ok(None)`: the deadline passed. An empty datagram means the peer closed the socket.
    /// Cancellation-safe: dropping the future before it completes loses no datagram.
    fn recv(
        &mut self,
        deadline: Option<tokio::time::Instant>,
    ) -> impl Future<Output = io::Result<Option<Vec<u8>>>>;
}

/// A blocking [`BlockingTransport`] seen as an [`AsyncTransport`] whose futures are ready at their
/// first poll (the blocking call happens inside it): how the blocking [`NldevClient`] runs
/// the one conversation code.
#[derive(Debug)]
pub struct Blocking<T>(pub T);

/// What a `recv` without a deadline waits for at most on a blocking transport.
const BLOCKING_NO_DEADLINE: Duration = Duration::from_secs(24 * 3600);

impl<T: BlockingTransport> AsyncTransport for Blocking<T> {
    fn send(&mut self, datagram: &[u8]) -> impl Future<Output = io::Result<()>> {
        std::future::ready(self.0.send(datagram))
    }

    fn recv(
        &mut self,
        deadline: Option<tokio::time::Instant>,
    ) -> impl Future<Output = io::Result<Option<Vec<u8>>>> {
        let timeout = deadline.map_or(BLOCKING_NO_DEADLINE, |d| {
            d.saturating_duration_since(tokio::time::Instant::now())
        });
        std::future::ready(self.0.recv(timeout))
    }
}

/// Runs a future whose every await is ready at once (one over [`Blocking`]) to completion.
fn block_on_ready<R>(
    future: impl Future<Output = Result<R, NetlinkError>>,
) -> Result<R, NetlinkError> {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(r) => r,
        // Cannot happen with a blocking transport; an error rather than a hang if it did.
        Poll::Pending => Err(NetlinkError::Os {
            op: "recv",
            source: io::Error::new(
                io::ErrorKind::WouldBlock,
                "a blocking transport returned a pending future",
            ),
        }),
    }
}

/// A [`BlockingTransport`] over a datagram socket file descriptor (non-blocking, with `poll` for the
/// deadline): the real netlink socket or one end of a `socketpair`.
#[derive(Debug)]
pub struct FdTransport {
    fd: OwnedFd,
    buf: Vec<u8>,
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(flags))?;
    Ok(())
}

impl FdTransport {
    /// Wraps a datagram socket and makes it non-blocking.
    pub fn from_fd(fd: OwnedFd) -> io::Result<FdTransport> {
        set_nonblocking(&fd)?;
        Ok(FdTransport {
            fd,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The same socket registered with the tokio runtime (must be called inside one).
    pub fn into_async(self) -> io::Result<AsyncFdTransport> {
        // SAFETY: the OwnedFd is a valid open descriptor, owned by the AsyncFd from here until
        // it is dropped, and its as_raw_fd() always returns that same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(self.fd, Interest::READABLE) }?;
        Ok(AsyncFdTransport { fd, buf: self.buf })
    }

    /// Opens a NETLINK_RDMA socket for requests, bound to a kernel-assigned port id and
    /// connected to the kernel.
    pub fn open_requests() -> Result<FdTransport, NetlinkError> {
        Self::open(0)
    }

    /// Opens a NETLINK_RDMA socket subscribed to the device-event group
    /// (RDMA_NL_GROUP_NOTIFY). Kernels before 6.12 accept the subscription but never send.
    pub fn open_monitor() -> Result<FdTransport, NetlinkError> {
        Self::open(1 << (RDMA_NL_GROUP_NOTIFY - 1))
    }

    fn open(groups: u32) -> Result<FdTransport, NetlinkError> {
        use netlink_sys::{Socket, SocketAddr};
        let mut sock = Socket::new(NETLINK_RDMA).map_err(|e| {
            if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) {
                NetlinkError::Unavailable
            } else {
                NetlinkError::Os {
                    op: "socket",
                    source: e,
                }
            }
        })?;
        sock.bind(&SocketAddr::new(0, groups))
            .map_err(|source| NetlinkError::Os { op: "bind", source })?;
        if groups == 0 {
            // Requests go to the kernel (port id 0); the event socket never sends and stays
            // unconnected, as iproute2's `rdma monitor` does.
            sock.connect(&SocketAddr::new(0, 0))
                .map_err(|source| NetlinkError::Os {
                    op: "connect",
                    source,
                })?;
        }
        // Extended acks give error texts; a kernel without them just ignores the option.
        let _ = sock.set_ext_ack(true);
        if groups != 0 {
            // Events come in bursts (a driver reload registers every device at once).
            let _ = sock.set_rx_buf_sz(1 << 20);
        }
        // SAFETY: the descriptor was just taken out of the socket, which no longer owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(sock.into_raw_fd()) };
        FdTransport::from_fd(fd).map_err(|source| NetlinkError::Os {
            op: "fcntl",
            source,
        })
    }
}

/// One non-blocking `send` of the whole datagram.
fn send_datagram(fd: RawFd, datagram: &[u8]) -> io::Result<()> {
    loop {
        // SAFETY: the pointer and length describe `datagram`, valid for the call.
        let n = unsafe {
            libc::send(
                fd,
                datagram.as_ptr().cast(),
                datagram.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return if usize::try_from(n).ok() == Some(datagram.len()) {
                Ok(())
            } else {
                Err(io::Error::new(io::ErrorKind::WriteZero, "short send"))
            };
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One non-blocking `recv`; `Ok(None)` on EAGAIN (spurious wakeup).
fn raw_recv(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: the pointer and length describe `buf`, valid for the call.
        let n = unsafe {
            libc::recv(
                fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                flags | libc::MSG_DONTWAIT,
            )
        };
        if let Ok(n) = usize::try_from(n) {
            return Ok(Some(n));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Reads the next datagram without waiting, whole: its size is learnt first (MSG_TRUNC
/// returns the real length) and `buf` grows to it, so a large one is never silently cut.
/// `Ok(None)`: nothing pending.
fn recv_datagram(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<Option<Vec<u8>>> {
    let Some(len) = raw_recv(fd, buf, libc::MSG_PEEK | libc::MSG_TRUNC)? else {
        return Ok(None);
    };
    if len > buf.len() {
        if len > MAX_DATAGRAM {
            // Consume it so the socket does not stay stuck on it.
            let _ = raw_recv(fd, buf, 0);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("datagram of {len} bytes exceeds the {MAX_DATAGRAM}-byte limit"),
            ));
        }
        buf.resize(len, 0);
    }
    Ok(raw_recv(fd, buf, 0)?.map(|n| buf.get(..n).unwrap_or_default().to_vec()))
}

impl BlockingTransport for FdTransport {
    fn send(&mut self, datagram: &[u8]) -> io::Result<()> {
        send_datagram(self.fd.as_raw_fd(), datagram)
    }

    fn recv(&mut self, timeout: Duration) -> io::Result<Option<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Round up: a deadline 0.3 ms away must not become a busy poll(0) loop.
            let ms = i32::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
            let mut fds = [nix::poll::PollFd::new(
                self.fd.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let wait = nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::MAX);
            match nix::poll::poll(&mut fds, wait) {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if let Some(d) = recv_datagram(self.fd.as_raw_fd(), &mut self.buf)? {
                return Ok(Some(d));
            }
        }
    }
}

/// An [`AsyncTransport`] over a datagram socket registered with tokio: the real netlink
/// socket, or one end of a `socketpair` ([`FdTransport::into_async`]). Waiting costs no
/// thread and no tick: the runtime's epoll says when a datagram is there.
#[derive(Debug)]
pub struct AsyncFdTransport {
    fd: AsyncFd<OwnedFd>,
    buf: Vec<u8>,
}

impl AsyncFdTransport {
    /// Wraps a datagram socket, makes it non-blocking and registers it with the runtime
    /// (must be called inside one).
    pub fn from_fd(fd: OwnedFd) -> io::Result<AsyncFdTransport> {
        FdTransport::from_fd(fd)?.into_async()
    }

    /// [`FdTransport::open_requests`], registered with the runtime.
    pub fn open_requests() -> Result<AsyncFdTransport, NetlinkError> {
        FdTransport::open_requests()?
            .into_async()
            .map_err(|source| NetlinkError::Os {
                op: "register",
                source,
            })
    }

    /// [`FdTransport::open_monitor`], registered with the runtime.
    pub fn open_monitor() -> Result<AsyncFdTransport, NetlinkError> {
        FdTransport::open_monitor()?
            .into_async()
            .map_err(|source| NetlinkError::Os {
                op: "register",
                source,
            })
    }

    async fn recv_ready(&mut self) -> io::Result<Vec<u8>> {
        let (fd, buf) = (&self.fd, &mut self.buf);
        loop {
            let mut ready = fd.readable().await?;
            // The read happens here, synchronously, once the runtime says the socket is
            // readable: a future dropped while waiting has taken nothing.
            match recv_datagram(ready.get_inner().as_raw_fd(), buf)? {
                Some(d) => return Ok(d),
                None => ready.clear_ready(),
            }
        }
    }
}

impl AsyncTransport for AsyncFdTransport {
    fn send(&mut self, datagram: &[u8]) -> impl Future<Output = io::Result<()>> {
        // A netlink request to the kernel is handled inside send(); a full socket buffer
        // (EAGAIN) is an error like any other, and the dump is retried at the next interval.
        std::future::ready(send_datagram(self.fd.get_ref().as_raw_fd(), datagram))
    }

    async fn recv(
        &mut self,
        deadline: Option<tokio::time::Instant>,
    ) -> io::Result<Option<Vec<u8>>> {
        match deadline {
            None => self.recv_ready().await.map(Some),
            Some(d) => match tokio::time::timeout_at(d, self.recv_ready()).await {
                Ok(r) => r.map(Some),
                Err(_elapsed) => Ok(None),
            },
        }
    }
}

/// Counters of what the client skipped or retried (for logs and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Replies with another sequence number (late answers to a timed-out request).
    pub stale_replies: u64,
    /// Dumps restarted because the kernel marked them NLM_F_DUMP_INTR or the socket overran.
    pub dump_retries: u64,
    /// Requests sent.
    pub requests: u64,
}

/// A request/response client over one [`AsyncTransport`]: the conversation code, written
/// once. The daemon uses it over [`AsyncFdTransport`]; [`NldevClient`] is the same code over
/// a blocking [`BlockingTransport`].
#[derive(Debug)]
pub struct AsyncNldevClient<T> {
    transport: T,
    next_seq: u32,
    timeout: Duration,
    dump_attempts: u32,
    stats: ClientStats,
}

impl AsyncNldevClient<AsyncFdTransport> {
    /// Opens the real NETLINK_RDMA socket, registered with the runtime (call inside one).
    /// [`NetlinkError::Unavailable`] on a kernel without RDMA netlink.
    pub fn open() -> Result<Self, NetlinkError> {
        Ok(AsyncNldevClient::new(AsyncFdTransport::open_requests()?))
    }
}

impl<T> AsyncNldevClient<T> {
    /// A client over `transport` with the default deadline and dump attempts.
    pub fn new(transport: T) -> Self {
        AsyncNldevClient {
            transport,
            next_seq: 1,
            timeout: DEFAULT_TIMEOUT,
            dump_attempts: DEFAULT_DUMP_ATTEMPTS,
            stats: ClientStats::default(),
        }
    }

    /// Sets the deadline of every request (send to the last reply).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how many times an interrupted dump is tried (at least once).
    pub fn with_dump_attempts(mut self, attempts: u32) -> Self {
        self.dump_attempts = attempts.max(1);
        self
    }

    /// Sets the first sequence number (the next request uses it).
    pub fn with_first_seq(mut self, seq: u32) -> Self {
        self.next_seq = seq;
        self
    }

    /// What was skipped or retried so far.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// The transport (tests inspect their fake).
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }
}

impl<T: AsyncTransport> AsyncNldevClient<T> {
    /// Sends a dump request and collects every reply message up to NLMSG_DONE. The request's
    /// sequence number is replaced by the client's; `NLM_F_REQUEST | NLM_F_DUMP` are set.
    /// Interrupted dumps (NLM_F_DUMP_INTR on any part, or an overrun socket) are retried from
    /// the start, up to the configured number of attempts.
    pub async fn dump<I>(&mut self, request: NetlinkMessage<I>) -> Result<Vec<I>, NetlinkError>
    where
        I: NetlinkSerializable + NetlinkDeserializable,
    {
        self.dump_with(request, |f| {
            I::deserialize(&f.header, f.payload).map_err(|e| e.to_string())
        })
        .await
    }

    /// [`AsyncNldevClient::dump`] with a caller-chosen decoder for each reply message (given
    /// the whole message), e.g. the codec's streaming `QpDump::decode` for big QP tables.
    pub async fn dump_with<I, R>(
        &mut self,
        request: NetlinkMessage<I>,
        mut decode: impl FnMut(&Frame<'_>) -> Result<R, String>,
    ) -> Result<Vec<R>, NetlinkError>
    where
        I: NetlinkSerializable,
    {
        let what = format!("{} dump", describe_type(request.header.message_type));
        let mut bytes = encode(request, NLM_F_REQUEST | NLM_F_DUMP);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.exchange(&mut bytes, &what, true, &mut decode).await {
                Ok(ExchangeEnd::Complete(msgs)) => return Ok(msgs),
                Ok(ExchangeEnd::Interrupted) | Err(NetlinkError::Overrun)
                    if attempt < self.dump_attempts =>
                {
                    self.stats.dump_retries += 1;
                    tracing::debug!(request = %what, attempt, "dump interrupted, retrying");
                }
                Ok(ExchangeEnd::Interrupted) => {
                    return Err(NetlinkError::Interrupted {
                        request: what,
                        attempts: attempt,
                    })
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends a non-dump request (`NLM_F_REQUEST | NLM_F_ACK` set) and returns its replies
    /// once the ACK arrives.
    pub async fn request<I>(&mut self, request: NetlinkMessage<I>) -> Result<Vec<I>, NetlinkError>
    where
        I: NetlinkSerializable + NetlinkDeserializable,
    {
        let what = describe_type(request.header.message_type);
        let mut bytes = encode(request, NLM_F_REQUEST | NLM_F_ACK);
        let mut decode =
            |f: &Frame<'_>| I::deserialize(&f.header, f.payload).map_err(|e| e.to_string());
        match self.exchange(&mut bytes, &what, false, &mut decode).await? {
            ExchangeEnd::Complete(msgs) => Ok(msgs),
            ExchangeEnd::Interrupted => Err(NetlinkError::Interrupted {
                request: what,
                attempts: 1,
            }),
        }
    }

    async fn exchange<R>(
        &mut self,
        bytes: &mut [u8],
        what: &str,
        dump: bool,
        decode: &mut impl FnMut(&Frame<'_>) -> Result<R, String>,
    ) -> Result<ExchangeEnd<R>, NetlinkError> {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        if let Some(field) = bytes.get_mut(8..12) {
            field.copy_from_slice(&seq.to_ne_bytes());
        }
        self.transport
            .send(bytes)
            .await
            .map_err(|source| NetlinkError::Os { op: "send", source })?;
        self.stats.requests += 1;
        // The runtime's clock (the wall clock, or a paused test clock).
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut replies = Replies::new(seq, dump);
        loop {
            if tokio::time::Instant::now() >= deadline {
                return Err(self.timeout_error(what));
            }
            let datagram = match self.transport.recv(Some(deadline)).await {
                Ok(Some(d)) => d,
                Ok(None) => return Err(self.timeout_error(what)),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Err(NetlinkError::Overrun)
                }
                Err(source) => return Err(NetlinkError::Os { op: "recv", source }),
            };
            if let Some(outcome) = replies.on_datagram(&datagram, what, decode, &mut self.stats)? {
                return Ok(outcome);
            }
        }
    }

    fn timeout_error(&self, what: &str) -> NetlinkError {
        NetlinkError::Timeout {
            request: what.to_string(),
            timeout: self.timeout,
        }
    }
}

/// The replies to one request as they arrive: matched by sequence number, ended by DONE
/// (dump) or the ACK (request), errors typed. Pure: fed one datagram at a time.
struct Replies<R> {
    seq: u32,
    dump: bool,
    interrupted: bool,
    out: Vec<R>,
}

impl<R> Replies<R> {
    fn new(seq: u32, dump: bool) -> Self {
        Replies {
            seq,
            dump,
            interrupted: false,
            out: Vec::new(),
        }
    }

    /// `Some` once the answer is complete.
    fn on_datagram(
        &mut self,
        datagram: &[u8],
        what: &str,
        decode: &mut impl FnMut(&Frame<'_>) -> Result<R, String>,
        stats: &mut ClientStats,
    ) -> Result<Option<ExchangeEnd<R>>, NetlinkError> {
        if datagram.is_empty() {
            return Err(NetlinkError::Closed);
        }
        let frames = split_datagram(datagram).map_err(|detail| NetlinkError::Malformed {
            request: what.to_string(),
            detail,
        })?;
        for frame in frames {
            let h = &frame.header;
            if h.sequence_number != self.seq {
                stats.stale_replies += 1;
                tracing::debug!(
                    expected = self.seq,
                    got = h.sequence_number,
                    "skipping a reply to another request"
                );
                continue;
            }
            if h.flags & NLM_F_DUMP_INTR != 0 {
                self.interrupted = true;
            }
            match h.message_type {
                NLMSG_NOOP => {}
                NLMSG_ERROR => {
                    let code = leading_i32(frame.payload).ok_or_else(|| {
                        malformed(what, "NLMSG_ERROR shorter than its error code")
                    })?;
                    if code == 0 {
                        if !self.dump {
                            return Ok(Some(ExchangeEnd::Complete(std::mem::take(&mut self.out))));
                        }
                        // An ACK inside a dump (a kernel that acks dumps): keep reading.
                    } else {
                        return Err(NetlinkError::Kernel {
                            request: what.to_string(),
                            errno: code.saturating_neg(),
                            ext_ack: ext_ack_message(h, frame.payload),
                        });
                    }
                }
                NLMSG_DONE => {
                    // The kernel allows an empty DONE; otherwise it carries an int.
                    let code = leading_i32(frame.payload).unwrap_or(0);
                    if code < 0 {
                        return Err(NetlinkError::DumpFailed {
                            request: what.to_string(),
                            errno: code.saturating_neg(),
                        });
                    }
                    if self.interrupted {
                        return Ok(Some(ExchangeEnd::Interrupted));
                    }
                    if self.dump {
                        return Ok(Some(ExchangeEnd::Complete(std::mem::take(&mut self.out))));
                    }
                }
                NLMSG_OVERRUN => return Err(NetlinkError::Overrun),
                _ => {
                    let msg = decode(&frame).map_err(|e| {
                        malformed(
                            what,
                            format!("cannot decode {}: {e}", describe_type(h.message_type)),
                        )
                    })?;
                    self.out.push(msg);
                }
            }
        }
        Ok(None)
    }
}

/// A blocking request/response client over one [`BlockingTransport`] (the one-shot CLIs): the
/// [`AsyncNldevClient`] code over [`Blocking`].
#[derive(Debug)]
pub struct NldevClient<T> {
    inner: AsyncNldevClient<Blocking<T>>,
}

impl NldevClient<FdTransport> {
    /// Opens the real NETLINK_RDMA socket. [`NetlinkError::Unavailable`] on a kernel without
    /// RDMA netlink.
    pub fn open() -> Result<Self, NetlinkError> {
        Ok(NldevClient::new(FdTransport::open_requests()?))
    }
}

impl<T: BlockingTransport> NldevClient<T> {
    /// A client over `transport` with the default deadline and dump attempts.
    pub fn new(transport: T) -> Self {
        NldevClient {
            inner: AsyncNldevClient::new(Blocking(transport)),
        }
    }

    /// Sets the deadline of every request (send to the last reply).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        NldevClient {
            inner: self.inner.with_timeout(timeout),
        }
    }

    /// Sets how many times an interrupted dump is tried (at least once).
    pub fn with_dump_attempts(self, attempts: u32) -> Self {
        NldevClient {
            inner: self.inner.with_dump_attempts(attempts),
        }
    }

    /// Sets the first sequence number (the next request uses it).
    pub fn with_first_seq(self, seq: u32) -> Self {
        NldevClient {
            inner: self.inner.with_first_seq(seq),
        }
    }

    /// What was skipped or retried so far.
    pub fn stats(&self) -> ClientStats {
        self.inner.stats()
    }

    /// The transport (tests inspect their fake).
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.inner.transport_mut().0
    }

    /// See [`AsyncNldevClient::dump`].
    pub fn dump<I>(&mut self, request: NetlinkMessage<I>) -> Result<Vec<I>, NetlinkError>
    where
        I: NetlinkSerializable + NetlinkDeserializable,
    {
        block_on_ready(self.inner.dump(request))
    }

    /// See [`AsyncNldevClient::dump_with`].
    pub fn dump_with<I, R>(
        &mut self,
        request: NetlinkMessage<I>,
        decode: impl FnMut(&Frame<'_>) -> Result<R, String>,
    ) -> Result<Vec<R>, NetlinkError>
    where
        I: NetlinkSerializable,
    {
        block_on_ready(self.inner.dump_with(request, decode))
    }

    /// See [`AsyncNldevClient::request`].
    pub fn request<I>(&mut self, request: NetlinkMessage<I>) -> Result<Vec<I>, NetlinkError>
    where
        I: NetlinkSerializable + NetlinkDeserializable,
    {
        block_on_ready(self.inner.request(request))
    }

    /// See [`AsyncNldevClient::system_info`].
    pub fn system_info(&mut self) -> Result<SysInfo, NetlinkError> {
        block_on_ready(self.inner.system_info())
    }

    /// See [`AsyncNldevClient::devices`].
    pub fn devices(&mut self, skips: &mut Skips) -> Result<Vec<DeviceInfo>, NetlinkError> {
        block_on_ready(self.inner.devices(skips))
    }

    /// See [`AsyncNldevClient::ports`].
    pub fn ports(
        &mut self,
        dev_index: u32,
        skips: &mut Skips,
    ) -> Result<Vec<PortInfo>, NetlinkError> {
        block_on_ready(self.inner.ports(dev_index, skips))
    }

    /// See [`AsyncNldevClient::qps`].
    pub fn qps(&mut self, dev_index: u32, skips: &mut Skips) -> Result<Vec<QpEntry>, NetlinkError> {
        block_on_ready(self.inner.qps(dev_index, skips))
    }

    /// See [`AsyncNldevClient::cm_ids`].
    pub fn cm_ids(
        &mut self,
        dev_index: u32,
        skips: &mut Skips,
    ) -> Result<Vec<CmIdEntry>, NetlinkError> {
        block_on_ready(self.inner.cm_ids(dev_index, skips))
    }

    /// See [`AsyncNldevClient::snapshot`].
    pub fn snapshot(
        &mut self,
        parent_of: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<SnapshotReport, NetlinkError> {
        block_on_ready(self.inner.snapshot(parent_of))
    }
}

/// Entries the kernel sent that could not be used (a view lacking a required attribute):
/// skipped, counted and logged, never fatal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skips {
    /// One line per skipped entry: what and why.
    pub reasons: Vec<String>,
}

impl Skips {
    fn note(&mut self, what: impl std::fmt::Display, why: impl std::fmt::Display) {
        tracing::warn!(%what, %why, "skipping an RDMA netlink entry");
        self.reasons.push(format!("{what}: {why}"));
    }
}

/// A full dump (devices, ports, QPs) as the model wants it, with what was skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotReport {
    /// The snapshot to fold into [`crate::core::topology::Topology`].
    pub snapshot: Snapshot,
    /// Every RDMA CM id of the snapshot's devices (RES_CM_ID_GET; session placement).
    pub cm_ids: Vec<CmIdEntry>,
    /// Entries skipped while decoding.
    pub skips: Skips,
}

/// The nldev conversations the model needs, on top of the generic client.
impl<T: AsyncTransport> AsyncNldevClient<T> {
    /// SYS_GET: whether monitor events exist, the netns mode, ….
    pub async fn system_info(&mut self) -> Result<SysInfo, NetlinkError> {
        let replies = self.request(request::sys_get(0)).await?;
        let first = replies.first().ok_or_else(|| {
            malformed(
                "RDMA_NLDEV_CMD_SYS_GET",
                "the kernel acknowledged but sent no reply",
            )
        })?;
        SysInfo::try_from(first).map_err(|e| malformed("RDMA_NLDEV_CMD_SYS_GET", e.to_string()))
    }

    /// GET dump: every RDMA device.
    pub async fn devices(&mut self, skips: &mut Skips) -> Result<Vec<DeviceInfo>, NetlinkError> {
        let replies = self.dump(request::get_dump(0)).await?;
        Ok(views(&replies, "device", skips))
    }

    /// PORT_GET dump of one device.
    pub async fn ports(
        &mut self,
        dev_index: u32,
        skips: &mut Skips,
    ) -> Result<Vec<PortInfo>, NetlinkError> {
        let replies = self.dump(request::port_get_dump(0, dev_index)).await?;
        Ok(views(&replies, "port", skips))
    }

    /// RES_QP_GET dump of one device: its QP table with live states. Decoded with the codec's
    /// streaming [`QpDump`] reader (no attribute tree: the table can hold 100 000 QPs).
    pub async fn qps(
        &mut self,
        dev_index: u32,
        skips: &mut Skips,
    ) -> Result<Vec<QpEntry>, NetlinkError> {
        let parts = self
            .dump_with(request::res_qp_get_dump(0, dev_index, None), |f| {
                QpDump::decode(f.message).map_err(|e| e.to_string())
            })
            .await?;
        let mut out = Vec::new();
        for part in parts {
            for entry in part.entries {
                match entry {
                    Ok(qp) => out.push(qp),
                    Err(e) => skips.note(format!("QP entry of device {dev_index}"), e),
                }
            }
        }
        Ok(out)
    }

    /// RES_CM_ID_GET dump of one device: its RDMA CM ids (ib_iser's connections, with
    /// addresses; session placement).
    pub async fn cm_ids(
        &mut self,
        dev_index: u32,
        skips: &mut Skips,
    ) -> Result<Vec<CmIdEntry>, NetlinkError> {
        let replies = self.dump(request::res_cm_id_get_dump(0, dev_index)).await?;
        let mut out = Vec::new();
        for m in &replies {
            match CmIdEntry::all(m) {
                Ok(entries) => {
                    for e in entries {
                        match e {
                            Ok(c) => out.push(c),
                            Err(e) => skips.note(format!("CM id entry of device {dev_index}"), e),
                        }
                    }
                }
                Err(e) => skips.note("CM id reply", e),
            }
        }
        Ok(out)
    }

    /// Everything the model needs: the device list, then each device's ports, QPs and CM ids
    /// (the CM id table is for session placement, in [`SnapshotReport::cm_ids`]).
    /// `parent_of` gives a device's parent identity (from sysfs) by name.
    ///
    /// A device that vanishes between the device dump and its own dumps is left out; a
    /// failed QP dump is recorded on the device (the model keeps its last table); a device
    /// whose CM id dump fails contributes no CM ids (its sessions are placed by route, or by
    /// memory). Only a failed device dump fails the whole snapshot.
    pub async fn snapshot(
        &mut self,
        parent_of: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<SnapshotReport, NetlinkError> {
        let mut skips = Skips::default();
        let devices = self.devices(&mut skips).await?;
        let mut out = Vec::with_capacity(devices.len());
        let mut cm_ids = Vec::new();
        for info in devices {
            let ports = match self.ports(info.index, &mut skips).await {
                Ok(p) => p,
                Err(e) if vanished(&e) => {
                    tracing::debug!(device = %info.name, error = %e, "device vanished mid-dump");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let qps = match self.qps(info.index, &mut skips).await {
                Ok(q) => Ok(q),
                Err(e) if vanished(&e) => continue,
                Err(e @ (NetlinkError::Unavailable | NetlinkError::Closed)) => return Err(e),
                Err(e) => Err(e.to_string()),
            };
            match self.cm_ids(info.index, &mut skips).await {
                Ok(ids) => cm_ids.extend(ids),
                Err(e) => {
                    tracing::debug!(device = %info.name, error = %e, "CM id dump failed")
                }
            }
            out.push(DeviceObservation {
                parent: parent_of(&info.name),
                info,
                ports,
                qps,
            });
        }
        Ok(SnapshotReport {
            snapshot: Snapshot { devices: out },
            cm_ids,
            skips,
        })
    }
}

/// The kernel answers a dump of a device that no longer exists with an error (EINVAL or
/// ENODEV, in NLMSG_ERROR or in NLMSG_DONE).
fn vanished(e: &NetlinkError) -> bool {
    matches!(e.errno(), Some(libc::ENODEV | libc::EINVAL | libc::ENOENT))
}

/// Typed views of reply messages; the ones that fail are skipped with their reason.
fn views<'a, V>(replies: &'a [NldevMessage], what: &str, skips: &mut Skips) -> Vec<V>
where
    V: TryFrom<&'a NldevMessage, Error = NldevError>,
{
    let mut out = Vec::with_capacity(replies.len());
    for m in replies {
        match V::try_from(m) {
            Ok(v) => out.push(v),
            Err(e) => skips.note(format!("{what} reply"), e),
        }
    }
    out
}

/// How one exchange ended: every reply (up to NLMSG_DONE for a dump), or a dump the kernel
/// interrupted (NLM_F_DUMP_INTR), which the caller asks for again.
enum ExchangeEnd<I> {
    Complete(Vec<I>),
    Interrupted,
}

fn malformed(what: &str, detail: impl Into<String>) -> NetlinkError {
    NetlinkError::Malformed {
        request: what.to_string(),
        detail: detail.into(),
    }
}

/// Serializes a request, adding `flags` (the sequence number is filled in per send).
fn encode<I: NetlinkSerializable>(mut request: NetlinkMessage<I>, flags: u16) -> Vec<u8> {
    request.header.flags |= flags;
    request.finalize();
    let mut bytes = vec![0; request.buffer_len()];
    request.serialize(&mut bytes);
    bytes
}

/// What one read of the event socket gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MonitorRead<I> {
    /// Decoded event messages (one datagram's worth).
    Events(Vec<I>),
    /// Nothing arrived before the timeout.
    Idle,
    /// The socket overflowed (ENOBUFS): events were lost; do a full dump.
    ResyncNeeded,
}

/// Counters of the event socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MonitorStats {
    /// Messages decoded.
    pub events: u64,
    /// Messages skipped because they could not be framed or decoded.
    pub malformed: u64,
    /// ENOBUFS overflows seen.
    pub overruns: u64,
}

/// The device-event socket (RDMA_NL_GROUP_NOTIFY, kernels from 6.12).
#[derive(Debug)]
pub struct NldevMonitor<T> {
    transport: T,
    stats: MonitorStats,
}

impl NldevMonitor<FdTransport> {
    /// Opens the real event socket (blocking reads).
    pub fn open() -> Result<Self, NetlinkError> {
        Ok(NldevMonitor::new(FdTransport::open_monitor()?))
    }
}

impl NldevMonitor<AsyncFdTransport> {
    /// Opens the real event socket, registered with the runtime (call inside one).
    pub fn open_async() -> Result<Self, NetlinkError> {
        Ok(NldevMonitor::new(AsyncFdTransport::open_monitor()?))
    }
}

impl<T> NldevMonitor<T> {
    /// A monitor over `transport`.
    pub fn new(transport: T) -> Self {
        NldevMonitor {
            transport,
            stats: MonitorStats::default(),
        }
    }

    /// What was decoded, skipped and lost so far.
    pub fn stats(&self) -> MonitorStats {
        self.stats
    }

    /// Decodes what one receive gave. A malformed message is skipped and counted (the
    /// periodic dump is the safety net), never fatal.
    fn on_receive<I: NetlinkDeserializable>(
        &mut self,
        received: io::Result<Option<Vec<u8>>>,
    ) -> Result<MonitorRead<I>, NetlinkError> {
        let datagram = match received {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(MonitorRead::Idle),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                self.stats.overruns += 1;
                return Ok(MonitorRead::ResyncNeeded);
            }
            Err(source) => return Err(NetlinkError::Os { op: "recv", source }),
        };
        if datagram.is_empty() {
            return Err(NetlinkError::Closed);
        }
        let frames = match split_datagram(&datagram) {
            Ok(f) => f,
            Err(detail) => {
                self.stats.malformed += 1;
                tracing::warn!(%detail, "skipping a malformed RDMA netlink event datagram");
                return Ok(MonitorRead::Events(Vec::new()));
            }
        };
        let mut events = Vec::new();
        for frame in frames {
            match frame.header.message_type {
                NLMSG_NOOP | NLMSG_DONE | NLMSG_ERROR => {}
                NLMSG_OVERRUN => {
                    self.stats.overruns += 1;
                    return Ok(MonitorRead::ResyncNeeded);
                }
                t => match I::deserialize(&frame.header, frame.payload) {
                    Ok(m) => {
                        self.stats.events += 1;
                        events.push(m);
                    }
                    Err(e) => {
                        self.stats.malformed += 1;
                        tracing::warn!(kind = %describe_type(t), error = %e,
                            "skipping an RDMA netlink event that cannot be decoded");
                    }
                },
            }
        }
        Ok(MonitorRead::Events(events))
    }
}

impl<T: BlockingTransport> NldevMonitor<T> {
    /// Waits at most `timeout` for the next datagram of events.
    pub fn next<I: NetlinkDeserializable>(
        &mut self,
        timeout: Duration,
    ) -> Result<MonitorRead<I>, NetlinkError> {
        let received = self.transport.recv(timeout);
        self.on_receive(received)
    }
}

impl<T: AsyncTransport> NldevMonitor<T> {
    /// Waits for the next datagram of events, until `deadline` at most (`None`: as long as it
    /// takes). Cancellation-safe (the transport's receive is).
    pub async fn recv<I: NetlinkDeserializable>(
        &mut self,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<MonitorRead<I>, NetlinkError> {
        let received = self.transport.recv(deadline).await;
        self.on_receive(received)
    }
}

/// How the watcher waits for its next deadline.
pub trait Timer: Send {
    /// Completes `d` from now. Dropping the future cancels it.
    fn sleep(&mut self, d: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The runtime's own timers (`tokio::time::sleep`): what tests use, since a paused runtime
/// clock drives them.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeTimer;

impl Timer for RuntimeTimer {
    fn sleep(&mut self, d: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A `timerfd` (CLOCK_MONOTONIC) registered with the runtime: the thread wakes exactly once,
/// at the deadline. The runtime's timer wheel instead wakes at every level it cascades a
/// far deadline through (for a 5 s sleep: about 4 s, then about 1 s, then at the deadline),
/// which is most of an idle daemon's wakeups.
#[derive(Debug)]
pub struct TimerFd {
    fd: AsyncFd<OwnedFd>,
}

impl TimerFd {
    /// A disarmed timer (call inside the runtime).
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: timerfd_create takes no pointers; the result is checked below.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just created and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the OwnedFd is a valid open descriptor, owned by the AsyncFd from here until
        // it is dropped, and its as_raw_fd() always returns that same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
        Ok(TimerFd { fd })
    }

    /// Arms the timer `d` from now (`None`: disarms it).
    fn set(&self, d: Option<Duration>) -> io::Result<()> {
        let value = d.map_or(
            libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            |d| {
                // Zero would disarm: one nanosecond is "now".
                let d = d.max(Duration::from_nanos(1));
                libc::timespec {
                    tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
                    tv_nsec: libc::c_long::from(d.subsec_nanos()),
                }
            },
        );
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: `spec` is a valid itimerspec for the call; the old value is not asked for.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    async fn expire(&self) -> io::Result<()> {
        loop {
            let mut ready = self.fd.readable().await?;
            let mut ticks = [0u8; 8];
            // SAFETY: the pointer and length describe `ticks`, valid for the call.
            let n = unsafe {
                libc::read(
                    ready.get_inner().as_raw_fd(),
                    ticks.as_mut_ptr().cast(),
                    ticks.len(),
                )
            };
            if n == 8 {
                return Ok(());
            }
            // EAGAIN: readiness left over from an expiry that a re-arm has since reset.
            ready.clear_ready();
        }
    }
}

/// Disarms the timer when a sleep is dropped before it fired, so no stale expiry wakes the
/// thread later.
struct Disarm<'a>(&'a TimerFd);

impl Drop for Disarm<'_> {
    fn drop(&mut self) {
        let _ = self.0.set(None);
    }
}

impl Timer for TimerFd {
    fn sleep(&mut self, d: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let armed = self.set(Some(d)).map(|()| Disarm(self));
            let fired = match &armed {
                Ok(_) => self.expire().await,
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            if let Err(e) = fired {
                // Never a hang or a busy loop: the runtime's timer does the job instead.
                tracing::debug!(error = %e, "timerfd unusable; using the runtime's timer");
                tokio::time::sleep(d).await;
            }
            drop(armed);
        })
    }
}

/// A [`TimerFd`], or the runtime's timer when the kernel refuses one.
pub fn precise_timer() -> Box<dyn Timer> {
    match TimerFd::new() {
        Ok(t) => Box::new(t),
        Err(e) => {
            tracing::warn!(error = %e, "cannot create a timerfd; using the runtime's timers");
            Box::new(RuntimeTimer)
        }
    }
}

/// Opens the event socket when the poller asks for it.
pub type MonitorOpener<M> = Box<dyn FnMut() -> Result<NldevMonitor<M>, NetlinkError> + Send>;

/// The nldev side of the daemon: asks SYS_GET about monitor events, subscribes when the
/// kernel has them, dumps when the [`Poller`] says so (every interval as the safety net,
/// sooner after an event, at once after an overflow), folds dumps and events into the
/// [`Topology`] and returns the change events.
///
/// It waits on the sockets and on one timer (the next dump), never on a tick: between two
/// dumps an idle watcher costs no wakeup at all.
pub struct NldevWatcher<T, M> {
    client: AsyncNldevClient<T>,
    monitor: Option<NldevMonitor<M>>,
    open_monitor: MonitorOpener<M>,
    poller: Poller,
    topology: Topology,
    sysfs_root: std::path::PathBuf,
    started: bool,
    last_error: Option<NetlinkError>,
    cm_ids: Vec<CmIdEntry>,
    last_scan: Option<crate::io::sysfs::SysfsScan>,
    timer: Box<dyn Timer>,
}

/// Why [`NldevWatcher::step`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepEnd {
    /// A dump was done (successfully or not).
    Dumped,
    /// Device events (or an overflow, or the event socket's failure) were handled.
    Monitor,
    /// The caller's `wake` future completed.
    Woken,
}

impl NldevWatcher<AsyncFdTransport, AsyncFdTransport> {
    /// The real thing: NETLINK_RDMA sockets registered with the runtime (call inside one),
    /// sysfs under `sysfs_root`, dumps every `interval` (config `poll.netlink`).
    pub fn open(
        interval: Duration,
        sysfs_root: std::path::PathBuf,
        now: crate::core::time::Instant,
    ) -> Result<Self, NetlinkError> {
        Ok(NldevWatcher::new(
            AsyncNldevClient::open()?,
            Box::new(NldevMonitor::open_async),
            interval,
            sysfs_root,
            now,
        ))
    }
}

impl<T: AsyncTransport, M: AsyncTransport> NldevWatcher<T, M> {
    /// A watcher over the given client and event-socket opener.
    pub fn new(
        client: AsyncNldevClient<T>,
        open_monitor: MonitorOpener<M>,
        interval: Duration,
        sysfs_root: std::path::PathBuf,
        now: crate::core::time::Instant,
    ) -> Self {
        NldevWatcher {
            client,
            monitor: None,
            open_monitor,
            poller: Poller::new(interval, now),
            topology: Topology::new(),
            sysfs_root,
            started: false,
            last_error: None,
            cm_ids: Vec::new(),
            last_scan: None,
            timer: Box::new(RuntimeTimer),
        }
    }

    /// Dumps `factor` intervals apart while the last dump showed nothing in ERR and device
    /// events are subscribed ([`Poller::set_quiet`]; the daemon uses
    /// [`Poller::QUIET_FACTOR`]). Without it, every interval.
    pub fn with_quiet_dumps(mut self, factor: u32) -> Self {
        self.poller.set_quiet_factor(factor);
        self
    }

    /// Waits for dumps with `timer` instead of the runtime's timers ([`RuntimeTimer`]).
    pub fn with_timer(mut self, timer: Box<dyn Timer>) -> Self {
        self.timer = timer;
        self
    }

    /// The model as of the last dump or event.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Every RDMA CM id as of the last dump (session placement).
    pub fn cm_ids(&self) -> &[CmIdEntry] {
        &self.cm_ids
    }

    /// The poller (monitor support, next deadline).
    pub fn poller(&self) -> &Poller {
        &self.poller
    }

    /// The client (its counters).
    pub fn client(&self) -> &AsyncNldevClient<T> {
        &self.client
    }

    /// Asks for a dump at the next [`NldevWatcher::step`] (the recovery engine's
    /// `RefreshTopology`, e.g. to verify a re-creation after a restart).
    pub fn request_dump(&mut self, now: crate::core::time::Instant) {
        self.poller.on_resync_needed(now);
    }

    /// Why the last dump failed, if it did (cleared by the next successful one).
    pub fn last_error(&self) -> Option<&NetlinkError> {
        self.last_error.as_ref()
    }

    /// The sysfs scan the last dump made (for the port → netdev map), once.
    pub fn take_scan(&mut self) -> Option<crate::io::sysfs::SysfsScan> {
        self.last_scan.take()
    }

    /// Does what is due; if nothing was, waits for the first of: a datagram on the event
    /// socket, the next dump's deadline (then dumps), or `wake`. Returns the change events
    /// and why it returned. `clock` gives the current instant; the wait itself is on the
    /// runtime's timer, so in tests a paused runtime clock drives it.
    ///
    /// Fails only when RDMA netlink itself is gone ([`NetlinkError::Unavailable`] or a closed
    /// socket); a failed dump is logged, kept in [`NldevWatcher::last_error`], and retried
    /// at the next interval.
    pub async fn step(
        &mut self,
        clock: &impl Fn() -> crate::core::time::Instant,
        wake: impl Future<Output = ()>,
    ) -> Result<(Vec<TopologyEvent>, StepEnd), NetlinkError> {
        let mut events = Vec::new();
        let mut wake = std::pin::pin!(wake);
        loop {
            if self.run_due(clock, &mut events).await? {
                return Ok((events, StepEnd::Dumped));
            }
            let wait = self
                .poller
                .next_deadline()
                .map(|d| d.since(clock()))
                .unwrap_or(Duration::MAX);
            let sleep = (wait != Duration::MAX).then(|| self.timer.sleep(wait));
            let timer = async {
                match sleep {
                    Some(s) => s.await,
                    None => std::future::pending::<()>().await,
                }
            };
            let monitor = async {
                match self.monitor.as_mut() {
                    Some(mon) => mon.recv::<NldevMessage>(None).await,
                    None => std::future::pending().await,
                }
            };
            // Biased: queued events are handled before a wake or a due dump is noticed.
            let read = tokio::select! {
                biased;
                read = monitor => read,
                () = &mut wake => return Ok((events, StepEnd::Woken)),
                () = timer => continue,
            };
            self.on_monitor_read(read, clock, &mut events);
            return Ok((events, StepEnd::Monitor));
        }
    }

    /// Runs the poller's due actions; whether a dump was among them.
    async fn run_due(
        &mut self,
        clock: &impl Fn() -> crate::core::time::Instant,
        events: &mut Vec<TopologyEvent>,
    ) -> Result<bool, NetlinkError> {
        let mut due: std::collections::VecDeque<PollAction> = std::collections::VecDeque::new();
        if !self.started {
            self.started = true;
            due.extend(self.poller.start());
        }
        let mut dumped = false;
        loop {
            let action = match due.pop_front() {
                Some(a) => a,
                None => match self.poller.poll(clock()) {
                    Some(a) => a,
                    None => return Ok(dumped),
                },
            };
            dumped |= matches!(action, PollAction::Dump(_));
            let next = self.act(action, clock, events).await?;
            due.extend(next);
        }
    }

    fn on_monitor_read(
        &mut self,
        read: Result<MonitorRead<NldevMessage>, NetlinkError>,
        clock: &impl Fn() -> crate::core::time::Instant,
        events: &mut Vec<TopologyEvent>,
    ) {
        match read {
            Ok(MonitorRead::Events(msgs)) => {
                for m in &msgs {
                    match MonitorEvent::try_from(m) {
                        Ok(ev) => {
                            tracing::debug!(event = %ev.event, "RDMA device event");
                            events.extend(self.topology.apply_monitor_event(&ev, clock()));
                            self.poller.on_monitor_event(clock());
                        }
                        Err(e) => tracing::warn!(error = %e, "skipping an RDMA event"),
                    }
                }
            }
            Ok(MonitorRead::Idle) => {}
            Ok(MonitorRead::ResyncNeeded) => {
                tracing::warn!("RDMA event socket overflowed; resynchronising with a dump");
                self.poller.on_resync_needed(clock());
            }
            Err(e) => {
                tracing::warn!(error = %e, "RDMA event socket failed; polling only");
                self.monitor = None;
                self.poller.on_monitor_failed();
            }
        }
    }

    /// Does one action; returns the actions it leads to.
    async fn act(
        &mut self,
        action: PollAction,
        clock: &impl Fn() -> crate::core::time::Instant,
        events: &mut Vec<TopologyEvent>,
    ) -> Result<Vec<PollAction>, NetlinkError> {
        match action {
            PollAction::QuerySystem => {
                let supports = match self.client.system_info().await {
                    Ok(s) => s.supports_monitor(),
                    Err(e @ (NetlinkError::Unavailable | NetlinkError::Closed)) => return Err(e),
                    Err(e) => {
                        tracing::warn!(error = %e, "SYS_GET failed; assuming no device events");
                        false
                    }
                };
                Ok(self.poller.on_system_info(supports))
            }
            PollAction::SubscribeMonitor => {
                match (self.open_monitor)() {
                    Ok(m) => self.monitor = Some(m),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot subscribe to RDMA device events; polling only");
                        self.poller.on_monitor_failed();
                    }
                }
                Ok(Vec::new())
            }
            PollAction::Dump(reason) => {
                // sysfs reads are served from memory by the kernel: no blocking worth a thread.
                let scan = crate::io::sysfs::scan(&self.sysfs_root).unwrap_or_default();
                let parent_of = |name: &str| scan.device(name).and_then(|d| d.parent.identity());
                let result = self.client.snapshot(&parent_of).await;
                self.last_scan = Some(scan);
                let quiet = match result {
                    Ok(report) => {
                        tracing::debug!(
                            reason = %reason,
                            devices = report.snapshot.devices.len(),
                            "nldev dump"
                        );
                        self.cm_ids = report.cm_ids;
                        events.extend(self.topology.apply_snapshot(report.snapshot, clock()));
                        self.last_error = None;
                        self.topology.quiet()
                    }
                    Err(e @ (NetlinkError::Unavailable | NetlinkError::Closed)) => {
                        self.poller.set_quiet(false);
                        self.poller.on_dump_done(clock());
                        return Err(e);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, reason = %reason, "RDMA netlink dump failed; retrying at the next interval");
                        self.last_error = Some(e);
                        false
                    }
                };
                // Nothing in ERR and device events subscribed: the next dump comes later.
                self.poller.set_quiet(quiet);
                self.poller.on_dump_done(clock());
                Ok(Vec::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_without_rdma_netlink_gives_one_clear_error() {
        // On a kernel with RDMA netlink the socket opens; both outcomes are legitimate, but a
        // failure must be the typed Unavailable error, never a crash or an opaque OS error.
        match FdTransport::open_requests() {
            Ok(_) => {}
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                assert!(e.to_string().contains("RDMA netlink is not available"));
            }
        }
    }
}
