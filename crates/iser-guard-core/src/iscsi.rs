//! Pure parsers of `iscsiadm` output, and its exit codes.
//!
//! This module owns the understanding of what open-iscsi prints; running `iscsiadm` (with
//! timeouts) is the job of `io`. Formats follow open-iscsi's `usr/session_info.c`
//! (`session_info_print_flat`, `session_info_print_tree`), `usr/iface.c` (`iface_print`),
//! `usr/iscsiadm.c` (login/logout lines) and `include/iscsi_err.h` (exit codes); see
//! reference/kernel-facts.md §4 and the real captures under tests/fixtures/iscsi/.
//!
//! Parsers never fail as a whole and never panic: a line they cannot use is skipped and
//! reported in [`ParsedListing::skipped`] with its line number and a typed [`SkipReason`], so the
//! caller can log it and count it.
//!
//! Entry points:
//! - [`parse_session_list`]: `iscsiadm -m session` → [`SessionSummary`] per line;
//! - [`parse_session_tree`]: `iscsiadm -m session -P 3` (also `-P 1`/`-P 2`) → [`SessionDetail`];
//! - [`parse_discovery`]: `iscsiadm -m discovery -t st` → [`DiscoveredTarget`];
//! - [`parse_login_output`]: login/logout progress lines and reported errors → [`LoginLine`];
//! - [`IscsiadmStatus`]: the exit codes 0..=33 and how to react to them.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

/// What open-iscsi prints for a value it does not have (`UNKNOWN_VALUE`).
pub(crate) const UNKNOWN_VALUE: &str = "<empty>";

/// Longest line kept verbatim in a [`Skipped`] record; longer ones are cut (on a char
/// boundary) so hostile input cannot blow up logs.
const MAX_KEPT_LINE: usize = 200;

// ---------------------------------------------------------------------------------------------
// Parse results
// ---------------------------------------------------------------------------------------------

/// The result of a tolerant parse of an iscsiadm listing: what could be understood, and what
/// was skipped and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedListing<T> {
    /// The items understood, in input order.
    pub items: Vec<T>,
    /// Lines that were skipped, with why.
    pub skipped: Vec<Skipped>,
}

impl<T> Default for ParsedListing<T> {
    fn default() -> Self {
        ParsedListing {
            items: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

impl<T> ParsedListing<T> {
    /// True if nothing was skipped.
    pub fn is_clean(&self) -> bool {
        self.skipped.is_empty()
    }

    fn skip(&mut self, line_no: usize, line: &str, reason: SkipReason) {
        self.skipped.push(Skipped {
            line_no,
            line: truncate(line),
            reason,
        });
    }
}

/// One skipped input line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// 1-based line number in the input.
    pub line_no: usize,
    /// The line (cut to 200 bytes).
    pub line: String,
    /// Why it was skipped.
    pub reason: SkipReason,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: {} ({:?})",
            self.line_no, self.reason, self.line
        )
    }
}

/// Why a line was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SkipReason {
    /// The line matches no known format.
    Unrecognised,
    /// The line has a known label but a value that cannot be used.
    BadValue {
        /// What the value was for (`SID`, `portal`, `Lun`, …).
        field: String,
        /// Why it is unusable.
        problem: String,
    },
    /// A diagnostic of iscsiadm itself (`iscsiadm: No active sessions.`); the exit code says
    /// more.
    IscsiadmMessage,
    /// Session data that belongs to no session (before any `Target:` line, or a session
    /// block that never got a `SID:`); the line given is the block's first line.
    Orphan {
        /// What is missing.
        missing: String,
    },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Unrecognised => f.write_str("unrecognised line"),
            SkipReason::BadValue { field, problem } => write!(f, "bad {field}: {problem}"),
            SkipReason::IscsiadmMessage => f.write_str("iscsiadm diagnostic"),
            SkipReason::Orphan { missing } => write!(f, "session data without {missing}"),
        }
    }
}

fn truncate(line: &str) -> String {
    if line.len() <= MAX_KEPT_LINE {
        return line.to_string();
    }
    let mut end = MAX_KEPT_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line.get(..end).unwrap_or_default().to_string()
}

fn bad(field: &str, problem: impl Into<String>) -> SkipReason {
    SkipReason::BadValue {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// `None` for open-iscsi's "no value" spellings (`<empty>`, empty, `default`), else the text.
fn opt_value(v: &str) -> Option<String> {
    let v = v.trim();
    if v.is_empty() || v == UNKNOWN_VALUE || v == "default" || v == "[default]" {
        None
    } else {
        Some(v.to_string())
    }
}

// ---------------------------------------------------------------------------------------------
// Shared value types
// ---------------------------------------------------------------------------------------------

/// The iSCSI transport of a session or iface (sysfs transport name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// iSER: iSCSI over RDMA (`iser`).
    Iser,
    /// iSCSI over TCP (`tcp`).
    Tcp,
    /// Printed as `<empty>`: sysfs had no transport for the session.
    Unknown,
    /// Any other transport (`bnx2i`, `cxgb4i`, `qla4xxx`, `be2iscsi`, `qedi`, …).
    Other(String),
}

impl Transport {
    /// From the name iscsiadm prints.
    pub fn from_name(s: &str) -> Transport {
        match s.trim() {
            "iser" => Transport::Iser,
            "tcp" => Transport::Tcp,
            "" | UNKNOWN_VALUE => Transport::Unknown,
            other => Transport::Other(other.to_string()),
        }
    }

    /// The name iscsiadm prints.
    pub fn name(&self) -> &str {
        match self {
            Transport::Iser => "iser",
            Transport::Tcp => "tcp",
            Transport::Unknown => UNKNOWN_VALUE,
            Transport::Other(s) => s,
        }
    }

    /// True for iSER, the transport iser-guard protects.
    pub fn is_iser(&self) -> bool {
        *self == Transport::Iser
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A target portal as iscsiadm lists it: `address:port,tpgt`, IPv6 as `[address]:port,tpgt`
/// (the engine's portal, an address and a port, is [`crate::recovery::Portal`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListedPortal {
    /// The address, without brackets.
    pub address: String,
    /// The TCP port (3260 by default).
    pub port: u16,
    /// The target portal group tag.
    pub tpgt: i32,
}

impl ListedPortal {
    /// Parses `10.0.0.5:3260,1`, `[fe80::1]:3260,1` or `::ffff:10.0.0.5:3260,1` (iscsiadm
    /// brackets only addresses without a dot).
    pub fn parse(s: &str) -> Result<ListedPortal, String> {
        let s = s.trim();
        let (addr_port, tpgt) = s
            .rsplit_once(',')
            .ok_or_else(|| format!("'{s}' has no ',tpgt'"))?;
        let tpgt: i32 = tpgt
            .parse()
            .map_err(|_| format!("tpgt '{tpgt}' is not a number"))?;
        let (address, port) = split_addr_port(addr_port, ':')?;
        Ok(ListedPortal {
            address,
            port,
            tpgt,
        })
    }

    /// The address as an IP address, if it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        self.address.parse().ok()
    }

    /// Address and port, for probing, if the address is an IP address.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        Some(SocketAddr::new(self.ip()?, self.port))
    }
}

