//! The subsystem layer under the signatures: every line of the subsystems an RDMA storage
//! host depends on, recognised by the kernel's own structure rather than by phrase.
//!
//! A line's origin is in its prefix (kernel-facts §5 and the printk helpers): the
//! `dev_printk` driver or bus word and device (`mlx5_core 0000:61:00.0: `,
//! `infiniband rocep33s0f0: `, `nvme nvme1: `, `block nvme0n4: `, `sd 2:0:0:0: `,
//! `scsi host26: `), the iSCSI class devices (` connection1:0: `, ` session1: `), a module's
//! `pr_fmt` (`mlx4_en: `, `rdma_rxe: `, `iser: `), mlx4's `<mlx4_ib> `, a `__func__` prefix of
//! RDMA code (`__ib_cache_gid_add: `), the `[module]` tag of a call-trace frame and the
//! source path of a `WARNING: … at drivers/…`. [`recognise`] turns such a line into a
//! [`SubsystemEvent`]: its [`Subsystem`], the device, port, session or disk it concerns, a
//! level (the record's own where it has one, else from the wording), and [`explain_event`]
//! says what it means for the storage and what to look at next. [`trace::TraceAssembler`]
//! makes one event of a whole oops or WARN report.
//!
//! What this layer never does: decide. The signatures (`super::classify`) remain the only
//! source of what the engine acts on; a subsystem event is explained, counted and shown.
//! Lines of other subsystems stay silent whatever phrase they carry mid-line, because only
//! the names of [`tables::NAMES`] open a line.
//!
//! Cost: a line is looked at once, up to its first `: ` or a few words; nothing is
//! allocated unless it is recognised.

mod bare;
mod bare_formats;
mod explain;
mod tables;
pub mod trace;

pub use explain::{explain_event, SubsystemExplanation};

use serde::{Deserialize, Serialize};

use super::device::{apply_dict_device, apply_prefix, looks_like_pci, NameRole};
use super::types::NamedDevices;

/// The subsystems an RDMA storage host depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subsystem {
    /// ib_core, the MAD layer, verbs, uverbs, IPoIB: the RDMA devices and ports.
    RdmaCore,
    /// The RDMA connection managers (rdma_cm, ib_cm, iw_cm).
    RdmaCm,
    /// An RDMA device's driver (mlx5_ib, irdma, bnxt_re, qedr, rdma_rxe, …).
    RdmaDriver,
    /// The adapter's NIC and firmware side (mlx5_core, ice, bnxt_en, …).
    Nic,
    /// The iSER initiator (ib_iser).
    Iser,
    /// The iSCSI initiator (libiscsi, scsi_transport_iscsi): connections and sessions.
    Iscsi,
    /// SCSI disks and hosts (sd, scsi).
    Scsi,
    /// The block layer and multipath.
    Block,
    /// The NVMe host (NVMe over RDMA, and its PCI sibling).
    Nvme,
    /// The LIO target (target_core_mod, iscsi_target_mod, ib_isert): the other end of the
    /// sessions, on a host that also exports storage or a lab box that is both ends.
    IscsiTarget,
    /// NFS over RDMA: the RPC-over-RDMA transport of the client (rpcrdma, xprtrdma) and of
    /// the server (svcrdma), and the NFS client's own `nfs: server … not responding` lines
    /// (net/sunrpc/clnt.c), which are the mount's view of the same transport.
    Nfs,
}

impl Subsystem {
    /// The name used in metrics labels, JSON and text (`rdma-core`, `nvme`).
    pub fn name(self) -> &'static str {
        match self {
            Subsystem::RdmaCore => "rdma-core",
            Subsystem::RdmaCm => "rdma-cm",
            Subsystem::RdmaDriver => "rdma-driver",
            Subsystem::Nic => "nic",
            Subsystem::Iser => "iser",
            Subsystem::Iscsi => "iscsi",
            Subsystem::Scsi => "scsi",
            Subsystem::Block => "block",
            Subsystem::Nvme => "nvme",
            Subsystem::IscsiTarget => "iscsi-target",
            Subsystem::Nfs => "nfs",
        }
    }

    /// Every subsystem, in order.
    pub const ALL: [Subsystem; 11] = [
        Subsystem::RdmaCore,
        Subsystem::RdmaCm,
        Subsystem::RdmaDriver,
        Subsystem::Nic,
        Subsystem::Iser,
        Subsystem::Iscsi,
        Subsystem::Scsi,
        Subsystem::Block,
        Subsystem::Nvme,
        Subsystem::IscsiTarget,
        Subsystem::Nfs,
    ];
}

impl std::fmt::Display for Subsystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What shape of line it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "snake_case")]
pub enum LineShape {
    /// A message with a printk prefix.
    Message,
    /// A call-trace frame (or `RIP:`/`Workqueue:` line) in a module of the subsystem.
    Frame {
        /// The function (`iscsi_iser_ep_disconnect`).
        function: String,
        /// The module tag (`ib_iser`); absent for a function recognised by name alone.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        module: Option<String>,
    },
    /// The first line of a WARN or BUG report located in the subsystem's sources.
    ReportHeader {
        /// `warning` or `bug`.
        what: String,
        /// `drivers/nvme/host/rdma.c:1394`.
        location: String,
    },
}

/// One recognised line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsystemEvent {
    /// Which subsystem printed it.
    pub subsystem: Subsystem,
    /// The driver, module or bus word that opened the line (`mlx5_core`, `nvme`, `sd`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub origin: Option<String>,
    /// The device, port, session, controller or disk it concerns (`other`: an NVMe
    /// controller).
    pub device: NamedDevices,
    /// Syslog level 0 (emerg) … 7 (debug).
    pub level: u8,
    /// The level is the record's own (/dev/kmsg, `dmesg -r`); otherwise it was read from
    /// the wording.
    pub level_from_record: bool,
    /// The shape of the line.
    pub shape: LineShape,
    /// The message after its prefix.
    pub message: String,
    /// A fatal firmware or device error (mlx5 health `Fatal error`, mlx4 `Internal error
    /// detected`, a device-fatal event): the daemon raises one alert for it.
    pub fatal_device_error: bool,
}

impl SubsystemEvent {
    /// `subsystem device` for folding and counting (`nic 0000:61:00.0`).
    pub fn key(&self) -> String {
        format!("{} {}", self.subsystem, self.device.label())
    }
}

/// `Some(Subsystem::Nic)` when `word` is the driver of an RDMA adapter's NIC side
/// (`ice`, `bnxt_en`, `mlx5_core`, …): the signatures' link lines are taken from those only.
pub fn nic_driver(word: &str) -> Option<Subsystem> {
    tables::subsystem_of(word).filter(|s| *s == Subsystem::Nic)
}

