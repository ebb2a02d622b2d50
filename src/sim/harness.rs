//! The harness: one engine against one simulated host, in virtual time.
//!
//! Each step delivers what the host produced up to `now` to the production
//! [`Driver`] (the one the daemon runs: same authorisation, write-ahead journal and dry-run
//! plans), fires its timers, and hands the effects it returns to the simulated executors
//! (the host executes them; the journal is kept in memory), then jumps to the next deadline
//! of either side. The harness decides nothing about actions itself.
//! [`Harness::run_until`] fails on livelock: too many steps, or too many steps without time
//! moving.

use std::collections::HashMap;
use std::time::Duration;

use super::host::{Delivery, SimHost};
use crate::core::driver::{
    Authority, CommandPlan, Driver, EffectId, EffectKind, EffectOutcome, Refusal, Verdict,
};
use crate::core::kmsg::{Record, KERNEL_FACILITY};
use crate::core::recovery::{
    read_record, Action, ActionId, ActionKind, Alert, Engine, Input, OperatorCommand, Policy,
    Transition, Trust,
};
use crate::core::severity::AlertSeverities;
use crate::core::time::Instant;

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Entry {
    /// What happened on the host (scenario script, iscsid).
    Note {
        /// When.
        at: Instant,
        /// What.
        text: String,
    },
    /// What the kernel logged (the real line).
    Kernel {
        /// When.
        at: Instant,
        /// Syslog facility (0 = kernel).
        facility: u8,
        /// Text.
        text: String,
    },
    /// What the agent decided, and why.
    Decision {
        /// When.
        at: Instant,
        /// The transition.
        transition: Transition,
    },
    /// What the agent did.
    Action {
        /// When.
        at: Instant,
        /// The action.
        action: Action,
        /// What allowed it (decided by the driver).
        authority: Authority,
    },
    /// What the agent would have done but did not (dry-run plan, refusal).
    Plan {
        /// When.
        at: Instant,
        /// The action.
        action: Action,
        /// Why it was not run.
        refusal: Refusal,
    },
    /// What iscsiadm printed.
    Iscsiadm {
        /// When.
        at: Instant,
        /// Command line.
        command: String,
        /// Output.
        output: String,
        /// Exit code.
        code: i32,
    },
    /// The agent restarted and resumed from its journal.
    Restart {
        /// When.
        at: Instant,
    },
    /// Every session on the host is logged in with running disks again.
    StorageBack {
        /// When.
        at: Instant,
    },
}

/// The harness ran into a livelock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// More steps than allowed.
    #[error("livelock: {steps} steps without reaching {until} (virtual time stuck at {at})")]
    TooManySteps {
        /// Steps taken.
        steps: usize,
        /// Target time.
        until: Instant,
        /// Where time was.
        at: Instant,
    },
    /// Many steps at one instant.
    #[error("livelock: {steps} consecutive steps at {at} without time advancing")]
    Stuck {
        /// Steps at that instant.
        steps: usize,
        /// The instant.
        at: Instant,
    },
    /// The journal did not resume.
    #[error("resume from the journal failed: {0}")]
    Resume(String),
}

/// Driver (engine inside) + host + virtual clock + timeline.
#[derive(Debug)]
pub struct Harness {
    /// The simulated host.
    pub host: SimHost,
    /// The production driver, owning the engine.
    pub driver: Driver,
    /// The policy (kept to resume the engine after a restart).
    pub policy: Policy,
    /// The syslog severity of each class of alert, as configured (`simulate --config`):
    /// the severity the timeline shows.
    pub severities: AlertSeverities,
    /// Virtual time.
    pub now: Instant,
    /// Everything that happened.
    pub timeline: Vec<Entry>,
    /// Every action the driver handed out to run (destructive ones authorised).
    pub actions: Vec<(Instant, Action)>,
    /// Every action the driver planned or refused instead of running.
    pub plans: Vec<(Instant, Action, Refusal)>,
    /// Every alert.
    pub alerts: Vec<(Instant, Alert)>,
    /// Every transition.
    pub transitions: Vec<Transition>,
    /// The journal (JSON bytes of the last persisted snapshot).
    pub journal: Option<Vec<u8>>,
    /// Journal writes.
    pub journal_writes: usize,
    /// Restart the agent after every step (resume from the journal).
    pub restart_every_step: bool,
    /// Restarts done.
    pub restarts: usize,
    /// Steps taken.
    pub steps: usize,
    /// Destructive actions executed before their write-ahead journal entry.
    pub unjournaled_destructive: usize,
    /// Every operator command's verdict, as the driver gave it.
    pub verdicts: Vec<(Instant, Verdict)>,
    storage_ok: bool,
    /// Inputs fed to the driver so far, and the count at the last journal write: an
    /// independent check that each destructive effect follows a write of the current state.
    inputs: u64,
    journaled_at_input: Option<u64>,
    /// The effect each host-executed action answers to.
    effect_of: HashMap<ActionId, EffectId>,
    kmsg_seq: u64,
}

