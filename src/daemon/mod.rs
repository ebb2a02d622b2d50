//! The daemon: the event loop that feeds the core with inputs and executes its actions.
//!
//! - [`run`] — the loop ([`run::run`]) over injected dependencies ([`run::Deps`]); also the
//!   engine of the standalone manual commands ([`run::Mode::OneShot`]);
//! - [`sources`] — the clock, the kernel log and the RDMA topology source (the traits tests
//!   implement, the real clock and kernel log);
//! - [`topology`] — the real RDMA topology source (netlink and sysfs);
//! - [`exec`] — one engine action on the executors → the engine's outcome;
//! - [`notify`] — sd_notify;
//! - [`observe`] — the event ring, incidents and sources behind `status` and `events`;
//! - [`witness`] — the devices' asynchronous event listeners (which devices, release before
//!   a re-creation).

pub mod driver_stack;
pub mod exec;
pub mod kernel_events;
pub mod notify;
pub mod observe;
pub mod read_ahead;
pub mod recipes;
pub mod run;
pub mod sources;
pub mod topology;
pub mod witness;
pub mod workers;
