//! Desired versus written knob values: the daemon writes a knob only when
//! its effective value changes.
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
//!   rejects is retried only when the effective value changes again.
//!   [`KnobTable::invalidate`] forgets what was written (a group
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
pub(crate) enum Cause {
    /// This owner's claim wins, or this rule's `then` action set the value.
    Owner(Owner),
    /// The policy's baseline (startup or reload).
    Baseline,
    /// The owner released its claims; the knob returns to its baseline.
    Release(Owner),
    /// The owner's claims (a boost) reached their deadline; the knob returns
    /// to its baseline.
    Expired(Owner),
    /// `settings.drift: { on_drift: restore }`: the file was
    /// written behind the daemon's back and is put back.
    Drift,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Owner(o) => write!(f, "{o}"),
            Cause::Baseline => f.write_str("baseline"),
            Cause::Release(o) => write!(f, "{o} released"),
            Cause::Expired(o) => write!(f, "{o} expired"),
            Cause::Drift => f.write_str("drift restored"),
        }
    }
}

/// One write the daemon should make.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub(crate) knob: Knob,
    /// The value last written (or seeded from the kernel); `None` if unknown.
    pub(crate) old: Option<KnobValue>,
    pub(crate) new: KnobValue,
    pub(crate) cause: Cause,
}

/// A `then` action's change to a knob's baseline.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BaselineChange {
    pub(crate) knob: Knob,
    /// The baseline before, or the kernel's value it stepped from.
    pub(crate) old: Option<KnobValue>,
    pub(crate) new: KnobValue,
}

