//! NVMe over RDMA controllers around a re-creation: remembered in the re-creation's record
//! when it is decided (journaled with it, before the device goes), reconnected once the
//! device is back ([`ActionKind::NvmeReconnect`]), and their results kept in the record and
//! told in one alert. The port's own recovery (iSCSI reconnect, verification) does not wait
//! for them: they are another consumer of the device, with their own result.
//!
//! Policy (issue 23): a live controller still holds an automatic re-creation
//! (`[recovery.consumers] nvme-rdma`, `crate::consumers::in_the_way`), reconnect or not:
//! nvme_rdma deletes it with the device, and with it the namespaces' block devices, so
//! whatever has them open (a mounted file system, LVM, dm-multipath) loses them even though
//! `nvme connect` brings the controller back under new ones. A controller already broken by
//! the fault never holds, and is brought back.

use std::time::Duration;

use super::Engine;
use crate::nvme_fabrics::{NvmeRdmaController, NvmeReconnectReport};
use crate::recovery::action::{ActionKind, AlertClass, Origin};
use crate::time::Instant;

/// How long the executor waits for one reconnected controller to be live with its
/// namespaces (nvme_rdma's connect is synchronous; namespace scanning follows it).
pub const NVME_BACK_TIMEOUT: Duration = Duration::from_secs(30);

impl Engine {
    /// The NVMe over RDMA controllers placed on `device`, as last reported.
    pub fn nvme_of(&self, device: &str) -> Vec<NvmeRdmaController> {
        self.nvme.as_deref().map_or_else(Vec::new, |all| {
            crate::nvme_fabrics::on_device(all, device)
                .cloned()
                .collect()
        })
    }

    /// The NVMe over RDMA controllers as last reported, if ever.
    pub fn nvme_controllers(&self) -> Option<&[NvmeRdmaController]> {
        self.nvme.as_deref()
    }

    /// `device` (remembered as `was` when the re-creation was decided) is back: reconnect
    /// the controllers its record remembered.
    pub(super) fn ask_nvme_reconnect(&mut self, was: &str, device: &str, origin: Origin) {
        let controllers = self
            .recreation_record(was, device)
            .map(|r| r.nvme.clone())
            .unwrap_or_default();
        if controllers.is_empty() {
            return;
        }
        self.push(
            None,
            Some(device.to_string()),
            origin,
            format!(
                "{device} re-created: nvme_rdma deleted its controllers with it; reconnecting \
                 {} remembered: {}",
                controllers.len(),
                crate::nvme_fabrics::list_controllers(&controllers)
            ),
            ActionKind::NvmeReconnect {
                device: device.to_string(),
                controllers,
                timeout: NVME_BACK_TIMEOUT,
            },
        );
    }

    /// What became of the controllers of `device`'s re-creation.
    pub(super) fn on_nvme_reconnect(
        &mut self,
        device: &str,
        reports: Vec<NvmeReconnectReport>,
        now: Instant,
    ) {
        let back = reports.iter().filter(|r| r.result.is_back()).count();
        let total = reports.len();
        let detail = reports
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        if let Some(r) = self
            .devices
            .get_mut(device)
            .and_then(|d| d.recreation.as_mut())
        {
            r.nvme_back = reports;
        }
        if back == total {
            self.alert(
                now,
                AlertClass::Info,
                format!("nvme-back:{device}"),
                format!(
                    "{back} NVMe over RDMA controller(s) on {device} back after its re-creation"
                ),
                detail,
                None,
            );
        } else {
            self.alert(
                now,
                AlertClass::Critical,
                format!("nvme-not-back:{device}"),
                format!(
                    "{} of {total} NVMe over RDMA controller(s) on {device} NOT back after its \
                     re-creation",
                    total - back
                ),
                format!(
                    "{detail}. nvme_rdma deleted them with the device; connect them again with \
                     nvme connect (the parameters are in `iser-guard history` and the journal)"
                ),
                None,
            );
        }
        self.persist(format!(
            "NVMe over RDMA controllers of {device}: {back} of {total} back"
        ));
    }
}
