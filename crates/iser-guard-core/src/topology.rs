//! The RDMA topology model: devices → ports → QPs, folded from nldev dumps and monitor
//! events, with the change events the recovery logic consumes; and the poller that decides
//! when to dump.
//!
//! Pure: no I/O, no clock (time comes in as [`Instant`]). Inputs are the codec's typed views
//! ([`DeviceInfo`], [`PortInfo`], [`QpEntry`], [`MonitorEvent`]) plus each device's parent
//! identity from sysfs.
//!
//! Devices are followed by what survives their re-creation, never by index: a device that is
//! removed and added again (devlink `enable_roce` toggle, aux unbind/bind, `rdma link
//! delete/add`) gets a new index, and udev renames it back (captures/nldevcap-*: rxe_ini
//! index 0 → 2, netdev ini0 keeps index 3). Matching order: same index (same registration);
//! then parent (PCI function / auxiliary device); then a shared netdev; then the name.
//!
//! The stuck-port signature: the port's GSI QP (lqpn 1, type GSI) in ERR. The kernel's MAD
//! layer never walks it back to RTS; only re-creating the device does.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::nldev::{
    DeviceInfo, IbPortState, MonitorEvent, MonitorEventType, PhysState, PortInfo, QpEntry,
};
use crate::qp::QpState;
use crate::time::Instant;

/// How many removed devices are remembered to recognise their re-creation.
pub(crate) const GHOST_LIMIT: usize = 32;

/// A device's identity in the model, stable across re-creation (assigned on first sight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceKey(pub u64);

/// A device as events name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRef {
    /// The model's identity.
    pub key: DeviceKey,
    /// The kernel's device name (`rocep2s0f0`).
    pub name: String,
    /// The kernel's device index (changes on re-creation).
    pub index: u32,
}

/// A netdev attached to a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netdev {
    /// The netdev's ifindex.
    pub index: Option<u32>,
    /// The netdev's name.
    pub name: Option<String>,
}

/// One port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Port number (1-based).
    pub port: u32,
    /// Logical state.
    pub state: IbPortState,
    /// Physical state.
    pub phys_state: PhysState,
    /// Attached netdev, if any (and visible in our network namespace).
    pub netdev: Option<Netdev>,
}

impl Port {
    fn from_info(p: &PortInfo) -> Port {
        let netdev = (p.netdev_index.is_some() || p.netdev_name.is_some()).then(|| Netdev {
            index: p.netdev_index,
            name: p.netdev_name.clone(),
        });
        Port {
            port: p.port,
            state: p.state,
            phys_state: p.phys_state,
            netdev,
        }
    }

    fn netdev_name(&self) -> Option<&str> {
        self.netdev.as_ref().and_then(|n| n.name.as_deref())
    }
}

/// One device, as the model knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The model's identity.
    pub key: DeviceKey,
    /// The last GET reply (name and index included).
    pub info: DeviceInfo,
    /// The parent identity from sysfs (`pci:0000:02:00.0`), `None` for virtual devices.
    pub parent: Option<String>,
    /// Ports by number.
    pub ports: Vec<Port>,
    /// The QP table of the last successful dump, `None` before the first one.
    pub qps: Option<Vec<QpEntry>>,
    /// Why the last QP dump of this device failed, if it did.
    pub qp_error: Option<String>,
}

impl Device {
    /// The reference events use.
    pub fn reference(&self) -> DeviceRef {
        DeviceRef {
            key: self.key,
            name: self.info.name.clone(),
            index: self.info.index,
        }
    }

    /// The port with this number.
    pub fn port(&self, n: u32) -> Option<&Port> {
        self.ports.iter().find(|p| p.port == n)
    }

    /// The port a QP belongs to: its PORT_INDEX, or the only port of a one-port device.
    pub fn qp_port(&self, qp: &QpEntry) -> Option<u32> {
        qp.port.or(match self.ports.as_slice() {
            [only] => Some(only.port),
            _ => None,
        })
    }
}

/// What one device looked like in a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceObservation {
    /// Its GET reply.
    pub info: DeviceInfo,
    /// Parent identity from sysfs (the binary's `io::sysfs::Parent::identity`).
    pub parent: Option<String>,
    /// Its PORT_GET replies.
    pub ports: Vec<PortInfo>,
    /// Its RES_QP_GET entries, or why they could not be read.
    pub qps: Result<Vec<QpEntry>, String>,
}

/// A full dump: every device the kernel listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The devices.
    pub devices: Vec<DeviceObservation>,
}

/// Why a new registration was recognised as an earlier device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedBy {
    /// Same parent PCI function or auxiliary device.
    Parent,
    /// A port carries the same netdev.
    Netdev,
    /// Same device name (udev renamed it back), nothing stronger known.
    Name,
}

/// The evidence for a stuck port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckPort {
    /// The device.
    pub device: DeviceRef,
    /// The port.
    pub port: u32,
    /// The port's netdev, if known.
    pub netdev: Option<String>,
    /// The GSI QP as the kernel reported it (lqpn 1, type GSI, state ERR).
    pub qp: QpEntry,
    /// When this was first seen.
    pub since: Instant,
    /// When it was last confirmed.
    pub last_seen: Instant,
    /// How many dumps showed it.
    pub observations: u32,
}

/// Why a stuck port is no longer stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnstuckReason {
    /// The GSI QP left ERR (a re-created device has a fresh one).
    QpRecovered,
    /// The device's GSI QP is no longer listed.
    QpGone,
    /// The device went away.
    DeviceGone,
}

/// A change the model noticed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyEvent {
    /// A device not seen before.
    DeviceAppeared {
        /// The device.
        device: DeviceRef,
    },
    /// A device is gone (unregistered, or missing from a dump).
    DeviceDisappeared {
        /// The device as last seen.
        device: DeviceRef,
    },
    /// A device came back under a new index: it was re-created.
    DeviceRecreated {
        /// The device now.
        device: DeviceRef,
        /// Its index before.
        old_index: u32,
        /// Its name before (udev may not have renamed it back yet).
        old_name: String,
        /// How it was recognised.
        matched_by: MatchedBy,
    },
    /// Same registration, new name.
    DeviceRenamed {
        /// The device now.
        device: DeviceRef,
        /// The name before.
        old_name: String,
    },
    /// A port left ACTIVE (or was first seen not ACTIVE).
    PortDown {
        /// The device.
        device: DeviceRef,
        /// The port.
        port: u32,
        /// Its logical state now.
        state: IbPortState,
        /// Its physical state now.
        phys_state: PhysState,
    },
    /// A port became ACTIVE.
    PortActive {
        /// The device.
        device: DeviceRef,
        /// The port.
        port: u32,
    },
    /// A QP entered ERR or SQE.
    QpError {
        /// The device.
        device: DeviceRef,
        /// The QP now.
        qp: QpEntry,
        /// Its state in the previous dump, if it was listed.
        previous: Option<QpState>,
    },
    /// The GSI QP of a port is in ERR: the port cannot make new RDMA connections.
    PortStuck(StuckPort),
    /// A port's GSI QP is listed in RTS and was not in the previous table of this
    /// registration: a device seen for the first time (a restarted daemon verifies a
    /// re-creation that was in flight on it), a re-created device's fresh QP 1
    /// (captures/nldevcap-k612: rxe_ini re-added, `lqpn 1 type GSI state RTS`), or one
    /// listed late. A port coming out of ERR is [`TopologyEvent::PortUnstuck`] instead.
    GsiReady {
        /// The device.
        device: DeviceRef,
        /// The port.
        port: u32,
    },
    /// A port reported stuck is no longer.
    PortUnstuck {
        /// The device.
        device: DeviceRef,
        /// The port.
        port: u32,
        /// Why.
        reason: UnstuckReason,
    },
}

