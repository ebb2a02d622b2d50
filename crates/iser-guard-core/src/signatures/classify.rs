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
use super::types::{DeviceRef, IscsiErr, RdmaDriver, Signature, SignatureKind};
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
    extra: Option<DeviceRef>,
}

impl Parsed {
    fn new(kind: SignatureKind, prefix_end: Option<usize>, role: NameRole) -> Option<Parsed> {
        Some(Parsed {
            kind,
            prefix_end,
            role,
            extra: None,
        })
    }
}

#[rustfmt::skip]
const ANCHORS: &[AnchorDef] = &[
    AnchorDef { text: "modify_qp invalid for qp_id=", distinctive: true, rank: 9, parse: p_irdma_modify },
    AnchorDef { text: " - ib_modify_qp to RTS", distinctive: true, rank: 8, parse: p_mad_rts },
    AnchorDef { text: "on MAD QP (", distinctive: true, rank: 7, parse: p_mad_fatal },
    AnchorDef { text: "Couldn't change QP", distinctive: true, rank: 7, parse: p_mad_start },
    AnchorDef { text: "abnormal ae_id = ", distinctive: true, rank: 7, parse: p_irdma_ae },
    AnchorDef { text: "Invalid attribute mask: ", distinctive: true, rank: 6, parse: p_bnxt_mask },
    AnchorDef { text: "for qpn: ", distinctive: false, rank: 6, parse: p_bnxt_qpn },
    AnchorDef { text: "curr_qp_state=", distinctive: true, rank: 9, parse: p_bnxt_state },
    AnchorDef { text: "modify qp: invalid attribute mask=", distinctive: true, rank: 6, parse: p_qedr_mask },
    AnchorDef { text: "old_qp_state=", distinctive: true, rank: 9, parse: p_qedr_state },
    AnchorDef { text: "ib_modify_qp_is_ok failed", distinctive: true, rank: 6, parse: p_hns },
    AnchorDef { text: "failed to check modify qp state", distinctive: true, rank: 6, parse: p_hns },
    AnchorDef { text: "invalid mask or state", distinctive: true, rank: 6, parse: p_rxe_invalid },
    AnchorDef { text: " state -> ", distinctive: false, rank: 5, parse: p_rxe_state },
    AnchorDef { text: "detected conn error (", distinctive: true, rank: 5, parse: p_conn_error },
    AnchorDef { text: "session recovery timed out after ", distinctive: true, rank: 5, parse: p_recovery_timeout },
    AnchorDef { text: "Could not send nopout", distinctive: true, rank: 5, parse: p_nopout },
    AnchorDef { text: "Could not send TMF", distinctive: true, rank: 5, parse: p_tmf },
    AnchorDef { text: "ping timeout of ", distinctive: true, rank: 5, parse: p_ping_timeout },
    AnchorDef { text: "iser_err_comp: ", distinctive: true, rank: 5, parse: p_iser_comp },
    AnchorDef { text: "iser_event_handler: async event ", distinctive: true, rank: 5, parse: p_iser_event },
    AnchorDef { text: "Failed to init task ", distinctive: false, rank: 5, parse: p_task_init },
    AnchorDef { text: "FAILED Result: ", distinctive: true, rank: 4, parse: p_scsi_failed },
    AnchorDef { text: "I/O error, dev ", distinctive: true, rank: 4, parse: p_io_error },
    AnchorDef { text: "rejecting I/O to offline device", distinctive: true, rank: 4, parse: p_offline },
    AnchorDef { text: "RDMA CM: ", distinctive: false, rank: 4, parse: p_rdma_cm },
    AnchorDef { text: ": set down", distinctive: false, rank: 3, parse: p_set_down },
    AnchorDef { text: ": set active", distinctive: false, rank: 3, parse: p_set_active },
    AnchorDef { text: "NIC Link is ", distinctive: false, rank: 3, parse: p_nic_link },
    AnchorDef { text: ": Link down", distinctive: false, rank: 3, parse: p_link_down },
    AnchorDef { text: ": Link up", distinctive: false, rank: 3, parse: p_link_up },
];

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
            Some(p) if best.as_ref().is_none_or(|(r, _)| def.rank > *r) => {
                best = Some((def.rank, p));
            }
            Some(_) => {}
            None if def.distinctive && unknown.is_none() => unknown = Some(def.text),
            None => {}
        }
    }
    let (kind, mut device) = match best {
        Some((_, p)) => {
            let mut dev = DeviceRef::default();
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
            let mut dev = DeviceRef::default();
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

fn merge(dev: &mut DeviceRef, extra: DeviceRef) {
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
    if r != ") " {
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
    // "rdma_rxe: qp#21 state -> ERR"
    let before = s.get(..start)?;
    let at = before.rfind("qp#")?;
    let (qp, r) = dec_u32(before.get(at + 3..)?)?;
    if !r.is_empty() {
        return None;
    }
    let (state, r) = state_from_name(s.get(end..)?)?;
    if !rest_is_blank(r) {
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
        extra: Some(DeviceRef {
            rdma_dev: Some(dev.to_string()),
            port: Some(port),
            ..DeviceRef::default()
        }),
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
    let mut extra = DeviceRef::default();
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
        extra: Some(DeviceRef {
            disk: Some(disk.to_string()),
            ..DeviceRef::default()
        }),
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
    fn every_anchor_parser_refuses_an_empty_tail() {
        for a in ANCHORS {
            // Must not panic whatever it returns.
            let _ = (a.parse)(a.text, 0, a.text.len());
        }
    }
}
