//! `iser-guard doctor`, the shell around the core's audit ([`crate::core::doctor`]):
//! [`gather`] reads the host into facts, and [`active`] runs `doctor --active DEVICE` (one
//! timed re-creation per method) through the executors' traits. The command itself (its
//! arguments, output and exit status) is [`crate::cli::doctor`].

pub mod active;
pub mod gather;

pub use gather::{gather, ConfigOrigin, Sources, Witnesses};
