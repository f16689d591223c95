//! Evaluating a rule's `when:` condition against a metrics snapshot (the
//! metrics of docs/policy.md).
//!
//! This module owns what a condition means given the numbers: the
//! [`Metrics`] trait is the snapshot the daemon sampled this tick, the
//! [`Evaluator`] walks a condition and keeps the per-rule state that
//! `memory.events.*` comparisons need, and [`sampled_needs`] tells the daemon
//! which metrics the rules use, so it samples only those.
//!
//! Semantics:
//! - `G.memory.events.E > N/W` holds when more than N new events arrived
//!   within the sliding window W; the bare form `> N` uses `settings.tick`
//!   as W (the evaluator is given the tick with each evaluation). The count
//!   is computed from a short history of `(time, counter)` samples, one per
//!   counter per evaluation time, shared by every rule that reads the
//!   counter: the count at `now` is the counter now minus its value at the
//!   latest sample taken at or before `now - W` (no interpolation: events
//!   are discrete). The window is thus half-open, `(now - W, now]`: an
//!   event seen by the evaluation at `t` counts for evaluations in
//!   `[t, t + W)`. It does not depend on how often rules are evaluated —
//!   only on when each change of the counter was first seen (the daemon
//!   wakes on every `memory.events` modification, so that is when it
//!   happened).
//! - Why shared per group+event and not per rule: the history is a
//!   property of the counter, so two rules with different windows on one
//!   counter agree exactly, a thousand rules on one counter keep one
//!   history, and a counter is read once per evaluation time. It also
//!   matches the documented rule: counters count "from the value seen when
//!   the daemon started watching the group" — a rule added later sees the
//!   group's recent events too.
//! - The first observation of a counter is its baseline: events from before
//!   the daemon started watching never fire a rule (while the history is
//!   younger than W, the count is the growth since the baseline). A counter
//!   that goes down (group recreated) restarts the history at its new
//!   value; so does a counter that was unavailable (group missing) and
//!   comes back. Every event counter a rule uses is read at each evaluation
//!   of that rule, even where `and`/`or` do not need the comparison.
//! - Memory is bounded: samples older than the longest window any rule
//!   asked of the counter are dropped (keeping the latest one at or before
//!   that horizon, the reference for the longest window), and changes that
//!   fall in the same `1/256` of that window are merged into the later
//!   sample, so a history holds at most [`MAX_SAMPLES`] samples. A merge
//!   can only make an event count a little longer (at most W/256 later),
//!   never shorter or not at all.
//! - A metric that is unavailable (`None`: the group is missing, the file is
//!   absent, not enough stall history, a PSI average that is NaN) makes its
//!   comparison false, and is listed in [`Evaluation::unavailable`] with the
//!   reason, so the daemon can log it once. Only comparisons actually
//!   evaluated are listed: `exists(g) and g.memory.current > 1G` says nothing
//!   about `g.memory.current` while `g` does not exist.
//! - `not` of an unavailable comparison is true (the comparison is false):
//!   write `exists(g) and not (...)` to guard it.
//! - The trigger ([`Evaluation::trigger`]) is the comparison that decided the
//!   result, for the hook placeholders `{metric}`, `{value}`, `{threshold}`:
//!   for a true `and`, the first (left) operand's; for a true `or`, the first
//!   true operand's; `not` passes its operand's through (for
//!   `not (x > 5)` the trigger is `x > 5` with the value of x). `running()`
//!   and `exists()` are triggers with value 1 and no threshold.
//! - Byte metrics compare with `max` as larger than every byte count;
//!   `cgroup.populated` is 0 or 1; temperatures compare in millidegrees.
//! - Evaluation allocates nothing in the common path (no unavailable metric,
//!   no group's events read for the first time, no history growing past
//!   its capacity, which is bounded as above); trees nested deeper than [`MAX_EVAL_DEPTH`]
//!   (never produced by the parser, which limits an expression to 4096
//!   characters) evaluate to false rather than overflow the stack.

mod history;