impl fmt::Display for ListedPortal {
    /// As iscsiadm prints it (brackets when the address has no dot).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.address.contains('.') {
            write!(f, "{}:{},{}", self.address, self.port, self.tpgt)
        } else {
            write!(f, "[{}]:{},{}", self.address, self.port, self.tpgt)
        }
    }
}

/// Splits `addr<sep>port` or `[addr]<sep>port` (the separator is `:` in portals, `,` in
/// login lines).
fn split_addr_port(s: &str, sep: char) -> Result<(String, u16), String> {
    let (addr, port) = if let Some(rest) = s.strip_prefix('[') {
        let (a, p) = rest
            .split_once(']')
            .ok_or_else(|| format!("'{s}' has no closing ']'"))?;
        let p = p
            .strip_prefix(sep)
            .ok_or_else(|| format!("'{s}' has no port after ']'"))?;
        (a, p)
    } else {
        s.rsplit_once(sep)
            .ok_or_else(|| format!("'{s}' has no port"))?
    };
    if addr.is_empty() {
        return Err(format!("'{s}' has an empty address"));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("port '{port}' is not a number 0..65535"))?;
    Ok((addr.to_string(), port))
}

/// The node type iscsiadm appends in parentheses (open-iscsi ≥ 2.0.874).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeType {
    /// A session created by iscsid (`non-flash`): the usual case.
    NonFlash,
    /// A session from an offload adapter's flash node (`flash`).
    Flash,
}

impl NodeType {
    fn parse(s: &str) -> Option<NodeType> {
        match s {
            "non-flash" => Some(NodeType::NonFlash),
            "flash" => Some(NodeType::Flash),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// iscsiadm -m session
// ---------------------------------------------------------------------------------------------

/// One line of `iscsiadm -m session`: `iser: [1] 10.0.0.5:3260,1 iqn.… (non-flash)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session's transport.
    pub transport: Transport,
    /// The session id (`sessionN` in sysfs).
    pub sid: u32,
    /// The persistent portal (address, port, tpgt).
    pub portal: ListedPortal,
    /// The target name (IQN/EUI/NAA).
    pub target: String,
    /// `(non-flash)` / `(flash)`; `None` with open-iscsi versions that do not print it.
    pub node_type: Option<NodeType>,
}

/// Parses the output of `iscsiadm -m session` (flat form, one session per line).
pub fn parse_session_list(text: &str) -> ParsedListing<SessionSummary> {
    let mut out = ParsedListing::default();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with("iscsiadm:") {
            out.skip(line_no, line, SkipReason::IscsiadmMessage);
            continue;
        }
        match parse_session_line(line) {
            Ok(s) => out.items.push(s),
            Err(r) => out.skip(line_no, line, r),
        }
    }
    out
}

/// Parses one flat session line.
pub fn parse_session_line(line: &str) -> Result<SessionSummary, SkipReason> {
    let (transport, rest) = line.split_once(": [").ok_or(SkipReason::Unrecognised)?;
    let (sid, rest) = rest.split_once("] ").ok_or(SkipReason::Unrecognised)?;
    let sid: u32 = sid
        .parse()
        .map_err(|_| bad("sid", format!("'{sid}' is not a session number")))?;
    let mut tokens = rest.split_whitespace();
    let portal = tokens.next().ok_or(SkipReason::Unrecognised)?;
    let portal = ListedPortal::parse(portal).map_err(|e| bad("portal", e))?;
    let target = tokens
        .next()
        .ok_or_else(|| bad("target", "missing"))?
        .to_string();
    let node_type = match tokens.next() {
        None => None,
        Some(t) => {
            let inner = t
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .ok_or_else(|| bad("node type", format!("'{t}' is not '(…)'")))?;
            Some(
                NodeType::parse(inner)
                    .ok_or_else(|| bad("node type", format!("unknown '{inner}'")))?,
            )
        }
    };
    if let Some(extra) = tokens.next() {
        return Err(bad("line", format!("unexpected trailing '{extra}'")));
    }
    Ok(SessionSummary {
        transport: Transport::from_name(transport),
        sid,
        portal,
        target,
        node_type,
    })
}

// ---------------------------------------------------------------------------------------------
// iscsiadm -m session -P 3
// ---------------------------------------------------------------------------------------------

/// The iface a session runs over (`Interface:` block, open-iscsi `iface_print`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfaceInfo {
    /// `Iface Name:` (`iser`, `default`, a custom iface name).
    pub name: Option<String>,
    /// `Iface Transport:`.
    pub transport: Option<Transport>,
    /// `Iface Initiatorname:`.
    pub initiator_name: Option<String>,
    /// `Iface IPaddress:`; `None` when not bound (`[default]`, `<empty>`).
    pub ip_address: Option<IpAddr>,
    /// `Iface HWaddress:`; `None` when not bound (`default`, `<empty>`).
    pub hw_address: Option<String>,
    /// `Iface Netdev:`; `None` when not bound (`default`, `<empty>`).
    pub netdev: Option<String>,
}

/// iscsid's connection state (`iSCSI Connection State:`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionState {
    /// `FREE`.
    Free,
    /// `TRANSPORT WAIT`: iscsid is trying to reconnect.
    TransportWait,
    /// `IN LOGIN`.
    InLogin,
    /// `LOGGED IN`.
    LoggedIn,
    /// `IN LOGOUT`.
    InLogout,
    /// `LOGOUT REQUESTED`.
    LogoutRequested,
    /// `CLEANUP WAIT`.
    CleanupWait,
    /// `Unknown`: iscsid did not answer (or does not manage the session, e.g. qla4xxx).
    Unknown,
    /// Anything else, kept verbatim.
    Other(String),
}

impl ConnectionState {
    /// From the text iscsiadm prints.
    pub fn parse(s: &str) -> ConnectionState {
        match s.trim() {
            "FREE" => ConnectionState::Free,
            "TRANSPORT WAIT" => ConnectionState::TransportWait,
            "IN LOGIN" => ConnectionState::InLogin,
            "LOGGED IN" => ConnectionState::LoggedIn,
            "IN LOGOUT" => ConnectionState::InLogout,
            "LOGOUT REQUESTED" => ConnectionState::LogoutRequested,
            "CLEANUP WAIT" => ConnectionState::CleanupWait,
            "Unknown" => ConnectionState::Unknown,
            other => ConnectionState::Other(other.to_string()),
        }
    }
}

/// The kernel's session state (`iSCSI Session State:`, sysfs `iscsi_session/state`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListedSessionState {
    /// `LOGGED_IN`.
    LoggedIn,
    /// `FAILED`: the connection failed, recovery is running (I/O is queued).
    Failed,
    /// `FREE`: recovery timed out or the session is being torn down (I/O fails).
    Free,
    /// `Unknown`: sysfs could not be read.
    Unknown,
    /// Anything else, kept verbatim.
    Other(String),
}

impl ListedSessionState {
    /// From the text iscsiadm prints.
    pub fn parse(s: &str) -> ListedSessionState {
        match s.trim() {
            "LOGGED_IN" => ListedSessionState::LoggedIn,
            "FAILED" => ListedSessionState::Failed,
            "FREE" => ListedSessionState::Free,
            "Unknown" => ListedSessionState::Unknown,
            other => ListedSessionState::Other(other.to_string()),
        }
    }
}

