//! `--sweep RULE.THRESHOLD=LO..HI/STEP`: the replay once
//! per value, as a table of firings and time active.
//!
//! `THRESHOLD` is `threshold` (the rule's only comparison), the metric of
//! one of its comparisons as written (`app.memory.some.avg10`,
//! `app.cpu.some` for a stall time), or `for` / `hold`. `LO`, `HI` and
//! `STEP` are numbers with the threshold's unit (`5%..20%/5%`,
//! `50ms..200ms/50ms`, `80C..90C/2C`, `1..5/1`); a stall time or event
//! window keeps the rule's own window. Each value is put into the rule's
//! `when:` text and parsed as the policy parses it, so a value the policy
//! would refuse is refused here too.

use super::{simulate, span, Outcome, Recording};
use crate::policy::expr::{parse_expr, Expr, ExprKind};
use crate::policy::model::Policy;
use serde::Serialize;
use std::time::Duration;

/// At most this many values in one sweep.
const MAX_VALUES: usize = 1000;

/// What is swept.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    /// The comparison whose value is at these characters of `when_text`;
    /// `window` is its `/WINDOW` part, kept.
    Value {
        start: usize,
        end: usize,
        window: Option<String>,
    },
    For,
    Hold,
}

/// A parsed `--sweep`.
#[derive(Clone, Debug)]
pub(crate) struct Sweep {
    pub(crate) rule: usize,
    pub(crate) rule_name: String,
    /// What the user named after the rule.
    pub(crate) what: String,
    target: Target,
    /// The values, as they are written into the rule.
    pub(crate) values: Vec<String>,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Row {
    pub(crate) value: String,
    pub(crate) firings: usize,
    pub(crate) active_seconds: f64,
    pub(crate) writes: usize,
    pub(crate) hooks: usize,
    /// Seconds of this rule's inputs missing from the recording.
    pub(crate) gap_seconds: f64,
}

/// `12.5` → (12.5, ""), `150ms` → (150, "ms").
fn number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '-'))
        .map_or(s.len(), |(i, _)| i);
    let v: f64 = s[..end].parse().ok()?;
    v.is_finite().then_some((v, &s[end..]))
}

