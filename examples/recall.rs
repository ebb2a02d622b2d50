//! Measures recognition on a set of real published kernel lines (eval/kernel-lines/*.tsv):
//! per family, how many `R` lines the signatures or the subsystem layer recognise, and how
//! many `U` lines (unrelated subsystems) raise anything at all (a false finding).
//!
//!     cargo run --example recall -- eval/kernel-lines/dev.tsv [--misses]
//!
//! `--misses` lists the lines not recognised and the false findings. The holdout
//! (eval/kernel-lines/holdout.tsv) is measured with the same command and never tuned on.

use std::collections::BTreeMap;

use iser_guard::cli::explain::recognise_saved_line;

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: recall FILE.tsv [--misses]");
        return std::process::ExitCode::from(64);
    };
    let misses = args.any(|a| a == "--misses");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("recall: cannot read {path}: {e}");
            return std::process::ExitCode::from(66);
        }
    };
    // family -> (recognised, total, by signature, by subsystem only)
    let mut fam: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    let (mut unrelated, mut false_findings) = (0, 0);
    let mut listed = Vec::new();
    let mut sources = 0;
    for line in text.lines() {
        if line.starts_with("# source:") {
            sources += 1;
            continue;
        }
        let mut cols = line.splitn(3, '\t');
        let (Some(kind), Some(family), Some(kernel_line)) = (cols.next(), cols.next(), cols.next())
        else {
            continue;
        };
        let v = recognise_saved_line(kernel_line);
        match kind {
            "R" => {
                let e = fam.entry(family.to_string()).or_default();
                e.1 += 1;
                if v.recognised() {
                    e.0 += 1;
                    if v.signature.is_some() {
                        e.2 += 1;
                    }
                } else {
                    listed.push(format!("missed ({family}): {kernel_line}"));
                }
            }
            "U" => {
                unrelated += 1;
                if v.recognised() {
                    false_findings += 1;
                    listed.push(format!(
                        "false finding ({}): {kernel_line}",
                        v.subsystem
                            .as_ref()
                            .map(|s| s.subsystem.name())
                            .or(v.signature.as_ref().map(|s| s.kind.name()))
                            .unwrap_or("?")
                    ));
                }
            }
            _ => {}
        }
    }
    let (mut hit, mut total, mut by_sig) = (0, 0, 0);
    println!("{path}: {sources} sources");
    println!(
        "{:<10} {:>10} {:>8}  {:>14}",
        "family", "recognised", "recall", "by a signature"
    );
    for (f, (h, t, s)) in &fam {
        hit += h;
        total += t;
        by_sig += s;
        println!("{f:<10} {:>5} / {:<3} {:>7.1}%  {s:>14}", h, t, pct(*h, *t));
    }
    println!(
        "{:<10} {:>5} / {:<3} {:>7.1}%  {by_sig:>14}",
        "all",
        hit,
        total,
        pct(hit, total)
    );
    println!("unrelated lines: {unrelated}, false findings: {false_findings}");
    if misses {
        for l in &listed {
            println!("  {l}");
        }
    }
    std::process::ExitCode::SUCCESS
}

fn pct(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}
