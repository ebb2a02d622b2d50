//! Derived fixtures (tests/fixtures/nldev/derived): RES_CM_ID_GET and RES_QP_GET dumps of a
//! host where an NVMe-over-RDMA controller shares the initiator's port with iSER. The lab
//! has no NVMe target yet, so no kernel produced them: each is a real capture (k612,
//! moment 1-loggedin, device rxe_ini) with entries added by the recipe below and written
//! by this codec's encoder. The test rebuilds every file from its capture and recipe and
//! compares bytes, so the files cannot drift from what the recipe says; run it with
//! `ISER_GUARD_WRITE_DERIVED=1` to write them again after changing a recipe.

use std::net::SocketAddr;
use std::path::PathBuf;

use netlink_packet_core::NetlinkPayload;

use super::fixture;
use crate::nldev::*;

/// nvme_rdma's queues of one controller to 192.0.2.2:4420 (an admin queue and one I/O
/// queue): (cm-idn, lqpn, source port).
const NVME_QUEUES: [(u32, u32, u16); 2] = [(3, 19, 40001), (4, 20, 40002)];

fn derived_dir() -> PathBuf {
    fixture::root().join("derived")
}

/// A capture's request and replies, with one reply message changed by `recipe`.
fn derive(capture: &str, recipe: impl Fn(&mut NldevMessage)) -> (Vec<u8>, Vec<Vec<u8>>) {
    let c = fixture::load(&fixture::root().join(capture));
    let mut replies = Vec::new();
    for bytes in &c.replies {
        let mut m = decode(bytes).expect("a captured message decodes");
        if let NetlinkPayload::InnerMessage(inner) = &mut m.payload {
            recipe(inner);
        }
        replies.push(encode(&m).expect("the derived message encodes"));
    }
    (c.request, replies)
}

/// The nest of `table` entries in `m`.
fn table(m: &mut NldevMessage) -> &mut Vec<NldevAttribute> {
    m.attributes
        .iter_mut()
        .find_map(|a| match a {
            NldevAttribute::ResCmId(n) | NldevAttribute::ResQp(n) => Some(&mut n.attributes),
            _ => None,
        })
        .expect("the capture has a resource table")
}

/// ib_iser's CONNECT entry, copied for each NVMe queue with its own id, QP, ports and owner.
fn add_nvme_cm_ids(m: &mut NldevMessage) {
    let t = table(m);
    let NldevAttribute::ResCmIdEntry(iser) = t[0].clone() else {
        panic!("the capture's first CM id is ib_iser's connection");
    };
    for (idn, lqpn, sport) in NVME_QUEUES {
        let attributes = iser
            .attributes
            .iter()
            .map(|a| match a {
                NldevAttribute::ResLqpn(_) => NldevAttribute::ResLqpn(lqpn),
                NldevAttribute::ResCmIdn(_) => NldevAttribute::ResCmIdn(idn),
                NldevAttribute::ResKernName(_) => NldevAttribute::ResKernName("nvme_rdma".into()),
                NldevAttribute::ResSrcAddr(_) => NldevAttribute::ResSrcAddr(
                    SockAddr::from_socket_addr(addr(&format!("192.0.2.1:{sport}"))),
                ),
                NldevAttribute::ResDstAddr(_) => {
                    NldevAttribute::ResDstAddr(SockAddr::from_socket_addr(addr("192.0.2.2:4420")))
                }
                other => other.clone(),
            })
            .collect();
        t.push(NldevAttribute::ResCmIdEntry(Nested::new(attributes)));
    }
}

/// The iSER connection's QP (rdma_cm, RC, RTS), copied for each NVMe queue's QP.
fn add_nvme_qps(m: &mut NldevMessage) {
    let t = table(m);
    let NldevAttribute::ResQpEntry(iser) = t[0].clone() else {
        panic!("the capture's first QP is the iSER connection's");
    };
    for (_, lqpn, _) in NVME_QUEUES {
        let attributes = iser
            .attributes
            .iter()
            .map(|a| match a {
                NldevAttribute::ResLqpn(_) => NldevAttribute::ResLqpn(lqpn),
                NldevAttribute::ResRqpn(_) => NldevAttribute::ResRqpn(lqpn),
                other => other.clone(),
            })
            .collect();
        t.push(NldevAttribute::ResQpEntry(Nested::new(attributes)));
    }
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("a socket address")
}

