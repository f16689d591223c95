//! Evaluating a rule's `when:` condition against a metrics snapshot (SPEC §3,
//! the metric table).
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
//!   matches SPEC §3: counters count "from the value seen when the daemon
//!   started watching the group" — a rule added later sees the group's
//!   recent events too.
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

use super::rule_state::Time;
use super::stall::StallKey;
use crate::policy::expr::kpi::Stat as KpiStat;
use crate::policy::expr::{
    Avg, Compare, Expr, ExprKind, MemEvent, MemMetric, Metric, Resource, Stall, Target, Threshold,
};
use crate::policy::model::Rule;
use crate::units::{Size, Temperature};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::time::Duration;

/// Deepest expression tree evaluated; deeper subtrees are false.
pub const MAX_EVAL_DEPTH: usize = 1024;

/// Buckets per retention window: changes within one bucket are merged.
const BUCKETS: u32 = 256;
/// Most samples one counter's history holds: the baseline or reference
/// sample, one per bucket of the retention window, and the bucket `now`
/// is in.
pub const MAX_SAMPLES: usize = BUCKETS as usize + 2;

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
    /// A memory telemetry value (issue 25): a vmstat rate per second,
    /// bytes, or a fragmentation index.
    fn memstat(&self, _m: &MemMetric) -> Option<f64> {
        None
    }
    fn exists(&self, group: &str) -> bool;
    /// Issue 24: trip point `trip` of a zone (by type), m°C.
    fn thermal_trip_millic(&self, _zone: &str, _trip: u32) -> Option<i64> {
        None
    }
    /// Issue 24: a cooling device's `cur_state`, by its type.
    fn cooling_state(&self, _device: &str) -> Option<u64> {
        None
    }
    /// Issue 24: a cpufreq policy's limit (`limit`) or current frequency,
    /// kHz.
    fn cpufreq_khz(&self, _policy: &str, _limit: bool) -> Option<u64> {
        None
    }
    /// Issue 24: `throttled(POLICY)`; `None` when the policy is unreadable.
    fn throttled(&self, _policy: &str) -> Option<bool> {
        None
    }
    /// Issue 26: a KPI's statistic over the trailing window, in its unit
    /// (seconds for times); `None` without a sample in the window.
    fn kpi(&self, _name: &str, _stat: KpiStat, _window: Duration) -> Option<f64> {
        None
    }
}

/// A measured value, in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measured {
    Percent(f64),
    Stall(Duration),
    Bytes(u64),
    Count(u64),
    /// A rate or an index (issue 25's memory telemetry).
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
    /// `{value}` and `CGWARDEN_VALUE` (issue 22 item 9): a bare number a
    /// script can compare, in the unit docs/policy.md names per kind —
    /// percent for `%` metrics, **microseconds** for stall times (PSI's own
    /// `total=` unit), bytes, counts, 1/0 for flags, millidegrees Celsius
    /// for temperatures. Never `78ms40us` or `12.50%`.
    pub fn plain(&self) -> String {
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
pub struct Trigger<'e> {
    /// The leaf: a comparison, `running()` or `exists()`.
    pub leaf: &'e Expr,
    pub value: Measured,
}

impl Trigger<'_> {
    /// `{metric}`: the metric name, or the call (`running(cyclictest)`).
    pub fn metric(&self) -> String {
        match &self.leaf.kind {
            ExprKind::Compare(c) => c.metric.to_string(),
            _ => self.leaf.to_string(),
        }
    }

    /// `{value}`: the measured value as a bare number ([`Measured::plain`]).
    pub fn value(&self) -> String {
        self.value.plain()
    }

    /// `{threshold}`: the comparison's value; empty for calls.
    pub fn threshold(&self) -> String {
        match &self.leaf.kind {
            ExprKind::Compare(c) => c.value.to_string(),
            _ => String::new(),
        }
    }

    /// The group the leaf reads, for `{group}`; `None` for system-wide and
    /// thermal metrics and `running()`.
    pub fn group(&self) -> Option<&str> {
        match &self.leaf.kind {
            ExprKind::Compare(c) => c.metric.group().map(|(g, _)| g),
            ExprKind::Exists(g) => Some(&g.value),
            _ => None,
        }
    }
}

/// What an unavailable entry is about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Subject<'e> {
    Metric(&'e Metric),
    /// A subtree nested deeper than [`MAX_EVAL_DEPTH`].
    TooDeep,
    /// `throttled(POLICY)` of a policy that cannot be read (issue 24).
    Throttled(&'e str),
}

/// A comparison that could not be evaluated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unavailable<'e> {
    pub subject: Subject<'e>,
    pub reason: &'static str,
}

impl Unavailable<'_> {
    /// The metric description, e.g. `vision.memory.current`.
    pub fn metric(&self) -> String {
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
pub struct Evaluation<'e> {
    pub value: bool,
    /// The leaf that decided the result (see the module docs).
    pub trigger: Option<Trigger<'e>>,
    /// Comparisons that were false because their metric was unavailable.
    pub unavailable: Vec<Unavailable<'e>>,
}

/// The samples of one `memory.events` counter (see the module docs).
#[derive(Debug, Clone, Default)]
struct History {
    /// `(time, value)`, oldest first: the baseline (or, once pruned, the
    /// reference for the longest window), then one sample per change of
    /// the value, at most one per bucket. Values never decrease: a decrease
    /// restarts the history.
    samples: VecDeque<(Time, u64)>,
    /// When the counter was last read: it is read once per evaluation time.
    read_at: Option<Time>,
    /// The longest window asked of this counter: how far back samples are
    /// needed. Only grows (until [`Evaluator::retain`] drops the history).
    retention: Duration,
    /// Every window asked of this counter (a handful: one per distinct
    /// window in the policy), for [`History::next_expiry`].
    windows: std::collections::BTreeSet<Duration>,
}