/// iscsid's internal session state (`Internal iscsid Session State:`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IscsidState {
    /// `NO CHANGE`.
    NoChange,
    /// `CLEANUP`.
    Cleanup,
    /// `REOPEN`: iscsid is re-opening the connection.
    Reopen,
    /// `REDIRECT`.
    Redirect,
    /// `Unknown`.
    Unknown,
    /// Anything else, kept verbatim.
    Other(String),
}

impl IscsidState {
    /// From the text iscsiadm prints.
    pub fn parse(s: &str) -> IscsidState {
        match s.trim() {
            "NO CHANGE" => IscsidState::NoChange,
            "CLEANUP" => IscsidState::Cleanup,
            "REOPEN" => IscsidState::Reopen,
            "REDIRECT" => IscsidState::Redirect,
            "Unknown" => IscsidState::Unknown,
            other => IscsidState::Other(other.to_string()),
        }
    }
}

/// A SCSI device's state (sysfs `device/state`, kernel `sdev_states`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceState {
    /// `created`.
    Created,
    /// `running`: I/O flows.
    Running,
    /// `cancel`.
    Cancel,
    /// `deleted`.
    Deleted,
    /// `quiesce`.
    Quiesce,
    /// `offline`.
    Offline,
    /// `transport-offline`: the session's recovery timed out; I/O fails.
    TransportOffline,
    /// `blocked`: the session is recovering; I/O is queued.
    Blocked,
    /// `created-blocked`.
    CreatedBlocked,
    /// `Unknown`: sysfs could not be read.
    Unknown,
    /// Anything else, kept verbatim.
    Other(String),
}

impl DeviceState {
    /// From the text iscsiadm prints.
    pub fn parse(s: &str) -> DeviceState {
        match s.trim() {
            "created" => DeviceState::Created,
            "running" => DeviceState::Running,
            "cancel" => DeviceState::Cancel,
            "deleted" => DeviceState::Deleted,
            "quiesce" => DeviceState::Quiesce,
            "offline" => DeviceState::Offline,
            "transport-offline" => DeviceState::TransportOffline,
            "blocked" => DeviceState::Blocked,
            "created-blocked" => DeviceState::CreatedBlocked,
            "Unknown" => DeviceState::Unknown,
            other => DeviceState::Other(other.to_string()),
        }
    }

    /// The word iscsiadm (and sysfs) print: the inverse of [`DeviceState::parse`].
    pub fn name(&self) -> &str {
        match self {
            DeviceState::Created => "created",
            DeviceState::Running => "running",
            DeviceState::Cancel => "cancel",
            DeviceState::Deleted => "deleted",
            DeviceState::Quiesce => "quiesce",
            DeviceState::Offline => "offline",
            DeviceState::TransportOffline => "transport-offline",
            DeviceState::Blocked => "blocked",
            DeviceState::CreatedBlocked => "created-blocked",
            DeviceState::Unknown => "Unknown",
            DeviceState::Other(o) => o,
        }
    }

    /// True when I/O to the device fails rather than waits (`offline`,
    /// `transport-offline`, `deleted`, `cancel`).
    pub(crate) fn rejects_io(&self) -> bool {
        matches!(
            self,
            DeviceState::Offline
                | DeviceState::TransportOffline
                | DeviceState::Deleted
                | DeviceState::Cancel
        )
    }
}

/// One LUN of a session (`scsiH Channel 00 Id T Lun: L` and its `Attached scsi disk` line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScsiDevice {
    /// SCSI host number.
    pub host: u32,
    /// Channel (iscsiadm always prints `00`).
    pub channel: u32,
    /// Target id.
    pub id: u32,
    /// LUN.
    pub lun: u64,
    /// The block device name (`sda`), if the LUN has one.
    pub disk: Option<String>,
    /// The device's state, when a disk line gave it.
    pub state: Option<DeviceState>,
}

impl ScsiDevice {
    /// `H:C:T:L`, as the kernel names SCSI devices (`sd 0:0:0:0: …`).
    pub fn hctl(&self) -> String {
        format!("{}:{}:{}:{}", self.host, self.channel, self.id, self.lun)
    }
}

/// One session of `iscsiadm -m session -P 3` (fields of lower levels are `None`/empty when
/// parsing `-P 1` or `-P 2`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionDetail {
    /// The target name.
    pub target: String,
    /// `(non-flash)` / `(flash)` after the target, if printed.
    pub node_type: Option<NodeType>,
    /// `Current Portal:` (the address actually connected to).
    pub current_portal: Option<ListedPortal>,
    /// `Persistent Portal:` (the address from the node record).
    pub persistent_portal: Option<ListedPortal>,
    /// The `Interface:` block.
    pub iface: IfaceInfo,
    /// `SID:`.
    pub sid: u32,
    /// `iSCSI Connection State:`.
    pub connection_state: Option<ConnectionState>,
    /// `iSCSI Session State:`.
    pub session_state: Option<ListedSessionState>,
    /// `Internal iscsid Session State:`.
    pub iscsid_state: Option<IscsidState>,
    /// `Recovery Timeout:` in seconds (replacement_timeout).
    pub recovery_timeout: Option<i32>,
    /// `Host Number:` (the SCSI host), when known.
    pub host_number: Option<u32>,
    /// The host's state after `Host Number: N\tState:`.
    pub host_state: Option<String>,
    /// The attached LUNs.
    pub devices: Vec<ScsiDevice>,
}

impl SessionDetail {
    /// The transport, from the iface block.
    pub fn transport(&self) -> Transport {
        self.iface.transport.clone().unwrap_or(Transport::Unknown)
    }

    /// True when the kernel says the session is logged in and iscsid agrees.
    pub fn is_logged_in(&self) -> bool {
        self.session_state == Some(ListedSessionState::LoggedIn)
            && matches!(
                self.connection_state,
                None | Some(ConnectionState::LoggedIn)
            )
    }

    /// What identifies this session's node record, for `iscsiadm -m node … --login`:
    /// the target, the persistent portal (else the current one) and the iface name.
    pub fn node_id(&self) -> Option<NodeId> {
        let portal = self
            .persistent_portal
            .as_ref()
            .or(self.current_portal.as_ref())?;
        Some(NodeId {
            target: self.target.clone(),
            address: portal.address.clone(),
            port: portal.port,
            iface: self.iface.name.clone(),
        })
    }

    /// Disks whose I/O fails right now (offline, transport-offline …).
    pub fn failing_devices(&self) -> impl Iterator<Item = &ScsiDevice> {
        self.devices
            .iter()
            .filter(|d| d.state.as_ref().is_some_and(DeviceState::rejects_io))
    }
}

/// A node record's identity: what `iscsiadm -m node -T … -p … -I …` needs to log a session
/// back in. Journaled before a recovery so sessions can be restored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeId {
    /// The target name (`-T`).
    pub target: String,
    /// The portal address (no brackets).
    pub address: String,
    /// The portal port.
    pub port: u16,
    /// The iface name (`-I`), if known.
    pub iface: Option<String>,
}

impl NodeId {
    /// The `-p` argument: `addr:port`; any IPv6 address (even IPv4-mapped) as
    /// `[addr]:port`, which iscsiadm always understands.
    pub fn portal_arg(&self) -> String {
        if self.address.contains(':') {
            format!("[{}]:{}", self.address, self.port)
        } else {
            format!("{}:{}", self.address, self.port)
        }
    }
}

