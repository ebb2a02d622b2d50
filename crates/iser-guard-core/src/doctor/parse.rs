//! Parsers for the host files `iser-guard doctor` reads: `/proc/devices`, `/proc/modules`,
//! `modules.dep` and `modules.builtin`, the kernel release, open-iscsi's `key = value` files
//! (iscsid.conf and node records), systemd unit files, and the redaction of CHAP secrets in
//! any of the iSCSI texts a report may carry.
//!
//! Each takes text and returns data; a line it cannot read is skipped and counted, never an
//! error of the whole file (a host file with one odd line is still worth auditing).

use std::collections::BTreeMap;

use serde::Serialize;

/// The character-device groups of `/proc/devices` (`Character devices:` section), as the
/// kernel prints them (`fs/char_dev.c` `chrdev_show`: `"%3d %s\n"`). Several groups may share
/// a major (`231 infiniband_mad`, `231 infiniband_verbs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CharDevices {
    /// `(major, name)` in file order.
    pub groups: Vec<(u32, String)>,
    /// Lines of the character section that were not `MAJOR NAME`.
    pub skipped: usize,
}

impl CharDevices {
    /// The majors registered under `name` (what systemd's `DeviceAllow=char-NAME` resolves).
    pub fn majors_of(&self, name: &str) -> Vec<u32> {
        self.groups
            .iter()
            .filter(|(_, n)| n == name)
            .map(|(m, _)| *m)
            .collect()
    }

    /// The group names registered with `major`.
    pub(crate) fn names_of(&self, major: u32) -> Vec<&str> {
        self.groups
            .iter()
            .filter(|(m, _)| *m == major)
            .map(|(_, n)| n.as_str())
            .collect()
    }
}

/// Reads the `Character devices:` section of `/proc/devices` (the `Block devices:` section
/// is ignored).
pub fn parse_proc_devices(text: &str) -> CharDevices {
    let mut out = CharDevices::default();
    let mut in_char = false;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.ends_with(':') {
            in_char = t.eq_ignore_ascii_case("Character devices:");
            continue;
        }
        if !in_char {
            continue;
        }
        let mut parts = t.split_whitespace();
        match (
            parts.next().and_then(|m| m.parse::<u32>().ok()),
            parts.next(),
            parts.next(),
        ) {
            (Some(major), Some(name), None) => out.groups.push((major, name.to_string())),
            _ => out.skipped += 1,
        }
    }
    out
}

/// A `MAJOR:MINOR` device number as sysfs prints it in a device's `dev` file.
pub fn parse_dev_number(text: &str) -> Option<(u32, u32)> {
    let (a, b) = text.trim().split_once(':')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// The names of the modules in `/proc/modules` (`name size refcount deps state address`),
/// in file order; lines without a name are counted in the second value.
pub fn parse_proc_modules(text: &str) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut skipped = 0;
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some(name), Some(size)) if size.bytes().all(|b| b.is_ascii_digit()) => {
                names.push(name.to_string())
            }
            (None, _) => {}
            _ => skipped += 1,
        }
    }
    (names, skipped)
}

/// A module's name as the kernel knows it from its file name: `irdma.ko.zst` → `irdma`,
/// `mlx5-ib.ko` → `mlx5_ib` (kbuild turns `-` into `_`).
pub(crate) fn module_name_of_path(path: &str) -> Option<String> {
    let file = path.rsplit('/').next()?;
    let stem = file.split(".ko").next()?;
    if stem.is_empty() || stem.len() == file.len() {
        return None;
    }
    Some(stem.replace('-', "_"))
}

/// `modules.dep` (`kernel/drivers/…/irdma.ko.zst: dep dep…`): each module's path, relative
/// to `/lib/modules/RELEASE`, by module name.
pub fn parse_modules_dep(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((path, _deps)) = line.split_once(':') else {
            continue;
        };
        let path = path.trim();
        if let Some(name) = module_name_of_path(path) {
            out.entry(name).or_insert_with(|| path.to_string());
        }
    }
    out
}

/// `modules.builtin` (`kernel/drivers/…/ib_core.ko` per line): the names of the modules built
/// into the kernel.
pub fn parse_modules_builtin(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter_map(module_name_of_path)
        .collect()
}

/// Where a module file lives, relative to `/lib/modules/RELEASE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModuleOrigin {
    /// `kernel/…`: built with the kernel, from its tree.
    InTree,
    /// `updates/…` (DKMS's default), `extra/…` or anything else: built outside the tree.
    OutOfTree,
}

/// The origin of a module by its `modules.dep` path.
pub(crate) fn origin_of_path(path: &str) -> ModuleOrigin {
    if path.starts_with("kernel/") {
        ModuleOrigin::InTree
    } else {
        ModuleOrigin::OutOfTree
    }
}

