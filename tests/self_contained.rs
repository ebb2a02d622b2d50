//! A clone of the project stands alone: no file in it refers to the folder of context
//! documents the project was started from, which a clone does not have.

use std::path::Path;

fn walk(dir: &Path, hits: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            // Build output, VCS data and fuzzing corpora are not part of the sources.
            if matches!(name.as_ref(), "target" | ".git" | "corpus" | "artifacts") {
                continue;
            }
            walk(&path, hits);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            // The needle is split so that this file does not match itself.
            let needle = ["..", "/shared/"].concat();
            let absolute = ["/work", "/shared"].concat();
            for (n, line) in text.lines().enumerate() {
                if line.contains(&needle) || line.contains(&absolute) {
                    hits.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
}

#[test]
fn no_file_refers_outside_the_repository() {
    let mut hits = Vec::new();
    walk(Path::new(env!("CARGO_MANIFEST_DIR")), &mut hits);
    assert!(
        hits.is_empty(),
        "files refer outside the repository:\n{}",
        hits.join("\n")
    );
}
