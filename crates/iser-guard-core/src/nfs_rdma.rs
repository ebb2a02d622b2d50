//! NFS mounts over RDMA as the kernel shows them, and what checking one after a device
//! re-creation means. The client's RPC-over-RDMA transport (xprtrdma, module `rpcrdma`)
//! lets go of a removed device by itself (`rpcrdma_remove_one` in
//! net/sunrpc/xprtrdma/ib_client.c tells each transport through its `rpcrdma_rn_register`
//! notifier; older kernels did it in `rpcrdma_ia_remove` on the CM's DEVICE_REMOVAL) and
//! connects again on the next RPC once a device with a route to the server is back. Nothing
//! checks that it did: the daemon remembers the device's mounts before it re-creates it and
//! asks each one a bounded `stat` afterwards.
//!
//! Owns, all pure:
//! - the text of `/proc/self/mountinfo` (`show_mountinfo` in fs/proc_namespace.c: mount id,
//!   parent id, `major:minor`, root, mount point, mount options, optional fields, `-`, file
//!   system type, source, super options; ` `, `\t`, `\n` and `\` in paths escaped as `\ooo`)
//!   → [`NfsRdmaMount`] for each `nfs`/`nfs4` mount whose super options say `proto=rdma` or
//!   `proto=rdma6` (`nfs_show_mount_options` in fs/nfs/super.c: `addr=`, `port=`,
//!   `vers=`, `clientaddr=` for v4). A line that is not mountinfo is a counted skip
//!   ([`MountinfoSkip`]), never a panic;
//! - placing a mount on an RDMA port: by rpcrdma's rows of the CM id table whose destination
//!   is the mount's server (`addr=`, and `port=` when shown), the kernel's own word, as
//!   `crate::nvme_fabrics` places controllers by nvme_rdma's rows. An idle transport
//!   (xprtrdma disconnects after 5 minutes without RPCs) has no row: the mount keeps the
//!   placement it had;
//! - the result of a check ([`NfsCheckResult`]).
//!
//! Reading the file and the stat itself are the io layer's.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::nldev::CmIdEntry;

/// The RPC-over-RDMA port (`NFS_RDMA_PORT`, RFC 5667): what `mount -o rdma` uses unless told
/// otherwise.
pub const NFS_RDMA_PORT: u16 = 20049;

/// An NFS mount whose transport is RPC over RDMA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NfsRdmaMount {
    /// Where it is mounted, unescaped (`/mnt/nfs data`).
    pub mount_point: String,
    /// The mount source (`192.0.2.10:/export`).
    pub source: String,
    /// `nfs` or `nfs4`.
    pub fstype: String,
    /// `vers=` (`3`, `4.2`), when shown.
    pub version: Option<String>,
    /// `addr=`: the server's address, what the transport connects to.
    pub server: String,
    /// `port=`, when shown (the kernel shows it unless it is NFS's own 2049).
    pub port: Option<u16>,
    /// `clientaddr=` (NFSv4): the address the client gave the server for callbacks.
    pub client_addr: Option<String>,
    /// `rdma` or `rdma6`.
    pub proto: String,
    /// The RDMA device and port its transport runs on, when placed.
    pub placed: Option<(String, u32)>,
}

impl NfsRdmaMount {
    /// `/mnt/data (192.0.2.10:/export, nfs4 4.2)`.
    pub fn describe(&self) -> String {
        let vers = self
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        format!(
            "{} ({}, {}{vers})",
            self.mount_point, self.source, self.fstype
        )
    }

    /// The same mount, as another reading shows it: same mount point, same server.
    pub fn same_mount(&self, other: &NfsRdmaMount) -> bool {
        self.mount_point == other.mount_point && self.server == other.server
    }
}

/// Why a line of mountinfo was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountinfoSkip {
    /// Its number, from 1.
    pub line: usize,
    /// What was wrong.
    pub reason: MountinfoError,
}

impl fmt::Display for MountinfoSkip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mountinfo line {}: {}", self.line, self.reason)
    }
}

/// Why a mountinfo line is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountinfoError {
    /// Fewer than the ten fields every line has (six, the separator, three).
    TooFewFields {
        /// How many there were.
        found: usize,
    },
    /// No `-` after the optional fields.
    NoSeparator,
    /// An NFS over RDMA mount without `addr=` in its super options.
    NoServerAddress {
        /// Its mount point.
        mount_point: String,
    },
    /// `port=` is not a port number.
    BadPort {
        /// Its mount point.
        mount_point: String,
        /// The text.
        text: String,
    },
}