impl Harness {
    /// A harness at time zero; the host's polls start now.
    pub fn new(mut host: SimHost, policy: Policy, seed: u64) -> Self {
        host.iscsiadm_timeout = policy.iscsiadm_timeout;
        host.start(Instant::ZERO);
        let storage_ok = host.storage_ok();
        Harness {
            host,
            driver: Driver::new(Engine::new(policy.clone(), seed), true),
            policy,
            severities: AlertSeverities::default(),
            now: Instant::ZERO,
            timeline: Vec::new(),
            actions: Vec::new(),
            plans: Vec::new(),
            alerts: Vec::new(),
            transitions: Vec::new(),
            journal: None,
            journal_writes: 0,
            restart_every_step: false,
            restarts: 0,
            steps: 0,
            unjournaled_destructive: 0,
            verdicts: Vec::new(),
            storage_ok,
            inputs: 0,
            journaled_at_input: None,
            effect_of: HashMap::new(),
            kmsg_seq: 0,
        }
    }

    /// The engine (inside the driver).
    pub fn engine(&self) -> &Engine {
        self.driver.engine()
    }

    /// Runs until `until` (virtual), at most `max_steps` steps.
    pub fn run_until(&mut self, until: Instant, max_steps: usize) -> Result<(), SimError> {
        let mut same_instant = 0usize;
        loop {
            if self.steps >= max_steps {
                return Err(SimError::TooManySteps {
                    steps: self.steps,
                    until,
                    at: self.now,
                });
            }
            self.step()?;
            let next = [self.host.next_event(), self.driver.next_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= until => {
                    if t <= self.now {
                        same_instant += 1;
                        if same_instant > 200 {
                            return Err(SimError::Stuck {
                                steps: same_instant,
                                at: self.now,
                            });
                        }
                    } else {
                        same_instant = 0;
                        self.now = t;
                    }
                }
                _ => {
                    self.now = until;
                    self.step()?;
                    return Ok(());
                }
            }
        }
    }

    /// Runs for `d` more virtual time.
    pub fn run_for(&mut self, d: Duration, max_steps: usize) -> Result<(), SimError> {
        let until = self.now.plus(d);
        self.run_until(until, max_steps)
    }

    /// One step at `self.now`.
    pub fn step(&mut self) -> Result<(), SimError> {
        self.steps += 1;
        let now = self.now;
        for _ in 0..64 {
            let deliveries = self.host.advance(now);
            let timer_due = self.driver.next_timeout().is_some_and(|t| t <= now);
            if deliveries.is_empty() && !timer_due {
                break;
            }
            for d in deliveries {
                self.deliver(d, now);
            }
            if timer_due {
                self.inputs += 1;
                self.driver.handle_timeout(now);
            }
            self.run_effects(now);
        }
        while let Some(t) = self.driver.poll_transition() {
            self.timeline.push(Entry::Decision {
                at: now,
                transition: t.clone(),
            });
            self.transitions.push(t);
        }
        self.collect_verdicts(now);
        let ok = self.host.storage_ok();
        if ok && !self.storage_ok {
            self.timeline.push(Entry::StorageBack { at: now });
        }
        self.storage_ok = ok;
        if self.restart_every_step {
            self.restart()?;
        }
        Ok(())
    }

