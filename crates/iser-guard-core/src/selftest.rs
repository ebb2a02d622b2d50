//! What a port self-test found and what a device's asynchronous event channel said: the
//! vocabulary shared by the verbs layer, which produces these, and the engine, which
//! consumes them as witnesses next to the kernel log and netlink.
//!
//! Pure data: the verbs layer (libibverbs / librdmacm) lives outside the core.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One step of a self-test (`cm connect`, `walk RESET->INIT`, `send/recv`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfTestStep {
    /// Short, stable name of the step (used as a metric label and in `--json`).
    pub name: String,
    /// How long it took.
    pub took: Duration,
    /// It did what it should.
    pub ok: bool,
    /// What happened, in operator words (the errno and the call on failure).
    pub detail: String,
}

/// The steps of one self-test of one port, in the order they ran. A step that failed is
/// the last one: nothing runs after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfTestReport {
    /// RDMA device (`rxe_ini`, `rocep2s0f0`).
    pub device: String,
    /// Port number (from 1).
    pub port: u32,
    /// Steps, in order.
    pub steps: Vec<SelfTestStep>,
}

impl SelfTestReport {
    /// Every step ran and worked (and there was at least one).
    pub fn passed(&self) -> bool {
        !self.steps.is_empty() && self.steps.iter().all(|s| s.ok)
    }

    /// The step that failed, if one did.
    pub fn first_failure(&self) -> Option<&SelfTestStep> {
        self.steps.iter().find(|s| !s.ok)
    }

    /// Time of all steps together.
    pub fn total(&self) -> Duration {
        self.steps.iter().map(|s| s.took).sum()
    }

    /// One line for logs and alerts.
    pub fn summary(&self) -> String {
        match self.first_failure() {
            None if self.passed() => format!(
                "self-test of {}/{} passed: {} steps in {} ms",
                self.device,
                self.port,
                self.steps.len(),
                self.total().as_millis()
            ),
            None => format!("self-test of {}/{} ran no step", self.device, self.port),
            Some(s) => format!(
                "self-test of {}/{} failed at {}: {}",
                self.device, self.port, s.name, s.detail
            ),
        }
    }
}

/// What asking for a self-test gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelfTestResult {
    /// It ran; the report says whether it passed.
    Ran(SelfTestReport),
    /// It could not run at all: built without verbs, no RDMA device visible to libibverbs
    /// (no provider library, no uverbs), or the device is gone. Not a verdict on the port.
    Unavailable {
        /// Why, in operator words.
        reason: String,
    },
}

/// An asynchronous event type, numbered as libibverbs' `enum ibv_event_type`
/// (rdma-core include/infiniband/verbs.h), which the kernel's `enum ib_event_type` mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AsyncEventKind {
    CqErr,
    QpFatal,
    QpReqErr,
    QpAccessErr,
    CommEstablished,
    SqDrained,
    PathMig,
    PathMigErr,
    DeviceFatal,
    PortActive,
    PortErr,
    LidChange,
    PkeyChange,
    SmChange,
    SrqErr,
    SrqLimitReached,
    QpLastWqeReached,
    ClientReregister,
    GidChange,
    WqFatal,
    /// A number this table does not know (a newer library).
    Other(u32),
}

impl AsyncEventKind {
    /// From libibverbs' `ibv_event_type` value.
    pub fn from_ibv(n: u32) -> AsyncEventKind {
        use AsyncEventKind::*;
        match n {
            0 => CqErr,
            1 => QpFatal,
            2 => QpReqErr,
            3 => QpAccessErr,
            4 => CommEstablished,
            5 => SqDrained,
            6 => PathMig,
            7 => PathMigErr,
            8 => DeviceFatal,
            9 => PortActive,
            10 => PortErr,
            11 => LidChange,
            12 => PkeyChange,
            13 => SmChange,
            14 => SrqErr,
            15 => SrqLimitReached,
            16 => QpLastWqeReached,
            17 => ClientReregister,
            18 => GidChange,
            19 => WqFatal,
            n => Other(n),
        }
    }

