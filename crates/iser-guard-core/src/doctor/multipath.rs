//! The doctor's word on dm-multipath: whether iser-guard can see the maps' paths (so it
//! never takes a map's last usable path on its own, and reinstates paths after a
//! re-creation). Judged from facts the shell reads apart from [`super::Facts`]: the maps
//! sysfs shows (`/sys/block/dm-N/dm/uuid` with the `mpath-` prefix), whether multipathd is
//! installed, and its answer to `show paths`.

use serde::Serialize;

use super::{Check, CheckKind, CheckVerdict};
use crate::multipath::MultipathPath;

/// What the multipath check is judged from.
#[derive(Debug, Clone, Serialize)]
pub struct MultipathFacts {
    /// The dm-multipath maps in sysfs (their dm names).
    pub sysfs_maps: Vec<String>,
    /// `paths.multipathd`.
    pub multipathd: String,
    /// It is an executable file.
    pub multipathd_present: bool,
    /// Its answer: the paths, or why it gave none (`None`: not asked, not installed).
    pub read: Option<Result<Vec<MultipathPath>, String>>,
    /// `recovery.multipath-last-path = "proceed"`.
    pub proceed: bool,
}

/// One check when the host has maps or multipathd knows paths; none otherwise (the common
/// case: no dm-multipath, nothing changes).
pub fn multipath_check(f: &MultipathFacts) -> Option<Check> {
    let paths = match &f.read {
        Some(Ok(p)) => Some(p.as_slice()),
        _ => None,
    };
    if f.sysfs_maps.is_empty()
        && paths.is_none_or(<[_]>::is_empty)
        && !matches!(f.read, Some(Err(_)))
    {
        return None;
    }
    let maps = f.sysfs_maps.len();
    let mut c = match &f.read {
        None => Check::new(
            CheckKind::CmIds,
            "multipath",
            CheckVerdict::Warning,
            format!(
                "{maps} dm-multipath map(s) ({}), but multipathd is not installed ({} is \
                 missing): iser-guard cannot see their paths, so a re-creation is not held for a \
                 map's last usable path and failed paths are not reinstated after it",
                f.sysfs_maps.join(", "),
                f.multipathd
            ),
        )
        .action("install multipath-tools, or set paths.multipathd to where multipathd is"),
        Some(Err(why)) => Check::new(
            CheckKind::CmIds,
            "multipath",
            CheckVerdict::Warning,
            format!(
                "multipathd did not answer `show paths` ({why}): iser-guard cannot see the \
                 maps' paths, so a re-creation is not held for a map's last usable path"
            ),
        )
        .action("systemctl status multipathd; start it, or check its socket"),
        Some(Ok(p)) => {
            let usable = crate::multipath::usable_per_map(p);
            let without: Vec<&str> = usable
                .iter()
                .filter(|(_, n)| **n == 0)
                .map(|(m, _)| m.as_str())
                .collect();
            let hold = if f.proceed {
                "recovery.multipath-last-path = \"proceed\": a re-creation may take a map's \
                 last usable path"
            } else {
                "a re-creation that would take a map's last usable path waits for the operator"
            };
            if without.is_empty() {
                Check::new(
                    CheckKind::CmIds,
                    "multipath",
                    CheckVerdict::Ok,
                    format!(
                        "{} dm-multipath map(s), {} path(s), every map with a usable path; {hold}",
                        usable.len(),
                        p.len()
                    ),
                )
            } else {
                Check::new(
                    CheckKind::CmIds,
                    "multipath",
                    CheckVerdict::Warning,
                    format!(
                        "dm-multipath map(s) with no usable path: {}; {hold}",
                        without.join(", ")
                    ),
                )
                .action("multipath -ll shows why each path failed")
            }
        }
    };
    if let Some(p) = paths {
        c.evidence
            .extend(p.iter().map(|p| format!("{} {}", p.map, p.describe())));
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(sysfs: &[&str], read: Option<Result<&str, &str>>) -> MultipathFacts {
        MultipathFacts {
            sysfs_maps: sysfs.iter().map(ToString::to_string).collect(),
            multipathd: "/usr/sbin/multipathd".into(),
            multipathd_present: read.is_some(),
            read: read.map(|r| {
                r.map(|t| crate::multipath::parse_paths(t).paths)
                    .map_err(ToString::to_string)
            }),
            proceed: false,
        }
    }

    #[test]
    fn no_maps_no_check() {
        assert!(multipath_check(&facts(&[], None)).is_none());
        assert!(multipath_check(&facts(&[], Some(Ok("")))).is_none());
    }

    #[test]
    fn maps_without_multipathd_warn() {
        let c = multipath_check(&facts(&["mpatha"], None)).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning);
        assert!(
            c.finding.contains("multipathd is not installed"),
            "{}",
            c.finding
        );
    }

    #[test]
    fn a_silent_multipathd_warns_with_why() {
        let c = multipath_check(&facts(&["mpatha"], Some(Err("timed out")))).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning);
        assert!(c
            .finding
            .contains("did not answer `show paths` (timed out)"));
    }

    #[test]
    fn maps_with_usable_paths_are_ok_and_listed() {
        let c = multipath_check(&facts(
            &["mpatha"],
            Some(Ok("mpatha|sdb|8:16|7:0:0:1|active|running|ready\n")),
        ))
        .unwrap();
        assert_eq!(c.verdict, CheckVerdict::Ok);
        assert_eq!(
            c.evidence,
            vec!["mpatha sdb (8:16, 7:0:0:1) active ready running"]
        );
        let c = multipath_check(&facts(
            &["mpatha"],
            Some(Ok("mpatha|sdb|8:16|7:0:0:1|failed|running|faulty\n")),
        ))
        .unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning);
        assert!(c.finding.contains("no usable path: mpatha"));
    }
}