use super::rule_state::Time;
use super::stall::StallKey;
use crate::policy::expr::kpi::Stat as KpiStat;
use crate::policy::expr::{
    Avg, Compare, Expr, ExprKind, MemEvent, MemMetric, Metric, Resource, Stall, Target, Threshold,
};
use crate::policy::model::Rule;
use crate::units::{Size, Temperature};
use history::{event_window, slot, GroupHistories};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::time::Duration;

/// Deepest expression tree evaluated; deeper subtrees are false.
pub(crate) const MAX_EVAL_DEPTH: usize = 1024;

/// Buckets per retention window: changes within one bucket are merged.
const BUCKETS: u32 = 256;
/// Most samples one counter's history holds: the baseline or reference
/// sample, one per bucket of the retention window, and the bucket `now`
/// is in.
#[cfg(test)]
pub(crate) const MAX_SAMPLES: usize = BUCKETS as usize + 2;

/// The metrics snapshot a condition is evaluated against. `None` means the
/// value is unavailable right now.
pub trait Metrics {
    /// A PSI average in percent.
    fn psi_avg(&self, target: &Target, res: Resource, stall: Stall, avg: Avg) -> Option<f64>;
    /// Stall time within the last `window` (see [`super::stall`]).
    fn psi_stall(
        &self,
        target: &Target,
        res: Resource,
        stall: Stall,
        window: Duration,
    ) -> Option<Duration>;
    /// When an armed kernel trigger's silence decides the line's
    /// stall over `window` if no newer sample comes
    /// ([`super::stall::StallHistory::silent_from`]); `None` without one.
    fn psi_stall_silent_from(
        &self,
        _target: &Target,
        _res: Resource,
        _stall: Stall,
        _window: Duration,
    ) -> Option<Time> {
        None
    }
    fn memory_current(&self, group: &str) -> Option<u64>;
    fn swap_current(&self, group: &str) -> Option<u64>;
    /// The raw `memory.events` counter.
    fn memory_event(&self, group: &str, ev: MemEvent) -> Option<u64>;
    fn pids_current(&self, group: &str) -> Option<u64>;
    fn populated(&self, group: &str) -> Option<bool>;
    /// MemAvailable, bytes.
    fn memory_available(&self) -> Option<u64>;
    /// A thermal zone's temperature by zone type, millidegrees Celsius.
    fn thermal_millic(&self, zone: &str) -> Option<i64>;
    /// Whether a live process's comm matches the glob.
    fn running(&self, pattern: &str) -> bool;
    /// A memory telemetry value: a vmstat rate per second,
    /// bytes, or a fragmentation index.
    fn memstat(&self, _m: &MemMetric) -> Option<f64> {
        None
    }
    fn exists(&self, group: &str) -> bool;
    /// Trip point `trip` of a zone (by type), m°C.
    fn thermal_trip_millic(&self, _zone: &str, _trip: u32) -> Option<i64> {
        None
    }
    /// A cooling device's `cur_state`, by its type.
    fn cooling_state(&self, _device: &str) -> Option<u64> {
        None
    }
    /// A cpufreq policy's limit (`limit`) or current frequency,
    /// kHz.
    fn cpufreq_khz(&self, _policy: &str, _limit: bool) -> Option<u64> {
        None
    }
    /// `throttled(POLICY)`; `None` when the policy is unreadable.
    fn throttled(&self, _policy: &str) -> Option<bool> {
        None
    }
    /// A KPI's statistic over the trailing window, in its unit
    /// (seconds for times); `None` without a sample in the window.
    fn kpi(&self, _name: &str, _stat: KpiStat, _window: Duration) -> Option<f64> {
        None
    }
}

/// A measured value, in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Measured {
    Percent(f64),
    Stall(Duration),
    Bytes(u64),
    Count(u64),
    /// A rate or an index (memory telemetry).
    Number(f64),
    /// `cgroup.populated`, `running()`, `exists()`: printed as 1 or 0.
    Flag(bool),
    Millidegrees(i64),
}