    /// libibverbs' name without the `IBV_EVENT_` prefix (what `ibv_event_type_str` says,
    /// in the enum's spelling).
    pub fn name(self) -> &'static str {
        use AsyncEventKind::*;
        match self {
            CqErr => "CQ_ERR",
            QpFatal => "QP_FATAL",
            QpReqErr => "QP_REQ_ERR",
            QpAccessErr => "QP_ACCESS_ERR",
            CommEstablished => "COMM_EST",
            SqDrained => "SQ_DRAINED",
            PathMig => "PATH_MIG",
            PathMigErr => "PATH_MIG_ERR",
            DeviceFatal => "DEVICE_FATAL",
            PortActive => "PORT_ACTIVE",
            PortErr => "PORT_ERR",
            LidChange => "LID_CHANGE",
            PkeyChange => "PKEY_CHANGE",
            SmChange => "SM_CHANGE",
            SrqErr => "SRQ_ERR",
            SrqLimitReached => "SRQ_LIMIT_REACHED",
            QpLastWqeReached => "QP_LAST_WQE_REACHED",
            ClientReregister => "CLIENT_REREGISTER",
            GidChange => "GID_CHANGE",
            WqFatal => "WQ_FATAL",
            Other(_) => "OTHER",
        }
    }

    /// The event names a port (its element is a port number), not a QP, CQ, SRQ or the
    /// whole device.
    pub fn is_port_event(self) -> bool {
        use AsyncEventKind::*;
        matches!(
            self,
            PortActive | PortErr | LidChange | PkeyChange | SmChange | ClientReregister | GidChange
        )
    }
}

impl fmt::Display for AsyncEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AsyncEventKind::Other(n) => write!(f, "event {n}"),
            k => f.write_str(k.name()),
        }
    }
}

/// One asynchronous event read from a device's event channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsyncEvent {
    /// The device whose channel it came from.
    pub device: String,
    /// The port, for port events.
    pub port: Option<u32>,
    /// What.
    pub kind: AsyncEventKind,
}

impl fmt::Display for AsyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(p) => write!(f, "{} on {}/{}", self.kind, self.device, p),
            None => write!(f, "{} on {}", self.kind, self.device),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, ms: u64, ok: bool) -> SelfTestStep {
        SelfTestStep {
            name: name.into(),
            took: Duration::from_millis(ms),
            ok,
            detail: if ok { "ok".into() } else { "EINVAL".into() },
        }
    }

    #[test]
    fn a_report_passes_only_with_every_step_ok() {
        let mut r = SelfTestReport {
            device: "rxe_ini".into(),
            port: 1,
            steps: vec![],
        };
        assert!(!r.passed(), "no step is no pass");
        r.steps = vec![step("cm-connect", 12, true), step("send-recv", 3, true)];
        assert!(r.passed());
        assert_eq!(r.total(), Duration::from_millis(15));
        assert!(r.summary().contains("passed: 2 steps in 15 ms"));
        r.steps.push(step("walk-rts", 1, false));
        assert!(!r.passed());
        assert_eq!(r.first_failure().unwrap().name, "walk-rts");
        assert_eq!(
            r.summary(),
            "self-test of rxe_ini/1 failed at walk-rts: EINVAL"
        );
    }

    #[test]
    fn event_numbers_follow_libibverbs() {
        assert_eq!(AsyncEventKind::from_ibv(8), AsyncEventKind::DeviceFatal);
        assert_eq!(AsyncEventKind::from_ibv(9), AsyncEventKind::PortActive);
        assert_eq!(AsyncEventKind::from_ibv(10), AsyncEventKind::PortErr);
        assert_eq!(AsyncEventKind::from_ibv(18), AsyncEventKind::GidChange);
        assert_eq!(AsyncEventKind::from_ibv(77), AsyncEventKind::Other(77));
        assert!(AsyncEventKind::PortErr.is_port_event());
        assert!(!AsyncEventKind::DeviceFatal.is_port_event());
        let e = AsyncEvent {
            device: "rxe_ini".into(),
            port: Some(1),
            kind: AsyncEventKind::PortErr,
        };
        assert_eq!(e.to_string(), "PORT_ERR on rxe_ini/1");
    }
}
