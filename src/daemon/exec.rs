//! Runs one action the driver handed out ([`crate::core::driver::EffectKind::Run`]) on the
//! executors (blocking: call through `spawn_blocking`); the executor's answer becomes the
//! engine's [`Outcome`] in [`crate::answers`] (shared with the simulated host), with a line for
//! the log and the operator. Nothing here decides whether the action may run: the driver did,
//! once.

use crate::core::iscsi::NodeId;
use crate::core::recovery::{Action, ActionKind, IscsiNode, Outcome};
use crate::core::reset_plan::{ParentFacts, RecreateFrom};
use crate::io::executors::Executors;
use crate::io::lock::RecoveryLock;
use crate::io::probe::ProbeSource;
use crate::io::reset::OnBlocked;

/// The result of one executed action: the outcome for the engine and what happened, in
/// words.
#[derive(Debug, Clone)]
pub struct Executed {
    /// For `Engine::handle_outcome`.
    pub outcome: Outcome,
    /// One line for the log and the operator.
    pub summary: String,
    /// The re-creation method that ran (`aux-rebind`, …), when one did: for metrics.
    pub method: Option<&'static str>,
}

fn node_id(node: &IscsiNode) -> NodeId {
    NodeId {
        target: node.key.target.clone(),
        address: node.key.portal.ip().to_string(),
        port: node.key.portal.port(),
        iface: Some(node.key.iface.clone()),
    }
}

/// What a device known only by its parent PCI function (a journal from before devices'
/// recipes were remembered) can be re-created from: that function, as the resetter plans
/// for a present device. `None` for anything that is not a PCI address.
fn parent_recipe(parent: Option<&str>) -> Option<RecreateFrom> {
    let bdf = parent?;
    let is_bdf = bdf.len() == 12
        && bdf.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b':',
            10 => b == b'.',
            _ => b.is_ascii_hexdigit(),
        });
    is_bdf.then(|| RecreateFrom::Parent {
        parent: ParentFacts {
            bus: "pci".into(),
            name: bdf.to_string(),
            driver: None,
        },
        // Found again under the function by the resetter.
        aux: None,
        netdevs: Vec::new(),
    })
}

