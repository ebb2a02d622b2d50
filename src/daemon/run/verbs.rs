//! The verbs devices' sandbox lockout, as the daemon reports it: checked at start and
//! whenever the listing of `/dev/infiniband` changes (a module loaded after the service
//! started adds `uverbs*` or `rdma_cm`, which the device cgroup then denies). The listing is
//! read at every topology report and every session poll (`poll.iscsi`); the devices are
//! opened only when it changed. Said in status
//! (the `verbs-devices` source), in one alert per lockout, and in the self-test's verdict
//! (the self-test checks on its own, [`crate::io::verbs_access::SandboxAware`]).

use crate::daemon::observe::{clocks, VERBS_DEVICES};
use crate::io::verbs_access::LockoutWatch;

use super::Loop;

/// What the loop keeps for the check.
pub(super) struct VerbsAccess {
    watch: LockoutWatch,
    /// The `/dev/infiniband` names at the last check.
    listing: Option<Vec<String>>,
    /// The lockout alerted (cleared when a check finds none).
    alerted: bool,
}

impl VerbsAccess {
    pub(super) fn new(watch: LockoutWatch) -> Self {
        VerbsAccess {
            watch,
            listing: None,
            alerted: false,
        }
    }
}

impl Loop {
    /// Checks the verbs devices if they changed since the last check; reports a lockout.
    pub(super) fn check_verbs_access(&mut self) {
        let now = self.now();
        let Some(va) = self.verbs_access.as_mut() else {
            return;
        };
        let listing = va.watch.listing();
        if va.listing.as_ref() == Some(&listing) {
            return;
        }
        va.listing = Some(listing);
        match va.watch.check() {
            None => {
                va.alerted = false;
                self.obs.source_ok(VERBS_DEVICES, clocks(now));
            }
            Some(lock) => {
                let why = lock.explain();
                self.obs.source_failed(VERBS_DEVICES, why.clone());
                if va.alerted {
                    return;
                }
                va.alerted = true;
                self.daemon_alert(
                    "verbs-lockout",
                    "the verbs devices are locked out by the service's sandbox (not a port fault)"
                        .to_string(),
                    why,
                    "systemctl restart iser-guard (the modules are loaded now); load \
                     ib_uverbs and rdma_ucm before the service (rdma-load-modules@rdma.service)"
                        .to_string(),
                    now,
                );
            }
        }
    }
}
