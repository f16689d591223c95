//! Claims on knobs and THE merge: `while` actions and boosts are claims.
//!
//! A claim is a value an owner — an active rule's `while` action or an
//! operator's `cgwarden boost` — wants a knob to hold. This module owns the
//! live claims and the one place where competing claims on a knob are merged
//! into a single winner; the merge policy of each knob comes from the single
//! table in [`Knob::merge_policy`]:
//!
//! - [`MergePolicy::Largest`]: the claim granting the most resource wins
//!   ([`KnobValue::cmp_resource`]).
//! - [`MergePolicy::Smallest`]: the smallest claim wins
//!   ([`KnobValue::cmp_latency`]; `latency.*`, where less tolerated wake-up
//!   latency is more performance). Ties go to the first-ranked claim.
//! - [`MergePolicy::First`]: the first-ranked claim wins. Boosts rank
//!   before every rule (an operator's explicit request), later boost handles
//!   before earlier ones, then rules in policy order (lowest index first).
//!
//! Claims are kept per knob in rank order, so the merge is one pass with no
//! allocation: for largest-wins knobs a claim replaces the current winner only
//! when it is strictly larger. Hence equal values go to the first-ranked
//! claim, and a value that cannot be compared with the current winner
//! (different value types, which a validated policy never produces) never
//! displaces it.
//!
//! **Caps**: a claim with `cap: true`
//! (a rule's `cap KNOB at VALUE`, `boost --cap`) is a protective ceiling on
//! a ceiling-type knob ([`Knob::is_ceiling`]). Caps take no part in the
//! merge above: [`Claims::effective`] merges the other claims, [`Claims::cap`]
//! is the smallest cap (ties to the first-ranked), and the knob's value is
//! the smaller of the two ([`capped`]), so a cap beats every raise, a boost's
//! included. With no other claim, the cap holds against the baseline
//! (`engine::knobs`).
//!
//! Decisions where the SPEC is silent:
//! - An owner holds at most one claim per knob: adding a claim replaces the
//!   owner's previous claim on that knob; [`Claims::set_owner`] replaces an
//!   owner's whole claim set (a rule re-claiming after a reload).
//! - A claim expires at its deadline exactly (`deadline <= now`).
//! - Two owners of equal rank (a rule index reused under another name) keep
//!   insertion order.

use super::rule_state::Time;
use crate::knobs::{Knob, KnobValue, MergePolicy};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// Who holds a claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// An active rule's `while` action; `index` is the rule's position in
    /// the policy.
    Rule { index: usize, name: String },
    /// A `cgwarden boost`; later boosts have larger handles.
    Boost { handle: u64 },
}

impl Owner {
    /// Rank for first-wins merging: `Less` means `self` wins over `other`.
    pub(crate) fn rank_cmp(&self, other: &Owner) -> Ordering {
        match (self, other) {
            (Owner::Boost { handle: a }, Owner::Boost { handle: b }) => b.cmp(a),
            (Owner::Boost { .. }, Owner::Rule { .. }) => Ordering::Less,
            (Owner::Rule { .. }, Owner::Boost { .. }) => Ordering::Greater,
            (Owner::Rule { index: a, .. }, Owner::Rule { index: b, .. }) => a.cmp(b),
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Rule { name, .. } => write!(f, "rule {name}"),
            Owner::Boost { handle } => write!(f, "boost {handle}"),
        }
    }
}

/// One claim: `owner` wants `knob` to hold `value`, until `deadline` if any.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Claim {
    pub(crate) owner: Owner,
    pub(crate) knob: Knob,
    pub(crate) value: KnobValue,
    pub(crate) deadline: Option<Time>,
    /// A cap: `value` is a ceiling, not a wish (module docs).
    pub(crate) cap: bool,
}