/// A cheap test before [`recognise`] for a caller that sees every line of a big log: false
/// means [`recognise`] would return `None` (the line's first word is in no table and the
/// line has none of the other shapes). Looks at the first word and the last byte only.
pub fn could_recognise(text: &str) -> bool {
    let t = text.trim_start_matches([' ', '\t']);
    let t = t.strip_prefix("kernel: ").unwrap_or(t);
    let t = t.trim_end_matches(['\r', '\n']);
    let Some(&first) = t.as_bytes().first() else {
        return false;
    };
    if matches!(
        first,
        b'[' | b'<' | b'W' | b'k' | b'c' | b's' | b'B' | b'N' | b'R' | b'?' | b'Q'
    ) {
        return true;
    }
    // A call-trace frame of a module (` func+0x…/0x… [mod]`).
    if t.trim_end().ends_with(']') {
        return true;
    }
    if tables::is_target_opening(t)
        || (first == b'(' && t.contains("): E-Switch: "))
        || bare::could_match(t)
        || has_version_word(t)
        || t.starts_with("SCSI ")
        || t.starts_with("Dev ")
        || t.starts_with("Loading iSCSI")
    {
        return true;
    }
    let end = t.find([' ', ':']).unwrap_or(t.len());
    let word = &t[..end];
    tables::line_prefix_subsystem(word).is_some()
        || tables::subsystem_of_function(word).is_some()
        || word.starts_with("nvme")
        || is_ipoib_netdev(word)
        || untagged_frame_function(word).is_some()
        || blk_status_disk(t).is_some()
        || t.split(' ').next().is_some_and(|w| w.ends_with(":(pid"))
        || t[end..]
            .strip_prefix(' ')
            .is_some_and(|r| r.starts_with(ETH_SPEED_UNKNOWN))
        || word
            .split_once('/')
            .is_some_and(|(d, _)| tables::looks_like_rdma_dev(d))
}

/// Syslog level names, for text output.
pub fn level_name(level: u8) -> &'static str {
    match level {
        0 => "emerg",
        1 => "alert",
        2 => "crit",
        3 => "err",
        4 => "warning",
        5 => "notice",
        6 => "info",
        _ => "debug",
    }
}

/// Recognises one kernel message (`text`: the record's text after any saved-log wrapper,
/// decoded), with the record's level and `DEVICE=` value when it has them. `None`: not a
/// line of these subsystems.
pub fn recognise(
    text: &str,
    level: Option<u8>,
    dict_device: Option<&str>,
) -> Option<SubsystemEvent> {
    let t = text.trim_start_matches([' ', '\t']);
    // syslog lines of some relays carry the tag twice (`kernel: kernel: connection3:0: …`).
    let t = t.strip_prefix("kernel: ").unwrap_or(t);
    let t = t.trim_end_matches(['\r', '\n']);
    let first = *t.as_bytes().first()?;
    let mut found = match first {
        b'[' => frame_line(t).or_else(|| qedr_line(t)),
        b'?' => frame_line(t),
        b'<' => angle_module_line(t),
        b'W' if t.starts_with("WARNING: ") => warning_line(t),
        b'k' if t.starts_with("kernel BUG at ") => bug_at_line(t),
        b'c' | b's' => iscsi_class_line(t),
        b'B' if t.starts_with("Buffer I/O error on dev") => buffer_line(t),
        b'N' if t.starts_with("NETDEV WATCHDOG: ") => watchdog_line(t),
        // 4.x's end-of-report summary appends the stack pointer: `RIP: func+0x3c/0x190
        // [mod] RSP: ffffbbae48c8fdf0`.
        b'R' if t.starts_with("RIP: ") => frame_line(t.split(" RSP: ").next().unwrap_or(t)),
        b'R' if t.starts_with("RPC:") => rpc_rdma_line(t),
        b'R' if t.starts_with("RDMA CM") => rdma_cm_line(t),
        b'Q' if t.starts_with("QPLIB: ") => qplib_line(t),
        b'W' if t.starts_with("Workqueue: ") => frame_line(t),
        _ => None,
    };
    if found.is_none() {
        found = prefixed_line(t).or_else(|| frame_line(t));
    }
    if found.is_none() {
        found = mlx_pid_line(t)
            .or_else(|| ipoib_line(t))
            .or_else(|| rdma_port_line(t))
            .or_else(|| partition_line(t))
            .or_else(|| amiga_partition_line(t))
            .or_else(|| iscsi_transport_banner(t))
            .or_else(|| target_line(t))
            .or_else(|| bare_scsi_line(t))
            .or_else(|| blk_status_line(t))
            .or_else(|| eth_speed_line(t))
            .or_else(|| mlx5_eswitch_line(t))
            .or_else(|| old_scsi_host_line(t))
            .or_else(|| module_banner_line(t))
            .or_else(|| bare_line(t));
    }
    let mut ev = found?;
    if ev.subsystem == Subsystem::Scsi && is_usb_storage_message(&ev.message) {
        return None;
    }
    if let Some(d) = dict_device {
        apply_dict_device(d, &mut ev.device);
    }
    let worded = wording_level(&ev.message);
    ev.fatal_device_error = matches!(
        ev.subsystem,
        Subsystem::Nic | Subsystem::RdmaDriver | Subsystem::RdmaCore
    ) && is_fatal_device_error(&ev.message);
    match level {
        Some(l) => {
            ev.level = l.min(7);
            ev.level_from_record = true;
        }
        None => {
            ev.level = if ev.fatal_device_error { 2 } else { worded };
            ev.level_from_record = false;
        }
    }
    if ev.fatal_device_error {
        ev.level = ev.level.min(2);
    }
    Some(ev)
}

fn event(
    subsystem: Subsystem,
    origin: Option<&str>,
    shape: LineShape,
    message: &str,
) -> SubsystemEvent {
    SubsystemEvent {
        subsystem,
        origin: origin.map(str::to_string),
        device: NamedDevices::default(),
        level: 6,
        level_from_record: false,
        shape,
        message: message.trim().to_string(),
        fatal_device_error: false,
    }
}

