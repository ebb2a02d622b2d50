//! `iser-guard check-config` on the real binary: good and bad files, every problem reported
//! with its key path and line, world-writable and missing files, and the shipped default.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_iser-guard");
const EX_CONFIG: i32 = 78;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        // Keep the info line about built-in defaults out of the way of assertions.
        .env("ISER_GUARD_LOG", "warn")
        .output()
        .expect("run iser-guard")
}

fn check(path: &Path) -> Output {
    run(&["check-config", path.to_str().expect("utf-8 path")])
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("stdout is one JSON object")
}

/// (key, line) of every problem of a `--json` failure.
fn problems(o: &Output) -> Vec<(String, Option<u64>)> {
    json(o)["problems"]
        .as_array()
        .expect("problems array")
        .iter()
        .map(|p| {
            (
                p["key"].as_str().expect("key").to_string(),
                p["line"].as_u64(),
            )
        })
        .collect()
}

fn check_json(path: &Path) -> Output {
    run(&["check-config", "--json", path.to_str().expect("utf-8 path")])
}

#[test]
fn good_file_prints_ok_and_summary() {
    let o = check(&fixture("good.toml"));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.starts_with("OK: "), "{t}");
    assert!(t.contains("good.toml"), "{t}");
    assert!(t.contains("rocep2s0f0, rocep2s0f1"), "{t}");
    assert!(t.contains("15 s doubling to 300 s"), "{t}");
    // No warning about the file (what this host lacks is another matter).
    assert!(
        t.lines()
            .filter_map(|l| l.strip_prefix("warning: "))
            .all(is_host_warning),
        "{t}"
    );
}

/// A warning about what the host running the check lacks, not about the file.
fn is_host_warning(w: &str) -> bool {
    w.starts_with("paths.iscsiadm: ")
        || w.starts_with("alerts.syslog-socket: ")
        || w.starts_with("kernel log ")
}

#[test]
fn good_file_json_has_effective_config() {
    let o = check_json(&fixture("good.toml"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["ok"], true);
    assert_eq!(v["config"]["devices"]["allow"][1], "rocep2s0f1");
    assert_eq!(v["config"]["recovery"]["probe-timeout"], 1.5);
    // Keys not in the file show their defaults.
    assert_eq!(v["config"]["recovery"]["max-attempts"], 3);
    let warnings = v["warnings"].as_array().expect("warnings");
    assert!(
        warnings
            .iter()
            .all(|w| is_host_warning(w.as_str().expect("text"))),
        "{warnings:?}"
    );
}

#[test]
fn unknown_key_named_with_path_and_line() {
    let o = check(&fixture("unknown-key.toml"));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(
        t.contains("line 4, column 1: recovery.backof-max: unknown field `backof-max`"),
        "{t}"
    );
    // The message lists what is accepted, so the typo is obvious.
    assert!(t.contains("`backoff-max`"), "{t}");
}

#[test]
fn several_problems_all_reported() {
    let o = check_json(&fixture("many-problems.toml"));
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{}", text(&o));
    let got = problems(&o);
    let want: Vec<(String, Option<u64>)> = [
        ("paths.state-dir", 2),
        ("paths.iscsiadm", 3),
        ("poll.netlink", 6),
        ("devices.allow[1]", 9),
        ("devices.allow[2]", 9),
        ("recovery.backoff-max", 13),
        ("recovery.probe-successes", 14),
        ("recovery.max-attempts", 15),
        ("recovery.probe-port", 16),
        ("recovery.retry-forever", 17),
        ("alerts.ident", 20),
        ("metrics.textfile", 23),
        ("colour", 25),
    ]
    .iter()
    .map(|(k, l)| (k.to_string(), Some(*l)))
    .collect();
    assert_eq!(got, want);

    // The text form lists the same, one per line, with the count.
    let o = check(&fixture("many-problems.toml"));
    let t = text(&o);
    assert!(t.contains("has 13 problem(s):"), "{t}");
    assert!(
        t.contains("line 13, column 15: recovery.backoff-max: 60 s is below"),
        "{t}"
    );
    assert!(t.contains("looks like a glob"), "{t}");
}

#[test]
fn type_errors_all_reported() {
    let o = check_json(&fixture("type-errors.toml"));
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{}", text(&o));
    let keys: Vec<String> = problems(&o).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "paths",
            "poll.iscsi",
            "devices.allow",
            "recovery.dry-run",
            "recovery.max-attempts",
            "recovery.probe-port",
            "recovery.reset-when",
            "alerts.ident",
        ]
    );
    let t = text(&check(&fixture("type-errors.toml")));
    assert!(
        t.contains("recovery.probe-port: invalid value: integer `70000`"),
        "{t}"
    );
    assert!(
        t.contains("unknown variant `later`, expected `target-back` or `immediately`"),
        "{t}"
    );
    assert!(
        t.contains("poll.iscsi: invalid type: string \"10s\", expected a number of seconds"),
        "{t}"
    );
}

