//! rdma_cm: an event channel read with a deadline (its fd is non-blocking and polled, so
//! no wait is unbounded) and cm_ids, destroyed on drop after the channel's events for
//! them were acknowledged (every event is acked as soon as it is read: `rdma_destroy_id`
//! would otherwise wait for it forever).

use std::ffi::CStr;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdma_sys as ffi;

use crate::device::Context;
use crate::error::VerbsError;

/// An rdma_cm event channel.
pub struct EventChannel {
    ptr: *mut ffi::rdma_event_channel,
}

// SAFETY: librdmacm channels are usable from any thread; used through its calls only.
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

/// An event, copied out of librdmacm's struct (which is acked at once).
pub struct CmEvent {
    /// `rdma_cm_event_type`.
    pub kind: u32,
    /// Its status (negative errno or a reject reason).
    pub status: i32,
    /// The id it is for.
    pub id: *mut ffi::rdma_cm_id,
    /// For CONNECT_REQUEST: the new id, now ours.
    pub new_id: Option<Arc<CmId>>,
}

/// librdmacm's name of an event type (`RDMA_CM_EVENT_ESTABLISHED`).
pub fn event_name(kind: u32) -> String {
    // SAFETY: rdma_event_str returns a static string for any value.
    let p = unsafe { ffi::rdma_event_str(kind) };
    if p.is_null() {
        return format!("event {kind}");
    }
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl EventChannel {
    /// `rdma_create_event_channel`, its fd made non-blocking. NULL with ENODEV (no
    /// rdma_ucm) is [`VerbsError::NoDevices`].
    pub fn new() -> Result<Arc<EventChannel>, VerbsError> {
        // SAFETY: plain constructor.
        let ptr = unsafe { ffi::rdma_create_event_channel() };
        if ptr.is_null() {
            let e = std::io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENOENT)) {
                return Err(VerbsError::NoDevices {
                    why: format!("rdma_create_event_channel: {e} (is rdma_ucm loaded?)"),
                });
            }
            return Err(VerbsError::Call {
                call: "rdma_create_event_channel",
                device: "-".into(),
                source: e,
            });
        }
        let ch = Arc::new(EventChannel { ptr });
        set_nonblocking(ch.fd()).map_err(|source| VerbsError::Call {
            call: "fcntl(O_NONBLOCK) on the rdma_cm channel",
            device: "-".into(),
            source,
        })?;
        Ok(ch)
    }

    fn fd(&self) -> i32 {
        // SAFETY: ptr live.
        unsafe { (*self.ptr).fd }
    }

    /// The next event, waiting until `deadline` at most.
    pub fn next(self: &Arc<Self>, deadline: Instant, what: &str) -> Result<CmEvent, VerbsError> {
        let start = Instant::now();
        loop {
            let mut ev: *mut ffi::rdma_cm_event = std::ptr::null_mut();
            // SAFETY: ptr live; ev a valid out pointer; the fd is non-blocking.
            let rc = unsafe { ffi::rdma_get_cm_event(self.ptr, &mut ev) };
            if rc == 0 && !ev.is_null() {
                // SAFETY: ev is a live event until acked; copy what we need first.
                let (kind, status, id, listen_id) =
                    unsafe { ((*ev).event, (*ev).status, (*ev).id, (*ev).listen_id) };
                let new_id = if kind == ffi::rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST
                    && !id.is_null()
                    && !listen_id.is_null()
                {
                    Some(Arc::new(CmId {
                        ptr: id,
                        _channel: Arc::clone(self),
                    }))
                } else {
                    None
                };
                // SAFETY: acked once, right away.
                unsafe { ffi::rdma_ack_cm_event(ev) };
                tracing::debug!(event = %event_name(kind), status, "rdma_cm event");
                return Ok(CmEvent {
                    kind,
                    status,
                    id,
                    new_id,
                });
            }
            let e = std::io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                return Err(VerbsError::Call {
                    call: "rdma_get_cm_event",
                    device: "-".into(),
                    source: e,
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(VerbsError::Timeout {
                    what: what.to_string(),
                    after: now - start,
                });
            }
            poll_readable(self.fd(), deadline - now);
        }
    }

    /// A new cm_id on this channel, TCP port space (RC).
    pub fn create_id(self: &Arc<Self>) -> Result<Arc<CmId>, VerbsError> {
        let mut id: *mut ffi::rdma_cm_id = std::ptr::null_mut();
        // SAFETY: channel live, id a valid out pointer.
        let rc = unsafe {
            ffi::rdma_create_id(
                self.ptr,
                &mut id,
                std::ptr::null_mut(),
                ffi::rdma_port_space::RDMA_PS_TCP,
            )
        };
        if rc != 0 || id.is_null() {
            return Err(VerbsError::last("rdma_create_id", "-"));
        }
        Ok(Arc::new(CmId {
            ptr: id,
            _channel: Arc::clone(self),
        }))
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every id holds an Arc of the channel, so all are destroyed; once.
        unsafe { ffi::rdma_destroy_event_channel(self.ptr) }
    }
}

/// An rdma_cm id.
pub struct CmId {
    pub(crate) ptr: *mut ffi::rdma_cm_id,
    /// The channel outlives its ids (released after `rdma_destroy_id`).
    _channel: Arc<EventChannel>,
}

// SAFETY: used only through librdmacm calls, which lock internally.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::sa_family_t::try_from(libc::AF_INET).unwrap_or(2);
    sa.sin_port = addr.port().to_be();
    sa.sin_addr.s_addr = u32::from(*addr.ip()).to_be();
    sa
}

