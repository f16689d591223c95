//! The KPI criteria of `report.criteria` — `loop_p99` (a
//! duration), `loop_kpi` and `fps_kpi` (KPI names), `fps_stddev` (a
//! non-negative number). Kept apart from `decode.rs` so the criteria
//! entry there only hands its fields over.

use super::{Decoder, Fields};
use crate::policy::model::ReportCriteria;

impl<'a> Decoder<'a> {
    pub(super) fn report_kpi(&mut self, f: &Fields, c: &mut ReportCriteria) {
        if let Some(n) = f.get("loop_p99") {
            if let Some(d) = self.duration(n, "report.criteria.loop_p99") {
                if d.is_zero() {
                    self.err(
                        n.pos,
                        "report.criteria.loop_p99 must be more than 0 (like 5ms)",
                    );
                } else {
                    c.loop_p99 = d;
                }
            }
        }
        if let Some(n) = f.get("fps_stddev") {
            let what = "report.criteria.fps_stddev";
            if let Some(t) = self.text(n, what) {
                match t.parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => c.fps_stddev = v,
                    _ => self.err(
                        n.pos,
                        format!("{what} must be a number above 0 like 2, not `{t}`"),
                    ),
                }
            }
        }
        for (name, out) in [("loop_kpi", &mut c.loop_kpi), ("fps_kpi", &mut c.fps_kpi)] {
            if let Some(n) = f.get(name) {
                let what = format!("report.criteria.{name}");
                if let Some(t) = self.text(n, &what) {
                    match crate::policy::expr::kpi::check_name(&t) {
                        Ok(()) => *out = t,
                        Err(e) => self.err(n.pos, format!("{what}: {e}")),
                    }
                }
            }
        }
    }
}
