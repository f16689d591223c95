//! When to retry recreating a group deleted from outside.
//!
//! The repair itself lives in the daemon (it needs the actuator, the knob
//! table and the watchers); this module owns only the schedule: a group whose
//! `mkdir` (or baseline write) fails is retried with a doubling delay, from
//! one second up to a minute, instead of at every evaluation. A failure is
//! logged when its streak starts and then at most once per retry, so a
//! cgroup root that refuses new groups (a delegated subtree whose owner went
//! away, a read-only mount) costs one line a minute, not one per wake-up.
//!
//! Deliberately not the converger: a repair recreates one group alone with
//! its knobs' baselines and then their effective values; it never rewrites
//! another group or the system knobs (re-running the one-shot converge would
//! undo live claims on other groups).

use std::collections::HashMap;
use std::time::{Duration, Instant};

const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct Backoff {
    next: Instant,
    delay: Duration,
    failures: u32,
}

/// Retry schedule per group name.
#[derive(Debug, Default)]
pub(crate) struct RepairSchedule {
    groups: HashMap<String, Backoff>,
}

impl RepairSchedule {
    pub(crate) fn new() -> Self {
        RepairSchedule::default()
    }

    /// Whether a repair of `group` may be attempted at `now`.
    pub(crate) fn due(&self, group: &str, now: Instant) -> bool {
        self.groups.get(group).is_none_or(|b| now >= b.next)
    }

    /// Records a failed attempt; returns the delay until the next one and
    /// how many attempts in a row have failed.
    pub(crate) fn failed(&mut self, group: &str, now: Instant) -> (Duration, u32) {
        let b = self
            .groups
            .entry(group.to_string())
            .and_modify(|b| {
                b.delay = (b.delay * 2).min(MAX_RETRY);
                b.failures = b.failures.saturating_add(1);
            })
            .or_insert(Backoff {
                next: now,
                delay: FIRST_RETRY,
                failures: 1,
            });
        b.next = now + b.delay;
        (b.delay, b.failures)
    }

    /// Records a successful repair: the next failure starts a new streak.
    pub(crate) fn succeeded(&mut self, group: &str) {
        self.groups.remove(group);
    }

    /// The earliest time a pending retry is due, so the daemon can wake for it.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.groups.values().map(|b| b.next).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_and_success_resets() {
        let t0 = Instant::now();
        let mut s = RepairSchedule::new();
        assert!(s.due("a", t0));
        assert_eq!(s.failed("a", t0), (Duration::from_secs(1), 1));
        assert!(!s.due("a", t0 + Duration::from_millis(999)));
        assert!(s.due("a", t0 + Duration::from_secs(1)));
        assert!(s.due("b", t0), "other groups are not held back");
        let mut now = t0;
        let mut delays = Vec::new();
        for _ in 0..8 {
            now += Duration::from_secs(61);
            delays.push(s.failed("a", now).0.as_secs());
        }
        assert_eq!(delays, [2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(s.next_due(), Some(now + Duration::from_secs(60)));
        s.succeeded("a");
        assert!(s.due("a", now));
        assert_eq!(s.next_due(), None);
        assert_eq!(s.failed("a", now), (Duration::from_secs(1), 1));
    }
}