impl SessionSummary {
    /// The node identity (without the iface, which the flat list does not show).
    pub fn node_id(&self) -> NodeId {
        NodeId {
            target: self.target.clone(),
            address: self.portal.address.clone(),
            port: self.portal.port,
            iface: None,
        }
    }
}

/// A session being assembled while parsing the tree.
#[derive(Default)]
struct SessionDraft {
    first_line: Option<(usize, String)>,
    current_portal: Option<ListedPortal>,
    persistent_portal: Option<ListedPortal>,
    iface: IfaceInfo,
    sid: Option<u32>,
    connection_state: Option<ConnectionState>,
    session_state: Option<ListedSessionState>,
    iscsid_state: Option<IscsidState>,
    recovery_timeout: Option<i32>,
    host_number: Option<u32>,
    host_state: Option<String>,
    devices: Vec<ScsiDevice>,
}

impl SessionDraft {
    fn touch(&mut self, line_no: usize, line: &str) {
        if self.first_line.is_none() {
            self.first_line = Some((line_no, line.to_string()));
        }
    }
}

/// Parser state of the tree: the target and portals apply to every following session until
/// changed (iscsiadm prints them once per target / portal).
#[derive(Default)]
struct TreeParser {
    out: ParsedListing<SessionDetail>,
    target: Option<(String, Option<NodeType>)>,
    current_portal: Option<ListedPortal>,
    persistent_portal: Option<ListedPortal>,
    pending: Option<SessionDraft>,
}

impl TreeParser {
    /// The session being filled, started with the current portal context if needed.
    fn pending(&mut self, line_no: usize, line: &str) -> &mut SessionDraft {
        let (cp, pp) = (&self.current_portal, &self.persistent_portal);
        let p = self.pending.get_or_insert_with(|| SessionDraft {
            current_portal: cp.clone(),
            persistent_portal: pp.clone(),
            ..SessionDraft::default()
        });
        p.touch(line_no, line);
        p
    }

    /// Ends the session being filled, if any.
    fn finish(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let (line_no, line) = p.first_line.clone().unwrap_or_default();
        let Some((target, node_type)) = self.target.clone() else {
            self.out.skip(
                line_no,
                &line,
                SkipReason::Orphan {
                    missing: "a preceding 'Target:' line".into(),
                },
            );
            return;
        };
        let Some(sid) = p.sid else {
            self.out.skip(
                line_no,
                &line,
                SkipReason::Orphan {
                    missing: "a 'SID:' line".into(),
                },
            );
            return;
        };
        self.out.items.push(SessionDetail {
            target,
            node_type,
            current_portal: p.current_portal,
            persistent_portal: p.persistent_portal,
            iface: p.iface,
            sid,
            connection_state: p.connection_state,
            session_state: p.session_state,
            iscsid_state: p.iscsid_state,
            recovery_timeout: p.recovery_timeout,
            host_number: p.host_number,
            host_state: p.host_state,
            devices: p.devices,
        });
    }

    /// Ends the pending session if it already has a SID: a new session is starting.
    fn finish_if_started(&mut self) {
        if self.pending.as_ref().is_some_and(|p| p.sid.is_some()) {
            self.finish();
        }
    }

    fn line(&mut self, line_no: usize, raw: &str) {
        let line = raw.trim();
        if line.is_empty() {
            // iscsiadm prints an empty line instead of the portals when a session has the
            // same target and portal as the previous one.
            self.finish_if_started();
            return;
        }
        if line.starts_with("iscsiadm:") {
            self.out.skip(line_no, raw, SkipReason::IscsiadmMessage);
            return;
        }
        if line.bytes().all(|b| b == b'*') {
            return;
        }
        if let Some(v) = line.strip_prefix("Target:") {
            self.finish();
            self.current_portal = None;
            self.persistent_portal = None;
            match parse_target_header(v) {
                Ok(t) => self.target = Some(t),
                Err(r) => {
                    self.target = None;
                    self.out.skip(line_no, raw, r);
                }
            }
            return;
        }
        if let Some(v) = line.strip_prefix("Current Portal:") {
            self.finish();
            self.persistent_portal = None;
            match ListedPortal::parse(v) {
                Ok(p) => self.current_portal = Some(p),
                Err(e) => {
                    self.current_portal = None;
                    self.out.skip(line_no, raw, bad("Current Portal", e));
                }
            }
            return;
        }
        if let Some(v) = line.strip_prefix("Persistent Portal:") {
            match ListedPortal::parse(v) {
                Ok(p) => {
                    self.persistent_portal = Some(p.clone());
                    if let Some(pend) = self.pending.as_mut() {
                        pend.persistent_portal = Some(p);
                    }
                }
                Err(e) => self.out.skip(line_no, raw, bad("Persistent Portal", e)),
            }
            return;
        }
        if line == "Interface:" {
            // Each session's block starts here; anything still pending is a previous,
            // incomplete block (reported as an orphan if it never got a SID).
            self.finish();
            self.pending(line_no, raw);
            return;
        }
        if let Some(v) = line.strip_prefix("SID:") {
            self.finish_if_started();
            match v.trim().parse::<u32>() {
                Ok(sid) => self.pending(line_no, raw).sid = Some(sid),
                Err(_) => self.out.skip(
                    line_no,
                    raw,
                    bad("SID", format!("'{}' is not a number", v.trim())),
                ),
            }
            return;
        }
        if let Some(v) = line.strip_prefix("Iface ") {
            self.iface_line(line_no, raw, v);
            return;
        }
        if let Some(v) = line.strip_prefix("iSCSI Connection State:") {
            self.pending(line_no, raw).connection_state = Some(ConnectionState::parse(v));
            return;
        }
        if let Some(v) = line.strip_prefix("iSCSI Session State:") {
            self.pending(line_no, raw).session_state = Some(ListedSessionState::parse(v));
            return;
        }
        if let Some(v) = line.strip_prefix("Internal iscsid Session State:") {
            self.pending(line_no, raw).iscsid_state = Some(IscsidState::parse(v));
            return;
        }
        if let Some(v) = line.strip_prefix("Recovery Timeout:") {
            let v = v.trim();
            if v == UNKNOWN_VALUE {
                return;
            }
            match v.parse::<i32>() {
                Ok(t) => self.pending(line_no, raw).recovery_timeout = Some(t),
                Err(_) => self.out.skip(
                    line_no,
                    raw,
                    bad("Recovery Timeout", format!("'{v}' is not a number")),
                ),
            }
            return;
        }
        if let Some(v) = line.strip_prefix("Host Number:") {
            self.host_line(line_no, raw, v);
            return;
        }
        if line.starts_with("scsi") && line.contains(" Channel ") {
            match parse_lun_line(line) {
                Ok(d) => self.pending(line_no, raw).devices.push(d),
                Err(r) => self.out.skip(line_no, raw, r),
            }
            return;
        }
        if let Some(v) = line.strip_prefix("Attached scsi disk ") {
            self.disk_line(line_no, raw, v);
            return;
        }
        if is_ignored_line(line) {
            return;
        }
        self.out.skip(line_no, raw, SkipReason::Unrecognised);
    }

