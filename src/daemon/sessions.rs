//! iscsiadm session snapshots → the engine's [`SessionInfo`] list: each session placed on its
//! RDMA port by [`crate::core::session_map::Placer`] from what the kernel knows (the RDMA CM
//! id table, the route to the portal, the iface fields, the only port). Pure apart from the
//! log lines; the caller gathers the facts.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use crate::core::iscsi::{self, SessionDetail};
use crate::core::recovery::{self, Portal, SessionInfo, SessionKey};
use crate::core::session_map::{HostFacts, Placement, Placer, SessionEnd};

/// What one mapping produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mapped {
    /// The engine's sessions.
    pub sessions: Vec<SessionInfo>,
    /// Sessions skipped for having no portal.
    pub skipped: usize,
    /// The placement warnings to log at WARNING: one per unplaced session, once (the
    /// placer remembers it said it).
    pub warnings: Vec<String>,
}

/// The portal addresses the sessions connect to (current, else persistent), for the route
/// lookups the caller makes before [`map_sessions`].
pub fn portal_addresses(details: &[SessionDetail]) -> BTreeSet<IpAddr> {
    details
        .iter()
        .filter_map(|d| d.current_portal.as_ref().or(d.persistent_portal.as_ref()))
        .filter_map(|p| p.address.parse().ok())
        .collect()
}

fn socket(p: Option<&iscsi::Portal>) -> Option<SocketAddr> {
    let p = p?;
    let ip: IpAddr = p.address.parse().ok()?;
    Some(SocketAddr::new(ip, p.port))
}

/// Maps every parsed session. Sessions without a portal are skipped (counted) since nothing
/// could log them back in.
pub fn map_sessions(
    details: &[SessionDetail],
    host: &HostFacts<'_>,
    placer: &mut Placer,
) -> Mapped {
    let mut out = Mapped::default();
    for d in details {
        let Some(portal) = d.persistent_portal.as_ref().or(d.current_portal.as_ref()) else {
            tracing::warn!(
                sid = d.sid,
                target = %d.target,
                "skipping an iSCSI session without a portal"
            );
            out.skipped += 1;
            continue;
        };
        let portal = match Portal::parse(&portal.address, portal.port) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(sid = d.sid, target = %d.target, "skipping an iSCSI session: {e}");
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
                    tracing::info!(sid = d.sid, %key, %port, evidence = %evidence, "session placed");
                }
                (Some(port), Some(evidence))
            }
            Placement::NotIser => (None, None),
            Placement::Unknown(why) => {
                tracing::debug!(sid = d.sid, %key, "session not placed: {}", why.describe());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::recovery::PortId;
    use crate::core::session_map::{Evidence, RdmaPortNetdev};
    use std::collections::BTreeMap;

    const LAB_P3: &str = include_str!(
        "../../crates/iser-guard-core/tests/fixtures/iscsi/real-p3-nldevcap-loggedin.txt"
    );

    fn lab_ports() -> Vec<RdmaPortNetdev> {
        ["rxe_ini:ini0", "rxe_tgt:tgt0"]
            .iter()
            .map(|s| {
                let (d, n) = s.split_once(':').unwrap();
                RdmaPortNetdev {
                    device: d.into(),
                    port: 1,
                    netdev: n.into(),
                }
            })
            .collect()
    }
    use crate::core::recovery::{DiskInfo, SessionState};

    #[test]
    fn the_lab_session_lands_on_the_only_rdma_port() {
        let text = include_str!("../../tests/fixtures/stubs/iscsiadm.d/session-P3-loggedin.txt");
        let parsed = iscsi::parse_session_tree(text);
        let ports = [RdmaPortNetdev {
            device: "rocep2s0f0".into(),
            port: 1,
            netdev: "ens1f0".into(),
        }];
        let routes = BTreeMap::new();
        let host = HostFacts {
            ports: &ports,
            routes: &routes,
            ..HostFacts::default()
        };
        let m = map_sessions(&parsed.items, &host, &mut Placer::new());
        assert_eq!(m.skipped, 0);
        assert_eq!(m.sessions.len(), 1);
        let s = &m.sessions[0];
        assert_eq!(s.sid, 2);
        assert_eq!(s.key.iface, "iser");
        assert_eq!(s.key.portal, Portal::new([192, 0, 2, 2], 3260));
        assert_eq!(s.rdma, Some(PortId::new("rocep2s0f0", 1)));
        assert_eq!(s.placed_by, Some(Evidence::OnlyPort));
        assert_eq!(s.state, SessionState::LoggedIn);
        assert_eq!(s.disks, vec![DiskInfo::new("sda", "running")]);
    }

    #[test]
    fn with_two_ports_the_route_places_the_lab_session_and_silence_warns_once() {
        let parsed = iscsi::parse_session_tree(LAB_P3);
        assert_eq!(
            portal_addresses(&parsed.items)
                .into_iter()
                .collect::<Vec<_>>(),
            vec!["192.0.2.2".parse::<IpAddr>().unwrap()]
        );
        let ports = lab_ports();
        let routes: BTreeMap<IpAddr, String> =
            [("192.0.2.2".parse().unwrap(), "ini0".to_string())].into();
        let host = HostFacts {
            ports: &ports,
            routes: &routes,
            ..HostFacts::default()
        };
        let m = map_sessions(&parsed.items, &host, &mut Placer::new());
        assert_eq!(m.sessions[0].rdma, Some(PortId::new("rxe_ini", 1)));
        assert_eq!(
            m.sessions[0].placed_by,
            Some(Evidence::Route {
                netdev: "ini0".into()
            })
        );
        assert!(m.warnings.is_empty());

        let none = BTreeMap::new();
        let host = HostFacts {
            ports: &ports,
            routes: &none,
            ..HostFacts::default()
        };
        let mut placer = Placer::new();
        let m = map_sessions(&parsed.items, &host, &mut placer);
        assert_eq!(m.sessions[0].rdma, None);
        assert_eq!(m.warnings.len(), 1);
        assert!(map_sessions(&parsed.items, &host, &mut placer)
            .warnings
            .is_empty());
    }
}
