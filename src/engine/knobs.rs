//! Desired versus written knob values (SPEC §3 "Semantics", §4 "The daemon
//! writes a knob only when its effective value changes").
//!
//! [`KnobTable`] owns, per knob:
//! - the **baseline**: what the knob holds when no claim does. It comes from
//!   the policy, is replaced by `then` actions ("the value they set becomes
//!   the knob's baseline from then on ... and stays after the rule clears"),
//!   and for knobs the policy does not set the daemon seeds it with what the
//!   kernel held at startup ([`KnobTable::seed`]);
//! - the live **claims** ([`Claims`]), merged over the baseline;
//! - the value **last written**, so that [`KnobTable::pending_writes`] reports
//!   a knob only when its effective value changed, with the rule or boost
//!   that caused the change.
//!
//! Decisions where the SPEC is silent:
//! - A knob with neither a live claim nor a baseline has no effective value:
//!   when its last claim goes away there is nothing to return to, so it keeps
//!   the last value written and no write is reported. (The daemon seeds
//!   baselines from what it read at startup, so this is an edge case.)
//! - A reload replaces a knob's baseline only if the policy's value for it
//!   differs from the previous policy's ([`KnobTable::set_policy_baseline`]);
//!   a baseline set by a `then` action survives a reload that leaves that
//!   knob's policy value alone. A knob the new policy no longer sets keeps
//!   its current baseline (`reset` is the explicit undo).
//! - Values are compared structurally, and also by their kernel text, so
//!   `50%` and `50ms/100ms` for `cpu.max` count as the same value.
//! - A write is marked done as soon as it is reported: a write the kernel
//!   rejects is retried only when the effective value changes again (SPEC
//!   §4). [`KnobTable::invalidate`] forgets what was written (a group
//!   recreated from outside), so the next call writes the knob again.
//! - `raise`/`lower` step from the baseline, not from the effective value
//!   (a claim on top is temporary); a knob without baseline steps from the
//!   value the caller reads from the kernel.

use super::claims::{Claim, Claims, Owner};
use super::rule_state::Time;
use crate::knobs::{Knob, KnobValue};
use crate::policy::expr::Action;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Why a knob changes, for the write log and `status`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cause {
    /// This owner's claim wins, or this rule's `then` action set the value.
    Owner(Owner),
    /// The policy's baseline (startup or reload).
    Baseline,
    /// The owner released its claims; the knob returns to its baseline.
    Release(Owner),
    /// The owner's claims (a boost) reached their deadline; the knob returns
    /// to its baseline.
    Expired(Owner),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Owner(o) => write!(f, "{o}"),
            Cause::Baseline => f.write_str("baseline"),
            Cause::Release(o) => write!(f, "{o} released"),
            Cause::Expired(o) => write!(f, "{o} expired"),
        }
    }
}

/// One write the daemon should make.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub knob: Knob,
    /// The value last written (or seeded from the kernel); `None` if unknown.
    pub old: Option<KnobValue>,
    pub new: KnobValue,
    pub cause: Cause,
}

/// A `then` action's change to a knob's baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineChange {
    pub knob: Knob,
    /// The baseline before, or the kernel's value it stepped from.
    pub old: Option<KnobValue>,
    pub new: KnobValue,
}

/// A `then` action that could not be applied; the daemon logs it and goes on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThenError {
    #[error("cannot step `{knob}`: it has no baseline and its current value is unknown")]
    NoValue { knob: Knob },
    /// The step has no finite answer (lowering from `max`, values of
    /// different types); `action` is the action as written.
    #[error("cannot apply `{action}`: no step from {from}")]
    CannotStep {
        knob: Knob,
        from: KnobValue,
        action: String,
    },
}

#[derive(Debug, Clone, Default)]
struct Entry {
    /// What the current policy says; `None` when it does not set the knob.
    policy: Option<KnobValue>,
    baseline: Option<KnobValue>,
    written: Option<KnobValue>,
    /// The last event that may change the effective value, since the last
    /// write check: names the cause when no claim wins.
    last_event: Option<Cause>,
}