#[test]
fn syntax_error_has_line() {
    let o = check(&fixture("syntax-error.toml"));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(t.contains("line 1, column 10: unclosed table"), "{t}");
}

#[test]
fn world_writable_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("config.toml");
    std::fs::copy(fixture("good.toml"), &p).expect("copy");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let o = check(&p);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(t.contains("world-writable (mode 0666)"), "{t}");
    assert!(t.contains("chmod g-w,o-w"), "{t}");

    // JSON form carries the same refusal as its one problem.
    let o = check_json(&p);
    assert_eq!(o.status.code(), Some(EX_CONFIG));
    let v = json(&o);
    assert_eq!(v["ok"], false);
    assert!(v["problems"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("world-writable")));

    // Fixed as the message says (`chmod g-w,o-w`): accepted.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert_eq!(check(&p).status.code(), Some(0), "{}", text(&check(&p)));
}

#[test]
fn world_writable_directory_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("config.toml");
    std::fs::copy(fixture("good.toml"), &p).expect("copy");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let o = check(&p);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(
        t.contains("is world-writable (mode 0777) without the sticky bit"),
        "{t}"
    );
}

#[test]
fn directory_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = check(dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(t.contains("is a directory, not a regular file"), "{t}");
}

#[test]
fn missing_file_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("absent.toml");
    let o = check(&p);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(
        t.contains("absent.toml does not exist: check the path"),
        "{t}"
    );
    // Same through the global --config.
    let o = run(&["--config", p.to_str().expect("utf-8"), "check-config"]);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{}", text(&o));
}

#[test]
fn global_config_flag_is_the_default_path() {
    let o = run(&[
        "--config",
        fixture("good.toml").to_str().expect("utf-8"),
        "check-config",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("good.toml"), "{t}");
    // An explicit PATH wins over --config.
    let o = run(&[
        "--config",
        fixture("good.toml").to_str().expect("utf-8"),
        "check-config",
        fixture("unknown-key.toml").to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{}", text(&o));
}

#[test]
fn shipped_default_file_is_valid() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/iser-guard.toml");
    let o = check(&shipped);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("none (devices.allow is empty: alert only)"),
        "{t}"
    );
    assert!(t.contains("warning: devices.allow is empty"), "{t}");

    // Its effective configuration is exactly what no file at all gives.
    let from_file = json(&check_json(&shipped));
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").expect("write");
    let from_empty = json(&check_json(&empty));
    assert_eq!(from_file["config"], from_empty["config"]);
}

// ---- path trust: the attacker's bypasses (issue 12) -----------------------------------------

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The uid the attacker's files belong to. Changing owners needs root: without it the test
/// says why it is skipped.
const ATTACKER_UID: u32 = 1001;

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn chown_attacker(p: &Path) {
    std::os::unix::fs::lchown(p, Some(ATTACKER_UID), Some(ATTACKER_UID)).expect("chown");
}

/// A temporary tree: `base` (root-owned 0755 under the sticky /tmp) and a valid config file
/// written at `rel` inside it with mode 0644.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    chmod(&base, 0o755);
    (dir, base)
}

fn config_at(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
    chmod(p, 0o644);
}