/// `<word> <dev>[ <dev2>]: message` (dev_printk and friends) and `<word>: message`
/// (`pr_fmt`, `__func__`).
fn prefixed_line(t: &str) -> Option<SubsystemEvent> {
    let end = t.find([' ', ':'])?;
    let word = &t[..end];
    let rest = &t[end..];
    if let Some(after) = rest.strip_prefix(": ") {
        // `pr_fmt` module or `__func__` prefix.
        let mut ev = if let Some(sub) = tables::line_prefix_subsystem(word) {
            pr_fmt_line(sub, word, after)
        } else if is_identifier(word.strip_suffix("()").unwrap_or(word)) {
            let sub = tables::subsystem_of_function(word)?;
            event(sub, None, LineShape::Message, after)
        } else {
            return None;
        };
        if ev.subsystem == Subsystem::Block {
            // `blk_update_request: I/O error, dev fd0, …`: the block layer's lines count
            // for the disks iSCSI/iSER and NVMe-oF sessions can be, not a floppy or loop.
            if let Some(disk) = named_dev(after) {
                if !is_storage_disk(disk) {
                    return None;
                }
                ev.device.disk.get_or_insert_with(|| disk.to_string());
            }
        }
        if ev.subsystem == Subsystem::Nfs {
            nfs_devices(&ev.message.clone(), &mut ev.device);
        }
        return Some(ev);
    }
    let sub = tables::subsystem_of(word)?;
    if let Some(r) = rest.strip_prefix(':') {
        // Dynamic debug's `+mf` decoration, `<module>:<function>: message`
        // (lib/dynamic_debug.c __dynamic_emit_prefix: `ib_srp:srp_max_it_iu_len: …`).
        let (func, message) = r.split_once(": ")?;
        if !is_identifier(func) {
            return None;
        }
        let mut ev = event(sub, Some(word), LineShape::Message, message);
        ev.device.driver = Some(word.to_string());
        return Some(ev);
    }
    let after = rest.strip_prefix(' ')?;
    if tables::SPACE_PREFIXED.contains(&word) {
        // A `pr_fmt` of `"<module> "` without a colon (ib_srpt.c: `ib_srpt Received
        // SRP_LOGIN_REQ with i_port_id …`).
        let mut ev = event(sub, Some(word), LineShape::Message, after);
        ev.device.driver = Some(word.to_string());
        return Some(ev);
    }
    // The device words: up to three words in all, the last ending in ':'.
    let mut words = 1;
    let mut at = 0;
    loop {
        let w_end = after[at..].find(' ').map(|i| at + i)?;
        let w = &after[at..w_end];
        words += 1;
        if let Some(dev) = w.strip_suffix(':') {
            if dev.is_empty() {
                return None;
            }
            let prefix = &t[..end + 1 + w_end];
            let message = &after[w_end + 1..];
            let mut ev = event(sub, Some(word), LineShape::Message, message);
            device_from_prefix(word, prefix, message, &mut ev.device);
            return Some(ev);
        }
        if words >= 3 || w.is_empty() {
            return None;
        }
        at = w_end + 1;
    }
}

