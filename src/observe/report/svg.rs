//! The report's charts as inline SVG, written by hand: the report must be
//! one self-contained file that opens on an air-gapped laptop (no network,
//! no script), and a time-series line chart with markers is a few dozen
//! lines of SVG — a charting library would be larger than the report.
//!
//! Every text that may come from the database goes through [`super::esc`].

use super::esc;
use std::fmt::Write as _;

/// How a chart's values are labelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Percent,
    Bytes,
    Celsius,
}

/// One line of a chart.
pub(crate) struct Series<'a> {
    pub(crate) label: &'a str,
    pub(crate) color: &'a str,
    pub(crate) dashed: bool,
    /// (Unix seconds, value), by time.
    pub(crate) points: Vec<(f64, f64)>,
}

/// A vertical mark: an action or a rule transition.
pub(crate) struct Marker {
    pub(crate) ts: f64,
    pub(crate) color: &'static str,
    /// Shown as the mark's tooltip (SVG `<title>`).
    pub(crate) title: String,
}

/// At most this many points per line: finer than the chart's pixels.
const MAX_POINTS: usize = 800;

/// Buckets a series into at most `MAX_POINTS` points, keeping each bucket's
/// highest value (a peak of pressure or memory must stay visible).
fn reduce(points: &[(f64, f64)], from: f64, to: f64) -> Vec<(f64, f64)> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    if pts.len() <= MAX_POINTS || to <= from {
        return pts;
    }
    let width = (to - from) / MAX_POINTS as f64;
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(MAX_POINTS);
    let mut cur: Option<(usize, (f64, f64))> = None;
    for p in pts {
        let b = ((p.0 - from) / width).max(0.0) as usize;
        cur = match cur {
            Some((cb, best)) if cb == b => Some((cb, if p.1 > best.1 { p } else { best })),
            Some((_, best)) => {
                out.push(best);
                Some((b, p))
            }
            None => Some((b, p)),
        };
    }
    if let Some((_, best)) = cur {
        out.push(best);
    }
    out
}

/// A value as an axis label.
pub(crate) fn label(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Percent if v.fract() != 0.0 && v < 100.0 => format!("{v:.1}%"),
        Unit::Percent => format!("{v:.0}%"),
        Unit::Celsius => format!("{v:.0}°C"),
        Unit::Bytes => {
            let a = v.abs();
            if a >= f64::from(1u32 << 30) {
                format!("{:.1}G", v / f64::from(1u32 << 30))
            } else if a >= f64::from(1u32 << 20) {
                format!("{:.0}M", v / f64::from(1u32 << 20))
            } else if a >= 1024.0 {
                format!("{:.0}K", v / 1024.0)
            } else {
                format!("{v:.0}")
            }
        }
    }
}

/// A "nice" top of the y axis: 1, 2 or 5 times a power of ten at or above `max`.
fn nice_top(max: f64, unit: Unit) -> f64 {
    let floor = match unit {
        Unit::Percent | Unit::Celsius => 10.0,
        Unit::Bytes => f64::from(1u32 << 20),
    };
    let m = max.max(floor);
    // The power of ten at or below `m`, by multiplying, not `powf` and
    // `log10`: they would be the binary's only calls into libm, which the
    // daemon would then map (and lock) whole for the report's charts.
    let mut p = 1.0f64;
    while p * 10.0 <= m && p.is_finite() {
        p *= 10.0;
    }
    for k in [1.0, 2.0, 5.0, 10.0] {
        if k * p >= m {
            return k * p;
        }
    }
    10.0 * p
}

/// Short UTC time of day (or date) for the x axis.
fn time_label(ts: f64, span: f64) -> String {
    let s = super::when(ts);
    // 2026-12-01T04:05:06Z
    if span > 2.0 * 86400.0 {
        s.get(5..13).unwrap_or(&s).replace('T', " ") + "h"
    } else {
        s.get(11..16).unwrap_or(&s).to_string()
    }
}