fn refused(p: &Path, needle: &str) {
    let o = check(p);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(t.contains(needle), "expected {needle:?} in:\n{t}");
}

#[test]
fn a_world_writable_grandparent_is_refused_and_named() {
    let (_d, base) = tree();
    let gp = base.join("gp");
    let p = gp.join("parent/config.toml");
    config_at(&p, "[devices]\nallow = [\"attacker0\"]\n");
    chmod(&gp, 0o777);
    let fix = format!("chmod g-w,o-w {}", gp.display());
    refused(
        &p,
        &format!(
            "{} is world-writable (mode 0777) without the sticky bit",
            gp.display()
        ),
    );
    refused(&p, &fix);
    // The JSON form names the same component.
    let v = json(&check_json(&p));
    assert!(v["problems"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains(&fix)));
    chmod(&gp, 0o755);
    assert_eq!(check(&p).status.code(), Some(0), "{}", text(&check(&p)));
}

#[test]
fn a_safe_symlink_into_a_world_writable_directory_is_refused() {
    let (_d, base) = tree();
    let open = base.join("open");
    config_at(&open.join("config.toml"), "");
    chmod(&open, 0o777);
    std::fs::create_dir(base.join("safe")).expect("mkdir");
    let link = base.join("safe/config.toml");
    std::os::unix::fs::symlink(open.join("config.toml"), &link).expect("symlink");
    refused(&link, &format!("{} is world-writable", open.display()));
}

#[test]
fn a_group_writable_config_is_refused() {
    let (_d, base) = tree();
    let p = base.join("config.toml");
    config_at(&p, "");
    chmod(&p, 0o664);
    refused(&p, "is group-writable (mode 0664)");
}

#[test]
fn a_config_owned_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("skipped: changing a file's owner to uid {ATTACKER_UID} needs root");
        return;
    }
    let (_d, base) = tree();
    let p = base.join("config.toml");
    config_at(&p, "");
    chown_attacker(&p);
    refused(&p, &format!("is owned by uid {ATTACKER_UID}"));
    refused(&p, &format!("chown root {}", p.display()));
    // A directory on the way owned by the attacker: refused the same way.
    let (_d2, base2) = tree();
    let dir = base2.join("attacker");
    let p2 = dir.join("config.toml");
    config_at(&p2, "");
    chown_attacker(&dir);
    refused(
        &p2,
        &format!("{} is owned by uid {ATTACKER_UID}", dir.display()),
    );
}

#[test]
fn executables_in_world_writable_directories_are_refused() {
    let (_d, base) = tree();
    let open = base.join("open");
    std::fs::create_dir(&open).expect("mkdir");
    for name in ["iscsiadm", "devlink"] {
        let s = open.join(name);
        std::fs::write(&s, "#!/bin/sh\nid > /tmp/pwned\n").expect("write");
        chmod(&s, 0o777);
    }
    chmod(&open, 0o777);
    let p = base.join("config.toml");
    config_at(
        &p,
        &format!(
            "[paths]\niscsiadm = {:?}\ndevlink = {:?}\n",
            open.join("iscsiadm").display().to_string(),
            open.join("devlink").display().to_string()
        ),
    );
    let o = check_json(&p);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{}", text(&o));
    let got = problems(&o);
    // Each key: its directory, then the script itself, with the key's line.
    assert_eq!(
        got,
        [
            ("paths.iscsiadm".to_string(), Some(2)),
            ("paths.iscsiadm".to_string(), Some(2)),
            ("paths.devlink".to_string(), Some(3)),
            ("paths.devlink".to_string(), Some(3)),
        ]
    );
    let t = text(&check(&p));
    assert!(
        t.contains(&format!(
            "{} is world-writable (mode 0777)",
            open.join("iscsiadm").display()
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!("chmod g-w,o-w {}", open.display())),
        "{t}"
    );
}

#[test]
fn a_state_dir_that_is_not_dedicated_is_refused() {
    let (_d, base) = tree();
    let p = base.join("config.toml");
    config_at(&p, "[paths]\nstate-dir = \"/\"\n");
    refused(
        &p,
        "paths.state-dir: refusing /: / is a directory the whole system shares",
    );
    // A directory others can write, even with the sticky bit: not dedicated.
    let shared = base.join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    chmod(&shared, 0o1777);
    config_at(
        &p,
        &format!("[paths]\nstate-dir = {:?}\n", shared.display().to_string()),
    );
    refused(
        &p,
        &format!("{} is world-writable (mode 1777)", shared.display()),
    );
    // Its own directory, or one not created yet under a trusted one: accepted.
    config_at(
        &p,
        &format!(
            "[paths]\nstate-dir = {:?}\n",
            base.join("state/new").display().to_string()
        ),
    );
    assert_eq!(check(&p).status.code(), Some(0), "{}", text(&check(&p)));
}

#[test]
fn a_control_socket_path_naming_a_regular_file_is_refused() {
    let (_d, base) = tree();
    let victim = base.join("run/important");
    config_at(&victim, "precious");
    let p = base.join("config.toml");
    config_at(
        &p,
        &format!(
            "[paths]\ncontrol-socket = {:?}\n",
            victim.display().to_string()
        ),
    );
    refused(&p, "exists and is a regular file, not a socket");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("still there"),
        "precious"
    );
}