impl History {
    /// Records the counter's value at `now`; `None`: unavailable.
    fn observe(&mut self, now: Time, value: Option<u64>) {
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
    fn next_expiry(&self, now: Time) -> Option<Time> {
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
    fn count(&self, now: Time, window: Duration) -> Option<u64> {
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
type GroupHistories = [History; 5];

fn slot(event: MemEvent) -> usize {
    match event {
        MemEvent::High => 0,
        MemEvent::Max => 1,
        MemEvent::Oom => 2,
        MemEvent::OomKill => 3,
        MemEvent::OomGroupKill => 4,
    }
}

/// The window of an event comparison: its own, or the tick for the bare form.
fn event_window(threshold: &Threshold, tick: Duration) -> Option<Duration> {
    match threshold {
        Threshold::Events { window, .. } => Some(window.map_or(tick, |w| w.get())),
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
pub struct Evaluator {
    /// Keyed by group name; shared by every rule (see the module docs).
    events: HashMap<String, GroupHistories>,
}

impl Evaluator {
    pub fn new() -> Self {
        Evaluator::default()
    }

    /// Evaluates a policy rule's `when:` at `now`; `tick` is
    /// `settings.tick`, the window of the bare `memory.events` form.
    pub fn evaluate_rule<'e, M: Metrics + ?Sized>(
        &mut self,
        rule: &'e Rule,
        now: Time,
        tick: Duration,
        metrics: &M,
    ) -> Evaluation<'e> {
        self.evaluate(&rule.when, now, tick, metrics)
    }

    /// Evaluates `expr` at `now`; `tick` is the bare event form's window.
    pub fn evaluate<'e, M: Metrics + ?Sized>(
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
        Evaluation {
            value,
            trigger,
            unavailable: ctx.unavailable,
        }
    }

    /// Forgets the histories of counters `keep` rejects (after a reload,
    /// those no rule reads any more): if read again, they re-baseline.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, MemEvent) -> bool) {
        for (group, histories) in &mut self.events {
            for event in MemEvent::ALL {
                if !keep(group, *event) {
                    if let Some(h) = histories.get_mut(slot(*event)) {
                        *h = History::default();
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
    pub fn next_expiry(&self, now: Time) -> Option<Time> {
        self.events
            .values()
            .flat_map(|hs| hs.iter())
            .filter_map(|h| h.next_expiry(now))
            .min()
    }

    /// Samples held over all counters (diagnostics; bounded by
    /// [`MAX_SAMPLES`] per counter).
    pub fn samples_held(&self) -> usize {
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
    pub psi_avg: HashSet<(Target, Resource)>,
    /// PSI lines whose `total=` is kept as a stall series, with the longest
    /// window used on each (the series' retention, and for kernel triggers).
    pub psi_stall: HashMap<StallKey, Duration>,
    /// Stall conditions as written, `(line, amount, window)`, deduplicated:
    /// one kernel PSI trigger each.
    pub psi_triggers: HashSet<(StallKey, Duration, Duration)>,
    pub memory_current: BTreeSet<String>,
    pub swap_current: BTreeSet<String>,
    /// Groups whose `memory.events` is read.
    pub memory_events: BTreeSet<String>,
    pub pids_current: BTreeSet<String>,
    pub populated: BTreeSet<String>,
    /// `/proc/meminfo` MemAvailable.
    pub memory_available: bool,
    /// Thermal zones by type.
    pub thermal_zones: BTreeSet<String>,
    /// `running()` patterns.
    pub running: BTreeSet<String>,
    /// `exists()` groups.
    pub exists: BTreeSet<String>,
    /// Issue 24: cpufreq policies whose limit/cur or `throttled()` is read.
    pub cpufreq: BTreeSet<String>,
    /// Issue 24: cooling devices are read.
    pub cooling: bool,
    /// Issue 24: trip points read, (zone type, N).
    pub thermal_trips: BTreeSet<(String, u32)>,
    /// Memory telemetry (issue 25).
    pub memstat: BTreeSet<MemMetric>,
    /// Issue 26: KPI statistics read, with their windows.
    pub kpi: BTreeSet<(String, KpiStat, Duration)>,
}

impl Needs {
    /// Adds what one condition reads.
    pub fn add_expr(&mut self, expr: &Expr) {
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
                let key = StallKey {
                    target: target.value.clone(),
                    resource: *resource,
                    stall: *stall,
                };
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
    pub fn is_empty(&self) -> bool {
        *self == Needs::default()
    }
}

/// Which metrics the rules' conditions read.
pub fn sampled_needs(rules: &[Rule]) -> Needs {
    let mut needs = Needs::default();
    for r in rules {
        needs.add_expr(&r.when);
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::expr::parse_expr;
    use proptest::prelude::*;
    use std::cell::Cell;

    /// A fake snapshot: every metric settable, everything else unavailable.
    #[derive(Default)]
    struct Fake {
        psi: HashMap<(String, Resource, Stall, Avg), f64>,
        stall: HashMap<(String, Resource, Stall, Duration), Duration>,
        mem: HashMap<String, u64>,
        swap: HashMap<String, u64>,
        events: HashMap<(String, MemEvent), u64>,
        pids: HashMap<String, u64>,
        populated: HashMap<String, bool>,
        available: Option<u64>,
        thermal: HashMap<String, i64>,
        running: Vec<String>,
        groups: Vec<String>,
        event_reads: Cell<usize>,
    }

    impl Metrics for Fake {
        fn psi_avg(&self, t: &Target, r: Resource, s: Stall, a: Avg) -> Option<f64> {
            self.psi.get(&(t.to_string(), r, s, a)).copied()
        }
        fn psi_stall(&self, t: &Target, r: Resource, s: Stall, w: Duration) -> Option<Duration> {
            self.stall.get(&(t.to_string(), r, s, w)).copied()
        }
        fn memory_current(&self, g: &str) -> Option<u64> {
            self.mem.get(g).copied()
        }
        fn swap_current(&self, g: &str) -> Option<u64> {
            self.swap.get(g).copied()
        }
        fn memory_event(&self, g: &str, ev: MemEvent) -> Option<u64> {
            self.event_reads.set(self.event_reads.get() + 1);
            self.events.get(&(g.to_string(), ev)).copied()
        }
        fn pids_current(&self, g: &str) -> Option<u64> {
            self.pids.get(g).copied()
        }
        fn populated(&self, g: &str) -> Option<bool> {
            self.populated.get(g).copied()
        }
        fn memory_available(&self) -> Option<u64> {
            self.available
        }
        fn thermal_millic(&self, zone: &str) -> Option<i64> {
            self.thermal.get(zone).copied()
        }
        fn running(&self, pattern: &str) -> bool {
            self.running.iter().any(|p| p == pattern)
        }
        fn exists(&self, g: &str) -> bool {
            self.groups.iter().any(|x| x == g)
        }
    }

    fn expr(text: &str) -> Expr {
        parse_expr(text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn eval(m: &Fake, text: &str) -> bool {
        let e = expr(text);
        Evaluator::new().evaluate(&e, T0, TICK, m).value
    }

    const G: u64 = 1 << 30;
    const T0: Time = Duration::ZERO;
    const TICK: Duration = Duration::from_secs(1);

    fn secs(s: f64) -> Time {
        Duration::from_secs_f64(s)
    }

    fn ms(n: u64) -> Time {
        Duration::from_millis(n)
    }

    /// The count a `memory.events` comparison measured, if available.
    fn count(r: &Evaluation<'_>) -> Option<u64> {
        match r.trigger.map(|t| t.value) {
            Some(Measured::Count(n)) if r.unavailable.is_empty() => Some(n),
            _ => None,
        }
    }

    #[test]
    fn psi_average() {
        let mut m = Fake::default();
        m.psi.insert(
            (
                "inference".into(),
                Resource::Memory,
                Stall::Some,
                Avg::Avg10,
            ),
            12.5,
        );
        m.psi.insert(
            ("system".into(), Resource::Cpu, Stall::Full, Avg::Avg300),
            1.0,
        );
        assert!(eval(&m, "inference.memory.some.avg10 > 10%"));
        assert!(!eval(&m, "inference.memory.some.avg10 > 12.5%"));
        assert!(eval(&m, "inference.memory.some.avg10 >= 12.5%"));
        assert!(eval(&m, "inference.memory.some.avg10 == 12.5%"));
        assert!(eval(&m, "system.cpu.full.avg300 < 2%"));
        assert!(!eval(&m, "inference.memory.full.avg10 < 100%"));
    }

    #[test]
    fn nan_psi_is_unavailable() {
        let mut m = Fake::default();
        m.psi.insert(
            ("g".into(), Resource::Io, Stall::Some, Avg::Avg60),
            f64::NAN,
        );
        let e = expr("g.io.some.avg60 != 5%");
        let ev = Evaluator::new().evaluate(&e, T0, TICK, &m);
        assert!(!ev.value);
        assert_eq!(ev.unavailable.len(), 1);
        assert_eq!(ev.unavailable[0].reason, NOT_A_NUMBER);
    }

    #[test]
    fn stall_time_uses_the_window() {
        let mut m = Fake::default();
        m.stall.insert(
            (
                "g".into(),
                Resource::Cpu,
                Stall::Some,
                Duration::from_secs(1),
            ),
            Duration::from_millis(150),
        );
        assert!(eval(&m, "g.cpu.some > 100ms/1s"));
        assert!(!eval(&m, "g.cpu.some > 150ms/1s"));
        assert!(eval(&m, "g.cpu.some >= 150ms/1s"));
        // Another window is another series: unavailable here.
        assert!(!eval(&m, "g.cpu.some > 1ms/2s"));
    }

    #[test]
    fn byte_counts_and_sizes() {
        let mut m = Fake::default();
        m.mem.insert("vision".into(), 3 * G);
        m.swap.insert("vision".into(), 0);
        m.available = Some(512 << 20);
        assert!(eval(&m, "vision.memory.current > 2G"));
        assert!(eval(&m, "vision.memory.current == 3G"));
        assert!(eval(&m, "vision.memory.swap.current == 0"));
        assert!(eval(&m, "system.memory.available < 1G"));
        assert!(!eval(&m, "system.memory.available < 512M"));
    }

    #[test]
    fn pids_populated_thermal_calls() {
        let mut m = Fake::default();
        m.pids.insert("g".into(), 300);
        m.populated.insert("g".into(), true);
        m.thermal.insert("cpu-0-0-usr".into(), 85_500);
        m.running.push("cyclictest".into());
        m.groups.push("g".into());
        assert!(eval(&m, "g.pids.current >= 300"));
        assert!(eval(&m, "g.cgroup.populated == 1"));
        assert!(!eval(&m, "g.cgroup.populated == 0"));
        assert!(eval(&m, "thermal.cpu-0-0-usr.temp > 85C"));
        assert!(!eval(&m, "thermal.cpu-0-0-usr.temp > 85.5C"));
        assert!(eval(&m, "running(cyclictest)"));
        assert!(!eval(&m, "running(other)"));
        assert!(eval(&m, "exists(g) and not exists(h)"));
    }

    #[test]
    fn unavailable_is_false_and_reported_once_per_evaluated_comparison() {
        let m = Fake::default();
        let e = expr("ghost.memory.current > 1G or thermal.x.temp > 50C");
        let ev = Evaluator::new().evaluate(&e, T0, TICK, &m);
        assert!(!ev.value);
        let got: Vec<String> = ev.unavailable.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            vec![
                "ghost.memory.current: its file is missing or could not be read",
                "thermal.x.temp: its file is missing or could not be read"
            ]
        );
        // Guarded by exists(): nothing to report.
        let e = expr("exists(ghost) and ghost.memory.current > 1G");
        let ev = Evaluator::new().evaluate(&e, T0, TICK, &m);
        assert!(!ev.value && ev.unavailable.is_empty());
    }

    #[test]
    fn trigger_is_the_deciding_comparison() {
        let mut m = Fake::default();
        m.mem.insert("a".into(), 5 * G);
        m.mem.insert("b".into(), 7 * G);
        m.psi.insert(
            ("a".into(), Resource::Memory, Stall::Some, Avg::Avg10),
            42.0,
        );
        let mut ev = Evaluator::new();
        let e = expr("a.memory.current > 6G or b.memory.current > 6G or a.memory.current > 1G");
        let r = ev.evaluate(&e, T0, TICK, &m);
        let t = r.trigger.expect("trigger");
        assert!(r.value);
        assert_eq!(
            (t.metric(), t.value(), t.threshold()),
            ("b.memory.current".into(), (7 * G).to_string(), "6G".into())
        );
        assert_eq!(t.group(), Some("b"));

        let e = expr("a.memory.some.avg10 > 10% and b.memory.current > 6G");
        let t = ev.evaluate(&e, T0, TICK, &m).trigger.expect("trigger");
        assert_eq!(
            (t.metric(), t.value(), t.threshold()),
            ("a.memory.some.avg10".into(), "42.00".into(), "10%".into())
        );

        let e = expr("not (a.memory.current > 6G)");
        let r = ev.evaluate(&e, T0, TICK, &m);
        assert!(r.value);
        assert_eq!(
            r.trigger.map(|t| t.metric()),
            Some("a.memory.current".into())
        );

        m.running.push("cyclictest".into());
        let e = expr("running(cyclictest)");
        let t = ev.evaluate(&e, T0, TICK, &m).trigger.expect("trigger");
        assert_eq!(
            (t.metric(), t.value(), t.threshold()),
            ("running(cyclictest)".into(), "1".into(), String::new())
        );
        assert_eq!(t.group(), None);
    }

    #[test]
    fn measured_display() {
        assert_eq!(
            Measured::Stall(Duration::from_millis(150)).to_string(),
            "150ms"
        );
        assert_eq!(Measured::Millidegrees(85_500).to_string(), "85.5C");
        assert_eq!(Measured::Flag(false).to_string(), "0");
        assert_eq!(Measured::Percent(12.3456).to_string(), "12.35%");
    }

    #[test]
    fn hook_values_are_bare_numbers_in_the_documented_units() {
        let stall = Measured::Stall(Duration::from_micros(78_040));
        assert_eq!(stall.plain(), "78040", "microseconds, not {stall}");
        assert_eq!(Measured::Percent(12.3456).plain(), "12.35");
        assert_eq!(Measured::Bytes(268_435_456).plain(), "268435456");
        assert_eq!(Measured::Count(3).plain(), "3");
        assert_eq!(Measured::Flag(true).plain(), "1");
        assert_eq!(Measured::Millidegrees(85_500).plain(), "85500");
        for m in [stall, Measured::Percent(1.0), Measured::Millidegrees(-5)] {
            assert!(m.plain().parse::<f64>().is_ok(), "{m:?}");
        }
    }

    /// Evaluates `text` at each time of `evals` (in order), with the `high`
    /// counter of `g` at `base` plus the number of `events` at or before
    /// that time. Returns `(time, count, value)` per evaluation.
    fn simulate(
        text: &str,
        tick: Duration,
        base: u64,
        events: &[Time],
        evals: &[Time],
    ) -> Vec<(Time, Option<u64>, bool)> {
        let e = expr(text);
        let mut ev = Evaluator::new();
        let mut m = Fake::default();
        evals
            .iter()
            .map(|&now| {
                let seen = events.iter().filter(|&&t| t <= now).count() as u64;
                m.events.insert(("g".into(), MemEvent::High), base + seen);
                let r = ev.evaluate(&e, now, tick, &m);
                (now, count(&r), r.value)
            })
            .collect()
    }

    /// Every evaluation of `evals` at time `at`.
    fn at(results: &[(Time, Option<u64>, bool)], at: Time) -> (Option<u64>, bool) {
        results
            .iter()
            .find(|(t, ..)| *t == at)
            .map(|&(_, c, v)| (c, v))
            .unwrap_or_else(|| panic!("no evaluation at {at:?}"))
    }

    #[test]
    fn six_events_in_three_seconds_fire_however_often_evaluated() {
        let rule = "g.memory.events.high > 5/10s";
        // Six events, one every 500 ms from 0.5 s to 3 s.
        let events: Vec<Time> = (1..=6).map(|i| ms(500 * i)).collect();
        // Once: a baseline at 0 and one look at 3 s.
        let once = simulate(rule, TICK, 7, &events, &[T0, secs(3.0), secs(13.5)]);
        // A hundred times over the same 3 s (every 30 ms), then on.
        let mut dense: Vec<Time> = (0..=100).map(|i| ms(30 * i)).collect();
        dense.push(secs(13.5));
        let many = simulate(rule, TICK, 7, &events, &dense);
        assert_eq!(at(&once, secs(3.0)), (Some(6), true));
        assert_eq!(at(&many, secs(3.0)), (Some(6), true));
        // Never before the sixth event.
        assert!(many.iter().filter(|(t, ..)| *t < secs(3.0)).all(|r| !r.2));
        // Both clear once the window has passed over the last event.
        assert_eq!(at(&once, secs(13.5)), (Some(0), false));
        assert_eq!(at(&many, secs(13.5)), (Some(0), false));
    }

    #[test]
    fn events_older_than_the_window_stop_counting() {
        let rule = "g.memory.events.high > 1/10s";
        let events: Vec<Time> = (1..=6).map(|i| ms(500 * i)).collect();
        // The daemon wakes on each event (inotify), and ticks every second.
        let mut evals: Vec<Time> = (0..=20).map(|i| secs(f64::from(i))).collect();
        evals.extend(&events);
        evals.sort();
        evals.dedup();
        let r = simulate(rule, TICK, 0, &events, &evals);
        assert_eq!(at(&r, secs(3.0)), (Some(6), true));
        assert_eq!(at(&r, secs(10.0)), (Some(6), true));
        // Events seen at 0.5 s and 1 s are out of (1 s, 11 s]...
        assert_eq!(at(&r, secs(11.0)), (Some(4), true));
        // ...those up to 2.5 s out of (2.5 s, 12.5 s]: one left, the rule clears.
        assert_eq!(at(&r, secs(12.0)), (Some(2), true));
        assert_eq!(at(&r, secs(13.0)), (Some(0), false));
        assert_eq!(at(&r, secs(20.0)), (Some(0), false));
    }

    #[test]
    fn window_boundary_is_half_open() {
        // An event seen at 5 s counts in [5 s, 15 s): the sample taken at
        // exactly now - window is the reference, so it no longer counts.
        let events = [secs(5.0)];
        let evals = [
            T0,
            secs(5.0),
            secs(15.0) - Duration::from_nanos(1),
            secs(15.0),
        ];
        let r = simulate("g.memory.events.high > 0/10s", TICK, 0, &events, &evals);
        let counts: Vec<Option<u64>> = r.iter().map(|x| x.1).collect();
        assert_eq!(counts, [Some(0), Some(1), Some(1), Some(0)]);
    }

    #[test]
    fn history_reference_is_the_latest_sample_at_or_before_the_window_start() {
        let mut h = History {
            retention: Duration::from_secs(60),
            ..History::default()
        };
        h.observe(secs(0.0), Some(10));
        h.observe(secs(5.0), Some(11));
        h.observe(secs(7.0), Some(14));
        let w = Duration::from_secs(10);
        // Before the history is 10 s old: growth since the baseline.
        assert_eq!(h.count(secs(9.0), w), Some(4));
        // The sample at exactly now - 10 s is the reference: its events no
        // longer count; a nanosecond earlier they still do.
        assert_eq!(h.count(secs(15.0) - Duration::from_nanos(1), w), Some(4));
        assert_eq!(h.count(secs(15.0), w), Some(3));
        assert_eq!(h.count(secs(17.0), w), Some(0));
        assert_eq!(h.count(secs(100.0), w), Some(0));
        assert_eq!(History::default().count(secs(1.0), w), None);
    }

    #[test]
    fn bare_form_uses_the_tick_as_its_window() {
        let events = [secs(5.0)];
        let evals: Vec<Time> = (0..=80).map(|i| ms(100 * i)).collect();
        let r = simulate("g.memory.events.high > 0", TICK, 3, &events, &evals);
        for &(t, c, v) in &r {
            let want = t >= secs(5.0) && t < secs(6.0);
            assert_eq!((c, v), (Some(u64::from(want)), want), "at {t:?}");
        }
        // The same condition under a 3 s tick holds three times as long.
        let r = simulate(
            "g.memory.events.high > 0",
            Duration::from_secs(3),
            3,
            &events,
            &evals,
        );
        assert_eq!(at(&r, secs(7.9)), (Some(1), true));
        assert_eq!(at(&r, secs(8.0)), (Some(0), false));
        // An explicit window ignores the tick.
        let r = simulate("g.memory.events.high > 0/2s", TICK, 3, &events, &evals);
        assert_eq!(at(&r, secs(6.5)), (Some(1), true));
        assert_eq!(at(&r, secs(7.0)), (Some(0), false));
    }

    #[test]
    fn events_count_from_first_observation() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::High), 1000);
        let e = expr("g.memory.events.high > 0/1m");
        let mut ev = Evaluator::new();
        // Events from before the daemon started never fire.
        assert!(!ev.evaluate(&e, secs(100.0), TICK, &m).value);
        assert!(!ev.evaluate(&e, secs(101.0), TICK, &m).value);
        m.events.insert(("g".into(), MemEvent::High), 1003);
        let r = ev.evaluate(&e, secs(102.0), TICK, &m);
        assert!(r.value);
        assert_eq!(r.trigger.map(|t| t.value()), Some("3".into()));
        assert_eq!(r.trigger.map(|t| t.threshold()), Some("0/1m".into()));
        // Still within the minute, whatever the evaluation rate.
        assert_eq!(count(&ev.evaluate(&e, secs(102.5), TICK, &m)), Some(3));
        assert_eq!(count(&ev.evaluate(&e, secs(161.9), TICK, &m)), Some(3));
        assert_eq!(count(&ev.evaluate(&e, secs(162.0), TICK, &m)), Some(0));
    }

    #[test]
    fn event_counter_going_down_restarts_the_count() {
        let mut m = Fake::default();
        let e = expr("g.memory.events.max > 0/10s");
        let mut ev = Evaluator::new();
        let mut set = |v| m.events.insert(("g".into(), MemEvent::Max), v);
        set(50);
        let _ = ev.evaluate(&e, secs(1.0), TICK, &m);
        m.events.insert(("g".into(), MemEvent::Max), 53);
        assert_eq!(count(&ev.evaluate(&e, secs(2.0), TICK, &m)), Some(3));
        // Group recreated: the counter starts again below the old value.
        m.events.insert(("g".into(), MemEvent::Max), 2);
        assert_eq!(count(&ev.evaluate(&e, secs(3.0), TICK, &m)), Some(0));
        m.events.insert(("g".into(), MemEvent::Max), 3);
        assert_eq!(count(&ev.evaluate(&e, secs(4.0), TICK, &m)), Some(1));
        // The three old events are not counted again within the window.
        assert_eq!(count(&ev.evaluate(&e, secs(5.0), TICK, &m)), Some(1));
    }

    #[test]
    fn event_counter_unavailable_then_back_rebaselines() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::Oom), 5);
        let e = expr("g.memory.events.oom > 0/10s");
        let mut ev = Evaluator::new();
        let _ = ev.evaluate(&e, secs(1.0), TICK, &m);
        m.events.insert(("g".into(), MemEvent::Oom), 7);
        assert!(ev.evaluate(&e, secs(2.0), TICK, &m).value);
        m.events.clear();
        let r = ev.evaluate(&e, secs(3.0), TICK, &m);
        assert!(!r.value);
        assert_eq!(r.unavailable.len(), 1);
        assert_eq!(r.unavailable[0].reason, UNAVAILABLE);
        // Back (recreated with a higher count, even): a new baseline.
        m.events.insert(("g".into(), MemEvent::Oom), 9);
        assert_eq!(count(&ev.evaluate(&e, secs(4.0), TICK, &m)), Some(0));
        m.events.insert(("g".into(), MemEvent::Oom), 10);
        assert_eq!(count(&ev.evaluate(&e, secs(5.0), TICK, &m)), Some(1));
    }

    #[test]
    fn events_read_even_when_short_circuited() {
        let mut m = Fake::default();
        m.running.push("x".into());
        m.events.insert(("g".into(), MemEvent::High), 0);
        let e = expr("running(x) or g.memory.events.high > 0/1s");
        let mut ev = Evaluator::new();
        let _ = ev.evaluate(&e, secs(0.0), TICK, &m);
        m.events.insert(("g".into(), MemEvent::High), 4);
        // `or` short-circuits, but the counter is still sampled now...
        assert!(ev.evaluate(&e, secs(1.0), TICK, &m).value);
        m.running.clear();
        // ...so these 4 events are known to be 1.5 s old: out of the window.
        assert!(!ev.evaluate(&e, secs(2.5), TICK, &m).value);
    }

    #[test]
    fn a_counter_is_read_once_per_evaluation_time_and_shared_by_rules() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::High), 0);
        let short = expr("g.memory.events.high > 2/1s and not g.memory.events.high > 10/1s");
        let long = expr("g.memory.events.high > 2/1m");
        let mut ev = Evaluator::new();
        let _ = ev.evaluate(&short, secs(1.0), TICK, &m);
        let _ = ev.evaluate(&long, secs(1.0), TICK, &m);
        m.events.insert(("g".into(), MemEvent::High), 5);
        m.event_reads.set(0);
        assert!(ev.evaluate(&short, secs(2.0), TICK, &m).value);
        assert!(ev.evaluate(&long, secs(2.0), TICK, &m).value);
        assert_eq!(m.event_reads.get(), 1);
        // Both windows over one history: at 3 s the short one has cleared.
        assert!(!ev.evaluate(&short, secs(3.0), TICK, &m).value);
        assert!(ev.evaluate(&long, secs(3.0), TICK, &m).value);
        // A rule evaluated for the first time (added by a reload) sees the
        // group's recent events: the count is from when the daemon started
        // watching the group (SPEC §3), not from the rule's first look.
        let other = expr("g.memory.events.high >= 5/1m");
        assert!(ev.evaluate(&other, secs(4.0), TICK, &m).value);
    }

    #[test]
    fn retain_forgets_histories() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::High), 0);
        m.events.insert(("h".into(), MemEvent::High), 0);
        let e = expr("g.memory.events.high > 0/10s or h.memory.events.high > 0/10s");
        let mut ev = Evaluator::new();
        let _ = ev.evaluate(&e, secs(1.0), TICK, &m);
        m.events.insert(("g".into(), MemEvent::High), 1);
        m.events.insert(("h".into(), MemEvent::High), 1);
        let _ = ev.evaluate(&e, secs(2.0), TICK, &m);
        assert_eq!(ev.samples_held(), 4);
        ev.retain(|group, _| group == "g");
        assert_eq!(ev.samples_held(), 2);
        // h starts over from its current value; g keeps its event.
        let g = expr("g.memory.events.high > 0/10s");
        let h = expr("h.memory.events.high > 0/10s");
        assert_eq!(count(&ev.evaluate(&g, secs(3.0), TICK, &m)), Some(1));
        assert_eq!(count(&ev.evaluate(&h, secs(3.0), TICK, &m)), Some(0));
    }

    #[test]
    fn history_stays_bounded_over_an_event_storm() {
        // 10^5 evaluations, the counter rising at every one (one event per
        // millisecond), for a 10 s window and for a 1 h one.
        for (window, step) in [("10s", ms(1)), ("1h", ms(50))] {
            let e = expr(&format!("g.memory.events.high > 0/{window}"));
            let w = crate::units::Duration::parse(window)
                .map(|d| d.get())
                .unwrap_or_default();
            let bucket = w / BUCKETS;
            let mut ev = Evaluator::new();
            let mut m = Fake::default();
            let mut most = 0;
            for i in 0..100_000u32 {
                let now = step * i;
                m.events.insert(("g".into(), MemEvent::High), u64::from(i));
                let r = ev.evaluate(&e, now, TICK, &m);
                most = most.max(ev.samples_held());
                // Merging may count an event up to one bucket longer, never
                // shorter: between the events of (now - w, now] and those
                // of (now - w - bucket, now].
                let c = count(&r).unwrap_or(u64::MAX);
                let exact = |w: Duration| {
                    let first = now.saturating_sub(w).as_nanos() / step.as_nanos();
                    let within = if now < w {
                        u128::from(i)
                    } else {
                        u128::from(i) - first
                    };
                    u64::try_from(within).unwrap_or(u64::MAX)
                };
                assert!(
                    exact(w) <= c && c <= exact(w + bucket),
                    "{window} at {now:?}: {c} not in {}..={}",
                    exact(w),
                    exact(w + bucket)
                );
            }
            assert!(most <= MAX_SAMPLES, "{window}: {most} samples");
            assert!(
                most > MAX_SAMPLES / 2,
                "{window}: {most}: the bound is not vacuous"
            );
        }
    }

    #[test]
    fn quiet_counter_keeps_few_samples() {
        // A counter that does not change keeps only its baseline.
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::OomKill), 3);
        let e = expr("g.memory.events.oom_kill > 0");
        let mut ev = Evaluator::new();
        for i in 0..10_000u64 {
            let _ = ev.evaluate(&e, ms(10 * i), TICK, &m);
        }
        assert_eq!(ev.samples_held(), 1);
    }

    #[test]
    fn clock_going_backwards_does_not_panic_or_uncount() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::High), 0);
        let e = expr("g.memory.events.high > 0/10s");
        let mut ev = Evaluator::new();
        let _ = ev.evaluate(&e, secs(20.0), TICK, &m);
        m.events.insert(("g".into(), MemEvent::High), 2);
        assert_eq!(count(&ev.evaluate(&e, secs(5.0), TICK, &m)), Some(2));
        assert_eq!(count(&ev.evaluate(&e, secs(29.9), TICK, &m)), Some(2));
        assert_eq!(count(&ev.evaluate(&e, secs(30.0), TICK, &m)), Some(0));
    }

    #[test]
    fn deep_hand_built_tree_does_not_overflow() {
        let mut e = expr("running(x)");
        for _ in 0..(MAX_EVAL_DEPTH + 10) {
            e = Expr {
                span: e.span,
                kind: ExprKind::Not(Box::new(e)),
            };
        }
        let m = Fake::default();
        let r = Evaluator::new().evaluate(&e, T0, TICK, &m);
        assert_eq!(r.unavailable.first().map(|u| u.reason), Some(TOO_DEEP));
        let mut needs = Needs::default();
        needs.add_expr(&e);
        assert!(needs.running.contains("x"));
        // Dropping a deep tree recurses in Box's Drop; keep it bounded.
        let mut cur = e;
        while let ExprKind::Not(inner) = cur.kind {
            cur = *inner;
        }
    }

    #[test]
    fn longest_valid_or_chain_evaluates() {
        let text = vec!["running(a)"; 290].join(" or ");
        let e = expr(&text);
        let mut m = Fake::default();
        assert!(!Evaluator::new().evaluate(&e, T0, TICK, &m).value);
        m.running.push("a".into());
        assert!(Evaluator::new().evaluate(&e, T0, TICK, &m).value);
    }

    #[test]
    fn needs_lists_only_what_rules_use() {
        let rule = |name: &str, when: &str| Rule {
            name: name.into(),
            when: expr(when),
            when_text: when.into(),
            for_: Duration::ZERO,
            hold: Duration::ZERO,
            cooldown: None,
            then: vec![],
            while_: vec![],
            max_active: None,
        };
        let rules = [
            rule(
                "a",
                "inference.memory.some.avg10 > 10% and inference.memory.full.avg60 > 1%",
            ),
            rule(
                "b",
                "inference.cpu.some > 100ms/1s or inference.cpu.some > 300ms/2s",
            ),
            rule("c", "system.io.full > 50ms/500ms"),
            rule(
                "d",
                "vision.memory.current > 3G and not vision.memory.events.oom_kill > 0",
            ),
            rule(
                "e",
                "system.memory.available < 256M or thermal.cpu.temp > 90C",
            ),
            rule(
                "f",
                "running(cyclictest) and exists(realtime) and realtime.pids.current > 10",
            ),
            rule(
                "g",
                "realtime.cgroup.populated == 1 and realtime.memory.swap.current > 0",
            ),
        ];
        let n = sampled_needs(&rules);
        let group = |g: &str| Target::Group(g.into());
        assert_eq!(
            n.psi_avg,
            HashSet::from([(group("inference"), Resource::Memory)])
        );
        let cpu = StallKey {
            target: group("inference"),
            resource: Resource::Cpu,
            stall: Stall::Some,
        };
        let io = StallKey {
            target: Target::System,
            resource: Resource::Io,
            stall: Stall::Full,
        };
        assert_eq!(
            n.psi_stall,
            HashMap::from([
                (cpu.clone(), Duration::from_secs(2)),
                (io.clone(), Duration::from_millis(500))
            ])
        );
        assert_eq!(n.psi_triggers.len(), 3);
        assert!(n.psi_triggers.contains(&(
            cpu,
            Duration::from_millis(100),
            Duration::from_secs(1)
        )));
        assert_eq!(n.memory_current, BTreeSet::from(["vision".to_string()]));
        assert_eq!(n.memory_events, BTreeSet::from(["vision".to_string()]));
        assert_eq!(n.swap_current, BTreeSet::from(["realtime".to_string()]));
        assert_eq!(n.pids_current, BTreeSet::from(["realtime".to_string()]));
        assert_eq!(n.populated, BTreeSet::from(["realtime".to_string()]));
        assert!(n.memory_available);
        assert_eq!(n.thermal_zones, BTreeSet::from(["cpu".to_string()]));
        assert_eq!(n.running, BTreeSet::from(["cyclictest".to_string()]));
        assert_eq!(n.exists, BTreeSet::from(["realtime".to_string()]));
        assert!(sampled_needs(&[]).is_empty());
        assert!(!n.is_empty());
    }

    /// A thousand rules evaluate well within a tick even in a debug build.
    #[test]
    fn thousand_rules_are_cheap() {
        let mut m = Fake::default();
        m.psi
            .insert(("g".into(), Resource::Memory, Stall::Some, Avg::Avg10), 5.0);
        m.mem.insert("g".into(), G);
        m.events.insert(("g".into(), MemEvent::High), 0);
        let e = expr(
            "g.memory.some.avg10 > 10% or (g.memory.current > 2G and g.memory.events.high > 0)",
        );
        // A thousand rules on one counter: one history, one read per step.
        let mut ev = Evaluator::new();
        for _ in 0..1000 {
            ev.evaluate(&e, T0, TICK, &m);
        }
        let start = std::time::Instant::now();
        for _ in 0..1000 {
            assert!(!ev.evaluate(&e, secs(0.5), TICK, &m).value);
        }
        // Generous: the release target is < 1ms; this guards regressions
        // by orders of magnitude only.
        assert!(
            start.elapsed() < Duration::from_millis(200),
            "{:?}",
            start.elapsed()
        );
    }

    proptest! {
        /// `not` negates, `and`/`or` are boolean, whatever is available.
        #[test]
        fn boolean_structure(a in 0u64..4, b in 0u64..4, have_a in any::<bool>(), have_b in any::<bool>()) {
            let mut m = Fake::default();
            if have_a { m.pids.insert("a".into(), a); }
            if have_b { m.pids.insert("b".into(), b); }
            let pa = have_a && a > 1;
            let pb = have_b && b > 1;
            prop_assert_eq!(eval(&m, "a.pids.current > 1 and b.pids.current > 1"), pa && pb);
            prop_assert_eq!(eval(&m, "a.pids.current > 1 or b.pids.current > 1"), pa || pb);
            prop_assert_eq!(eval(&m, "not (a.pids.current > 1 or b.pids.current > 1)"), !(pa || pb));
            prop_assert_eq!(eval(&m, "not a.pids.current > 1 and b.pids.current > 1"), !pa && pb);
            let e = expr("a.pids.current > 1 or b.pids.current > 1");
            let r = Evaluator::new().evaluate(&e, T0, TICK, &m);
            if r.value {
                let t = r.trigger.expect("a true `or` has a trigger");
                let want = if pa { "a.pids.current" } else { "b.pids.current" };
                prop_assert_eq!(t.metric(), want);
            }
        }

        /// With the daemon evaluating at every change of the counter (its
        /// inotify wake-up), the count is exactly the events within
        /// `(now - W, now]`, whatever other evaluations happen in between:
        /// two schedules agree at every time both evaluate.
        #[test]
        fn event_count_is_independent_of_evaluation_rate(
            // Event times on a 50 ms grid (wider than a 10 s window's
            // bucket, so no merge blurs the count), several per instant.
            event_slots in proptest::collection::vec(0u64..600, 0..40),
            extra_a in proptest::collection::vec(0u64..30_000, 0..60),
            extra_b in proptest::collection::vec(0u64..30_000, 0..300),
            checks in proptest::collection::vec(0u64..30_000, 1..20),
            base in 0u64..1_000_000,
        ) {
            let events: Vec<Time> = event_slots.iter().map(|s| ms(50 * s + 1)).collect();
            let schedule = |extra: &[u64]| {
                let mut v: Vec<Time> = vec![T0];
                v.extend(&events);
                v.extend(extra.iter().map(|&x| ms(x)));
                v.extend(checks.iter().map(|&x| ms(x)));
                v.sort();
                v.dedup();
                v
            };
            let rule = "g.memory.events.high > 3/10s";
            let a = simulate(rule, TICK, base, &events, &schedule(&extra_a));
            let b = simulate(rule, TICK, base, &events, &schedule(&extra_b));
            for &c in &checks {
                let now = ms(c);
                let exact = events
                    .iter()
                    .filter(|&&t| t <= now && now.checked_sub(Duration::from_secs(10)).is_none_or(|s| t > s))
                    .count() as u64;
                prop_assert_eq!(at(&a, now), (Some(exact), exact > 3));
                prop_assert_eq!(at(&b, now), (Some(exact), exact > 3));
            }
        }

        /// Whatever the counter does (rises, falls, disappears), nothing
        /// panics, the history stays bounded and a count is never more than
        /// the growth since the last restart.
        #[test]
        fn arbitrary_counter_sequences(
            // Time advances at each evaluation: a counter is read once per instant.
            steps in proptest::collection::vec((1u64..5_000, prop::option::of(0u64..50)), 1..200),
        ) {
            let e = expr("g.memory.events.oom > 0/1s or g.memory.events.oom > 0");
            let mut ev = Evaluator::new();
            let mut m = Fake::default();
            let mut now = T0;
            let mut since_restart: Option<(u64, u64)> = None; // (baseline, last)
            for (dt, v) in steps {
                now += ms(dt);
                match v {
                    Some(v) => { m.events.insert(("g".into(), MemEvent::Oom), v); }
                    None => { m.events.clear(); }
                }
                since_restart = match (since_restart, v) {
                    (Some((b, last)), Some(v)) if v >= last => Some((b, v)),
                    (_, Some(v)) => Some((v, v)),
                    (_, None) => None,
                };
                let r = ev.evaluate(&e, now, TICK, &m);
                let c = match r.trigger.map(|t| t.value) {
                    Some(Measured::Count(c)) => Some(c),
                    _ => None,
                };
                prop_assert_eq!(c.is_some(), v.is_some());
                if let (Some(c), Some((b, last))) = (c, since_restart) {
                    prop_assert!(c <= last - b);
                }
                prop_assert!(ev.samples_held() <= MAX_SAMPLES);
            }
        }
    }
}
