//! Reading the configuration file: a path nobody but root can change (every component
//! walked, as `crate::io::path_trust` does for the daemon's other paths), a regular file of
//! sane size, then [`super::parse_str`]; and the trust checks of the paths it names. The
//! model, the parser and the validation above it do no I/O.

use std::path::Path;

use super::{
    parse_spanned, sorted, Config, ConfigError, ConfigSource, LineIndex, Problem,
    DEFAULT_CONFIG_PATH, MAX_CONFIG_BYTES,
};

/// Reads, checks and validates the configuration file at `path`.
///
/// Refuses a file that is not a regular file or is world-writable, then reports every
/// syntax, schema and semantic problem at once (see the module docs).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = read_checked(path)?;
    let invalid = |problems| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems,
    };
    let (config, spans) = parse_spanned(&text).map_err(invalid)?;
    let lines = LineIndex::new(&text);
    let mut problems = trust_problems(&config);
    for p in &mut problems {
        if let Some(span) = spans.get(&p.key) {
            let (l, c) = lines.position(span.start);
            p.line = Some(l);
            p.col = Some(c);
        }
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(invalid(sorted(problems)))
    }
}

/// The trust checks of every path the daemon runs, keeps its state in or reads kernel
/// facts from ([`crate::path_trust`]), as problems at their keys. Reads the file system.
///
/// Executables and directories that do not exist yet are judged by the directories that
/// do (nobody but root may create them); the control socket's path must not name anything
/// but a socket, because binding replaces a stale socket there and nothing else.
pub fn trust_problems(config: &Config) -> Vec<Problem> {
    use crate::core::path_trust::PathVerdict;
    use crate::core::path_trust::Target;
    use crate::io::path_trust::check;
    let pa = &config.paths;
    let socket_dir = pa.control_socket.parent().map(Path::to_path_buf);
    let mut checks: Vec<(&str, &Path, Target)> = vec![
        ("paths.iscsiadm", &pa.iscsiadm, Target::File),
        ("paths.devlink", &pa.devlink, Target::File),
        ("paths.rdma", &pa.rdma, Target::File),
        ("paths.modprobe", &pa.modprobe, Target::File),
        ("paths.state-dir", &pa.state_dir, Target::DedicatedDir),
        ("paths.kmsg", &pa.kmsg, Target::Input),
        ("paths.boot-id", &pa.boot_id, Target::Input),
        ("paths.sysfs-root", &pa.sysfs_root, Target::Tree),
    ];
    if let Some(d) = socket_dir.as_deref() {
        checks.push(("paths.control-socket", d, Target::DedicatedDir));
    }
    let mut out = Vec::new();
    for (key, path, target) in checks {
        // Relative or empty paths are reported by `validate`.
        if !path.is_absolute() {
            continue;
        }
        match check(path, target) {
            PathVerdict::Trusted { .. } => {}
            PathVerdict::Refused(refusals) => {
                for r in refusals {
                    out.push(Problem::new(
                        key,
                        format!("refusing {}: {r}", path.display()),
                    ));
                }
            }
            PathVerdict::Unwalkable(e) => out.push(Problem::new(
                key,
                format!("refusing {}: {e}", path.display()),
            )),
        }
    }
    if let Err(m) = crate::io::control::check_socket_path(&pa.control_socket) {
        out.push(Problem::new("paths.control-socket", m));
    }
    // A regular file opens, then cannot be polled: the daemon would stop at start.
    // (Unless the walk above refused the path already, e.g. as a directory.)
    if config.kmsg.enabled && pa.kmsg.is_absolute() && !out.iter().any(|p| p.key == "paths.kmsg") {
        if let Err(e @ crate::io::kmsg::KmsgError::NotALog { .. }) =
            crate::io::kmsg::check_source(&pa.kmsg)
        {
            let text = e.to_string();
            let text = text.strip_prefix("paths.kmsg: ").unwrap_or(&text);
            out.push(Problem::new("paths.kmsg", text.to_string()));
        }
    }
    out
}

