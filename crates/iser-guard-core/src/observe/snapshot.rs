//! [`DaemonSnapshot`]: the daemon's whole observable state in one typed document, what
//! `iser-guard status` shows next to the kernel's view and `status --json` prints.
//!
//! Versioned ([`SNAPSHOT_FORMAT`]): a client reads the `format` field first and refuses a
//! newer one it does not know. Fields are only ever added (with serde defaults on reading),
//! so an older client still reads a newer daemon's document of the same format.

use serde::{Deserialize, Serialize};

use super::{read, Clocks, Stamp};
use crate::driver::Driver;
use crate::recovery::{
    EngineSnapshot, Hold, InFlightKind, Phase, PortRecord, RecreationState, SelfTestVerdict,
    SessionOp, SessionRecord, TimerKind,
};

/// The format this build writes. Bump it only for a change an older client would misread.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// The whole document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonSnapshot {
    /// [`SNAPSHOT_FORMAT`].
    pub format: u32,
    /// Daemon-wide facts.
    pub daemon: DaemonFacts,
    /// Every port the engine knows, in name order.
    pub ports: Vec<PortView>,
    /// Every RDMA device the engine knows.
    #[serde(default)]
    pub devices: Vec<DeviceView>,
    /// Kept for the control socket's first clients (`iser-guard` before the typed
    /// document): the same as `daemon.paused`.
    pub paused: bool,
    /// Kept for the first clients: the same as `daemon.safe_mode`.
    #[serde(default)]
    pub safe_mode: Option<SafeModeView>,
    /// The RDMA consumers of every port (CM id table and QP owners), as last reported;
    /// `None` while not known (no RDMA netlink, or before the first dump).
    #[serde(default)]
    pub consumers: Option<Vec<crate::consumers::PortConsumers>>,
    /// The dm-multipath paths, grouped by the RDMA port that carries them (paths not over
    /// RDMA last), as multipathd last showed them; absent while never read (no multipathd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multipath: Option<Vec<MultipathPortView>>,
}

/// The dm-multipath paths one RDMA port carries (or, with no port, the rest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultipathPortView {
    /// `device/port`, or `None` for paths no RDMA port carries.
    pub port: Option<String>,
    /// Its paths.
    pub paths: Vec<crate::multipath::MultipathPath>,
}

fn multipath_view(engine: &crate::recovery::Engine) -> Option<Vec<MultipathPortView>> {
    let paths = engine.multipath_paths()?;
    let carriers = engine.block_carriers();
    let mut by: std::collections::BTreeMap<Option<String>, Vec<crate::multipath::MultipathPath>> =
        std::collections::BTreeMap::new();
    for p in crate::multipath::place(paths, &carriers) {
        let port = p.on.map(|c| format!("{}/{}", c.device, c.port));
        by.entry(port).or_default().push(p.path.clone());
    }
    let mut out: Vec<MultipathPortView> = by
        .into_iter()
        .map(|(port, paths)| MultipathPortView { port, paths })
        .collect();
    // `None` sorts first in a map: the paths not over RDMA go last.
    out.sort_by_key(|v| v.port.is_none());
    Some(out)
}

/// What the daemon knows about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonFacts {
    /// The daemon's release (`CARGO_PKG_VERSION`).
    pub version: String,
    /// Its process id.
    pub pid: u32,
    /// When it started.
    pub started: Stamp,
    /// When this document was built.
    pub now: Stamp,
    /// Milliseconds since it started.
    pub uptime_ms: u64,
    /// The one-line status it also gives systemd.
    pub status: String,
    /// `iser-guard pause` is in effect.
    pub paused: bool,
    /// `recovery.dry-run` (or `--dry-run`): decisions are planned, never run.
    pub dry_run: bool,
    /// The first complete scan of devices and sessions is done (nothing destructive runs
    /// before it).
    pub scan_complete: bool,
    /// Safe mode (started without a usable journal), if so.
    #[serde(default)]
    pub safe_mode: Option<SafeModeView>,
    /// The device being re-created, if any (one at a time).
    #[serde(default)]
    pub recreating: Option<String>,
    /// The daemon's sources and their last successful poll.
    #[serde(default)]
    pub sources: Vec<SourceView>,
    /// Events in the daemon's ring, and how many it dropped to stay bounded.
    #[serde(default)]
    pub events_kept: usize,
    /// Events dropped from the ring since the daemon started (the oldest go first).
    #[serde(default)]
    pub events_dropped: u64,
    /// Kernel bug reports automatic re-creation is held on (lifted by `iser-guard resume`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_bugs: Vec<String>,
    /// Driver-stack conditions recognised on this host (an out-of-tree RDMA driver, a
    /// bonded E810 function without RDMA, ice's safe mode), each with its summary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_stack: Vec<DriverStackView>,
}

