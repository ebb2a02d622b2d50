//! Writes `packaging/debian/copyright`, the package's machine-readable (DEP-5) copyright
//! file, from the dependency tree: one `Files:` paragraph per crate compiled into
//! `/usr/sbin/iser-guard` (its version, copyright notices and license expression), and one
//! `License:` paragraph per license named, with the text taken from the crates' own license
//! files in Cargo's registry sources. The binary links every crate statically, so their
//! licenses ship with the package.
//!
//! Usage: `cargo run --example gen_copyright [-- --check] [PATH]` (default PATH
//! `packaging/debian/copyright`). `--check` writes nothing and exits 1 when PATH differs
//! from what the current `Cargo.lock` gives; `tests/copyright.rs` runs the same check, so a
//! new dependency cannot be shipped without its license.
//!
//! Inputs: `cargo metadata --offline --locked --filter-platform <host>` (the crates built for
//! this platform: Windows-only crates are not in the binary) and the license files in each
//! crate's source directory. Fails, naming the crate, when a crate has no `license` field, a
//! license expression cannot be written in DEP-5, or no crate in the tree ships the text of a
//! license that is named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Where the generated file lives in the repository.
pub const COPYRIGHT_PATH: &str = "packaging/debian/copyright";

/// Apache-2.0 is in every Debian and Ubuntu system's common-licenses; policy (and lintian)
/// want a reference to it instead of a copy.
const COMMON_APACHE: &str = "/usr/share/common-licenses/Apache-2.0";

#[allow(dead_code)]
fn main() -> ExitCode {
    let mut check = false;
    let mut path = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--check" => check = true,
            _ if a.starts_with('-') => {
                eprintln!("usage: gen_copyright [--check] [PATH]");
                return ExitCode::from(64);
            }
            _ => path = Some(PathBuf::from(a)),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = path.unwrap_or_else(|| root.join(COPYRIGHT_PATH));
    let text = match generate(root) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gen_copyright: {e}");
            return ExitCode::from(65);
        }
    };
    if check {
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if old == text {
            eprintln!("gen_copyright: {} is up to date", path.display());
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "gen_copyright: {} is out of date: {}; run `cargo run --example gen_copyright`",
            path.display(),
            first_difference(&old, &text)
        );
        return ExitCode::from(1);
    }
    match std::fs::write(&path, text) {
        Ok(()) => {
            eprintln!("gen_copyright: wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen_copyright: cannot write {}: {e}", path.display());
            ExitCode::from(74)
        }
    }
}

/// The first line where `old` and `new` differ, for a readable failure.
pub fn first_difference(old: &str, new: &str) -> String {
    let (mut a, mut b) = (old.lines(), new.lines());
    let mut n = 1;
    loop {
        match (a.next(), b.next()) {
            (None, None) => return "only the line endings differ".into(),
            (x, y) if x == y => n += 1,
            (x, y) => {
                return format!(
                    "line {n}: the file has {:?}, the dependency tree gives {:?}",
                    x.unwrap_or("<end>"),
                    y.unwrap_or("<end>")
                )
            }
        }
    }
}

/// One crate of the tree.
#[derive(Debug, Clone)]
pub struct Crate {
    /// Package name.
    pub name: String,
    /// Exact version.
    pub version: String,
    /// SPDX license expression from its Cargo.toml.
    pub license: String,
    /// Copyright notices from its license files, else its `authors`.
    pub copyright: Vec<String>,
    /// How it reaches the binary.
    pub role: Role,
    /// Its license files, classified: SPDX id (or exception) → text.
    pub texts: BTreeMap<String, String>,
}

/// How a crate reaches the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Compiled and linked into the binary.
    Linked,
    /// A procedural macro: runs at build time; the code it generates is in the binary.
    ProcMacro,
    /// Only a procedural macro's dependency: build time only, nothing of it is linked.
    MacroSupport,
}

/// Reads the tree and renders the copyright file.
pub fn generate(root: &Path) -> Result<String, String> {
    let crates = crates(root)?;
    render(root, &crates)
}

fn host_triple() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("run {rustc} -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or_else(|| format!("{rustc} -vV printed no host line"))
}