/// A C identifier (a function name), not empty.
fn is_identifier(w: &str) -> bool {
    !w.is_empty() && w.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The server and RDMA device an NFS-over-RDMA line names: `server <host>` (net/sunrpc/
/// clnt.c `%s: server %s not responding, still trying`), `connection to <addr>` and
/// `device <ibdev>` (xprtrdma/verbs.c `rpcrdma: removing device %s for %s:%s`).
fn nfs_devices(message: &str, dev: &mut NamedDevices) {
    let mut words = message.split(' ');
    while let Some(w) = words.next() {
        let next = || words.clone().next().map(|n| n.trim_end_matches([',', ':']));
        match w {
            "server" | "to" | "for" if dev.other.is_none() => {
                if let Some(n) = next().filter(|n| !n.is_empty()) {
                    dev.other = Some(n.to_string());
                }
            }
            "device" | "on" if dev.rdma_dev.is_none() => {
                if let Some(n) = next().filter(|n| is_identifier(n)) {
                    dev.rdma_dev = Some(n.to_string());
                }
            }
            _ => {}
        }
    }
}

/// mlx5's own prefix without a `dev_printk` before it: `<dev>:<func>:<line>:(pid N): msg`.
/// mlx5_core's `mlx5_core_warn`/`_err` of 3.x–4.x kernels printed `pr_warn("%s:%s:%d:(pid
/// %d): ", dev_name(&pdev->dev), __func__, __LINE__, current->pid)` (`0000:04:00.0:
/// mlx5_cmd_check:…`), mlx5_ib's `mlx5_ib_warn` the RDMA device's name (`mlx5_0:dump_cqe:
/// 275:(pid 0): …`, drivers/infiniband/hw/mlx5/mlx5_ib.h), and a renderer that cut the
/// prefix leaves `mlx5_cmd_check:810:(pid 923941): …`. The `:(pid N):` marker is mlx5's
/// alone (drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.h).
fn mlx_pid_line(t: &str) -> Option<SubsystemEvent> {
    let sp = t.find(' ')?;
    let head = t[..sp].strip_suffix(":(pid")?;
    let rest = &t[sp + 1..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    rest[digits..].strip_prefix("):")?;
    let (before, line) = head.rsplit_once(':')?;
    if line.is_empty() || !line.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (dev, func) = match before.rsplit_once(':') {
        Some((dev, func)) => (Some(dev), func),
        None => (None, before),
    };
    if !is_identifier(func) {
        return None;
    }
    let message = match dev {
        Some(d) => &t[d.len() + 1..],
        None => t,
    };
    let mut ev;
    match dev {
        Some(d) if looks_like_pci(d) || looks_like_long_pci(d) => {
            ev = event(
                Subsystem::Nic,
                Some("mlx5_core"),
                LineShape::Message,
                message,
            );
            ev.device.pci = Some(d.to_string());
        }
        Some(d) if is_identifier(d) => {
            ev = event(
                Subsystem::RdmaDriver,
                Some("mlx5_ib"),
                LineShape::Message,
                message,
            );
            ev.device.rdma_dev = Some(d.to_string());
        }
        Some(_) => return None,
        None if func.starts_with("mlx5_ib") => {
            ev = event(
                Subsystem::RdmaDriver,
                Some("mlx5_ib"),
                LineShape::Message,
                message,
            );
        }
        None => {
            ev = event(
                Subsystem::Nic,
                Some("mlx5_core"),
                LineShape::Message,
                message,
            );
        }
    }
    ev.device.driver = ev.origin.clone();
    Some(ev)
}

/// mlx5's E-Switch lines of 4.x–5.x kernels: `esw_info(dev, fmt)` was
/// `pr_info("(%s): E-Switch: " fmt, dev->priv.name)`, the PCI function in parentheses
/// (`(0000:08:00.0): E-Switch: Total vports 1, …`).
fn mlx5_eswitch_line(t: &str) -> Option<SubsystemEvent> {
    let rest = t.strip_prefix('(')?;
    let (pci, message) = rest.split_once("): ")?;
    if !message.starts_with("E-Switch: ") || !(looks_like_pci(pci) || looks_like_long_pci(pci)) {
        return None;
    }
    let mut ev = event(
        Subsystem::Nic,
        Some("mlx5_core"),
        LineShape::Message,
        message,
    );
    ev.device.pci = Some(pci.to_string());
    ev.device.driver = ev.origin.clone();
    Some(ev)
}

/// An IPoIB interface name (`ib0`, `ib0.8001`, systemd's `ibp3s0`, `ibs1f1`): the
/// first word of IPoIB's `ipoib_warn`/`ipoib_dbg` lines (drivers/infiniband/ulp/ipoib/
/// ipoib.h: `printk(level "%s: " format, priv->dev->name, …)`).
fn is_ipoib_netdev(word: &str) -> bool {
    let Some(r) = word.strip_prefix("ib") else {
        return false;
    };
    let r = r
        .strip_prefix(['p', 's', 'o'])
        .filter(|x| x.as_bytes().first().is_some_and(u8::is_ascii_digit))
        .unwrap_or(r);
    r.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && word.len() <= 15
        && r.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'.')
}

/// `<ibdev>/<port>: message`: an RDMA device and port named without `dev_printk`, as
/// mlx5_ib's `mlx5_ib_qp_err_syndrome` does (drivers/infiniband/hw/mlx5/qp.c: `pr_err("%s/%d:
/// QP %d error: %s (0x%x 0x%x 0x%x)\n", ibqp->device->name, ibqp->port, …)`). The device
/// name must be one the RDMA drivers or rdma-core's udev rules give
/// ([`tables::looks_like_rdma_dev`]).
fn rdma_port_line(t: &str) -> Option<SubsystemEvent> {
    let (head, message) = t.split_once(": ")?;
    let (dev, port) = head.split_once('/')?;
    if port.is_empty() || !port.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !tables::looks_like_rdma_dev(dev) {
        return None;
    }
    let origin = dev.starts_with("mlx5").then_some("mlx5_ib");
    let mut ev = event(Subsystem::RdmaDriver, origin, LineShape::Message, message);
    ev.device.rdma_dev = Some(dev.to_string());
    ev.device.port = port.parse().ok();
    ev.device.driver = origin.map(str::to_string);
    Some(ev)
}

/// `ib0: multicast join failed for ff12:401b:…, status -22` (IPoIB).
fn ipoib_line(t: &str) -> Option<SubsystemEvent> {
    let (name, message) = t.split_once(": ")?;
    if !is_ipoib_netdev(name) {
        return None;
    }
    let mut ev = event(
        Subsystem::RdmaCore,
        Some("ib_ipoib"),
        LineShape::Message,
        message,
    );
    ev.device.netdev = Some(name.to_string());
    ev.device.driver = Some("ib_ipoib".into());
    Some(ev)
}

/// sunrpc's `RPC:` lines of the RDMA transport: xprtrdma's `dprintk("RPC:       %s: …",
/// __func__)` (`RPC:       rpcrdma_ep_create: requested max: …`) and transport.c's `RPC:
/// Registered rdma transport module.`. The `RPC:` lines of the socket transports
/// (`RPC: Registered tcp transport module.`) are NFS without RDMA and stay silent.
fn rpc_rdma_line(t: &str) -> Option<SubsystemEvent> {
    let rest = t["RPC:".len()..].trim_start();
    let first = rest.split([' ', ':']).next().unwrap_or("");
    let rdma = tables::subsystem_of_function(first) == Some(Subsystem::Nfs)
        || rest.contains(" rdma ")
        || rest.contains("svcrdma")
        || rest.contains("rpcrdma");
    if !rdma {
        return None;
    }
    let mut ev = event(Subsystem::Nfs, Some("rpcrdma"), LineShape::Message, rest);
    ev.device.driver = Some("rpcrdma".into());
    Some(ev)
}

/// bnxt_re's `QPLIB: ` tag (drivers/infiniband/hw/bnxt_re/qplib_*.c print it before every
/// message of the queue-pair library: `QPLIB: cmdq[%#x]=%#x timedout (%d)msec`) when the
/// `dev_err` prefix before it is gone.
fn qplib_line(t: &str) -> Option<SubsystemEvent> {
    let mut ev = event(
        Subsystem::RdmaDriver,
        Some("bnxt_re"),
        LineShape::Message,
        t.strip_prefix("QPLIB: ")?,
    );
    ev.device.driver = Some("bnxt_re".into());
    Some(ev)
}

/// rdma_cm's own `pr_*` without a module prefix: `RDMA CMA: cma_listen_on_dev, error -98`
/// (drivers/infiniband/core/cma.c) and `RDMA CM: …` (its dynamic debug lines).
fn rdma_cm_line(t: &str) -> Option<SubsystemEvent> {
    let message = t
        .strip_prefix("RDMA CMA: ")
        .or_else(|| t.strip_prefix("RDMA CM: "))?;
    let mut ev = event(
        Subsystem::RdmaCm,
        Some("rdma_cm"),
        LineShape::Message,
        message,
    );
    ev.device.driver = Some("rdma_cm".into());
    Some(ev)
}

/// Fills the device of a `dev_printk`-style prefix, with what the message adds (`[sdX]`).
fn device_from_prefix(word: &str, prefix: &str, message: &str, dev: &mut NamedDevices) {
    match word {
        "nvme" => {
            let name = prefix["nvme ".len()..].trim_end_matches(':');
            if looks_like_pci(name) || looks_like_long_pci(name) {
                dev.pci = Some(name.to_string());
            } else {
                dev.other = Some(name.to_string());
            }
            dev.driver = Some(word.to_string());
        }
        "block" => {
            dev.disk = Some(prefix["block ".len()..].trim_end_matches(':').to_string());
            dev.driver = Some(word.to_string());
        }
        _ => {
            apply_prefix(prefix, NameRole::Auto, dev);
            if dev.pci.is_none() {
                // `nvme 10000:e1:00.0` and other five-digit PCI domains (VMD).
                let second = prefix.split(' ').nth(1).unwrap_or("").trim_end_matches(':');
                if looks_like_long_pci(second) {
                    dev.pci = Some(second.to_string());
                    dev.rdma_dev = None;
                }
            }
        }
    }
    if let Some(disk) = bracketed_disk(message) {
        dev.disk.get_or_insert(disk);
    }
}

/// A PCI address with a domain wider than four digits (`10000:e1:00.0`).
fn looks_like_long_pci(s: &str) -> bool {
    match s.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 && domain.len() <= 8 => {
            domain.bytes().all(|c| c.is_ascii_hexdigit()) && looks_like_pci(rest)
        }
        _ => false,
    }
}

/// `[sdb] …` at the start of an sd message.
fn bracketed_disk(message: &str) -> Option<String> {
    let inner = message.strip_prefix('[')?;
    let close = inner.find(']')?;
    let name = &inner[..close];
    (!name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric())).then(|| name.to_string())
}

