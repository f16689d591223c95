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
//! - `G.memory.events.E` is the number of new events since the rule was last
//!   evaluated. The first value the rule sees is its baseline (0 new events):
//!   events from before the daemon started watching never fire a rule. A
//!   counter that goes down (group recreated) takes the new value as its
//!   baseline; so does a counter that was unavailable (group missing) and
//!   comes back. Every event counter a rule uses is read at each evaluation
//!   of that rule, even where `and`/`or` do not need the comparison, so
//!   "since last evaluated" holds whatever the other operands did. Two
//!   comparisons of one rule on the same counter see the same number.
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
//!   no new event counter); trees nested deeper than [`MAX_EVAL_DEPTH`]
//!   (never produced by the parser, which limits an expression to 4096
//!   characters) evaluate to false rather than overflow the stack.

use super::stall::StallKey;
use crate::policy::expr::{
    Avg, Compare, Expr, ExprKind, MemEvent, Metric, Resource, Stall, Target, Threshold,
};
use crate::policy::model::Rule;
use crate::policy::units::{Size, Temperature};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::time::Duration;

/// Deepest expression tree evaluated; deeper subtrees are false.
pub const MAX_EVAL_DEPTH: usize = 1024;

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
    fn exists(&self, group: &str) -> bool;
}

/// A measured value, in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measured {
    Percent(f64),
    Stall(Duration),
    Bytes(u64),
    Count(u64),
    /// `cgroup.populated`, `running()`, `exists()`: printed as 1 or 0.
    Flag(bool),
    Millidegrees(i64),
}

impl fmt::Display for Measured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Measured::Percent(p) => write!(f, "{p:.2}%"),
            Measured::Stall(d) => write!(f, "{}", crate::policy::units::Duration(*d)),
            Measured::Bytes(b) | Measured::Count(b) => write!(f, "{b}"),
            Measured::Flag(b) => write!(f, "{}", u8::from(*b)),
            Measured::Millidegrees(m) => write!(f, "{}", Temperature { millidegrees: *m }),
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

    /// `{value}`: the measured value.
    pub fn value(&self) -> String {
        self.value.to_string()
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
        }
    }
}

impl fmt::Display for Unavailable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.metric(), self.reason)
    }
}

const UNAVAILABLE: &str = "not available";
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

/// One `memory.events` counter of one rule.
#[derive(Debug, Clone)]
struct Counter {
    group: String,
    event: MemEvent,
    /// The value at the rule's previous evaluation; `None` before the first
    /// observation (or after the counter was unavailable).
    base: Option<u64>,
    /// New events at the current evaluation; `None` if unavailable.
    delta: Option<u64>,
    /// The evaluation `delta` belongs to.
    generation: u64,
}

#[derive(Debug, Clone, Default)]
struct RuleCounters {
    generation: u64,
    counters: Vec<Counter>,
}

impl RuleCounters {
    fn delta(&self, group: &str, event: MemEvent) -> Option<u64> {
        self.counters
            .iter()
            .find(|c| c.event == event && c.group == group)?
            .delta
    }
}

/// Evaluates conditions and keeps each rule's event-counter baselines.
#[derive(Debug, Clone, Default)]
pub struct Evaluator {
    /// Keyed by rule name, so a reload that reorders rules keeps baselines.
    rules: HashMap<String, RuleCounters>,
}

impl Evaluator {
    pub fn new() -> Self {
        Evaluator::default()
    }

    /// Evaluates a policy rule's `when:`.
    pub fn evaluate_rule<'e, M: Metrics + ?Sized>(
        &mut self,
        rule: &'e Rule,
        metrics: &M,
    ) -> Evaluation<'e> {
        self.evaluate(&rule.name, &rule.when, metrics)
    }

    /// Evaluates `expr` as the condition of the rule called `rule`.
    pub fn evaluate<'e, M: Metrics + ?Sized>(
        &mut self,
        rule: &str,
        expr: &'e Expr,
        metrics: &M,
    ) -> Evaluation<'e> {
        let counters = if has_events(expr, 0) {
            if !self.rules.contains_key(rule) {
                self.rules.insert(rule.to_string(), RuleCounters::default());
            }
            self.rules.get_mut(rule).map(|rc| {
                rc.generation = rc.generation.wrapping_add(1);
                refresh(expr, rc, metrics, 0);
                &*rc
            })
        } else {
            None
        };
        let mut ctx = Ctx {
            metrics,
            counters,
            unavailable: Vec::new(),
        };
        let (value, trigger) = ctx.eval(expr, 0);
        Evaluation {
            value,
            trigger,
            unavailable: ctx.unavailable,
        }
    }

    /// Forgets the counters of rules `keep` rejects (after a reload).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.rules.retain(|name, _| keep(name));
    }

    /// Forgets one rule's counters: its next evaluation re-baselines.
    pub fn forget(&mut self, rule: &str) {
        self.rules.remove(rule);
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
        ExprKind::Running(_) | ExprKind::Exists(_) => false,
    }
}

