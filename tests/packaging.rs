//! Fast consistency checks of the Debian packaging (the .deb itself is built by
//! scripts/build-deb.sh, too slow for CI): the systemd unit, the cargo-deb metadata in
//! Cargo.toml, the maintainer scripts and the configuration defaults must agree.

use iser_guard::exit::ExitStatus;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use iser_guard::config::{Config, DEFAULT_CONFIG_PATH};

/// Each key and value of the unit against the first systemd version that understands it.
#[path = "packaging/systemd_versions.rs"]
mod systemd_versions;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// `[Section]` → key → every value given (keys may repeat, e.g. DeviceAllow).
type Unit = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn parse_unit(text: &str) -> Unit {
    let mut unit = Unit::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (k, v) = line.split_once('=').expect("key=value line");
        unit.entry(section.clone())
            .or_default()
            .entry(k.trim().to_string())
            .or_default()
            .push(v.trim().to_string());
    }
    unit
}

fn unit() -> Unit {
    parse_unit(&read("packaging/debian/iser-guard.service"))
}

/// The single value of `key` in `[section]`.
fn one<'a>(u: &'a Unit, section: &str, key: &str) -> &'a str {
    let v = u
        .get(section)
        .and_then(|s| s.get(key))
        .unwrap_or_else(|| panic!("[{section}] {key} missing"));
    assert_eq!(v.len(), 1, "[{section}] {key} given {} times", v.len());
    &v[0]
}

fn deb_meta() -> toml::Table {
    let cargo: toml::Table = toml::from_str(&read("Cargo.toml")).expect("Cargo.toml parses");
    cargo["package"]["metadata"]["deb"]
        .as_table()
        .expect("[package.metadata.deb]")
        .clone()
}

/// (source, dest, mode) of every asset.
fn assets() -> Vec<(String, String, String)> {
    deb_meta()["assets"]
        .as_array()
        .expect("assets array")
        .iter()
        .map(|a| {
            let a = a.as_array().expect("asset is [src, dest, mode]");
            let s = |i: usize| a[i].as_str().expect("string").to_string();
            (s(0), s(1), s(2))
        })
        .collect()
}

fn asset_dest(src: &str) -> (String, String) {
    let (_, dest, mode) = assets()
        .into_iter()
        .find(|(s, _, _)| s == src)
        .unwrap_or_else(|| panic!("no asset from {src}"));
    (dest, mode)
}

#[test]
fn exec_paths_match_the_packaged_binary() {
    let (dest, mode) = asset_dest("target/release/iser-guard");
    assert_eq!(mode, "755");
    let bin = format!("/{dest}");
    let u = unit();
    assert_eq!(one(&u, "Service", "ExecStart"), format!("{bin} daemon"));
    // A configuration error must end in the main process's exit 78, which
    // RestartPreventExitStatus covers; a failing ExecStartPre would loop through restarts.
    assert!(
        u.get("Service")
            .is_some_and(|s| !s.contains_key("ExecStartPre")),
        "no ExecStartPre: the daemon checks its configuration itself"
    );
    assert_eq!(one(&u, "Service", "RestartPreventExitStatus"), "78");
    // The reload reports the daemon's verdict, so `systemctl reload` fails on a refused file.
    assert_eq!(one(&u, "Service", "ExecReload"), format!("{bin} reload"));
    assert_eq!(bin, "/usr/sbin/iser-guard");
}

#[test]
fn packaged_config_is_the_shipped_default_at_the_default_path() {
    let (dest, mode) = asset_dest("config/iser-guard.toml");
    assert_eq!(format!("/{dest}"), DEFAULT_CONFIG_PATH);
    assert_eq!(mode, "640");
    // And that file is the documented default.
    let parsed = iser_guard::config::parse_str(&read("config/iser-guard.toml"));
    assert_eq!(parsed, Ok(Config::default()));
}