/// (derived file, capture it starts from, recipe, what it adds).
type Recipe = (
    &'static str,
    &'static str,
    fn(&mut NldevMessage),
    &'static str,
);

const RECIPES: [Recipe; 2] = [
    (
        "nvme-cm-id-dump-dev0.hex",
        "k612/nldev-1-loggedin/10-res-cm-id-get-dump-dev0.hex",
        add_nvme_cm_ids,
        "two nvme_rdma CM ids (cm-idn 3 and 4, lqpn 19 and 20, CONNECT, 192.0.2.1:40001 and \
         :40002 to 192.0.2.2:4420), copied from the ib_iser entry",
    ),
    (
        "nvme-qp-dump-dev0.hex",
        "k612/nldev-1-loggedin/08-res-qp-get-dump-dev0.hex",
        add_nvme_qps,
        "QPs 19 and 20 (rdma_cm, RC, RTS), copied from the iSER connection's QP 18",
    ),
];

fn render(capture: &str, what: &str, request: &[u8], replies: &[Vec<u8>]) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut s = format!(
        "# derived: from {capture} (a real capture, see ../README.md) by the recipe in \
         crates/iser-guard-core/src/nldev/tests/derived.rs: {what}; written by the codec's \
         encoder\n# format: as the captures: the first data line is the request as sent, \
         each further data line one reply message\n"
    );
    s.push_str(&hex(request));
    s.push('\n');
    for r in replies {
        s.push_str(&hex(r));
        s.push('\n');
    }
    s
}

/// The replies of a derived file, decoded.
fn load(name: &str) -> Vec<NldevMessage> {
    let text = std::fs::read_to_string(derived_dir().join(name)).expect("derived fixture");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1)
        .map(|l| decode(&fixture::unhex(l)).expect("a derived message decodes"))
        .filter_map(|m| match m.payload {
            NetlinkPayload::InnerMessage(inner) => Some(inner),
            _ => None,
        })
        .collect()
}

/// The CM ids of the derived dump: the captured ib_iser connection and nvme_rdma's two.
pub(crate) fn nvme_cm_ids() -> Vec<CmIdEntry> {
    load("nvme-cm-id-dump-dev0.hex")
        .iter()
        .flat_map(|m| CmIdEntry::all(m).expect("a CM id reply"))
        .map(|e| e.expect("a CM id entry"))
        .collect()
}

/// The QPs of the derived dump: the captured QP 18 and QP 1, and nvme_rdma's QPs 19 and 20.
pub(crate) fn nvme_qps() -> Vec<QpEntry> {
    load("nvme-qp-dump-dev0.hex")
        .iter()
        .flat_map(|m| QpEntries::new(m).expect("a QP reply").collect::<Vec<_>>())
        .map(|e| e.expect("a QP entry"))
        .collect()
}

#[test]
fn derived_fixtures_are_their_capture_with_the_recipe_applied() {
    let write = std::env::var_os("ISER_GUARD_WRITE_DERIVED").is_some();
    for (name, capture, recipe, what) in RECIPES {
        let (request, replies) = derive(capture, recipe);
        let text = render(capture, what, &request, &replies);
        let path = derived_dir().join(name);
        if write {
            std::fs::create_dir_all(derived_dir()).expect("derived dir");
            std::fs::write(&path, &text).expect("write derived fixture");
        }
        let on_disk = std::fs::read_to_string(&path).expect("derived fixture present");
        assert_eq!(on_disk, text, "{name} differs from its recipe's output");
    }
}

#[test]
fn derived_dumps_decode_to_the_captured_entries_plus_nvme_rdma() {
    let ids = nvme_cm_ids();
    let owners: Vec<Option<&str>> = ids.iter().map(|i| i.kern_name.as_deref()).collect();
    assert_eq!(
        owners,
        [Some("ib_iser"), Some("nvme_rdma"), Some("nvme_rdma")]
    );
    assert_eq!(ids[2].dst(), Some(addr("192.0.2.2:4420")));
    assert_eq!(ids[2].lqpn, Some(20));
    let qps: Vec<u32> = nvme_qps().iter().map(|q| q.lqpn).collect();
    assert_eq!(qps, [18, 1, 19, 20]);
}