    fn iface_line(&mut self, line_no: usize, raw: &str, v: &str) {
        let Some((key, value)) = v.split_once(':') else {
            self.out.skip(line_no, raw, SkipReason::Unrecognised);
            return;
        };
        let value = value.trim();
        let ip = if key == "IPaddress" {
            let bare = value.trim_start_matches('[').trim_end_matches(']');
            match opt_value(bare) {
                None => None,
                Some(a) => match a.parse::<IpAddr>() {
                    Ok(ip) => Some(ip),
                    Err(_) => {
                        self.out.skip(
                            line_no,
                            raw,
                            bad("Iface IPaddress", format!("'{a}' is not an IP address")),
                        );
                        return;
                    }
                },
            }
        } else {
            None
        };
        let iface = &mut self.pending(line_no, raw).iface;
        match key {
            "Name" => iface.name = opt_value(value).or_else(|| named_default(value)),
            "Transport" => iface.transport = Some(Transport::from_name(value)),
            "Initiatorname" => iface.initiator_name = opt_value(value),
            "IPaddress" => iface.ip_address = ip,
            "HWaddress" => iface.hw_address = opt_value(value),
            "Netdev" => iface.netdev = opt_value(value),
            _ => self.out.skip(line_no, raw, SkipReason::Unrecognised),
        }
    }

    fn host_line(&mut self, line_no: usize, raw: &str, v: &str) {
        // "Host Number: 0\tState: running"
        let (num, state) = match v.split_once("State:") {
            Some((n, s)) => (n.trim(), Some(s.trim())),
            None => (v.trim(), None),
        };
        match num.parse::<u32>() {
            Ok(h) => {
                let p = self.pending(line_no, raw);
                p.host_number = Some(h);
                p.host_state = state.and_then(opt_value);
            }
            Err(_) => self.out.skip(
                line_no,
                raw,
                bad("Host Number", format!("'{num}' is not a number")),
            ),
        }
    }

    fn disk_line(&mut self, line_no: usize, raw: &str, v: &str) {
        // "sda\t\tState: running"
        let (disk, state) = match v.split_once("State:") {
            Some((d, s)) => (d.trim(), Some(DeviceState::parse(s))),
            None => (v.trim(), None),
        };
        if disk.is_empty() || disk.contains(char::is_whitespace) {
            self.out.skip(
                line_no,
                raw,
                bad("Attached scsi disk", format!("'{disk}' is not a name")),
            );
            return;
        }
        match self.pending.as_mut().and_then(|p| p.devices.last_mut()) {
            Some(dev) if dev.disk.is_none() => {
                dev.disk = Some(disk.to_string());
                dev.state = state;
            }
            _ => self.out.skip(
                line_no,
                raw,
                SkipReason::Orphan {
                    missing: "a preceding 'scsiN Channel … Lun:' line".into(),
                },
            ),
        }
    }
}

/// `Iface Name: default` is a real iface name (the default tcp iface), unlike the
/// "not bound" `default` of the address fields.
fn named_default(v: &str) -> Option<String> {
    (v == "default").then(|| v.to_string())
}

/// Labels of `-P 2/3` lines iser-guard does not need (timeouts besides recovery, CHAP,
/// negotiated parameters, headers).
fn is_ignored_line(line: &str) -> bool {
    const IGNORED: &[&str] = &[
        "iSCSI Transport Class version",
        "version ",
        "Timeouts:",
        "Target Reset Timeout:",
        "LUN Reset Timeout:",
        "Abort Timeout:",
        "CHAP:",
        "username:",
        "password:",
        "username_in:",
        "password_in:",
        "Negotiated iSCSI params:",
        "HeaderDigest:",
        "DataDigest:",
        "MaxRecvDataSegmentLength:",
        "MaxXmitDataSegmentLength:",
        "FirstBurstLength:",
        "MaxBurstLength:",
        "ImmediateData:",
        "InitialR2T:",
        "MaxOutstandingR2T:",
        "Attached SCSI devices:",
        // print_scsi_state() when the host cannot be found
        "Unavailable",
    ];
    IGNORED.iter().any(|p| line.starts_with(p))
}

/// `Target: iqn… (non-flash)` → name and node type.
fn parse_target_header(v: &str) -> Result<(String, Option<NodeType>), SkipReason> {
    let v = v.trim();
    let (name, node_type) = match v.rsplit_once(" (") {
        Some((name, rest)) => {
            let inner = rest
                .strip_suffix(')')
                .ok_or_else(|| bad("Target", format!("'{v}' has an unclosed '('")))?;
            let nt = NodeType::parse(inner)
                .ok_or_else(|| bad("Target", format!("unknown node type '{inner}'")))?;
            (name.trim(), Some(nt))
        }
        None => (v, None),
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(bad("Target", format!("'{name}' is not a target name")));
    }
    Ok((name.to_string(), node_type))
}

/// `scsi0 Channel 00 Id 0 Lun: 0`.
fn parse_lun_line(line: &str) -> Result<ScsiDevice, SkipReason> {
    let t: Vec<&str> = line.split_whitespace().collect();
    let [host, "Channel", channel, "Id", id, "Lun:", lun] = t.as_slice() else {
        return Err(SkipReason::Unrecognised);
    };
    let num = |field: &str, s: &str| -> Result<u64, SkipReason> {
        s.parse::<u64>()
            .map_err(|_| bad(field, format!("'{s}' is not a number")))
    };
    let host = host.strip_prefix("scsi").ok_or(SkipReason::Unrecognised)?;
    let small = |field: &str, s: &str| -> Result<u32, SkipReason> {
        u32::try_from(num(field, s)?).map_err(|_| bad(field, format!("'{s}' is too large")))
    };
    Ok(ScsiDevice {
        host: small("scsi host", host)?,
        channel: small("Channel", channel)?,
        id: small("Id", id)?,
        lun: num("Lun", lun)?,
        disk: None,
        state: None,
    })
}

/// Parses `iscsiadm -m session -P 3` (and the less detailed `-P 1`, `-P 2`).
///
/// Sessions sharing a target (and portal) are printed under one `Target:` (and one portal
/// pair, then an empty line per extra session); each [`SessionDetail`] gets its own copy.
pub fn parse_session_tree(text: &str) -> ParsedListing<SessionDetail> {
    let mut p = TreeParser::default();
    for (i, line) in text.lines().enumerate() {
        p.line(i + 1, line);
    }
    p.finish();
    p.out
}

// ---------------------------------------------------------------------------------------------
// Discovery and login/logout output
// ---------------------------------------------------------------------------------------------

/// One line of `iscsiadm -m discovery -t st`: `192.0.2.2:3260,1 iqn.…`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoveredTarget {
    /// The portal the target is reachable at.
    pub portal: ListedPortal,
    /// The target name.
    pub target: String,
}

/// Parses `iscsiadm -m discovery` / `-m node` listings (`portal,tpgt target` per line).
pub fn parse_discovery(text: &str) -> ParsedListing<DiscoveredTarget> {
    let mut out = ParsedListing::default();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with("iscsiadm:") {
            out.skip(line_no, line, SkipReason::IscsiadmMessage);
            continue;
        }
        let mut t = line.split_whitespace();
        let (Some(portal), Some(target), None) = (t.next(), t.next(), t.next()) else {
            out.skip(line_no, line, SkipReason::Unrecognised);
            continue;
        };
        match ListedPortal::parse(portal) {
            Ok(portal) => out.items.push(DiscoveredTarget {
                portal,
                target: target.to_string(),
            }),
            Err(e) => out.skip(line_no, line, bad("portal", e)),
        }
    }
    out
}

