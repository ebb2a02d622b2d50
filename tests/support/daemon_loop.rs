//! The one builder for in-process daemon-loop tests (tests/daemon_loop.rs,
//! tests/observe_daemon.rs, tests/metrics_daemon.rs, tests/daemon_selftest.rs): the loop of
//! `iser_guard::daemon::run` on doubles — a kernel log fed through a channel, one E810 RDMA
//! port without netlink, an iscsiadm with one session whose state the test sets (the
//! captured `-P 3` listings), the scripted prober and resetter — with its real control
//! socket unless the test says otherwise. Nothing here touches /dev/kmsg or the host's
//! RDMA devices.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iser_guard::config::Config;
use iser_guard::core::iscsi::NodeId;
use iser_guard::core::kmsg::Record;
use iser_guard::core::recovery::Observation;
use iser_guard::core::session_map::{NetdevAddr, RdmaPortNetdev};
use iser_guard::daemon::notify::Notifier;
use iser_guard::daemon::run::{run, Deps, Mode, Settings};
use iser_guard::daemon::sources::{
    BootClock, BoxFuture, KernelLog, Signal, TopologyReport, TopologySource,
};
use iser_guard::error::Error;
use iser_guard::io::control::{request, ControlServer, Reply, Request};
use iser_guard::io::executors::Doubles;
use iser_guard::io::iscsiadm::{
    IscsiAdm, IscsiadmError, LoginOutcome, LogoutOutcome, NodeOutcome, SessionListing,
};
use iser_guard::io::kmsg::{KmsgError, KmsgEvent};
use iser_guard::io::probe::TcpAnswer;
use iser_guard::io::selftest::PortSelfTest;
use iser_guard::io::verbs_access::LockoutWatch;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// The portal of the session the fake iscsiadm lists.
pub const PORTAL: &str = "192.0.2.2:3260";

/// The stuck-GSI line the E810 (ice/irdma) prints for `rocep2s0f0`.
pub const STUCK_GSI: &str =
    "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";

/// A `/dev/kmsg` record of `text` from `facility` (0: the kernel's own; 1: a process
/// writing into /dev/kmsg) at level 3.
pub fn record(facility: u32, text: &str) -> Record {
    Record::parse(format!("{},10,100,-;{text}", facility * 8 + 3).as_bytes()).unwrap()
}

/// The configuration text of a loop test: state and control socket in `state`, fast polls,
/// `rocep2s0f0` allowed; `extra` is appended (more sections).
pub fn config_text(state: &Path, trust_userspace: bool, extra: &str) -> String {
    format!(
        "[paths]\nstate-dir = {:?}\ncontrol-socket = {:?}\n[poll]\niscsi = 0.2\nprobe = 0.1\n\
         [devices]\nallow = [\"rocep2s0f0\"]\n[recovery]\nprobe-successes = 2\n\
         probe-timeout = 0.1\niscsid-grace = 0.2\n[kmsg]\ntrust-userspace-records = \
         {trust_userspace}\n{extra}",
        state.display().to_string(),
        state.join("control.sock").display().to_string(),
    )
}

/// [`config_text`], parsed.
pub fn config(state: &Path, trust_userspace: bool) -> Config {
    iser_guard::config::parse_str(&config_text(state, trust_userspace, "")).unwrap()
}

pub struct ChannelLog(pub UnboundedReceiver<KmsgEvent>);
impl KernelLog for ChannelLog {
    fn next(&mut self) -> BoxFuture<'_, Result<KmsgEvent, KmsgError>> {
        Box::pin(async move { self.0.recv().await.ok_or(KmsgError::Closed) })
    }
    fn save_cursor(&mut self, _: Duration) {}
}

