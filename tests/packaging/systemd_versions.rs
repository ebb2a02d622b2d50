//! The shipped unit against the systemd versions it must run on: every [section] key (and the
//! enumerated values we rely on) has to be in the tables below, each with the first systemd
//! version that understands it, and none may be newer than the oldest systemd we support.
//!
//! Why a table: systemd ignores a key it does not know with a warning in the journal and starts
//! the service anyway. For a hardening key that means the daemon runs less confined than the
//! unit says, silently; for a behaviour key (Type=, KillMode=, ...) it means a different
//! service. A key missing from the table fails the test, so whoever adds one looks it up.
//!
//! Where the versions come from: the "Added in version N." line under each setting in
//! systemd's own man pages (systemd repository, man/systemd.unit.xml, man/systemd.service.xml,
//! man/systemd.exec.xml, man/systemd.kill.xml, man/systemd.resource-control.xml), read in the
//! systemd 255 edition (the one Ubuntu 24.04 ships). Two exceptions, named in the source column:
//! - settings documented in one entry with older ones carry the older one's version there
//!   (StateDirectory= sits under RuntimeDirectory=, 211): their own version is taken from
//!   systemd's NEWS ("CHANGES WITH N"), which announces each new setting;
//! - settings older than the man pages' version notes have no such line: they are in every
//!   systemd we could meet (`UNTRACKED`).
//!
//! Checked by hand as well: `systemd-analyze verify` of this unit on systemd 252 (Debian 12)
//! reports no unknown key and no unparsable value.

use super::{assets, parse_unit, read, unit, Unit};

/// The oldest systemd the package supports: Debian 12 (bookworm). Ubuntu 24.04 has 255 and
/// Debian 13 (trixie) 257; both are newer, so a key below this floor is understood by all.
const OLDEST_SUPPORTED: u32 = 252;

/// The settings without an "Added in version" line (older than the man pages' version notes).
const UNTRACKED: u32 = 0;

/// Whether systemd ignoring the key would leave the daemon less confined than the unit says.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Role {
    /// Sandboxing, privileges, device and syscall filters: ignored means silently unconfined.
    Hardening,
    /// What the service is and how it runs: ignored means a different service.
    Behaviour,
}
use Role::{Behaviour, Hardening};

/// (section, key, first systemd version, role, where the version is written).
const KEYS: &[(&str, &str, u32, Role, &str)] = &[
    ("Unit", "Description", 201, Behaviour, "systemd.unit(5)"),
    ("Unit", "Documentation", 201, Behaviour, "systemd.unit(5)"),
    ("Unit", "Wants", 201, Behaviour, "systemd.unit(5)"),
    (
        "Unit",
        "After",
        201,
        Behaviour,
        "systemd.unit(5), Before=/After=",
    ),
    (
        "Unit",
        "StartLimitIntervalSec",
        229,
        Behaviour,
        "systemd.unit(5)",
    ),
    (
        "Unit",
        "StartLimitBurst",
        229,
        Behaviour,
        "systemd.unit(5), with StartLimitIntervalSec=",
    ),
    (
        "Service",
        "Type",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "NotifyAccess",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "WatchdogSec",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "ExecStart",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "ExecReload",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "Restart",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "RestartSec",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "RestartPreventExitStatus",
        189,
        Behaviour,
        "systemd.service(5)",
    ),
    (
        "Service",
        "TimeoutStopSec",
        UNTRACKED,
        Behaviour,
        "systemd.service(5)",
    ),
    ("Service", "KillMode", 187, Behaviour, "systemd.kill(5)"),
    (
        "Service",
        "OOMScoreAdjust",
        UNTRACKED,
        Behaviour,
        "systemd.exec(5)",
    ),
    ("Service", "UMask", UNTRACKED, Hardening, "systemd.exec(5)"),
    (
        "Service",
        "User",
        UNTRACKED,
        Behaviour,
        "systemd.exec(5), User=/Group=",
    ),
    (
        "Service",
        "RuntimeDirectory",
        211,
        Behaviour,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "RuntimeDirectoryMode",
        234,
        Hardening,
        "systemd.exec(5), *DirectoryMode= entry",
    ),
    (
        "Service",
        "StateDirectory",
        235,
        Behaviour,
        "NEWS 235 (systemd.exec(5) lists it under RuntimeDirectory=, 211)",
    ),
    (
        "Service",
        "StateDirectoryMode",
        235,
        Hardening,
        "NEWS 235 (systemd.exec(5) lists it under RuntimeDirectoryMode=, 234)",
    ),
    (
        "Service",
        "CapabilityBoundingSet",
        UNTRACKED,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "NoNewPrivileges",
        187,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "ProtectSystem",
        214,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "ReadWritePaths",
        231,
        Behaviour,
        "systemd.exec(5), ReadWritePaths=/ReadOnlyPaths= entry",
    ),
    (
        "Service",
        "ReadOnlyPaths",
        231,
        Hardening,
        "systemd.exec(5), ReadWritePaths=/ReadOnlyPaths= entry",
    ),
    ("Service", "ProtectHome", 214, Hardening, "systemd.exec(5)"),
    (
        "Service",
        "PrivateTmp",
        UNTRACKED,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "PrivateDevices",
        209,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "DevicePolicy",
        208,
        Hardening,
        "systemd.resource-control(5)",
    ),
    (
        "Service",
        "DeviceAllow",
        208,
        Hardening,
        "systemd.resource-control(5)",
    ),
    (
        "Service",
        "ProtectKernelLogs",
        244,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "ProtectKernelTunables",
        232,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "ProtectKernelModules",
        232,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "ProtectControlGroups",
        232,
        Hardening,
        "systemd.exec(5)",
    ),
    ("Service", "ProtectClock", 245, Hardening, "systemd.exec(5)"),
    (
        "Service",
        "ProtectHostname",
        242,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "PrivateNetwork",
        UNTRACKED,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "RestrictAddressFamilies",
        211,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "RestrictNamespaces",
        233,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "RestrictRealtime",
        231,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "RestrictSUIDSGID",
        242,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "LockPersonality",
        235,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "MemoryDenyWriteExecute",
        231,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "SystemCallArchitectures",
        209,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Service",
        "SystemCallFilter",
        187,
        Hardening,
        "systemd.exec(5)",
    ),
    (
        "Install",
        "WantedBy",
        201,
        Behaviour,
        "systemd.unit(5), WantedBy=/RequiredBy=",
    ),
];

