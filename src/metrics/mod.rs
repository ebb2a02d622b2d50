//! Prometheus metrics: the registry and what updates it, from what the daemon already sees.
//!
//! - this module: [`Metrics`], the one registry (prometheus-client) and its update methods,
//!   called by the daemon loop (kernel-log records, driver effects and executor outcomes,
//!   engine transitions and state, iscsiadm listings) and by the topology source (each
//!   RDMA netlink dump, each sysfs scan);
//! - [`census`]: the gauges rebuilt from a whole view (RDMA ports and QPs from the topology
//!   model, engine phases and sessions), encoded as a consistent set on each scrape;
//! - [`export`]: the node_exporter textfile (atomic replace every `metrics.interval`) and the
//!   optional loopback-only HTTP endpoint ([`http`]).
//!
//! Metric names, labels and units are documented in docs/guide/monitoring.md; the alert rules and the
//! dashboard in packaging/monitoring/ use them and their tests check that they exist.
//!
//! A disabled [`Metrics`] ([`Metrics::disabled`]) makes every update a no-op, so the loop
//! calls it unconditionally at no cost when `metrics.enabled = false`.

pub mod census;
pub mod export;
pub mod http;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::core::driver::{Effect, EffectId, EffectKind, Refusal};
use crate::core::recovery::{
    ActionKind, Engine, IscsiadmOutcome, Outcome, Phase, PortId, RecreateResult, Transition,
};
use crate::core::selftest::SelfTestResult;
use crate::core::topology::Topology;

pub use export::{Exporter, MetricsError};

/// The name every metric starts with (`iser_guard_…`).
pub const PREFIX: &str = "iser_guard";

/// Upper bounds (seconds) of the fault-to-recovery histogram: from an iscsid that logs back
/// in within seconds to a target away for hours.
pub const RECOVERY_BUCKETS: [f64; 12] = [
    5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
];

/// Labels: fixed keys, values from the kernel or the engine.
type Labels = Vec<(&'static str, String)>;

/// A source of facts whose last success is exported (for "not polling" alerts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// /dev/kmsg (a stream: its timestamp is the last record read, not a liveness signal).
    Kmsg,
    /// RDMA netlink dumps.
    Netlink,
    /// sysfs scans (the topology source without RDMA netlink).
    Sysfs,
    /// `iscsiadm -m session -P 3` listings.
    Iscsiadm,
}

impl Source {
    /// The `source` label value.
    pub fn name(self) -> &'static str {
        match self {
            Source::Kmsg => "kmsg",
            Source::Netlink => "netlink",
            Source::Sysfs => "sysfs",
            Source::Iscsiadm => "iscsiadm",
        }
    }
}

/// A recovery the driver started, remembered until its outcome comes back.
#[derive(Debug, Clone, Copy)]
enum StartedRecovery {
    Recreate,
    Reconnect,
}

/// A port's fault episode, for the fault-to-recovery histogram.
#[derive(Debug, Clone)]
struct OpenEpisode {
    /// Engine time (ms) the port left Healthy.
    start_ms: u64,
    /// The fault, once the engine named it.
    fault: Option<&'static str>,
}

/// The metric families (all registered in [`Inner::registry`]).
#[derive(Debug)]
struct Families {
    kmsg_read: Counter,
    kmsg_recognised: Family<Labels, Counter>,
    kmsg_untrusted: Counter,
    kmsg_lost: Counter,
    kmsg_loss_events: Counter,
    netlink_dumps: Family<Labels, Counter>,
    netlink_errors: Family<Labels, Counter>,
    netlink_requests: Counter,
    netlink_dump_retries: Counter,
    netlink_stale_replies: Counter,
    sysfs_scans: Counter,
    iscsiadm_listings: Family<Labels, Counter>,
    last_success: Family<Labels, Gauge<f64, AtomicU64>>,
    source_up: Family<Labels, Gauge>,
    actions_started: Family<Labels, Counter>,
    actions_planned: Family<Labels, Counter>,
    recoveries_started: Family<Labels, Counter>,
    recoveries_succeeded: Family<Labels, Counter>,
    recoveries_failed: Family<Labels, Counter>,
    transitions: Family<Labels, Counter>,
    fault_to_recovery: Family<Labels, Histogram, fn() -> Histogram>,
    alerts: Family<Labels, Counter>,
    kernel_events: Family<Labels, Counter>,
    selftests: Family<Labels, Counter>,
    selftest_last_duration: Family<Labels, Gauge<f64, AtomicU64>>,
    selftest_last_success: Family<Labels, Gauge>,
    selftest_last_timestamp: Family<Labels, Gauge<f64, AtomicU64>>,
    rdma_consumers: Family<Labels, Gauge>,
    nvme_reconnects: Family<Labels, Counter>,
    nfs_checks: Family<Labels, Counter>,
    nfs_checks_abandoned: Counter,
    multipath_reinstates: Family<Labels, Counter>,
    multipath_usable_paths: Family<Labels, Gauge>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    f: Families,
    topology: Arc<census::TopologyCollector>,
    engine: Arc<census::EngineCollector>,
    /// Recoveries in flight, by effect id (their outcome names no action).
    started: Mutex<BTreeMap<EffectId, StartedRecovery>>,
    /// Port self-tests in flight, by effect id, with their port.
    selftests: Mutex<BTreeMap<EffectId, PortId>>,
    /// Ports out of Healthy, with when they left it.
    episodes: Mutex<BTreeMap<PortId, OpenEpisode>>,
    /// The netlink client's counters as last seen (exported as the increase since).
    client_stats: Mutex<crate::io::netlink::ClientStats>,
}

