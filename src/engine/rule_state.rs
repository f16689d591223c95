//! The per-rule state machine.
//!
//! This module owns the life cycle of one rule — idle, pending, active,
//! clearing — and decides, from the truth of the rule's condition at each
//! evaluation, when its `then` actions run (on activation and every
//! `cooldown`), when its `while` claims start (activation) and when they end
//! (clear). It knows nothing about what the actions do.
//!
//! ```text
//!            cond                 cond held `for`
//!   Idle ───────────▶ Pending ─────────────────────▶ Active ◀──┐ cond
//!    ▲    !cond         │                            │ !cond   │
//!    └──────────────────┘                            ▼         │
//!    ▲                                            Clearing ────┘
//!    └──────────────── !cond held `hold` ────────────┘
//! ```
//!
//! Time is a [`Time`]: a `Duration` since an arbitrary monotonic epoch,
//! passed in by the caller, so the machine is pure and tested on a simulated
//! clock. [`RuleState::next_deadline`] says when the state would change with
//! no new input, so the daemon can sleep until then instead of polling.
//!
//! Decisions where the SPEC is silent:
//! - The `for` timer starts at the first evaluation that sees the condition
//!   true; the rule fires at the first evaluation at or after `since + for`
//!   (so `for: 0` fires on the same evaluation, reporting `Pending` and then
//!   `Fired`). The `hold` timer works alike from the first false evaluation;
//!   `hold: 0` clears on the first false evaluation.
//! - A pending rule whose condition turns false returns to idle without
//!   firing and reports [`Transition::Cancelled`].
//! - `then` repeats are due at exact multiples of `cooldown` after
//!   activation. An evaluation at or after a due time runs the actions once,
//!   however many multiples were missed (no bursts after a stall), and the
//!   next repeat is the next multiple. Repeats need the condition to be true
//!   at that evaluation: while the rule is clearing (condition false, `hold`
//!   running) nothing repeats — stepping a knob further once the pressure
//!   is gone would be wrong. If the condition comes back before the rule
//!   clears, an overdue repeat runs at that evaluation.
//! - A `now` earlier than a recorded time (a caller breaking monotonicity)
//!   counts as no time elapsed; nothing panics or overflows.

use std::time::Duration;

/// A point in time: the span since an arbitrary monotonic epoch.
pub(crate) type Time = Duration;

/// The timing parameters of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Timing {
    /// How long the condition must hold before the rule activates.
    pub(crate) for_: Duration,
    /// How long the condition must be false before an active rule clears.
    pub(crate) hold: Duration,
    /// How often `then` actions repeat while the rule stays active.
    pub(crate) cooldown: Option<Duration>,
}

impl Timing {
    /// The timing of a policy rule.
    pub(crate) fn of(rule: &crate::policy::model::Rule) -> Timing {
        Timing {
            for_: rule.for_,
            hold: rule.hold,
            cooldown: rule.cooldown,
        }
    }
}

/// What a rule is doing, for status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The condition is false (or has not been evaluated yet).
    Idle,
    /// The condition is true, waiting for `for` to pass.
    Pending,
    /// Fired: `while` claims are held, `then` actions repeat on `cooldown`.
    Active,
    /// Still active, but the condition is false and `hold` is running.
    Clearing,
}

