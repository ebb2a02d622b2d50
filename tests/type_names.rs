//! One word per thing: no two type definitions (struct, enum, union, trait, type alias) in
//! the workspace's sources (`src/` and `crates/*/src/`, their in-file test modules
//! included) share a name. Two meanings behind one name is how a reader, or a `use` that
//! picked the wrong one, gets a concept wrong; a second meaning gets a name that says what
//! it is (the glossary in docs/dev/glossary.md lists the words a newcomer meets).
//!
//! Left out: the versioned journal formats (`journal/v1.rs`, `journal/v2.rs` mirror the
//! engine's types by design, frozen per version) and associated types (`type Item`,
//! `type Error` in an `impl` or a `trait`), which are the trait's names, not ours. The
//! scan reads rustfmt'd text (`cargo fmt` is enforced): one definition per line, bodies
//! indented under their `impl` or `trait`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Names that may be defined more than once, each with where and why. Keep it short: a new
/// entry needs a reason as strong as these.
const ALLOWED: &[(&str, &str, &str)] = &[(
    "Args",
    "src/cli/",
    // clap's derive convention: each subcommand module defines its own `Args` (its flags),
    // always used as `module::Args`, never imported bare.
    "one clap argument struct per subcommand module",
)];

/// Journal formats, frozen per version: they repeat the engine's names on purpose.
fn is_versioned_journal(path: &Path) -> bool {
    path.ends_with("journal/v1.rs") || path.ends_with("journal/v2.rs")
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !is_versioned_journal(&path) {
            out.push(path);
        }
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// `pub `, `pub(crate) `, `pub(super) `, `pub(in a::b) `, then `unsafe `, stripped.
fn strip_qualifiers(mut s: &str) -> &str {
    if let Some(rest) = s.strip_prefix("pub") {
        if let Some(rest) = rest.strip_prefix(' ') {
            s = rest;
        } else if rest.starts_with('(') {
            if let Some(close) = rest.find(')') {
                s = rest[close + 1..].trim_start();
            }
        }
    }
    s.strip_prefix("unsafe ").unwrap_or(s)
}

/// The keyword and name of a type definition starting this line, if it is one.
fn definition(line: &str) -> Option<(&'static str, &str)> {
    let s = strip_qualifiers(line.trim_start());
    for kw in ["struct", "enum", "union", "trait", "type"] {
        if let Some(rest) = s.strip_prefix(kw).and_then(|r| r.strip_prefix(' ')) {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            return name
                .starts_with(|c: char| c.is_ascii_uppercase())
                .then_some((kw, name));
        }
    }
    None
}

/// Whether the `type` on line `i` is an associated type: the item it is indented under
/// (skipping a `where` clause and a lone `{`) is an `impl` or a `trait`.
fn is_associated(lines: &[&str], i: usize) -> bool {
    let own = indent(lines[i]);
    for line in lines[..i].iter().rev() {
        let t = line.trim();
        if t.is_empty() || indent(line) >= own || t == "{" || t.starts_with("where") {
            continue;
        }
        let head = strip_qualifiers(t);
        return head.starts_with("impl") || head.starts_with("trait ");
    }
    false
}

/// Every type definition: name → where (`path:line`).
fn definitions(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut dirs = vec![root.join("src")];
    for krate in std::fs::read_dir(root.join("crates")).expect("crates dir") {
        let src = krate.expect("dir entry").path().join("src");
        if src.is_dir() {
            dirs.push(src);
        }
    }
    let mut files = Vec::new();
    for dir in &dirs {
        rust_sources(dir, &mut files);
    }
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut defs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read source");
        let lines: Vec<&str> = text.lines().collect();
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (i, line) in lines.iter().enumerate() {
            let Some((kw, name)) = definition(line) else {
                continue;
            };
            if kw == "type" && is_associated(&lines, i) {
                continue;
            }
            defs.entry(name.to_string())
                .or_default()
                .push(format!("{rel}:{}", i + 1));
        }
    }
    defs
}

fn allowed(name: &str, places: &[String]) -> bool {
    ALLOWED
        .iter()
        .any(|(n, dir, _)| *n == name && places.iter().all(|p| p.starts_with(dir)))
}

#[test]
fn every_type_name_has_one_definition() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let defs = definitions(root);
    let clashes: Vec<String> = defs
        .iter()
        .filter(|(name, places)| places.len() > 1 && !allowed(name, places))
        .map(|(name, places)| format!("  {name}: {}", places.join(", ")))
        .collect();
    assert!(
        clashes.is_empty(),
        "type names defined more than once (give each meaning a name that says what it is, \
         or merge them when they are the same thing):\n{}",
        clashes.join("\n")
    );
}

#[test]
fn the_scan_sees_what_it_must() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let defs = definitions(root);
    // Definitions of every kind, in both crates, including private and test-module ones.
    for name in [
        "Engine",
        "Verdict",
        "Outcome",
        "AlertSink",
        "RouteLookup",
        "Trickle",
    ] {
        assert!(defs.contains_key(name), "{name} not found by the scan");
    }
    // Associated types are not definitions of ours (`type Output` of the QP mask's
    // operators is not io::process::Output).
    for name in ["Item", "Err"] {
        assert!(!defs.contains_key(name), "associated type {name} counted");
    }
    assert_eq!(defs["Output"].len(), 1, "{:?}", defs["Output"]);
    // The allow-list is no larger than the workspace needs.
    for (name, _, why) in ALLOWED {
        assert!(
            defs.get(*name).is_some_and(|p| p.len() > 1),
            "{name} ({why}) is allowed twice but defined once: drop it from ALLOWED"
        );
    }
}

#[test]
fn associated_types_are_told_from_aliases() {
    let src = "\
type Alias = u8;
impl<T> Iterator for It<T>
where
    T: Copy,
{
    type Item = T;
}
pub trait Tr {
    type Assoc;
}
fn f() {
    type Local = u8;
}
";
    let lines: Vec<&str> = src.lines().collect();
    let found: Vec<(&str, bool)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| definition(l).map(|(_, n)| (n, is_associated(&lines, i))))
        .collect();
    assert_eq!(
        found,
        [
            ("Alias", false),
            ("Item", true),
            ("Tr", false),
            ("Assoc", true),
            ("Local", false),
        ]
    );
    assert_eq!(
        definition("pub(super) struct Pending {"),
        Some(("struct", "Pending"))
    );
    assert_eq!(definition("pub(in crate::a) enum E {"), Some(("enum", "E")));
    assert_eq!(
        definition("pub unsafe trait Send2 {}"),
        Some(("trait", "Send2"))
    );
    assert_eq!(definition("struct lower;"), None);
    assert_eq!(definition("// struct Commented"), None);
}
