//! The NFS over RDMA mounts of a re-creation's record to and from their journal form
//! (`v2::JournalNfsMount`: the remembered mount, and its check's result once reported).

use super::v2::{JournalNfsCheck, JournalNfsMount};
use super::JournalFormatError;
use crate::nfs_rdma::{NfsCheckReport, NfsCheckResult, NfsRdmaMount};

/// The journal form of `remembered`, each with its check in `checks` if there is one.
pub(super) fn out(remembered: &[NfsRdmaMount], checks: &[NfsCheckReport]) -> Vec<JournalNfsMount> {
    remembered
        .iter()
        .map(|m| JournalNfsMount {
            mount_point: m.mount_point.clone(),
            source: m.source.clone(),
            fstype: m.fstype.clone(),
            version: m.version.clone(),
            server: m.server.clone(),
            port: m.port,
            client_addr: m.client_addr.clone(),
            proto: m.proto.clone(),
            placed: m.placed.clone(),
            check: checks
                .iter()
                .find(|r| r.mount == *m)
                .map(|r| check_out(&r.result)),
        })
        .collect()
}

fn check_out(r: &NfsCheckResult) -> JournalNfsCheck {
    let mut j = JournalNfsCheck {
        result: r.label().to_string(),
        after_ms: None,
        waited_s: None,
        earlier_pending: false,
        errno: None,
    };
    match r {
        NfsCheckResult::Answered { after_ms } => j.after_ms = Some(*after_ms),
        NfsCheckResult::NoAnswer {
            waited_s,
            earlier_pending,
        } => {
            j.waited_s = Some(*waited_s);
            j.earlier_pending = *earlier_pending;
        }
        NfsCheckResult::Error { errno } => j.errno = Some(errno.clone()),
    }
    j
}

/// The remembered mount of a journal entry.
pub(super) fn mount_in(j: &JournalNfsMount) -> NfsRdmaMount {
    NfsRdmaMount {
        mount_point: j.mount_point.clone(),
        source: j.source.clone(),
        fstype: j.fstype.clone(),
        version: j.version.clone(),
        server: j.server.clone(),
        port: j.port,
        client_addr: j.client_addr.clone(),
        proto: j.proto.clone(),
        placed: j.placed.clone(),
    }
}

/// The checks of the entries that have one.
pub(super) fn reports_in(
    js: &[JournalNfsMount],
) -> Result<Vec<NfsCheckReport>, JournalFormatError> {
    js.iter()
        .filter_map(|j| j.check.as_ref().map(|c| (j, c)))
        .map(|(j, c)| {
            Ok(NfsCheckReport {
                mount: mount_in(j),
                result: check_in(c)?,
            })
        })
        .collect()
}

fn check_in(c: &JournalNfsCheck) -> Result<NfsCheckResult, JournalFormatError> {
    Ok(match c.result.as_str() {
        "answered" => NfsCheckResult::Answered {
            after_ms: c.after_ms.unwrap_or_default(),
        },
        "no-answer" => NfsCheckResult::NoAnswer {
            waited_s: c.waited_s.unwrap_or_default(),
            earlier_pending: c.earlier_pending,
        },
        "error" => NfsCheckResult::Error {
            errno: c.errno.clone().unwrap_or_default(),
        },
        other => {
            return Err(JournalFormatError::Value {
                field: "nfs mount check",
                reason: format!("{other:?} is not an NFS check result"),
            })
        }
    })
}
