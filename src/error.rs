//! The top-level error and the binary's documented exit codes.
//!
//! Each layer has its own typed error; this enum wraps them, and [`Error::exit_code`] maps
//! each to one [`ExitStatus`].
//!
//! The codes and their meanings are [`crate::exit::ExitStatus`].

use std::process::ExitCode;

use crate::exit::io_status;
pub use crate::exit::ExitStatus;

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
    /// A saved kernel log that is not text, is damaged, or cannot be read.
    #[error(transparent)]
    SavedLog(#[from] crate::io::saved_log::SavedLogError),
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
        self.status().code()
    }

    /// The documented exit status for this error.
    pub fn status(&self) -> ExitStatus {
        match self {
            Error::Config(_) => ExitStatus::Config,
            Error::Usage(_) => ExitStatus::Usage,
            Error::Data(_) => ExitStatus::DataErr,
            Error::SavedLog(e) => {
                use crate::io::saved_log::SavedLogError as S;
                match e {
                    S::NotText { .. } | S::Damaged { .. } => ExitStatus::DataErr,
                    S::Read { source, .. } => io_status(source),
                }
            }
            Error::NoPermission(_) => ExitStatus::NoPerm,
            Error::Journal(
                crate::io::journal::JournalError::Corrupt { .. }
                | crate::io::journal::JournalError::NewerFormat { .. },
            ) => ExitStatus::DataErr,
            Error::Journal(crate::io::journal::JournalError::Read { source, .. }) => {
                io_status(source)
            }
            Error::Journal(crate::io::journal::JournalError::Write { source }) => {
                io_status(&source.source)
            }
            Error::Kmsg(e) => {
                use crate::io::kmsg::KmsgError;
                match e {
                    KmsgError::Open { source, .. }
                    | KmsgError::Denied { source, .. }
                    | KmsgError::Seek { source, .. } => io_status(source),
                    KmsgError::Missing { .. } => ExitStatus::NoInput,
                    KmsgError::NotALog { .. } => ExitStatus::Config,
                    KmsgError::BufferTooSmall { .. } => ExitStatus::Software,
                    KmsgError::Read(_) | KmsgError::Closed => ExitStatus::IoErr,
                }
            }
            Error::Io { source, .. } => io_status(source),
            Error::Netlink(e) => netlink_status(e),
            Error::Reset(e) => e.status(),
            Error::Iscsiadm(e) => e.status_for_cli(),
            Error::Probe(e) => e.status(),
            Error::Lock(e) => e.status(),
        }
    }
}

/// Maps an RDMA netlink failure to the closest exit code: 69 when the kernel has no RDMA
/// netlink, 75 for what may pass (timeout, interrupted dump, overrun), 77 for EPERM/EACCES,
/// 65 for replies that cannot be decoded, 71 for other OS and kernel errors.
pub fn netlink_status(e: &crate::io::netlink::NetlinkError) -> ExitStatus {
    use crate::io::netlink::NetlinkError as N;
    match e {
        N::Unavailable => ExitStatus::Unavailable,
        N::Timeout { .. } | N::Interrupted { .. } | N::Overrun => ExitStatus::TempFail,
        N::Malformed { .. } => ExitStatus::DataErr,
        N::Kernel { errno, .. } | N::DumpFailed { errno, .. }
            if *errno == libc::EPERM || *errno == libc::EACCES =>
        {
            ExitStatus::NoPerm
        }
        N::Os { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            ExitStatus::NoPerm
        }
        N::Kernel { .. } | N::DumpFailed { .. } | N::Os { .. } | N::Closed => ExitStatus::OsErr,
    }
}

impl From<Error> for ExitCode {
    fn from(e: Error) -> Self {
        ExitCode::from(e.exit_code())
    }
}
