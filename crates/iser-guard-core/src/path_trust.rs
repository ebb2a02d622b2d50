//! Whether a root daemon may trust a path: the decision, with no I/O.
//!
//! The rules are those of OpenSSH's `StrictModes` and sudo's checks on sudoers: whoever can
//! write a file the daemon reads or runs, or replace any directory on the way to it, can make
//! the daemon do as they please as root. So, after resolving symlinks, every directory from
//! `/` to the target must be owned by root (or by the daemon's own user, so that tests and
//! unprivileged runs work) and not writable by group or others; the one exception is a
//! directory with the sticky bit owned by root (`/tmp`): others may create entries in it but
//! not rename or remove ours. The target itself:
//! * a file (the configuration, an executable in `paths.*`): a regular file, owned by root
//!   (or the daemon's user), not writable by group or others;
//! * a dedicated directory (`paths.state-dir`, the control socket's directory): a directory
//!   with the same owner and mode rules and *no* sticky exception (a directory others can write
//!   is not dedicated to the daemon), and not a shared system directory such as `/`.
//!
//! The facts come from the shell's walk (`iser_guard::io::path_trust::walk`), which `lstat`s every component and
//! follows symlinks itself, so that the directories holding a link count as well as those of
//! its target.

use std::fmt;
use std::path::{Path, PathBuf};

/// Symlinks followed before giving up, as the kernel's `MAXSYMLINKS`.
pub const MAX_SYMLINKS: usize = 40;

/// Why a path could not be walked.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// A component could not be looked at (permission, I/O error).
    #[error("cannot look at {path}: {source}")]
    Stat {
        /// The component.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A component on the way is not a directory.
    #[error("{path} is not a directory")]
    NotADirectory {
        /// The component.
        path: PathBuf,
    },
    /// More than [`MAX_SYMLINKS`] symlinks.
    #[error("too many levels of symbolic links resolving {path}")]
    Loop {
        /// The path asked for.
        path: PathBuf,
    },
}

/// The outcome of checking one path.
#[derive(Debug)]
pub enum PathVerdict {
    /// Every component is trusted; `exists` says whether the target itself exists.
    Trusted {
        /// The target exists (else only the directories that exist were checked).
        exists: bool,
    },
    /// Refused, with every reason.
    Refused(Vec<PathRefusal>),
    /// The walk failed.
    Unwalkable(WalkError),
}

/// What a component of a walk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// Anything else (FIFO, socket, device): its name.
    Other(&'static str),
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Dir => "directory",
            Kind::File => "regular file",
            Kind::Other(n) => n,
        }
    }
}

/// The stat facts of one component, as `lstat` gave them (symlinks already followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// The component's resolved path.
    pub path: PathBuf,
    /// Its owner.
    pub uid: u32,
    /// The owner's name, when the user database knows it (for messages only).
    pub owner_name: Option<String>,
    /// Permission bits including set-id and sticky (`st_mode & 0o7777`).
    pub mode: u32,
    /// What it is.
    pub kind: Kind,
}

/// Every component from `/` to the target, in walk order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// The directories traversed (including those holding a symlink), then the target when
    /// it exists.
    pub components: Vec<Component>,
    /// True when the target exists (it is the last component); false when the walk stopped
    /// at a missing name (only the directories up to it are known).
    pub complete: bool,
    /// The target's resolved path (as far as it could be resolved).
    pub resolved: PathBuf,
}

/// What the target must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A regular file the daemon reads or runs.
    File,
    /// A directory dedicated to the daemon (state, control socket).
    DedicatedDir,
    /// A source of input the daemon trusts (`paths.kmsg`, `paths.boot-id`): a device, a
    /// file or a FIFO, anything but a directory. Whoever can write it or replace it feeds
    /// the daemon kernel facts (a forged `/dev/kmsg` makes every record look like the
    /// kernel's; a forged boot id makes the daemon skip or re-read the kernel log).
    Input,
    /// The root of a tree the daemon reads kernel facts from (`paths.sysfs-root`): a
    /// directory, possibly one the system shares (`/sys`).
    Tree,
}

/// Directories shared by the whole system: never a daemon's own directory.
const SYSTEM_DIRS: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib64",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/usr/sbin",
    "/var",
    "/var/lib",
    "/var/run",
    "/var/tmp",
];

