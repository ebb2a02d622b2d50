//! Driver-stack conditions ([`crate::driver_stack`]): kept as reported, said once each as an
//! alert when they first appear, and asked before a re-creation: a device whose PCI function
//! has no RDMA (a bonded E810 port, ice's safe mode) is never re-created.

use super::Engine;
use crate::driver_stack::StackCondition;
use crate::recovery::action::AlertClass;
use crate::time::Instant;

impl Engine {
    /// The host's facts show `conditions` now (the whole list).
    pub(super) fn on_driver_stack(&mut self, mut conditions: Vec<StackCondition>, now: Instant) {
        conditions.sort();
        conditions.dedup();
        let new: Vec<StackCondition> = conditions
            .iter()
            .filter(|c| !self.stack_facts.contains(c) && !self.stack_said.contains(c))
            .cloned()
            .collect();
        self.stack_facts = conditions;
        for c in new {
            self.say_stack_condition(&c, now);
        }
    }

    /// The kernel log said `condition` (kept for this run).
    pub(super) fn on_driver_stack_said(&mut self, condition: StackCondition, now: Instant) {
        if self.stack_said.contains(&condition) || self.stack_facts.contains(&condition) {
            if !self.stack_said.contains(&condition) {
                self.stack_said.push(condition);
            }
            return;
        }
        self.say_stack_condition(&condition, now);
        self.stack_said.push(condition);
        self.stack_said.sort();
    }

    /// One alert for a condition that just appeared.
    fn say_stack_condition(&mut self, c: &StackCondition, now: Instant) {
        let severity = if c.function_without_rdma().is_some() {
            // Only an operator can give the function RDMA back.
            AlertClass::Critical
        } else {
            AlertClass::Warning
        };
        self.alert(
            now,
            severity,
            format!("driver-stack:{}", c.key()),
            c.summary(),
            format!("{}. What to do: {}", c.detail(), c.remedy()),
            c.command(),
        );
    }

    /// Every driver-stack condition known now, sorted.
    pub fn driver_stack(&self) -> Vec<StackCondition> {
        let mut all: Vec<StackCondition> = self
            .stack_facts
            .iter()
            .chain(&self.stack_said)
            .cloned()
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// The condition that leaves `device`'s PCI function without RDMA, if one does.
    pub(super) fn function_without_rdma(&self, device: &str) -> Option<StackCondition> {
        let parent = self.devices.get(device)?.parent.as_deref()?;
        self.stack_facts
            .iter()
            .chain(&self.stack_said)
            .find(|c| c.function_without_rdma() == Some(parent))
            .cloned()
    }
}