impl fmt::Display for Measured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Measured::Percent(p) => write!(f, "{p:.2}%"),
            Measured::Stall(d) => write!(f, "{}", crate::units::Duration(*d)),
            Measured::Bytes(b) | Measured::Count(b) => write!(f, "{b}"),
            Measured::Flag(b) => write!(f, "{}", u8::from(*b)),
            Measured::Millidegrees(m) => write!(f, "{}", Temperature { millidegrees: *m }),
            Measured::Number(n) => write!(f, "{n:.3}"),
        }
    }
}

impl Measured {
    /// `{value}` and `CGWARDEN_VALUE`: a bare number a
    /// script can compare, in the unit docs/policy.md names per kind —
    /// percent for `%` metrics, **microseconds** for stall times (PSI's own
    /// `total=` unit), bytes, counts, 1/0 for flags, millidegrees Celsius
    /// for temperatures. Never `78ms40us` or `12.50%`.
    pub(crate) fn plain(&self) -> String {
        match self {
            Measured::Percent(p) => format!("{p:.2}"),
            Measured::Stall(d) => d.as_micros().to_string(),
            Measured::Bytes(b) | Measured::Count(b) => b.to_string(),
            Measured::Flag(b) => u8::from(*b).to_string(),
            Measured::Millidegrees(m) => m.to_string(),
            Measured::Number(n) => format!("{n:.3}"),
        }
    }
}

/// The leaf that decided a condition, for hook placeholders.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trigger<'e> {
    /// The leaf: a comparison, `running()` or `exists()`.
    pub(crate) leaf: &'e Expr,
    pub(crate) value: Measured,
}

impl Trigger<'_> {
    /// `{metric}`: the metric name, or the call (`running(cyclictest)`).
    pub(crate) fn metric(&self) -> String {
        match &self.leaf.kind {
            ExprKind::Compare(c) => c.metric.to_string(),
            _ => self.leaf.to_string(),
        }
    }

    /// `{value}`: the measured value as a bare number ([`Measured::plain`]).
    pub(crate) fn value(&self) -> String {
        self.value.plain()
    }

    /// `{threshold}`: the comparison's value; empty for calls.
    pub(crate) fn threshold(&self) -> String {
        match &self.leaf.kind {
            ExprKind::Compare(c) => c.value.to_string(),
            _ => String::new(),
        }
    }

    /// The group the leaf reads, for `{group}`; `None` for system-wide and
    /// thermal metrics and `running()`.
    pub(crate) fn group(&self) -> Option<&str> {
        match &self.leaf.kind {
            ExprKind::Compare(c) => c.metric.group().map(|(g, _)| g),
            ExprKind::Exists(g) => Some(&g.value),
            _ => None,
        }
    }
}

/// What an unavailable entry is about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Subject<'e> {
    Metric(&'e Metric),
    /// A subtree nested deeper than [`MAX_EVAL_DEPTH`].
    TooDeep,
    /// `throttled(POLICY)` of a policy that cannot be read.
    Throttled(&'e str),
}

/// A comparison that could not be evaluated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Unavailable<'e> {
    pub(crate) subject: Subject<'e>,
    pub(crate) reason: &'static str,
}

impl Unavailable<'_> {
    /// The metric description, e.g. `vision.memory.current`.
    pub(crate) fn metric(&self) -> String {
        match self.subject {
            Subject::Metric(m) => m.to_string(),
            Subject::TooDeep => "(expression)".to_string(),
            Subject::Throttled(p) => format!("throttled({p})"),
        }
    }
}

impl fmt::Display for Unavailable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.metric(), self.reason)
    }
}

const UNAVAILABLE: &str = "its file is missing or could not be read";
const NOT_A_NUMBER: &str = "not a number";
const MISMATCH: &str = "threshold does not fit the metric";
const TOO_DEEP: &str = "expression nested too deeply";

