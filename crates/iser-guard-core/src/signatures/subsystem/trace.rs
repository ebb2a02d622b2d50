//! One event per kernel oops or WARN report: the header line, the modules in its frames,
//! the first frame in RDMA/iSCSI/NVMe code and the device if a line of the report names
//! one.
//!
//! A report is the header (`WARNING: CPU: …`, `BUG: …`, `Oops: …`, `general protection
//! fault: …`, `kernel BUG at …`, `Kernel panic - not syncing: …`, `Unable to handle kernel
//! …`, `Internal error: …`, or the `------------[ cut here ]------------` before one) and the
//! lines that belong to it (`Modules linked in:`, `CPU:`, `Hardware name:`, `RIP:`, `Code:`,
//! registers, `Call Trace:`, `<TASK>`, frames) up to `---[ end trace …` or the first line
//! that is none of these. [`TraceAssembler`] is fed the texts in order and hands back a
//! [`TraceEvent`] when a report ends, only for reports with a frame, `RIP:` or source path
//! in these subsystems (a report about a GPU driver stays silent).

use serde::{Deserialize, Serialize};

use super::{recognise, LineShape, Subsystem};
use crate::signatures::types::NamedDevices;

/// The longest report assembled; past it the report is closed (a flood is not held).
const MAX_LINES: usize = 256;

/// One whole oops or WARN report in these subsystems.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// The header line (`WARNING: CPU: 3 PID: 1416 at drivers/nvme/host/rdma.c:1394 …`).
    pub header: String,
    /// `warning`, `bug`, `oops` or `panic`.
    pub what: String,
    /// The subsystem of the first frame (or source path) in these subsystems.
    pub subsystem: Subsystem,
    /// The modules of these subsystems among the frames, in order of first appearance.
    pub modules: Vec<String>,
    /// The first frame in these subsystems: `iscsi_iser_ep_disconnect [ib_iser]`.
    pub first_frame: Option<String>,
    /// A device named by a line of the report (the WARN's own message, usually).
    pub device: NamedDevices,
    /// Lines in the report.
    pub lines: usize,
}

impl TraceEvent {
    /// One sentence for explain/watch.
    pub fn summary(&self) -> String {
        format!(
            "kernel {} in {}{}{}: {}",
            self.what,
            self.subsystem,
            self.first_frame
                .as_deref()
                .map(|f| format!(" at {f}"))
                .unwrap_or_default(),
            if self.modules.is_empty() {
                String::new()
            } else {
                format!(" (modules in the trace: {})", self.modules.join(", "))
            },
            self.header
        )
    }
}

#[derive(Debug, Default)]
struct Building {
    header: Option<String>,
    what: &'static str,
    subsystem: Option<Subsystem>,
    modules: Vec<String>,
    first_frame: Option<String>,
    device: NamedDevices,
    lines: usize,
}

/// Feeds lines in order; see the module header.
#[derive(Debug, Default)]
pub struct TraceAssembler {
    current: Option<Building>,
}

/// What a line is to a report.
enum Part {
    /// `------------[ cut here ]------------`.
    Cut,
    /// A header, with what kind of report it opens.
    Header(&'static str),
    /// A line inside a report.
    Body,
    /// The report's last line.
    End,
    /// Not part of a report.
    Outside,
}

fn part(t: &str) -> Part {
    if t.starts_with("------------[ cut here ]") {
        return Part::Cut;
    }
    if t.starts_with("---[ end ") {
        return Part::End;
    }
    const HEADERS: &[(&str, &str)] = &[
        ("WARNING: ", "warning"),
        ("BUG: ", "bug"),
        ("kernel BUG at ", "bug"),
        ("Oops", "oops"),
        ("general protection fault", "oops"),
        ("Unable to handle kernel ", "oops"),
        ("Internal error: ", "oops"),
        ("Kernel panic - not syncing", "panic"),
    ];
    if let Some((_, what)) = HEADERS.iter().find(|(h, _)| t.starts_with(h)) {
        return Part::Header(what);
    }
    const BODY: &[&str] = &[
        "Modules linked in:",
        "CPU: ",
        "Hardware name:",
        "RIP: ",
        "Code: ",
        "RSP: ",
        "RAX: ",
        "RDX: ",
        "RBP: ",
        "R10: ",
        "R13: ",
        "FS: ",
        "CS: ",
        "CR2: ",
        "DR0: ",
        "DR3: ",
        "PKRU: ",
        "Call Trace:",
        "<TASK>",
        "</TASK>",
        "<IRQ>",
        "</IRQ>",
        "Workqueue: ",
        "Process ",
        "Stack:",
        "pc : ",
        "lr : ",
        "sp : ",
        "Call trace:",
        "IP: ",
        "PGD ",
        "Tainted: ",
        "irq event stamp",
        "hardirqs ",
        "softirqs ",
        "Kernel Offset:",
        "? ",
        "[<",
    ];
    if BODY.iter().any(|b| t.starts_with(b)) || is_frame(t) || is_register_line(t) {
        return Part::Body;
    }
    Part::Outside
}

/// ` func+0x1c/0x90 [mod]` or ` func+0x1c/0x90`.
fn is_frame(t: &str) -> bool {
    let sym = t.split(' ').next().unwrap_or("");
    sym.contains("+0x") && sym.contains("/0x")
}

/// x86 and arm64 register dumps (`R08: … R09: …`, `x29: …`).
fn is_register_line(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() > 4
        && ((b[0] == b'R' || b[0] == b'x' || b[0] == b'E')
            && b[1].is_ascii_alphanumeric()
            && (b[2] == b':' || b[3] == b':'))
}

impl TraceAssembler {
    /// A new assembler with no report open.
    pub fn new() -> TraceAssembler {
        TraceAssembler::default()
    }

