//! An operator command from plan to verdict, owned by the driver so that the daemon, the
//! standalone manual commands and the simulator say and decide the same thing:
//!
//! - [`Driver::plan`]: what the command will do, typed ([`CommandPlan`]): the portals probed,
//!   the device re-creation with its methods (read from the host by the shell's planner and
//!   filled in with [`CommandPlan::with_methods`]), its attempts and back-off, the sessions
//!   logged out and in, the verification; refused for a device or port that does not exist;
//! - [`Driver::start_command`]: the command accepted, its grant given, its verdict awaited;
//! - [`Driver::poll_verdict`]: the verdict once every port it concerns has settled (the one
//!   "settled" rule, [`settled`]), or once [`OPERATOR_DEADLINE`] has passed.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{CommandId, Driver};
use crate::recovery::{CommandError, OperatorCommand, Phase, PortId, Portal, SessionKey};
use crate::time::Instant;

/// How long an operator command may take before its client is told it is still running.
pub const OPERATOR_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// How long a client waits for the daemon's next line: the deadline and a minute, so the
/// daemon's own "still in progress" answer always arrives first.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(OPERATOR_DEADLINE.as_secs() + 60);

/// The one "settled" rule: a port has settled when it is healthy, quarantined (nothing more
/// is tried without the operator), held by a re-creation blocked in the kernel (nothing more
/// is tried until the kernel lets go) or no longer known.
pub fn settled(phase: Option<Phase>) -> bool {
    matches!(
        phase,
        Some(Phase::Healthy | Phase::Quarantined | Phase::RecreationBlocked) | None
    )
}

/// One way to re-create a device, with its steps as they would run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodSteps {
    /// The method (`devlink reload`, `aux unbind/bind`, …).
    pub method: String,
    /// Its steps (command lines and sysfs writes).
    pub steps: Vec<String>,
}

/// The methods the host's planner gave for a device, and those it left out with the reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecreateMethods {
    /// In the order they are tried.
    pub methods: Vec<MethodSteps>,
    /// Left out, each with why.
    pub skipped: Vec<String>,
}

/// One step of a command's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum PlanStep {
    /// Stop automatic actions.
    Pause,
    /// Resume automatic actions.
    Resume,
    /// Probe the target portals until they answer.
    Probe {
        /// The portals.
        portals: Vec<Portal>,
        /// Consecutive answers needed.
        successes: u32,
        /// Longest wait for the target.
        wait_max: Duration,
    },
    /// Re-create the device.
    Recreate {
        /// The device.
        device: String,
        /// Its methods; empty until [`CommandPlan::with_methods`].
        methods: RecreateMethods,
        /// Attempts before the port is quarantined.
        attempts: u32,
        /// The pause before each attempt after the first (jittered by up to ±20 %).
        backoff: Vec<Duration>,
        /// How long each attempt may take.
        timeout: Duration,
        /// The RDMA consumers other than iSER on the device, which lose their connections
        /// and which iser-guard does not bring back; `None` while not known (no RDMA
        /// netlink).
        #[serde(default)]
        consumers: Option<Vec<crate::consumers::ConsumerRef>>,
    },
    /// After the re-creation: `nvme connect` the NVMe over RDMA controllers remembered on the
    /// device (nvme_rdma deletes them with it), and verify each.
    NvmeReconnect {
        /// The controllers, with the parameters they are connected again with.
        controllers: Vec<crate::nvme_fabrics::NvmeRdmaController>,
        /// How long each may take to be back.
        timeout: Duration,
    },
    /// After the re-creation: check that the NFS over RDMA mounts remembered on the device
    /// answer again (xprtrdma reconnects them on their next RPC): a bounded `stat` of each.
    NfsCheck {
        /// The mounts.
        mounts: Vec<crate::nfs_rdma::NfsRdmaMount>,
        /// How long each may take to answer.
        window: Duration,
    },
    /// After the sessions' verification: the dm-multipath paths the re-creation takes down,
    /// each active in its map again (multipathd reinstates it, else iser-guard does).
    MultipathCheck {
        /// Every path on the device.
        paths: Vec<crate::multipath::MultipathPathRef>,
        /// Of those, the last usable paths of their maps: the maps have no path while the
        /// device is re-created.
        last: Vec<crate::multipath::MultipathPathRef>,
        /// The bounded wait before a still-failed path is reinstated.
        timeout: Duration,
    },
    /// Log sessions out and in.
    Reconnect {
        /// The sessions.
        sessions: Vec<SessionKey>,
        /// Only those iscsid does not log back in itself within the grace period.
        unless_iscsid: Option<Duration>,
    },
    /// Check every session is logged in with running disks.
    Verify {
        /// The sessions.
        sessions: Vec<SessionKey>,
        /// How long to wait for them.
        timeout: Duration,
    },
}

