//! The names of the processes that hold RDMA resources: `/proc/PID/comm` under
//! `paths.proc-root`, read for the consumers per port (RDMA netlink names a user-space
//! owner by pid only).

use std::path::Path;

use crate::core::consumers::PortConsumers;

/// Fills in the `comm` of every process owner in `ports` from `proc_root`; a process gone
/// meanwhile (or unreadable) stays a pid.
pub fn name_processes(ports: &mut [PortConsumers], proc_root: &Path) {
    crate::core::consumers::name_processes(ports, |pid| {
        crate::io::sysfs::attr::read_attr(&proc_root.join(pid.to_string()).join("comm"))
            .ok()
            .flatten()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::consumers::{Consumer, ConsumerKind, Owner};

    #[test]
    fn a_pid_is_named_from_its_comm_and_a_gone_one_stays_a_pid() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("4242")).unwrap();
        std::fs::write(dir.path().join("4242/comm"), "spdk_tgt\n").unwrap();
        let process = |pid| Consumer {
            kind: ConsumerKind::UserSpace,
            owner: Owner::Process { pid, comm: None },
            connections: 0,
            live_connections: 0,
            listeners: 1,
            bound_listeners: 1,
            qps: 0,
            live_qps: 0,
            evidence: Vec::new(),
        };
        let mut ports = vec![PortConsumers {
            device: "rxe_ini".into(),
            port: 1,
            consumers: vec![process(4242), process(4243)],
        }];
        name_processes(&mut ports, dir.path());
        let names: Vec<String> = ports[0]
            .consumers
            .iter()
            .map(|c| c.owner.describe())
            .collect();
        assert_eq!(names, ["pid 4242 (spdk_tgt)", "pid 4243"]);
    }
}
