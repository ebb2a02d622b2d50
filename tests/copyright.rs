//! The Debian package's copyright file lists every crate the binary is built from, with its
//! license, and carries the text of every license it names: `packaging/debian/copyright`
//! must be exactly what `examples/gen_copyright.rs` makes of the current Cargo.lock, so a
//! new or upgraded dependency fails here until the file is regenerated
//! (`cargo run --example gen_copyright`).

#[allow(dead_code)]
#[path = "../examples/gen_copyright.rs"]
mod gen_copyright;

use std::collections::BTreeSet;
use std::path::Path;

use gen_copyright::{dep5_expr, parse_spdx, Expr};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn committed() -> String {
    std::fs::read_to_string(root().join(gen_copyright::COPYRIGHT_PATH))
        .expect("packaging/debian/copyright exists")
}

/// The DEP-5 paragraphs: field name → value (continuation lines joined with '\n').
fn paragraphs(text: &str) -> Vec<Vec<(String, String)>> {
    text.split("\n\n")
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let mut fields: Vec<(String, String)> = Vec::new();
            for line in p.lines() {
                if let Some(cont) = line.strip_prefix(' ') {
                    let last = fields.last_mut().expect("continuation after a field");
                    last.1.push('\n');
                    last.1.push_str(cont);
                } else {
                    let (k, v) = line.split_once(':').expect("field: value");
                    fields.push((k.to_string(), v.trim().to_string()));
                }
            }
            fields
        })
        .collect()
}

fn field<'a>(p: &'a [(String, String)], name: &str) -> Option<&'a str> {
    p.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[test]
fn copyright_file_is_generated_from_the_current_dependency_tree() {
    let want = gen_copyright::generate(root()).expect("the generator runs");
    let have = committed();
    assert!(
        have == want,
        "packaging/debian/copyright is out of date ({}); regenerate it with \
         `cargo run --example gen_copyright` and review the new crates' licenses",
        gen_copyright::first_difference(&have, &want)
    );
}

#[test]
fn every_crate_of_the_binary_has_a_files_paragraph_and_every_license_a_text() {
    let crates = gen_copyright::crates(root()).expect("cargo metadata");
    assert!(crates.len() > 20, "the tree has {} crates", crates.len());
    let text = committed();
    let paras = paragraphs(&text);
    assert!(field(&paras[0], "Format").is_some_and(|f| f.contains("copyright-format/1.0")));
    let files: Vec<&Vec<(String, String)>> = paras
        .iter()
        .filter(|p| field(p, "Files").is_some())
        .collect();
    let standalone: BTreeSet<&str> = paras
        .iter()
        .filter(|p| field(p, "Files").is_none() && field(p, "Format").is_none())
        .filter_map(|p| field(p, "License"))
        .map(|l| l.lines().next().unwrap_or_default())
        .collect();
    for c in &crates {
        let want = format!("cargo-registry/{}-{}/*", c.name, c.version);
        let p = files
            .iter()
            .find(|p| field(p, "Files") == Some(want.as_str()))
            .unwrap_or_else(|| panic!("no Files paragraph for {} {}", c.name, c.version));
        assert!(field(p, "Copyright").is_some_and(|c| !c.is_empty()));
        let license = field(p, "License").expect("License field");
        assert_eq!(
            license,
            dep5_expr(&parse_spdx(&c.license).expect("SPDX")).expect("DEP-5"),
            "{}",
            c.name
        );
    }
    // Every short name a Files paragraph uses has a License paragraph with a text.
    for p in &files {
        let license = field(p, "License").expect("License");
        for name in license
            .split([',', ' '])
            .collect::<Vec<_>>()
            .join(" ")
            .split(" or ")
            .flat_map(|x| x.split(" and "))
            .map(str::trim)
            .filter(|x| !x.is_empty())
        {
            assert!(
                standalone.contains(name),
                "no License paragraph for {name:?}"
            );
        }
    }
    for p in paras.iter().filter(|p| field(p, "Files").is_none()) {
        if let Some(l) = field(p, "License") {
            assert!(l.lines().count() > 2, "License paragraph without text: {l}");
        }
    }
}

#[test]
fn spdx_expressions_become_dep5() {
    let d = |s: &str| dep5_expr(&parse_spdx(s).expect("parses")).expect("renders");
    assert_eq!(d("MIT OR Apache-2.0"), "MIT or Apache-2.0");
    assert_eq!(d("MIT/Apache-2.0"), "MIT or Apache-2.0");
    assert_eq!(
        d("(MIT OR Apache-2.0) AND Unicode-3.0"),
        "MIT or Apache-2.0, and Unicode-3.0"
    );
    assert_eq!(
        d("Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT"),
        "Apache-2.0 with LLVM exception or Apache-2.0 or MIT"
    );
    assert_eq!(
        parse_spdx("Apache-2.0 WITH LLVM-exception"),
        Ok(Expr::License(
            "Apache-2.0".into(),
            Some("LLVM-exception".into())
        ))
    );
    for bad in ["", "MIT OR", "(MIT", "MIT AND AND BSD", "WITH x"] {
        assert!(parse_spdx(bad).is_err(), "{bad:?} accepted");
    }
    // Two groups cannot be said with one comma.
    let two = parse_spdx("(A OR B) AND (C OR D)").expect("parses");
    assert!(dep5_expr(&two).is_err());
}

#[test]
fn license_texts_are_recognised_by_their_wording() {
    let mit = "Copyright (c) 2015 Someone\n\nPermission is hereby granted, free of charge, to \
               any person obtaining a copy of this software";
    let kinds: Vec<String> = gen_copyright::classify(mit)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(kinds, ["MIT"]);
    assert_eq!(
        gen_copyright::copyright_lines(mit),
        ["Copyright (c) 2015 Someone"]
    );
    // Templates inside license texts are not notices.
    assert!(gen_copyright::copyright_lines(
        "Copyright [yyyy] [name of copyright owner]\nThe above copyright notice and this"
    )
    .is_empty());
    assert!(gen_copyright::classify("no license here").is_empty());
    // 0BSD (adler2) is ISC's grant without its condition; Zlib (miniz_oxide) has its own.
    let zero_bsd = "Copyright (C) X\n\nPermission to use, copy, modify, and/or distribute this \
                    software for\nany purpose with or without fee is hereby granted.\n\nTHE \
                    SOFTWARE IS PROVIDED \"AS IS\"";
    let isc = format!("{zero_bsd}, provided that the above copyright notice and this");
    let kinds = |t: &str| -> Vec<String> {
        gen_copyright::classify(t)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    assert_eq!(kinds(zero_bsd), ["0BSD"]);
    assert!(kinds(&isc).is_empty());
    let zlib = "This software is provided 'as-is', without any express or implied warranty.\n\n\
                Permission is granted to anyone to use this software for any purpose, including \
                commercial applications, and to alter it and redistribute it freely, subject to";
    assert_eq!(kinds(zlib), ["Zlib"]);
}
