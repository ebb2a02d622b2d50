//! The checks of the kernel and its RDMA side: the kernel, each driver module, each device,
//! how it would be re-created, QP 1 of each port, the CM consumers of each port, and the
//! known defects and hazards that apply.

use std::collections::BTreeMap;

use super::known::{Needs, KNOWN};
use super::parse::{origin_of_path, parse_kernel_release, KernelVersion, ModuleOrigin};
use super::{in_scope, Check, CheckKind, CheckVerdict, CmIdOwner, Facts, Gsi, RdmaDevice};
use crate::reset_plan::ResetMethod;

/// Kernel taint flags worth naming (kernel/panic.c `taint_flags`), by bit.
const TAINTS: &[(u32, char, &str)] = &[
    (0, 'P', "a proprietary module was loaded"),
    (7, 'D', "the kernel died (an oops) since boot"),
    (9, 'W', "the kernel printed a warning (WARN) since boot"),
    (12, 'O', "an out-of-tree module is loaded"),
    (13, 'E', "an unsigned module is loaded"),
    (14, 'L', "a soft lockup happened since boot"),
];

pub(super) fn kernel(f: &Facts, out: &mut Vec<Check>) {
    let source = format!("{}/sys/kernel/osrelease", f.paths.proc);
    let c = match &f.kernel.release {
        Ok(r) => {
            let mut c = Check::new(
                CheckKind::Kernel,
                "host",
                CheckVerdict::Ok,
                format!("Linux {r}"),
            )
            .evidence(format!("{source}: {r}"));
            if let Some(v) = &f.kernel.version {
                c = c.evidence(format!("{}/version: {v}", f.paths.proc));
            }
            if parse_kernel_release(r).is_none() {
                c.verdict = CheckVerdict::Unknown;
                c = c
                    .evidence("the release does not start with MAJOR.MINOR: known kernel defects cannot be matched")
                    .action("send the release string with your report");
            }
            if let Some(t) = f.kernel.tainted.filter(|t| *t != 0) {
                let named: Vec<String> = TAINTS
                    .iter()
                    .filter(|(bit, _, _)| t & (1u64 << bit) != 0)
                    .map(|(_, l, what)| format!("{l}: {what}"))
                    .collect();
                c = c.evidence(format!(
                    "{}/sys/kernel/tainted: {t}{}",
                    f.paths.proc,
                    if named.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", named.join("; "))
                    }
                ));
                if t & (1 << 7 | 1 << 14) != 0 {
                    c.verdict = c.verdict.max(CheckVerdict::Warning);
                    c = c.action(
                        "the kernel oopsed or locked up since boot: read `dmesg` for the \
                         report (an RDMA or iSER one may be a known defect, see known-issue)",
                    );
                }
            }
            c
        }
        Err(why) => Check::new(
            CheckKind::Kernel,
            "host",
            CheckVerdict::Unknown,
            "the running kernel's release could not be read",
        )
        .evidence(why.clone()),
    };
    out.push(c);
}

/// The running kernel's version, when known.
pub(super) fn version(f: &Facts) -> Option<KernelVersion> {
    f.kernel
        .release
        .as_ref()
        .ok()
        .and_then(|r| parse_kernel_release(r))
}

