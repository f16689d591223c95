//! The report as one self-contained HTML page: inline CSS, inline SVG
//! charts ([`super::svg`]), no script and no external resource, so it opens
//! anywhere, offline, and can be attached to a test record as it is.
//! Every string from the database is escaped ([`super::esc`]).

use super::query::{Data, EventRow};
use super::svg::{self, Marker, Series, Unit};
use super::verdict::{Status, Verdict};
use super::{esc, human_limit, human_value, when};
use std::fmt::Write as _;

/// At most this many rows in the events table (the newest are kept).
const MAX_EVENT_ROWS: usize = 2000;

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.pass{background:#d9f2d9;font-weight:bold}.fail{background:#f8d0d0;font-weight:bold}.not_measured{background:#eee;color:#666}\
.overall{display:inline-block;padding:4px 12px;font-size:18px;margin:8px 0}\
.meta{color:#555}.chart{width:100%;height:auto;display:block;margin:4px 0 12px}\
.ct{font-size:13px;font-weight:bold}.ax{font-size:10px;fill:#555}.lg{font-size:11px}\
.small{font-size:12px}code{font-size:12px}";

/// The criterion's name for people.
pub(crate) fn name(id: &str) -> &'static str {
    match id {
        "oom_kills" => "OOM kills",
        "memory_growth" => "Memory growth",
        "thermal_throttling" => "Thermal throttling",
        "restarts" => "Restarts",
        "memory_full_avg10" => "PSI memory full avg10",
        "critical_exits" => "Critical process exits",
        "loop_p99" => "Control loop latency p99",
        "fps_stddev" => "Frame rate deviation",
        _ => "other",
    }
}

fn marker_for(e: &EventRow) -> Option<Marker> {
    let color = match e.kind.as_str() {
        "rule" => match e.state.as_deref() {
            Some("active") => "#d62728",
            Some("pending") => "#ff7f0e",
            _ => "#2ca02c",
        },
        "write" => "#1f77b4",
        "write_failed" => "#000000",
        "start" | "stop" => "#7f7f7f",
        "reload" | "reload_failed" => "#17becf",
        k if k.starts_with("claim") => "#9467bd",
        _ => return None,
    };
    Some(Marker {
        ts: e.ts,
        color,
        title: describe(e),
    })
}

/// One line about an event (unescaped).
fn describe(e: &EventRow) -> String {
    let mut s = format!("{} {}", when(e.ts), e.kind);
    if let Some(r) = &e.rule {
        let _ = write!(s, " {r}");
    }
    if let Some(st) = &e.state {
        let _ = write!(s, " → {st}");
    }
    if let Some(k) = &e.knob {
        let _ = write!(
            s,
            " {k} {} → {}",
            e.old.as_deref().unwrap_or("-"),
            e.new.as_deref().unwrap_or("-")
        );
    }
    if let Some(c) = &e.cause {
        let _ = write!(s, " ({c})");
    }
    s
}

/// The whole page.
pub(crate) fn page(db: &str, d: &Data, verdicts: &[Verdict], passed: bool) -> String {
    let mut o = String::with_capacity(256 << 10);
    let product = d.product.as_deref().unwrap_or("(unknown product)");
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>cgwarden report: {p}</title><style>{CSS}</style></head><body>",
        p = esc(product)
    );
    let _ = write!(
        o,
        "<h1>Stability report: {p}</h1><div class=\"meta\">{from} → {to} ({hours:.1} h) · \
         charts {cf} → {ct} ({chours:.1} h of data) · database <code>{db}</code></div>",
        p = esc(product),
        from = when(d.from),
        to = when(d.to),
        hours = (d.to - d.from) / 3600.0,
        cf = when(d.chart_span().0),
        ct = when(d.chart_span().1),
        chours = (d.chart_span().1 - d.chart_span().0) / 3600.0,
        db = esc(db)
    );
    let (cls, word) = if passed {
        ("pass", "PASS")
    } else {
        ("fail", "FAIL")
    };
    let _ = write!(
        o,
        "<div id=\"overall\" class=\"overall {cls}\">{word}</div>"
    );
    verdict_table(&mut o, verdicts);
    let markers: Vec<Marker> = d.events.iter().filter_map(marker_for).collect();
    o.push_str(
        "<h2>Groups</h2><p class=\"small\">Marks: <span style=\"color:#d62728\">■</span> rule \
         active, <span style=\"color:#ff7f0e\">■</span> pending, <span style=\"color:#2ca02c\">■\
         </span> cleared, <span style=\"color:#1f77b4\">■</span> knob written, \
         <span style=\"color:#9467bd\">■</span> claim, <span style=\"color:#7f7f7f\">■</span> \
         daemon start/stop, <span style=\"color:#17becf\">■</span> reload. Hover a mark for \
         what it was. Pressure lines are PSI avg10; memory.high/max dashed.</p>",
    );
    if d.groups.is_empty() {
        o.push_str("<p>No samples in this window.</p>");
    }
    // The charts span the data, not the whole window.
    let (cfrom, cto) = d.chart_span();
    for (g, s) in &d.groups {
        let pick = |f: fn(&super::query::Sample) -> Option<f64>| -> Vec<(f64, f64)> {
            s.iter().filter_map(|x| f(x).map(|v| (x.ts, v))).collect()
        };
        let _ = write!(o, "<h3 id=\"group-{id}\">{g}</h3>", id = esc(g), g = esc(g));
        o.push_str(&svg::chart(
            &format!("{g}: pressure (PSI avg10)"),
            cfrom,
            cto,
            Unit::Percent,
            &[
                Series {
                    label: "memory some",
                    color: "#ff7f0e",
                    dashed: false,
                    points: pick(|x| x.memory_some),
                },
                Series {
                    label: "memory full",
                    color: "#d62728",
                    dashed: false,
                    points: pick(|x| x.memory_full),
                },
                Series {
                    label: "cpu some",
                    color: "#1f77b4",
                    dashed: false,
                    points: pick(|x| x.cpu_some),
                },
                Series {
                    label: "io some",
                    color: "#2ca02c",
                    dashed: false,
                    points: pick(|x| x.io_some),
                },
            ],
            &markers,
        ));
        o.push_str(&svg::chart(
            &format!("{g}: memory"),
            cfrom,
            cto,
            Unit::Bytes,
            &[
                Series {
                    label: "memory.current",
                    color: "#9467bd",
                    dashed: false,
                    points: pick(|x| x.memory_current.map(|v| v as f64)),
                },
                Series {
                    label: "memory.high",
                    color: "#ff7f0e",
                    dashed: true,
                    points: pick(|x| x.memory_high.map(|v| v as f64)),
                },
                Series {
                    label: "memory.max",
                    color: "#d62728",
                    dashed: true,
                    points: pick(|x| x.memory_max.map(|v| v as f64)),
                },
            ],
            &markers,
        ));
    }
    if !d.processes.is_empty() {
        o.push_str("<h2>Processes (RSS, PSS dashed)</h2>");
        let palette = [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
        ];
        // Each comm's PSS (when recorded) dashed in its RSS colour.
        let pss_labels: Vec<String> = d.processes.keys().map(|c| format!("{c} PSS")).collect();
        let mut series: Vec<Series> = Vec::new();
        for (((comm, pts), c), pss_label) in d
            .processes
            .iter()
            .zip(palette.iter().cycle())
            .zip(&pss_labels)
        {
            series.push(Series {
                label: comm,
                color: c,
                dashed: false,
                points: pts.iter().map(|p| (p.ts, p.v)).collect(),
            });
            if let Some(pss) = d.pss.get(comm) {
                series.push(Series {
                    label: pss_label,
                    color: c,
                    dashed: true,
                    points: pss.iter().map(|p| (p.ts, p.v)).collect(),
                });
            }
        }
        o.push_str(&svg::chart(
            "processes: RSS and PSS",
            cfrom,
            cto,
            Unit::Bytes,
            &series,
            &markers,
        ));
    }
    if !d.thermal.is_empty() {
        o.push_str("<h2>Thermal</h2>");
        for (z, pts) in &d.thermal {
            let _ = write!(o, "<h3>{}</h3>", esc(z));
            let deg = |v: i64| v as f64 / 1000.0;
            o.push_str(&svg::chart(
                &format!("{z}: temperature (°C)"),
                cfrom,
                cto,
                Unit::Celsius,
                &[
                    Series {
                        label: "temp",
                        color: "#d62728",
                        dashed: false,
                        points: pts.iter().map(|p| (p.ts, deg(p.temp))).collect(),
                    },
                    Series {
                        label: "trip",
                        color: "#7f7f7f",
                        dashed: true,
                        points: pts
                            .iter()
                            .filter_map(|p| p.trip.map(|t| (p.ts, deg(t))))
                            .collect(),
                    },
                ],
                &[],
            ));
        }
    }
    runs_table(&mut o, d);
    events_table(&mut o, &d.events);
    o.push_str(
        "<p class=\"small meta\">Generated by cgwarden report. Definitions of every criterion: \
         docs/report.md.</p></body></html>\n",
    );
    o
}

fn verdict_table(o: &mut String, verdicts: &[Verdict]) {
    o.push_str(
        "<h2>Verdicts</h2><table id=\"verdicts\"><tr><th>criterion</th><th>subject</th>\
         <th>limit</th><th>measured</th><th>result</th><th>failed at</th><th>detail</th></tr>",
    );
    for v in verdicts {
        let word = match v.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::NotMeasured => "not measured",
        };
        let _ = write!(
            o,
            "<tr data-criterion=\"{id}\"><td>{name}</td><td>{subj}</td><td class=\"num\">{lim}</td>\
             <td class=\"num\">{meas}</td><td class=\"{cls}\">{word}</td><td>{at}</td><td>{det}</td></tr>",
            id = v.id,
            name = name(v.id),
            subj = esc(&v.subject),
            lim = esc(&human_limit(v)),
            meas = esc(&v.measured.map(|m| human_value(m, v.unit)).unwrap_or_else(|| "-".into())),
            cls = v.status.as_str(),
            at = v.failed_at.map(when).unwrap_or_default(),
            det = esc(&v.detail),
        );
    }
    o.push_str("</table>");
}

