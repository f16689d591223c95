//! The report's KPI criteria and its `kpis` table:
//! `loop_p99` (default < 5 ms) and `fps_stddev` (default < 2), judged from
//! the recorder's `kpi` table over the report's window, and every KPI's
//! summary for the JSON `kpis` array (read by `report --compare`) and the
//! page.
//!
//! Definitions:
//! - `loop_p99`: the 99th percentile of every sample of the KPI
//!   `report.criteria.loop_kpi` (default `loop_latency`) in the window; and
//!   of the KPI `cyclictest` (what `cgwarden kpi --cyclictest` records)
//!   when it has samples. With both, the higher p99 is judged and the
//!   detail names both. The KPI must be a time: a `|ms` timer, a value
//!   with a unit (`2.1ms`), or a plain number whose name ends in `_us`,
//!   `_ms` or `_s` (`loop_latency_us`), read in that
//!   unit. Fails when p99 ≥ the limit; "failed at" is the first recorder
//!   interval whose own p99 reached it.
//! - `fps_stddev`: the population standard deviation of every sample of
//!   the KPI `report.criteria.fps_kpi` (default `fps`) in the window. Fails
//!   when ≥ the limit; "failed at" is the first interval whose own
//!   deviation reached it.
//! - No sample in the window: `not_measured` (never a pass).

use super::verdict::{Status, Verdict};
use crate::observe::kpi::record::{self, Merged};
use crate::observe::kpi::{Hist, Unit};
use crate::policy::model::ReportCriteria;
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};
use std::path::Path;

/// What the KPI part of a report read: every KPI in the window.
#[derive(Debug, Default)]
pub(crate) struct Kpis {
    merged: Merged,
    /// Per-interval rows, for "failed at": (ts, name, histogram).
    rows: Vec<(f64, String, Hist)>,
    /// Rows that did not decode.
    skipped: u64,
}

