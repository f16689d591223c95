//! The rule language (SPEC §3): `when:` conditions and rule actions.
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
//! - The PSI target `system` means the whole machine (`/proc/pressure`);
//!   for the group-only metrics (`memory.current`, `memory.events.*`, ...)
//!   `system` is an ordinary group name.
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

use crate::knobs::{is_valid_name, suggest, Knob, KnobValue};
use crate::units::{Duration, Percent, Size, Temperature};
use std::cmp::Ordering;
use std::fmt;

/// Longest expression or action accepted, in characters.
pub const MAX_CHARS: usize = 4096;
/// Deepest nesting of `(` and `not` accepted.
pub const MAX_DEPTH: usize = 64;
/// Longest `running(...)` pattern accepted, in characters.
const MAX_GLOB_CHARS: usize = 64;
/// The kernel's comm length (TASK_COMM_LEN - 1).
const COMM_CHARS: usize = 15;

/// A range of character offsets `start..end` in the parsed string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
}

/// A value with the place it was written. Equality ignores the span.
#[derive(Debug, Clone)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

/// Why an expression or action does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at character {pos})")]
pub struct ParseError {
    /// Character offset of the offending token.
    pub pos: usize,
    /// What was expected and what was found, with a hint where one is obvious.
    pub message: String,
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
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare(Compare),
    /// `running(GLOB)`: a live process whose comm matches the glob.
    Running(String),
    /// `exists(GROUP)`.
    Exists(Spanned<String>),
    /// `throttled(POLICY)` (issue 24, SPEC §6): the policy's ceiling is
    /// clipped below what was asked, or a cooling device bound to it is
    /// above 0.
    Throttled(Spanned<String>),
}

/// `METRIC OP VALUE`. Equality ignores spans.
#[derive(Debug, Clone)]
pub struct Compare {
    pub metric: Metric,
    pub metric_span: Span,
    pub op: CmpOp,
    pub value: Threshold,
    pub value_span: Span,
}

