//! Which RDMA device and port carries each iSCSI session.
//!
//! iscsiadm names a session's iface (transport `iser`, local IP address, sometimes a netdev);
//! the RDMA netlink port dump and sysfs name each port's netdev; the host's interface list
//! links addresses to netdevs. Joining the three gives, for every iSER session, the one port
//! whose GSI QP its logins depend on. Pure: the caller gathers the three lists.

use std::net::IpAddr;

/// What a session says about its local end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd<'a> {
    /// `Iface Transport:` (`iser`, `tcp`, …).
    pub transport: &'a str,
    /// `Iface IPaddress:` when set (`<empty>`/`default` are not addresses).
    pub ip: Option<IpAddr>,
    /// `Iface Netdev:` when set.
    pub netdev: Option<&'a str>,
}

/// One address configured on a netdev.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetdevAddr {
    /// Interface name (`ens2f0np0`).
    pub netdev: String,
    /// An address on it.
    pub ip: IpAddr,
}

/// One RDMA port and the netdev it runs over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaPortNetdev {
    /// RDMA device name (`rocep2s0f0`).
    pub device: String,
    /// Port number (from 1).
    pub port: u32,
    /// Its netdev (`ens2f0np0`).
    pub netdev: String,
}

/// Where a session lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this RDMA port.
    Port {
        /// RDMA device name.
        device: String,
        /// Port number.
        port: u32,
        /// The netdev that linked them.
        netdev: String,
    },
    /// Not an iSER session: nothing RDMA to guard.
    NotIser,
    /// An iSER session whose port could not be found, with the reason.
    Unknown(String),
}

/// Finds the RDMA port of a session.
///
/// The iface's netdev wins when iscsiadm names one; otherwise its IP address is looked up
/// among the host's addresses. iSER ifaces left at `default` name neither; then, if the host
/// has exactly one RDMA port, that is the answer, since there is nowhere else the session
/// could run.
pub fn place(
    session: &SessionEnd<'_>,
    addrs: &[NetdevAddr],
    ports: &[RdmaPortNetdev],
) -> Placement {
    if session.transport != "iser" {
        return Placement::NotIser;
    }
    let netdev: Option<&str> = match (session.netdev, session.ip) {
        (Some(n), _) => Some(n),
        (None, Some(ip)) => match addrs.iter().find(|a| a.ip == ip) {
            Some(a) => Some(a.netdev.as_str()),
            None => {
                return Placement::Unknown(format!("no local interface has the iface address {ip}"))
            }
        },
        (None, None) => None,
    };
    match netdev {
        Some(n) => match ports.iter().find(|p| p.netdev == n) {
            Some(p) => Placement::Port {
                device: p.device.clone(),
                port: p.port,
                netdev: p.netdev.clone(),
            },
            None => Placement::Unknown(format!("no RDMA port runs over netdev {n}")),
        },
        None => match ports {
            [only] => Placement::Port {
                device: only.device.clone(),
                port: only.port,
                netdev: only.netdev.clone(),
            },
            [] => Placement::Unknown("the host has no RDMA port".into()),
            _ => Placement::Unknown(
                "the iface names no address or netdev and the host has several RDMA ports".into(),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> Vec<RdmaPortNetdev> {
        vec![
            RdmaPortNetdev {
                device: "rocep2s0f0".into(),
                port: 1,
                netdev: "ens2f0np0".into(),
            },
            RdmaPortNetdev {
                device: "rocep2s0f1".into(),
                port: 1,
                netdev: "ens2f1np1".into(),
            },
        ]
    }

    fn addrs() -> Vec<NetdevAddr> {
        vec![
            NetdevAddr {
                netdev: "ens2f0np0".into(),
                ip: "192.0.2.1".parse().unwrap(),
            },
            NetdevAddr {
                netdev: "ens2f1np1".into(),
                ip: "198.51.100.1".parse().unwrap(),
            },
            NetdevAddr {
                netdev: "ens2f1np1".into(),
                ip: "2001:db8::1".parse().unwrap(),
            },
        ]
    }

    #[test]
    fn iface_address_leads_to_the_port_of_its_netdev() {
        let s = SessionEnd {
            transport: "iser",
            ip: Some("2001:db8::1".parse().unwrap()),
            netdev: None,
        };
        assert_eq!(
            place(&s, &addrs(), &ports()),
            Placement::Port {
                device: "rocep2s0f1".into(),
                port: 1,
                netdev: "ens2f1np1".into()
            }
        );
    }

    #[test]
    fn named_netdev_wins_over_address() {
        let s = SessionEnd {
            transport: "iser",
            ip: Some("192.0.2.1".parse().unwrap()),
            netdev: Some("ens2f1np1"),
        };
        assert!(
            matches!(place(&s, &addrs(), &ports()), Placement::Port { device, .. } if device == "rocep2s0f1")
        );
    }

    #[test]
    fn tcp_sessions_are_not_guarded() {
        let s = SessionEnd {
            transport: "tcp",
            ip: None,
            netdev: None,
        };
        assert_eq!(place(&s, &addrs(), &ports()), Placement::NotIser);
    }

    #[test]
    fn default_iface_uses_the_only_port_or_says_why_not() {
        let s = SessionEnd {
            transport: "iser",
            ip: None,
            netdev: None,
        };
        let one = &ports()[..1];
        assert!(matches!(place(&s, &addrs(), one), Placement::Port { .. }));
        assert!(
            matches!(place(&s, &addrs(), &ports()), Placement::Unknown(r) if r.contains("several"))
        );
        assert!(matches!(place(&s, &addrs(), &[]), Placement::Unknown(_)));
    }

    #[test]
    fn unknown_address_or_netdev_is_reported() {
        let s = SessionEnd {
            transport: "iser",
            ip: Some("203.0.113.9".parse().unwrap()),
            netdev: None,
        };
        assert!(
            matches!(place(&s, &addrs(), &ports()), Placement::Unknown(r) if r.contains("203.0.113.9"))
        );
        let s = SessionEnd {
            transport: "iser",
            ip: None,
            netdev: Some("eth9"),
        };
        assert!(
            matches!(place(&s, &addrs(), &ports()), Placement::Unknown(r) if r.contains("eth9"))
        );
    }
}
