//! Thin shells over OS facilities, one facility per module. Everything here is small and
//! does no deciding: it turns the OS into typed inputs for the core and executes its actions.

pub mod executors;
pub mod iscsiadm;
pub mod lock;
pub mod probe;
pub mod process;
pub mod reset;
pub mod syslog;
