//! dm-multipath maps whose paths run over RDMA: which maps a device re-creation would take
//! the last usable path of, what a re-creation remembers of them, and whether they are back.
//!
//! Source: multipathd's `show paths raw format "<PATHS_FORMAT>"` (wildcards from
//! multipath-tools' libmultipath/print.c: `%m` the map's alias, `%d` the block device, `%D`
//! its major:minor, `%i` H:C:T:L, `%t` the path's dm state, `%o` the device's sysfs state,
//! `%T` the checker's state; `raw` prints no header and no padding, one path a line). Why
//! this and not the alternatives:
//! - `dmsetup status --target multipath` has the kernel's A/F per path but only as
//!   major:minor, with no H:C:T:L (so no way to find a re-logged-in path under a new sdX)
//!   and no checker state;
//! - sysfs (`/sys/block/dm-N/dm/uuid` with the `mpath-` prefix, `slaves/`) has the maps and
//!   their paths but not whether the kernel failed a path;
//! - multipathd is needed anyway to reinstate a path (`reinstate path sdX`), and its dm state
//!   is read from the kernel's status line (`update_multipath_strings`) at each checker pass.
//!
//! The format separates fields by `|`, which none of them holds: the checker state can be
//! two words (`i/o pending`).
//!
//! Owns, all pure: the parser ([`parse_paths`]), placing a path on an RDMA port through the
//! block device that carries it ([`place`]: an iSCSI session's disk or an NVMe over RDMA
//! controller's namespace, which the caller names), the policy ([`last_paths_on`]: a map
//! whose usable paths are all on the device), and matching remembered paths to the paths
//! seen after the re-creation ([`match_back`]). Running multipathd is the io layer's.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The `show paths raw format` argument the parser reads.
pub const PATHS_FORMAT: &str = "%m|%d|%D|%i|%t|%o|%T";

/// The kernel's state of a path in its map (`%t`, dm_st): what the map can send I/O to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DmPathState {
    /// `active`: the kernel sends I/O to it.
    Active,
    /// `failed`: the kernel failed it; I/O goes to the other paths.
    Failed,
    /// `undef`: not known yet (a map being created or modified).
    Undef,
}

impl DmPathState {
    /// The state multipathd names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(DmPathState::Active),
            "failed" => Some(DmPathState::Failed),
            "undef" => Some(DmPathState::Undef),
            _ => None,
        }
    }

    /// As multipathd prints it.
    pub fn name(self) -> &'static str {
        match self {
            DmPathState::Active => "active",
            DmPathState::Failed => "failed",
            DmPathState::Undef => "undef",
        }
    }
}

/// SCSI address of a path (`%i`): host, channel, target id, LUN. NVMe paths show the
/// controller instance as host and the NSID as target; `#:#:#:#` (unknown) is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Hcil {
    /// SCSI host (a new one after an iSCSI re-login).
    pub host: u32,
    /// Channel.
    pub channel: u32,
    /// Target id.
    pub target: u32,
    /// LUN.
    pub lun: u64,
}

impl Hcil {
    /// `H:C:T:L`, or `#:#:#:#` (unknown: `None`).
    pub fn parse(s: &str) -> Result<Option<Self>, String> {
        if s == "#:#:#:#" {
            return Ok(None);
        }
        let f: Vec<&str> = s.split(':').collect();
        let bad = || format!("H:C:T:L {s:?} is not four numbers");
        if f.len() != 4 {
            return Err(bad());
        }
        Ok(Some(Hcil {
            host: f[0].parse().map_err(|_| bad())?,
            channel: f[1].parse().map_err(|_| bad())?,
            target: f[2].parse().map_err(|_| bad())?,
            lun: f[3].parse().map_err(|_| bad())?,
        }))
    }
}

impl fmt::Display for Hcil {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.host, self.channel, self.target, self.lun
        )
    }
}

/// One path of a map, as multipathd shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultipathPath {
    /// The map's alias (`mpatha`, or its WWID without user_friendly_names).
    pub map: String,
    /// Block device (`sdc`, `nvme1n1`).
    pub dev: String,
    /// Its major:minor.
    pub devt: String,
    /// Its SCSI address, when known.
    pub hcil: Option<Hcil>,
    /// The kernel's state of it in the map.
    pub dm: DmPathState,
    /// The device's sysfs state as multipathd reads it (`running`, `offline`).
    pub dev_state: String,
    /// The path checker's last state (`ready`, `faulty`, `ghost`, `i/o pending`, …).
    pub checker: String,
}

