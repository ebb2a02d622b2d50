//! The simulated host's dm-multipath maps and its multipathd: paths carried by the host's
//! iSCSI sessions (a LUN of a session's disks) or by something iser-guard does not see
//! (an FC or local path, failed or reinstated by a scenario's event). The answer to `show
//! paths raw format` is rendered exactly as multipathd prints it for
//! [`crate::core::multipath::PATHS_FORMAT`] and read back through the core's parser, as the
//! daemon reads the real one.
//!
//! The kernel fails a path whose session is down (its I/O errors); multipathd's checker
//! makes it active again at its next pass once its disk is back, unless the scenario says
//! it does not ([`SimMultipath::checker_reinstates`], as with `delay_wait_checks` or a
//! path marginal), in which case only `reinstate path` does.

use std::collections::BTreeMap;

use crate::core::multipath::{
    judge, parse_paths, reports, BlockCarrier, MultipathPath, MultipathPathRef, PathBackReport,
    PathNow,
};
use crate::core::recovery::SessionKey;

/// What carries a simulated path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimPathVia {
    /// LUN `lun` (index into its disks) of the host's session to this node.
    Session {
        /// The node.
        node: SessionKey,
        /// The LUN.
        lun: usize,
    },
    /// A block device iser-guard does not see the carrier of (FC, SAS).
    Other {
        /// Its name.
        dev: String,
        /// Its SCSI host.
        host: u32,
    },
}

/// One path of a simulated map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimMapPath {
    /// Its carrier.
    pub via: SimPathVia,
    /// Failed in the map (the kernel's dm state).
    pub failed: bool,
}

/// One simulated map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimMap {
    /// Its alias.
    pub name: String,
    /// Its paths.
    pub paths: Vec<SimMapPath>,
}

/// The host's maps and multipathd.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimMultipath {
    /// The maps.
    pub maps: Vec<SimMap>,
    /// multipathd's checker reinstates a path whose disk is back (the default); `false`:
    /// only `multipathd reinstate path` does.
    pub checker_reinstates: bool,
    /// Every `reinstate path` asked, in order.
    pub reinstated: Vec<String>,
}

/// A session's disk as the paths see it: its block device, SCSI host, and whether I/O to
/// it works (the session logged in, not a zombie, its device present).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimDisk {
    /// Block device.
    pub dev: String,
    /// SCSI host.
    pub host: u32,
    /// I/O works.
    pub working: bool,
}

/// `sdb` → `8:16` (sd's major 8, 16 minors a disk).
fn devt(dev: &str) -> String {
    let n = dev
        .strip_prefix("sd")
        .map(|l| {
            l.bytes()
                .fold(0u32, |acc, b| {
                    acc * 26 + u32::from(b.saturating_sub(b'a')) + 1
                })
                .saturating_sub(1)
        })
        .unwrap_or(0);
    format!("8:{}", n * 16)
}

impl SimMultipath {
    /// The block device and state of `via`, or `None` while it has no disk (its session
    /// logged out: multipathd removed the path).
    fn disk(
        via: &SimPathVia,
        disk_of: &impl Fn(&SessionKey, usize) -> Option<SimDisk>,
    ) -> Option<SimDisk> {
        match via {
            SimPathVia::Session { node, lun } => disk_of(node, *lun),
            SimPathVia::Other { dev, host } => Some(SimDisk {
                dev: dev.clone(),
                host: *host,
                working: true,
            }),
        }
    }

    /// A checker pass: the kernel has failed every path whose disk does not work; the
    /// checker makes the ones whose disk works again active, when it does that.
    pub fn check(&mut self, disk_of: impl Fn(&SessionKey, usize) -> Option<SimDisk>) {
        for p in self.maps.iter_mut().flat_map(|m| m.paths.iter_mut()) {
            if !matches!(p.via, SimPathVia::Session { .. }) {
                continue; // Failed or reinstated by the scenario's events.
            }
            let working = Self::disk(&p.via, &disk_of).is_some_and(|d| d.working);
            if !working {
                p.failed = true;
            } else if self.checker_reinstates {
                p.failed = false;
            }
        }
    }

