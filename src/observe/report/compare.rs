//! `cgwarden report --compare A B`: a before/after table ("NPU P99 28 → 18 ms,
//! throttles 47 → 3, OOM 2 → 0") from two runs. A and B are each a flight
//! recorder database or a report JSON (`report --json`), told apart by
//! their first bytes (SQLite's magic header, or `{`). A database becomes the
//! same JSON `cgwarden report` writes (the same reading and verdicts), so both
//! kinds are compared through one form, the report JSON.
//!
//! Rows (docs/report.md, "Comparing two runs"): every criterion by
//! (id, subject), every KPI of the top-level `"kpis"` array (p50, p99,
//! mean, stddev) and every measurement of `"measurements"` (fragmentation),
//! A's and B's value and verdict side by side with the change. A row on one
//! side only is shown as such. The change in percent is relative to A; a
//! change from 0 has no percent (`new`).
//!
//! The window of a database: its own data — the whole of it, or with
//! `--since D` the last D before its last sample (two recordings are
//! usually from different days, so "the last 72 h before now" would miss
//! the older one). Exit status: B's verdict (0 passed, 1 a criterion of B
//! failed); 4 when an input is missing, 75 when one cannot be read (not
//! SQLite nor JSON, damaged) or the output cannot be written.

use super::{query, verdict};
use crate::exit;
use crate::policy::model::ReportCriteria;
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod html;

/// The comparison's output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// A plain table for a terminal (the default without `--out`).
    Text,
    Html,
    Json,
}

/// What `cgwarden report --compare A B` was asked.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) a: PathBuf,
    pub(crate) b: PathBuf,
    /// A database's window: the last `since` of its data; none: all of it.
    pub(crate) since: Option<Duration>,
    pub(crate) out: Option<PathBuf>,
    pub(crate) format: Format,
    /// The criteria databases are judged by (JSON inputs carry their own).
    pub(crate) criteria: ReportCriteria,
}

/// Why an input could not be used.
#[derive(Debug)]
pub(crate) enum InputError {
    Missing(String),
    Unreadable(String),
}

/// One side: where it came from and its report JSON.
#[derive(Clone, Debug)]
pub(crate) struct Side {
    pub(crate) source: String,
    /// `database` | `json`
    pub(crate) kind: &'static str,
    pub(crate) report: Value,
}

/// The SQLite file header (https://www.sqlite.org/fileformat.html §1.3.1).
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Reads one input: a recorder database (judged by `criteria`, windowed by
/// `since`) or a report JSON.
pub(crate) fn load(
    path: &Path,
    since: Option<Duration>,
    criteria: &ReportCriteria,
) -> Result<Side, InputError> {
    let name = path.display().to_string();
    let unreadable = |e: std::io::Error| InputError::Unreadable(format!("{name}: {e}"));
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(InputError::Missing(format!("no file at {name}")))
        }
        Err(e) => return Err(unreadable(e)),
    };
    // The header only: a database may be tens of MiB, read by SQLite itself.
    let mut head = Vec::with_capacity(SQLITE_MAGIC.len());
    (&mut file)
        .take(SQLITE_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(unreadable)?;
    if head == SQLITE_MAGIC {
        let report = from_database(path, since, criteria)
            .map_err(|e| InputError::Unreadable(format!("{name}: {e}")))?;
        return Ok(Side {
            source: name,
            kind: "database",
            report,
        });
    }
    let mut bytes = head;
    file.read_to_end(&mut bytes).map_err(unreadable)?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(InputError::Unreadable(format!(
            "{name}: neither a flight recorder database (SQLite) nor a report JSON"
        )));
    }
    let report: Value = serde_json::from_slice(&bytes)
        .map_err(|e| InputError::Unreadable(format!("{name}: not valid JSON: {e}")))?;
    if !report.get("criteria").is_some_and(Value::is_array) {
        return Err(InputError::Unreadable(format!(
            "{name}: a JSON without a \"criteria\" array is not a cgwarden report"
        )));
    }
    Ok(Side {
        source: name,
        kind: "json",
        report,
    })
}

