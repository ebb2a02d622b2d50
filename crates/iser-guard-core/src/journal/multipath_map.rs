//! The dm-multipath paths of a re-creation's record (and of a hold) to and from their
//! journal form (`v2::JournalMultipathPath`: the path as remembered, and its result once
//! reported).

use super::v2::JournalMultipathPath;
use super::JournalFormatError;
use crate::multipath::{DmPathState, Hcil, MultipathPathRef, PathBackReport, PathBackResult};

/// The journal form of `remembered`, each with its result in `back` if there is one.
pub(super) fn out(
    remembered: &[MultipathPathRef],
    back: &[PathBackReport],
) -> Vec<JournalMultipathPath> {
    remembered
        .iter()
        .map(|p| {
            let result = back.iter().find(|r| r.path == *p).map(|r| &r.result);
            let (now, reason) = match result {
                Some(PathBackResult::Active { dev } | PathBackResult::Reinstated { dev }) => {
                    (Some(dev.clone()), None)
                }
                Some(PathBackResult::Failed { dev, reason }) => {
                    (Some(dev.clone()), Some(reason.clone()))
                }
                Some(PathBackResult::Missing) | None => (None, None),
            };
            JournalMultipathPath {
                map: p.map.clone(),
                dev: p.dev.clone(),
                hcil: p.hcil.map(|h| h.to_string()),
                port: p.port,
                link: p.link.clone(),
                dm: p.dm.name().to_string(),
                result: result.map(|r| r.label().to_string()),
                now,
                reason,
            }
        })
        .collect()
}

fn path_in(j: &JournalMultipathPath) -> Result<MultipathPathRef, JournalFormatError> {
    let hcil = match &j.hcil {
        Some(h) => Hcil::parse(h).map_err(|reason| JournalFormatError::Value {
            field: "multipath path hcil",
            reason,
        })?,
        None => None,
    };
    Ok(MultipathPathRef {
        map: j.map.clone(),
        dev: j.dev.clone(),
        hcil,
        port: j.port,
        link: j.link.clone(),
        dm: DmPathState::parse(&j.dm).ok_or_else(|| JournalFormatError::Value {
            field: "multipath path dm",
            reason: format!("{:?} is not a dm path state", j.dm),
        })?,
    })
}

/// The paths as remembered.
pub(super) fn paths_in(
    js: &[JournalMultipathPath],
) -> Result<Vec<MultipathPathRef>, JournalFormatError> {
    js.iter().map(path_in).collect()
}

/// The results of the paths that have one.
pub(super) fn reports_in(
    js: &[JournalMultipathPath],
) -> Result<Vec<PathBackReport>, JournalFormatError> {
    let mut out = Vec::new();
    for j in js {
        let Some(label) = &j.result else { continue };
        let dev = || j.now.clone().unwrap_or_default();
        let result = match label.as_str() {
            "active" => PathBackResult::Active { dev: dev() },
            "reinstated" => PathBackResult::Reinstated { dev: dev() },
            "failed" => PathBackResult::Failed {
                dev: dev(),
                reason: j.reason.clone().unwrap_or_default(),
            },
            "missing" => PathBackResult::Missing,
            other => {
                return Err(JournalFormatError::Value {
                    field: "multipath path result",
                    reason: format!("{other:?} is not a multipath path result"),
                })
            }
        };
        out.push(PathBackReport {
            path: path_in(j)?,
            result,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_results_round_trip() {
        let p = MultipathPathRef {
            map: "mpatha".into(),
            dev: "sdb".into(),
            hcil: Some(Hcil {
                host: 7,
                channel: 0,
                target: 0,
                lun: 1,
            }),
            port: 1,
            link: "s1".into(),
            dm: DmPathState::Active,
        };
        let q = MultipathPathRef {
            dev: "sdc".into(),
            hcil: None,
            ..p.clone()
        };
        let back = vec![PathBackReport {
            path: p.clone(),
            result: PathBackResult::Failed {
                dev: "sdg".into(),
                reason: "reinstate: fail".into(),
            },
        }];
        let js = out(&[p.clone(), q.clone()], &back);
        assert_eq!(js[0].hcil.as_deref(), Some("7:0:0:1"));
        assert_eq!(js[1].result, None);
        let text = serde_json::to_string(&js).unwrap();
        assert!(!text.contains("\"now\":null"), "absent, not null: {text}");
        let js: Vec<JournalMultipathPath> = serde_json::from_str(&text).unwrap();
        assert_eq!(paths_in(&js).unwrap(), vec![p, q]);
        assert_eq!(reports_in(&js).unwrap(), back);
    }

    #[test]
    fn an_unknown_result_is_a_clear_error() {
        let mut js = out(
            &[MultipathPathRef {
                map: "m".into(),
                dev: "sdb".into(),
                hcil: None,
                port: 1,
                link: "s".into(),
                dm: DmPathState::Failed,
            }],
            &[],
        );
        js[0].result = Some("gone".into());
        let e = reports_in(&js).unwrap_err().to_string();
        assert!(e.contains("\"gone\" is not a multipath path result"), "{e}");
    }
}
