//! The simulated host driven by tests and `iser-guard simulate`.
//!
//! [`host::SimHost`] models RDMA devices (QP 1 gets stuck on irdma exactly as in the field),
//! targets, iscsid, iscsiadm and the kernel log in virtual time; [`harness::Harness`] runs the
//! real [`Engine`](crate::core::recovery::Engine) against it the way the daemon will, journal
//! included; [`scenarios`] names the incidents. Nothing here touches the real host.

pub mod consumers;
pub mod harness;
pub mod host;
pub mod kernel;
pub mod multipath;
pub mod probe;
pub mod scenarios;
pub mod selftest;

pub use harness::{render, Entry, Harness, SimError};
pub use host::{Delivery, HostEvent, IscsiadmPlan, RecreateBehaviour, SimDriver, SimHost};
pub use scenarios::Scenario;
