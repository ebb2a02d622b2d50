//! Which RDMA device and port carries each iSCSI session, from what the kernel knows.
//!
//! `iscsiadm -m session -P 3` does not tie an iSER session to a device: ib_iser leaves the
//! iscsi_host `netdev` and `ipaddress` attributes empty, so it prints `Iface Netdev: default`
//! and `Iface IPaddress: [default]` even when the node was logged in through an iface with
//! `iface.ipaddress` set, and the initiator's local address is not shown at all (lab captures
//! on Debian 6.1 and 6.12). ib_iser's `ep_connect` gets the target address only, so the
//! kernel picks the device the way `rdma_resolve_addr` does: by the route to the portal.
//!
//! The evidence, strongest first ([`place`]):
//! 1. **the RDMA CM id table** (RDMA netlink `RES_CM_ID_GET`, `rdma resource show cm_id`):
//!    an `ib_iser` cm_id whose destination is the session's portal sits on the device and
//!    port that carry the connection (src `192.0.2.1:57998`, dst `192.0.2.2:3260`,
//!    `rxe_ini` port 1). It exists only while the connection does;
//! 2. **the route to the portal** (route netlink, `ip route get <portal>`): the netdev the
//!    kernel would connect through, mapped to an RDMA port through
//!    `/sys/class/infiniband/*/ports/*/gid_attrs/ndevs/*`;
//! 3. **the iface fields** `Iface Netdev:` / `Iface IPaddress:` when not `default`
//!    (other transports and older tools fill them);
//! 4. **the only RDMA port** when the host has exactly one.
//!
//! With several RDMA ports and no evidence nothing is guessed: the session stays unplaced
//! and [`Placer`] says once, with what to configure. A session whose device vanished keeps
//! the port it was last placed on: while the device is gone there is no CM id and no RDMA
//! port on the routed netdev, and "the only port left" is another device that must never be
//! blamed. Pure: the caller gathers the facts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::nldev::CmIdEntry;
use crate::recovery::{PortId, SessionKey};

/// The `RES_KERN_NAME` of the iSER initiator's cm_ids (the target's are `ib_isert`).
pub(crate) const ISER_INITIATOR_KERN_NAME: &str = "ib_iser";

/// One address configured on a netdev.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetdevAddr {
    /// Interface name (`ens2f0np0`).
    pub netdev: String,
    /// An address on it.
    pub ip: IpAddr,
}

/// One RDMA port and the netdev it runs over (sysfs `gid_attrs/ndevs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaPortNetdev {
    /// RDMA device name (`rocep2s0f0`).
    pub device: String,
    /// Port number (from 1).
    pub port: u32,
    /// Its netdev (`ens2f0np0`).
    pub netdev: String,
}

/// What a session says about itself (`iscsiadm -m session -P 3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd<'a> {
    /// `Iface Transport:` (`iser`, `tcp`, …).
    pub transport: &'a str,
    /// `Current Portal:` (the address connected to), when it is an IP address.
    pub current_portal: Option<SocketAddr>,
    /// `Persistent Portal:` (the node record's address), when it is an IP address.
    pub persistent_portal: Option<SocketAddr>,
    /// `Iface IPaddress:` when set (`[default]`/`<empty>` are not addresses).
    pub ip: Option<IpAddr>,
    /// `Iface Netdev:` when set (`default` is not a netdev).
    pub netdev: Option<&'a str>,
}

impl SessionEnd<'_> {
    /// The portal the connection goes to: the current one, else the persistent one.
    pub fn portal(&self) -> Option<SocketAddr> {
        self.current_portal.or(self.persistent_portal)
    }
}

/// What the host knows, gathered by the caller.
#[derive(Debug, Clone, Copy)]
pub struct HostFacts<'a> {
    /// Every cm_id of every RDMA device (`RES_CM_ID_GET` dumps).
    pub cm_ids: &'a [CmIdEntry],
    /// The netdev the kernel routes each portal address through (route netlink); a portal
    /// missing here had no answer.
    pub routes: &'a BTreeMap<IpAddr, String>,
    /// The host's interface addresses.
    pub addrs: &'a [NetdevAddr],
    /// Every RDMA port with its netdev.
    pub ports: &'a [RdmaPortNetdev],
}

static NO_ROUTES: BTreeMap<IpAddr, String> = BTreeMap::new();

impl Default for HostFacts<'_> {
    fn default() -> Self {
        HostFacts {
            cm_ids: &[],
            routes: &NO_ROUTES,
            addrs: &[],
            ports: &[],
        }
    }
}

