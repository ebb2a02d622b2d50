//! Gauges rebuilt from a whole view rather than updated one event at a time: the RDMA
//! topology (ports, QPs, stuck ports) after each dump and the engine's ports and sessions
//! after each step. A view is swapped in whole and encoded whole on each scrape, so a
//! scrape never sees half of one dump and half of the next, and a device that went away
//! leaves no stale series behind.
//!
//! State gauges are state sets: one series per possible state, 1 for the current one and 0
//! for the others (`iser_guard_rdma_port_state{device,port,state}`), so a change of state is
//! a change of value, not a series appearing and another vanishing.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::core::nldev::{IbPortState, PhysState};
use crate::core::qp::QpState;
use crate::core::recovery::{Engine, Phase};
use crate::core::topology::Topology;

use super::Labels;

/// Port states, as `rdma link` names them.
const PORT_STATES: [&str; 7] = [
    "NOP",
    "DOWN",
    "INIT",
    "ARMED",
    "ACTIVE",
    "ACTIVE_DEFER",
    "UNKNOWN",
];

/// Physical port states, as `rdma link` names them.
const PHYS_STATES: [&str; 11] = [
    "NOP",
    "SLEEP",
    "POLLING",
    "DISABLED",
    "ARMED",
    "LINK_UP",
    "LINK_ERROR_RECOVER",
    "PHY_TEST",
    "OPA_OFFLINE",
    "OPA_TEST",
    "UNKNOWN",
];

/// Engine phases.
pub const PHASES: [Phase; 9] = [
    Phase::Healthy,
    Phase::Faulted,
    Phase::AwaitingTarget,
    Phase::AwaitingDevice,
    Phase::ResettingDevice,
    Phase::Reconnecting,
    Phase::Verifying,
    Phase::Quarantined,
    Phase::RecreationBlocked,
];

/// Session states (iscsiadm's words, as the engine keeps them) and `missing`.
const SESSION_STATES: [&str; 5] = ["LOGGED_IN", "FAILED", "FREE", "UNKNOWN", "missing"];

/// One port of the topology.
#[derive(Debug, Clone, PartialEq)]
struct CensusPort {
    device: String,
    port: u32,
    state: &'static str,
    phys: &'static str,
    /// The GSI QP (QP 1) of this port, if listed.
    gsi: Option<QpState>,
    stuck: bool,
}

/// The topology as the last dump showed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopologyCensus {
    devices: usize,
    ports: Vec<CensusPort>,
    /// (device, type, state) → QPs.
    qps: BTreeMap<(String, &'static str, &'static str), u64>,
    /// Devices whose last QP dump failed.
    qp_dump_failed: Vec<String>,
}

impl TopologyCensus {
    /// The census of a topology model.
    pub fn of(t: &Topology) -> TopologyCensus {
        let stuck: Vec<(String, u32)> = t
            .stuck_ports()
            .map(|s| (s.device.name.clone(), s.port))
            .collect();
        let mut c = TopologyCensus {
            devices: t.devices().len(),
            ..TopologyCensus::default()
        };
        for d in t.devices() {
            let name = d.info.name.clone();
            if d.qp_error.is_some() {
                c.qp_dump_failed.push(name.clone());
            }
            let qps = d.qps.as_deref().unwrap_or_default();
            for p in &d.ports {
                let gsi = qps
                    .iter()
                    .find(|q| q.lqpn == 1 && d.qp_port(q) == Some(p.port))
                    .map(|q| q.state);
                c.ports.push(CensusPort {
                    device: name.clone(),
                    port: p.port,
                    state: port_state_name(p.state),
                    phys: phys_state_name(p.phys_state),
                    gsi,
                    stuck: stuck.iter().any(|(n, k)| *n == name && *k == p.port),
                });
            }
            if d.qps.is_some() {
                // Counted per device first (static keys, no allocation per QP); every state
                // of every type the device has is kept, zeros included: a QP leaving ERR is
                // a value going to 0, not a series vanishing.
                let mut counts: BTreeMap<(&'static str, &'static str), u64> = BTreeMap::new();
                for q in qps {
                    *counts
                        .entry((q.qp_type.name(), q.state.name()))
                        .or_insert(0) += 1;
                }
                let types: std::collections::BTreeSet<&'static str> =
                    counts.keys().map(|(t, _)| *t).collect();
                for ty in types {
                    for st in QpState::ALL {
                        let n = counts.get(&(ty, st.name())).copied().unwrap_or(0);
                        c.qps.insert((name.clone(), ty, st.name()), n);
                    }
                }
            }
        }
        c
    }
}

