//! Recognition on the development set of real published kernel lines
//! (eval/kernel-lines/dev.tsv, see its README): at least 95 % of the lines of the RDMA
//! storage stack are recognised (by a signature or the subsystem layer) and no line of an
//! unrelated subsystem raises anything. The holdout (eval/kernel-lines/holdout.tsv) is
//! measured by `examples/recall.rs` and deliberately not used here: nothing is tuned on it.

use iser_guard::cli::explain::recognise_saved_line;

#[test]
fn the_development_set_is_recognised_with_no_false_finding() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/eval/kernel-lines/dev.tsv"
    ))
    .unwrap();
    let (mut relevant, mut hit, mut unrelated) = (0, 0, 0);
    let mut missed = Vec::new();
    let mut false_findings = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut cols = line.splitn(3, '\t');
        let (Some(kind), Some(_family), Some(kernel_line)) =
            (cols.next(), cols.next(), cols.next())
        else {
            panic!("malformed line in dev.tsv: {line:?}");
        };
        let v = recognise_saved_line(kernel_line);
        match kind {
            "R" => {
                relevant += 1;
                if v.recognised() {
                    hit += 1;
                } else {
                    missed.push(kernel_line);
                }
            }
            "U" => {
                unrelated += 1;
                if v.recognised() {
                    false_findings.push(kernel_line);
                }
            }
            other => panic!("unknown class {other:?}"),
        }
    }
    assert!(
        relevant >= 25 && unrelated >= 10,
        "{relevant} / {unrelated}"
    );
    assert!(
        hit * 100 >= relevant * 95,
        "recall {hit}/{relevant}; missed: {missed:#?}"
    );
    assert!(false_findings.is_empty(), "{false_findings:#?}");
}

#[test]
fn the_sets_keep_their_sources_apart() {
    let read = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/eval/kernel-lines/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let sources = |t: &str| -> Vec<String> {
        t.lines()
            .filter_map(|l| l.strip_prefix("# source: "))
            .map(|s| s.split(' ').next().unwrap_or(s).to_string())
            .collect()
    };
    let (dev, holdout) = (sources(&read("dev.tsv")), sources(&read("holdout.tsv")));
    assert!(!dev.is_empty() && !holdout.is_empty());
    for s in &dev {
        assert!(!holdout.contains(s), "{s} is in both sets");
    }
}