/// The crates compiled into the binary (and the proc macros it is built with), sorted by
/// name and version, without the workspace's own.
pub fn crates(root: &Path) -> Result<Vec<Crate>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let triple = host_triple()?;
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(["--filter-platform", &triple, "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let packages: BTreeMap<&str, &serde_json::Value> = meta["packages"]
        .as_array()
        .ok_or("cargo metadata: no packages")?
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .ok_or("cargo metadata: no workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let nodes: BTreeMap<&str, &serde_json::Value> = meta["resolve"]["nodes"]
        .as_array()
        .ok_or("cargo metadata: no resolve graph")?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let binary = packages
        .iter()
        .find(|(id, p)| members.contains(*id) && p["name"] == "iser-guard")
        .map(|(id, _)| *id)
        .ok_or("cargo metadata: no iser-guard package")?;
    let is_macro = |id: &str| {
        packages[id]["targets"].as_array().is_some_and(|ts| {
            ts.iter().any(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "proc-macro"))
            })
        })
    };
    // Normal (not dev, not build-script) dependencies: what the binary is made of. Walking
    // stops at a proc macro for "linked"; its own dependencies are build-time only.
    let normal_deps = |id: &str| -> Vec<&str> {
        nodes[id]["deps"]
            .as_array()
            .map(|ds| {
                ds.iter()
                    .filter(|d| {
                        d["dep_kinds"]
                            .as_array()
                            .is_some_and(|ks| ks.iter().any(|k| k["kind"].is_null()))
                    })
                    .filter_map(|d| d["pkg"].as_str())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut linked = BTreeSet::new();
    let mut all = BTreeSet::new();
    let mut stack = vec![(binary, true)];
    while let Some((id, through_linked)) = stack.pop() {
        let linked_here = through_linked && !is_macro(id);
        let fresh_all = all.insert(id);
        let fresh_linked = linked_here && linked.insert(id);
        if fresh_all || fresh_linked {
            for d in normal_deps(id) {
                stack.push((d, linked_here));
            }
        }
    }
    let mut out = Vec::new();
    for id in all {
        if members.contains(id) {
            continue;
        }
        let p = packages[id];
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let version = p["version"].as_str().unwrap_or_default().to_string();
        let license = p["license"]
            .as_str()
            .or_else(|| clarified_license(&name))
            .ok_or_else(|| {
                format!("crate {name} {version} has no `license` field: add its license by hand")
            })?
            .to_string();
        let dir = Path::new(p["manifest_path"].as_str().unwrap_or_default())
            .parent()
            .ok_or_else(|| format!("crate {name}: no source directory"))?
            .to_path_buf();
        let files = license_files(&dir)?;
        let mut copyright: Vec<String> = Vec::new();
        for text in files.values() {
            for l in copyright_lines(text) {
                if !copyright.contains(&l) {
                    copyright.push(l);
                }
            }
        }
        // The authors too, unless a notice already names them (a file may carry only a
        // third party's notice, e.g. Unicode's in unicode-ident).
        for a in p["authors"].as_array().into_iter().flatten() {
            let Some(a) = a.as_str() else { continue };
            let person = a.split('<').next().unwrap_or(a).trim();
            if !person.is_empty() && !copyright.iter().any(|l| l.contains(person)) {
                copyright.push(a.to_string());
            }
        }
        if copyright.is_empty() {
            copyright.push(format!("the {name} developers"));
        }
        let mut texts = BTreeMap::new();
        for text in files.values() {
            for (id, t) in classify(text) {
                texts.entry(id).or_insert(t);
            }
        }
        let role = if linked.contains(id) {
            Role::Linked
        } else if is_macro(id) {
            Role::ProcMacro
        } else {
            Role::MacroSupport
        };
        out.push(Crate {
            name,
            version,
            license,
            copyright,
            role,
            texts,
        });
    }
    out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    Ok(out)
}

/// Crates that declare `license-file` instead of a `license` expression, with the license
/// their file holds, read by hand (deny.toml's `[[licenses.clarify]]` pins the same file).
fn clarified_license(name: &str) -> Option<&'static str> {
    match name {
        // rdma-sys 0.3.0: LICENSE is the MIT text, "Copyright (c) 2021 datenlord".
        "rdma-sys" => Some("MIT"),
        _ => None,
    }
}

/// The license-like files at the top of a crate's source: file name → text.
fn license_files(dir: &Path) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let upper = name.to_ascii_uppercase();
        let licensey = ["LICEN", "COPYING", "UNLICENSE", "COPYRIGHT", "NOTICE"]
            .iter()
            .any(|p| upper.starts_with(p));
        if licensey && e.path().is_file() {
            if let Ok(text) = std::fs::read_to_string(e.path()) {
                out.insert(name, text);
            }
        }
    }
    Ok(out)
}

