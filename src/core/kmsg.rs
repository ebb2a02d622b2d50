//! The /dev/kmsg record: `prio,seq,usec,flags;text` followed by ` KEY=VALUE` dictionary lines
//! (Documentation/ABI/testing/dev-kmsg).

use serde::Serialize;

/// The syslog facility of kernel records. Only records of this facility may trigger actions:
/// anything else was written by userspace and could be forged.
pub const KERNEL_FACILITY: u8 = 0;

/// One kernel log record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// Syslog facility (`prio >> 3`); 0 for the kernel.
    pub facility: u8,
    /// Syslog level (`prio & 7`): 0 emerg … 7 debug.
    pub level: u8,
    /// The kernel's 64-bit sequence number.
    pub seq: u64,
    /// Monotonic timestamp in microseconds since boot.
    pub usec: u64,
    /// The record is a fragment of a continued line (flag `c`).
    pub continuation: bool,
    /// The message text, `\xNN` escapes decoded.
    pub text: String,
    /// Dictionary (` KEY=VALUE` lines) in order, e.g. `SUBSYSTEM=infiniband`.
    pub dict: Vec<(String, String)>,
}

impl Record {
    /// Written by the kernel itself (facility 0), so it may trigger actions.
    pub fn is_kernel(&self) -> bool {
        self.facility == KERNEL_FACILITY
    }

    /// The value of a dictionary key.
    pub fn dict_value(&self, key: &str) -> Option<&str> {
        self.dict
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}