/// The result of evaluating one condition.
#[derive(Debug, Clone)]
pub(crate) struct Evaluation<'e> {
    pub(crate) value: bool,
    /// The leaf that decided the result (see the module docs).
    pub(crate) trigger: Option<Trigger<'e>>,
    /// Comparisons that were false because their metric was unavailable.
    pub(crate) unavailable: Vec<Unavailable<'e>>,
    /// For a true condition that is one stall comparison behind
    /// an armed trigger, when it turns false if the trigger stays silent
    /// (see [`silence_decides`]); `None` otherwise.
    pub(crate) ends_by_silence: Option<Time>,
}

/// The stall line and window of a condition that is one stall
/// comparison (`G.memory.some > 100ms/1s`), the form whose end an armed
/// trigger's silence decides: true on a sample, it is false once the
/// trigger has said nothing for a window and an eighth after it
/// ([`super::stall::silence_after`]), and stays false until a firing. So a
/// rule on it needs no read to see the stall end, and its `hold` can run
/// from that time — one evaluation, at its end, where a read a window after
/// the last firing and then the hold's end took two. A condition that
/// combines a stall with anything else is read again to see it end, as
/// before (see [`Needs::psi_recheck`]).
pub(crate) fn silence_decides(expr: &Expr) -> Option<(StallKey, Duration)> {
    match &expr.kind {
        ExprKind::Compare(Compare {
            metric:
                Metric::PsiStall {
                    target,
                    resource,
                    stall,
                },
            value: Threshold::StallTime { window, .. },
            ..
        }) => Some((StallKey::of(&target.value, *resource, *stall), window.get())),
        _ => None,
    }
}

/// When an evaluation happens, and the window of the bare event form.
#[derive(Debug, Clone, Copy)]
struct At {
    now: Time,
    tick: Duration,
}

/// Evaluates conditions and keeps the `memory.events` histories they need.
#[derive(Debug, Clone, Default)]
pub(crate) struct Evaluator {
    /// Keyed by group name; shared by every rule (see the module docs).
    events: HashMap<String, GroupHistories>,
}

impl Evaluator {
    pub(crate) fn new() -> Self {
        Evaluator::default()
    }

    /// Evaluates a policy rule's `when:` at `now`; `tick` is
    /// `settings.tick`, the window of the bare `memory.events` form.
    pub(crate) fn evaluate_rule<'e, M: Metrics + ?Sized>(
        &mut self,
        rule: &'e Rule,
        now: Time,
        tick: Duration,
        metrics: &M,
    ) -> Evaluation<'e> {
        self.evaluate(&rule.when, now, tick, metrics)
    }

    /// Evaluates `expr` at `now`; `tick` is the bare event form's window.
    pub(crate) fn evaluate<'e, M: Metrics + ?Sized>(
        &mut self,
        expr: &'e Expr,
        now: Time,
        tick: Duration,
        metrics: &M,
    ) -> Evaluation<'e> {
        let at = At { now, tick };
        if has_events(expr, 0) {
            refresh(expr, &mut self.events, at, metrics, 0);
        }
        let mut ctx = Ctx {
            metrics,
            events: &self.events,
            at,
            unavailable: Vec::new(),
        };
        let (value, trigger) = ctx.eval(expr, 0);
        let ends_by_silence = match value.then(|| silence_decides(expr)).flatten() {
            Some((key, window)) => {
                metrics.psi_stall_silent_from(&key.target, key.resource, key.stall, window)
            }
            None => None,
        };
        Evaluation {
            value,
            trigger,
            unavailable: ctx.unavailable,
            ends_by_silence,
        }
    }

    /// Forgets the histories of counters `keep` rejects (after a reload,
    /// those no rule reads any more): if read again, they re-baseline.
    #[cfg(test)]
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str, MemEvent) -> bool) {
        for (group, histories) in &mut self.events {
            for event in MemEvent::ALL {
                if !keep(group, *event) {
                    if let Some(h) = histories.get_mut(slot(*event)) {
                        *h = history::History::default();
                    }
                }
            }
        }
        self.events
            .retain(|_, hs| hs.iter().any(|h| h.read_at.is_some()));
    }

    /// The earliest time a `memory.events` count drops with no new input
    /// (an event leaves its window), so the daemon can wake then and a rule
    /// clears on time even when nothing else wakes it.
    pub(crate) fn next_expiry(&self, now: Time) -> Option<Time> {
        self.events
            .values()
            .flat_map(|hs| hs.iter())
            .filter_map(|h| h.next_expiry(now))
            .min()
    }

    /// Samples held over all counters (diagnostics; bounded by
    /// [`MAX_SAMPLES`] per counter).
    #[cfg(test)]
    pub(crate) fn samples_held(&self) -> usize {
        self.events
            .values()
            .flat_map(|hs| hs.iter())
            .map(|h| h.samples.len())
            .sum()
    }
}