/// `<module>: message`: the rest may start with a device (`mlx4_en: 0000:86:00.0: …`,
/// `mlx4_en: ens803: …`) or name a PCI function (`probe of 0000:01:00.0 failed`).
fn pr_fmt_line(sub: Subsystem, module: &str, after: &str) -> SubsystemEvent {
    let mut message = after;
    let mut dev = NamedDevices {
        driver: Some(module.to_string()),
        ..NamedDevices::default()
    };
    if let Some(colon) = after.find(": ") {
        let head = &after[..colon];
        if !head.contains(' ') && !head.is_empty() {
            if looks_like_pci(head) || looks_like_long_pci(head) {
                dev.pci = Some(head.to_string());
                message = &after[colon + 2..];
            } else if sub == Subsystem::Nic && is_ifname(head) {
                dev.netdev = Some(head.to_string());
                message = &after[colon + 2..];
            }
        }
    }
    if dev.pci.is_none() {
        if let Some(pci) = after
            .split([' ', ','])
            .find(|w| looks_like_pci(w) || looks_like_long_pci(w))
        {
            dev.pci = Some(pci.to_string());
        }
    }
    let mut ev = event(sub, Some(module), LineShape::Message, message);
    ev.device = dev;
    ev
}

/// A network interface name as the kernel allows it (no `/`, no blank, at most 15 bytes),
/// and not a number or a hex word (those are values, not names).
fn is_ifname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
        && s.bytes().any(|c| c.is_ascii_alphabetic())
        && s.as_bytes()[0].is_ascii_alphabetic()
        && !s.starts_with("Port")
}

/// mlx4's `<mlx4_ib> func: message`.
fn angle_module_line(t: &str) -> Option<SubsystemEvent> {
    let inner = t.strip_prefix('<')?;
    let close = inner.find("> ")?;
    let module = &inner[..close];
    let sub = tables::subsystem_of(module)?;
    let mut ev = event(sub, Some(module), LineShape::Message, &inner[close + 2..]);
    ev.device.driver = Some(module.to_string());
    Some(ev)
}

/// qedr's `[qedr_modify_qp:2398(qedr0)]ERR: …`.
fn qedr_line(t: &str) -> Option<SubsystemEvent> {
    let inner = t.strip_prefix('[')?;
    let close = inner.find(']')?;
    let head = &inner[..close];
    let func = head.split(':').next()?;
    let sub = tables::subsystem_of_function(func)?;
    let mut ev = event(sub, None, LineShape::Message, &inner[close + 1..]);
    if sub == Subsystem::RdmaDriver {
        apply_prefix(&t[..close + 2], NameRole::Rdma, &mut ev.device);
    } else if let (Some(open), Some(end)) = (head.find('('), head.rfind(')')) {
        // qed/qede's DP_NAME is the PCI function's or netdev's name, not an RDMA device.
        let name = &head[open + 1..end.max(open + 1)];
        if looks_like_pci(name) {
            ev.device.pci = Some(name.to_string());
        } else if is_ifname(name) {
            ev.device.netdev = Some(name.to_string());
        }
    }
    let module = func.split('_').next().unwrap_or(func);
    ev.device.driver = Some(module.to_string());
    Some(ev)
}

/// A call-trace frame (` [<ffffffffa068ba11>] func+0xb1/0x120 [mod]`, ` func+0x1c/0x90
/// [mod]`, `? func+…`), a `RIP: 0010:func+0x…/0x… [mod]` or `Workqueue: wq func [mod]`
/// line, in a module of these subsystems. Also the older shapes: 2.6.18's
/// ` [<ffffffff8846c0d8>] :ib_iser:iser_rcv_completion+0x8a/0x1a0`, 3.x's
/// `RIP: 0010:[<…>]  [<…>] func+…` and ` RIP  [<…>] func+…`, offsets printed without
/// `0x`, and a frame without a module tag whose function only RDMA code uses
/// ([`tables::UNTAGGED_FRAME_PREFIXES`]).
fn frame_line(t: &str) -> Option<SubsystemEvent> {
    let t = t.trim_end();
    if let Some(ev) = tagged_frame(t) {
        return Some(ev);
    }
    // No `[module]` tag: the symbol is the line's last word.
    let sym = t.rsplit(' ').next().unwrap_or(t);
    let body = t.trim_start();
    let is_rip = body.starts_with("RIP:") || body.starts_with("RIP ");
    let (module, function) = match sym.strip_prefix(':') {
        // 2.6.18: `:module:function+0x…/0x…`.
        Some(rest) => {
            let (module, symbol) = rest.split_once(':')?;
            let function = symbol_function(symbol)?;
            (Some(module), function)
        }
        None => {
            let sym = sym.rsplit(':').next().unwrap_or(sym);
            (None, symbol_function(sym)?)
        }
    };
    // Everything before the symbol must be frame furniture: `[<addr>]`, `?`, `RIP:`,
    // `0010:`; a sentence that happens to end in a symbol is not a frame.
    let before = &t[..t.len() - sym.len()];
    if !before.split(' ').all(|w| {
        w.is_empty()
            || w == "?"
            || w == "RIP"
            || w == "RIP:"
            || w.starts_with("0010:")
            || (w.starts_with("[<") && w.ends_with(">]"))
    }) {
        return None;
    }
    let (sub, module) = match module {
        Some(m) => (tables::subsystem_of(m)?, Some(m)),
        None => (tables::subsystem_of_untagged_frame(function)?, None),
    };
    let shown = module.unwrap_or(function);
    let message = if is_rip {
        format!("RIP in {function} [{shown}]")
    } else {
        format!("frame {function} [{shown}]")
    };
    let mut ev = event(
        sub,
        module,
        LineShape::Frame {
            function: function.to_string(),
            module: module.map(str::to_string),
        },
        &message,
    );
    ev.device.driver = module.map(str::to_string);
    Some(ev)
}

