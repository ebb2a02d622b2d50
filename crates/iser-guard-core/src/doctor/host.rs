//! The checks of the host around the RDMA devices: the service's device sandbox, the modules
//! iser-guard needs, the configuration against the host, and the running daemon against the
//! kernel.

use std::collections::BTreeSet;

use super::parse::{unit_bool, CharDevices, DeviceAllow};
use super::{sessions_on, Check, CheckKind, CheckVerdict, DaemonWitness, DevNode, Facts, Gsi};
use crate::recovery::Phase;

/// `/dev/kmsg`: character device 1:11 on every kernel (drivers/char/mem.c).
const KMSG: (u32, u32) = (1, 11);

/// One node the service must open, and how.
struct Need {
    path: String,
    number: Option<(u32, u32)>,
    write: bool,
    why: &'static str,
}

/// Whether the unit's device list lets the service open `need`: `Ok(entry)` naming the entry
/// that allows it, `Err(why not)`.
fn allowed(
    entries: &[DeviceAllow],
    devices: Option<&CharDevices>,
    need: &Need,
) -> Result<String, String> {
    let access_ok =
        |e: &DeviceAllow| e.access.contains('r') && (!need.write || e.access.contains('w'));
    for e in entries {
        if e.spec == need.path {
            return if access_ok(e) {
                Ok(format!("DeviceAllow={} {}", e.spec, e.access))
            } else {
                Err(format!(
                    "DeviceAllow={} {} does not allow {}",
                    e.spec,
                    e.access,
                    if need.write { "read and write" } else { "read" }
                ))
            };
        }
        if let (Some(_), Some((major, _)), Some(devs)) = (e.char_group(), need.number, devices) {
            if devs.names_of(major).iter().any(|g| e.matches_group(g)) && access_ok(e) {
                return Ok(format!(
                    "DeviceAllow={} {} (major {major} in /proc/devices)",
                    e.spec, e.access
                ));
            }
        }
    }
    Err(format!(
        "no DeviceAllow= entry lets the service open {}",
        need.path
    ))
}

