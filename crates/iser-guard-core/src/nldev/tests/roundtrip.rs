//! Property tests: random typed messages survive encode → decode unchanged, and decoding
//! their bytes then encoding again gives the same bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use netlink_packet_core::{DefaultNla, NetlinkHeader, NetlinkPayload, NLA_F_NESTED};
use proptest::prelude::*;

use crate::nldev::*;
use crate::qp::{QpState, QpType};

fn kernel_string() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,24}"
}

fn sock_addr() -> impl Strategy<Value = SockAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| {
            SockAddr::from_socket_addr(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
        }),
        (any::<[u8; 16]>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(
            |(ip, port, flow, scope)| {
                let a = SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope);
                SockAddr::from_socket_addr(SocketAddr::V6(a))
            }
        ),
        // Any other family: raw bytes.
        proptest::collection::vec(any::<u8>(), 128)
            .prop_map(|v| SockAddr::from_bytes(&v).expect("128 bytes")),
    ]
}

fn scalar() -> impl Strategy<Value = NldevAttribute> {
    use NldevAttribute as A;
    prop_oneof![
        any::<u32>().prop_map(A::DevIndex),
        kernel_string().prop_map(A::DevName),
        any::<u32>().prop_map(A::PortIndex),
        any::<u64>().prop_map(A::CapFlags),
        kernel_string().prop_map(A::FwVersion),
        any::<u64>().prop_map(A::NodeGuid),
        any::<u8>().prop_map(A::Lmc),
        any::<u8>().prop_map(|v| A::PortState(IbPortState::from(v))),
        any::<u8>().prop_map(|v| A::PortPhysState(PhysState::from(v))),
        any::<u32>().prop_map(A::ResLqpn),
        any::<u32>().prop_map(A::ResRqpn),
        any::<u32>().prop_map(A::ResSqPsn),
        any::<u8>().prop_map(A::ResType),
        any::<u8>().prop_map(A::ResState),
        any::<u8>().prop_map(A::ResPathMigState),
        kernel_string().prop_map(A::ResKernName),
        any::<u32>().prop_map(A::ResPid),
        sock_addr().prop_map(A::ResSrcAddr),
        sock_addr().prop_map(A::ResDstAddr),
        any::<u32>().prop_map(A::NdevIndex),
        kernel_string().prop_map(A::NdevName),
        any::<i32>().prop_map(A::DriverS32),
        any::<i64>().prop_map(A::DriverS64),
        kernel_string().prop_map(A::LinkType),
        any::<u8>().prop_map(A::SysAttrMonitorMode),
        any::<u8>().prop_map(A::EventType),
        // Unknown attribute types, sometimes flagged NLA_F_NESTED, any payload.
        (
            104u16..0x3fff,
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..16)
        )
            .prop_map(|(kind, nested, value)| {
                let kind = if nested { kind | NLA_F_NESTED } else { kind };
                A::Other(DefaultNla::new(kind, value))
            }),
    ]
}

fn attribute() -> impl Strategy<Value = NldevAttribute> {
    use NldevAttribute as A;
    scalar().prop_recursive(3, 32, 6, |inner| {
        (
            proptest::collection::vec(inner, 0..6),
            any::<bool>(),
            0..4u8,
        )
            .prop_map(|(attributes, nla_f_nested, which)| {
                let n = Nested {
                    attributes,
                    nla_f_nested,
                };
                match which {
                    0 => A::ResQp(n),
                    1 => A::ResQpEntry(n),
                    2 => A::ResCmIdEntry(n),
                    _ => A::Driver(n),
                }
            })
    })
}

fn command() -> impl Strategy<Value = NldevCommand> {
    prop_oneof![
        (1u16..=28).prop_map(NldevCommand::from),
        // Ops this version does not know, below the 10-bit limit.
        (29u16..1024).prop_map(NldevCommand::Other),
        Just(NldevCommand::Other(0)),
        Just(NldevCommand::Other(8)),
    ]
}

fn netlink_message() -> impl Strategy<Value = NldevNetlinkMessage> {
    (
        command(),
        proptest::collection::vec(attribute(), 0..8),
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(command, attributes, flags, seq, pid)| {
            let mut header = NetlinkHeader::default();
            header.flags = flags;
            header.sequence_number = seq;
            header.port_number = pid;
            let mut m = NldevNetlinkMessage::new(
                header,
                NetlinkPayload::InnerMessage(NldevMessage::new(command, attributes)),
            );
            m.finalize();
            m
        })
}

