//! What re-creating each present RDMA device would need, learned while it exists and handed
//! to the engine as [`Observation::DeviceRecipe`].
//!
//! Owns the one moment this can be learned: a deleted device leaves nothing behind (lab, 6.1
//! and 6.12: after `rdma link delete rxe_ini` the name is gone from `/sys/class/infiniband`
//! and from RDMA netlink), so its link type and netdev, or its parent PCI function and RDMA
//! auxiliary device, are read from sysfs ([`crate::io::reset::Sysfs::facts`], the resetter's
//! own reader) every time the topology changes, and only what changed is sent. The port
//! netdevs RDMA netlink reports (`RDMA_NLDEV_ATTR_NDEV_NAME`) fill in when sysfs names none.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::core::recovery::Observation;
use crate::core::reset_plan::RecreateFrom;
use crate::io::reset::Sysfs;

/// The last recipe sent per device.
#[derive(Debug)]
pub struct Recipes {
    sysfs: Sysfs,
    sent: BTreeMap<String, RecreateFrom>,
}

impl Recipes {
    /// Reads devices under `sysfs_root` (`paths.sysfs-root`).
    pub fn new(sysfs_root: impl Into<PathBuf>) -> Self {
        Recipes {
            sysfs: Sysfs::new(sysfs_root),
            sent: BTreeMap::new(),
        }
    }

    /// Observations for the present devices (name, netdevs RDMA netlink reports for its
    /// ports) whose recipe is new or changed. A device whose facts cannot be read now is
    /// skipped: its last recipe stays the engine's.
    pub fn changed<'a>(
        &mut self,
        present: impl IntoIterator<Item = (&'a str, Vec<String>)>,
    ) -> Vec<Observation> {
        let mut out = Vec::new();
        for (name, netlink_netdevs) in present {
            let mut facts = match self.sysfs.facts(name) {
                Ok(Some(f)) => f,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!(device = name, error = %e, "cannot read its sysfs facts");
                    continue;
                }
            };
            for n in netlink_netdevs {
                if !facts.netdevs.contains(&n) {
                    facts.netdevs.push(n);
                }
            }
            let Some(recipe) = RecreateFrom::of(&facts) else {
                continue;
            };
            if self.sent.get(name) == Some(&recipe) {
                continue;
            }
            self.sent.insert(name.to_string(), recipe.clone());
            out.push(Observation::DeviceRecipe {
                device: name.to_string(),
                recipe,
            });
        }
        out
    }
}

/// The present devices of a netlink topology with their ports' netdevs.
pub fn netlink_devices(t: &crate::core::topology::Topology) -> Vec<(&str, Vec<String>)> {
    t.devices()
        .iter()
        .map(|d| {
            let netdevs = d
                .ports
                .iter()
                .filter_map(|p| p.netdev.as_ref().and_then(|n| n.name.clone()))
                .collect();
            (d.info.name.as_str(), netdevs)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::reset_plan::SoftType;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs")
            .join(name)
    }

    #[test]
    fn an_rxe_device_is_remembered_by_link_type_and_netdev_once() {
        let mut r = Recipes::new(fixture("rxe"));
        let names = Sysfs::new(fixture("rxe")).device_names().unwrap();
        let first = r.changed(names.iter().map(|n| (n.as_str(), Vec::new())));
        assert!(!first.is_empty(), "nothing learned from the rxe fixture");
        for o in &first {
            let Observation::DeviceRecipe { recipe, .. } = o else {
                panic!("{o:?}")
            };
            assert!(
                matches!(recipe, RecreateFrom::SoftLink { kind: SoftType::Rxe, netdev } if !netdev.is_empty()),
                "{recipe:?}"
            );
        }
        // Unchanged: nothing sent again.
        assert!(r
            .changed(names.iter().map(|n| (n.as_str(), Vec::new())))
            .is_empty());
    }

    #[test]
    fn a_hardware_device_is_remembered_by_its_parent_function() {
        let mut r = Recipes::new(fixture("e810"));
        let names = Sysfs::new(fixture("e810")).device_names().unwrap();
        let got = r.changed(names.iter().map(|n| (n.as_str(), Vec::new())));
        assert!(!got.is_empty());
        assert!(
            got.iter().all(|o| matches!(o,
                Observation::DeviceRecipe { recipe: RecreateFrom::Parent { parent, netdevs, .. }, .. }
                    if parent.name == "0000:02:00.0" && netdevs == &["enp2s0f0".to_string()])),
            "{got:?}"
        );
    }

    #[test]
    fn a_device_gone_from_sysfs_teaches_nothing() {
        let mut r = Recipes::new(fixture("empty"));
        assert!(r
            .changed([("rxe_ini", vec!["ini0".to_string()])])
            .is_empty());
    }
}