/// A line chart of `series` over [from, to] with vertical `markers`.
pub(crate) fn chart(
    title: &str,
    from: f64,
    to: f64,
    unit: Unit,
    series: &[Series],
    markers: &[Marker],
) -> String {
    const W: f64 = 1000.0;
    const H: f64 = 220.0;
    const L: f64 = 60.0; // left margin (axis labels)
    const R: f64 = 10.0;
    const T: f64 = 24.0;
    const B: f64 = 36.0; // bottom margin (time labels, legend)
    let (pw, ph) = (W - L - R, H - T - B);
    let span = if to > from { to - from } else { 1.0 };
    let reduced: Vec<Vec<(f64, f64)>> =
        series.iter().map(|s| reduce(&s.points, from, to)).collect();
    let max = reduced.iter().flatten().map(|p| p.1).fold(0.0f64, f64::max);
    let top = nice_top(max, unit);
    let x = |ts: f64| L + ((ts - from) / span).clamp(0.0, 1.0) * pw;
    let y = |v: f64| T + ph - (v / top).clamp(0.0, 1.0) * ph;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {W} {H}" role="img"><title>{t}</title>"#,
        t = esc(title)
    );
    let _ = write!(
        o,
        r##"<text x="{L}" y="16" class="ct">{t}</text><rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="#fff" stroke="#bbb"/>"##,
        t = esc(title)
    );
    for k in 0..=4 {
        let v = top * f64::from(k) / 4.0;
        let yy = y(v);
        let _ = write!(
            o,
            r##"<line x1="{L}" x2="{x2}" y1="{yy:.1}" y2="{yy:.1}" stroke="#eee"/><text x="{lx}" y="{ty:.1}" class="ax" text-anchor="end">{lab}</text>"##,
            x2 = L + pw,
            lx = L - 4.0,
            ty = yy + 4.0,
            lab = esc(&label(v, unit))
        );
    }
    for k in 0..=5 {
        let ts = from + span * f64::from(k) / 5.0;
        let _ = write!(
            o,
            r#"<text x="{xx:.1}" y="{ty}" class="ax" text-anchor="{anchor}">{lab}</text>"#,
            xx = x(ts),
            anchor = match k {
                0 => "start",
                5 => "end",
                _ => "middle",
            },
            ty = T + ph + 14.0,
            lab = esc(&time_label(ts, span))
        );
    }
    for m in markers {
        if m.ts < from || m.ts > to {
            continue;
        }
        let xx = x(m.ts);
        let _ = write!(
            o,
            r#"<line class="mk" x1="{xx:.1}" x2="{xx:.1}" y1="{T}" y2="{y2}" stroke="{c}" stroke-width="1.5" opacity="0.7"><title>{t}</title></line>"#,
            y2 = T + ph,
            c = m.color,
            t = esc(&m.title)
        );
    }
    let mut lx = L;
    for (s, pts) in series.iter().zip(&reduced) {
        if !pts.is_empty() {
            let mut d = String::new();
            for (i, p) in pts.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if i == 0 { "M" } else { " L" },
                    x(p.0),
                    y(p.1)
                );
            }
            let _ = write!(
                o,
                r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.5"{dash}/>"#,
                c = s.color,
                dash = if s.dashed {
                    r#" stroke-dasharray="6 3""#
                } else {
                    ""
                }
            );
        }
        let ly = H - 6.0;
        let _ = write!(
            o,
            r#"<rect x="{lx}" y="{ry}" width="12" height="4" fill="{c}"/><text x="{tx}" y="{ly}" class="lg">{t}</text>"#,
            ry = ly - 6.0,
            c = s.color,
            tx = lx + 16.0,
            t = esc(s.label)
        );
        lx += 24.0 + 7.0 * s.label.chars().count() as f64;
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_keeps_peaks_and_bounds_the_points() {
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (f64::from(i), if i == 4321 { 99.0 } else { 1.0 }))
            .collect();
        let r = reduce(&pts, 0.0, 10_000.0);
        assert!(r.len() <= MAX_POINTS + 1, "{}", r.len());
        assert!(r.iter().any(|p| p.1 == 99.0));
        assert!(reduce(&[(f64::NAN, 1.0)], 0.0, 1.0).is_empty());
    }

    #[test]
    fn chart_escapes_titles_and_labels() {
        let c = chart(
            "<g>&",
            0.0,
            10.0,
            Unit::Bytes,
            &[Series {
                label: "a\"b",
                color: "#000",
                dashed: false,
                points: vec![(0.0, 1.0), (10.0, 2e6)],
            }],
            &[Marker {
                ts: 5.0,
                color: "#f00",
                title: "<script>".into(),
            }],
        );
        assert!(!c.contains("<script>") && !c.contains("<g>&"), "{c}");
        assert!(c.contains("&lt;script&gt;") && c.contains("a&quot;b"));
        assert!(c.contains("<path"));
    }

    #[test]
    fn nice_tops() {
        assert_eq!(nice_top(3.0, Unit::Percent), 10.0);
        assert_eq!(nice_top(37.0, Unit::Percent), 50.0);
        assert_eq!(nice_top(150e6, Unit::Bytes), 200e6);
        assert_eq!(nice_top(1000.0, Unit::Percent), 1000.0);
        assert_eq!(nice_top(1001.0, Unit::Percent), 2000.0);
        assert_eq!(nice_top(f64::NAN, Unit::Celsius), 10.0);
        assert_eq!(nice_top(f64::INFINITY, Unit::Percent), f64::INFINITY);
    }
}