impl HostFacts<'_> {
    /// The distinct RDMA ports.
    pub(crate) fn distinct_ports(&self) -> Vec<PortId> {
        let set: BTreeSet<PortId> = self
            .ports
            .iter()
            .map(|p| PortId::new(p.device.clone(), p.port))
            .collect();
        set.into_iter().collect()
    }

    fn ports_on(&self, netdev: &str) -> Vec<PortId> {
        let set: BTreeSet<PortId> = self
            .ports
            .iter()
            .filter(|p| p.netdev == netdev)
            .map(|p| PortId::new(p.device.clone(), p.port))
            .collect();
        set.into_iter().collect()
    }

    fn device_present(&self, device: &str) -> bool {
        self.ports.iter().any(|p| p.device == device)
    }
}

/// Why a session is on its port: every automatic decision about the session names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Evidence {
    /// An `ib_iser` cm_id on the port connects to the session's portal.
    CmId {
        /// The cm_id's source (the initiator's address and port).
        src: Option<SocketAddr>,
        /// The cm_id's destination (the portal).
        dst: SocketAddr,
        /// `RES_CM_IDN`, when the kernel gave it.
        cm_idn: Option<u32>,
    },
    /// The kernel routes the portal through this netdev, which the port runs over.
    Route {
        /// The routed netdev.
        netdev: String,
    },
    /// `Iface Netdev:` names the port's netdev.
    IfaceNetdev {
        /// The netdev.
        netdev: String,
    },
    /// `Iface IPaddress:` is configured on the port's netdev.
    IfaceAddress {
        /// The address.
        ip: IpAddr,
        /// Its netdev.
        netdev: String,
    },
    /// The host has exactly one RDMA port.
    OnlyPort,
    /// Nothing places the session now (its device vanished, or it is reconnecting); this is
    /// where it was last placed, and why.
    Remembered(Box<Evidence>),
}

impl Evidence {
    /// The words an operator reads in a log line or alert.
    pub fn describe(&self) -> String {
        match self {
            Evidence::CmId { src, dst, cm_idn } => {
                let src = src.map_or_else(|| "?".to_string(), |s| s.to_string());
                let idn = cm_idn.map_or_else(String::new, |n| format!(" (cm-idn {n})"));
                format!("ib_iser CM id {src} -> {dst}{idn}")
            }
            Evidence::Route { netdev } => format!("route to the portal via {netdev}"),
            Evidence::IfaceNetdev { netdev } => format!("iface netdev {netdev}"),
            Evidence::IfaceAddress { ip, netdev } => format!("iface address {ip} on {netdev}"),
            Evidence::OnlyPort => "the host's only RDMA port".to_string(),
            Evidence::Remembered(was) => format!("last placed by {}", was.describe()),
        }
    }