/// Why a path is not trusted; each names the component, its owner and mode, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRefusal {
    /// A component is owned by someone other than root or the daemon's user.
    Owner {
        /// The component.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The owner's name.
        owner_name: Option<String>,
        /// Its mode.
        mode: u32,
    },
    /// A component is writable by group or others (and not a root-owned sticky directory).
    Writable {
        /// The component.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The owner's name.
        owner_name: Option<String>,
        /// Its mode.
        mode: u32,
        /// It is a directory (for the message).
        dir: bool,
    },
    /// The target is not what it must be (a FIFO where a file is expected, …).
    WrongKind {
        /// The target.
        path: PathBuf,
        /// What it is.
        found: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// A dedicated directory names a directory the whole system shares.
    SystemDirectory {
        /// The directory.
        path: PathBuf,
    },
}

fn owner(uid: u32, name: &Option<String>) -> String {
    match name {
        Some(n) => format!("{n} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

impl fmt::Display for PathRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathRefusal::Owner {
                path,
                uid,
                owner_name,
                mode,
            } => write!(
                f,
                "{} is owned by {}, not root (mode {mode:04o}); fix it with `chown root {}`",
                path.display(),
                owner(*uid, owner_name),
                path.display()
            ),
            PathRefusal::Writable {
                path,
                uid,
                owner_name,
                mode,
                dir,
            } => {
                let who = if mode & 0o002 != 0 {
                    "world-writable"
                } else {
                    "group-writable"
                };
                write!(f, "{} is {who} (mode {mode:04o})", path.display())?;
                if *dir && mode & 0o1000 == 0 {
                    write!(f, " without the sticky bit")?;
                } else if *dir && *uid != 0 {
                    write!(
                        f,
                        " and its sticky bit protects nothing unless root owns it"
                    )?;
                }
                let kernel_file = ["/dev/", "/proc/", "/sys/"]
                    .iter()
                    .any(|p| path.starts_with(p));
                if kernel_file || (*dir && (is_system_directory(path) || mode & 0o1000 != 0)) {
                    // Shared by design (or a system directory): never advise changing it.
                    write!(
                        f,
                        ", owner {}; it is shared, so leave it as it is and choose a path \
                         outside it in the configuration (a directory of iser-guard's own, \
                         owned by root, e.g. under /var/lib or /run)",
                        owner(*uid, owner_name)
                    )
                } else {
                    write!(
                        f,
                        ", owner {}; fix it with `chmod g-w,o-w {}`",
                        owner(*uid, owner_name),
                        path.display()
                    )
                }
            }
            PathRefusal::WrongKind {
                path,
                found,
                expected,
            } => write!(f, "{} is a {found}, not a {expected}", path.display()),
            PathRefusal::SystemDirectory { path } => write!(
                f,
                "{} is a directory the whole system shares, not one dedicated to iser-guard; \
                 use a directory of its own (e.g. /var/lib/iser-guard)",
                path.display()
            ),
        }
    }
}

/// True when `dir` is one of the directories the whole system shares.
pub(crate) fn is_system_directory(dir: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| Path::new(d) == dir)
}