/// What this host lacks that the daemon will need, by key, with the real cause: the kernel
/// log it cannot find, an iscsiadm it cannot run, a syslog socket nobody listens on. These
/// are warnings, not problems: the file is right, the host is not ready yet (open-iscsi
/// not installed, rsyslog or journald not running), and check-config may run elsewhere.
pub fn host_warnings(config: &Config) -> Vec<String> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let pa = &config.paths;
    let mut out = Vec::new();
    if config.kmsg.enabled && pa.kmsg.is_absolute() {
        if let Err(e @ crate::io::kmsg::KmsgError::Missing { .. }) =
            crate::io::kmsg::check_source(&pa.kmsg)
        {
            out.push(format!("{e}: the daemon will not start"));
        }
    }
    if pa.iscsiadm.is_absolute() {
        match std::fs::metadata(&pa.iscsiadm) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.push(format!(
                "paths.iscsiadm: {} does not exist: sessions can be neither listed nor \
                 reconnected (install open-iscsi, or name the right path)",
                pa.iscsiadm.display()
            )),
            Err(e) => out.push(format!(
                "paths.iscsiadm: cannot look at {}: {e}",
                pa.iscsiadm.display()
            )),
            Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => out.push(format!(
                "paths.iscsiadm: {} is not an executable file: sessions can be neither \
                 listed nor reconnected",
                pa.iscsiadm.display()
            )),
            Ok(_) => {}
        }
    }
    if config.alerts.syslog {
        let socket = &config.alerts.syslog_socket;
        match std::fs::metadata(socket) {
            Ok(m) if m.file_type().is_socket() => {}
            Ok(_) => out.push(format!(
                "alerts.syslog-socket: {} is not a socket: alerts reach only the \
                 daemon's log until syslog listens there",
                socket.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.push(format!(
                "alerts.syslog-socket: {} does not exist (is rsyslog or systemd-journald \
                 running?): alerts reach only the daemon's log until it does",
                socket.display()
            )),
            Err(e) => out.push(format!(
                "alerts.syslog-socket: cannot look at {}: {e}",
                socket.display()
            )),
        }
    }
    out
}

/// Loads `explicit` if given (it must exist); otherwise [`DEFAULT_CONFIG_PATH`] if it exists;
/// otherwise the built-in defaults, with an info line saying so.
///
/// A missing default file is normal (the daemon then only alerts, since the default
/// allow-list is empty); a missing explicit file is an operator error.
pub fn load_or_default(explicit: Option<&Path>) -> Result<(Config, ConfigSource), ConfigError> {
    load_or_default_from(explicit, Path::new(DEFAULT_CONFIG_PATH))
}

/// A file named by `--config` must exist: every command refuses a missing one the same way
/// (exit 78), before doing anything, whether or not it reads the rest of the file.
pub fn check_named(path: &Path) -> Result<(), ConfigError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ConfigError::Missing {
            path: path.to_path_buf(),
        }),
        // Anything else (present, or not reachable for lack of permission) is for `load`
        // to report with its cause.
        _ => Ok(()),
    }
}

/// [`load_or_default`] with the default location as an argument, for tests.
pub fn load_or_default_from(
    explicit: Option<&Path>,
    default_path: &Path,
) -> Result<(Config, ConfigSource), ConfigError> {
    if let Some(p) = explicit {
        check_named(p)?;
        return Ok((load(p)?, ConfigSource::File(p.to_path_buf())));
    }
    match std::fs::symlink_metadata(default_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(
                path = %default_path.display(),
                "no configuration file; using the built-in defaults"
            );
            let config = Config::default();
            let problems = trust_problems(&config);
            if !problems.is_empty() {
                return Err(ConfigError::DefaultsUntrusted { problems });
            }
            Ok((config, ConfigSource::Defaults))
        }
        // Any other outcome (exists, or cannot be looked at) goes through `load`, which
        // reports it properly.
        _ => Ok((
            load(default_path)?,
            ConfigSource::File(default_path.to_path_buf()),
        )),
    }
}

/// Opens `path`, checks what it is through the open descriptor (no race with a rename), and
/// reads it.
fn read_checked(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

    let read_err = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    // O_NONBLOCK: opening a FIFO must not hang waiting for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ConfigError::Missing {
                path: path.to_path_buf(),
            },
            _ => read_err(e),
        })?;
    let meta = file.metadata().map_err(read_err)?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let kind = if ft.is_dir() {
            "directory"
        } else if ft.is_fifo() {
            "FIFO"
        } else if ft.is_socket() {
            "socket"
        } else if ft.is_char_device() {
            "character device"
        } else if ft.is_block_device() {
            "block device"
        } else {
            "special file"
        };
        return Err(ConfigError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    // Whoever can write the file or replace any directory on the way to it controls what
    // the daemon does as root: every component is checked, symlinks followed.
    match crate::io::path_trust::check(path, crate::core::path_trust::Target::File) {
        crate::core::path_trust::PathVerdict::Trusted { .. } => {}
        crate::core::path_trust::PathVerdict::Refused(refusals) => {
            return Err(ConfigError::Untrusted {
                path: path.to_path_buf(),
                refusals,
            })
        }
        crate::core::path_trust::PathVerdict::Unwalkable(source) => {
            return Err(ConfigError::Unwalkable {
                path: path.to_path_buf(),
                source,
            })
        }
    }
    // A configuration is a few KiB; a huge file is a mistake (wrong path), not a config.
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            problems: vec![Problem::new(
                "",
                format!("the file is larger than {MAX_CONFIG_BYTES} bytes; is it the right file?"),
            )],
        });
    }
    Ok(text)
}
