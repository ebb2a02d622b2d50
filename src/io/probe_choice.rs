//! Which probe each portal gets, and the probe itself: a TCP connect ([`PortalProber`]) or
//! the target host's ARP/ND answer ([`NeighbourProber`]), chosen by `recovery.probe-method`
//! and `recovery.portal-probe-method` (per portal), or per portal automatically (`auto`).
//!
//! `auto` starts with TCP. A refused connect (the host answered with a reset: it is up, but
//! nothing listens on the port) is followed by a neighbour probe; when the host answers that,
//! the portal is an iSER portal with no TCP listener (an array's iSER-only port) and is probed
//! by ARP/ND from then on. A portal that has accepted a TCP connection since the daemon
//! started keeps TCP: its refusal means the target service is down, and a host that answers
//! ARP is not a target that is back. The choice and its reason are kept for `status`.
//!
//! The one place a probe becomes the engine's [`ProbeResult`]; the engine never learns the
//! method (it only needs "reachable or not").

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::neighbour::{NeighAnswer, NeighbourProber};
use super::probe::{verdict_of, PortalProber, ProbeResult, ProbeSource, TcpAnswer};
pub use crate::core::observe::PortalProbeView;
use crate::core::recovery::ProbeMethod;

/// The probe method of every portal: the global one and the per-portal exceptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeMethods {
    /// `recovery.probe-method`.
    pub global: ProbeMethod,
    /// `recovery.portal-probe-method`, parsed.
    pub per_portal: BTreeMap<SocketAddr, ProbeMethod>,
}

impl Default for ProbeMethods {
    fn default() -> Self {
        ProbeMethods {
            global: ProbeMethod::Auto,
            per_portal: BTreeMap::new(),
        }
    }
}

/// What `auto` learned about one portal.
#[derive(Debug, Clone, Default)]
struct Learned {
    /// It has accepted a TCP connection since the daemon started.
    tcp_accepted: bool,
    /// It was switched to the neighbour probe, and why.
    switched: Option<String>,
}

/// The probes, the methods and what `auto` learned.
pub struct PortalProbes {
    tcp: Arc<dyn PortalProber>,
    neighbour: Arc<dyn NeighbourProber>,
    methods: ProbeMethods,
    learned: Mutex<HashMap<SocketAddr, Learned>>,
}

impl std::fmt::Debug for PortalProbes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortalProbes")
            .field("methods", &self.methods)
            .finish_non_exhaustive()
    }
}

/// The method a portal was configured with, in words.
fn configured(m: ProbeMethod, per_portal: bool) -> String {
    let key = if per_portal {
        "recovery.portal-probe-method"
    } else {
        "recovery.probe-method"
    };
    let name = match m {
        ProbeMethod::Tcp => "tcp",
        ProbeMethod::Neighbour => "neighbour",
        ProbeMethod::Auto => "auto",
        ProbeMethod::None => "none",
    };
    format!("{key} = \"{name}\"")
}

impl PortalProbes {
    /// Probes by `tcp` and `neighbour` as `methods` says.
    pub fn new(
        tcp: Arc<dyn PortalProber>,
        neighbour: Arc<dyn NeighbourProber>,
        methods: ProbeMethods,
    ) -> Self {
        PortalProbes {
            tcp,
            neighbour,
            methods,
            learned: Mutex::new(HashMap::new()),
        }
    }

    /// The same methods and what `auto` learned so far, probing through `tcp` and
    /// `neighbour` (the simulator's copy of a host takes its copy of the probes this way).
    pub fn rewired(&self, tcp: Arc<dyn PortalProber>, neighbour: Arc<dyn NeighbourProber>) -> Self {
        PortalProbes {
            tcp,
            neighbour,
            methods: self.methods.clone(),
            learned: Mutex::new(self.learned().clone()),
        }
    }

    fn method_of(&self, portal: SocketAddr) -> (ProbeMethod, bool) {
        match self.methods.per_portal.get(&portal) {
            Some(m) => (*m, true),
            None => (self.methods.global, false),
        }
    }