/// One driver-stack condition as status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverStackView {
    /// The condition, typed (`kind`: `out-of-tree`, `bonded-without-rdma`, `safe-mode`).
    #[serde(flatten)]
    pub condition: crate::driver_stack::StackCondition,
    /// In one line.
    pub summary: String,
    /// What the operator can do.
    pub remedy: String,
}

/// Safe mode (field names as the first status document had them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafeModeView {
    /// What was wrong with the journal.
    pub problem: String,
    /// Where the unusable journal was kept.
    pub journal_kept: Option<String>,
    /// Why it could not be kept aside.
    pub keep_failed: Option<String>,
    /// Automatic destructive actions wait for the first complete scan.
    pub held_until_first_scan: bool,
}

/// Whether a source answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceState {
    /// Its last poll worked.
    Ok,
    /// Its last poll failed (or it is not available on this host).
    Failing,
    /// Not polled successfully yet.
    Never,
    /// Not used by this daemon (standalone commands read no kernel log).
    Off,
}

/// One source of facts (kernel log, RDMA netlink, sysfs, iscsiadm).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceView {
    /// `kernel-log`, `rdma-netlink`, `iscsiadm`.
    pub name: String,
    /// Whether it answers.
    pub state: SourceState,
    /// Its last successful poll (the last record read, for the kernel log).
    pub last_ok: Option<Stamp>,
    /// Its last error, in words.
    pub last_error: Option<String>,
}

/// What keeps a port from acting on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldView {
    /// `paused`, `dry-run`, `safe-mode`, `not-allowed`, `other-sessions`,
    /// `waiting-for-slot`, `no-portal-known`, `kernel-bug`.
    pub kind: String,
    /// In operator words, with what lifts it.
    pub why: String,
    /// The engine holds this port on it now (a decision was stopped), as opposed to a
    /// daemon-wide condition that would stop the next automatic action.
    pub active: bool,
}

/// The port's next step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextStep {
    /// What happens then.
    pub what: String,
    /// When.
    pub at: Stamp,
}

/// One remembered session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    /// Target IQN.
    pub target: String,
    /// Portal (`ip:port`).
    pub portal: String,
    /// iscsiadm iface.
    pub iface: String,
    /// Last known session id.
    pub sid: Option<u32>,
    /// `LOGGED_IN`, `FAILED`, `FREE`, `UNKNOWN`.
    pub state: String,
    /// Listed by iscsiadm in the last snapshot.
    pub present: bool,
    /// Present, LOGGED_IN and every disk running.
    pub healthy: bool,
    /// Its disks with their state (`sdb running`).
    pub disks: Vec<String>,
    /// What placed it on this port, in operator words (session_map's evidence: the CM id,
    /// the route, the iface fields, the only port).
    pub placed_by: Option<String>,
    /// Where its reconnect is, in this episode.
    pub reconnect: Option<String>,
}

/// A portal the port's sessions use, and what its probes said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortalView {
    /// `ip:port`.
    pub portal: String,
    /// Successful probes in a row.
    pub consecutive_ok: u32,
    /// A probe is in flight.
    pub probing: bool,
    /// How it is probed (TCP or ARP/ND) and why; absent from a daemon that did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<PortalProbeView>,
}

/// How a portal is probed now, as the daemon's prober chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortalProbeView {
    /// `tcp`, `neighbour` or `none`.
    pub method: String,
    /// Why this one: configured, or chosen automatically and on what evidence.
    pub why: String,
}

