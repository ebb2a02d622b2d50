//! Device attribution: the message prefixes the kernel's printk helpers write and the
//! `DEVICE=` dictionary value of /dev/kmsg records.
//!
//! Prefix shapes (kernel-facts §5):
//! - `dev_printk`: `"<driver|bus|class> <dev_name>: "` (`infiniband rocep2s0f0: `,
//!   `sd 0:0:0:0: `), with an empty driver for devices without one, hence the leading space
//!   of ` connection1:0: ` and ` session1: `;
//! - `ibdev_printk`: `"<parent driver> <parent dev> <ibdev>: "` (`ice 0000:02:00.0
//!   rocep2s0f0: `), or `"<ibdev>: "` without a parent;
//! - `netdev_printk`: `"<driver> <parent dev> <netdev>: "` (`ice 0000:02:00.0 enp2s0f0: `);
//! - `pr_fmt` module prefixes: `iser: `, `rdma_rxe: `, `ib_mad: `.

use super::types::NamedDevices;

/// What the last word of a prefix names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRole {
    /// An RDMA (ib) device: `ibdev_*` and `dev_*` on an ib_device.
    Rdma,
    /// A network interface: `netdev_*`.
    Netdev,
    /// Decide from the words (`infiniband X` → RDMA, `sd H:C:T:L` → SCSI, …).
    Auto,
}

/// True for a PCI address `dddd:bb:dd.f` (domain optional).
pub(crate) fn looks_like_pci(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |c: &u8| c.is_ascii_hexdigit();
    match b.len() {
        12 => {
            b[..4].iter().all(hex)
                && b[4] == b':'
                && b[5..7].iter().all(hex)
                && b[7] == b':'
                && b[8..10].iter().all(hex)
                && b[10] == b'.'
                && b[11].is_ascii_digit()
        }
        7 => {
            b[..2].iter().all(hex)
                && b[2] == b':'
                && b[3..5].iter().all(hex)
                && b[5] == b'.'
                && b[6].is_ascii_digit()
        }
        _ => false,
    }
}

/// True for a SCSI address `H:C:T:L`.
pub(crate) fn looks_like_hctl(s: &str) -> bool {
    let mut n = 0;
    for part in s.split(':') {
        if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return false;
        }
        n += 1;
    }
    n == 4
}

