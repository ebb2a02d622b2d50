//! The executors the daemon (and the standalone manual commands) run the engine's actions
//! with, bundled: one field per action family, each a small trait object so tests and the
//! simulator pass doubles in, never switched by `cfg!(test)`.
//!
//! | engine action | call | outcome |
//! |---|---|---|
//! | re-create device | [`DeviceResetter::recreate`] | [`crate::io::reset::ResetOutcome`] / [`crate::io::reset::ResetError`] |
//! | iSCSI login / logout / rescan | [`IscsiAdm`] methods | `LoginOutcome`, `LogoutOutcome`, `()` / [`crate::io::iscsiadm::IscsiadmError`] (with `retry()`) |
//! | list sessions | [`IscsiAdm::sessions`] | raw text for [`crate::core::iscsi`] |
//! | probe portal | [`PortalProbes::probe`] (TCP or ARP/ND, [`crate::io::probe_choice`]) | [`crate::core::recovery::ProbeResult`] and its words |
//! | alert | [`AlertSink::send`] | `()` / [`crate::io::syslog::SyslogError`] (log "unavailable" once) |
//! | self-test a port | [`PortSelfTest::run`] | [`crate::core::selftest::SelfTestResult`] |
//!
//! Every call blocks (subprocesses, sysfs polling, a TCP connect with a deadline); the tokio
//! daemon runs them on its fixed executor pool and alerts through its one alert sender
//! ([`crate::daemon::workers`]), never a thread per call; a re-creation holds
//! [`crate::io::lock::RecoveryLock`].

use std::sync::Arc;
use std::time::Duration;

use crate::io::iscsiadm::{IscsiAdm, Iscsiadm, ScriptedIscsiAdm};
use crate::io::multipathd::{MultipathRestore, MultipathdRestore, ScriptedMultipathRestore};
use crate::io::neighbour::{NetlinkNeighbour, ScriptedNeighbour};
use crate::io::nfs_check::{NfsCheck, ScriptedNfsCheck, StatNfsCheck};
use crate::io::nvme_cli::{NvmeCliRestore, NvmeRestore, ScriptedNvmeRestore};
use crate::io::probe::{ScriptedProber, TcpProber};
use crate::io::probe_choice::{PortalProbes, ProbeMethods};
use crate::io::reset::{DeviceResetter, ResetConfig, ScriptedResetter, SysfsResetter};
use crate::io::selftest::{NoSelfTest, PortSelfTest};
use crate::io::selftest_scripted::ScriptedSelfTest;
use crate::io::syslog::{AlertSink, RecordingSink, SyslogSink};

/// The executors, as trait objects.
#[derive(Clone)]
pub struct Executors {
    /// Device re-creation.
    pub resetter: Arc<dyn DeviceResetter>,
    /// iscsiadm.
    pub iscsi: Arc<dyn IscsiAdm>,
    /// Portal probes (TCP or ARP/ND, per portal).
    pub probes: Arc<PortalProbes>,
    /// Alerts; `None` when `alerts.syslog` is off.
    pub alerts: Option<Arc<dyn AlertSink>>,
    /// Port self-tests ([`NoSelfTest`] until a verbs self-test is passed in with
    /// [`Executors::with_selftest`]).
    pub selftest: Arc<dyn PortSelfTest>,
    /// NVMe over RDMA controllers brought back after a re-creation.
    pub nvme: Arc<dyn NvmeRestore>,
    /// NFS over RDMA mounts checked after a re-creation (one checker for the daemon's life:
    /// it knows which mount points still have a stat hanging).
    pub nfs: Arc<dyn NfsCheck>,
    /// multipathd: the maps' paths, and the remembered paths checked after a re-creation.
    pub multipath: Arc<dyn MultipathRestore>,
    /// `recovery.probe-timeout`.
    pub probe_timeout: Duration,
    /// `recovery.probe-port`, for portals that name none.
    pub probe_port: u16,
}

