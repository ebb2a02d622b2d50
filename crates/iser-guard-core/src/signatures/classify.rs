//! The classifier: a prefilter that finds the distinctive words ("anchors") of every known
//! message in one pass, then a small hand-written parser per anchor.
//!
//! Why this shape: almost every kernel record matches nothing. One multi-pattern search
//! (Aho-Corasick with its SIMD prefilter) over the record's bytes rejects those at the cost
//! of a memchr-like scan, with no allocation and no UTF-8 check. Only records that contain an
//! anchor are decoded and parsed. Anchors contain neither `\` nor non-printable bytes, so a
//! record still in its /dev/kmsg escaped form (`\x09`) matches the same anchors as its
//! decoded form; it is decoded only once an anchor is found.

use std::borrow::Cow;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::device::{apply_dict_device, apply_prefix, NameRole};
use super::types::{
    IscsiErr, IserFailure, KernelBugKind, NamedDevices, RdmaDriver, Signature, SignatureKind,
};
use crate::qp::QpState;

/// The anchors, in pattern-id order. `distinctive` anchors occur only in the message they
/// belong to, so a record that contains one but does not parse is reported as
/// [`SignatureKind::UnknownVariant`] (the kernel's wording drifted); others are skipped.
/// `rank` orders anchors found in the same record (higher wins): the transition of qedr's
/// two-line message beats its mask line.
struct AnchorDef {
    text: &'static str,
    distinctive: bool,
    rank: u8,
    parse: fn(&str, usize, usize) -> Option<Parsed>,
}

/// A parser's result: the kind, and where the printk prefix ends (`None`: no prefix).
struct Parsed {
    kind: SignatureKind,
    prefix_end: Option<usize>,
    role: NameRole,
    /// Extra attribution found inside the message (`on device D port N`, `[sdX]`).
    extra: Option<NamedDevices>,
    /// Set by a sub-table dispatcher ([`dispatch`]) when a distinctive sub-anchor was found
    /// but its message did not parse: the record is then reported as drift, exactly as
    /// when a distinctive top-level anchor does not parse.
    drift: Option<&'static str>,
    /// The rank of the sub-table entry that parsed it, when it beats its anchor's.
    rank: Option<u8>,
}

impl Parsed {
    fn new(kind: SignatureKind, prefix_end: Option<usize>, role: NameRole) -> Option<Parsed> {
        Some(Parsed {
            kind,
            prefix_end,
            role,
            extra: None,
            drift: None,
            rank: None,
        })
    }
}

/// The top-level anchors: what the one multi-pattern search looks for. At most 32, so that
/// the search keeps its fastest SIMD prefilter (aho-corasick's Slim Teddy: Fat Teddy above
/// 32 patterns runs at half the speed, and above 64 there is no Teddy at all), and none
/// starting with a blank or a very common word: a common first three bytes make the
/// prefilter stop everywhere. Messages that share a distinctive word (`modify`,
/// `Couldn't `, `Failed to `, `iser: iser_`, `qp#`, …) have one anchor here and a
/// sub-table ([`SubDef`]) that the anchor's parser dispatches to.
#[rustfmt::skip]
const ANCHORS: &[AnchorDef] = &[
    // irdma, qedr, hns and the MAD layer's RTS failure: MODIFY_SUBS.
    AnchorDef { text: "modify", distinctive: false, rank: 9, parse: p_modify },
    // ib_mad `… on MAD QP (`, mlx5_ib/mlx4_ib `Unexpected event type … on QP `: p_on_qp.
    AnchorDef { text: " QP ", distinctive: false, rank: 7, parse: p_on_qp },
    // MAD port start-up: COULDNT_SUBS.
    AnchorDef { text: "Couldn't ", distinctive: false, rank: 7, parse: p_couldnt },
    AnchorDef { text: "abnormal ae_id = ", distinctive: true, rank: 7, parse: p_irdma_ae },
    // bnxt_re `Invalid attribute mask: `, rdma_rxe `invalid mask or state`: NVALID_SUBS.
    AnchorDef { text: "nvalid ", distinctive: false, rank: 6, parse: p_nvalid },
    AnchorDef { text: "qpn: ", distinctive: false, rank: 6, parse: p_qpn },
    // bnxt_re `curr_qp_state=`, qedr `old_qp_state=`: QP_STATE_SUBS.
    AnchorDef { text: "qp_state=", distinctive: false, rank: 9, parse: p_qp_state },
    // rdma_rxe `qp#N [func:] state -> X` / `qp#N [func:] moved to error state`.
    AnchorDef { text: " state -> ", distinctive: false, rank: 5, parse: p_rxe_state },
    AnchorDef { text: "moved to error state", distinctive: false, rank: 5, parse: p_rxe_moved_to_error },
    // libiscsi / scsi_transport_iscsi on the connection device (` connectionS:C: …`):
    // CONNECTION_SUBS.
    AnchorDef { text: "connection", distinctive: false, rank: 5, parse: p_connection },
    // iSCSI `session recovery timed out after `, SCSI `Device offlined - not ready after
    // error recovery`: RECOVERY_SUBS.
    AnchorDef { text: "recovery", distinctive: false, rank: 5, parse: p_recovery },
    // ib_iser (PFX "iser: " then `__func__`): ISER_SUBS and ISER_FAILURES.
    AnchorDef { text: "iser: iser_", distinctive: false, rank: 5, parse: p_iser },
    // "Failed to init task" (ib_iser), bnxt_re's HW QP failures: FAILED_TO_SUBS.
    AnchorDef { text: "Failed to ", distinctive: false, rank: 6, parse: p_failed_to },
    // scsi_logging.c `FAILED Result: hostbyte=`, sd.c `… failed: Result: hostbyte=`.
    AnchorDef { text: "Result: hostbyte=", distinctive: false, rank: 4, parse: p_result },
    // block: `I/O error, dev`, `recoverable transport error, dev`, ….
    AnchorDef { text: "error, dev ", distinctive: false, rank: 4, parse: p_error_dev },
    // scsi_lib.c `rejecting I/O to `, fs/buffer.c `Buffer I/O error on dev `: p_io.
    AnchorDef { text: "I/O ", distinctive: false, rank: 4, parse: p_io },
    AnchorDef { text: "RDMA CM: ", distinctive: false, rank: 4, parse: p_rdma_cm },
    // `infiniband D: set down|active`, old rxe `rxe: set D active`.
    AnchorDef { text: ": set ", distinctive: false, rank: 3, parse: p_set },
    // ice/i40e/bnxt_en `NIC Link is `, mlx5 `: Link down|up`: p_link.
    AnchorDef { text: "Link ", distinctive: false, rank: 3, parse: p_link },
    // mlx5_ib `…:(pid N): WC error: …` / `dump error cqe` (cq.c dump_cqe).
    AnchorDef { text: ":(pid ", distinctive: false, rank: 6, parse: p_mlx5_log },
    // SCSI error handling (scsi_error.c, scsi_lib.c) and buffer I/O (fs/buffer.c).
    AnchorDef { text: "timing out command, waited ", distinctive: true, rank: 4, parse: p_scsi_timing_out },
    // Kernel bug reports (arch/x86 dumpstack, kernel/panic.c, lib/bug.c, mm/kasan, hung_task).
    AnchorDef { text: "RIP: ", distinctive: false, rank: 2, parse: p_bug_rip },
    AnchorDef { text: "WARNING: CPU: ", distinctive: false, rank: 2, parse: p_bug_warning },
    AnchorDef { text: " BUG at ", distinctive: false, rank: 2, parse: p_bug_at },
    AnchorDef { text: "BUG: KASAN: ", distinctive: false, rank: 2, parse: p_bug_kasan },
    AnchorDef { text: "Kernel panic - not syncing: ", distinctive: false, rank: 2, parse: p_bug_panic },
    AnchorDef { text: "blocked for more than ", distinctive: false, rank: 2, parse: p_bug_hung_task },
    // irdma utils.c irdma_handle_cqp_op: `[%s Error][op_code=%d] status=%d …`.
    AnchorDef { text: "Error][op_code=", distinctive: true, rank: 7, parse: p_irdma_cqp },
    // irdma main.c / icrdma_if.c irdma_request_reset.
    AnchorDef { text: "Requesting a reset", distinctive: false, rank: 7, parse: p_reset_requested },
    // ice_main.c ice_rebuild.
    AnchorDef { text: "Rebuild failed, unload and reload driver", distinctive: false, rank: 6, parse: p_ice_rebuild_failed },
    // ice_main.c ice_probe / ice_load_pkg.
    AnchorDef { text: "Safe Mode", distinctive: false, rank: 5, parse: p_ice_safe_mode },
    // dm-mpath.c fail_path / reinstate_path (DM_MSG_PREFIX "multipath").
    AnchorDef { text: "multipath: ", distinctive: false, rank: 4, parse: p_multipath },
];

/// A message under a shared top-level anchor: its full text around the anchor (`text`
/// contains the anchor; what precedes it must precede the anchor in the record), whether a
/// parse failure means drift, and its parser, called as if `text` were the anchor.
struct SubDef {
    text: &'static str,
    distinctive: bool,
    /// Orders parses found in the same record, like [`AnchorDef`]'s `rank`.
    rank: u8,
    parse: fn(&str, usize, usize) -> Option<Parsed>,
}

#[rustfmt::skip]
const MODIFY_SUBS: &[SubDef] = &[
    // irdma verbs.c irdma_modify_qp_roce.
    SubDef { text: "modify_qp invalid for qp_id=", distinctive: true, rank: 9, parse: p_irdma_modify },
    // mad.c ib_mad_send_error; older mad_error_handler.
    SubDef { text: " - ib_modify_qp to RTS", distinctive: true, rank: 8, parse: p_mad_rts },
    // qedr verbs.c qedr_modify_qp.
    SubDef { text: "modify qp: invalid attribute mask=", distinctive: true, rank: 6, parse: p_qedr_mask },
    // irdma verbs.c irdma_wait_for_suspend.
    SubDef { text: "modify_qp timed out waiting for suspend. qp_id = ", distinctive: true, rank: 7, parse: p_irdma_suspend },
    // hns_roce_hw_v2.c / hns_roce_qp.c.
    SubDef { text: "ib_modify_qp_is_ok failed", distinctive: true, rank: 6, parse: p_hns },
    SubDef { text: "failed to check modify qp state", distinctive: true, rank: 6, parse: p_hns },
];