/// A `[iface: …, target: …, portal: addr,port]` or `[sid: N, target: …, portal: …]`
/// reference in login/logout output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRef {
    /// The iface, for login lines.
    pub iface: Option<String>,
    /// The session id, for logout lines.
    pub sid: Option<u32>,
    /// The target name.
    pub target: String,
    /// The portal address (no brackets).
    pub address: String,
    /// The portal port.
    pub port: u16,
}

/// What one login/logout output line says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoginLine {
    /// `Logging in to [iface: …, target: …, portal: …]`.
    LoggingIn(NodeRef),
    /// `Login to [...] successful.`
    LoginOk(NodeRef),
    /// `iscsiadm: Could not login to [...].`
    LoginFailed(NodeRef),
    /// `Logging out of session [sid: …, target: …, portal: …]`.
    LoggingOut(NodeRef),
    /// `Logout of [...] successful.`
    LogoutOk(NodeRef),
    /// `iscsiadm: Could not logout of [...].`
    LogoutFailed(NodeRef),
    /// `iscsiadm: initiator reported error (N - text)`: the reason of the failure before it.
    ReportedError(IscsiadmStatus),
    /// Any other `iscsiadm:` diagnostic, kept verbatim (without the prefix).
    Message(String),
}

/// Parses the output of `iscsiadm -m node … --login` / `--logout` (stdout and stderr
/// together, in order). Unknown lines are skipped.
pub fn parse_login_output(text: &str) -> ParsedListing<LoginLine> {
    let mut out = ParsedListing::default();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        match parse_login_line(line) {
            Ok(l) => out.items.push(l),
            Err(r) => out.skip(line_no, raw, r),
        }
    }
    out
}

fn parse_login_line(line: &str) -> Result<LoginLine, SkipReason> {
    type Ctor = fn(NodeRef) -> LoginLine;
    const FORMS: &[(&str, &str, Ctor)] = &[
        ("Logging in to [", "]", LoginLine::LoggingIn),
        ("Login to [", "] successful.", LoginLine::LoginOk),
        (
            "iscsiadm: Could not login to [",
            "].",
            LoginLine::LoginFailed,
        ),
        ("Logging out of session [", "]", LoginLine::LoggingOut),
        ("Logout of [", "] successful.", LoginLine::LogoutOk),
        (
            "iscsiadm: Could not logout of [",
            "].",
            LoginLine::LogoutFailed,
        ),
    ];
    for (prefix, suffix, ctor) in FORMS {
        if let Some(inner) = line
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(suffix))
        {
            return parse_node_ref(inner).map(ctor);
        }
    }
    if let Some(rest) = line.strip_prefix("iscsiadm: initiator reported error (") {
        let code = rest
            .split_once(" - ")
            .map(|(c, _)| c)
            .or_else(|| rest.split_once(')').map(|(c, _)| c))
            .unwrap_or(rest);
        return code
            .trim()
            .parse::<i32>()
            .map(|c| LoginLine::ReportedError(IscsiadmStatus::from_code(c)))
            .map_err(|_| bad("reported error", format!("'{code}' is not a code")));
    }
    if let Some(rest) = line.strip_prefix("iscsiadm: ") {
        return Ok(LoginLine::Message(rest.to_string()));
    }
    Err(SkipReason::Unrecognised)
}

/// `iface: iser, target: iqn…, portal: 192.0.2.2,3260` or `sid: 2, target: …, portal: …`.
fn parse_node_ref(inner: &str) -> Result<NodeRef, SkipReason> {
    let mut iface = None;
    let mut sid = None;
    let mut target = None;
    let mut portal = None;
    // The portal is last and is itself "addr,port": split on ", " (with the space) only.
    for part in inner.split(", ") {
        let (k, v) = part
            .split_once(": ")
            .ok_or_else(|| bad("login line", format!("'{part}' is not 'key: value'")))?;
        match k {
            "iface" => iface = Some(v.to_string()),
            "sid" => {
                sid = Some(
                    v.parse::<u32>()
                        .map_err(|_| bad("sid", format!("'{v}' is not a number")))?,
                )
            }
            "target" => target = Some(v.to_string()),
            "portal" => portal = Some(split_addr_port(v, ',').map_err(|e| bad("portal", e))?),
            _ => return Err(bad("login line", format!("unknown key '{k}'"))),
        }
    }
    let target = target.ok_or_else(|| bad("login line", "no target"))?;
    let (address, port) = portal.ok_or_else(|| bad("login line", "no portal"))?;
    Ok(NodeRef {
        iface,
        sid,
        target,
        address,
        port,
    })
}

// ---------------------------------------------------------------------------------------------
// Exit codes
// ---------------------------------------------------------------------------------------------

/// iscsiadm's exit codes (open-iscsi `include/iscsi_err.h`, `ISCSI_ERR_*`), with the
/// messages of `usr/iscsi_err.c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IscsiadmStatus {
    /// 0 `ISCSI_SUCCESS`.
    Success,
    /// 1 `ISCSI_ERR`: unknown error.
    Err,
    /// 2 `ISCSI_ERR_SESS_NOT_FOUND`.
    SessNotFound,
    /// 3 `ISCSI_ERR_NOMEM`.
    Nomem,
    /// 4 `ISCSI_ERR_TRANS`: connection failure.
    Trans,
    /// 5 `ISCSI_ERR_LOGIN`: iSCSI login failure.
    Login,
    /// 6 `ISCSI_ERR_IDBM`: node database failure.
    Idbm,
    /// 7 `ISCSI_ERR_INVAL`: invalid parameter.
    Inval,
    /// 8 `ISCSI_ERR_TRANS_TIMEOUT`: connection timed out.
    TransTimeout,
    /// 9 `ISCSI_ERR_INTERNAL`.
    Internal,
    /// 10 `ISCSI_ERR_LOGOUT`: logout failure.
    Logout,
    /// 11 `ISCSI_ERR_PDU_TIMEOUT`: iSCSI PDU timed out.
    PduTimeout,
    /// 12 `ISCSI_ERR_TRANS_NOT_FOUND`: transport module not loaded.
    TransNotFound,
    /// 13 `ISCSI_ERR_ACCESS`: daemon access denied.
    Access,
    /// 14 `ISCSI_ERR_TRANS_CAPS`: transport lacks a capability.
    TransCaps,
    /// 15 `ISCSI_ERR_SESS_EXISTS`: already logged in.
    SessExists,
    /// 16 `ISCSI_ERR_INVALID_MGMT_REQ`.
    InvalidMgmtReq,
    /// 17 `ISCSI_ERR_ISNS_UNAVAILABLE`.
    IsnsUnavailable,
    /// 18 `ISCSI_ERR_ISCSID_COMM_ERR`: could not talk to iscsid.
    IscsidCommErr,
    /// 19 `ISCSI_ERR_FATAL_LOGIN`: non-retryable login failure.
    FatalLogin,
    /// 20 `ISCSI_ERR_ISCSID_NOTCONN`: could not connect to iscsid.
    IscsidNotconn,
    /// 21 `ISCSI_ERR_NO_OBJS_FOUND`: no session / record found.
    NoObjsFound,
    /// 22 `ISCSI_ERR_SYSFS_LOOKUP`.
    SysfsLookup,
    /// 23 `ISCSI_ERR_HOST_NOT_FOUND`.
    HostNotFound,
    /// 24 `ISCSI_ERR_LOGIN_AUTH_FAILED`: authentication failed.
    LoginAuthFailed,
    /// 25 `ISCSI_ERR_ISNS_QUERY`.
    IsnsQuery,
    /// 26 `ISCSI_ERR_ISNS_REG_FAILED`.
    IsnsRegFailed,
    /// 27 `ISCSI_ERR_OP_NOT_SUPP`.
    OpNotSupp,
    /// 28 `ISCSI_ERR_BUSY`: device or resource in use.
    Busy,
    /// 29 `ISCSI_ERR_AGAIN`: failed, a retry may succeed.
    Again,
    /// 30 `ISCSI_ERR_UNKNOWN_DISCOVERY_TYPE`.
    UnknownDiscoveryType,
    /// 31 `ISCSI_ERR_CHILD_TERMINATED`.
    ChildTerminated,
    /// 32 `ISCSI_ERR_SESSION_NOT_CONNECTED`: target likely not connected.
    SessionNotConnected,
    /// 33 `ISCSI_ERR_REQ_TIMEDOUT`: iscsid request timed out.
    ReqTimedout,
    /// A code outside 0..=33 (a newer open-iscsi, or a signal turned into a code).
    Unknown(i32),
}