    /// The evidence as first found (through [`Evidence::Remembered`]).
    pub fn original(&self) -> &Evidence {
        match self {
            Evidence::Remembered(was) => was.original(),
            e => e,
        }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Why a session could not be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unplaced {
    /// The host has no RDMA port.
    NoRdmaPort,
    /// The kernel routes the portal through a netdev no RDMA port runs over: the session's
    /// device is gone (deleted, being re-created), and another device's port must not be
    /// taken for it, even when it is the only one left.
    DeviceGone {
        /// The routed netdev (the missing device's netdev).
        netdev: String,
    },
    /// Several RDMA ports and nothing says which one; `tried` lists what was looked at.
    NoEvidence {
        /// The host's RDMA ports.
        ports: Vec<PortId>,
        /// What each source said.
        tried: Vec<String>,
    },
}

impl Unplaced {
    /// One sentence for a log line.
    pub fn describe(&self) -> String {
        match self {
            Unplaced::NoRdmaPort => "the host has no RDMA port".to_string(),
            Unplaced::DeviceGone { netdev } => format!(
                "the route to the portal goes via {netdev}, which no RDMA port runs over now \
                 (its RDMA device is gone)"
            ),
            Unplaced::NoEvidence { ports, tried } => {
                let ports: Vec<String> = ports.iter().map(ToString::to_string).collect();
                format!(
                    "the host has {} RDMA ports ({}) and nothing ties the session to one: {}",
                    ports.len(),
                    ports.join(", "),
                    tried.join("; ")
                )
            }
        }
    }
}

/// Where a session lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this RDMA port, because of this evidence.
    Port {
        /// The port.
        port: PortId,
        /// Why.
        evidence: Evidence,
    },
    /// Not an iSER session: nothing RDMA to guard.
    NotIser,
    /// An iSER session whose port is not known.
    Unknown(Unplaced),
}

/// Places one session from fresh facts alone (no memory; see [`Placer`]).
pub fn place(session: &SessionEnd<'_>, host: &HostFacts<'_>) -> Placement {
    if session.transport != "iser" {
        return Placement::NotIser;
    }
    let mut tried = Vec::new();
    match by_cm_id(session, host) {
        Ok(p) => return p,
        Err(why) => tried.push(why),
    }
    match by_route(session, host) {
        Ok(p) => return p,
        Err(why) => tried.push(why),
    }
    match by_iface(session, host) {
        Ok(p) => return p,
        Err(why) => tried.push(why),
    }
    // The kernel would connect through a netdev whose RDMA device is missing: the only port
    // left belongs to another netdev, hence to another device.
    if let Some(netdev) = session.portal().and_then(|p| host.routes.get(&p.ip())) {
        if host.ports_on(netdev).is_empty() {
            return Placement::Unknown(Unplaced::DeviceGone {
                netdev: netdev.clone(),
            });
        }
    }
    let ports = host.distinct_ports();
    match ports.as_slice() {
        [only] => Placement::Port {
            port: only.clone(),
            evidence: Evidence::OnlyPort,
        },
        [] => Placement::Unknown(Unplaced::NoRdmaPort),
        _ => Placement::Unknown(Unplaced::NoEvidence { ports, tried }),
    }
}

fn by_cm_id(session: &SessionEnd<'_>, host: &HostFacts<'_>) -> Result<Placement, String> {
    let Some(portal) = session.portal() else {
        return Err("the portal is not an IP address (no CM id to match)".into());
    };
    let matching: Vec<(&CmIdEntry, PortId)> = host
        .cm_ids
        .iter()
        .filter(|c| c.kern_name.as_deref() == Some(ISER_INITIATOR_KERN_NAME))
        .filter(|c| c.dst() == Some(portal))
        .filter(|c| match session.ip {
            Some(ip) => c.src().is_some_and(|s| s.ip() == ip),
            None => true,
        })
        .filter_map(|c| c.port.map(|p| (c, PortId::new(c.dev_name.clone(), p))))
        .collect();
    let ports: BTreeSet<&PortId> = matching.iter().map(|(_, p)| p).collect();
    match (matching.first(), ports.len()) {
        (Some((c, port)), 1) => Ok(Placement::Port {
            port: port.clone(),
            evidence: Evidence::CmId {
                src: c.src(),
                dst: portal,
                cm_idn: c.cm_idn,
            },
        }),
        (None, _) => Err(format!("no ib_iser CM id connects to {portal}")),
        _ => {
            let ports: Vec<String> = ports.iter().map(ToString::to_string).collect();
            Err(format!(
                "ib_iser CM ids to {portal} sit on several ports ({})",
                ports.join(", ")
            ))
        }
    }
}

fn one_port_on(
    netdev: &str,
    host: &HostFacts<'_>,
    evidence: Evidence,
    what: &str,
) -> Result<Placement, String> {
    match host.ports_on(netdev).as_slice() {
        [port] => Ok(Placement::Port {
            port: port.clone(),
            evidence,
        }),
        [] => Err(format!("{what} {netdev}, which no RDMA port runs over")),
        several => {
            let ports: Vec<String> = several.iter().map(ToString::to_string).collect();
            Err(format!(
                "{what} {netdev}, which several RDMA ports run over ({})",
                ports.join(", ")
            ))
        }
    }
}

fn by_route(session: &SessionEnd<'_>, host: &HostFacts<'_>) -> Result<Placement, String> {
    let Some(portal) = session.portal() else {
        return Err("the portal is not an IP address (no route to look up)".into());
    };
    let Some(netdev) = host.routes.get(&portal.ip()) else {
        return Err(format!("no route to {} is known", portal.ip()));
    };
    one_port_on(
        netdev,
        host,
        Evidence::Route {
            netdev: netdev.clone(),
        },
        &format!("the route to {} goes via", portal.ip()),
    )
}

fn by_iface(session: &SessionEnd<'_>, host: &HostFacts<'_>) -> Result<Placement, String> {
    if let Some(n) = session.netdev {
        return one_port_on(
            n,
            host,
            Evidence::IfaceNetdev {
                netdev: n.to_string(),
            },
            "the iface names netdev",
        );
    }
    if let Some(ip) = session.ip {
        let Some(a) = host.addrs.iter().find(|a| a.ip == ip) else {
            return Err(format!("no local interface has the iface address {ip}"));
        };
        return one_port_on(
            &a.netdev,
            host,
            Evidence::IfaceAddress {
                ip,
                netdev: a.netdev.clone(),
            },
            &format!("the iface address {ip} is on"),
        );
    }
    Err("the iface names no netdev or address (`default`)".into())
}

/// One session's placement, with the warning to log (at WARNING) if there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Where the session is.
    pub placement: Placement,
    /// Said once per unplaced session: which session and what to configure.
    pub warning: Option<String>,
    /// The session is on another port than at the last call (or placed for the first time):
    /// worth one INFO line naming the evidence.
    pub moved: bool,
}