impl MultipathPath {
    /// The map can send I/O to it now.
    pub fn usable(&self) -> bool {
        self.dm == DmPathState::Active
    }

    /// `sdc (8:32, 7:0:0:1) active ready running`.
    pub fn describe(&self) -> String {
        let hcil = self.hcil.map(|h| format!(", {h}")).unwrap_or_default();
        format!(
            "{} ({}{hcil}) {} {} {}",
            self.dev,
            self.devt,
            self.dm.name(),
            self.checker,
            self.dev_state
        )
    }
}

/// A line of the answer that is not a path of a map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedPathLine {
    /// 1-based.
    pub line_no: usize,
    /// The line.
    pub line: String,
    /// Why.
    pub reason: String,
}

/// The paths of an answer, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedPaths {
    /// Paths that belong to a map.
    pub paths: Vec<MultipathPath>,
    /// Paths multipathd knows that belong to no map (`[orphan]`, `[offline]`,
    /// `[unknown]`): nothing to lose there.
    pub orphans: usize,
    /// Lines that are not in the format (counted and logged by the caller).
    pub skipped: Vec<SkippedPathLine>,
}

/// The answer to `show paths raw format "<PATHS_FORMAT>"`. Blank lines are ignored; a line
/// not in the format is skipped with its reason, never a panic.
pub fn parse_paths(text: &str) -> ParsedPaths {
    let mut out = ParsedPaths::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        match parse_path_line(line) {
            Ok(Some(p)) => out.paths.push(p),
            Ok(None) => out.orphans += 1,
            Err(reason) => out.skipped.push(SkippedPathLine {
                line_no: i + 1,
                line: line.to_string(),
                reason,
            }),
        }
    }
    out
}

fn parse_path_line(line: &str) -> Result<Option<MultipathPath>, String> {
    let f: Vec<&str> = line.split('|').collect();
    if f.len() != 7 {
        return Err(format!("{} field(s), the format has 7", f.len()));
    }
    let map = f[0].trim();
    if map.starts_with('[') && map.ends_with(']') {
        return Ok(None); // snprint_path_mpp: [orphan], [offline], [unknown]
    }
    if map.is_empty() {
        return Err("no map name".into());
    }
    let dev = f[1].trim();
    if dev.is_empty() || dev == "-" || dev.contains('/') {
        return Err(format!("block device {dev:?} is not a device name"));
    }
    let devt = f[2].trim();
    let valid_devt = devt == "#:#"
        || devt
            .split_once(':')
            .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
    if !valid_devt {
        return Err(format!("dev_t {devt:?} is not major:minor"));
    }
    let hcil = Hcil::parse(f[3].trim())?;
    let dm = DmPathState::parse(f[4].trim())
        .ok_or_else(|| format!("dm state {:?} is not active, failed or undef", f[4]))?;
    Ok(Some(MultipathPath {
        map: map.to_string(),
        dev: dev.to_string(),
        devt: devt.to_string(),
        hcil,
        dm,
        dev_state: f[5].trim().to_string(),
        checker: f[6].trim().to_string(),
    }))
}

/// What carries a block device over RDMA: an iSCSI session's disk or an NVMe over RDMA
/// controller's namespace, on a port. The caller builds these from the session map and the
/// placed controllers; `link` is what stays the same when the block device comes back under
/// a new name (the session's target, portal and iface; the controller's subsystem and
/// address).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockCarrier {
    /// Block device (`sdc`, `nvme1n1`).
    pub block: String,
    /// RDMA device.
    pub device: String,
    /// Port, from 1.
    pub port: u32,
    /// The session or controller, in operator words.
    pub link: String,
}

/// A path with the RDMA port that carries it (none: not over RDMA, or not known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedPath<'a> {
    /// The path.
    pub path: &'a MultipathPath,
    /// Its carrier.
    pub on: Option<&'a BlockCarrier>,
}

/// Every path with its carrier.
pub fn place<'a>(paths: &'a [MultipathPath], carriers: &'a [BlockCarrier]) -> Vec<PlacedPath<'a>> {
    let by: BTreeMap<&str, &BlockCarrier> =
        carriers.iter().map(|c| (c.block.as_str(), c)).collect();
    paths
        .iter()
        .map(|path| PlacedPath {
            path,
            on: by.get(path.dev.as_str()).copied(),
        })
        .collect()
}