    /// Feeds the next line's text (after any saved-log wrapper). Returns a report that this
    /// line closed (the line itself then belongs to no report, or opens the next one).
    pub fn push(&mut self, text: &str) -> Option<TraceEvent> {
        let t = text.trim_start_matches([' ', '\t']);
        let t = t.trim_end();
        match part(t) {
            Part::Cut => {
                let done = self.close();
                self.current = Some(Building {
                    lines: 1,
                    ..Building::default()
                });
                done
            }
            Part::Header(what) => {
                // A header inside an open report without one (after `cut here`) is its own.
                let open_without_header = self.current.as_ref().is_some_and(|b| b.header.is_none());
                let done = if open_without_header {
                    None
                } else {
                    self.close()
                };
                let b = self.current.get_or_insert_with(Building::default);
                b.header = Some(t.to_string());
                b.what = what;
                b.lines += 1;
                self.absorb(t);
                done
            }
            Part::Body if self.current.is_some() => {
                if let Some(b) = self.current.as_mut() {
                    b.lines += 1;
                }
                self.absorb(t);
                if self.current.as_ref().is_some_and(|b| b.lines >= MAX_LINES) {
                    return self.close();
                }
                None
            }
            Part::End if self.current.is_some() => {
                if let Some(b) = self.current.as_mut() {
                    b.lines += 1;
                }
                self.close()
            }
            _ => {
                // A dev_printk line right after the header is the WARN's own message: it
                // names the device.
                if let Some(b) = self.current.as_mut() {
                    if b.lines <= 2 && b.header.is_some() {
                        if let Some(ev) = recognise(t, None, None) {
                            if ev.device != NamedDevices::default() {
                                b.device = ev.device;
                                b.subsystem.get_or_insert(ev.subsystem);
                                b.lines += 1;
                                return None;
                            }
                        }
                    }
                }
                self.close()
            }
        }
    }

    /// Lines in the open report (0: none open; 1: the last line pushed opened it).
    pub fn open_lines(&self) -> usize {
        self.current.as_ref().map_or(0, |b| b.lines)
    }

    /// A report is open.
    pub fn is_open(&self) -> bool {
        self.current.is_some()
    }

    /// Ends the input: the open report, if any and if it is in these subsystems.
    pub fn finish(&mut self) -> Option<TraceEvent> {
        self.close()
    }

    fn absorb(&mut self, t: &str) {
        let Some(b) = self.current.as_mut() else {
            return;
        };
        let Some(ev) = recognise(t, None, None) else {
            return;
        };
        match &ev.shape {
            LineShape::Frame { function, module } => {
                if let Some(m) = module {
                    if !b.modules.contains(m) {
                        b.modules.push(m.clone());
                    }
                }
                if b.first_frame.is_none() {
                    b.first_frame = Some(match module {
                        Some(m) => format!("{function} [{m}]"),
                        None => function.clone(),
                    });
                }
                b.subsystem.get_or_insert(ev.subsystem);
            }
            LineShape::ReportHeader { .. } => {
                // The WARN's own location (`func+0x…/0x… [mod]`) is where it fired.
                if let Some(m) = &ev.origin {
                    if !b.modules.contains(m) {
                        b.modules.push(m.clone());
                    }
                }
                b.subsystem.get_or_insert(ev.subsystem);
            }
            LineShape::Message => {}
        }
    }

