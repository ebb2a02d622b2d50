//! The door for session listings: an `iscsiadm -m session -P 3` listing with the host's facts
//! (CM ids, routes, addresses, port netdevs) → the engine's sessions, each placed on its RDMA
//! port by the [`Placer`], with what is worth saying about it. The daemon and the simulated
//! host both come through [`place_listing`]; nothing here logs, the caller does.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use super::{HostFacts, Placement, Placer, SessionEnd};
use crate::iscsi::{self, SessionDetail};
use crate::recovery::{self, Portal, SessionInfo, SessionKey};

/// How loud a note is, for the caller's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteLevel {
    /// Worth an operator's attention (a session skipped, a session nothing places).
    Warning,
    /// Worth a line (a session placed or moved).
    Info,
    /// For debugging (why a session is not placed yet).
    Debug,
}

/// What one listing produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mapped {
    /// The engine's sessions.
    pub sessions: Vec<SessionInfo>,
    /// Sessions skipped for having no usable portal.
    pub skipped: usize,
    /// The placement warnings: one per unplaced session, once (the placer remembers it said
    /// it).
    pub warnings: Vec<String>,
    /// Everything else worth a log line, in order.
    pub notes: Vec<(NoteLevel, String)>,
}

/// The portal addresses the sessions connect to (current, else persistent), for the route
/// lookups the caller makes before [`place_listing`].
pub fn portal_addresses(details: &[SessionDetail]) -> BTreeSet<IpAddr> {
    details
        .iter()
        .filter_map(|d| d.current_portal.as_ref().or(d.persistent_portal.as_ref()))
        .filter_map(|p| p.address.parse().ok())
        .collect()
}

fn socket(p: Option<&iscsi::ListedPortal>) -> Option<SocketAddr> {
    let p = p?;
    let ip: IpAddr = p.address.parse().ok()?;
    Some(SocketAddr::new(ip, p.port))
}

/// Places every parsed session. Sessions without a portal are skipped (counted) since nothing
/// could log them back in.
pub fn place_listing(
    details: &[SessionDetail],
    host: &HostFacts<'_>,
    placer: &mut Placer,
) -> Mapped {
    map_sessions(details, host, placer)
}

pub(crate) fn map_sessions(
    details: &[SessionDetail],
    host: &HostFacts<'_>,
    placer: &mut Placer,
) -> Mapped {
    let mut out = Mapped::default();
    for d in details {
        let Some(portal) = d.persistent_portal.as_ref().or(d.current_portal.as_ref()) else {
            out.notes.push((
                NoteLevel::Warning,
                format!(
                    "skipping iSCSI session {} of {}: it has no portal",
                    d.sid, d.target
                ),
            ));
            out.skipped += 1;
            continue;
        };
        let portal = match Portal::parse(&portal.address, portal.port) {
            Ok(p) => p,
            Err(e) => {
                out.notes.push((
                    NoteLevel::Warning,
                    format!("skipping iSCSI session {} of {}: {e}", d.sid, d.target),
                ));
                out.skipped += 1;
                continue;
            }
        };
        let transport = d.transport();
        let key = SessionKey {
            target: d.target.clone(),
            portal,
            iface: d.iface.name.clone().unwrap_or_else(|| "default".into()),
        };
        let end = SessionEnd {
            transport: transport.name(),
            current_portal: socket(d.current_portal.as_ref()),
            persistent_portal: socket(d.persistent_portal.as_ref()),
            ip: d.iface.ip_address,
            netdev: d.iface.netdev.as_deref(),
        };
        let decision = placer.place(&key, &end, host);
        if let Some(w) = decision.warning {
            out.warnings.push(w);
        }
        let (rdma, placed_by) = match decision.placement {
            Placement::Port { port, evidence } => {
                if decision.moved {
                    out.notes.push((
                        NoteLevel::Info,
                        format!("session {} {key} placed on {port} by {evidence}", d.sid),
                    ));
                }
                (Some(port), Some(evidence))
            }
            Placement::NotIser => (None, None),
            Placement::Unknown(why) => {
                out.notes.push((
                    NoteLevel::Debug,
                    format!("session {} {key} not placed: {}", d.sid, why.describe()),
                ));
                (None, None)
            }
        };
        out.sessions.push(SessionInfo {
            sid: d.sid,
            key,
            transport: transport.name().to_string(),
            netdev: d.iface.netdev.clone(),
            local_ip: d.iface.ip_address.map(|ip| ip.to_string()),
            rdma,
            placed_by,
            state: recovery::session_state(d.session_state.as_ref()),
            disks: recovery::disks(d),
        });
    }
    out
}