/// In-tree, out-of-tree or unknown, with the evidence.
fn origin(f: &Facts, module: &str) -> (Option<ModuleOrigin>, Vec<String>) {
    let mut ev = Vec::new();
    let Some(i) = f.modules.info(module) else {
        return (
            None,
            vec![format!("nothing is known about module {module}")],
        );
    };
    if let Some(v) = &i.version {
        ev.push(format!("version {v}"));
    }
    if let Some(s) = &i.srcversion {
        ev.push(format!("srcversion {s}"));
    }
    let by_taint = i.taint.as_deref().map(|t| {
        ev.push(format!(
            "{}/module/{module}/taint: {}",
            f.paths.sysfs,
            if t.is_empty() { "(none)" } else { t }
        ));
        if t.contains('O') {
            ModuleOrigin::OutOfTree
        } else {
            ModuleOrigin::InTree
        }
    });
    let by_path = i.path.as_deref().map(|p| {
        ev.push(format!("{}/modules.dep: {p}", f.paths.modules));
        origin_of_path(p)
    });
    if i.builtin {
        ev.push(format!("{}/modules.builtin lists it", f.paths.modules));
    }
    let origin = match (by_taint, by_path) {
        (Some(ModuleOrigin::OutOfTree), _) | (_, Some(ModuleOrigin::OutOfTree)) => {
            Some(ModuleOrigin::OutOfTree)
        }
        (Some(o), _) | (_, Some(o)) => Some(o),
        (None, None) if i.builtin => Some(ModuleOrigin::InTree),
        (None, None) => None,
    };
    (origin, ev)
}

pub(super) fn drivers(f: &Facts, out: &mut Vec<Check>) {
    let mut users: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for d in &f.rdma.devices {
        for m in &d.modules {
            if !order.contains(&m.as_str()) {
                order.push(m);
            }
            users.entry(m).or_default().push(&d.name);
        }
    }
    for m in order {
        let devices = users.get(m).map(|v| v.join(", ")).unwrap_or_default();
        let (origin, ev) = origin(f, m);
        let c = match origin {
            Some(ModuleOrigin::InTree) => Check::new(
                CheckKind::Driver,
                m,
                CheckVerdict::Ok,
                format!("{m} (serving {devices}) is the kernel's own (in-tree)"),
            ),
            Some(ModuleOrigin::OutOfTree) => Check::new(
                CheckKind::Driver,
                m,
                CheckVerdict::Warning,
                format!("{m} (serving {devices}) is built outside the kernel tree"),
            )
            .action(
                "out-of-tree drivers are not validated (known-issue out-of-tree-driver): run \
                 `iser-guard doctor --active DEVICE` on a maintenance window and send the report",
            ),
            None => Check::new(
                CheckKind::Driver,
                m,
                CheckVerdict::Unknown,
                format!("{m} (serving {devices}): whether it is in-tree is not known"),
            )
            .action("run doctor as root on the host itself (it reads /sys/module and modules.dep)"),
        };
        out.push(c.evidence_all(ev));
    }
}

fn soft_or_parent(d: &RdmaDevice) -> String {
    match (&d.soft, &d.pci) {
        (Some(kind), _) => format!("software ({kind})"),
        (None, Some(pci)) => format!(
            "PCI {pci}{}",
            d.pci_driver
                .as_deref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default()
        ),
        (None, None) => "no parent device".into(),
    }
}