/// Which licenses a file's text is, by the wording each license has (a file may carry two,
/// e.g. the Apache license followed by the LLVM exception).
pub fn classify(text: &str) -> Vec<(String, String)> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    if let Some(at) = text.find("--- LLVM Exceptions to the Apache 2.0 License") {
        out.push(("LLVM-exception".to_string(), text[at..].to_string()));
    }
    if flat.contains("Apache License") && flat.contains("Version 2.0, January 2004") {
        out.push(("Apache-2.0".to_string(), String::new()));
    }
    if flat.contains("Permission is hereby granted, free of charge, to any person") {
        let body: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("Permission is hereby granted"))
            .collect();
        out.push(("MIT".to_string(), body.join("\n")));
    }
    if flat.contains("This is free and unencumbered software released into the public domain") {
        out.push(("Unlicense".to_string(), text.to_string()));
    }
    // 0BSD: ISC's grant without its one condition (keeping the notice).
    if flat.contains(
        "Permission to use, copy, modify, and/or distribute this software for any purpose \
         with or without fee is hereby granted.",
    ) && !flat.contains("provided that the above copyright notice")
    {
        let body: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("Permission to use, copy, modify"))
            .collect();
        out.push(("0BSD".to_string(), body.join("\n")));
    }
    if flat.contains(
        "Permission is granted to anyone to use this software for any purpose, including \
         commercial applications, and to alter it and redistribute it freely",
    ) {
        let body: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("This software is provided 'as-is'"))
            .collect();
        out.push(("Zlib".to_string(), body.join("\n")));
    }
    if flat.contains("UNICODE LICENSE V3") {
        out.push(("Unicode-3.0".to_string(), text.to_string()));
    }
    out
}

/// `Copyright …` notices, without the templates license texts carry.
pub fn copyright_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("Copyright") || l.starts_with('©'))
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            ![
                "notice", "holders", "[yyyy]", "<year>", "{yyyy}", "owner]", "license",
            ]
            .iter()
            .any(|t| lower.contains(t))
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// A parsed SPDX license expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// One license, possibly `WITH` an exception.
    License(String, Option<String>),
    /// Every one applies.
    And(Vec<Expr>),
    /// Any one may be chosen.
    Or(Vec<Expr>),
}

/// Parses `MIT OR Apache-2.0`, `(MIT OR Apache-2.0) AND Unicode-3.0`,
/// `Apache-2.0 WITH LLVM-exception OR MIT`; also the old `MIT/Apache-2.0`.
pub fn parse_spdx(s: &str) -> Result<Expr, String> {
    let spaced = s
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut pos = 0;
    let e = parse_or(&tokens, &mut pos)?;
    if pos != tokens.len() {
        return Err(format!("`{s}`: unexpected `{}`", tokens[pos]));
    }
    Ok(e)
}

fn parse_or(t: &[&str], pos: &mut usize) -> Result<Expr, String> {
    let mut items = vec![parse_and(t, pos)?];
    while t.get(*pos).is_some_and(|x| x.eq_ignore_ascii_case("OR")) {
        *pos += 1;
        items.push(parse_and(t, pos)?);
    }
    Ok(if items.len() == 1 {
        items.remove(0)
    } else {
        Expr::Or(items)
    })
}

fn parse_and(t: &[&str], pos: &mut usize) -> Result<Expr, String> {
    let mut items = vec![parse_atom(t, pos)?];
    while t.get(*pos).is_some_and(|x| x.eq_ignore_ascii_case("AND")) {
        *pos += 1;
        items.push(parse_atom(t, pos)?);
    }
    Ok(if items.len() == 1 {
        items.remove(0)
    } else {
        Expr::And(items)
    })
}