    /// Simulates a crash and restart of the agent: a new engine resumed from the journal
    /// (or a fresh one if nothing was journaled yet).
    pub fn restart(&mut self) -> Result<(), SimError> {
        let engine = match &self.journal {
            Some(bytes) => {
                let snap = crate::core::journal::decode(bytes)
                    .map_err(|e| SimError::Resume(e.to_string()))?;
                Engine::resume(snap, self.policy.clone(), self.now)
                    .map_err(|e| SimError::Resume(e.to_string()))?
            }
            None => Engine::new(self.policy.clone(), 1),
        };
        self.driver = Driver::new(engine, true);
        self.effect_of.clear();
        self.restarts += 1;
        self.timeline.push(Entry::Restart { at: self.now });
        // What the daemon does at start: a first scan.
        let list = self.host.session_list();
        self.host.forget_reports();
        for d in self.host.topology() {
            self.deliver(d, self.now);
        }
        self.driver.topology_reported();
        self.inputs += 1;
        self.driver.handle_sessions(list, self.now);
        // The driver's first-scan rule, as in the daemon: topology, then a listing.
        self.driver.sessions_listed(true, true);
        self.driver.complete_first_scan(true, self.now);
        self.run_effects(self.now);
        Ok(())
    }

    fn deliver_outcome(
        &mut self,
        id: ActionId,
        outcome: crate::core::recovery::Outcome,
        now: Instant,
    ) {
        match self.effect_of.remove(&id) {
            Some(effect) => {
                self.driver
                    .handle_effect_outcome(effect, EffectOutcome::Action(outcome), now)
            }
            // Started before a restart: the resumed engine still knows the action.
            None => self.driver.handle(Input::Outcome { id, outcome }, now),
        }
    }

    fn deliver(&mut self, d: Delivery, now: Instant) {
        if !matches!(d, Delivery::IscsiadmOutput { .. } | Delivery::Note(_)) {
            self.inputs += 1;
        }
        match d {
            Delivery::Kmsg { facility, record } => {
                self.timeline.push(Entry::Kernel {
                    at: now,
                    facility,
                    text: record.text.clone(),
                });
                // The record as /dev/kmsg gives it (level, dictionary), through the daemon's
                // own door.
                self.kmsg_seq += 1;
                let record = Record {
                    facility,
                    level: record.level,
                    seq: self.kmsg_seq,
                    usec: now.as_millis().saturating_mul(1000),
                    continuation: false,
                    text: record.text,
                    dict: record.dict,
                };
                if let Some(Some((obs, trust))) = read_record(&record).map(|r| r.observation) {
                    self.driver.handle_observation(obs, trust, now);
                }
            }
            Delivery::Netlink(obs) => self.driver.handle_observation(obs, Trust::Trusted, now),
            Delivery::Sessions(list) => {
                // The host polls its topology before its sessions (both from its start), so
                // every listing is asked for with the ports known; the driver's first-scan
                // rule then completes the scan on the first one, as in the daemon. The
                // engine acts on nothing destructive before it.
                self.driver.topology_reported();
                self.driver.handle_sessions(list, now);
                self.driver.sessions_listed(true, true);
                self.driver.complete_first_scan(true, now);
            }
            Delivery::Outcome { id, outcome } => {
                if let crate::core::recovery::Outcome::SelfTest(r) = &outcome {
                    let text = match r {
                        crate::core::selftest::SelfTestResult::Ran(r) => r.summary(),
                        crate::core::selftest::SelfTestResult::Unavailable { reason } => {
                            format!("self-test unavailable: {reason}")
                        }
                    };
                    self.timeline.push(Entry::Note { at: now, text });
                }
                self.deliver_outcome(id, outcome, now)
            }
            Delivery::Command(c) => {
                // The operator's path, as the daemon runs it: the driver checks and accepts
                // the command and later gives its verdict.
                let text = match self.driver.start_command(c.clone(), now) {
                    Ok((_, msg)) => format!("operator: iser-guard {c}: {msg}"),
                    Err(e) => format!("operator: iser-guard {c}: refused: {e}"),
                };
                self.timeline.push(Entry::Note { at: now, text });
            }
            Delivery::IscsiadmOutput {
                command,
                output,
                code,
            } => self.timeline.push(Entry::Iscsiadm {
                at: now,
                command,
                output,
                code,
            }),
            Delivery::Note(text) => self.timeline.push(Entry::Note { at: now, text }),
            Delivery::RecreationReturned { device, result } => {
                self.timeline.push(Entry::Note {
                    at: now,
                    text: format!("the blocked re-creation of {device} returned: {result}"),
                });
                self.driver
                    .handle_recreation_returned(&device, Some(result), now);
            }
            Delivery::AsyncEvent(ev) => {
                self.timeline.push(Entry::Note {
                    at: now,
                    text: format!("async event {ev}"),
                });
                // From the kernel through uverbs: trusted like netlink.
                self.driver.handle_observation(
                    crate::core::recovery::Observation::AsyncEvent(ev),
                    Trust::Trusted,
                    now,
                )
            }
        }
    }