    fn close(&mut self) -> Option<TraceEvent> {
        let b = self.current.take()?;
        let header = b.header?;
        let subsystem = b.subsystem?;
        Some(TraceEvent {
            header,
            what: b.what.to_string(),
            subsystem,
            modules: b.modules,
            first_frame: b.first_frame,
            device: b.device,
            lines: b.lines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(lines: &[&str]) -> Vec<TraceEvent> {
        let mut a = TraceAssembler::new();
        let mut out: Vec<TraceEvent> = lines.iter().filter_map(|l| a.push(l)).collect();
        out.extend(a.finish());
        out
    }

    // The frames of a published report (SoftRoCE/rxe-dev issue 33, iSER logout), in the
    // real format; the header is the kernel's WARN format (kernel/panic.c __warn).
    #[test]
    fn a_warn_with_rdma_frames_is_one_event_naming_the_first_frame() {
        let ev = feed(&[
            "------------[ cut here ]------------",
            "WARNING: CPU: 1 PID: 2873 at drivers/infiniband/ulp/iser/iser_verbs.c:1021 iser_conn_terminate+0x1c/0x90 [ib_iser]",
            "Modules linked in: ib_iser libiscsi scsi_transport_iscsi rdma_rxe ib_core",
            "CPU: 1 PID: 2873 Comm: iscsiadm Not tainted 6.1.0 #1",
            "Call Trace:",
            " <TASK>",
            " [<ffffffffa068ba11>] iscsi_iser_ep_disconnect+0xb1/0x120 [ib_iser]",
            " [<ffffffffa06fd3af>] iscsi_if_ep_disconnect.isra.14+0x5f/0x80 [scsi_transport_iscsi]",
            " [<ffffffff81637f13>] netlink_unicast+0x103/0x1e0",
            " </TASK>",
            "---[ end trace 0000000000000000 ]---",
            "sd 2:0:0:0: [sdb] Attached SCSI disk",
        ]);
        assert_eq!(ev.len(), 1, "{ev:#?}");
        let e = &ev[0];
        assert_eq!(e.what, "warning");
        assert_eq!(e.subsystem, Subsystem::Iser);
        assert_eq!(e.modules, ["ib_iser", "scsi_transport_iscsi"]);
        assert_eq!(
            e.first_frame.as_deref(),
            Some("iscsi_iser_ep_disconnect [ib_iser]")
        );
        assert_eq!(e.lines, 11);
        assert!(
            e.summary().contains("kernel warning in iser"),
            "{}",
            e.summary()
        );
    }

    #[test]
    fn a_report_in_another_subsystem_stays_silent() {
        let ev = feed(&[
            "general protection fault: 0000 [#1] SMP NOPTI",
            "CPU: 2 PID: 4093 Comm: insmod Tainted: G           OE     4.19.19 #11",
            "RIP: 0010:ku_setup_inst_retired+0x29/0xf0 [kutrace_mod]",
            "Call Trace:",
            " do_one_initcall+0x46/0x1c3",
        ]);
        assert!(ev.is_empty(), "{ev:#?}");
    }

    #[test]
    fn the_warn_message_line_names_the_device_and_a_new_header_closes_the_report() {
        let ev = feed(&[
            "WARNING: CPU: 3 PID: 1416 at drivers/nvme/host/rdma.c:1394 nvme_rdma_map_data+0x561/0x630 [nvme_rdma]",
            "nvme nvme1: failed to map data",
            "Modules linked in: nvme_rdma rdma_cm ib_core",
            "BUG: kernel NULL pointer dereference, address: 0000000000000030",
            "RIP: 0010:ib_dealloc_pd_user+0x1c/0x80 [ib_core]",
        ]);
        assert_eq!(ev.len(), 2, "{ev:#?}");
        assert_eq!(ev[0].subsystem, Subsystem::Nvme);
        assert_eq!(ev[0].device.other.as_deref(), Some("nvme1"));
        assert_eq!(ev[1].what, "bug");
        assert_eq!(ev[1].subsystem, Subsystem::RdmaCore);
        assert_eq!(
            ev[1].first_frame.as_deref(),
            Some("ib_dealloc_pd_user [ib_core]")
        );
    }

    // The older report shapes (a 3.x oops: `RIP: 0010:[<…>]  [<…>] func+…`, frames with
    // `? `, the closing ` RIP  [<…>]` line) and untagged frames of built-in RDMA code; the
    // formats of arch/x86/kernel/dumpstack.c before 4.x.
    #[test]
    fn an_old_style_report_with_untagged_rdma_frames_is_one_event() {
        let ev = feed(&[
            "BUG: unable to handle kernel NULL pointer dereference at 0000000000000010",
            "RIP: 0010:[<ffffffffa03c1e2b>]  [<ffffffffa03c1e2b>] iser_cq_callback+0x2b/0x60 [ib_iser]",
            "Call Trace:",
            " [<ffffffff815a1b2c>] ? ib_dispatch_event+0x41/0x70",
            " [<ffffffff81090a1f>] kthread+0xcf/0xe0",
            "RIP  [<ffffffffa03c1e2b>] iser_cq_callback+0x2b/0x60 [ib_iser]",
        ]);
        assert_eq!(ev.len(), 1, "{ev:#?}");
        assert_eq!(ev[0].subsystem, Subsystem::Iser);
        assert_eq!(ev[0].modules, ["ib_iser"]);
        assert_eq!(
            ev[0].first_frame.as_deref(),
            Some("iser_cq_callback [ib_iser]")
        );
    }
}
