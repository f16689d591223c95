//! The rule language: `when:` conditions and rule actions.
//!
//! This module owns the grammar, the syntax tree and its type checking:
//! which metrics exist, which threshold unit each metric compares against,
//! and the text form of `set`/`raise`/`lower`/`hook`/`compact memory`
//! actions (knob names and values are delegated to [`crate::knobs`]).
//! Whether a referenced group or hook exists is checked by the caller
//! (see [`referenced_groups`]), as is which actions may appear in `while:`
//! ([`Action::allowed_in_while`]).
//!
//! ```text
//! expr    := term ("or" term)*
//! term    := factor ("and" factor)*
//! factor  := "not" factor | "(" expr ")" | compare | call
//! compare := METRIC OP VALUE        OP: > >= < <= == !=
//! call    := running(NAME) | exists(GROUP)
//! ```
//!
//! `VALUE` is typed by the metric; two metrics take a `/WINDOW`: stall time
//! (`G.memory.some > 150ms/1s`) and event counts
//! (`G.memory.events.high > 5/10s`, or bare `> 5`).
//!
//! Positions ([`Span`], [`ParseError::pos`]) are character offsets (not
//! bytes) into the parsed string, so callers can turn them into columns.
//! Equality (`==`) on syntax nodes ignores spans: two trees are equal when
//! they mean the same thing, wherever they were written.
//!
//! Decisions where the SPEC is silent:
//! - `host` is the whole machine: its pressure (`/proc/pressure`),
//!   `host.memory.available` and the memory telemetry (`host.vmstat.*`,
//!   `host.meminfo.*`, `host.fragmentation.*`). It has no group-only
//!   metrics (`memory.current`, `memory.events.*`, ...). `system` is an
//!   ordinary group name; a machine-only metric written under `system`
//!   is refused with a did-you-mean for `host`.
//! - `thermal.ZONE.temp` is always a thermal metric (ZONE may contain `-`,
//!   `_` and `.`); any other metric starting with `thermal.` names a group.
//! - A stall-time condition (`G.memory.some > 150ms/1s`) accepts only `>`
//!   and `>=`: it is served by a kernel PSI trigger, which can only report
//!   "stall exceeded the amount". Write `not (...)` for the opposite. Amount
//!   and window must be whole microseconds, 0 < amount <= window, and the
//!   window within 500ms..=10s, as the kernel requires.
//! - An event-count condition (`G.memory.events.E > N/WINDOW`, "more than N
//!   new events within the sliding WINDOW") accepts only `>` and `>=`, bare
//!   or windowed alike: a count of events in a window is evidence that
//!   something happened, and its opposite (`<`, `<=`: "hardly anything
//!   happened") is written `not (G.memory.events.E > N/WINDOW)`; `==`/`!=`
//!   on a count that rises and decays as the window slides would hold for
//!   moments that depend on when the daemon happens to look. N is a whole
//!   number; WINDOW uses the duration syntax of stall windows, is a whole
//!   number of milliseconds and lies within 1s..=1h (a window shorter than
//!   the sampling would count nothing reliably; longer than an hour keeps
//!   history a supervisor has no use for). The bare form `> N` keeps no
//!   window in the tree ([`Threshold::Events`] with `window: None`): it
//!   means `settings.tick`, which the evaluator is given, and it prints
//!   bare, so print/parse round-trips. A `/WINDOW` on any other metric is
//!   an error pointing at the `/`.
//! - Byte thresholds must be byte counts (`max` is rejected); pid counts
//!   are whole numbers; `cgroup.populated` compares with 0 or 1.
//! - `running(NAME)` takes a glob, bare or quoted with `'` or `"` (no
//!   escapes). The kernel truncates comm to 15 characters, so a name without
//!   wildcards longer than that could never match and is rejected; patterns
//!   are limited to 64 characters.
//! - Expressions are limited to 4096 characters and 64 nested `(`/`not`.
//! - `raise`/`lower` need a positive step (`by 0` or `by max` is an error)
//!   and `lower ... down to max` is an error.

use crate::knobs::{Knob, KnobValue};
use crate::units::{Duration, Percent, Size, Temperature};
use std::cmp::Ordering;
use std::fmt;

