//! What a subsystem event means for the storage and what to look at next, in operator
//! words: one paragraph per subsystem, sharpened by what the wording says (a timeout, a
//! reset, a failure, a fatal device error) and by the device the line names.

use serde::Serialize;

use super::{LineShape, Subsystem, SubsystemEvent};

/// The explanation of one subsystem event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubsystemExplanation {
    /// One line: `nvme nvme1 (NVMe host): Connect rejected: status 8 (invalid service ID).`
    pub title: String,
    /// What it means for the storage.
    pub meaning: String,
    /// What to look at next; commands in backquotes.
    pub next: String,
    /// For a fatal device error: what the driver does about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_action: Option<String>,
}

/// Explains one event.
pub fn explain_event(ev: &SubsystemEvent) -> SubsystemExplanation {
    let dev = ev.device.label();
    let who = match (&ev.origin, dev.as_str()) {
        (Some(o), "-") => o.clone(),
        (Some(o), d) if d != o => format!("{o} {d}"),
        (_, d) => d.to_string(),
    };
    let title = format!("{who} ({}): {}", describe(ev.subsystem), ev.message);
    let (mut meaning, next) = base(ev, &dev);
    let m = ev.message.as_str();
    if let LineShape::Frame { function, module } = &ev.shape {
        meaning = format!(
            "a call-trace frame in {} ({function}): part of a kernel oops or WARN report; the \
             report's first line says what went wrong, the frames where. {meaning}",
            module.as_deref().unwrap_or("this code")
        );
    } else if let LineShape::ReportHeader { what, location } = &ev.shape {
        meaning = format!(
            "the kernel reported a {} at {location}: a kernel bug or a broken assumption in \
             this code, not something the agent can repair. {meaning}",
            if what == "bug" { "BUG()" } else { "WARN()" }
        );
    } else if ev.fatal_device_error {
        meaning = format!(
            "the driver reports a fatal firmware or device error on {dev}: every RDMA \
             connection on the device fails, and its sessions with them. {meaning}"
        );
    } else if contains_any(
        m,
        &["timeout", "timed out", "No done completion", "Timeout"],
    ) {
        meaning = format!("something on {dev} did not answer in time. {meaning}");
    } else if contains_any(m, &["reset", "Reset"]) {
        meaning = format!("{dev} is being reset or was reset. {meaning}");
    } else if contains_any(m, &["fail", "Fail", "error", "Error", "unable", "rejected"]) {
        meaning = format!("an operation on {dev} failed. {meaning}");
    }
    let driver_action = ev.fatal_device_error.then(|| driver_action(ev));
    SubsystemExplanation {
        title,
        meaning,
        next,
        driver_action,
    }
}

fn contains_any(s: &str, words: &[&str]) -> bool {
    words.iter().any(|w| s.contains(w))
}

/// The subsystem in a few words.
fn describe(s: Subsystem) -> &'static str {
    match s {
        Subsystem::RdmaCore => "RDMA core",
        Subsystem::RdmaCm => "RDMA connection manager",
        Subsystem::RdmaDriver => "RDMA driver",
        Subsystem::Nic => "RDMA adapter, NIC/firmware side",
        Subsystem::Iser => "iSER initiator",
        Subsystem::Iscsi => "iSCSI initiator",
        Subsystem::Scsi => "SCSI disk layer",
        Subsystem::Block => "block layer",
        Subsystem::Nvme => "NVMe host",
        Subsystem::IscsiTarget => "iSCSI target (LIO)",
        Subsystem::Nfs => "NFS over RDMA",
    }
}