#[rustfmt::skip]
const QP_STATE_SUBS: &[SubDef] = &[
    SubDef { text: "curr_qp_state=", distinctive: true, rank: 9, parse: p_bnxt_state },
    SubDef { text: "old_qp_state=", distinctive: true, rank: 9, parse: p_qedr_state },
];

#[rustfmt::skip]
const COULDNT_SUBS: &[SubDef] = &[
    // mad.c ib_mad_port_start / ib_mad_init_device / ib_mad_port_open / create_mad_qp.
    SubDef { text: "Couldn't change QP", distinctive: true, rank: 7, parse: p_mad_start },
    SubDef { text: "Couldn't open port ", distinctive: true, rank: 7, parse: p_mad_port_open },
    SubDef { text: "Couldn't create ib_mad ", distinctive: true, rank: 7, parse: p_mad_setup },
    SubDef { text: "Couldn't start port", distinctive: true, rank: 7, parse: p_mad_setup },
    SubDef { text: "Couldn't post receive WRs", distinctive: true, rank: 7, parse: p_mad_setup },
];

/// libiscsi / scsi_transport_iscsi messages after the ` connectionS:C: ` prefix.
#[rustfmt::skip]
const CONNECTION_SUBS: &[SubDef] = &[
    // scsi_transport_iscsi.c iscsi_conn_error_event.
    SubDef { text: "detected conn error (", distinctive: true, rank: 5, parse: p_conn_error },
    // libiscsi.c iscsi_check_transport_timeouts.
    SubDef { text: "ping timeout of ", distinctive: true, rank: 5, parse: p_ping_timeout },
];

#[rustfmt::skip]
const COULD_NOT_SEND_SUBS: &[SubDef] = &[
    // libiscsi.c.
    SubDef { text: "Could not send nopout", distinctive: true, rank: 5, parse: p_nopout },
    SubDef { text: "Could not send TMF", distinctive: true, rank: 5, parse: p_tmf },
];

#[rustfmt::skip]
const FAILED_TO_SUBS: &[SubDef] = &[
    // ib_iser iscsi_iser.c iscsi_iser_task_init.
    SubDef { text: "Failed to init task ", distinctive: false, rank: 5, parse: p_task_init },
    // bnxt_re ib_verbs.c: the firmware refused a QP command.
    SubDef { text: "Failed to modify HW QP", distinctive: true, rank: 6, parse: p_bnxt_hw_qp },
    SubDef { text: "Failed to destroy HW QP", distinctive: true, rank: 6, parse: p_bnxt_hw_qp },
    SubDef { text: "Failed to create HW QP", distinctive: true, rank: 6, parse: p_bnxt_hw_qp },
    SubDef { text: "Failed to modify Shadow QP", distinctive: true, rank: 6, parse: p_bnxt_hw_qp },
];

#[rustfmt::skip]
const RESULT_SUBS: &[SubDef] = &[
    SubDef { text: "FAILED Result: hostbyte=", distinctive: true, rank: 4, parse: p_scsi_result },
    SubDef { text: "failed: Result: hostbyte=", distinctive: false, rank: 4, parse: p_scsi_result },
];

#[rustfmt::skip]
const ERROR_DEV_SUBS: &[SubDef] = &[
    // block/blk-mq.c blk_print_req_error with BLK_STS_IOERR; other statuses: p_block_error.
    SubDef { text: "I/O error, dev ", distinctive: true, rank: 4, parse: p_io_error },
];

#[rustfmt::skip]
const REJECTING_SUBS: &[SubDef] = &[
    // scsi_lib.c scsi_device_state_check.
    SubDef { text: "rejecting I/O to offline device", distinctive: true, rank: 4, parse: p_offline },
    SubDef { text: "rejecting I/O to dead device", distinctive: true, rank: 4, parse: p_scsi_dead },
];

#[rustfmt::skip]
const NVALID_SUBS: &[SubDef] = &[
    SubDef { text: "Invalid attribute mask: ", distinctive: true, rank: 6, parse: p_bnxt_mask },
    SubDef { text: "invalid mask or state", distinctive: true, rank: 6, parse: p_rxe_invalid },
];

#[rustfmt::skip]
const IO_SUBS: &[SubDef] = &[
    SubDef { text: "rejecting I/O to ", distinctive: false, rank: 4, parse: p_rejecting },
    SubDef { text: "Buffer I/O error on dev ", distinctive: true, rank: 4, parse: p_buffer_io_error },
];

/// Messages around the word `recovery`.
#[rustfmt::skip]
const RECOVERY_SUBS: &[SubDef] = &[
    // scsi_transport_iscsi.c session_recovery_timedout.
    SubDef { text: "session recovery timed out after ", distinctive: true, rank: 5, parse: p_recovery_timeout },
    // scsi_error.c scsi_eh_offline_sdevs.
    SubDef { text: "Device offlined - not ready after error recovery", distinctive: true, rank: 4, parse: p_scsi_offlined },
];

#[rustfmt::skip]
const SET_SUBS: &[SubDef] = &[
    // rxe_net.c rxe_port_down/up (dev_info on the ib device).
    SubDef { text: ": set down", distinctive: false, rank: 3, parse: p_set_down },
    SubDef { text: ": set active", distinctive: false, rank: 3, parse: p_set_active },
];

#[rustfmt::skip]
const LINK_SUBS: &[SubDef] = &[
    // mlx5 en_main.c mlx5e_update_carrier.
    SubDef { text: ": Link down", distinctive: false, rank: 3, parse: p_link_down },
    SubDef { text: ": Link up", distinctive: false, rank: 3, parse: p_link_up },
];

/// ib_iser messages by `__func__` (after `iser: `): iser_verbs.c.
#[rustfmt::skip]
const ISER_SUBS: &[SubDef] = &[
    SubDef { text: "iser_err_comp: ", distinctive: true, rank: 5, parse: p_iser_comp },
    SubDef { text: "iser_event_handler: async event ", distinctive: true, rank: 5, parse: p_iser_event },
    SubDef { text: "iser_qp_event_callback: qp event ", distinctive: true, rank: 5, parse: p_iser_qp_event },
];

/// Runs the sub-table entry found around the top-level `anchor` matched at `start`: the
/// part of the entry's text before the anchor must end at `start`, the rest start there.
fn dispatch(subs: &[SubDef], anchor: &str, s: &str, start: usize) -> Option<Parsed> {
    let sub = subs.iter().find_map(|d| {
        let at = d.text.find(anchor)?;
        let sub_start = start.checked_sub(at)?;
        s.get(sub_start..)?
            .starts_with(d.text)
            .then_some((d, sub_start))
    });
    let (sub, sub_start) = sub?;
    run_sub(sub, s, sub_start)
}

/// Parses with one sub-table entry whose text starts at `sub_start`.
fn run_sub(sub: &SubDef, s: &str, sub_start: usize) -> Option<Parsed> {
    match (sub.parse)(s, sub_start, sub_start + sub.text.len()) {
        Some(p) => Some(Parsed {
            rank: Some(sub.rank),
            ..p
        }),
        None if sub.distinctive => Some(drift(sub.text)),
        None => None,
    }
}

/// A distinctive message whose format did not parse: reported as drift.
fn drift(anchor: &'static str) -> Parsed {
    Parsed {
        kind: SignatureKind::UnknownVariant {
            anchor: String::new(),
        },
        prefix_end: None,
        role: NameRole::Auto,
        extra: None,
        drift: Some(anchor),
        rank: None,
    }
}

fn p_connection(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // " connection%d:%d: <message>" (the connection device's name, empty driver).
    let r = s.get(end..)?;
    let (_sid, r) = dec_u32(r)?;
    let (_cid, r) = dec_u32(r.strip_prefix(':')?)?;
    r.strip_prefix(": ")?;
    let msg_at = s.len() - r.len() + 2;
    let msg = s.get(msg_at..)?;
    if let Some(sub) = CONNECTION_SUBS.iter().find(|d| msg.starts_with(d.text)) {
        return run_sub(sub, s, msg_at);
    }
    if msg.starts_with("Could not send ") {
        return dispatch(COULD_NOT_SEND_SUBS, "Could not send ", s, msg_at);
    }
    None
}

fn p_modify(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(MODIFY_SUBS, "modify", s, start)
}

fn p_qp_state(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(QP_STATE_SUBS, "qp_state=", s, start)
}

fn p_qpn(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // bnxt_re: "for qpn: %#x type: %#x".
    let sub_start = start.checked_sub("for ".len())?;
    if !s.get(sub_start..start)?.eq("for ") {
        return None;
    }
    p_bnxt_qpn(s, sub_start, end)
}

fn p_nvalid(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(NVALID_SUBS, "nvalid ", s, start)
}

fn p_io(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(IO_SUBS, "I/O ", s, start)
}

fn p_recovery(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(RECOVERY_SUBS, "recovery", s, start)
}

fn p_on_qp(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // ib_mad "Fatal error (%d) on MAD QP (%d)"; mlx5_ib/mlx4_ib "Unexpected event type %d
    // on QP %06x".
    if let Some(mad) = start.checked_sub("MAD".len()) {
        if s.get(mad..)?.starts_with("MAD QP (") {
            return p_mad_fatal(s, mad, mad + "MAD QP (".len());
        }
    }
    let ue = "Unexpected event type ";
    let at = s.get(..start)?.rfind(ue)?;
    let _ = end;
    p_unexpected_event(s, at, at + ue.len())
}