/// The model.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    devices: Vec<Device>,
    /// Removed devices kept to recognise their re-creation (newest last).
    ghosts: Vec<Device>,
    stuck: BTreeMap<(DeviceKey, u32), StuckPort>,
    /// Ports whose GSI QP the last dump listed in RTS.
    gsi_rts: std::collections::BTreeSet<(DeviceKey, u32)>,
    next_key: u64,
}

impl Topology {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Live devices, in kernel index order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The live device with this name.
    pub fn device(&self, name: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.info.name == name)
    }

    /// Ports currently stuck, with their evidence.
    pub fn stuck_ports(&self) -> impl Iterator<Item = &StuckPort> {
        self.stuck.values()
    }

    /// Nothing to watch closely: every device's QP table was read and holds no QP in ERR or
    /// SQE, no port is stuck, and every port is active (see [`Poller::set_quiet`]).
    pub fn quiet(&self) -> bool {
        self.stuck.is_empty()
            && self.devices.iter().all(|d| {
                d.qp_error.is_none()
                    && d.ports.iter().all(|p| p.state == IbPortState::Active)
                    && d.qps.as_ref().is_some_and(|qps| {
                        qps.iter()
                            .all(|q| !matches!(q.state, QpState::Err | QpState::Sqe))
                    })
            })
    }

    fn new_key(&mut self) -> DeviceKey {
        self.next_key += 1;
        DeviceKey(self.next_key)
    }

    /// Folds a full dump into the model and returns what changed.
    pub fn apply_snapshot(&mut self, snapshot: Snapshot, now: Instant) -> Vec<TopologyEvent> {
        let mut events = Vec::new();
        let mut old: Vec<Option<Device>> = std::mem::take(&mut self.devices)
            .into_iter()
            .map(Some)
            .collect();
        let mut ghosts: Vec<Option<Device>> = std::mem::take(&mut self.ghosts)
            .into_iter()
            .map(Some)
            .collect();
        let obs = snapshot.devices;
        let mut prev: Vec<Option<(Device, Option<MatchedBy>)>> = vec![None; obs.len()];

        // Pass 1: same index = same registration.
        for (i, o) in obs.iter().enumerate() {
            if let Some(slot) = old
                .iter_mut()
                .find(|d| d.as_ref().is_some_and(|d| d.info.index == o.info.index))
            {
                prev[i] = slot.take().map(|d| (d, None));
            }
        }
        // Passes 2-4: a new registration of an earlier device (live or removed).
        for by in [MatchedBy::Parent, MatchedBy::Netdev, MatchedBy::Name] {
            for (i, o) in obs.iter().enumerate() {
                if prev[i].is_some() {
                    continue;
                }
                let hit = |d: &Option<Device>| d.as_ref().is_some_and(|d| same_device(d, o, by));
                let slot = match old.iter_mut().find(|d| hit(d)) {
                    Some(s) => Some(s),
                    None => ghosts.iter_mut().rev().find(|d| hit(d)),
                };
                if let Some(slot) = slot {
                    prev[i] = slot.take().map(|d| (d, Some(by)));
                }
            }
        }

        // Whatever is left of the old live devices is gone.
        for d in old.into_iter().flatten() {
            self.device_gone(d, &mut events);
        }
        self.ghosts.extend(ghosts.into_iter().flatten());

        let mut devices = Vec::with_capacity(obs.len());
        let mut recreated_keys = Vec::new();
        for (o, prev) in obs.into_iter().zip(prev) {
            let (key, before) = match prev {
                Some((d, matched)) => {
                    let reference = DeviceRef {
                        key: d.key,
                        name: o.info.name.clone(),
                        index: o.info.index,
                    };
                    match matched {
                        None if d.info.name != o.info.name => {
                            events.push(TopologyEvent::DeviceRenamed {
                                device: reference,
                                old_name: d.info.name.clone(),
                            });
                        }
                        None => {}
                        Some(by) => events.push(TopologyEvent::DeviceRecreated {
                            device: reference,
                            old_index: d.info.index,
                            old_name: d.info.name.clone(),
                            matched_by: by,
                        }),
                    }
                    // A re-created device starts with a fresh QP table.
                    let recreated = matched.is_some();
                    if recreated {
                        recreated_keys.push(d.key);
                    }
                    (d.key, Some((d, recreated)))
                }
                None => {
                    let key = self.new_key();
                    events.push(TopologyEvent::DeviceAppeared {
                        device: DeviceRef {
                            key,
                            name: o.info.name.clone(),
                            index: o.info.index,
                        },
                    });
                    (key, None)
                }
            };
            let mut dev = Device {
                key,
                info: o.info,
                parent: o.parent,
                ports: o.ports.iter().map(Port::from_info).collect(),
                qps: None,
                qp_error: None,
            };
            dev.ports.sort_by_key(|p| p.port);
            let (old_ports, old_qps): (&[Port], Option<&[QpEntry]>) = match &before {
                Some((d, recreated)) => (
                    &d.ports,
                    if *recreated {
                        Some(&[][..])
                    } else {
                        d.qps.as_deref()
                    },
                ),
                None => (&[], None),
            };
            port_changes(&dev, old_ports, &mut events);
            match o.qps {
                Ok(qps) => {
                    qp_changes(&dev, old_qps, &qps, &mut events);
                    dev.qps = Some(qps);
                }
                Err(reason) => {
                    // Keep the last known table; no QP events without fresh data.
                    dev.qps = before
                        .as_ref()
                        .and_then(|(d, r)| (!r).then(|| d.qps.clone()))
                        .flatten();
                    dev.qp_error = Some(reason);
                }
            }
            devices.push(dev);
        }
        devices.sort_by_key(|d| d.info.index);
        self.devices = devices;
        self.trim_ghosts();
        self.update_stuck(now, &recreated_keys, &mut events);
        events
    }

    fn device_gone(&mut self, d: Device, events: &mut Vec<TopologyEvent>) {
        events.push(TopologyEvent::DeviceDisappeared {
            device: d.reference(),
        });
        self.ghosts.push(d);
    }

    fn trim_ghosts(&mut self) {
        let excess = self.ghosts.len().saturating_sub(GHOST_LIMIT);
        self.ghosts.drain(..excess);
    }

    /// Recomputes the stuck ports from the QP tables. A device in `recreated` has a new GSI
    /// QP: if that one is in ERR too, it is a new episode (a fresh [`TopologyEvent::PortStuck`]),
    /// which tells the recovery logic that the re-creation did not help.
    fn update_stuck(
        &mut self,
        now: Instant,
        recreated: &[DeviceKey],
        events: &mut Vec<TopologyEvent>,
    ) {
        let mut current: BTreeMap<(DeviceKey, u32), (DeviceRef, Option<String>, QpEntry)> =
            BTreeMap::new();
        let mut gsi_listed: Vec<(DeviceKey, u32)> = Vec::new();
        let mut rts: std::collections::BTreeSet<(DeviceKey, u32)> = Default::default();
        let mut ready: Vec<(DeviceRef, u32)> = Vec::new();
        for d in &self.devices {
            for qp in d.qps.iter().flatten().filter(|q| q.is_gsi()) {
                let Some(port) = d.qp_port(qp) else { continue };
                gsi_listed.push((d.key, port));
                if qp.state == QpState::Rts {
                    let k = (d.key, port);
                    let fresh = recreated.contains(&d.key) || !self.gsi_rts.contains(&k);
                    // Out of ERR: PortUnstuck says it (below).
                    if fresh && !self.stuck.contains_key(&k) {
                        ready.push((d.reference(), port));
                    }
                    rts.insert(k);
                }
                if qp.state == QpState::Err {
                    let netdev = d
                        .port(port)
                        .and_then(|p| p.netdev_name())
                        .map(str::to_string);
                    current.insert((d.key, port), (d.reference(), netdev, qp.clone()));
                }
            }
        }
        self.gsi_rts = rts;
        events.extend(
            ready
                .into_iter()
                .map(|(device, port)| TopologyEvent::GsiReady { device, port }),
        );
        let before = std::mem::take(&mut self.stuck);
        for (k, old) in &before {
            if current.contains_key(k) {
                continue;
            }
            let live = self.devices.iter().find(|d| d.key == k.0);
            let reason = match live {
                None => UnstuckReason::DeviceGone,
                Some(_) if gsi_listed.contains(k) => UnstuckReason::QpRecovered,
                Some(_) => UnstuckReason::QpGone,
            };
            let device = live.map_or_else(|| old.device.clone(), Device::reference);
            events.push(TopologyEvent::PortUnstuck {
                device,
                port: k.1,
                reason,
            });
        }
        for (k, (device, netdev, qp)) in current {
            let previous = before.get(&k).filter(|_| !recreated.contains(&k.0));
            let entry = match previous {
                Some(old) => StuckPort {
                    device,
                    netdev,
                    qp,
                    last_seen: now,
                    observations: old.observations.saturating_add(1),
                    ..old.clone()
                },
                None => {
                    let s = StuckPort {
                        device,
                        port: k.1,
                        netdev,
                        qp,
                        since: now,
                        last_seen: now,
                        observations: 1,
                    };
                    events.push(TopologyEvent::PortStuck(s.clone()));
                    s
                }
            };
            self.stuck.insert(k, entry);
        }
    }

    /// Folds one monitor event (kernels from 6.12). Events carry no port or QP state, so the
    /// caller should follow any event with a dump (see [`Poller::on_monitor_event`]).
    pub fn apply_monitor_event(&mut self, ev: &MonitorEvent, now: Instant) -> Vec<TopologyEvent> {
        let mut events = Vec::new();
        let live = |devs: &[Device], idx: Option<u32>| {
            idx.and_then(|i| devs.iter().position(|d| d.info.index == i))
        };
        match ev.event {
            MonitorEventType::Register => {
                let (Some(index), Some(name)) = (ev.dev_index, ev.dev_name.clone()) else {
                    return events;
                };
                if live(&self.devices, Some(index)).is_some() {
                    return events;
                }
                let info = minimal_info(index, name.clone());
                if let Some(g) = self.ghosts.iter().rposition(|g| g.info.name == name) {
                    let ghost = self.ghosts.remove(g);
                    events.push(TopologyEvent::DeviceRecreated {
                        device: DeviceRef {
                            key: ghost.key,
                            name,
                            index,
                        },
                        old_index: ghost.info.index,
                        old_name: ghost.info.name.clone(),
                        matched_by: MatchedBy::Name,
                    });
                    self.devices.push(Device {
                        info,
                        ports: Vec::new(),
                        qps: None,
                        qp_error: None,
                        ..ghost
                    });
                } else {
                    let key = self.new_key();
                    events.push(TopologyEvent::DeviceAppeared {
                        device: DeviceRef { key, name, index },
                    });
                    self.devices.push(Device {
                        key,
                        info,
                        parent: None,
                        ports: Vec::new(),
                        qps: None,
                        qp_error: None,
                    });
                }
                self.devices.sort_by_key(|d| d.info.index);
            }
            MonitorEventType::Unregister => {
                if let Some(i) = live(&self.devices, ev.dev_index) {
                    let d = self.devices.remove(i);
                    self.device_gone(d, &mut events);
                    self.trim_ghosts();
                }
            }
            MonitorEventType::Rename => {
                if let (Some(i), Some(name)) = (live(&self.devices, ev.dev_index), &ev.dev_name) {
                    if let Some(d) = self.devices.get_mut(i) {
                        if &d.info.name != name {
                            let old_name = std::mem::replace(&mut d.info.name, name.clone());
                            events.push(TopologyEvent::DeviceRenamed {
                                device: d.reference(),
                                old_name,
                            });
                        }
                    }
                }
            }
            MonitorEventType::NetdevAttach | MonitorEventType::NetdevDetach => {
                let attach = ev.event == MonitorEventType::NetdevAttach;
                if let Some(i) = live(&self.devices, ev.dev_index) {
                    if let Some(d) = self.devices.get_mut(i) {
                        if let Some(p) = d.ports.iter_mut().find(|p| Some(p.port) == ev.port) {
                            p.netdev = attach.then(|| Netdev {
                                index: ev.netdev_index,
                                name: ev.netdev_name.clone(),
                            });
                        }
                    }
                }
            }
            MonitorEventType::NetdevRename => {
                for p in self.devices.iter_mut().flat_map(|d| d.ports.iter_mut()) {
                    if let Some(n) = p.netdev.as_mut() {
                        if n.index.is_some() && n.index == ev.netdev_index {
                            n.name.clone_from(&ev.netdev_name);
                        }
                    }
                }
            }
            MonitorEventType::Other(_) => {}
        }
        self.update_stuck(now, &[], &mut events);
        events
    }
}

