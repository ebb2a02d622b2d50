//! The typed events the classifier produces: [`Signature`], [`SignatureKind`], [`NamedDevices`]
//! and the record-level [`KernelEvent`]. These types are a contract with the recovery engine
//! and `watch`: variants are added, never renamed.

use serde::{Deserialize, Serialize};

use crate::qp::QpState;

/// The GSI queue pair's number: QP 1 on every RDMA port.
pub const GSI_QPN: u32 = 1;
/// The SMI queue pair's number (InfiniBand only; RoCE has no QP 0).
pub const SMI_QPN: u32 = 0;

/// One classified kernel record: what it says ([`SignatureKind`]) and about which device
/// ([`NamedDevices`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Signature {
    /// What the kernel reported.
    pub kind: SignatureKind,
    /// The device(s) the record names, from the text prefix and the `DEVICE=` dictionary
    /// value. Every field is optional: empty when the record names no device.
    pub device: NamedDevices,
}

/// A classified record of the kernel log with its position in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelEvent {
    /// The kernel's 64-bit sequence number of the record.
    pub seq: u64,
    /// Monotonic timestamp of the record, microseconds since boot.
    pub usec: u64,
    /// Syslog level (0 emerg … 7 debug).
    pub level: u8,
    /// Written by the kernel (facility 0). Only trusted events may trigger actions: anything
    /// else was written into /dev/kmsg by userspace and could be forged.
    pub trusted: bool,
    /// What the record says.
    pub signature: Signature,
}

/// The RDMA drivers whose messages the classifier knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RdmaDriver {
    /// Intel E810/X722 (`irdma`, parent netdev driver `ice` or `i40e`).
    Irdma,
    /// Broadcom NetXtreme-E (`bnxt_re`).
    BnxtRe,
    /// Marvell/QLogic FastLinQ (`qedr`).
    Qedr,
    /// HiSilicon (`hns_roce_hw_v2`).
    Hns,
    /// Soft-RoCE (`rdma_rxe`).
    Rxe,
    /// NVIDIA/Mellanox ConnectX (`mlx5_ib`).
    Mlx5,
    /// NVIDIA/Mellanox ConnectX-3 (`mlx4_ib`).
    Mlx4,
}

impl RdmaDriver {
    /// The kernel module name.
    pub fn module(self) -> &'static str {
        match self {
            RdmaDriver::Irdma => "irdma",
            RdmaDriver::BnxtRe => "bnxt_re",
            RdmaDriver::Qedr => "qedr",
            RdmaDriver::Hns => "hns_roce_hw_v2",
            RdmaDriver::Rxe => "rdma_rxe",
            RdmaDriver::Mlx5 => "mlx5_ib",
            RdmaDriver::Mlx4 => "mlx4_ib",
        }
    }
}

impl std::fmt::Display for RdmaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.module())
    }
}