/// How a caller should react to an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusClass {
    /// The operation succeeded.
    Success,
    /// The desired state already holds (15: session exists).
    AlreadyDone,
    /// Nothing matched (2, 21): for a logout, the session is already gone.
    NotFound,
    /// Worth retrying later (timeouts, connection failures, iscsid busy or unreachable).
    Transient,
    /// Retrying will not help until an operator fixes something (auth, fatal login,
    /// invalid arguments, missing transport, access).
    Permanent,
    /// Unclear; retry with back-off and alert.
    Unclassified,
}

impl IscsiadmStatus {
    /// Every known code, in order (0..=33).
    pub const ALL: [IscsiadmStatus; 34] = [
        IscsiadmStatus::Success,
        IscsiadmStatus::Err,
        IscsiadmStatus::SessNotFound,
        IscsiadmStatus::Nomem,
        IscsiadmStatus::Trans,
        IscsiadmStatus::Login,
        IscsiadmStatus::Idbm,
        IscsiadmStatus::Inval,
        IscsiadmStatus::TransTimeout,
        IscsiadmStatus::Internal,
        IscsiadmStatus::Logout,
        IscsiadmStatus::PduTimeout,
        IscsiadmStatus::TransNotFound,
        IscsiadmStatus::Access,
        IscsiadmStatus::TransCaps,
        IscsiadmStatus::SessExists,
        IscsiadmStatus::InvalidMgmtReq,
        IscsiadmStatus::IsnsUnavailable,
        IscsiadmStatus::IscsidCommErr,
        IscsiadmStatus::FatalLogin,
        IscsiadmStatus::IscsidNotconn,
        IscsiadmStatus::NoObjsFound,
        IscsiadmStatus::SysfsLookup,
        IscsiadmStatus::HostNotFound,
        IscsiadmStatus::LoginAuthFailed,
        IscsiadmStatus::IsnsQuery,
        IscsiadmStatus::IsnsRegFailed,
        IscsiadmStatus::OpNotSupp,
        IscsiadmStatus::Busy,
        IscsiadmStatus::Again,
        IscsiadmStatus::UnknownDiscoveryType,
        IscsiadmStatus::ChildTerminated,
        IscsiadmStatus::SessionNotConnected,
        IscsiadmStatus::ReqTimedout,
    ];

    /// The status for an exit code; codes outside 0..=33 give [`IscsiadmStatus::Unknown`].
    pub fn from_code(code: i32) -> IscsiadmStatus {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
            .unwrap_or(IscsiadmStatus::Unknown(code))
    }

    /// The exit code.
    pub fn code(self) -> i32 {
        match self {
            IscsiadmStatus::Unknown(c) => c,
            known => Self::ALL
                .iter()
                .position(|s| *s == known)
                .and_then(|i| i32::try_from(i).ok())
                .unwrap_or(-1),
        }
    }