/// A GET reply's worth of information when only an event named the device.
fn minimal_info(index: u32, name: String) -> DeviceInfo {
    DeviceInfo {
        index,
        name,
        port_count: 0,
        cap_flags: None,
        fw_version: None,
        node_guid: None,
        sys_image_guid: None,
        node_type: None,
        protocol: None,
        dim: None,
        name_assign_type: None,
        dev_type: None,
        parent_name: None,
    }
}

fn same_device(d: &Device, o: &DeviceObservation, by: MatchedBy) -> bool {
    match by {
        MatchedBy::Parent => d.parent.is_some() && d.parent == o.parent,
        // The netdev's ifindex survives a netdev rename, its name a netdev re-creation.
        MatchedBy::Netdev => o.ports.iter().any(|p| {
            d.ports.iter().filter_map(|q| q.netdev.as_ref()).any(|n| {
                (p.netdev_index.is_some() && n.index == p.netdev_index)
                    || (p.netdev_name.is_some() && n.name == p.netdev_name)
            })
        }),
        // By name only when neither side has a parent that says otherwise.
        MatchedBy::Name => {
            d.info.name == o.info.name
                && (d.parent.is_none() || o.parent.is_none() || d.parent == o.parent)
        }
    }
}

fn is_active(s: IbPortState) -> bool {
    s == IbPortState::Active
}