fn p_result(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(RESULT_SUBS, "Result: hostbyte=", s, start)
}

fn p_scsi_result(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // p_scsi_failed reads `hostbyte=` itself.
    p_scsi_failed(s, start, end.checked_sub("hostbyte=".len())?)
}

fn p_error_dev(s: &str, start: usize, end: usize) -> Option<Parsed> {
    dispatch(ERROR_DEV_SUBS, "error, dev ", s, start).or_else(|| p_block_error(s, start, end))
}

fn p_set(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // Pre-5.x rxe: "rxe: set rxe0 active" / "rdma_rxe: set rxe0 down".
    if let Some(rxe) = start.checked_sub("rxe".len()) {
        if s.get(rxe..start) == Some("rxe") {
            if let Some(p) = p_rxe_legacy_port(s, rxe, end) {
                return Some(p);
            }
        }
    }
    dispatch(SET_SUBS, ": set ", s, start)
}

fn p_link(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    let nic = "NIC Link is ";
    if let Some(nic_start) = start.checked_sub("NIC ".len()) {
        if s.get(nic_start..)?.starts_with(nic) {
            return p_nic_link(s, nic_start, nic_start + nic.len());
        }
    }
    dispatch(LINK_SUBS, "Link ", s, start)
}

fn p_mlx5_log(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // "…:(pid %d): WC error: %d, Message: %s" / "…:(pid %d): dump error cqe".
    let r = s.get(end..)?;
    let close = r.find("): ")?;
    let paren = end + close;
    let msg_at = paren + "): ".len();
    let msg = s.get(msg_at..)?;
    if msg.starts_with("WC error: ") {
        p_mlx5_wc_error(s, msg_at, msg_at + "WC error: ".len())
    } else if msg.starts_with("dump error cqe") {
        match p_mlx5_dump_cqe(s, paren, msg_at + "dump error cqe".len()) {
            Some(p) => Some(p),
            None => Some(drift("): dump error cqe")),
        }
    } else {
        None
    }
}

fn p_couldnt(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(COULDNT_SUBS, "Couldn't ", s, start)
}

fn p_failed_to(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(FAILED_TO_SUBS, "Failed to ", s, start)
}

fn p_rejecting(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    dispatch(REJECTING_SUBS, "rejecting I/O to ", s, start)
}

fn p_iser(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    // "iser: <func>: <message>": the function's own messages first, then the connection
    // failures, which several functions print.
    let func_at = start + "iser: ".len();
    if let Some(p) = dispatch(ISER_SUBS, "iser_", s, func_at) {
        return Some(p);
    }
    let rest = s.get(func_at..)?;
    let colon = rest.find(": ")?;
    let msg_at = func_at + colon + 2;
    let msg = s.get(msg_at..)?;
    let (anchor, _) = ISER_FAILURES.iter().find(|(a, _)| msg.starts_with(a))?;
    p_iser_failure(s, msg_at, msg_at + anchor.len())
}

fn automaton() -> &'static AhoCorasick {
    static AC: OnceLock<AhoCorasick> = OnceLock::new();
    AC.get_or_init(|| {
        // A DFA: the fastest search kind; with ~30 short patterns it stays small (tens of
        // KiB). The build cannot fail for these fixed patterns; fall back to the default
        // kind just in case rather than panic.
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .kind(Some(AhoCorasickKind::DFA))
            .build(ANCHORS.iter().map(|a| a.text))
            .or_else(|_| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostFirst)
                    .build(ANCHORS.iter().map(|a| a.text))
            })
            .unwrap_or_else(|_| unreachable_automaton())
    })
}

#[cold]
fn unreachable_automaton() -> AhoCorasick {
    // An automaton over no pattern never matches: classification degrades to "nothing
    // recognised" instead of a panic. Building from an empty set cannot fail.
    #[allow(clippy::expect_used)]
    AhoCorasick::new(std::iter::empty::<&str>()).expect("an automaton over no pattern builds")
}

/// The distinctive words the prefilter searches for, one per known message shape (for
/// `grep -F -f` comparisons and documentation).
pub fn anchors() -> impl Iterator<Item = &'static str> {
    ANCHORS.iter().map(|a| a.text)
}

/// The cheap test run before any parsing: does `line` contain any anchor? `false` means
/// [`classify_bytes`] would return `None` for it.
#[inline]
pub fn prefilter(line: &[u8]) -> bool {
    automaton().is_match(line)
}

/// Offset of the first anchor at or after `from` in a buffer holding many lines, for
/// scanning a whole saved log in one pass (the caller then finds that line's bounds).
#[inline]
pub fn next_anchor(buf: &[u8], from: usize) -> Option<usize> {
    let hay = buf.get(from..)?;
    automaton().find(hay).map(|m| m.start() + from)
}

/// Classifies one kernel message. `text` is the record text after the header, decoded or
/// still `\xNN`-escaped; `dict_device` is the record's `DEVICE=` dictionary value without
/// the key (`+infiniband:rocep2s0f0`, `+pci:0000:02:00.0`, `n3`, …), if any.
pub fn classify(text: &str, dict_device: Option<&str>) -> Option<Signature> {
    classify_bytes(text.as_bytes(), dict_device.map(str::as_bytes))
}

/// [`classify`] on raw bytes (lines read from a file need not be UTF-8; invalid bytes only
/// matter inside a recognised line, where they are replaced).
pub fn classify_bytes(text: &[u8], dict_device: Option<&[u8]>) -> Option<Signature> {
    classify_inner(text, dict_device, true)
}

/// [`classify`] for text whose `\xNN` escapes are already decoded (a parsed
/// [`crate::kmsg::Record`]): a literal `\x41` in it stays as it is.
pub fn classify_decoded(text: &str, dict_device: Option<&str>) -> Option<Signature> {
    classify_inner(text.as_bytes(), dict_device.map(str::as_bytes), false)
}

fn classify_inner(text: &[u8], dict_device: Option<&[u8]>, escaped: bool) -> Option<Signature> {
    let ac = automaton();
    if !ac.is_match(text) {
        return None;
    }
    // Slow path from here on: the record contains an anchor. Search again on the decoded
    // text (escapes move offsets) and parse every anchor found; the best-ranked parse wins.
    let decoded = if escaped {
        decode(text)
    } else {
        String::from_utf8_lossy(text)
    };
    let s: &str = &decoded;
    let mut best: Option<(u8, Parsed)> = None;
    let mut unknown: Option<&'static str> = None;
    for m in ac.find_iter(s) {
        let Some(def) = ANCHORS.get(m.pattern().as_usize()) else {
            continue;
        };
        match (def.parse)(s, m.start(), m.end()) {
            Some(Parsed {
                drift: Some(sub), ..
            }) if unknown.is_none() => unknown = Some(sub),
            Some(Parsed { drift: Some(_), .. }) => {}
            Some(p)
                if best
                    .as_ref()
                    .is_none_or(|(r, _)| p.rank.unwrap_or(def.rank) > *r) =>
            {
                best = Some((p.rank.unwrap_or(def.rank), p));
            }
            Some(_) => {}
            None if def.distinctive && unknown.is_none() => unknown = Some(def.text),
            None => {}
        }
    }
    let (kind, mut device) = match best {
        Some((_, p)) => {
            let mut dev = NamedDevices::default();
            if let Some(end) = p.prefix_end {
                if let Some(prefix) = s.get(..end) {
                    apply_prefix(prefix, p.role, &mut dev);
                }
            }
            if let Some(extra) = p.extra {
                merge(&mut dev, extra);
            }
            (p.kind, dev)
        }
        None => {
            let anchor = unknown?;
            let mut dev = NamedDevices::default();
            if let Some(end) = printk_prefix_end(s, s.len()) {
                if let Some(prefix) = s.get(..end) {
                    apply_prefix(prefix, NameRole::Auto, &mut dev);
                }
            }
            (
                SignatureKind::UnknownVariant {
                    anchor: anchor.trim().to_string(),
                },
                dev,
            )
        }
    };
    if let Some(d) = dict_device {
        let d = if escaped {
            decode(d)
        } else {
            String::from_utf8_lossy(d)
        };
        apply_dict_device(&d, &mut device);
    }
    Some(Signature { kind, device })
}

