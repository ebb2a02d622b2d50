//! Thin shells over OS facilities, one facility per module. Everything here is small and
//! does no deciding: it turns the OS into typed inputs for the core and executes its actions.

pub mod atomic;
pub mod caps;
pub mod control;
pub mod cursor;
pub mod direct_read;
pub mod executors;
pub mod iscsiadm;
pub mod journal;
pub mod kernel_caps;
pub mod kmsg;
pub mod kmsg_tail;
pub mod lines;
pub mod lock;
pub mod multipathd;
pub mod neighbour;
pub mod netif;
pub mod netlink;
pub mod nvme_cli;
pub mod path_trust;
pub mod probe;
pub mod probe_choice;
pub mod proc_comm;
pub mod process;
pub mod reset;
pub mod route;
pub mod saved_log;
pub mod selftest;
pub mod selftest_process;
pub mod selftest_scripted;
#[cfg(feature = "verbs")]
pub mod selftest_verbs;
pub mod sysfs;
pub mod syslog;
pub mod task;
pub mod verbs_access;
