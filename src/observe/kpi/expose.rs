//! The KPIs in the metrics exposition: `cgwarden_kpi{name,unit}`
//! as a summary — quantiles 0.5/0.9/0.99 over the trailing
//! [`super::METRICS_WINDOW`], `_sum` and `_count` since the daemon started
//! (counters, as Prometheus expects of a summary) — plus the accepted and
//! refused sample counters. prometheus-client (0.24) encodes no summary, so
//! these lines are written here, in its OpenMetrics text form, and spliced
//! before its `# EOF`.

use super::{Refusal, Row, Store};
use std::fmt::Write;
use std::time::Instant;

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The KPI families as OpenMetrics text (no `# EOF`).
pub(crate) fn families(store: &Store, now: Instant) -> String {
    let rows: Vec<Row> = store.rows(super::METRICS_WINDOW, now);
    let mut out = String::with_capacity(256 + rows.len() * 400);
    let _ = writeln!(
        out,
        "# HELP cgwarden_kpi KPI samples applications reported (docs/kpi.md): quantiles over the last 5 minutes, sum and count since the daemon started; unit seconds (times) or none."
    );
    let _ = writeln!(out, "# TYPE cgwarden_kpi summary");
    for r in &rows {
        // Names are [A-Za-z0-9_.-]: nothing to escape.
        let l = format!("name=\"{}\",unit=\"{}\"", r.name, r.unit.name());
        if let Some(w) = &r.window {
            for (q, v) in [("0.5", w.p50), ("0.9", w.p90), ("0.99", w.p99)] {
                let _ = writeln!(out, "cgwarden_kpi{{{l},quantile=\"{q}\"}} {}", num(v));
            }
        }
        let _ = writeln!(out, "cgwarden_kpi_sum{{{l}}} {}", num(r.total_sum));
        let _ = writeln!(out, "cgwarden_kpi_count{{{l}}} {}", r.total_count);
    }
    let _ = writeln!(
        out,
        "# HELP cgwarden_kpi_samples KPI samples accepted (all names)."
    );
    let _ = writeln!(out, "# TYPE cgwarden_kpi_samples counter");
    let _ = writeln!(out, "cgwarden_kpi_samples_total {}", store.accepted());
    let _ = writeln!(
        out,
        "# HELP cgwarden_kpi_refused KPI samples refused, by reason: name (invalid), names (more than 64), value, unit (a time for a number's name or the reverse), malformed (a StatsD line), memory (past the bucket budget)."
    );
    let _ = writeln!(out, "# TYPE cgwarden_kpi_refused counter");
    for (r, n) in store.refused() {
        let _ = writeln!(
            out,
            "cgwarden_kpi_refused_total{{reason=\"{}\"}} {n}",
            Refusal::label(r)
        );
    }
    out
}

/// `om` with the KPI families inserted before its `# EOF`.
pub(crate) fn splice(mut om: String, store: &Store, now: Instant) -> String {
    let fams = families(store, now);
    match om.rfind("# EOF") {
        Some(at) => om.insert_str(at, &fams),
        None => om.push_str(&fams),
    }
    om
}