/// Reads every event counter of the tree once for this evaluation.
fn refresh<M: Metrics + ?Sized>(expr: &Expr, rc: &mut RuleCounters, m: &M, depth: usize) {
    if depth > MAX_EVAL_DEPTH {
        return;
    }
    match &expr.kind {
        ExprKind::Or(a, b) | ExprKind::And(a, b) => {
            refresh(a, rc, m, depth + 1);
            refresh(b, rc, m, depth + 1);
        }
        ExprKind::Not(a) => refresh(a, rc, m, depth + 1),
        ExprKind::Compare(Compare {
            metric: Metric::MemoryEvent { group, event },
            ..
        }) => {
            let generation = rc.generation;
            let idx = match rc
                .counters
                .iter()
                .position(|c| c.event == *event && c.group == group.value)
            {
                Some(i) => i,
                None => {
                    rc.counters.push(Counter {
                        group: group.value.clone(),
                        event: *event,
                        base: None,
                        delta: None,
                        generation: generation.wrapping_sub(1),
                    });
                    rc.counters.len() - 1
                }
            };
            let Some(c) = rc.counters.get_mut(idx) else {
                return;
            };
            if c.generation == generation {
                return;
            }
            c.generation = generation;
            match m.memory_event(&group.value, *event) {
                None => {
                    c.base = None;
                    c.delta = None;
                }
                Some(v) => {
                    c.delta = Some(match c.base {
                        Some(b) if v >= b => v - b,
                        // First observation, or the counter went down.
                        _ => 0,
                    });
                    c.base = Some(v);
                }
            }
        }
        ExprKind::Compare(_) | ExprKind::Running(_) | ExprKind::Exists(_) => {}
    }
}

