//! Protection domain, completion queue, memory region and queue pair, each freed on drop
//! after everything that depends on it (every object holds an `Arc` of what it was made
//! from, so the QP goes before its CQs and PD, the MR before its PD, all before the
//! context). Also the data path libibverbs only has as static inline functions (post send,
//! post receive, poll CQ: calls through the context's ops table), done here with a check
//! for a missing op instead of rdma-sys's `unwrap`.

use std::ffi::CStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iser_guard_core::qp::{QpState, QpType};
use rdma_sys as ffi;

use crate::attrs::{explain_kernel_refusal, validate, ModifyAttrs};
use crate::device::Context;
use crate::error::VerbsError;
use crate::micros;

/// A protection domain.
pub struct Pd {
    ptr: *mut ffi::ibv_pd,
    ctx: Arc<Context>,
}

// SAFETY: libibverbs objects are thread-safe; pointers are only used through its calls.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Pd {
    /// `ibv_alloc_pd`.
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>, VerbsError> {
        // SAFETY: ctx.ptr is a live context.
        let ptr = unsafe { ffi::ibv_alloc_pd(ctx.ptr) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_alloc_pd", ctx.name()));
        }
        Ok(Arc::new(Pd {
            ptr,
            ctx: Arc::clone(ctx),
        }))
    }

    /// The context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by us; MRs and QPs on it hold an Arc, so they are gone.
        let rc = unsafe { ffi::ibv_dealloc_pd(self.ptr) };
        if rc != 0 {
            tracing::warn!(device = %self.ctx.name(), rc, "ibv_dealloc_pd failed");
        }
    }
}

/// A completion queue.
pub struct Cq {
    ptr: *mut ffi::ibv_cq,
    ctx: Arc<Context>,
}

// SAFETY: as for Pd.
unsafe impl Send for Cq {}
// SAFETY: as for Pd.
unsafe impl Sync for Cq {}

/// One work completion, the fields the self-test reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request id.
    pub wr_id: u64,
    /// `ibv_wc_status` (0 = success).
    pub status: u32,
    /// `ibv_wc_opcode` (0 SEND ... 128 RECV).
    pub opcode: u32,
    /// Bytes received.
    pub byte_len: u32,
    /// The provider's error.
    pub vendor_err: u32,
}

/// `IBV_WC_WR_FLUSH_ERR`: the QP went to ERR with this request still queued.
pub const WC_WR_FLUSH_ERR: u32 = 5;

impl Cq {
    /// `ibv_create_cq` with `entries` entries, no completion channel.
    pub fn new(ctx: &Arc<Context>, entries: i32) -> Result<Arc<Cq>, VerbsError> {
        // SAFETY: ctx.ptr live; no channel, no context pointer.
        let ptr = unsafe {
            ffi::ibv_create_cq(
                ctx.ptr,
                entries,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_cq", ctx.name()));
        }
        Ok(Arc::new(Cq {
            ptr,
            ctx: Arc::clone(ctx),
        }))
    }

    /// One `poll_cq` of at most one entry; `None` when the CQ is empty.
    pub fn poll_one(&self) -> Result<Option<Completion>, VerbsError> {
        // SAFETY: the CQ's context is live while self lives; reading the ops table.
        let op = unsafe { (*(*self.ptr).context).ops.poll_cq };
        let Some(poll) = op else {
            return Err(VerbsError::Unsupported {
                device: self.ctx.name().to_string(),
                op: "poll_cq",
            });
        };
        // SAFETY: all-zero is a valid ibv_wc (integers and a union of integers).
        let mut wc: ffi::ibv_wc = unsafe { std::mem::zeroed() };
        // SAFETY: self.ptr live, wc a valid array of one entry.
        let n = unsafe { poll(self.ptr, 1, &mut wc) };
        if n < 0 {
            return Err(VerbsError::ret("ibv_poll_cq", self.ctx.name(), n));
        }
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(Completion {
            wr_id: wc.wr_id,
            status: wc.status,
            opcode: wc.opcode,
            byte_len: wc.byte_len,
            vendor_err: wc.vendor_err,
        }))
    }

