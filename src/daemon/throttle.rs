//! Throttle episodes: one rising edge of
//! `throttled(POLICY)` is one episode — counted for the metric
//! `cgwarden_throttle_episodes_total{policy}`, sent as a `throttle` event
//! (the recorder keeps events; the report's thermal criterion counts them)
//! and logged. A policy that stays throttled is one episode however long
//! it lasts; a policy first seen throttled at startup counts as one.

use std::collections::BTreeMap;

/// The last state and the episode count of each tracked policy.
#[derive(Debug, Default)]
pub(crate) struct ThrottleTracker {
    last: BTreeMap<String, bool>,
    pub(crate) episodes: BTreeMap<String, u64>,
}

impl ThrottleTracker {
    /// Takes one sample of `throttled()` per policy; returns the policies
    /// whose episode starts now.
    pub(crate) fn observe(&mut self, now: &BTreeMap<String, bool>) -> Vec<String> {
        let mut rising = Vec::new();
        for (policy, &t) in now {
            let before = self.last.insert(policy.clone(), t).unwrap_or(false);
            self.episodes.entry(policy.clone()).or_insert(0);
            if t && !before {
                *self.episodes.entry(policy.clone()).or_insert(0) += 1;
                rising.push(policy.clone());
            }
        }
        rising
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(v: &[(&str, bool)]) -> BTreeMap<String, bool> {
        v.iter().map(|(p, t)| (p.to_string(), *t)).collect()
    }

    #[test]
    fn one_episode_per_rising_edge() {
        let mut t = ThrottleTracker::default();
        assert!(t
            .observe(&at(&[("policy7", false), ("policy4", false)]))
            .is_empty());
        assert_eq!(t.observe(&at(&[("policy7", true)])), vec!["policy7"]);
        // Held: no new episode.
        assert!(t.observe(&at(&[("policy7", true)])).is_empty());
        assert!(t.observe(&at(&[("policy7", true)])).is_empty());
        assert!(t.observe(&at(&[("policy7", false)])).is_empty());
        assert_eq!(t.observe(&at(&[("policy7", true)])), vec!["policy7"]);
        assert_eq!(t.episodes.get("policy7"), Some(&2));
        assert_eq!(t.episodes.get("policy4"), Some(&0));
        // A policy unreadable for a tick (absent from the sample) keeps its state.
        assert!(t.observe(&at(&[])).is_empty());
        assert!(t.observe(&at(&[("policy7", true)])).is_empty());
    }
}
