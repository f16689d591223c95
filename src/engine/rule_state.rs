//! The per-rule state machine (SPEC §3, "Semantics").
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
pub type Time = Duration;

/// The timing parameters of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    /// How long the condition must hold before the rule activates.
    pub for_: Duration,
    /// How long the condition must be false before an active rule clears.
    pub hold: Duration,
    /// How often `then` actions repeat while the rule stays active.
    pub cooldown: Option<Duration>,
}

impl Timing {
    /// The timing of a policy rule.
    pub fn of(rule: &crate::policy::model::Rule) -> Timing {
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
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Pending => "pending",
            Phase::Active => "active",
            Phase::Clearing => "clearing",
        }
    }

    /// Whether the rule's claims are held in this phase.
    pub fn is_active(self) -> bool {
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
pub enum Transition {
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
pub struct Transitions {
    items: [Option<Transition>; 2],
}

impl Transitions {
    fn push(&mut self, t: Transition) {
        if let Some(slot) = self.items.iter_mut().find(|s| s.is_none()) {
            *slot = Some(t);
        }
    }

    /// The transitions in the order they happened.
    pub fn iter(&self) -> impl Iterator<Item = Transition> + '_ {
        self.items.iter().flatten().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.items[0].is_none()
    }

    #[cfg(test)]
    pub fn contains(&self, t: Transition) -> bool {
        self.iter().any(|x| x == t)
    }

    /// The transitions as a `Vec` (tests).
    #[cfg(test)]
    pub fn to_vec(self) -> Vec<Transition> {
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
pub struct RuleState {
    state: State,
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

impl RuleState {
    /// A rule that has not been evaluated yet.
    pub fn new() -> Self {
        RuleState {
            state: State::Idle { since: None },
        }
    }

    /// Back to idle at once, whatever the phase (daemon shutdown: the
    /// caller releases the claims and runs the `cleared` hooks itself). No
    /// transition is reported; the next `update` starts from idle.
    pub fn reset(&mut self) {
        self.state = State::Idle { since: None };
    }

    /// Feeds one evaluation of the condition at `now`; returns what changed.
    pub fn update(&mut self, now: Time, cond: bool, timing: &Timing) -> Transitions {
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
                    let false_since = false_since.unwrap_or(now);
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

    pub fn phase(&self) -> Phase {
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
    pub fn since(&self) -> Option<Time> {
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
    pub fn active_since(&self) -> Option<Time> {
        match self.state {
            State::Active { since, .. } => Some(since),
            _ => None,
        }
    }

    /// The time at which the state would change if the condition kept its
    /// last value: the end of `for` (pending), of `hold` (clearing), or the
    /// next `cooldown` repeat (active). `None` when nothing is scheduled.
    /// An evaluation at exactly this time makes the change.
    pub fn next_deadline(&self, timing: &Timing) -> Option<Time> {
        match self.state {
            State::Idle { .. } => None,
            State::Pending { since } => since.checked_add(timing.for_),
            State::Active {
                false_since: Some(f),
                ..
            } => f.checked_add(timing.hold),
            State::Active {
                last_then,
                false_since: None,
                ..
            } => match timing.cooldown {
                Some(c) if !c.is_zero() => last_then.checked_add(c),
                _ => None,
            },
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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use Transition::*;

    fn s(secs: u64) -> Time {
        Duration::from_secs(secs)
    }

    fn ms(millis: u64) -> Time {
        Duration::from_millis(millis)
    }

    fn timing(for_: u64, hold: u64, cooldown: Option<u64>) -> Timing {
        Timing {
            for_: s(for_),
            hold: s(hold),
            cooldown: cooldown.map(s),
        }
    }

    fn step(r: &mut RuleState, now: Time, cond: bool, t: &Timing) -> Vec<Transition> {
        r.update(now, cond, t).to_vec()
    }

    #[test]
    fn reset_returns_an_active_rule_to_idle_and_it_can_fire_again() {
        let t = timing(0, 10, Some(5));
        let mut r = RuleState::new();
        assert_eq!(step(&mut r, s(1), true, &t), vec![Pending, Fired]);
        r.reset();
        assert_eq!(r.phase(), Phase::Idle);
        assert_eq!(r.next_deadline(&t), None, "no hold or cooldown left");
        assert_eq!(step(&mut r, s(2), true, &t), vec![Pending, Fired]);
    }

    #[test]
    fn new_rule_is_idle_with_no_since() {
        let r = RuleState::new();
        assert_eq!(r.phase(), Phase::Idle);
        assert_eq!(r.since(), None);
        assert_eq!(r.next_deadline(&Timing::default()), None);
    }

    #[test]
    fn for_zero_fires_on_same_evaluation() {
        let t = Timing::default();
        let mut r = RuleState::new();
        assert_eq!(step(&mut r, s(5), true, &t), vec![Pending, Fired]);
        assert_eq!(r.phase(), Phase::Active);
        assert_eq!(r.since(), Some(s(5)));
        assert_eq!(r.active_since(), Some(s(5)));
    }

    #[test]
    fn false_while_idle_does_nothing() {
        let t = Timing::default();
        let mut r = RuleState::new();
        assert!(r.update(s(1), false, &t).is_empty());
        assert_eq!(r.phase(), Phase::Idle);
    }

    #[test]
    fn fires_exactly_at_for_not_before() {
        let t = timing(30, 0, None);
        let mut r = RuleState::new();
        assert_eq!(step(&mut r, s(100), true, &t), vec![Pending]);
        assert_eq!(r.next_deadline(&t), Some(s(130)));
        assert_eq!(step(&mut r, s(129), true, &t), vec![]);
        assert_eq!(
            step(&mut r, s(130) - Duration::from_nanos(1), true, &t),
            vec![]
        );
        assert_eq!(r.phase(), Phase::Pending);
        assert_eq!(r.since(), Some(s(100)));
        assert_eq!(step(&mut r, s(130), true, &t), vec![Fired]);
        assert_eq!(r.phase(), Phase::Active);
        assert_eq!(r.active_since(), Some(s(130)));
    }

    #[test]
    fn late_evaluation_after_for_fires() {
        let t = timing(30, 0, None);
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        assert_eq!(step(&mut r, s(45), true, &t), vec![Fired]);
    }

    #[test]
    fn pending_then_false_cancels_without_firing() {
        let t = timing(30, 0, None);
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        assert_eq!(step(&mut r, s(29), false, &t), vec![Cancelled]);
        assert_eq!(r.phase(), Phase::Idle);
        assert_eq!(r.since(), Some(s(29)));
        // The `for` timer restarts from the next true evaluation.
        assert_eq!(step(&mut r, s(30), true, &t), vec![Pending]);
        assert_eq!(step(&mut r, s(59), true, &t), vec![]);
        assert_eq!(step(&mut r, s(60), true, &t), vec![Fired]);
    }

    #[test]
    fn hold_zero_clears_on_first_false() {
        let t = Timing::default();
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        assert_eq!(step(&mut r, s(1), false, &t), vec![Cleared]);
        assert_eq!(r.phase(), Phase::Idle);
        assert_eq!(r.since(), Some(s(1)));
    }

    #[test]
    fn hold_clears_exactly_at_hold() {
        let t = timing(0, 10, None);
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        assert_eq!(step(&mut r, s(5), false, &t), vec![]);
        assert_eq!(r.phase(), Phase::Clearing);
        assert!(r.phase().is_active());
        assert_eq!(r.since(), Some(s(5)));
        assert_eq!(r.active_since(), Some(s(0)));
        assert_eq!(r.next_deadline(&t), Some(s(15)));
        assert_eq!(step(&mut r, ms(14_999), false, &t), vec![]);
        assert_eq!(step(&mut r, s(15), false, &t), vec![Cleared]);
        assert_eq!(r.next_deadline(&t), None);
    }

    #[test]
    fn true_again_cancels_hold() {
        let t = timing(0, 10, None);
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        step(&mut r, s(5), false, &t);
        assert_eq!(step(&mut r, s(9), true, &t), vec![]);
        assert_eq!(r.phase(), Phase::Active);
        // The hold timer starts over at the next false evaluation.
        assert_eq!(step(&mut r, s(12), false, &t), vec![]);
        assert_eq!(step(&mut r, s(21), false, &t), vec![]);
        assert_eq!(step(&mut r, s(22), false, &t), vec![Cleared]);
    }

    #[test]
    fn no_cooldown_means_then_runs_once() {
        let t = timing(0, 0, None);
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        for i in 1..100 {
            assert!(r.update(s(i * 60), true, &t).is_empty());
        }
        assert_eq!(r.next_deadline(&t), None);
    }

    #[test]
    fn cooldown_repeats_at_exact_multiples() {
        let t = timing(0, 0, Some(120));
        let mut r = RuleState::new();
        assert_eq!(step(&mut r, s(10), true, &t), vec![Pending, Fired]);
        assert_eq!(r.next_deadline(&t), Some(s(130)));
        assert_eq!(step(&mut r, ms(129_999), true, &t), vec![]);
        assert_eq!(step(&mut r, s(130), true, &t), vec![Repeat]);
        assert_eq!(r.next_deadline(&t), Some(s(250)));
        assert_eq!(step(&mut r, s(250), true, &t), vec![Repeat]);
        assert_eq!(step(&mut r, s(251), true, &t), vec![]);
        assert_eq!(step(&mut r, s(370), true, &t), vec![Repeat]);
    }

    #[test]
    fn late_repeat_keeps_schedule_and_does_not_burst() {
        let t = timing(0, 0, Some(60));
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        // Evaluated late: one repeat, not several.
        assert_eq!(step(&mut r, s(200), true, &t), vec![Repeat]);
        // The next one is at the next multiple, 240.
        assert_eq!(r.next_deadline(&t), Some(s(240)));
        assert_eq!(step(&mut r, s(239), true, &t), vec![]);
        assert_eq!(step(&mut r, s(240), true, &t), vec![Repeat]);
    }

    #[test]
    fn no_repeat_while_clearing_but_overdue_repeat_when_true_again() {
        let t = timing(0, 30, Some(60));
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        step(&mut r, s(50), false, &t);
        // Due at 60, but the condition is false.
        assert_eq!(step(&mut r, s(60), false, &t), vec![]);
        assert_eq!(r.next_deadline(&t), Some(s(80)));
        assert_eq!(step(&mut r, s(70), true, &t), vec![Repeat]);
        assert_eq!(r.next_deadline(&t), Some(s(120)));
    }

    #[test]
    fn for_then_cooldown_counts_from_activation() {
        let t = timing(30, 0, Some(60));
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        assert_eq!(step(&mut r, s(30), true, &t), vec![Fired]);
        assert_eq!(r.next_deadline(&t), Some(s(90)));
        assert_eq!(step(&mut r, s(60), true, &t), vec![]);
        assert_eq!(step(&mut r, s(90), true, &t), vec![Repeat]);
    }

    #[test]
    fn flapping_condition_with_for_never_fires() {
        let t = timing(3, 0, None);
        let mut r = RuleState::new();
        for i in 0..100 {
            let tr = step(&mut r, s(i), i % 2 == 0, &t);
            assert!(!tr.contains(&Fired), "fired at {i}");
        }
    }

    #[test]
    fn flapping_condition_with_hold_stays_active() {
        let t = timing(0, 5, None);
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        for i in 1..100 {
            let tr = step(&mut r, s(i), i % 3 != 0, &t);
            assert!(tr.is_empty(), "{tr:?} at {i}");
            assert!(r.phase().is_active());
        }
    }

    #[test]
    fn flapping_without_hold_fires_and_clears_each_time() {
        let t = Timing::default();
        let mut r = RuleState::new();
        for i in 0..10 {
            assert_eq!(step(&mut r, s(2 * i), true, &t), vec![Pending, Fired]);
            assert_eq!(step(&mut r, s(2 * i + 1), false, &t), vec![Cleared]);
        }
    }

    #[test]
    fn time_going_backwards_is_harmless() {
        let t = timing(10, 10, Some(10));
        let mut r = RuleState::new();
        step(&mut r, s(100), true, &t);
        assert_eq!(step(&mut r, s(50), true, &t), vec![]);
        assert_eq!(step(&mut r, s(110), true, &t), vec![Fired]);
        assert_eq!(step(&mut r, s(0), true, &t), vec![]);
        assert_eq!(step(&mut r, s(0), false, &t), vec![]);
        assert_eq!(step(&mut r, Duration::MAX, false, &t), vec![Cleared]);
    }

    #[test]
    fn extreme_times_do_not_overflow() {
        let t = Timing {
            for_: Duration::MAX,
            hold: Duration::MAX,
            cooldown: Some(Duration::MAX),
        };
        let mut r = RuleState::new();
        step(&mut r, Duration::MAX, true, &t);
        assert_eq!(r.next_deadline(&t), None);
        let t0 = Timing {
            cooldown: Some(Duration::from_nanos(1)),
            ..Timing::default()
        };
        let mut r = RuleState::new();
        step(&mut r, Duration::ZERO, true, &t0);
        assert_eq!(step(&mut r, Duration::MAX, true, &t0), vec![Repeat]);
        assert_eq!(r.next_deadline(&t0), None);
    }

    #[test]
    fn zero_cooldown_is_no_cooldown() {
        let t = Timing {
            cooldown: Some(Duration::ZERO),
            ..Timing::default()
        };
        let mut r = RuleState::new();
        step(&mut r, s(0), true, &t);
        assert_eq!(step(&mut r, s(1), true, &t), vec![]);
        assert_eq!(r.next_deadline(&t), None);
    }

    #[test]
    fn timing_of_rule() {
        let rule = crate::policy::model::Rule {
            name: "r".into(),
            when: crate::policy::expr::parse_expr("running(x)").expect("parses"),
            when_text: "running(x)".into(),
            for_: s(1),
            hold: s(2),
            cooldown: Some(s(3)),
            then: vec![],
            while_: vec![],
        };
        assert_eq!(Timing::of(&rule), timing(1, 2, Some(3)));
    }

    proptest! {
        /// Against a straightforward model: the rule is active iff the
        /// condition became true and stayed true for `for`, and has not
        /// since been false for `hold`; `Fired` and `Cleared` alternate;
        /// the deadline predicts the next change when the input is kept.
        #[test]
        fn invariants(
            for_ in 0u64..5, hold in 0u64..5, cooldown in proptest::option::of(1u64..5),
            steps in proptest::collection::vec((1u64..4, any::<bool>()), 1..80),
        ) {
            let t = timing(for_, hold, cooldown);
            let mut r = RuleState::new();
            let mut now = 0u64;
            let mut active = false;
            let mut true_since: Option<u64> = None;
            let mut false_since: Option<u64> = None;
            let mut activated_at = 0u64;
            let mut last_k = 0u64;
            for (dt, cond) in steps {
                now += dt;
                let tr = r.update(s(now), cond, &t);
                // Model.
                if cond {
                    false_since = None;
                    true_since.get_or_insert(now);
                } else {
                    true_since = None;
                    false_since.get_or_insert(now);
                }
                let was_active = active;
                if !active && true_since.is_some_and(|ts| now - ts >= for_) {
                    active = true;
                    activated_at = now;
                    last_k = 0;
                } else if active && false_since.is_some_and(|fs| now - fs >= hold) {
                    active = false;
                }
                prop_assert_eq!(r.phase().is_active(), active);
                prop_assert_eq!(tr.contains(Fired), !was_active && active);
                prop_assert_eq!(tr.contains(Cleared), was_active && !active);
                prop_assert_eq!(tr.contains(Pending), !was_active && true_since == Some(now));
                // Repeats: once per crossed multiple of cooldown, only when true.
                let mut want_repeat = false;
                if let (true, true, Some(c)) = (was_active, cond, cooldown) {
                    let k = (now - activated_at) / c;
                    if k > last_k {
                        want_repeat = true;
                        last_k = k;
                    }
                }
                prop_assert_eq!(tr.contains(Repeat), want_repeat);
            }
        }

        /// With a constant condition, the state changes exactly at the
        /// deadline and not before.
        #[test]
        fn deadline_is_exact(
            for_ in 0u64..10, hold in 0u64..10, cooldown in proptest::option::of(1u64..10),
            start in 0u64..100, cond in any::<bool>(),
        ) {
            let t = timing(for_, hold, cooldown);
            let mut r = RuleState::new();
            // Reach a non-idle state: true then, if `cond` is false, false.
            r.update(s(start), true, &t);
            r.update(s(start) + s(for_), true, &t);
            let base = s(start) + s(for_);
            if !cond {
                r.update(base, false, &t);
            }
            if let Some(d) = r.next_deadline(&t) {
                prop_assert!(d >= base);
                if d > base {
                    let mut early = r.clone();
                    prop_assert!(early.update(d - Duration::from_nanos(1), cond, &t).is_empty());
                }
                let mut at = r.clone();
                prop_assert!(!at.update(d, cond, &t).is_empty());
            }
        }
    }
}
