//! Probes the running kernel for what `core::kernel_caps` decides on: SYS_GET (does the
//! kernel send device events), one RES_CM_ID_GET dump (is the CM id table there), the driver
//! folder of each RDMA device in sysfs, and the kernel release. Used by `status` and by the
//! daemon's first log line; the daemon's own watcher asks SYS_GET again for itself.

use std::path::Path;

use crate::core::kernel_caps::{driver_folder, CapsProbe, KernelCaps};
use crate::io::netlink::{BlockingTransport, NetlinkError, NldevClient, Skips};

/// Probes with `client` (or records why there is none), sysfs under `sysfs_root` and the
/// release from `<proc_root>/sys/kernel/osrelease`. Never fails: what cannot be asked is
/// left unknown, what fails says why.
pub fn probe<T: BlockingTransport>(
    client: Result<&mut NldevClient<T>, &NetlinkError>,
    sysfs_root: &Path,
    proc_root: &Path,
) -> CapsProbe {
    let release = std::fs::read_to_string(proc_root.join("sys/kernel/osrelease"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let reset_sysfs = crate::io::reset::sysfs::Sysfs::new(sysfs_root);
    let scan = crate::io::sysfs::scan(sysfs_root).unwrap_or_default();
    let drivers = reset_sysfs
        .device_names()
        .unwrap_or_default()
        .iter()
        .filter_map(|name| {
            let facts = reset_sysfs.facts(name).ok().flatten();
            let scanned = scan.device(name).and_then(|d| d.parent.rdma_driver());
            driver_folder(facts.as_ref(), scanned)
        })
        .collect();
    let mut probe = CapsProbe {
        release,
        drivers,
        ..CapsProbe::default()
    };
    let Ok(client) = client else {
        return probe;
    };
    probe.monitor_mode = Some(
        client
            .system_info()
            .map(|s| s.supports_monitor())
            .map_err(|e| e.to_string()),
    );
    let mut skips = Skips::default();
    if let Some(dev) = client
        .devices(&mut skips)
        .ok()
        .and_then(|d| d.into_iter().next())
    {
        probe.cm_id_dump = Some(
            client
                .cm_ids(dev.index, &mut skips)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
    }
    probe
}

/// [`probe`] and the decision.
pub fn detect<T: BlockingTransport>(
    client: Result<&mut NldevClient<T>, &NetlinkError>,
    sysfs_root: &Path,
    proc_root: &Path,
) -> KernelCaps {
    KernelCaps::decide(&probe(client, sysfs_root, proc_root))
}
