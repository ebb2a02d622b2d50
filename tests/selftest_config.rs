//! `recovery.selftest` on the real binary: `check-config` accepts `"auto"` and `"off"`,
//! refuses anything else naming the key, its line and the accepted values, and the shipped
//! default file says `"auto"`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_iser-guard");
const EX_CONFIG: i32 = 78;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn check_json(path: &Path) -> Output {
    Command::new(BIN)
        .args(["check-config", "--json", path.to_str().expect("utf-8 path")])
        .env("ISER_GUARD_LOG", "warn")
        .output()
        .expect("run iser-guard")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn off_is_accepted_and_shown_in_the_effective_config() {
    let o = check_json(&fixture("selftest-off.toml"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["config"]["recovery"]["selftest"], "off");
}

#[test]
fn the_default_is_auto() {
    let o = check_json(&fixture("good.toml"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["config"]["recovery"]["selftest"], "auto");
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/iser-guard.toml"),
    )
    .expect("shipped config");
    assert!(shipped.contains("\nselftest = \"auto\"\n"), "{shipped}");
}

#[test]
fn another_value_is_refused_with_the_key_the_line_and_the_choices() {
    let o = check_json(&fixture("selftest-bad.toml"));
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let p = &v["problems"][0];
    assert_eq!(p["key"], "recovery.selftest", "{v}");
    assert_eq!(p["line"], 3, "{v}");
    let msg = p["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("unknown variant `always`, expected `auto` or `off`"),
        "{msg}"
    );
}