/// What a kernel record says. Numbers keep the kernel's meaning (QP numbers, errnos as
/// printed, i.e. negative; iSCSI error codes as in open-iscsi's `iscsi_if.h`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SignatureKind {
    // ---- QP state machine ----------------------------------------------------------------
    /// irdma refused a `modify_qp` state change (`modify_qp invalid for qp_id=N,
    /// old_state=0xN, new_state=0xN`). With `qp == 1` and `from == Err` this is the field
    /// incident: the GSI QP is stuck in ERR and only re-creating the device restores it.
    StuckQpTransition {
        /// QP number (`qp_id`); 1 is the GSI QP.
        qp: u32,
        /// irdma's cached state of the QP (`old_state`).
        from: QpState,
        /// The requested state (`new_state`).
        to: QpState,
    },
    /// The MAD layer's attempt to move its QP back to RTS after a send error failed
    /// (`ib_mad_send_error - ib_modify_qp to RTS: -22`, older kernels `mad_error_handler -
    /// ib_modify_qp to RTS : -22`). The MAD layer asked SQE→RTS on its QP (QP 1 on RoCE).
    MadRtsFailed {
        /// The errno returned by `ib_modify_qp`, as printed (negative).
        errno: i32,
        /// The pre-4.x `mad_error_handler` wording.
        legacy: bool,
    },
    /// An asynchronous error event on a MAD QP (`Fatal error (N) on MAD QP (N)`).
    MadQpFatal {
        /// `enum ib_event_type` (1 QP_FATAL, 2 QP_REQ_ERR, 3 QP_ACCESS_ERR).
        event: u32,
        /// The MAD QP's number (0 SMI, 1 GSI).
        qp: u32,
    },
    /// The MAD layer could not bring a new MAD QP up at port start
    /// (`Couldn't change QP%d state to INIT|RTR|RTS: %d`).
    MadQpStartFailed {
        /// The MAD QP's number (0 SMI, 1 GSI).
        qp: u32,
        /// The state it tried to reach.
        to: QpState,
        /// The errno, as printed.
        errno: i32,
    },
    /// irdma's asynchronous-event handler saw an unexpected event
    /// (`abnormal ae_id = 0x… bool qp=… qp_id = N, ae_src=N`); for a QP it moves it to ERR.
    IrdmaAsyncError {
        /// The hardware async-event id (e.g. 0x401 INVALID_ARP_ENTRY).
        ae_id: u32,
        /// The event concerns a QP (`bool qp=1`) rather than a CQ.
        is_qp: bool,
        /// The QP (or CQ) number.
        qp: u32,
        /// The event source (printed since 2022).
        ae_src: Option<u32>,
    },
    /// A driver rejected a modify_qp attribute mask (bnxt_re line 1 `Invalid attribute mask:
    /// %#x specified `, qedr line 1 `modify qp: invalid attribute mask=0x%x specified for`).
    InvalidAttrMask {
        /// Which driver.
        driver: RdmaDriver,
        /// The attribute mask (`enum ib_qp_attr_mask` bits).
        mask: u32,
    },
    /// bnxt_re's second line of a rejected modify_qp (`for qpn: %#x type: %#x`).
    RejectedQpInfo {
        /// Which driver.
        driver: RdmaDriver,
        /// QP number.
        qp: u32,
        /// `enum ib_qp_type` value (1 GSI, 2 RC, 4 UD, …).
        qp_type: u32,
    },
    /// A driver other than irdma rejected a state transition: bnxt_re line 3
    /// (`curr_qp_state=0x%x, new_qp_state=0x%x`) or qedr line 2 (`qpn=0x%x of type=0x%x
    /// old_qp_state=0x%x, new_qp_state=0x%x`).
    InvalidTransition {
        /// Which driver.
        driver: RdmaDriver,
        /// QP number, when the line carries it (qedr).
        qp: Option<u32>,
        /// `enum ib_qp_type` value, when the line carries it (qedr).
        qp_type: Option<u32>,
        /// The driver's current state.
        from: QpState,
        /// The requested state.
        to: QpState,
        /// The attribute mask, when the same record carries it (qedr prints both lines in
        /// one record).
        mask: Option<u32>,
    },
    /// A driver rejected a modify_qp without saying which transition (hns
    /// `ib_modify_qp_is_ok failed` / `failed to check modify qp state`, rxe `invalid mask or
    /// state for qp`).
    ModifyQpRejected {
        /// Which driver.
        driver: RdmaDriver,
    },
    /// rxe's dynamic-debug QP state line (`qp#N state -> ERR`).
    RxeQpState {
        /// QP number.
        qp: u32,
        /// The new state.
        state: QpState,
    },

    // ---- ports and links -----------------------------------------------------------------
    /// The RDMA core marked a port down (`infiniband D: set down`).
    IbPortDown,
    /// The RDMA core marked a port active (`infiniband D: set active`).
    IbPortActive,
    /// A RoCE NIC driver reported its netdev link down (ice/i40e/bnxt_en `NIC Link is Down`,
    /// mlx5 `Link down`).
    NetdevLinkDown,
    /// A RoCE NIC driver reported its netdev link up (ice/i40e/bnxt_en `NIC Link is up …`,
    /// mlx5 `Link up`).
    NetdevLinkUp {
        /// The speed text when printed (e.g. `100 G`).
        speed: Option<String>,
    },

    // ---- iSCSI / iSER --------------------------------------------------------------------
    /// libiscsi reported a connection error (` connectionS:C: detected conn error (N)`).
    IscsiConnError {
        /// The iSCSI error code (`iscsi_if.h`); see [`IscsiErr`].
        code: IscsiErr,
    },
    /// The session's replacement timeout expired (` sessionS: session recovery timed out
    /// after N secs`): its disks go offline and I/O fails.
    IscsiSessionRecoveryTimedOut {
        /// The timeout that expired, seconds.
        secs: u32,
    },
    /// libiscsi could not send a NOP-Out (` connectionS:C: Could not send nopout`).
    IscsiNopoutFailed,
    /// libiscsi could not send a task-management function (`Could not send TMF.`).
    IscsiTmfFailed,
    /// A NOP-Out ping timed out (`ping timeout of N secs expired, recv timeout N, …`).
    IscsiPingTimeout {
        /// The ping timeout, seconds.
        timeout_secs: u32,
        /// The receive timeout, seconds.
        recv_timeout_secs: u32,
    },
    /// An iSER work completion failed (`iser: iser_err_comp: <type> failure: <status> (N)
    /// vend_err 0x..`); iSER fails the connection (1011).
    IserCompletionError {
        /// The work request type (`task_rsp`, `command`, …).
        wr: String,
        /// `ib_wc_status_msg()` text.
        status: String,
        /// `enum ib_wc_status` value.
        status_code: u32,
        /// The vendor error.
        vendor_err: u32,
    },
    /// iSER saw `async event port error (10) on device D port N`.
    IserPortError,
    /// iSER saw `async event port active (9) on device D port N`.
    IserPortActive,
    /// iSER saw another asynchronous device event (`async event <name> (N) on device …`).
    IserAsyncEvent {
        /// `enum ib_event_type` value.
        event: u32,
        /// `ib_event_msg()` text.
        name: String,
    },
    /// iSER could not prepare a task because the device is gone
    /// (`iscsi_iser_task_init: Failed to init task …, err = -19`).
    IserTaskInitFailed {
        /// The errno, as printed.
        errno: i32,
    },

    // ---- SCSI and block ------------------------------------------------------------------
    /// A SCSI command failed (`sd H:C:T:L: [sdX] tag#N FAILED Result: hostbyte=… …`).
    ScsiCommandFailed {
        /// The tag, when printed.
        tag: Option<u32>,
        /// `hostbyte=` value (e.g. `DID_ABORT`).
        hostbyte: String,
        /// `driverbyte=` value, when printed.
        driverbyte: Option<String>,
    },
    /// The block layer failed a request (`I/O error, dev sdX, sector N op 0x…:(WRITE) …`).
    BlockIoError {
        /// First sector, when printed.
        sector: Option<u64>,
        /// Operation name (`READ`, `WRITE`, …), when printed.
        op: Option<String>,
    },
    /// SCSI refused I/O to an offline device (`sd H:C:T:L: rejecting I/O to offline device`).
    ScsiRejectingOffline,

    // ---- RDMA CM (dynamic debug) ---------------------------------------------------------
    /// The peer rejected a connection (`RDMA CM: REJECTED: <reason>`); `invalid service ID`
    /// means nothing listens on the target, e.g. its iSER portal died with its device.
    RdmaCmRejected {
        /// The reject reason text.
        reason: String,
    },
    /// Address resolution failed (`RDMA CM: ADDR_ERROR: failed to acquire device. status -19`):
    /// no RDMA device owns the source address (the local device is missing).
    RdmaCmAddrError {
        /// The explanation text.
        reason: String,
        /// The status, when printed.
        status: Option<i32>,
    },
    /// Another RDMA CM error line (`RDMA CM: ROUTE_ERROR: …`, `UNREACHABLE`, `CONNECT_ERROR`).
    RdmaCmError {
        /// The event name as printed (`ROUTE_ERROR`).
        event: String,
        /// The rest of the line.
        detail: String,
        /// The status, when printed.
        status: Option<i32>,
    },

    // ---- MAD port start-up (device registration, e.g. after a re-creation) ---------------
    /// The MAD layer could not open a port of a newly registered device
    /// (`Couldn't open port %d`, `Couldn't open port %d for agents`; mad.c/agent.c
    /// `ib_mad_init_device`): that port has no working QP 0/1, so no RDMA CM handshake (and no
    /// iSER login) can run on it. Right after a re-creation it means the re-creation failed.
    MadPortOpenFailed {
        /// The port number.
        port: u32,
        /// The agents' open failed (`… for agents`), not the MAD port itself.
        agents: bool,
    },
    /// A step of the MAD layer's port open failed (`Couldn't create ib_mad PD|CQ`,
    /// `Couldn't create ib_mad QP%d`, `Couldn't start port`, `Couldn't post receive WRs`);
    /// `Couldn't open port N` follows.
    MadPortSetupFailed {
        /// The step, as printed (`create ib_mad CQ`, `start port`, …).
        step: String,
    },

    // ---- driver QP failures ----------------------------------------------------------------
    /// A driver failed a QP command in the hardware (bnxt_re `Failed to modify HW QP`,
    /// `Failed to destroy HW QP`, `Failed to create HW QP`, `Failed to modify Shadow QP for
    /// QP1`).
    DriverQpCommandFailed {
        /// Which driver.
        driver: RdmaDriver,
        /// `modify`, `destroy`, `create` or `modify_shadow_qp1`.
        op: String,
    },
    /// An error completion dumped by mlx5_ib (`WC error: %d, Message: %s`, older `dump error
    /// cqe`): a work request on some QP completed in error, which moves that QP to ERR.
    Mlx5ErrorCompletion {
        /// `enum ib_wc_status` value, when printed.
        status: Option<u32>,
        /// `ib_wc_status_msg()` text, when printed.
        message: Option<String>,
    },
    /// An asynchronous QP event a driver does not handle (mlx5_ib/mlx4_ib `Unexpected event
    /// type %d on QP %06x`).
    UnexpectedQpEvent {
        /// Which driver.
        driver: RdmaDriver,
        /// The event type (driver's numbering).
        event: u32,
        /// QP number.
        qp: u32,
    },

    // ---- iSER connection -------------------------------------------------------------------
    /// ib_iser's QP event callback (`iser_qp_event_callback: qp event %s (%d)`): an
    /// asynchronous event on an iSER connection's RC QP (`QP fatal error (1)`, `QP request
    /// error (2)`, `QP access error (3)`, `send queue drained (5)`, …). The line names no
    /// device or session.
    IserQpEvent {
        /// `enum ib_event_type` value.
        event: u32,
        /// `ib_event_msg()` text.
        name: String,
    },
    /// ib_iser failed to set up or tear down a connection (`Failed to disconnect, conn: 0x…
    /// err %d`, `failure connecting: %d`, `rdma_resolve_addr failed: %d`, `resolve route
    /// failed: %d`, `rdma_create_id failed: %d`, `device lookup/creation failed`, `failed to
    /// allocate an IB resource`, `ib_post_send failed, ret:%d …`, `ib_post_recv failed
    /// ret=%d`). See [`IserFailure`].
    IserConnFailure {
        /// What failed.
        what: IserFailure,
        /// The errno, when printed.
        errno: Option<i32>,
    },

    // ---- SCSI error handling and buffer I/O ------------------------------------------------
    /// SCSI error handling gave up on a device and offlined it (`Device offlined - not ready
    /// after error recovery`, scsi_error.c `scsi_eh_offline_sdevs`): its I/O fails until the
    /// session logs in again and the device is set running.
    ScsiDeviceOfflined,
    /// A command exceeded its total time budget (`timing out command, waited %lus`,
    /// scsi_lib.c `scsi_cmd_runtime_exceeced`).
    ScsiCommandTimedOut {
        /// Seconds waited.
        secs: u64,
    },
    /// SCSI refused I/O to a device being deleted (`rejecting I/O to dead device`).
    ScsiRejectingDead,
    /// The block layer failed a request with a status other than `I/O` (`timeout error`,
    /// `recoverable transport error`, `critical target error`, `device offline error`, …,
    /// `… error, dev sdX, sector N op 0x…:(OP) …`; block/blk-mq.c `print_req_error`).
    BlockRequestError {
        /// `blk_status_to_str()` text without ` error` (`recoverable transport`).
        status: String,
        /// First sector, when printed.
        sector: Option<u64>,
        /// Operation name, when printed.
        op: Option<String>,
    },
    /// A buffer-cache I/O failed (`Buffer I/O error on dev sdX, logical block N, lost async
    /// page write`; fs/buffer.c): a file system lost a write or could not read.
    BufferIoError {
        /// The logical block, when printed.
        block: Option<u64>,
        /// What was lost (`lost async page write`, `async page read`, …), when printed.
        what: Option<String>,
    },

    // ---- kernel bugs -----------------------------------------------------------------------
    /// A kernel bug report (oops, `kernel BUG at`, `WARNING:`, KASAN, panic, a hung iSCSI
    /// task) in a module this job depends on (ib_iser, rdma_rxe, ib_core, …) or a panic. Not
    /// something the agent can repair: the operator is alerted, no action is taken.
    KernelBug {
        /// What kind of report. See [`KernelBugKind`].
        what: KernelBugKind,
        /// The module the report names (`ib_iser`), when it names one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        module: Option<String>,
        /// The function (`iser_conn_terminate+0x1c/0x90`), when printed.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        function: Option<String>,
        /// The source location (`drivers/infiniband/core/cq.c:345`), when printed.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        location: Option<String>,
        /// The rest of the report's first line (the panic reason, the KASAN kind, the hung
        /// task), when printed.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        detail: Option<String>,
    },

    // ---- driver resets and driver stacks -----------------------------------------------
    /// irdma's control QP (CQP) failed a command (`[%s Error][op_code=%d] status=%d
    /// waiting=%d completion_err=%d maj=0x%x min=0x%x`; irdma utils.c
    /// `irdma_handle_cqp_op`). A CQP that times out makes irdma request a reset.
    IrdmaCqpFailed {
        /// The command's name as irdma prints it (`Modify QP Cmd`, `Destroy QP Cmd`).
        command: String,
        /// `enum irdma_cqp_cmds` value.
        op_code: u32,
        /// The status returned (an errno, negative; e.g. -110 timed out).
        status: i32,
        /// The completion's major error code.
        maj: u32,
        /// The completion's minor error code.
        min: u32,
    },
    /// irdma gave up waiting for a QP to reach SQD (`modify_qp timed out waiting for
    /// suspend. qp_id = %d, last_ae = 0x%x`; irdma verbs.c `irdma_wait_for_suspend`).
    IrdmaSuspendTimeout {
        /// The QP number.
        qp: u32,
        /// The last asynchronous event irdma saw on it.
        last_ae: u32,
    },
    /// An RDMA driver asked its NIC driver to reset the function (irdma `Requesting a
    /// reset`; irdma main.c / icrdma_if.c `irdma_request_reset`): the NIC driver will
    /// unplug the RDMA auxiliary device and plug it in again, a re-creation by the driver.
    DriverResetRequested {
        /// Which driver asked.
        driver: RdmaDriver,
    },
    /// The NIC driver could not rebuild the function after a reset (ice `Rebuild failed,
    /// unload and reload driver`; ice_main.c `ice_rebuild`): no netdev traffic and no RDMA
    /// device until the driver is reloaded.
    NicRebuildFailed,
    /// The NIC driver runs without its DDP package, in safe mode, which disables RDMA (ice
    /// `Package download failed. Advanced features disabled - Device now in Safe Mode`,
    /// ice_main.c `ice_probe`; `The DDP package file was not found or could not be read.
    /// Entering Safe Mode`, `ice_load_pkg`).
    NicSafeMode,
    /// dm-multipath failed or reinstated a path (`device-mapper: multipath: %s: Failing path
    /// %s.` / `Reinstating path %s.`; dm-mpath.c `fail_path`, `reinstate_path`; before 5.x
    /// without the map's name).
    MultipathPath {
        /// The map's device number (`253:0`), when printed.
        map: Option<String>,
        /// The path's device number (`8:16`).
        path: String,
        /// Failed (true) or reinstated (false).
        failed: bool,
    },

    // ---- format drift --------------------------------------------------------------------
    /// A record carries a known signature's distinctive words but not its known format: the
    /// kernel's wording changed. Reported so the format drift is visible; never acted on.
    UnknownVariant {
        /// The distinctive words that were found.
        anchor: String,
    },
}

