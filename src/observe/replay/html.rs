//! `cgwarden replay … --html FILE`: one self-contained
//! page, per rule a chart of the inputs it reads as the tape holds them,
//! with the replayed firings (red), the recorded ones (grey) and the
//! would-be writes (blue) marked — the report's hand-written SVG charts
//! ([`crate::observe::report`]), no script, no network.

use super::{recorded_episodes, span, when, Outcome, Recording, RuleDiff};
use crate::observe::report::esc;
use crate::observe::report::svg::{chart, Marker, Series, Unit};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// The tape's values of each input, `(ts, value)` at every change (a
/// stall counter as the percent of time stalled since the previous read).
pub(crate) fn series(rec: &Recording) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut last_total: HashMap<String, (f64, f64)> = HashMap::new();
    for row in &rec.rows {
        for (id, entries) in &row.d.series {
            let Some((name, scale)) = rec.keys.get(id) else {
                continue;
            };
            if name.starts_with("trigger(") || name.starts_with("armed(") {
                continue;
            }
            for (idx, v) in entries {
                let (Some(ts), Some(v)) = (row.d.evals.get(*idx as usize), v) else {
                    continue;
                };
                let v = *v as f64 / if *scale > 0.0 { *scale } else { 1.0 };
                if let Some(line) = name.strip_suffix(".total") {
                    // µs of stall per second of time, as a percent.
                    if let Some((t0, v0)) = last_total.insert(name.clone(), (*ts, v)) {
                        if *ts > t0 && v >= v0 {
                            let pct = (v - v0) / (ts - t0) / 10_000.0;
                            out.entry(format!("{line} (stall %)"))
                                .or_default()
                                .push((*ts, pct));
                        }
                    }
                } else {
                    out.entry(name.clone()).or_default().push((*ts, v));
                }
            }
        }
    }
    out
}

/// The chart unit of an input, and the factor to it.
fn unit(name: &str) -> (Unit, f64) {
    if name.ends_with(".temp") || name.contains(".trip.") {
        (Unit::Celsius, 0.001)
    } else if name.contains(".avg") || name.ends_with("(stall %)") {
        (Unit::Percent, 1.0)
    } else {
        (Unit::Bytes, 1.0) // counts, bytes, kHz: plain numbers with K/M/G
    }
}

/// The page.
pub(crate) fn page(
    policy: &crate::policy::model::Policy,
    out: &Outcome,
    diff: &[RuleDiff],
    rec: &Recording,
) -> String {
    let inputs = series(rec);
    let recorded = recorded_episodes(rec);
    let mut s = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>cgwarden replay</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:2px 8px}</style></head><body>",
    );
    let _ = write!(
        s,
        "<h1>cgwarden replay</h1><p>{} .. {} ({}, {} evaluations). Marks: \
         <span style=\"color:#c00\">replayed firing</span>, \
         <span style=\"color:#888\">recorded firing</span>, \
         <span style=\"color:#06c\">would-be write</span>.</p><table><tr><th>rule</th>\
         <th>recorded</th><th>replayed</th><th>matched</th><th>active</th><th>writes</th></tr>",
        esc(&when(out.from)),
        esc(&when(out.to)),
        esc(&span(out.to - out.from)),
        out.evaluations
    );
    for d in diff {
        let active = out
            .rules
            .iter()
            .find(|r| r.name == d.rule)
            .map_or(0.0, |r| r.active_seconds);
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.rule),
            d.recorded,
            d.replayed,
            d.matched,
            esc(&span(active)),
            d.replayed_writes
        );
    }
    s.push_str("</table>");
    for (i, rule) in policy.rules.iter().enumerate() {
        let Some(r) = out.rules.get(i) else { continue };
        let _ = write!(
            s,
            "<h2>{}</h2><p><code>{}</code></p>",
            esc(&r.name),
            esc(&rule.when_text)
        );
        let mut markers: Vec<Marker> = r
            .episodes
            .iter()
            .map(|e| Marker {
                ts: e.start,
                color: "#c00",
                title: format!("would fire: {}", e.why),
            })
            .collect();
        markers.extend(recorded.get(&r.name).into_iter().flatten().map(|e| Marker {
            ts: e.0,
            color: "#888",
            title: format!("fired in the recording at {}", when(e.0)),
        }));
        markers.extend(
            out.actions
                .iter()
                .filter(|a| a.kind == "write" && a.rule.as_deref() == Some(&r.name))
                .map(|a| Marker {
                    ts: a.ts,
                    color: "#06c",
                    title: format!("would write {}", a.what),
                }),
        );
        let mut leaves = BTreeMap::new();
        crate::observe::tape::expr_leaves(&rule.when, &mut leaves);
        let mut charted = 0;
        for name in leaves.keys() {
            let key = match name.strip_suffix(".total") {
                Some(line) => format!("{line} (stall %)"),
                None => name.clone(),
            };
            let Some(points) = inputs.get(&key) else {
                continue;
            };
            let (u, k) = unit(&key);
            let line = Series {
                label: &key,
                color: "#333",
                dashed: false,
                points: points.iter().map(|(t, v)| (*t, v * k)).collect(),
            };
            s.push_str(&chart(&key, out.from, out.to, u, &[line], &markers));
            charted += 1;
        }
        if charted == 0 {
            s.push_str("<p>No input of this rule is on the tape (see the gaps).</p>");
        }
        for g in out.gaps.iter().filter(|g| g.rule == r.name) {
            let _ = write!(
                s,
                "<p><b>GAP</b>: {} is not in the recording from {} to {}: firings then are unknown.</p>",
                esc(&g.input),
                esc(&when(g.from)),
                esc(&when(g.to))
            );
        }
    }
    s.push_str("</body></html>\n");
    s
}