/// Baselines, claims and written values of every knob cgwarden manages.
#[derive(Debug, Clone, Default)]
pub struct KnobTable {
    entries: BTreeMap<Knob, Entry>,
    claims: Claims,
    /// Knobs touched since the last `pending_writes`: only these can have a
    /// new effective value, so a quiet tick does not walk every baseline.
    dirty: BTreeSet<Knob>,
}

/// Whether two values of one knob mean the same to the kernel.
fn same_value(a: &KnobValue, b: &KnobValue) -> bool {
    a == b || a.kernel() == b.kernel()
}

impl KnobTable {
    pub fn new() -> Self {
        KnobTable::default()
    }

    /// The entry of `knob`, marked for the next `pending_writes`: every
    /// change to a baseline, a claim or a written value goes through here.
    fn entry(&mut self, knob: &Knob) -> &mut Entry {
        if !self.dirty.contains(knob) {
            self.dirty.insert(knob.clone());
        }
        self.entries.entry(knob.clone()).or_default()
    }

    /// Records the policy's baseline for `knob` (at startup and on each
    /// reload). Changes the baseline only when the policy's value changed;
    /// `None` (the policy no longer sets it) leaves the baseline alone.
    pub fn set_policy_baseline(&mut self, knob: &Knob, value: Option<KnobValue>) {
        let e = self.entry(knob);
        if e.policy == value {
            return;
        }
        e.policy = value.clone();
        if let Some(v) = value {
            e.baseline = Some(v);
            e.last_event = Some(Cause::Baseline);
        }
    }

    /// Records what the kernel holds for `knob` (read at startup): it is the
    /// value written so far, and the baseline if there is none yet.
    pub fn seed(&mut self, knob: &Knob, current: KnobValue) {
        let e = self.entry(knob);
        if e.baseline.is_none() {
            e.baseline = Some(current.clone());
        }
        if e.written.is_none() {
            e.written = Some(current);
        }
    }

    /// Records that `value` was written to `knob` by other means.
    pub fn mark_written(&mut self, knob: &Knob, value: KnobValue) {
        self.entry(knob).written = Some(value);
    }

    /// Forgets what was written to `knob`, so its effective value is
    /// written again at the next [`KnobTable::pending_writes`].
    pub fn invalidate(&mut self, knob: &Knob) {
        if let Some(e) = self.entries.get_mut(knob) {
            e.written = None;
            self.dirty.insert(knob.clone());
        }
    }

    /// [`KnobTable::invalidate`] for every knob of `group`.
    pub fn invalidate_group(&mut self, group: &str) {
        for (k, e) in self.entries.iter_mut() {
            if k.group() == Some(group) {
                e.written = None;
                self.dirty.insert(k.clone());
            }
        }
    }

    pub fn baseline(&self, knob: &Knob) -> Option<&KnobValue> {
        self.entries.get(knob)?.baseline.as_ref()
    }

    /// The value last written (or seeded).
    pub fn written(&self, knob: &Knob) -> Option<&KnobValue> {
        self.entries.get(knob)?.written.as_ref()
    }

    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// Every knob the table knows (baseline, claim or write).
    pub fn knobs(&self) -> impl Iterator<Item = &Knob> {
        self.entries.keys()
    }

    /// The merge of the live claims on `knob`, else its baseline.
    pub fn effective(&self, knob: &Knob) -> Option<KnobValue> {
        self.effective_ref(knob).map(|(v, _)| v.clone())
    }

    /// The effective value and the owner of the winning claim (`None` when
    /// the baseline is in effect).
    pub fn effective_ref(&self, knob: &Knob) -> Option<(&KnobValue, Option<&Owner>)> {
        match self.claims.effective(knob) {
            Some((v, o)) => Some((v, Some(o))),
            None => self.baseline(knob).map(|v| (v, None)),
        }
    }