#[test]
fn kernel_inputs_others_can_write_or_replace_are_refused() {
    // paths.kmsg, paths.boot-id and paths.sysfs-root feed the daemon kernel facts: a fake
    // kernel log whose records all look like the kernel's, a boot id that makes it skip or
    // re-read the log, a sysfs tree that invents devices.
    let (_d, base) = tree();
    let open = base.join("open");
    std::fs::create_dir(&open).expect("mkdir");
    let kmsg = open.join("kmsg");
    nix::unistd::mkfifo(&kmsg, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
    chmod(&open, 0o777);
    let boot = base.join("boot_id");
    config_at(&boot, "b7f0a1c2-0000-4000-8000-000000000001\n");
    chmod(&boot, 0o666);
    let sys = base.join("sys");
    std::fs::create_dir(&sys).expect("mkdir");
    chmod(&sys, 0o1777);
    let p = base.join("config.toml");
    config_at(
        &p,
        &format!(
            "[paths]\nkmsg = {:?}\nboot-id = {:?}\nsysfs-root = {:?}\n",
            kmsg.display().to_string(),
            boot.display().to_string(),
            sys.display().to_string()
        ),
    );
    let o = check_json(&p);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{}", text(&o));
    assert_eq!(
        problems(&o),
        [
            ("paths.kmsg".to_string(), Some(2)),
            ("paths.boot-id".to_string(), Some(3)),
            ("paths.sysfs-root".to_string(), Some(4)),
        ]
    );
    let t = text(&check(&p));
    for needle in [
        format!(
            "paths.kmsg: refusing {}: {} is world-writable (mode 0777) without the sticky bit",
            kmsg.display(),
            open.display()
        ),
        format!("chmod g-w,o-w {}", open.display()),
        format!("{} is world-writable (mode 0666)", boot.display()),
        format!("{} is world-writable (mode 1777)", sys.display()),
    ] {
        assert!(t.contains(&needle), "expected {needle:?} in:\n{t}");
    }
    // A directory where a device is expected is named as such.
    config_at(
        &p,
        &format!("[paths]\nkmsg = {:?}\n", base.display().to_string()),
    );
    refused(&p, "is a directory, not a device, file or FIFO");
    // The same inputs, closed to others: accepted (a FIFO, a regular file, a directory).
    chmod(&open, 0o755);
    chmod(&boot, 0o644);
    chmod(&sys, 0o755);
    config_at(
        &p,
        &format!(
            "[paths]\nkmsg = {:?}\nboot-id = {:?}\nsysfs-root = {:?}\n",
            kmsg.display().to_string(),
            boot.display().to_string(),
            sys.display().to_string()
        ),
    );
    assert_eq!(check(&p).status.code(), Some(0), "{}", text(&check(&p)));
}

#[test]
fn a_kmsg_owned_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("skipped: changing a file's owner to uid {ATTACKER_UID} needs root");
        return;
    }
    let (_d, base) = tree();
    let kmsg = base.join("kmsg");
    config_at(&kmsg, "");
    chown_attacker(&kmsg);
    let p = base.join("config.toml");
    config_at(
        &p,
        &format!("[paths]\nkmsg = {:?}\n", kmsg.display().to_string()),
    );
    refused(
        &p,
        &format!(
            "paths.kmsg: refusing {k}: {k} is owned by uid {ATTACKER_UID}",
            k = kmsg.display()
        ),
    );
}

