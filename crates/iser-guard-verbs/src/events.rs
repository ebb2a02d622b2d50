//! Asynchronous events of one device (`ibv_get_async_event` / `ibv_ack_async_event`) on
//! a thread that polls the context's non-blocking async fd, so it stops within a poll
//! interval (200 ms) when asked.
//!
//! Holding a device open has a cost the daemon must respect: for a driver without
//! `disassociate_ucontext` (Soft-RoCE rxe, siw), the kernel's `ib_uverbs_remove_one` waits
//! until every user context is closed, so `rdma link delete` of that device blocks while a
//! listener has it open. Release the device's listener ([`AsyncEventHub::release`]) before
//! re-creating it and start it again afterwards ([`AsyncEventHub::sync`]). Drivers that
//! disassociate (mlx5, irdma, ...) deliver DEVICE_FATAL instead and the fd then fails; the
//! listener ends and `sync` restarts it once the device is back.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use iser_guard_core::selftest::{AsyncEvent, AsyncEventKind};
use rdma_sys as ffi;

use crate::cm::{poll_readable, set_nonblocking};
use crate::device::{open_device, Context};
use crate::error::VerbsError;

/// How often the thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(200);

/// `struct ibv_async_event` with the event type as a plain integer: rdma-sys declares it
/// as a Rust enum, and a value the enum does not list (a newer kernel) would be undefined
/// behaviour. Same layout (a pointer-sized union, then a C enum).
#[repr(C)]
struct RawAsyncEvent {
    element: RawElement,
    event_type: u32,
}

#[repr(C)]
union RawElement {
    ptr: *mut libc::c_void,
    port_num: libc::c_int,
}

/// Why a listener thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerEnd {
    /// Asked to stop.
    Stopped,
    /// The device reported DEVICE_FATAL (it is going away).
    DeviceFatal,
    /// The async fd failed (device removed).
    Failed(String),
}

impl std::fmt::Display for ListenerEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenerEnd::Stopped => f.write_str("stopped"),
            ListenerEnd::DeviceFatal => f.write_str("the device reported a fatal error"),
            ListenerEnd::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// One device's listener thread.
pub struct AsyncEventListener {
    device: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<ListenerEnd>>,
}

/// Converts one raw event into the core's vocabulary.
fn convert(device: &str, ev: &RawAsyncEvent) -> AsyncEvent {
    let kind = AsyncEventKind::from_ibv(ev.event_type);
    let port = if kind.is_port_event() {
        // SAFETY: for port events the union holds port_num.
        u32::try_from(unsafe { ev.element.port_num }).ok()
    } else {
        None
    };
    AsyncEvent {
        device: device.to_string(),
        port,
        kind,
    }
}

impl AsyncEventListener {
    /// Opens `device` and starts listening; every event goes to `sink` (from the
    /// listener's thread).
    pub fn start(
        device: &str,
        sink: impl Fn(AsyncEvent) + Send + 'static,
    ) -> Result<AsyncEventListener, VerbsError> {
        let ctx = open_device(device)?;
        set_nonblocking(ctx.async_fd()).map_err(|source| VerbsError::Call {
            call: "fcntl(O_NONBLOCK) on the async fd",
            device: device.to_string(),
            source,
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let name = device.to_string();
        let thread = std::thread::Builder::new()
            .name(format!("async-{device}"))
            .spawn(move || run(&ctx, &flag, &sink))
            .map_err(|source| VerbsError::Call {
                call: "spawn async event thread",
                device: name.clone(),
                source,
            })?;
        tracing::info!(device = %name, "listening for asynchronous events");
        Ok(AsyncEventListener {
            device: name,
            stop,
            thread: Some(thread),
        })
    }

    /// The device.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The thread still runs.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread and closes the device (within one poll interval).
    pub fn stop(mut self) -> ListenerEnd {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> ListenerEnd {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| ListenerEnd::Failed("listener thread panicked".into())),
            None => ListenerEnd::Stopped,
        }
    }
}

impl Drop for AsyncEventListener {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

fn run(ctx: &Arc<Context>, stop: &AtomicBool, sink: &dyn Fn(AsyncEvent)) -> ListenerEnd {
    let fd = ctx.async_fd();
    while !stop.load(Ordering::SeqCst) {
        let revents = poll_readable(fd, POLL);
        if revents == 0 {
            continue;
        }
        loop {
            let mut ev = RawAsyncEvent {
                element: RawElement {
                    ptr: std::ptr::null_mut(),
                },
                event_type: 0,
            };
            // SAFETY: ctx live; ev has the layout of struct ibv_async_event; fd is
            // non-blocking so this returns at once.
            let rc = unsafe {
                ffi::ibv_get_async_event(ctx.ptr, (&mut ev as *mut RawAsyncEvent).cast())
            };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                    break;
                }
                tracing::warn!(device = %ctx.name(), error = %e, "async event fd failed; listener ends");
                return ListenerEnd::Failed(e.to_string());
            }
            let event = convert(ctx.name(), &ev);
            // SAFETY: the event came from ibv_get_async_event; acked once.
            unsafe { ffi::ibv_ack_async_event((&mut ev as *mut RawAsyncEvent).cast()) };
            tracing::info!(event = %event, "asynchronous event");
            let fatal = event.kind == AsyncEventKind::DeviceFatal;
            sink(event);
            if fatal {
                return ListenerEnd::DeviceFatal;
            }
        }
        if revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return ListenerEnd::Failed(format!("async fd poll revents {revents:#x}"));
        }
    }
    ListenerEnd::Stopped
}