/// The fake host's E810 port, seen once (no RDMA netlink: sysfs only).
pub struct OnePort;
impl TopologySource for OnePort {
    fn start(self: Box<Self>, tx: UnboundedSender<TopologyReport>, _: Arc<Signal>, _: Arc<Signal>) {
        let _ = tx.send(TopologyReport::NetlinkUnavailable(
            "no RDMA netlink in this test".into(),
        ));
        let _ = tx.send(TopologyReport::Update {
            observations: vec![Observation::DeviceAppeared {
                device: "rocep2s0f0".into(),
                parent: Some("0000:02:00.0".into()),
                driver: Some("irdma".into()),
                ports: 1,
            }],
            ports: vec![RdmaPortNetdev {
                device: "rocep2s0f0".into(),
                port: 1,
                netdev: "ens1f0".into(),
            }],
            cm_ids: Vec::new(),
        });
    }
}

/// [`OnePort`], and the NVMe over RDMA controllers the topology source read from
/// `/sys/class/nvme` and placed.
pub struct OnePortWithNvme(pub Vec<iser_guard::core::nvme_fabrics::NvmeRdmaController>);
impl TopologySource for OnePortWithNvme {
    fn start(
        self: Box<Self>,
        tx: UnboundedSender<TopologyReport>,
        refresh: Arc<Signal>,
        stop: Arc<Signal>,
    ) {
        Box::new(OnePort).start(tx.clone(), refresh, stop);
        let _ = tx.send(TopologyReport::Update {
            observations: vec![Observation::NvmeControllers {
                controllers: self.0,
            }],
            ports: vec![RdmaPortNetdev {
                device: "rocep2s0f0".into(),
                port: 1,
                netdev: "ens1f0".into(),
            }],
            cm_ids: Vec::new(),
        });
    }
}

/// [`OnePort`], and the NFS over RDMA mounts the topology source read from mountinfo and
/// placed.
pub struct OnePortWithNfs(pub Vec<iser_guard::core::nfs_rdma::NfsRdmaMount>);
impl TopologySource for OnePortWithNfs {
    fn start(
        self: Box<Self>,
        tx: UnboundedSender<TopologyReport>,
        refresh: Arc<Signal>,
        stop: Arc<Signal>,
    ) {
        Box::new(OnePort).start(tx.clone(), refresh, stop);
        let _ = tx.send(TopologyReport::Update {
            observations: vec![Observation::NfsMounts { mounts: self.0 }],
            ports: vec![RdmaPortNetdev {
                device: "rocep2s0f0".into(),
                port: 1,
                netdev: "ens1f0".into(),
            }],
            cm_ids: Vec::new(),
        });
    }
}

/// One session whose state the test sets ("LOGGED_IN", "FAILED", anything else: none);
/// logins bring it back and are recorded.
pub struct Host {
    pub state: Mutex<&'static str>,
    pub logins: Mutex<Vec<NodeId>>,
}
impl Host {
    pub fn new(state: &'static str) -> Host {
        Host {
            state: Mutex::new(state),
            logins: Mutex::new(Vec::new()),
        }
    }
    pub fn set(&self, state: &'static str) {
        *self.state.lock().unwrap() = state;
    }
}
impl IscsiAdm for Host {
    fn sessions(&self, _: bool) -> Result<SessionListing, IscsiadmError> {
        let text = match *self.state.lock().unwrap() {
            "LOGGED_IN" => include_str!("../fixtures/stubs/iscsiadm.d/session-P3-loggedin.txt"),
            "FAILED" => include_str!("../fixtures/stubs/iscsiadm.d/session-P3-failed.txt"),
            _ => return Ok(SessionListing::NoSessions),
        };
        // The iface bound to the initiator's address, as `iscsiadm -m iface` would set it.
        Ok(SessionListing::Text(text.replace(
            "Iface IPaddress: [default]",
            "Iface IPaddress: 192.0.2.1",
        )))
    }
    fn login(&self, node: &NodeId) -> Result<LoginOutcome, IscsiadmError> {
        self.logins.lock().unwrap().push(node.clone());
        *self.state.lock().unwrap() = "LOGGED_IN";
        Ok(LoginOutcome::LoggedIn)
    }
    fn logout(&self, _: &NodeId) -> Result<LogoutOutcome, IscsiadmError> {
        *self.state.lock().unwrap() = "NONE";
        Ok(LogoutOutcome::LoggedOut)
    }
    fn rescan(&self, _: u32) -> Result<(), IscsiadmError> {
        Ok(())
    }
    fn create_node(&self, _: &NodeId) -> Result<NodeOutcome, IscsiadmError> {
        Ok(NodeOutcome::Written)
    }
    fn update_node(&self, _: &NodeId, _: &str, _: &str) -> Result<NodeOutcome, IscsiadmError> {
        Ok(NodeOutcome::Written)
    }
}

