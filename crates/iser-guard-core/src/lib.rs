//! The pure core: parsers, the QP model and the recovery state machine.
//!
//! Nothing under `core` performs I/O, spawns processes, or reads the clock. Time and inputs
//! come in as arguments; decisions go out as data. That makes every incident replayable and
//! every scenario a deterministic test in virtual time.

pub mod consumers;
pub mod doctor;
pub mod driver;
pub mod driver_stack;
pub mod iscsi;
pub mod journal;
pub mod kernel_caps;
pub mod kmsg;
pub mod multipath;
pub mod nfs_rdma;
pub mod nldev;
pub mod nvme_fabrics;
pub mod observe;
pub mod path_trust;
pub mod qp;
pub mod recovery;
pub mod reset_plan;
pub mod selftest;
pub mod session_map;
pub mod severity;
pub mod signatures;
pub mod time;
pub mod topology;