fn qp_entry() -> impl Strategy<Value = QpEntry> {
    let types = prop_oneof![
        (0u8..=10).prop_map(QpTypeOrRaw::from),
        Just(QpTypeOrRaw::Known(QpType::Driver)),
        (11u8..0xff).prop_map(QpTypeOrRaw::Raw),
    ];
    let kernel_or_user = prop_oneof![
        kernel_string().prop_map(|n| (None, Some(n))),
        any::<u32>().prop_map(|p| (Some(p), None)),
    ];
    (
        (
            any::<Option<u32>>(),
            any::<u32>(),
            any::<Option<u32>>(),
            types,
        ),
        (
            0usize..7,
            kernel_or_user,
            any::<Option<u32>>(),
            any::<Option<u32>>(),
        ),
        (any::<Option<u8>>(), any::<Option<u32>>()),
    )
        .prop_map(
            |(
                (port, lqpn, rqpn, qp_type),
                (state, (pid, kern_name), sq_psn, rq_psn),
                (pm, pdn),
            )| {
                QpEntry {
                    dev_index: 0,
                    dev_name: String::new(),
                    port,
                    lqpn,
                    rqpn,
                    qp_type,
                    state: QpState::ALL[state],
                    pid,
                    kern_name,
                    sq_psn,
                    rq_psn,
                    path_mig_state: pm,
                    pdn,
                }
            },
        )
}

proptest! {
    #[test]
    fn typed_messages_round_trip(m in netlink_message()) {
        let bytes = encode(&m).unwrap();
        let back = decode(&bytes).unwrap();
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(encode(&back).unwrap(), bytes);
    }

    #[test]
    fn qp_dumps_round_trip_through_the_views(
        dev_index in any::<u32>(),
        dev_name in kernel_string(),
        qps in proptest::collection::vec(qp_entry(), 0..40),
    ) {
        let qps: Vec<QpEntry> = qps
            .into_iter()
            .map(|q| QpEntry { dev_index, dev_name: dev_name.clone(), ..q })
            .collect();
        let msg = QpEntry::dump_message(dev_index, &dev_name, &qps);
        let nl = request::request(msg.command, msg.attributes, 2, 9);
        let bytes = encode(&nl).unwrap();
        let back = decode(&bytes).unwrap();
        let got: Vec<QpEntry> = QpEntries::new(inner(&back).unwrap())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        prop_assert_eq!(got, qps);
    }

    #[test]
    fn monitor_events_round_trip_through_the_views(
        event in (0u8..8).prop_map(MonitorEventType::from),
        dev_index in any::<u32>(),
        dev_name in kernel_string(),
        port in any::<Option<u32>>(),
        netdev in any::<Option<(u32, bool)>>(),
    ) {
        let e = MonitorEvent {
            event,
            dev_index: Some(dev_index),
            dev_name: Some(dev_name),
            port,
            netdev_index: netdev.map(|n| n.0),
            netdev_name: netdev.and_then(|n| n.1.then(|| "eth0".to_string())),
        };
        let nl = request::request(NldevCommand::Monitor, e.to_message().attributes, 0, 0);
        let back = decode(&encode(&nl).unwrap()).unwrap();
        prop_assert_eq!(MonitorEvent::try_from(inner(&back).unwrap()).unwrap(), e);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_decoded_bytes_re_encode(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        if let Ok(m) = decode(&bytes) {
            prop_assert_eq!(encode(&m).unwrap(), bytes);
        }
    }
}

proptest! {
    #[test]
    fn streaming_qp_reader_agrees_with_the_tree(
        m in netlink_message(),
        qps in proptest::collection::vec(qp_entry(), 0..10),
    ) {
        // Random messages (mostly other commands), and random QP dumps with random extra
        // attributes mixed into the table.
        super::equivalence::assert_equivalent(&encode(&m).unwrap());
        let mut msg = QpEntry::dump_message(3, "mlx5_0", &qps);
        if let NetlinkPayload::InnerMessage(extra) = &m.payload {
            if let Some(NldevAttribute::ResQp(table)) = msg.attributes.get_mut(2) {
                table.attributes.extend(extra.attributes.iter().take(2).cloned());
            }
            msg.attributes.extend(extra.attributes.iter().take(2).cloned());
        }
        let nl = request::request(msg.command, msg.attributes, 2, 5);
        super::equivalence::assert_equivalent(&encode(&nl).unwrap());
    }
}
