//! The port self-test: (a) two RC QPs connected to each other through rdma_cm on the
//! port's own address (the CM / GSI path a stuck QP 1 breaks), one message each way,
//! disconnect; (b) two RC QPs walked by hand RESET -> INIT -> RTR -> RTS through the
//! validating `modify_qp`, a message each way, ERR, RESET, walked again (reuse), messages
//! again, and for comparison destroy + create + walk. Every step is timed; the first
//! failure ends the test. Every wait is bounded by the overall timeout.
//!
//! Step names are stable (metric labels, `--json`): `port`, `cm-listen`, `cm-connect`,
//! `cm-send-recv`, `cm-disconnect`, `qp-create`, `walk-init`, `walk-rtr`, `walk-rts`,
//! `send-recv`, `to-err`, `to-reset`, `rewalk`, `send-recv-again`, `recreate-walk`
//! (`manual-walk` instead of the manual steps on iWARP, whose QPs only the CM connects).

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iser_guard_core::qp::QpState;
use iser_guard_core::selftest::{SelfTestReport, SelfTestResult, SelfTestStep};
use rdma_sys as ffi;

use crate::attrs::{AddressVector, GlobalRoute, ModifyAttrs};
use crate::cm::{event_name, CmId, EventChannel};
use crate::device::{Context, DeviceList, Gid, PortAttrs, PORT_ACTIVE};
use crate::error::VerbsError;
use crate::micros;
use crate::resources::{Cq, Mr, Pd, Qp};

const WR_SEND: u64 = 1;
const WR_RECV: u64 = 2;
const BUF: usize = 64;
/// `IBV_TRANSPORT_IWARP`.
const TRANSPORT_IWARP: u32 = 1;

/// Runs the self-test of `device`/`port` within `timeout`.
pub fn run(device: &str, port: u32, timeout: Duration) -> SelfTestResult {
    let deadline = Instant::now() + timeout;
    let ctx = match DeviceList::new().and_then(|l| l.open(device)) {
        Ok(c) => c,
        Err(e) => return unavailable_or_failed(device, port, "port", e),
    };
    let info = match ctx.query_port(port) {
        Ok(i) => i,
        Err(e) => return unavailable_or_failed(device, port, "port", e),
    };
    let mut t = StepRecorder {
        report: SelfTestReport {
            device: device.to_string(),
            port,
            steps: Vec::new(),
        },
        deadline,
    };
    let _ = body(&mut t, &ctx, &info);
    SelfTestResult::Ran(t.report)
}

fn unavailable_or_failed(device: &str, port: u32, step: &str, e: VerbsError) -> SelfTestResult {
    if e.is_unavailable() {
        return SelfTestResult::Unavailable {
            reason: e.to_string(),
        };
    }
    SelfTestResult::Ran(SelfTestReport {
        device: device.to_string(),
        port,
        steps: vec![SelfTestStep {
            name: step.to_string(),
            took: Duration::ZERO,
            ok: false,
            detail: e.to_string(),
        }],
    })
}

struct StepRecorder {
    report: SelfTestReport,
    deadline: Instant,
}

impl StepRecorder {
    /// Runs one step: times it, records it, and gives `None` (stop) on failure.
    fn step<T>(
        &mut self,
        name: &str,
        f: impl FnOnce(Instant) -> Result<(T, String), VerbsError>,
    ) -> Option<T> {
        let start = Instant::now();
        let r = if start >= self.deadline {
            Err(VerbsError::Timeout {
                what: format!("self-test before {name}"),
                after: Duration::ZERO,
            })
        } else {
            f(self.deadline)
        };
        let took = start.elapsed();
        let (ok, detail, value) = match r {
            Ok((v, d)) => (true, d, Some(v)),
            Err(e) => (false, e.to_string(), None),
        };
        tracing::info!(step = name, ok, took_us = micros(took), detail = %detail, "self-test step");
        self.report.steps.push(SelfTestStep {
            name: name.to_string(),
            took,
            ok,
            detail,
        });
        value
    }
}