    /// What an operator command would do on this host, as `--dry-run` shows it: the
    /// driver's plan with the methods the resetter's planner gives for the host's sysfs.
    pub fn plan(&self, cmd: &OperatorCommand) -> Result<CommandPlan, String> {
        let plan = self.driver.plan(cmd).map_err(|e| e.to_string())?;
        match plan.device_to_read().map(str::to_string) {
            None => Ok(plan),
            Some(device) => {
                let remembered = self
                    .engine()
                    .devices()
                    .find(|d| d.name == device)
                    .and_then(|d| d.remembered.clone());
                let methods = self.host.recreate_methods(&device, remembered.as_ref())?;
                Ok(plan.with_methods(methods))
            }
        }
    }

    /// Records the verdicts the driver has due.
    fn collect_verdicts(&mut self, now: Instant) {
        while let Some((_, v)) = self.driver.poll_verdict(now) {
            self.timeline.push(Entry::Note {
                at: now,
                text: format!("verdict: {}", v.message()),
            });
            self.verdicts.push((now, v));
        }
    }

    /// Runs the driver's effects on the simulated executors: the in-memory journal and
    /// the host. Nothing is decided here.
    fn run_effects(&mut self, now: Instant) {
        // Decisions first: they explain the effects that follow.
        self.drain_transitions(now);
        while let Some(effect) = self.driver.poll_effect(now) {
            match effect.kind {
                EffectKind::WriteJournal { snapshot, .. } => {
                    // In the journal's on-disk format, so every restart tests it.
                    self.journal = Some(crate::core::journal::encode(&snapshot));
                    self.journal_writes += 1;
                    self.journaled_at_input = Some(self.inputs);
                    let result = Ok(());
                    self.driver.handle_effect_outcome(
                        effect.id,
                        EffectOutcome::Journal(result),
                        now,
                    );
                }
                EffectKind::Plan { action, refusal } => {
                    self.timeline.push(Entry::Plan {
                        at: now,
                        action: action.clone(),
                        refusal: refusal.clone(),
                    });
                    self.plans.push((now, action, refusal));
                }
                EffectKind::Run { action, authority } => {
                    if action.kind.is_destructive() && self.journaled_at_input != Some(self.inputs)
                    {
                        self.unjournaled_destructive += 1;
                    }
                    self.actions.push((now, action.clone()));
                    self.timeline.push(Entry::Action {
                        at: now,
                        action: action.clone(),
                        authority,
                    });
                    if action.kind.expects_outcome() {
                        self.effect_of.insert(action.id, effect.id);
                    }
                    self.execute(&action, now);
                }
            }
            self.drain_transitions(now);
        }
    }

    fn drain_transitions(&mut self, now: Instant) {
        while let Some(t) = self.driver.poll_transition() {
            self.timeline.push(Entry::Decision {
                at: now,
                transition: t.clone(),
            });
            self.transitions.push(t);
        }
    }