impl SignatureKind {
    /// A short stable name of the kind (the serde tag), e.g. `stuck_qp_transition`.
    pub fn name(&self) -> &'static str {
        match self {
            SignatureKind::StuckQpTransition { .. } => "stuck_qp_transition",
            SignatureKind::MadRtsFailed { .. } => "mad_rts_failed",
            SignatureKind::MadQpFatal { .. } => "mad_qp_fatal",
            SignatureKind::MadQpStartFailed { .. } => "mad_qp_start_failed",
            SignatureKind::IrdmaAsyncError { .. } => "irdma_async_error",
            SignatureKind::InvalidAttrMask { .. } => "invalid_attr_mask",
            SignatureKind::RejectedQpInfo { .. } => "rejected_qp_info",
            SignatureKind::InvalidTransition { .. } => "invalid_transition",
            SignatureKind::ModifyQpRejected { .. } => "modify_qp_rejected",
            SignatureKind::RxeQpState { .. } => "rxe_qp_state",
            SignatureKind::IbPortDown => "ib_port_down",
            SignatureKind::IbPortActive => "ib_port_active",
            SignatureKind::NetdevLinkDown => "netdev_link_down",
            SignatureKind::NetdevLinkUp { .. } => "netdev_link_up",
            SignatureKind::IscsiConnError { .. } => "iscsi_conn_error",
            SignatureKind::IscsiSessionRecoveryTimedOut { .. } => {
                "iscsi_session_recovery_timed_out"
            }
            SignatureKind::IscsiNopoutFailed => "iscsi_nopout_failed",
            SignatureKind::IscsiTmfFailed => "iscsi_tmf_failed",
            SignatureKind::IscsiPingTimeout { .. } => "iscsi_ping_timeout",
            SignatureKind::IserCompletionError { .. } => "iser_completion_error",
            SignatureKind::IserPortError => "iser_port_error",
            SignatureKind::IserPortActive => "iser_port_active",
            SignatureKind::IserAsyncEvent { .. } => "iser_async_event",
            SignatureKind::IserTaskInitFailed { .. } => "iser_task_init_failed",
            SignatureKind::ScsiCommandFailed { .. } => "scsi_command_failed",
            SignatureKind::BlockIoError { .. } => "block_io_error",
            SignatureKind::ScsiRejectingOffline => "scsi_rejecting_offline",
            SignatureKind::RdmaCmRejected { .. } => "rdma_cm_rejected",
            SignatureKind::RdmaCmAddrError { .. } => "rdma_cm_addr_error",
            SignatureKind::RdmaCmError { .. } => "rdma_cm_error",
            SignatureKind::MadPortOpenFailed { .. } => "mad_port_open_failed",
            SignatureKind::MadPortSetupFailed { .. } => "mad_port_setup_failed",
            SignatureKind::DriverQpCommandFailed { .. } => "driver_qp_command_failed",
            SignatureKind::Mlx5ErrorCompletion { .. } => "mlx5_error_completion",
            SignatureKind::UnexpectedQpEvent { .. } => "unexpected_qp_event",
            SignatureKind::IserQpEvent { .. } => "iser_qp_event",
            SignatureKind::IserConnFailure { .. } => "iser_conn_failure",
            SignatureKind::ScsiDeviceOfflined => "scsi_device_offlined",
            SignatureKind::ScsiCommandTimedOut { .. } => "scsi_command_timed_out",
            SignatureKind::ScsiRejectingDead => "scsi_rejecting_dead",
            SignatureKind::BlockRequestError { .. } => "block_request_error",
            SignatureKind::BufferIoError { .. } => "buffer_io_error",
            SignatureKind::KernelBug { .. } => "kernel_bug",
            SignatureKind::IrdmaCqpFailed { .. } => "irdma_cqp_failed",
            SignatureKind::IrdmaSuspendTimeout { .. } => "irdma_suspend_timeout",
            SignatureKind::DriverResetRequested { .. } => "driver_reset_requested",
            SignatureKind::NicRebuildFailed => "nic_rebuild_failed",
            SignatureKind::NicSafeMode => "nic_safe_mode",
            SignatureKind::MultipathPath { .. } => "multipath_path",
            SignatureKind::UnknownVariant { .. } => "unknown_variant",
        }
    }

    /// The state transition the record reports, if any: `(qp, from, to)`. For
    /// [`SignatureKind::MadRtsFailed`] that is what the MAD layer asked (SQE→RTS on QP 1);
    /// the driver may have seen its own cached state instead (irdma: ERR).
    pub fn transition(&self) -> Option<(Option<u32>, QpState, QpState)> {
        match *self {
            SignatureKind::StuckQpTransition { qp, from, to } => Some((Some(qp), from, to)),
            SignatureKind::InvalidTransition { qp, from, to, .. } => Some((qp, from, to)),
            SignatureKind::MadRtsFailed { .. } => Some((Some(GSI_QPN), QpState::Sqe, QpState::Rts)),
            _ => None,
        }
    }

    /// The record proves that the GSI QP (QP 1) of its port is stuck in ERR: only
    /// re-creating the RDMA device restores it. True for irdma's ERR→non-RESET/ERR refusal
    /// on QP 1 and for the MAD layer's failed return to RTS (which only fails when the QP is
    /// not in SQE, i.e. in ERR).
    pub fn is_stuck_gsi(&self) -> bool {
        match *self {
            SignatureKind::StuckQpTransition { qp, from, to } => {
                qp == GSI_QPN
                    && from == QpState::Err
                    && !matches!(to, QpState::Reset | QpState::Err)
            }
            SignatureKind::MadRtsFailed { .. } => true,
            SignatureKind::MadQpFatal { qp, .. } => qp == GSI_QPN,
            _ => false,
        }
    }

    /// The RDMA driver the record comes from, when it names one.
    pub fn rdma_driver(&self) -> Option<RdmaDriver> {
        match *self {
            SignatureKind::StuckQpTransition { .. }
            | SignatureKind::IrdmaAsyncError { .. }
            | SignatureKind::IrdmaCqpFailed { .. }
            | SignatureKind::IrdmaSuspendTimeout { .. } => Some(RdmaDriver::Irdma),
            SignatureKind::DriverResetRequested { driver } => Some(driver),
            SignatureKind::InvalidAttrMask { driver, .. }
            | SignatureKind::RejectedQpInfo { driver, .. }
            | SignatureKind::InvalidTransition { driver, .. }
            | SignatureKind::ModifyQpRejected { driver } => Some(driver),
            SignatureKind::RxeQpState { .. } => Some(RdmaDriver::Rxe),
            SignatureKind::DriverQpCommandFailed { driver, .. }
            | SignatureKind::UnexpectedQpEvent { driver, .. } => Some(driver),
            SignatureKind::Mlx5ErrorCompletion { .. } => Some(RdmaDriver::Mlx5),
            _ => None,
        }
    }
}