fn port_state_name(s: IbPortState) -> &'static str {
    s.name()
}

fn phys_state_name(s: PhysState) -> &'static str {
    s.name()
}

/// One port as the engine holds it.
#[derive(Debug, Clone, PartialEq)]
struct EnginePort {
    device: String,
    port: u32,
    phase: Phase,
    fault: Option<&'static str>,
    attempts: u32,
    held: bool,
}

/// The engine's view after a step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineCensus {
    ports: Vec<EnginePort>,
    sessions: BTreeMap<String, u64>,
    paused: bool,
}

impl EngineCensus {
    /// The census of the engine's state.
    pub fn of(e: &Engine) -> EngineCensus {
        let ports = e
            .ports()
            .map(|p| EnginePort {
                device: p.id.device.clone(),
                port: p.id.port,
                phase: p.phase(),
                fault: p.fault().map(super::fault_name),
                attempts: p.attempts(),
                held: p.hold.is_some(),
            })
            .collect();
        let mut sessions: BTreeMap<String, u64> = SESSION_STATES
            .iter()
            .map(|s| ((*s).to_string(), 0))
            .collect();
        for s in e.sessions() {
            let state = if s.present { s.state.name() } else { "missing" };
            *sessions.entry(state.to_string()).or_insert(0) += 1;
        }
        EngineCensus {
            ports,
            sessions,
            paused: e.is_paused(),
        }
    }
}

/// The `kind` label of a failed netlink dump.
pub fn netlink_error_kind(e: &crate::io::netlink::NetlinkError) -> &'static str {
    use crate::io::netlink::NetlinkError as E;
    match e {
        E::Unavailable => "unavailable",
        E::Os { .. } => "os",
        E::Timeout { .. } => "timeout",
        E::Kernel { .. } => "kernel",
        E::DumpFailed { .. } => "dump_failed",
        E::Interrupted { .. } => "interrupted",
        E::Overrun => "overrun",
        E::Malformed { .. } => "malformed",
        E::Closed => "closed",
    }
}

/// A gauge family: its samples, encoded under one descriptor.
fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels, i64)>,
) -> Result<(), std::fmt::Error> {
    // Help texts end with a full stop, as prometheus-client writes those of registered
    // metrics.
    let help = format!("{help}.");
    let mut m = enc.encode_descriptor(name, &help, None, MetricType::Gauge)?;
    for (labels, v) in samples {
        let e = m.encode_family(&labels)?;
        ConstGauge::new(v).encode(e)?;
    }
    Ok(())
}

fn port_labels(device: &str, port: u32) -> Labels {
    vec![("device", device.to_string()), ("port", port.to_string())]
}

fn with(mut l: Labels, k: &'static str, v: impl Into<String>) -> Labels {
    l.push((k, v.into()));
    l
}

/// Encodes the last [`TopologyCensus`] (nothing before the first dump).
#[derive(Debug, Default)]
pub struct TopologyCollector {
    view: Mutex<Option<TopologyCensus>>,
}

impl TopologyCollector {
    /// Swaps in a new view.
    pub fn set(&self, v: TopologyCensus) {
        *self.view.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
    }
}

