//! The simulated network's answers to portal probes, through the daemon's own probe choice
//! ([`PortalProbes`]): a target with no TCP listener (an iSER-only portal) refuses TCP while
//! its host answers ARP/ND, so `auto` switches that portal to the neighbour probe exactly as
//! the daemon does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::io::neighbour::{NeighAnswer, NeighbourProber};
use crate::io::probe::{PortalProber, ProbeError, ProbeSource, TcpAnswer};
use crate::io::probe_choice::{PortalProbes, ProbeMethods};

/// What the simulated network answers now, per portal (set before each probe).
#[derive(Debug, Default)]
pub struct SimNet {
    answers: Mutex<HashMap<SocketAddr, (TcpAnswer, NeighAnswer)>>,
}

impl SimNet {
    fn set(&self, portal: SocketAddr, tcp: TcpAnswer, neighbour: NeighAnswer) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(portal, (tcp, neighbour));
    }

    fn get(&self, portal: SocketAddr) -> Option<(TcpAnswer, NeighAnswer)> {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&portal)
            .cloned()
    }
}

impl PortalProber for SimNet {
    fn probe(
        &self,
        portal: SocketAddr,
        _source: &ProbeSource,
        _timeout: Duration,
    ) -> Result<TcpAnswer, ProbeError> {
        Ok(self.get(portal).map_or(TcpAnswer::Timeout, |a| a.0))
    }
}

impl NeighbourProber for SimNet {
    fn probe(
        &self,
        portal: SocketAddr,
        _source: &ProbeSource,
        _timeout: Duration,
    ) -> Result<NeighAnswer, ProbeError> {
        Ok(self.get(portal).map_or(
            NeighAnswer::NoAnswer {
                netdev: "?".into(),
                state: None,
            },
            |a| a.1,
        ))
    }
}

/// The simulated host's probes: its network and the daemon's probe choice over it.
#[derive(Debug)]
pub struct SimProbes {
    net: Arc<SimNet>,
    probes: PortalProbes,
}

impl SimProbes {
    /// Probes chosen by `methods` (the daemon's default: `auto`).
    pub fn new(methods: ProbeMethods) -> Self {
        let net = Arc::new(SimNet::default());
        let probes = PortalProbes::new(net.clone(), net.clone(), methods);
        SimProbes { net, probes }
    }

    /// One probe of `portal`, the network answering `tcp` and `neighbour`.
    pub fn probe(
        &self,
        portal: SocketAddr,
        tcp: TcpAnswer,
        neighbour: NeighAnswer,
        timeout: Duration,
    ) -> (crate::io::probe::ProbeResult, String) {
        self.net.set(portal, tcp, neighbour);
        self.probes.probe(portal, &ProbeSource::default(), timeout)
    }

    /// The probe choice, for `status`.
    pub fn choice(&self) -> &PortalProbes {
        &self.probes
    }
}

impl Default for SimProbes {
    fn default() -> Self {
        SimProbes::new(ProbeMethods::default())
    }
}

impl Clone for SimProbes {
    fn clone(&self) -> Self {
        let net = Arc::new(SimNet {
            answers: Mutex::new(
                self.net
                    .answers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            ),
        });
        let probes = self.probes.rewired(net.clone(), net.clone());
        SimProbes { net, probes }
    }
}