/// One RDMA port, as the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortView {
    /// `device/port`.
    pub port: String,
    /// RDMA device.
    pub device: String,
    /// Where it is in its recovery.
    pub phase: Phase,
    /// Why: the reason of its last transition.
    pub why: String,
    /// Since when it is in this phase.
    pub since: Stamp,
    /// What is wrong, if anything.
    pub fault: Option<String>,
    /// Since when (the start of this episode).
    pub fault_since: Option<Stamp>,
    /// `automatic` or `operator` (who drives the episode).
    pub driven_by: String,
    /// The next step and when.
    pub next: Option<NextStep>,
    /// When the phase gives up, and what happens then.
    pub deadline: Option<NextStep>,
    /// Repair attempts used in this episode.
    pub attempts: u32,
    /// Attempts allowed before quarantine (`recovery.max-attempts`).
    pub max_attempts: u32,
    /// What keeps it from acting on its own.
    pub holds: Vec<HoldView>,
    /// Facts about the episode, in words.
    pub notes: Vec<String>,
    /// Actions in flight for it, in words.
    pub in_flight: Vec<String>,
    /// Its remembered sessions.
    pub sessions: Vec<SessionView>,
    /// The portals of its sessions.
    pub portals: Vec<PortalView>,
    /// Its last port self-test, if one ran (or was asked for and unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_selftest: Option<SelfTestView>,
}

/// A port's last self-test, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfTestView {
    /// When its result came in.
    pub at: Stamp,
    /// `passed`, `failed` or `unavailable`.
    pub result: String,
    /// Every step passed.
    pub passed: bool,
    /// The report's summary (the failed step and its error), or why it could not run.
    pub summary: String,
    /// Steps that ran.
    pub steps: u32,
    /// How long the steps took (milliseconds).
    pub took_ms: u64,
}

/// One RDMA device, as the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceView {
    /// Name.
    pub name: String,
    /// Present on the host as last seen.
    pub present: bool,
    /// Parent PCI function, if known.
    pub parent: Option<String>,
    /// Driver, if known.
    pub driver: Option<String>,
    /// `devices.allow` lists it (automatic re-creation allowed).
    pub allowed: bool,
    /// The last re-creation, in words.
    pub last_recreation: Option<String>,
    /// Completed re-creations since the journal began.
    pub completed_recreations: u64,
}

/// What the daemon supplies besides its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonContext {
    /// Release.
    pub version: String,
    /// Process id.
    pub pid: u32,
    /// When the daemon started (engine clock).
    pub started: crate::time::Instant,
    /// Both clocks now.
    pub clocks: Clocks,
    /// The one-line status.
    pub status: String,
    /// Safe mode: what was wrong, and where the journal was kept (or why not).
    pub safe_mode: Option<(String, Result<String, String>)>,
    /// Sources.
    pub sources: Vec<SourceView>,
    /// Events kept in the ring.
    pub events_kept: usize,
    /// Events dropped from the ring.
    pub events_dropped: u64,
    /// How each portal is probed (`ip:port` → method), as the daemon's prober says.
    pub portal_probes: std::collections::BTreeMap<String, PortalProbeView>,
}