/// A frame, `RIP:` or `Workqueue:` line ending in a `[module]` tag of these subsystems.
fn tagged_frame(t: &str) -> Option<SubsystemEvent> {
    let tag_open = t.rfind(" [")?;
    let tag = t[tag_open + 2..].strip_suffix(']')?;
    // `mlx5_core(OE)` in some reports: the module name ends at `(`.
    let module = tag.split('(').next().unwrap_or(tag);
    let sub = tables::subsystem_of(module)?;
    let body = &t[..tag_open];
    let trimmed = body.trim_start();
    let is_rip = trimmed.starts_with("RIP:") || trimmed.starts_with("RIP ");
    let is_wq = body.starts_with("Workqueue: ");
    let sym = body.rsplit(' ').next().unwrap_or(body);
    let sym = sym.strip_prefix("0010:").unwrap_or(sym);
    let sym = sym.rsplit(':').next().unwrap_or(sym);
    let function = if is_wq { sym } else { symbol_function(sym)? };
    if function.is_empty() {
        return None;
    }
    let message = if is_rip {
        format!("RIP in {function} [{module}]")
    } else if is_wq {
        format!("worker {function} [{module}]")
    } else {
        format!("frame {function} [{module}]")
    };
    let mut ev = event(
        sub,
        Some(module),
        LineShape::Frame {
            function: function.to_string(),
            module: Some(module.to_string()),
        },
        &message,
    );
    ev.device.driver = Some(module.to_string());
    Some(ev)
}

/// The function of a `%pS` symbol, `func+0x1c/0x90` (some kernels and renderers drop the
/// `0x`: `func+1c/90`): `None` for any other word.
fn symbol_function(sym: &str) -> Option<&str> {
    let (function, offsets) = sym.split_once('+')?;
    let (off, size) = offsets.split_once('/')?;
    let hex = |s: &str| {
        let s = s.strip_prefix("0x").unwrap_or(s);
        !s.is_empty() && s.len() <= 16 && s.bytes().all(|c| c.is_ascii_hexdigit())
    };
    let name_ok = !function.is_empty()
        && function
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'));
    (name_ok && hex(off) && hex(size)).then_some(function)
}

/// The function of an untagged frame word (`mlx5_cmd_exec+0x12/0x40`) when only RDMA code
/// uses that name; for the cheap pretest.
fn untagged_frame_function(word: &str) -> Option<Subsystem> {
    let f = symbol_function(word)?;
    tables::subsystem_of_untagged_frame(f)
}

/// LIO's target-side lines ([`tables::TARGET_OPENINGS`]): `iSCSI Login timeout on Network
/// Portal 0.0.0.0:3260`, `ABORT_TASK: Found referenced iSCSI task_tag: 101`,
/// `iSCSI/iqn.…: Unsupported SCSI Opcode 0xa3, sending CHECK_CONDITION.`.
fn target_line(t: &str) -> Option<SubsystemEvent> {
    if !tables::is_target_opening(t) {
        return None;
    }
    let mut ev = event(Subsystem::IscsiTarget, None, LineShape::Message, t);
    ev.device.driver = Some("iscsi_target_mod".into());
    if let Some(rest) = t.strip_prefix("iSCSI/") {
        // `iSCSI/<initiator name>: …`: the initiator the target was serving.
        if let Some((name, _)) = rest.split_once(": ") {
            ev.device.other = Some(name.to_string());
        }
    }
    Some(ev)
}

/// A line with no prefix that is one of the subsystems' own format strings
/// ([`bare`]): `failed to drain send queue: -110` (ib_core), `SoftiWARP attached` (siw).
///
/// The block layer's formats that open with a conversion open with the disk's name
/// (`%s: detected capacity change from %lld to %lld`, block/genhd.c): those count only for
/// a disk storage sits on, not a loop device or a USB stick's `sdb` under usb-storage.
fn bare_line(t: &str) -> Option<SubsystemEvent> {
    let f = bare::find(t)?;
    let mut ev = event(f.subsystem, None, LineShape::Message, t);
    if f.subsystem == Subsystem::Block && f.format.starts_with('%') {
        let disk = t.split([' ', ':']).next().unwrap_or_default();
        if !is_storage_disk(disk) {
            return None;
        }
        ev.device.disk = Some(disk.to_string());
    }
    Some(ev)
}

/// Bare SCSI midlayer lines of older kernels, without a `sd H:C:T:L:` prefix:
/// `SCSI error: return code = 0x08000002` (2.6 sd.c), `SCSI device sdb: 2097152 512-byte
/// hdwr sectors (1074 MB)`.
fn bare_scsi_line(t: &str) -> Option<SubsystemEvent> {
    let rest = t.strip_prefix("SCSI ")?;
    // drivers/scsi/scsi.c init_scsi's banner (`SCSI subsystem initialized`) too.
    if rest.starts_with("error: ") || rest == "subsystem initialized" {
        return Some(event(Subsystem::Scsi, None, LineShape::Message, t));
    }
    let name = rest.strip_prefix("device ")?.split(':').next()?;
    if !is_storage_disk(name) {
        return None;
    }
    let mut ev = event(Subsystem::Scsi, None, LineShape::Message, t);
    ev.device.disk = Some(name.to_string());
    Some(ev)
}

/// block/blk-core.c's `blk_print_req_error` since 5.x, without a prefix: `<status> error,
/// dev sdb, sector 1234 op 0x0:(READ) flags …` (`I/O`, `critical medium`, `timeout`, …).
fn blk_status_line(t: &str) -> Option<SubsystemEvent> {
    let disk = blk_status_disk(t)?;
    let mut ev = event(Subsystem::Block, None, LineShape::Message, t);
    ev.device.disk = Some(disk.to_string());
    Some(ev)
}

/// The disk of a `<status> error, dev <disk>, sector …` line of a storage disk. One pass
/// over the status words (lowercase, `I/O`), which ends at the first other byte: most lines
/// stop at their first or second byte.
fn blk_status_disk(t: &str) -> Option<&str> {
    let b = t.as_bytes();
    let comma = b
        .iter()
        .take(48)
        .position(|&c| !(c.is_ascii_lowercase() || matches!(c, b' ' | b'/' | b'I' | b'O')))?;
    if b[comma] != b',' || !t[..comma].ends_with(" error") {
        return None;
    }
    let rest = t[comma..].strip_prefix(", dev ")?;
    let (disk, tail) = rest.split_once(',')?;
    (tail.starts_with(" sector ") && is_storage_disk(disk)).then_some(disk)
}

/// The disk a block-layer message names after `dev ` (`I/O error, dev sdc, sector 1`).
fn named_dev(message: &str) -> Option<&str> {
    let at = message.find("dev ")?;
    if at > 0 && !matches!(message.as_bytes()[at - 1], b' ' | b',') {
        return None;
    }
    let rest = &message[at + 4..];
    let end = rest.find([',', ' ']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|d| !d.is_empty())
}

