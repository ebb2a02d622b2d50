//! The driver-stack conditions of the host ([`crate::core::driver_stack`]), read from sysfs
//! ([`crate::io::sysfs::stack`], the reader doctor uses too) by the topology source each
//! time it reports, and handed to the engine as [`Observation::DriverStack`] only when they
//! changed (the engine alerts once per new condition).

use std::path::{Path, PathBuf};

use crate::core::driver_stack::{detect, StackCondition};
use crate::core::recovery::Observation;
use crate::io::sysfs::SysfsScan;

/// The last list sent.
#[derive(Debug)]
pub struct StackWatch {
    sysfs: PathBuf,
    proc: Option<PathBuf>,
    /// Empty at first: so is the engine's list after a start, so a host with nothing
    /// special sends nothing.
    sent: Vec<StackCondition>,
}

impl StackWatch {
    /// Reads under `sysfs_root`. The kernel release (an `irdma.gen_2` folder is in-tree
    /// from 6.18) is read from `/proc` only on the live host: a fixture tree belongs to no
    /// running kernel.
    pub fn new(sysfs_root: &Path) -> Self {
        StackWatch {
            sysfs: sysfs_root.to_path_buf(),
            proc: (sysfs_root == Path::new("/sys")).then(|| PathBuf::from("/proc")),
            sent: Vec::new(),
        }
    }

    /// The observation for `scan`, when the conditions differ from the last sent.
    pub fn changed(&mut self, scan: &SysfsScan) -> Option<Observation> {
        let facts = crate::io::sysfs::stack::read(&self.sysfs, self.proc.as_deref(), scan);
        let conditions = detect(&facts);
        if self.sent == conditions {
            return None;
        }
        self.sent.clone_from(&conditions);
        Some(Observation::DriverStack { conditions })
    }
}