/// Keys whose values systemd added over time: (key, value as written in the unit, or a prefix
/// ending in '-' for device groups, first version, where it is written). A value of one of these
/// keys that is not listed fails the test, like an unknown key.
const VALUES: &[(&str, &str, u32, &str)] = &[
    ("Type", "notify", UNTRACKED, "systemd.service(5)"),
    ("NotifyAccess", "main", UNTRACKED, "systemd.service(5)"),
    ("Restart", "on-failure", UNTRACKED, "systemd.service(5)"),
    ("KillMode", "mixed", 209, "NEWS 209 (KillMode= gained \"mixed\")"),
    ("ProtectSystem", "strict", 232, "NEWS 232 (ProtectSystem= gained \"strict\")"),
    ("ProtectHome", "yes", 214, "systemd.exec(5), with the key"),
    ("DevicePolicy", "closed", 208, "systemd.resource-control(5)"),
    ("DeviceAllow", "/dev/", 208, "systemd.resource-control(5), with the key"),
    ("DeviceAllow", "char-", 210, "NEWS 210 (device groups \"char-...\" from /proc/devices)"),
    ("SystemCallArchitectures", "native", 209, "systemd.exec(5), with the key"),
    (
        "SystemCallFilter",
        "@system-service",
        OLDEST_SUPPORTED,
        "the system call sets table of systemd.exec(5) in systemd 252 (its first version not looked up)",
    ),
    // The module-reload drop-in (packaging/debian/module-reload.conf). Named sets came with
    // systemd 231 (NEWS 231); this one's own first version was not looked up.
    (
        "SystemCallFilter",
        "@module",
        OLDEST_SUPPORTED,
        "the system call sets table of systemd.exec(5) in systemd 252 (its first version not looked up)",
    ),
];

type KeyRow = (&'static str, &'static str, u32, Role, &'static str);
type ValueRow = (&'static str, &'static str, u32, &'static str);

/// The row of `values` a unit value falls under: `None` when its key has no enumerated values,
/// `Some(None)` when it has but this value is not listed. A listed value matches the whole
/// value or its first word (`char-infiniband_verbs rw`), and a listed prefix ending in '-' or
/// '/' matches every value starting with it (device groups, device paths).
fn value_row<'a>(values: &'a [ValueRow], key: &str, value: &str) -> Option<Option<&'a ValueRow>> {
    if !values.iter().any(|(k, ..)| *k == key) {
        return None;
    }
    let first = value.split_whitespace().next().unwrap_or("");
    Some(values.iter().find(|(k, v, ..)| {
        *k == key
            && (value == *v
                || first == *v
                || ((v.ends_with('-') || v.ends_with('/')) && first.starts_with(v)))
    }))
}