/// A disk the storage sessions can be: a SCSI disk (`sdb`, `sdb1`, `sdaa`), a
/// device-mapper node over them (`dm-3`), an NVMe namespace (`nvme0n1`, `nvme0c1n1`,
/// `nvme0n1p2`). Floppies, loop, virtio and MMC disks are not.
pub(crate) fn is_storage_disk(name: &str) -> bool {
    if let Some(r) = name.strip_prefix("sd") {
        let letters = r.bytes().take_while(u8::is_ascii_lowercase).count();
        return letters > 0 && r[letters..].bytes().all(|c| c.is_ascii_digit());
    }
    if let Some(r) = name.strip_prefix("dm-") {
        return !r.is_empty() && r.bytes().all(|c| c.is_ascii_digit());
    }
    if let Some(r) = name.strip_prefix("nvme") {
        return r.contains('n')
            && r.as_bytes().first().is_some_and(u8::is_ascii_digit)
            && r.bytes()
                .all(|c| c.is_ascii_digit() || matches!(c, b'n' | b'c' | b'p'));
    }
    false
}

/// `WARNING: CPU: 3 PID: 1416 at drivers/nvme/host/rdma.c:1394 func+0x…/0x… [mod]`.
fn warning_line(t: &str) -> Option<SubsystemEvent> {
    let at = t.find(" at ")?;
    let loc = t[at + 4..].split(' ').next()?;
    let path = loc.split(':').next().unwrap_or(loc);
    let sub = tables::subsystem_of_path(path).or_else(|| frame_line(t).map(|f| f.subsystem))?;
    let mut ev = event(
        sub,
        None,
        LineShape::ReportHeader {
            what: "warning".into(),
            location: loc.to_string(),
        },
        t,
    );
    if let Some(f) = frame_line(t) {
        ev.origin = f.origin;
        ev.device.driver = f.device.driver;
    }
    Some(ev)
}

/// `kernel BUG at drivers/infiniband/core/cma.c:1234!`.
fn bug_at_line(t: &str) -> Option<SubsystemEvent> {
    let loc = t["kernel BUG at ".len()..].trim_end_matches('!');
    let path = loc.split(':').next().unwrap_or(loc);
    let sub = tables::subsystem_of_path(path)?;
    Some(event(
        sub,
        None,
        LineShape::ReportHeader {
            what: "bug".into(),
            location: loc.to_string(),
        },
        t,
    ))
}