impl fmt::Display for MountinfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountinfoError::TooFewFields { found } => {
                write!(f, "{found} fields, a mountinfo line has at least 10")
            }
            MountinfoError::NoSeparator => f.write_str("no '-' after the optional fields"),
            MountinfoError::NoServerAddress { mount_point } => {
                write!(f, "NFS over RDMA mount {mount_point} has no addr= option")
            }
            MountinfoError::BadPort { mount_point, text } => {
                write!(
                    f,
                    "NFS over RDMA mount {mount_point}: port={text} is not a port"
                )
            }
        }
    }
}

impl std::error::Error for MountinfoError {}

/// What a whole mountinfo text gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedMounts {
    /// The NFS over RDMA mounts, in the file's order.
    pub mounts: Vec<NfsRdmaMount>,
    /// The lines that could not be read (other mounts are not skips: they are not ours).
    pub skipped: Vec<MountinfoSkip>,
}

/// Reads a whole `/proc/self/mountinfo`.
pub fn parse_mountinfo(text: &str) -> ParsedMounts {
    let mut out = ParsedMounts::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(Some(m)) => out.mounts.push(m),
            Ok(None) => {}
            Err(reason) => out.skipped.push(MountinfoSkip {
                line: i + 1,
                reason,
            }),
        }
    }
    out
}

/// Reads one mountinfo line: `Ok(None)` for a mount that is not NFS over RDMA.
pub fn parse_line(line: &str) -> Result<Option<NfsRdmaMount>, MountinfoError> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    if fields.len() < 10 {
        return Err(MountinfoError::TooFewFields {
            found: fields.len(),
        });
    }
    // Optional fields (`shared:N`, `master:N`, `propagate_from:N`, `unbindable`) run from
    // the seventh field to the `-`.
    let sep = fields[6..]
        .iter()
        .position(|f| *f == "-")
        .map(|p| p + 6)
        .ok_or(MountinfoError::NoSeparator)?;
    let rest = &fields[sep + 1..];
    let [fstype, source, supers, ..] = rest else {
        return Err(MountinfoError::TooFewFields {
            found: fields.len(),
        });
    };
    if !matches!(*fstype, "nfs" | "nfs4") {
        return Ok(None);
    }
    let opt = |key: &str| {
        supers
            .split(',')
            .find_map(|o| o.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
    };
    let Some(proto) = opt("proto").filter(|p| matches!(*p, "rdma" | "rdma6")) else {
        return Ok(None);
    };
    let mount_point = unescape(fields[4]);
    let server =
        opt("addr")
            .filter(|a| !a.is_empty())
            .ok_or_else(|| MountinfoError::NoServerAddress {
                mount_point: mount_point.clone(),
            })?;
    let port = opt("port")
        .map(|p| {
            p.parse::<u16>().map_err(|_| MountinfoError::BadPort {
                mount_point: mount_point.clone(),
                text: p.to_string(),
            })
        })
        .transpose()?;
    Ok(Some(NfsRdmaMount {
        mount_point,
        source: unescape(source),
        fstype: (*fstype).to_string(),
        version: opt("vers").map(str::to_string),
        server: unescape(server),
        port,
        client_addr: opt("clientaddr").map(unescape),
        proto: proto.to_string(),
        placed: None,
    }))
}

