//! How `status` shows the RDMA consumers of each port (its own section, after the device
//! table): one line per port, each consumer with what it holds and whether it still works.

use std::fmt::Write as _;

use crate::core::consumers::PortConsumers;

/// The section: `RDMA consumers:` and a line per port, or why they are not known.
pub fn render(ports: Option<&[PortConsumers]>) -> String {
    let Some(ports) = ports else {
        return "\nRDMA consumers: not known (no RDMA netlink)\n".to_string();
    };
    if ports.is_empty() {
        return "\nRDMA consumers: none (no RDMA CM id or user QP on any port)\n".to_string();
    }
    let mut out = String::from("\nRDMA consumers:\n");
    for p in ports {
        let list: Vec<String> = p.consumers.iter().map(|c| c.describe()).collect();
        let _ = writeln!(out, "  {}/{}: {}", p.device, p.port, list.join(", "));
    }
    out
}

/// The NVMe over RDMA controllers, one line each with the port they are placed on and
/// what a re-creation of that device would run to bring them back; nothing when none.
pub fn render_nvme(ctrls: &[crate::core::nvme_fabrics::NvmeRdmaController]) -> String {
    if ctrls.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nNVMe over RDMA controllers (reconnected after a re-creation):\n");
    for c in ctrls {
        let on = c
            .placed
            .as_ref()
            .map_or_else(|| "port not known".to_string(), |(d, p)| format!("{d}/{p}"));
        let ns: Vec<&str> = c.namespaces.iter().map(|n| n.block.as_str()).collect();
        let _ = writeln!(
            out,
            "  {} on {on}: {}, namespaces {}",
            c.describe(),
            c.state,
            if ns.is_empty() {
                "none".to_string()
            } else {
                ns.join(" ")
            }
        );
    }
    out
}

/// The NFS over RDMA mounts, one line each with the port its transport runs on; nothing
/// when none.
pub fn render_nfs(mounts: &[crate::core::nfs_rdma::NfsRdmaMount]) -> String {
    if mounts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nNFS over RDMA mounts (the kernel reconnects them after a re-creation; checked):\n",
    );
    for m in mounts {
        let on = m.placed.as_ref().map_or_else(
            || "port not known (no rpcrdma connection seen yet)".to_string(),
            |(d, p)| format!("{d}/{p}"),
        );
        let port = m.port.map(|p| format!(":{p}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} on {on}: server {}{port} over {}",
            m.describe(),
            m.server,
            m.proto
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::consumers::{Consumer, ConsumerKind, Owner};

    #[test]
    fn each_port_lists_its_consumers_and_unknown_says_why() {
        let nvme = Consumer {
            kind: ConsumerKind::NvmeRdma,
            owner: Owner::Kernel {
                module: "nvme_rdma".into(),
            },
            connections: 2,
            live_connections: 2,
            listeners: 0,
            bound_listeners: 0,
            qps: 0,
            live_qps: 0,
            evidence: Vec::new(),
        };
        let ports = vec![PortConsumers {
            device: "rocep2s0f0".into(),
            port: 1,
            consumers: vec![nvme],
        }];
        assert_eq!(
            render(Some(&ports)),
            "\nRDMA consumers:\n  rocep2s0f0/1: nvme_rdma (2 connections, live)\n"
        );
        assert!(render(None).contains("not known"));
        assert_eq!(render_nvme(&[]), "");
        let c =
            crate::core::nvme_fabrics::read_ctrl_files(&crate::core::nvme_fabrics::NvmeCtrlFiles {
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
                namespaces: vec![("nvme0c0n1".into(), Some("1\n".into()))],
            })
            .unwrap()
            .unwrap();
        let placed = crate::core::nvme_fabrics::NvmeRdmaController {
            placed: Some(("rocep2s0f0".into(), 1)),
            ..c
        };
        assert_eq!(
            render_nvme(&[placed]),
            "\nNVMe over RDMA controllers (reconnected after a re-creation):\n  nvme0 \
             (nqn.2014-08.org.example:lab-nvme at 192.0.2.10:4420) on rocep2s0f0/1: live, \
             namespaces nvme0n1\n"
        );
        assert!(render(Some(&[])).contains("none"));
    }

    #[test]
    fn nfs_mounts_are_listed_with_their_port_and_server() {
        assert_eq!(render_nfs(&[]), "");
        let m = crate::core::nfs_rdma::parse_line(
            "83 22 0:47 / /mnt/nfs rw - nfs4 192.0.2.10:/export \
             rw,vers=4.2,proto=rdma,port=20049,addr=192.0.2.10",
        )
        .unwrap()
        .unwrap();
        let placed = crate::core::nfs_rdma::NfsRdmaMount {
            placed: Some(("rocep2s0f0".into(), 1)),
            ..m.clone()
        };
        assert_eq!(
            render_nfs(&[placed, m]),
            "\nNFS over RDMA mounts (the kernel reconnects them after a re-creation; \
             checked):\n  /mnt/nfs (192.0.2.10:/export, nfs4 4.2) on rocep2s0f0/1: server \
             192.0.2.10:20049 over rdma\n  /mnt/nfs (192.0.2.10:/export, nfs4 4.2) on port not \
             known (no rpcrdma connection seen yet): server 192.0.2.10:20049 over rdma\n"
        );
    }
}
