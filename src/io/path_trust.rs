//! The stat walk behind [`crate::path_trust`]: `lstat` of every component from `/` to a
//! path, following symlinks by hand so that the directories holding each link are walked as
//! well as those of its target (a safe link into an unsafe directory is caught, and so is an
//! unsafe directory holding a link to a safe file).
//!
//! Owns no decision: [`check`] hands the facts to [`crate::core::path_trust::judge`].

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component as PathComponent, Path, PathBuf};

use crate::core::path_trust::{
    judge, Component, Kind, PathVerdict, Target, Walk, WalkError, MAX_SYMLINKS,
};

/// Walks `path` and judges it as `target`, trusting root and the daemon's effective uid.
pub fn check(path: &Path, target: Target) -> PathVerdict {
    match walk(path) {
        Ok(w) => {
            let refusals = judge(&w, target, nix::unistd::geteuid().as_raw());
            if refusals.is_empty() {
                PathVerdict::Trusted { exists: w.complete }
            } else {
                PathVerdict::Refused(refusals)
            }
        }
        Err(e) => PathVerdict::Unwalkable(e),
    }
}

fn kind_of(meta: &std::fs::Metadata) -> Kind {
    let ft = meta.file_type();
    if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else if ft.is_fifo() {
        Kind::Other("FIFO")
    } else if ft.is_socket() {
        Kind::Other("socket")
    } else if ft.is_char_device() {
        Kind::Other("character device")
    } else if ft.is_block_device() {
        Kind::Other("block device")
    } else {
        Kind::Other("special file")
    }
}

fn component(path: &Path, meta: &std::fs::Metadata) -> Component {
    let owner_name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(meta.uid()))
        .ok()
        .flatten()
        .map(|u| u.name);
    Component {
        path: path.to_path_buf(),
        uid: meta.uid(),
        owner_name,
        mode: meta.mode() & 0o7777,
        kind: kind_of(meta),
    }
}

fn names(p: &Path) -> impl Iterator<Item = OsString> + '_ {
    p.components().filter_map(|c| match c {
        PathComponent::Normal(n) => Some(n.to_os_string()),
        PathComponent::ParentDir => Some(OsString::from("..")),
        _ => None,
    })
}

/// Every component from `/` to `path` (relative paths start at the working directory), with
/// symlinks followed. Stops at the first missing name (`complete` false).
pub fn walk(path: &Path) -> Result<Walk, WalkError> {
    let start = if path.is_absolute() {
        path.to_path_buf()
    } else {
        let cwd = std::env::current_dir().map_err(|source| WalkError::Stat {
            path: PathBuf::from("."),
            source,
        })?;
        cwd.join(path)
    };
    let stat = |p: &Path| {
        std::fs::symlink_metadata(p).map_err(|source| WalkError::Stat {
            path: p.to_path_buf(),
            source,
        })
    };
    let root = Path::new("/");
    let mut components = vec![component(root, &stat(root)?)];
    let mut current = PathBuf::from("/");
    let mut queue: VecDeque<OsString> = names(&start).collect();
    let mut links = 0;
    while let Some(name) = queue.pop_front() {
        if name == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&name);
        let meta = match std::fs::symlink_metadata(&next) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut resolved = next;
                resolved.extend(queue.iter());
                return Ok(Walk {
                    components,
                    complete: false,
                    resolved,
                });
            }
            Err(source) => return Err(WalkError::Stat { path: next, source }),
        };
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(WalkError::Loop { path: start });
            }
            let target = std::fs::read_link(&next).map_err(|source| WalkError::Stat {
                path: next.clone(),
                source,
            })?;
            if target.is_absolute() {
                current = PathBuf::from("/");
            }
            for n in names(&target).collect::<Vec<_>>().into_iter().rev() {
                queue.push_front(n);
            }
            continue;
        }
        let c = component(&next, &meta);
        if c.kind != Kind::Dir && !queue.is_empty() {
            return Err(WalkError::NotADirectory { path: next });
        }
        components.push(c);
        current = next;
    }
    Ok(Walk {
        components,
        complete: true,
        resolved: current,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn walk_follows_links_and_keeps_the_links_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir(base.join("open")).expect("mkdir");
        std::fs::create_dir(base.join("safe")).expect("mkdir");
        std::fs::write(base.join("open/config.toml"), "").expect("write");
        std::os::unix::fs::symlink("../open/config.toml", base.join("safe/config.toml"))
            .expect("symlink");
        let w = walk(&base.join("safe/config.toml")).expect("walk");
        assert!(w.complete);
        assert_eq!(w.resolved, base.join("open/config.toml"));
        let paths: Vec<&Path> = w.components.iter().map(|c| c.path.as_path()).collect();
        assert!(paths.contains(&base.join("safe").as_path()), "{paths:?}");
        assert!(paths.contains(&base.join("open").as_path()), "{paths:?}");
        assert_eq!(w.components[0].path, Path::new("/"));

        // The link points into a world-writable directory without the sticky bit: refused,
        // naming that directory.
        chmod(&base.join("open"), 0o777);
        match check(&base.join("safe/config.toml"), Target::File) {
            PathVerdict::Refused(r) => {
                let m = r[0].to_string();
                assert!(
                    m.contains(&format!(
                        "{} is world-writable",
                        base.join("open").display()
                    )),
                    "{m}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn missing_names_and_loops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical");
        let w = walk(&base.join("a/b")).expect("walk");
        assert!(!w.complete);
        assert_eq!(w.resolved, base.join("a/b"));
        std::os::unix::fs::symlink("loop", base.join("loop")).expect("symlink");
        assert!(matches!(
            walk(&base.join("loop")),
            Err(WalkError::Loop { .. })
        ));
        std::fs::write(base.join("f"), "").expect("write");
        assert!(matches!(
            walk(&base.join("f/x")),
            Err(WalkError::NotADirectory { .. })
        ));
    }
}