/// `7.5` as written: no trailing zeros.
fn fmt(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// The values of `LO..HI/STEP`.
fn values(range: &str) -> Result<Vec<String>, String> {
    let bad = || format!("`{range}` is not LO..HI/STEP (e.g. 5%..20%/5%)");
    let (lo, rest) = range.split_once("..").ok_or_else(bad)?;
    let (hi, step) = rest.rsplit_once('/').ok_or_else(bad)?;
    let ((lo, unit), (hi, hu), (step, su)) = (
        number(lo).ok_or_else(bad)?,
        number(hi).ok_or_else(bad)?,
        number(step).ok_or_else(bad)?,
    );
    if hu != unit || !(su.is_empty() || su == unit) {
        return Err(format!(
            "LO, HI and STEP must have one unit (`{unit}`, `{hu}`, `{su}`)"
        ));
    }
    if step <= 0.0 || hi < lo {
        return Err(format!(
            "`{range}`: STEP must be above 0 and HI at least LO"
        ));
    }
    let n = ((hi - lo) / step + 1e-9).floor() as usize + 1;
    if n > MAX_VALUES {
        return Err(format!("`{range}` makes {n} values; at most {MAX_VALUES}"));
    }
    Ok((0..n)
        .map(|k| format!("{}{unit}", fmt(lo + step * k as f64)))
        .collect())
}

/// The comparisons of `e`, left to right: (metric as written, value span).
fn compares(e: &Expr, out: &mut Vec<(String, usize, usize)>) {
    match &e.kind {
        ExprKind::Or(a, b) | ExprKind::And(a, b) => {
            compares(a, out);
            compares(b, out);
        }
        ExprKind::Not(a) => compares(a, out),
        ExprKind::Compare(c) => {
            out.push((c.metric.to_string(), c.value_span.start, c.value_span.end))
        }
        _ => {}
    }
}

/// Characters `start..end` of `s`.
fn chars(s: &str, start: usize, end: usize) -> String {
    s.chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect()
}

impl Sweep {
    pub(crate) fn parse(policy: &Policy, spec: &str) -> Result<Sweep, String> {
        let (lhs, range) = spec
            .split_once('=')
            .ok_or("expected RULE.THRESHOLD=LO..HI/STEP")?;
        let (rule, r) = policy
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                lhs.len() > r.name.len() + 1
                    && lhs.starts_with(&r.name)
                    && lhs.as_bytes()[r.name.len()] == b'.'
            })
            .max_by_key(|(_, r)| r.name.len())
            .ok_or_else(|| {
                let names: Vec<&str> = policy.rules.iter().map(|r| r.name.as_str()).collect();
                format!(
                    "`{lhs}` names no rule of the policy (rules: {})",
                    names.join(", ")
                )
            })?;
        let what = lhs[r.name.len() + 1..].to_string();
        let target = match what.as_str() {
            "for" => Target::For,
            "hold" => Target::Hold,
            _ => {
                let expr = parse_expr(&r.when_text)
                    .map_err(|e| format!("rule `{}`: {}", r.name, e.message))?;
                let mut cs = Vec::new();
                compares(&expr, &mut cs);
                let found: Vec<&(String, usize, usize)> = cs
                    .iter()
                    .filter(|c| what == "threshold" || c.0 == what)
                    .collect();
                let (_, start, end) = match found.as_slice() {
                    [one] => *one,
                    _ => {
                        let list: Vec<&str> = cs.iter().map(|c| c.0.as_str()).collect();
                        return Err(format!(
                            "rule `{}` has {} comparison(s) matching `{what}`; name one of: {}, for, hold",
                            r.name,
                            found.len(),
                            list.join(", ")
                        ));
                    }
                };
                let old = chars(&r.when_text, *start, *end);
                let window = old.split_once('/').map(|(_, w)| w.to_string());
                Target::Value {
                    start: *start,
                    end: *end,
                    window,
                }
            }
        };
        let values = values(range)?;
        let sweep = Sweep {
            rule,
            rule_name: r.name.clone(),
            what,
            target,
            values,
        };
        // Every value must make a valid rule before anything runs.
        for v in &sweep.values {
            sweep.apply(policy, v)?;
        }
        Ok(sweep)
    }

    /// `policy` with the rule at `value`.
    pub(crate) fn apply(&self, policy: &Policy, value: &str) -> Result<Policy, String> {
        let mut p = policy.clone();
        let r = p.rules.get_mut(self.rule).ok_or("no such rule")?;
        match &self.target {
            Target::For | Target::Hold => {
                let d: Duration = crate::policy::decode::parse_duration(value)
                    .map_err(|e| format!("`{value}`: {e}"))?;
                if self.target == Target::For {
                    r.for_ = d;
                } else {
                    r.hold = d;
                }
            }
            Target::Value { start, end, window } => {
                let v = match window {
                    Some(w) => format!("{value}/{w}"),
                    None => value.to_string(),
                };
                let n = r.when_text.chars().count();
                let text = format!(
                    "{}{v}{}",
                    chars(&r.when_text, 0, *start),
                    chars(&r.when_text, *end, n)
                );
                r.when = parse_expr(&text).map_err(|e| format!("`{text}`: {}", e.message))?;
                r.when_text = text;
            }
        }
        Ok(p)
    }

    /// The replay at every value.
    pub(crate) fn run(&self, policy: &Policy, rec: &Recording) -> Vec<Row> {
        self.values
            .iter()
            .filter_map(|v| {
                let p = self.apply(policy, v).ok()?;
                let out: Outcome = simulate(&p, rec);
                let r = out.rules.get(self.rule)?;
                Some(Row {
                    value: v.clone(),
                    firings: r.firings(),
                    active_seconds: r.active_seconds,
                    writes: r.writes,
                    hooks: r.hooks,
                    gap_seconds: out
                        .gaps
                        .iter()
                        .filter(|g| g.rule == self.rule_name)
                        .map(|g| g.to - g.from)
                        .sum(),
                })
            })
            .collect()
    }
}

/// The table as text.
pub(crate) fn text(s: &Sweep, rows: &[Row]) -> String {
    use std::fmt::Write;
    let mut out = format!("sweep of rule {} {}:\n", s.rule_name, s.what);
    let _ = writeln!(
        out,
        "{:>12}  {:>8}  {:>12}  {:>7}  {:>6}",
        "value", "firings", "active", "writes", "hooks"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:>12}  {:>8}  {:>12}  {:>7}  {:>6}",
            r.value,
            r.firings,
            span(r.active_seconds),
            r.writes,
            r.hooks
        );
    }
    if let Some(g) = rows.first().filter(|r| r.gap_seconds > 0.0) {
        let _ = writeln!(
            out,
            "GAP: {} of this rule's inputs are not in the recording: firings then are unknown",
            span(g.gap_seconds)
        );
    }
    out.trim_end().to_string()
}

/// The table as JSON.
pub(crate) fn json(s: &Sweep, rows: &[Row]) -> String {
    serde_json::to_string_pretty(
        &serde_json::json!({ "rule": s.rule_name, "swept": s.what, "rows": rows }),
    )
    .unwrap_or_default()
}