fn port_changes(dev: &Device, old: &[Port], events: &mut Vec<TopologyEvent>) {
    for p in &dev.ports {
        let before = old.iter().find(|o| o.port == p.port).map(|o| o.state);
        let now_active = is_active(p.state);
        match (before.map(is_active), now_active) {
            (Some(true), false) | (None, false) => events.push(TopologyEvent::PortDown {
                device: dev.reference(),
                port: p.port,
                state: p.state,
                phys_state: p.phys_state,
            }),
            (Some(false), true) => events.push(TopologyEvent::PortActive {
                device: dev.reference(),
                port: p.port,
            }),
            _ => {}
        }
    }
}

fn qp_changes(
    dev: &Device,
    old: Option<&[QpEntry]>,
    new: &[QpEntry],
    events: &mut Vec<TopologyEvent>,
) {
    // Only QPs in ERR or SQE need their previous state; index the old table once so a dump
    // with many failed QPs stays linear.
    let mut before: Option<std::collections::HashMap<u32, QpState>> = None;
    for qp in new {
        if !matches!(qp.state, QpState::Err | QpState::Sqe) {
            continue;
        }
        let index = before.get_or_insert_with(|| {
            old.unwrap_or_default()
                .iter()
                .map(|q| (q.lqpn, q.state))
                .collect()
        });
        let previous = index.get(&qp.lqpn).copied();
        if previous != Some(qp.state) {
            events.push(TopologyEvent::QpError {
                device: dev.reference(),
                qp: qp.clone(),
                previous,
            });
        }
    }
}

/// Whether the kernel sends device events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonitorSupport {
    /// SYS_GET not answered yet.
    Unknown,
    /// SYS_GET said MONITOR_MODE = 1 (kernel ≥ 6.12).
    Supported,
    /// Older kernel, or the event socket failed.
    Unsupported,
}

/// Why a dump is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpReason {
    /// The first dump.
    Initial,
    /// The poll interval elapsed (the safety net, always on).
    Interval,
    /// A device event arrived.
    Event,
    /// The event socket overflowed: events were lost.
    Resync,
}

impl std::fmt::Display for DumpReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DumpReason::Initial => "first dump",
            DumpReason::Interval => "poll interval",
            DumpReason::Event => "device event",
            DumpReason::Resync => "device events were lost",
        })
    }
}

/// What the poller wants done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollAction {
    /// Ask SYS_GET whether monitor events exist.
    QuerySystem,
    /// Open the event socket.
    SubscribeMonitor,
    /// Dump devices, ports and QPs and fold them with [`Topology::apply_snapshot`].
    Dump(DumpReason),
}

/// Decides when to dump. Polling always runs (monitor events carry no port or QP state);
/// events and overflows only bring the next dump forward.
#[derive(Debug, Clone)]
pub struct Poller {
    interval: Duration,
    debounce: Duration,
    monitor: MonitorSupport,
    next_dump: Instant,
    reason: DumpReason,
    in_flight: bool,
    quiet: bool,
    quiet_factor: u32,
}

impl Poller {
    /// Delay between a device event and the dump it triggers, so a burst (REGISTER then
    /// NETDEV_ATTACH, or a driver reload) costs one dump.
    pub(crate) const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(250);

    /// A poller dumping every `interval` (config `poll.netlink`, default 5 s). The first
    /// dump is due at `now`.
    pub fn new(interval: Duration, now: Instant) -> Self {
        Poller {
            interval: interval.max(Duration::from_millis(100)),
            debounce: Self::DEFAULT_DEBOUNCE,
            monitor: MonitorSupport::Unknown,
            next_dump: now,
            reason: DumpReason::Initial,
            in_flight: false,
            quiet: false,
            quiet_factor: 1,
        }
    }

    /// How many intervals apart the daemon's dumps are while the host is quiet
    /// ([`Poller::set_quiet`], [`Poller::set_quiet_factor`]).
    pub const QUIET_FACTOR: u32 = 2;

    /// Dumps `factor` intervals apart while quiet (1, the default: always one interval).
    pub fn set_quiet_factor(&mut self, factor: u32) {
        self.quiet_factor = factor.max(1);
    }

    /// Whether the last dump showed nothing to watch closely ([`Topology::quiet`]). While it
    /// is, and device events are subscribed (a device that goes, comes or is re-created
    /// brings the dump forward), the next dump is due the quiet factor's intervals later
    /// (the daemon: [`Poller::QUIET_FACTOR`], so an idle host wakes half as often for dumps). The first QP in ERR or SQE, port
    /// not active or failed dump puts the interval back; an engine request
    /// ([`Poller::on_resync_needed`]) dumps at once either way. The cost: a GSI QP that
    /// breaks with nothing else happening (no kernel-log record, no event) is seen up to
    /// one interval later.
    pub fn set_quiet(&mut self, quiet: bool) {
        self.quiet = quiet;
    }

    /// The interval until the next dump after one finished.
    fn next_interval(&self) -> Duration {
        if self.quiet && self.monitor == MonitorSupport::Supported {
            self.interval * self.quiet_factor
        } else {
            self.interval
        }
    }

    /// What the first steps are: ask the kernel about monitor support.
    pub fn start(&self) -> Vec<PollAction> {
        vec![PollAction::QuerySystem]
    }

    /// Monitor support as known.
    pub fn monitor(&self) -> MonitorSupport {
        self.monitor
    }

    /// The SYS_GET answer (or its failure: `supports_monitor = false`).
    pub fn on_system_info(&mut self, supports_monitor: bool) -> Vec<PollAction> {
        if supports_monitor {
            self.monitor = MonitorSupport::Supported;
            vec![PollAction::SubscribeMonitor]
        } else {
            self.monitor = MonitorSupport::Unsupported;
            Vec::new()
        }
    }