/// A kernel version: the leading `MAJOR.MINOR[.PATCH]` of a release string
/// (`6.12.95+deb13-amd64`, `6.8.0-51-generic`, `6.1.0-28-amd64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct KernelVersion {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch level (0 when the release names none).
    pub patch: u32,
}

impl KernelVersion {
    /// A version.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        KernelVersion {
            major,
            minor,
            patch,
        }
    }

    /// `(major, minor)`, the kernel series.
    pub fn series(self) -> (u32, u32) {
        (self.major, self.minor)
    }
}

impl std::fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Parses the leading version of a kernel release; `None` when it does not start with
/// `MAJOR.MINOR`.
pub fn parse_kernel_release(release: &str) -> Option<KernelVersion> {
    let release = release.trim();
    let end = release
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(release.len());
    let mut nums = release[..end].split('.').filter(|s| !s.is_empty());
    let major = nums.next()?.parse().ok()?;
    let minor = nums.next()?.parse().ok()?;
    let patch = nums.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Some(KernelVersion::new(major, minor, patch))
}

/// open-iscsi's `key = value` settings (iscsid.conf, a node record), in file order. Comments
/// (`#`) and blank lines are ignored; the last value of a repeated key wins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IscsiSettings {
    /// `(key, value)` in file order.
    pub entries: Vec<(String, String)>,
    /// Lines that were neither a comment nor `key = value`.
    pub skipped: usize,
}

impl IscsiSettings {
    /// The value of `key` (the last one given), `<empty>` read as absent.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| *v != "<empty>" && !v.is_empty())
    }

    /// The value of `key` as a whole number, when it is one.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.get(key)?.parse().ok()
    }
}

/// Parses iscsid.conf or a node record file.
pub fn parse_iscsi_settings(text: &str) -> IscsiSettings {
    let mut out = IscsiSettings::default();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        match t.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !k.trim().contains(char::is_whitespace) => {
                out.entries
                    .push((k.trim().to_string(), v.trim().to_string()));
            }
            _ => out.skipped += 1,
        }
    }
    out
}

/// True for an open-iscsi key that holds a secret (CHAP passwords, for sessions and
/// discovery, in both directions).
pub(crate) fn is_secret_key(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    last.starts_with("password")
}

/// Replaces every CHAP secret in iSCSI text with `********`: `key = value` lines of node
/// records and iscsid.conf (`node.session.auth.password = …`, `…password_in`,
/// `discovery.sendtargets.auth.password`), and the `password:` / `password_in:` lines of
/// `iscsiadm -m session -P 2/3` (printed in clear with `-S`). Everything else is kept as it
/// was, so a report stays readable.
pub fn redact_iscsi_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        out.push_str(&redact_line(body));
        out.push_str(nl);
    }
    out
}

fn redact_line(line: &str) -> String {
    let indent_len = line.len() - line.trim_start().len();
    let (indent, rest) = line.split_at(indent_len);
    for sep in ['=', ':'] {
        if let Some((k, v)) = rest.split_once(sep) {
            let key = k.trim();
            if !key.is_empty()
                && !key.contains(char::is_whitespace)
                && is_secret_key(key)
                && !v.trim().is_empty()
                && v.trim() != "<empty>"
            {
                return format!("{indent}{k}{sep} ********");
            }
        }
    }
    line.to_string()
}

/// The settings of a systemd unit file that matter to the audit, in order: `[Section]`
/// and `Key=Value` pairs, with `\`-continued lines joined and comments (`#`, `;`) left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UnitFile {
    /// `(section, key, value)` in file order.
    pub entries: Vec<(String, String, String)>,
    /// Lines that were not a section, an assignment, a comment or blank.
    pub skipped: usize,
}

impl UnitFile {
    /// Every value of `key` in `section`, in order (systemd's list settings accumulate;
    /// an empty value resets the list).
    pub fn values<'a>(&'a self, section: &'a str, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.entries
            .iter()
            .filter(move |(s, k, _)| s == section && k == key)
            .map(|(_, _, v)| v.as_str())
    }

    /// The last value of `key` in `section`.
    pub fn last<'a>(&'a self, section: &'a str, key: &'a str) -> Option<&'a str> {
        self.values(section, key).last()
    }

    /// A list setting as systemd sees it: every value in order, an empty one clearing what
    /// came before.
    pub fn list(&self, section: &str, key: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for v in self.values(section, key) {
            if v.trim().is_empty() {
                out.clear();
            } else {
                out.push(v.trim().to_string());
            }
        }
        out
    }

    /// This unit with `drop_in` applied on top (systemd reads drop-ins after the unit).
    pub fn with(mut self, drop_in: UnitFile) -> UnitFile {
        self.entries.extend(drop_in.entries);
        self.skipped += drop_in.skipped;
        self
    }
}