/// Longest expression or action accepted, in characters.
pub(crate) const MAX_CHARS: usize = 4096;
/// Deepest nesting of `(` and `not` accepted.
pub(crate) const MAX_DEPTH: usize = 64;
/// Longest `running(...)` pattern accepted, in characters.
const MAX_GLOB_CHARS: usize = 64;
/// The kernel's comm length (TASK_COMM_LEN - 1).
const COMM_CHARS: usize = 15;

/// A range of character offsets `start..end` in the parsed string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Span {
    pub(crate) fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
}

/// A value with the place it was written. Equality ignores the span.
#[derive(Debug, Clone)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T> Spanned<T> {
    pub(crate) fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

/// Why an expression or action does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at character {pos})")]
pub(crate) struct ParseError {
    /// Character offset of the offending token.
    pub(crate) pos: usize,
    /// What was expected and what was found, with a hint where one is obvious.
    pub(crate) message: String,
}

fn error(pos: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        pos,
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------
// Syntax tree

/// A `when:` condition node. Equality ignores spans.
#[derive(Debug, Clone)]
pub(crate) struct Expr {
    pub(crate) kind: ExprKind,
    pub(crate) span: Span,
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExprKind {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare(Compare),
    /// `running(GLOB)`: a live process whose comm matches the glob.
    Running(String),
    /// `exists(GROUP)`.
    Exists(Spanned<String>),
    /// `throttled(POLICY)`: the policy's ceiling is
    /// clipped below what was asked, or a cooling device bound to it is
    /// above 0.
    Throttled(Spanned<String>),
}

/// `METRIC OP VALUE`. Equality ignores spans.
#[derive(Debug, Clone)]
pub(crate) struct Compare {
    pub(crate) metric: Metric,
    pub(crate) op: CmpOp,
    pub(crate) value: Threshold,
    /// Where the value is written: `cgwarden replay`'s threshold sweep
    /// rewrites it (built with the report feature).
    #[cfg_attr(
        not(any(test, feature = "report")),
        expect(dead_code, reason = "read by replay's sweep and the tests only")
    )]
    pub(crate) value_span: Span,
}

impl PartialEq for Compare {
    fn eq(&self, other: &Self) -> bool {
        self.metric == other.metric && self.op == other.op && self.value == other.value
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CmpOp {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

impl CmpOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }

    /// Whether `measured OP threshold` holds, given `measured.cmp(threshold)`.
    pub(crate) fn holds(self, ordering: Ordering) -> bool {
        match self {
            CmpOp::Gt => ordering == Ordering::Greater,
            CmpOp::Ge => ordering != Ordering::Less,
            CmpOp::Lt => ordering == Ordering::Less,
            CmpOp::Le => ordering != Ordering::Greater,
            CmpOp::Eq => ordering == Ordering::Equal,
            CmpOp::Ne => ordering != Ordering::Equal,
        }
    }
}

/// Whose PSI a pressure metric reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// The whole machine (`/proc/pressure/*`), `host` in rules.
    Host,
    Group(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Host => f.write_str(crate::knobs::MACHINE),
            Target::Group(g) => f.write_str(g),
        }
    }
}

/// Defines a keyword enum with its policy spelling, so parsing and printing
/// share one table.
macro_rules! keyword_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub(crate) const ALL: &'static [$name] = &[$($name::$variant),+];

            pub(crate) fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            fn from_name(text: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == text)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

keyword_enum!(
    /// A PSI resource.
    Resource { Cpu => "cpu", Memory => "memory", Io => "io" }
);
keyword_enum!(
    /// A PSI line.
    Stall { Some => "some", Full => "full" }
);
keyword_enum!(
    /// A PSI average window.
    Avg { Avg10 => "avg10", Avg60 => "avg60", Avg300 => "avg300" }
);
keyword_enum!(
    /// A `memory.events` counter.
    MemEvent {
        High => "high",
        Max => "max",
        Oom => "oom",
        OomKill => "oom_kill",
        OomGroupKill => "oom_group_kill",
    }
);