/// Reads the window's KPI rows; a database without them has no KPI.
pub(crate) fn read(db: &Path, from: f64, to: f64) -> Kpis {
    let open = || -> rusqlite::Result<Kpis> {
        let conn = Connection::open_with_flags(
            db,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let (merged, skipped) = record::window(&conn, from, to)?;
        let rows = record::rows(&conn, from, to)?;
        Ok(Kpis {
            merged,
            rows,
            skipped,
        })
    };
    open().unwrap_or_else(|e| {
        eprintln!("cgwarden: warning: report: the KPI rows cannot be read: {e}");
        Kpis::default()
    })
}

/// How a KPI's values convert to seconds, if it is a time.
fn to_seconds(name: &str, unit: Unit) -> Option<f64> {
    match unit {
        Unit::Seconds => Some(1.0),
        Unit::None if name.ends_with("_us") => Some(1e-6),
        Unit::None if name.ends_with("_ms") => Some(1e-3),
        Unit::None if name.ends_with("_s") => Some(1.0),
        Unit::None => None,
    }
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

/// The two KPI verdicts.
pub(crate) fn judge(c: &ReportCriteria, k: &Kpis) -> Vec<Verdict> {
    vec![loop_p99(c, k), fps_stddev(c, k)]
}

fn not_measured(
    id: &'static str,
    subject: String,
    limit: f64,
    unit: &'static str,
    detail: String,
) -> Verdict {
    Verdict {
        id,
        subject,
        status: Status::NotMeasured,
        limit,
        measured: None,
        unit,
        failed_at: None,
        detail,
    }
}

fn loop_p99(c: &ReportCriteria, k: &Kpis) -> Verdict {
    let limit = c.loop_p99.as_secs_f64();
    let mut sources = vec![c.loop_kpi.as_str()];
    if c.loop_kpi != "cyclictest" {
        sources.push("cyclictest");
    }
    let mut found: Vec<(&str, f64, f64, u64)> = Vec::new(); // (name, scale, p99 s, count)
    let mut notes = Vec::new();
    for name in &sources {
        let Some((unit, h)) = k.merged.get(*name) else {
            continue;
        };
        let Some(scale) = to_seconds(name, *unit) else {
            notes.push(format!(
                "KPI {name} is a plain number, not a time: send it as a |ms timer, with a unit (2.1ms) or name it {name}_us"
            ));
            continue;
        };
        if let Some(p) = h.quantile(0.99) {
            found.push((name, scale, p * scale, h.count));
        }
    }
    let subject = format!("KPI {}", sources.join(" or "));
    let Some(worst) = found.iter().copied().max_by(|a, b| a.2.total_cmp(&b.2)) else {
        let mut d = format!("no sample of {} in the window", sources.join(" or "));
        for n in notes {
            d.push_str("; ");
            d.push_str(&n);
        }
        return not_measured("loop_p99", subject, limit, "seconds", d);
    };
    let detail = found
        .iter()
        .map(|(n, _, p, count)| {
            format!(
                "{n}: p99 {} over {}",
                ms(*p),
                crate::show::count(*count, "sample")
            )
        })
        .chain(notes)
        .collect::<Vec<_>>()
        .join("; ");
    let fail = worst.2 >= limit;
    let failed_at = fail
        .then(|| {
            k.rows.iter().find_map(|(ts, n, h)| {
                (n == worst.0 && h.quantile(0.99).is_some_and(|p| p * worst.1 >= limit))
                    .then_some(*ts)
            })
        })
        .flatten();
    Verdict {
        id: "loop_p99",
        subject: format!("KPI {}", worst.0),
        status: if fail { Status::Fail } else { Status::Pass },
        limit,
        measured: Some(worst.2),
        unit: "seconds",
        failed_at,
        detail,
    }
}

fn fps_stddev(c: &ReportCriteria, k: &Kpis) -> Verdict {
    let limit = c.fps_stddev;
    let name = c.fps_kpi.as_str();
    let subject = format!("KPI {name}");
    let Some((_, h)) = k.merged.get(name) else {
        return not_measured(
            "fps_stddev",
            subject,
            limit,
            "number",
            format!("no sample of {name} in the window"),
        );
    };
    let Some(sd) = h.stddev() else {
        return not_measured(
            "fps_stddev",
            subject,
            limit,
            "number",
            format!("no sample of {name} in the window"),
        );
    };
    let fail = sd >= limit;
    let failed_at = fail
        .then(|| {
            k.rows.iter().find_map(|(ts, n, h)| {
                (n == name && h.stddev().is_some_and(|s| s >= limit)).then_some(*ts)
            })
        })
        .flatten();
    Verdict {
        id: "fps_stddev",
        subject,
        status: if fail { Status::Fail } else { Status::Pass },
        limit,
        measured: Some(sd),
        unit: "number",
        failed_at,
        detail: format!(
            "{name}: mean {:.2}, stddev {sd:.3} over {}",
            h.mean().unwrap_or(0.0),
            crate::show::count(h.count, "sample")
        ),
    }
}

/// The JSON `kpis` array (docs/report.md; read by `report --compare`).
pub(crate) fn json(k: &Kpis) -> Value {
    let num = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
    Value::Array(
        k.merged
            .iter()
            .filter_map(|(name, (unit, h))| {
                let s = h.summary()?;
                Some(json!({
                    "name": name,
                    "unit": unit.name(),
                    "count": s.count,
                    "min": num(s.min),
                    "mean": num(s.mean),
                    "stddev": num(s.stddev),
                    "p50": num(s.p50),
                    "p90": num(s.p90),
                    "p99": num(s.p99),
                    "max": num(s.max),
                }))
            })
            .collect(),
    )
}

/// The page's KPI table, inserted before the verdicts' end of page.
pub(crate) fn html(k: &Kpis) -> String {
    use std::fmt::Write;
    let mut o = String::from("<h2>KPIs</h2>");
    if k.merged.is_empty() {
        o.push_str("<p>No KPI was reported in the window (docs/kpi.md).</p>");
        return o;
    }
    o.push_str(
        "<table id=\"kpis\"><tr><th>KPI</th><th>unit</th><th>samples</th><th>min</th><th>mean</th>\
         <th>stddev</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>",
    );
    for (name, (unit, h)) in &k.merged {
        let Some(s) = h.summary() else { continue };
        let f = |v: f64| match unit {
            Unit::Seconds => ms(v),
            Unit::None => format!("{v:.3}"),
        };
        let _ = write!(
            o,
            "<tr data-kpi=\"{n}\"><td>{n}</td><td>{u}</td><td class=\"num\">{c}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            f(s.min),
            f(s.mean),
            f(s.stddev),
            f(s.p50),
            f(s.p90),
            f(s.p99),
            f(s.max),
            n = super::esc(name),
            u = unit.name(),
            c = s.count,
        );
    }
    o.push_str("</table>");
    if k.skipped > 0 {
        let _ = write!(
            o,
            "<p>{} KPI rows could not be read and were skipped.</p>",
            k.skipped
        );
    }
    o
}

/// `page` with the KPI table before the runs table (or at the end).
pub(crate) fn splice_html(mut page: String, k: &Kpis) -> String {
    let table = html(k);
    let at = page
        .find("<h2>Daemon runs</h2>")
        .or_else(|| page.rfind("</body>"))
        .unwrap_or(page.len());
    page.insert_str(at, &table);
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    type Row<'a> = (f64, &'a str, Unit, &'a [(f64, u64)]);

    fn kpis(rows: &[Row<'_>]) -> Kpis {
        let mut k = Kpis::default();
        for (ts, name, unit, samples) in rows {
            let mut h = Hist::default();
            for (v, n) in *samples {
                h.add(*v, *n);
            }
            k.merged
                .entry(name.to_string())
                .or_insert((*unit, Hist::default()))
                .1
                .merge(&h);
            k.rows.push((*ts, name.to_string(), h));
        }
        k
    }

    #[test]
    fn no_data_is_not_measured_never_pass() {
        let v = judge(&ReportCriteria::default(), &Kpis::default());
        assert_eq!(v.len(), 2);
        assert!(v
            .iter()
            .all(|v| v.status == Status::NotMeasured && v.measured.is_none()));
        assert!(
            v[0].detail.contains("loop_latency or cyclictest"),
            "{}",
            v[0].detail
        );
    }

    #[test]
    fn loop_p99_passes_fails_and_names_its_source() {
        let c = ReportCriteria::default();
        let ok = kpis(&[(
            10.0,
            "loop_latency",
            Unit::Seconds,
            &[(0.002, 990), (0.004, 10)],
        )]);
        let v = loop_p99(&c, &ok);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!((v.measured.unwrap() - 0.002).abs() < 0.002 / 64.0);
        // A slow second interval: the p99 of the window crosses 5 ms.
        let slow = kpis(&[
            (10.0, "loop_latency", Unit::Seconds, &[(0.002, 900)]),
            (20.0, "loop_latency", Unit::Seconds, &[(0.009, 100)]),
        ]);
        let v = loop_p99(&c, &slow);
        assert_eq!((v.status, v.failed_at), (Status::Fail, Some(20.0)), "{v:?}");
        // cyclictest only: judged from it, and the detail says so.
        let cyc = kpis(&[(10.0, "cyclictest", Unit::Seconds, &[(50e-6, 1000)])]);
        let v = loop_p99(&c, &cyc);
        assert_eq!(v.status, Status::Pass);
        assert!(v.detail.starts_with("cyclictest: p99"), "{}", v.detail);
        // A µs gauge by its name; a plain number without one is refused.
        let mut c2 = c.clone();
        c2.loop_kpi = "loop_latency_us".into();
        let us = kpis(&[(10.0, "loop_latency_us", Unit::None, &[(6000.0, 100)])]);
        assert_eq!(loop_p99(&c2, &us).status, Status::Fail);
        c2.loop_kpi = "loop".into();
        let plain = kpis(&[(10.0, "loop", Unit::None, &[(6000.0, 100)])]);
        let v = loop_p99(&c2, &plain);
        assert_eq!(v.status, Status::NotMeasured);
        assert!(v.detail.contains("not a time"), "{}", v.detail);
    }

    #[test]
    fn fps_stddev_judged() {
        let c = ReportCriteria::default();
        let steady = kpis(&[(10.0, "fps", Unit::None, &[(30.0, 50), (29.0, 50)])]);
        let v = fps_stddev(&c, &steady);
        assert_eq!(v.status, Status::Pass);
        assert!((v.measured.unwrap() - 0.5).abs() < 1e-9);
        let jitter = kpis(&[
            (10.0, "fps", Unit::None, &[(30.0, 50)]),
            (20.0, "fps", Unit::None, &[(20.0, 25), (30.0, 25)]),
        ]);
        let v = fps_stddev(&c, &jitter);
        assert_eq!((v.status, v.failed_at), (Status::Fail, Some(20.0)), "{v:?}");
    }

    #[test]
    fn json_has_the_contract_fields() {
        let k = kpis(&[(10.0, "fps", Unit::None, &[(30.0, 2)])]);
        let j = json(&k);
        let o = j[0].as_object().unwrap();
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        for f in [
            "name", "unit", "count", "min", "mean", "stddev", "p50", "p90", "p99", "max",
        ] {
            assert!(keys.contains(&f), "{f}");
        }
        assert_eq!(o.len(), 10);
        assert_eq!(j[0]["unit"], "none");
        assert_eq!(j[0]["count"], 2);
        assert!(html(&k).contains("data-kpi=\"fps\""));
    }
}