fn body(t: &mut StepRecorder, ctx: &Arc<Context>, info: &PortAttrs) -> Option<()> {
    let (gid_index, gid) = t.step("port", |_| {
        if info.state != PORT_ACTIVE {
            return Err(VerbsError::NoAddress {
                device: ctx.name().to_string(),
                port: info.port,
                why: format!("port state is {}, not ACTIVE", info.state_name()),
            });
        }
        let (i, g) = ctx.pick_gid(info)?;
        Ok((
            (i, g),
            format!(
                "{} {}, GID index {i} {g}, active MTU {}",
                info.state_name(),
                if info.is_ethernet() {
                    "Ethernet"
                } else {
                    "InfiniBand"
                },
                mtu_bytes(info.active_mtu)
            ),
        ))
    })?;
    cm_part(t, ctx, info, gid)?;
    if ctx.transport() == TRANSPORT_IWARP {
        t.step("manual-walk", |_| {
            Ok((
                (),
                "skipped: iWARP QPs are connected only through the CM".to_string(),
            ))
        })?;
        return Some(());
    }
    manual_part(t, ctx, info, gid_index, gid)
}

fn mtu_bytes(mtu: u32) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// One end of a connection: QP, buffer, CQ (dropped in that order).
struct End {
    qp: Option<Qp>,
    mr: Mr,
    cq: Arc<Cq>,
}

impl End {
    fn qp(&mut self) -> Result<&mut Qp, VerbsError> {
        self.qp.as_mut().ok_or_else(|| VerbsError::Call {
            call: "self-test: QP",
            device: "-".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        })
    }

    fn qpn(&self) -> u32 {
        self.qp.as_ref().map(Qp::qpn).unwrap_or(0)
    }
}

/// An end whose QP is not there (destroyed by an earlier step).
fn no_qp() -> VerbsError {
    VerbsError::Call {
        call: "self-test: QP",
        device: "-".into(),
        source: std::io::Error::from_raw_os_error(libc::ENOENT),
    }
}

/// Sends `msg` from `a` to `b` and checks what arrived.
fn send_one(a: &mut End, b: &mut End, msg: &str, deadline: Instant) -> Result<(), VerbsError> {
    let End { qp, mr, .. } = b;
    let bqp = qp.as_mut().ok_or_else(no_qp)?;
    mr.bytes_mut().fill(0);
    bqp.post_recv(mr, WR_RECV)?;
    let n = msg.len().min(BUF);
    a.mr.bytes_mut()[..n].copy_from_slice(&msg.as_bytes()[..n]);
    let End { qp, mr, .. } = a;
    let aqp = qp.as_mut().ok_or_else(no_qp)?;
    aqp.post_send(mr, n, WR_SEND)?;
    a.cq.wait(WR_SEND, deadline, "send completion")?;
    let c = b.cq.wait(WR_RECV, deadline, "receive completion")?;
    let len = usize::try_from(c.byte_len).unwrap_or(0).min(BUF);
    let got = String::from_utf8_lossy(&b.mr.bytes()[..len]).into_owned();
    if got != msg {
        return Err(VerbsError::Mismatch {
            sent: msg.to_string(),
            got,
        });
    }
    Ok(())
}

fn exchange(a: &mut End, b: &mut End, tag: &str, deadline: Instant) -> Result<String, VerbsError> {
    let ping = format!("iser-guard {tag} ping");
    let pong = format!("iser-guard {tag} pong");
    send_one(a, b, &ping, deadline)?;
    send_one(b, a, &pong, deadline)?;
    Ok(format!(
        "QP {} -> QP {} and back, {} + {} bytes",
        a.qpn(),
        b.qpn(),
        ping.len(),
        pong.len()
    ))
}

// ---------------------------------------------------------------------------------------
// (a) rdma_cm
// ---------------------------------------------------------------------------------------

/// One side of the CM connection; fields drop in order (QP before its CQ and PD, the id
/// last).
struct CmSide {
    end: End,
    _pd: Arc<Pd>,
    _ctx: Arc<Context>,
    id: Arc<CmId>,
}

