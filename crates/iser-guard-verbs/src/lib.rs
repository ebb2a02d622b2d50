//! Safe wrappers over libibverbs and librdmacm (through rdma-sys) for iser-guard.
//!
//! This crate owns:
//! - [`device`]: the device list, an open device, port and GID queries;
//! - [`resources`]: PD, CQ, MR and QP, freed on drop in dependency order, the data path
//!   (post send / receive, poll CQ) and the validating [`resources::Qp::modify`];
//! - [`attrs`]: the attributes of a modify and the pure decision made before the FFI call
//!   (the core's IB spec table, `iser_guard_core::qp::check_transition`);
//! - [`cm`]: rdma_cm event channel and ids, every wait bounded;
//! - [`selftest`]: the port self-test;
//! - [`events`]: per-device asynchronous event listeners.
//!
//! No function here panics on an FFI failure: each returns a [`VerbsError`].

pub mod attrs;
pub mod cm;
pub mod device;
pub mod error;
pub mod events;
pub mod resources;
pub mod selftest;

pub use error::VerbsError;

/// Microseconds of a duration, for log fields (saturating).
pub(crate) fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