    /// The event socket failed: rely on polling alone.
    pub fn on_monitor_failed(&mut self) {
        self.monitor = MonitorSupport::Unsupported;
    }

    /// A device event arrived: dump soon.
    pub fn on_monitor_event(&mut self, now: Instant) {
        self.bring_forward(now.plus(self.debounce), DumpReason::Event);
    }

    /// The event socket overflowed: dump now.
    pub fn on_resync_needed(&mut self, now: Instant) {
        self.bring_forward(now, DumpReason::Resync);
    }

    fn bring_forward(&mut self, at: Instant, reason: DumpReason) {
        if at < self.next_dump {
            self.next_dump = at;
            self.reason = reason;
        } else if reason == DumpReason::Resync && self.reason != DumpReason::Initial {
            self.reason = reason;
        }
    }

    /// The dump started by [`Poller::poll`] finished (successfully or not); the next one is
    /// due one interval later.
    pub fn on_dump_done(&mut self, now: Instant) {
        self.in_flight = false;
        self.next_dump = now.plus(self.next_interval());
        self.reason = DumpReason::Interval;
    }

    /// The dump to start now, if one is due and none is running.
    pub fn poll(&mut self, now: Instant) -> Option<PollAction> {
        if self.in_flight || now < self.next_dump {
            return None;
        }
        self.in_flight = true;
        Some(PollAction::Dump(self.reason))
    }

