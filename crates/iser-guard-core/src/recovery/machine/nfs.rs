//! NFS mounts over RDMA around a re-creation: remembered in the re-creation's record when it
//! is decided (journaled with it as `nfs-mounts`, before the device goes), checked once the
//! device is back ([`ActionKind::NfsCheck`]: a bounded `stat` of each mount point, retried
//! within [`NFS_CHECK_WINDOW`]), and their results kept in the record and told in one alert.
//! The port's own recovery does not wait for them: they are another consumer of the device,
//! with their own result.
//!
//! Policy: the kernel brings them back by itself (xprtrdma connects again on the next RPC),
//! so a live rpcrdma client connection does not hold an automatic re-creation
//! (`crate::consumers::Consumer::kernel_brings_back`); what nothing checked before is now
//! checked: that each mount answers again.

use std::time::Duration;

use super::Engine;
use crate::nfs_rdma::{NfsCheckReport, NfsRdmaMount};
use crate::recovery::action::{ActionKind, AlertClass, Origin};
use crate::time::Instant;

/// How long the executor keeps asking a remembered mount to answer after the re-creation:
/// xprtrdma connects again on the first RPC after the device is back, which waits for the
/// port to be active and the route to resolve (RoCE: a neighbour entry), then for its
/// connect to time out and retry if the first one was too early. A minute covers a few of
/// those rounds; a mount that has not answered by then is alerted, not waited for.
pub const NFS_CHECK_WINDOW: Duration = Duration::from_secs(60);

impl Engine {
    /// The NFS over RDMA mounts placed on `device`, as last reported.
    pub fn nfs_of(&self, device: &str) -> Vec<NfsRdmaMount> {
        self.nfs.as_deref().map_or_else(Vec::new, |all| {
            crate::nfs_rdma::on_device(all, device).cloned().collect()
        })
    }

    /// The NFS over RDMA mounts as last reported, if ever.
    pub fn nfs_mounts(&self) -> Option<&[NfsRdmaMount]> {
        self.nfs.as_deref()
    }

    /// `device` (remembered as `was` when the re-creation was decided) is back: check the
    /// mounts its record remembered.
    pub(super) fn ask_nfs_check(&mut self, was: &str, device: &str, origin: Origin) {
        let mounts = self
            .recreation_record(was, device)
            .map(|r| r.nfs.clone())
            .unwrap_or_default();
        if mounts.is_empty() {
            return;
        }
        self.push(
            None,
            Some(device.to_string()),
            origin,
            format!(
                "{device} re-created: xprtrdma reconnects its NFS mounts on their next RPC; \
                 checking {} remembered: {}",
                mounts.len(),
                crate::nfs_rdma::list_mounts(&mounts)
            ),
            ActionKind::NfsCheck {
                device: device.to_string(),
                mounts,
                window: NFS_CHECK_WINDOW,
            },
        );
    }

    /// What the checks of `device`'s re-creation said.
    pub(super) fn on_nfs_check(
        &mut self,
        device: &str,
        reports: Vec<NfsCheckReport>,
        now: Instant,
    ) {
        let answered = reports.iter().filter(|r| r.result.answered()).count();
        let total = reports.len();
        let detail = reports
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let silent: Vec<String> = reports
            .iter()
            .filter(|r| !r.result.answered())
            .map(|r| r.mount.mount_point.clone())
            .collect();
        if let Some(r) = self
            .devices
            .get_mut(device)
            .and_then(|d| d.recreation.as_mut())
        {
            r.nfs_checks = reports;
        }
        if answered == total {
            self.alert(
                now,
                AlertClass::Info,
                format!("nfs-back:{device}"),
                format!(
                    "{answered} NFS over RDMA mount(s) on {device} answer after its re-creation"
                ),
                detail,
                None,
            );
        } else {
            self.alert(
                now,
                AlertClass::Critical,
                format!("nfs-not-back:{device}"),
                format!(
                    "{} of {total} NFS over RDMA mount(s) on {device} NOT answering after its \
                     re-creation: {}",
                    total - answered,
                    silent.join(", ")
                ),
                format!(
                    "{detail}. xprtrdma reconnects on the next RPC by itself; a mount still \
                     silent has a server or route that does not answer over the new device \
                     (see `rdma resource show cm_id` and the kernel log for rpcrdma lines)"
                ),
                None,
            );
        }
        self.persist(format!(
            "NFS over RDMA mounts of {device}: {answered} of {total} answer"
        ));
    }
}