impl DaemonSnapshot {
    /// Builds the document from the driver and the daemon's facts. No I/O.
    pub fn build(driver: &Driver, ctx: DaemonContext) -> DaemonSnapshot {
        let engine = driver.engine();
        let policy = engine.policy();
        let snap = engine.snapshot();
        let clocks = ctx.clocks;
        let held = driver.held_until_scan().is_some();
        let safe_mode = ctx.safe_mode.map(|(problem, kept)| SafeModeView {
            problem,
            journal_kept: kept.as_ref().ok().cloned(),
            keep_failed: kept.err(),
            held_until_first_scan: held,
        });
        let wide = WideHolds {
            paused: engine.is_paused(),
            dry_run: policy.dry_run,
            safe_mode: driver.held_until_scan().map(str::to_string),
        };
        let ports = engine
            .ports()
            .map(|p| port_view(p, &snap, &wide, driver, clocks, &ctx.portal_probes))
            .collect();
        let devices = snap
            .devices
            .iter()
            .map(|d| DeviceView {
                name: d.name.clone(),
                present: d.present,
                parent: d.parent.clone(),
                driver: d.driver.clone(),
                allowed: policy.allows(&d.name),
                last_recreation: d.recreation.as_ref().map(|r| {
                    let state = match r.state {
                        // Its step has not returned: the kernel holds it.
                        RecreationState::InFlight if d.blocked.is_some() => "blocked in the kernel",
                        RecreationState::InFlight => "in flight",
                        RecreationState::Completed => "completed",
                        RecreationState::Failed => "failed",
                    };
                    let mut s = format!(
                        "attempt {} {state}, started at {} ({})",
                        r.attempt, r.started, r.origin
                    );
                    if !r.consumers.is_empty() {
                        s.push_str(&format!(
                            "; other RDMA consumers it took down: {}",
                            crate::consumers::list(&r.consumers)
                        ));
                    }
                    if !r.nvme.is_empty() {
                        s.push_str(&format!(
                            "; NVMe over RDMA controllers remembered: {}",
                            crate::nvme_fabrics::list_controllers(&r.nvme)
                        ));
                    }
                    for b in &r.nvme_back {
                        s.push_str(&format!("; nvme connect {b}"));
                    }
                    if !r.nfs.is_empty() {
                        s.push_str(&format!(
                            "; NFS over RDMA mounts remembered: {}",
                            crate::nfs_rdma::list_mounts(&r.nfs)
                        ));
                    }
                    for c in &r.nfs_checks {
                        s.push_str(&format!("; NFS check {c}"));
                    }
                    if !r.multipath.is_empty() {
                        s.push_str(&format!(
                            "; dm-multipath paths remembered: {}",
                            crate::multipath::list_paths(&r.multipath)
                        ));
                    }
                    for b in &r.multipath_back {
                        s.push_str(&format!("; multipath {b}"));
                    }
                    s
                }),
                completed_recreations: d.completed_recreations,
            })
            .collect();
        DaemonSnapshot {
            format: SNAPSHOT_FORMAT,
            paused: wide.paused,
            safe_mode: safe_mode.clone(),
            daemon: DaemonFacts {
                version: ctx.version,
                pid: ctx.pid,
                started: clocks.stamp(ctx.started),
                now: clocks.now(),
                uptime_ms: u64::try_from(clocks.mono.since(ctx.started).as_millis())
                    .unwrap_or(u64::MAX),
                status: ctx.status,
                paused: wide.paused,
                dry_run: wide.dry_run,
                scan_complete: engine.scan_complete(),
                safe_mode,
                recreating: engine.recreating().map(str::to_string),
                sources: ctx.sources,
                events_kept: ctx.events_kept,
                events_dropped: ctx.events_dropped,
                kernel_bugs: engine
                    .kernel_bugs()
                    .iter()
                    .map(|k| k.report.clone())
                    .collect(),
                driver_stack: engine
                    .driver_stack()
                    .into_iter()
                    .map(|c| DriverStackView {
                        summary: c.summary(),
                        remedy: c.remedy(),
                        condition: c,
                    })
                    .collect(),
            },
            ports,
            devices,
            consumers: engine.consumers().map(<[_]>::to_vec),
            multipath: multipath_view(engine),
        }
    }

    /// The port views of ports that are not healthy.
    pub fn unhealthy(&self) -> impl Iterator<Item = &PortView> {
        self.ports.iter().filter(|p| p.phase != Phase::Healthy)
    }
}

/// Conditions of the whole daemon that stop automatic actions.
struct WideHolds {
    paused: bool,
    dry_run: bool,
    safe_mode: Option<String>,
}

