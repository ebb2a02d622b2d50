//! iscsiadm session snapshots → the engine's [`SessionInfo`] list: each session placed on its
//! RDMA port with [`crate::core::session_map::place`] (pure; the caller gathers the inputs).

use crate::core::iscsi::SessionDetail;
use crate::core::recovery::{self, PortId, Portal, SessionInfo, SessionKey};
use crate::core::session_map::{place, NetdevAddr, Placement, RdmaPortNetdev, SessionEnd};

/// Maps every parsed session. Sessions without a portal are skipped (counted in the
/// returned number) since nothing could log them back in.
pub fn map_sessions(
    details: &[SessionDetail],
    addrs: &[NetdevAddr],
    ports: &[RdmaPortNetdev],
) -> (Vec<SessionInfo>, usize) {
    let mut out = Vec::with_capacity(details.len());
    let mut skipped = 0;
    for d in details {
        let Some(portal) = d.persistent_portal.as_ref().or(d.current_portal.as_ref()) else {
            tracing::warn!(
                sid = d.sid,
                target = %d.target,
                "skipping an iSCSI session without a portal"
            );
            skipped += 1;
            continue;
        };
        let portal = match Portal::parse(&portal.address, portal.port) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(sid = d.sid, target = %d.target, "skipping an iSCSI session: {e}");
                skipped += 1;
                continue;
            }
        };
        let transport = d.transport();
        let end = SessionEnd {
            transport: transport.name(),
            ip: d.iface.ip_address,
            netdev: d.iface.netdev.as_deref(),
        };
        let rdma = match place(&end, addrs, ports) {
            Placement::Port { device, port, .. } => Some(PortId::new(device, port)),
            Placement::NotIser => None,
            Placement::Unknown(why) => {
                tracing::debug!(
                    sid = d.sid,
                    "cannot place the iSER session on an RDMA port: {why}"
                );
                None
            }
        };
        out.push(SessionInfo {
            sid: d.sid,
            key: SessionKey {
                target: d.target.clone(),
                portal,
                iface: d.iface.name.clone().unwrap_or_else(|| "default".into()),
            },
            transport: transport.name().to_string(),
            netdev: d.iface.netdev.clone(),
            local_ip: d.iface.ip_address.map(|ip| ip.to_string()),
            rdma,
            state: recovery::session_state(d.session_state.as_ref()),
            disks: recovery::disks(d),
        });
    }
    (out, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::iscsi;
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
        let (list, skipped) = map_sessions(&parsed.items, &[], &ports);
        assert_eq!(skipped, 0);
        assert_eq!(list.len(), 1);
        let s = &list[0];
        assert_eq!(s.sid, 2);
        assert_eq!(s.key.iface, "iser");
        assert_eq!(s.key.portal, Portal::new([192, 0, 2, 2], 3260));
        assert_eq!(s.rdma, Some(PortId::new("rocep2s0f0", 1)));
        assert_eq!(s.state, SessionState::LoggedIn);
        assert_eq!(s.disks, vec![DiskInfo::new("sda", "running")]);
    }
}