/// Whether the tree has a `memory.events` comparison.
fn has_events(expr: &Expr, depth: usize) -> bool {
    if depth > MAX_EVAL_DEPTH {
        return false;
    }
    match &expr.kind {
        ExprKind::Or(a, b) | ExprKind::And(a, b) => {
            has_events(a, depth + 1) || has_events(b, depth + 1)
        }
        ExprKind::Not(a) => has_events(a, depth + 1),
        ExprKind::Compare(c) => matches!(c.metric, Metric::MemoryEvent { .. }),
        ExprKind::Running(_) | ExprKind::Exists(_) | ExprKind::Throttled(_) => false,
    }
}

/// Samples every event counter of the tree at `at.now` (once per counter
/// and evaluation time) and widens its retention to the windows used.
fn refresh<M: Metrics + ?Sized>(
    expr: &Expr,
    events: &mut HashMap<String, GroupHistories>,
    at: At,
    m: &M,
    depth: usize,
) {
    if depth > MAX_EVAL_DEPTH {
        return;
    }
    match &expr.kind {
        ExprKind::Or(a, b) | ExprKind::And(a, b) => {
            refresh(a, events, at, m, depth + 1);
            refresh(b, events, at, m, depth + 1);
        }
        ExprKind::Not(a) => refresh(a, events, at, m, depth + 1),
        ExprKind::Compare(Compare {
            metric: Metric::MemoryEvent { group, event },
            value,
            ..
        }) => {
            let Some(window) = event_window(value, at.tick) else {
                return; // a mismatched threshold; the comparison says so
            };
            if !events.contains_key(&group.value) {
                events.insert(group.value.clone(), GroupHistories::default());
            }
            let Some(h) = events
                .get_mut(&group.value)
                .and_then(|hs| hs.get_mut(slot(*event)))
            else {
                return;
            };
            h.retention = h.retention.max(window);
            if !h.windows.contains(&window) {
                h.windows.insert(window);
            }
            if h.read_at != Some(at.now) {
                h.observe(at.now, m.memory_event(&group.value, *event));
            }
        }
        ExprKind::Compare(_)
        | ExprKind::Running(_)
        | ExprKind::Exists(_)
        | ExprKind::Throttled(_) => {}
    }
}

struct Ctx<'m, 'e, M: Metrics + ?Sized> {
    metrics: &'m M,
    events: &'m HashMap<String, GroupHistories>,
    at: At,
    unavailable: Vec<Unavailable<'e>>,
}

type Decided<'e> = (bool, Option<Trigger<'e>>);