/// ` connectionS:C: message` and ` sessionS: message` (the iSCSI class devices have no
/// driver, hence the blank the kernel prints before them).
fn iscsi_class_line(t: &str) -> Option<SubsystemEvent> {
    let (rest, conn) = if let Some(r) = t.strip_prefix("connection") {
        (r, true)
    } else {
        (t.strip_prefix("session")?, false)
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let session: u32 = rest[..digits].parse().ok()?;
    let mut r = &rest[digits..];
    let mut conn_id = None;
    if conn {
        r = r.strip_prefix(':')?;
        let d = r.bytes().take_while(u8::is_ascii_digit).count();
        conn_id = Some(r[..d].parse::<u32>().ok()?);
        r = &r[d..];
    }
    let message = r.strip_prefix(": ")?;
    let mut ev = event(Subsystem::Iscsi, None, LineShape::Message, message);
    ev.device.iscsi_session = Some(session);
    ev.device.iscsi_conn = conn_id;
    Some(ev)
}

/// block/partitions: ` sdb: sdb1 sdb2`, ` sdb: unable to read partition table`,
/// `nvme0n1: p1 p2` (the disk name, then the partitions or the failure). Only the disks of
/// SCSI and NVMe (the transports of iSCSI/iSER and NVMe-oF sessions) are taken.
fn partition_line(t: &str) -> Option<SubsystemEvent> {
    let (disk, message) = t.split_once(": ")?;
    let scsi = disk.len() > 2
        && disk.starts_with("sd")
        && disk[2..].bytes().all(|c| c.is_ascii_lowercase());
    let nvme = disk
        .strip_prefix("nvme")
        .and_then(|r| r.split_once('n'))
        .is_some_and(|(c, n)| {
            !c.is_empty()
                && !n.is_empty()
                && c.bytes().all(|b| b.is_ascii_digit())
                && n.bytes().all(|b| b.is_ascii_digit())
        });
    // An `sd…` word is also the name of other drivers (`sdhci: Secure Digital Host
    // Controller Interface driver`, amdgpu's `sdma…`): for those only the partition scan's
    // own shapes count (the list `sdb1 sdb2 < sdb5 >`, `unable to read partition table`);
    // the rest of a disk-first line is found by the block layer's formats ([`bare_line`]).
    let scan_shape = message.starts_with(disk)
        || message.starts_with("unable to read partition table")
        || message.starts_with('<');
    if !(nvme || scsi && scan_shape) {
        return None;
    }
    let mut ev = event(Subsystem::Block, None, LineShape::Message, message);
    ev.device.disk = Some(disk.to_string());
    Some(ev)
}

/// block/partitions/amiga.c's `Dev %s: unable to read RDB block %d`: the partition scan of
/// a disk that does not answer (an iSCSI disk whose session is failing), printed before the
/// ` sdb: unable to read partition table` line. Only storage disks are taken.
fn amiga_partition_line(t: &str) -> Option<SubsystemEvent> {
    let (disk, message) = t.strip_prefix("Dev ")?.split_once(": ")?;
    if !is_storage_disk(disk) {
        return None;
    }
    let mut ev = event(Subsystem::Block, None, LineShape::Message, message);
    ev.device.disk = Some(disk.to_string());
    Some(ev)
}

/// drivers/infiniband/core/verbs.c ib_get_eth_speed: `pr_warn("%s speed is unknown,
/// defaulting to %u\n", netdev->name, …)`: a RoCE port's netdev reports no link speed, so
/// the RDMA port's rate (and the CM's path records) are a guess.
fn eth_speed_line(t: &str) -> Option<SubsystemEvent> {
    let (ifname, rest) = t.split_once(' ')?;
    if !rest.starts_with(ETH_SPEED_UNKNOWN) || ifname.is_empty() || ifname.len() > 15 {
        return None;
    }
    let mut ev = event(Subsystem::RdmaCore, None, LineShape::Message, t);
    ev.device.netdev = Some(ifname.to_string());
    Some(ev)
}

const ETH_SPEED_UNKNOWN: &str = "speed is unknown, defaulting to ";

/// A SCSI line about a USB-attached disk: drivers/usb/storage (uas.c, usb.c) prints its
/// errors through the disk's `sd H:C:T:L:` prefix with its own function names
/// (`[sda] tag#21 uas_eh_abort_handler 0 uas-tag 1 inflight: CMD IN`). Not a storage-network
/// disk, so not explained.
fn is_usb_storage_message(message: &str) -> bool {
    message
        .split(' ')
        .take(3)
        .any(|w| w.starts_with("uas_") || w.starts_with("usb_stor"))
}

/// The SCSI host line of 2.6–3.x kernels, `scsi%d : %s` with the host template's name
/// (scsi_scan/hosts.c): `scsi1 : QLogic Offload iSCSI Initiator`.
fn old_scsi_host_line(t: &str) -> Option<SubsystemEvent> {
    let rest = t.strip_prefix("scsi")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let message = rest[digits..].strip_prefix(" : ")?;
    let mut ev = event(Subsystem::Scsi, Some("scsi"), LineShape::Message, message);
    ev.device.scsi_host = rest[..digits].parse().ok();
    Some(ev)
}

/// A module's load banner, which names the module before its version: `Chelsio T4-T6 iSCSI
/// Driver cxgb4i v0.9.5-ko (Apr. 2015)`, `QLogic NetXtreme II iSCSI Driver bnx2i v2.7.10.1`
/// (`pr_info("%s", version)` of a static string: no format to match). Only a module of
/// [`tables::NAMES`] counts, and only among the first twelve words.
fn module_banner_line(t: &str) -> Option<SubsystemEvent> {
    let words: Vec<&str> = t.split(' ').take(12).collect();
    let (module, sub) = words.windows(2).find_map(|w| {
        is_version(w[1]).then_some(())?;
        tables::subsystem_of(w[0]).map(|s| (w[0], s))
    })?;
    let mut ev = event(sub, Some(module), LineShape::Message, t);
    ev.device.driver = Some(module.to_string());
    Some(ev)
}

/// `v2.7.10.1`, `v0.9.5-ko`, `8.37.0.20`: a `v` and a digit, or digits, a dot and a digit.
fn is_version(w: &str) -> bool {
    if let Some(v) = w.strip_prefix('v') {
        return v.as_bytes().first().is_some_and(u8::is_ascii_digit);
    }
    let digits = w.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && w.as_bytes().get(digits) == Some(&b'.')
        && w.as_bytes().get(digits + 1).is_some_and(u8::is_ascii_digit)
}

/// Whether a word among `t`'s first is a version ([`is_version`]): the cheap half of
/// [`module_banner_line`].
fn has_version_word(t: &str) -> bool {
    t.split(' ').take(12).skip(1).any(is_version)
}

/// scsi_transport_iscsi.c iscsi_transport_init's banner, printed without a prefix:
/// `Loading iSCSI transport class v2.0-870.`.
fn iscsi_transport_banner(t: &str) -> Option<SubsystemEvent> {
    t.starts_with("Loading iSCSI transport class").then(|| {
        let mut ev = event(Subsystem::Iscsi, None, LineShape::Message, t);
        ev.device.driver = Some("scsi_transport_iscsi".into());
        ev
    })
}

/// fs/buffer.c `Buffer I/O error on dev sdb1, logical block …` (older kernels: `on
/// device`).
fn buffer_line(t: &str) -> Option<SubsystemEvent> {
    let rest = t
        .strip_prefix("Buffer I/O error on device ")
        .or_else(|| t.strip_prefix("Buffer I/O error on dev "))?;
    let disk = rest.split([',', ' ']).next().unwrap_or("");
    if !disk.is_empty() && !is_storage_disk(disk) {
        return None;
    }
    let mut ev = event(Subsystem::Block, None, LineShape::Message, t);
    if !disk.is_empty() {
        ev.device.disk = Some(disk.to_string());
    }
    Some(ev)
}

/// net/sched's `NETDEV WATCHDOG: eth1 (mlx4_core): transmit queue 0 timed out`: the
/// driver is in parentheses.
fn watchdog_line(t: &str) -> Option<SubsystemEvent> {
    let rest = &t["NETDEV WATCHDOG: ".len()..];
    let open = rest.find(" (")?;
    let close = rest[open..].find("): ")? + open;
    let driver = &rest[open + 2..close];
    let sub = tables::subsystem_of(driver)?;
    if sub != Subsystem::Nic {
        return None;
    }
    let mut ev = event(sub, Some(driver), LineShape::Message, &rest[close + 3..]);
    ev.device.driver = Some(driver.to_string());
    ev.device.netdev = Some(rest[..open].to_string());
    Some(ev)
}

/// A level read from the wording when the record carries none: what failed is an error,
/// what is retried, reset or down a warning, the rest information.
pub(crate) fn wording_level(message: &str) -> u8 {
    const CRIT: &[&str] = &["fatal", "Fatal", "FATAL", "panic", "health compromised"];
    const ERR: &[&str] = &[
        "error",
        "Error",
        "ERROR",
        "fail",
        "Fail",
        "FAIL",
        "timeout",
        "timed out",
        // bnxt_re's `QPLIB: cmdq[…] timedout (…)msec`.
        "timedout",
        "Timeout",
        "unable",
        "Unable",
        "cannot",
        "Cannot",
        "can't",
        "couldn't",
        "Couldn't",
        "invalid",
        "Invalid",
        "rejected",
        "refused",
        "No done completion",
        "leak",
        "abort",
        "Abort",
        "Bad ",
        "bad ",
    ];
    const WARN: &[&str] = &[
        "warn",
        "Warn",
        "WARN",
        "reset",
        "Reset",
        "retry",
        "requeu",
        "reconnect",
        "Reconnect",
        "down",
        "Down",
        "offline",
        "lost",
        "not responding",
        "no path",
        "not ready",
        "disabled",
        "Sense Key",
        "Add. Sense",
        "frame ",
        "RIP in",
    ];
    if CRIT.iter().any(|w| message.contains(w)) {
        2
    } else if ERR.iter().any(|w| message.contains(w)) {
        3
    } else if WARN.iter().any(|w| message.contains(w)) {
        4
    } else {
        6
    }
}

/// A fatal firmware or device error in the wording of the NIC and RDMA drivers: mlx5
/// health (`Fatal error N detected`, `device's health compromised`), mlx4 `Internal error
/// detected`, a device-fatal event.
fn is_fatal_device_error(message: &str) -> bool {
    (message.contains("Fatal error") && message.contains("detected"))
        || message.contains("health compromised")
        || message.contains("Internal error detected")
        || message.contains("device fatal")
        || message.contains("DEVICE_FATAL")
        || message.contains("firmware fatal")
        || message.contains("FW fatal")
}

#[cfg(test)]
mod tests;
