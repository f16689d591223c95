//! The comparison as one self-contained HTML page, like the report's: inline
//! CSS, no script, no external resource; every string from an input (paths,
//! products, criterion subjects, KPI names) escaped. Each value cell carries
//! its exact number in `data-value` (what the Chromium test checks against
//! the inputs' JSON) beside the value for people.

use super::{human_cell, human_change, label, Cell, Change, Row, Side};
use crate::observe::report::esc;
use serde_json::Value;
use std::fmt::Write as _;

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.pass{background:#d9f2d9;font-weight:bold}.fail{background:#f8d0d0;font-weight:bold}.not_measured{background:#eee;color:#666}\
.better{color:#1a7f1a}.worse{color:#b00020}.one{color:#666;font-style:italic}\
.overall{display:inline-block;padding:4px 12px;font-size:18px;margin:8px 0}.meta{color:#555}";

fn num_attr(c: Option<&Cell>) -> String {
    match c.and_then(|c| c.value) {
        Some(v) => format!(" data-value=\"{v}\""),
        None => String::new(),
    }
}

fn status_cell(c: Option<&Cell>, unit: &str) -> String {
    let (_, s) = human_cell(c, unit);
    let class = c
        .and_then(|c| c.status.as_deref())
        .map(|s| match s {
            "pass" | "fail" | "not_measured" => s,
            _ => "",
        })
        .unwrap_or("");
    format!("<td class=\"{class}\">{}</td>", esc(&s))
}

/// Whether smaller is better for every row (counts, growth, latencies,
/// fragmentation, jitter): the change is coloured that way; `none` KPIs
/// (fps…) are not coloured.
fn tone(r: &Row) -> &'static str {
    match r.change {
        Change::Changed { absolute, .. } if r.unit != "none" && absolute < 0.0 => "better",
        Change::Changed { absolute, .. } if r.unit != "none" && absolute > 0.0 => "worse",
        Change::OnlyA | Change::OnlyB => "one",
        _ => "",
    }
}

fn side_line(name: &str, s: &Side) -> String {
    let r = &s.report;
    let get = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let w = r.get("window").cloned().unwrap_or(Value::Null);
    let wget = |k: &str| w.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    format!(
        "<p class=\"meta\"><b>{name}</b>: <code>{}</code> ({}), product {}, {} → {}</p>",
        esc(&s.source),
        s.kind,
        esc(&get("product")),
        esc(&wget("from")),
        esc(&wget("to"))
    )
}

/// The whole page.
pub(crate) fn page(a: &Side, b: &Side, rows: &[Row], b_passed: bool) -> String {
    let mut h = String::with_capacity(8192);
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>cgwarden compare</title><style>{CSS}</style></head><body>\
         <h1>cgwarden: before and after</h1>{}{}\
         <div class=\"overall {cls}\" id=\"overall\">B: {word}</div>",
        side_line("A", a),
        side_line("B", b),
        cls = if b_passed { "pass" } else { "fail" },
        word = if b_passed { "PASS" } else { "FAIL" },
    );
    for (section, title) in [
        ("criterion", "Criteria"),
        ("kpi", "KPIs"),
        ("measurement", "Measurements"),
    ] {
        let rs: Vec<&Row> = rows.iter().filter(|r| r.section == section).collect();
        if rs.is_empty() {
            continue;
        }
        let _ = write!(
            h,
            "<h2>{title}</h2><table id=\"{section}s\"><tr><th>{}</th><th>{}</th>\
             <th>A</th><th>B</th><th>change</th><th>A verdict</th><th>B verdict</th></tr>",
            if section == "kpi" { "KPI" } else { "" },
            if section == "kpi" {
                "statistic"
            } else {
                "subject"
            },
        );
        for r in rs {
            let (va, _) = human_cell(r.a.as_ref(), &r.unit);
            let (vb, _) = human_cell(r.b.as_ref(), &r.unit);
            let _ = write!(
                h,
                "<tr data-section=\"{section}\" data-id=\"{id}\" data-subject=\"{subject}\" \
                 data-change=\"{kind}\"><td>{name}</td><td>{subject}</td>\
                 <td class=\"num a\"{da}>{va}</td><td class=\"num b\"{db}>{vb}</td>\
                 <td class=\"num {tone}\">{change}</td>{sa}{sb}</tr>",
                id = esc(&r.id),
                subject = esc(&r.subject),
                kind = r.change.kind(),
                name = esc(&label(r)),
                da = num_attr(r.a.as_ref()),
                db = num_attr(r.b.as_ref()),
                va = esc(&va),
                vb = esc(&vb),
                tone = tone(r),
                change = esc(&human_change(r)),
                sa = status_cell(r.a.as_ref(), &r.unit),
                sb = status_cell(r.b.as_ref(), &r.unit),
            );
        }
        h.push_str("</table>");
    }
    h.push_str(
        "<p class=\"meta\">Change: B − A, in percent of A; from 0 it is \"new\". \
         KPI seconds are shown in ms. docs/report.md, \"Comparing two runs\".</p></body></html>\n",
    );
    h
}