impl std::fmt::Debug for Executors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executors")
            .field("probe_timeout", &self.probe_timeout)
            .field("probe_port", &self.probe_port)
            .finish_non_exhaustive()
    }
}

/// How portals are probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// How long one probe may take.
    pub timeout: Duration,
    /// The port for portals that name none.
    pub port: u16,
    /// Which probe each portal gets.
    pub methods: ProbeMethods,
}

/// What the real executors are built from.
#[derive(Debug)]
pub struct ExecutorOptions {
    /// Device re-creation.
    pub reset: ResetConfig,
    /// iscsiadm's program and its timeout.
    pub iscsiadm: (std::path::PathBuf, Duration),
    /// The syslog sink, if alerts go to syslog.
    pub syslog: Option<SyslogSink>,
    /// Portal probes.
    pub probe: ProbeOptions,
    /// nvme-cli and its verification.
    pub nvme: NvmeCliRestore,
    /// multipathd.
    pub multipath: MultipathdRestore,
}

impl Executors {
    /// The real executors.
    pub fn real(opts: ExecutorOptions) -> Self {
        Executors {
            resetter: Arc::new(SysfsResetter::new(opts.reset)),
            iscsi: Arc::new(Iscsiadm::new(opts.iscsiadm.0, opts.iscsiadm.1)),
            probes: Arc::new(PortalProbes::new(
                Arc::new(TcpProber),
                Arc::new(NetlinkNeighbour),
                opts.probe.methods.clone(),
            )),
            alerts: opts.syslog.map(|s| Arc::new(s) as Arc<dyn AlertSink>),
            selftest: Arc::new(NoSelfTest {
                reason: "this iser-guard runs without a verbs self-test".into(),
            }),
            nvme: Arc::new(opts.nvme),
            nfs: Arc::new(StatNfsCheck::default()),
            multipath: Arc::new(opts.multipath),
            probe_timeout: opts.probe.timeout,
            probe_port: opts.probe.port,
        }
    }

    /// The same executors, self-testing ports with `selftest`.
    pub fn with_selftest(self, selftest: Arc<dyn PortSelfTest>) -> Self {
        Executors { selftest, ..self }
    }
}

/// The doubles behind an [`Executors`], kept so a test can script and inspect them.
#[derive(Debug, Clone, Default)]
pub struct Doubles {
    /// The scripted resetter.
    pub resetter: Arc<ScriptedResetter>,
    /// The scripted iscsiadm.
    pub iscsi: Arc<ScriptedIscsiAdm>,
    /// The scripted prober.
    pub prober: Arc<ScriptedProber>,
    /// The scripted neighbour probe (no answer unless answers are queued).
    pub neighbour: Arc<ScriptedNeighbour>,
    /// The recording alert sink.
    pub alerts: Arc<RecordingSink>,
    /// The scripted port self-test (unavailable unless answers are queued).
    pub selftest: Arc<ScriptedSelfTest>,
    /// The scripted NVMe restore (every controller back unless answers are queued).
    pub nvme: Arc<ScriptedNvmeRestore>,
    /// The scripted NFS check (every mount answers unless answers are queued).
    pub nfs: Arc<ScriptedNfsCheck>,
    /// The scripted multipathd (no maps unless paths are set).
    pub multipath: Arc<ScriptedMultipathRestore>,
}

impl Doubles {
    /// Executors backed by these doubles.
    pub fn executors(&self, probe: ProbeOptions) -> Executors {
        Executors {
            resetter: self.resetter.clone(),
            iscsi: self.iscsi.clone(),
            probes: Arc::new(PortalProbes::new(
                self.prober.clone(),
                self.neighbour.clone(),
                probe.methods.clone(),
            )),
            alerts: Some(self.alerts.clone()),
            selftest: self.selftest.clone(),
            nvme: self.nvme.clone(),
            nfs: self.nfs.clone(),
            multipath: self.multipath.clone(),
            probe_timeout: probe.timeout,
            probe_port: probe.port,
        }
    }
}