pub(super) fn sandbox(f: &Facts, out: &mut Vec<Check>) {
    let s = &f.sandbox;
    let unit = match &s.unit {
        Ok(Some(u)) => u,
        Ok(None) => {
            out.push(
                Check::new(
                    CheckKind::Sandbox,
                    "service",
                    CheckVerdict::Unknown,
                    format!(
                        "the service's unit {} is not installed: its sandbox cannot be checked",
                        s.unit_path
                    ),
                )
                .action(
                    "install the iser-guard package (or set paths.unit-file to where the unit is) \
                     and run doctor again",
                ),
            );
            return;
        }
        Err(why) => {
            out.push(
                Check::new(
                    CheckKind::Sandbox,
                    "service",
                    CheckVerdict::Unknown,
                    "the service's unit could not be read",
                )
                .evidence(why.clone()),
            );
            return;
        }
    };
    let mut c = Check::new(
        CheckKind::Sandbox,
        "service",
        CheckVerdict::Ok,
        String::new(),
    )
    .evidence(format!("unit {}", s.unit_path))
    .evidence_all(s.drop_ins.iter().map(|d| format!("drop-in {d}")));
    let mut actions: Vec<String> = Vec::new();
    let worst = |v: &mut CheckVerdict, w: CheckVerdict| *v = (*v).max(w);

    let private = unit.last("Service", "PrivateDevices").and_then(unit_bool) == Some(true);
    let policy = unit
        .last("Service", "DevicePolicy")
        .unwrap_or("auto")
        .to_string();
    let entries: Vec<DeviceAllow> = unit
        .list("Service", "DeviceAllow")
        .iter()
        .filter_map(|e| DeviceAllow::parse(e))
        .collect();
    let restricted = policy != "auto" || !entries.is_empty();
    c.evidence.push(format!(
        "DevicePolicy={policy}, PrivateDevices={}, DeviceAllow: {}",
        if private { "yes" } else { "no" },
        if entries.is_empty() {
            "(none)".to_string()
        } else {
            entries
                .iter()
                .map(|e| format!("{} {}", e.spec, e.access))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    if private {
        worst(&mut c.verdict, CheckVerdict::Problem);
        actions.push(
            "PrivateDevices=yes hides /dev/kmsg and /dev/infiniband from the service: set \
             PrivateDevices=no in a drop-in (`systemctl edit iser-guard`)"
                .into(),
        );
    }
    let devices = s.proc_devices.as_ref().ok();
    match &s.proc_devices {
        Ok(d) => {
            let ib: Vec<String> = d
                .groups
                .iter()
                .filter(|(_, n)| n.starts_with("infiniband") || n == "misc")
                .map(|(m, n)| format!("{m} {n}"))
                .collect();
            c.evidence.push(format!(
                "{}/devices: {}",
                f.paths.proc,
                if ib.is_empty() {
                    "no infiniband group".into()
                } else {
                    ib.join(", ")
                }
            ));
        }
        Err(e) => {
            worst(&mut c.verdict, CheckVerdict::Unknown);
            c.evidence.push(e.clone());
        }
    }
    // Group entries that resolve to nothing now: systemd resolves them when the unit starts.
    if let Some(d) = devices {
        for e in entries.iter().filter(|e| e.char_group().is_some()) {
            if !d.groups.iter().any(|(_, n)| e.matches_group(n)) {
                worst(&mut c.verdict, CheckVerdict::Warning);
                actions.push(format!(
                    "DeviceAllow={} names no group of /proc/devices now: systemd resolves it \
                     when the service starts, so a module loaded later (ib_uverbs for \
                     infiniband_verbs) stays locked out until `systemctl restart iser-guard`; \
                     load it at boot (rdma-core's rdma-load-modules) before the service",
                    e.spec
                ));
            }
        }
    }
    let mut needs = vec![Need {
        path: "/dev/kmsg".into(),
        number: Some(KMSG),
        write: false,
        why: "the kernel log",
    }];
    match &s.verbs_nodes {
        Ok(nodes) => {
            let uverbs: Vec<&DevNode> = nodes
                .iter()
                .filter(|n| n.name.starts_with("uverbs"))
                .collect();
            let cm = nodes.iter().find(|n| n.name == "rdma_cm");
            c.evidence.push(format!(
                "{}/infiniband: {}",
                f.paths.dev,
                if nodes.is_empty() {
                    "no nodes".into()
                } else {
                    nodes
                        .iter()
                        .map(|n| match n.number {
                            Some((a, b)) => format!("{} ({a}:{b})", n.name),
                            None => n.name.clone(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
            if uverbs.is_empty() && !f.rdma.devices.is_empty() {
                worst(&mut c.verdict, CheckVerdict::Warning);
                actions.push(
                    "no uverbs node: the self-test and the asynchronous events cannot open any \
                     device (load ib_uverbs)"
                        .into(),
                );
            }
            if cm.is_none() && !f.rdma.devices.is_empty() {
                worst(&mut c.verdict, CheckVerdict::Warning);
                actions.push(
                    "no rdma_cm node: the self-test cannot make its connection (load rdma_ucm)"
                        .into(),
                );
            }
            for n in uverbs.into_iter().chain(cm) {
                needs.push(Need {
                    path: n.path.clone(),
                    number: n.number,
                    write: true,
                    why: if n.name == "rdma_cm" {
                        "the self-test's RDMA CM connection"
                    } else {
                        "verbs: the self-test and asynchronous events"
                    },
                });
            }
        }
        Err(e) => {
            worst(&mut c.verdict, CheckVerdict::Unknown);
            c.evidence.push(e.clone());
        }
    }
    if restricted && !private {
        for n in &needs {
            match allowed(&entries, devices, n) {
                Ok(by) => c.evidence.push(format!("{}: allowed by {by}", n.path)),
                Err(why) => {
                    worst(&mut c.verdict, CheckVerdict::Problem);
                    c.evidence.push(format!("{}: DENIED ({why})", n.path));
                    actions.push(format!(
                        "the service cannot open {} ({}): add `DeviceAllow={} {}` in a drop-in \
                         and restart it",
                        n.path,
                        n.why,
                        n.path,
                        if n.write { "rw" } else { "r" }
                    ));
                }
            }
        }
    } else if !private {
        c.evidence
            .push("no device list: the service may open every device".into());
    }
    if f.config.allow_module_reload {
        let protect = unit
            .last("Service", "ProtectKernelModules")
            .and_then(unit_bool)
            == Some(true);
        let caps = unit.list("Service", "CapabilityBoundingSet");
        let no_cap = !caps.is_empty() && !caps.iter().any(|c| c.contains("CAP_SYS_MODULE"));
        if protect || no_cap {
            worst(&mut c.verdict, CheckVerdict::Problem);
            actions.push(format!(
                "recovery.allow-module-reload = true cannot work in this unit ({}): add \
                 ProtectKernelModules=no and CAP_SYS_MODULE in a drop-in, or turn the setting off",
                [
                    protect.then_some("ProtectKernelModules=yes"),
                    no_cap.then_some("CapabilityBoundingSet has no CAP_SYS_MODULE"),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ")
            ));
        }
    }
    c.finding = match c.verdict {
        CheckVerdict::Ok => {
            "the service can open the kernel log, the verbs devices and rdma_cm".into()
        }
        CheckVerdict::Problem => "the service's sandbox locks out something it needs".into(),
        CheckVerdict::Warning => "the service's sandbox works now but can lock it out".into(),
        CheckVerdict::Unknown => "the service's sandbox could not be checked in full".into(),
    };
    if !actions.is_empty() {
        c.action = Some(actions.join("; "));
    }
    out.push(c);
}

/// The modules iser-guard needs, with what each is for and how bad its absence is.
const NEEDED: &[(&str, CheckVerdict, &str)] = &[
    (
        "ib_core",
        CheckVerdict::Problem,
        "the RDMA core: without it there is no RDMA at all",
    ),
    (
        "rdma_cm",
        CheckVerdict::Warning,
        "the RDMA connection manager every iSER login goes through",
    ),
    (
        "ib_iser",
        CheckVerdict::Warning,
        "the iSER initiator; the first iSER login loads it",
    ),
    (
        "ib_uverbs",
        CheckVerdict::Warning,
        "verbs from user space: the port self-test and asynchronous events",
    ),
    (
        "rdma_ucm",
        CheckVerdict::Warning,
        "the rdma_cm device: the port self-test's connection",
    ),
];

pub(super) fn modules(f: &Facts, out: &mut Vec<Check>) {
    let mut c = Check::new(CheckKind::Modules, "host", CheckVerdict::Ok, String::new());
    let mut missing = Vec::new();
    let mut unknown = Vec::new();
    for (m, severity, why) in NEEDED {
        match f.modules.present(m) {
            Some(true) => c.evidence.push(format!("{m}: loaded ({why})")),
            Some(false) => {
                c.verdict = c.verdict.max(*severity);
                c.evidence.push(format!("{m}: NOT loaded ({why})"));
                missing.push(*m);
            }
            None => {
                c.verdict = c.verdict.max(CheckVerdict::Unknown);
                unknown.push(*m);
            }
        }
    }
    if let Err(e) = &f.modules.loaded {
        c.evidence.push(format!("loaded modules: {e}"));
    }
    if let Err(e) = &f.modules.builtin {
        c.evidence.push(format!("built-in modules: {e}"));
    }
    c.finding = if missing.is_empty() && unknown.is_empty() {
        "every module iser-guard needs is loaded".into()
    } else if missing.is_empty() {
        format!("not known whether loaded: {}", unknown.join(", "))
    } else {
        format!("not loaded: {}", missing.join(", "))
    };
    if !missing.is_empty() {
        c.action = Some(format!(
            "`modprobe {}`, and list them in /etc/modules-load.d/ so they are there before the \
             service starts",
            missing.join(" ")
        ));
    }
    out.push(c);
}

pub(super) fn config(f: &Facts, out: &mut Vec<Check>) {
    let cf = &f.config;
    let names: BTreeSet<&str> = f.rdma.devices.iter().map(|d| d.name.as_str()).collect();
    // The file itself.
    let mut c = Check::new(
        CheckKind::Config,
        "configuration",
        CheckVerdict::Ok,
        format!("{} is valid", cf.source),
    );
    if let Some(why) = &cf.unread {
        c.verdict = CheckVerdict::Unknown;
        c.finding = format!(
            "{} could not be read: this audit used the built-in defaults",
            cf.source
        );
        c.evidence.push(why.clone());
        c = c.action("run doctor as root (the configuration is readable by root only)");
    }
    if !cf.problems.is_empty() {
        c.verdict = CheckVerdict::Problem;
        c.finding = format!("{} cannot be used: the daemon would not start", cf.source);
        c.evidence.extend(cf.problems.iter().cloned());
        c = c.action(
            "fix what `iser-guard check-config` lists (this audit used the built-in defaults)",
        );
    }
    if cf.dry_run {
        c.verdict = c.verdict.max(CheckVerdict::Warning);
        c.evidence.push("recovery.dry-run = true".into());
        c.action.get_or_insert_with(|| {
            "recovery.dry-run = true: the daemon decides and alerts but changes nothing".into()
        });
    }
    out.push(c);

    // The allow-list against the devices here.
    let unmatched: Vec<&str> = cf
        .allow
        .iter()
        .map(String::as_str)
        .filter(|a| !names.contains(a))
        .collect();
    let mut c = if cf.allow.is_empty() {
        Check::new(
            CheckKind::Config,
            "devices.allow",
            CheckVerdict::Warning,
            "devices.allow is empty: the daemon detects and alerts, and re-creates no device by itself",
        )
        .action("list the devices that carry iSER sessions in devices.allow, then `systemctl reload iser-guard`")
    } else if unmatched.is_empty() {
        Check::new(
            CheckKind::Config,
            "devices.allow",
            CheckVerdict::Ok,
            format!(
                "every entry names a device of this host: {}",
                cf.allow.join(", ")
            ),
        )
    } else {
        Check::new(
            CheckKind::Config,
            "devices.allow",
            CheckVerdict::Warning,
            format!(
                "devices.allow names devices this host does not have: {}",
                unmatched.join(", ")
            ),
        )
        .action(format!(
            "a typo, or a device renamed (udev's rdma_rename): the devices here are {}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.iter().copied().collect::<Vec<_>>().join(", ")
            }
        ))
    };
    c.evidence.push(format!("configuration: {}", cf.source));
    out.push(c);

    // Devices that carry sessions without being allow-listed.
    for d in &f.rdma.devices {
        let n = sessions_on(f, &d.name);
        if n > 0 && !cf.allow.iter().any(|a| a == &d.name) {
            out.push(
                Check::new(
                    CheckKind::Config,
                    &d.name,
                    CheckVerdict::Warning,
                    format!(
                        "{} carries {} but is not in devices.allow: the daemon only alerts when \
                         its port is stuck",
                        d.name,
                        if n == 1 { "1 iSCSI session".to_string() } else { format!("{n} iSCSI sessions") }
                    ),
                )
                .action(format!("add \"{}\" to devices.allow, or recover it by hand with `iser-guard recover {}`", d.name, d.name)),
            );
        }
    }

    // Portals: what the sessions use and how each is probed; node records nothing uses.
    let sessions = f.iscsi.sessions.as_ref().ok();
    let mut portals: Vec<&str> = Vec::new();
    if let Some(s) = sessions {
        for s in s {
            if !portals.contains(&s.portal.as_str()) {
                portals.push(&s.portal);
            }
        }
        for s in s
            .iter()
            .filter(|s| s.transport == "iser" && s.port.is_none())
        {
            out.push(
                Check::new(
                    CheckKind::Config,
                    format!("session {}", s.sid),
                    CheckVerdict::Warning,
                    format!(
                        "iSER session {} ({} at {}) is on no known RDMA port: the daemon cannot tell which device carries it",
                        s.sid, s.target, s.portal
                    ),
                )
                .action(
                    "run doctor as root (the RDMA CM id table places sessions); with several \
                     RDMA ports, bind the session's iface to its netdev (iface.net_ifacename)",
                ),
            );
        }
    }
    for p in &portals {
        let users: Vec<String> = sessions
            .map(|s| {
                s.iter()
                    .filter(|s| s.portal == *p)
                    .map(|s| {
                        format!(
                            "session {} {} on {}{}",
                            s.sid,
                            s.state,
                            s.port
                                .as_ref()
                                .map(|(d, n)| format!("{d}/{n}"))
                                .unwrap_or_else(|| "no known RDMA port".into()),
                            s.placed_by
                                .as_deref()
                                .map(|b| format!(" (placed by {b})"))
                                .unwrap_or_default()
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(
            Check::new(
                CheckKind::Config,
                format!("portal {p}"),
                CheckVerdict::Ok,
                format!(
                    "probed by {} before a re-creation ({} s of answers in a row)",
                    match cf.probe_method.as_str() {
                        "tcp" => format!("a TCP connect to {}", with_port(p, cf.probe_port)),
                        "auto" => format!(
                            "a TCP connect to {} (ARP/ND instead if TCP is refused while the \
                             host answers)",
                            with_port(p, cf.probe_port)
                        ),
                        "neighbour" => "the host's ARP/ND answer on the portal's netdev".into(),
                        other => other.to_string(),
                    },
                    cf.target_back_s
                ),
            )
            .evidence_all(users),
        );
    }
    if let Ok(nodes) = &f.iscsi.nodes {
        for n in nodes {
            if portals.contains(&n.portal.as_str()) {
                continue;
            }
            let startup = n
                .settings
                .as_ref()
                .ok()
                .and_then(|s| s.get("node.startup"))
                .unwrap_or("unknown")
                .to_string();
            let automatic = startup == "automatic" || startup == "onboot";
            out.push(
                Check::new(
                    CheckKind::Config,
                    format!("portal {}", n.portal),
                    if automatic { CheckVerdict::Warning } else { CheckVerdict::Ok },
                    format!(
                        "no session uses this portal (node record {} via iface {}): nothing to watch there",
                        n.target, n.iface
                    ),
                )
                .evidence(format!("node.startup = {startup}"))
                .action_if(
                    automatic,
                    format!(
                        "node.startup = {startup} but no session is logged in: `iscsiadm -m node -T {} -p {} --login`",
                        n.target, n.portal
                    ),
                ),
            );
        }
    }
}

fn with_port(portal: &str, default: u16) -> String {
    if portal
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        portal.to_string()
    } else {
        format!("{portal}:{default}")
    }
}

impl Check {
    fn action_if(self, cond: bool, a: String) -> Self {
        if cond {
            self.action(a)
        } else {
            self
        }
    }
}

pub(super) fn daemon(f: &Facts, out: &mut Vec<Check>) {
    let c = match &f.daemon {
        DaemonWitness::NotAsked => return,
        DaemonWitness::NotRunning { socket } => Check::new(
            CheckKind::Daemon,
            "daemon",
            CheckVerdict::Warning,
            "no daemon runs: nothing recovers this host by itself",
        )
        .evidence(format!("nothing listens on {socket}"))
        .action("`systemctl enable --now iser-guard`"),
        DaemonWitness::Unreadable { why } => Check::new(
            CheckKind::Daemon,
            "daemon",
            CheckVerdict::Unknown,
            "the daemon's state could not be read",
        )
        .evidence(why.clone()),
        DaemonWitness::Running { snapshot } => {
            let d = &snapshot.daemon;
            let mut c =
                Check::new(CheckKind::Daemon, "daemon", CheckVerdict::Ok, String::new()).evidence(
                    format!("pid {}, version {}, status: {}", d.pid, d.version, d.status),
                );
            let mut disagree = Vec::new();
            let mut notes = Vec::new();
            let kernel_ports: Vec<(String, &Gsi)> = f
                .rdma
                .devices
                .iter()
                .flat_map(|dev| {
                    dev.ports
                        .iter()
                        .map(move |p| (format!("{}/{}", dev.name, p.port), &p.gsi))
                })
                .collect();
            for (port, gsi) in &kernel_ports {
                match snapshot.ports.iter().find(|p| &p.port == port) {
                    None => notes.push(format!("the daemon does not know {port}")),
                    Some(v) => {
                        c.evidence.push(format!("{port}: {} ({})", v.phase, v.why));
                        if let Gsi::State { state, .. } = gsi {
                            if state == "ERR" && v.phase == Phase::Healthy {
                                disagree.push(format!(
                                    "{port}: the kernel's QP 1 is in ERR but the daemon says Healthy"
                                ));
                            }
                        }
                    }
                }
            }
            for v in &snapshot.ports {
                if !kernel_ports.iter().any(|(p, _)| p == &v.port)
                    && v.phase != Phase::AwaitingDevice
                {
                    disagree.push(format!(
                        "the daemon has {} ({}), which the kernel does not list",
                        v.port, v.phase
                    ));
                }
            }
            if d.dry_run {
                notes.push("the daemon runs in dry-run mode: it changes nothing".into());
            }
            if d.paused {
                notes.push("automatic actions are paused (`iser-guard resume`)".into());
            }
            if let Some(sm) = &d.safe_mode {
                notes.push(format!("safe mode: {}", sm.problem));
            }
            c.evidence.extend(notes.iter().cloned());
            c.evidence.extend(disagree.iter().cloned());
            if !disagree.is_empty() {
                c.verdict = CheckVerdict::Problem;
                c.finding = "the daemon's view disagrees with the kernel's".into();
                c.action = Some(
                    "run doctor again in a minute; if it persists, `systemctl restart iser-guard` \
                     and send this report"
                        .into(),
                );
            } else if !notes.is_empty() {
                c.verdict = CheckVerdict::Warning;
                c.finding = format!("the daemon runs, but {}", notes.join("; "));
            } else {
                c.finding = format!(
                    "the daemon runs and agrees with the kernel on {} port(s)",
                    kernel_ports.len()
                );
            }
            c
        }
    };
    out.push(c);
}
