//! The multipathd parser on answers in the format's shape (print.c's wildcards), placement,
//! the last-path policy and matching paths after a re-creation.

use super::*;

const ANSWER: &str = include_str!("../../tests/fixtures/multipathd/show-paths-raw.txt");

fn carrier(block: &str, device: &str, link: &str) -> BlockCarrier {
    BlockCarrier {
        block: block.into(),
        device: device.into(),
        port: 1,
        link: link.into(),
    }
}

#[test]
fn parses_every_field_of_a_real_shaped_answer() {
    let p = parse_paths(ANSWER);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    assert_eq!(p.orphans, 1);
    assert_eq!(p.paths.len(), 5);
    let sdb = &p.paths[0];
    assert_eq!(sdb.map, "mpatha");
    assert_eq!(sdb.dev, "sdb");
    assert_eq!(sdb.devt, "8:16");
    assert_eq!(
        sdb.hcil,
        Some(Hcil {
            host: 7,
            channel: 0,
            target: 0,
            lun: 1
        })
    );
    assert_eq!(sdb.dm, DmPathState::Active);
    assert_eq!(sdb.checker, "ready");
    assert_eq!(sdb.dev_state, "running");
    // The checker's two-word state stays whole; a WWID map name (no user_friendly_names).
    let sdf = &p.paths[4];
    assert_eq!(sdf.map, "3600140554e9c5f4d3a845a5a0a7f1b2c");
    assert_eq!(sdf.checker, "i/o pending");
    assert_eq!(sdf.dm, DmPathState::Failed);
    assert!(!sdf.usable());
    assert_eq!(sdb.describe(), "sdb (8:16, 7:0:0:1) active ready running");
}

#[test]
fn empty_answer_is_no_maps() {
    let p = parse_paths("");
    assert!(p.paths.is_empty() && p.skipped.is_empty() && p.orphans == 0);
    assert!(parse_paths("\n\n").paths.is_empty());
}

#[test]
fn lines_out_of_format_are_skipped_with_a_reason() {
    // multipathd's own answers to a command it refused, the default (padded) layout, and
    // broken fields: each a counted skip, never a panic, the good line kept.
    let text = "fail\n\
                hcil    dev dev_t pri dm_st  chk_st dev_st\n\
                mpatha|sdb|8:16|7:0:0:1|active|running|ready\n\
                mpatha|sdc|x:y|7:0:0:1|active|running|ready\n\
                mpatha|sdc|8:32|7:0:0|active|running|ready\n\
                mpatha|sdc|8:32|7:0:0:1|enabled|running|ready\n\
                mpatha|../x|8:32|7:0:0:1|active|running|ready\n\
                |sdc|8:32|7:0:0:1|active|running|ready\n";
    let p = parse_paths(text);
    assert_eq!(p.paths.len(), 1);
    assert_eq!(p.skipped.len(), 7);
    assert_eq!(p.skipped[0].line_no, 1);
    assert!(
        p.skipped[0].reason.contains("1 field(s)"),
        "{:?}",
        p.skipped[0]
    );
    assert!(p.skipped[2].reason.contains("dev_t"));
    assert!(p.skipped[3].reason.contains("H:C:T:L"));
    assert!(p.skipped[4].reason.contains("dm state"));
    assert!(p.skipped[5].reason.contains("block device"));
    assert!(p.skipped[6].reason.contains("no map name"));
}

#[test]
fn unknown_hcil_and_devt_are_kept() {
    let p = parse_paths("mpathc|nvme1n1|#:#|#:#:#:#|active|running|ready\n");
    assert_eq!(p.paths.len(), 1);
    assert_eq!(p.paths[0].hcil, None);
}

