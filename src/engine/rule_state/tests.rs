//! Tests of [`super`] (`rule_state`).

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
        max_active: None,
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

/// A true condition that says when it ends with no new input
/// (a stall an armed trigger's silence decides).
#[test]
fn a_condition_that_ends_by_itself_clears_in_one_evaluation_at_the_holds_end() {
    let t = timing(0, 3, None);
    let mut r = RuleState::new();
    let fired = r.update_ending(s(10), true, Some(ms(11_125)), &t).to_vec();
    assert_eq!(fired, vec![Pending, Fired]);
    // No evaluation at the end itself: the hold that starts there is due.
    assert_eq!(r.next_deadline(&t), Some(ms(14_125)));
    assert_eq!(
        r.update_ending(ms(14_125), false, None, &t).to_vec(),
        vec![Cleared]
    );
    assert_eq!(r.phase(), Phase::Idle);
    assert_eq!(r.since(), Some(ms(14_125)));
    // A later evaluation that says it goes on moves the end with it.
    let mut r = RuleState::new();
    r.update_ending(s(10), true, Some(ms(11_125)), &t);
    assert!(r
        .update_ending(s(11), true, Some(ms(12_125)), &t)
        .is_empty());
    assert_eq!(r.next_deadline(&t), Some(ms(15_125)));
    assert!(r.update_ending(ms(14_125), false, None, &t).is_empty());
    assert_eq!(r.phase(), Phase::Clearing);
    assert_eq!(
        r.since(),
        Some(ms(12_125)),
        "false since the end it was told"
    );
    assert_eq!(r.next_deadline(&t), Some(ms(15_125)));
    // Seen false before its end (a read showed it): the hold runs from then.
    let mut r = RuleState::new();
    r.update_ending(s(10), true, Some(ms(11_125)), &t);
    assert!(r.update_ending(ms(10_500), false, None, &t).is_empty());
    assert_eq!(r.since(), Some(ms(10_500)));
    assert_eq!(r.next_deadline(&t), Some(ms(13_500)));
    // True again without an end: no deadline but the cooldown's.
    assert!(r.update_ending(s(12), true, None, &t).is_empty());
    assert_eq!(r.phase(), Phase::Active);
    assert_eq!(r.next_deadline(&t), None);
}

#[test]
fn a_pending_condition_that_ends_by_itself_is_due_at_its_end() {
    let t = timing(5, 3, None);
    let mut r = RuleState::new();
    assert_eq!(
        r.update_ending(s(10), true, Some(ms(11_125)), &t).to_vec(),
        vec![Pending]
    );
    assert_eq!(r.next_deadline(&t), Some(ms(11_125)), "before `for` ends");
    assert_eq!(
        r.update_ending(ms(11_125), false, None, &t).to_vec(),
        vec![Cancelled]
    );
    // An end after `for`: `for` is due first.
    let mut r = RuleState::new();
    r.update_ending(s(10), true, Some(s(20)), &t);
    assert_eq!(r.next_deadline(&t), Some(s(15)));
    // Active with a cooldown: the earlier of the repeat and the hold's end.
    let t = timing(0, 3, Some(2));
    let mut r = RuleState::new();
    r.update_ending(s(10), true, Some(ms(11_125)), &t);
    assert_eq!(r.next_deadline(&t), Some(s(12)));
    assert_eq!(
        r.update_ending(s(12), false, None, &t).to_vec(),
        Vec::<Transition>::new()
    );
    assert_eq!(r.since(), Some(ms(11_125)));
    assert_eq!(r.next_deadline(&t), Some(ms(14_125)));
}