/// What a condition measures. Equality ignores the spans inside.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Metric {
    /// `G.cpu.some.avg10`: a PSI average, percent.
    PsiAvg {
        target: Spanned<Target>,
        resource: Resource,
        stall: Stall,
        avg: Avg,
    },
    /// `G.memory.some > 150ms/1s`: stall time within a window.
    PsiStall {
        target: Spanned<Target>,
        resource: Resource,
        stall: Stall,
    },
    /// `G.memory.current`, bytes.
    MemoryCurrent { group: Spanned<String> },
    /// `G.memory.swap.current`, bytes.
    SwapCurrent { group: Spanned<String> },
    /// `G.memory.events.EVENT`: new events within a sliding window (the
    /// threshold is [`Threshold::Events`]).
    MemoryEvent {
        group: Spanned<String>,
        event: MemEvent,
    },
    /// `G.pids.current`.
    PidsCurrent { group: Spanned<String> },
    /// `G.cgroup.populated`, 0 or 1.
    Populated { group: Spanned<String> },
    /// `host.memory.available`: MemAvailable, bytes.
    MemoryAvailable,
    /// `thermal.ZONE.temp`; ZONE is the zone's `type`.
    ThermalTemp { zone: Spanned<String> },
    /// `thermal.ZONE.trip.N`: trip point N's temperature.
    ThermalTrip { zone: Spanned<String>, trip: u32 },
    /// `cooling.NAME.state`: a cooling device's `cur_state`, NAME its
    /// `type`.
    CoolingState { device: Spanned<String> },
    /// `cpufreq.POLICY.limit` (the ceiling the kernel lets the policy reach
    /// now) or `cpufreq.POLICY.cur`, kHz.
    CpufreqFreq {
        policy: Spanned<String>,
        limit: bool,
    },
    /// Memory telemetry: vmstat rates, meminfo, zram mm_stat,
    /// the fragmentation index ([`mem`]).
    Mem(MemMetric),
    /// `kpi.NAME.STAT`, a KPI's statistic over a trailing window
    /// (the threshold is [`Threshold::Kpi`]).
    Kpi { name: String, stat: kpi::Stat },
}

impl Metric {
    /// The group this metric reads, with where it was written.
    pub(crate) fn group(&self) -> Option<(&str, Span)> {
        match self {
            Metric::PsiAvg { target, .. } | Metric::PsiStall { target, .. } => {
                match &target.value {
                    Target::Group(g) => Some((g, target.span)),
                    Target::Host => None,
                }
            }
            Metric::MemoryCurrent { group }
            | Metric::SwapCurrent { group }
            | Metric::MemoryEvent { group, .. }
            | Metric::PidsCurrent { group }
            | Metric::Populated { group } => Some((&group.value, group.span)),
            Metric::MemoryAvailable
            | Metric::ThermalTemp { .. }
            | Metric::ThermalTrip { .. }
            | Metric::CoolingState { .. }
            | Metric::CpufreqFreq { .. }
            | Metric::Mem(_)
            | Metric::Kpi { .. } => None,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::PsiAvg {
                target,
                resource,
                stall,
                avg,
            } => write!(f, "{}.{resource}.{stall}.{avg}", target.value),
            Metric::PsiStall {
                target,
                resource,
                stall,
            } => write!(f, "{}.{resource}.{stall}", target.value),
            Metric::MemoryCurrent { group } => write!(f, "{}.memory.current", group.value),
            Metric::SwapCurrent { group } => write!(f, "{}.memory.swap.current", group.value),
            Metric::MemoryEvent { group, event } => {
                write!(f, "{}.memory.events.{event}", group.value)
            }
            Metric::PidsCurrent { group } => write!(f, "{}.pids.current", group.value),
            Metric::Populated { group } => write!(f, "{}.cgroup.populated", group.value),
            Metric::MemoryAvailable => f.write_str("host.memory.available"),
            Metric::ThermalTemp { zone } => write!(f, "thermal.{}.temp", zone.value),
            Metric::ThermalTrip { zone, trip } => write!(f, "thermal.{}.trip.{trip}", zone.value),
            Metric::CoolingState { device } => write!(f, "cooling.{}.state", device.value),
            Metric::CpufreqFreq { policy, limit } => write!(
                f,
                "cpufreq.{}.{}",
                policy.value,
                if *limit { "limit" } else { "cur" }
            ),
            Metric::Mem(m) => write!(f, "{m}"),
            Metric::Kpi { name, stat } => write!(f, "kpi.{name}.{stat}"),
        }
    }
}