struct Ctx<'m, 'e, M: Metrics + ?Sized> {
    metrics: &'m M,
    counters: Option<&'m RuleCounters>,
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
            (Metric::MemoryEvent { group, event }, Threshold::Events { count: n, .. }) => {
                let v = self
                    .counters
                    .and_then(|rc| rc.delta(&group.value, *event))
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
}

impl Needs {
    /// Adds what one condition reads.
    pub fn add_expr(&mut self, expr: &Expr) {
        // Explicit stack: hand-built trees have no depth limit.
        let mut stack = vec![expr];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Or(a, b) | ExprKind::And(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
                ExprKind::Not(a) => stack.push(a),
                ExprKind::Compare(c) => self.add_compare(c),
                ExprKind::Running(p) => {
                    self.running.insert(p.clone());
                }
                ExprKind::Exists(g) => {
                    self.exists.insert(g.value.clone());
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
        Evaluator::new().evaluate("r", &e, m).value
    }

    const G: u64 = 1 << 30;

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
        let ev = Evaluator::new().evaluate("r", &e, &m);
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
        let ev = Evaluator::new().evaluate("r", &e, &m);
        assert!(!ev.value);
        let got: Vec<String> = ev.unavailable.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            vec![
                "ghost.memory.current: not available",
                "thermal.x.temp: not available"
            ]
        );
        // Guarded by exists(): nothing to report.
        let e = expr("exists(ghost) and ghost.memory.current > 1G");
        let ev = Evaluator::new().evaluate("r", &e, &m);
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
        let r = ev.evaluate("r", &e, &m);
        let t = r.trigger.expect("trigger");
        assert!(r.value);
        assert_eq!(
            (t.metric(), t.value(), t.threshold()),
            ("b.memory.current".into(), (7 * G).to_string(), "6G".into())
        );
        assert_eq!(t.group(), Some("b"));

        let e = expr("a.memory.some.avg10 > 10% and b.memory.current > 6G");
        let t = ev.evaluate("r", &e, &m).trigger.expect("trigger");
        assert_eq!(
            (t.metric(), t.value(), t.threshold()),
            ("a.memory.some.avg10".into(), "42.00%".into(), "10%".into())
        );

        let e = expr("not (a.memory.current > 6G)");
        let r = ev.evaluate("r", &e, &m);
        assert!(r.value);
        assert_eq!(
            r.trigger.map(|t| t.metric()),
            Some("a.memory.current".into())
        );

        m.running.push("cyclictest".into());
        let e = expr("running(cyclictest)");
        let t = ev.evaluate("r", &e, &m).trigger.expect("trigger");
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
    fn events_count_from_first_observation() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::High), 1000);
        let e = expr("g.memory.events.high > 0");
        let mut ev = Evaluator::new();
        // Events from before the daemon started never fire.
        assert!(!ev.evaluate("r", &e, &m).value);
        assert!(!ev.evaluate("r", &e, &m).value);
        m.events.insert(("g".into(), MemEvent::High), 1003);
        let r = ev.evaluate("r", &e, &m);
        assert!(r.value);
        assert_eq!(r.trigger.map(|t| t.value()), Some("3".into()));
        // Only new events since the previous evaluation.
        assert!(!ev.evaluate("r", &e, &m).value);
    }

    #[test]
    fn events_are_per_rule() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::OomKill), 0);
        let e = expr("g.memory.events.oom_kill >= 1");
        let mut ev = Evaluator::new();
        ev.evaluate("a", &e, &m);
        ev.evaluate("b", &e, &m);
        m.events.insert(("g".into(), MemEvent::OomKill), 2);
        // Both rules see the new events, each once.
        assert!(ev.evaluate("a", &e, &m).value);
        assert!(ev.evaluate("b", &e, &m).value);
        assert!(!ev.evaluate("a", &e, &m).value);
        // A rule first evaluated now starts from the current value.
        assert!(!ev.evaluate("c", &e, &m).value);
    }

    #[test]
    fn event_counter_going_down_rebaselines() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::Max), 50);
        let e = expr("g.memory.events.max > 0");
        let mut ev = Evaluator::new();
        ev.evaluate("r", &e, &m);
        m.events.insert(("g".into(), MemEvent::Max), 2);
        assert!(!ev.evaluate("r", &e, &m).value);
        m.events.insert(("g".into(), MemEvent::Max), 3);
        assert!(ev.evaluate("r", &e, &m).value);
    }

    #[test]
    fn event_counter_unavailable_then_back_rebaselines() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::Oom), 5);
        let e = expr("g.memory.events.oom > 0");
        let mut ev = Evaluator::new();
        ev.evaluate("r", &e, &m);
        m.events.clear();
        let r = ev.evaluate("r", &e, &m);
        assert!(!r.value);
        assert_eq!(r.unavailable.len(), 1);
        m.events.insert(("g".into(), MemEvent::Oom), 9);
        assert!(!ev.evaluate("r", &e, &m).value);
        m.events.insert(("g".into(), MemEvent::Oom), 10);
        assert!(ev.evaluate("r", &e, &m).value);
    }

    #[test]
    fn events_read_even_when_short_circuited() {
        let mut m = Fake::default();
        m.running.push("x".into());
        m.events.insert(("g".into(), MemEvent::High), 0);
        let e = expr("running(x) or g.memory.events.high > 0");
        let mut ev = Evaluator::new();
        ev.evaluate("r", &e, &m);
        m.events.insert(("g".into(), MemEvent::High), 4);
        // `or` short-circuits, but the counter is still read now...
        assert!(ev.evaluate("r", &e, &m).value);
        m.running.clear();
        // ...so these 4 events were consumed at that evaluation.
        assert!(!ev.evaluate("r", &e, &m).value);
    }

    #[test]
    fn same_counter_twice_in_a_rule_sees_one_delta() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::High), 0);
        let e = expr("g.memory.events.high > 2 and not g.memory.events.high > 10");
        let mut ev = Evaluator::new();
        ev.evaluate("r", &e, &m);
        m.events.insert(("g".into(), MemEvent::High), 5);
        m.event_reads.set(0);
        assert!(ev.evaluate("r", &e, &m).value);
        assert_eq!(m.event_reads.get(), 1);
    }

    #[test]
    fn retain_and_forget_reset_baselines() {
        let mut m = Fake::default();
        m.events.insert(("g".into(), MemEvent::High), 0);
        let e = expr("g.memory.events.high > 0");
        let mut ev = Evaluator::new();
        ev.evaluate("keep", &e, &m);
        ev.evaluate("drop", &e, &m);
        ev.retain(|name| name == "keep");
        m.events.insert(("g".into(), MemEvent::High), 1);
        assert!(ev.evaluate("keep", &e, &m).value);
        assert!(!ev.evaluate("drop", &e, &m).value);
        ev.forget("keep");
        m.events.insert(("g".into(), MemEvent::High), 2);
        assert!(!ev.evaluate("keep", &e, &m).value);
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
        let r = Evaluator::new().evaluate("r", &e, &m);
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
        assert!(!Evaluator::new().evaluate("r", &e, &m).value);
        m.running.push("a".into());
        assert!(Evaluator::new().evaluate("r", &e, &m).value);
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
        let names: Vec<String> = (0..1000).map(|i| format!("r{i}")).collect();
        let mut ev = Evaluator::new();
        for n in &names {
            ev.evaluate(n, &e, &m);
        }
        let start = std::time::Instant::now();
        for n in &names {
            assert!(!ev.evaluate(n, &e, &m).value);
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
            let r = Evaluator::new().evaluate("r", &e, &m);
            if r.value {
                let t = r.trigger.expect("a true `or` has a trigger");
                let want = if pa { "a.pids.current" } else { "b.pids.current" };
                prop_assert_eq!(t.metric(), want);
            }
        }

        /// The delta reported is exactly the growth since the previous
        /// evaluation; decreases re-baseline.
        #[test]
        fn event_deltas(values in proptest::collection::vec(0u64..100, 1..30)) {
            let e = expr("g.memory.events.high >= 0");
            let mut ev = Evaluator::new();
            let mut m = Fake::default();
            let mut prev: Option<u64> = None;
            for v in values {
                m.events.insert(("g".into(), MemEvent::High), v);
                let r = ev.evaluate("r", &e, &m);
                let want = match prev { Some(p) if v >= p => v - p, _ => 0 };
                prop_assert_eq!(r.trigger.map(|t| t.value), Some(Measured::Count(want)));
                prev = Some(v);
            }
        }
    }
}