impl CmId {
    /// `rdma_bind_addr` to `ip:port` (0: any port).
    pub fn bind(&self, ip: Ipv4Addr, port: u16) -> Result<(), VerbsError> {
        let mut sa = sockaddr(SocketAddrV4::new(ip, port));
        // SAFETY: id live; sa valid for the call.
        let rc =
            unsafe { ffi::rdma_bind_addr(self.ptr, (&mut sa as *mut libc::sockaddr_in).cast()) };
        if rc != 0 {
            return Err(VerbsError::last("rdma_bind_addr", "-"));
        }
        Ok(())
    }

    /// `rdma_listen`.
    pub fn listen(&self, backlog: i32) -> Result<(), VerbsError> {
        // SAFETY: id live.
        if unsafe { ffi::rdma_listen(self.ptr, backlog) } != 0 {
            return Err(VerbsError::last("rdma_listen", "-"));
        }
        Ok(())
    }

    /// The bound source port (`rdma_get_src_port`).
    pub fn src_port(&self) -> u16 {
        // SAFETY: id live.
        u16::from_be(unsafe { ffi::rdma_get_src_port(self.ptr) })
    }

    /// `rdma_resolve_addr` from `src` to `dst`.
    pub fn resolve_addr(
        &self,
        src: Ipv4Addr,
        dst: SocketAddrV4,
        timeout: Duration,
    ) -> Result<(), VerbsError> {
        let mut s = sockaddr(SocketAddrV4::new(src, 0));
        let mut d = sockaddr(dst);
        let ms = i32::try_from(timeout.as_millis())
            .unwrap_or(i32::MAX)
            .max(1);
        // SAFETY: id live, addresses valid for the call.
        let rc = unsafe {
            ffi::rdma_resolve_addr(
                self.ptr,
                (&mut s as *mut libc::sockaddr_in).cast(),
                (&mut d as *mut libc::sockaddr_in).cast(),
                ms,
            )
        };
        if rc != 0 {
            return Err(VerbsError::last("rdma_resolve_addr", "-"));
        }
        Ok(())
    }

    /// `rdma_resolve_route`.
    pub fn resolve_route(&self, timeout: Duration) -> Result<(), VerbsError> {
        let ms = i32::try_from(timeout.as_millis())
            .unwrap_or(i32::MAX)
            .max(1);
        // SAFETY: id live.
        if unsafe { ffi::rdma_resolve_route(self.ptr, ms) } != 0 {
            return Err(VerbsError::last("rdma_resolve_route", "-"));
        }
        Ok(())
    }

    fn conn_param(qpn: u32) -> ffi::rdma_conn_param {
        // SAFETY: all-zero is valid (no private data).
        let mut p: ffi::rdma_conn_param = unsafe { std::mem::zeroed() };
        p.responder_resources = 1;
        p.initiator_depth = 1;
        p.retry_count = 7;
        p.rnr_retry_count = 7;
        p.qp_num = qpn;
        p
    }

    /// `rdma_connect` (the id has its QP).
    pub fn connect(&self, qpn: u32) -> Result<(), VerbsError> {
        let mut p = Self::conn_param(qpn);
        // SAFETY: id live, p valid for the call.
        if unsafe { ffi::rdma_connect(self.ptr, &mut p) } != 0 {
            return Err(VerbsError::last("rdma_connect", "-"));
        }
        Ok(())
    }

    /// `rdma_accept` (the id has its QP).
    pub fn accept(&self, qpn: u32) -> Result<(), VerbsError> {
        let mut p = Self::conn_param(qpn);
        // SAFETY: as for connect.
        if unsafe { ffi::rdma_accept(self.ptr, &mut p) } != 0 {
            return Err(VerbsError::last("rdma_accept", "-"));
        }
        Ok(())
    }

    /// `rdma_disconnect`.
    pub fn disconnect(&self) -> Result<(), VerbsError> {
        // SAFETY: id live.
        if unsafe { ffi::rdma_disconnect(self.ptr) } != 0 {
            return Err(VerbsError::last("rdma_disconnect", "-"));
        }
        Ok(())
    }

    /// The device the id is bound to (after address resolution or a connect request), as
    /// a context that keeps this id alive.
    pub fn context(self: &Arc<Self>) -> Result<Arc<Context>, VerbsError> {
        // SAFETY: id live.
        let verbs = unsafe { (*self.ptr).verbs };
        Context::borrowed(verbs, Arc::clone(self) as Arc<dyn Send + Sync>)
    }

    /// The RDMA port the id is bound to.
    pub fn port_num(&self) -> u8 {
        // SAFETY: id live.
        unsafe { (*self.ptr).port_num }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: ours, destroyed once; its QP (if any) was destroyed by the Qp that holds
        // an Arc of this id, and every event for it was acked when read.
        let rc = unsafe { ffi::rdma_destroy_id(self.ptr) };
        if rc != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), "rdma_destroy_id failed");
        }
    }
}

/// Makes `fd` non-blocking.
pub(crate) fn set_nonblocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on an fd we own; no memory involved.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until `fd` is readable or `wait` passes (at most; EINTR just returns).
/// Returns the revents.
pub(crate) fn poll_readable(fd: i32, wait: Duration) -> i16 {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX).max(1);
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n <= 0 {
        0
    } else {
        p.revents
    }
}