    /// Adds one claim (a boost's `KNOB=VALUE`), replacing the same owner's
    /// claim on that knob.
    pub fn add_claim(&mut self, claim: Claim) {
        let knob = claim.knob.clone();
        let owner = claim.owner.clone();
        self.claims.add(claim);
        self.entry(&knob).last_event = Some(Cause::Owner(owner));
    }

    /// Replaces `owner`'s whole claim set (a rule activating: its `while`
    /// `set` actions).
    pub fn set_claims(
        &mut self,
        owner: &Owner,
        claims: impl IntoIterator<Item = (Knob, KnobValue)>,
        deadline: Option<Time>,
    ) {
        let removed = self.claims.set_owner(owner, claims, deadline);
        self.note_removed(&removed, Cause::Release);
        let knobs: Vec<Knob> = self
            .claims
            .live()
            .filter(|c| &c.owner == owner)
            .map(|c| c.knob.clone())
            .collect();
        for k in knobs {
            self.entry(&k).last_event = Some(Cause::Owner(owner.clone()));
        }
    }

    /// Releases every claim of `owner` (a rule clearing, `cgwarden
    /// release`); returns them.
    pub fn release(&mut self, owner: &Owner) -> Vec<Claim> {
        let removed = self.claims.release_owner(owner);
        self.note_removed(&removed, Cause::Release);
        removed
    }

    /// Releases every claim `pred` selects (a reload: boosts on knobs that
    /// left the policy); returns them.
    pub fn release_where(&mut self, pred: impl FnMut(&Claim) -> bool) -> Vec<Claim> {
        let removed = self.claims.remove_where(pred);
        self.note_removed(&removed, Cause::Release);
        removed
    }

    /// Removes the claims whose deadline is at or before `now`; returns them.
    /// [`KnobTable::pending_writes`] does this itself; call it first only to
    /// log the expiries.
    pub fn expire(&mut self, now: Time) -> Vec<Claim> {
        let removed = self.claims.expire(now);
        self.note_removed(&removed, Cause::Expired);
        removed
    }

    fn note_removed(&mut self, removed: &[Claim], why: fn(Owner) -> Cause) {
        for c in removed {
            self.entry(&c.knob).last_event = Some(why(c.owner.clone()));
        }
    }

    /// Applies a `then` action to the baselines. `current` reads a knob's
    /// value from the kernel, for stepping a knob that has no baseline.
    /// `Ok(None)` for actions that change no knob (`hook`, `compact memory`).
    pub fn apply_then(
        &mut self,
        action: &Action,
        current: impl Fn(&Knob) -> Option<KnobValue>,
        cause: Cause,
    ) -> Result<Option<BaselineChange>, ThenError> {
        let (knob, new, old) = match action {
            Action::Set { knob, value } => (knob, value.clone(), self.baseline(knob).cloned()),
            Action::Raise { knob, by, limit } | Action::Lower { knob, by, limit } => {
                let up = matches!(action, Action::Raise { .. });
                let from = match self.baseline(knob) {
                    Some(b) => b.clone(),
                    None => {
                        current(knob).ok_or_else(|| ThenError::NoValue { knob: knob.clone() })?
                    }
                };
                let next = from
                    .step(by, limit, up)
                    .ok_or_else(|| ThenError::CannotStep {
                        knob: knob.clone(),
                        from: from.clone(),
                        action: action.to_string(),
                    })?;
                (knob, next, Some(from))
            }
            Action::Hook(_) | Action::CompactMemory => return Ok(None),
        };
        let e = self.entry(knob);
        e.baseline = Some(new.clone());
        e.last_event = Some(cause);
        Ok(Some(BaselineChange {
            knob: knob.clone(),
            old,
            new,
        }))
    }