pub(super) fn devices(f: &Facts, out: &mut Vec<Check>) {
    for d in &f.rdma.devices {
        let mut c = Check::new(CheckKind::Device, &d.name, CheckVerdict::Ok, String::new());
        let mut parts = vec![soft_or_parent(d)];
        if let Some(a) = &d.aux {
            parts.push(format!(
                "aux {} -> {}",
                a.name,
                a.driver_dir.as_deref().unwrap_or("(unbound)")
            ));
        }
        let netdevs: Vec<&str> = d
            .ports
            .iter()
            .flat_map(|p| p.netdevs.iter().map(String::as_str))
            .collect();
        if !netdevs.is_empty() {
            parts.push(format!("netdev {}", netdevs.join(",")));
        }
        c.evidence.push(format!(
            "parent: {}",
            match (&d.pci, &d.soft) {
                (Some(p), _) => format!(
                    "PCI function {p}, driver {}",
                    d.pci_driver.as_deref().unwrap_or("none")
                ),
                (None, Some(k)) => format!("none: a software {k} device"),
                (None, None) => "none".into(),
            }
        ));
        match &d.aux {
            Some(a) => c.evidence.push(format!(
                "auxiliary device {}: driver folder {}/bus/auxiliary/drivers/{}, module {}",
                a.name,
                f.paths.sysfs,
                a.driver_dir.as_deref().unwrap_or("(none: unbound)"),
                a.module.as_deref().unwrap_or("unknown")
            )),
            None if d.pci.is_some() => c
                .evidence
                .push("no RDMA auxiliary device under the PCI function".into()),
            None => {}
        }
        if let Some(nt) = d.node_type {
            c.evidence.push(format!(
                "node type {nt} ({})",
                match nt {
                    1 => "CA: InfiniBand or RoCE",
                    4 => "RNIC: iWARP",
                    _ => "other",
                }
            ));
        }
        if let Some(fw) = &d.fw {
            c.evidence.push(format!("firmware {fw}"));
        }
        let mut down = Vec::new();
        for p in &d.ports {
            let st = p.state.as_deref().unwrap_or("unknown");
            let ph = p.phys_state.as_deref().unwrap_or("unknown");
            c.evidence.push(format!(
                "port {}: {st} / {ph}, link layer {}, netdev {}",
                p.port,
                p.link_layer.as_deref().unwrap_or("unknown"),
                if p.netdevs.is_empty() {
                    "none".into()
                } else {
                    p.netdevs.join(",")
                }
            ));
            if !st.eq_ignore_ascii_case("ACTIVE") && p.state.is_some() {
                down.push(format!("{}/{} is {st}", d.name, p.port));
            }
        }
        parts.push(match d.ports.len() {
            0 => "no ports".into(),
            1 => format!(
                "port 1 {}",
                d.ports[0].state.as_deref().unwrap_or("state unknown")
            ),
            n => format!("{n} ports"),
        });
        c.finding = parts.join(", ");
        c.evidence.push(format!(
            "seen by {}",
            match (d.in_sysfs, d.in_netlink) {
                (true, true) => "sysfs and RDMA netlink",
                (true, false) => "sysfs only",
                (false, true) => "RDMA netlink only",
                (false, false) => "neither witness (a remembered device)",
            }
        ));
        if !down.is_empty() {
            c.verdict = CheckVerdict::Warning;
            c = c.action(format!(
                "{}: no iSER session can use a port that is not ACTIVE; check the cable, the \
                 switch port and `ip link show` of its netdev",
                down.join("; ")
            ));
        }
        if f.rdma.netlink.is_ok() && d.in_sysfs != d.in_netlink {
            c.verdict = c.verdict.max(CheckVerdict::Warning);
            c = c.evidence(
                "sysfs and RDMA netlink disagree about this device: it may be appearing or \
                 going away (run doctor again), or RDMA netlink is in another network namespace \
                 (`rdma system show netns`)",
            );
        }
        if d.ports.is_empty() {
            c.verdict = c.verdict.max(CheckVerdict::Warning);
        }
        out.push(c);
    }
}

