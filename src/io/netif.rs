//! The host's network interfaces and their addresses (getifaddrs), to link iSCSI iface
//! addresses to netdevs.

use crate::core::session_map::NetdevAddr;

/// Every IPv4/IPv6 address configured on the host, with its interface.
pub fn addresses() -> std::io::Result<Vec<NetdevAddr>> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)? {
        let Some(addr) = ifa.address else { continue };
        let ip = if let Some(v4) = addr.as_sockaddr_in() {
            std::net::IpAddr::V4(v4.ip())
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            std::net::IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        out.push(NetdevAddr {
            netdev: ifa.interface_name,
            ip,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_has_its_address() {
        let addrs = super::addresses().unwrap();
        assert!(
            addrs
                .iter()
                .any(|a| a.ip == std::net::IpAddr::from([127, 0, 0, 1])),
            "{addrs:?}"
        );
    }
}