/// The first and last time recorded in a database (samples, processes,
/// events); none when it holds no row.
fn data_span(path: &Path) -> rusqlite::Result<Option<(f64, f64)>> {
    let db = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.busy_timeout(Duration::from_secs(5))?;
    let (lo, hi): (Option<f64>, Option<f64>) = db.query_row(
        "SELECT min(ts), max(ts) FROM (SELECT ts FROM samples UNION ALL SELECT ts FROM processes \
         UNION ALL SELECT ts FROM events) WHERE typeof(ts) IN ('real', 'integer') \
         AND ts BETWEEN 0 AND 4e11",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(lo.zip(hi))
}

/// A database's report JSON over its own data (see the module docs).
fn from_database(
    path: &Path,
    since: Option<Duration>,
    criteria: &ReportCriteria,
) -> Result<Value, String> {
    let (first, last) = data_span(path)
        .map_err(|e| e.to_string())?
        .unwrap_or((0.0, 0.0));
    let from = match since {
        Some(d) => (last - d.as_secs_f64()).max(first.min(last)),
        None => first,
    };
    let d = match query::read(path, from, last) {
        Ok(d) => d,
        Err(query::ReadError::Missing) => return Err("no such file".into()),
        Err(query::ReadError::Unreadable(e)) => return Err(e),
    };
    let mut v = verdict::judge(criteria, &d.inputs());
    // The KPI criteria and the `kpis` array, as `report` has them.
    let kpis = super::kpi::read(path, from, last);
    v.extend(super::kpi::judge(criteria, &kpis));
    let passed = verdict::passed(&v);
    let mut j = super::to_json(&path.display().to_string(), &d, &v, passed);
    j["kpis"] = super::kpi::json(&kpis);
    Ok(j)
}

/// One side's value and verdict in a row.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Cell {
    /// In the row's unit; none when not measured.
    pub(crate) value: Option<f64>,
    /// `pass` | `fail` | `not_measured`; none for KPIs and measurements.
    pub(crate) status: Option<String>,
}

/// How B differs from A.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Change {
    /// Both measured: B − A, and the percent of A (none when A is 0).
    Changed {
        absolute: f64,
        percent: Option<f64>,
    },
    /// A side did not measure it.
    NotMeasured,
    OnlyA,
    OnlyB,
}

impl Change {
    fn of(a: Option<&Cell>, b: Option<&Cell>) -> Change {
        match (a, b) {
            (Some(_), None) => Change::OnlyA,
            (None, Some(_)) => Change::OnlyB,
            (Some(Cell { value: Some(x), .. }), Some(Cell { value: Some(y), .. })) => {
                Change::Changed {
                    absolute: y - x,
                    percent: percent(*x, *y),
                }
            }
            _ => Change::NotMeasured,
        }
    }

    /// `same` | `changed` | `new` | `not_measured` | `only_a` | `only_b`
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Change::Changed { absolute: 0.0, .. } => "same",
            Change::Changed { percent: None, .. } => "new",
            Change::Changed { .. } => "changed",
            Change::NotMeasured => "not_measured",
            Change::OnlyA => "only_a",
            Change::OnlyB => "only_b",
        }
    }
}

/// B relative to A in percent: none from 0 to something else (that is
/// "new", not an infinite change); 0 when both are 0.
pub(crate) fn percent(a: f64, b: f64) -> Option<f64> {
    if a == 0.0 {
        return (b == 0.0).then_some(0.0);
    }
    let p = (b - a) / a.abs() * 100.0;
    p.is_finite().then_some(p)
}

/// One line of the table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    /// `criterion` | `kpi` | `measurement`
    pub(crate) section: &'static str,
    /// The criterion id, KPI name or measurement id.
    pub(crate) id: String,
    /// The criterion's subject, the KPI's statistic, the measurement's subject.
    pub(crate) subject: String,
    /// `count` | `bytes` | `percent` | `seconds` | `none`
    pub(crate) unit: String,
    pub(crate) a: Option<Cell>,
    pub(crate) b: Option<Cell>,
    pub(crate) change: Change,
}

/// The KPI statistics compared, in order.
pub(crate) const KPI_STATS: [&str; 4] = ["p50", "p99", "mean", "stddev"];

fn text(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(o) => o.to_string(),
    }
}

