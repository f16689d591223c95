//! `cgwarden report`: the stability report read
//! from the flight recorder. This module owns the command: finding the
//! database, the window, the output formats and the exit status; the parts
//! are [`query`] (reading the database read-only), [`verdict`] (the criteria,
//! pure), [`svg`] (hand-written charts) and [`html`] (the page).
//!
//! Exit statuses: 0 every criterion passed (or could not be measured), 1 at
//! least one failed, 4 no database at the path (named in the message), 75
//! the database exists but cannot be read, or the output cannot be written.
//! docs/report.md documents the JSON fields and the definitions.

pub(crate) mod compare; // `report --compare A B`
mod html;
mod kpi; // loop_p99, fps_stddev, the kpis table
mod measured; // fragmentation, a figure without a criterion
mod query;
pub(crate) mod svg; // also drawn by `cgwarden replay --html`
mod verdict;
pub(crate) mod window; // `cgwarden soak`'s window, judged and rendered

use crate::exit;
use crate::policy::model::ReportCriteria;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The report's output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Html,
    Json,
}

/// What `cgwarden report` was asked.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// The recorder database.
    pub(crate) db: PathBuf,
    /// The window: the last `since` before now.
    pub(crate) since: Duration,
    /// Where the report goes; none: stdout.
    pub(crate) out: Option<PathBuf>,
    pub(crate) format: Format,
    pub(crate) criteria: ReportCriteria,
}

/// The database file inside `settings.recorder.dir`.
pub(crate) const DB_FILE: &str = "recorder.db";
/// Where the recorder lives when the policy names no `settings.recorder`.
pub(crate) const DEFAULT_DIR: &str = "/var/lib/cgwarden";

