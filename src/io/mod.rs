//! Thin shells over OS facilities, one facility per module. Everything here is small and
//! does no deciding: it turns the OS into typed inputs for the core and executes its actions.

pub mod cursor;
pub mod journal;
pub mod kmsg;
pub mod netlink;
pub mod sysfs;