/// A path named in a decision: a hold, a re-creation's record, the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultipathPathRef {
    /// Map alias.
    pub map: String,
    /// Block device when it was named.
    pub dev: String,
    /// Its SCSI address then.
    pub hcil: Option<Hcil>,
    /// Port of the device it is on.
    pub port: u32,
    /// The session or controller that carries it.
    pub link: String,
    /// Its dm state then.
    pub dm: DmPathState,
}

impl MultipathPathRef {
    fn of(p: &PlacedPath<'_>, c: &BlockCarrier) -> Self {
        MultipathPathRef {
            map: p.path.map.clone(),
            dev: p.path.dev.clone(),
            hcil: p.path.hcil,
            port: c.port,
            link: c.link.clone(),
            dm: p.path.dm,
        }
    }
}

impl fmt::Display for MultipathPathRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} on port {} ({}, {})",
            self.map,
            self.dev,
            self.port,
            self.dm.name(),
            self.link
        )
    }
}

/// `mpatha: sdc on port 1 (active, …); …`, or `none`.
pub fn list_paths(refs: &[MultipathPathRef]) -> String {
    if refs.is_empty() {
        return "none".into();
    }
    refs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The maps named in `refs`, each once, in order.
pub fn maps_of(refs: &[MultipathPathRef]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    refs.iter()
        .filter(|r| seen.insert(r.map.clone()))
        .map(|r| r.map.clone())
        .collect()
}

/// Every path of `device` (any port): what its re-creation takes away and remembers.
pub fn on_device(device: &str, placed: &[PlacedPath<'_>]) -> Vec<MultipathPathRef> {
    placed
        .iter()
        .filter_map(|p| {
            p.on.filter(|c| c.device == device)
                .map(|c| MultipathPathRef::of(p, c))
        })
        .collect()
}

/// The policy: the usable paths of every map whose usable paths are all on `device`. A
/// re-creation of `device` would leave such a map with no path at all. A map with no usable
/// path (its paths on the device already failed by the fault, and none elsewhere) is not
/// named: the re-creation is what can bring it back. A path of unknown dm state (`undef`)
/// is not counted as usable.
pub fn last_paths_on(device: &str, placed: &[PlacedPath<'_>]) -> Vec<MultipathPathRef> {
    let mut by_map: BTreeMap<&str, Vec<&PlacedPath<'_>>> = BTreeMap::new();
    for p in placed.iter().filter(|p| p.path.usable()) {
        by_map.entry(p.path.map.as_str()).or_default().push(p);
    }
    let mut out = Vec::new();
    for usable in by_map.values() {
        let all_here = usable
            .iter()
            .all(|p| p.on.is_some_and(|c| c.device == device));
        if all_here {
            out.extend(
                usable
                    .iter()
                    .filter_map(|p| p.on.map(|c| MultipathPathRef::of(p, c))),
            );
        }
    }
    out
}

/// Usable paths per map (the gauge): every map, even with none.
pub fn usable_per_map(paths: &[MultipathPath]) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    for p in paths {
        *out.entry(p.map.clone()).or_default() += usize::from(p.usable());
    }
    out
}

/// What became of one remembered path after the re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum PathBackResult {
    /// Active in its map again on its own (multipathd's checker reinstated it).
    Active {
        /// Its block device now (a re-login may name it anew).
        dev: String,
    },
    /// Still failed after the wait; `multipathd reinstate path` made it active.
    Reinstated {
        /// Its block device now.
        dev: String,
    },
    /// In its map, but not active (the reinstate failed or was not possible).
    Failed {
        /// Its block device now.
        dev: String,
        /// What was tried and what it said.
        reason: String,
    },
    /// Not in its map: its session or controller did not bring the block device back.
    Missing,
}

impl PathBackResult {
    /// The metrics' `result` label.
    pub fn label(&self) -> &'static str {
        match self {
            PathBackResult::Active { .. } => "active",
            PathBackResult::Reinstated { .. } => "reinstated",
            PathBackResult::Failed { .. } => "failed",
            PathBackResult::Missing => "missing",
        }
    }

    /// The path carries I/O again.
    pub fn is_back(&self) -> bool {
        matches!(
            self,
            PathBackResult::Active { .. } | PathBackResult::Reinstated { .. }
        )
    }
}

/// One remembered path and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathBackReport {
    /// The path as remembered.
    pub path: MultipathPathRef,
    /// What became of it.
    pub result: PathBackResult,
}

