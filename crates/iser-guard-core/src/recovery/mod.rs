//! The per-port recovery state machine: pure, deterministic, driven from outside.
//!
//! [`Engine`] takes typed inputs plus `now` ([`crate::time::Instant`]) and produces
//! [`Action`]s as data: probe a portal, re-create a device, run iscsiadm, alert, journal its
//! state. It performs no I/O, reads no clock, and draws randomness (back-off jitter) only from
//! a seed stored in its own state, so every incident can be replayed exactly.
//!
//! Per port: Healthy → Faulted → AwaitingTarget → ResettingDevice → Reconnecting → Verifying
//! → Healthy, with AwaitingDevice (the local device vanished), Quarantined (attempts
//! exhausted; an operator must act) and RecreationBlocked (a re-creation step blocked in the
//! kernel; nothing else touches the device until it returns). See [`Engine`] for the call
//! order.

mod action;
mod adapter;
mod alerts;
mod input;
mod machine;
mod policy;
mod state;

pub use action::{
    Action, ActionId, ActionKind, Alert, AlertClass, AlertSubject, IscsiNode, Origin,
    RecreateMethod,
};
pub use adapter::{
    disks, from_topology_event, iscsiadm_outcome, read_record, session_from_detail, session_state,
    KernelReading,
};
pub use input::{
    BlockedStep, CmAddrCause, DiskInfo, Input, IoErrorKind, IscsiadmOutcome, MethodFailure,
    Observation, OperatorCommand, Outcome, PortId, Portal, PortalError, ProbeResult,
    RecreateResult, ScanComplete, SessionInfo, SessionKey, SessionState, StuckEvidence, TaskId,
    Trust,
};
pub use machine::{
    CommandError, Engine, ResumeError, MULTIPATH_BACK_TIMEOUT, NFS_CHECK_WINDOW, NVME_BACK_TIMEOUT,
};
pub use policy::{OtherSessions, Policy, ProbeMethod, ResetWhen, SelfTestPolicy};
pub use state::{
    AwaitTimer, BlockedRecreation, DeviceRecord, DriverReset, EngineSnapshot, Episode, Fault,
    FreshQp, Hold, InFlight, InFlightKind, KernelBugHold, Phase, PortRecord, PortState,
    PortalRecord, ReconnectTimer, Recreation, RecreationState, SelfTestProgress, SelfTestRecord,
    SelfTestVerdict, SessionOp, SessionRecord, Stage, TimerKind, Transition,
};