/// The database and the criteria: `--db`, else the policy's
/// `settings.recorder.dir` (default /var/lib/cgwarden) under `--root`; the
/// criteria are the policy's `report.criteria` (the defaults when the policy
/// cannot be read, with a warning when it exists).
pub(crate) fn locate(
    db: Option<&Path>,
    policy: &Path,
    root: Option<&Path>,
) -> (PathBuf, ReportCriteria) {
    let loaded = match crate::policy::load(policy) {
        Ok(p) => Some(p),
        Err(d) => {
            if policy.exists() {
                eprint!("{d}");
                eprintln!("cgwarden: warning: report: using the default criteria and recorder dir");
            }
            None
        }
    };
    let criteria = loaded
        .as_ref()
        .map(|p| p.report.clone())
        .unwrap_or_default();
    if let Some(db) = db {
        return (db.to_path_buf(), criteria);
    }
    let dir = loaded
        .and_then(|p| p.settings.recorder.map(|r| r.dir))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    let device = dir.join(DB_FILE);
    let path = match root {
        Some(r) => crate::kernel::Root::fake(r).host_path(&device),
        None => device,
    };
    (path, criteria)
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Unix seconds as RFC 3339 (UTC, seconds); `-` for a time out of range.
pub(crate) fn when(ts: f64) -> String {
    if !ts.is_finite() || !(0.0..4e11).contains(&ts) {
        return "-".into();
    }
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(ts);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// HTML-escapes text for element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A measured value in its unit, for people.
pub(crate) fn human_value(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => {
            let m = v / f64::from(1u32 << 20);
            format!("{m:.1} MiB")
        }
        "percent" => format!("{v:.2} %"),
        "seconds" => format!("{:.3} ms", v * 1e3), // loop_p99
        "number" => format!("{v:.3}"),             // fps_stddev
        _ => format!("{v:.0}"),
    }
}

/// The limit as the criterion states it.
pub(crate) fn human_limit(v: &verdict::Verdict) -> String {
    match v.id {
        "memory_full_avg10" | "loop_p99" | "fps_stddev" => {
            format!("< {}", human_value(v.limit, v.unit))
        }
        "thermal_throttling" => format!("≤ {:.0} per 72 h", v.limit),
        _ => format!("≤ {}", human_value(v.limit, v.unit)),
    }
}

/// The JSON form (docs/report.md; field names are stable).
fn to_json(db: &str, d: &query::Data, v: &[verdict::Verdict], passed: bool) -> serde_json::Value {
    let first = d
        .groups
        .values()
        .filter_map(|s| s.first().map(|x| x.ts))
        .fold(f64::INFINITY, f64::min);
    let last = d
        .groups
        .values()
        .filter_map(|s| s.last().map(|x| x.ts))
        .fold(f64::NEG_INFINITY, f64::max);
    let num = |x: f64| {
        if x.is_finite() {
            json!(x)
        } else {
            serde_json::Value::Null
        }
    };
    json!({
        "report": "cgwarden",
        "version": 1,
        "database": db,
        "product": d.product,
        "window": {
            "from": when(d.from),
            "to": when(d.to),
            "seconds": num(d.to - d.from),
        },
        "data": {
            "first_sample": first.is_finite().then(|| when(first)),
            "last_sample": last.is_finite().then(|| when(last)),
            "groups": d.groups.keys().collect::<Vec<_>>(),
            "runs": d.runs.len(),
            "events": d.events.len(),
        },
        "measurements": measured::json(d),
        "passed": passed,
        "criteria": v.iter().map(|v| json!({
            "id": v.id,
            "subject": v.subject,
            "status": v.status.as_str(),
            "limit": num(v.limit),
            "measured": v.measured.and_then(|m| m.is_finite().then_some(m)),
            "unit": v.unit,
            "failed_at": v.failed_at.map(when),
            "detail": v.detail,
        })).collect::<Vec<_>>(),
    })
}

/// Runs `cgwarden report`; returns the exit status.
/// One verdict as a line: `PASS Name (subject): value, failed at …` (the
/// summary `report --out` and `soak` print).
pub(crate) fn verdict_line(v: &verdict::Verdict) -> String {
    format!(
        "{:<4} {} ({}): {}{}",
        match v.status {
            verdict::Status::Pass => "PASS",
            verdict::Status::Fail => "FAIL",
            verdict::Status::NotMeasured => "-",
        },
        html::name(v.id),
        v.subject,
        v.measured
            .map(|m| human_value(m, v.unit))
            .unwrap_or_else(|| "not measured".into()),
        v.failed_at
            .map(|t| format!(", failed at {}", when(t)))
            .unwrap_or_default()
    )
}

/// Every verdict over a window of the database — the recorder's criteria
/// and the KPIs' — and the KPIs read: what `report` and
/// `report --compare` both judge with.
pub(crate) fn judge(
    db: &Path,
    d: &query::Data,
    criteria: &ReportCriteria,
    from: f64,
    to: f64,
) -> (Vec<verdict::Verdict>, kpi::Kpis) {
    let mut verdicts = verdict::judge(criteria, &d.inputs());
    let kpis = kpi::read(db, from, to);
    verdicts.extend(kpi::judge(criteria, &kpis));
    (verdicts, kpis)
}

/// The report's JSON: [`to_json`] with the KPIs' table.
pub(crate) fn json_report(
    db: &str,
    d: &query::Data,
    verdicts: &[verdict::Verdict],
    kpis: &kpi::Kpis,
    passed: bool,
) -> serde_json::Value {
    let mut v = to_json(db, d, verdicts, passed);
    v["kpis"] = kpi::json(kpis);
    v
}

pub(crate) fn run(o: &Options) -> u8 {
    let to = unix(SystemTime::now());
    let from = to - o.since.as_secs_f64();
    let d = match query::read(&o.db, from, to) {
        Ok(d) => d,
        Err(query::ReadError::Missing) => {
            eprintln!(
                "cgwarden: error: report: no flight recorder database at {} (is settings.recorder \
                 set and has the daemon run? --db names the file)",
                o.db.display()
            );
            return exit::UNREACHABLE;
        }
        Err(query::ReadError::Unreadable(e)) => {
            eprintln!(
                "cgwarden: error: report: cannot read the flight recorder database {}: {e}",
                o.db.display()
            );
            return exit::TEMPFAIL;
        }
    };
    if let Some(v) = d.schema_version.as_deref() {
        // Version 1 is read as version 2 (the machine's name aside, they
        // are the same).
        if v.trim() != "1" && v.trim() != super::SCHEMA_VERSION.to_string() {
            eprintln!(
                "cgwarden: warning: report: {} has schema version {v}; this cgwarden reads version {}",
                o.db.display(),
                super::SCHEMA_VERSION
            );
        }
    }
    let (verdicts, kpis) = judge(&o.db, &d, &o.criteria, from, to);
    let passed = verdict::passed(&verdicts);
    let db = o.db.display().to_string();
    let text = match o.format {
        Format::Html => kpi::splice_html(html::page(&db, &d, &verdicts, passed), &kpis),
        Format::Json => {
            let v = json_report(&db, &d, &verdicts, &kpis, passed);
            serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
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
            if let Err(e) = std::fs::write(p, text) {
                eprintln!("cgwarden: error: report: cannot write {}: {e}", p.display());
                return exit::TEMPFAIL;
            }
            // A summary for the log of whoever ran it (CI, an operator).
            for v in &verdicts {
                crate::outln!("{}", verdict_line(v));
            }
            crate::outln!(
                "report {}: {}",
                p.display(),
                if passed { "PASS" } else { "FAIL" }
            );
        }
    }
    if passed {
        exit::OK
    } else {
        exit::REFUSED
    }
}

#[cfg(test)]
mod tests;