    /// Polls until the completion of `wr_id` arrives or `deadline` passes (a short sleep
    /// between empty polls). Completions of other requests are skipped; an error status of
    /// `wr_id` is an error.
    pub fn wait(
        &self,
        wr_id: u64,
        deadline: Instant,
        what: &str,
    ) -> Result<Completion, VerbsError> {
        let start = Instant::now();
        loop {
            while let Some(c) = self.poll_one()? {
                if c.wr_id != wr_id {
                    tracing::debug!(device = %self.ctx.name(), wr_id = c.wr_id, status = c.status, "skipped a completion");
                    continue;
                }
                if c.status != 0 {
                    return Err(VerbsError::Completion {
                        device: self.ctx.name().to_string(),
                        wr_id,
                        status: c.status,
                        status_str: wc_status_str(c.status),
                        vendor_err: c.vendor_err,
                    });
                }
                return Ok(c);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(VerbsError::Timeout {
                    what: what.to_string(),
                    after: now - start,
                });
            }
            std::thread::sleep(Duration::from_micros(200).min(deadline - now));
        }
    }

    /// Empties the CQ (flushed requests after ERR), returning how many it held.
    pub fn drain(&self) -> Result<usize, VerbsError> {
        let mut n = 0;
        while self.poll_one()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

fn wc_status_str(status: u32) -> String {
    // SAFETY: ibv_wc_status_str returns a static string for any value.
    let p = unsafe { ffi::ibv_wc_status_str(status) };
    if p.is_null() {
        return format!("status {status}");
    }
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created by us; QPs using it hold an Arc, so they are gone.
        let rc = unsafe { ffi::ibv_destroy_cq(self.ptr) };
        if rc != 0 {
            tracing::warn!(device = %self.ctx.name(), rc, "ibv_destroy_cq failed");
        }
    }
}

/// A registered buffer (owns the memory).
pub struct Mr {
    ptr: *mut ffi::ibv_mr,
    buf: Box<[u8]>,
    pd: Arc<Pd>,
}

// SAFETY: as for Pd; the buffer is owned.
unsafe impl Send for Mr {}

impl Mr {
    /// Registers a zeroed buffer of `len` bytes with local write access.
    pub fn new(pd: &Arc<Pd>, len: usize) -> Result<Mr, VerbsError> {
        let mut buf = vec![0u8; len].into_boxed_slice();
        // SAFETY: pd live; buf is valid for len bytes and outlives the registration
        // (deregistered in Drop before the box is freed: fields drop after drop()).
        let ptr = unsafe {
            ffi::ibv_reg_mr(
                pd.ptr,
                buf.as_mut_ptr().cast(),
                len,
                ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as libc::c_int,
            )
        };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_reg_mr", pd.ctx.name()));
        }
        Ok(Mr {
            ptr,
            buf,
            pd: Arc::clone(pd),
        })
    }

    /// The buffer.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The buffer, to fill before a send.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn sge(&mut self, len: usize) -> ffi::ibv_sge {
        // SAFETY: ptr is our live MR.
        let lkey = unsafe { (*self.ptr).lkey };
        ffi::ibv_sge {
            addr: self.buf.as_mut_ptr() as u64,
            length: u32::try_from(len.min(self.buf.len())).unwrap_or(u32::MAX),
            lkey,
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by us, once.
        let rc = unsafe { ffi::ibv_dereg_mr(self.ptr) };
        if rc != 0 {
            tracing::warn!(device = %self.pd.ctx.name(), rc, "ibv_dereg_mr failed");
        }
    }
}

/// How a QP is destroyed.
enum QpOwner {
    /// `ibv_create_qp`: `ibv_destroy_qp`.
    Verbs,
    /// `rdma_create_qp`: `rdma_destroy_qp` on the id.
    Cm(Arc<crate::cm::CmId>),
}

/// A queue pair, with the validating `modify_qp`.
pub struct Qp {
    ptr: *mut ffi::ibv_qp,
    qpn: u32,
    qp_type: QpType,
    /// The state after our last successful modify (the kernel's view is asked first).
    state: QpState,
    owner: QpOwner,
    roce: bool,
    _pd: Arc<Pd>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
}

// SAFETY: as for Pd.
unsafe impl Send for Qp {}

/// `IBV_QPT_RC`.
const QPT_RC: u32 = 2;

fn init_attr(send: &Cq, recv: &Cq) -> ffi::ibv_qp_init_attr {
    // SAFETY: all-zero is a valid ibv_qp_init_attr (null pointers, zero integers).
    let mut a: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    a.send_cq = send.ptr;
    a.recv_cq = recv.ptr;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.qp_type = QPT_RC;
    a.sq_sig_all = 1;
    a
}