/// Parses `S:C` of `connectionS:C`.
fn parse_conn_id(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Fills `dev` from a message prefix (the text before the message proper, e.g.
/// `"ice 0000:02:00.0 rocep2s0f0: "`). Unknown shapes leave `dev` untouched.
pub(crate) fn apply_prefix(prefix: &str, role: NameRole, dev: &mut NamedDevices) {
    let p = prefix.trim().trim_end_matches(':').trim_end();
    if p.is_empty() {
        return;
    }
    // qedr's DP_ERR: "[qedr_modify_qp:2398(qedr0)]".
    if let Some(rest) = p.strip_prefix('[') {
        if let Some((inner, _)) = rest.split_once(']') {
            if let (Some(open), Some(close)) = (inner.find('('), inner.rfind(')')) {
                if open < close {
                    let name = &inner[open + 1..close];
                    if !name.is_empty() {
                        dev.rdma_dev = Some(name.to_string());
                    }
                }
            }
        }
        return;
    }
    let mut words = p.split(' ').filter(|w| !w.is_empty());
    let w1 = words.next();
    let w2 = words.next();
    let w3 = words.next();
    if words.next().is_some() {
        // Not a printk prefix (more than three words): the anchor sat mid-sentence.
        return;
    }
    match (w1, w2, w3) {
        (Some(one), None, None) => apply_single(one, role, dev),
        (Some(drv), Some(name), None) => {
            set(&mut dev.driver, drv);
            apply_named(drv, name, role, dev);
        }
        (Some(drv), Some(parent), Some(name)) => {
            set(&mut dev.driver, drv);
            if looks_like_pci(parent) {
                set(&mut dev.pci, parent);
            } else {
                set(&mut dev.parent, parent);
            }
            match role {
                NameRole::Netdev => set(&mut dev.netdev, name),
                NameRole::Rdma | NameRole::Auto => set(&mut dev.rdma_dev, name),
            }
        }
        _ => {}
    }
}

/// A one-word prefix: an iSCSI connection/session device, a module `pr_fmt`, or a bare
/// ib device name.
fn apply_single(word: &str, role: NameRole, dev: &mut NamedDevices) {
    if let Some(id) = word.strip_prefix("connection") {
        if let Some((s, c)) = parse_conn_id(id) {
            dev.iscsi_session = Some(s);
            dev.iscsi_conn = Some(c);
            return;
        }
    }
    if let Some(id) = word.strip_prefix("session") {
        if let Ok(s) = id.parse() {
            dev.iscsi_session = Some(s);
            return;
        }
    }
    if MODULE_PREFIXES.contains(&word) {
        set(&mut dev.driver, word);
        return;
    }
    match role {
        NameRole::Rdma => set(&mut dev.rdma_dev, word),
        NameRole::Netdev => set(&mut dev.netdev, word),
        NameRole::Auto => set(&mut dev.driver, word),
    }
}

/// `pr_fmt` prefixes of the modules whose messages are classified: a one-word prefix that
/// is one of these names the module, not a device.
const MODULE_PREFIXES: &[&str] = &[
    "ib_mad",
    "ib_core",
    "ib_cm",
    "iser",
    "isert",
    "ib_iser",
    "rdma_rxe",
    "rdma_cm",
    "irdma",
    "bnxt_re",
    "qedr",
    "siw",
    "mlx5_ib",
    "hns_roce",
    "libiscsi",
    "scsi_transport_iscsi",
];

/// A `dev_printk` prefix `"<driver|bus|class> <name>"`.
fn apply_named(drv: &str, name: &str, role: NameRole, dev: &mut NamedDevices) {
    match drv {
        "infiniband" => set(&mut dev.rdma_dev, name),
        "sd" | "scsi" | "sr" | "sg" if looks_like_hctl(name) => set(&mut dev.scsi_hctl, name),
        "scsi" => {
            if let Some(h) = name.strip_prefix("host").and_then(|h| h.parse().ok()) {
                dev.scsi_host = Some(h);
            }
        }
        _ if looks_like_pci(name) => set(&mut dev.pci, name),
        _ => match role {
            NameRole::Netdev => set(&mut dev.netdev, name),
            NameRole::Rdma | NameRole::Auto => set(&mut dev.rdma_dev, name),
        },
    }
}

/// Fills the fields `dev` lacks from a /dev/kmsg `DEVICE=` value: `+infiniband:rocep2s0f0`,
/// `+pci:0000:02:00.0`, `+scsi:0:0:0:0`, `+scsi:host0`, `+net:eth0`, `n<ifindex>`,
/// `b<maj>:<min>`, `c<maj>:<min>`. What the text says takes precedence; the dictionary
/// completes it (e.g. the PCI function of an irdma line, the RDMA device of a MAD line).
pub(crate) fn apply_dict_device(value: &str, dev: &mut NamedDevices) {
    let value = value.trim();
    let Some(first) = value.as_bytes().first() else {
        return;
    };
    match first {
        b'+' => {
            let Some((subsys, name)) = value[1..].split_once(':') else {
                fill(&mut dev.other, value);
                return;
            };
            if name.is_empty() {
                return;
            }
            match subsys {
                "infiniband" => fill(&mut dev.rdma_dev, name),
                "pci" => fill(&mut dev.pci, name),
                "net" => fill(&mut dev.netdev, name),
                "scsi" if looks_like_hctl(name) => fill(&mut dev.scsi_hctl, name),
                "scsi" => match name.strip_prefix("host").and_then(|h| h.parse().ok()) {
                    Some(h) if dev.scsi_host.is_none() => dev.scsi_host = Some(h),
                    Some(_) => {}
                    None => fill(&mut dev.other, value),
                },
                "iscsi_connection" => {
                    if let Some((s, c)) = name.strip_prefix("connection").and_then(parse_conn_id) {
                        dev.iscsi_session.get_or_insert(s);
                        dev.iscsi_conn.get_or_insert(c);
                    }
                }
                "iscsi_session" => {
                    if let Some(s) = name.strip_prefix("session").and_then(|s| s.parse().ok()) {
                        dev.iscsi_session.get_or_insert(s);
                    }
                }
                _ => fill(&mut dev.other, value),
            }
        }
        b'n' => {
            if let Ok(i) = value[1..].parse() {
                dev.ifindex.get_or_insert(i);
            }
        }
        b'b' | b'c' => {
            let nums = &value[1..];
            if let Some((a, b)) = nums.split_once(':') {
                if a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok() {
                    fill(&mut dev.devnum, value);
                }
            }
        }
        _ => {}
    }
}

fn set(slot: &mut Option<String>, v: &str) {
    *slot = Some(v.to_string());
}

fn fill(slot: &mut Option<String>, v: &str) {
    if slot.is_none() {
        *slot = Some(v.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_and_hctl_shapes() {
        assert!(looks_like_pci("0000:02:00.0"));
        assert!(looks_like_pci("02:00.0"));
        assert!(!looks_like_pci("0000:02:00"));
        assert!(!looks_like_pci("rocep2s0f0"));
        assert!(looks_like_hctl("0:0:0:0"));
        assert!(looks_like_hctl("12:0:3:255"));
        assert!(!looks_like_hctl("0:0:0"));
        assert!(!looks_like_hctl("a:0:0:0"));
    }

    #[test]
    fn ibdev_prefix_with_pci_parent() {
        let mut d = NamedDevices::default();
        apply_prefix("ice 0000:02:00.0 rocep2s0f0: ", NameRole::Rdma, &mut d);
        assert_eq!(d.driver.as_deref(), Some("ice"));
        assert_eq!(d.pci.as_deref(), Some("0000:02:00.0"));
        assert_eq!(d.rdma_dev.as_deref(), Some("rocep2s0f0"));
    }

    #[test]
    fn netdev_prefix() {
        let mut d = NamedDevices::default();
        apply_prefix(
            "mlx5_core 0000:81:00.0 enp129s0f0np0: ",
            NameRole::Netdev,
            &mut d,
        );
        assert_eq!(d.netdev.as_deref(), Some("enp129s0f0np0"));
        assert_eq!(d.rdma_dev, None);
    }

    #[test]
    fn iscsi_and_scsi_prefixes() {
        let mut d = NamedDevices::default();
        apply_prefix(" connection3:0: ", NameRole::Auto, &mut d);
        assert_eq!((d.iscsi_session, d.iscsi_conn), (Some(3), Some(0)));
        let mut d = NamedDevices::default();
        apply_prefix(" session12: ", NameRole::Auto, &mut d);
        assert_eq!(d.iscsi_session, Some(12));
        let mut d = NamedDevices::default();
        apply_prefix("sd 0:0:0:0: ", NameRole::Auto, &mut d);
        assert_eq!(d.scsi_hctl.as_deref(), Some("0:0:0:0"));
        assert_eq!(d.driver.as_deref(), Some("sd"));
    }

    #[test]
    fn module_prefixes_name_the_module() {
        let mut d = NamedDevices::default();
        apply_prefix("ib_mad: ", NameRole::Rdma, &mut d);
        assert_eq!(d.driver.as_deref(), Some("ib_mad"));
        assert_eq!(d.rdma_dev, None);
        let mut d = NamedDevices::default();
        apply_prefix("rocep2s0f0: ", NameRole::Rdma, &mut d);
        assert_eq!(d.rdma_dev.as_deref(), Some("rocep2s0f0"));
    }

    #[test]
    fn qedr_prefix() {
        let mut d = NamedDevices::default();
        apply_prefix("[qedr_modify_qp:2398(qedr0)]", NameRole::Rdma, &mut d);
        assert_eq!(d.rdma_dev.as_deref(), Some("qedr0"));
    }

    #[test]
    fn long_prefix_is_ignored() {
        let mut d = NamedDevices::default();
        apply_prefix("this is a whole sentence: ", NameRole::Auto, &mut d);
        assert!(d.is_empty());
    }

    #[test]
    fn dict_values() {
        let mut d = NamedDevices::default();
        apply_dict_device("+infiniband:rocep2s0f0", &mut d);
        assert_eq!(d.rdma_dev.as_deref(), Some("rocep2s0f0"));
        apply_dict_device("+pci:0000:02:00.0", &mut d);
        assert_eq!(d.pci.as_deref(), Some("0000:02:00.0"));
        apply_dict_device("+scsi:0:0:0:0", &mut d);
        assert_eq!(d.scsi_hctl.as_deref(), Some("0:0:0:0"));
        apply_dict_device("+scsi:host0", &mut d);
        assert_eq!(d.scsi_host, Some(0));
        apply_dict_device("n5", &mut d);
        assert_eq!(d.ifindex, Some(5));
        apply_dict_device("b8:0", &mut d);
        assert_eq!(d.devnum.as_deref(), Some("b8:0"));
        apply_dict_device("+auxiliary:ice.roce.0", &mut d);
        assert_eq!(d.other.as_deref(), Some("+auxiliary:ice.roce.0"));
        // The text wins over the dictionary.
        apply_dict_device("+infiniband:other", &mut d);
        assert_eq!(d.rdma_dev.as_deref(), Some("rocep2s0f0"));
        // Garbage is ignored without panicking.
        for v in [
            "", "+", "+:", "n", "nx", "b", "b1", "c1:x", "\u{0}", "+pci:",
        ] {
            apply_dict_device(v, &mut NamedDevices::default());
        }
    }
}