/// What ib_iser failed to do (its `iser_err` messages about one connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IserFailure {
    /// `iser_conn_terminate: Failed to disconnect, conn: 0x… err %d` (rdma_disconnect).
    Disconnect,
    /// `iser_connect_error: failure connecting: %d` (the RDMA CM reported an error event).
    Connect,
    /// `iser_connect: rdma_create_id failed: %d`.
    CreateId,
    /// `iser_connect: rdma_resolve_addr failed: %d`.
    ResolveAddr,
    /// `iser_addr_handler: resolve route failed: %d`.
    ResolveRoute,
    /// `iser_addr_handler: device lookup/creation failed`.
    DeviceLookup,
    /// `iser_route_handler`/`iser_create_ib_conn_res`: `failed to allocate an IB resource`.
    IbResource,
    /// `iser_post_send: ib_post_send failed, ret:%d opcode:%d`.
    PostSend,
    /// `iser_post_recvm`/`iser_post_recvl`: `ib_post_recv failed ret=%d`,
    /// `ib_post_recv login failed ret=%d`.
    PostRecv,
}

impl IserFailure {
    /// A short operator phrase.
    pub fn describe(self) -> &'static str {
        match self {
            IserFailure::Disconnect => "disconnecting an iSER connection failed",
            IserFailure::Connect => "an iSER connection attempt failed",
            IserFailure::CreateId => "creating an RDMA CM id for iSER failed",
            IserFailure::ResolveAddr => "resolving the target address for iSER failed",
            IserFailure::ResolveRoute => "resolving the route to the target for iSER failed",
            IserFailure::DeviceLookup => "no usable RDMA device for the iSER connection",
            IserFailure::IbResource => "allocating the iSER connection's QP/CQ/MRs failed",
            IserFailure::PostSend => "posting an iSER send failed (the QP is not in RTS)",
            IserFailure::PostRecv => "posting iSER receive buffers failed (the QP is in ERR)",
        }
    }
}

