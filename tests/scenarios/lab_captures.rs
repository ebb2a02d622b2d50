//! The simulated host's model of a stuck QP 1 on the lab's irdma-like rdma_rxe, held against
//! what that kernel really printed and reported (tests/fixtures/lab-kmod/README.md: the raw
//! /dev/kmsg records and RDMA netlink dumps of the lab's field-kernel-alone).

use std::path::{Path, PathBuf};

use iser_guard::core::kmsg::Record;
use iser_guard::core::nldev::QpDump;
use iser_guard::core::qp::{QpState, QpType};
use iser_guard::core::recovery::{read_record, Observation, Trust};
use iser_guard::core::time::Instant;
use iser_guard::sim::{scenarios, Entry, Harness};

use super::util::MAX_STEPS;

/// The kernels captured (folders under tests/fixtures/lab-kmod).
const KERNELS: [&str; 2] = ["k612", "k61"];
const DEVICE: &str = "rxe_ini";

fn dir(kernel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lab-kmod")
        .join(kernel)
}

/// The raw records of a capture (one `pri,seq,usec,flags;text` line, then its ` KEY=value`
/// dictionary lines).
fn records(kernel: &str) -> Vec<Record> {
    let text = std::fs::read_to_string(dir(kernel).join("field-incident.kmsg")).unwrap();
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with(' ') {
            if let Some(last) = out.last_mut() {
                last.push('\n');
                last.push_str(line);
            }
        } else if !line.is_empty() {
            out.push(line.to_string());
        }
    }
    out.iter()
        .map(|r| Record::parse(r.as_bytes()).unwrap_or_else(|e| panic!("{r}: {e}")))
        .collect()
}

/// The lines the kernel printed about `DEVICE`'s stuck QP 1, with what the daemon's door
/// makes of each record as captured (level and dictionary included).
fn captured_stuck(kernel: &str) -> Vec<(String, Option<(Observation, Trust)>)> {
    records(kernel)
        .iter()
        .filter(|r| r.text.contains("modify_qp invalid") || r.text.contains("ib_mad_send_error"))
        .map(|r| (r.text.clone(), read_record(r).and_then(|x| x.observation)))
        .collect()
}

/// The simulated lab incident's kernel lines about the stuck QP 1, through the same door.
fn simulated_stuck() -> Vec<(String, Option<(Observation, Trust)>)> {
    let s = scenarios::find("lab-field-incident").unwrap();
    let (host, policy) = (s.build)();
    let mut h = Harness::new(host, policy, 7);
    h.run_until(Instant::ZERO.plus(s.duration), MAX_STEPS)
        .unwrap();
    h.timeline
        .iter()
        .filter_map(|e| match e {
            Entry::Kernel { facility, text, .. }
                if text.contains("modify_qp invalid") || text.contains("ib_mad_send_error") =>
            {
                let record = Record {
                    facility: *facility,
                    level: 3,
                    seq: 1,
                    usec: 0,
                    continuation: false,
                    text: text.clone(),
                    dict: Vec::new(),
                };
                Some((
                    text.clone(),
                    read_record(&record).and_then(|x| x.observation),
                ))
            }
            _ => None,
        })
        .collect()
}

fn distinct<T: Clone + PartialEq>(v: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in v {
        if !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}

#[test]
fn the_simulated_stuck_qp1_prints_what_the_lab_kernel_printed_and_means_the_same() {
    let simulated = distinct(&simulated_stuck());
    assert_eq!(simulated.len(), 2, "{simulated:#?}");
    for kernel in KERNELS {
        let captured = distinct(&captured_stuck(kernel));
        // The same two lines, in the same order (the refusal, then the MAD layer's line),
        // and the same observation for the engine, each trusted as a kernel record.
        assert_eq!(captured, simulated, "{kernel}");
        for (text, obs) in &captured {
            let (obs, trust) = obs
                .as_ref()
                .unwrap_or_else(|| panic!("{text}: no observation"));
            assert_eq!(*trust, Trust::Trusted, "{text}");
            assert!(format!("{obs:?}").contains(DEVICE), "{text}: {obs:?}");
        }
    }
}

#[test]
fn the_captured_records_carry_irdmas_level_and_the_mad_layers_dictionary() {
    for kernel in KERNELS {
        let recs = records(kernel);
        let refusal = recs
            .iter()
            .find(|r| r.text.contains("modify_qp invalid"))
            .expect("a refusal");
        // ibdev_warn of a device without a parent: level 4, no dictionary.
        assert_eq!((refusal.facility, refusal.level), (0, 4), "{kernel}");
        assert!(refusal.dict.is_empty(), "{kernel}: {:?}", refusal.dict);
        let mad = recs
            .iter()
            .find(|r| r.text.contains("ib_mad_send_error"))
            .expect("a MAD line");
        assert_eq!((mad.facility, mad.level), (0, 3), "{kernel}");
        let dict: Vec<String> = mad.dict.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            dict,
            ["SUBSYSTEM=infiniband", "DEVICE=+infiniband:rxe_ini"],
            "{kernel}"
        );
    }
}

/// QP 1 of `DEVICE` in a captured RES_QP_GET dump.
fn captured_qp1(kernel: &str, moment: &str) -> (QpType, QpState, Option<String>, Option<u32>) {
    // The capture numbers its dumps in the order it made them, which follows the kernel's
    // device order (not the same in every run): the file is found by its name.
    let folder = dir(kernel).join(moment);
    let file = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-res-qp-rxe_ini.hex"))
        .unwrap_or_else(|| panic!("{}: no RES_QP_GET dump of {DEVICE}", folder.display()));
    let text = std::fs::read_to_string(file).unwrap();
    let messages: Vec<Vec<u8>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1) // the request
        .map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    for m in &messages {
        let Ok(dump) = QpDump::decode(m) else {
            continue; // NLMSG_DONE
        };
        assert_eq!(dump.dev_name, DEVICE);
        for e in dump.entries.into_iter().flatten() {
            if e.lqpn == 1 {
                return (
                    e.qp_type.known().expect("a known type"),
                    e.state,
                    e.kern_name.clone(),
                    e.port,
                );
            }
        }
    }
    panic!("{kernel}/{moment}: no QP 1 of {DEVICE}");
}

#[test]
fn the_captured_qp_table_has_qp1_in_err_then_a_fresh_one_and_so_has_the_simulated_host() {
    for kernel in KERNELS {
        let stuck = captured_qp1(kernel, "nldev-gsi-err");
        assert_eq!(
            stuck,
            (QpType::Gsi, QpState::Err, Some("ib_core".into()), Some(1)),
            "{kernel}"
        );
        let fresh = captured_qp1(kernel, "nldev-recreated");
        assert_eq!(fresh.1, QpState::Rts, "{kernel}");
    }
    // The simulated host's QP 1 of the same port: ERR once the kernel noticed (81 s), with
    // the target still away (90 s), and RTS after the re-creation.
    let s = scenarios::find("lab-field-incident").unwrap();
    let (host, policy) = (s.build)();
    let mut h = Harness::new(host, policy, 7);
    let qp1 = |h: &Harness| {
        h.host
            .devices
            .get(DEVICE)
            .and_then(|d| d.gsi.first().copied())
    };
    h.run_until(Instant(90_000), MAX_STEPS).unwrap();
    assert_eq!(qp1(&h), Some(QpState::Err));
    h.run_until(Instant::ZERO.plus(s.duration), MAX_STEPS)
        .unwrap();
    assert_eq!(qp1(&h), Some(QpState::Rts));
}