    /// The simulated executors: the host runs the action.
    fn execute(&mut self, a: &Action, now: Instant) {
        match &a.kind {
            ActionKind::ProbePortal { portal, timeout } => {
                self.host.probe(portal, *timeout, a.id, now)
            }
            ActionKind::RecreateDevice {
                device, remembered, ..
            } => {
                let out = self.host.recreate(device, remembered.as_ref(), a.id, now);
                for d in out {
                    self.deliver(d, now);
                }
            }
            ActionKind::IscsiLogin { node, .. } => self.host.login(&node.key, a.id, now),
            ActionKind::IscsiLogout { sid, node, .. } => {
                self.host.logout(*sid, &node.key, a.id, now)
            }
            ActionKind::IscsiRescan { .. } => {}
            ActionKind::NvmeReconnect {
                device,
                controllers,
                ..
            } => {
                let reports = controllers
                    .iter()
                    .map(|c| crate::core::nvme_fabrics::NvmeReconnectReport {
                        controller: c.clone(),
                        result: self.nvme_back(c),
                    })
                    .collect();
                self.deliver(
                    super::host::Delivery::Outcome {
                        id: a.id,
                        outcome: crate::core::recovery::Outcome::NvmeReconnect {
                            device: device.clone(),
                            reports,
                        },
                    },
                    now,
                );
            }
            ActionKind::NfsCheck {
                device,
                mounts,
                window,
            } => {
                // The simulated stat double: the host answers at once or never (a hang is
                // reported as the real checker does at the window's end).
                let reports = mounts
                    .iter()
                    .map(|m| crate::core::nfs_rdma::NfsCheckReport {
                        mount: m.clone(),
                        result: if self.host.nfs_stat(&m.mount_point) {
                            crate::core::nfs_rdma::NfsCheckResult::Answered { after_ms: 0 }
                        } else {
                            crate::core::nfs_rdma::NfsCheckResult::NoAnswer {
                                waited_s: window.as_secs(),
                                earlier_pending: false,
                            }
                        },
                    })
                    .collect();
                self.deliver(
                    super::host::Delivery::Outcome {
                        id: a.id,
                        outcome: crate::core::recovery::Outcome::NfsCheck {
                            device: device.clone(),
                            reports,
                        },
                    },
                    now,
                );
            }
            ActionKind::MultipathReinstate {
                device,
                paths,
                carriers,
                ..
            } => {
                let reports = self.host.multipath_restore(paths, carriers);
                self.deliver(
                    super::host::Delivery::Outcome {
                        id: a.id,
                        outcome: crate::core::recovery::Outcome::MultipathReinstate {
                            device: device.clone(),
                            reports,
                        },
                    },
                    now,
                );
            }
            ActionKind::SelfTestPort {
                device,
                port,
                timeout,
            } => {
                let out = self.host.selftest(device, *port, *timeout, a.id, now);
                for d in out {
                    self.deliver(d, now);
                }
            }
            ActionKind::RefreshSessions => {
                let at = now.plus(Duration::from_millis(50));
                self.host.schedule(at, super::host::HostEvent::DumpSessions);
            }
            ActionKind::RefreshTopology => {
                let at = now.plus(Duration::from_millis(20));
                self.host.schedule(at, super::host::HostEvent::DumpTopology);
            }
            ActionKind::Alert(alert) => self.alerts.push((now, alert.clone())),
            // The driver turns these into journal effects.
            ActionKind::PersistState { .. } => {}
        }
    }

    /// The simulated nvme-cli executor: `nvme connect`, then what the host's sysfs shows,
    /// judged by the core as the real executor judges it (the simulated namespaces always
    /// read).
    fn nvme_back(
        &mut self,
        c: &crate::core::nvme_fabrics::NvmeRdmaController,
    ) -> crate::core::nvme_fabrics::NvmeBackResult {
        use crate::core::nvme_fabrics::{check_back, connect_args, NvmeBackResult};
        if !self.host.nvme_cli {
            return NvmeBackResult::NoNvmeCli;
        }
        let connected = self.host.nvme_connect(&connect_args(c));
        let now = self.host.nvme_controllers();
        match (check_back(c, &now), connected) {
            (Ok((back, _)), _) => NvmeBackResult::Back {
                now: back.name.clone(),
            },
            (Err(_), Err(reason)) => NvmeBackResult::ConnectFailed { reason },
            (Err(e), Ok(())) => e,
        }
    }

    /// Actions of one kind, e.g. `|k| matches!(k, ActionKind::RecreateDevice { .. })`.
    pub fn count_actions(&self, f: impl Fn(&ActionKind) -> bool) -> usize {
        self.actions.iter().filter(|(_, a)| f(&a.kind)).count()
    }

    /// Device re-creations the engine asked for.
    pub fn recreations(&self) -> Vec<String> {
        self.actions
            .iter()
            .filter_map(|(_, a)| match &a.kind {
                ActionKind::RecreateDevice { device, .. } => Some(device.clone()),
                _ => None,
            })
            .collect()
    }

    /// When storage was last back (every session logged in with running disks).
    pub fn storage_back_at(&self) -> Option<Instant> {
        self.timeline.iter().rev().find_map(|e| match e {
            Entry::StorageBack { at } => Some(*at),
            _ => None,
        })
    }