impl Collector for TopologyCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(c) = self.view.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return Ok(());
        };
        gauges(
            &mut enc,
            "rdma_devices",
            "RDMA devices listed by the last RDMA netlink dump",
            [(Labels::new(), i64::try_from(c.devices).unwrap_or(i64::MAX))],
        )?;
        gauges(
            &mut enc,
            "rdma_port_state",
            "Logical state of each RDMA port (1 for the current state, as rdma link names it)",
            c.ports.iter().flat_map(|p| {
                PORT_STATES.iter().map(move |s| {
                    (
                        with(port_labels(&p.device, p.port), "state", *s),
                        i64::from(p.state == *s),
                    )
                })
            }),
        )?;
        gauges(
            &mut enc,
            "rdma_port_phys_state",
            "Physical state of each RDMA port (1 for the current state, as rdma link names it)",
            c.ports.iter().flat_map(|p| {
                PHYS_STATES.iter().map(move |s| {
                    (
                        with(port_labels(&p.device, p.port), "state", *s),
                        i64::from(p.phys == *s),
                    )
                })
            }),
        )?;
        gauges(
            &mut enc,
            "gsi_qp_state",
            "State of the GSI QP (QP 1) of each RDMA port (1 for the current state); no series when the dump did not list it",
            c.ports.iter().filter_map(|p| p.gsi.map(|g| (p, g))).flat_map(|(p, g)| {
                QpState::ALL.iter().map(move |s| {
                    (
                        with(port_labels(&p.device, p.port), "state", s.name()),
                        i64::from(g == *s),
                    )
                })
            }),
        )?;
        gauges(
            &mut enc,
            "rdma_port_stuck",
            "1 while the port's GSI QP 1 is listed in ERR: no new RDMA connection can be made on it",
            c.ports
                .iter()
                .map(|p| (port_labels(&p.device, p.port), i64::from(p.stuck))),
        )?;
        gauges(
            &mut enc,
            "qps",
            "QPs listed by the last RDMA netlink dump, by device, type and state",
            c.qps.iter().map(|((d, t, s), n)| {
                (
                    vec![
                        ("device", d.clone()),
                        ("type", (*t).to_string()),
                        ("state", (*s).to_string()),
                    ],
                    i64::try_from(*n).unwrap_or(i64::MAX),
                )
            }),
        )?;
        gauges(
            &mut enc,
            "qp_dump_failed",
            "1 for each device whose QP table could not be read in the last dump",
            c.qp_dump_failed
                .iter()
                .map(|d| (vec![("device", d.clone())], 1)),
        )?;
        Ok(())
    }
}

/// Encodes the last [`EngineCensus`].
#[derive(Debug, Default)]
pub struct EngineCollector {
    view: Mutex<EngineCensus>,
}

impl EngineCollector {
    /// Swaps in a new view.
    pub fn set(&self, v: EngineCensus) {
        *self.view.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }
}

impl Collector for EngineCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let c = self.view.lock().unwrap_or_else(|p| p.into_inner()).clone();
        gauges(
            &mut enc,
            "port_phase",
            "Recovery phase of each RDMA port the engine follows (1 for the current phase)",
            c.ports.iter().flat_map(|p| {
                PHASES.iter().map(move |ph| {
                    (
                        with(port_labels(&p.device, p.port), "phase", ph.to_string()),
                        i64::from(p.phase == *ph),
                    )
                })
            }),
        )?;
        gauges(
            &mut enc,
            "port_fault",
            "1 for the fault of each port out of Healthy (gsi_stuck, device_gone, sessions_down, zombie, operator)",
            c.ports.iter().filter_map(|p| {
                p.fault
                    .map(|f| (with(port_labels(&p.device, p.port), "fault", f), 1))
            }),
        )?;
        gauges(
            &mut enc,
            "port_recovery_attempts",
            "Repair attempts (re-creations and reconnect rounds) in the port's current fault episode",
            c.ports
                .iter()
                .map(|p| (port_labels(&p.device, p.port), i64::from(p.attempts))),
        )?;
        gauges(
            &mut enc,
            "port_held",
            "1 while the engine wants to act on the port and may not (dry-run, pause, not in devices.allow, ...)",
            c.ports
                .iter()
                .map(|p| (port_labels(&p.device, p.port), i64::from(p.held))),
        )?;
        gauges(
            &mut enc,
            "sessions",
            "iSCSI sessions the engine remembers, by state (missing: not in the last iscsiadm listing)",
            c.sessions.iter().map(|(s, n)| {
                (
                    vec![("state", s.clone())],
                    i64::try_from(*n).unwrap_or(i64::MAX),
                )
            }),
        )?;
        gauges(
            &mut enc,
            "paused",
            "1 while automatic actions are paused (iser-guard pause)",
            [(Labels::new(), i64::from(c.paused))],
        )?;
        Ok(())
    }
}

/// `iser_guard_build_info` and `iser_guard_start_time_seconds`.
#[derive(Debug)]
pub struct BuildInfo {
    started: f64,
}

impl BuildInfo {
    /// Started now.
    pub fn now() -> BuildInfo {
        BuildInfo {
            started: super::unix_now(),
        }
    }
}

impl Collector for BuildInfo {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        gauges(
            &mut enc,
            "build_info",
            "Always 1; the labels name the running build",
            [(vec![("version", env!("CARGO_PKG_VERSION").to_string())], 1)],
        )?;
        let mut m = enc.encode_descriptor(
            "start_time_seconds",
            "Unix time the daemon started.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(self.started).encode(m.encode_family(&Labels::new())?)?;
        Ok(())
    }
}
