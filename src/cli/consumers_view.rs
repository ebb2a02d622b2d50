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
        assert!(render(Some(&[])).contains("none"));
    }
}