impl<'e, M: Metrics + ?Sized> Ctx<'_, 'e, M> {
    fn eval(&mut self, expr: &'e Expr, depth: usize) -> Decided<'e> {
        if depth > MAX_EVAL_DEPTH {
            self.unavailable.push(Unavailable {
                subject: Subject::TooDeep,
                reason: TOO_DEEP,
            });
            return (false, None);
        }
        match &expr.kind {
            ExprKind::Or(a, b) => {
                let (l, lt) = self.eval(a, depth + 1);
                if l {
                    return (true, lt);
                }
                let (r, rt) = self.eval(b, depth + 1);
                (r, if r { rt } else { rt.or(lt) })
            }
            ExprKind::And(a, b) => {
                let (l, lt) = self.eval(a, depth + 1);
                if !l {
                    return (false, lt);
                }
                let (r, rt) = self.eval(b, depth + 1);
                if r {
                    (true, lt.or(rt))
                } else {
                    (false, rt)
                }
            }
            ExprKind::Not(a) => {
                let (v, t) = self.eval(a, depth + 1);
                (!v, t)
            }
            ExprKind::Compare(c) => match self.compare(c) {
                Ok((v, value)) => (v, Some(Trigger { leaf: expr, value })),
                Err(reason) => {
                    self.unavailable.push(Unavailable {
                        subject: Subject::Metric(&c.metric),
                        reason,
                    });
                    (false, None)
                }
            },
            ExprKind::Running(pattern) => {
                let v = self.metrics.running(pattern);
                (
                    v,
                    Some(Trigger {
                        leaf: expr,
                        value: Measured::Flag(v),
                    }),
                )
            }
            ExprKind::Exists(group) => {
                let v = self.metrics.exists(&group.value);
                (
                    v,
                    Some(Trigger {
                        leaf: expr,
                        value: Measured::Flag(v),
                    }),
                )
            }
            ExprKind::Throttled(policy) => match self.metrics.throttled(&policy.value) {
                Some(v) => (
                    v,
                    Some(Trigger {
                        leaf: expr,
                        value: Measured::Flag(v),
                    }),
                ),
                None => {
                    self.unavailable.push(Unavailable {
                        subject: Subject::Throttled(&policy.value),
                        reason: UNAVAILABLE,
                    });
                    (false, None)
                }
            },
        }
    }

    /// `Ok((holds, measured))`, or why the comparison cannot be made.
    fn compare(&self, c: &Compare) -> Result<(bool, Measured), &'static str> {
        let m = self.metrics;
        let (ordering, measured) = match (&c.metric, &c.value) {
            (
                Metric::PsiAvg {
                    target,
                    resource,
                    stall,
                    avg,
                },
                Threshold::Percent(p),
            ) => {
                let v = m
                    .psi_avg(&target.value, *resource, *stall, *avg)
                    .ok_or(UNAVAILABLE)?;
                let ord = v.partial_cmp(&p.value()).ok_or(NOT_A_NUMBER)?;
                (ord, Measured::Percent(v))
            }
            (
                Metric::PsiStall {
                    target,
                    resource,
                    stall,
                },
                Threshold::StallTime { amount, window },
            ) => {
                let v = m
                    .psi_stall(&target.value, *resource, *stall, window.get())
                    .ok_or(UNAVAILABLE)?;
                (v.cmp(&amount.get()), Measured::Stall(v))
            }
            (Metric::MemoryCurrent { group }, Threshold::Size(t)) => {
                let v = m.memory_current(&group.value).ok_or(UNAVAILABLE)?;
                (Size::Bytes(v).cmp_limit(t), Measured::Bytes(v))
            }
            (Metric::SwapCurrent { group }, Threshold::Size(t)) => {
                let v = m.swap_current(&group.value).ok_or(UNAVAILABLE)?;
                (Size::Bytes(v).cmp_limit(t), Measured::Bytes(v))
            }
            (Metric::MemoryAvailable, Threshold::Size(t)) => {
                let v = m.memory_available().ok_or(UNAVAILABLE)?;
                (Size::Bytes(v).cmp_limit(t), Measured::Bytes(v))
            }
            (Metric::MemoryEvent { group, event }, t @ Threshold::Events { count: n, .. }) => {
                let window = event_window(t, self.at.tick).ok_or(MISMATCH)?;
                let v = self
                    .events
                    .get(&group.value)
                    .and_then(|hs| hs.get(slot(*event)))
                    .and_then(|h| h.count(self.at.now, window))
                    .ok_or(UNAVAILABLE)?;
                (v.cmp(n), Measured::Count(v))
            }
            (Metric::PidsCurrent { group }, Threshold::Count(n)) => {
                let v = m.pids_current(&group.value).ok_or(UNAVAILABLE)?;
                (v.cmp(n), Measured::Count(v))
            }
            (Metric::Populated { group }, Threshold::Count(n)) => {
                let v = m.populated(&group.value).ok_or(UNAVAILABLE)?;
                (u64::from(v).cmp(n), Measured::Flag(v))
            }
            (Metric::ThermalTemp { zone }, Threshold::Temperature(t)) => {
                let v = m.thermal_millic(&zone.value).ok_or(UNAVAILABLE)?;
                (v.cmp(&t.millidegrees), Measured::Millidegrees(v))
            }
            (Metric::ThermalTrip { zone, trip }, Threshold::Temperature(t)) => {
                let v = m
                    .thermal_trip_millic(&zone.value, *trip)
                    .ok_or(UNAVAILABLE)?;
                (v.cmp(&t.millidegrees), Measured::Millidegrees(v))
            }
            (Metric::CoolingState { device }, Threshold::Count(n)) => {
                let v = m.cooling_state(&device.value).ok_or(UNAVAILABLE)?;
                (v.cmp(n), Measured::Count(v))
            }
            (Metric::CpufreqFreq { policy, limit }, Threshold::Frequency(f)) => {
                let v = m.cpufreq_khz(&policy.value, *limit).ok_or(UNAVAILABLE)?;
                (v.cmp(&f.khz()), Measured::Count(v))
            }
            (Metric::Mem(mm), Threshold::Size(t)) => {
                let v = m.memstat(mm).ok_or(UNAVAILABLE)? as u64;
                (Size::Bytes(v).cmp_limit(t), Measured::Bytes(v))
            }
            (Metric::Kpi { name, stat }, Threshold::Kpi { value, window, .. }) => {
                let w = window.map_or(crate::policy::expr::kpi::DEFAULT_WINDOW, |w| w.get());
                let v = m.kpi(name, *stat, w).ok_or(UNAVAILABLE)?;
                let ord = v.partial_cmp(value).ok_or(NOT_A_NUMBER)?;
                (ord, Measured::Number(v))
            }
            (Metric::Mem(mm), Threshold::Number(t)) => {
                let v = m.memstat(mm).ok_or(UNAVAILABLE)?;
                let ord = v.partial_cmp(t).ok_or(NOT_A_NUMBER)?;
                (ord, Measured::Number(v))
            }
            _ => return Err(MISMATCH),
        };
        Ok((c.op.holds(ordering), measured))
    }
}