impl fmt::Display for PathBackReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let was = format!("{} {} ({})", self.path.map, self.path.dev, self.path.link);
        match &self.result {
            PathBackResult::Active { dev } => write!(f, "{was}: active as {dev}"),
            PathBackResult::Reinstated { dev } => write!(f, "{was}: reinstated as {dev}"),
            PathBackResult::Failed { dev, reason } => {
                write!(f, "{was}: {dev} still failed ({reason})")
            }
            PathBackResult::Missing => write!(f, "{was}: not in the map"),
        }
    }
}

/// The path of `now` that is `remembered` after the re-creation: in the same map, by the
/// same block device name, else carried by the same session or controller (`link`) with
/// the same LUN (an iSCSI re-login gets a new SCSI host, so a new sdX and H:C:T:L; its
/// target, portal and LUN stay). Each path of `now` answers one remembered path at most.
pub fn match_back<'a>(
    remembered: &[MultipathPathRef],
    now: &'a [MultipathPath],
    carriers: &[BlockCarrier],
) -> Vec<Option<&'a MultipathPath>> {
    let link_of: BTreeMap<&str, &str> = carriers
        .iter()
        .map(|c| (c.block.as_str(), c.link.as_str()))
        .collect();
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut out = vec![None; remembered.len()];
    // Same name first, so a name that stayed is never taken by another remembered path.
    for (i, r) in remembered.iter().enumerate() {
        if let Some((j, p)) = now
            .iter()
            .enumerate()
            .find(|(j, p)| !taken.contains(j) && p.map == r.map && p.dev == r.dev)
        {
            let same_link = link_of.get(p.dev.as_str()).is_none_or(|l| *l == r.link);
            if same_link {
                taken.insert(j);
                out[i] = Some(p);
            }
        }
    }
    for (i, r) in remembered.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        let lun = r.hcil.map(|h| h.lun);
        if let Some((j, p)) = now.iter().enumerate().find(|(j, p)| {
            !taken.contains(j)
                && p.map == r.map
                && link_of.get(p.dev.as_str()) == Some(&r.link.as_str())
                && p.hcil.map(|h| h.lun) == lun
        }) {
            taken.insert(j);
            out[i] = Some(p);
        }
    }
    out
}

/// Where a remembered path stands in an answer read after the re-creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathNow<'a> {
    /// Active in its map.
    Active(&'a MultipathPath),
    /// Failed in its map while its device is running and the checker does not call it
    /// faulty: the device is back, the map has not taken it again. A reinstate can.
    Reinstatable(&'a MultipathPath),
    /// Failed in its map, and its device or the checker says it does not work yet.
    NotUsable(&'a MultipathPath),
    /// Not in its map.
    Missing,
}

impl PathNow<'_> {
    /// Active.
    pub fn is_active(&self) -> bool {
        matches!(self, PathNow::Active(_))
    }
}

/// Each remembered path's standing in `now` ([`match_back`] finds it).
pub fn judge<'a>(
    remembered: &[MultipathPathRef],
    now: &'a [MultipathPath],
    carriers: &[BlockCarrier],
) -> Vec<PathNow<'a>> {
    match_back(remembered, now, carriers)
        .into_iter()
        .map(|m| match m {
            None => PathNow::Missing,
            Some(p) if p.usable() => PathNow::Active(p),
            Some(p) if p.dev_state == "running" && p.checker != "faulty" => {
                PathNow::Reinstatable(p)
            }
            Some(p) => PathNow::NotUsable(p),
        })
        .collect()
}

/// The final report of each remembered path from its standing after the wait (`now`),
/// knowing which block devices a reinstate was asked for and what it said.
pub fn reports(
    remembered: &[MultipathPathRef],
    now: &[PathNow<'_>],
    reinstated: &BTreeMap<String, Result<(), String>>,
) -> Vec<PathBackReport> {
    remembered
        .iter()
        .zip(now)
        .map(|(r, n)| {
            let result = match n {
                PathNow::Active(p) => match reinstated.get(&p.dev) {
                    Some(Ok(())) => PathBackResult::Reinstated { dev: p.dev.clone() },
                    _ => PathBackResult::Active { dev: p.dev.clone() },
                },
                PathNow::Reinstatable(p) | PathNow::NotUsable(p) => PathBackResult::Failed {
                    dev: p.dev.clone(),
                    reason: match reinstated.get(&p.dev) {
                        Some(Err(e)) => format!("multipathd reinstate path {}: {e}", p.dev),
                        Some(Ok(())) => "reinstated, failed again".to_string(),
                        None => format!("{} {} {}", p.dm.name(), p.checker, p.dev_state),
                    },
                },
                PathNow::Missing => PathBackResult::Missing,
            };
            PathBackReport {
                path: r.clone(),
                result,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
