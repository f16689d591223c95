//! Tests of [`super`] (`knobs`).

use super::*;
use crate::engine::claims::tests::{boost, knob, reference_cap, reference_merge, rule};
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
        cap: false,
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
        /// A cap (only on knob 0, the ceiling-type one).
        cap: bool,
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
            proptest::option::of(1u64..5),
            any::<bool>()
        )
            .prop_map(|(owner, knob, v, ttl, cap)| Op::Add {
                owner,
                knob,
                v,
                ttl,
                cap: cap && knob == 0,
            }),
        (
            0usize..4,
            proptest::collection::vec((0usize..3, 0u64..5), 0..3)
        )
            .prop_map(|(rule, knobs)| Op::SetRule { rule, knobs }),
        owner.prop_map(Op::Release),
        (0u64..4).prop_map(Op::Advance),
        (0usize..3, proptest::option::of(0u64..5)).prop_map(|(knob, v)| Op::Baseline { knob, v }),
        (0usize..3, 0u64..5).prop_map(|(knob, v)| Op::Then { knob, v }),
        Just(Op::Write),
    ]
}

fn value(knob: usize, v: u64) -> KnobValue {
    match knob {
        0 => mib(v + 1),
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
        let knobs = [knob("g.memory.high"), knob("cpufreq.policy0.governor"), knob("sysctl.vm.swappiness")];
        let mut t = KnobTable::new();
        let mut now = 0u64;
        let mut live: Vec<Claim> = Vec::new();
        let mut base: [Option<KnobValue>; 3] = [None, None, None];
        let mut policy: [Option<KnobValue>; 3] = [None, None, None];
        let mut written: [Option<KnobValue>; 3] = [None, None, None];
        for op in ops {
            match op {
                Op::Add { owner, knob, v, ttl, cap } => {
                    let c = Claim { cap, ..claim(owner.clone(), &knobs[knob], value(knob, v), ttl.map(|d| s(now + d))) };
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
                let merged = reference_merge(k, &live).map(|(v, _)| v).or_else(|| base[i].clone());
                // A cap holds the value at or below it.
                let want = match (merged, reference_cap(k, &live)) {
                    (m, None) => m,
                    (None, Some((c, _))) => Some(c),
                    (Some(m), Some((c, _))) => Some(if c.cmp_resource(&m) == Some(std::cmp::Ordering::Less) { c } else { m }),
                };
                prop_assert_eq!(t.effective(k), want);
            }
        }
    }
}

/// A governor switch recreates the governor's tunables directory
/// with the kernel's defaults, so the tunables are written again after every
/// governor write, with the governor write's cause, and never twice.
#[test]
fn governor_write_rewrites_its_tunables_after_it() {
    let mut t = KnobTable::new();
    let gov = knob("cpufreq.policy4.governor");
    let rl = knob("cpufreq.policy4.rate_limit_us");
    let other = knob("cpufreq.policy0.rate_limit_us");
    t.set_policy_baseline(&gov, Some(KnobValue::Word("schedutil".into())));
    t.set_policy_baseline(&rl, Some(KnobValue::Int(500)));
    t.set_policy_baseline(&other, Some(KnobValue::Int(2000)));
    let first: Vec<Knob> = t.pending_writes(s(0)).into_iter().map(|w| w.knob).collect();
    // Written once each, the governor before its tunable.
    assert_eq!(first, vec![other.clone(), gov.clone(), rl.clone()]);
    // A rule switches the governor: the tunable follows, though unchanged.
    t.set_claims(
        &rule(0),
        [(gov.clone(), KnobValue::Word("performance".into()))],
        None,
    );
    let w = t.pending_writes(s(1));
    let knobs: Vec<&Knob> = w.iter().map(|w| &w.knob).collect();
    assert_eq!(knobs, vec![&gov, &rl]);
    assert_eq!(w[1].new, KnobValue::Int(500));
    assert_eq!(w[1].cause, Cause::Owner(rule(0)));
    // Back to schedutil: again.
    t.release(&rule(0));
    let knobs: Vec<Knob> = t.pending_writes(s(2)).into_iter().map(|w| w.knob).collect();
    assert_eq!(knobs, vec![gov.clone(), rl.clone()]);
    // A tunable change alone writes only the tunable.
    t.set_claims(&rule(1), [(rl.clone(), KnobValue::Int(100))], None);
    let knobs: Vec<Knob> = t.pending_writes(s(3)).into_iter().map(|w| w.knob).collect();
    assert_eq!(knobs, vec![rl]);
}