/// Which metrics the rules read, so each tick samples only those.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Needs {
    /// PSI files to read for averages (one file serves some/full, all avgs).
    pub(crate) psi_avg: HashSet<(Target, Resource)>,
    /// PSI lines whose `total=` is kept as a stall series, with the longest
    /// window used on each (the series' retention, and for kernel triggers).
    pub(crate) psi_stall: super::FastMap<StallKey, Duration>,
    /// Stall conditions as written, `(line, amount, window)`, deduplicated:
    /// one kernel PSI trigger each.
    pub(crate) psi_triggers: HashSet<(StallKey, Duration, Duration)>,
    /// Stall lines a condition reads other than as one stall
    /// comparison (see [`silence_decides`]): while their stall is at a
    /// trigger's amount, a read shows it end. The other lines end by the
    /// trigger's silence, at the rules' own deadlines.
    pub(crate) psi_recheck: super::FastSet<StallKey>,
    pub(crate) memory_current: BTreeSet<String>,
    pub(crate) swap_current: BTreeSet<String>,
    /// Groups whose `memory.events` is read.
    pub(crate) memory_events: BTreeSet<String>,
    pub(crate) pids_current: BTreeSet<String>,
    pub(crate) populated: BTreeSet<String>,
    /// `/proc/meminfo` MemAvailable.
    pub(crate) memory_available: bool,
    /// Thermal zones by type.
    pub(crate) thermal_zones: BTreeSet<String>,
    /// `running()` patterns.
    pub(crate) running: BTreeSet<String>,
    /// `exists()` groups.
    pub(crate) exists: BTreeSet<String>,
    /// cpufreq policies whose limit/cur or `throttled()` is read.
    pub(crate) cpufreq: BTreeSet<String>,
    /// Cooling devices are read.
    pub(crate) cooling: bool,
    /// Trip points read, (zone type, N).
    pub(crate) thermal_trips: BTreeSet<(String, u32)>,
    /// Memory telemetry.
    pub(crate) memstat: BTreeSet<MemMetric>,
    /// KPI statistics read, with their windows.
    pub(crate) kpi: BTreeSet<(String, KpiStat, Duration)>,
}

