//! The input sources fed to the driver: kernel-log records, RDMA topology reports, iscsiadm
//! session listings (placed on RDMA ports) and the devices' asynchronous events.

use std::collections::BTreeMap;

use super::Loop;
use crate::core::iscsi::{ParsedListing, SessionDetail};
use crate::core::recovery::{read_record, Trust};
use crate::core::session_map::{place_listing, HostFacts, NoteLevel};
use crate::daemon::observe::{clocks, ISCSIADM, KERNEL_LOG, RDMA_NETLINK};
use crate::daemon::sources::TopologyReport;
use crate::io::kmsg::KmsgEvent;

impl Loop {
    pub(super) fn request_sessions(&mut self) {
        if self.sessions_inflight {
            self.sessions_again = true;
            return;
        }
        self.sessions_inflight = true;
        self.listing_placed = self.driver.topology_known();
        let iscsi = self.ex.iscsi.clone();
        let tx = self.sessions_tx.clone();
        let job = move || {
            let r = iscsi.session_details().map_err(|e| e.to_string());
            let _ = tx.send(r);
        };
        if let Err(full) = self.pool.submit(job) {
            // The next tick asks again.
            tracing::warn!("iSCSI sessions not listed now: {full}");
            self.sessions_inflight = false;
        }
    }