/// Every problem of `u` against the tables, one line each.
fn problems(u: &Unit, keys: &[KeyRow], values: &[ValueRow]) -> Vec<String> {
    let mut out = Vec::new();
    for (section, entries) in u {
        for (key, given) in entries {
            let Some(&(_, _, since, role, source)) =
                keys.iter().find(|(s, k, ..)| s == section && k == key)
            else {
                out.push(format!(
                    "[{section}] {key}= is not in the table: look up its \"Added in version\" line in \
                     systemd's man page and add it to tests/packaging/systemd_versions.rs"
                ));
                continue;
            };
            if since > OLDEST_SUPPORTED {
                let why = match role {
                    Hardening => "an older systemd ignores it with a warning and runs the daemon without that confinement",
                    Behaviour => "an older systemd ignores it with a warning and runs a different service",
                };
                out.push(format!(
                    "[{section}] {key}= needs systemd {since} ({source}), the oldest supported is \
                     {OLDEST_SUPPORTED}: {why}"
                ));
            }
            for value in given {
                match value_row(values, key, value) {
                    None | Some(Some(&(_, _, 0..=OLDEST_SUPPORTED, _))) => {}
                    Some(None) => out.push(format!(
                        "[{section}] {key}={value} is not in the table of values: look up the \
                         systemd version that added it"
                    )),
                    Some(Some(&(_, _, vsince, vsource))) => out.push(format!(
                        "[{section}] {key}={value} needs systemd {vsince} ({vsource}), the oldest \
                         supported is {OLDEST_SUPPORTED}"
                    )),
                }
            }
        }
    }
    out
}

#[test]
fn unit_uses_only_what_the_oldest_supported_systemd_understands() {
    let found = problems(&unit(), KEYS, VALUES);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn shipped_drop_ins_use_only_what_the_oldest_supported_systemd_understands() {
    // Every drop-in the package ships (as an example to install) is held to the unit's rules:
    // a key systemd 252 ignored there would be a setting the operator believes is in force.
    let drop_ins: Vec<String> = assets()
        .into_iter()
        .map(|(src, ..)| src)
        .filter(|src| src.starts_with("packaging/debian/") && src.ends_with(".conf"))
        .collect();
    assert!(!drop_ins.is_empty(), "no drop-in found among the assets");
    for src in drop_ins {
        let found = problems(&parse_unit(&read(&src)), KEYS, VALUES);
        assert!(found.is_empty(), "{src}:\n{}", found.join("\n"));
    }
}

#[test]
fn version_tables_have_one_row_per_key_and_value() {
    for (i, (s, k, ..)) in KEYS.iter().enumerate() {
        assert!(
            !KEYS[..i].iter().any(|(s2, k2, ..)| s2 == s && k2 == k),
            "[{s}] {k} listed twice"
        );
    }
    for (i, (k, v, ..)) in VALUES.iter().enumerate() {
        assert!(
            !VALUES[..i].iter().any(|(k2, v2, ..)| k2 == k && v2 == v),
            "{k}={v} listed twice"
        );
        assert!(
            KEYS.iter().any(|(_, key, ..)| key == k),
            "{k}= has values listed but is not in the key table"
        );
    }
}

#[test]
fn version_check_reports_unknown_keys_unlisted_values_and_newer_keys() {
    let u = super::parse_unit(
        "[Unit]\nDescription=x\n[Service]\nProtectSystem=strict\nPrivateIPC=yes\n\
         ProtectSystem=full\nDeviceAllow=char-infiniband_verbs rw\nDeviceAllow=/dev/kmsg r\n",
    );
    let found = problems(&u, KEYS, VALUES);
    assert!(
        found
            .iter()
            .any(|p| p.contains("[Service] PrivateIPC= is not in the table")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("ProtectSystem=full is not in the table of values")),
        "{found:?}"
    );
    assert_eq!(found.len(), 2, "{found:?}");

    // A hardening key newer than the floor (PrivateIPC= is systemd 248; pretend 253).
    let newer: &[KeyRow] = &[("Service", "PrivateIPC", 253, Hardening, "test row")];
    let found = problems(
        &super::parse_unit("[Service]\nPrivateIPC=yes\n"),
        newer,
        &[],
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("needs systemd 253"), "{found:?}");
    assert!(found[0].contains("without that confinement"), "{found:?}");
}