/// The daemon's metrics. Cheap to clone (one shared registry); thread-safe (the topology
/// source updates it from its task, the loop from its own).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    inner: Option<Arc<Inner>>,
}

fn recovery_histogram() -> Histogram {
    Histogram::new(RECOVERY_BUCKETS)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Seconds since the Unix epoch (Prometheus timestamps are wall-clock).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The stable kind of an engine alert: its de-duplication key up to the first `:`
/// (`fault`, `recreate`, `quarantine`, `healthy`, …). The same word is the `kind` label of
/// `iser_guard_alerts_total` and the `alert_kind` field of the daemon's ALERT log line.
pub fn alert_kind(key: &str) -> &str {
    key.split(':').next().unwrap_or(key)
}

/// The `fault` label of a port's fault.
pub fn fault_name(f: &crate::core::recovery::Fault) -> &'static str {
    use crate::core::recovery::Fault;
    match f {
        Fault::GsiStuck { .. } => "gsi_stuck",
        Fault::DeviceGone => "device_gone",
        Fault::SessionsDown => "sessions_down",
        Fault::Zombie { .. } => "zombie",
        Fault::Operator => "operator",
    }
}

/// The `action` label of an engine action.
pub fn action_name(k: &ActionKind) -> &'static str {
    match k {
        ActionKind::ProbePortal { .. } => "probe_portal",
        ActionKind::RecreateDevice { .. } => "recreate_device",
        ActionKind::IscsiLogin { .. } => "iscsi_login",
        ActionKind::IscsiLogout { .. } => "iscsi_logout",
        ActionKind::IscsiRescan { .. } => "iscsi_rescan",
        ActionKind::SelfTestPort { .. } => "selftest_port",
        ActionKind::NvmeReconnect { .. } => "nvme_reconnect",
        ActionKind::NfsCheck { .. } => "nfs_check",
        ActionKind::MultipathReinstate { .. } => "multipath_reinstate",
        ActionKind::RefreshSessions => "refresh_sessions",
        ActionKind::RefreshTopology => "refresh_topology",
        ActionKind::Alert(_) => "alert",
        ActionKind::PersistState { .. } => "persist_state",
    }
}

/// The `refusal` label of a planned (not run) action.
pub fn refusal_name(r: &Refusal) -> &'static str {
    match r {
        Refusal::DryRun => "dry_run",
        Refusal::Paused => "paused",
        Refusal::NotAllowed { .. } => "not_allowed",
        Refusal::NotNamedByOperator { .. } => "not_named_by_operator",
        Refusal::LeftToDaemon => "left_to_daemon",
        Refusal::JournalFailed { .. } => "journal_failed",
        Refusal::SafeMode { .. } => "safe_mode",
    }
}

fn l1(k: &'static str, v: impl Into<String>) -> Labels {
    vec![(k, v.into())]
}

fn l2(k1: &'static str, v1: impl Into<String>, k2: &'static str, v2: impl Into<String>) -> Labels {
    vec![(k1, v1.into()), (k2, v2.into())]
}