    /// Renders the timeline for a terminal.
    pub fn render(&self) -> String {
        render(&self.timeline, &self.severities)
    }
}

/// Renders a timeline: kernel lines as dmesg shows them, then decisions, actions, iscsiadm
/// output, and when storage was back. Kernel lines and probes that repeat between two
/// decisions are counted, not repeated. An alert shows the severity `severities` gives its
/// class, the one syslog would get.
pub fn render(timeline: &[Entry], severities: &AlertSeverities) -> String {
    let mut s = String::new();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut repeats = 0usize;
    let mut probes = 0usize;
    let mut probe_printed = false;
    let mut last_at = Instant::ZERO;
    let blank = "";
    for e in timeline {
        match e {
            Entry::Kernel { at, facility, text } => {
                if seen.contains(text.as_str()) {
                    repeats += 1;
                    last_at = *at;
                    continue;
                }
                seen.insert(text);
                let who = if *facility == KERNEL_FACILITY {
                    "kernel"
                } else {
                    "USER!"
                };
                s.push_str(&format!("{:>9}  {who:<8} {text}\n", at.to_string()));
                continue;
            }
            Entry::Action { at, action, .. } => {
                if matches!(
                    action.kind,
                    ActionKind::RefreshSessions | ActionKind::RefreshTopology
                ) {
                    continue;
                }
                if matches!(action.kind, ActionKind::ProbePortal { .. }) {
                    if probe_printed {
                        probes += 1;
                        last_at = *at;
                        continue;
                    }
                    probe_printed = true;
                }
            }
            _ => {}
        }
        if repeats > 0 || probes > 0 {
            s.push_str(&format!(
                "{blank:>9}  ...      until {last_at}: {repeats} repeated kernel line(s), {probes} more probe(s)\n"
            ));
            repeats = 0;
            probes = 0;
        }
        if matches!(e, Entry::Decision { .. }) {
            seen.clear();
            probe_printed = false;
        }
        match e {
            Entry::Note { at, text } => {
                s.push_str(&format!("{:>9}  host     {text}\n", at.to_string()))
            }
            Entry::Decision { at, transition } => s.push_str(&format!(
                "{:>9}  DECIDE   {}: {} -> {}\n{blank:>9}           why: {}\n",
                at.to_string(),
                transition.port,
                transition.from,
                transition.to,
                transition.reason
            )),
            Entry::Plan {
                at,
                action,
                refusal,
            } => s.push_str(&format!(
                "{:>9}  PLAN     {action}\n{blank:>9}           not run: {refusal}\n",
                at.to_string()
            )),
            Entry::Action { at, action, .. } => match &action.kind {
                ActionKind::Alert(a) => {
                    let count = if a.count > 1 {
                        format!(" (x{})", a.count)
                    } else {
                        String::new()
                    };
                    s.push_str(&format!(
                        "{:>9}  ALERT    [{}] {}{count}\n",
                        at.to_string(),
                        severities.of(a.severity).name(),
                        a.summary
                    ));
                    if let Some(r) = &a.remedy {
                        s.push_str(&format!("{blank:>9}           operator can run: {r}\n"));
                    }
                }
                _ => s.push_str(&format!(
                    "{:>9}  DO       {action}\n{blank:>9}           why: {}\n",
                    at.to_string(),
                    action.reason
                )),
            },
            Entry::Iscsiadm {
                at,
                command,
                output,
                code,
            } => {
                s.push_str(&format!(
                    "{:>9}  exec     {command}  (exit {code})\n",
                    at.to_string()
                ));
                for l in output.lines() {
                    s.push_str(&format!("{blank:>9}           | {l}\n"));
                }
            }
            Entry::Restart { at } => s.push_str(&format!(
                "{:>9}  agent    restarted, resumed from the journal\n",
                at.to_string()
            )),
            Entry::StorageBack { at } => s.push_str(&format!(
                "{:>9}  STORAGE  every session logged in, disks running\n",
                at.to_string()
            )),
            Entry::Kernel { .. } => {}
        }
    }
    if repeats > 0 || probes > 0 {
        s.push_str(&format!(
            "{blank:>9}  ...      until {last_at}: {repeats} repeated kernel line(s), {probes} more probe(s)\n"
        ));
    }
    s
}