#[test]
fn placement_by_block_device() {
    let paths = parse_paths(ANSWER).paths;
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_1", "s2"),
    ];
    let placed = place(&paths, &carriers);
    assert_eq!(placed[0].on.map(|c| c.device.as_str()), Some("mlx5_0"));
    assert_eq!(placed[1].on.map(|c| c.device.as_str()), Some("mlx5_1"));
    assert!(placed[2].on.is_none());
    let here = on_device("mlx5_0", &placed);
    assert_eq!(here.len(), 1);
    assert_eq!(here[0].dev, "sdb");
    assert_eq!(here[0].to_string(), "mpatha: sdb on port 1 (active, s1)");
}

#[test]
fn last_usable_path_on_the_device_holds() {
    // mpatha's other path sdc is failed: sdb on mlx5_0 is its last usable path.
    let text = "mpatha|sdb|8:16|7:0:0:1|active|running|ready\n\
                mpatha|sdc|8:32|8:0:0:1|failed|running|faulty\n";
    let paths = parse_paths(text).paths;
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_1", "s2"),
    ];
    let placed = place(&paths, &carriers);
    let last = last_paths_on("mlx5_0", &placed);
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].dev, "sdb");
    assert_eq!(maps_of(&last), vec!["mpatha".to_string()]);
    // The other device carries no usable path of it: nothing to hold there.
    assert!(last_paths_on("mlx5_1", &placed).is_empty());
}

#[test]
fn another_usable_path_elsewhere_proceeds() {
    let paths = parse_paths(ANSWER).paths;
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_1", "s2"),
    ];
    let placed = place(&paths, &carriers);
    assert!(last_paths_on("mlx5_0", &placed).is_empty());
}

#[test]
fn a_usable_path_not_over_rdma_counts_as_elsewhere() {
    // sde (mpathb) is carried by nothing we know (FC, local): it still serves the map.
    let paths = parse_paths(ANSWER).paths;
    let carriers = [carrier("sdd", "mlx5_0", "s1")];
    assert!(last_paths_on("mlx5_0", &place(&paths, &carriers)).is_empty());
}

#[test]
fn paths_already_failed_by_the_fault_proceed() {
    let text = "mpatha|sdb|8:16|7:0:0:1|failed|running|faulty\n\
                mpatha|sdc|8:32|8:0:0:1|failed|running|faulty\n";
    let paths = parse_paths(text).paths;
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_0", "s2"),
    ];
    assert!(last_paths_on("mlx5_0", &place(&paths, &carriers)).is_empty());
}

#[test]
fn both_usable_paths_on_the_device_are_named() {
    let text = "mpatha|sdb|8:16|7:0:0:1|active|running|ready\n\
                mpatha|sdc|8:32|8:0:0:1|active|running|ready\n";
    let paths = parse_paths(text).paths;
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_0", "s2"),
    ];
    assert_eq!(last_paths_on("mlx5_0", &place(&paths, &carriers)).len(), 2);
}

#[test]
fn usable_paths_per_map() {
    let u = usable_per_map(&parse_paths(ANSWER).paths);
    assert_eq!(u.get("mpatha"), Some(&2));
    assert_eq!(u.get("mpathb"), Some(&1));
    assert_eq!(u.get("3600140554e9c5f4d3a845a5a0a7f1b2c"), Some(&0));
}

#[test]
fn a_relogged_in_path_is_found_by_session_and_lun() {
    let before = "mpatha|sdb|8:16|7:0:0:1|failed|running|faulty\n\
                  mpatha|sdc|8:32|8:0:0:1|active|running|ready\n";
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_1", "s2"),
    ];
    let before = parse_paths(before).paths;
    let remembered = on_device("mlx5_0", &place(&before, &carriers));
    // After the re-login: session s1 is host 9, its LUN 1 is sdg; sdb is gone.
    let after = "mpatha|sdc|8:32|8:0:0:1|active|running|ready\n\
                 mpatha|sdg|8:96|9:0:0:1|active|running|ready\n";
    let after = parse_paths(after).paths;
    let carriers = [
        carrier("sdg", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_1", "s2"),
    ];
    let m = match_back(&remembered, &after, &carriers);
    assert_eq!(m[0].map(|p| p.dev.as_str()), Some("sdg"));
}

