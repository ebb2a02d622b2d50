//! The NVMe controllers of `<root>/class/nvme/<nvmeN>/`: the text of their attributes and
//! the namespace entries under them (`nvmeNnY`, or the multipath paths `nvmeScNnY` with
//! their `nsid`), for [`crate::core::nvme_fabrics::read_ctrl_files`]. Reads, never writes.
//! A controller whose files cannot be read or parsed is skipped with its reason (it may be
//! going away while it is read); the rest are still reported.

use std::fs;
use std::path::Path;

use crate::core::nvme_fabrics::{
    namespace_block, read_ctrl_files, NvmeCtrlFiles, NvmeRdmaController,
};

/// The attributes read: what `nvme connect` needs again, and the state.
const ATTRS: [&str; 12] = [
    "transport",
    "address",
    "subsysnqn",
    "hostnqn",
    "hostid",
    "state",
    "queue_count",
    "sqsize",
    "ctrl_loss_tmo",
    "reconnect_delay",
    "kato",
    "cntrltype",
];

/// The raw files of every controller under `<sysfs_root>/class/nvme`, sorted by name; no
/// class directory (no nvme-core loaded) is no controller.
pub fn ctrl_files(sysfs_root: &Path) -> Vec<NvmeCtrlFiles> {
    let class = sysfs_root.join("class/nvme");
    let Ok(entries) = fs::read_dir(&class) else {
        return Vec::new();
    };
    let mut out: Vec<NvmeCtrlFiles> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("nvme")
                .then(|| one(&class.join(&name), name))
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn one(dir: &Path, name: String) -> NvmeCtrlFiles {
    let attrs = ATTRS
        .iter()
        .filter_map(|a| {
            fs::read_to_string(dir.join(a))
                .ok()
                .map(|t| ((*a).to_string(), t))
        })
        .collect();
    let mut namespaces: Vec<(String, Option<String>)> = fs::read_dir(dir)
        .map(|es| {
            es.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| namespace_block(n).is_some())
                .map(|n| {
                    let nsid = fs::read_to_string(dir.join(&n).join("nsid")).ok();
                    (n, nsid)
                })
                .collect()
        })
        .unwrap_or_default();
    namespaces.sort();
    NvmeCtrlFiles {
        name,
        attrs,
        namespaces,
    }
}

/// The NVMe over RDMA controllers of the host (unplaced), and the reasons controllers were
/// skipped.
pub fn rdma_controllers(sysfs_root: &Path) -> (Vec<NvmeRdmaController>, Vec<String>) {
    let mut ctrls = Vec::new();
    let mut skipped = Vec::new();
    for f in ctrl_files(sysfs_root) {
        match read_ctrl_files(&f) {
            Ok(Some(c)) => ctrls.push(c),
            Ok(None) => {}
            Err(e) => skipped.push(e.to_string()),
        }
    }
    (ctrls, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A controller directory as the kernel lays it out (one value and a newline a file;
    /// with native multipath the namespace under the controller is the path `nvme0c0n1`).
    fn write_ctrl(root: &Path, name: &str, transport: &str, state: &str) {
        let d = root.join("class/nvme").join(name);
        fs::create_dir_all(d.join("nvme0c0n1")).unwrap();
        for (k, v) in [
            ("transport", transport),
            (
                "address",
                "traddr=192.0.2.10,trsvcid=4420,host_traddr=192.0.2.1",
            ),
            ("subsysnqn", "nqn.2014-08.org.example:lab-nvme"),
            (
                "hostnqn",
                "nqn.2014-08.org.nvmexpress:uuid:0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e",
            ),
            ("hostid", "0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e"),
            ("state", state),
            ("queue_count", "3"),
            ("sqsize", "127"),
            ("ctrl_loss_tmo", "off"),
            ("reconnect_delay", "10"),
            ("kato", "5"),
            ("cntrltype", "io"),
        ] {
            fs::write(d.join(k), format!("{v}\n")).unwrap();
        }
        fs::write(d.join("nvme0c0n1/nsid"), "1\n").unwrap();
        fs::create_dir_all(d.join("power")).unwrap();
    }

    #[test]
    fn rdma_controllers_are_read_and_others_left_out() {
        let t = tempfile::tempdir().unwrap();
        write_ctrl(t.path(), "nvme0", "rdma", "live");
        write_ctrl(t.path(), "nvme1", "tcp", "live");
        let (c, skipped) = rdma_controllers(t.path());
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "nvme0");
        assert_eq!(c[0].io_queues, Some(2));
        assert_eq!(c[0].ctrl_loss_tmo, Some(-1));
        assert_eq!(c[0].namespaces.len(), 1);
        assert_eq!(c[0].namespaces[0].block, "nvme0n1");
        assert_eq!(c[0].namespaces[0].nsid, Some(1));
    }

    #[test]
    fn a_controller_with_bad_files_is_skipped_with_its_reason() {
        let t = tempfile::tempdir().unwrap();
        write_ctrl(t.path(), "nvme0", "rdma", "live");
        write_ctrl(t.path(), "nvme2", "rdma", "live");
        fs::write(t.path().join("class/nvme/nvme2/address"), "garbage\n").unwrap();
        let (c, skipped) = rdma_controllers(t.path());
        assert_eq!(c.len(), 1);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("nvme2/address"), "{skipped:?}");
    }

    #[test]
    fn no_nvme_class_is_no_controller() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(rdma_controllers(t.path()), (Vec::new(), Vec::new()));
    }
}