/// Reads the asynchronous events already queued on `ctx` without waiting (its async fd
/// is made non-blocking): the self-test's own QP events (COMM_EST, QP_FATAL, ...).
pub fn drain(ctx: &Context) -> Vec<AsyncEvent> {
    let mut out = Vec::new();
    if set_nonblocking(ctx.async_fd()).is_err() {
        return out;
    }
    // Bounded: a device cannot queue events faster than we ack them here.
    for _ in 0..64 {
        let mut ev = RawAsyncEvent {
            element: RawElement {
                ptr: std::ptr::null_mut(),
            },
            event_type: 0,
        };
        // SAFETY: as in `run`; the fd is non-blocking.
        let rc =
            unsafe { ffi::ibv_get_async_event(ctx.ptr, (&mut ev as *mut RawAsyncEvent).cast()) };
        if rc != 0 {
            break;
        }
        out.push(convert(ctx.name(), &ev));
        // SAFETY: acked once.
        unsafe { ffi::ibv_ack_async_event((&mut ev as *mut RawAsyncEvent).cast()) };
    }
    out
}

/// Listeners for a set of devices: what the daemon keeps, one per allowed device.
pub struct AsyncEventHub {
    sink: Arc<dyn Fn(AsyncEvent) + Send + Sync>,
    listeners: BTreeMap<String, AsyncEventListener>,
}

impl AsyncEventHub {
    /// A hub delivering every device's events to `sink`.
    pub fn new(sink: impl Fn(AsyncEvent) + Send + Sync + 'static) -> AsyncEventHub {
        AsyncEventHub {
            sink: Arc::new(sink),
            listeners: BTreeMap::new(),
        }
    }

    /// A hub delivering into a std channel.
    pub fn with_channel(tx: std::sync::mpsc::Sender<AsyncEvent>) -> AsyncEventHub {
        let tx = std::sync::Mutex::new(tx);
        AsyncEventHub::new(move |e| {
            if let Ok(tx) = tx.lock() {
                let _ = tx.send(e);
            }
        })
    }

    /// Listens on exactly `devices`: starts the missing ones, restarts those whose thread
    /// ended (device re-created, renamed back), stops the others. Returns the devices that
    /// could not be opened, with why (a device that is not there yet is normal).
    pub fn sync(&mut self, devices: &[String]) -> Vec<(String, VerbsError)> {
        self.listeners
            .retain(|name, l| devices.contains(name) && l.is_running());
        let mut failed = Vec::new();
        for d in devices {
            if self.listeners.contains_key(d) {
                continue;
            }
            let sink = Arc::clone(&self.sink);
            match AsyncEventListener::start(d, move |e| sink(e)) {
                Ok(l) => {
                    self.listeners.insert(d.clone(), l);
                }
                Err(e) => failed.push((d.clone(), e)),
            }
        }
        failed
    }

    /// Stops the listener of `device` and closes it (call before re-creating the device:
    /// see the module doc). Returns within one poll interval.
    pub fn release(&mut self, device: &str) -> Option<ListenerEnd> {
        self.listeners.remove(device).map(AsyncEventListener::stop)
    }

    /// Devices listened to now.
    pub fn devices(&self) -> Vec<String> {
        self.listeners
            .iter()
            .filter(|(_, l)| l.is_running())
            .map(|(d, _)| d.clone())
            .collect()
    }

    /// Stops everything (also done on drop).
    pub fn shutdown(&mut self) {
        for (_, l) in std::mem::take(&mut self.listeners) {
            let _ = l.stop();
        }
    }
}

impl Drop for AsyncEventHub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_event_carries_its_port_and_others_do_not() {
        let ev = RawAsyncEvent {
            element: RawElement { port_num: 1 },
            event_type: 10,
        };
        let e = convert("rxe_ini", &ev);
        assert_eq!(e.kind, AsyncEventKind::PortErr);
        assert_eq!(e.port, Some(1));
        let fatal = RawAsyncEvent {
            element: RawElement {
                ptr: std::ptr::null_mut(),
            },
            event_type: 8,
        };
        let e = convert("rxe_ini", &fatal);
        assert_eq!(e.kind, AsyncEventKind::DeviceFatal);
        assert_eq!(e.port, None);
        let newer = RawAsyncEvent {
            element: RawElement { port_num: 0 },
            event_type: 99,
        };
        assert_eq!(convert("x", &newer).kind, AsyncEventKind::Other(99));
    }

    #[test]
    fn the_raw_event_has_libibverbs_layout() {
        assert_eq!(
            std::mem::size_of::<RawAsyncEvent>(),
            std::mem::size_of::<ffi::ibv_async_event>()
        );
    }

    #[test]
    fn a_hub_with_no_device_stops_at_once() {
        let (tx, _rx) = std::sync::mpsc::channel();
        let mut hub = AsyncEventHub::with_channel(tx);
        // No RDMA here (or no such device): each is reported, nothing runs.
        let failed = hub.sync(&["no_such_dev0".to_string()]);
        assert_eq!(failed.len(), 1);
        assert!(hub.devices().is_empty());
        assert_eq!(hub.release("no_such_dev0"), None);
        hub.shutdown();
    }
}