/// The kind word and the operator words of an engine hold.
pub(crate) fn describe_hold(h: &Hold, device: &str) -> (&'static str, String) {
    match h {
        Hold::Paused => (
            "paused",
            "automatic actions are paused (`iser-guard resume` lifts it)".to_string(),
        ),
        Hold::DryRun => (
            "dry-run",
            "recovery.dry-run (or --dry-run): decisions are planned, never run".to_string(),
        ),
        Hold::NotAllowed => (
            "not-allowed",
            format!(
                "devices.allow does not list {device}: automatic re-creation is not allowed \
                 (`iser-guard recover {device}` runs it on the operator's word)"
            ),
        ),
        Hold::OtherSessionsHealthy {
            sessions,
            consumers,
        } => {
            let mut what = Vec::new();
            if !sessions.is_empty() {
                what.push(format!(
                    "{} healthy session(s) ({})",
                    sessions.len(),
                    sessions
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if !consumers.is_empty() {
                what.push(format!(
                    "live RDMA consumers ({})",
                    crate::consumers::list(consumers)
                ));
            }
            (
                "other-sessions",
                format!(
                    "re-creating {device} would drop {}; waiting for the operator \
                     (`iser-guard recover {device}`)",
                    what.join(" and ")
                ),
            )
        }
        Hold::LastMultipathPath { paths } => (
            "multipath",
            format!(
                "re-creating {device} would take the last usable path of dm-multipath map(s) \
                 {}: {}; waiting for another path or the operator (`iser-guard recover \
                 {device}`)",
                crate::multipath::maps_of(paths).join(", "),
                crate::multipath::list_paths(paths)
            ),
        ),
        Hold::WaitingForSlot { busy } => (
            "waiting-for-slot",
            format!("{busy} is being re-created: one device at a time"),
        ),
        Hold::KernelBug { report, .. } => (
            "kernel-bug",
            format!(
                "the kernel reported {report}: a kernel bug, not repairable by the agent, so \
                 {device} is not re-created on the daemon's own decision (`iser-guard resume` \
                 lifts it, `iser-guard recover {device}` acts on the operator's word)"
            ),
        ),
        Hold::NoPortalKnown => (
            "no-portal-known",
            "no session of this port names a target portal to probe, so the daemon cannot \
             know when the target is back and does not re-create the device on its own"
                .to_string(),
        ),
    }
}

fn timer_words(t: TimerKind) -> &'static str {
    match t {
        TimerKind::ProbeRound => "probe the target portals",
        TimerKind::Backoff => "the back-off ends: next attempt",
        TimerKind::Grace => "iscsid's grace ends: log the sessions out and in",
        TimerKind::SessionRefresh => "refresh the iSCSI session list",
    }
}

fn deadline_words(phase: Phase) -> &'static str {
    match phase {
        Phase::AwaitingTarget => "stop waiting for the target",
        Phase::AwaitingDevice => "stop waiting for the device: re-create it from its parent",
        Phase::ResettingDevice => "the re-creation times out",
        Phase::Verifying => "the verification times out",
        Phase::Reconnecting => "the reconnect times out",
        Phase::RecreationBlocked => "report again how long the re-creation has been blocked",
        Phase::Healthy | Phase::Faulted | Phase::Quarantined => "the phase times out",
    }
}

fn session_view(s: &SessionRecord) -> SessionView {
    SessionView {
        target: s.key.target.clone(),
        portal: s.key.portal.to_string(),
        iface: s.key.iface.clone(),
        sid: s.sid,
        state: s.state.name().to_string(),
        present: s.present,
        healthy: s.is_healthy(),
        disks: s
            .disks
            .iter()
            .map(|d| format!("{} {}", d.name, d.state))
            .collect(),
        placed_by: s.placed_by.clone(),
        reconnect: s.op.as_ref().map(|o| match o {
            SessionOp::LoggingOut(_) => "logging out".to_string(),
            SessionOp::LoggedOut => "logged out, login next".to_string(),
            SessionOp::LoggingIn(_) => "logging in".to_string(),
            SessionOp::Done => "done".to_string(),
            SessionOp::Failed(why) => format!("failed: {why}"),
        }),
    }
}

fn port_view(
    p: &PortRecord,
    snap: &EngineSnapshot,
    wide: &WideHolds,
    driver: &Driver,
    clocks: Clocks,
    probes: &std::collections::BTreeMap<String, PortalProbeView>,
) -> PortView {
    let id = read::id(p);
    let policy = driver.engine().policy();
    let keys = read::sessions(p);
    let sessions: Vec<SessionView> = keys
        .iter()
        .filter_map(|k| snap.sessions.iter().find(|s| &s.key == k))
        .map(session_view)
        .collect();
    let mut holds = Vec::new();
    if let Some(h) = read::hold(p) {
        let (kind, why) = describe_hold(h, &id.device);
        holds.push(HoldView {
            kind: kind.to_string(),
            why,
            active: true,
        });
    }
    let mut wide_hold = |kind: &str, why: String| {
        if !holds.iter().any(|h| h.kind == kind) {
            holds.push(HoldView {
                kind: kind.to_string(),
                why,
                active: false,
            });
        }
    };
    if wide.paused {
        wide_hold("paused", describe_hold(&Hold::Paused, &id.device).1);
    }
    if wide.dry_run {
        wide_hold("dry-run", describe_hold(&Hold::DryRun, &id.device).1);
    }
    if let Some(why) = &wide.safe_mode {
        wide_hold(
            "safe-mode",
            format!(
                "safe mode ({why}): no automatic destructive action before the first complete \
                 scan of devices and sessions"
            ),
        );
    }
    if let Some(k) = driver.engine().kernel_bug_holding(&id.device) {
        let hold = Hold::KernelBug {
            module: k.module.clone(),
            report: k.report.clone(),
        };
        wide_hold("kernel-bug", describe_hold(&hold, &id.device).1);
    }
    if !policy.allows(&id.device) {
        wide_hold(
            "not-allowed",
            describe_hold(&Hold::NotAllowed, &id.device).1,
        );
    }
    let portals: Vec<PortalView> = snap
        .portals
        .iter()
        .filter(|r| keys.iter().any(|k| k.portal == r.portal))
        .map(|r| PortalView {
            portal: r.portal.to_string(),
            consecutive_ok: r.consecutive_ok,
            probing: r.inflight.is_some(),
            probe: probes.get(&r.portal.to_string()).cloned(),
        })
        .collect();
    let in_flight = snap
        .inflight
        .iter()
        .filter_map(|i| match &i.kind {
            InFlightKind::Probe(portal) if keys.iter().any(|k| &k.portal == portal) => {
                Some(format!("probe of {portal}"))
            }
            InFlightKind::Recreate(dev) if *dev == id.device => {
                Some(format!("re-creation of {dev}"))
            }
            InFlightKind::Logout(k) if keys.contains(k) => Some(format!("logout of {k}")),
            InFlightKind::Login(k) if keys.contains(k) => Some(format!("login of {k}")),
            InFlightKind::Rescan(k) if keys.contains(k) => Some(format!("rescan of {k}")),
            InFlightKind::SelfTest(port) if port == id => Some(format!("self-test of {port}")),
            _ => None,
        })
        .collect();
    let phase = read::phase(p);
    PortView {
        port: id.to_string(),
        device: id.device.clone(),
        phase,
        why: read::reason(p).to_string(),
        since: clocks.stamp(read::since(p)),
        fault: read::fault(p).map(|f| f.describe()),
        fault_since: read::fault_since(p).map(|t| clocks.stamp(t)),
        driven_by: match read::origin(p) {
            crate::recovery::Origin::Automatic => "automatic".to_string(),
            crate::recovery::Origin::Operator => "operator".to_string(),
        },
        next: read::wake(p).map(|(kind, at)| NextStep {
            what: timer_words(kind).to_string(),
            at: clocks.stamp(at),
        }),
        deadline: read::deadline(p).map(|at| NextStep {
            what: deadline_words(phase).to_string(),
            at: clocks.stamp(at),
        }),
        attempts: read::attempts(p),
        max_attempts: policy.max_attempts,
        holds,
        notes: read::notes(p, clocks.mono),
        in_flight,
        sessions,
        portals,
        last_selftest: read::last_selftest(p).map(|r| SelfTestView {
            at: clocks.stamp(r.at),
            result: r.verdict.name().to_string(),
            passed: r.verdict == SelfTestVerdict::Passed,
            summary: r.summary.clone(),
            steps: r.steps,
            took_ms: r.took_ms,
        }),
    }
}