    /// When [`Poller::poll`] should be called next (`None` while a dump runs).
    pub fn next_deadline(&self) -> Option<Instant> {
        (!self.in_flight).then_some(self.next_dump)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nldev::QpTypeOrRaw;
    use crate::qp::QpType;

    fn info(index: u32, name: &str) -> DeviceInfo {
        DeviceInfo {
            port_count: 1,
            ..minimal_info(index, name.to_string())
        }
    }

    fn port(index: u32, name: &str, state: IbPortState, netdev: Option<(u32, &str)>) -> PortInfo {
        PortInfo {
            dev_index: index,
            dev_name: name.into(),
            port: 1,
            state,
            phys_state: if state == IbPortState::Active {
                PhysState::LinkUp
            } else {
                PhysState::Disabled
            },
            netdev_index: netdev.map(|n| n.0),
            netdev_name: netdev.map(|n| n.1.to_string()),
            cap_flags: None,
            subnet_prefix: None,
            lid: None,
            sm_lid: None,
            lmc: None,
        }
    }

    fn qp(index: u32, name: &str, lqpn: u32, t: QpType, state: QpState) -> QpEntry {
        QpEntry {
            dev_index: index,
            dev_name: name.into(),
            port: Some(1),
            lqpn,
            rqpn: None,
            qp_type: QpTypeOrRaw::Known(t),
            state,
            pid: None,
            kern_name: Some(
                if t == QpType::Gsi {
                    "ib_core"
                } else {
                    "rdma_cm"
                }
                .into(),
            ),
            sq_psn: Some(5),
            rq_psn: None,
            path_mig_state: None,
            pdn: None,
        }
    }

    /// One single-port device: name, index, parent, netdev, port state, GSI state, RC state.
    fn obs(
        index: u32,
        name: &str,
        parent: Option<&str>,
        netdev: Option<(u32, &str)>,
        state: IbPortState,
        gsi: QpState,
        rc: Option<QpState>,
    ) -> DeviceObservation {
        let mut qps = vec![qp(index, name, 1, QpType::Gsi, gsi)];
        if let Some(rc) = rc {
            qps.push(qp(index, name, 18, QpType::Rc, rc));
        }
        DeviceObservation {
            info: info(index, name),
            parent: parent.map(str::to_string),
            ports: vec![port(index, name, state, netdev)],
            qps: Ok(qps),
        }
    }

    fn snap(devices: Vec<DeviceObservation>) -> Snapshot {
        Snapshot { devices }
    }

    const ACTIVE: IbPortState = IbPortState::Active;
    const E810: Option<&str> = Some("pci:0000:02:00.0");

    #[test]
    fn a_gsi_qp_in_err_is_a_stuck_port_of_the_right_device_and_port() {
        let mut t = Topology::new();
        let ini = || {
            obs(
                0,
                "rxe_ini",
                None,
                Some((3, "ini0")),
                ACTIVE,
                QpState::Rts,
                None,
            )
        };
        let ev = t.apply_snapshot(
            snap(vec![
                ini(),
                obs(
                    1,
                    "rocep2s0f0",
                    E810,
                    Some((5, "enp2s0f0")),
                    ACTIVE,
                    QpState::Err,
                    None,
                ),
            ]),
            Instant(1_000),
        );
        let stuck: Vec<_> = ev
            .iter()
            .filter_map(|e| match e {
                TopologyEvent::PortStuck(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(stuck.len(), 1, "{ev:#?}");
        let s = stuck[0];
        assert_eq!(
            (s.device.name.as_str(), s.device.index, s.port),
            ("rocep2s0f0", 1, 1)
        );
        assert_eq!(s.netdev.as_deref(), Some("enp2s0f0"));
        assert_eq!((s.qp.lqpn, s.qp.state), (1, QpState::Err));
        assert_eq!(s.qp.kern_name.as_deref(), Some("ib_core"));
        assert_eq!(s.since, Instant(1_000));
        // The GSI QP in ERR is also a QP error event.
        assert!(ev.iter().any(|e| matches!(e,
            TopologyEvent::QpError { qp, previous: None, .. } if qp.lqpn == 1)));

        // Still stuck: no new event, the evidence accumulates.
        let ev = t.apply_snapshot(
            snap(vec![
                ini(),
                obs(
                    1,
                    "rocep2s0f0",
                    E810,
                    Some((5, "enp2s0f0")),
                    ACTIVE,
                    QpState::Err,
                    None,
                ),
            ]),
            Instant(6_000),
        );
        assert_eq!(ev, vec![]);
        let s = t.stuck_ports().next().unwrap();
        assert_eq!(
            (s.since, s.last_seen, s.observations),
            (Instant(1_000), Instant(6_000), 2)
        );

        // GSI back in RTS.
        let ev = t.apply_snapshot(
            snap(vec![
                ini(),
                obs(
                    1,
                    "rocep2s0f0",
                    E810,
                    Some((5, "enp2s0f0")),
                    ACTIVE,
                    QpState::Rts,
                    None,
                ),
            ]),
            Instant(11_000),
        );
        assert!(matches!(ev.as_slice(), [TopologyEvent::PortUnstuck {
            port: 1, reason: UnstuckReason::QpRecovered, device }] if device.name == "rocep2s0f0"));
        assert_eq!(t.stuck_ports().count(), 0);
    }

    #[test]
    fn a_recreated_rxe_device_is_followed_by_its_netdev_not_its_index() {
        // captures/nldevcap-k612: rxe_ini index 0, deleted, re-added as index 2; ini0 keeps 3.
        let mut t = Topology::new();
        let tgt = || {
            obs(
                1,
                "rxe_tgt",
                None,
                Some((2, "tgt0")),
                ACTIVE,
                QpState::Rts,
                None,
            )
        };
        let ev = t.apply_snapshot(
            snap(vec![
                obs(
                    0,
                    "rxe_ini",
                    None,
                    Some((3, "ini0")),
                    ACTIVE,
                    QpState::Rts,
                    None,
                ),
                tgt(),
            ]),
            Instant(0),
        );
        // Both devices and their QP 1 in RTS.
        assert_eq!(ev.len(), 4);
        let key = t.device("rxe_ini").unwrap().key;

        let ev = t.apply_snapshot(snap(vec![tgt()]), Instant(5_000));
        assert!(
            matches!(ev.as_slice(), [TopologyEvent::DeviceDisappeared { device }]
            if device.name == "rxe_ini" && device.index == 0)
        );

        let ev = t.apply_snapshot(
            snap(vec![
                tgt(),
                obs(
                    2,
                    "rxe_ini",
                    None,
                    Some((3, "ini0")),
                    ACTIVE,
                    QpState::Rts,
                    None,
                ),
            ]),
            Instant(10_000),
        );
        let now = DeviceRef {
            key,
            name: "rxe_ini".into(),
            index: 2,
        };
        // The re-created device's fresh QP 1 in RTS is news too (the engine verifies the
        // re-creation on it), though QP 1 was never stuck.
        assert_eq!(
            ev,
            vec![
                TopologyEvent::DeviceRecreated {
                    device: now.clone(),
                    old_index: 0,
                    old_name: "rxe_ini".into(),
                    matched_by: MatchedBy::Netdev,
                },
                TopologyEvent::GsiReady {
                    device: now,
                    port: 1
                }
            ]
        );
        assert_eq!(t.device("rxe_ini").unwrap().key, key);
    }

    #[test]
    fn a_recreated_device_whose_netdev_was_renamed_is_followed_by_the_netdev_index() {
        let mut t = Topology::new();
        t.apply_snapshot(
            snap(vec![obs(
                0,
                "rxe_ini",
                None,
                Some((3, "ini0")),
                ACTIVE,
                QpState::Rts,
                None,
            )]),
            Instant(0),
        );
        let key = t.device("rxe_ini").unwrap().key;
        // Re-added under another name on the renamed netdev (same ifindex 3).
        let ev = t.apply_snapshot(
            snap(vec![obs(
                2,
                "rxe_new",
                None,
                Some((3, "ini0x")),
                ACTIVE,
                QpState::Rts,
                None,
            )]),
            Instant(1),
        );
        assert!(matches!(ev.as_slice(), [TopologyEvent::DeviceRecreated {
            device, old_index: 0, matched_by: MatchedBy::Netdev, .. },
            TopologyEvent::GsiReady { port: 1, .. }] if device.key == key));
    }

    #[test]
    fn a_gsi_qp_is_ready_at_first_sight_and_when_listed_late_once_each() {
        let mut t = Topology::new();
        let mut ini = obs(
            0,
            "rxe_ini",
            None,
            Some((3, "ini0")),
            ACTIVE,
            QpState::Rts,
            None,
        );
        // First sight (a restarted daemon): the device and its QP 1 in RTS.
        let ev = t.apply_snapshot(snap(vec![ini.clone()]), Instant(0));
        assert!(matches!(
            ev.as_slice(),
            [
                TopologyEvent::DeviceAppeared { .. },
                TopologyEvent::GsiReady { port: 1, .. }
            ]
        ));
        // Re-created, listed before the MAD layer made its QP 1 (registration races the
        // dump): no GSI yet, then the GSI in RTS one dump later.
        let ev = t.apply_snapshot(snap(vec![]), Instant(1));
        assert!(matches!(
            ev.as_slice(),
            [TopologyEvent::DeviceDisappeared { .. }]
        ));
        ini.info.index = 2;
        let no_gsi = DeviceObservation {
            qps: Ok(Vec::new()),
            ..ini.clone()
        };
        let ev = t.apply_snapshot(snap(vec![no_gsi]), Instant(2));
        assert!(matches!(
            ev.as_slice(),
            [TopologyEvent::DeviceRecreated { .. }]
        ));
        let ini2 = obs(
            2,
            "rxe_ini",
            None,
            Some((3, "ini0")),
            ACTIVE,
            QpState::Rts,
            None,
        );
        let ev = t.apply_snapshot(snap(vec![ini2.clone()]), Instant(3));
        assert!(
            matches!(ev.as_slice(), [TopologyEvent::GsiReady { port: 1, device }] if device.index == 2),
            "{ev:?}"
        );
        // Still RTS: nothing new.
        assert!(t.apply_snapshot(snap(vec![ini2]), Instant(4)).is_empty());
    }

    #[test]
    fn a_recreated_pci_device_is_followed_by_parent_through_a_temporary_name() {
        let mut t = Topology::new();
        let nd = Some((5, "enp2s0f0"));
        t.apply_snapshot(
            snap(vec![obs(
                0,
                "rocep2s0f0",
                E810,
                nd,
                ACTIVE,
                QpState::Err,
                None,
            )]),
            Instant(0),
        );
        let key = t.device("rocep2s0f0").unwrap().key;
        assert_eq!(t.stuck_ports().count(), 1);

        // Re-created (devlink enable_roce toggle) before udev renamed it back; its netdev is
        // not attached yet, so only the parent can tell.
        let ev = t.apply_snapshot(
            snap(vec![obs(
                3,
                "irdma0",
                E810,
                None,
                IbPortState::Down,
                QpState::Rts,
                None,
            )]),
            Instant(5_000),
        );
        assert_eq!(
            ev,
            vec![
                TopologyEvent::DeviceRecreated {
                    device: DeviceRef {
                        key,
                        name: "irdma0".into(),
                        index: 3
                    },
                    old_index: 0,
                    old_name: "rocep2s0f0".into(),
                    matched_by: MatchedBy::Parent,
                },
                TopologyEvent::PortDown {
                    device: DeviceRef {
                        key,
                        name: "irdma0".into(),
                        index: 3
                    },
                    port: 1,
                    state: IbPortState::Down,
                    phys_state: PhysState::Disabled,
                },
                TopologyEvent::PortUnstuck {
                    device: DeviceRef {
                        key,
                        name: "irdma0".into(),
                        index: 3
                    },
                    port: 1,
                    reason: UnstuckReason::QpRecovered,
                },
            ]
        );

        // udev renames it back; the port comes up.
        let ev = t.apply_snapshot(
            snap(vec![obs(
                3,
                "rocep2s0f0",
                E810,
                nd,
                ACTIVE,
                QpState::Rts,
                None,
            )]),
            Instant(10_000),
        );
        let r = DeviceRef {
            key,
            name: "rocep2s0f0".into(),
            index: 3,
        };
        assert_eq!(
            ev,
            vec![
                TopologyEvent::DeviceRenamed {
                    device: r.clone(),
                    old_name: "irdma0".into()
                },
                TopologyEvent::PortActive { device: r, port: 1 },
            ]
        );
    }

    #[test]
    fn a_gsi_still_in_err_after_recreation_is_a_new_stuck_episode() {
        let mut t = Topology::new();
        t.apply_snapshot(
            snap(vec![obs(
                0,
                "rocep2s0f0",
                E810,
                None,
                ACTIVE,
                QpState::Err,
                None,
            )]),
            Instant(0),
        );
        let ev = t.apply_snapshot(
            snap(vec![obs(
                7,
                "rocep2s0f0",
                E810,
                None,
                ACTIVE,
                QpState::Err,
                None,
            )]),
            Instant(9_000),
        );
        let stuck: Vec<_> = ev
            .iter()
            .filter_map(|e| match e {
                TopologyEvent::PortStuck(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(stuck.len(), 1, "{ev:#?}");
        assert_eq!((stuck[0].device.index, stuck[0].since), (7, Instant(9_000)));
        assert_eq!(stuck[0].observations, 1);
    }

    #[test]
    fn two_pci_functions_with_the_same_name_pattern_are_not_confused() {
        let mut t = Topology::new();
        t.apply_snapshot(
            snap(vec![obs(
                0,
                "rocep2s0f0",
                E810,
                None,
                ACTIVE,
                QpState::Rts,
                None,
            )]),
            Instant(0),
        );
        // A different PCI function shows up under the old name: a new device, the old one gone.
        let ev = t.apply_snapshot(
            snap(vec![obs(
                1,
                "rocep2s0f0",
                Some("pci:0000:03:00.0"),
                None,
                ACTIVE,
                QpState::Rts,
                None,
            )]),
            Instant(1),
        );
        assert!(matches!(
            ev.as_slice(),
            [
                TopologyEvent::DeviceDisappeared { .. },
                TopologyEvent::DeviceAppeared { .. },
                TopologyEvent::GsiReady { .. }
            ]
        ));
    }

    #[test]
    fn port_down_and_up_and_qps_entering_err_are_reported_once() {
        let mut t = Topology::new();
        let nd = Some((3, "ini0"));
        t.apply_snapshot(
            snap(vec![obs(
                0,
                "rxe_ini",
                None,
                nd,
                ACTIVE,
                QpState::Rts,
                Some(QpState::Rts),
            )]),
            Instant(0),
        );
        let ev = t.apply_snapshot(
            snap(vec![obs(
                0,
                "rxe_ini",
                None,
                nd,
                IbPortState::Down,
                QpState::Rts,
                Some(QpState::Err),
            )]),
            Instant(1),
        );
        assert_eq!(ev.len(), 2, "{ev:#?}");
        assert!(matches!(
            &ev[0],
            TopologyEvent::PortDown {
                port: 1,
                state: IbPortState::Down,
                ..
            }
        ));
        assert!(
            matches!(&ev[1], TopologyEvent::QpError { qp, previous: Some(QpState::Rts), .. }
            if qp.lqpn == 18 && qp.state == QpState::Err)
        );
        assert_eq!(
            t.stuck_ports().count(),
            0,
            "an RC QP in ERR is not a stuck port"
        );
        let ev = t.apply_snapshot(
            snap(vec![obs(
                0,
                "rxe_ini",
                None,
                nd,
                IbPortState::Down,
                QpState::Rts,
                Some(QpState::Err),
            )]),
            Instant(2),
        );
        assert_eq!(ev, vec![]);
        let ev = t.apply_snapshot(
            snap(vec![obs(
                0,
                "rxe_ini",
                None,
                nd,
                ACTIVE,
                QpState::Rts,
                Some(QpState::Sqe),
            )]),
            Instant(3),
        );
        assert!(matches!(
            ev.as_slice(),
            [
                TopologyEvent::PortActive { port: 1, .. },
                TopologyEvent::QpError {
                    previous: Some(QpState::Err),
                    ..
                }
            ]
        ));
    }

    #[test]
    fn a_failed_qp_dump_keeps_the_last_table_and_reports_nothing() {
        let mut t = Topology::new();
        t.apply_snapshot(
            snap(vec![obs(
                0,
                "rocep2s0f0",
                E810,
                None,
                ACTIVE,
                QpState::Err,
                None,
            )]),
            Instant(0),
        );
        let mut o = obs(0, "rocep2s0f0", E810, None, ACTIVE, QpState::Rts, None);
        o.qps = Err("timed out".into());
        let ev = t.apply_snapshot(snap(vec![o]), Instant(1));
        assert_eq!(ev, vec![]);
        let d = t.device("rocep2s0f0").unwrap();
        assert_eq!(d.qp_error.as_deref(), Some("timed out"));
        assert_eq!(d.qps.as_ref().map(Vec::len), Some(1));
        assert_eq!(t.stuck_ports().count(), 1, "still stuck as far as we know");
    }

    fn mon(event: MonitorEventType, index: u32, name: &str) -> MonitorEvent {
        MonitorEvent {
            event,
            dev_index: Some(index),
            dev_name: Some(name.into()),
            port: None,
            netdev_index: None,
            netdev_name: None,
        }
    }

    #[test]
    fn monitor_events_register_unregister_rename() {
        // captures/k612mon2-k612: REGISTER 0 rxe_ini, UNREGISTER 0, REGISTER 2 rxe_ini.
        let mut t = Topology::new();
        let ev = t.apply_monitor_event(&mon(MonitorEventType::Register, 0, "rxe_ini"), Instant(0));
        assert!(
            matches!(ev.as_slice(), [TopologyEvent::DeviceAppeared { device }] if device.index == 0)
        );
        let key = t.device("rxe_ini").unwrap().key;
        let mut attach = mon(MonitorEventType::NetdevAttach, 0, "rxe_ini");
        attach.port = Some(1);
        attach.netdev_index = Some(3);
        attach.netdev_name = Some("ini0".into());
        assert_eq!(t.apply_monitor_event(&attach, Instant(1)), vec![]);
        let ev =
            t.apply_monitor_event(&mon(MonitorEventType::Unregister, 0, "rxe_ini"), Instant(2));
        assert!(matches!(
            ev.as_slice(),
            [TopologyEvent::DeviceDisappeared { .. }]
        ));
        assert!(t.devices().is_empty());
        let ev = t.apply_monitor_event(&mon(MonitorEventType::Register, 2, "rxe_ini"), Instant(3));
        assert!(matches!(ev.as_slice(), [TopologyEvent::DeviceRecreated {
            device, old_index: 0, matched_by: MatchedBy::Name, .. }] if device.key == key && device.index == 2));
        let ev = t.apply_monitor_event(&mon(MonitorEventType::Rename, 2, "rxe_tmp"), Instant(4));
        assert!(
            matches!(ev.as_slice(), [TopologyEvent::DeviceRenamed { device, old_name }]
            if device.name == "rxe_tmp" && old_name == "rxe_ini")
        );
        // A repeated REGISTER for a live index changes nothing.
        assert_eq!(
            t.apply_monitor_event(&mon(MonitorEventType::Register, 2, "rxe_tmp"), Instant(5)),
            vec![]
        );
    }

    #[test]
    fn unregistering_a_stuck_device_clears_its_stuck_port() {
        let mut t = Topology::new();
        t.apply_snapshot(
            snap(vec![obs(
                4,
                "rocep2s0f0",
                E810,
                None,
                ACTIVE,
                QpState::Err,
                None,
            )]),
            Instant(0),
        );
        let ev = t.apply_monitor_event(
            &mon(MonitorEventType::Unregister, 4, "rocep2s0f0"),
            Instant(1),
        );
        assert!(matches!(
            ev.as_slice(),
            [
                TopologyEvent::DeviceDisappeared { .. },
                TopologyEvent::PortUnstuck {
                    reason: UnstuckReason::DeviceGone,
                    ..
                }
            ]
        ));
    }

    #[test]
    fn poller_polls_every_interval_and_events_bring_the_dump_forward() {
        let mut p = Poller::new(Duration::from_secs(5), Instant(0));
        assert_eq!(p.start(), vec![PollAction::QuerySystem]);
        assert_eq!(
            p.poll(Instant(0)),
            Some(PollAction::Dump(DumpReason::Initial))
        );
        assert_eq!(p.poll(Instant(1)), None, "one dump at a time");
        p.on_dump_done(Instant(100));
        assert_eq!(p.next_deadline(), Some(Instant(5_100)));
        assert_eq!(p.poll(Instant(5_099)), None);
        assert_eq!(
            p.poll(Instant(5_100)),
            Some(PollAction::Dump(DumpReason::Interval))
        );
        p.on_dump_done(Instant(5_200));

        // Old kernel: polling only.
        assert_eq!(p.on_system_info(false), vec![]);
        assert_eq!(p.monitor(), MonitorSupport::Unsupported);
        // 6.12+: subscribe, and events shorten the wait (debounced).
        assert_eq!(p.on_system_info(true), vec![PollAction::SubscribeMonitor]);
        p.on_monitor_event(Instant(6_000));
        p.on_monitor_event(Instant(6_010));
        assert_eq!(p.next_deadline(), Some(Instant(6_250)));
        assert_eq!(
            p.poll(Instant(6_250)),
            Some(PollAction::Dump(DumpReason::Event))
        );
        p.on_dump_done(Instant(6_300));
        // Polling stays on as the safety net.
        assert_eq!(p.next_deadline(), Some(Instant(11_300)));
        // ENOBUFS: resync at once.
        p.on_resync_needed(Instant(7_000));
        assert_eq!(
            p.poll(Instant(7_000)),
            Some(PollAction::Dump(DumpReason::Resync))
        );
    }

    #[test]
    fn a_quiet_host_with_device_events_is_dumped_half_as_often() {
        let mut p = Poller::new(Duration::from_secs(5), Instant(0));
        p.set_quiet_factor(Poller::QUIET_FACTOR);
        let _ = p.poll(Instant(0));
        // Without device events a quiet host is still dumped every interval.
        p.set_quiet(true);
        p.on_dump_done(Instant(100));
        assert_eq!(p.next_deadline(), Some(Instant(5_100)));
        assert_eq!(p.on_system_info(true), vec![PollAction::SubscribeMonitor]);
        let _ = p.poll(Instant(5_100));
        p.on_dump_done(Instant(5_100));
        assert_eq!(p.next_deadline(), Some(Instant(15_100)));
        // An event or a request still brings it forward.
        p.on_monitor_event(Instant(6_000));
        assert_eq!(p.next_deadline(), Some(Instant(6_250)));
        let _ = p.poll(Instant(6_250));
        // A QP in ERR: back to the interval.
        p.set_quiet(false);
        p.on_dump_done(Instant(6_300));
        assert_eq!(p.next_deadline(), Some(Instant(11_300)));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn arb_obs() -> impl Strategy<Value = DeviceObservation> {
            (
                0u32..6,
                prop::sample::select(vec!["rocep2s0f0", "rocep2s0f1", "rxe_ini", "irdma0"]),
                prop::option::of(prop::sample::select(vec![
                    "pci:0000:02:00.0",
                    "pci:0000:02:00.1",
                ])),
                prop::option::of(prop::sample::select(vec![(3u32, "ini0"), (5, "enp2s0f0")])),
                any::<bool>(),
                prop::sample::select(QpState::ALL.to_vec()),
                any::<bool>(),
            )
                .prop_map(|(i, name, parent, netdev, active, gsi, dump_ok)| {
                    let state = if active {
                        IbPortState::Active
                    } else {
                        IbPortState::Down
                    };
                    let mut o = obs(i, name, parent, netdev, state, gsi, Some(QpState::Rts));
                    if !dump_ok {
                        o.qps = Err("refused".into());
                    }
                    o
                })
        }

        fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
            prop::collection::vec(arb_obs(), 0..4).prop_map(|mut devices| {
                // The kernel never lists two devices with the same index or name.
                let mut seen = Vec::new();
                devices.retain(|d| {
                    let k = (d.info.index, d.info.name.clone());
                    let dup = seen
                        .iter()
                        .any(|(i, n): &(u32, String)| *i == k.0 || *n == k.1);
                    seen.push(k);
                    !dup
                });
                Snapshot { devices }
            })
        }

        proptest! {
            #[test]
            fn stuck_ports_always_match_the_tables(snaps in prop::collection::vec(arb_snapshot(), 1..8)) {
                let mut t = Topology::new();
                for (i, s) in snaps.into_iter().enumerate() {
                    t.apply_snapshot(s, Instant(i as u64 * 5_000));
                    let mut keys: Vec<_> = t.devices().iter().map(|d| d.key).collect();
                    keys.sort();
                    keys.dedup();
                    prop_assert_eq!(keys.len(), t.devices().len(), "device keys are unique");
                    let mut expected: Vec<(DeviceKey, u32)> = t
                        .devices()
                        .iter()
                        .flat_map(|d| {
                            d.qps.iter().flatten()
                                .filter(|q| q.is_gsi() && q.state == QpState::Err)
                                .filter_map(move |q| d.qp_port(q).map(|p| (d.key, p)))
                        })
                        .collect();
                    expected.sort();
                    let actual: Vec<(DeviceKey, u32)> =
                        t.stuck_ports().map(|s| (s.device.key, s.port)).collect();
                    prop_assert_eq!(actual, expected);
                    prop_assert!(t.ghosts.len() <= GHOST_LIMIT);
                }
            }
        }
    }
}