    /// The open-iscsi constant name (`ISCSI_ERR_SESS_EXISTS`).
    pub fn constant(self) -> &'static str {
        use IscsiadmStatus::*;
        match self {
            Success => "ISCSI_SUCCESS",
            Err => "ISCSI_ERR",
            SessNotFound => "ISCSI_ERR_SESS_NOT_FOUND",
            Nomem => "ISCSI_ERR_NOMEM",
            Trans => "ISCSI_ERR_TRANS",
            Login => "ISCSI_ERR_LOGIN",
            Idbm => "ISCSI_ERR_IDBM",
            Inval => "ISCSI_ERR_INVAL",
            TransTimeout => "ISCSI_ERR_TRANS_TIMEOUT",
            Internal => "ISCSI_ERR_INTERNAL",
            Logout => "ISCSI_ERR_LOGOUT",
            PduTimeout => "ISCSI_ERR_PDU_TIMEOUT",
            TransNotFound => "ISCSI_ERR_TRANS_NOT_FOUND",
            Access => "ISCSI_ERR_ACCESS",
            TransCaps => "ISCSI_ERR_TRANS_CAPS",
            SessExists => "ISCSI_ERR_SESS_EXISTS",
            InvalidMgmtReq => "ISCSI_ERR_INVALID_MGMT_REQ",
            IsnsUnavailable => "ISCSI_ERR_ISNS_UNAVAILABLE",
            IscsidCommErr => "ISCSI_ERR_ISCSID_COMM_ERR",
            FatalLogin => "ISCSI_ERR_FATAL_LOGIN",
            IscsidNotconn => "ISCSI_ERR_ISCSID_NOTCONN",
            NoObjsFound => "ISCSI_ERR_NO_OBJS_FOUND",
            SysfsLookup => "ISCSI_ERR_SYSFS_LOOKUP",
            HostNotFound => "ISCSI_ERR_HOST_NOT_FOUND",
            LoginAuthFailed => "ISCSI_ERR_LOGIN_AUTH_FAILED",
            IsnsQuery => "ISCSI_ERR_ISNS_QUERY",
            IsnsRegFailed => "ISCSI_ERR_ISNS_REG_FAILED",
            OpNotSupp => "ISCSI_ERR_OP_NOT_SUPP",
            Busy => "ISCSI_ERR_BUSY",
            Again => "ISCSI_ERR_AGAIN",
            UnknownDiscoveryType => "ISCSI_ERR_UNKNOWN_DISCOVERY_TYPE",
            ChildTerminated => "ISCSI_ERR_CHILD_TERMINATED",
            SessionNotConnected => "ISCSI_ERR_SESSION_NOT_CONNECTED",
            ReqTimedout => "ISCSI_ERR_REQ_TIMEDOUT",
            Unknown(_) => "unknown",
        }
    }

    /// open-iscsi's message for the code (`iscsi_err_to_str`).
    pub fn message(self) -> &'static str {
        use IscsiadmStatus::*;
        match self {
            Success => "success",
            Err => "unknown error",
            SessNotFound => "session not found",
            Nomem => "no available memory",
            Trans => "encountered connection failure",
            Login => "encountered iSCSI login failure",
            Idbm => "encountered iSCSI database failure",
            Inval => "invalid parameter",
            TransTimeout => "connection timed out",
            Internal => "internal error",
            Logout => "encountered iSCSI logout failure",
            PduTimeout => "iSCSI PDU timed out",
            TransNotFound => {
                "iSCSI driver not found. Please make sure it is loaded, and retry the operation"
            }
            Access => "daemon access denied",
            TransCaps => "iSCSI driver does not support requested capability.",
            SessExists => "session exists",
            InvalidMgmtReq => "Unknown request",
            IsnsUnavailable => "iSNS service not supported",
            IscsidCommErr => "could not communicate to iscsid",
            FatalLogin => "encountered non-retryable iSCSI login failure",
            IscsidNotconn => "could not connect to iscsid",
            NoObjsFound => "no objects found",
            SysfsLookup => "sysfs lookup failure",
            HostNotFound => "host not found",
            LoginAuthFailed => "iSCSI login failed due to authorization failure",
            IsnsQuery => "iSNS query failed",
            IsnsRegFailed => "iSNS registration failed",
            OpNotSupp => "operation not supported",
            Busy => "device or resource in use",
            Again => "operation failed but retry may succeed",
            UnknownDiscoveryType => "unknown discovery type",
            ChildTerminated => "child process terminated",
            SessionNotConnected => "target likely not connected",
            ReqTimedout => "iscsid request timed out",
            Unknown(_) => "unknown exit code",
        }
    }

    /// What an operator can do about this code, in one phrase; empty when there is nothing
    /// specific to say.
    pub fn remedy(self) -> &'static str {
        use IscsiadmStatus::*;
        match self {
            LoginAuthFailed => "the target rejected the CHAP credentials: fix node.session.auth.* (retrying will not help)",
            FatalLogin => "the target refused the login for good: check its ACLs and the initiator name",
            IscsidCommErr | IscsidNotconn => "iscsid is not reachable: start it (`systemctl start iscsid`)",
            TransNotFound => "the transport is not available: load ib_iser (`modprobe ib_iser`)",
            Access => "iscsiadm needs root",
            TransTimeout | ReqTimedout | PduTimeout => "timed out: is the target reachable over the RDMA port?",
            NoObjsFound => "no such session or node record (a login may need the record re-created: -o new)",
            _ => "",
        }
    }

    /// How to react to this code.
    pub fn classify(self) -> StatusClass {
        use IscsiadmStatus::*;
        match self {
            Success => StatusClass::Success,
            SessExists => StatusClass::AlreadyDone,
            SessNotFound | NoObjsFound => StatusClass::NotFound,
            // Time-outs, connection failures and a busy or restarting iscsid: the target or
            // the daemon may be back in a moment. A plain login failure (5) is also worth
            // another try: the target may still be starting.
            Trans | Login | TransTimeout | PduTimeout | Logout | IscsidCommErr | IscsidNotconn
            | Busy | Again | ReqTimedout | Nomem | ChildTerminated | SessionNotConnected
            | IsnsUnavailable | IsnsQuery => StatusClass::Transient,
            // Nothing changes these without an operator.
            LoginAuthFailed | FatalLogin | Inval | Idbm | TransNotFound | Access | TransCaps
            | InvalidMgmtReq | OpNotSupp | UnknownDiscoveryType => StatusClass::Permanent,
            Err | Internal | SysfsLookup | HostNotFound | IsnsRegFailed | Unknown(_) => {
                StatusClass::Unclassified
            }
        }
    }

    /// 0.
    pub fn is_success(self) -> bool {
        self == IscsiadmStatus::Success
    }

    /// 15: a session to that node already exists — for a login, the goal is met.
    pub fn is_already_logged_in(self) -> bool {
        self == IscsiadmStatus::SessExists
    }

    /// 21: no session / record matched ("No active sessions.", "No records found").
    pub fn no_objects(self) -> bool {
        self == IscsiadmStatus::NoObjsFound
    }

    /// A time-out: 8 (connection), 11 (iSCSI PDU, e.g. a SendTargets discovery that got no
    /// answer) or 33 (iscsid request).
    pub fn is_timeout(self) -> bool {
        matches!(
            self,
            IscsiadmStatus::TransTimeout | IscsiadmStatus::PduTimeout | IscsiadmStatus::ReqTimedout
        )
    }

    /// The target refused the login for good: 24 (authentication failed) or 19
    /// (non-retryable login failure). The engine stops retrying that node.
    pub(crate) fn is_login_refused(self) -> bool {
        matches!(
            self,
            IscsiadmStatus::LoginAuthFailed | IscsiadmStatus::FatalLogin
        )
    }

    /// Worth retrying with back-off.
    pub fn is_retryable(self) -> bool {
        self.classify() == StatusClass::Transient
    }

    /// Retrying is pointless until an operator acts (e.g. 24 authentication failed, 19
    /// non-retryable login failure).
    pub fn is_permanent(self) -> bool {
        self.classify() == StatusClass::Permanent
    }
}

impl fmt::Display for IscsiadmStatus {
    /// `15 (ISCSI_ERR_SESS_EXISTS: session exists)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}: {})",
            self.code(),
            self.constant(),
            self.message()
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Node and iface records
// ---------------------------------------------------------------------------------------------

/// One `# BEGIN RECORD … # END RECORD` block of `iscsiadm -m node -T … -p …` or
/// `iscsiadm -m iface -I …`: `key = value` lines, `<empty>` values as `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IscsiadmRecord {
    /// The open-iscsi version after `# BEGIN RECORD`.
    pub version: Option<String>,
    /// The entries, in order.
    pub entries: Vec<(String, Option<String>)>,
}

impl IscsiadmRecord {
    /// The value of `key` (`iface.transport_name`), `None` if absent or `<empty>`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_deref())
    }
}

/// Parses node/iface records. Lines outside a `BEGIN`/`END` pair are still collected into a
/// record, so output without the markers works too.
pub fn parse_records(text: &str) -> ParsedListing<IscsiadmRecord> {
    let mut out = ParsedListing::default();
    let mut cur: Option<IscsiadmRecord> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(v) = line.strip_prefix("# BEGIN RECORD") {
            if let Some(r) = cur.take() {
                out.items.push(r);
            }
            cur = Some(IscsiadmRecord {
                version: opt_value(v),
                entries: Vec::new(),
            });
            continue;
        }
        if line.starts_with("# END RECORD") {
            if let Some(r) = cur.take() {
                out.items.push(r);
            }
            continue;
        }
        if line.starts_with("iscsiadm:") {
            out.skip(line_no, raw, SkipReason::IscsiadmMessage);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        match line.split_once(" = ") {
            Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
                let value = match v.trim() {
                    "" | UNKNOWN_VALUE => None,
                    v => Some(v.to_string()),
                };
                cur.get_or_insert_with(IscsiadmRecord::default)
                    .entries
                    .push((k.to_string(), value));
            }
            _ => out.skip(line_no, raw, SkipReason::Unrecognised),
        }
    }
    if let Some(r) = cur.take() {
        out.items.push(r);
    }
    out
}