#[test]
fn no_match_in_another_map_or_another_lun() {
    let remembered = vec![MultipathPathRef {
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
    }];
    let after = "mpathb|sdb|8:16|9:0:0:2|active|running|ready\n\
                 mpatha|sdh|8:112|9:0:0:2|active|running|ready\n";
    let after = parse_paths(after).paths;
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdh", "mlx5_0", "s1"),
    ];
    assert_eq!(match_back(&remembered, &after, &carriers), vec![None]);
}

#[test]
fn a_reused_name_on_another_session_is_not_the_path() {
    let remembered = vec![MultipathPathRef {
        map: "mpatha".into(),
        dev: "sdb".into(),
        hcil: None,
        port: 1,
        link: "s1".into(),
        dm: DmPathState::Active,
    }];
    let after = parse_paths("mpatha|sdb|8:16|9:0:0:1|active|running|ready\n").paths;
    let carriers = [carrier("sdb", "mlx5_0", "s9")];
    assert_eq!(match_back(&remembered, &after, &carriers), vec![None]);
}

#[test]
fn results_label_and_display() {
    let r = PathBackReport {
        path: MultipathPathRef {
            map: "mpatha".into(),
            dev: "sdb".into(),
            hcil: None,
            port: 1,
            link: "s1".into(),
            dm: DmPathState::Failed,
        },
        result: PathBackResult::Reinstated { dev: "sdg".into() },
    };
    assert!(r.result.is_back());
    assert_eq!(r.result.label(), "reinstated");
    assert_eq!(r.to_string(), "mpatha sdb (s1): reinstated as sdg");
    assert!(!PathBackResult::Missing.is_back());
}

#[test]
fn judged_and_reported_after_a_reinstate() {
    let before = "mpatha|sdb|8:16|7:0:0:1|active|running|ready\n\
                  mpatha|sdc|8:32|7:0:0:2|active|running|ready\n\
                  mpathb|sdd|8:48|7:0:0:3|active|running|ready\n\
                  mpathc|sde|8:64|7:0:0:4|active|running|ready\n";
    let carriers = [
        carrier("sdb", "mlx5_0", "s1"),
        carrier("sdc", "mlx5_0", "s1"),
        carrier("sdd", "mlx5_0", "s1"),
        carrier("sde", "mlx5_0", "s1"),
    ];
    let before = parse_paths(before).paths;
    let remembered = on_device("mlx5_0", &place(&before, &carriers));
    // sdb active by itself, sdc failed but running (reinstatable), sdd failed and offline,
    // sde gone.
    let after = "mpatha|sdb|8:16|7:0:0:1|active|running|ready\n\
                 mpatha|sdc|8:32|7:0:0:2|failed|running|ready\n\
                 mpathb|sdd|8:48|7:0:0:3|failed|offline|faulty\n";
    let after = parse_paths(after).paths;
    let j = judge(&remembered, &after, &carriers);
    assert!(j[0].is_active());
    assert!(matches!(j[1], PathNow::Reinstatable(p) if p.dev == "sdc"));
    assert!(matches!(j[2], PathNow::NotUsable(_)));
    assert_eq!(j[3], PathNow::Missing);
    // The reinstate of sdc worked: re-read, it is active.
    let again = "mpatha|sdb|8:16|7:0:0:1|active|running|ready\n\
                 mpatha|sdc|8:32|7:0:0:2|active|running|ready\n\
                 mpathb|sdd|8:48|7:0:0:3|failed|offline|faulty\n";
    let again = parse_paths(again).paths;
    let mut asked = BTreeMap::new();
    asked.insert("sdc".to_string(), Ok(()));
    let r = reports(&remembered, &judge(&remembered, &again, &carriers), &asked);
    let labels: Vec<&str> = r.iter().map(|r| r.result.label()).collect();
    assert_eq!(labels, ["active", "reinstated", "failed", "missing"]);
    assert!(
        r[2].to_string().contains("failed faulty offline"),
        "{}",
        r[2]
    );
}
