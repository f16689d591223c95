//! The report over an explicit window: `cgwarden soak`
//! judges the time since the soak began — every few seconds for its
//! progress line, once at the end for `report.html` and `report.json` —
//! with the same reading, criteria and renderings as `cgwarden report`.

use super::{html, json_report, kpi, query, verdict};
use crate::exit;
use crate::policy::model::ReportCriteria;
use std::path::Path;

/// One criterion's outcome, for a progress line or a summary.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub(crate) id: &'static str,
    pub(crate) subject: String,
    /// `pass` | `fail` | `not_measured`
    pub(crate) status: &'static str,
    /// As `cgwarden report --out` prints it: `FAIL Restarts (daemon and device): 1, failed at …`.
    pub(crate) line: String,
    pub(crate) detail: String,
}

/// The window judged; the renderings when asked for.
#[derive(Clone, Debug)]
pub(crate) struct Judged {
    pub(crate) passed: bool,
    pub(crate) rows: Vec<Row>,
    /// (HTML page, JSON text) when rendered.
    pub(crate) rendered: Option<(String, String)>,
}

impl Judged {
    /// The report's exit status: 0 passed, 1 a criterion failed.
    pub(crate) fn exit_code(&self) -> u8 {
        if self.passed {
            exit::OK
        } else {
            exit::REFUSED
        }
    }
}

/// Judges [from, to] of the database at `db`. The error is the report's
/// exit status (4 no database, 75 unreadable) and its message.
pub(crate) fn judge(
    db: &Path,
    from: f64,
    to: f64,
    criteria: &ReportCriteria,
    render: bool,
) -> Result<Judged, (u8, String)> {
    let d = match query::read(db, from, to) {
        Ok(d) => d,
        Err(query::ReadError::Missing) => {
            return Err((
                exit::UNREACHABLE,
                format!("no flight recorder database at {}", db.display()),
            ))
        }
        Err(query::ReadError::Unreadable(e)) => {
            return Err((
                exit::TEMPFAIL,
                format!(
                    "cannot read the flight recorder database {}: {e}",
                    db.display()
                ),
            ))
        }
    };
    // The criteria as `report` judges them (the seed's table and the KPIs).
    let (verdicts, kpis) = super::judge(db, &d, criteria, from, to);
    let passed = verdict::passed(&verdicts);
    let rows = verdicts
        .iter()
        .map(|v| Row {
            id: v.id,
            subject: v.subject.clone(),
            status: v.status.as_str(),
            line: super::verdict_line(v),
            detail: v.detail.clone(),
        })
        .collect();
    let rendered = render.then(|| {
        let name = db.display().to_string();
        let page = kpi::splice_html(html::page(&name, &d, &verdicts, passed), &kpis);
        let v = json_report(&name, &d, &verdicts, &kpis, passed);
        let json = serde_json::to_string_pretty(&v)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
            + "\n";
        (page, json)
    });
    Ok(Judged {
        passed,
        rows,
        rendered,
    })
}