/// A `then` action that could not be applied; the daemon logs it and goes on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ThenError {
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
pub(crate) struct KnobTable {
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
    pub(crate) fn new() -> Self {
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
    pub(crate) fn set_policy_baseline(&mut self, knob: &Knob, value: Option<KnobValue>) {
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
    pub(crate) fn seed(&mut self, knob: &Knob, current: KnobValue) {
        let e = self.entry(knob);
        if e.baseline.is_none() {
            e.baseline = Some(current.clone());
        }
        if e.written.is_none() {
            e.written = Some(current);
        }
    }

    /// Records that `value` was written to `knob` by other means.
    pub(crate) fn mark_written(&mut self, knob: &Knob, value: KnobValue) {
        self.entry(knob).written = Some(value);
    }

    /// Forgets what was written to `knob`, so its effective value is
    /// written again at the next [`KnobTable::pending_writes`].
    #[cfg(test)]
    pub(crate) fn invalidate(&mut self, knob: &Knob) {
        if let Some(e) = self.entries.get_mut(knob) {
            e.written = None;
            self.dirty.insert(knob.clone());
        }
    }

    /// [`KnobTable::invalidate`] for every knob of `group`.
    #[cfg(test)]
    pub(crate) fn invalidate_group(&mut self, group: &str) {
        for (k, e) in self.entries.iter_mut() {
            if k.group() == Some(group) {
                e.written = None;
                self.dirty.insert(k.clone());
            }
        }
    }

    pub(crate) fn baseline(&self, knob: &Knob) -> Option<&KnobValue> {
        self.entries.get(knob)?.baseline.as_ref()
    }

    /// The value last written (or seeded).
    #[cfg(test)]
    pub(crate) fn written(&self, knob: &Knob) -> Option<&KnobValue> {
        self.entries.get(knob)?.written.as_ref()
    }

    pub(crate) fn claims(&self) -> &Claims {
        &self.claims
    }

    /// Every knob the table knows (baseline, claim or write).
    pub(crate) fn knobs(&self) -> impl Iterator<Item = &Knob> {
        self.entries.keys()
    }

    /// The merge of the live claims on `knob`, else its baseline.
    pub(crate) fn effective(&self, knob: &Knob) -> Option<KnobValue> {
        self.effective_ref(knob).map(|(v, _)| v.clone())
    }

    /// The effective value and the owner of the winning claim (`None` when
    /// the baseline is in effect).
    pub(crate) fn effective_ref(&self, knob: &Knob) -> Option<(&KnobValue, Option<&Owner>)> {
        let merged = match self.claims.effective(knob) {
            Some((v, o)) => Some((v, Some(o))),
            None => self.baseline(knob).map(|v| (v, None)),
        };
        super::claims::capped(merged, self.claims.cap(knob))
    }

    /// Adds `owner`'s caps (a rule's `cap KNOB at VALUE` actions, after
    /// [`KnobTable::set_claims`] replaced its claims).
    pub(crate) fn add_caps(
        &mut self,
        owner: &Owner,
        caps: impl IntoIterator<Item = (Knob, KnobValue)>,
        deadline: Option<Time>,
    ) {
        for (knob, value) in caps {
            self.add_claim(Claim {
                owner: owner.clone(),
                knob,
                value,
                deadline,
                cap: true,
            });
        }
    }

    /// Adds one claim (a boost's `KNOB=VALUE`), replacing the same owner's
    /// claim on that knob.
    pub(crate) fn add_claim(&mut self, claim: Claim) {
        let knob = claim.knob.clone();
        let owner = claim.owner.clone();
        self.claims.add(claim);
        self.entry(&knob).last_event = Some(Cause::Owner(owner));
    }

    /// Replaces `owner`'s whole claim set (a rule activating: its `while`
    /// `set` actions).
    pub(crate) fn set_claims(
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
    pub(crate) fn release(&mut self, owner: &Owner) -> Vec<Claim> {
        let removed = self.claims.release_owner(owner);
        self.note_removed(&removed, Cause::Release);
        removed
    }

    /// Releases every claim `pred` selects (a reload: boosts on knobs that
    /// left the policy); returns them.
    pub(crate) fn release_where(&mut self, pred: impl FnMut(&Claim) -> bool) -> Vec<Claim> {
        let removed = self.claims.remove_where(pred);
        self.note_removed(&removed, Cause::Release);
        removed
    }

    /// Removes the claims whose deadline is at or before `now`; returns them.
    /// [`KnobTable::pending_writes`] does this itself; call it first only to
    /// log the expiries.
    pub(crate) fn expire(&mut self, now: Time) -> Vec<Claim> {
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
    pub(crate) fn apply_then(
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
            // A cap is a `while` claim only (validation keeps it there).
            Action::Hook(_)
            | Action::CompactMemory
            | Action::Cap { .. }
            | Action::Freeze(_)
            | Action::Thaw(_)
            | Action::Kill(_) => return Ok(None),
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
    pub(crate) fn pending_writes(&mut self, now: Time) -> Vec<Write> {
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
            let merged = match claims.effective(knob) {
                Some((v, o)) => Some((v, Some(o))),
                None => e.baseline.as_ref().map(|b| (b, None)),
            };
            let Some((new, owner)) = super::claims::capped(merged, claims.cap(knob)) else {
                continue;
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
        self.rewrite_recreated(&mut out);
        out
    }

    /// Appends, after each write in `out` that recreates other knobs' files
    /// with the kernel's defaults ([`Knob::recreated_by`]: a governor switch
    /// and its tunables), a write of those knobs' effective values with the
    /// same cause, unless `out` writes them already.
    fn rewrite_recreated(&mut self, out: &mut Vec<Write>) {
        let mut i = 0;
        while i < out.len() {
            let (trigger, cause) = (out[i].knob.clone(), out[i].cause.clone());
            i += 1;
            for (knob, e) in self.entries.iter_mut() {
                if !knob.recreated_by(&trigger) || out.iter().any(|w| &w.knob == knob) {
                    continue;
                }
                let merged = match self.claims.effective(knob) {
                    Some((v, o)) => Some((v, Some(o))),
                    None => e.baseline.as_ref().map(|b| (b, None)),
                };
                let Some((new, _)) = super::claims::capped(merged, self.claims.cap(knob)) else {
                    continue;
                };
                let new = new.clone();
                out.push(Write {
                    knob: knob.clone(),
                    old: e.written.replace(new.clone()),
                    new,
                    cause: cause.clone(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests;