impl PartialEq for Compare {
    fn eq(&self, other: &Self) -> bool {
        self.metric == other.metric && self.op == other.op && self.value == other.value
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
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
    pub fn holds(self, ordering: Ordering) -> bool {
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
    /// The whole machine (`/proc/pressure/*`).
    System,
    Group(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::System => f.write_str("system"),
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
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn name(self) -> &'static str {
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
pub enum Metric {
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
    /// `system.memory.available`: MemAvailable, bytes.
    MemoryAvailable,
    /// `thermal.ZONE.temp`; ZONE is the zone's `type`.
    ThermalTemp { zone: Spanned<String> },
    /// `thermal.ZONE.trip.N`: trip point N's temperature (issue 24).
    ThermalTrip { zone: Spanned<String>, trip: u32 },
    /// `cooling.NAME.state`: a cooling device's `cur_state`, NAME its
    /// `type` (issue 24).
    CoolingState { device: Spanned<String> },
    /// `cpufreq.POLICY.limit` (the ceiling the kernel lets the policy reach
    /// now) or `cpufreq.POLICY.cur`, kHz (issue 24).
    CpufreqFreq {
        policy: Spanned<String>,
        limit: bool,
    },
    /// Memory telemetry (issue 25): vmstat rates, meminfo, zram mm_stat,
    /// the fragmentation index ([`mem`]).
    Mem(MemMetric),
    /// Issue 26: `kpi.NAME.STAT`, a KPI's statistic over a trailing window
    /// (the threshold is [`Threshold::Kpi`]).
    Kpi { name: String, stat: kpi::Stat },
}

impl Metric {
    /// The group this metric reads, with where it was written.
    pub fn group(&self) -> Option<(&str, Span)> {
        match self {
            Metric::PsiAvg { target, .. } | Metric::PsiStall { target, .. } => {
                match &target.value {
                    Target::Group(g) => Some((g, target.span)),
                    Target::System => None,
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
            Metric::MemoryAvailable => f.write_str("system.memory.available"),
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
pub enum Threshold {
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
    /// `cpufreq.POLICY.limit|cur` (issue 24).
    Frequency(crate::units::Frequency),
    /// A plain non-negative number: a vmstat rate per second, a
    /// fragmentation index (issue 25).
    Number(f64),
    /// Issue 26: a KPI threshold, `value` in the KPI's unit (seconds for a
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
    pub fn leaves(&self) -> Vec<&Expr> {
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
/// caller's "unknown group" check). PSI of `system` is the whole machine
/// and not listed.
pub fn referenced_groups(expr: &Expr) -> Vec<(String, Span)> {
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
// Expression parser

/// Characters of a metric name or keyword.
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// Characters allowed in an unquoted `running(...)` pattern.
fn is_bare_glob_char(c: char) -> bool {
    !c.is_whitespace() && !c.is_control() && !matches!(c, '(' | ')' | '"' | '\'' | ',')
}

/// Parses a `when:` expression.
pub fn parse_expr(src: &str) -> Result<Expr, ParseError> {
    let mut p = Parser::new(src)?;
    let expr = p.parse_or()?;
    p.skip_ws();
    if p.peek().is_some() {
        let found = p.describe_here();
        let hint = p
            .word_here()
            .and_then(|w| suggest(&w, ["and", "or"]))
            .map(|k| format!(", did you mean `{k}`?"))
            .unwrap_or_default();
        return Err(error(
            p.pos,
            format!("expected `and`, `or` or the end of the condition, found {found}{hint}"),
        ));
    }
    Ok(expr)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn new(src: &str) -> Result<Self, ParseError> {
        let chars: Vec<char> = src.chars().take(MAX_CHARS.saturating_add(1)).collect();
        if chars.len() > MAX_CHARS {
            return Err(error(
                MAX_CHARS,
                format!("longer than {MAX_CHARS} characters; split it into several rules"),
            ));
        }
        Ok(Parser {
            chars,
            pos: 0,
            depth: 0,
        })
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos = self.pos.saturating_add(1).min(self.chars.len());
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn take_while(&mut self, pred: impl Fn(char) -> bool) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek().filter(|c| pred(*c)) {
            out.push(c);
            self.bump();
        }
        out
    }

    fn word_here(&self) -> Option<String> {
        let word: String = self.chars[self.pos.min(self.chars.len())..]
            .iter()
            .take_while(|c| is_word_char(**c))
            .collect();
        (!word.is_empty()).then_some(word)
    }

    /// The token at the cursor, for "found ..." in messages.
    fn describe_here(&self) -> String {
        match (self.word_here(), self.peek()) {
            (Some(w), _) => format!("`{w}`"),
            (None, Some(c)) => format!("`{c}`"),
            (None, None) => "the end of the condition".to_string(),
        }
    }

    /// Whether keyword `kw` stands at the cursor as a whole word.
    fn at_keyword(&self, kw: &str) -> bool {
        let mut i = self.pos;
        for k in kw.chars() {
            if self.chars.get(i) != Some(&k) {
                return false;
            }
            i = i.saturating_add(1);
        }
        !self.chars.get(i).is_some_and(|c| is_word_char(*c))
    }

    /// Consumes keyword `kw` (after blanks) if present.
    fn eat_keyword(&mut self, kw: &str) -> bool {
        self.skip_ws();
        if self.at_keyword(kw) {
            self.pos = self.pos.saturating_add(kw.len()).min(self.chars.len());
            true
        } else {
            false
        }
    }

    fn parse_or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.parse_and()?;
        while self.eat_keyword("or") {
            let right = self.parse_and()?;
            let span = Span::new(left.span.start, right.span.end);
            left = Expr {
                kind: ExprKind::Or(Box::new(left), Box::new(right)),
                span,
            };
        }
        Ok(left)
    }

    fn parse_and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.parse_factor()?;
        while self.eat_keyword("and") {
            let right = self.parse_factor()?;
            let span = Span::new(left.span.start, right.span.end);
            left = Expr {
                kind: ExprKind::And(Box::new(left), Box::new(right)),
                span,
            };
        }
        Ok(left)
    }

    /// Runs `f` one nesting level deeper, refusing to go past [`MAX_DEPTH`].
    fn nested<T>(
        &mut self,
        at: usize,
        f: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(error(
                at,
                format!("nested deeper than {MAX_DEPTH} levels of `(` and `not`"),
            ));
        }
        self.depth = self.depth.saturating_add(1);
        let result = f(self);
        self.depth = self.depth.saturating_sub(1);
        result
    }

    fn parse_factor(&mut self) -> Result<Expr, ParseError> {
        self.skip_ws();
        let start = self.pos;
        if self.at_keyword("not") {
            self.pos = self.pos.saturating_add(3).min(self.chars.len());
            let inner = self.nested(start, Self::parse_factor)?;
            let span = Span::new(start, inner.span.end);
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(inner)),
                span,
            });
        }
        match self.peek() {
            Some('(') => {
                self.bump();
                let inner = self.nested(start, Self::parse_or)?;
                self.skip_ws();
                if self.peek() != Some(')') {
                    return Err(error(
                        self.pos,
                        format!(
                            "expected `)` to close the `(` at character {start}, found {}",
                            self.describe_here()
                        ),
                    ));
                }
                self.bump();
                Ok(inner)
            }
            None => Err(error(
                self.pos,
                "expected a condition (a metric comparison, running(...), exists(...), `not` or `(`), found the end of the condition",
            )),
            Some(_) => self.parse_atom(),
        }
    }

    fn parse_atom(&mut self) -> Result<Expr, ParseError> {
        let start = self.pos;
        let word = self.take_while(is_word_char);
        if word.is_empty() {
            return Err(error(
                start,
                format!(
                    "expected a condition (a metric comparison, running(...), exists(...), `not` or `(`), found {}",
                    self.describe_here()
                ),
            ));
        }
        let word_end = self.pos;
        self.skip_ws();
        let paren_follows = self.peek() == Some('(');
        if paren_follows && (word == "running" || word == "exists" || word == "throttled") {
            return self.parse_call(&word, start);
        }
        if word == "and" || word == "or" {
            return Err(error(
                start,
                format!("expected a condition before `{word}`"),
            ));
        }
        if paren_follows && !word.contains('.') {
            let hint = suggest(&word, ["running", "exists"])
                .map(|f| format!(", did you mean `{f}`?"))
                .unwrap_or_default();
            return Err(error(
                start,
                format!("unknown function `{word}`: expected running(NAME) or exists(GROUP){hint}"),
            ));
        }
        let metric = parse_metric(&word, start)?;
        let metric_span = Span::new(start, word_end);
        let op_pos = self.pos;
        let op = self.parse_op(&word)?;
        self.skip_ws();
        let value_start = self.pos;
        let value = self.take_while(|c| !c.is_whitespace() && c != '(' && c != ')');
        if value.is_empty() {
            return Err(error(
                value_start,
                format!(
                    "expected a value after `{word} {}`, found {}",
                    op.symbol(),
                    self.describe_here()
                ),
            ));
        }
        let mut value_span = Span::new(value_start, self.pos);
        let mut threshold = parse_threshold(&metric, &word, op, op_pos, &value, value_start)?;
        self.kpi_over(&mut threshold, &mut value_span)?; // issue 26: `over 1m`
        Ok(Expr {
            kind: ExprKind::Compare(Compare {
                metric,
                metric_span,
                op,
                value: threshold,
                value_span,
            }),
            span: Span::new(start, value_span.end),
        })
    }

    fn parse_op(&mut self, metric: &str) -> Result<CmpOp, ParseError> {
        let first = self.peek();
        let second = self.chars.get(self.pos.saturating_add(1)).copied();
        let (op, len) = match (first, second) {
            (Some('>'), Some('=')) => (CmpOp::Ge, 2),
            (Some('>'), _) => (CmpOp::Gt, 1),
            (Some('<'), Some('=')) => (CmpOp::Le, 2),
            (Some('<'), _) => (CmpOp::Lt, 1),
            (Some('='), Some('=')) => (CmpOp::Eq, 2),
            (Some('!'), Some('=')) => (CmpOp::Ne, 2),
            (Some('='), Some('>')) => {
                return Err(error(
                    self.pos,
                    "`=>` is not a comparison, did you mean `>=`?",
                ))
            }
            (Some('='), Some('<')) => {
                return Err(error(
                    self.pos,
                    "`=<` is not a comparison, did you mean `<=`?",
                ))
            }
            (Some('='), _) => {
                return Err(error(
                    self.pos,
                    "`=` is not a comparison, did you mean `==`?",
                ))
            }
            _ => {
                return Err(error(
                    self.pos,
                    format!(
                        "expected a comparison (>, >=, <, <=, ==, !=) after `{metric}`, found {}",
                        self.describe_here()
                    ),
                ))
            }
        };
        self.pos = self.pos.saturating_add(len).min(self.chars.len());
        Ok(op)
    }

    fn parse_call(&mut self, name: &str, start: usize) -> Result<Expr, ParseError> {
        self.bump(); // the `(`
        self.skip_ws();
        let arg_start = self.pos;
        let arg = match self.peek() {
            Some(q @ ('"' | '\'')) => {
                self.bump();
                let text = self.take_while(|c| c != q && !c.is_control());
                if self.peek() != Some(q) {
                    return Err(error(
                        self.pos,
                        format!(
                            "expected the closing {q} of the name started at character {arg_start}"
                        ),
                    ));
                }
                self.bump();
                text
            }
            _ => self.take_while(is_bare_glob_char),
        };
        let arg_end = self.pos;
        self.skip_ws();
        if self.peek() != Some(')') {
            return Err(error(
                self.pos,
                format!(
                    "expected `)` after {name}(...), found {}; quote names with blanks or special characters",
                    self.describe_here()
                ),
            ));
        }
        self.bump();
        let span = Span::new(start, self.pos);
        let kind = if name == "running" {
            check_glob(&arg, arg_start)?;
            ExprKind::Running(arg)
        } else if name == "throttled" {
            hw::throttled_arg(&arg, arg_start)?;
            ExprKind::Throttled(Spanned::new(arg, Span::new(arg_start, arg_end)))
        } else {
            if !is_valid_name(&arg) {
                return Err(error(
                    arg_start,
                    format!(
                        "exists() needs a group name ([a-z0-9][a-z0-9_-]{{0,63}}), found `{arg}`"
                    ),
                ));
            }
            ExprKind::Exists(Spanned::new(arg, Span::new(arg_start, arg_end)))
        };
        Ok(Expr { kind, span })
    }
}

/// Validates a `running(...)` pattern against what comm can hold.
fn check_glob(glob: &str, pos: usize) -> Result<(), ParseError> {
    let len = glob.chars().count();
    if len == 0 {
        return Err(error(pos, "running() needs a process name or glob"));
    }
    if len > MAX_GLOB_CHARS {
        return Err(error(
            pos,
            format!("running() pattern is longer than {MAX_GLOB_CHARS} characters"),
        ));
    }
    let has_wildcard = glob.contains(['*', '?', '[']);
    if !has_wildcard && len > COMM_CHARS {
        let truncated: String = glob.chars().take(COMM_CHARS).collect();
        return Err(error(
            pos,
            format!(
                "`{glob}` can never match: the kernel truncates process names (comm) to {COMM_CHARS} characters; write `{truncated}` or a glob"
            ),
        ));
    }
    // Every `[` opens a class that must close.
    let mut open = None;
    for (i, c) in glob.chars().enumerate() {
        match (c, open) {
            ('[', None) => open = Some(i),
            (']', Some(_)) => open = None,
            _ => {}
        }
    }
    if let Some(i) = open {
        return Err(error(
            pos.saturating_add(i),
            format!("unclosed `[` in running() pattern `{glob}`"),
        ));
    }
    Ok(())
}

const METRIC_FORMS: &str = "G.{cpu,memory,io}.{some,full}.{avg10,avg60,avg300}, G.{cpu,memory,io}.{some,full} > AMOUNT/WINDOW, G.memory.current, G.memory.swap.current, G.memory.events.{high,max,oom,oom_kill,oom_group_kill}, G.pids.current, G.cgroup.populated, system.memory.available, system.vmstat.FIELD, system.meminfo.FIELD, system.fragmentation.ORDER, zram.DEV.{orig_data_size,compr_data_size,mem_used_total} or thermal.ZONE.temp";

/// Every valid metric after the `G.` part, for suggestions.
fn metric_suffixes() -> Vec<String> {
    let mut out = Vec::new();
    for r in Resource::ALL {
        for s in Stall::ALL {
            out.push(format!("{r}.{s}"));
            for a in Avg::ALL {
                out.push(format!("{r}.{s}.{a}"));
            }
        }
    }
    out.push("memory.current".into());
    out.push("memory.swap.current".into());
    for e in MemEvent::ALL {
        out.push(format!("memory.events.{e}"));
    }
    out.push("pids.current".into());
    out.push("cgroup.populated".into());
    out
}

/// Resolves a dotted metric name written at character `start`.
fn parse_metric(word: &str, start: usize) -> Result<Metric, ParseError> {
    // Words are ASCII, so byte offsets within the word are character offsets.
    let mut segs: Vec<(&str, usize)> = Vec::new();
    let mut offset = start;
    for seg in word.split('.') {
        if seg.is_empty() {
            return Err(error(
                offset,
                format!("empty part in metric `{word}`: expected {METRIC_FORMS}"),
            ));
        }
        segs.push((seg, offset));
        offset = offset.saturating_add(seg.len()).saturating_add(1);
    }
    let names: Vec<&str> = segs.iter().map(|(s, _)| *s).collect();
    let span_of = |i: usize| {
        segs.get(i).map_or(Span::new(start, start), |(s, o)| {
            Span::new(*o, o.saturating_add(s.len()))
        })
    };

    if names == ["system", "memory", "available"] {
        return Ok(Metric::MemoryAvailable);
    }
    if let Some(m) = hw::parse_hw_metric(&names, &span_of)? {
        return Ok(m);
    }
    if let Some(m) = kpi::parse(&names) {
        return m
            .map(|(name, stat)| Metric::Kpi { name, stat })
            .map_err(|e| error(start, e));
    }
    if let Some(m) = mem::parse(&names) {
        return m.map(Metric::Mem).map_err(|e| error(start, e));
    }
    if let ["thermal", zone @ .., "temp"] = names.as_slice() {
        if !zone.is_empty() {
            let zone_start = span_of(1).start;
            let zone_text = zone.join(".");
            if zone_text.len() > 64 {
                return Err(error(
                    zone_start,
                    "thermal zone name is longer than 64 characters",
                ));
            }
            let end = zone_start.saturating_add(zone_text.len());
            return Ok(Metric::ThermalTemp {
                zone: Spanned::new(zone_text, Span::new(zone_start, end)),
            });
        }
    }

    let (target_name, rest) = match names.split_first() {
        Some((t, rest)) if !rest.is_empty() => (*t, rest),
        _ => {
            return Err(error(
                start,
                format!("unknown metric `{word}`: expected {METRIC_FORMS}"),
            ))
        }
    };
    if target_name != "system" && !is_valid_name(target_name) {
        return Err(error(
            start,
            format!(
                "invalid group name `{target_name}` in metric `{word}`: expected [a-z0-9][a-z0-9_-]{{0,63}} or `system`"
            ),
        ));
    }
    let target_span = span_of(0);
    let group = || Spanned::new(target_name.to_string(), target_span);
    let target = || {
        let t = if target_name == "system" {
            Target::System
        } else {
            Target::Group(target_name.to_string())
        };
        Spanned::new(t, target_span)
    };

    let psi = |r: &str, s: &str| Some((Resource::from_name(r)?, Stall::from_name(s)?));
    let metric = match rest {
        [r, s, a] => match (psi(r, s), Avg::from_name(a)) {
            (Some((resource, stall)), Some(avg)) => Some(Metric::PsiAvg {
                target: target(),
                resource,
                stall,
                avg,
            }),
            _ => match (*r, *s, *a) {
                ("memory", "swap", "current") => Some(Metric::SwapCurrent { group: group() }),
                ("memory", "events", e) => {
                    MemEvent::from_name(e).map(|event| Metric::MemoryEvent {
                        group: group(),
                        event,
                    })
                }
                _ => None,
            },
        },
        [r, s] => match psi(r, s) {
            Some((resource, stall)) => Some(Metric::PsiStall {
                target: target(),
                resource,
                stall,
            }),
            None => match (*r, *s) {
                ("memory", "current") => Some(Metric::MemoryCurrent { group: group() }),
                ("pids", "current") => Some(Metric::PidsCurrent { group: group() }),
                ("cgroup", "populated") => Some(Metric::Populated { group: group() }),
                _ => None,
            },
        },
        _ => None,
    };
    if let Some(m) = metric {
        // `system` is the whole machine, never a group (a reserved name):
        // only pressure reads it here.
        if target_name == "system" && !matches!(m, Metric::PsiAvg { .. } | Metric::PsiStall { .. })
        {
            return Err(error(
                start,
                format!(
                    "`{word}`: `system` is the whole machine, not a group; it has `system.memory.available` and pressure (`system.cpu.some.avg10`, `system.memory.full`)"
                ),
            ));
        }
        return Ok(m);
    }

    // Unknown: suggest the closest valid metric and point at the first part
    // that differs from it.
    let rest_text = rest.join(".");
    let suffixes = metric_suffixes();
    match suggest(&rest_text, suffixes.iter().map(String::as_str)) {
        Some(fix) => {
            let fix_parts: Vec<&str> = fix.split('.').collect();
            let bad = rest
                .iter()
                .zip(fix_parts.iter().map(Some).chain(std::iter::repeat(None)))
                .position(|(have, want)| want != Some(have))
                .unwrap_or(rest.len().saturating_sub(1));
            let (bad_part, pos) = segs
                .get(bad.saturating_add(1))
                .copied()
                .unwrap_or((word, start));
            Err(error(
                pos,
                format!(
                    "unknown metric part `{bad_part}` in `{word}`, did you mean `{target_name}.{fix}`?"
                ),
            ))
        }
        None => Err(error(
            span_of(1).start,
            format!("unknown metric `{word}`: expected {METRIC_FORMS}"),
        )),
    }
}

/// Types the value of a comparison by its metric.
fn parse_threshold(
    metric: &Metric,
    metric_text: &str,
    op: CmpOp,
    op_pos: usize,
    value: &str,
    value_pos: usize,
) -> Result<Threshold, ParseError> {
    let wrong = |expected: &str| {
        error(
            value_pos,
            format!("`{metric_text}` compares with {expected}, found `{value}`"),
        )
    };
    if let Some(slash) = value.find('/') {
        if !matches!(
            metric,
            Metric::PsiStall { .. } | Metric::MemoryEvent { .. } | Metric::Kpi { .. }
        ) {
            let (before, window) = value.split_at(slash);
            return Err(error(
                value_pos.saturating_add(before.chars().count()),
                format!(
                    "a window `{window}` only applies to event counts (`G.memory.events.high > 5/10s`) and stall time (`G.memory.some > 150ms/1s`); `{metric_text}` compares with a plain value"
                ),
            ));
        }
    }
    match metric {
        Metric::Kpi { stat, .. } => {
            let (text, window) = match value.split_once('/') {
                Some((v, w)) => {
                    let at = value_pos.saturating_add(v.chars().count() + 1);
                    let w = kpi::parse_window(w).map_err(|e| error(at, e))?;
                    (v, Some(Duration(w)))
                }
                None => (value, None),
            };
            let (v, _) = kpi::parse_value(text, *stat).map_err(|e| error(value_pos, e))?;
            Ok(Threshold::Kpi {
                value: v,
                text: text.to_string(),
                window,
            })
        }
        Metric::PsiAvg { .. } => Percent::parse(value)
            .map(Threshold::Percent)
            .map_err(|_| wrong("a percentage like `10%`")),
        Metric::PsiStall { .. } => {
            if !matches!(op, CmpOp::Gt | CmpOp::Ge) {
                return Err(error(
                    op_pos,
                    format!(
                        "a stall-time condition only supports `>` or `>=` (a PSI trigger fires when stall time exceeds the amount), found `{}`; use `not (...)` for the opposite",
                        op.symbol()
                    ),
                ));
            }
            parse_stall(metric_text, value, value_pos)
        }
        Metric::MemoryCurrent { .. } | Metric::SwapCurrent { .. } | Metric::MemoryAvailable => {
            match Size::parse(value) {
                Ok(Size::Bytes(b)) => Ok(Threshold::Size(Size::Bytes(b))),
                _ => Err(wrong("a byte size like `512M` (not `max`)")),
            }
        }
        Metric::MemoryEvent { .. } => {
            if !matches!(op, CmpOp::Gt | CmpOp::Ge) {
                return Err(error(
                    op_pos,
                    format!(
                        "an event-count condition only supports `>` or `>=` (more than N new events within a window), found `{}`; use `not (...)` for the opposite",
                        op.symbol()
                    ),
                ));
            }
            parse_events(metric_text, value, value_pos)
        }
        Metric::PidsCurrent { .. } => parse_count(value)
            .map(Threshold::Count)
            .ok_or_else(|| wrong("a whole number")),
        Metric::Populated { .. } => match parse_count(value) {
            Some(n @ (0 | 1)) => Ok(Threshold::Count(n)),
            _ => Err(wrong("0 or 1")),
        },
        Metric::ThermalTemp { .. } | Metric::ThermalTrip { .. } => Temperature::parse(value)
            .map(Threshold::Temperature)
            .map_err(|_| wrong("a temperature like `85C`")),
        Metric::CoolingState { .. } => parse_count(value)
            .map(Threshold::Count)
            .ok_or_else(|| wrong("a whole number (a cooling state)")),
        Metric::CpufreqFreq { .. } => crate::units::Frequency::parse(value)
            .map(Threshold::Frequency)
            .map_err(|_| wrong("a frequency like `1.8GHz`")),
        Metric::Mem(m) if m.is_bytes() => match Size::parse(value) {
            Ok(Size::Bytes(b)) => Ok(Threshold::Size(Size::Bytes(b))),
            _ => Err(wrong("a byte size like `64M` (not `max`)")),
        },
        Metric::Mem(m) => {
            let n: f64 = value
                .parse()
                .ok()
                .filter(|n: &f64| n.is_finite() && *n >= 0.0 && !value.starts_with('+'))
                .ok_or_else(|| match m {
                    MemMetric::Fragmentation(_) => wrong("an index between 0 and 1 like `0.75`"),
                    _ => wrong("a rate per second like `100` or `0.5`"),
                })?;
            if matches!(m, MemMetric::Fragmentation(_)) && n > 1.0 {
                return Err(wrong("an index between 0 and 1 like `0.75`"));
            }
            Ok(Threshold::Number(n))
        }
    }
}

fn parse_count(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Shortest and longest event-count window.
pub const EVENT_WINDOW: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(3600),
);

/// `N` or `N/WINDOW` of an event-count condition.
fn parse_events(metric_text: &str, value: &str, value_pos: usize) -> Result<Threshold, ParseError> {
    let (count_text, window_text) = match value.split_once('/') {
        Some((c, w)) => (c, Some(w)),
        None => (value, None),
    };
    let Some(count) = parse_count(count_text) else {
        return Err(error(
            value_pos,
            format!(
                "`{metric_text}` compares with a whole number of events, optionally within a window like `5/10s`, found `{count_text}`"
            ),
        ));
    };
    let Some(window_text) = window_text else {
        return Ok(Threshold::Events {
            count,
            window: None,
        });
    };
    let window_pos = value_pos
        .saturating_add(count_text.chars().count())
        .saturating_add(1);
    let window = Duration::parse(window_text)
        .map_err(|e| error(window_pos, format!("event window: {e}")))?;
    let (min, max) = EVENT_WINDOW;
    if !(min..=max).contains(&window.get()) {
        return Err(error(
            window_pos,
            format!("the event window `{window_text}` must be between 1s and 1h"),
        ));
    }
    if window.get().subsec_nanos() % 1_000_000 != 0 {
        return Err(error(
            window_pos,
            format!("the event window `{window_text}` must be a whole number of milliseconds"),
        ));
    }
    Ok(Threshold::Events {
        count,
        window: Some(window),
    })
}

/// `AMOUNT/WINDOW` of a stall-time condition, within the kernel's limits.
fn parse_stall(metric_text: &str, value: &str, value_pos: usize) -> Result<Threshold, ParseError> {
    let Some((amount_text, window_text)) = value.split_once('/') else {
        let hint = if value.ends_with('%') {
            format!("; for a PSI average write `{metric_text}.avg10`")
        } else {
            String::new()
        };
        return Err(error(
            value_pos,
            format!(
                "`{metric_text}` compares stall time as AMOUNT/WINDOW like `150ms/1s`, found `{value}`{hint}"
            ),
        ));
    };
    let window_pos = value_pos
        .saturating_add(amount_text.chars().count())
        .saturating_add(1);
    let micros = |text: &str, pos: usize| {
        let d = Duration::parse(text).map_err(|e| error(pos, e.to_string()))?;
        d.whole_micros().map(|us| (d, us)).ok_or_else(|| {
            error(
                pos,
                format!("`{text}` is not a whole number of microseconds"),
            )
        })
    };
    let (amount, amount_us) = micros(amount_text, value_pos)?;
    let (window, window_us) = micros(window_text, window_pos)?;
    if !(500_000..=10_000_000).contains(&window_us) {
        return Err(error(
            window_pos,
            format!("the stall window `{window_text}` must be between 500ms and 10s"),
        ));
    }
    if amount_us == 0 || amount_us > window_us {
        return Err(error(
            value_pos,
            format!(
                "the stall amount `{amount_text}` must be greater than 0 and at most the window `{window_text}`"
            ),
        ));
    }
    Ok(Threshold::StallTime { amount, window })
}

// ---------------------------------------------------------------------------
// Actions

/// A rule action.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
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
    /// `cap KNOB at VALUE` (issue 24): a ceiling that beats every raise.
    Cap { knob: Knob, value: KnobValue },
    /// `freeze G` (issue 25): `cgroup.freeze` 1.
    Freeze(String),
    /// `thaw G`: `cgroup.freeze` 0.
    Thaw(String),
    /// `kill in G …`: the last resort ([`resort`]).
    Kill(KillSpec),
}

impl Action {
    /// Whether the action can be a `while:` claim (set, hook) rather than a
    /// one-off step that only makes sense in `then:`.
    pub fn allowed_in_while(&self) -> bool {
        matches!(
            self,
            Action::Set { .. } | Action::Hook(_) | Action::Cap { .. }
        )
    }

    /// The knob the action changes, if any.
    pub fn knob(&self) -> Option<&Knob> {
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
    pub fn resort_group(&self) -> Option<&str> {
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

/// A blank-separated word of an action and its character offset.
#[derive(Debug, Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    pos: usize,
}

fn split_words(src: &str) -> Vec<Word<'_>> {
    let mut words = Vec::new();
    let mut current: Option<(usize, usize)> = None; // (byte start, char pos)
    for (char_pos, (byte, c)) in src.char_indices().enumerate() {
        match (c.is_whitespace(), current) {
            (false, None) => current = Some((byte, char_pos)),
            (true, Some((b, p))) => {
                words.push(Word {
                    text: src.get(b..byte).unwrap_or(""),
                    pos: p,
                });
                current = None;
            }
            _ => {}
        }
    }
    if let Some((b, p)) = current {
        words.push(Word {
            text: src.get(b..).unwrap_or(""),
            pos: p,
        });
    }
    words
}

const ACTION_FORMS: &str = "set KNOB = VALUE, raise KNOB by DELTA up to LIMIT, lower KNOB by DELTA down to LIMIT, cap KNOB at VALUE, hook NAME, compact memory, freeze GROUP, thaw GROUP or kill in GROUP [prefer NAMES] [avoid NAMES] [grace D]";

/// Parses one action of a rule's `then:` or `while:` list.
pub fn parse_action(src: &str) -> Result<Action, ParseError> {
    let total = src.chars().count();
    if total > MAX_CHARS {
        return Err(error(
            MAX_CHARS,
            format!("longer than {MAX_CHARS} characters"),
        ));
    }
    let words = split_words(src);
    let Some(verb) = words.first() else {
        return Err(error(0, format!("empty action: expected {ACTION_FORMS}")));
    };
    let args = words.get(1..).unwrap_or(&[]);
    match verb.text {
        "set" => parse_set(src, verb),
        "raise" => parse_step(args, verb, total, true),
        "lower" => parse_step(args, verb, total, false),
        "hook" => match args {
            [name] if is_valid_name(name.text) => Ok(Action::Hook(name.text.to_string())),
            [name] => Err(error(
                name.pos,
                format!(
                    "invalid hook name `{}`: expected [a-z0-9][a-z0-9_-]{{0,63}}",
                    name.text
                ),
            )),
            [] => Err(error(total, "expected a hook name after `hook`")),
            [_, extra, ..] => Err(error(
                extra.pos,
                format!("unexpected `{}` after the hook name", extra.text),
            )),
        },
        "compact" => match args {
            [] => Err(error(total, "expected `memory` after `compact`")),
            [what, ..] if what.text != "memory" => Err(error(
                what.pos,
                format!("expected `compact memory`, found `compact {}`", what.text),
            )),
            [_, extra, ..] => Err(error(
                extra.pos,
                format!("unexpected `{}` after `compact memory`", extra.text),
            )),
            [_] => Ok(Action::CompactMemory),
        },
        "cap" => cap::parse_cap(args, total),
        "freeze" => resort::parse_freeze(true, args, total),
        "thaw" => resort::parse_freeze(false, args, total),
        "kill" => resort::parse_kill(args, total),
        other => {
            let hint = suggest(
                other,
                [
                    "set", "raise", "lower", "cap", "hook", "compact", "freeze", "thaw", "kill",
                ],
            )
            .map(|v| format!(", did you mean `{v}`?"))
            .unwrap_or_default();
            Err(error(
                verb.pos,
                format!("unknown action `{other}`: expected {ACTION_FORMS}{hint}"),
            ))
        }
    }
}

fn knob_at(text: &str, pos: usize) -> Result<Knob, ParseError> {
    Knob::parse(text).map_err(|e| error(pos, e.to_string()))
}

fn value_at(knob: &Knob, text: &str, pos: usize) -> Result<KnobValue, ParseError> {
    knob.parse_value(text)
        .map_err(|e| error(pos, format!("{e} (for `{knob}`)")))
}

/// `set KNOB = VALUE`; the value is the rest of the line, so cpu lists may
/// contain blanks (`0-3, 6`). `KNOB=VALUE` without blanks also works.
fn parse_set(src: &str, verb: &Word<'_>) -> Result<Action, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut pos = verb.pos.saturating_add(3);
    let skip_ws = |mut p: usize| {
        while chars.get(p).is_some_and(|c| c.is_whitespace()) {
            p = p.saturating_add(1);
        }
        p
    };
    pos = skip_ws(pos);
    let knob_start = pos;
    while chars
        .get(pos)
        .is_some_and(|c| !c.is_whitespace() && *c != '=')
    {
        pos = pos.saturating_add(1);
    }
    let knob_text: String = chars.get(knob_start..pos).unwrap_or(&[]).iter().collect();
    if knob_text.is_empty() {
        return Err(error(knob_start, "expected a knob after `set`"));
    }
    let knob = knob_at(&knob_text, knob_start)?;
    pos = skip_ws(pos);
    if chars.get(pos) != Some(&'=') {
        let found = chars
            .get(pos)
            .map_or("the end of the action".to_string(), |c| format!("`{c}`"));
        return Err(error(
            pos,
            format!("expected `=` after `set {knob}`, found {found}"),
        ));
    }
    pos = skip_ws(pos.saturating_add(1));
    let value_text: String = chars.get(pos..).unwrap_or(&[]).iter().collect();
    let value_text = value_text.trim_end();
    if value_text.is_empty() {
        return Err(error(pos, format!("expected a value after `set {knob} =`")));
    }
    let value = value_at(&knob, value_text, pos)?;
    Ok(Action::Set { knob, value })
}

/// `raise KNOB by DELTA up to LIMIT` / `lower KNOB by DELTA down to LIMIT`.
fn parse_step(
    args: &[Word<'_>],
    verb: &Word<'_>,
    end: usize,
    up: bool,
) -> Result<Action, ParseError> {
    let direction = if up { "up" } else { "down" };
    let expected = [None, Some("by"), None, Some(direction), Some("to"), None];
    let form = format!("{} KNOB by DELTA {direction} to LIMIT", verb.text);
    for (i, want) in expected.iter().enumerate() {
        match (args.get(i), want) {
            (None, _) => return Err(error(end, format!("incomplete action, expected `{form}`"))),
            (Some(w), Some(kw)) if w.text != *kw => {
                return Err(error(
                    w.pos,
                    format!("expected `{kw}`, found `{}` (the form is `{form}`)", w.text),
                ))
            }
            _ => {}
        }
    }
    if let Some(extra) = args.get(expected.len()) {
        return Err(error(
            extra.pos,
            format!("unexpected `{}` after the limit", extra.text),
        ));
    }
    // The loop above proved all six words exist.
    let (Some(knob_w), Some(delta_w), Some(limit_w)) = (args.first(), args.get(2), args.get(5))
    else {
        return Err(error(end, format!("incomplete action, expected `{form}`")));
    };
    let knob = knob_at(knob_w.text, knob_w.pos)?;
    if !knob.is_numeric() {
        return Err(error(
            knob_w.pos,
            format!(
                "`{knob}` is not numeric; {} steps sizes, frequencies, weights, counts, integers and percentages, use `set` instead",
                verb.text
            ),
        ));
    }
    let by = value_at(&knob, delta_w.text, delta_w.pos)?;
    if !is_positive(&by) {
        return Err(error(
            delta_w.pos,
            format!("the step `{}` must be a positive amount", delta_w.text),
        ));
    }
    let limit = value_at(&knob, limit_w.text, limit_w.pos)?;
    if up {
        Ok(Action::Raise { knob, by, limit })
    } else if matches!(limit, KnobValue::Size(Size::Max) | KnobValue::Count(None)) {
        Err(error(
            limit_w.pos,
            "`lower` needs a finite limit, not `max`",
        ))
    } else {
        Ok(Action::Lower { knob, by, limit })
    }
}

/// Whether a `by` amount is a finite number greater than zero.
fn is_positive(value: &KnobValue) -> bool {
    match value {
        KnobValue::Size(Size::Bytes(b)) => *b > 0,
        KnobValue::Count(Some(n)) => *n > 0,
        KnobValue::Frequency(f) => f.khz > 0,
        KnobValue::Weight(w) => *w > 0,
        KnobValue::Int(n) => *n > 0,
        KnobValue::Percent(p) => p.value() > 0.0,
        _ => false,
    }
}

mod cap;
mod hw;
#[cfg(test)]
mod tests;

pub mod kpi;
pub mod mem; // issue 26: kpi.NAME.STAT conditions
pub use mem::MemMetric;
pub mod resort;
pub use resort::KillSpec;
