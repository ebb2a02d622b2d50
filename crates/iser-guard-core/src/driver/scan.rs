//! The first-scan rule: when the first look at the host after a start is complete. The
//! engine acts on nothing destructive before it hears [`ScanComplete`], and safe mode's hold
//! ([`Driver::hold_until_first_scan`](super::Driver::hold_until_first_scan)) ends with it.
//! (`Driver::end_hold_if_scanned`, `Driver::complete_first_scan`.)
//! The daemon's loop and the simulator report what they saw (the topology, each session
//! listing and whether it was asked for once the ports were known); this decides.
//!
//! The rule: the scan is complete once the RDMA topology was reported and a session listing
//! asked for after that report was answered. A listing asked for before the ports were known
//! placed nothing on them, so it completes nothing. The hold of safe mode needs that listing
//! to have been read (a failed listing shows nothing of the sessions); the engine's
//! [`ScanComplete`] needs only the answer (it must not wait forever on an iscsiadm that
//! keeps failing).

use crate::recovery::{Input, ScanComplete};
use crate::time::Instant;

/// What the first scan has seen so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstScan {
    /// The RDMA topology was reported once.
    topology: bool,
    /// A listing asked for after the topology was answered (read or failed).
    sessions: bool,
    /// Such a listing was read.
    sessions_read: bool,
    /// The engine was told the scan is complete.
    sent: bool,
}

impl super::Driver {
    /// The RDMA topology was reported. True for the first report (the caller then asks for
    /// the session listing that can complete the first scan).
    pub fn topology_reported(&mut self) -> bool {
        !std::mem::replace(&mut self.scan.topology, true)
    }

    /// Whether the RDMA topology has been reported: a session listing asked for now can be
    /// placed on the ports (and counts for the first scan).
    pub fn topology_known(&self) -> bool {
        self.scan.topology
    }

    /// A session listing was answered. `asked_with_topology`: it was asked for once the
    /// topology was known ([`Driver::topology_known`] when it was asked for); `read`: it
    /// was read (not an iscsiadm failure).
    pub fn sessions_listed(&mut self, asked_with_topology: bool, read: bool) {
        if asked_with_topology {
            self.scan.sessions = true;
            self.scan.sessions_read |= read;
        }
    }

    /// Whether the engine has been told the first scan is complete.
    pub fn first_scan_done(&self) -> bool {
        self.scan.sent
    }

    /// Ends safe mode's hold once the first scan has read the sessions on known ports.
    /// True when it ended now (the caller says so in the log).
    pub fn end_hold_if_scanned(&mut self) -> bool {
        if self.held_until_scan.is_some() && self.scan.topology && self.scan.sessions_read {
            self.first_scan_complete();
            return true;
        }
        false
    }

    /// Tells the engine, once, that the first scan is complete when the rule says so. True
    /// when it did now (the daemon is then ready). `qp_table_available`: the RDMA netlink
    /// QP table could be read.
    pub fn complete_first_scan(&mut self, qp_table_available: bool, now: Instant) -> bool {
        if self.scan.sent || !self.scan.topology || !self.scan.sessions {
            return false;
        }
        self.scan.sent = true;
        self.handle(
            Input::ScanComplete(ScanComplete { qp_table_available }),
            now,
        );
        true
    }
}