fn parse_atom(t: &[&str], pos: &mut usize) -> Result<Expr, String> {
    let tok = *t.get(*pos).ok_or("license expression ends too early")?;
    *pos += 1;
    if tok == "(" {
        let e = parse_or(t, pos)?;
        if t.get(*pos) != Some(&")") {
            return Err("missing `)` in license expression".into());
        }
        *pos += 1;
        return Ok(e);
    }
    if ["AND", "OR", "WITH", ")"].contains(&tok.to_ascii_uppercase().as_str()) {
        return Err(format!("unexpected `{tok}` in license expression"));
    }
    if t.get(*pos).is_some_and(|x| x.eq_ignore_ascii_case("WITH")) {
        let exc = t.get(*pos + 1).ok_or("`WITH` without an exception")?;
        *pos += 2;
        return Ok(Expr::License(tok.to_string(), Some(exc.to_string())));
    }
    Ok(Expr::License(tok.to_string(), None))
}

/// The DEP-5 short name of one license: SPDX's, with an exception written
/// `Apache-2.0 with LLVM exception` as the format asks.
fn dep5_name(id: &str, exception: Option<&str>) -> String {
    match exception {
        None => id.to_string(),
        Some(e) => format!("{id} with {} exception", e.trim_end_matches("-exception")),
    }
}

/// Renders an expression in DEP-5 syntax: `or`/`and`, and a comma to group one level
/// (`MIT or Apache-2.0, and Unicode-3.0`).
pub fn dep5_expr(e: &Expr) -> Result<String, String> {
    fn flat(e: &Expr) -> Option<String> {
        match e {
            Expr::License(id, exc) => Some(dep5_name(id, exc.as_deref())),
            Expr::And(xs) => xs
                .iter()
                .map(flat)
                .collect::<Option<Vec<_>>>()
                .map(|v| v.join(" and ")),
            Expr::Or(xs) => xs
                .iter()
                .map(flat)
                .collect::<Option<Vec<_>>>()
                .map(|v| v.join(" or ")),
        }
    }
    // Only the same operator nested? `flat` would lose grouping, so check depth.
    fn depth(e: &Expr) -> usize {
        match e {
            Expr::License(..) => 0,
            Expr::And(xs) | Expr::Or(xs) => 1 + xs.iter().map(depth).max().unwrap_or(0),
        }
    }
    match e {
        _ if depth(e) <= 1 => flat(e).ok_or_else(|| "empty expression".into()),
        Expr::And(xs) | Expr::Or(xs) if depth(e) == 2 => {
            let op = if matches!(e, Expr::And(_)) {
                "and"
            } else {
                "or"
            };
            let (grouped, plain): (Vec<&Expr>, Vec<&Expr>) = xs.iter().partition(|x| depth(x) == 1);
            if grouped.len() != 1 {
                return Err("more than one group cannot be written in DEP-5".into());
            }
            let mut s = flat(grouped[0]).unwrap_or_default();
            for p in plain {
                s.push_str(&format!(", {op} {}", flat(p).unwrap_or_default()));
            }
            Ok(s)
        }
        _ => Err("the expression nests too deep for DEP-5".into()),
    }
}

/// Every (license, exception) the expression names.
fn atoms(e: &Expr, out: &mut BTreeSet<(String, Option<String>)>) {
    match e {
        Expr::License(id, exc) => {
            out.insert((id.clone(), exc.clone()));
        }
        Expr::And(xs) | Expr::Or(xs) => xs.iter().for_each(|x| atoms(x, out)),
    }
}

/// A DEP-5 multi-line field body: each line indented one space, an empty line as ` .`.
fn body(text: &str) -> String {
    let mut out = String::new();
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.replace('\t', "    ").trim_end().to_string())
        .collect();
    let start = lines.iter().position(|l| !l.is_empty()).unwrap_or(0);
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    for l in &lines[start..end.max(start)] {
        if l.is_empty() {
            out.push_str(" .\n");
        } else {
            out.push(' ');
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn own_metadata(root: &Path) -> Result<(String, String, String), String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml"))
        .map_err(|e| format!("read Cargo.toml: {e}"))?;
    let cargo: toml::Table = toml::from_str(&text).map_err(|e| format!("Cargo.toml: {e}"))?;
    let pkg = &cargo["package"];
    let deb = &pkg["metadata"]["deb"];
    let s = |v: Option<&toml::Value>, what: &str| {
        v.and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("Cargo.toml: no {what}"))
    };
    Ok((
        s(pkg.get("license"), "package.license")?,
        s(deb.get("copyright"), "package.metadata.deb.copyright")?,
        s(deb.get("maintainer"), "package.metadata.deb.maintainer")?,
    ))
}