pub(super) fn recreate(f: &Facts, out: &mut Vec<Check>) {
    for d in &f.rdma.devices {
        let scope = in_scope(f, &d.name);
        let c = match &d.recreate {
            Ok(plan) if !plan.methods.is_empty() => {
                let first = &plan.methods[0].0;
                let mut c = Check::new(
                    CheckKind::Recreate,
                    &d.name,
                    CheckVerdict::Ok,
                    format!("the daemon would {first}"),
                );
                for (i, (m, steps)) in plan.methods.iter().enumerate() {
                    c.evidence
                        .push(format!("method {}: {m}: {}", i + 1, steps.join("; ")));
                }
                for s in &plan.skipped {
                    c.evidence.push(format!("not used: {s}"));
                }
                if let Some(p) = &d.devlink {
                    match &p.value {
                        Ok(true) => c
                            .evidence
                            .push(format!("devlink {} {}: true (runtime)", p.handle, p.name)),
                        Ok(false) => {
                            c.verdict = CheckVerdict::Warning;
                            c.evidence
                                .push(format!("devlink {} {}: false (runtime)", p.handle, p.name));
                            c = c.action(format!(
                                "{} is off on {}: RDMA is disabled on this function or in the \
                                 other mode, so the devlink toggle would be skipped",
                                p.name, p.handle
                            ));
                        }
                        Err(why) => {
                            c.verdict = CheckVerdict::Warning;
                            c.evidence.push(format!(
                                "devlink {} {}: not readable: {why}",
                                p.handle, p.name
                            ));
                            c = c.action(
                                "the devlink toggle cannot be checked (is iproute2's devlink \
                                 installed, are you root?): the daemon would fall through to \
                                 the next method if it fails",
                            );
                        }
                    }
                }
                if matches!(first, ResetMethod::ModuleReload { .. }) {
                    c.verdict = c.verdict.max(CheckVerdict::Warning);
                    c = c.action(
                        "the only way is reloading the driver module, which re-creates every \
                         device of that driver: check why the other methods were not used",
                    );
                }
                c
            }
            Ok(plan) => Check::new(
                CheckKind::Recreate,
                &d.name,
                if scope {
                    CheckVerdict::Problem
                } else {
                    CheckVerdict::Warning
                },
                format!("no way to re-create {}", d.name),
            )
            .evidence_all(plan.skipped.iter().map(|s| format!("not used: {s}")))
            .action(no_method_action(d)),
            Err(why) => Check::new(
                CheckKind::Recreate,
                &d.name,
                if scope {
                    CheckVerdict::Problem
                } else {
                    CheckVerdict::Warning
                },
                format!("no way to re-create {}", d.name),
            )
            .evidence(why.clone())
            .action(no_method_action(d)),
        };
        let c = if scope {
            c
        } else {
            c.evidence(format!(
                "{} is not in devices.allow and carries no iSCSI session: the daemon never \
                 re-creates it by itself",
                d.name
            ))
        };
        out.push(c);
    }
}

fn no_method_action(d: &RdmaDevice) -> String {
    format!(
        "iser-guard cannot recover {} as this host is set up: install iproute2 (devlink, rdma) \
         if it is missing, and send this report: a driver without an auxiliary device (bnxt_re, \
         qedr, mlx4) needs a method iser-guard does not have yet",
        d.name
    )
}

pub(super) fn gsi(f: &Facts, out: &mut Vec<Check>) {
    for d in &f.rdma.devices {
        for p in &d.ports {
            let subject = format!("{}/{}", d.name, p.port);
            let c = match &p.gsi {
                Gsi::State { state, evidence } if state == "RTS" => Check::new(
                    CheckKind::GsiQp,
                    &subject,
                    CheckVerdict::Ok,
                    "QP 1 (GSI) is in RTS: new RDMA connections can be made",
                )
                .evidence(evidence.clone()),
                Gsi::State { state, evidence } if state == "ERR" => Check::new(
                    CheckKind::GsiQp,
                    &subject,
                    CheckVerdict::Problem,
                    "QP 1 (GSI) is stuck in ERR: no new RDMA connection can be made on this port",
                )
                .evidence(evidence.clone())
                .action(format!(
                    "re-create the device: `iser-guard recover {subject}` (the daemon does it \
                     by itself when {} is in devices.allow)",
                    d.name
                )),
                Gsi::State { state, evidence } => Check::new(
                    CheckKind::GsiQp,
                    &subject,
                    CheckVerdict::Warning,
                    format!("QP 1 (GSI) is in {state}, not RTS"),
                )
                .evidence(evidence.clone())
                .action(
                    "run doctor again: a device being re-created walks QP 1 to RTS in a second",
                ),
                Gsi::Absent if d.node_type == Some(4) => Check::new(
                    CheckKind::GsiQp,
                    &subject,
                    CheckVerdict::Ok,
                    "no GSI QP: an iWARP port connects through TCP (iw_cm), so the stuck-QP-1 \
                     failure does not apply",
                ),
                Gsi::Absent => Check::new(
                    CheckKind::GsiQp,
                    &subject,
                    CheckVerdict::Warning,
                    "the QP table has no GSI QP (QP 1) for this port",
                )
                .evidence(d.qp_error.clone().unwrap_or_else(|| {
                    "every RoCE and InfiniBand port has one while the MAD layer has it open".into()
                }))
                .action("check `rdma resource show qp lqpn 1` and dmesg for MAD errors"),
                Gsi::Unknown => Check::new(
                    CheckKind::GsiQp,
                    &subject,
                    CheckVerdict::Unknown,
                    "QP 1's state is not known",
                )
                .evidence(match (&f.rdma.netlink, &d.qp_error) {
                    (Err(e), _) => format!("RDMA netlink: {e}"),
                    (Ok(()), Some(e)) => format!("QP table of {}: {e}", d.name),
                    (Ok(()), None) => "the QP table was not read".into(),
                })
                .action("run doctor as root (CAP_NET_ADMIN) on the host itself"),
            };
            out.push(c);
        }
    }
}