/// The right-hand side of a comparison, typed by its metric.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Threshold {
    Percent(Percent),
    /// Bytes; never `max`.
    Size(Size),
    Count(u64),
    StallTime {
        amount: Duration,
        window: Duration,
    },
    /// `N/WINDOW` of a `memory.events` condition: more than `count` new
    /// events within `window`; `None` is the bare form `N`, whose window is
    /// `settings.tick`.
    Events {
        count: u64,
        window: Option<Duration>,
    },
    Temperature(Temperature),
    /// `cpufreq.POLICY.limit|cur`.
    Frequency(crate::units::Frequency),
    /// A plain non-negative number: a vmstat rate per second, a
    /// fragmentation index.
    Number(f64),
    /// A KPI threshold, `value` in the KPI's unit (seconds for a
    /// duration, as `text` was written), over `window` (`None`: the
    /// default, [`kpi::DEFAULT_WINDOW`]).
    Kpi {
        value: f64,
        text: String,
        window: Option<Duration>,
    },
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Percent(p) => write!(f, "{p}"),
            Threshold::Frequency(fr) => write!(f, "{fr}"),
            Threshold::Size(s) => write!(f, "{s}"),
            Threshold::Count(n) => write!(f, "{n}"),
            Threshold::StallTime { amount, window } => write!(f, "{amount}/{window}"),
            Threshold::Events {
                count,
                window: None,
            } => write!(f, "{count}"),
            Threshold::Events {
                count,
                window: Some(window),
            } => write!(f, "{count}/{window}"),
            Threshold::Temperature(t) => write!(f, "{t}"),
            Threshold::Number(n) => write!(f, "{n}"),
            Threshold::Kpi { text, window, .. } => match window {
                Some(w) => write!(f, "{text}/{w}"),
                None => f.write_str(text),
            },
        }
    }
}

impl fmt::Display for Compare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.metric, self.op.symbol(), self.value)
    }
}

/// Binding strength, for printing only the parentheses that are needed.
fn precedence(kind: &ExprKind) -> u8 {
    match kind {
        ExprKind::Or(..) => 1,
        ExprKind::And(..) => 2,
        _ => 3,
    }
}

impl Expr {
    /// The leaves of the condition — comparisons and the `running`,
    /// `exists`, `throttled` predicates — in source order, through
    /// `and`/`or`/`not`. An explicit stack rather than recursion: trees
    /// built by hand have no depth limit. Every reader of a condition's
    /// inputs walks it here.
    pub(crate) fn leaves(&self) -> Vec<&Expr> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match &e.kind {
                // Right first: the left one is popped next.
                ExprKind::Or(l, r) | ExprKind::And(l, r) => {
                    stack.push(r);
                    stack.push(l);
                }
                ExprKind::Not(inner) => stack.push(inner),
                _ => out.push(e),
            }
        }
        out
    }

    /// Prints `self`, parenthesised if it binds weaker than `min`.
    fn fmt_at(&self, f: &mut fmt::Formatter<'_>, min: u8) -> fmt::Result {
        if precedence(&self.kind) < min {
            write!(f, "({self})")
        } else {
            write!(f, "{self}")
        }
    }
}

impl fmt::Display for Expr {
    /// Minimal parentheses; `and`/`or` chains associate to the left, so a
    /// right operand of the same operator is parenthesised.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Or(l, r) => {
                l.fmt_at(f, 1)?;
                f.write_str(" or ")?;
                r.fmt_at(f, 2)
            }
            ExprKind::And(l, r) => {
                l.fmt_at(f, 2)?;
                f.write_str(" and ")?;
                r.fmt_at(f, 3)
            }
            ExprKind::Not(e) => {
                f.write_str("not ")?;
                e.fmt_at(f, 3)
            }
            ExprKind::Compare(c) => write!(f, "{c}"),
            ExprKind::Running(glob) => {
                if glob.chars().all(is_bare_glob_char) && !glob.is_empty() {
                    write!(f, "running({glob})")
                } else if glob.contains('"') {
                    write!(f, "running('{glob}')")
                } else {
                    write!(f, "running(\"{glob}\")")
                }
            }
            ExprKind::Exists(g) => write!(f, "exists({})", g.value),
            ExprKind::Throttled(p) => write!(f, "throttled({})", p.value),
        }
    }
}