impl Qp {
    /// Creates an RC QP (`ibv_create_qp`), in RESET. `roce` says whether the port is
    /// Ethernet (for the explanations of kernel refusals).
    pub fn new_rc(
        pd: &Arc<Pd>,
        send: &Arc<Cq>,
        recv: &Arc<Cq>,
        roce: bool,
    ) -> Result<Qp, VerbsError> {
        let mut a = init_attr(send, recv);
        // SAFETY: pd live, a valid.
        let ptr = unsafe { ffi::ibv_create_qp(pd.ptr, &mut a) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_qp", pd.ctx.name()));
        }
        // SAFETY: ptr is our live QP.
        let qpn = unsafe { (*ptr).qp_num };
        tracing::info!(device = %pd.ctx.name(), qpn, "created RC QP");
        Ok(Qp {
            ptr,
            qpn,
            qp_type: QpType::Rc,
            state: QpState::Reset,
            owner: QpOwner::Verbs,
            roce,
            _pd: Arc::clone(pd),
            _send_cq: Arc::clone(send),
            _recv_cq: Arc::clone(recv),
        })
    }

    /// Creates an RC QP on a cm_id (`rdma_create_qp`; librdmacm moves it to INIT and
    /// walks it on connect / accept).
    pub(crate) fn new_cm(
        id: &Arc<crate::cm::CmId>,
        pd: &Arc<Pd>,
        cq: &Arc<Cq>,
    ) -> Result<Qp, VerbsError> {
        let mut a = init_attr(cq, cq);
        // SAFETY: id and pd live, a valid.
        let rc = unsafe { ffi::rdma_create_qp(id.ptr, pd.ptr, &mut a) };
        if rc != 0 {
            return Err(VerbsError::last("rdma_create_qp", pd.ctx.name()));
        }
        // SAFETY: on success id->qp is the new QP.
        let ptr = unsafe { (*id.ptr).qp };
        if ptr.is_null() {
            return Err(VerbsError::Call {
                call: "rdma_create_qp",
                device: pd.ctx.name().to_string(),
                source: std::io::Error::from_raw_os_error(libc::EFAULT),
            });
        }
        // SAFETY: live QP.
        let qpn = unsafe { (*ptr).qp_num };
        Ok(Qp {
            ptr,
            qpn,
            qp_type: QpType::Rc,
            state: QpState::Init,
            owner: QpOwner::Cm(Arc::clone(id)),
            roce: true,
            _pd: Arc::clone(pd),
            _send_cq: Arc::clone(cq),
            _recv_cq: Arc::clone(cq),
        })
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The device's name.
    pub fn device(&self) -> &str {
        self._pd.ctx.name()
    }

    /// The state the kernel reports (`ibv_query_qp`), falling back to the last known one
    /// when the query fails.
    pub fn query_state(&self) -> QpState {
        // SAFETY: all-zero valid for both structs.
        let mut attr: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ptr live, out pointers valid. IBV_QP_STATE = 1.
        let rc = unsafe { ffi::ibv_query_qp(self.ptr, &mut attr, 1, &mut init) };
        if rc != 0 {
            return self.state;
        }
        QpState::from_kernel(attr.qp_state).unwrap_or(QpState::Unknown)
    }

    /// The validating `modify_qp`: asks the kernel for the QP's state, checks the
    /// transition and the mask against the IB spec table, and only then calls
    /// `ibv_modify_qp`. Every attempt is logged (device, QPN, old -> new, mask by name,
    /// result, time).
    pub fn modify(&mut self, attrs: &ModifyAttrs) -> Result<(), VerbsError> {
        let start = Instant::now();
        let from = self.query_state();
        let to = attrs.target();
        let mask = attrs.mask();
        let device = self.device().to_string();
        if let Err(e) = validate(from, self.qp_type, attrs) {
            tracing::warn!(device = %device, qpn = self.qpn, from = %from, to = %to, mask = %mask,
                result = "refused", reason = %e, took_us = micros(start.elapsed()),
                "modify_qp refused before the call");
            return Err(VerbsError::Refused {
                device,
                qpn: self.qpn,
                source: e,
            });
        }
        let mut raw = to_ffi(attrs);
        let bits = libc::c_int::try_from(mask.bits()).unwrap_or(libc::c_int::MAX);
        // SAFETY: ptr live; raw fully initialised; the mask names only fields set in raw.
        let rc = unsafe { ffi::ibv_modify_qp(self.ptr, &mut raw, bits) };
        let took_us = micros(start.elapsed());
        if rc != 0 {
            let errno = rc.abs();
            let explanation = explain_kernel_refusal(from, self.qp_type, attrs, errno, self.roce);
            let source = std::io::Error::from_raw_os_error(errno);
            tracing::warn!(device = %device, qpn = self.qpn, from = %from, to = %to, mask = %mask,
                result = %source, took_us, "modify_qp failed in the kernel");
            return Err(VerbsError::KernelRefused {
                device,
                qpn: self.qpn,
                from,
                to,
                qp_type: self.qp_type,
                mask,
                source,
                explanation,
            });
        }
        self.state = to;
        tracing::info!(device = %device, qpn = self.qpn, from = %from, to = %to, mask = %mask,
            result = "ok", took_us, "modify_qp");
        Ok(())
    }

    /// Posts one receive of `mr`'s whole buffer.
    pub fn post_recv(&mut self, mr: &mut Mr, wr_id: u64) -> Result<(), VerbsError> {
        let mut sge = mr.sge(mr.buf.len());
        let mut wr = ffi::ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: the QP's context is live; reading its ops table.
        let op = unsafe { (*(*self.ptr).context).ops.post_recv };
        let Some(post) = op else {
            return Err(VerbsError::Unsupported {
                device: self.device().to_string(),
                op: "post_recv",
            });
        };
        // SAFETY: ptr live; wr and sge valid for the call (the provider copies them).
        let rc = unsafe { post(self.ptr, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(VerbsError::ret("ibv_post_recv", self.device(), rc));
        }
        Ok(())
    }

    /// Posts one signalled SEND of the first `len` bytes of `mr`.
    pub fn post_send(&mut self, mr: &mut Mr, len: usize, wr_id: u64) -> Result<(), VerbsError> {
        let mut sge = mr.sge(len);
        // SAFETY: all-zero is a valid ibv_send_wr (null pointers, zero unions).
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ffi::ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
        let mut bad: *mut ffi::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: as in post_recv.
        let op = unsafe { (*(*self.ptr).context).ops.post_send };
        let Some(post) = op else {
            return Err(VerbsError::Unsupported {
                device: self.device().to_string(),
                op: "post_send",
            });
        };
        // SAFETY: ptr live; wr and sge valid for the call.
        let rc = unsafe { post(self.ptr, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(VerbsError::ret("ibv_post_send", self.device(), rc));
        }
        Ok(())
    }
}

fn to_ffi(a: &ModifyAttrs) -> ffi::ibv_qp_attr {
    // SAFETY: all-zero is a valid ibv_qp_attr (integers, a GID union of bytes).
    let mut r: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
    r.qp_state = a.target() as u32;
    r.cur_qp_state = a.cur_state.map(|s| s as u32).unwrap_or(0);
    r.qp_access_flags = a.access_flags;
    r.pkey_index = a.pkey_index;
    r.port_num = a.port;
    r.path_mtu = a.path_mtu;
    r.dest_qp_num = a.dest_qpn;
    r.rq_psn = a.rq_psn;
    r.sq_psn = a.sq_psn;
    r.max_dest_rd_atomic = a.max_dest_rd_atomic;
    r.max_rd_atomic = a.max_rd_atomic;
    r.min_rnr_timer = a.min_rnr_timer;
    r.timeout = a.timeout;
    r.retry_cnt = a.retry_cnt;
    r.rnr_retry = a.rnr_retry;
    if let Some(av) = a.av {
        r.ah_attr.dlid = av.dlid;
        r.ah_attr.sl = av.sl;
        r.ah_attr.port_num = av.port;
        if let Some(g) = av.global {
            r.ah_attr.is_global = 1;
            r.ah_attr.grh.dgid = ffi::ibv_gid { raw: g.dgid };
            r.ah_attr.grh.sgid_index = g.sgid_index;
            r.ah_attr.grh.hop_limit = g.hop_limit;
            r.ah_attr.grh.traffic_class = g.traffic_class;
            r.ah_attr.grh.flow_label = g.flow_label;
        }
    }
    r
}

impl Drop for Qp {
    fn drop(&mut self) {
        match &self.owner {
            QpOwner::Verbs => {
                // SAFETY: created by us, destroyed once; the CQs and PD outlive it (Arcs
                // released after this body).
                let rc = unsafe { ffi::ibv_destroy_qp(self.ptr) };
                if rc != 0 {
                    tracing::warn!(device = %self.device(), qpn = self.qpn, rc, "ibv_destroy_qp failed");
                }
            }
            // SAFETY: the id is live (we hold it) and its QP is this one.
            QpOwner::Cm(id) => unsafe { ffi::rdma_destroy_qp(id.ptr) },
        }
    }
}