impl Needs {
    /// Adds what one condition reads.
    pub(crate) fn add_expr(&mut self, expr: &Expr) {
        for e in expr.leaves() {
            match &e.kind {
                ExprKind::Or(..) | ExprKind::And(..) | ExprKind::Not(_) => {}
                ExprKind::Compare(c) => self.add_compare(c),
                ExprKind::Running(p) => {
                    self.running.insert(p.clone());
                }
                ExprKind::Exists(g) => {
                    self.exists.insert(g.value.clone());
                }
                ExprKind::Throttled(p) => {
                    self.cpufreq.insert(p.value.clone());
                    self.cooling = true;
                }
            }
        }
    }

    fn add_compare(&mut self, c: &Compare) {
        match &c.metric {
            Metric::PsiAvg {
                target, resource, ..
            } => {
                self.psi_avg.insert((target.value.clone(), *resource));
            }
            Metric::PsiStall {
                target,
                resource,
                stall,
            } => {
                let key = StallKey::of(&target.value, *resource, *stall);
                if let Threshold::StallTime { amount, window } = &c.value {
                    let w = self.psi_stall.entry(key.clone()).or_default();
                    *w = (*w).max(window.get());
                    self.psi_triggers.insert((key, amount.get(), window.get()));
                }
            }
            Metric::MemoryCurrent { group } => {
                self.memory_current.insert(group.value.clone());
            }
            Metric::SwapCurrent { group } => {
                self.swap_current.insert(group.value.clone());
            }
            Metric::MemoryEvent { group, .. } => {
                self.memory_events.insert(group.value.clone());
            }
            Metric::PidsCurrent { group } => {
                self.pids_current.insert(group.value.clone());
            }
            Metric::Populated { group } => {
                self.populated.insert(group.value.clone());
            }
            Metric::MemoryAvailable => self.memory_available = true,
            Metric::ThermalTemp { zone } => {
                self.thermal_zones.insert(zone.value.clone());
            }
            Metric::ThermalTrip { zone, trip } => {
                self.thermal_trips.insert((zone.value.clone(), *trip));
            }
            Metric::CoolingState { .. } => self.cooling = true,
            Metric::CpufreqFreq { policy, .. } => {
                self.cpufreq.insert(policy.value.clone());
            }
            Metric::Mem(mm) => {
                self.memstat.insert(mm.clone());
            }
            Metric::Kpi { name, stat } => {
                if let Threshold::Kpi { window, .. } = &c.value {
                    let w = window.map_or(crate::policy::expr::kpi::DEFAULT_WINDOW, |w| w.get());
                    self.kpi.insert((name.clone(), *stat, w));
                }
            }
        }
    }

    /// Whether nothing needs sampling.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        *self == Needs::default()
    }
}

/// Which metrics the rules' conditions read.
pub fn sampled_needs(rules: &[Rule]) -> Needs {
    let mut needs = Needs::default();
    for r in rules {
        needs.add_expr(&r.when);
        if silence_decides(&r.when).is_none() {
            for leaf in r.when.leaves() {
                if let ExprKind::Compare(Compare {
                    metric:
                        Metric::PsiStall {
                            target,
                            resource,
                            stall,
                        },
                    ..
                }) = &leaf.kind
                {
                    needs
                        .psi_recheck
                        .insert(StallKey::of(&target.value, *resource, *stall));
                }
            }
        }
    }
    needs
}

#[cfg(test)]
mod tests;