/// The value of a knob whose other claims (or baseline) merge to `merged`
/// while `cap` holds: the smaller of the two, the cap's owner winning when
/// the cap is smaller (or nothing else is known). Values that cannot be
/// compared keep the merged value.
pub(crate) fn capped<'a>(
    merged: Option<(&'a KnobValue, Option<&'a Owner>)>,
    cap: Option<(&'a KnobValue, &'a Owner)>,
) -> Option<(&'a KnobValue, Option<&'a Owner>)> {
    match (merged, cap) {
        (m, None) => m,
        (None, Some((v, o))) => Some((v, Some(o))),
        (Some((mv, mo)), Some((cv, co))) => match cv.cmp_resource(mv) {
            Some(Ordering::Less) => Some((cv, Some(co))),
            _ => Some((mv, mo)),
        },
    }
}

/// The live claims, per knob, each list in rank order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Claims {
    by_knob: BTreeMap<Knob, Vec<Claim>>,
}

impl Claims {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Claims::default()
    }

    /// Adds a claim, replacing the same owner's claim on the same knob.
    /// Returns the replaced claim.
    pub(crate) fn add(&mut self, claim: Claim) -> Option<Claim> {
        let list = self.by_knob.entry(claim.knob.clone()).or_default();
        let old = list
            .iter()
            .position(|c| c.owner == claim.owner)
            .map(|i| list.remove(i));
        // After every claim that ranks before or equal: stable order.
        let at = list
            .iter()
            .position(|c| claim.owner.rank_cmp(&c.owner) == Ordering::Less)
            .unwrap_or(list.len());
        list.insert(at, claim);
        old
    }

    /// Replaces `owner`'s whole claim set with `claims` (all with the same
    /// `deadline`). Returns the claims that were removed.
    pub(crate) fn set_owner(
        &mut self,
        owner: &Owner,
        claims: impl IntoIterator<Item = (Knob, KnobValue)>,
        deadline: Option<Time>,
    ) -> Vec<Claim> {
        let removed = self.release_owner(owner);
        for (knob, value) in claims {
            self.add(Claim {
                owner: owner.clone(),
                knob,
                value,
                deadline,
                cap: false,
            });
        }
        removed
    }

    /// Removes every claim of `owner`; returns them.
    pub(crate) fn release_owner(&mut self, owner: &Owner) -> Vec<Claim> {
        self.remove_where(|c| &c.owner == owner)
    }

    /// Removes the claims whose deadline is at or before `now`; returns them.
    pub(crate) fn expire(&mut self, now: Time) -> Vec<Claim> {
        self.remove_where(|c| c.deadline.is_some_and(|d| d <= now))
    }

    /// Removes every claim `pred` selects (a reload dropping boosts on
    /// knobs that left the policy); returns them.
    pub(crate) fn remove_where(&mut self, mut pred: impl FnMut(&Claim) -> bool) -> Vec<Claim> {
        let mut removed = Vec::new();
        for list in self.by_knob.values_mut() {
            let mut i = 0;
            while i < list.len() {
                if list.get(i).is_some_and(&mut pred) {
                    removed.push(list.remove(i));
                } else {
                    i += 1;
                }
            }
        }
        self.by_knob.retain(|_, list| !list.is_empty());
        removed
    }

    /// The merged value of the live claims on `knob` and the winning owner;
    /// `None` when no claim holds the knob.
    pub(crate) fn effective(&self, knob: &Knob) -> Option<(&KnobValue, &Owner)> {
        let list = self.by_knob.get(knob)?;
        let mut iter = list.iter().filter(|c| !c.cap);
        let mut best = iter.next()?;
        match knob.merge_policy() {
            MergePolicy::Largest => {
                for c in iter {
                    if c.value.cmp_resource(&best.value) == Some(Ordering::Greater) {
                        best = c;
                    }
                }
            }
            MergePolicy::Smallest => {
                for c in iter {
                    if c.value.cmp_latency(&best.value) == Some(Ordering::Less) {
                        best = c;
                    }
                }
            }
            MergePolicy::First => {}
        }
        Some((&best.value, &best.owner))
    }

    /// The smallest live cap on `knob` and its owner (ties: first-ranked).
    pub(crate) fn cap(&self, knob: &Knob) -> Option<(&KnobValue, &Owner)> {
        let mut caps = self.by_knob.get(knob)?.iter().filter(|c| c.cap);
        let mut best = caps.next()?;
        for c in caps {
            if c.value.cmp_resource(&best.value) == Some(Ordering::Less) {
                best = c;
            }
        }
        Some((&best.value, &best.owner))
    }

    /// Every live claim: knobs in order, each knob's claims in rank order.
    pub(crate) fn live(&self) -> impl Iterator<Item = &Claim> {
        self.by_knob.values().flatten()
    }

    /// The claims on one knob, in rank order.
    pub(crate) fn on_knob(&self, knob: &Knob) -> &[Claim] {
        self.by_knob.get(knob).map_or(&[], Vec::as_slice)
    }

    /// The knobs with at least one live claim.
    #[cfg(test)]
    pub(crate) fn knobs(&self) -> impl Iterator<Item = &Knob> {
        self.by_knob.keys()
    }

    /// The earliest deadline of any live claim, so the daemon can wake then.
    pub(crate) fn next_expiry(&self) -> Option<Time> {
        self.live().filter_map(|c| c.deadline).min()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_knob.is_empty()
    }

    /// The number of live claims.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_knob.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::units::{Frequency, Size};
    use proptest::prelude::*;
    use std::time::Duration;

    pub(crate) fn knob(text: &str) -> Knob {
        Knob::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    pub(crate) fn rule(index: usize) -> Owner {
        Owner::Rule {
            index,
            name: format!("r{index}"),
        }
    }

    pub(crate) fn boost(handle: u64) -> Owner {
        Owner::Boost { handle }
    }

    fn claim(owner: Owner, k: &str, value: KnobValue) -> Claim {
        Claim {
            owner,
            knob: knob(k),
            value,
            deadline: None,
            cap: false,
        }
    }

    fn cap(owner: Owner, k: &str, value: KnobValue) -> Claim {
        Claim {
            cap: true,
            ..claim(owner, k, value)
        }
    }

    fn mhz(m: u64) -> KnobValue {
        KnobValue::Frequency(Frequency { khz: m * 1000 })
    }

    fn gov(g: &str) -> KnobValue {
        KnobValue::Word(g.into())
    }

    #[test]
    fn empty_has_no_effective_value() {
        let c = Claims::new();
        assert_eq!(c.effective(&knob("cpufreq.policy0.min")), None);
        assert!(c.is_empty());
        assert_eq!(c.next_expiry(), None);
    }

    #[test]
    fn smallest_wins_for_latency_boosts_and_rules_alike() {
        let mut c = Claims::new();
        let k = knob("latency.global");
        let us = |v| KnobValue::Latency(Some(v));
        c.add(claim(rule(0), "latency.global", us(100)));
        c.add(claim(rule(1), "latency.global", us(20)));
        assert_eq!(c.effective(&k).map(|(v, _)| v.clone()), Some(us(20)));
        // A boost ranks first but does not win with a larger tolerance.
        c.add(claim(boost(1), "latency.global", us(50)));
        assert_eq!(c.effective(&k).map(|(_, o)| o.clone()), Some(rule(1)));
        c.add(claim(boost(2), "latency.global", us(0)));
        assert_eq!(
            c.effective(&k).map(|(v, o)| (v.clone(), o.clone())),
            Some((us(0), boost(2)))
        );
        // Equal values: the first-ranked claim wins.
        c.add(claim(rule(0), "latency.global", us(0)));
        assert_eq!(c.effective(&k).map(|(_, o)| o.clone()), Some(boost(2)));
        c.release_owner(&boost(2));
        c.release_owner(&rule(0));
        assert_eq!(c.effective(&k).map(|(v, _)| v.clone()), Some(us(20)));
    }

    #[test]
    fn largest_wins_regardless_of_rank() {
        let mut c = Claims::new();
        let k = knob("cpufreq.policy4.min");
        c.add(claim(rule(0), "cpufreq.policy4.min", mhz(1200)));
        c.add(claim(rule(3), "cpufreq.policy4.min", mhz(1800)));
        c.add(claim(boost(9), "cpufreq.policy4.min", mhz(1500)));
        assert_eq!(c.effective(&k), Some((&mhz(1800), &rule(3))));
    }

    #[test]
    fn largest_wins_max_beats_bytes() {
        let mut c = Claims::new();
        let k = knob("g.memory.high");
        c.add(claim(
            rule(0),
            "g.memory.high",
            KnobValue::Size(Size::Bytes(1 << 30)),
        ));
        c.add(claim(rule(1), "g.memory.high", KnobValue::Size(Size::Max)));
        assert_eq!(c.effective(&k).map(|e| e.1), Some(&rule(1)));
    }

    #[test]
    fn largest_wins_tie_goes_to_first_ranked() {
        let mut c = Claims::new();
        let k = knob("g.cpu.weight");
        c.add(claim(rule(2), "g.cpu.weight", KnobValue::Weight(500)));
        c.add(claim(rule(1), "g.cpu.weight", KnobValue::Weight(500)));
        c.add(claim(boost(1), "g.cpu.weight", KnobValue::Weight(100)));
        assert_eq!(c.effective(&k), Some((&KnobValue::Weight(500), &rule(1))));
        c.add(claim(boost(2), "g.cpu.weight", KnobValue::Weight(500)));
        assert_eq!(c.effective(&k), Some((&KnobValue::Weight(500), &boost(2))));
    }

    #[test]
    fn incomparable_values_keep_the_first_ranked() {
        let mut c = Claims::new();
        let k = knob("g.cpu.weight");
        c.add(claim(rule(1), "g.cpu.weight", KnobValue::Weight(10)));
        c.add(claim(rule(0), "g.cpu.weight", KnobValue::Int(99)));
        assert_eq!(c.effective(&k), Some((&KnobValue::Int(99), &rule(0))));
    }

    #[test]
    fn first_wins_boost_before_rules_latest_boost_first() {
        let mut c = Claims::new();
        let k = knob("cpufreq.policy7.governor");
        c.add(claim(rule(2), "cpufreq.policy7.governor", gov("powersave")));
        c.add(claim(rule(1), "cpufreq.policy7.governor", gov("schedutil")));
        assert_eq!(c.effective(&k), Some((&gov("schedutil"), &rule(1))));
        c.add(claim(
            boost(3),
            "cpufreq.policy7.governor",
            gov("performance"),
        ));
        c.add(claim(boost(4), "cpufreq.policy7.governor", gov("ondemand")));
        assert_eq!(c.effective(&k), Some((&gov("ondemand"), &boost(4))));
        c.release_owner(&boost(4));
        assert_eq!(c.effective(&k), Some((&gov("performance"), &boost(3))));
        c.release_owner(&boost(3));
        c.release_owner(&rule(1));
        assert_eq!(c.effective(&k), Some((&gov("powersave"), &rule(2))));
        c.release_owner(&rule(2));
        assert_eq!(c.effective(&k), None);
        assert!(c.is_empty());
    }

    #[test]
    fn sysctl_first_listed_rule_wins_even_if_smaller() {
        let mut c = Claims::new();
        let k = knob("sysctl.kernel.sched_rt_runtime_us");
        c.add(claim(
            rule(5),
            "sysctl.kernel.sched_rt_runtime_us",
            KnobValue::Int(950000),
        ));
        c.add(claim(
            rule(2),
            "sysctl.kernel.sched_rt_runtime_us",
            KnobValue::Int(-1),
        ));
        assert_eq!(c.effective(&k), Some((&KnobValue::Int(-1), &rule(2))));
    }

    #[test]
    fn add_replaces_same_owner_same_knob() {
        let mut c = Claims::new();
        let k = knob("g.cpu.weight");
        assert_eq!(
            c.add(claim(rule(0), "g.cpu.weight", KnobValue::Weight(900))),
            None
        );
        let old = c.add(claim(rule(0), "g.cpu.weight", KnobValue::Weight(100)));
        assert_eq!(old.map(|o| o.value), Some(KnobValue::Weight(900)));
        assert_eq!(c.len(), 1);
        assert_eq!(c.effective(&k).map(|e| e.0), Some(&KnobValue::Weight(100)));
    }

    #[test]
    fn set_owner_replaces_whole_set() {
        let mut c = Claims::new();
        c.add(claim(rule(0), "a.cpu.weight", KnobValue::Weight(1)));
        c.add(claim(rule(0), "b.cpu.weight", KnobValue::Weight(2)));
        c.add(claim(rule(1), "b.cpu.weight", KnobValue::Weight(3)));
        let removed = c.set_owner(
            &rule(0),
            [(knob("c.cpu.weight"), KnobValue::Weight(4))],
            None,
        );
        assert_eq!(removed.len(), 2);
        assert_eq!(c.effective(&knob("a.cpu.weight")), None);
        assert_eq!(
            c.effective(&knob("b.cpu.weight")).map(|e| e.1),
            Some(&rule(1))
        );
        assert_eq!(
            c.effective(&knob("c.cpu.weight")).map(|e| e.1),
            Some(&rule(0))
        );
        assert_eq!(c.len(), 2);
        assert_eq!(c.knobs().count(), 2);
    }

    #[test]
    fn expire_at_deadline_exactly() {
        let mut c = Claims::new();
        let k = knob("cpufreq.policy4.min");
        c.add(Claim {
            deadline: Some(Duration::from_secs(10)),
            ..claim(boost(1), "cpufreq.policy4.min", mhz(1800))
        });
        c.add(Claim {
            deadline: Some(Duration::from_secs(20)),
            ..claim(boost(2), "cpufreq.policy4.min", mhz(1500))
        });
        c.add(claim(rule(0), "cpufreq.policy4.min", mhz(1000)));
        assert_eq!(c.next_expiry(), Some(Duration::from_secs(10)));
        assert!(c.expire(Duration::from_millis(9_999)).is_empty());
        let gone = c.expire(Duration::from_secs(10));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].owner, boost(1));
        assert_eq!(c.effective(&k), Some((&mhz(1500), &boost(2))));
        assert_eq!(c.next_expiry(), Some(Duration::from_secs(20)));
        c.expire(Duration::MAX);
        assert_eq!(c.effective(&k), Some((&mhz(1000), &rule(0))));
        assert_eq!(c.next_expiry(), None);
    }

    #[test]
    fn live_lists_in_rank_order() {
        let mut c = Claims::new();
        c.add(claim(rule(3), "g.cpu.weight", KnobValue::Weight(1)));
        c.add(claim(rule(1), "g.cpu.weight", KnobValue::Weight(1)));
        c.add(claim(boost(1), "g.cpu.weight", KnobValue::Weight(1)));
        c.add(claim(boost(7), "g.cpu.weight", KnobValue::Weight(1)));
        let owners: Vec<_> = c.live().map(|c| c.owner.clone()).collect();
        assert_eq!(owners, vec![boost(7), boost(1), rule(1), rule(3)]);
        assert_eq!(c.on_knob(&knob("g.cpu.weight")).len(), 4);
        assert!(c.on_knob(&knob("h.cpu.weight")).is_empty());
    }

    #[test]
    fn owner_display() {
        assert_eq!(rule(2).to_string(), "rule r2");
        assert_eq!(boost(5).to_string(), "boost 5");
    }

    /// The merge written out from its documented rule, independently of the
    /// implementation: order the claims by rank, then for largest-wins take
    /// the first claim no other claim is strictly larger than... in rank
    /// order, replacing only on strictly larger.
    pub(crate) fn reference_merge(knob: &Knob, claims: &[Claim]) -> Option<(KnobValue, Owner)> {
        let mut mine: Vec<&Claim> = claims
            .iter()
            .filter(|c| &c.knob == knob && !c.cap)
            .collect();
        mine.sort_by(|a, b| a.owner.rank_cmp(&b.owner));
        let first = mine.first()?;
        let winner = match knob.merge_policy() {
            MergePolicy::First => *first,
            MergePolicy::Largest => mine.iter().fold(*first, |best, c| {
                if c.value.cmp_resource(&best.value) == Some(Ordering::Greater) {
                    c
                } else {
                    best
                }
            }),
            // The smallest value; among equals the first-ranked.
            MergePolicy::Smallest => mine.iter().fold(*first, |best, c| {
                if c.value.cmp_latency(&best.value) == Some(Ordering::Less) {
                    c
                } else {
                    best
                }
            }),
        };
        Some((winner.value.clone(), winner.owner.clone()))
    }

    /// The documented cap, written out: the smallest cap value; among equals
    /// the first-ranked.
    pub(crate) fn reference_cap(knob: &Knob, claims: &[Claim]) -> Option<(KnobValue, Owner)> {
        let mut caps: Vec<&Claim> = claims.iter().filter(|c| &c.knob == knob && c.cap).collect();
        caps.sort_by(|a, b| a.owner.rank_cmp(&b.owner));
        let mut best = *caps.first()?;
        for c in caps {
            if c.value.cmp_resource(&best.value) == Some(Ordering::Less) {
                best = c;
            }
        }
        Some((best.value.clone(), best.owner.clone()))
    }

    #[test]
    fn a_cap_beats_a_larger_boost_and_yields_to_a_smaller_claim() {
        let mut c = Claims::new();
        let k = knob("cpufreq.policy7.max");
        c.add(claim(boost(1), "cpufreq.policy7.max", mhz(2400)));
        c.add(cap(rule(0), "cpufreq.policy7.max", mhz(1800)));
        c.add(cap(rule(1), "cpufreq.policy7.max", mhz(2000)));
        // The merge of the raises alone is the boost; the cap is the smallest.
        assert_eq!(c.effective(&k), Some((&mhz(2400), &boost(1))));
        assert_eq!(c.cap(&k), Some((&mhz(1800), &rule(0))));
        let merged = c.effective(&k).map(|(v, o)| (v, Some(o)));
        assert_eq!(
            capped(merged, c.cap(&k)),
            Some((&mhz(1800), Some(&rule(0))))
        );
        // A claim below the cap is not raised to it.
        let low = Some((&mhz(1200), None));
        assert_eq!(capped(low, c.cap(&k)), Some((&mhz(1200), None)));
        // Only a cap: it holds.
        assert_eq!(capped(None, c.cap(&k)), Some((&mhz(1800), Some(&rule(0)))));
        c.release_owner(&rule(0));
        assert_eq!(c.cap(&k), Some((&mhz(2000), &rule(1))));
    }

    proptest! {
        #[test]
        fn merge_matches_reference(
            ops in proptest::collection::vec(
                (0usize..4, any::<bool>(), 0u64..6, 0usize..5, 0u64..4, any::<bool>()), 0..40)
        ) {
            let knobs = [knob("g.cpu.weight"), knob("cpufreq.policy0.governor"), knob("sysctl.vm.swappiness"), knob("latency.global"), knob("cpufreq.policy7.max")];
            let mut c = Claims::new();
            let mut model: Vec<Claim> = Vec::new();
            for (who, is_boost, v, k, op, is_cap) in ops {
                let owner = if is_boost { boost(who as u64) } else { rule(who) };
                let knob = knobs[k].clone();
                let value = match k {
                    0 => KnobValue::Weight(v + 1),
                    1 => gov(&format!("g{v}")),
                    2 => KnobValue::Int(v as i64),
                    3 => KnobValue::Latency((v < 5).then_some(v * 10)),
                    _ => mhz(600 * (v + 1)),
                };
                // Caps only on the ceiling knob.
                let is_cap = is_cap && k == 4;
                if op == 0 {
                    c.release_owner(&owner);
                    model.retain(|m| m.owner != owner);
                } else {
                    let cl = Claim { owner: owner.clone(), knob: knob.clone(), value, deadline: None, cap: is_cap };
                    c.add(cl.clone());
                    model.retain(|m| !(m.owner == owner && m.knob == knob));
                    model.push(cl);
                }
                for k in &knobs {
                    let got = c.effective(k).map(|(v, o)| (v.clone(), o.clone()));
                    prop_assert_eq!(got, reference_merge(k, &model));
                    let got = c.cap(k).map(|(v, o)| (v.clone(), o.clone()));
                    prop_assert_eq!(got, reference_cap(k, &model));
                }
                prop_assert_eq!(c.len(), model.len());
            }
        }
    }
}