/// Issue item: with `paths.state-dir = "/tmp"` the advice was `chmod g-w,o-w /tmp`. Advice
/// must fix the configuration, never loosen or change a directory the system shares.
#[test]
fn a_shared_state_dir_is_refused_with_advice_to_choose_another_never_to_change_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("config.toml");
    std::fs::write(&p, "[paths]\nstate-dir = \"/tmp\"\n").expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let o = check(&p);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(t.contains("paths.state-dir"), "{t}");
    assert!(!t.contains("chmod"), "{t}");
    assert!(!t.contains("chown"), "{t}");
    assert!(
        t.contains("a directory of its own") || t.contains("outside it"),
        "{t}"
    );
}

/// Every subcommand, as an operator would type it (arguments that would be valid).
const EVERY_COMMAND: &[&[&str]] = &[
    &["check-config"],
    &["status"],
    &["qps"],
    &["events"],
    &["history"],
    &["simulate"],
    &["explain", "--transition", "ERR:RTS", "--type", "GSI"],
    &["watch", "--file", "/dev/null"],
    &["recover", "rocep2s0f0/1", "--dry-run"],
    &["reset-device", "rocep2s0f0", "--dry-run"],
    &["reconnect", "--dry-run"],
    &["pause"],
    &["resume"],
    &["reload"],
    &["selftest", "rocep2s0f0/1"],
    &["doctor"],
    &["daemon"],
];

#[test]
fn a_missing_config_file_is_the_same_error_in_every_command() {
    // README: `--config PATH` naming a file that does not exist is an error, whatever the
    // command (before: status and qps went on with a warning, simulate, explain, selftest
    // and doctor ignored it, the others said "cannot read configuration").
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("absent.toml");
    let expected = format!(
        "iser-guard: configuration {} does not exist: check the path (without --config, \
         /etc/iser-guard/config.toml is read if it exists, else the built-in defaults are \
         used)\n",
        p.display()
    );
    for args in EVERY_COMMAND {
        let mut all = vec!["--config", p.to_str().expect("utf-8")];
        all.extend_from_slice(args);
        let o = Command::new(BIN)
            .args(&all)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(EX_CONFIG), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{args:?} printed: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stderr), expected, "{args:?}");
    }
}

/// A config in a fresh tree (root-owned 0755) with `paths` lines and `rest`.
fn host_config(base: &Path, paths: &str, rest: &str) -> PathBuf {
    let state = base.join("state");
    std::fs::create_dir_all(&state).expect("mkdir");
    chmod(&state, 0o700);
    let p = base.join("config.toml");
    config_at(
        &p,
        &format!(
            "[paths]\nstate-dir = {:?}\ncontrol-socket = {:?}\n{paths}\n{rest}",
            state.display().to_string(),
            base.join("control.sock").display().to_string()
        ),
    );
    p
}