#[test]
fn unit_directories_match_config_defaults() {
    let u = unit();
    let d = Config::default();
    let state = one(&u, "Service", "StateDirectory");
    assert_eq!(Path::new("/var/lib").join(state), d.paths.state_dir);
    let runtime = one(&u, "Service", "RuntimeDirectory");
    assert_eq!(
        Some(Path::new("/run").join(runtime).as_path()),
        d.paths.control_socket.parent()
    );
    // No ConfigurationDirectory=: systemd would make /etc/iser-guard writable (seen in the
    // lab's systemd guest); the package ships the directory of DEFAULT_CONFIG_PATH.
    assert!(
        !u["Service"].contains_key("ConfigurationDirectory"),
        "ConfigurationDirectory= makes {} writable",
        Path::new(DEFAULT_CONFIG_PATH).parent().unwrap().display()
    );
    assert_eq!(one(&u, "Service", "ReadOnlyPaths"), "/run");
    // The metrics file's directory is writable under ProtectSystem=strict.
    let rw = one(&u, "Service", "ReadWritePaths");
    let metrics_dir = d
        .metrics
        .textfile
        .parent()
        .expect("dir")
        .display()
        .to_string();
    assert!(
        rw.split_whitespace()
            .any(|p| p.trim_start_matches('-') == metrics_dir),
        "{rw}"
    );
}

#[test]
fn unit_service_contract() {
    let u = unit();
    assert_eq!(one(&u, "Service", "Type"), "notify");
    assert_eq!(one(&u, "Service", "NotifyAccess"), "main");
    assert_eq!(one(&u, "Service", "WatchdogSec"), "30s");
    assert_eq!(one(&u, "Service", "Restart"), "on-failure");
    assert_eq!(one(&u, "Service", "KillMode"), "mixed");
    assert_eq!(
        one(&u, "Service", "RestartPreventExitStatus"),
        ExitStatus::Config.code().to_string()
    );
    assert_eq!(one(&u, "Service", "User"), "root");
    assert_eq!(one(&u, "Install", "WantedBy"), "multi-user.target");
    let after = one(&u, "Unit", "After");
    for dep in [
        "network-online.target",
        "iscsid.service",
        "rdma-hw.target",
        "rdma-load-modules@rdma.service",
    ] {
        assert!(
            after.split_whitespace().any(|a| a == dep),
            "After lacks {dep}: {after}"
        );
    }
    // The verbs and rdma_cm modules load before DeviceAllow= is resolved (issue 22).
    let wants = one(&u, "Unit", "Wants");
    assert!(
        wants
            .split_whitespace()
            .any(|w| w == "rdma-load-modules@rdma.service"),
        "Wants lacks rdma-load-modules@rdma.service: {wants}"
    );
}

#[test]
fn unit_hardening_keeps_what_the_daemon_needs() {
    let u = unit();
    // Each of these set to yes would break the daemon (see the comments in the unit):
    // /dev/kmsg, sysfs writes, /dev/kmsg + /dev/infiniband, iscsid's abstract socket.
    for key in [
        "ProtectKernelLogs",
        "ProtectKernelTunables",
        "PrivateDevices",
        "PrivateNetwork",
    ] {
        assert_eq!(one(&u, "Service", key), "no", "{key} must stay no");
    }
    let families = one(&u, "Service", "RestrictAddressFamilies");
    for f in ["AF_UNIX", "AF_NETLINK", "AF_INET", "AF_INET6"] {
        assert!(
            families.split_whitespace().any(|x| x == f),
            "{f} not allowed"
        );
    }
    let caps = one(&u, "Service", "CapabilityBoundingSet");
    for c in ["CAP_NET_ADMIN", "CAP_SYSLOG", "CAP_SYS_ADMIN"] {
        assert!(caps.split_whitespace().any(|x| x == c), "{c} missing");
    }
    let devices = &u["Service"]["DeviceAllow"];
    assert!(devices.iter().any(|d| d == "/dev/kmsg r"), "{devices:?}");
    assert_eq!(one(&u, "Service", "DevicePolicy"), "closed");
    assert_eq!(one(&u, "Service", "ProtectSystem"), "strict");
    assert_eq!(one(&u, "Service", "NoNewPrivileges"), "yes");
}