impl Metrics {
    /// A live registry with every family registered.
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        let r = root.sub_registry_with_prefix(PREFIX);
        let f = Families {
            kmsg_read: Counter::default(),
            kmsg_recognised: Family::default(),
            kmsg_untrusted: Counter::default(),
            kmsg_lost: Counter::default(),
            kmsg_loss_events: Counter::default(),
            netlink_dumps: Family::default(),
            netlink_errors: Family::default(),
            netlink_requests: Counter::default(),
            netlink_dump_retries: Counter::default(),
            netlink_stale_replies: Counter::default(),
            sysfs_scans: Counter::default(),
            iscsiadm_listings: Family::default(),
            last_success: Family::default(),
            source_up: Family::default(),
            actions_started: Family::default(),
            actions_planned: Family::default(),
            recoveries_started: Family::default(),
            recoveries_succeeded: Family::default(),
            recoveries_failed: Family::default(),
            transitions: Family::default(),
            fault_to_recovery: Family::new_with_constructor(
                recovery_histogram as fn() -> Histogram,
            ),
            alerts: Family::default(),
            kernel_events: Family::default(),
            selftests: Family::default(),
            selftest_last_duration: Family::default(),
            selftest_last_success: Family::default(),
            selftest_last_timestamp: Family::default(),
            rdma_consumers: Family::default(),
            nvme_reconnects: Family::default(),
            nfs_checks: Family::default(),
            nfs_checks_abandoned: Counter::default(),
            multipath_reinstates: Family::default(),
            multipath_usable_paths: Family::default(),
        };
        r.register(
            "kernel_events",
            "Kernel-log lines of the RDMA storage stack (RDMA core and drivers, NIC, iSER, iSCSI, SCSI, block, NVMe host), by subsystem, device (at most 64 per subsystem, then `other`) and syslog level; explained and counted, never acted on",
            f.kernel_events.clone(),
        );
        r.register(
            "kmsg_records_read",
            "Kernel-log records read from /dev/kmsg",
            f.kmsg_read.clone(),
        );
        r.register(
            "kmsg_records_recognised",
            "Kernel-log records that matched a known signature, by signature kind",
            f.kmsg_recognised.clone(),
        );
        r.register(
            "kmsg_records_untrusted",
            "Recognised records written by userspace (facility not kern) and not trusted to trigger actions",
            f.kmsg_untrusted.clone(),
        );
        r.register(
            "kmsg_records_lost",
            "Kernel-log records overwritten in the ring before they were read (a loss of unknown size counts 1)",
            f.kmsg_lost.clone(),
        );
        r.register(
            "kmsg_loss_events",
            "Times the kernel log reported lost records",
            f.kmsg_loss_events.clone(),
        );
        r.register(
            "netlink_dumps",
            "RDMA netlink dumps (devices, ports, QPs, CM ids), by result",
            f.netlink_dumps.clone(),
        );
        r.register(
            "netlink_errors",
            "Failed RDMA netlink dumps, by error kind",
            f.netlink_errors.clone(),
        );
        r.register(
            "netlink_requests",
            "RDMA netlink requests sent",
            f.netlink_requests.clone(),
        );
        r.register(
            "netlink_dump_retries",
            "RDMA netlink dumps restarted because the kernel marked them NLM_F_DUMP_INTR or the socket overran",
            f.netlink_dump_retries.clone(),
        );
        r.register(
            "netlink_stale_replies",
            "RDMA netlink replies skipped because they answered an earlier (timed-out) request",
            f.netlink_stale_replies.clone(),
        );
        r.register(
            "sysfs_scans",
            "Scans of RDMA devices in sysfs made by the topology source without RDMA netlink",
            f.sysfs_scans.clone(),
        );
        r.register(
            "iscsiadm_listings",
            "iscsiadm -m session -P 3 listings, by result",
            f.iscsiadm_listings.clone(),
        );
        r.register_with_unit(
            "last_success_timestamp",
            "Unix time of the last successful read of each source (netlink dump, sysfs scan, iscsiadm listing, kernel-log record)",
            Unit::Seconds,
            f.last_success.clone(),
        );
        r.register(
            "source_up",
            "1 while a source is in use, 0 once it failed or is unavailable (kmsg, netlink)",
            f.source_up.clone(),
        );
        r.register(
            "actions_started",
            "Engine actions the driver handed to the executors, by action",
            f.actions_started.clone(),
        );
        r.register(
            "actions_planned",
            "Engine actions the driver planned but did not run, by action and refusal (dry_run, paused, not_allowed, ...)",
            f.actions_planned.clone(),
        );
        r.register(
            "recoveries_started",
            "Recoveries started, by action (recreate_device: an RDMA device re-creation; reconnect: an iSCSI login)",
            f.recoveries_started.clone(),
        );
        r.register(
            "recoveries_succeeded",
            "Recoveries that succeeded, by action and method (the re-creation method that worked, or iscsiadm)",
            f.recoveries_succeeded.clone(),
        );
        r.register(
            "recoveries_failed",
            "Recoveries that failed, by action and method (the method that failed, none when no method applied, not_run)",
            f.recoveries_failed.clone(),
        );
        r.register(
            "port_transitions",
            "Engine phase transitions of RDMA ports, by target phase",
            f.transitions.clone(),
        );
        r.register_with_unit(
            "fault_to_recovery",
            "Time from a port leaving Healthy (the fault seen) to its return to Healthy, by fault",
            Unit::Seconds,
            f.fault_to_recovery.clone(),
        );
        r.register(
            "alerts",
            "Alerts sent, by kind (the alert key's first word) and configured syslog severity",
            f.alerts.clone(),
        );
        r.register(
            "selftests",
            "Port self-tests after a re-creation, by result (passed, failed, unavailable)",
            f.selftests.clone(),
        );
        r.register_with_unit(
            "selftest_last_duration",
            "Time the steps of each port's last self-test took (passed or failed)",
            Unit::Seconds,
            f.selftest_last_duration.clone(),
        );
        r.register(
            "nvme_reconnects",
            "NVMe over RDMA controllers reconnected with nvme connect after a re-creation of their device, by result (back: live, namespaces present, direct reads succeed; no-nvme-cli, disabled, connect-failed, not-found, not-live, namespaces-missing, read-failed)",
            f.nvme_reconnects.clone(),
        );
        r.register(
            "nfs_checks",
            "NFS over RDMA mounts checked with a bounded stat after a re-creation of their device, by result (answered; no-answer: no stat returned within the window; error: every stat failed)",
            f.nfs_checks.clone(),
        );
        r.register(
            "nfs_checks_abandoned",
            "stats of NFS over RDMA mount points left hanging at the end of their check's window (a hard mount's stat waits for its server; the daemon never waits for it)",
            f.nfs_checks_abandoned.clone(),
        );
        r.register(
            "multipath_reinstates",
            "dm-multipath paths checked after a re-creation of the device carrying them, by result (active: multipathd's checker reinstated it; reinstated: iser-guard did with multipathd reinstate path; failed; missing)",
            f.multipath_reinstates.clone(),
        );
        r.register(
            "multipath_usable_paths",
            "Usable (dm active) paths of each dm-multipath map, by map, as multipathd last showed them",
            f.multipath_usable_paths.clone(),
        );
        r.register(
            "rdma_consumers",
            "RDMA consumers on each port (CM id table and QP owners), by device, port, kind (the keys of [recovery.consumers], and iser) and state (live: a connection, listener or QP still working; broken: none)",
            f.rdma_consumers.clone(),
        );
        r.register(
            "selftest_last_success",
            "1 if each port's last self-test passed, 0 if it failed (unavailable ones change nothing)",
            f.selftest_last_success.clone(),
        );
        r.register_with_unit(
            "selftest_last_timestamp",
            "Unix time of each port's last self-test result (passed or failed)",
            Unit::Seconds,
            f.selftest_last_timestamp.clone(),
        );
        // Zeros from the start for the label values known in advance, so rates and
        // increases are 0 rather than absent before the first incident.
        for action in ["recreate_device", "reconnect"] {
            drop(f.recoveries_started.get_or_create(&l1("action", action)));
        }
        for fault in [
            "gsi_stuck",
            "device_gone",
            "sessions_down",
            "zombie",
            "operator",
        ] {
            drop(f.fault_to_recovery.get_or_create(&l1("fault", fault)));
        }
        for result in ["passed", "failed", "unavailable"] {
            drop(f.selftests.get_or_create(&l1("result", result)));
        }
        for result in ["ok", "failed"] {
            drop(f.netlink_dumps.get_or_create(&l1("result", result)));
            drop(f.iscsiadm_listings.get_or_create(&l1("result", result)));
        }
        let topology = Arc::new(census::TopologyCollector::default());
        let engine = Arc::new(census::EngineCollector::default());
        r.register_collector(Box::new(topology.clone()));
        r.register_collector(Box::new(engine.clone()));
        r.register_collector(Box::new(census::BuildInfo::now()));
        Metrics {
            inner: Some(Arc::new(Inner {
                registry: root,
                f,
                topology,
                engine,
                started: Mutex::new(BTreeMap::new()),
                selftests: Mutex::new(BTreeMap::new()),
                episodes: Mutex::new(BTreeMap::new()),
                client_stats: Mutex::new(crate::io::netlink::ClientStats::default()),
            })),
        }
    }

    /// Live metrics if `cfg` enables them and this is the daemon (`daemon`), else
    /// [`Metrics::disabled`].
    pub fn for_config(cfg: &crate::config::MetricsConfig, daemon: bool) -> Metrics {
        if cfg.enabled && daemon {
            Metrics::new()
        } else {
            Metrics::disabled()
        }
    }

    /// Metrics that record nothing (`metrics.enabled = false`).
    pub fn disabled() -> Metrics {
        Metrics { inner: None }
    }

    /// Whether updates are recorded.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The exposition in the Prometheus text format (version 0.0.4, what node_exporter's
    /// textfile collector and `promtool check metrics` read). Empty when disabled.
    pub fn encode(&self) -> String {
        let Some(i) = &self.inner else {
            return String::new();
        };
        let mut out = String::new();
        // Writing into a String cannot fail; a collector error would only cut the text short.
        if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, &i.registry)
        {
            tracing::warn!("encoding the metrics failed: {e}");
        }
        out
    }

    fn with(&self, f: impl FnOnce(&Inner)) {
        if let Some(i) = &self.inner {
            f(i);
        }
    }

    fn success(i: &Inner, source: Source) {
        i.f.last_success
            .get_or_create(&l1("source", source.name()))
            .set(unix_now());
    }

    /// One kernel-log record read; `recognised`: its signature kind, if it matched one;
    /// `trusted`: whether it may trigger actions.
    pub fn kmsg_record(&self, recognised: Option<&str>, trusted: bool) {
        self.with(|i| {
            i.f.kmsg_read.inc();
            Self::success(i, Source::Kmsg);
            if let Some(kind) = recognised {
                i.f.kmsg_recognised.get_or_create(&l1("kind", kind)).inc();
                if !trusted {
                    i.f.kmsg_untrusted.inc();
                }
            }
        });
    }

    /// A kernel-log line of the RDMA storage stack (the subsystem layer).
    pub fn kernel_event(&self, subsystem: &str, device: &str, level: &str) {
        self.with(|i| {
            i.f.kernel_events
                .get_or_create(&vec![
                    ("subsystem", subsystem.to_string()),
                    ("device", device.to_string()),
                    ("level", level.to_string()),
                ])
                .inc();
        });
    }

    /// The kernel log reported lost records (`None`: how many is unknown).
    pub fn kmsg_lost(&self, count: Option<u64>) {
        self.with(|i| {
            i.f.kmsg_loss_events.inc();
            i.f.kmsg_lost.inc_by(count.unwrap_or(1).max(1));
        });
    }

    /// A source is in use (`true`) or failed / unavailable (`false`).
    pub fn source_up(&self, source: Source, up: bool) {
        self.with(|i| {
            i.f.source_up
                .get_or_create(&l1("source", source.name()))
                .set(i64::from(up));
        });
    }

    /// One RDMA netlink dump: `error` why it failed (`None`: it succeeded), the model after
    /// it, and the client's counters.
    pub fn netlink_dump(
        &self,
        error: Option<&crate::io::netlink::NetlinkError>,
        topology: &Topology,
        stats: crate::io::netlink::ClientStats,
    ) {
        self.with(|i| {
            match error {
                None => {
                    i.f.netlink_dumps.get_or_create(&l1("result", "ok")).inc();
                    Self::success(i, Source::Netlink);
                }
                Some(e) => {
                    i.f.netlink_dumps
                        .get_or_create(&l1("result", "failed"))
                        .inc();
                    i.f.netlink_errors
                        .get_or_create(&l1("kind", census::netlink_error_kind(e)))
                        .inc();
                }
            }
            {
                // The client's counters only grow while it lives; a new client (after a
                // fallback and reopen) starts again from 0, which adds nothing here.
                let mut last = lock(&i.client_stats);
                i.f.netlink_requests
                    .inc_by(stats.requests.saturating_sub(last.requests));
                i.f.netlink_dump_retries
                    .inc_by(stats.dump_retries.saturating_sub(last.dump_retries));
                i.f.netlink_stale_replies
                    .inc_by(stats.stale_replies.saturating_sub(last.stale_replies));
                *last = stats;
            }
            i.topology.set(census::TopologyCensus::of(topology));
        });
    }

    /// The RDMA consumers per port changed: the gauge is set anew (a port or kind that went
    /// away disappears, so no stale series stays).
    pub fn consumers(&self, ports: &[crate::core::consumers::PortConsumers]) {
        self.with(|i| {
            i.f.rdma_consumers.clear();
            for p in ports {
                for c in &p.consumers {
                    let labels = vec![
                        ("device", p.device.clone()),
                        ("port", p.port.to_string()),
                        ("kind", c.kind.key().to_string()),
                        (
                            "state",
                            if c.live() { "live" } else { "broken" }.to_string(),
                        ),
                    ];
                    i.f.rdma_consumers.get_or_create(&labels).inc();
                }
            }
        });
    }

    /// multipathd's paths as last read: the usable paths of each map.
    pub fn multipath(&self, paths: &[crate::core::multipath::MultipathPath]) {
        self.with(|i| {
            i.f.multipath_usable_paths.clear();
            for (map, n) in crate::core::multipath::usable_per_map(paths) {
                i.f.multipath_usable_paths
                    .get_or_create(&vec![("map", map)])
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        });
    }

    /// The model changed between dumps (device events).
    pub fn topology_changed(&self, topology: &Topology) {
        self.with(|i| i.topology.set(census::TopologyCensus::of(topology)));
    }

    /// One sysfs scan of the netlink-less topology source.
    pub fn sysfs_scan(&self) {
        self.with(|i| {
            i.f.sysfs_scans.inc();
            Self::success(i, Source::Sysfs);
        });
    }

    /// One iscsiadm session listing, successful or not.
    pub fn iscsiadm_listing(&self, ok: bool) {
        self.with(|i| {
            let result = if ok { "ok" } else { "failed" };
            i.f.iscsiadm_listings
                .get_or_create(&l1("result", result))
                .inc();
            if ok {
                Self::success(i, Source::Iscsiadm);
            }
        });
    }

    /// An effect the driver handed out (before it is started). `alerts`: the configured
    /// severities, for the `severity` label of alerts.
    pub fn effect(&self, effect: &Effect, alerts: &crate::config::Alerts) {
        self.with(|i| match &effect.kind {
            EffectKind::WriteJournal { .. } => {}
            EffectKind::Plan { action, refusal } => {
                i.f.actions_planned
                    .get_or_create(&l2(
                        "action",
                        action_name(&action.kind),
                        "refusal",
                        refusal_name(refusal),
                    ))
                    .inc();
            }
            EffectKind::Run { action, .. } => {
                i.f.actions_started
                    .get_or_create(&l1("action", action_name(&action.kind)))
                    .inc();
                let started = match &action.kind {
                    ActionKind::RecreateDevice { .. } => Some(StartedRecovery::Recreate),
                    ActionKind::IscsiLogin { .. } => Some(StartedRecovery::Reconnect),
                    ActionKind::SelfTestPort { device, port, .. } => {
                        lock(&i.selftests).insert(effect.id, PortId::new(device.clone(), *port));
                        None
                    }
                    ActionKind::Alert(a) => {
                        let severity = alerts.syslog_severity(a.severity).name();
                        i.f.alerts
                            .get_or_create(&l2("kind", alert_kind(&a.key), "severity", severity))
                            .inc();
                        None
                    }
                    _ => None,
                };
                if let Some(s) = started {
                    let action = match s {
                        StartedRecovery::Recreate => "recreate_device",
                        StartedRecovery::Reconnect => "reconnect",
                    };
                    i.f.recoveries_started
                        .get_or_create(&l1("action", action))
                        .inc();
                    lock(&i.started).insert(effect.id, s);
                }
            }
        });
    }

    /// An alert the daemon raised itself (not through the engine), e.g. `safe-mode`.
    pub fn alert(&self, kind: &str, severity: crate::core::severity::Severity) {
        self.with(|i| {
            i.f.alerts
                .get_or_create(&l2("kind", kind, "severity", severity.name()))
                .inc();
        });
    }

    /// The executor's answer for effect `id`; `method`: the re-creation method that ran, if
    /// the executor knows it.
    pub fn executed(&self, id: EffectId, outcome: &Outcome, method: Option<&str>) {
        self.with(|i| {
            if let Outcome::NfsCheck { reports, .. } = outcome {
                for r in reports {
                    i.f.nfs_checks
                        .get_or_create(&l1("result", r.result.label()))
                        .inc();
                    if matches!(
                        r.result,
                        crate::core::nfs_rdma::NfsCheckResult::NoAnswer {
                            earlier_pending: false,
                            ..
                        }
                    ) {
                        i.f.nfs_checks_abandoned.inc();
                    }
                }
            }
            if let Outcome::NvmeReconnect { reports, .. } = outcome {
                for r in reports {
                    i.f.nvme_reconnects
                        .get_or_create(&l1("result", r.result.label()))
                        .inc();
                }
            }
            if let Outcome::MultipathReinstate { reports, .. } = outcome {
                for r in reports {
                    i.f.multipath_reinstates
                        .get_or_create(&l1("result", r.result.label()))
                        .inc();
                }
            }
            if let Some(port) = lock(&i.selftests).remove(&id) {
                Self::selftest(i, &port, outcome);
                return;
            }
            let Some(started) = lock(&i.started).remove(&id) else {
                return;
            };
            let (action, ok, method) = match (started, outcome) {
                (
                    StartedRecovery::Recreate,
                    Outcome::Recreate(RecreateResult::Recreated { .. }),
                ) => ("recreate_device", true, method.unwrap_or("unknown")),
                (
                    StartedRecovery::Recreate,
                    Outcome::Recreate(RecreateResult::Unsupported { .. }),
                ) => ("recreate_device", false, "none"),
                (StartedRecovery::Recreate, Outcome::NotRun { .. }) => {
                    ("recreate_device", false, "not_run")
                }
                (StartedRecovery::Recreate, _) => {
                    ("recreate_device", false, method.unwrap_or("unknown"))
                }
                (
                    StartedRecovery::Reconnect,
                    Outcome::Iscsiadm(IscsiadmOutcome::Success | IscsiadmOutcome::AlreadyLoggedIn),
                ) => ("reconnect", true, "iscsiadm"),
                (StartedRecovery::Reconnect, Outcome::NotRun { .. }) => {
                    ("reconnect", false, "not_run")
                }
                (StartedRecovery::Reconnect, _) => ("reconnect", false, "iscsiadm"),
            };
            let family = if ok {
                &i.f.recoveries_succeeded
            } else {
                &i.f.recoveries_failed
            };
            family
                .get_or_create(&l2("action", action, "method", method))
                .inc();
        });
    }

    /// A port self-test's answer: counted by result; a test that ran sets its port's last
    /// duration, success and time.
    fn selftest(i: &Inner, port: &PortId, outcome: &Outcome) {
        let result = match outcome {
            Outcome::SelfTest(SelfTestResult::Ran(r)) => {
                let labels = l2("device", port.device.clone(), "port", port.port.to_string());
                i.f.selftest_last_duration
                    .get_or_create(&labels)
                    .set(r.total().as_secs_f64());
                i.f.selftest_last_success
                    .get_or_create(&labels)
                    .set(i64::from(r.passed()));
                i.f.selftest_last_timestamp
                    .get_or_create(&labels)
                    .set(unix_now());
                if r.passed() {
                    "passed"
                } else {
                    "failed"
                }
            }
            _ => "unavailable",
        };
        i.f.selftests.get_or_create(&l1("result", result)).inc();
    }

    /// An engine phase transition.
    pub fn transition(&self, t: &Transition) {
        self.with(|i| {
            i.f.transitions
                .get_or_create(&l1("phase", t.to.to_string()))
                .inc();
            let mut episodes = lock(&i.episodes);
            if t.to == Phase::Healthy {
                if let Some(e) = episodes.remove(&t.port) {
                    let secs = t.at.as_millis().saturating_sub(e.start_ms) as f64 / 1000.0;
                    i.f.fault_to_recovery
                        .get_or_create(&l1("fault", e.fault.unwrap_or("unknown")))
                        .observe(secs);
                }
            } else if t.from == Phase::Healthy {
                episodes.insert(
                    t.port.clone(),
                    OpenEpisode {
                        start_ms: t.at.as_millis(),
                        fault: None,
                    },
                );
            }
        });
    }

    /// The engine's state after a step: port phases, faults, attempts and holds; sessions by
    /// state; pause. Also names the fault of open episodes and opens one for a port found
    /// out of Healthy without a transition seen (a daemon resumed from its journal).
    pub fn engine(&self, engine: &Engine) {
        self.with(|i| {
            let view = census::EngineCensus::of(engine);
            {
                let mut episodes = lock(&i.episodes);
                for p in engine.ports().filter(|p| p.phase() != Phase::Healthy) {
                    let e = episodes.entry(p.id.clone()).or_insert_with(|| OpenEpisode {
                        start_ms: p.episode().map_or(p.since, |e| e.since).as_millis(),
                        fault: None,
                    });
                    if e.fault.is_none() {
                        e.fault = p.fault().map(fault_name);
                    }
                }
            }
            i.engine.set(view);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disabled_registry_encodes_nothing_and_ignores_updates() {
        let m = Metrics::disabled();
        m.kmsg_record(Some("stuck_qp_transition"), true);
        m.kmsg_lost(Some(3));
        assert!(!m.is_enabled());
        assert_eq!(m.encode(), "");
    }

    #[test]
    fn nfs_checks_are_counted_by_result_and_abandoned_stats_apart() {
        use crate::core::nfs_rdma::{parse_line, NfsCheckReport, NfsCheckResult};
        let mount = parse_line(
            "83 22 0:47 / /mnt/nfs rw - nfs4 192.0.2.2:/e rw,proto=rdma,port=20049,addr=192.0.2.2",
        )
        .unwrap()
        .unwrap();
        let report = |result| NfsCheckReport {
            mount: mount.clone(),
            result,
        };
        let m = Metrics::new();
        m.executed(
            EffectId(8),
            &Outcome::NfsCheck {
                device: "rocep2s0f0".into(),
                reports: vec![
                    report(NfsCheckResult::Answered { after_ms: 3 }),
                    report(NfsCheckResult::NoAnswer {
                        waited_s: 60,
                        earlier_pending: false,
                    }),
                    report(NfsCheckResult::NoAnswer {
                        waited_s: 60,
                        earlier_pending: true,
                    }),
                    report(NfsCheckResult::Error {
                        errno: "Input/output error (os error 5)".into(),
                    }),
                ],
            },
            None,
        );
        let text = m.encode();
        for line in [
            "iser_guard_nfs_checks_total{result=\"answered\"} 1\n",
            "iser_guard_nfs_checks_total{result=\"no-answer\"} 2\n",
            "iser_guard_nfs_checks_total{result=\"error\"} 1\n",
            // The second no-answer started no stat of its own: one abandoned.
            "iser_guard_nfs_checks_abandoned_total 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn nvme_reconnects_are_counted_by_result() {
        use crate::core::nvme_fabrics::{
            parse_fabrics_address, NvmeBackResult, NvmeRdmaController, NvmeReconnectReport,
        };
        let c = NvmeRdmaController {
            name: "nvme0".into(),
            address: parse_fabrics_address("traddr=192.0.2.2").unwrap(),
            subsysnqn: "nqn.test".into(),
            hostnqn: None,
            hostid: None,
            state: "live".into(),
            io_queues: None,
            queue_size: None,
            ctrl_loss_tmo: None,
            reconnect_delay: None,
            kato: None,
            namespaces: Vec::new(),
            placed: None,
        };
        let report = |result| NvmeReconnectReport {
            controller: c.clone(),
            result,
        };
        let m = Metrics::new();
        m.executed(
            EffectId(7),
            &Outcome::NvmeReconnect {
                device: "rocep2s0f0".into(),
                reports: vec![
                    report(NvmeBackResult::Back {
                        now: "nvme1".into(),
                    }),
                    report(NvmeBackResult::NoNvmeCli),
                    report(NvmeBackResult::Back {
                        now: "nvme2".into(),
                    }),
                ],
            },
            None,
        );
        let text = m.encode();
        assert!(
            text.contains("iser_guard_nvme_reconnects_total{result=\"back\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("iser_guard_nvme_reconnects_total{result=\"no-nvme-cli\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn multipath_reinstates_by_result_and_usable_paths_per_map() {
        use crate::core::multipath::{parse_paths, PathBackReport, PathBackResult};
        let paths = parse_paths(
            "mpatha|sdb|8:16|7:0:0:1|active|running|ready\n\
             mpatha|sdc|8:32|8:0:0:1|active|running|ready\n\
             mpathb|sdd|8:48|7:0:0:2|failed|running|faulty\n",
        )
        .paths;
        let m = Metrics::new();
        m.multipath(&paths);
        let remembered = crate::core::multipath::MultipathPathRef {
            map: "mpatha".into(),
            dev: "sdb".into(),
            hcil: None,
            port: 1,
            link: "s".into(),
            dm: crate::core::multipath::DmPathState::Failed,
        };
        let report = |result| PathBackReport {
            path: remembered.clone(),
            result,
        };
        m.executed(
            EffectId(8),
            &Outcome::MultipathReinstate {
                device: "rocep2s0f0".into(),
                reports: vec![
                    report(PathBackResult::Reinstated { dev: "sdb".into() }),
                    report(PathBackResult::Missing),
                ],
            },
            None,
        );
        let text = m.encode();
        for line in [
            "iser_guard_multipath_reinstates_total{result=\"reinstated\"} 1\n",
            "iser_guard_multipath_reinstates_total{result=\"missing\"} 1\n",
            "iser_guard_multipath_usable_paths{map=\"mpatha\"} 2\n",
            "iser_guard_multipath_usable_paths{map=\"mpathb\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn counters_carry_the_prefix_and_the_total_suffix() {
        let m = Metrics::new();
        m.kmsg_record(Some("stuck_qp_transition"), false);
        m.kmsg_record(None, true);
        m.kmsg_lost(None);
        let text = m.encode();
        assert!(
            text.contains("iser_guard_kmsg_records_read_total 2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "iser_guard_kmsg_records_recognised_total{kind=\"stuck_qp_transition\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("iser_guard_kmsg_records_untrusted_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("iser_guard_kmsg_records_lost_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE iser_guard_fault_to_recovery_seconds histogram"),
            "{text}"
        );
        assert!(text.contains("iser_guard_build_info{version=\""), "{text}");
    }

    #[test]
    fn alert_kinds_are_the_key_up_to_the_first_colon() {
        assert_eq!(alert_kind("fault:rocep2s0f0/1:gsi"), "fault");
        assert_eq!(alert_kind("quarantine"), "quarantine");
        assert_eq!(alert_kind(""), "");
    }
}
