//! What an operator must never find in a command's output: a diagnostic log line (the
//! daemon's `<6>INFO …` form, or tracing's terminal form with its module path), a Rust
//! `Debug` dump (`Recreate(Recreated { name: "x" })`, `Some(3)`, `format version None`), or
//! stray whitespace (trailing blanks, tabs, and in prose a run of spaces between words).
//! Shared by the CLI tests and the walk through every subcommand (tests/operator_walk.rs).
#![allow(dead_code)]

/// A diagnostic log line, in either of the forms crate::logging writes.
pub fn is_log_line(line: &str) -> bool {
    let b = line.as_bytes();
    let journal = b.len() > 3 && b[0] == b'<' && b[1].is_ascii_digit() && b[2] == b'>';
    // tracing's terminal form: `2026-01-01T00:00:00.000000Z  INFO …`.
    let terminal = b.len() > 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && line[..30.min(line.len())].contains('T')
        && [" INFO ", " WARN ", " ERROR ", " DEBUG ", " TRACE "]
            .iter()
            .any(|l| line.contains(l));
    journal || terminal || line.contains("iser_guard::")
}

/// The `Debug` dumps of Rust values found in `line`.
pub fn debug_dumps(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let b = line.as_bytes();
    let word_before = |end: usize| {
        let start = line[..end]
            .rfind(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .map_or(0, |i| i + 1);
        &line[start..end]
    };
    for (i, _) in line.match_indices(" { ") {
        // `Type { field: …`
        let ty = word_before(i);
        let rest = &line[i + 3..];
        let field: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if ty.starts_with(|c: char| c.is_ascii_uppercase())
            && !field.is_empty()
            && rest[field.len()..].starts_with(": ")
        {
            found.push(format!("{ty} {{ {field}: …"));
        }
    }
    for (i, _) in line.match_indices('(') {
        // `Variant(Inner` or `Some(…`, `Failed("…`
        let ty = word_before(i);
        let next = b.get(i + 1).copied().unwrap_or(b' ');
        let camel = ty.len() > 1
            && ty.starts_with(|c: char| c.is_ascii_uppercase())
            && ty[1..].chars().any(|c| c.is_ascii_lowercase());
        if ty == "Some" || (camel && (next.is_ascii_uppercase() || next == b'"')) {
            found.push(format!("{ty}(…"));
        }
    }
    for (i, _) in line.match_indices("None") {
        // `None` as a value: after `=`, `(`, `[`, `: ` or `version `, or before `,`, `)`,
        // `]`, `}` or the end of the line; never the English word ("None of …").
        let before = if i == 0 { b' ' } else { b[i - 1] };
        let after = b.get(i + 4).copied();
        let ends_word = !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
        let value_before = matches!(before, b'=' | b'(' | b'[')
            || line[..i].ends_with(": ")
            || line[..i].ends_with("version ");
        let value_after = matches!(after, None | Some(b',' | b')' | b']' | b'}'));
        if ends_word && (value_before || value_after) {
            found.push("None".into());
        }
    }
    found
}

/// Whitespace no sentence needs: trailing blanks, tabs; in `prose`, two or more spaces
/// between two words (tables align their columns with runs of spaces, so only prose is held
/// to this).
pub fn stray_whitespace(line: &str, prose: bool) -> Option<&'static str> {
    if line.ends_with(' ') {
        return Some("trailing blank");
    }
    if line.contains('\t') {
        return Some("tab");
    }
    // A manual command's elapsed-time column (`[   1.2s] `) is right-aligned, not prose.
    let body = match line.find("s] ") {
        Some(i) if line.starts_with('[') && i < 12 => &line[i + 3..],
        _ => line,
    };
    if prose && body.trim_start().contains("  ") {
        return Some("a run of spaces inside the line");
    }
    None
}

/// Every problem of `text` (a command's stdout or stderr), one line each.
pub fn problems(text: &str, prose: bool) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if is_log_line(line) {
            out.push(format!("log line: {line}"));
            continue;
        }
        for d in debug_dumps(line) {
            out.push(format!("Debug dump `{d}`: {line}"));
        }
        if let Some(w) = stray_whitespace(line, prose) {
            out.push(format!("{w}: {line:?}"));
        }
    }
    out
}

/// The `Debug` dumps in diagnostic log lines (which are allowed, being asked for, but must
/// be plain words too).
pub fn log_debug_dumps(text: &str) -> Vec<String> {
    text.lines()
        .flat_map(|l| {
            debug_dumps(l)
                .into_iter()
                .map(move |d| format!("`{d}`: {l}"))
        })
        .collect()
}

#[test]
fn the_checks_find_what_they_are_for_and_nothing_else() {
    assert!(is_log_line("<6>INFO first scan done"));
    assert!(is_log_line(
        "2026-01-01T10:00:00.000000Z  INFO iser_guard::daemon: x"
    ));
    assert!(!is_log_line("[   0.1s] running: re-create RDMA device x"));
    let line = "done id=effect 4 outcome=Recreate(Recreated { name: \"rxe_ini\" })";
    assert_eq!(debug_dumps(line).len(), 2, "{:?}", debug_dumps(line));
    assert!(!debug_dumps("not a valid journal (format version None): x").is_empty());
    assert!(!debug_dumps("saved=Some(3)").is_empty());
    assert!(debug_dumps("None of the sessions is logged in (exit 0)").is_empty());
    assert!(debug_dumps("re-create RDMA device rocep2s0f0 (attempt 1)").is_empty());
    assert!(debug_dumps("alert (warning): x; the port self-test (QP 1) works").is_empty());
    assert_eq!(
        stray_whitespace("a  b", true),
        Some("a run of spaces inside the line")
    );
    assert_eq!(stray_whitespace("  indented  column", false), None);
    assert_eq!(stray_whitespace("[   0.1s] running: x", true), None);
    assert_eq!(stray_whitespace("x ", false), Some("trailing blank"));
}