#[test]
fn a_regular_file_as_the_kernel_log_is_a_configuration_error_a_fifo_is_not() {
    // Before: check-config said OK, and the daemon then stopped with 77 and "needs root or
    // CAP_SYSLOG" (the file opened; polling it failed with EPERM) while running as root.
    let (_d, base) = tree();
    let kmsg = base.join("kern.log");
    config_at(&kmsg, "<3>some saved line\n");
    let p = host_config(
        &base,
        &format!("kmsg = {:?}", kmsg.display().to_string()),
        "",
    );
    let needle = format!(
        "paths.kmsg: {} is a regular file, not the kernel log: name /dev/kmsg (or a FIFO or \
         socket that carries its records)",
        kmsg.display()
    );
    refused(&p, &needle);
    let o = check_json(&p);
    assert_eq!(problems(&o), [("paths.kmsg".to_string(), Some(4))]);
    // The daemon refuses it the same way, before anything starts.
    let o = run(&["--config", p.to_str().expect("utf-8"), "daemon"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(EX_CONFIG), "{t}");
    assert!(t.contains(&needle), "{t}");
    assert!(!t.contains("CAP_SYSLOG"), "{t}");
    // A FIFO stays accepted (relays and tests feed the daemon that way).
    std::fs::remove_file(&kmsg).expect("rm");
    nix::unistd::mkfifo(&kmsg, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let o = check(&p);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_kernel_log_that_does_not_exist_is_named_so_without_the_root_hint() {
    let (_d, base) = tree();
    let kmsg = base.join("no-kmsg");
    let p = host_config(
        &base,
        &format!("kmsg = {:?}", kmsg.display().to_string()),
        "",
    );
    let said = format!(
        "kernel log {} does not exist (the path is paths.kmsg in the configuration; the \
         kernel's is /dev/kmsg)",
        kmsg.display()
    );
    // check-config: valid file, but the daemon will not start here: a warning.
    let o = check(&p);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains(&format!("warning: {said}: the daemon will not start")),
        "{t}"
    );
    // The daemon: the real cause, no root/CAP_SYSLOG hint (before: both, and 77).
    let o = run(&["--config", p.to_str().expect("utf-8"), "daemon"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(66), "{t}");
    assert!(t.contains(&said), "{t}");
    assert!(!t.contains("CAP_SYSLOG"), "{t}");
}

#[test]
fn check_config_warns_about_an_iscsiadm_or_syslog_socket_the_host_lacks() {
    let (_d, base) = tree();
    let iscsiadm = base.join("sbin/iscsiadm");
    let socket = base.join("log.sock");
    let p = host_config(
        &base,
        &format!("iscsiadm = {:?}", iscsiadm.display().to_string()),
        &format!(
            "[alerts]\nsyslog-socket = {:?}\n",
            socket.display().to_string()
        ),
    );
    let warnings = |p: &Path| -> Vec<String> {
        let o = check_json(p);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        json(&o)["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .map(|w| w.as_str().expect("text").to_string())
            .filter(|w| w.starts_with("paths.iscsiadm") || w.starts_with("alerts.syslog-socket"))
            .collect()
    };
    assert_eq!(
        warnings(&p),
        [
            format!(
                "paths.iscsiadm: {} does not exist: sessions can be neither listed nor \
                 reconnected (install open-iscsi, or name the right path)",
                iscsiadm.display()
            ),
            format!(
                "alerts.syslog-socket: {} does not exist (is rsyslog or systemd-journald \
                 running?): alerts reach only the daemon's log until it does",
                socket.display()
            ),
        ]
    );
    // The text form says the same.
    let t = text(&check(&p));
    assert!(t.contains("warning: paths.iscsiadm: "), "{t}");
    // Present but not executable; the socket there, syslog listening.
    config_at(&iscsiadm, "#!/bin/sh\n");
    let _listener = std::os::unix::net::UnixDatagram::bind(&socket).expect("bind");
    assert_eq!(
        warnings(&p),
        [format!(
            "paths.iscsiadm: {} is not an executable file: sessions can be neither listed \
             nor reconnected",
            iscsiadm.display()
        )]
    );
    chmod(&iscsiadm, 0o755);
    assert!(warnings(&p).is_empty());
    // syslog off: its socket is not needed.
    drop(_listener);
    std::fs::remove_file(&socket).expect("rm");
    let p = host_config(
        &base,
        &format!("iscsiadm = {:?}", iscsiadm.display().to_string()),
        &format!(
            "[alerts]\nsyslog = false\nsyslog-socket = {:?}\n",
            socket.display().to_string()
        ),
    );
    assert!(warnings(&p).is_empty());
}