/// The kind of a kernel bug report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelBugKind {
    /// `RIP: 0010:func+0x…/0x… [module]` of an oops (the faulting instruction).
    Oops,
    /// `kernel BUG at drivers/…:N!` (`BUG()`).
    Bug,
    /// `WARNING: CPU: N PID: N at … func+0x…/0x… [module]` (`WARN()`).
    Warning,
    /// `BUG: KASAN: <kind> in func+0x…/0x… [module]`.
    Kasan,
    /// `Kernel panic - not syncing: …`.
    Panic,
    /// `INFO: task iscsid:N blocked for more than N seconds.` (an iSCSI task hung).
    HungTask,
}

impl KernelBugKind {
    /// The report's name as an operator knows it.
    pub fn describe(self) -> &'static str {
        match self {
            KernelBugKind::Oops => "kernel oops",
            KernelBugKind::Bug => "kernel BUG()",
            KernelBugKind::Warning => "kernel WARNING",
            KernelBugKind::Kasan => "KASAN memory-safety report",
            KernelBugKind::Panic => "kernel panic",
            KernelBugKind::HungTask => "hung task",
        }
    }
}

/// An iSCSI error code as reported by ` connectionS:C: detected conn error (N)`
/// (open-iscsi `include/iscsi_if.h`, `ISCSI_ERR_BASE` = 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IscsiErr(pub u32);