/// Undoes mountinfo's `\ooo` escapes (`mangle` in fs/proc_namespace.c escapes space, tab,
/// newline and backslash). A backslash not followed by three octal digits stays as it is.
pub fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Places each mount on the RDMA port of rpcrdma's connection to its server (a row of the
/// CM id table owned by `rpcrdma`, not a listener, whose destination is the mount's `addr=`
/// and, when the mount shows one, `port=`; a row whose source is the mount's `clientaddr=`
/// is preferred when several match). A mount with no such row (an idle transport,
/// disconnected until its next RPC) keeps the placement it had in `before`, matched by
/// [`NfsRdmaMount::same_mount`].
pub fn place_mounts(mounts: &mut [NfsRdmaMount], cm_ids: &[CmIdEntry], before: &[NfsRdmaMount]) {
    for m in mounts.iter_mut() {
        let server = m.server.parse::<IpAddr>().ok();
        let client = m
            .client_addr
            .as_deref()
            .and_then(|c| c.parse::<IpAddr>().ok());
        let rows: Vec<&CmIdEntry> = cm_ids
            .iter()
            .filter(|id| {
                id.kern_name.as_deref() == Some("rpcrdma")
                    && id.port.is_some()
                    && id.lqpn.is_some()
                    && id
                        .dst_addr
                        .as_ref()
                        .and_then(|a| a.socket_addr())
                        .is_some_and(|d| {
                            Some(d.ip()) == server && m.port.is_none_or(|p| p == d.port())
                        })
            })
            .collect();
        let found = rows
            .iter()
            .find(|id| {
                client.is_some()
                    && id
                        .src_addr
                        .as_ref()
                        .and_then(|a| a.socket_addr())
                        .map(|s| s.ip())
                        == client
            })
            .or_else(|| rows.first());
        m.placed = match found {
            Some(id) => Some((id.dev_name.clone(), id.port.unwrap_or(1))),
            None => before
                .iter()
                .find(|b| b.same_mount(m))
                .and_then(|b| b.placed.clone()),
        };
    }
}

/// The mounts placed on `device`.
pub fn on_device<'a>(
    mounts: &'a [NfsRdmaMount],
    device: &'a str,
) -> impl Iterator<Item = &'a NfsRdmaMount> + 'a {
    mounts
        .iter()
        .filter(move |m| m.placed.as_ref().is_some_and(|(d, _)| d == device))
}

/// `/mnt/a (192.0.2.10:/export, nfs4 4.2), /mnt/b (…)`, or `none`.
pub fn list_mounts(mounts: &[NfsRdmaMount]) -> String {
    if mounts.is_empty() {
        return "none".into();
    }
    mounts
        .iter()
        .map(NfsRdmaMount::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a bounded `stat` of a remembered mount point said after the re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum NfsCheckResult {
    /// The stat returned: the server answered an RPC over the new transport.
    Answered {
        /// Milliseconds from the check's start to the answer.
        after_ms: u64,
    },
    /// No stat returned within the check's bound: the mount point is left to hang (a stat of
    /// a hard mount waits for the server in D state) and the daemon does not wait for it.
    NoAnswer {
        /// The bound, in seconds.
        waited_s: u64,
        /// A stat from an earlier check was still pending: no second one was started.
        earlier_pending: bool,
    },
    /// Every stat within the bound failed; the last error.
    Error {
        /// The OS error, in words (`Stale file handle (os error 116)`).
        errno: String,
    },
}

impl NfsCheckResult {
    /// The metrics label (`nfs_checks_total{result}`).
    pub fn label(&self) -> &'static str {
        match self {
            NfsCheckResult::Answered { .. } => "answered",
            NfsCheckResult::NoAnswer { .. } => "no-answer",
            NfsCheckResult::Error { .. } => "error",
        }
    }

    /// Every label, in the order metrics list them.
    pub const LABELS: [&'static str; 3] = ["answered", "no-answer", "error"];

    /// The mount answered.
    pub fn answered(&self) -> bool {
        matches!(self, NfsCheckResult::Answered { .. })
    }
}

impl fmt::Display for NfsCheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NfsCheckResult::Answered { after_ms } => {
                write!(f, "answered a stat after {after_ms} ms")
            }
            NfsCheckResult::NoAnswer {
                waited_s,
                earlier_pending: false,
            } => write!(f, "did not answer a stat within {waited_s} s"),
            NfsCheckResult::NoAnswer {
                waited_s,
                earlier_pending: true,
            } => write!(
                f,
                "did not answer within {waited_s} s (a stat from an earlier check still hangs; \
                 no second one was started)"
            ),
            NfsCheckResult::Error { errno } => write!(f, "stat failed: {errno}"),
        }
    }
}

/// One remembered mount and what its check said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NfsCheckReport {
    /// As remembered before the re-creation.
    pub mount: NfsRdmaMount,
    /// What the check said.
    pub result: NfsCheckResult,
}

impl fmt::Display for NfsCheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.mount.describe(), self.result)
    }
}

#[cfg(test)]
mod tests;