/// Decodes the `\xNN` escapes of /dev/kmsg (only when present) and makes the bytes a str.
fn decode(text: &[u8]) -> Cow<'_, str> {
    if memchr::memmem::find(text, b"\\x").is_none() {
        return String::from_utf8_lossy(text);
    }
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while let Some(&c) = text.get(i) {
        if c == b'\\' && text.get(i + 1) == Some(&b'x') {
            if let (Some(h), Some(l)) = (
                text.get(i + 2).and_then(|b| hexval(*b)),
                text.get(i + 3).and_then(|b| hexval(*b)),
            ) {
                out.push(h << 4 | l);
                i += 4;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn hexval(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn merge(dev: &mut NamedDevices, extra: NamedDevices) {
    macro_rules! take {
        ($($f:ident),*) => { $( if extra.$f.is_some() { dev.$f = extra.$f; } )* };
    }
    take!(driver, pci, parent, rdma_dev, port, netdev, ifindex, scsi_hctl, scsi_host, disk);
    take!(devnum, iscsi_session, iscsi_conn, other);
}

/// End of the printk prefix of a message whose proper text starts at or after `limit`: the
/// first `": "` before `limit` (device names never contain `": "`; PCI addresses have
/// colons but no colon-space). `None` when there is none.
fn printk_prefix_end(s: &str, limit: usize) -> Option<usize> {
    let hay = s.get(..limit)?;
    memchr::memmem::find(hay.as_bytes(), b": ").map(|i| i + 2)
}

// ---- number scanners ---------------------------------------------------------------------

/// Leading decimal digits as u64, and the rest.
fn dec_u64(s: &str) -> Option<(u64, &str)> {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let v = s.get(..n)?.parse().ok()?;
    Some((v, s.get(n..)?))
}

fn dec_u32(s: &str) -> Option<(u32, &str)> {
    let (v, r) = dec_u64(s)?;
    Some((u32::try_from(v).ok()?, r))
}

/// Optionally negative decimal (errnos are printed negative).
fn dec_i32(s: &str) -> Option<(i32, &str)> {
    if let Some(r) = s.strip_prefix('-') {
        let (v, r) = dec_u64(r)?;
        let v = i64::try_from(v).ok()?;
        Some((i32::try_from(-v).ok()?, r))
    } else {
        let (v, r) = dec_u64(s)?;
        Some((i32::try_from(v).ok()?, r))
    }
}

/// Hex with or without `0x` (`%#x` prints zero as plain `0`).
fn hex_u32(s: &str) -> Option<(u32, &str)> {
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    let n = s.bytes().take_while(u8::is_ascii_hexdigit).count();
    if n == 0 || n > 8 {
        return None;
    }
    let v = u32::from_str_radix(s.get(..n)?, 16).ok()?;
    Some((v, s.get(n..)?))
}

fn state_from_kernel(n: u32) -> Option<QpState> {
    // Only the kernel's seven states; 7 (UNKNOWN) is libibverbs-only and never printed.
    QpState::from_kernel(n).filter(|s| *s != QpState::Unknown)
}

fn state_from_name(s: &str) -> Option<(QpState, &str)> {
    let n = s.bytes().take_while(u8::is_ascii_alphabetic).count();
    let word = s.get(..n)?;
    let st = QpState::ALL
        .into_iter()
        .find(|st| st.name().eq_ignore_ascii_case(word) && *st != QpState::Unknown)?;
    Some((st, s.get(n..)?))
}

fn rest_is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

// ---- parsers: (text, anchor start, anchor end) -------------------------------------------

fn p_irdma_modify(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let r = s.get(end..)?;
    let (qp, r) = dec_u32(r)?;
    let r = r.strip_prefix(", old_state=")?;
    let (from, r) = hex_u32(r)?;
    let r = r.strip_prefix(", new_state=")?;
    let (to, _) = hex_u32(r)?;
    Parsed::new(
        SignatureKind::StuckQpTransition {
            qp,
            from: state_from_kernel(from)?,
            to: state_from_kernel(to)?,
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_mad_rts(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "ib_mad_send_error - ib_modify_qp to RTS: -22" or
    // "mad_error_handler - ib_modify_qp to RTS : -22".
    let r = s.get(end..)?.trim_start_matches(' ').strip_prefix(':')?;
    let (errno, _) = dec_i32(r.trim_start_matches(' '))?;
    let before = s.get(..start)?;
    let func_start = before.rfind([' ', ':']).map_or(0, |i| i + 1);
    let func = before.get(func_start..)?;
    if func.is_empty() {
        return None;
    }
    let legacy = func == "mad_error_handler";
    Parsed::new(
        SignatureKind::MadRtsFailed { errno, legacy },
        printk_prefix_end(s, func_start),
        NameRole::Rdma,
    )
}

fn p_mad_fatal(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let before = s.get(..start)?;
    let at = before.rfind("Fatal error (")?;
    let (event, r) = dec_u32(before.get(at + "Fatal error (".len()..)?)?;
    if r != ") on " {
        return None;
    }
    let (qp, r) = dec_u32(s.get(end..)?)?;
    r.strip_prefix(')')?;
    Parsed::new(
        SignatureKind::MadQpFatal { event, qp },
        printk_prefix_end(s, at),
        NameRole::Rdma,
    )
}

fn p_mad_start(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (qp, r) = dec_u32(s.get(end..)?)?;
    let r = r.strip_prefix(" state to ")?;
    let (to, r) = state_from_name(r)?;
    let (errno, _) = dec_i32(r.strip_prefix(':')?.trim_start())?;
    Parsed::new(
        SignatureKind::MadQpStartFailed { qp, to, errno },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_irdma_ae(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (ae_id, r) = hex_u32(s.get(end..)?)?;
    let r = r.strip_prefix(" bool qp=")?;
    let (is_qp, r) = dec_u32(r)?;
    let r = r.strip_prefix(" qp_id = ")?;
    let (qp, r) = dec_u32(r)?;
    let ae_src = match r.strip_prefix(", ae_src=") {
        Some(r) => Some(dec_u32(r)?.0),
        None => None,
    };
    Parsed::new(
        SignatureKind::IrdmaAsyncError {
            ae_id,
            is_qp: is_qp != 0,
            qp,
            ae_src,
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_bnxt_mask(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (mask, r) = hex_u32(s.get(end..)?)?;
    if !r.starts_with(" specified") && !rest_is_blank(r) {
        return None;
    }
    Parsed::new(
        SignatureKind::InvalidAttrMask {
            driver: RdmaDriver::BnxtRe,
            mask,
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_bnxt_qpn(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (qp, r) = hex_u32(s.get(end..)?)?;
    let (qp_type, r) = hex_u32(r.strip_prefix(" type: ")?)?;
    if !rest_is_blank(r) {
        return None;
    }
    Parsed::new(
        SignatureKind::RejectedQpInfo {
            driver: RdmaDriver::BnxtRe,
            qp,
            qp_type,
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_bnxt_state(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (from, r) = hex_u32(s.get(end..)?)?;
    let (to, _) = hex_u32(r.strip_prefix(", new_qp_state=")?)?;
    Parsed::new(
        SignatureKind::InvalidTransition {
            driver: RdmaDriver::BnxtRe,
            qp: None,
            qp_type: None,
            from: state_from_kernel(from)?,
            to: state_from_kernel(to)?,
            mask: None,
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_qedr_mask(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (mask, r) = hex_u32(s.get(end..)?)?;
    r.strip_prefix(" specified")?;
    Parsed::new(
        SignatureKind::InvalidAttrMask {
            driver: RdmaDriver::Qedr,
            mask,
        },
        qedr_prefix_end(s, start),
        NameRole::Rdma,
    )
}

/// qedr's prefix is `[func:line(dev)]` glued to the message: it ends at the `]`.
fn qedr_prefix_end(s: &str, limit: usize) -> Option<usize> {
    let hay = s.get(..limit)?;
    if hay.trim_start().starts_with('[') {
        hay.find(']').map(|i| i + 1)
    } else {
        printk_prefix_end(s, limit)
    }
}

fn p_qedr_state(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "qpn=0x%x of type=0x%x old_qp_state=0x%x, new_qp_state=0x%x", alone (dmesg splits the
    // record at its embedded newline) or after the mask line in the same record.
    let before = s.get(..start)?;
    let at = before.rfind("qpn=")?;
    let (qp, r) = hex_u32(before.get(at + 4..)?)?;
    let (qp_type, r) = hex_u32(r.strip_prefix(" of type=")?)?;
    if r != " " {
        return None;
    }
    let (from, r) = hex_u32(s.get(end..)?)?;
    let (to, _) = hex_u32(r.strip_prefix(", new_qp_state=")?)?;
    let mask_at = before.find("invalid attribute mask=");
    let mask = mask_at
        .and_then(|m| before.get(m + "invalid attribute mask=".len()..))
        .and_then(hex_u32)
        .map(|(m, _)| m);
    let prefix_end = match before.find("modify qp:") {
        Some(m) => qedr_prefix_end(s, m),
        None => None,
    };
    Parsed::new(
        SignatureKind::InvalidTransition {
            driver: RdmaDriver::Qedr,
            qp: Some(qp),
            qp_type: Some(qp_type),
            from: state_from_kernel(from)?,
            to: state_from_kernel(to)?,
            mask,
        },
        prefix_end,
        NameRole::Rdma,
    )
}

fn p_hns(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    Parsed::new(
        SignatureKind::ModifyQpRejected {
            driver: RdmaDriver::Hns,
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_rxe_invalid(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    Parsed::new(
        SignatureKind::ModifyQpRejected {
            driver: RdmaDriver::Rxe,
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_rxe_state(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "rdma_rxe: qp#21 state -> ERR" (≤ 6.1, pr_debug; `qp#%d state -> SQE !!?` is its
    // pr_warn), "rxe_ini: qp#21 rxe_qp_chk_attr: state -> ERR" (6.2+, rxe_dbg_qp).
    let before = s.get(..start)?;
    let (qp, at) = rxe_qp_before(before)?;
    let (state, r) = state_from_name(s.get(end..)?)?;
    if !rest_is_blank(r) && r.trim() != "!!?" {
        return None;
    }
    Parsed::new(
        SignatureKind::RxeQpState { qp, state },
        printk_prefix_end(s, at),
        NameRole::Rdma,
    )
}

fn p_conn_error(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (code, r) = dec_u32(s.get(end..)?)?;
    r.strip_prefix(')')?;
    Parsed::new(
        SignatureKind::IscsiConnError {
            code: IscsiErr(code),
        },
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_recovery_timeout(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (secs, r) = dec_u32(s.get(end..)?)?;
    r.strip_prefix(" sec")?;
    Parsed::new(
        SignatureKind::IscsiSessionRecoveryTimedOut { secs },
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_nopout(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    Parsed::new(
        SignatureKind::IscsiNopoutFailed,
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_tmf(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    Parsed::new(
        SignatureKind::IscsiTmfFailed,
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_ping_timeout(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let (timeout_secs, r) = dec_u32(s.get(end..)?)?;
    let r = r.strip_prefix(" secs expired, recv timeout ")?;
    let (recv_timeout_secs, _) = dec_u32(r)?;
    Parsed::new(
        SignatureKind::IscsiPingTimeout {
            timeout_secs,
            recv_timeout_secs,
        },
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_iser_comp(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "iser: iser_err_comp: task_rsp failure: local protection error (4) vend_err 0x33"
    let r = s.get(end..)?;
    let (wr, r) = r.split_once(" failure: ")?;
    let (status, r) = r.rsplit_once(" (")?;
    let (status_code, r) = dec_u32(r)?;
    let (vendor_err, _) = hex_u32(r.strip_prefix(") vend_err ")?)?;
    Parsed::new(
        SignatureKind::IserCompletionError {
            wr: wr.to_string(),
            status: status.to_string(),
            status_code,
            vendor_err,
        },
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_iser_event(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "iser: iser_event_handler: async event port error (10) on device rxe_ini port 1"
    let r = s.get(end..)?;
    let (name, r) = r.split_once(" (")?;
    let (event, r) = dec_u32(r)?;
    let r = r.strip_prefix(") on device ")?;
    let (dev, r) = r.split_once(" port ")?;
    let (port, _) = dec_u32(r)?;
    if dev.is_empty() || dev.contains(' ') {
        return None;
    }
    let kind = match event {
        10 => SignatureKind::IserPortError,
        9 => SignatureKind::IserPortActive,
        _ => SignatureKind::IserAsyncEvent {
            event,
            name: name.to_string(),
        },
    };
    Some(Parsed {
        kind,
        prefix_end: printk_prefix_end(s, start),
        role: NameRole::Auto,
        extra: Some(NamedDevices {
            rdma_dev: Some(dev.to_string()),
            port: Some(port),
            ..NamedDevices::default()
        }),
        drift: None,
        rank: None,
    })
}

fn p_task_init(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "iser: iscsi_iser_task_init: Failed to init task 00000000dee43e0b, err = -19"
    let r = s.get(end..)?;
    let at = r.find(", err = ")?;
    let (errno, _) = dec_i32(r.get(at + ", err = ".len()..)?)?;
    Parsed::new(
        SignatureKind::IserTaskInitFailed { errno },
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn word(s: &str) -> &str {
    let n = s.find([' ', ',']).unwrap_or(s.len());
    s.get(..n).unwrap_or("")
}

fn p_scsi_failed(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "sd 0:0:0:0: [sda] tag#57 FAILED Result: hostbyte=DID_ABORT driverbyte=DRIVER_OK …"
    let r = s.get(end..)?.strip_prefix("hostbyte=")?;
    let hostbyte = word(r);
    if hostbyte.is_empty() {
        return None;
    }
    let driverbyte = r
        .find("driverbyte=")
        .and_then(|i| r.get(i + "driverbyte=".len()..))
        .map(word)
        .filter(|w| !w.is_empty())
        .map(str::to_string);
    let prefix_end = printk_prefix_end(s, start);
    let mid = s.get(prefix_end.unwrap_or(0)..start).unwrap_or("");
    let mut extra = NamedDevices::default();
    let mut tag = None;
    for w in mid.split(' ') {
        if let Some(d) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            if !d.is_empty() {
                extra.disk = Some(d.to_string());
            }
        } else if let Some(t) = w.strip_prefix("tag#") {
            tag = t.parse().ok();
        }
    }
    Some(Parsed {
        kind: SignatureKind::ScsiCommandFailed {
            tag,
            hostbyte: hostbyte.to_string(),
            driverbyte,
        },
        prefix_end,
        role: NameRole::Auto,
        extra: Some(extra),
        drift: None,
        rank: None,
    })
}

fn p_io_error(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // "I/O error, dev sda, sector 128 op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2"
    let r = s.get(end..)?;
    let disk = word(r);
    if disk.is_empty() {
        return None;
    }
    let sector = r
        .find(", sector ")
        .and_then(|i| r.get(i + ", sector ".len()..))
        .and_then(dec_u64)
        .map(|(v, _)| v);
    let op = r
        .find(":(")
        .and_then(|i| r.get(i + 2..))
        .and_then(|o| o.split_once(')'))
        .map(|(o, _)| o.to_string())
        .filter(|o| !o.is_empty());
    Some(Parsed {
        kind: SignatureKind::BlockIoError { sector, op },
        // The block layer's line has no device prefix (older kernels put the function
        // name there: "blk_update_request: I/O error, …"); the disk is named in the text.
        prefix_end: None,
        role: NameRole::Auto,
        extra: Some(NamedDevices {
            disk: Some(disk.to_string()),
            ..NamedDevices::default()
        }),
        drift: None,
        rank: None,
    })
}

fn p_offline(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    Parsed::new(
        SignatureKind::ScsiRejectingOffline,
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_rdma_cm(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // "RDMA CM: REJECTED: invalid service ID",
    // "RDMA CM: ADDR_ERROR: failed to acquire device. status -19"
    let r = s.get(end..)?;
    let (event, detail) = r.split_once(": ")?;
    if event.is_empty() || !event.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return None;
    }
    let detail = detail.trim_end();
    let (reason, status) = match detail.rsplit_once(" status ") {
        Some((reason, st)) => match dec_i32(st) {
            Some((v, _)) => (reason.trim_end_matches('.'), Some(v)),
            None => (detail, None),
        },
        None => (detail, None),
    };
    let kind = match event {
        "REJECTED" => SignatureKind::RdmaCmRejected {
            reason: detail.to_string(),
        },
        "ADDR_ERROR" => SignatureKind::RdmaCmAddrError {
            reason: reason.to_string(),
            status,
        },
        _ => SignatureKind::RdmaCmError {
            event: event.to_string(),
            detail: reason.to_string(),
            status,
        },
    };
    Parsed::new(kind, None, NameRole::Auto)
}

fn p_set_down(s: &str, start: usize, end: usize) -> Option<Parsed> {
    port_state(s, start, end, SignatureKind::IbPortDown)
}

fn p_set_active(s: &str, start: usize, end: usize) -> Option<Parsed> {
    port_state(s, start, end, SignatureKind::IbPortActive)
}

fn port_state(s: &str, start: usize, end: usize, kind: SignatureKind) -> Option<Parsed> {
    // "infiniband rxe_ini: set active": the whole message, nothing after.
    if !rest_is_blank(s.get(end..)?) {
        return None;
    }
    Parsed::new(kind, Some(start + 2), NameRole::Rdma)
}

fn p_nic_link(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // ice/i40e/bnxt_en: "NIC Link is Down", "NIC Link is up 100 Gbps Full Duplex, …",
    // "NIC Link is Up, 25000 Mbps full duplex, …".
    let r = s.get(end..)?;
    let kind = if let Some(r) = r.strip_prefix("Down") {
        if !rest_is_blank(r) {
            return None;
        }
        SignatureKind::NetdevLinkDown
    } else if let Some(r) = r.strip_prefix("up").or_else(|| r.strip_prefix("Up")) {
        let r = r.trim_start_matches([',', ' ']);
        let speed = r
            .find("bps")
            .filter(|i| *i <= 12)
            .and_then(|i| r.get(..i))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        SignatureKind::NetdevLinkUp { speed }
    } else {
        return None;
    };
    // Only the NIC drivers of RDMA adapters (the subsystem layer's table): another NIC's
    // link line (`igc 0000:05:00.0 eth5: NIC Link is Down`) concerns no RDMA port.
    let driver = s.split(' ').next().unwrap_or("");
    super::subsystem::nic_driver(driver)?;
    Parsed::new(kind, printk_prefix_end(s, start), NameRole::Netdev)
}

fn p_link_down(s: &str, start: usize, end: usize) -> Option<Parsed> {
    mlx5_link(s, start, end, SignatureKind::NetdevLinkDown)
}

fn p_link_up(s: &str, start: usize, end: usize) -> Option<Parsed> {
    mlx5_link(s, start, end, SignatureKind::NetdevLinkUp { speed: None })
}

fn mlx5_link(s: &str, start: usize, end: usize, kind: SignatureKind) -> Option<Parsed> {
    // mlx5e_update_carrier: "mlx5_core 0000:81:00.0 enp129s0f0np0: Link up" — the whole
    // message; other drivers' "Link up …" sentences carry more words and are not matched.
    if !rest_is_blank(s.get(end..)?) {
        return None;
    }
    Parsed::new(kind, Some(start + 2), NameRole::Netdev)
}

// ---- MAD port start-up ---------------------------------------------------------------------

fn p_mad_port_open(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // mad.c: "Couldn't open port %d"; agent.c (via mad.c): "Couldn't open port %d for agents".
    let (port, r) = dec_u32(s.get(end..)?)?;
    let agents = match r.trim_end() {
        "" => false,
        " for agents" => true,
        _ => return None,
    };
    Some(Parsed {
        kind: SignatureKind::MadPortOpenFailed { port, agents },
        prefix_end: printk_prefix_end(s, start),
        role: NameRole::Rdma,
        extra: Some(NamedDevices {
            port: Some(port),
            ..NamedDevices::default()
        }),
        drift: None,
        rank: None,
    })
}

fn p_mad_setup(s: &str, start: usize, _end: usize) -> Option<Parsed> {
    // "Couldn't create ib_mad PD|CQ", "Couldn't create ib_mad QP%d", "Couldn't start port",
    // "Couldn't post receive WRs": the whole message.
    let step = s.get(start..)?.strip_prefix("Couldn't ")?.trim_end();
    let ok = matches!(
        step,
        "create ib_mad PD" | "create ib_mad CQ" | "start port" | "post receive WRs"
    ) || step
        .strip_prefix("create ib_mad QP")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if !ok {
        return None;
    }
    Parsed::new(
        SignatureKind::MadPortSetupFailed {
            step: step.to_string(),
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

// ---- driver QP failures ----------------------------------------------------------------------

fn p_bnxt_hw_qp(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // bnxt_re ib_verbs.c ibdev_err: "Failed to modify HW QP", "Failed to destroy HW QP",
    // "Failed to create HW QP", "Failed to modify Shadow QP for QP1".
    let anchor = s.get(start..end)?;
    let rest = s.get(end..)?;
    let op = match anchor {
        "Failed to modify Shadow QP" if rest.trim_end() == " for QP1" => "modify_shadow_qp1",
        "Failed to modify HW QP" if rest_is_blank(rest) => "modify",
        "Failed to destroy HW QP" if rest_is_blank(rest) => "destroy",
        "Failed to create HW QP" if rest_is_blank(rest) => "create",
        _ => return None,
    };
    Parsed::new(
        SignatureKind::DriverQpCommandFailed {
            driver: RdmaDriver::BnxtRe,
            op: op.to_string(),
        },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

/// The prefix of an `mlx5_ib_warn`/`mlx5_ib_log` line. Since 5.x it is a `dev_printk` on the
/// ib device (`infiniband mlx5_0: dump_cqe:272:(pid 0): `); older kernels printed
/// `mlx5_0:dump_cqe:262:(pid 0): ` with `pr_warn`. Returns where the `dev_printk` prefix
/// ends, and the device of the old form.
fn mlx5_log_prefix(s: &str, start: usize) -> Option<(Option<usize>, Option<NamedDevices>)> {
    let before = s.get(..start)?;
    let pid = before.rfind(":(pid ")?;
    let head = before.get(..pid)?;
    match memchr::memmem::find(head.as_bytes(), b": ") {
        Some(_) => Some((printk_prefix_end(s, pid), None)),
        None => {
            // "mlx5_0:dump_cqe:262" after an optional level/timestamp-free start.
            let dev = head.rsplit(' ').next()?.split(':').next()?;
            if dev.is_empty() {
                return Some((None, None));
            }
            Some((
                None,
                Some(NamedDevices {
                    rdma_dev: Some(dev.to_string()),
                    ..NamedDevices::default()
                }),
            ))
        }
    }
}

fn p_mlx5_wc_error(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // mlx5_ib cq.c dump_cqe: "WC error: %d, Message: %s".
    let (status, r) = dec_u32(s.get(end..)?)?;
    let message = r.strip_prefix(", Message: ")?.trim_end();
    let (prefix_end, extra) = mlx5_log_prefix(s, start)?;
    Some(Parsed {
        kind: SignatureKind::Mlx5ErrorCompletion {
            status: Some(status),
            message: Some(message.to_string()).filter(|m| !m.is_empty()),
        },
        prefix_end,
        role: NameRole::Rdma,
        extra,
        drift: None,
        rank: None,
    })
}

fn p_mlx5_dump_cqe(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // Older mlx5_ib cq.c dump_cqe: "dump error cqe" (the CQE follows as a hex dump).
    if !rest_is_blank(s.get(end..)?) {
        return None;
    }
    // The anchor starts at the `)` of `(pid N)`.
    let (prefix_end, extra) = mlx5_log_prefix(s, start)?;
    Some(Parsed {
        kind: SignatureKind::Mlx5ErrorCompletion {
            status: None,
            message: None,
        },
        prefix_end,
        role: NameRole::Rdma,
        extra,
        drift: None,
        rank: None,
    })
}

fn p_unexpected_event(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // mlx5_ib qp.c "mlx5_ib: Unexpected event type %d on QP %06x"; mlx4_ib qp.c
    // "<mlx4_ib> mlx4_ib_qp_event: Unexpected event type %d on QP %06x". CQ/SRQ/WQ events
    // are not about a QP.
    let (event, r) = dec_u32(s.get(end..)?)?;
    let (qp, r) = hex_u32(r.strip_prefix(" on QP ")?)?;
    if !rest_is_blank(r) {
        return None;
    }
    let before = s.get(..start)?;
    let driver = if before.contains("mlx5_ib") {
        RdmaDriver::Mlx5
    } else if before.contains("mlx4_ib") {
        RdmaDriver::Mlx4
    } else {
        return None;
    };
    Parsed::new(
        SignatureKind::UnexpectedQpEvent { driver, event, qp },
        None,
        NameRole::Auto,
    )
}

// ---- iSER --------------------------------------------------------------------------------------

/// `iser_err` prints `"iser: <function>: <message>"` (PFX "iser:" and `__func__`): the
/// message must follow exactly that, so the same words from another module (isert, nvme-rdma)
/// are not taken for iSER's. Returns where the `iser: ` prefix starts.
fn iser_func_prefix(s: &str, start: usize) -> Option<usize> {
    let before = s.get(..start)?.strip_suffix(": ")?;
    let at = before.rfind("iser: ")?;
    let func = before.get(at + "iser: ".len()..)?;
    let ok = !func.is_empty() && func.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    // `isert: ` ends with "rt: ", not "iser: ": rfind("iser: ") cannot land inside it.
    ok.then_some(at)
}

fn p_iser_qp_event(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // iser_verbs.c iser_qp_event_callback: "qp event %s (%d)".
    let r = s.get(end..)?.trim_end();
    let (name, r) = r.rsplit_once(" (")?;
    let (event, r) = dec_u32(r)?;
    if r != ")" || name.is_empty() {
        return None;
    }
    Parsed::new(
        SignatureKind::IserQpEvent {
            event,
            name: name.to_string(),
        },
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

/// The iSER failure messages: anchor text → what failed. One table; the errno is the first
/// signed number after the anchor (none for the two messages without one).
const ISER_FAILURES: &[(&str, IserFailure)] = &[
    ("Failed to disconnect, conn: ", IserFailure::Disconnect),
    ("failure connecting: ", IserFailure::Connect),
    ("rdma_create_id failed: ", IserFailure::CreateId),
    ("rdma_resolve_addr failed: ", IserFailure::ResolveAddr),
    ("resolve route failed: ", IserFailure::ResolveRoute),
    ("device lookup/creation failed", IserFailure::DeviceLookup),
    ("failed to allocate an IB resource", IserFailure::IbResource),
    ("ib_post_send failed, ret:", IserFailure::PostSend),
    ("ib_post_recv failed ret=", IserFailure::PostRecv),
    ("ib_post_recv login failed ret=", IserFailure::PostRecv),
];

fn p_iser_failure(s: &str, start: usize, end: usize) -> Option<Parsed> {
    let anchor = s.get(start..end)?;
    let what = ISER_FAILURES.iter().find(|(a, _)| *a == anchor)?.1;
    let at = iser_func_prefix(s, start)?;
    let r = s.get(end..)?;
    let errno = match what {
        IserFailure::DeviceLookup | IserFailure::IbResource => {
            if !rest_is_blank(r) {
                return None;
            }
            None
        }
        // "Failed to disconnect, conn: 0x%p err %d"
        IserFailure::Disconnect => {
            let i = r.find(" err ")?;
            Some(dec_i32(r.get(i + " err ".len()..)?)?.0)
        }
        _ => Some(dec_i32(r)?.0),
    };
    Parsed::new(
        SignatureKind::IserConnFailure { what, errno },
        printk_prefix_end(s, at + "iser: ".len()),
        NameRole::Auto,
    )
}

// ---- rdma_rxe ----------------------------------------------------------------------------------

/// The QP number of rxe's `qp#N` or `qp#N <func>:` just before `at`, and where `qp#` starts.
fn rxe_qp_before(before: &str) -> Option<(u32, usize)> {
    let at = before.rfind("qp#")?;
    let (qp, r) = dec_u32(before.get(at + 3..)?)?;
    // 6.1: "qp#%d moved…" / "qp#%d state -> …"; 6.2+ rxe_dbg_qp: "qp#%d %s: moved…".
    let ok = r.is_empty()
        || r.strip_prefix(' ')
            .and_then(|f| f.strip_suffix(':'))
            .is_some_and(|f| {
                !f.is_empty() && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            });
    ok.then_some((qp, at))
}

fn p_rxe_moved_to_error(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // rxe_qp.c rxe_qp_error: "qp#%d moved to error state" (≤ 6.1, pr_debug) or
    // "qp#%d %s: moved to error state" (rxe_dbg_qp, 6.2+).
    if !rest_is_blank(s.get(end..)?) {
        return None;
    }
    let before = s.get(..start)?.strip_suffix(' ')?;
    let (qp, at) = rxe_qp_before(before)?;
    Parsed::new(
        SignatureKind::RxeQpState {
            qp,
            state: QpState::Err,
        },
        printk_prefix_end(s, at),
        NameRole::Rdma,
    )
}

fn p_rxe_legacy_port(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // rxe_net.c before the dev_info form: "rxe: set rxe0 active" (4.8–4.x, literal "rxe: ")
    // and "rdma_rxe: set rxe0 down" (pr_fmt KBUILD_MODNAME).
    let before = s.get(..start)?;
    let module = if before.ends_with("rdma_") {
        "rdma_rxe"
    } else {
        "rxe"
    };
    let lead = before.strip_suffix("rdma_").unwrap_or(before);
    if !(lead.is_empty() || lead.ends_with(' ')) {
        return None;
    }
    let r = s.get(end..)?.trim_end();
    let (name, state) = r.rsplit_once(' ')?;
    if name.is_empty() || name.contains(' ') {
        return None;
    }
    let kind = match state {
        "active" => SignatureKind::IbPortActive,
        "down" => SignatureKind::IbPortDown,
        _ => return None,
    };
    Some(Parsed {
        kind,
        prefix_end: None,
        role: NameRole::Rdma,
        extra: Some(NamedDevices {
            driver: Some(module.to_string()),
            rdma_dev: Some(name.to_string()),
            ..NamedDevices::default()
        }),
        drift: None,
        rank: None,
    })
}

// ---- SCSI error handling, block and buffer I/O -------------------------------------------------

/// The disk (`[sdX]`) and tag (`tag#N`) words between a `sd H:C:T:L: ` prefix and the message.
fn scsi_disk_words(
    s: &str,
    prefix_end: Option<usize>,
    start: usize,
) -> (NamedDevices, Option<u32>) {
    let mid = s.get(prefix_end.unwrap_or(0)..start).unwrap_or("");
    let mut extra = NamedDevices::default();
    let mut tag = None;
    for w in mid.split(' ') {
        if let Some(d) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            if !d.is_empty() {
                extra.disk = Some(d.to_string());
            }
        } else if let Some(t) = w.strip_prefix("tag#") {
            tag = t.parse().ok();
        }
    }
    (extra, tag)
}

fn scsi_whole(s: &str, start: usize, end: usize, kind: SignatureKind) -> Option<Parsed> {
    if !rest_is_blank(s.get(end..)?) {
        return None;
    }
    let prefix_end = printk_prefix_end(s, start);
    let (extra, _) = scsi_disk_words(s, prefix_end, start);
    Some(Parsed {
        kind,
        prefix_end,
        role: NameRole::Auto,
        extra: Some(extra),
        drift: None,
        rank: None,
    })
}

fn p_scsi_offlined(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // scsi_error.c scsi_eh_offline_sdevs: sdev_printk/scmd_printk "Device offlined - not
    // ready after error recovery".
    scsi_whole(s, start, end, SignatureKind::ScsiDeviceOfflined)
}

fn p_scsi_dead(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // scsi_lib.c scsi_device_state_check: "rejecting I/O to dead device".
    scsi_whole(s, start, end, SignatureKind::ScsiRejectingDead)
}

fn p_scsi_timing_out(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // scsi_lib.c: scmd_printk "timing out command, waited %lus".
    let (secs, r) = dec_u64(s.get(end..)?)?;
    if !rest_is_blank(r.strip_prefix('s')?) {
        return None;
    }
    let prefix_end = printk_prefix_end(s, start);
    let (extra, _) = scsi_disk_words(s, prefix_end, start);
    Some(Parsed {
        kind: SignatureKind::ScsiCommandTimedOut { secs },
        prefix_end,
        role: NameRole::Auto,
        extra: Some(extra),
        drift: None,
        rank: None,
    })
}

/// `blk_status_to_str()` texts other than `I/O` (block/blk-core.c `blk_errors[]`), which
/// `print_req_error` prints as `"%s error, dev %s, …"`.
const BLK_STATUSES: &[&str] = &[
    "operation not supported",
    "timeout",
    "critical space allocation",
    "recoverable transport",
    "critical target",
    "reservation conflict",
    "critical nexus",
    "critical medium",
    "protection",
    "kernel resource",
    "device resource",
    "nonblocking retry",
    "device offline",
    "open zones exceeded",
    "active zones exceeded",
    "duration limit exceeded",
    "invalid",
];

fn p_block_error(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // "recoverable transport error, dev sdb, sector 2048 op 0x1:(WRITE) flags 0x800 …",
    // formerly after "blk_update_request: " / "print_req_error: ".
    let before = s.get(..start)?.strip_suffix(' ')?;
    let status = BLK_STATUSES.iter().find(|st| {
        before
            .strip_suffix(**st)
            .is_some_and(|lead| lead.is_empty() || lead.ends_with(' '))
    })?;
    let r = s.get(end..)?;
    let disk = word(r);
    if disk.is_empty() || !r.get(disk.len()..)?.starts_with(", sector ") {
        return None;
    }
    let sector = r
        .find(", sector ")
        .and_then(|i| r.get(i + ", sector ".len()..))
        .and_then(dec_u64)
        .map(|(v, _)| v);
    let op = r
        .find(":(")
        .and_then(|i| r.get(i + 2..))
        .and_then(|o| o.split_once(')'))
        .map(|(o, _)| o.to_string())
        .filter(|o| !o.is_empty());
    Some(Parsed {
        kind: SignatureKind::BlockRequestError {
            status: (*status).to_string(),
            sector,
            op,
        },
        prefix_end: None,
        role: NameRole::Auto,
        extra: Some(NamedDevices {
            disk: Some(disk.to_string()),
            ..NamedDevices::default()
        }),
        drift: None,
        rank: None,
    })
}

fn p_buffer_io_error(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // fs/buffer.c buffer_io_error: "Buffer I/O error on dev %pg, logical block %llu%s"
    // with ", lost async page write" / ", async page read" / ", lost sync page write".
    let r = s.get(end..)?;
    let disk = word(r);
    if disk.is_empty() {
        return None;
    }
    let r = r.get(disk.len()..)?;
    let (block, what) = match r.strip_prefix(", logical block ") {
        Some(b) => {
            let (block, rest) = dec_u64(b)?;
            let what = rest
                .strip_prefix(", ")
                .map(|w| w.trim_end().to_string())
                .filter(|w| !w.is_empty());
            (Some(block), what)
        }
        None if rest_is_blank(r) => (None, None),
        None => return None,
    };
    Some(Parsed {
        kind: SignatureKind::BufferIoError { block, what },
        prefix_end: None,
        role: NameRole::Auto,
        extra: Some(NamedDevices {
            disk: Some(disk.to_string()),
            ..NamedDevices::default()
        }),
        drift: None,
        rank: None,
    })
}

// ---- kernel bug reports --------------------------------------------------------------------

/// The modules whose bugs this job cares about: the iSER initiator stack, the RDMA core and
/// the RDMA drivers. A kernel bug report naming one is recognised; others are not ours.
const BUG_MODULES: &[&str] = &[
    "ib_iser",
    "libiscsi",
    "scsi_transport_iscsi",
    "ib_core",
    "rdma_cm",
    "ib_cm",
    "iw_cm",
    "ib_uverbs",
    "rdma_ucm",
    "ib_umad",
    "rdma_rxe",
    "siw",
    "irdma",
    "mlx5_ib",
    "mlx4_ib",
    "bnxt_re",
    "qedr",
    "hns_roce_hw_v2",
    "erdma",
    "mana_ib",
];

/// Source directories → module, for `WARNING: … at <file>:<line>` and `kernel BUG at`.
const BUG_PATHS: &[(&str, &str)] = &[
    ("drivers/infiniband/ulp/iser/", "ib_iser"),
    ("drivers/infiniband/core/", "ib_core"),
    ("drivers/infiniband/sw/rxe/", "rdma_rxe"),
    ("drivers/infiniband/sw/siw/", "siw"),
    ("drivers/infiniband/hw/irdma/", "irdma"),
    ("drivers/infiniband/hw/mlx5/", "mlx5_ib"),
    ("drivers/infiniband/hw/mlx4/", "mlx4_ib"),
    ("drivers/infiniband/hw/bnxt_re/", "bnxt_re"),
    ("drivers/infiniband/hw/qedr/", "qedr"),
    ("drivers/infiniband/hw/hns/", "hns_roce_hw_v2"),
    ("drivers/infiniband/hw/erdma/", "erdma"),
    ("drivers/infiniband/hw/mana/", "mana_ib"),
    ("drivers/scsi/libiscsi.c", "libiscsi"),
    (
        "drivers/scsi/scsi_transport_iscsi.c",
        "scsi_transport_iscsi",
    ),
];

/// Function-name prefixes of the same modules, for kernels that build them in (a `%pS`
/// symbol then has no `[module]`).
const BUG_FUNC_PREFIXES: &[(&str, &str)] = &[
    ("iscsi_iser_", "ib_iser"),
    ("iser_", "ib_iser"),
    ("rxe_", "rdma_rxe"),
    ("siw_", "siw"),
    ("irdma_", "irdma"),
    ("ib_", "ib_core"),
    ("rdma_", "ib_core"),
    ("cma_", "rdma_cm"),
    ("iscsi_", "libiscsi"),
];

fn module_of_path(path: &str) -> Option<&'static str> {
    BUG_PATHS
        .iter()
        .find(|(dir, _)| path.starts_with(dir))
        .map(|(_, m)| *m)
}

/// Splits a `%pS` symbol `func+0x1c/0x90 [ib_iser]` (the module may carry a build id:
/// `[ib_iser 3f2a…]`) into the function and the module, and tells whether it is one of ours.
fn bug_symbol(sym: &str) -> Option<(String, Option<&'static str>)> {
    let sym = sym.trim();
    let (func, module) = match sym.split_once(" [") {
        Some((f, m)) => {
            let m = m.strip_suffix(']')?;
            (f, Some(m.split(' ').next()?))
        }
        None => (sym, None),
    };
    if func.is_empty() || func.contains(' ') || !func.contains("+0x") {
        return None;
    }
    let ours = match module {
        Some(m) => BUG_MODULES.iter().copied().find(|b| *b == m),
        None => BUG_FUNC_PREFIXES
            .iter()
            .find(|(p, _)| func.starts_with(p))
            .map(|(_, m)| *m),
    };
    Some((func.to_string(), ours))
}

fn bug(
    what: KernelBugKind,
    module: Option<&str>,
    function: Option<String>,
    location: Option<String>,
    detail: Option<String>,
) -> Option<Parsed> {
    Parsed::new(
        SignatureKind::KernelBug {
            what,
            module: module.map(str::to_string),
            function,
            location,
            detail,
        },
        None,
        NameRole::Auto,
    )
}

fn p_bug_rip(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // arch/x86 show_ip: "RIP: %04x:%pS" = "RIP: 0010:iser_conn_terminate+0x1c/0x90 [ib_iser]".
    // Only the oops's own register dump: the line starts with it (after the printk prefix).
    if !s.get(..start)?.trim().is_empty() {
        return None;
    }
    let r = s.get(end..)?;
    let (seg, sym) = r.split_once(':')?;
    if seg.len() != 4 || !seg.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (func, module) = bug_symbol(sym)?;
    bug(KernelBugKind::Oops, Some(module?), Some(func), None, None)
}

fn p_bug_warning(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // kernel/panic.c __warn: "WARNING: CPU: %d PID: %d at %s:%d %pS" or "… at %pS".
    let (_cpu, r) = dec_u32(s.get(end..)?)?;
    let (_pid, r) = dec_u32(r.strip_prefix(" PID: ")?)?;
    let r = r.strip_prefix(" at ")?.trim_end();
    let (location, sym) = match r.split_once(' ') {
        Some((loc, sym)) if loc.contains(".c:") || loc.contains(".h:") => (Some(loc), sym),
        _ => (None, r),
    };
    let (func, by_sym) = bug_symbol(sym)?;
    let module = by_sym.or_else(|| location.and_then(module_of_path))?;
    bug(
        KernelBugKind::Warning,
        Some(module),
        Some(func),
        location.map(str::to_string),
        None,
    )
}

fn p_bug_at(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // lib/bug.c report_bug: "kernel BUG at %s:%u!".
    // The anchor is " BUG at ": "kernel" ends right before it.
    if !s.get(..start)?.ends_with("kernel") {
        return None;
    }
    let loc = s.get(end..)?.trim_end().strip_suffix('!')?;
    let module = module_of_path(loc)?;
    bug(
        KernelBugKind::Bug,
        Some(module),
        None,
        Some(loc.to_string()),
        None,
    )
}

fn p_bug_kasan(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // mm/kasan/report.c: "BUG: KASAN: %s in %pS".
    let r = s.get(end..)?.trim_end();
    let (kind, sym) = r.split_once(" in ")?;
    let (func, module) = bug_symbol(sym)?;
    bug(
        KernelBugKind::Kasan,
        Some(module?),
        Some(func),
        None,
        Some(kind.to_string()),
    )
}

fn p_bug_panic(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // kernel/panic.c: "Kernel panic - not syncing: %s" (and the closing "---[ end Kernel
    // panic - not syncing: %s ]---", which is the same panic: not counted twice).
    if s.get(..start)?.contains("---[ end") {
        return None;
    }
    let reason = s.get(end..)?.trim_end();
    bug(
        KernelBugKind::Panic,
        None,
        None,
        None,
        Some(reason.to_string()).filter(|r| !r.is_empty()),
    )
}

fn p_bug_hung_task(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // kernel/hung_task.c: "INFO: task %s:%d blocked for more than %ld seconds." — only for
    // the iSCSI tasks (iscsid, iscsiadm, iscsi_eh…), whose hang stalls session recovery.
    let before = s.get(..start)?;
    let at = before.rfind("INFO: task ")?;
    let task = before.get(at + "INFO: task ".len()..)?.strip_suffix(' ')?;
    let (name, pid) = task.rsplit_once(':')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) || !name.starts_with("iscsi") {
        return None;
    }
    let (secs, r) = dec_u64(s.get(end..)?)?;
    r.strip_prefix(" seconds")?;
    bug(
        KernelBugKind::HungTask,
        None,
        None,
        None,
        Some(format!("task {task} blocked for more than {secs} seconds")),
    )
}

// ---- driver resets, driver stacks, dm-multipath -------------------------------------------

fn p_irdma_cqp(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // irdma utils.c irdma_handle_cqp_op: "[%s Error][op_code=%d] status=%d waiting=%d
    // completion_err=%d maj=0x%x min=0x%x" (ibdev_err: "<drv> <pci> <ibdev>: " first).
    let open = s.get(..start)?.rfind('[')?;
    let command = s.get(open + 1..start)?.trim_end().to_string();
    let (op_code, r) = dec_u32(s.get(end..)?)?;
    let (status, r) = dec_i32(r.strip_prefix("] status=")?)?;
    let (_waiting, r) = dec_u32(r.strip_prefix(" waiting=")?)?;
    let (_compl, r) = dec_i32(r.strip_prefix(" completion_err=")?)?;
    let (maj, r) = hex_u32(r.strip_prefix(" maj=")?)?;
    let (min, _) = hex_u32(r.strip_prefix(" min=")?)?;
    Parsed::new(
        SignatureKind::IrdmaCqpFailed {
            command,
            op_code,
            status,
            maj,
            min,
        },
        printk_prefix_end(s, open),
        NameRole::Rdma,
    )
}

fn p_irdma_suspend(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // irdma verbs.c irdma_wait_for_suspend: "modify_qp timed out waiting for suspend.
    // qp_id = %d, last_ae = 0x%x".
    let (qp, r) = dec_u32(s.get(end..)?)?;
    let (last_ae, _) = hex_u32(r.strip_prefix(", last_ae = ")?)?;
    Parsed::new(
        SignatureKind::IrdmaSuspendTimeout { qp, last_ae },
        printk_prefix_end(s, start),
        NameRole::Rdma,
    )
}

fn p_reset_requested(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // irdma_request_reset: ibdev_warn(…, "Requesting a reset\n") on the RDMA device
    // ("ice 0000:02:00.0 rocep2s0f0: Requesting a reset"; older out-of-tree builds
    // dev_warn on the PCI function). Only the whole message, and only from irdma's parents.
    if !rest_is_blank(s.get(end..)?) {
        return None;
    }
    let prefix_end = printk_prefix_end(s, start)?;
    if prefix_end != start {
        return None;
    }
    let driver = s.split(' ').next().unwrap_or("");
    if !matches!(driver, "ice" | "i40e" | "irdma" | "infiniband") {
        return None;
    }
    Parsed::new(
        SignatureKind::DriverResetRequested {
            driver: RdmaDriver::Irdma,
        },
        Some(prefix_end),
        NameRole::Rdma,
    )
}

fn p_ice_rebuild_failed(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // ice_main.c ice_rebuild: dev_err(dev, "Rebuild failed, unload and reload driver\n").
    if !rest_is_blank(s.get(end..)?) || !s.starts_with("ice ") {
        return None;
    }
    Parsed::new(
        SignatureKind::NicRebuildFailed,
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_ice_safe_mode(s: &str, start: usize, end: usize) -> Option<Parsed> {
    // ice_main.c: "Package download failed. Advanced features disabled - Device now in Safe
    // Mode" (ice_probe) and "The DDP package file was not found or could not be read.
    // Entering Safe Mode" (ice_load_pkg / ice_request_fw).
    if !rest_is_blank(s.get(end..)?) || !s.starts_with("ice ") {
        return None;
    }
    let msg = s.get(..start)?;
    if !(msg.ends_with("Device now in ") || msg.ends_with("Entering ")) {
        return None;
    }
    Parsed::new(
        SignatureKind::NicSafeMode,
        printk_prefix_end(s, start),
        NameRole::Auto,
    )
}

fn p_multipath(s: &str, _start: usize, end: usize) -> Option<Parsed> {
    // dm-mpath.c: DMWARN("%s: Failing path %s.", dm_table_device_name(…), path) and
    // "%s: Reinstating path %s."; kernels before 5.x print no map name.
    let r = s.get(end..)?.trim_end();
    let (map, r) = match r.split_once(": ") {
        Some((m, r)) if !m.contains(' ') => (Some(m.to_string()), r),
        _ => (None, r),
    };
    let (failed, path) = if let Some(p) = r.strip_prefix("Failing path ") {
        (true, p)
    } else if let Some(p) = r.strip_prefix("Reinstating path ") {
        (false, p)
    } else {
        return None;
    };
    let path = path.strip_suffix('.')?;
    if path.is_empty() || path.contains(' ') {
        return None;
    }
    Parsed::new(
        SignatureKind::MultipathPath {
            map,
            path: path.to_string(),
            failed,
        },
        None,
        NameRole::Auto,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_scanners() {
        assert_eq!(hex_u32("0x6,"), Some((6, ",")));
        assert_eq!(hex_u32("0"), Some((0, "")));
        assert_eq!(hex_u32("0x"), None);
        assert_eq!(hex_u32("0x123456789"), None);
        assert_eq!(dec_i32("-22"), Some((-22, "")));
        assert_eq!(dec_i32("-"), None);
        assert_eq!(dec_u32("99999999999"), None);
        assert_eq!(dec_u32("12ab"), Some((12, "ab")));
    }

    #[test]
    fn decode_escapes() {
        assert_eq!(decode(b"a\\x09b"), "a\tb");
        assert_eq!(decode(b"plain"), "plain");
        assert_eq!(decode(b"bad\\xZZ"), "bad\\xZZ");
        assert_eq!(decode(b"end\\x4"), "end\\x4");
        assert_eq!(decode(b"back\\x5cslash"), "back\\slash");
    }

    #[test]
    fn anchors_have_no_escapable_bytes() {
        for a in anchors() {
            assert!(a.bytes().all(|b| b.is_ascii_graphic() || b == b' '), "{a}");
            assert!(!a.contains('\\'));
        }
    }

    #[test]
    fn anchors_keep_the_fast_prefilter() {
        // aho-corasick uses Slim Teddy up to 32 patterns and fingerprints the first
        // min(4, shortest) bytes: more patterns or a shorter one slow every line down.
        assert!(ANCHORS.len() <= 32, "{} anchors", ANCHORS.len());
        for a in ANCHORS {
            assert!(a.text.len() >= 4, "{:?}", a.text);
        }
    }

    #[test]
    fn sub_tables_contain_their_anchor() {
        for (subs, anchor) in [
            (MODIFY_SUBS, "modify"),
            (QP_STATE_SUBS, "qp_state="),
            (COULDNT_SUBS, "Couldn't "),
            (COULD_NOT_SEND_SUBS, "Could not send "),
            (FAILED_TO_SUBS, "Failed to "),
            (RESULT_SUBS, "Result: hostbyte="),
            (ERROR_DEV_SUBS, "error, dev "),
            (REJECTING_SUBS, "rejecting I/O to "),
            (SET_SUBS, ": set "),
            (LINK_SUBS, "Link "),
            (NVALID_SUBS, "nvalid "),
            (IO_SUBS, "I/O "),
            (RECOVERY_SUBS, "recovery"),
            (ISER_SUBS, "iser_"),
        ] {
            for d in subs {
                assert!(d.text.contains(anchor), "{:?} lacks {anchor:?}", d.text);
            }
        }
    }

    #[test]
    fn every_anchor_parser_refuses_an_empty_tail() {
        for a in ANCHORS {
            // Must not panic whatever it returns.
            let _ = (a.parse)(a.text, 0, a.text.len());
        }
    }
}