/// How a loop test's daemon is set up; [`LoopTest::start`] runs it.
pub struct LoopTest {
    cfg: Config,
    session: &'static str,
    reachable: usize,
    control: bool,
    config_path: Option<PathBuf>,
    selftest: Option<Arc<dyn PortSelfTest>>,
    verbs_access: Option<LockoutWatch>,
    nvme: Option<Vec<iser_guard::core::nvme_fabrics::NvmeRdmaController>>,
    nfs: Option<Vec<iser_guard::core::nfs_rdma::NfsRdmaMount>>,
    multipath: Option<Vec<iser_guard::core::multipath::MultipathPath>>,
}

impl LoopTest {
    /// A daemon on `cfg` with one logged-in session, its control socket open, the portal
    /// answering nothing scripted.
    pub fn new(cfg: Config) -> LoopTest {
        LoopTest {
            cfg,
            session: "LOGGED_IN",
            reachable: 0,
            control: true,
            config_path: None,
            selftest: None,
            verbs_access: None,
            nvme: None,
            nfs: None,
            multipath: None,
        }
    }

    /// The topology source also reports these NFS over RDMA mounts.
    pub fn nfs(mut self, m: Vec<iser_guard::core::nfs_rdma::NfsRdmaMount>) -> LoopTest {
        self.nfs = Some(m);
        self
    }

    /// The topology source also reports these NVMe over RDMA controllers.
    pub fn nvme(mut self, c: Vec<iser_guard::core::nvme_fabrics::NvmeRdmaController>) -> LoopTest {
        self.nvme = Some(c);
        self
    }

    /// multipathd answers these paths from the start.
    pub fn multipath(mut self, p: Vec<iser_guard::core::multipath::MultipathPath>) -> LoopTest {
        self.multipath = Some(p);
        self
    }

    /// The session's state at start.
    pub fn session(mut self, state: &'static str) -> LoopTest {
        self.session = state;
        self
    }

    /// The portal answers the next `n` probes.
    pub fn portal_reachable(mut self, n: usize) -> LoopTest {
        self.reachable = n;
        self
    }

    /// No control socket.
    pub fn without_control(mut self) -> LoopTest {
        self.control = false;
        self
    }

    /// Reloads (SIGHUP, `reload`) read `path`.
    pub fn reload_from(mut self, path: PathBuf) -> LoopTest {
        self.config_path = Some(path);
        self
    }

    /// The daemon checks the verbs devices with `watch` (a sandbox lockout).
    pub fn verbs_access(mut self, watch: LockoutWatch) -> LoopTest {
        self.verbs_access = Some(watch);
        self
    }

    /// The port self-test the executors run.
    pub fn selftest(mut self, t: Arc<dyn PortSelfTest>) -> LoopTest {
        self.selftest = Some(t);
        self
    }