    pub(super) fn on_sessions(&mut self, r: Result<ParsedListing<SessionDetail>, String>) {
        self.sessions_inflight = false;
        // The session poll is the loop's steady tick (the topology reports only changes, and
        // a module loading changes no RDMA device): a late ib_uverbs/rdma_ucm is seen here.
        self.check_verbs_access();
        self.metrics.iscsiadm_listing(r.is_ok());
        // A listing taken before the ports were known placed nothing: the first scan (and
        // a one-shot command) waits for the one asked for when the topology came.
        let placed = self.listing_placed;
        self.driver.sessions_listed(placed, r.is_ok());
        match r {
            Ok(parsed) => {
                self.obs.source_ok(ISCSIADM, clocks(self.now()));
                self.last_sessions_error = None;
                for s in &parsed.skipped {
                    tracing::warn!("iscsiadm output: skipped {s}");
                }
                let addrs = match (self.addresses)() {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("cannot list the host's addresses: {e}");
                        Vec::new()
                    }
                };
                let mut routes = BTreeMap::new();
                for ip in crate::core::session_map::portal_addresses(&parsed.items) {
                    match (self.routes)(ip) {
                        Ok(netdev) => {
                            routes.insert(ip, netdev);
                        }
                        Err(e) => tracing::debug!(%ip, "no route to the portal: {e}"),
                    }
                }
                let facts = HostFacts {
                    cm_ids: &self.cm_ids,
                    routes: &routes,
                    addrs: &addrs,
                    ports: &self.ports,
                };
                // Before the first topology report the ports are unknown: place with a
                // scratch copy so nothing is remembered or warned about from that.
                let mapped = if self.driver.topology_known() {
                    place_listing(&parsed.items, &facts, &mut self.placer)
                } else {
                    place_listing(&parsed.items, &facts, &mut self.placer.clone())
                };
                for (level, note) in &mapped.notes {
                    match level {
                        NoteLevel::Warning => tracing::warn!("{note}"),
                        NoteLevel::Info => tracing::info!("{note}"),
                        NoteLevel::Debug => tracing::debug!("{note}"),
                    }
                }
                if self.driver.topology_known() {
                    for w in &mapped.warnings {
                        tracing::warn!("{w}");
                    }
                }
                let list = mapped.sessions;
                for s in &list {
                    if let Some(ip) = s.local_ip.as_deref().and_then(|ip| ip.parse().ok()) {
                        self.probe_from.insert(s.key.portal.clone(), ip);
                    }
                }
                tracing::debug!(sessions = list.len(), "iscsiadm session snapshot");
                let now = self.now();
                self.driver.handle_sessions(list, now);
            }
            Err(e) => {
                self.obs.source_failed(ISCSIADM, e.clone());
                if self.last_sessions_error.as_deref() != Some(e.as_str()) {
                    tracing::warn!("cannot list iSCSI sessions: {e}");
                }
                self.last_sessions_error = Some(e);
            }
        }
        if std::mem::take(&mut self.sessions_again) {
            self.request_sessions();
        }
    }

    /// One event from a device's asynchronous event channel: a trusted witness (it comes
    /// from the kernel through uverbs).
    pub(super) fn on_async_event(&mut self, ev: crate::core::selftest::AsyncEvent) {
        let now = self.now();
        tracing::info!(event = %ev, "asynchronous event");
        self.obs.async_event(&ev, clocks(now));
        self.driver.handle_observation(
            crate::core::recovery::Observation::AsyncEvent(ev),
            Trust::Trusted,
            now,
        );
    }

    pub(super) fn on_topology(&mut self, t: TopologyReport) {
        self.check_verbs_access();
        match t {
            TopologyReport::Update {
                observations,
                ports,
                cm_ids,
            } => {
                let first = self.driver.topology_reported();
                if !self.netlink_warned {
                    self.obs.source_ok(RDMA_NETLINK, clocks(self.now()));
                }
                let changed = self.ports != ports || self.cm_ids != cm_ids;
                self.ports = ports;
                self.cm_ids = cm_ids;
                let now = self.now();
                for mut obs in observations {
                    if let crate::core::recovery::Observation::Consumers { ports } = &mut obs {
                        let proc_root =
                            crate::compose::reset_config(&self.settings.config).proc_root;
                        crate::io::proc_comm::name_processes(ports, &proc_root);
                        self.metrics.consumers(ports);
                    }
                    tracing::info!(observation = %obs.describe(), "RDMA topology");
                    if let Some(w) = self.witness.as_mut() {
                        w.observe(&obs);
                    }
                    self.driver.handle_observation(obs, Trust::Trusted, now);
                }
                if let Some(w) = self.witness.as_mut() {
                    w.sync(&self.ports.iter().map(|p| p.device.clone()).collect());
                }
                if changed || first {
                    // Sessions may now be placed differently; on the first report, the
                    // listing that completes the first scan (any earlier one was taken
                    // before the ports were known).
                    self.request_sessions();
                }
            }
            TopologyReport::Multipath(read) => {
                let paths = match read {
                    Ok(Some(paths)) => paths,
                    // Not installed: no map to protect.
                    Ok(None) => Vec::new(),
                    Err(why) => {
                        // The engine keeps what it last knew; doctor says why.
                        tracing::warn!("dm-multipath maps not read: {why}");
                        return;
                    }
                };
                self.metrics.multipath(&paths);
                let obs = crate::core::recovery::Observation::MultipathPaths { paths };
                tracing::info!(observation = %obs.describe(), "dm-multipath");
                let now = self.now();
                self.driver.handle_observation(obs, Trust::Trusted, now);
            }
            TopologyReport::NetlinkUnavailable(why) => {
                self.obs.source_failed(RDMA_NETLINK, why.clone());
                self.metrics
                    .source_up(crate::metrics::Source::Netlink, false);
                if !self.netlink_warned {
                    self.netlink_warned = true;
                    tracing::warn!(
                        "{why}; continuing on the kernel log and sysfs alone: stuck GSI QPs are \
                         then seen in kernel-log records only (sysfs has no QP table)"
                    );
                }
            }
        }
    }

    /// The subsystem layer's part of a record: counted, the severe ones in the events ring,
    /// a fatal device error alerted (see src/daemon/kernel_events.rs). Never an action.
    pub(super) fn note_kernel_event(&mut self, r: &crate::core::kmsg::Record, signature: bool) {
        let trusted = r.is_kernel() || self.settings.config.kmsg.trust_userspace_records;
        let now = self.now();
        let nvme = self.driver.engine().nvme_controllers().unwrap_or_default();
        let noted = self
            .kernel_events
            .record_with(r, signature, trusted, now, nvme);
        for (subsystem, device, level) in &noted.counts {
            self.metrics.kernel_event(subsystem, device, level);
        }
        for (subsystem, level, message) in noted.ring {
            self.obs.note(
                crate::core::observe::EventKind::Kernel {
                    subsystem: subsystem.name().to_string(),
                    level: crate::core::signatures::subsystem::level_name(level).to_string(),
                },
                message,
                clocks(now),
            );
        }
        if let Some((what, why, todo)) = noted.alert {
            self.daemon_alert("device-fatal", what, why, todo, now);
        }
    }

    pub(super) fn on_kmsg(&mut self, ev: KmsgEvent) {
        match ev {
            KmsgEvent::Record(r) => {
                self.obs.source_ok(KERNEL_LOG, clocks(self.now()));
                let reading = read_record(&r);
                self.note_kernel_event(&r, reading.is_some());
                let Some(reading) = reading else {
                    self.metrics.kmsg_record(None, true);
                    return;
                };
                let kev = reading.event;
                self.metrics.kmsg_record(
                    Some(kev.signature.kind.name()),
                    reading
                        .observation
                        .as_ref()
                        .is_none_or(|(_, t)| *t == Trust::Trusted),
                );
                let Some((obs, trust)) = reading.observation else {
                    tracing::debug!(
                        kind = kev.signature.kind.name(),
                        "kernel log record with nothing to act on"
                    );
                    return;
                };
                let origin = if trust == Trust::Trusted {
                    "kernel".to_string()
                } else if self.settings.config.kmsg.trust_userspace_records {
                    format!(
                        "userspace (facility {}), trusted by kmsg.trust-userspace-records",
                        r.facility
                    )
                } else {
                    format!("userspace (facility {}), untrusted", r.facility)
                };
                tracing::info!(
                    seq = r.seq,
                    kind = kev.signature.kind.name(),
                    origin = %origin,
                    "kernel log: {}",
                    obs.describe()
                );
                let now = self.now();
                self.driver.handle_observation(obs, trust, now);
            }
            KmsgEvent::Lost {
                count,
                next_seq,
                overrun,
            } => {
                match count {
                    Some(count) => tracing::warn!(
                        count,
                        next_seq,
                        overrun,
                        "kernel-log records were lost; re-checking devices and sessions"
                    ),
                    None => tracing::warn!(
                        next_seq,
                        overrun,
                        "kernel-log records were lost (how many cannot be told); re-checking \
                         devices and sessions"
                    ),
                }
                self.metrics.kmsg_lost(count);
                self.refresh_topology.raise();
                self.request_sessions();
            }
        }
    }
}