/// Executes an action that expects an outcome (probe, re-creation, iscsiadm, port
/// self-test). `lock_dir`:
/// where the recovery lock lives (`paths.state-dir`); a device re-creation holds it (`None`:
/// the caller holds it already).
/// Returns `None` for actions that have no outcome (the caller handles those itself).
/// `probe_from`: the local address of the sessions to that portal (their iface IP), so the
/// probe leaves through the iSER interface; `None` lets routing choose. `on_blocked`: told
/// when a re-creation step is blocked in the kernel (the call itself returns only once the
/// step has returned and the re-creation is finished: the executor thread waits with it).
pub fn execute(
    ex: &Executors,
    action: &Action,
    lock_dir: Option<&std::path::Path>,
    probe_from: Option<std::net::IpAddr>,
    on_blocked: OnBlocked<'_>,
) -> Option<Executed> {
    let done = |a: crate::answers::Answer| {
        Some(Executed {
            outcome: a.outcome,
            summary: format!("{action}: {}", a.summary),
            method: None,
        })
    };
    match &action.kind {
        ActionKind::ProbePortal { portal, timeout } => {
            let addr = portal.socket_addr();
            let source = ProbeSource {
                local_ip: probe_from.filter(|ip| ip.is_ipv4() == addr.is_ipv4()),
                device: None,
            };
            let (verdict, summary) = ex.probes.probe(addr, &source, *timeout);
            done(crate::answers::Answer {
                outcome: Outcome::Probe(verdict),
                summary,
            })
        }
        ActionKind::RecreateDevice {
            device,
            parent,
            remembered,
            ..
        } => {
            let purpose = format!("iser-guard: re-creating {device}");
            let _lock = match lock_dir.map(|d| RecoveryLock::try_acquire(d, &purpose)) {
                None => None,
                Some(Ok(l)) => Some(l),
                Some(Err(e)) => return done(crate::answers::lock_refused(&e.to_string())),
            };
            let remembered = remembered
                .clone()
                .or_else(|| parent_recipe(parent.as_deref()));
            let result = ex
                .resetter
                .recreate_watched(device, remembered.as_ref(), on_blocked);
            done(crate::answers::recreate(device, &result)).map(|e| Executed {
                method: crate::answers::reset_method(&result),
                ..e
            })
        }
        ActionKind::IscsiLogin { node, .. } => {
            let id = node_id(node);
            let mut result = ex.iscsi.login(&id);
            if let Err(e) = &result {
                if e.is_no_record() {
                    tracing::warn!(node = %node.key, "no node record: restoring it with -o new, then logging in");
                    result = match ex.iscsi.create_node(&id) {
                        Ok(_) => ex.iscsi.login(&id),
                        Err(e) => Err(e),
                    };
                }
            }
            done(crate::answers::login(&result))
        }
        ActionKind::IscsiLogout { node, .. } => {
            done(crate::answers::logout(&ex.iscsi.logout(&node_id(node))))
        }
        ActionKind::IscsiRescan { sid, .. } => done(crate::answers::rescan(&ex.iscsi.rescan(*sid))),
        ActionKind::NvmeReconnect {
            device,
            controllers,
            timeout,
        } => {
            // Blocks up to `timeout` per controller (nvme connect, sysfs, direct reads): on a
            // worker, never on the loop thread.
            let reports = ex.nvme.restore(controllers, *timeout);
            let summary = reports
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            done(crate::answers::Answer {
                outcome: Outcome::NvmeReconnect {
                    device: device.clone(),
                    reports,
                },
                summary,
            })
        }
        ActionKind::NfsCheck {
            device,
            mounts,
            window,
        } => {
            // Returns within about `window`; the stats themselves run on threads of their
            // own that are never waited for (a hard mount's stat can hang for good).
            let reports = ex.nfs.check(mounts, *window);
            let summary = reports
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            done(crate::answers::Answer {
                outcome: Outcome::NfsCheck {
                    device: device.clone(),
                    reports,
                },
                summary,
            })
        }
        ActionKind::MultipathReinstate {
            device,
            paths,
            carriers,
            timeout,
        } => {
            // Blocks up to `timeout` and the reinstate's own wait (multipathd calls, each
            // bounded): on a worker, never on the loop thread.
            let reports = ex.multipath.restore(paths, carriers, *timeout);
            let summary = reports
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            done(crate::answers::Answer {
                outcome: Outcome::MultipathReinstate {
                    device: device.clone(),
                    reports,
                },
                summary,
            })
        }
        ActionKind::SelfTestPort {
            device,
            port,
            timeout,
        } => {
            // Blocks up to `timeout` (verbs calls, a CM connect): this runs on a worker,
            // never on the loop thread.
            done(crate::answers::self_test(
                ex.selftest.run(device, *port, *timeout),
            ))
        }
        ActionKind::RefreshSessions
        | ActionKind::RefreshTopology
        | ActionKind::Alert(_)
        | ActionKind::PersistState { .. } => None,
    }
}

/// The syslog form of an engine alert, with the configured severities.
pub fn syslog_alert(
    a: &crate::core::recovery::Alert,
    cfg: &crate::config::Alerts,
) -> crate::io::syslog::AlertMessage {
    let severity = cfg.syslog_severity(a.severity);
    let what = if a.count > 1 {
        format!("{} ({} times)", a.summary, a.count)
    } else {
        a.summary.clone()
    };
    crate::io::syslog::AlertMessage {
        severity,
        what,
        why: a.detail.clone(),
        todo: a
            .remedy
            .as_ref()
            .map(|r| format!("run `{r}`"))
            .unwrap_or_default(),
    }
}