    /// `multipathd show paths raw format "%m|%d|%D|%i|%t|%o|%T"`, as multipathd prints it.
    pub fn show_paths(&self, disk_of: impl Fn(&SessionKey, usize) -> Option<SimDisk>) -> String {
        let mut out = String::new();
        for m in &self.maps {
            for p in &m.paths {
                let Some(d) = Self::disk(&p.via, &disk_of) else {
                    continue;
                };
                let lun = match &p.via {
                    SimPathVia::Session { lun, .. } => *lun,
                    SimPathVia::Other { .. } => 0,
                };
                let (dm, checker) = match (p.failed, d.working) {
                    (false, _) => ("active", "ready"),
                    (true, true) => ("failed", "ready"),
                    (true, false) => ("failed", "faulty"),
                };
                out.push_str(&format!(
                    "{}|{}|{}|{}:0:0:{lun}|{dm}|running|{checker}\n",
                    m.name,
                    d.dev,
                    devt(&d.dev),
                    d.host
                ));
            }
        }
        out
    }

    /// The paths multipathd shows now, read by the core's parser.
    pub fn paths(
        &self,
        disk_of: impl Fn(&SessionKey, usize) -> Option<SimDisk>,
    ) -> Vec<MultipathPath> {
        parse_paths(&self.show_paths(disk_of)).paths
    }

    /// `multipathd reinstate path DEV`: `fail` unless its disk works.
    pub fn reinstate(
        &mut self,
        dev: &str,
        disk_of: impl Fn(&SessionKey, usize) -> Option<SimDisk>,
    ) -> Result<(), String> {
        self.reinstated.push(dev.to_string());
        for p in self.maps.iter_mut().flat_map(|m| m.paths.iter_mut()) {
            if let Some(d) = Self::disk(&p.via, &disk_of) {
                if d.dev == dev && d.working {
                    p.failed = false;
                    return Ok(());
                }
            }
        }
        Err("fail".into())
    }

    /// The `Other` path `dev` fails or comes back (a scenario's event).
    pub fn set_other(&mut self, dev: &str, failed: bool) {
        for p in self.maps.iter_mut().flat_map(|m| m.paths.iter_mut()) {
            if matches!(&p.via, SimPathVia::Other { dev: d, .. } if d == dev) {
                p.failed = failed;
            }
        }
    }

    /// The real executor's judgement without its wait (the checker passes already ran in
    /// virtual time): reinstate what is reinstatable, then report.
    pub fn restore(
        &mut self,
        paths: &[MultipathPathRef],
        carriers: &[BlockCarrier],
        disk_of: impl Fn(&SessionKey, usize) -> Option<SimDisk> + Copy,
    ) -> Vec<PathBackReport> {
        self.check(disk_of);
        let now = self.paths(disk_of);
        let mut asked = BTreeMap::new();
        for n in judge(paths, &now, carriers) {
            if let PathNow::Reinstatable(p) = n {
                let r = self.reinstate(&p.dev, disk_of);
                asked.insert(p.dev.clone(), r);
            }
        }
        let again = self.paths(disk_of);
        reports(paths, &judge(paths, &again, carriers), &asked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_follow_sd_naming() {
        assert_eq!(devt("sda"), "8:0");
        assert_eq!(devt("sdb"), "8:16");
        assert_eq!(devt("sdz"), "8:400");
        assert_eq!(devt("sdaa"), "8:416");
    }

    #[test]
    fn the_rendered_answer_parses_without_a_skip() {
        let node = SessionKey {
            target: "iqn.t".into(),
            portal: crate::core::recovery::Portal::new([10, 0, 0, 5], 3260),
            iface: "iser".into(),
        };
        let mp = SimMultipath {
            maps: vec![SimMap {
                name: "mpatha".into(),
                paths: vec![
                    SimMapPath {
                        via: SimPathVia::Session { node, lun: 0 },
                        failed: true,
                    },
                    SimMapPath {
                        via: SimPathVia::Other {
                            dev: "sdz".into(),
                            host: 3,
                        },
                        failed: false,
                    },
                ],
            }],
            checker_reinstates: true,
            reinstated: Vec::new(),
        };
        let disk = |_: &SessionKey, _: usize| {
            Some(SimDisk {
                dev: "sda".into(),
                host: 7,
                working: false,
            })
        };
        let text = mp.show_paths(disk);
        assert_eq!(
            text,
            "mpatha|sda|8:0|7:0:0:0|failed|running|faulty\nmpatha|sdz|8:400|3:0:0:0|active|running|ready\n"
        );
        let p = parse_paths(&text);
        assert!(p.skipped.is_empty());
        assert_eq!(p.paths.len(), 2);
    }
}