impl IscsiErr {
    /// `ISCSI_ERR_CONN_FAILED`: the transport connection failed.
    pub const CONN_FAILED: IscsiErr = IscsiErr(1011);
    /// `ISCSI_ERR_SESSION_FAILED`.
    pub const SESSION_FAILED: IscsiErr = IscsiErr(1013);
    /// `ISCSI_ERR_SCSI_EH_SESSION_RST`: SCSI error handling reset the session.
    pub const SCSI_EH_SESSION_RST: IscsiErr = IscsiErr(1021);
    /// `ISCSI_ERR_NOP_TIMEDOUT`: a NOP-Out ping got no answer.
    pub const NOP_TIMEDOUT: IscsiErr = IscsiErr(1022);

    /// The kernel constant's name without the `ISCSI_ERR_` prefix, if known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1001 => "DATASN",
            1002 => "DATA_OFFSET",
            1003 => "MAX_CMDSN",
            1004 => "EXP_CMDSN",
            1005 => "BAD_OPCODE",
            1006 => "DATALEN",
            1007 => "AHSLEN",
            1008 => "PROTO",
            1009 => "LUN",
            1010 => "BAD_ITT",
            1011 => "CONN_FAILED",
            1012 => "R2TSN",
            1013 => "SESSION_FAILED",
            1014 => "HDR_DGST",
            1015 => "DATA_DGST",
            1016 => "PARAMETER",
            1017 => "NO_SCSI_CMD",
            1018 => "INVALID_HOST",
            1019 => "XMIT_FAILED",
            1020 => "TCP_CONN_CLOSE",
            1021 => "SCSI_EH_SESSION_RST",
            1022 => "NOP_TIMEDOUT",
            _ => return None,
        })
    }

    /// What the code means for an iSER initiator, in a sentence.
    pub fn meaning(self) -> &'static str {
        match self.0 {
            1011 => "the connection failed (transport error, device removal or target gone)",
            1013 => "the session failed",
            1018 => "the SCSI host is invalid",
            1019 => "a PDU could not be transmitted",
            1020 => "the TCP connection was closed by the target",
            1021 => "SCSI error handling reset the session (commands timed out)",
            1022 => "a NOP-Out ping got no answer in time (target or path unreachable)",
            1001..=1017 => "a protocol error on the connection",
            _ => "an unknown iSCSI error code",
        }
    }
}