/// Judges a walk: every refusal, outermost first; empty when the path is trusted.
/// `trusted_uid` is the daemon's effective uid (root in production).
pub fn judge(walk: &Walk, target: Target, trusted_uid: u32) -> Vec<PathRefusal> {
    let mut out = Vec::new();
    let n = walk.components.len();
    let target_at = if walk.complete {
        n.checked_sub(1)
    } else {
        None
    };
    for (i, c) in walk.components.iter().enumerate() {
        let is_target = Some(i) == target_at;
        if c.uid != 0 && c.uid != trusted_uid {
            out.push(PathRefusal::Owner {
                path: c.path.clone(),
                uid: c.uid,
                owner_name: c.owner_name.clone(),
                mode: c.mode,
            });
        }
        let writable = c.mode & 0o022 != 0;
        let sticky_root_dir = c.kind == Kind::Dir && c.mode & 0o1000 != 0 && c.uid == 0;
        // A sticky directory keeps others from replacing what we own in it; that protects
        // the way through it, but a directory of our own must not be open to others at all.
        if writable && (is_target || !sticky_root_dir) {
            out.push(PathRefusal::Writable {
                path: c.path.clone(),
                uid: c.uid,
                owner_name: c.owner_name.clone(),
                mode: c.mode,
                dir: c.kind == Kind::Dir,
            });
        }
        if is_target {
            let wrong = match target {
                Target::File => (c.kind != Kind::File).then_some(Kind::File.name()),
                Target::DedicatedDir | Target::Tree => {
                    (c.kind != Kind::Dir).then_some(Kind::Dir.name())
                }
                Target::Input => (c.kind == Kind::Dir).then_some("device, file or FIFO"),
            };
            if let Some(expected) = wrong {
                out.push(PathRefusal::WrongKind {
                    path: c.path.clone(),
                    found: c.kind.name(),
                    expected,
                });
            }
        }
    }
    if target == Target::DedicatedDir && is_system_directory(&walk.resolved) {
        out.push(PathRefusal::SystemDirectory {
            path: walk.resolved.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str, uid: u32, mode: u32, kind: Kind) -> Component {
        Component {
            path: path.into(),
            uid,
            owner_name: None,
            mode,
            kind,
        }
    }

    fn walk(components: Vec<Component>, complete: bool) -> Walk {
        let resolved = components
            .last()
            .map(|c| c.path.clone())
            .unwrap_or_default();
        Walk {
            components,
            complete,
            resolved,
        }
    }

    fn root_chain() -> Vec<Component> {
        vec![
            c("/", 0, 0o755, Kind::Dir),
            c("/etc", 0, 0o755, Kind::Dir),
            c("/etc/iser-guard", 0, 0o755, Kind::Dir),
        ]
    }

    #[test]
    fn root_owned_chain_and_file_are_trusted() {
        let mut v = root_chain();
        v.push(c("/etc/iser-guard/config.toml", 0, 0o644, Kind::File));
        assert_eq!(judge(&walk(v, true), Target::File, 0), vec![]);
    }

    #[test]
    fn a_writable_grandparent_is_named() {
        let mut v = root_chain();
        v[1].mode = 0o777;
        v.push(c("/etc/iser-guard/config.toml", 0, 0o644, Kind::File));
        let r = judge(&walk(v, true), Target::File, 0);
        assert_eq!(r.len(), 1, "{r:?}");
        let m = r[0].to_string();
        assert!(
            m.contains("/etc is world-writable (mode 0777) without the sticky bit"),
            "{m}"
        );
        // /etc is the whole system's: the advice is never to change it.
        assert!(!m.contains("chmod"), "{m}");
        assert!(m.contains("choose a path outside it"), "{m}");
    }

    #[test]
    fn a_writable_device_node_is_never_to_be_changed() {
        let v = vec![
            c("/", 0, 0o755, Kind::Dir),
            c("/dev", 0, 0o755, Kind::Dir),
            c("/dev/null", 0, 0o666, Kind::Other("character device")),
        ];
        let r = judge(&walk(v, true), Target::Input, 0);
        assert!(!r.is_empty());
        for m in r.iter().map(ToString::to_string) {
            assert!(!m.contains("chmod"), "{m}");
            assert!(m.contains("choose a path outside it"), "{m}");
        }
    }

    #[test]
    fn a_shared_sticky_directory_is_never_to_be_loosened_or_changed() {
        let v = vec![c("/", 0, 0o755, Kind::Dir), c("/tmp", 0, 0o1777, Kind::Dir)];
        let r = judge(&walk(v, true), Target::DedicatedDir, 0);
        assert!(!r.is_empty());
        for m in r.iter().map(ToString::to_string) {
            assert!(!m.contains("chmod"), "{m}");
            assert!(!m.contains("chown"), "{m}");
        }
    }

    #[test]
    fn sticky_root_directory_is_a_way_through_but_not_a_home() {
        let v = vec![
            c("/", 0, 0o755, Kind::Dir),
            c("/tmp", 0, 0o1777, Kind::Dir),
            c("/tmp/x", 0, 0o700, Kind::Dir),
        ];
        assert_eq!(
            judge(&walk(v.clone(), true), Target::DedicatedDir, 0),
            vec![]
        );
        // A sticky directory owned by someone else protects nothing.
        let mut w = v.clone();
        w[1].uid = 1001;
        let r = judge(&walk(w, true), Target::DedicatedDir, 0);
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(matches!(r[0], PathRefusal::Owner { uid: 1001, .. }));
        // /tmp itself as the state directory: writable by others, and shared.
        let r = judge(&walk(v[..2].to_vec(), true), Target::DedicatedDir, 0);
        assert!(matches!(r[0], PathRefusal::Writable { .. }), "{r:?}");
        assert!(matches!(r[1], PathRefusal::SystemDirectory { .. }), "{r:?}");
    }

    #[test]
    fn non_root_or_group_writable_file_is_refused() {
        let mut v = root_chain();
        v.push(c("/etc/iser-guard/config.toml", 1001, 0o644, Kind::File));
        let r = judge(&walk(v.clone(), true), Target::File, 0);
        assert_eq!(r.len(), 1);
        assert!(r[0].to_string().contains("owned by uid 1001"), "{}", r[0]);
        // The daemon's own user is trusted (unprivileged runs and tests).
        assert_eq!(judge(&walk(v.clone(), true), Target::File, 1001), vec![]);
        let last = v.len() - 1;
        v[last].uid = 0;
        v[last].mode = 0o664;
        let r = judge(&walk(v, true), Target::File, 0);
        assert!(
            r[0].to_string().contains("group-writable (mode 0664)"),
            "{}",
            r[0]
        );
    }

    #[test]
    fn wrong_kind_and_system_directory() {
        let mut v = root_chain();
        v.push(c(
            "/etc/iser-guard/config.toml",
            0,
            0o644,
            Kind::Other("FIFO"),
        ));
        let r = judge(&walk(v, true), Target::File, 0);
        assert_eq!(
            r[0].to_string(),
            "/etc/iser-guard/config.toml is a FIFO, not a regular file"
        );
        let r = judge(
            &walk(vec![c("/", 0, 0o755, Kind::Dir)], true),
            Target::DedicatedDir,
            0,
        );
        assert!(
            matches!(r[..], [PathRefusal::SystemDirectory { .. }]),
            "{r:?}"
        );
    }

    #[test]
    fn an_input_is_a_device_file_or_fifo_nobody_else_can_write() {
        let dev = || {
            vec![
                c("/", 0, 0o755, Kind::Dir),
                c("/dev", 0, 0o755, Kind::Dir),
                c("/dev/kmsg", 0, 0o644, Kind::Other("character device")),
            ]
        };
        assert_eq!(judge(&walk(dev(), true), Target::Input, 0), vec![]);
        let mut v = dev();
        v[2].mode = 0o666;
        let r = judge(&walk(v, true), Target::Input, 0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].to_string()
                .starts_with("/dev/kmsg is world-writable (mode 0666), owner uid 0"),
            "{}",
            r[0]
        );
        let mut v = dev();
        v[1].uid = 1001;
        let r = judge(&walk(v, true), Target::Input, 0);
        assert!(
            r[0].to_string().contains("/dev is owned by uid 1001"),
            "{}",
            r[0]
        );
        let mut v = dev();
        v[2].kind = Kind::Dir;
        let r = judge(&walk(v, true), Target::Input, 0);
        assert_eq!(
            r[0].to_string(),
            "/dev/kmsg is a directory, not a device, file or FIFO"
        );
    }

    #[test]
    fn a_tree_may_be_a_system_directory_but_not_one_others_write() {
        let sys = vec![c("/", 0, 0o755, Kind::Dir), c("/sys", 0, 0o555, Kind::Dir)];
        assert_eq!(judge(&walk(sys.clone(), true), Target::Tree, 0), vec![]);
        let mut v = sys;
        v[1].mode = 0o1777;
        let r = judge(&walk(v, true), Target::Tree, 0);
        assert!(matches!(r[..], [PathRefusal::Writable { .. }]), "{r:?}");
    }

    #[test]
    fn a_missing_target_is_judged_by_the_directories_that_exist() {
        let mut w = walk(root_chain(), false);
        w.resolved = "/etc/iser-guard/state".into();
        assert_eq!(judge(&w, Target::DedicatedDir, 0), vec![]);
        w.components[2].mode = 0o775;
        let r = judge(&w, Target::DedicatedDir, 0);
        assert!(
            r[0].to_string()
                .contains("/etc/iser-guard is group-writable"),
            "{}",
            r[0]
        );
    }
}