#[test]
fn cargo_deb_metadata_enables_the_unit() {
    let m = deb_meta();
    // Without maintainer-scripts cargo-deb packages the unit but never enables it.
    let scripts = m["maintainer-scripts"]
        .as_str()
        .expect("maintainer-scripts");
    let units = m["systemd-units"].as_table().expect("systemd-units");
    assert_eq!(units["enable"].as_bool(), Some(true));
    assert_eq!(units["start"].as_bool(), Some(true));
    let unit_dir = units["unit-scripts"].as_str().expect("unit-scripts");
    assert!(root().join(unit_dir).join("iser-guard.service").is_file());
    assert!(root().join(scripts).is_dir());
    assert_eq!(m["section"].as_str(), Some("admin"));
    let depends = m["depends"].as_str().expect("depends");
    for d in ["$auto", "open-iscsi", "iproute2"] {
        assert!(depends.split(", ").any(|x| x == d), "{depends}");
    }
    // Man pages generated by examples/gen_man.rs.
    let dests: Vec<String> = assets().into_iter().map(|(_, d, _)| d).collect();
    assert!(
        dests.iter().any(|d| d == "usr/share/man/man8/"),
        "{dests:?}"
    );
    assert!(
        dests.iter().any(|d| d == "usr/share/man/man5/"),
        "{dests:?}"
    );
}

#[test]
fn changelog_version_matches_the_crate() {
    let changelog = read(deb_meta()["changelog"].as_str().expect("changelog path"));
    let first = changelog
        .lines()
        .next()
        .expect("changelog has a first line");
    let want = format!("iser-guard ({}-", env!("CARGO_PKG_VERSION"));
    assert!(
        first.starts_with(&want),
        "{first} does not start with {want}"
    );
}

#[test]
fn maintainer_scripts_have_one_debhelper_marker() {
    // cargo-deb replaces every occurrence, comments included: a second one would duplicate
    // the generated enable/start code in the middle of a comment.
    for s in ["postinst", "postrm"] {
        let text = read(&format!("packaging/debian/{s}"));
        assert_eq!(text.matches("#DEBHELPER#").count(), 1, "{s}");
        assert!(
            text.lines().any(|l| l == "#DEBHELPER#"),
            "{s}: marker not on its own line"
        );
        assert!(text.starts_with("#!/bin/sh\n"), "{s}");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(root().join("packaging/debian").join(s))
                .expect("stat")
                .permissions(),
        );
        assert_eq!(mode & 0o111, 0o111, "{s} must be executable");
    }
}

#[test]
fn unit_parser_handles_repeats_and_comments() {
    let u = parse_unit("# c\n[A]\nK=1\n; c\nK = 2\n[B]\nX=a=b\n");
    assert_eq!(u["A"]["K"], ["1", "2"]);
    assert_eq!(u["B"]["X"], ["a=b"]);
}

/// The backticked absolute paths in `text`.
fn backticked_paths(text: &str) -> std::collections::BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| p.starts_with('/') && !p.contains(' '))
        .map(str::to_string)
        .collect()
}

#[test]
fn readme_names_exactly_the_paths_the_unit_makes_writable() {
    let u = unit();
    assert_eq!(one(&u, "Service", "ProtectSystem"), "strict");
    let mut writable = std::collections::BTreeSet::new();
    writable.insert(format!("/var/lib/{}", one(&u, "Service", "StateDirectory")));
    writable.insert(format!("/run/{}", one(&u, "Service", "RuntimeDirectory")));
    for p in one(&u, "Service", "ReadWritePaths").split_whitespace() {
        writable.insert(p.trim_start_matches('-').to_string());
    }
    if one(&u, "Service", "PrivateTmp") == "yes" {
        writable.insert("/tmp".into());
        writable.insert("/var/tmp".into());
    }
    // ProtectSystem=strict leaves the kernel's API trees writable (systemd's namespace.c).
    for api in ["/proc", "/sys", "/dev"] {
        writable.insert(api.into());
    }
    let readme = read("docs/guide/hardening.md");
    let start = readme
        .find("Writable: ")
        .expect("the hardening guide has a `Writable:` list");
    let end = start
        + readme[start..]
            .find("The rest of")
            .expect("…followed by what stays read-only");
    assert_eq!(
        backticked_paths(&readme[start..end]),
        writable,
        "the hardening guide's writable paths differ from the unit's"
    );
    // What README says stays read-only is in no writable setting.
    let rest = &readme[end..end + readme[end..].find("read-only").expect("read-only")];
    for ro in backticked_paths(rest) {
        assert!(!writable.contains(&ro), "{ro} is writable in the unit");
    }
    for ro in ["/run", "/run/lock", "/etc/iser-guard"] {
        assert!(
            rest.contains(&format!("`{ro}`")),
            "hardening guide: {ro} read-only"
        );
    }
}

