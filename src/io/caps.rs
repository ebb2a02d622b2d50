//! The daemon's own capabilities (`/proc/self/status`, `CapEff`), for the settings that need
//! one the packaged unit does not grant.
//!
//! `recovery.allow-module-reload = true` needs `CAP_SYS_MODULE`. The shipped unit has
//! `ProtectKernelModules=yes` (which also drops `CAP_SYS_MODULE` from the bounding set) and a
//! bounding set without it, so inside the unit the last resort would fail in the middle of a
//! recovery. The package ships the drop-in that grants it
//! (`/usr/share/doc/iser-guard/examples/module-reload.conf`); without it the daemon refuses the
//! setting at start, with the reason, instead. Why not refuse the setting always: for a
//! driver with no other re-creation method, module reload is the documented last resort, and
//! an operator who opts in can grant exactly that; why not lift the sandbox for everyone: the
//! capability to load kernel code is the strongest one, and most hosts never need it.

use std::path::Path;

/// `CAP_SYS_MODULE` (`<linux/capability.h>`).
pub const CAP_SYS_MODULE: u32 = 16;

/// The example drop-in the package ships.
pub const MODULE_RELOAD_DROPIN: &str = "/usr/share/doc/iser-guard/examples/module-reload.conf";

/// Whether `CapEff` in the status text (`/proc/PID/status`) has capability `cap`; `None`
/// when the text has no readable `CapEff` line.
pub fn effective_in(status: &str, cap: u32) -> Option<bool> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    let bits = u64::from_str_radix(hex, 16).ok()?;
    Some(cap < 64 && bits & (1u64 << cap) != 0)
}

/// Why `recovery.allow-module-reload = true` cannot work in this process, if it cannot:
/// reads `PROC_ROOT/self/status`.
pub fn module_reload_refusal(proc_root: &Path) -> Option<String> {
    let path = proc_root.join("self/status");
    let text = std::fs::read_to_string(&path).ok()?;
    match effective_in(&text, CAP_SYS_MODULE) {
        Some(false) => Some(format!(
            "recovery.allow-module-reload is on, but this process has no CAP_SYS_MODULE \
             (the packaged service has ProtectKernelModules=yes and no CAP_SYS_MODULE): the \
             module reload would fail in the middle of a recovery. Install the drop-in \
             {MODULE_RELOAD_DROPIN} in /etc/systemd/system/iser-guard.service.d/ and run \
             `systemctl daemon-reload`, or set allow-module-reload = false"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = "Name:\tiser-guard\nCapInh:\t0000000000000000\nCapPrm:\t0000000000201002\n\
                        CapEff:\t0000000000201002\nCapBnd:\t0000000000201002\n";
    const WITH_MODULE: &str = "CapEff:\t0000000000211002\n";

    #[test]
    fn the_units_set_lacks_sys_module_and_the_dropins_has_it() {
        // CAP_NET_ADMIN (12), CAP_SYS_ADMIN (21), CAP_DAC_OVERRIDE (1): the shipped unit.
        assert_eq!(effective_in(UNIT, CAP_SYS_MODULE), Some(false));
        assert_eq!(effective_in(UNIT, 12), Some(true));
        assert_eq!(effective_in(WITH_MODULE, CAP_SYS_MODULE), Some(true));
        assert_eq!(effective_in("CapEff:\tzz\n", CAP_SYS_MODULE), None);
        assert_eq!(effective_in("", CAP_SYS_MODULE), None);
    }

    #[test]
    fn the_refusal_names_the_dropin() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("self")).unwrap();
        std::fs::write(d.path().join("self/status"), UNIT).unwrap();
        let why = module_reload_refusal(d.path()).expect("refused");
        assert!(why.contains(MODULE_RELOAD_DROPIN), "{why}");
        assert!(why.contains("ProtectKernelModules=yes"), "{why}");
        std::fs::write(d.path().join("self/status"), WITH_MODULE).unwrap();
        assert_eq!(module_reload_refusal(d.path()), None);
        // Unreadable: nothing to say (the reload itself will say what fails).
        assert_eq!(module_reload_refusal(&d.path().join("nowhere")), None);
    }
}
