//! The binary's exit statuses: the one type every layer maps its failures to, and the one
//! table the man pages and the operator guide are generated from or tested against
//! ([`ExitStatus::ALL`], [`ExitStatus::meaning`]). sysexits.h values, so scripts can tell
//! them apart.

use std::fmt;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ExitStatus {
    /// 0: success.
    Ok = 0,
    /// 1: the command ran and found a problem.
    Finding = 1,
    /// 2: wrong command-line usage (clap).
    CommandLine = 2,
    /// 64 (EX_USAGE): a usage error found after parsing.
    Usage = 64,
    /// 65 (EX_DATAERR): input that cannot be parsed.
    DataErr = 65,
    /// 66 (EX_NOINPUT): a file, device, port or session does not exist.
    NoInput = 66,
    /// 69 (EX_UNAVAILABLE): a facility is unavailable.
    Unavailable = 69,
    /// 70 (EX_SOFTWARE): internal error.
    Software = 70,
    /// 71 (EX_OSERR): operating-system error.
    OsErr = 71,
    /// 74 (EX_IOERR): I/O error.
    IoErr = 74,
    /// 75 (EX_TEMPFAIL): temporary failure, try again.
    TempFail = 75,
    /// 77 (EX_NOPERM): permission denied.
    NoPerm = 77,
    /// 78 (EX_CONFIG): configuration error.
    Config = 78,
}

impl ExitStatus {
    /// Every status, in numeric order.
    pub const ALL: [ExitStatus; 13] = [
        ExitStatus::Ok,
        ExitStatus::Finding,
        ExitStatus::CommandLine,
        ExitStatus::Usage,
        ExitStatus::DataErr,
        ExitStatus::NoInput,
        ExitStatus::Unavailable,
        ExitStatus::Software,
        ExitStatus::OsErr,
        ExitStatus::IoErr,
        ExitStatus::TempFail,
        ExitStatus::NoPerm,
        ExitStatus::Config,
    ];

    /// `doctor`'s "warnings only": warnings, or checks it could not make, and no problem.
    /// The same number as a wrong command line (doctor's codes are 0, 1 and 2, as operators
    /// asked for them); a script tells the two apart by doctor's report, which `--json`
    /// always prints.
    pub const DOCTOR_WARNINGS: ExitStatus = ExitStatus::CommandLine;

    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The status with this number, if it is one of ours.
    pub fn from_code(code: u8) -> Option<ExitStatus> {
        ExitStatus::ALL.into_iter().find(|s| s.code() == code)
    }

    /// What it means, for the operator (the man page's EXIT STATUS section and the guide's
    /// table say exactly this).
    pub fn meaning(self) -> &'static str {
        match self {
            ExitStatus::Ok => "Success.",
            ExitStatus::Finding => {
                "The command ran and found a problem (explain: a forbidden transition or a \
                 stuck GSI QP; status: a stuck port; selftest: a step failed; a manual recovery \
                 that ended with a port quarantined, or was not confirmed; doctor: a check found \
                 a problem; doctor --active: a step failed or hung)."
            }
            ExitStatus::CommandLine => {
                "Wrong command-line usage; doctor: warnings, or checks it could not make, and \
                 no problem."
            }
            ExitStatus::Usage => {
                "Usage error found after parsing (a destructive command without a terminal and \
                 without --yes; the daemon's control socket is unusable)."
            }
            ExitStatus::DataErr => {
                "Input that cannot be parsed (explain: a log that is not text, or a damaged .gz or \
                 .zst file; a netlink reply, iscsiadm output)."
            }
            ExitStatus::NoInput => {
                "A file, RDMA device, port or iSCSI session does not exist (the message lists \
                 those that do)."
            }
            ExitStatus::Unavailable => {
                "A facility is unavailable (RDMA netlink on this kernel; no re-creation method; \
                 no daemon running for pause, resume, reload or events; selftest: no RDMA \
                 device or a build without verbs; doctor: this host has no RDMA device)."
            }
            ExitStatus::Software => "Internal error.",
            ExitStatus::OsErr => "Operating-system error (a re-created device did not come back).",
            ExitStatus::IoErr => "I/O error.",
            ExitStatus::TempFail => {
                "Temporary failure, try again (another recovery holds the recovery lock; the \
                 device's re-creation is blocked in the kernel; the daemon is running but not \
                 answering; a timeout)."
            }
            ExitStatus::NoPerm => {
                "Permission denied: not root (the configuration, the kernel log or the control \
                 socket cannot be opened)."
            }
            ExitStatus::Config => {
                "Configuration error; the daemon exits with it before it reports ready, and \
                 systemd does not restart it. reload exits with it when the daemon refused the \
                 new file."
            }
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(s: ExitStatus) -> Self {
        std::process::ExitCode::from(s.code())
    }
}

/// Maps an OS error to the closest status.
pub fn io_status(e: &std::io::Error) -> ExitStatus {
    match e.kind() {
        std::io::ErrorKind::NotFound => ExitStatus::NoInput,
        std::io::ErrorKind::PermissionDenied => ExitStatus::NoPerm,
        _ => ExitStatus::IoErr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_through_its_code_in_order() {
        for w in ExitStatus::ALL.windows(2) {
            assert!(w[0].code() < w[1].code());
        }
        for s in ExitStatus::ALL {
            assert_eq!(ExitStatus::from_code(s.code()), Some(s));
            assert!(s.meaning().ends_with('.'), "{s:?}");
        }
        assert_eq!(ExitStatus::from_code(3), None);
    }
}