fn runs_table(o: &mut String, d: &Data) {
    o.push_str("<h2>Daemon runs</h2><table><tr><th>run</th><th>started</th><th>boot id</th></tr>");
    for r in &d.runs {
        let _ = write!(
            o,
            "<tr><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td></tr>",
            r.id,
            when(r.started),
            esc(&r.boot_id)
        );
    }
    o.push_str("</table>");
}

fn events_table(o: &mut String, events: &[EventRow]) {
    let skip = events.len().saturating_sub(MAX_EVENT_ROWS);
    let _ = write!(
        o,
        "<h2>Actions and rule transitions</h2><p class=\"small\">{} in the window{}.</p>",
        events.len(),
        if skip > 0 {
            format!("; the oldest {skip} are not listed")
        } else {
            String::new()
        }
    );
    o.push_str(
        "<table class=\"small\"><tr><th>time</th><th>kind</th><th>rule</th><th>state</th>\
         <th>knob</th><th>old → new</th><th>cause</th><th>detail</th></tr>",
    );
    for e in events.iter().skip(skip) {
        let opt = |v: &Option<String>| esc(v.as_deref().unwrap_or(""));
        let change = match (&e.old, &e.new) {
            (None, None) => String::new(),
            (a, b) => format!(
                "{} → {}",
                esc(a.as_deref().unwrap_or("-")),
                esc(b.as_deref().unwrap_or("-"))
            ),
        };
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            when(e.ts),
            esc(&e.kind),
            opt(&e.rule),
            opt(&e.state),
            opt(&e.knob),
            change,
            opt(&e.cause),
            opt(&e.detail),
        );
    }
    o.push_str("</table>");
}