    fn learned(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Learned>> {
        self.learned.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One probe of `portal`: the engine's verdict and the words for the log.
    pub fn probe(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        timeout: Duration,
    ) -> (ProbeResult, String) {
        let (method, _) = self.method_of(portal);
        match method {
            ProbeMethod::Tcp | ProbeMethod::None => {
                verdict_of(&self.tcp.probe(portal, source, timeout))
            }
            ProbeMethod::Neighbour => self.by_neighbour(portal, source, timeout, ""),
            ProbeMethod::Auto => self.auto(portal, source, timeout),
        }
    }

    fn by_neighbour(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        timeout: Duration,
        before: &str,
    ) -> (ProbeResult, String) {
        match self.neighbour.probe(portal, source, timeout) {
            Ok(a) => (
                if a.answered() {
                    ProbeResult::Reachable
                } else {
                    ProbeResult::Unreachable
                },
                format!("{before}neighbour probe: {a}"),
            ),
            Err(e) => (
                ProbeResult::Unreachable,
                format!("{before}neighbour probe: {e}"),
            ),
        }
    }

    fn auto(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        timeout: Duration,
    ) -> (ProbeResult, String) {
        let (switched, tcp_accepted) = {
            let l = self.learned();
            let e = l.get(&portal);
            (
                e.is_some_and(|e| e.switched.is_some()),
                e.is_some_and(|e| e.tcp_accepted),
            )
        };
        if switched {
            return self.by_neighbour(portal, source, timeout, "");
        }
        let tcp = self.tcp.probe(portal, source, timeout);
        match &tcp {
            Ok(a) if a.is_reachable() => {
                self.learned().entry(portal).or_default().tcp_accepted = true;
                verdict_of(&tcp)
            }
            Ok(TcpAnswer::Refused) if !tcp_accepted => {
                let (verdict, words) =
                    self.by_neighbour(portal, source, timeout, "tcp refused (no listener); ");
                if verdict == ProbeResult::Reachable {
                    self.learned().entry(portal).or_default().switched = Some(format!(
                        "chosen automatically: TCP to {portal} was refused while the host \
                         answered ARP/ND ({words}), as an iSER portal with no TCP listener does"
                    ));
                    (verdict, words)
                } else {
                    // The host did not answer either: report what TCP said.
                    (ProbeResult::Refused, words)
                }
            }
            _ => verdict_of(&tcp),
        }
    }

    /// How `portal` is probed now, and why.
    pub fn view(&self, portal: SocketAddr) -> PortalProbeView {
        let (method, per_portal) = self.method_of(portal);
        let why = configured(method, per_portal);
        let simple = |m: &str| PortalProbeView {
            method: m.into(),
            why: why.clone(),
        };
        match method {
            ProbeMethod::Tcp => simple("tcp"),
            ProbeMethod::Neighbour => simple("neighbour"),
            ProbeMethod::None => simple("none"),
            ProbeMethod::Auto => {
                let l = self.learned();
                match l.get(&portal) {
                    Some(Learned {
                        switched: Some(w), ..
                    }) => PortalProbeView {
                        method: "neighbour".into(),
                        why: format!("{why}, {w}"),
                    },
                    Some(Learned {
                        tcp_accepted: true, ..
                    }) => PortalProbeView {
                        method: "tcp".into(),
                        why: format!("{why}; the portal has accepted TCP, so it keeps TCP"),
                    },
                    _ => PortalProbeView {
                        method: "tcp".into(),
                        why: format!(
                            "{why}; ARP/ND instead if TCP is refused while the host answers"
                        ),
                    },
                }
            }
        }
    }
}

/// The neighbour answer a scripted host gives: answered on `netdev`.
pub fn answered_on(netdev: &str) -> NeighAnswer {
    NeighAnswer::Answered {
        netdev: netdev.into(),
        confirmed_ago: Duration::from_millis(3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::neighbour::ScriptedNeighbour;
    use crate::io::probe::ScriptedProber;

    fn setup(methods: ProbeMethods) -> (Arc<ScriptedProber>, Arc<ScriptedNeighbour>, PortalProbes) {
        let tcp = Arc::new(ScriptedProber::default());
        let nb = Arc::new(ScriptedNeighbour::default());
        let p = PortalProbes::new(tcp.clone(), nb.clone(), methods);
        (tcp, nb, p)
    }

    const T: Duration = Duration::from_millis(400);

    fn portal() -> SocketAddr {
        "192.0.2.2:3260".parse().unwrap()
    }

    #[test]
    fn auto_switches_a_portal_refused_while_the_host_answers_arp() {
        let (tcp, nb, p) = setup(ProbeMethods::default());
        assert_eq!(p.view(portal()).method, "tcp");
        tcp.push(portal(), [TcpAnswer::Refused]);
        nb.push(portal(), [answered_on("ini0"), answered_on("ini0")]);
        let (v, words) = p.probe(portal(), &ProbeSource::default(), T);
        assert_eq!(v, ProbeResult::Reachable, "{words}");
        assert!(
            words.contains("tcp refused") && words.contains("ini0"),
            "{words}"
        );
        let view = p.view(portal());
        assert_eq!(view.method, "neighbour");
        assert!(view.why.contains("no TCP listener"), "{}", view.why);
        // From now on ARP/ND only: no more TCP connects.
        let (v, _) = p.probe(portal(), &ProbeSource::default(), T);
        assert_eq!(v, ProbeResult::Reachable);
        assert_eq!(tcp.calls().len(), 1);
        assert_eq!(nb.calls().len(), 2);
    }

    #[test]
    fn auto_keeps_tcp_for_a_portal_that_accepted_tcp_before() {
        let (tcp, nb, p) = setup(ProbeMethods::default());
        let rtt = Duration::from_millis(1);
        tcp.push(portal(), [TcpAnswer::Reachable { rtt }, TcpAnswer::Refused]);
        nb.push(portal(), [answered_on("ini0")]);
        assert_eq!(
            p.probe(portal(), &ProbeSource::default(), T).0,
            ProbeResult::Reachable
        );
        // The target service went down: the host still answers ARP, but that is not "back".
        assert_eq!(
            p.probe(portal(), &ProbeSource::default(), T).0,
            ProbeResult::Refused
        );
        assert!(nb.calls().is_empty());
        assert_eq!(p.view(portal()).method, "tcp");
    }

    #[test]
    fn auto_refused_and_silent_stays_refused_and_on_tcp() {
        let (tcp, _nb, p) = setup(ProbeMethods::default());
        tcp.push(portal(), [TcpAnswer::Refused]);
        let (v, words) = p.probe(portal(), &ProbeSource::default(), T);
        assert_eq!(v, ProbeResult::Refused);
        assert!(words.contains("no ARP/ND answer"), "{words}");
        assert_eq!(p.view(portal()).method, "tcp");
        // A timeout never asks ARP: the host did not answer at all.
        let (v, _) = p.probe(portal(), &ProbeSource::default(), T);
        assert_eq!(v, ProbeResult::Unreachable);
    }

    #[test]
    fn a_configured_method_is_used_and_named() {
        let mut m = ProbeMethods {
            global: ProbeMethod::Tcp,
            per_portal: BTreeMap::new(),
        };
        m.per_portal.insert(portal(), ProbeMethod::Neighbour);
        let (tcp, nb, p) = setup(m);
        nb.push(portal(), [answered_on("ini0")]);
        assert_eq!(
            p.probe(portal(), &ProbeSource::default(), T).0,
            ProbeResult::Reachable
        );
        assert!(tcp.calls().is_empty());
        let v = p.view(portal());
        assert_eq!(v.method, "neighbour");
        assert_eq!(v.why, "recovery.portal-probe-method = \"neighbour\"");
        let other: SocketAddr = "192.0.2.3:3260".parse().unwrap();
        assert_eq!(p.view(other).method, "tcp");
        assert_eq!(
            p.probe(other, &ProbeSource::default(), T).0,
            ProbeResult::Unreachable
        );
    }
}