/// The copyright file for `crates`.
pub fn render(root: &Path, crates: &[Crate]) -> Result<String, String> {
    let (own_license, own_copyright, maintainer) = own_metadata(root)?;
    let own_expr = parse_spdx(&own_license).map_err(|e| format!("iser-guard: {e}"))?;
    let mut used = BTreeSet::new();
    atoms(&own_expr, &mut used);
    let mut s = String::new();
    s.push_str(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: iser-guard\n",
    );
    s.push_str(&format!("Upstream-Contact: {maintainer}\n"));
    s.push_str(
        "Comment: Generated by `cargo run --example gen_copyright` from Cargo.lock and the\n \
         license files of the crates' sources; tests/copyright.rs fails when it is out of\n \
         date. /usr/sbin/iser-guard links the crates below statically. A path\n \
         cargo-registry/NAME-VERSION/ stands for the source of that crate as Cargo\n \
         downloads it from the crates registry.\n\n",
    );
    s.push_str(&format!(
        "Files: *\nCopyright: {own_copyright}\nLicense: {}\n\n",
        dep5_expr(&own_expr)?
    ));
    for c in crates {
        let who = format!("crate {} {}", c.name, c.version);
        let expr = parse_spdx(&c.license).map_err(|e| format!("{who}: {e}"))?;
        atoms(&expr, &mut used);
        s.push_str(&format!(
            "Files: cargo-registry/{}-{}/*\nCopyright:",
            c.name, c.version
        ));
        // The first notice follows the field name; the others are continuation lines.
        for l in &c.copyright {
            s.push_str(&format!(" {l}\n"));
        }
        s.push_str(&format!(
            "License: {}\n",
            dep5_expr(&expr).map_err(|e| format!("{who}: `{}`: {e}", c.license))?
        ));
        let comment = match c.role {
            Role::Linked => "linked into /usr/sbin/iser-guard",
            Role::ProcMacro => {
                "procedural macro run at build time; the code it generates is in \
                 /usr/sbin/iser-guard"
            }
            Role::MacroSupport => "used by procedural macros at build time only; not linked",
        };
        s.push_str(&format!("Comment: {comment}\n\n"));
    }
    // One License paragraph per license named, its text from the first crate (by name) that
    // ships it.
    let mut paragraphs = Vec::new();
    for (id, exc) in &used {
        let name = dep5_name(id, exc.as_deref());
        let find = |key: &str| {
            crates
                .iter()
                .find_map(|c| c.texts.get(key).map(|t| (c, t.clone())))
        };
        let text = match (id.as_str(), exc.as_deref()) {
            ("Apache-2.0", None) => {
                find("Apache-2.0").ok_or_else(|| no_text(&name, crates))?;
                format!(
                    "On Debian and Ubuntu systems, the complete text of the Apache License,\n\
                     Version 2.0 (the same text as the crates' LICENSE-APACHE files) is in\n\
                     {COMMON_APACHE}."
                )
            }
            ("Apache-2.0", Some("LLVM-exception")) => {
                let (c, t) = find("LLVM-exception").ok_or_else(|| no_text(&name, crates))?;
                format!(
                    "The Apache License, Version 2.0 (on Debian and Ubuntu systems in\n\
                     {COMMON_APACHE}), with this exception, as\n\
                     {} {} gives it:\n\n{t}",
                    c.name, c.version
                )
            }
            (id, None) => {
                let (c, t) = find(id).ok_or_else(|| no_text(&name, crates))?;
                let note = if id == "MIT" {
                    " (each crate's copyright notice is in its Files paragraph)"
                } else {
                    ""
                };
                format!("As {} {} gives it{note}:\n\n{t}", c.name, c.version)
            }
            (_, Some(_)) => return Err(no_text(&name, crates)),
        };
        paragraphs.push(format!("License: {name}\n{}", body(&text)));
    }
    s.push_str(&paragraphs.join("\n"));
    Ok(s)
}

fn no_text(license: &str, crates: &[Crate]) -> String {
    let users: Vec<String> = crates
        .iter()
        .filter(|c| {
            c.license
                .contains(license.split(' ').next().unwrap_or(license))
        })
        .map(|c| format!("{} {}", c.name, c.version))
        .collect();
    format!(
        "no crate ships the text of {license} (named by {}): add the text to \
         examples/gen_copyright.rs's sources or drop the dependency",
        users.join(", ")
    )
}
