//! The top-level error and the binary's documented exit codes.
//!
//! Each layer has its own typed error; this enum wraps them, and [`Error::exit_code`] maps
//! each to one of the codes below (sysexits.h values, so scripts can tell them apart).
//!
//! | code | meaning |
//! |---|---|
//! | 0  | success |
//! | 1  | the command ran and found a problem (e.g. `explain` found a forbidden transition, `status` a stuck port, a `selftest` step failed) |
//! | 2  | wrong command-line usage (clap) |
//! | 64 | usage error detected after parsing (EX_USAGE) |
//! | 65 | bad input data: a log, netlink message or iscsiadm output that cannot be parsed (EX_DATAERR) |
//! | 66 | an input file does not exist (EX_NOINPUT) |
//! | 69 | a required facility is unavailable, e.g. RDMA netlink on this kernel, no RDMA device for `selftest` or a build without verbs (EX_UNAVAILABLE) |
//! | 70 | internal error (EX_SOFTWARE) |
//! | 71 | operating-system error (EX_OSERR) |
//! | 74 | I/O error (EX_IOERR) |
//! | 75 | temporary failure, try again (EX_TEMPFAIL), e.g. another recovery holds the lock |
//! | 77 | permission denied (EX_NOPERM) |
//! | 78 | configuration error (EX_CONFIG) |

use std::process::ExitCode;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: the command ran and found a problem.
pub const EXIT_FINDING: u8 = 1;
/// Exit code: EX_USAGE.
pub const EXIT_USAGE: u8 = 64;
/// Exit code: EX_DATAERR.
pub const EXIT_DATAERR: u8 = 65;
/// Exit code: EX_NOINPUT.
pub const EXIT_NOINPUT: u8 = 66;
/// Exit code: EX_UNAVAILABLE.
pub const EXIT_UNAVAILABLE: u8 = 69;
/// Exit code: EX_SOFTWARE.
pub const EXIT_SOFTWARE: u8 = 70;
/// Exit code: EX_OSERR.
pub const EXIT_OSERR: u8 = 71;
/// Exit code: EX_IOERR.
pub const EXIT_IOERR: u8 = 74;
/// Exit code: EX_TEMPFAIL.
pub const EXIT_TEMPFAIL: u8 = 75;
/// Exit code: EX_NOPERM.
pub const EXIT_NOPERM: u8 = 77;
/// Exit code: EX_CONFIG.
pub const EXIT_CONFIG: u8 = 78;

/// Everything a subcommand can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid or unreadable.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The command line made sense to the parser but not to the command.
    #[error("{0}")]
    Usage(String),
    /// Input data that cannot be understood.
    #[error("{0}")]
    Data(String),
    /// The caller may not do this (not root: the configuration or the control socket cannot
    /// be opened).
    #[error("{0}")]
    NoPermission(String),
    /// The kernel log reader failed.
    #[error(transparent)]
    Kmsg(#[from] crate::io::kmsg::KmsgError),
    /// RDMA netlink failed or is missing.
    #[error(transparent)]
    Netlink(#[from] crate::io::netlink::NetlinkError),
    /// The recovery engine's state journal cannot be read or written.
    #[error(transparent)]
    Journal(#[from] crate::io::journal::JournalError),
    /// Re-creating an RDMA device failed or was refused.
    #[error(transparent)]
    Reset(#[from] crate::io::reset::ResetError),
    /// An iscsiadm operation failed.
    #[error(transparent)]
    Iscsiadm(#[from] crate::io::iscsiadm::IscsiadmError),
    /// A portal probe could not be made.
    #[error(transparent)]
    Probe(#[from] crate::io::probe::ProbeError),
    /// The recovery lock is held or unusable.
    #[error(transparent)]
    Lock(#[from] crate::io::lock::LockError),
    /// An I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// The documented exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) => EXIT_CONFIG,
            Error::Usage(_) => EXIT_USAGE,
            Error::Data(_) => EXIT_DATAERR,
            Error::NoPermission(_) => EXIT_NOPERM,
            Error::Journal(
                crate::io::journal::JournalError::Corrupt { .. }
                | crate::io::journal::JournalError::NewerFormat { .. },
            ) => EXIT_DATAERR,
            Error::Journal(crate::io::journal::JournalError::Read { source, .. }) => {
                io_exit_code(source)
            }
            Error::Journal(crate::io::journal::JournalError::Write { source }) => {
                io_exit_code(&source.source)
            }
            Error::Kmsg(e) => {
                use crate::io::kmsg::KmsgError;
                match e {
                    KmsgError::Open { source, .. } | KmsgError::Seek { source, .. } => {
                        io_exit_code(source)
                    }
                    KmsgError::BufferTooSmall { .. } => EXIT_SOFTWARE,
                    KmsgError::Read(_) | KmsgError::Closed => EXIT_IOERR,
                }
            }
            Error::Io { source, .. } => io_exit_code(source),
            Error::Netlink(e) => netlink_exit_code(e),
            Error::Reset(e) => e.exit_code(),
            Error::Iscsiadm(e) => e.exit_code_for_cli(),
            Error::Probe(e) => e.exit_code(),
            Error::Lock(e) => e.exit_code(),
        }
    }
}

/// Maps an RDMA netlink failure to the closest exit code: 69 when the kernel has no RDMA
/// netlink, 75 for what may pass (timeout, interrupted dump, overrun), 77 for EPERM/EACCES,
/// 65 for replies that cannot be decoded, 71 for other OS and kernel errors.
pub fn netlink_exit_code(e: &crate::io::netlink::NetlinkError) -> u8 {
    use crate::io::netlink::NetlinkError as N;
    match e {
        N::Unavailable => EXIT_UNAVAILABLE,
        N::Timeout { .. } | N::Interrupted { .. } | N::Overrun => EXIT_TEMPFAIL,
        N::Malformed { .. } => EXIT_DATAERR,
        N::Kernel { errno, .. } | N::DumpFailed { errno, .. }
            if *errno == libc::EPERM || *errno == libc::EACCES =>
        {
            EXIT_NOPERM
        }
        N::Os { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            EXIT_NOPERM
        }
        N::Kernel { .. } | N::DumpFailed { .. } | N::Os { .. } | N::Closed => EXIT_OSERR,
    }
}

/// Maps an OS error to the closest exit code.
pub fn io_exit_code(e: &std::io::Error) -> u8 {
    match e.kind() {
        std::io::ErrorKind::NotFound => EXIT_NOINPUT,
        std::io::ErrorKind::PermissionDenied => EXIT_NOPERM,
        _ => EXIT_IOERR,
    }
}

impl From<Error> for ExitCode {
    fn from(e: Error) -> Self {
        ExitCode::from(e.exit_code())
    }
}