/// Places sessions with memory: a session keeps the port it was last placed on while
/// nothing places it now, or while only "the only port" would (its own device vanished), and
/// an unplaced session is warned about once. Lives as long as the agent process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placer {
    last: BTreeMap<SessionKey, (PortId, Evidence)>,
    warned: BTreeSet<SessionKey>,
    /// Every RDMA port seen since the agent started: "the only port" is only the only one
    /// if no other was ever seen (a device being re-created is absent for seconds).
    seen: BTreeSet<PortId>,
}

impl Placer {
    /// A placer with no memory.
    pub fn new() -> Self {
        Placer::default()
    }

    /// Where `key` was last placed.
    pub fn last(&self, key: &SessionKey) -> Option<(&PortId, &Evidence)> {
        self.last.get(key).map(|(p, e)| (p, e))
    }

    /// Places one session.
    pub fn place(
        &mut self,
        key: &SessionKey,
        session: &SessionEnd<'_>,
        host: &HostFacts<'_>,
    ) -> Decision {
        self.seen.extend(host.distinct_ports());
        let fresh = match place(session, host) {
            Placement::Port {
                evidence: Evidence::OnlyPort,
                ..
            } if self.seen.len() > 1 => Placement::Unknown(Unplaced::NoEvidence {
                ports: self.seen.iter().cloned().collect(),
                tried: vec![format!(
                    "only one of the {} RDMA ports seen is present now",
                    self.seen.len()
                )],
            }),
            p => p,
        };
        let remembered = self.last.get(key).cloned();
        let before = remembered.as_ref().map(|(p, _)| p.clone());
        let placement = match (fresh, remembered) {
            (Placement::NotIser, _) => Placement::NotIser,
            // The only port left is another device's: the session's own device vanished.
            (
                Placement::Port {
                    port,
                    evidence: Evidence::OnlyPort,
                },
                Some((last, was)),
            ) if port.device != last.device && !host.device_present(&last.device) => {
                remembered_placement(last, was)
            }
            (Placement::Unknown(_), Some((last, was))) => remembered_placement(last, was),
            (Placement::Port { port, evidence }, _) => {
                self.last
                    .insert(key.clone(), (port.clone(), evidence.clone()));
                Placement::Port { port, evidence }
            }
            (Placement::Unknown(why), None) => Placement::Unknown(why),
        };
        let warning = match &placement {
            Placement::Unknown(
                why @ (Unplaced::NoEvidence { .. } | Unplaced::DeviceGone { .. }),
            ) => {
                if self.warned.insert(key.clone()) {
                    Some(warning_text(key, session, why))
                } else {
                    None
                }
            }
            Placement::Port { .. } => {
                self.warned.remove(key);
                None
            }
            _ => None,
        };
        let moved = match &placement {
            Placement::Port { port, .. } => before.as_ref() != Some(port),
            _ => false,
        };
        Decision {
            placement,
            warning,
            moved,
        }
    }

    /// Forgets everything (a restarted agent).
    pub fn forget(&mut self) {
        self.last.clear();
        self.warned.clear();
        self.seen.clear();
    }
}

fn remembered_placement(port: PortId, was: Evidence) -> Placement {
    let evidence = match was {
        e @ Evidence::Remembered(_) => e,
        e => Evidence::Remembered(Box::new(e)),
    };
    Placement::Port { port, evidence }
}

fn warning_text(key: &SessionKey, session: &SessionEnd<'_>, why: &Unplaced) -> String {
    if let Unplaced::DeviceGone { netdev } = why {
        return format!(
            "cannot tell which RDMA port carries iSCSI session {key}: {}. iser-guard takes no \
             action for this session until an RDMA device on {netdev} is back (`rdma link`)",
            why.describe()
        );
    }
    let route = session.portal().map_or_else(
        || "the portal's address".to_string(),
        |p| format!("`ip route get {}`", p.ip()),
    );
    format!(
        "cannot tell which RDMA port carries iSCSI session {key}: {}. iser-guard takes no \
         action for this session until it can: once the session is connected its ib_iser CM \
         id places it; before that, make {route} name the netdev of the RDMA port that \
         carries it (see /sys/class/infiniband/*/ports/*/gid_attrs/ndevs/*)",
        why.describe()
    )
}

mod listing;
#[cfg(test)]
mod tests;

pub use listing::{place_listing, portal_addresses, Mapped, NoteLevel};