impl std::fmt::Display for IscsiErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{} ISCSI_ERR_{}", self.0, n),
            None => write!(f, "{}", self.0),
        }
    }
}

/// The devices a record names. Filled from the message prefix that `dev_printk`,
/// `ibdev_printk` and `netdev_printk` put in front of the text, from the message itself
/// (`on device D`, `[sdX]`, `dev sdX`) and from the record's `DEVICE=` dictionary value.
/// Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NamedDevices {
    /// The driver, bus or class word of the prefix (`ice`, `mlx5_core`, `infiniband`, `sd`)
    /// or the `pr_fmt` module prefix (`iser`, `rdma_rxe`, `ib_mad`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub driver: Option<String>,
    /// PCI function (`0000:02:00.0`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pci: Option<String>,
    /// A parent device that is not a PCI function (e.g. an auxiliary device).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent: Option<String>,
    /// RDMA device name (`rocep2s0f0`, `rxe_ini`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rdma_dev: Option<String>,
    /// RDMA port number.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub port: Option<u32>,
    /// Network interface name (`enp2s0f0`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub netdev: Option<String>,
    /// Network interface index (`DEVICE=n<ifindex>`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ifindex: Option<u32>,
    /// SCSI device address `H:C:T:L`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scsi_hctl: Option<String>,
    /// SCSI host number (`scsi hostN`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scsi_host: Option<u32>,
    /// Disk name (`sda`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub disk: Option<String>,
    /// Block or character device number (`DEVICE=b8:0` → `b8:0`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub devnum: Option<String>,
    /// iSCSI session id (`sessionS`, `connectionS:C`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iscsi_session: Option<u32>,
    /// iSCSI connection id within its session (`connectionS:C`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iscsi_conn: Option<u32>,
    /// A `DEVICE=+subsystem:name` value of a subsystem not modelled above, verbatim.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub other: Option<String>,
}

