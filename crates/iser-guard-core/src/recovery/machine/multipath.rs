//! dm-multipath maps around a re-creation (`crate::multipath` has the model): the hold when
//! a device carries the last usable path of a map, the paths a re-creation remembers (in
//! its record, journaled with it before the device goes), and once the device's sessions
//! are verified, the check that each remembered path is active in its map again
//! ([`ActionKind::MultipathReinstate`], which reinstates one still failed) with its one
//! alert.
//!
//! Policy: never re-create a device that carries the last usable (dm active) path of a map
//! on the engine's own decision, unless `recovery.multipath-last-path = "proceed"`. Paths
//! already failed by the fault are not usable, so they never hold: the re-creation is what
//! brings them back. Operator commands act as before; their plans name the paths.

use std::time::Duration;

use super::Engine;
use crate::consumers::ConsumerAction;
use crate::multipath::{BlockCarrier, MultipathPath, MultipathPathRef, PathBackReport};
use crate::recovery::action::{ActionKind, AlertClass, Origin};
use crate::time::Instant;

/// How long the executor waits for multipathd's checker to reinstate a path on its own
/// before it reinstates it (a checker pass is `polling_interval`, 5 s by default, up to
/// `max_polling_interval`, 20 s), and again for the reinstate to show.
pub const MULTIPATH_BACK_TIMEOUT: Duration = Duration::from_secs(30);

impl Engine {
    /// The dm-multipath paths as last reported, if ever.
    pub fn multipath_paths(&self) -> Option<&[MultipathPath]> {
        self.multipath.as_deref()
    }

    pub(super) fn on_multipath_paths(&mut self, paths: Vec<MultipathPath>, now: Instant) {
        if self.multipath.as_ref() != Some(&paths) {
            self.multipath = Some(paths);
            // Another path that came back (or failed) may lift (or make) a hold.
            self.evaluate_all(now);
        }
    }

    /// The block devices the engine knows to be carried over RDMA: its sessions' disks and
    /// the placed NVMe over RDMA controllers' namespaces.
    pub fn block_carriers(&self) -> Vec<BlockCarrier> {
        let mut out: Vec<BlockCarrier> = self
            .sessions
            .values()
            .filter(|s| s.present)
            .flat_map(|s| {
                s.disks.iter().map(move |d| BlockCarrier {
                    block: d.name.clone(),
                    device: s.port.device.clone(),
                    port: s.port.port,
                    link: format!("session {}", s.key),
                })
            })
            .collect();
        for c in self.nvme.as_deref().unwrap_or_default() {
            let Some((device, port)) = &c.placed else {
                continue;
            };
            for ns in &c.namespaces {
                out.push(BlockCarrier {
                    block: ns.block.clone(),
                    device: device.clone(),
                    port: *port,
                    link: format!("nvme {} at {}", c.subsysnqn, c.address.traddr),
                });
            }
        }
        out
    }

    /// Every dm-multipath path on `device` (what its re-creation takes down).
    pub fn multipath_of(&self, device: &str) -> Vec<MultipathPathRef> {
        let carriers = self.block_carriers();
        let paths = self.multipath.as_deref().unwrap_or_default();
        crate::multipath::on_device(device, &crate::multipath::place(paths, &carriers))
    }

    /// The usable paths of the maps whose usable paths are all on `device`, when the policy
    /// holds for them (none while multipathd never answered).
    pub(super) fn multipath_in_the_way(&self, device: &str) -> Vec<MultipathPathRef> {
        if self.policy.multipath_last_path == ConsumerAction::Proceed {
            return Vec::new();
        }
        self.multipath_last_paths(device)
    }

    /// The usable paths of the maps whose usable paths are all on `device`, whatever the
    /// policy: what a plan warns about.
    pub fn multipath_last_paths(&self, device: &str) -> Vec<MultipathPathRef> {
        let carriers = self.block_carriers();
        let paths = self.multipath.as_deref().unwrap_or_default();
        crate::multipath::last_paths_on(device, &crate::multipath::place(paths, &carriers))
    }

    /// `pid`'s sessions are verified after a re-creation of its device: check the
    /// remembered paths once (the first verified port asks for the whole device).
    pub(super) fn ask_multipath_reinstate(&mut self, device: &str, origin: Origin) {
        let Some(r) = self
            .devices
            .get_mut(device)
            .and_then(|d| d.recreation.as_mut())
        else {
            return;
        };
        if r.multipath.is_empty() || r.multipath_asked {
            return;
        }
        r.multipath_asked = true;
        let paths = r.multipath.clone();
        let carriers: Vec<BlockCarrier> = self
            .block_carriers()
            .into_iter()
            .filter(|c| c.device == device)
            .collect();
        self.push(
            None,
            Some(device.to_string()),
            origin,
            format!(
                "{device} re-created and its sessions verified: checking the {} dm-multipath \
                 path(s) remembered on it are active in their maps: {}",
                paths.len(),
                crate::multipath::list_paths(&paths)
            ),
            ActionKind::MultipathReinstate {
                device: device.to_string(),
                paths,
                carriers,
                timeout: MULTIPATH_BACK_TIMEOUT,
            },
        );
    }

    /// What became of the paths of `device`'s re-creation.
    pub(super) fn on_multipath_reinstate(
        &mut self,
        device: &str,
        reports: Vec<PathBackReport>,
        now: Instant,
    ) {
        let back = reports.iter().filter(|r| r.result.is_back()).count();
        let total = reports.len();
        let detail = reports
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let not_back: Vec<MultipathPathRef> = reports
            .iter()
            .filter(|r| !r.result.is_back())
            .map(|r| r.path.clone())
            .collect();
        if let Some(r) = self
            .devices
            .get_mut(device)
            .and_then(|d| d.recreation.as_mut())
        {
            r.multipath_back = reports;
        }
        if back == total {
            self.alert(
                now,
                AlertClass::Info,
                format!("multipath-back:{device}"),
                format!(
                    "{back} dm-multipath path(s) on {device} active in their maps again after \
                     its re-creation"
                ),
                detail,
                None,
            );
        } else {
            let maps = crate::multipath::maps_of(&not_back).join(", ");
            self.alert(
                now,
                AlertClass::Critical,
                format!("multipath-not-back:{device}"),
                format!(
                    "{} of {total} dm-multipath path(s) on {device} NOT active after its \
                     re-creation (maps {maps})",
                    total - back
                ),
                format!(
                    "{detail}. Check the maps with multipath -ll; a path whose disk is back \
                     can be reinstated with multipathd reinstate path <dev>"
                ),
                None,
            );
        }
        self.persist(format!(
            "dm-multipath paths of {device}: {back} of {total} active"
        ));
    }
}