/// What an operator command will do, decided by the driver from the engine's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandPlan {
    /// The command.
    pub command: OperatorCommand,
    /// As the operator typed it: `recover rocep2s0f0/1`.
    pub what: String,
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
}

impl CommandPlan {
    /// The device whose re-creation methods the shell must read from the host, if any (and
    /// not read yet).
    pub fn device_to_read(&self) -> Option<&str> {
        self.steps.iter().find_map(|s| match s {
            PlanStep::Recreate {
                device, methods, ..
            } if methods.methods.is_empty() && methods.skipped.is_empty() => Some(device.as_str()),
            _ => None,
        })
    }

    /// The plan with the device's re-creation methods filled in.
    pub fn with_methods(mut self, read: RecreateMethods) -> Self {
        for s in &mut self.steps {
            if let PlanStep::Recreate { methods, .. } = s {
                *methods = read.clone();
            }
        }
        self
    }

    /// Whether it changes anything on the host.
    pub fn destructive(&self) -> bool {
        !matches!(
            self.command,
            OperatorCommand::Pause | OperatorCommand::Resume
        )
    }

    /// The plan in the operator's words, one line each (indented lines belong to the line
    /// above): everything that will happen, including retries and back-off.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.steps {
            match s {
                PlanStep::Pause => {
                    out.push("pause automatic actions (detection and alerts continue)".to_string())
                }
                PlanStep::Resume => out.push("resume automatic actions".to_string()),
                PlanStep::Probe {
                    portals,
                    successes,
                    wait_max,
                } => {
                    if portals.is_empty() {
                        out.push(
                            "check the target portals: no iSCSI session is known on it, so \
                             there is none to check"
                                .to_string(),
                        );
                    } else {
                        out.push(format!(
                            "wait for the target portal{} {} to answer {successes} time{} in \
                             a row (at most {})",
                            plural(portals.len()),
                            join(portals),
                            plural(*successes as usize),
                            words(*wait_max)
                        ));
                    }
                }
                PlanStep::Recreate {
                    device,
                    methods,
                    attempts,
                    backoff,
                    timeout,
                    consumers,
                } => {
                    out.push(format!(
                        "re-create RDMA device {device}, trying these methods in order (each \
                         attempt at most {}):",
                        words(*timeout)
                    ));
                    out.push(match consumers {
                        None => "  other RDMA consumers on it: not known (no RDMA netlink CM id \
                                 table)"
                            .to_string(),
                        Some(c) if c.is_empty() => {
                            "  other RDMA consumers on it: none besides iSER".to_string()
                        }
                        Some(c) => {
                            let nvme = self
                                .steps
                                .iter()
                                .any(|s| matches!(s, PlanStep::NvmeReconnect { .. }));
                            let nfs = self
                                .steps
                                .iter()
                                .any(|s| matches!(s, PlanStep::NfsCheck { .. }));
                            format!(
                                "  other RDMA consumers on it lose their connections, and \
                                 iser-guard does not bring them back{}: {}{}",
                                if nvme {
                                    " (except the NVMe controllers below)"
                                } else {
                                    ""
                                },
                                crate::consumers::list(c),
                                if nfs {
                                    "; the kernel reconnects the NFS mounts below by itself, \
                                     iser-guard checks them"
                                } else {
                                    ""
                                }
                            )
                        }
                    });
                    for m in &methods.methods {
                        out.push(format!("  {}: {}", m.method, m.steps.join("; ")));
                    }
                    for s in &methods.skipped {
                        out.push(format!("  not applicable: {s}"));
                    }
                    if *attempts > 1 {
                        let mut line = format!(
                            "  if the port is not back: up to {} more attempt{}",
                            attempts - 1,
                            plural(*attempts as usize - 1)
                        );
                        if !backoff.is_empty() {
                            let total: Duration = backoff.iter().sum();
                            let _ = write!(
                                line,
                                ", pausing {} before them ({} in all, ±20 %)",
                                backoff
                                    .iter()
                                    .map(|d| words(*d))
                                    .collect::<Vec<_>>()
                                    .join(", "),
                                words(total)
                            );
                        }
                        out.push(line);
                    }
                    out.push(format!(
                        "  after {attempts} failed attempt{} the port is quarantined: nothing \
                         more is tried until an operator acts",
                        plural(*attempts as usize)
                    ));
                }
                PlanStep::NvmeReconnect {
                    controllers,
                    timeout,
                } => {
                    out.push(format!(
                        "bring back the NVMe over RDMA controller{} nvme_rdma deletes with the \
                         device: nvme connect each with its remembered parameters, then verify \
                         it live with its namespaces and a direct read of each (at most {} \
                         each):",
                        plural(controllers.len()),
                        words(*timeout)
                    ));
                    for c in controllers {
                        out.push(format!(
                            "  {}: nvme {}",
                            c.describe(),
                            crate::nvme_fabrics::connect_args(c).join(" ")
                        ));
                    }
                }
                PlanStep::NfsCheck { mounts, window } => {
                    out.push(format!(
                        "check the NFS over RDMA mount{} on the device (xprtrdma reconnects \
                         them by itself on their next RPC): a stat of each mount point, on a \
                         worker that never waits for a hung one, retried for at most {}:",
                        plural(mounts.len()),
                        words(*window)
                    ));
                    for m in mounts {
                        let on = m
                            .placed
                            .as_ref()
                            .map(|(d, p)| format!(" via {d}/{p}"))
                            .unwrap_or_default();
                        out.push(format!(
                            "  {} from {} port {}{on}",
                            m.describe(),
                            m.server,
                            m.port
                                .map_or_else(|| "not shown".to_string(), |p| p.to_string())
                        ));
                    }
                }
                PlanStep::MultipathCheck {
                    paths,
                    last,
                    timeout,
                } => {
                    if !last.is_empty() {
                        out.push(format!(
                            "WARNING: the re-creation takes the last usable path of dm-multipath \
                             map(s) {}: I/O to them queues or fails until the paths are back: {}",
                            crate::multipath::maps_of(last).join(", "),
                            crate::multipath::list_paths(last)
                        ));
                    }
                    out.push(format!(
                        "check the dm-multipath path{} on the device active in their maps again \
                         (multipathd reinstate path after {} if still failed):",
                        plural(paths.len()),
                        words(*timeout)
                    ));
                    for p in paths {
                        out.push(format!("  {p}"));
                    }
                }
                PlanStep::Reconnect {
                    sessions,
                    unless_iscsid,
                } => {
                    let how = match unless_iscsid {
                        Some(grace) => format!(
                            " that iscsid has not logged back in within {}",
                            words(*grace)
                        ),
                        None => String::new(),
                    };
                    out.push(format!(
                        "log out and in the iSCSI session{}{how}:",
                        plural(sessions.len())
                    ));
                    for k in sessions {
                        out.push(format!("  {k}"));
                    }
                }
                PlanStep::Verify { sessions, timeout } => out.push(format!(
                    "verify {} logged in with running disks (at most {})",
                    if sessions.len() == 1 {
                        "the session is".to_string()
                    } else {
                        format!("the {} sessions are", sessions.len())
                    },
                    words(*timeout)
                )),
            }
        }
        out
    }
}