impl NamedDevices {
    /// Names no device at all.
    pub fn is_empty(&self) -> bool {
        *self == NamedDevices::default()
    }

    /// A short human label: the RDMA device, else the netdev, disk, SCSI address, iSCSI
    /// connection or session, PCI function; `-` when nothing is known.
    pub fn label(&self) -> String {
        if let Some(d) = &self.rdma_dev {
            return match self.port {
                Some(p) => format!("{d}/{p}"),
                None => d.clone(),
            };
        }
        if let Some(n) = &self.netdev {
            return n.clone();
        }
        if let Some(d) = &self.disk {
            return match &self.scsi_hctl {
                Some(h) => format!("{d} ({h})"),
                None => d.clone(),
            };
        }
        if let Some(h) = &self.scsi_hctl {
            return h.clone();
        }
        match (self.iscsi_session, self.iscsi_conn) {
            (Some(s), Some(c)) => return format!("connection{s}:{c}"),
            (Some(s), None) => return format!("session{s}"),
            _ => {}
        }
        if let Some(p) = &self.pci {
            return p.clone();
        }
        if let Some(i) = self.ifindex {
            return format!("ifindex {i}");
        }
        if let Some(o) = self.other.as_ref().or(self.parent.as_ref()) {
            return o.clone();
        }
        "-".to_string()
    }
}
