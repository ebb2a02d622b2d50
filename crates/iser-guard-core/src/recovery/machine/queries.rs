//! Read-only views of the engine's records: a port's sessions, portals, targets, the
//! sessions down in operator words.

use super::Engine;
use crate::consumers::ConsumerRef;
use crate::recovery::input::{PortId, Portal, SessionKey};
use crate::recovery::state::SessionRecord;

impl Engine {
    pub(super) fn ports_of_device(&self, device: &str) -> Vec<PortId> {
        let start = PortId::new(device, 0);
        self.ports
            .range(start..)
            .take_while(|(k, _)| k.device == device)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The NVMe over RDMA controllers placed on this port, each with its target's portal
    /// (`traddr`, `trsvcid` or NVMe's 4420) when `traddr` is an IP address. Their targets
    /// are probed beside the iSCSI portals: a re-creation while an NVMe target is still away
    /// would leave its controller deleted (the reconnect after it would be refused).
    pub(super) fn nvme_portals_of(&self, pid: &PortId) -> Vec<(Portal, bool)> {
        self.nvme_of(&pid.device)
            .iter()
            .filter(|c| c.placed.as_ref().is_some_and(|(_, port)| *port == pid.port))
            .filter_map(|c| {
                let port = match c.address.trsvcid.as_deref() {
                    Some(s) => s.trim().parse::<u16>().ok()?,
                    None => crate::nvme_fabrics::NVME_RDMA_PORT,
                };
                let portal = Portal::parse(&c.address.traddr, port).ok()?;
                Some((portal, c.state == "live"))
            })
            .collect()
    }

    /// The record of `device`'s re-creation, under its name now or the name it had when the
    /// re-creation was decided (`was`): what the consumers remembered before it.
    pub(super) fn recreation_record(
        &self,
        was: &str,
        device: &str,
    ) -> Option<&crate::recovery::state::Recreation> {
        self.devices
            .get(device)
            .or_else(|| self.devices.get(was))
            .and_then(|d| d.recreation.as_ref())
    }

    pub(super) fn portals_of(&self, pid: &PortId) -> Vec<Portal> {
        let mut v: Vec<Portal> = self
            .ports
            .get(pid)
            .map(|p| {
                p.sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .map(|s| s.key.portal.clone())
                    .collect()
            })
            .unwrap_or_default();
        v.extend(self.nvme_portals_of(pid).into_iter().map(|(p, _)| p));
        v.sort();
        v.dedup();
        v
    }

    pub(super) fn targets_of(&self, pid: &PortId) -> Vec<String> {
        let mut v: Vec<String> = self
            .ports
            .get(pid)
            .map(|p| p.sessions.iter().map(|k| k.target.clone()).collect())
            .unwrap_or_default();
        v.sort();
        v.dedup();
        v
    }

    pub(super) fn healthy_sessions_of_device(&self, device: &str) -> Vec<SessionKey> {
        self.ports_of_device(device)
            .iter()
            .filter_map(|pid| self.ports.get(pid))
            .flat_map(|p| p.sessions.iter())
            .filter_map(|k| self.sessions.get(k))
            .filter(|s| s.is_up())
            .map(|s| s.key.clone())
            .collect()
    }

    /// The live consumers of `device` that hold its automatic re-creation under
    /// `[recovery.consumers]` (none while the consumers are not known).
    pub(super) fn consumers_in_the_way(&self, device: &str) -> Vec<ConsumerRef> {
        self.consumers.as_deref().map_or_else(Vec::new, |ports| {
            crate::consumers::in_the_way(device, ports, &self.policy.consumers)
        })
    }

    /// Every consumer of `device` other than iSER (what its re-creation takes down), or
    /// `None` while the consumers are not known.
    pub fn consumers_of(&self, device: &str) -> Option<Vec<ConsumerRef>> {
        self.consumers
            .as_deref()
            .map(|ports| crate::consumers::affected(device, ports).collect())
    }

    /// The RDMA consumers per port as last reported, if ever.
    pub fn consumers(&self) -> Option<&[crate::consumers::PortConsumers]> {
        self.consumers.as_deref()
    }

    pub(super) fn down_sessions_text(&self, pid: &PortId) -> String {
        let v: Vec<String> = self
            .ports
            .get(pid)
            .map(|p| {
                p.sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .filter(|s| {
                        !s.is_healthy() || p.episode().is_some_and(|e| e.targeted.contains(&s.key))
                    })
                    .map(describe_session)
                    .collect()
            })
            .unwrap_or_default();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join("; ")
        }
    }

    pub(super) fn mark_reported(&mut self, pid: &PortId) {
        let (keys, targeted) = self
            .ports
            .get(pid)
            .map(|p| {
                let targeted = p.episode().map(|e| e.targeted.clone()).unwrap_or_default();
                (p.sessions.clone(), targeted)
            })
            .unwrap_or_default();
        for k in keys {
            if let Some(s) = self.sessions.get_mut(&k) {
                if !s.is_healthy() || targeted.contains(&k) {
                    s.reported = true;
                }
            }
        }
    }

    pub(super) fn rebuild_indexes(&mut self) {
        self.by_sid.clear();
        self.by_disk.clear();
        for s in self.sessions.values() {
            if let Some(sid) = s.sid {
                self.by_sid.insert(sid, s.key.clone());
            }
            for d in &s.disks {
                self.by_disk.insert(d.name.clone(), s.key.clone());
            }
        }
    }
}

pub(super) fn describe_session(s: &SessionRecord) -> String {
    let sid = s.sid.map(|n| format!("sid {n} ")).unwrap_or_default();
    let state = if s.present {
        s.state.name()
    } else {
        "gone from iscsid"
    };
    match &s.placed_by {
        Some(evidence) => format!("{sid}{} ({state}; on {} by {evidence})", s.key, s.port),
        None => format!("{sid}{} ({state})", s.key),
    }
}
