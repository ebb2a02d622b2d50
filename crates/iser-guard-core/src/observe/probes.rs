//! Which target-back probes are news for the event ring and the daemon's log.
//!
//! While a port waits for its target, or holds for an operator, the engine probes the
//! portal every `poll.probe` (0.5 s by default): two records a second for as long as the
//! outage lasts, hours in the field. Entered one by one they would push the fault, the
//! alerts and the transitions out of the bounded ring (`events`, `history`) within
//! minutes, and write thousands of identical lines an hour to the journal. A probe is
//! entered when it is news: the first answer from a portal, and every change of answer
//! (no answer → reachable is the moment recovery waits for). The rest is counted by the
//! metrics and logged at debug level.

use std::collections::BTreeMap;

use crate::driver::EffectId;
use crate::recovery::{Action, ActionKind, Outcome, Portal};

/// The probes in flight and each portal's last answer.
#[derive(Debug, Default)]
pub struct ProbeNews {
    in_flight: BTreeMap<EffectId, Portal>,
    last: BTreeMap<Portal, String>,
}

impl ProbeNews {
    /// An empty record: every portal's first answer will be news.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes an action started as `id`. True when it is a probe: its decision is routine
    /// (only its answer can be news).
    pub fn started(&mut self, id: EffectId, action: &Action) -> bool {
        match &action.kind {
            ActionKind::ProbePortal { portal, .. } => {
                self.in_flight.insert(id, portal.clone());
                true
            }
            _ => false,
        }
    }

    /// Forgets every portal's last answer: the next one is news again (an operator's
    /// command starts a fresh account, so the operator following it sees the target's answer).
    pub fn forget_answers(&mut self) {
        self.last.clear();
    }

    /// Whether the outcome of effect `id` is news: anything but a probe, or a probe whose
    /// answer differs from the portal's last one.
    pub fn finished(&mut self, id: EffectId, outcome: &Outcome) -> bool {
        let Some(portal) = self.in_flight.remove(&id) else {
            return true;
        };
        // An answer in words: a probe that did not run (shutdown, a full pool) is an
        // answer of its own, so its end and the next real answer are both news.
        let answer = outcome.to_string();
        match self.last.get(&portal) {
            Some(last) if *last == answer => false,
            _ => {
                self.last.insert(portal, answer);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::{ActionId, Origin, ProbeResult};
    use std::time::Duration;

    fn portal(ip: &str) -> Portal {
        Portal::from(std::net::SocketAddr::new(ip.parse().unwrap(), 3260))
    }

    fn probe(p: &Portal) -> Action {
        Action {
            id: ActionId(1),
            port: None,
            device: None,
            kind: ActionKind::ProbePortal {
                portal: p.clone(),
                timeout: Duration::from_secs(1),
            },
            origin: Origin::Automatic,
            reason: "is the target back?".into(),
        }
    }

    #[test]
    fn only_the_first_answer_and_each_change_are_news() {
        let mut news = ProbeNews::new();
        let p = portal("192.0.2.2");
        let answers = [
            ProbeResult::Unreachable,
            ProbeResult::Unreachable,
            ProbeResult::Unreachable,
            ProbeResult::Reachable,
            ProbeResult::Reachable,
            ProbeResult::Unreachable,
        ];
        let seen: Vec<bool> = answers
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let id = EffectId(i as u64);
                assert!(news.started(id, &probe(&p)));
                news.finished(id, &Outcome::Probe(r))
            })
            .collect();
        assert_eq!(seen, [true, false, false, true, false, true]);
    }

    #[test]
    fn after_forget_answers_the_next_answer_is_news_again() {
        let mut news = ProbeNews::new();
        let p = portal("192.0.2.2");
        news.started(EffectId(1), &probe(&p));
        assert!(news.finished(EffectId(1), &Outcome::Probe(ProbeResult::Reachable)));
        news.started(EffectId(2), &probe(&p));
        assert!(!news.finished(EffectId(2), &Outcome::Probe(ProbeResult::Reachable)));
        news.forget_answers();
        news.started(EffectId(3), &probe(&p));
        assert!(news.finished(EffectId(3), &Outcome::Probe(ProbeResult::Reachable)));
    }

    #[test]
    fn portals_are_kept_apart_and_other_actions_are_always_news() {
        let mut news = ProbeNews::new();
        let (a, b) = (portal("192.0.2.2"), portal("192.0.2.3"));
        news.started(EffectId(1), &probe(&a));
        news.started(EffectId(2), &probe(&b));
        assert!(news.finished(EffectId(1), &Outcome::Probe(ProbeResult::Reachable)));
        assert!(news.finished(EffectId(2), &Outcome::Probe(ProbeResult::Reachable)));
        // An id that was no probe: its outcome is news, whatever it says.
        let not_run = Outcome::NotRun {
            reason: "shutting down".into(),
        };
        assert!(news.finished(EffectId(3), &not_run));
        assert!(news.finished(EffectId(3), &not_run));
    }
}