    /// Expires claims due at `now`, then returns the knobs whose effective
    /// value differs from the value last written, in knob order, and marks
    /// them written.
    pub fn pending_writes(&mut self, now: Time) -> Vec<Write> {
        self.expire(now);
        let mut out = Vec::new();
        let claims = &self.claims;
        let dirty = std::mem::take(&mut self.dirty);
        // Claimed knobs always have an entry (add/set create one).
        for knob in &dirty {
            let Some(e) = self.entries.get_mut(knob) else {
                continue;
            };
            let last_event = e.last_event.take();
            let (new, owner) = match claims.effective(knob) {
                Some((v, o)) => (v, Some(o)),
                None => match &e.baseline {
                    Some(b) => (b, None),
                    None => continue,
                },
            };
            if e.written.as_ref().is_some_and(|w| same_value(w, new)) {
                continue;
            }
            let cause = match owner {
                Some(o) => Cause::Owner(o.clone()),
                None => last_event.unwrap_or(Cause::Baseline),
            };
            out.push(Write {
                knob: knob.clone(),
                old: e.written.replace(new.clone()),
                new: new.clone(),
                cause,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::claims::tests::{boost, knob, reference_merge, rule};
    use crate::knobs::CpuMax;
    use crate::policy::expr::parse_action;
    use crate::units::{Frequency, Percent, Size};
    use proptest::prelude::*;
    use std::time::Duration;

    fn s(secs: u64) -> Time {
        Duration::from_secs(secs)
    }

    fn mhz(m: u64) -> KnobValue {
        KnobValue::Frequency(Frequency { khz: m * 1000 })
    }

    fn gib(n: u64) -> KnobValue {
        KnobValue::Size(Size::Bytes(n << 30))
    }

    fn mib(n: u64) -> KnobValue {
        KnobValue::Size(Size::Bytes(n << 20))
    }

    fn action(text: &str) -> Action {
        parse_action(text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn no_kernel(_: &Knob) -> Option<KnobValue> {
        None
    }

    fn claim(owner: Owner, k: &Knob, v: KnobValue, deadline: Option<Time>) -> Claim {
        Claim {
            owner,
            knob: k.clone(),
            value: v,
            deadline,
        }
    }

    #[test]
    fn baseline_written_once() {
        let mut t = KnobTable::new();
        let k = knob("g.memory.high");
        t.set_policy_baseline(&k, Some(gib(8)));
        let w = t.pending_writes(s(0));
        assert_eq!(
            w,
            vec![Write {
                knob: k.clone(),
                old: None,
                new: gib(8),
                cause: Cause::Baseline
            }]
        );
        assert!(t.pending_writes(s(1)).is_empty());
        assert_eq!(t.written(&k), Some(&gib(8)));
    }

    #[test]
    fn seeded_value_equal_to_baseline_is_not_written() {
        let mut t = KnobTable::new();
        let k = knob("g.memory.high");
        t.seed(&k, gib(8));
        t.set_policy_baseline(&k, Some(gib(8)));
        assert!(t.pending_writes(s(0)).is_empty());
        let k2 = knob("g.memory.max");
        t.seed(&k2, KnobValue::Size(Size::Max));
        assert_eq!(t.baseline(&k2), Some(&KnobValue::Size(Size::Max)));
        assert!(t.pending_writes(s(0)).is_empty());
    }

    #[test]
    fn claim_over_baseline_then_release_returns() {
        let mut t = KnobTable::new();
        let k = knob("cpufreq.policy4.min");
        t.set_policy_baseline(&k, Some(mhz(1200)));
        t.pending_writes(s(0));
        t.set_claims(&rule(1), [(k.clone(), mhz(1800))], None);
        assert_eq!(t.effective(&k), Some(mhz(1800)));
        assert_eq!(
            t.pending_writes(s(1)),
            vec![Write {
                knob: k.clone(),
                old: Some(mhz(1200)),
                new: mhz(1800),
                cause: Cause::Owner(rule(1))
            }]
        );
        let released = t.release(&rule(1));
        assert_eq!(released.len(), 1);
        assert_eq!(
            t.pending_writes(s(2)),
            vec![Write {
                knob: k.clone(),
                old: Some(mhz(1800)),
                new: mhz(1200),
                cause: Cause::Release(rule(1))
            }]
        );
    }

    #[test]
    fn claim_equal_to_baseline_writes_nothing() {
        let mut t = KnobTable::new();
        let k = knob("g.cpu.weight");
        t.set_policy_baseline(&k, Some(KnobValue::Weight(100)));
        t.pending_writes(s(0));
        t.set_claims(&rule(0), [(k.clone(), KnobValue::Weight(100))], None);
        assert!(t.pending_writes(s(1)).is_empty());
        t.release(&rule(0));
        assert!(t.pending_writes(s(2)).is_empty());
    }

    #[test]
    fn boost_expires_and_returns_to_baseline() {
        let mut t = KnobTable::new();
        let k = knob("cpufreq.policy4.min");
        t.set_policy_baseline(&k, Some(mhz(1200)));
        t.pending_writes(s(0));
        t.add_claim(claim(boost(1), &k, mhz(2000), Some(s(60))));
        assert_eq!(t.pending_writes(s(1))[0].cause, Cause::Owner(boost(1)));
        assert!(t.pending_writes(s(59)).is_empty());
        assert_eq!(t.claims().next_expiry(), Some(s(60)));
        let w = t.pending_writes(s(60));
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].new, mhz(1200));
        assert_eq!(w[0].cause, Cause::Expired(boost(1)));
        assert!(t.claims().is_empty());
    }

    #[test]
    fn losing_the_winner_falls_to_next_claim() {
        let mut t = KnobTable::new();
        let k = knob("g.memory.high");
        t.set_policy_baseline(&k, Some(gib(4)));
        t.set_claims(&rule(0), [(k.clone(), gib(6))], None);
        t.set_claims(&rule(1), [(k.clone(), gib(8))], None);
        assert_eq!(t.pending_writes(s(0))[0].new, gib(8));
        t.release(&rule(1));
        let w = t.pending_writes(s(1));
        assert_eq!(w[0].new, gib(6));
        assert_eq!(w[0].cause, Cause::Owner(rule(0)));
        // Releasing the loser changes nothing.
        t.set_claims(&rule(2), [(k.clone(), gib(5))], None);
        t.release(&rule(2));
        assert!(t.pending_writes(s(2)).is_empty());
    }

    #[test]
    fn then_set_becomes_baseline_and_stays_after_clear() {
        let mut t = KnobTable::new();
        let k = knob("g.memory.high");
        t.set_policy_baseline(&k, Some(gib(8)));
        t.pending_writes(s(0));
        let ch = t
            .apply_then(
                &action("set g.memory.high = 9G"),
                no_kernel,
                Cause::Owner(rule(0)),
            )
            .expect("applies");
        assert_eq!(
            ch,
            Some(BaselineChange {
                knob: k.clone(),
                old: Some(gib(8)),
                new: gib(9)
            })
        );
        let w = t.pending_writes(s(1));
        assert_eq!(w[0].cause, Cause::Owner(rule(0)));
        assert_eq!(w[0].new, gib(9));
        // A claim over it and its release return to the new baseline.
        t.set_claims(&rule(1), [(k.clone(), gib(12))], None);
        t.pending_writes(s(2));
        t.release(&rule(1));
        assert_eq!(t.pending_writes(s(3))[0].new, gib(9));
        // A reload with the same policy value keeps the runtime baseline...
        t.set_policy_baseline(&k, Some(gib(8)));
        assert_eq!(t.baseline(&k), Some(&gib(9)));
        assert!(t.pending_writes(s(4)).is_empty());
        // ...a different one replaces it.
        t.set_policy_baseline(&k, Some(gib(7)));
        let w = t.pending_writes(s(5));
        assert_eq!(
            (w[0].new.clone(), w[0].cause.clone()),
            (gib(7), Cause::Baseline)
        );
        // A policy that drops the knob leaves the baseline alone.
        t.set_policy_baseline(&k, None);
        assert_eq!(t.baseline(&k), Some(&gib(7)));
    }

    #[test]
    fn raise_steps_from_baseline_up_to_limit() {
        let mut t = KnobTable::new();
        let k = knob("inference.memory.high");
        t.set_policy_baseline(&k, Some(gib(9)));
        let raise = action("raise inference.memory.high by 512M up to 10G");
        let cause = || Cause::Owner(rule(0));
        let ch = t.apply_then(&raise, no_kernel, cause()).expect("ok");
        assert_eq!(ch.map(|c| c.new), Some(mib(9 * 1024 + 512)));
        t.apply_then(&raise, no_kernel, cause()).expect("ok");
        assert_eq!(t.baseline(&k), Some(&gib(10)));
        // At the limit: stays.
        let ch = t.apply_then(&raise, no_kernel, cause()).expect("ok");
        assert_eq!(ch.map(|c| (c.old, c.new)), Some((Some(gib(10)), gib(10))));
    }

    #[test]
    fn raise_steps_from_baseline_not_from_claim() {
        let mut t = KnobTable::new();
        let k = knob("g.memory.high");
        t.set_policy_baseline(&k, Some(gib(1)));
        t.set_claims(&rule(1), [(k.clone(), gib(5))], None);
        t.apply_then(
            &action("raise g.memory.high by 1G up to 10G"),
            no_kernel,
            Cause::Owner(rule(0)),
        )
        .expect("ok");
        assert_eq!(t.baseline(&k), Some(&gib(2)));
        assert_eq!(t.effective(&k), Some(gib(5)));
    }

    #[test]
    fn lower_without_baseline_uses_kernel_value() {
        let mut t = KnobTable::new();
        let k = knob("g.cpu.weight");
        let lower = action("lower g.cpu.weight by 50 down to 20");
        let kernel = |_: &Knob| Some(KnobValue::Weight(100));
        let ch = t
            .apply_then(&lower, kernel, Cause::Owner(rule(0)))
            .expect("ok");
        assert_eq!(
            ch.map(|c| (c.old, c.new)),
            Some((Some(KnobValue::Weight(100)), KnobValue::Weight(50)))
        );
        // Now it has a baseline; the kernel is no longer consulted.
        t.apply_then(&lower, kernel, Cause::Owner(rule(0)))
            .expect("ok");
        assert_eq!(t.baseline(&k), Some(&KnobValue::Weight(20)));
    }

    #[test]
    fn step_without_any_value_is_an_error() {
        let mut t = KnobTable::new();
        let k = knob("g.cpu.weight");
        let err = t
            .apply_then(
                &action("raise g.cpu.weight by 50 up to 500"),
                no_kernel,
                Cause::Owner(rule(0)),
            )
            .expect_err("no value");
        assert_eq!(err, ThenError::NoValue { knob: k.clone() });
        assert!(err.to_string().contains("g.cpu.weight"));
        assert_eq!(t.baseline(&k), None);
        assert!(t.pending_writes(s(0)).is_empty());
    }

    #[test]
    fn impossible_step_is_an_error() {
        let mut t = KnobTable::new();
        let k = knob("g.memory.high");
        t.set_policy_baseline(&k, Some(KnobValue::Size(Size::Max)));
        let err = t
            .apply_then(
                &action("lower g.memory.high by 1G down to 1G"),
                no_kernel,
                Cause::Owner(rule(0)),
            )
            .expect_err("cannot lower from max");
        assert!(matches!(err, ThenError::CannotStep { .. }));
        assert!(
            err.to_string()
                .contains("lower g.memory.high by 1G down to 1G"),
            "{err}"
        );
        assert_eq!(t.baseline(&k), Some(&KnobValue::Size(Size::Max)));
        // A baseline of the wrong type (seeded oddly) is an error, not a panic.
        t.seed(&knob("g.cpu.weight"), KnobValue::Word("x".into()));
        assert!(t
            .apply_then(
                &action("raise g.cpu.weight by 1 up to 5"),
                no_kernel,
                Cause::Owner(rule(0))
            )
            .is_err());
    }

    #[test]
    fn hooks_and_compaction_change_no_knob() {
        let mut t = KnobTable::new();
        for a in ["hook alert", "compact memory"] {
            assert_eq!(
                t.apply_then(&action(a), no_kernel, Cause::Baseline),
                Ok(None)
            );
        }
    }

    #[test]
    fn no_baseline_keeps_last_written_after_release() {
        let mut t = KnobTable::new();
        let k = knob("sysctl.vm.swappiness");
        t.set_claims(&rule(0), [(k.clone(), KnobValue::Int(10))], None);
        assert_eq!(t.pending_writes(s(0)).len(), 1);
        t.release(&rule(0));
        assert_eq!(t.effective(&k), None);
        assert!(t.pending_writes(s(1)).is_empty());
        assert_eq!(t.written(&k), Some(&KnobValue::Int(10)));
    }

    #[test]
    fn invalidate_rewrites() {
        let mut t = KnobTable::new();
        let k = knob("vision.memory.high");
        let other = knob("system.memory.high");
        t.set_policy_baseline(&k, Some(gib(3)));
        t.set_policy_baseline(&other, Some(gib(1)));
        t.pending_writes(s(0));
        t.invalidate_group("vision");
        let w = t.pending_writes(s(1));
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].knob.clone(), w[0].old.clone()), (k.clone(), None));
        t.invalidate(&k);
        assert_eq!(t.pending_writes(s(2)).len(), 1);
        t.mark_written(&k, gib(2));
        assert_eq!(t.pending_writes(s(3))[0].old, Some(gib(2)));
    }

    #[test]
    fn same_kernel_text_is_the_same_value() {
        let mut t = KnobTable::new();
        let k = knob("g.cpu.max");
        let share = KnobValue::CpuMax(CpuMax::Share(Percent(50.0)));
        let quota = KnobValue::CpuMax(CpuMax::Quota {
            quota_us: 50_000,
            period_us: 100_000,
        });
        t.seed(&k, quota);
        t.set_policy_baseline(&k, Some(share));
        assert!(t.pending_writes(s(0)).is_empty());
    }

    #[test]
    fn writes_are_in_knob_order_and_cause_display() {
        let mut t = KnobTable::new();
        for k in ["b.cpu.weight", "a.cpu.weight"] {
            t.set_policy_baseline(&knob(k), Some(KnobValue::Weight(5)));
        }
        let w = t.pending_writes(s(0));
        assert!(w[0].knob < w[1].knob);
        assert_eq!(Cause::Owner(rule(1)).to_string(), "rule r1");
        assert_eq!(Cause::Release(boost(2)).to_string(), "boost 2 released");
        assert_eq!(Cause::Expired(boost(2)).to_string(), "boost 2 expired");
        assert_eq!(Cause::Baseline.to_string(), "baseline");
    }

    /// One step of the property test's random walk.
    #[derive(Debug, Clone)]
    enum Op {
        Add {
            owner: Owner,
            knob: usize,
            v: u64,
            ttl: Option<u64>,
        },
        SetRule {
            rule: usize,
            knobs: Vec<(usize, u64)>,
        },
        Release(Owner),
        Advance(u64),
        Baseline {
            knob: usize,
            v: Option<u64>,
        },
        Then {
            knob: usize,
            v: u64,
        },
        Write,
    }

    fn op() -> impl Strategy<Value = Op> {
        let owner = prop_oneof![(0usize..4).prop_map(rule), (0u64..4).prop_map(boost),];
        prop_oneof![
            (
                owner.clone(),
                0usize..3,
                0u64..5,
                proptest::option::of(1u64..5)
            )
                .prop_map(|(owner, knob, v, ttl)| Op::Add {
                    owner,
                    knob,
                    v,
                    ttl
                }),
            (
                0usize..4,
                proptest::collection::vec((0usize..3, 0u64..5), 0..3)
            )
                .prop_map(|(rule, knobs)| Op::SetRule { rule, knobs }),
            owner.prop_map(Op::Release),
            (0u64..4).prop_map(Op::Advance),
            (0usize..3, proptest::option::of(0u64..5))
                .prop_map(|(knob, v)| Op::Baseline { knob, v }),
            (0usize..3, 0u64..5).prop_map(|(knob, v)| Op::Then { knob, v }),
            Just(Op::Write),
        ]
    }

    fn value(knob: usize, v: u64) -> KnobValue {
        match knob {
            0 => KnobValue::Weight(v + 1),
            1 => KnobValue::Word(format!("gov{v}")),
            _ => KnobValue::Int(v as i64 - 2),
        }
    }

    proptest! {
        /// After every step, the effective value is the merge of the live
        /// claims or the baseline; `pending_writes` reports exactly the
        /// knobs whose effective value differs from what was last written.
        #[test]
        fn effective_is_merge_and_writes_only_changes(ops in proptest::collection::vec(op(), 0..60)) {
            let knobs = [knob("g.cpu.weight"), knob("cpufreq.policy0.governor"), knob("sysctl.vm.swappiness")];
            let mut t = KnobTable::new();
            let mut now = 0u64;
            let mut live: Vec<Claim> = Vec::new();
            let mut base: [Option<KnobValue>; 3] = [None, None, None];
            let mut policy: [Option<KnobValue>; 3] = [None, None, None];
            let mut written: [Option<KnobValue>; 3] = [None, None, None];
            for op in ops {
                match op {
                    Op::Add { owner, knob, v, ttl } => {
                        let c = claim(owner.clone(), &knobs[knob], value(knob, v), ttl.map(|d| s(now + d)));
                        live.retain(|l| !(l.owner == owner && l.knob == knobs[knob]));
                        live.push(c.clone());
                        t.add_claim(c);
                    }
                    Op::SetRule { rule: r, knobs: set } => {
                        let owner = rule(r);
                        live.retain(|l| l.owner != owner);
                        let mut pairs = Vec::new();
                        for (k, v) in set {
                            pairs.retain(|(kk, _): &(Knob, KnobValue)| kk != &knobs[k]);
                            pairs.push((knobs[k].clone(), value(k, v)));
                        }
                        for (k, v) in &pairs {
                            live.push(claim(owner.clone(), k, v.clone(), None));
                        }
                        t.set_claims(&owner, pairs, None);
                    }
                    Op::Release(owner) => {
                        live.retain(|l| l.owner != owner);
                        t.release(&owner);
                    }
                    Op::Advance(d) => {
                        now += d;
                        live.retain(|l| l.deadline.is_none_or(|dl| dl > s(now)));
                        t.expire(s(now));
                    }
                    Op::Baseline { knob, v } => {
                        // A reload: only a changed policy value moves the
                        // baseline, and dropping the knob leaves it alone.
                        let val = v.map(|v| value(knob, v));
                        if policy[knob] != val {
                            policy[knob] = val.clone();
                            if val.is_some() {
                                base[knob] = val.clone();
                            }
                        }
                        t.set_policy_baseline(&knobs[knob], val);
                    }
                    Op::Then { knob, v } => {
                        let a = Action::Set { knob: knobs[knob].clone(), value: value(knob, v) };
                        prop_assert!(t.apply_then(&a, no_kernel, Cause::Owner(rule(0))).is_ok());
                        base[knob] = Some(value(knob, v));
                    }
                    Op::Write => {
                        let writes = t.pending_writes(s(now));
                        for w in &writes {
                            let i = knobs.iter().position(|k| k == &w.knob).expect("known knob");
                            prop_assert_eq!(&w.old, &written[i]);
                            prop_assert_ne!(Some(&w.new), w.old.as_ref());
                            written[i] = Some(w.new.clone());
                        }
                        for (i, k) in knobs.iter().enumerate() {
                            let eff = t.effective(k);
                            if eff.is_some() {
                                prop_assert_eq!(&eff, &written[i], "knob {} not written", k);
                            }
                        }
                        prop_assert!(t.pending_writes(s(now)).is_empty());
                    }
                }
                for (i, k) in knobs.iter().enumerate() {
                    let want = reference_merge(k, &live).map(|(v, _)| v).or_else(|| base[i].clone());
                    prop_assert_eq!(t.effective(k), want);
                }
            }
        }
    }
}