fn number(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn array<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A report's rows keyed (section, id, subject), in the report's order.
fn cells(r: &Value) -> Vec<((&'static str, String, String), String, Cell)> {
    let mut out = Vec::new();
    for c in array(r, "criteria") {
        out.push((
            ("criterion", text(c, "id"), text(c, "subject")),
            text(c, "unit"),
            Cell {
                value: number(c, "measured"),
                status: Some(text(c, "status")).filter(|s| !s.is_empty()),
            },
        ));
    }
    for k in array(r, "kpis") {
        for stat in KPI_STATS {
            out.push((
                ("kpi", text(k, "name"), stat.to_string()),
                Some(text(k, "unit"))
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| "none".into()),
                Cell {
                    value: number(k, stat),
                    status: None,
                },
            ));
        }
    }
    for m in array(r, "measurements") {
        out.push((
            ("measurement", text(m, "id"), text(m, "subject")),
            text(m, "unit"),
            Cell {
                value: number(m, "mean"),
                status: None,
            },
        ));
    }
    out
}

/// The rows of A against B: A's order, then the rows only B has; within a
/// section, rows stay together.
pub(crate) fn rows(a: &Value, b: &Value) -> Vec<Row> {
    let ca = cells(a);
    let mut cb = cells(b);
    let mut out = Vec::new();
    for section in ["criterion", "kpi", "measurement"] {
        for (key, unit, cell) in ca.iter().filter(|c| c.0 .0 == section) {
            let other = cb.iter().position(|c| &c.0 == key).map(|i| cb.remove(i));
            let (unit_b, cell_b) = match other {
                Some((_, u, c)) => (Some(u), Some(c)),
                None => (None, None),
            };
            out.push(Row {
                section,
                id: key.1.clone(),
                subject: key.2.clone(),
                unit: if unit.is_empty() {
                    unit_b.unwrap_or_default()
                } else {
                    unit.clone()
                },
                change: Change::of(Some(cell), cell_b.as_ref()),
                a: Some(cell.clone()),
                b: cell_b,
            });
        }
        for (key, unit, cell) in cb.iter().filter(|c| c.0 .0 == section) {
            out.push(Row {
                section,
                id: key.1.clone(),
                subject: key.2.clone(),
                unit: unit.clone(),
                change: Change::OnlyB,
                a: None,
                b: Some(cell.clone()),
            });
        }
    }
    out
}

/// A value for people, in its unit (KPI seconds as ms).
pub(crate) fn human(v: f64, unit: &str) -> String {
    match unit {
        "seconds" => {
            let ms = v * 1000.0;
            if ms.abs() >= 100.0 {
                format!("{ms:.0} ms")
            } else {
                format!("{ms:.1} ms")
            }
        }
        "bytes" | "percent" => super::human_value(v, unit),
        "count" => format!("{v:.0}"),
        _ => {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        }
    }
}

/// The change for people: `-10.0 ms (-35.7 %)`, `-9.20 pp (-74.8 %)`,
/// `+3 (new)`, `=`.
pub(crate) fn human_change(r: &Row) -> String {
    match r.change {
        Change::Changed { absolute: 0.0, .. } => "=".into(),
        Change::Changed { absolute, percent } => {
            let sign = if absolute > 0.0 { "+" } else { "-" };
            // A change of a percentage is in percentage points.
            let abs = match r.unit.as_str() {
                "percent" => format!("{:.2} pp", absolute.abs()),
                u => human(absolute.abs(), u),
            };
            match percent {
                Some(p) => format!("{sign}{abs} ({p:+.1} %)"),
                None => format!("{sign}{abs} (new)"),
            }
        }
        Change::NotMeasured => "not measured".into(),
        Change::OnlyA => "only in A".into(),
        Change::OnlyB => "only in B".into(),
    }
}

/// A side's cell for people.
pub(crate) fn human_cell(c: Option<&Cell>, unit: &str) -> (String, String) {
    match c {
        None => ("–".into(), String::new()),
        Some(c) => (
            c.value
                .map(|v| human(v, unit))
                .unwrap_or_else(|| "not measured".into()),
            match c.status.as_deref() {
                Some("pass") => "PASS".into(),
                Some("fail") => "FAIL".into(),
                Some("not_measured") => "-".into(),
                Some(s) => s.to_string(),
                None => String::new(),
            },
        ),
    }
}

/// What a row is called in the table.
pub(crate) fn label(r: &Row) -> String {
    match (r.section, super::html::name(r.id.as_str())) {
        ("criterion", n) if n != "other" => n.to_string(),
        _ => r.id.clone(),
    }
}

fn side_json(s: &Side) -> Value {
    json!({
        "source": s.source,
        "kind": s.kind,
        "product": s.report.get("product").cloned().unwrap_or(Value::Null),
        "window": s.report.get("window").cloned().unwrap_or(Value::Null),
        "passed": s.report.get("passed").and_then(Value::as_bool),
    })
}

fn cell_json(c: Option<&Cell>) -> Value {
    match c {
        None => Value::Null,
        Some(c) => json!({ "value": c.value, "status": c.status }),
    }
}

/// The JSON form (docs/report.md; field names are stable).
pub(crate) fn to_json(a: &Side, b: &Side, rows: &[Row]) -> Value {
    json!({
        "compare": "cgwarden",
        "version": 1,
        "a": side_json(a),
        "b": side_json(b),
        "passed": b_passed(b),
        "rows": rows.iter().map(|r| {
            let (absolute, percent) = match r.change {
                Change::Changed { absolute, percent } => (Some(absolute), percent),
                _ => (None, None),
            };
            json!({
                "section": r.section,
                "id": r.id,
                "subject": r.subject,
                "unit": r.unit,
                "a": cell_json(r.a.as_ref()),
                "b": cell_json(r.b.as_ref()),
                "change": { "kind": r.change.kind(), "absolute": absolute, "percent": percent },
            })
        }).collect::<Vec<_>>(),
    })
}

/// B passes when no criterion of B failed.
fn b_passed(b: &Side) -> bool {
    !array(&b.report, "criteria")
        .iter()
        .any(|c| c.get("status").and_then(Value::as_str) == Some("fail"))
}

/// The plain table.
pub(crate) fn to_text(a: &Side, b: &Side, rows: &[Row]) -> String {
    let mut lines = vec![[
        "".to_string(),
        "".into(),
        "A".into(),
        "B".into(),
        "change".into(),
        "A".into(),
        "B".into(),
    ]];
    for r in rows {
        let (va, sa) = human_cell(r.a.as_ref(), &r.unit);
        let (vb, sb) = human_cell(r.b.as_ref(), &r.unit);
        lines.push([label(r), r.subject.clone(), va, vb, human_change(r), sa, sb]);
    }
    let width = |i: usize| {
        lines
            .iter()
            .map(|l| l[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..7).map(width).collect();
    let pad = |s: &str, n: usize, right: bool| {
        let fill = " ".repeat(n.saturating_sub(s.chars().count()));
        if right {
            format!("{fill}{s}")
        } else {
            format!("{s}{fill}")
        }
    };
    let mut out = format!(
        "A: {} ({})\nB: {} ({})\n",
        a.source, a.kind, b.source, b.kind
    );
    for l in &lines {
        let cols: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, s)| pad(s, w[i], (2..5).contains(&i)))
            .collect();
        out.push_str(cols.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "B: {}\n",
        if b_passed(b) { "PASS" } else { "FAIL" }
    ));
    out
}

/// Runs `cgwarden report --compare`; returns the exit status.
pub(crate) fn run(o: &Options) -> u8 {
    let mut sides = Vec::new();
    for p in [&o.a, &o.b] {
        match load(p, o.since, &o.criteria) {
            Ok(s) => sides.push(s),
            Err(InputError::Missing(e)) => {
                eprintln!("cgwarden: error: report --compare: {e}");
                return exit::UNREACHABLE;
            }
            Err(InputError::Unreadable(e)) => {
                eprintln!("cgwarden: error: report --compare: cannot read {e}");
                return exit::TEMPFAIL;
            }
        }
    }
    let (a, b) = (&sides[0], &sides[1]);
    let rows = rows(&a.report, &b.report);
    let text = match o.format {
        Format::Text => to_text(a, b, &rows),
        Format::Html => html::page(a, b, &rows, b_passed(b)),
        Format::Json => {
            serde_json::to_string_pretty(&to_json(a, b, &rows))
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
                + "\n"
        }
    };
    match &o.out {
        None => {
            crate::out::bytes(text.as_bytes());
            if crate::out::failed() {
                return exit::TEMPFAIL;
            }
        }
        Some(p) => {
            if let Err(e) = std::fs::write(p, &text) {
                eprintln!(
                    "cgwarden: error: report --compare: cannot write {}: {e}",
                    p.display()
                );
                return exit::TEMPFAIL;
            }
            // The table for whoever ran it, as without --out.
            crate::out::bytes(to_text(a, b, &rows).as_bytes());
        }
    }
    if b_passed(b) {
        exit::OK
    } else {
        exit::REFUSED
    }
}

#[cfg(test)]
mod tests;
