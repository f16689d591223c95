//! The samples of the `memory.events` counters that event comparisons read
//! (see the module docs of `condition`): one history per counter and group.

use super::BUCKETS;
use crate::engine::rule_state::Time;
use crate::policy::expr::{MemEvent, Threshold};
use std::collections::VecDeque;
use std::time::Duration;

/// The samples of one `memory.events` counter (see the module docs).
#[derive(Debug, Clone, Default)]
pub(super) struct History {
    /// `(time, value)`, oldest first: the baseline (or, once pruned, the
    /// reference for the longest window), then one sample per change of
    /// the value, at most one per bucket. Values never decrease: a decrease
    /// restarts the history.
    pub(super) samples: VecDeque<(Time, u64)>,
    /// When the counter was last read: it is read once per evaluation time.
    pub(super) read_at: Option<Time>,
    /// The longest window asked of this counter: how far back samples are
    /// needed. Only grows (until [`Evaluator::retain`] drops the history).
    pub(super) retention: Duration,
    /// Every window asked of this counter (a handful: one per distinct
    /// window in the policy), for [`History::next_expiry`].
    pub(super) windows: std::collections::BTreeSet<Duration>,
}

impl History {
    /// Records the counter's value at `now`; `None`: unavailable.
    pub(super) fn observe(&mut self, now: Time, value: Option<u64>) {
        self.read_at = Some(now);
        let Some(v) = value else {
            self.samples.clear();
            return;
        };
        // Time never goes backwards here, even if a caller's clock did.
        let now = match self.samples.back() {
            Some(&(t, _)) if now < t => t,
            _ => now,
        };
        let bucket = |t: Time| {
            let width = (self.retention.as_nanos() / u128::from(BUCKETS)).max(1);
            t.as_nanos() / width
        };
        match self.samples.back().copied() {
            Some((_, last)) if v == last => {}
            Some((t, last)) if v > last && self.samples.len() >= 2 && bucket(t) == bucket(now) => {
                // Same bucket as the previous change: the earlier change
                // is attributed to `now` (it may count up to a bucket
                // longer), so the history stays bounded in an event storm.
                if let Some(back) = self.samples.back_mut() {
                    *back = (now, v);
                }
            }
            Some((_, last)) if v > last => self.samples.push_back((now, v)),
            // First observation, or the counter went down: a new baseline.
            _ => {
                self.samples.clear();
                self.samples.push_back((now, v));
            }
        }
        // Drop what no window reaches: keep the latest sample at or before
        // `now - retention`, the reference for the longest window.
        if let Some(horizon) = now.checked_sub(self.retention) {
            while self.samples.get(1).is_some_and(|&(t, _)| t <= horizon) {
                self.samples.pop_front();
            }
        }
    }

    /// The earliest time after `now` at which an event counted now leaves
    /// one of the windows in use (a count drops then, with no new input).
    pub(super) fn next_expiry(&self, now: Time) -> Option<Time> {
        self.windows
            .iter()
            .filter_map(|&w| {
                let start = now.checked_sub(w).unwrap_or(Duration::ZERO);
                // The oldest change inside the window (the baseline is not
                // an event) leaves it at its time + w.
                let first = self.samples.partition_point(|&(t, _)| t <= start).max(1);
                self.samples.get(first).map(|&(t, _)| t + w)
            })
            .filter(|&t| t > now)
            .min()
    }

    /// New events within `(now - window, now]`; `None` while unavailable.
    pub(super) fn count(&self, now: Time, window: Duration) -> Option<u64> {
        let &(_, current) = self.samples.back()?;
        // The latest sample at or before the window's start; before the
        // history is that old, the baseline.
        let reference = now
            .checked_sub(window)
            .map(|start| self.samples.partition_point(|&(t, _)| t <= start))
            .and_then(|after| after.checked_sub(1))
            .and_then(|i| self.samples.get(i))
            .or(self.samples.front());
        reference.map(|&(_, base)| current.saturating_sub(base))
    }
}

/// The five `memory.events` counters of one group, by [`slot`].
pub(super) type GroupHistories = [History; 5];

pub(super) fn slot(event: MemEvent) -> usize {
    match event {
        MemEvent::High => 0,
        MemEvent::Max => 1,
        MemEvent::Oom => 2,
        MemEvent::OomKill => 3,
        MemEvent::OomGroupKill => 4,
    }
}

/// The window of an event comparison: its own, or the tick for the bare form.
pub(super) fn event_window(threshold: &Threshold, tick: Duration) -> Option<Duration> {
    match threshold {
        Threshold::Events { window, .. } => Some(window.map_or(tick, |w| w.get())),
        _ => None,
    }
}