impl Phase {
    /// The status word.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Pending => "pending",
            Phase::Active => "active",
            Phase::Clearing => "clearing",
        }
    }

    /// Whether the rule's claims are held in this phase.
    pub(crate) fn is_active(self) -> bool {
        matches!(self, Phase::Active | Phase::Clearing)
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A change reported by [`RuleState::update`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Transition {
    /// The condition became true; the `for` timer started.
    Pending,
    /// The rule activated: run `then` actions, take `while` claims, run
    /// `while` hooks with `CGWARDEN_EVENT=fired`.
    Fired,
    /// `cooldown` passed while active and true: run `then` actions again.
    Repeat,
    /// The rule cleared: release its claims, run `while` hooks with
    /// `CGWARDEN_EVENT=cleared`.
    Cleared,
    /// A pending rule's condition turned false before `for` passed.
    Cancelled,
}

/// The transitions of one update, in order; at most two (`Pending` then
/// `Fired` when `for` is 0). Fixed-size, so updating 1000 rules per tick
/// allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Transitions {
    items: [Option<Transition>; 2],
}

impl Transitions {
    fn push(&mut self, t: Transition) {
        if let Some(slot) = self.items.iter_mut().find(|s| s.is_none()) {
            *slot = Some(t);
        }
    }

    /// The transitions in the order they happened.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Transition> + '_ {
        self.items.iter().flatten().copied()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items[0].is_none()
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, t: Transition) -> bool {
        self.iter().any(|x| x == t)
    }

    /// The transitions as a `Vec` (tests).
    #[cfg(test)]
    pub(crate) fn to_vec(self) -> Vec<Transition> {
        self.iter().collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// `since`: when the rule last became idle; `None` before it ever left.
    Idle {
        since: Option<Time>,
    },
    Pending {
        since: Time,
    },
    Active {
        /// Activation time; `then` repeats are due at multiples of
        /// `cooldown` after it.
        since: Time,
        /// The due time of the last `then` run (activation or a multiple).
        last_then: Time,
        /// When the condition turned false, while `hold` runs.
        false_since: Option<Time>,
    },
}

/// The state machine of one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleState {
    state: State,
    /// When the last evaluation's true condition turns false with
    /// no new input (a stall an armed trigger's silence decides; see
    /// [`RuleState::update_ending`]).
    ends: Option<Time>,
}

impl Default for RuleState {
    fn default() -> Self {
        RuleState::new()
    }
}

/// `now - then`, or zero when `now` is earlier (non-monotonic input).
fn elapsed(now: Time, then: Time) -> Duration {
    now.checked_sub(then).unwrap_or(Duration::ZERO)
}

