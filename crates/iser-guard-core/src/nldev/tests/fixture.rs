//! Loading the capture fixtures under tests/fixtures/nldev (see its README).

use std::path::{Path, PathBuf};

/// The fixture root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nldev")
}

/// Hex text to bytes. Panics on bad fixtures: a broken fixture is a test bug.
pub fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(s.len() % 2 == 0, "odd hex length in fixture");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("fixture hex"))
        .collect()
}

/// One capture file: the request as sent, then every received message.
pub struct Capture {
    pub path: PathBuf,
    pub request: Vec<u8>,
    pub replies: Vec<Vec<u8>>,
}

/// Reads an nldevcap `.hex` file: '#' lines are comments, the first data line is the request.
pub fn load(path: &Path) -> Capture {
    let text = std::fs::read_to_string(path).expect("read fixture");
    assert!(
        text.starts_with("# captured:"),
        "{} lost its capture comment",
        path.display()
    );
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(unhex);
    let request = lines.next().expect("request line");
    Capture {
        path: path.to_path_buf(),
        request,
        replies: lines.collect(),
    }
}

/// Every `.hex` capture of a kernel folder ("k61", "k612"), sorted by path.
pub fn all_captures(kernel: &str) -> Vec<Capture> {
    let mut paths = Vec::new();
    for moment in std::fs::read_dir(root().join(kernel)).expect("kernel dir") {
        let moment = moment.expect("dir entry").path();
        if moment.is_dir() {
            for f in std::fs::read_dir(&moment).expect("moment dir") {
                let f = f.expect("dir entry").path();
                if f.extension().is_some_and(|e| e == "hex") {
                    paths.push(f);
                }
            }
        }
    }
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

/// The capture `kernel/moment/<prefix>*.hex`.
pub fn capture(kernel: &str, moment: &str, prefix: &str) -> Capture {
    let dir = root().join(kernel).join(moment);
    let mut matches: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("moment dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".hex"))
        })
        .collect();
    assert_eq!(
        matches.len(),
        1,
        "one capture {prefix}* in {}",
        dir.display()
    );
    load(&matches.remove(0))
}

/// The monitor-event messages of k612mon2/rdma-netlink-events.hex (`hex=` fields).
pub fn monitor_events() -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(root().join("k612mon2/rdma-netlink-events.hex"))
        .expect("read monitor fixture");
    assert!(text.starts_with("# RDMA netlink notify events"));
    text.lines()
        .filter(|l| l.starts_with('['))
        .filter_map(|l| l.split_once(" hex=").map(|(_, h)| unhex(h)))
        .collect()
}

/// The output lines of an iproute2 view file (comment lines dropped).
pub fn view_lines(kernel: &str, file: &str) -> Vec<String> {
    std::fs::read_to_string(root().join(kernel).join(file))
        .expect("read view")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}