#[test]
fn readme_names_the_state_files_as_the_daemon_writes_them() {
    let readme = read("README.md");
    assert!(readme.contains("engine-journal.json"));
    for (i, _) in readme.match_indices("journal.json") {
        assert!(
            readme[..i].ends_with("engine-"),
            "README names a journal.json that is not engine-journal.json at byte {i}"
        );
    }
}

#[test]
fn cargo_deb_ships_the_generated_docs_and_completions() {
    let assets = assets();
    let to = |dest: &str| {
        assets
            .iter()
            .find(|(_, d, _)| d == dest)
            .unwrap_or_else(|| panic!("no asset to {dest}"))
            .clone()
    };
    assert_eq!(
        to("usr/share/doc/iser-guard/copyright").0,
        "packaging/debian/copyright"
    );
    // Policy 12.3: documentation over 4 KiB compressed; no plain README.md.
    assert!(!assets.iter().any(|(_, d, _)| d.ends_with("README.md")));
    to("usr/share/doc/iser-guard/README.md.gz");
    for dest in [
        "usr/share/bash-completion/completions/iser-guard",
        "usr/share/zsh/vendor-completions/_iser-guard",
        "usr/share/fish/vendor_completions.d/iser-guard.fish",
    ] {
        assert_eq!(to(dest).2, "644");
    }
}

/// Runs scripts/deb-t64-alternatives.sh on a control file holding `depends`; the new Depends.
fn t64_alternatives(depends: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let control = dir.path().join("control");
    std::fs::write(
        &control,
        format!("Package: iser-guard\nDepends: {depends}\nSection: admin\n"),
    )
    .unwrap();
    let out = std::process::Command::new(root().join("scripts/deb-t64-alternatives.sh"))
        .arg(&control)
        .output()
        .expect("run scripts/deb-t64-alternatives.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&control).unwrap();
    assert!(text.starts_with("Package: iser-guard\n") && text.ends_with("Section: admin\n"));
    text.lines()
        .find_map(|l| l.strip_prefix("Depends: "))
        .expect("Depends kept")
        .to_string()
}

#[test]
fn renamed_libraries_get_their_t64_name_as_an_alternative() {
    // dpkg-shlibdeps on Debian 12 (cargo-deb's $auto), then the static part of `depends`.
    let bookworm =
        "libc6 (>= 2.34), libibverbs1 (>= 33.0), librdmacm1 (>= 22.1), open-iscsi, iproute2";
    let want = "libc6 (>= 2.34), libibverbs1 (>= 33.0), \
                librdmacm1t64 (>= 22.1) | librdmacm1 (>= 22.1), open-iscsi, iproute2";
    assert_eq!(t64_alternatives(bookworm), want);
    // Run twice (a rebuilt package): unchanged.
    assert_eq!(t64_alternatives(want), want);
    // Last in the list and unversioned.
    assert_eq!(
        t64_alternatives("libc6, librdmacm1"),
        "libc6, librdmacm1t64 | librdmacm1"
    );
    // Built where dpkg-shlibdeps already names the new package: nothing to add.
    let trixie = "libc6 (>= 2.38), librdmacm1t64 (>= 50.0), open-iscsi";
    assert_eq!(t64_alternatives(trixie), trixie);
    // The build without verbs has no librdmacm at all.
    assert_eq!(
        t64_alternatives("libc6 (>= 2.34), open-iscsi"),
        "libc6 (>= 2.34), open-iscsi"
    );
}

#[test]
fn build_deb_rewrites_the_deb_depends_and_not_the_ddeb() {
    let script = read("scripts/build-deb.sh");
    let call = script
        .find("scripts/deb-t64-alternatives.sh \"$tmp/p/DEBIAN/control\"")
        .expect("build-deb.sh calls deb-t64-alternatives.sh on the control file");
    // In the else branch of the .ddeb test: the .deb only.
    let ddeb = script
        .find("if [[ $pkg == *.ddeb ]]")
        .expect(".ddeb branch");
    let else_at = script[ddeb..]
        .find("\telse\n")
        .map(|i| ddeb + i)
        .expect("else");
    assert!(
        ddeb < else_at && else_at < call,
        "the rewrite must be the .deb's branch"
    );
}