    /// Starts the loop on a tokio task (call inside a runtime).
    pub fn start(self) -> Daemon {
        let doubles = Doubles::default();
        *doubles.multipath.paths.lock().unwrap() = self.multipath.clone();
        if self.reachable > 0 {
            doubles.prober.push(
                PORTAL.parse().unwrap(),
                std::iter::repeat_n(
                    TcpAnswer::Reachable {
                        rtt: Duration::from_millis(1),
                    },
                    self.reachable,
                ),
            );
            // The NVMe over RDMA targets are probed too (traddr on trsvcid, or 4420): they
            // answer with the iSCSI portal.
            for c in self.nvme.iter().flatten() {
                let port = c.address.trsvcid.as_deref().unwrap_or("4420");
                if let Ok(addr) = format!("{}:{port}", c.address.traddr).parse() {
                    doubles.prober.push(
                        addr,
                        std::iter::repeat_n(
                            TcpAnswer::Reachable {
                                rtt: Duration::from_millis(1),
                            },
                            self.reachable,
                        ),
                    );
                }
            }
        }
        let host = Arc::new(Host::new(self.session));
        let mut ex = doubles.executors(iser_guard::compose::probe_options(&self.cfg));
        if let Some(t) = self.selftest {
            ex = ex.with_selftest(t);
        }
        ex.iscsi = host.clone();
        let (log, log_rx) = unbounded_channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel();
        let deps = Deps {
            kernel_log: Some(Box::new(ChannelLog(log_rx))),
            topology: match (self.nvme, self.nfs) {
                (Some(c), _) => Box::new(OnePortWithNvme(c)),
                (None, Some(m)) => Box::new(OnePortWithNfs(m)),
                (None, None) => Box::new(OnePort),
            },
            executors: ex,
            clock: Arc::new(BootClock),
            notifier: Notifier::silent(),
            addresses: Arc::new(|| {
                Ok(vec![NetdevAddr {
                    netdev: "ens1f0".into(),
                    ip: "192.0.2.1".parse().unwrap(),
                }])
            }),
            routes: Arc::new(|_| Err("no route in this test".into())),
            control: self
                .control
                .then(|| ControlServer::bind(&self.cfg.paths.control_socket).unwrap()),
            shutdown: Some(stop_rx),
            verbs_access: self.verbs_access.clone(),
            async_events: None,
        };
        let settings = Settings {
            config: self.cfg.clone(),
            config_path: self.config_path,
            force_dry_run: false,
            take_lock: true,
            automatic_actions: true,
            read_only: false,
        };
        Daemon {
            task: tokio::spawn(run(settings, deps, Mode::Daemon)),
            stop: Some(stop),
            log,
            host,
            doubles,
            cfg: self.cfg,
        }
    }
}

/// A running test daemon.
pub struct Daemon {
    pub task: tokio::task::JoinHandle<Result<u8, Error>>,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The kernel log's sender: records fed here reach the loop in order.
    pub log: UnboundedSender<KmsgEvent>,
    pub host: Arc<Host>,
    pub doubles: Doubles,
    pub cfg: Config,
}

impl Daemon {
    /// Feeds one record to the kernel log.
    pub fn feed(&self, rec: Record) {
        self.log.send(KmsgEvent::Record(rec)).unwrap();
    }

    /// Stops the loop as SIGTERM would and returns its exit code (within 10 s).
    pub async fn stop(mut self) -> u8 {
        if let Some(stop) = self.stop.take() {
            stop.send(()).unwrap();
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("the loop did not stop within 10 s")
            .unwrap()
            .unwrap()
    }

    /// `iser-guard status` through the control socket, once the daemon answers (10 s).
    pub async fn status(&self) -> serde_json::Value {
        status_at(&self.cfg.paths.control_socket).await
    }
}

/// `iser-guard status` through the control socket at `path`, once the daemon answers.
pub async fn status_at(path: &Path) -> serde_json::Value {
    let end = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let p = path.to_path_buf();
        let r = tokio::task::spawn_blocking(move || {
            request(&p, &Request::Status, Duration::from_secs(5), |_| {})
        })
        .await
        .unwrap();
        match r {
            Ok(Reply::Done {
                message, detail, ..
            }) => {
                return serde_json::json!({ "message": message, "detail": detail });
            }
            other => {
                assert!(std::time::Instant::now() < end, "no status: {other:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Waits (up to `secs`) until `cond` holds, polling every 20 ms; panics with `what`.
pub async fn wait_for(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(std::time::Instant::now() < end, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
