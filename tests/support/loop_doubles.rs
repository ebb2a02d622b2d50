//! The doubles the in-process daemon-loop tests share (tests/observe_daemon.rs,
//! tests/metrics_daemon.rs, tests/daemon_selftest.rs): a kernel log fed through a channel,
//! one E810 RDMA port without netlink, and an iscsiadm with one session whose state the
//! test sets (the captured `-P 3` listings).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use iser_guard::core::iscsi::NodeId;
use iser_guard::core::recovery::Observation;
use iser_guard::core::session_map::RdmaPortNetdev;
use iser_guard::daemon::sources::{BoxFuture, KernelLog, Signal, TopologyReport, TopologySource};
use iser_guard::io::iscsiadm::{
    IscsiAdm, IscsiadmError, LoginOutcome, LogoutOutcome, NodeOutcome, SessionListing,
};
use iser_guard::io::kmsg::{KmsgError, KmsgEvent};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

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

/// One session whose state the test sets; logins bring it back.
pub struct Host {
    pub state: Mutex<&'static str>,
}
impl IscsiAdm for Host {
    fn sessions(&self, _: bool) -> Result<SessionListing, IscsiadmError> {
        let text = match *self.state.lock().unwrap() {
            "LOGGED_IN" => include_str!("../fixtures/stubs/iscsiadm.d/session-P3-loggedin.txt"),
            "FAILED" => include_str!("../fixtures/stubs/iscsiadm.d/session-P3-failed.txt"),
            _ => return Ok(SessionListing::NoSessions),
        };
        Ok(SessionListing::Text(text.replace(
            "Iface IPaddress: [default]",
            "Iface IPaddress: 192.0.2.1",
        )))
    }
    fn login(&self, _: &NodeId) -> Result<LoginOutcome, IscsiadmError> {
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