/// The subsystem's paragraph and what to look at next.
fn base(ev: &SubsystemEvent, dev: &str) -> (String, String) {
    match ev.subsystem {
        Subsystem::RdmaCore => (
            "The RDMA core manages the device's ports, GID table and the MAD traffic that \
             every RDMA CM connection (each iSER login) needs; an error here can stop new \
             connections on the port while established ones go on."
                .into(),
            format!(
                "`rdma link show`, `rdma resource show qp` (QP 1, type GSI, should be RTS) and \
                 `iser-guard status`; the lines of {dev} around this one"
            ),
        ),
        Subsystem::RdmaCm => (
            "The RDMA connection manager resolves the portal's address and route and sets up \
             each iSER or NVMe-oF connection; its errors make logins fail or time out."
                .into(),
            "whether the portal answers (`ping`, `ip route get <portal>`), \
             `rdma resource show cm_id`, and iscsid's log (`journalctl -u iscsid`)"
                .into(),
        ),
        Subsystem::RdmaDriver => (
            format!(
                "The RDMA driver of {dev} reports on its queue pairs, completion queues and \
                 work completions; a connection whose QP goes to ERR fails and iscsid logs it \
                 in again."
            ),
            format!(
                "`rdma resource show qp link {dev}`, the driver and firmware versions \
                 (`ethtool -i <netdev>`), and `iser-guard explain` on the other lines of \
                 {dev}"
            ),
        ),
        Subsystem::Nic => (
            format!(
                "{dev} is the adapter function that carries the RDMA device; its firmware \
                 commands, health events, PCIe and link changes decide whether RDMA works on \
                 it at all."
            ),
            "`devlink health show`, `ethtool -i <netdev>` (driver and firmware versions), \
             `rdma link show`, and the firmware release notes for the message"
                .into(),
        ),
        Subsystem::Iser => (
            "iSER carries the iSCSI sessions over RDMA; its errors end the connection of a \
             session, which iscsid then logs in again."
                .into(),
            "`iscsiadm -m session -P 3` (session state, iface, device), `iser-guard status`".into(),
        ),
        Subsystem::Iscsi => (
            format!(
                "{dev} is an iSCSI connection or session; when it fails, iscsid reconnects and \
                 I/O waits until node.session.timeo.replacement_timeout, then fails."
            ),
            "`iscsiadm -m session -P 3`, iscsid's log (`journalctl -u iscsid`), \
             `iser-guard status`"
                .into(),
        ),
        Subsystem::Scsi => (
            format!(
                "{dev} is a SCSI disk or host; on an iSCSI/iSER host these are the disks of \
                 the sessions, and command failures and resets show the health of their path."
            ),
            "`lsscsi -t` (which transport and session), `multipath -ll`, \
             `iscsiadm -m session -P 3`"
                .into(),
        ),
        Subsystem::Block => (
            format!(
                "The block layer reports I/O to {dev} that failed or could not be issued; \
                 applications and file systems see these errors."
            ),
            "which path the disk is on (`lsblk -o NAME,HCTL,TRAN`, `multipath -ll`), and a \
             file-system check once the path is back"
                .into(),
        ),
        Subsystem::Nvme => (
            format!(
                "{dev} is an NVMe host controller or namespace; over RDMA it reconnects after \
                 keep-alive or path loss, and requeues I/O while no path is usable."
            ),
            "`nvme list-subsys`, `nvme list`, the RDMA port under it (`rdma link show`) and \
             the target"
                .into(),
        ),
        Subsystem::IscsiTarget => (
            "LIO, the kernel's iSCSI/iSER target (target_core_mod, iscsi_target_mod, \
             ib_isert), is the other end of the sessions: this host (or a lab box that is \
             both ends) exports LUNs. A login timeout, an ABORT_TASK or a connection reset \
             here is the target's view of an initiator's timed-out command or failed \
             connection; an ABORT_TASK usually means the backstore did not complete a \
             command in time."
                .into(),
            "`targetcli ls` (portals, ACLs, backstores), the backstore device's health and \
             latency, and the initiator's log at the same time (`iser-guard explain` there: \
             `detected conn error`, `session recovery timed out`)"
                .into(),
        ),
        Subsystem::Nfs => (
            "NFS over RDMA carries the mount's RPCs on an RDMA connection (rpcrdma on the \
             client, svcrdma on the server); when the connection or the device under it \
             fails, the client reconnects and a hard mount's I/O waits (`nfs: server … not \
             responding, still trying`) until the server answers again (`… OK`)."
                .into(),
            "`nfsstat -m` and `mount -t nfs,nfs4` (which mounts use `proto=rdma`), \
             `rdma link show` and `rdma resource show cm_id` (the RDMA port and connections \
             under the mount), and the server's `svcrdma` lines"
                .into(),
        ),
    }
}

/// What the driver does about a fatal device error.
fn driver_action(ev: &SubsystemEvent) -> String {
    let driver = ev
        .origin
        .as_deref()
        .or(ev.device.driver.as_deref())
        .unwrap_or("the driver");
    match driver {
        "mlx5_core" | "mlx5_ib" => "mlx5_core runs its health recovery: it collects a firmware \
             dump (`devlink health`), resets the PCI function when the firmware allows it \
             (SW_RECOVERY_ON_ERRORS) and re-creates its RDMA device; the ports are down \
             meanwhile, and iscsid logs the sessions in again once the device is back"
            .into(),
        "mlx4_core" | "mlx4_en" | "mlx4_ib" => "mlx4_core resets the device (module parameter \
             internal_err_reset, on by default) and re-creates its ports; sessions come back \
             when iscsid logs them in again"
            .into(),
        other => format!(
            "{other} reports the device fatal to RDMA consumers (IB_EVENT_DEVICE_FATAL): the \
             device stays unusable until it is re-created (`iser-guard reset-device` or a \
             driver reload)"
        ),
    }
}