/// Parses a unit file or drop-in.
pub fn parse_unit(text: &str) -> UnitFile {
    let mut out = UnitFile::default();
    let mut section = String::new();
    let mut pending: Option<String> = None;
    for raw in text.lines() {
        let line = match pending.take() {
            Some(mut p) => {
                p.push(' ');
                p.push_str(raw.trim());
                p
            }
            None => raw.trim().to_string(),
        };
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(cont) = line.strip_suffix('\\') {
            pending = Some(cont.trim_end().to_string());
            continue;
        }
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        match line.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.entries
                    .push((section.clone(), k.trim().to_string(), v.trim().to_string()));
            }
            _ => out.skipped += 1,
        }
    }
    if let Some(p) = pending {
        if let Some((k, v)) = p.split_once('=') {
            out.entries
                .push((section, k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// One `DeviceAllow=` entry: what it names and its access letters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceAllow {
    /// The specifier as written: a path (`/dev/infiniband/rdma_cm`), `char-GROUP` or
    /// `block-GROUP` (a group of `/proc/devices`, `*` allowed at the end).
    pub spec: String,
    /// Access letters (`r`, `w`, `m`); systemd's default is `rwm`.
    pub access: String,
}

impl DeviceAllow {
    /// Parses `SPEC [ACCESS]`.
    pub fn parse(value: &str) -> Option<DeviceAllow> {
        let mut parts = value.split_whitespace();
        let spec = parts.next()?.to_string();
        let access = parts.next().unwrap_or("rwm").to_string();
        if parts.next().is_some() {
            return None;
        }
        Some(DeviceAllow { spec, access })
    }

    /// Allows reading and writing.
    pub fn read_write(&self) -> bool {
        self.access.contains('r') && self.access.contains('w')
    }

    /// The `/proc/devices` group pattern of a `char-GROUP` entry.
    pub(crate) fn char_group(&self) -> Option<&str> {
        self.spec.strip_prefix("char-")
    }

    /// True when a `char-GROUP` pattern (a trailing `*` matches any suffix) names `group`.
    pub(crate) fn matches_group(&self, group: &str) -> bool {
        match self.char_group() {
            Some(p) => match p.strip_suffix('*') {
                Some(prefix) => group.starts_with(prefix),
                None => p == group,
            },
            None => false,
        }
    }
}

/// A systemd boolean (`yes`/`true`/`on`/`1`, `no`/`false`/`off`/`0`).
pub(crate) fn unit_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Some(true),
        "no" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_devices_character_section_only() {
        let t = "Character devices:\n  1 mem\n 10 misc\n231 infiniband_mad\n231 infiniband_verbs\n\
                 bogus line here\n\nBlock devices:\n  8 sd\n";
        let d = parse_proc_devices(t);
        assert_eq!(d.majors_of("infiniband_verbs"), [231]);
        assert_eq!(d.majors_of("misc"), [10]);
        assert_eq!(d.majors_of("sd"), Vec::<u32>::new());
        assert_eq!(d.names_of(231), ["infiniband_mad", "infiniband_verbs"]);
        assert_eq!(d.skipped, 1);
    }

    #[test]
    fn device_numbers() {
        assert_eq!(parse_dev_number("231:192\n"), Some((231, 192)));
        assert_eq!(parse_dev_number("10:58"), Some((10, 58)));
        assert_eq!(parse_dev_number("x:1"), None);
    }

    #[test]
    fn proc_modules_names() {
        let t = "irdma 409600 0 - Live 0x0000000000000000\n\
                 ice 1232896 1 irdma, Live 0x0000000000000000 (O)\n\ngarbage\n";
        let (names, skipped) = parse_proc_modules(t);
        assert_eq!(names, ["irdma", "ice"]);
        assert_eq!(skipped, 1);
    }

    #[test]
    fn modules_dep_and_builtin() {
        let dep = "kernel/drivers/infiniband/hw/irdma/irdma.ko.zst: kernel/drivers/net/ethernet/intel/ice/ice.ko.zst\n\
                   updates/dkms/ice.ko: \n\
                   kernel/drivers/infiniband/hw/mlx5/mlx5_ib.ko:\n";
        let m = parse_modules_dep(dep);
        assert_eq!(
            m["irdma"],
            "kernel/drivers/infiniband/hw/irdma/irdma.ko.zst"
        );
        assert_eq!(m["ice"], "updates/dkms/ice.ko");
        assert_eq!(origin_of_path(&m["ice"]), ModuleOrigin::OutOfTree);
        assert_eq!(origin_of_path(&m["mlx5_ib"]), ModuleOrigin::InTree);
        assert_eq!(
            parse_modules_builtin("kernel/drivers/infiniband/core/ib-core.ko\n\n"),
            ["ib_core"]
        );
        assert_eq!(module_name_of_path("README"), None);
    }

    #[test]
    fn kernel_releases() {
        assert_eq!(
            parse_kernel_release("6.12.95+deb13-amd64\n"),
            Some(KernelVersion::new(6, 12, 95))
        );
        assert_eq!(
            parse_kernel_release("6.8.0-51-generic"),
            Some(KernelVersion::new(6, 8, 0))
        );
        assert_eq!(
            parse_kernel_release("7.0"),
            Some(KernelVersion::new(7, 0, 0))
        );
        assert_eq!(parse_kernel_release("linux"), None);
        assert_eq!(parse_kernel_release("6"), None);
        assert!(KernelVersion::new(6, 12, 0) < KernelVersion::new(7, 0, 0));
    }

    #[test]
    fn iscsi_settings_last_value_wins_and_empty_is_absent() {
        let t = "# comment\nnode.startup = manual\nnode.startup = automatic\n\
                 node.session.auth.username = <empty>\nnot a setting\n\
                 node.conn[0].timeo.login_timeout = 15\n";
        let s = parse_iscsi_settings(t);
        assert_eq!(s.get("node.startup"), Some("automatic"));
        assert_eq!(s.get("node.session.auth.username"), None);
        assert_eq!(s.int("node.conn[0].timeo.login_timeout"), Some(15));
        assert_eq!(s.skipped, 1);
    }

    #[test]
    fn secrets_are_redacted_and_nothing_else() {
        let t = "node.session.auth.authmethod = CHAP\nnode.session.auth.username = ini\n\
                 node.session.auth.password = s3cret\nnode.session.auth.password_in = <empty>\n\
                 discovery.sendtargets.auth.password = other\n\
                 \t\tCHAP:\n\t\t*****\n\t\tusername: ini\n\t\tpassword: s3cret\n\
                 \t\tpassword_in: back\nno newline at the end";
        let r = redact_iscsi_secrets(t);
        assert!(
            !r.contains("s3cret") && !r.contains("other") && !r.contains("back"),
            "{r}"
        );
        assert!(r.contains("node.session.auth.password = ********"));
        assert!(r.contains("node.session.auth.password_in = <empty>"));
        assert!(r.contains("\t\tpassword: ********\n"));
        assert!(r.contains("node.session.auth.username = ini"));
        assert!(r.ends_with("no newline at the end"));
        assert_eq!(r.lines().count(), t.lines().count());
    }

    #[test]
    fn unit_files_with_drop_ins_and_lists() {
        let unit = parse_unit(
            "[Service]\n# comment\nDevicePolicy=closed\nDeviceAllow=/dev/kmsg r\n\
             DeviceAllow=char-infiniband_verbs rw\nExecStart=/usr/sbin/iser-guard \\\n  daemon\n\
             garbage\n[Install]\nWantedBy=multi-user.target\n",
        );
        assert_eq!(
            unit.last("Service", "ExecStart"),
            Some("/usr/sbin/iser-guard daemon")
        );
        assert_eq!(unit.skipped, 1);
        let drop = parse_unit("[Service]\nDeviceAllow=\nDeviceAllow=/dev/null rw\n");
        let merged = unit.clone().with(drop);
        assert_eq!(
            unit.list("Service", "DeviceAllow"),
            ["/dev/kmsg r", "char-infiniband_verbs rw"]
        );
        assert_eq!(merged.list("Service", "DeviceAllow"), ["/dev/null rw"]);
        assert_eq!(merged.last("Service", "DevicePolicy"), Some("closed"));
    }

    #[test]
    fn device_allow_entries() {
        let a = DeviceAllow::parse("char-infiniband_verbs rw").unwrap();
        assert!(a.read_write() && a.matches_group("infiniband_verbs"));
        assert!(!a.matches_group("infiniband_mad"));
        let star = DeviceAllow::parse("char-infiniband*").unwrap();
        assert_eq!(star.access, "rwm");
        assert!(star.matches_group("infiniband_mad"));
        let r = DeviceAllow::parse("/dev/kmsg r").unwrap();
        assert!(!r.read_write() && r.char_group().is_none());
        assert_eq!(DeviceAllow::parse("a b c"), None);
        assert_eq!(unit_bool("Yes"), Some(true));
        assert_eq!(unit_bool("maybe"), None);
    }
}