/// A command's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every port it concerns is healthy again, every session op succeeded.
    Done {
        /// In words.
        message: String,
    },
    /// It settled with a port quarantined or a session op failed.
    Failed {
        /// In words, each failure with its reason.
        message: String,
    },
    /// Still running after [`OPERATOR_DEADLINE`]: the daemon carries on.
    StillRunning {
        /// In words.
        message: String,
    },
}

impl Verdict {
    /// The verdict in words.
    pub fn message(&self) -> &str {
        match self {
            Verdict::Done { message }
            | Verdict::Failed { message }
            | Verdict::StillRunning { message } => message,
        }
    }
}

/// A command accepted and not yet judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Running {
    pub(super) id: CommandId,
    what: String,
    ports: BTreeSet<PortId>,
    /// A `reconnect`: it also waits for the logouts/logins of sessions on no RDMA port.
    session_ops: bool,
    /// Operator session-op failures the engine had reported when it started.
    failures_before: usize,
    pub(super) deadline: Instant,
}

impl Driver {
    /// The sessions an operator command's filter selects (the one place it is written).
    pub(crate) fn matching_sessions<'a>(
        &'a self,
        target: &'a Option<String>,
        portal: &'a Option<Portal>,
    ) -> impl Iterator<Item = &'a crate::recovery::SessionRecord> + 'a {
        self.engine
            .sessions()
            .filter(move |s| target.as_ref().is_none_or(|t| &s.key.target == t))
            .filter(move |s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
    }

    /// Refuses a command naming a device or port that does not exist, a filter no session
    /// matches, or a gone device nothing is known to re-create it from. Changes nothing.
    pub(crate) fn check_command(&self, cmd: &OperatorCommand) -> Result<(), CommandError> {
        let device = match cmd {
            OperatorCommand::Recover { device, .. } | OperatorCommand::ResetDevice { device } => {
                device
            }
            OperatorCommand::Reconnect { target, portal } => {
                let any = self.matching_sessions(target, portal).next().is_some()
                    || !self.engine.unplaced_matching(target, portal).is_empty();
                return if any {
                    Ok(())
                } else {
                    Err(CommandError::NoMatchingSessions)
                };
            }
            OperatorCommand::Pause | OperatorCommand::Resume => return Ok(()),
        };
        let mut known: BTreeSet<String> = self.device_ports.keys().cloned().collect();
        known.extend(self.engine.devices().map(|d| d.name.clone()));
        known.extend(self.engine.ports().map(|p| p.id.device.clone()));
        if !known.contains(device) {
            return Err(CommandError::UnknownDevice {
                device: device.clone(),
                known: known.into_iter().collect(),
            });
        }
        if let OperatorCommand::Recover {
            port: Some(n),
            device,
        } = cmd
        {
            let mut ports: BTreeSet<u32> =
                (1..=self.device_ports.get(device).copied().unwrap_or(0)).collect();
            ports.extend(
                self.engine
                    .ports()
                    .filter(|p| &p.id.device == device)
                    .map(|p| p.id.port),
            );
            if !ports.contains(n) {
                return Err(CommandError::UnknownPort {
                    device: device.clone(),
                    port: *n,
                    ports: ports.into_iter().collect(),
                });
            }
        }
        self.engine.recreatable(device)
    }

    /// The ports an accepted command awaits, while it awaits its verdict.
    pub fn command_ports(&self, id: CommandId) -> Option<&BTreeSet<PortId>> {
        self.running.iter().find(|r| r.id == id).map(|r| &r.ports)
    }

    /// The ports a command concerns.
    fn ports_of(&self, cmd: &OperatorCommand) -> BTreeSet<PortId> {
        match cmd {
            OperatorCommand::Recover { device, port } => self
                .engine
                .ports()
                .filter(|p| &p.id.device == device && port.is_none_or(|n| p.id.port == n))
                .map(|p| p.id.clone())
                .collect(),
            OperatorCommand::ResetDevice { device } => self
                .engine
                .ports()
                .filter(|p| &p.id.device == device)
                .map(|p| p.id.clone())
                .collect(),
            OperatorCommand::Reconnect { target, portal } => self
                .matching_sessions(target, portal)
                .map(|s| s.port.clone())
                .collect(),
            OperatorCommand::Pause | OperatorCommand::Resume => BTreeSet::new(),
        }
    }

    /// What `cmd` will do, from what the engine knows now; refused (changing nothing) for a
    /// device or port that does not exist, or a filter no session matches. A re-creation's
    /// methods are left for the shell to read ([`CommandPlan::device_to_read`]).
    pub fn plan(&self, cmd: &OperatorCommand) -> Result<CommandPlan, CommandError> {
        self.check_command(cmd)?;
        let policy = self.engine.policy();
        let what = cmd.to_string();
        let device_sessions = |device: &str, port: Option<u32>| -> Vec<SessionKey> {
            self.engine
                .sessions()
                .filter(|s| s.port.device == device && port.is_none_or(|n| s.port.port == n))
                .map(|s| s.key.clone())
                .collect()
        };
        let recreate = |device: &str| PlanStep::Recreate {
            device: device.to_string(),
            methods: RecreateMethods::default(),
            attempts: policy.max_attempts,
            backoff: (2..=policy.max_attempts)
                .map(|a| policy.backoff(a - 1, 0.5))
                .collect(),
            timeout: policy.recreate_timeout,
            consumers: self.engine.consumers_of(device),
        };
        let nvme = |device: &str| {
            let controllers = self.engine.nvme_of(device);
            (!controllers.is_empty()).then_some(PlanStep::NvmeReconnect {
                controllers,
                timeout: crate::recovery::NVME_BACK_TIMEOUT,
            })
        };
        let nfs = |device: &str| {
            let mounts = self.engine.nfs_of(device);
            (!mounts.is_empty()).then_some(PlanStep::NfsCheck {
                mounts,
                window: crate::recovery::NFS_CHECK_WINDOW,
            })
        };
        let multipath = |device: &str| {
            let paths = self.engine.multipath_of(device);
            (!paths.is_empty()).then(|| PlanStep::MultipathCheck {
                last: self.engine.multipath_last_paths(device),
                paths,
                timeout: crate::recovery::MULTIPATH_BACK_TIMEOUT,
            })
        };
        let steps = match cmd {
            OperatorCommand::Pause => vec![PlanStep::Pause],
            OperatorCommand::Resume => vec![PlanStep::Resume],
            OperatorCommand::Recover { device, port } => {
                let sessions = device_sessions(device, *port);
                let mut portals: Vec<Portal> = sessions.iter().map(|k| k.portal.clone()).collect();
                portals.sort();
                portals.dedup();
                let mut steps = vec![
                    PlanStep::Probe {
                        portals,
                        successes: policy.probe_successes,
                        wait_max: policy.target_wait_max,
                    },
                    recreate(device),
                ];
                steps.extend(nvme(device));
                steps.extend(nfs(device));
                steps.extend([
                    PlanStep::Reconnect {
                        sessions: sessions.clone(),
                        unless_iscsid: Some(policy.iscsid_grace),
                    },
                    PlanStep::Verify {
                        sessions,
                        timeout: policy.verify_timeout,
                    },
                ]);
                steps.extend(multipath(device));
                steps
            }
            OperatorCommand::ResetDevice { device } => {
                let sessions = device_sessions(device, None);
                let mut steps = vec![recreate(device)];
                steps.extend(nvme(device));
                steps.extend(nfs(device));
                steps.extend([
                    PlanStep::Reconnect {
                        sessions: sessions.clone(),
                        unless_iscsid: Some(policy.iscsid_grace),
                    },
                    PlanStep::Verify {
                        sessions,
                        timeout: policy.verify_timeout,
                    },
                ]);
                steps.extend(multipath(device));
                steps
            }
            OperatorCommand::Reconnect { target, portal } => {
                let mut sessions: Vec<SessionKey> = self
                    .matching_sessions(target, portal)
                    .map(|s| s.key.clone())
                    .collect();
                sessions.extend(self.engine.unplaced_matching(target, portal));
                vec![
                    PlanStep::Reconnect {
                        sessions: sessions.clone(),
                        unless_iscsid: None,
                    },
                    PlanStep::Verify {
                        sessions,
                        timeout: policy.verify_timeout,
                    },
                ]
            }
        };
        Ok(CommandPlan {
            command: cmd.clone(),
            what,
            steps,
        })
    }

    /// Accepts an operator command: the engine acts on it, its grant is given, and (for the
    /// recovery commands) its verdict is awaited ([`Driver::poll_verdict`]). Returns its id
    /// and what will happen, in words.
    pub fn start_command(
        &mut self,
        cmd: OperatorCommand,
        now: Instant,
    ) -> Result<(CommandId, String), CommandError> {
        self.check_command(&cmd)?;
        let failures_before = self.engine.operator_failures().len();
        let what = cmd.to_string();
        let session_ops = matches!(cmd, OperatorCommand::Reconnect { .. });
        let judged = !matches!(cmd, OperatorCommand::Pause | OperatorCommand::Resume);
        let (id, msg) = self.handle_command(cmd.clone(), now)?;
        if judged {
            let ports = self.ports_of(&cmd);
            self.running.push(Running {
                id,
                what,
                ports,
                session_ops,
                failures_before,
                deadline: now.plus(OPERATOR_DEADLINE),
            });
        }
        Ok((id, msg))
    }

    /// Commands still awaiting their verdict.
    pub fn commands_running(&self) -> usize {
        self.running.len()
    }

    /// The next verdict due: a command whose ports have all settled with nothing of theirs
    /// in flight, or whose deadline has passed.
    pub fn poll_verdict(&mut self, now: Instant) -> Option<(CommandId, Verdict)> {
        let i = self.running.iter().position(|r| {
            now >= r.deadline || (!self.command_busy(r) && self.command_settled(r))
        })?;
        let r = self.running.remove(i);
        if !self.command_busy(&r) && self.command_settled(&r) {
            let mut failed: Vec<String> = r
                .ports
                .iter()
                .filter_map(|id| self.engine.port(id))
                .filter(|p| matches!(p.phase(), Phase::Quarantined | Phase::RecreationBlocked))
                .map(|p| format!("{}: {}", p.id, p.reason))
                .collect();
            if r.session_ops {
                let all = self.engine.operator_failures();
                failed.extend(all.iter().skip(r.failures_before).cloned());
            }
            let verdict = if failed.is_empty() {
                Verdict::Done {
                    message: format!("{}: done, every port is healthy", r.what),
                }
            } else {
                Verdict::Failed {
                    message: format!("{}: failed: {}", r.what, failed.join("; ")),
                }
            };
            return Some((r.id, verdict));
        }
        Some((
            r.id,
            Verdict::StillRunning {
                message: format!(
                    "{}: still in progress after {} min; the daemon carries on, follow it with \
                     `iser-guard events --follow`",
                    r.what,
                    OPERATOR_DEADLINE.as_secs() / 60
                ),
            },
        ))
    }

    fn command_busy(&self, r: &Running) -> bool {
        self.in_flight_ports
            .values()
            .any(|port| port.as_ref().is_some_and(|id| r.ports.contains(id)))
            || (r.session_ops && self.engine.operator_session_ops() > 0)
    }

    fn command_settled(&self, r: &Running) -> bool {
        r.ports
            .iter()
            .all(|id| settled(self.engine.port(id).map(|p| p.phase())))
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn join(portals: &[Portal]) -> String {
    portals
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A duration in words: `90 s`, `2 min`, `2 min 8 s`.
pub fn words(d: Duration) -> String {
    let s = d.as_secs();
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if s < 120 {
        format!("{s} s")
    } else if s % 60 == 0 {
        format!("{} min", s / 60)
    } else {
        format!("{} min {} s", s / 60, s % 60)
    }
}