/// Every group a condition names, with where, in source order (for the
/// caller's "unknown group" check). PSI of `host` is the whole machine
/// and not listed.
pub(crate) fn referenced_groups(expr: &Expr) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    for e in expr.leaves() {
        match &e.kind {
            ExprKind::Compare(c) => {
                if let Some((g, span)) = c.metric.group() {
                    out.push((g.to_string(), span));
                }
            }
            ExprKind::Exists(g) => out.push((g.value.clone(), g.span)),
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Actions

/// A rule action.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// `set KNOB = VALUE`.
    Set { knob: Knob, value: KnobValue },
    /// `raise KNOB by DELTA up to LIMIT`.
    Raise {
        knob: Knob,
        by: KnobValue,
        limit: KnobValue,
    },
    /// `lower KNOB by DELTA down to LIMIT`.
    Lower {
        knob: Knob,
        by: KnobValue,
        limit: KnobValue,
    },
    /// `hook NAME`.
    Hook(String),
    /// `compact memory`.
    CompactMemory,
    /// `cap KNOB at VALUE`: a ceiling that beats every raise.
    Cap { knob: Knob, value: KnobValue },
    /// `freeze G`: `cgroup.freeze` 1.
    Freeze(String),
    /// `thaw G`: `cgroup.freeze` 0.
    Thaw(String),
    /// `kill in G …`: the last resort ([`resort`]).
    Kill(KillSpec),
}

impl Action {
    /// Whether the action can be a `while:` claim (set, hook) rather than a
    /// one-off step that only makes sense in `then:`.
    pub(crate) fn allowed_in_while(&self) -> bool {
        matches!(
            self,
            Action::Set { .. } | Action::Hook(_) | Action::Cap { .. }
        )
    }

    /// The knob the action changes, if any.
    pub(crate) fn knob(&self) -> Option<&Knob> {
        match self {
            Action::Set { knob, .. }
            | Action::Raise { knob, .. }
            | Action::Lower { knob, .. }
            | Action::Cap { knob, .. } => Some(knob),
            Action::Hook(_)
            | Action::CompactMemory
            | Action::Freeze(_)
            | Action::Thaw(_)
            | Action::Kill(_) => None,
        }
    }

    /// The group a last-resort action acts on.
    pub(crate) fn resort_group(&self) -> Option<&str> {
        match self {
            Action::Freeze(g) | Action::Thaw(g) => Some(g),
            Action::Kill(k) => Some(&k.group),
            _ => None,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Set { knob, value } => write!(f, "set {knob} = {value}"),
            Action::Raise { knob, by, limit } => write!(f, "raise {knob} by {by} up to {limit}"),
            Action::Lower { knob, by, limit } => {
                write!(f, "lower {knob} by {by} down to {limit}")
            }
            Action::Hook(name) => write!(f, "hook {name}"),
            Action::CompactMemory => f.write_str("compact memory"),
            Action::Cap { knob, value } => write!(f, "cap {knob} at {value}"),
            Action::Freeze(g) => write!(f, "freeze {g}"),
            Action::Thaw(g) => write!(f, "thaw {g}"),
            Action::Kill(k) => write!(f, "{k}"),
        }
    }
}

mod action;
mod cap;
mod hw;
mod metric;
mod parse;
pub(crate) use action::parse_action;
use action::{knob_at, value_at, Word};
use parse::is_bare_glob_char;
pub(crate) use parse::parse_expr;
#[cfg(test)]
mod tests;

pub(crate) mod kpi; // kpi.NAME.STAT conditions
pub(crate) mod mem; // memory telemetry metrics
pub(crate) use mem::MemMetric;
pub(crate) mod resort;
pub(crate) use resort::KillSpec;