pub(super) fn cm_ids(f: &Facts, out: &mut Vec<Check>) {
    for d in &f.rdma.devices {
        let scope = in_scope(f, &d.name);
        for p in &d.ports {
            let subject = format!("{}/{}", d.name, p.port);
            let ids = match &p.cm_ids {
                Ok(ids) => ids,
                Err(why) => {
                    out.push(
                        Check::new(
                            CheckKind::CmIds,
                            &subject,
                            CheckVerdict::Unknown,
                            "the RDMA CM consumers of this port are not known",
                        )
                        .evidence(why.clone()),
                    );
                    continue;
                }
            };
            if ids.is_empty() {
                out.push(Check::new(
                    CheckKind::CmIds,
                    &subject,
                    CheckVerdict::Ok,
                    "no RDMA CM id on this port",
                ));
                continue;
            }
            let mut by: BTreeMap<&CmIdOwner, (usize, usize)> = BTreeMap::new();
            for id in ids {
                let e = by.entry(&id.consumer).or_default();
                if id.is_listener() {
                    e.1 += 1;
                } else {
                    e.0 += 1;
                }
            }
            let summary: Vec<String> = by
                .iter()
                .map(|(c, (conns, listeners))| {
                    let mut s = c.describe();
                    let mut what = Vec::new();
                    if *conns > 0 {
                        what.push(plural(*conns, "connection"));
                    }
                    if *listeners > 0 {
                        what.push(plural(*listeners, "listener"));
                    }
                    s.push_str(&format!(" ({})", what.join(", ")));
                    s
                })
                .collect();
            let others: Vec<String> = by
                .keys()
                .filter(|c| !c.is_iser_initiator())
                .map(|c| c.describe())
                .collect();
            let mut c = Check::new(
                CheckKind::CmIds,
                &subject,
                CheckVerdict::Ok,
                format!("consumers: {}", summary.join(", ")),
            )
            .evidence_all(ids.iter().map(|i| {
                format!(
                    "{} {}{}{}",
                    i.consumer.describe(),
                    i.state,
                    i.src
                        .as_deref()
                        .map(|s| format!(" src {s}"))
                        .unwrap_or_default(),
                    i.dst
                        .as_deref()
                        .map(|s| format!(" dst {s}"))
                        .unwrap_or_default()
                )
            }));
            if scope && !others.is_empty() {
                c.verdict = CheckVerdict::Warning;
                c = c.action(format!(
                    "re-creating {} ends every connection on it; iser-guard brings back iSCSI \
                     sessions only, not those of {}: plan for them before allowing automatic \
                     recovery",
                    d.name,
                    others.join(", ")
                ));
            }
            out.push(c);
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Whether the host has what a row needs; `None` when that is not known.
fn needs_met(f: &Facts, needs: Needs) -> Option<bool> {
    match needs {
        Needs::Iser => {
            let session = f
                .iscsi
                .sessions
                .as_ref()
                .map(|s| s.iter().any(|s| s.transport == "iser"))
                .unwrap_or(false);
            match f.modules.present("ib_iser") {
                Some(loaded) => Some(loaded || session),
                None => Some(session),
            }
        }
        Needs::Irdma => Some(f.rdma.devices.iter().any(is_irdma)),
        Needs::BondedIce => Some(f.bonded.iter().any(|b| b.driver == "ice" && !b.has_rdma)),
        // The driver check reports these, one per module.
        Needs::OutOfTreeDriver => Some(false),
    }
}

fn is_irdma(d: &RdmaDevice) -> bool {
    d.modules.iter().any(|m| m == "irdma")
        || d.aux
            .as_ref()
            .and_then(|a| a.driver_dir.as_deref())
            .is_some_and(|dir| dir.starts_with("irdma"))
}

pub(super) fn known_issues(f: &Facts, out: &mut Vec<Check>) {
    let v = version(f);
    let mut any = false;
    for k in KNOWN {
        let Some(true) = needs_met(f, k.needs) else {
            continue;
        };
        let applies = match v {
            Some(v) => k.kernels.contains(v),
            None => {
                any = true;
                out.push(
                    Check::new(
                        CheckKind::KnownIssue,
                        k.id,
                        CheckVerdict::Unknown,
                        format!("may apply (the kernel's version is not known): {}", k.title),
                    )
                    .evidence_all(k.sources.iter().map(|s| format!("source: {s}"))),
                );
                continue;
            }
        };
        if !applies {
            continue;
        }
        any = true;
        let mut c = Check::new(CheckKind::KnownIssue, k.id, CheckVerdict::Warning, k.title)
            .evidence(k.effect)
            .evidence_all(k.sources.iter().map(|s| format!("source: {s}")))
            .action(k.remedy);
        match k.needs {
            Needs::Irdma if k.id == "irdma-gsi-stuck" => {
                let irdma: Vec<&str> = f
                    .rdma
                    .devices
                    .iter()
                    .filter(|d| is_irdma(d))
                    .map(|d| d.name.as_str())
                    .collect();
                let unprotected: Vec<&str> = irdma
                    .iter()
                    .copied()
                    .filter(|d| !f.config.allow.iter().any(|a| a == d))
                    .collect();
                c.evidence
                    .push(format!("irdma devices: {}", irdma.join(", ")));
                if unprotected.is_empty() {
                    c.verdict = CheckVerdict::Ok;
                    c.evidence
                        .push("every one is in devices.allow: the daemon recovers them".into());
                } else {
                    c.evidence.push(format!(
                        "not in devices.allow (the daemon only alerts): {}",
                        unprotected.join(", ")
                    ));
                }
            }
            Needs::BondedIce => {
                for b in f.bonded.iter().filter(|b| b.driver == "ice" && !b.has_rdma) {
                    c.evidence.push(format!(
                        "{} (PCI {}) is a member of {} and has no RDMA device",
                        b.netdev, b.pci, b.master
                    ));
                }
            }
            _ => {}
        }
        if let Some(v) = v {
            c.evidence.push(format!("running kernel {v}"));
        }
        out.push(c);
    }
    if !any {
        out.push(
            Check::new(
                CheckKind::KnownIssue,
                "host",
                CheckVerdict::Ok,
                match v {
                    Some(v) => {
                        format!("no known defect or hazard applies to Linux {v} with these drivers")
                    }
                    None => "no known defect or hazard applies to these drivers".into(),
                },
            )
            .evidence(format!(
                "the table holds {} rows: {}",
                KNOWN.len(),
                KNOWN.iter().map(|k| k.id).collect::<Vec<_>>().join(", ")
            )),
        );
    }
}