/// The earlier of two optional times; either alone if the other is absent.
fn earliest(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl RuleState {
    /// A rule that has not been evaluated yet.
    pub(crate) fn new() -> Self {
        RuleState {
            state: State::Idle { since: None },
            ends: None,
        }
    }

    /// Back to idle at once, whatever the phase (daemon shutdown: the
    /// caller releases the claims and runs the `cleared` hooks itself). No
    /// transition is reported; the next `update` starts from idle.
    pub(crate) fn reset(&mut self) {
        self.state = State::Idle { since: None };
        self.ends = None;
    }

    /// Feeds one evaluation of the condition at `now`; returns what changed.
    #[cfg(test)]
    pub(crate) fn update(&mut self, now: Time, cond: bool, timing: &Timing) -> Transitions {
        self.update_ending(now, cond, None, timing)
    }

    /// [`update`](Self::update), where a true condition also says when it
    /// ends with no new input (`ends`: a stall that an armed trigger's
    /// silence decides). An active rule then needs no evaluation
    /// at that time: its [`next_deadline`](Self::next_deadline) is the end
    /// of the `hold` that starts there, and the evaluation that sees the
    /// condition false counts the hold from there (or from `now`, if
    /// earlier). Only the last evaluation's word counts: every new input
    /// comes with an evaluation.
    pub(crate) fn update_ending(
        &mut self,
        now: Time,
        cond: bool,
        ends: Option<Time>,
        timing: &Timing,
    ) -> Transitions {
        let ended = self.ends.map_or(now, |e| e.min(now));
        self.ends = if cond { ends } else { None };
        let mut out = Transitions::default();
        match self.state {
            State::Idle { .. } => {
                if cond {
                    out.push(Transition::Pending);
                    self.state = State::Pending { since: now };
                    self.try_fire(now, timing, &mut out);
                }
            }
            State::Pending { .. } => {
                if cond {
                    self.try_fire(now, timing, &mut out);
                } else {
                    out.push(Transition::Cancelled);
                    self.state = State::Idle { since: Some(now) };
                }
            }
            State::Active {
                since,
                last_then,
                false_since,
            } => {
                if cond {
                    // True again: any running hold timer is cancelled.
                    let mut last_then = last_then;
                    if let Some(due) = latest_due(since, last_then, now, timing.cooldown) {
                        out.push(Transition::Repeat);
                        last_then = due;
                    }
                    self.state = State::Active {
                        since,
                        last_then,
                        false_since: None,
                    };
                } else {
                    let false_since = false_since.unwrap_or(ended);
                    if elapsed(now, false_since) >= timing.hold {
                        out.push(Transition::Cleared);
                        self.state = State::Idle { since: Some(now) };
                    } else {
                        self.state = State::Active {
                            since,
                            last_then,
                            false_since: Some(false_since),
                        };
                    }
                }
            }
        }
        out
    }

    /// Pending → Active if the condition has held for `for`.
    fn try_fire(&mut self, now: Time, timing: &Timing, out: &mut Transitions) {
        if let State::Pending { since } = self.state {
            if elapsed(now, since) >= timing.for_ {
                out.push(Transition::Fired);
                self.state = State::Active {
                    since: now,
                    last_then: now,
                    false_since: None,
                };
            }
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        match self.state {
            State::Idle { .. } => Phase::Idle,
            State::Pending { .. } => Phase::Pending,
            State::Active {
                false_since: None, ..
            } => Phase::Active,
            State::Active {
                false_since: Some(_),
                ..
            } => Phase::Clearing,
        }
    }

    /// When the current phase began (for `Clearing`: when the condition
    /// turned false); `None` for a rule that has never left idle.
    pub(crate) fn since(&self) -> Option<Time> {
        match self.state {
            State::Idle { since } => since,
            State::Pending { since } => Some(since),
            State::Active {
                since, false_since, ..
            } => Some(false_since.unwrap_or(since)),
        }
    }

    /// When the rule activated, while it is active or clearing.
    #[cfg(test)]
    pub(crate) fn active_since(&self) -> Option<Time> {
        match self.state {
            State::Active { since, .. } => Some(since),
            _ => None,
        }
    }

    /// The time at which the state would change if the condition kept its
    /// last value: the end of `for` (pending), of `hold` (clearing), or the
    /// next `cooldown` repeat (active) — or, where the condition ends with
    /// no new input ([`update_ending`](Self::update_ending)), that end
    /// (pending) or the end of the `hold` that starts there (active).
    /// `None` when nothing is scheduled. An evaluation at exactly this time
    /// makes the change.
    pub(crate) fn next_deadline(&self, timing: &Timing) -> Option<Time> {
        match self.state {
            State::Idle { .. } => None,
            State::Pending { since } => {
                let fire = since.checked_add(timing.for_);
                // A silent trigger cancels it then.
                earliest(fire, self.ends)
            }
            State::Active {
                false_since: Some(f),
                ..
            } => f.checked_add(timing.hold),
            State::Active {
                last_then,
                false_since: None,
                ..
            } => {
                let repeat = match timing.cooldown {
                    Some(c) if !c.is_zero() => last_then.checked_add(c),
                    _ => None,
                };
                let clear = self.ends.and_then(|e| e.checked_add(timing.hold));
                earliest(repeat, clear)
            }
        }
    }
}

/// The latest repeat due time in `(last_then, now]`, if any: due times are
/// `since + k × cooldown` for k ≥ 1. `None` without a (non-zero) cooldown.
fn latest_due(since: Time, last_then: Time, now: Time, cooldown: Option<Duration>) -> Option<Time> {
    let cooldown = cooldown.filter(|c| !c.is_zero())?;
    let next = last_then.checked_add(cooldown)?;
    if now < next {
        return None;
    }
    // Whole cooldowns since activation, in nanoseconds (u128: no overflow).
    let k = elapsed(now, since).as_nanos() / cooldown.as_nanos();
    let offset = cooldown.as_nanos().checked_mul(k)?;
    let due = since.checked_add(duration_from_nanos(offset)?)?;
    // `last_then` is itself a due time, so `due >= next`; keep it robust
    // against a cooldown changed by a reload.
    Some(due.max(next).min(now))
}

fn duration_from_nanos(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    let sub = u32::try_from(nanos % 1_000_000_000).ok()?;
    Some(Duration::new(secs, sub))
}

#[cfg(test)]
mod tests;
