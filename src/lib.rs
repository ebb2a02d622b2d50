//! iser-guard keeps iSER (iSCSI over RDMA) storage alive on Linux initiators.
//!
//! When a target goes away, the GSI queue pair (QP 1) of the initiator's RDMA port can get
//! stuck in ERR; every ERR→RTS attempt fails with EINVAL and only re-creating the RDMA device
//! brings the port back. iser-guard detects that, re-creates the one affected device, and
//! reconnects the iSCSI sessions.
//!
//! Module map:
//! - [`core`]: pure logic (no I/O, no clock): QP model, kernel-log parsing and classification,
//!   RDMA netlink codec, iscsiadm output parsing, the recovery state machine.
//! - [`io`]: thin shells, one OS facility each (/dev/kmsg, netlink, sysfs, iscsiadm, syslog, …).
//! - [`daemon`]: the event loop that feeds the core and executes its actions.
//! - [`sim`]: the simulated host used by tests and `iser-guard simulate`.
//! - [`config`]: the TOML configuration and its validation.
//! - [`logging`]: the stderr log, `<N>`-prefixed for the journal when stderr is no terminal.
//! - [`metrics`]: Prometheus metrics (registry, node_exporter textfile, loopback /metrics).
//! - [`cli`]: subcommands; thin wrappers over the above.
//! - [`error`]: the top-level error, mapped to an [`exit::ExitStatus`].
//! - [`exit`]: the exit statuses and their meanings (the one table).
//! - [`answers`]: executor answers → the core's outcomes (daemon and simulator alike).
//! - [`compose`]: the I/O layer's options built from the configuration.

pub mod answers;
pub mod cli;
pub mod compose;
pub mod config;
/// The pure core, its own crate so that Cargo enforces its purity.
pub use iser_guard_core as core;
pub mod daemon;
pub mod doctor;
pub mod error;
pub mod exit;
pub mod io;
pub mod logging;
pub mod metrics;
pub mod sim;
