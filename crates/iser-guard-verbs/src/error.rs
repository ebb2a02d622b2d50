//! The verbs layer's errors: every FFI failure becomes one of these, with the call, the
//! device and the errno; nothing here panics.

use std::time::Duration;

use iser_guard_core::qp::{AttrMask, QpState, QpType, TransitionError};

/// What a verbs or rdma_cm operation failed with.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    /// libibverbs sees no RDMA device: `ibv_get_device_list` returned NULL (ENOSYS when
    /// there is no /sys/class/infiniband_verbs, i.e. no ib_uverbs) or an empty list (no
    /// provider library for the hardware, e.g. ibverbs-providers missing).
    #[error("no RDMA devices visible to libibverbs ({why})")]
    NoDevices {
        /// What libibverbs said.
        why: String,
    },
    /// No device of that name.
    #[error("no RDMA device named {name} (libibverbs sees: {})", if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// The devices libibverbs lists.
        available: Vec<String>,
    },
    /// The device has no such port.
    #[error("{device} has no port {port} (ports 1..={ports})")]
    UnknownPort {
        /// The device.
        device: String,
        /// The port asked for.
        port: u32,
        /// How many physical ports it has.
        ports: u32,
    },
    /// A libibverbs / librdmacm call failed.
    #[error("{call} on {device} failed: {source}")]
    Call {
        /// The C function.
        call: &'static str,
        /// The device (or `-` before one is known).
        device: String,
        /// errno.
        #[source]
        source: std::io::Error,
    },
    /// The provider library does not implement an operation libibverbs reaches through the
    /// context's ops table (`post_send`, `post_recv`, `poll_cq`).
    #[error("{device}: the provider library has no {op} operation")]
    Unsupported {
        /// The device.
        device: String,
        /// The op.
        op: &'static str,
    },
    /// The validating `modify_qp` refused the transition before calling the kernel: the
    /// IB spec table (the kernel's `qp_state_table`) does not allow it.
    #[error("modify_qp of QP {qpn} on {device} refused before the call: {source}")]
    Refused {
        /// The device.
        device: String,
        /// The QP number.
        qpn: u32,
        /// Why (names the missing / not-allowed attributes or the forbidden transition).
        #[source]
        source: TransitionError,
    },
    /// The table allowed it but the kernel or the driver still refused.
    #[error(
        "ibv_modify_qp of QP {qpn} on {device} {from} -> {to} ({qp_type}, mask {mask}) failed: \
         {source}; {explanation}"
    )]
    KernelRefused {
        /// The device.
        device: String,
        /// The QP number.
        qpn: u32,
        /// State before.
        from: QpState,
        /// State asked for.
        to: QpState,
        /// QP type.
        qp_type: QpType,
        /// The mask given.
        mask: AttrMask,
        /// errno.
        #[source]
        source: std::io::Error,
        /// The rule of the transition and what else the driver may want.
        explanation: String,
    },
    /// A bounded wait ran out.
    #[error("{what}: no answer within {} ms", after.as_millis())]
    Timeout {
        /// What was awaited.
        what: String,
        /// The time waited.
        after: Duration,
    },
    /// rdma_cm said something other than what the step waits for.
    #[error("rdma_cm: waiting for {expected}, got {got} (status {status})")]
    CmEvent {
        /// The event awaited.
        expected: &'static str,
        /// The event received (librdmacm's name).
        got: String,
        /// The event's status (a negative errno, or a CM reject reason).
        status: i32,
    },
    /// A work request completed with an error status.
    #[error("{device}: work request {wr_id} completed with {status_str} (status {status}, vendor error {vendor_err:#x})")]
    Completion {
        /// The device.
        device: String,
        /// The work request id.
        wr_id: u64,
        /// `ibv_wc_status`.
        status: u32,
        /// `ibv_wc_status_str`.
        status_str: String,
        /// The provider's vendor error.
        vendor_err: u32,
    },
    /// The received message is not the one sent.
    #[error("received {got:?}, sent {sent:?}")]
    Mismatch {
        /// What was sent.
        sent: String,
        /// What arrived.
        got: String,
    },
    /// The port has no address usable for the test.
    #[error("{device}/{port}: {why}")]
    NoAddress {
        /// The device.
        device: String,
        /// The port.
        port: u32,
        /// What is missing.
        why: String,
    },
}

impl VerbsError {
    /// A failed call, with the current errno.
    pub(crate) fn last(call: &'static str, device: &str) -> VerbsError {
        VerbsError::Call {
            call,
            device: device.to_string(),
            source: std::io::Error::last_os_error(),
        }
    }

    /// A failed call that returned its errno (libibverbs' convention for most verbs).
    pub(crate) fn ret(call: &'static str, device: &str, rc: i32) -> VerbsError {
        // Some providers return -errno, most return errno; both mean the same.
        VerbsError::Call {
            call,
            device: device.to_string(),
            source: std::io::Error::from_raw_os_error(rc.abs()),
        }
    }

    /// True when the error says there is no device to test (not a verdict on a port).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            VerbsError::NoDevices { .. }
                | VerbsError::UnknownDevice { .. }
                | VerbsError::UnknownPort { .. }
        )
    }
}
