//! The doctor's word on NVMe over RDMA: whether the controllers a re-creation deletes
//! (nvme_rdma deletes every controller of a removed device) would be brought back. Judged
//! from facts the shell reads apart from [`super::Facts`]: the controllers in
//! `/sys/class/nvme`, whether nvme-cli is installed, and `recovery.nvme-reconnect`.

use serde::Serialize;

use super::{Check, CheckKind, CheckVerdict};
use crate::nvme_fabrics::NvmeRdmaController;

/// What the NVMe check is judged from.
#[derive(Debug, Clone, Serialize)]
pub struct NvmeReconnectFacts {
    /// The NVMe over RDMA controllers, placed on their ports where the CM id table says.
    pub controllers: Vec<NvmeRdmaController>,
    /// `paths.nvme`.
    pub nvme_cli: String,
    /// It is an executable file.
    pub nvme_cli_present: bool,
    /// `recovery.nvme-reconnect`.
    pub enabled: bool,
}

/// One check when the host has NVMe over RDMA controllers; none otherwise.
pub fn nvme_reconnect_check(f: &NvmeReconnectFacts) -> Option<Check> {
    if f.controllers.is_empty() {
        return None;
    }
    let n = f.controllers.len();
    let evidence = f.controllers.iter().map(|c| {
        let on = c.placed.as_ref().map_or_else(
            || "port not known".to_string(),
            |(d, p)| format!("on {d}/{p}"),
        );
        format!("{} {on}: {}", c.describe(), c.state)
    });
    let mut c = if !f.enabled {
        Check::new(
            CheckKind::CmIds,
            "nvme-rdma",
            CheckVerdict::Warning,
            format!(
                "{n} NVMe over RDMA controller(s): NOT brought back after a re-creation \
                 (recovery.nvme-reconnect = false)"
            ),
        )
        .action("set recovery.nvme-reconnect = true, or plan to nvme connect them by hand")
    } else if !f.nvme_cli_present {
        Check::new(
            CheckKind::CmIds,
            "nvme-rdma",
            CheckVerdict::Warning,
            format!(
                "{n} NVMe over RDMA controller(s): NOT brought back after a re-creation, \
                 nvme-cli is not installed ({} is missing)",
                f.nvme_cli
            ),
        )
        .action("install nvme-cli (apt install nvme-cli), or set paths.nvme to where it is")
    } else {
        Check::new(
            CheckKind::CmIds,
            "nvme-rdma",
            CheckVerdict::Ok,
            format!(
                "{n} NVMe over RDMA controller(s): nvme connect ({}) brings them back after a \
                 re-creation and each is verified; a live one still holds an automatic \
                 re-creation (recovery.consumers.nvme-rdma)",
                f.nvme_cli
            ),
        )
    };
    c.evidence.extend(evidence);
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvme_fabrics::{read_ctrl_files, NvmeCtrlFiles};

    fn facts(present: bool, enabled: bool, n: usize) -> NvmeReconnectFacts {
        let c = read_ctrl_files(&NvmeCtrlFiles {
            name: "nvme0".into(),
            attrs: [
                ("transport", "rdma\n"),
                ("address", "traddr=192.0.2.10,trsvcid=4420\n"),
                ("subsysnqn", "nqn.2014-08.org.example:lab-nvme\n"),
                ("state", "live\n"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            namespaces: Vec::new(),
        })
        .unwrap()
        .unwrap();
        NvmeReconnectFacts {
            controllers: vec![c; n],
            nvme_cli: "/usr/sbin/nvme".into(),
            nvme_cli_present: present,
            enabled,
        }
    }

    #[test]
    fn without_nvme_cli_the_controllers_are_said_not_brought_back() {
        assert!(nvme_reconnect_check(&facts(false, true, 0)).is_none());
        let c = nvme_reconnect_check(&facts(false, true, 1)).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning);
        assert!(
            c.finding.contains("nvme-cli is not installed"),
            "{}",
            c.finding
        );
        assert!(c.evidence[0].contains("nvme0"), "{:?}", c.evidence);
        let c = nvme_reconnect_check(&facts(true, false, 1)).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning);
        assert!(c.finding.contains("recovery.nvme-reconnect = false"));
        let c = nvme_reconnect_check(&facts(true, true, 2)).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Ok);
        assert!(c.finding.starts_with("2 NVMe over RDMA controller(s)"));
    }
}