fn cm_side(id: &Arc<CmId>) -> Result<CmSide, VerbsError> {
    let ctx = id.context()?;
    let pd = Pd::new(&ctx)?;
    let cq = Cq::new(&ctx, 8)?;
    let mr = Mr::new(&pd, BUF)?;
    let qp = Qp::new_cm(id, &pd, &cq)?;
    Ok(CmSide {
        end: End {
            qp: Some(qp),
            mr,
            cq,
        },
        _pd: pd,
        _ctx: ctx,
        id: Arc::clone(id),
    })
}

/// Waits for `want` on `id`; any other event for it (or a connect error anywhere) fails.
fn expect(
    ch: &Arc<EventChannel>,
    id: &CmId,
    want: u32,
    name: &'static str,
    deadline: Instant,
) -> Result<(), VerbsError> {
    loop {
        let ev = ch.next(deadline, name)?;
        if ev.id == id.ptr && ev.kind == want {
            if ev.status != 0 {
                return Err(VerbsError::CmEvent {
                    expected: name,
                    got: event_name(ev.kind),
                    status: ev.status,
                });
            }
            return Ok(());
        }
        if ev.id == id.ptr {
            return Err(VerbsError::CmEvent {
                expected: name,
                got: event_name(ev.kind),
                status: ev.status,
            });
        }
        tracing::debug!(event = %event_name(ev.kind), "ignored an event for another id");
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn cm_part(t: &mut StepRecorder, ctx: &Arc<Context>, info: &PortAttrs, gid: Gid) -> Option<()> {
    let (ch, listener, lport) = t.step("cm-listen", |_| {
        let ip = gid.ipv4().ok_or_else(|| VerbsError::NoAddress {
            device: ctx.name().to_string(),
            port: info.port,
            why: "the port's GID is not IPv4-mapped: rdma_cm needs the port's IP address \
                  (IPoIB on InfiniBand)"
                .into(),
        })?;
        let ch = EventChannel::new()?;
        let l = ch.create_id()?;
        l.bind(ip, 0)?;
        l.listen(1)?;
        let lport = SocketAddrV4::new(ip, l.src_port());
        let on = l.port_num();
        Ok(((ch, l, lport), format!("listening on {lport} (port {on})")))
    })?;
    let (client, server) = t.step("cm-connect", |deadline| {
        let c = ch.create_id()?;
        c.resolve_addr(*lport.ip(), lport, remaining(deadline))?;
        expect(
            &ch,
            &c,
            ffi::rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED,
            "ADDR_RESOLVED",
            deadline,
        )?;
        c.resolve_route(remaining(deadline))?;
        expect(
            &ch,
            &c,
            ffi::rdma_cm_event_type::RDMA_CM_EVENT_ROUTE_RESOLVED,
            "ROUTE_RESOLVED",
            deadline,
        )?;
        let client = cm_side(&c)?;
        client.id.connect(client.end.qpn())?;
        let mut server: Option<CmSide> = None;
        let (mut client_up, mut server_up) = (false, false);
        while !(client_up && server_up) {
            let ev = ch.next(deadline, "ESTABLISHED")?;
            use ffi::rdma_cm_event_type as E;
            match ev.kind {
                E::RDMA_CM_EVENT_CONNECT_REQUEST if server.is_none() => {
                    let id = ev.new_id.ok_or_else(|| VerbsError::CmEvent {
                        expected: "CONNECT_REQUEST with an id",
                        got: event_name(ev.kind),
                        status: ev.status,
                    })?;
                    let s = cm_side(&id)?;
                    s.id.accept(s.end.qpn())?;
                    server = Some(s);
                }
                E::RDMA_CM_EVENT_ESTABLISHED if ev.id == client.id.ptr => client_up = true,
                E::RDMA_CM_EVENT_ESTABLISHED
                    if server.as_ref().is_some_and(|s| s.id.ptr == ev.id) =>
                {
                    server_up = true
                }
                _ => {
                    return Err(VerbsError::CmEvent {
                        expected: "ESTABLISHED",
                        got: event_name(ev.kind),
                        status: ev.status,
                    })
                }
            }
        }
        let server = server.ok_or_else(|| VerbsError::CmEvent {
            expected: "CONNECT_REQUEST",
            got: "none".into(),
            status: 0,
        })?;
        let d = format!(
            "QP {} connected to QP {} through rdma_cm",
            client.end.qpn(),
            server.end.qpn()
        );
        Ok(((client, server), d))
    })?;
    let (mut client, mut server) = (client, server);
    t.step("cm-send-recv", |deadline| {
        Ok((
            (),
            exchange(&mut client.end, &mut server.end, "cm", deadline)?,
        ))
    })?;
    t.step("cm-disconnect", |deadline| {
        client.id.disconnect()?;
        let (mut c_down, mut s_down) = (false, false);
        while !(c_down && s_down) {
            let ev = ch.next(deadline, "DISCONNECTED")?;
            if ev.kind != ffi::rdma_cm_event_type::RDMA_CM_EVENT_DISCONNECTED {
                continue;
            }
            if ev.id == client.id.ptr {
                c_down = true;
            } else if ev.id == server.id.ptr {
                // The passive side answers the disconnect request.
                let _ = server.id.disconnect();
                s_down = true;
            }
        }
        Ok(((), "both sides DISCONNECTED".to_string()))
    })?;
    drop((client, server, listener, ch));
    Some(())
}

// ---------------------------------------------------------------------------------------
// (b) the manual walk
// ---------------------------------------------------------------------------------------

fn manual_end(pd: &Arc<Pd>, ctx: &Arc<Context>, roce: bool) -> Result<End, VerbsError> {
    let cq = Cq::new(ctx, 8)?;
    let mr = Mr::new(pd, BUF)?;
    let qp = Qp::new_rc(pd, &cq, &cq, roce)?;
    Ok(End {
        qp: Some(qp),
        mr,
        cq,
    })
}

struct QpWalk {
    port: u8,
    mtu: u32,
    av: AddressVector,
}

impl QpWalk {
    fn init(&self, a: &mut End, b: &mut End) -> Result<String, VerbsError> {
        let attrs = ModifyAttrs::rc_init(self.port);
        a.qp()?.modify(&attrs)?;
        b.qp()?.modify(&attrs)?;
        Ok(format!(
            "QP {} and {} RESET -> INIT ({})",
            a.qpn(),
            b.qpn(),
            attrs.mask()
        ))
    }

    fn rtr(&self, a: &mut End, b: &mut End, psn: u32) -> Result<String, VerbsError> {
        let (an, bn) = (a.qpn(), b.qpn());
        let to_b = ModifyAttrs::rc_rtr(bn, psn, self.mtu, self.av);
        a.qp()?.modify(&to_b)?;
        b.qp()?
            .modify(&ModifyAttrs::rc_rtr(an, psn, self.mtu, self.av))?;
        Ok(format!("QP {an} and {bn} INIT -> RTR ({})", to_b.mask()))
    }

    fn rts(&self, a: &mut End, b: &mut End, psn: u32) -> Result<String, VerbsError> {
        let attrs = ModifyAttrs::rc_rts(psn);
        a.qp()?.modify(&attrs)?;
        b.qp()?.modify(&attrs)?;
        Ok(format!(
            "QP {} and {} RTR -> RTS ({})",
            a.qpn(),
            b.qpn(),
            attrs.mask()
        ))
    }

    fn all(&self, a: &mut End, b: &mut End, psn: u32) -> Result<String, VerbsError> {
        self.init(a, b)?;
        self.rtr(a, b, psn)?;
        self.rts(a, b, psn)?;
        Ok(format!(
            "QP {} and {} RESET -> INIT -> RTR -> RTS",
            a.qpn(),
            b.qpn()
        ))
    }
}

fn manual_part(
    t: &mut StepRecorder,
    ctx: &Arc<Context>,
    info: &PortAttrs,
    gid_index: u32,
    gid: Gid,
) -> Option<()> {
    let roce = info.is_ethernet();
    let port = u8::try_from(info.port).unwrap_or(1);
    let walk = QpWalk {
        port,
        mtu: info.active_mtu,
        av: AddressVector {
            dlid: if roce { 0 } else { info.lid },
            sl: 0,
            port,
            // Both QPs are on this port: the destination is the port's own GID.
            global: roce.then(|| GlobalRoute {
                dgid: gid.0,
                sgid_index: u8::try_from(gid_index).unwrap_or(0),
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }),
        },
    };
    let (pd, mut a, mut b) = t.step("qp-create", |_| {
        let pd = Pd::new(ctx)?;
        let a = manual_end(&pd, ctx, roce)?;
        let b = manual_end(&pd, ctx, roce)?;
        let d = format!("RC QP {} and {} in RESET", a.qpn(), b.qpn());
        Ok(((pd, a, b), d))
    })?;
    t.step("walk-init", |_| Ok(((), walk.init(&mut a, &mut b)?)))?;
    t.step("walk-rtr", |_| Ok(((), walk.rtr(&mut a, &mut b, 0x100)?)))?;
    t.step("walk-rts", |_| Ok(((), walk.rts(&mut a, &mut b, 0x100)?)))?;
    t.step("send-recv", |d| {
        Ok(((), exchange(&mut a, &mut b, "walk", d)?))
    })?;
    t.step("to-err", |_| {
        let err = ModifyAttrs::to(QpState::Err);
        a.qp()?.modify(&err)?;
        b.qp()?.modify(&err)?;
        Ok(((), format!("QP {} and {} RTS -> ERR", a.qpn(), b.qpn())))
    })?;
    t.step("to-reset", |_| {
        let reset = ModifyAttrs::to(QpState::Reset);
        a.qp()?.modify(&reset)?;
        b.qp()?.modify(&reset)?;
        let flushed = a.cq.drain()? + b.cq.drain()?;
        Ok((
            (),
            format!(
                "QP {} and {} ERR -> RESET ({flushed} flushed completions)",
                a.qpn(),
                b.qpn()
            ),
        ))
    })?;
    let rewalk_start = Instant::now();
    t.step("rewalk", |_| Ok(((), walk.all(&mut a, &mut b, 0x200)?)))?;
    let rewalk_took = rewalk_start.elapsed();
    t.step("send-recv-again", |d| {
        Ok(((), exchange(&mut a, &mut b, "rewalk", d)?))
    })?;
    t.step("recreate-walk", |_| {
        let events = crate::events::drain(ctx);
        let start = Instant::now();
        a.qp = None;
        b.qp = None;
        a.qp = Some(Qp::new_rc(&pd, &a.cq, &a.cq, roce)?);
        b.qp = Some(Qp::new_rc(&pd, &b.cq, &b.cq, roce)?);
        walk.all(&mut a, &mut b, 0x300)?;
        let took = start.elapsed();
        let mut d = format!(
            "destroy + create + walk: {} us (reset + rewalk: {} us)",
            took.as_micros(),
            rewalk_took.as_micros()
        );
        if !events.is_empty() {
            let names: Vec<String> = events.iter().map(|e| e.kind.to_string()).collect();
            d.push_str(&format!(
                "; async events on the test's QPs: {}",
                names.join(", ")
            ));
        }
        Ok(((), d))
    })?;
    drop((a, b, pd));
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_enum_maps_to_bytes() {
        assert_eq!(mtu_bytes(1), 256);
        assert_eq!(mtu_bytes(3), 1024);
        assert_eq!(mtu_bytes(5), 4096);
        assert_eq!(mtu_bytes(0), 0);
    }

    #[test]
    fn no_rdma_here_is_unavailable_not_a_failure() {
        // Machines without RDMA (CI) must say so, not fail a port.
        match DeviceList::new() {
            Err(_) => match run("rxe_ini", 1, Duration::from_secs(1)) {
                SelfTestResult::Unavailable { reason } => {
                    assert!(reason.contains("no RDMA devices"), "{reason}")
                }
                other => panic!("expected Unavailable, got {other:?}"),
            },
            Ok(l) => eprintln!(
                "skipped: this machine has RDMA devices ({}); the lab runs the real test",
                l.names().join(", ")
            ),
        }
    }
}
