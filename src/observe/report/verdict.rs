//! The stability verdicts of `cgwarden report`: pure
//! functions from the recorder's rows (already read by [`super::query`]) and
//! `report.criteria` to PASS/FAIL with the measured value and the moment a
//! criterion first broke. No I/O, no clock: everything is unit-tested.
//!
//! Definitions (docs/report.md repeats them for operators):
//! - **OOM kills**: per group, the increments of `memory.events oom_kill`
//!   between consecutive samples inside the window; a counter that drops
//!   means the group was recreated, and its new value counts in full. The
//!   first sample of a group in the window is the baseline (kills before the
//!   window are not counted).
//! - **Memory growth** of a series (a group's `memory.current`, or the summed
//!   RSS of the processes with one comm): the median of its last hour minus
//!   the median of its first hour. Medians ignore short spikes and a single
//!   odd sample; a series shorter than 3 hours compares its first and last
//!   third instead, so the two halves never overlap. The moment it failed is
//!   the first sample at which the median of the trailing comparison window
//!   exceeds the first window's median by more than the limit.
//! - **Thermal throttling**: per cpufreq policy, the throttle
//!   episodes the daemon recorded (`throttle` events: one per rising edge of
//!   `throttled(POLICY)` — the kernel held the policy below the ceiling
//!   asked for, or a cooling device bound to it was active). The limit is
//!   per 72 h, scaled to the report's window. No episode recorded passes
//!   with 0. A temperature at or above a trip point is not throttling: the
//!   zones' temperatures are recorded for the chart only.
//! - **Restarts**: every daemon start recorded in `runs` inside the window
//!   except the first one the database knows; a start whose `boot_id`
//!   differs from the previous run's is a reboot, else a daemon restart.
//! - **PSI memory full**: the highest `memory full avg10` of any group
//!   (the machine, `host`, included) in any sample; it passes when below the limit.

use crate::knobs::MACHINE;
use crate::policy::model::ReportCriteria;
use std::collections::BTreeMap;

mod process;

/// One hour, in seconds: the comparison window of the growth criterion.
const HOUR: f64 = 3600.0;
/// The thermal limit is per this many seconds (72 h).
const THERMAL_PERIOD: f64 = 72.0 * HOUR;

/// A criterion's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Pass,
    Fail,
    /// Nothing to judge (no zone named, no data): does not fail the report.
    NotMeasured,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotMeasured => "not_measured",
        }
    }
}

/// One row of the verdict table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Verdict {
    /// Stable identifier: oom_kills, memory_growth, thermal_throttling,
    /// restarts, memory_full_avg10.
    pub(crate) id: &'static str,
    /// What was judged: `all groups`, `group NAME`, `process COMM`, `zone TYPE`, `daemon`.
    pub(crate) subject: String,
    pub(crate) status: Status,
    /// The limit, in `unit`.
    pub(crate) limit: f64,
    /// What was measured, in `unit`; none when not measured.
    pub(crate) measured: Option<f64>,
    /// count | bytes | percent
    pub(crate) unit: &'static str,
    /// Unix seconds of the first sample or event that broke the criterion.
    pub(crate) failed_at: Option<f64>,
    /// A sentence on what was found (free text, from the database too).
    pub(crate) detail: String,
}

/// A sample of one numeric series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Point {
    pub(crate) ts: f64,
    pub(crate) v: f64,
}

/// A daemon start (`runs`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunRow {
    pub(crate) id: i64,
    pub(crate) started: f64,
    pub(crate) boot_id: String,
}

/// A thermal sample of one zone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ThermalPoint {
    pub(crate) ts: f64,
    /// Millidegrees Celsius.
    pub(crate) temp: i64,
    pub(crate) trip: Option<i64>,
}

/// Everything the verdicts look at; series sorted by time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inputs {
    /// Window start and end, Unix seconds.
    pub(crate) from: f64,
    pub(crate) to: f64,
    /// Per group: `memory.events oom_kill` as read.
    pub(crate) oom_kill: BTreeMap<String, Vec<Point>>,
    /// Per group: `memory.current`.
    pub(crate) memory: BTreeMap<String, Vec<Point>>,
    /// Per comm: summed RSS.
    pub(crate) processes: BTreeMap<String, Vec<Point>>,
    /// Per comm: summed PSS (empty when not recorded).
    pub(crate) pss: BTreeMap<String, Vec<Point>>,
    /// Per cpufreq policy: the times its throttle episodes began.
    pub(crate) throttle: BTreeMap<String, Vec<f64>>,
    /// Every run recorded which cpufreq policies it watched, and none had
    /// any: nothing on the device can throttle.
    pub(crate) no_cpufreq: bool,
    /// Every run the database knows, any time.
    pub(crate) runs: Vec<RunRow>,
    /// Per group: `memory full avg10`.
    pub(crate) memory_full: BTreeMap<String, Vec<Point>>,
    /// `critical_exit` events: (time, what exited).
    pub(crate) critical_exits: Vec<(f64, String)>,
}

/// All verdicts, in the table's order.
pub(crate) fn judge(c: &ReportCriteria, i: &Inputs) -> Vec<Verdict> {
    let mut out = vec![oom_kills(c.oom_kills, &i.oom_kill)];
    for (g, s) in &i.memory {
        if g == MACHINE {
            // The whole machine's use includes caches the kernel keeps by
            // design; leaks show in the groups and processes.
            continue;
        }
        out.push(growth_verdict(format!("group {g}"), s, c.memory_growth));
    }
    out.extend(process::growth(c, i)); // PSS, else RSS
    if !out.iter().any(|v| v.id == "memory_growth") {
        out.push(Verdict {
            id: "memory_growth",
            subject: "all groups".into(),
            status: Status::NotMeasured,
            limit: c.memory_growth as f64,
            measured: None,
            unit: "bytes",
            failed_at: None,
            detail: "no group or process memory was recorded".into(),
        });
    }
    out.extend(thermal(c, i));
    out.push(restarts(c.restarts, &i.runs, i.from, i.to));
    out.push(memory_full(c.memory_full_avg10, &i.memory_full));
    out.push(critical_exits(&i.critical_exits, !i.runs.is_empty()));
    out
}

/// A `settings.critical` process must not exit during the run
/// (the 72-hour script's "the named critical processes stay alive").
fn critical_exits(exits: &[(f64, String)], recorded: bool) -> Verdict {
    let n = exits.len();
    let mut detail: Vec<&str> = exits.iter().take(5).map(|(_, d)| d.as_str()).collect();
    if n > 5 {
        detail.push("…");
    }
    Verdict {
        id: "critical_exits",
        subject: "critical processes".into(),
        status: match (n, recorded) {
            (0, false) => Status::NotMeasured,
            (0, true) => Status::Pass,
            _ => Status::Fail,
        },
        limit: 0.0,
        measured: (recorded || n > 0).then_some(n as f64),
        unit: "count",
        failed_at: exits.first().map(|e| e.0),
        detail: if n == 0 && !recorded {
            "no daemon run recorded".into()
        } else if n == 0 {
            "no critical process exited".into()
        } else {
            detail.join("; ")
        },
    }
}

/// Whether the report passes: no criterion failed.
pub(crate) fn passed(v: &[Verdict]) -> bool {
    v.iter().all(|v| v.status != Status::Fail)
}

/// New OOM kills of one group's counter series: (time, how many) per increment.
pub(crate) fn counter_increments(s: &[Point]) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut prev: Option<f64> = None;
    for p in s {
        if !p.v.is_finite() || p.v < 0.0 {
            continue;
        }
        if let Some(q) = prev {
            // A drop: the group was recreated and counts from zero again.
            let d = if p.v >= q { p.v - q } else { p.v };
            if d >= 1.0 {
                out.push((p.ts, d as u64));
            }
        }
        prev = Some(p.v);
    }
    out
}

/// OOM kills: the groups' `memory.events oom_kill`, and the
/// machine's `/proc/vmstat oom_kill` recorded as the row [`MACHINE`] (`host`), which
/// counts every kill — the groups' and those outside any group. The total
/// is the larger of the two counts (a group's kill is in both); the time it
/// failed comes from the series that makes that total.
fn oom_kills(limit: u64, per_group: &BTreeMap<String, Vec<Point>>) -> Verdict {
    let global: Vec<(f64, u64)> = per_group
        .get(MACHINE)
        .map(|s| counter_increments(s))
        .unwrap_or_default();
    let global_total: u64 = global.iter().map(|a| a.1).fold(0, u64::saturating_add);
    let groups: BTreeMap<String, Vec<Point>> = per_group
        .iter()
        .filter(|(g, _)| g.as_str() != MACHINE)
        .map(|(g, s)| (g.clone(), s.clone()))
        .collect();
    let mut v = group_oom_kills(limit, &groups);
    let groups_total = v.measured.unwrap_or(0.0) as u64;
    if per_group.get(MACHINE).is_some_and(|s| !s.is_empty()) && global_total > groups_total {
        let mut seen = 0u64;
        v.failed_at = None;
        for (t, n) in &global {
            seen = seen.saturating_add(*n);
            if seen > limit {
                v.failed_at = Some(*t);
                break;
            }
        }
        let outside = format!(
            "outside the groups: {}",
            global_total.saturating_sub(groups_total)
        );
        v.detail = if groups_total == 0 {
            outside
        } else {
            format!("{}, {outside}", v.detail)
        };
        v.measured = Some(global_total as f64);
        v.status = if v.failed_at.is_some() {
            Status::Fail
        } else {
            Status::Pass
        };
    } else if v.status == Status::NotMeasured
        && per_group.get(MACHINE).is_some_and(|s| !s.is_empty())
    {
        v.status = Status::Pass;
        v.measured = Some(0.0);
    }
    v
}

fn group_oom_kills(limit: u64, per_group: &BTreeMap<String, Vec<Point>>) -> Verdict {
    let mut all: Vec<(f64, u64, &str)> = Vec::new();
    for (g, s) in per_group {
        all.extend(
            counter_increments(s)
                .into_iter()
                .map(|(t, n)| (t, n, g.as_str())),
        );
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = all.iter().map(|a| a.1).fold(0, u64::saturating_add);
    let mut seen = 0u64;
    let mut failed = None;
    for (t, n, g) in &all {
        seen = seen.saturating_add(*n);
        if seen > limit {
            failed = Some((*t, *g));
            break;
        }
    }
    let mut by_group: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, n, g) in &all {
        *by_group.entry(g).or_default() += n;
    }
    let detail = if by_group.is_empty() {
        "no OOM kill in any group".to_string()
    } else {
        by_group
            .iter()
            .map(|(g, n)| format!("{g}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let measured_any = per_group.values().any(|s| !s.is_empty());
    Verdict {
        id: "oom_kills",
        subject: "all groups".into(),
        status: if !measured_any {
            Status::NotMeasured
        } else if failed.is_some() {
            Status::Fail
        } else {
            Status::Pass
        },
        limit: limit as f64,
        measured: measured_any.then_some(total as f64),
        unit: "count",
        failed_at: failed.map(|f| f.0),
        detail,
    }
}

/// The median of a non-empty slice (sorted in place); 0 for an empty one.
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The comparison window of a series spanning `span` seconds: an hour, or a
/// third of the span when that is shorter.
pub(crate) fn growth_window(span: f64) -> f64 {
    HOUR.min(span / 3.0)
}

fn values_in(s: &[Point], lo: f64, hi: f64) -> Vec<f64> {
    s.iter()
        .filter(|p| p.ts >= lo && p.ts <= hi && p.v.is_finite())
        .map(|p| p.v)
        .collect()
}

/// Memory growth of a series sorted by time: median of the last window
/// minus median of the first (see the module doc). None: fewer than two
/// samples.
pub(crate) fn growth(s: &[Point]) -> Option<f64> {
    let (first, last) = (s.first()?, s.last()?);
    if s.len() < 2 {
        return None;
    }
    let w = growth_window(last.ts - first.ts);
    let mut a = values_in(s, first.ts, first.ts + w);
    let mut b = values_in(s, last.ts - w, last.ts);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    Some(median(&mut b) - median(&mut a))
}

/// The first sample at which the trailing window's median exceeds the first
/// window's by more than `limit`.
pub(crate) fn growth_broken_at(s: &[Point], limit: f64) -> Option<f64> {
    let (first, last) = (s.first()?, s.last()?);
    let w = growth_window(last.ts - first.ts);
    let base = median(&mut values_in(s, first.ts, first.ts + w));
    // At most ~2000 evaluations, so a week at 1 s stays quick.
    let stride = (s.len() / 2000).max(1);
    let mut i = 0;
    while i < s.len() {
        let t = s[i].ts;
        if t >= first.ts + w {
            let m = median(&mut values_in(s, t - w, t));
            if m - base > limit {
                return Some(t);
            }
        }
        i += stride;
    }
    // The last sample is where the whole-series verdict was measured.
    (growth(s)? > limit).then_some(last.ts)
}

fn growth_verdict(subject: String, s: &[Point], limit: u64) -> Verdict {
    let limit_f = limit as f64;
    match growth(s) {
        None => Verdict {
            id: "memory_growth",
            subject,
            status: Status::NotMeasured,
            limit: limit_f,
            measured: None,
            unit: "bytes",
            failed_at: None,
            detail: "fewer than two samples in the window".into(),
        },
        Some(g) => {
            let fail = g > limit_f;
            let span = match (s.first(), s.last()) {
                (Some(a), Some(b)) => b.ts - a.ts,
                _ => 0.0,
            };
            Verdict {
                id: "memory_growth",
                subject,
                status: if fail { Status::Fail } else { Status::Pass },
                limit: limit_f,
                measured: Some(g),
                unit: "bytes",
                failed_at: if fail {
                    growth_broken_at(s, limit_f)
                } else {
                    None
                },
                detail: format!(
                    "median of the last {w} minus median of the first {w} ({n})",
                    w = human_secs(growth_window(span)),
                    n = crate::show::count(s.len(), "sample")
                ),
            }
        }
    }
}

fn human_secs(s: f64) -> String {
    if s >= HOUR {
        format!("{:.0} h", s / HOUR)
    } else if s >= 60.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// How many crossings are allowed over `span` seconds at `per_72h`.
pub(crate) fn thermal_allowance(per_72h: u64, span: f64) -> f64 {
    if !span.is_finite() || span <= 0.0 {
        return 0.0;
    }
    per_72h as f64 * span / THERMAL_PERIOD
}

fn thermal(c: &ReportCriteria, i: &Inputs) -> Vec<Verdict> {
    let limit = c.thermal_events_per_72h as f64;
    let span = i.to - i.from;
    let allowed = thermal_allowance(c.thermal_events_per_72h, span);
    let unmeasured = if i.throttle.is_empty() && i.runs.is_empty() {
        Some("the database records no daemon run")
    } else if i.throttle.is_empty() && i.no_cpufreq {
        Some("the device has no cpufreq policy: nothing to throttle or to watch")
    } else {
        None
    };
    if let Some(why) = unmeasured {
        return vec![Verdict {
            id: "thermal_throttling",
            subject: "cpufreq".into(),
            status: Status::NotMeasured,
            limit,
            measured: None,
            unit: "count",
            failed_at: None,
            detail: why.into(),
        }];
    }
    if i.throttle.is_empty() {
        return vec![Verdict {
            id: "thermal_throttling",
            subject: "cpufreq".into(),
            status: Status::Pass,
            limit,
            measured: Some(0.0),
            unit: "count",
            failed_at: None,
            detail: "no throttle episode recorded (the daemon counts one per rising edge of throttled(POLICY) for every cpufreq policy while metrics or the recorder run)".into(),
        }];
    }
    let mut out = Vec::new();
    for (policy, starts) in &i.throttle {
        let mut starts = starts.clone();
        starts.sort_by(f64::total_cmp);
        let failed_at = starts
            .iter()
            .enumerate()
            .find(|(n, _)| (*n + 1) as f64 > allowed)
            .map(|(_, t)| *t);
        out.push(Verdict {
            id: "thermal_throttling",
            subject: format!("cpufreq {policy}"),
            status: if failed_at.is_some() {
                Status::Fail
            } else {
                Status::Pass
            },
            limit,
            measured: Some(starts.len() as f64),
            unit: "count",
            failed_at,
            detail: format!(
                "{} throttle episodes in {}; {allowed:.2} allowed for this span",
                starts.len(),
                human_secs(span)
            ),
        });
    }
    out
}

/// The restarts inside [from, to]: (time, is a reboot) for every run after
/// the first the database knows.
pub(crate) fn restarts_in(runs: &[RunRow], from: f64, to: f64) -> Vec<(f64, bool)> {
    let mut sorted: Vec<&RunRow> = runs.iter().collect();
    sorted.sort_by(|a, b| a.started.total_cmp(&b.started).then(a.id.cmp(&b.id)));
    sorted
        .windows(2)
        .filter(|w| w[1].started >= from && w[1].started <= to)
        .map(|w| (w[1].started, w[1].boot_id != w[0].boot_id))
        .collect()
}

fn restarts(limit: u64, runs: &[RunRow], from: f64, to: f64) -> Verdict {
    let r = restarts_in(runs, from, to);
    let reboots = r.iter().filter(|x| x.1).count();
    let failed_at = r
        .get(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|x| x.0);
    Verdict {
        id: "restarts",
        subject: "daemon and device".into(),
        status: if runs.is_empty() {
            Status::NotMeasured
        } else if failed_at.is_some() {
            Status::Fail
        } else {
            Status::Pass
        },
        limit: limit as f64,
        measured: (!runs.is_empty()).then_some(r.len() as f64),
        unit: "count",
        failed_at,
        detail: format!(
            "{} (boot id changed), {}",
            crate::show::count(reboots, "reboot"),
            crate::show::count(r.len() - reboots, "daemon restart")
        ),
    }
}

fn memory_full(limit: f64, per_group: &BTreeMap<String, Vec<Point>>) -> Verdict {
    let mut max: Option<(f64, &str, f64)> = None;
    let mut first_break: Option<(f64, &str)> = None;
    for (g, s) in per_group {
        for p in s.iter().filter(|p| p.v.is_finite()) {
            if max.is_none_or(|m| p.v > m.0) {
                max = Some((p.v, g, p.ts));
            }
            if p.v >= limit && first_break.is_none_or(|f| p.ts < f.0) {
                first_break = Some((p.ts, g));
            }
        }
    }
    Verdict {
        id: "memory_full_avg10",
        subject: "all groups".into(),
        status: match (max, first_break) {
            (None, _) => Status::NotMeasured,
            (Some(_), Some(_)) => Status::Fail,
            (Some(_), None) => Status::Pass,
        },
        limit,
        measured: max.map(|m| m.0),
        unit: "percent",
        failed_at: first_break.map(|f| f.0),
        detail: match (max, first_break) {
            (None, _) => "no PSI memory full was recorded".into(),
            (Some((v, g, _)), Some((_, fg))) => {
                format!("highest {v:.2} % in {g}; first at or above the limit in {fg}")
            }
            (Some((v, g, _)), None) => format!("highest {v:.2} % in {g}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pts(v: &[(f64, f64)]) -> Vec<Point> {
        v.iter().map(|&(ts, v)| Point { ts, v }).collect()
    }

    #[test]
    fn oom_counts_increments_and_a_recreated_group_in_full() {
        // 2 -> 3 (+1), 3 -> 1 (recreated: +1), 1 -> 4 (+3)
        let s = pts(&[(0.0, 2.0), (10.0, 3.0), (20.0, 1.0), (30.0, 4.0)]);
        assert_eq!(
            counter_increments(&s),
            vec![(10.0, 1), (20.0, 1), (30.0, 3)]
        );
        // Recreated with a zero counter: nothing new.
        let s = pts(&[(0.0, 5.0), (10.0, 0.0), (20.0, 0.0)]);
        assert!(counter_increments(&s).is_empty());
    }

    #[test]
    fn a_global_oom_kill_outside_the_groups_counts_once() {
        let mut m = BTreeMap::new();
        m.insert(
            "app".to_string(),
            pts(&[(1.0, 0.0), (2.0, 1.0), (3.0, 1.0)]),
        );
        // The machine's counter: the app's kill and one outside any group.
        m.insert(
            MACHINE.to_string(),
            pts(&[(1.0, 5.0), (2.0, 6.0), (3.0, 7.0)]),
        );
        let v = oom_kills(1, &m);
        assert_eq!(v.measured, Some(2.0));
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.failed_at, Some(3.0));
        assert_eq!(v.detail, "app: 1, outside the groups: 1");
        // The same kill seen by both counts once.
        m.insert(
            MACHINE.to_string(),
            pts(&[(1.0, 5.0), (2.0, 6.0), (3.0, 6.0)]),
        );
        let v = oom_kills(1, &m);
        assert_eq!((v.measured, v.status), (Some(1.0), Status::Pass));
        // Only the machine's counter recorded.
        m.remove("app");
        m.insert(MACHINE.to_string(), pts(&[(1.0, 5.0), (2.0, 5.0)]));
        assert_eq!(oom_kills(0, &m).status, Status::Pass);
    }

    #[test]
    fn oom_verdict_fails_at_the_first_kill_past_the_limit() {
        let mut m = BTreeMap::new();
        m.insert(
            "a".to_string(),
            pts(&[(0.0, 0.0), (10.0, 0.0), (20.0, 1.0)]),
        );
        m.insert("b".to_string(), pts(&[(0.0, 7.0), (15.0, 7.0)]));
        let v = oom_kills(0, &m);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.measured, Some(1.0));
        assert_eq!(v.failed_at, Some(20.0));
        assert!(v.detail.contains("a: 1"), "{}", v.detail);
        let v = oom_kills(1, &m);
        assert_eq!(v.status, Status::Pass);
        // Kills before the window (b's 7) never count.
        m.remove("a");
        assert_eq!(oom_kills(0, &m).status, Status::Pass);
    }

    #[test]
    fn growth_is_median_last_hour_minus_median_first_hour() {
        // 10 h at 60 s: 100 MB flat, then 200 MB in the last 2 hours, with
        // one 1 GB spike in the first hour that the median ignores.
        let mut s = Vec::new();
        for i in 0..=600 {
            let ts = f64::from(i) * 60.0;
            let mut v = if ts >= 8.0 * HOUR { 200e6 } else { 100e6 };
            if i == 5 {
                v = 1e9;
            }
            s.push(Point { ts, v });
        }
        assert_eq!(growth(&s), Some(100e6));
        let at = growth_broken_at(&s, 50e6).unwrap();
        // The trailing hour's median passes 150 MB half an hour after the step.
        assert!(
            at > 8.0 * HOUR && at <= 8.6 * HOUR,
            "{at} not just after the step"
        );
        let v = growth_verdict("group g".into(), &s, 50 << 20);
        assert_eq!(v.status, Status::Fail);
        let v = growth_verdict("group g".into(), &s, 200 << 20);
        assert_eq!(v.status, Status::Pass);
        assert_eq!(v.failed_at, None);
    }

    #[test]
    fn growth_of_a_short_series_compares_thirds_and_one_sample_is_not_measured() {
        let s = pts(&[(0.0, 1.0), (10.0, 1.0), (20.0, 5.0), (30.0, 5.0)]);
        assert_eq!(growth_window(30.0), 10.0);
        assert_eq!(growth(&s), Some(4.0));
        assert_eq!(growth(&pts(&[(0.0, 1.0)])), None);
        let v = growth_verdict("process x".into(), &[], 1);
        assert_eq!(v.status, Status::NotMeasured);
    }

    #[test]
    fn the_thermal_limit_scales_with_the_span() {
        assert_eq!(thermal_allowance(10, THERMAL_PERIOD), 10.0);
        assert_eq!(thermal_allowance(10, THERMAL_PERIOD / 2.0), 5.0);
        assert_eq!(thermal_allowance(10, 0.0), 0.0);
        let c = ReportCriteria {
            thermal_events_per_72h: 2,
            ..Default::default()
        };
        let mut i = Inputs {
            from: 0.0,
            to: 72.0 * HOUR,
            ..Default::default()
        };
        // Nothing recorded at all: not measured; a run without episode: 0, a pass.
        let v = thermal(&c, &i);
        assert_eq!(v[0].status, Status::NotMeasured);
        i.runs.push(RunRow {
            id: 1,
            started: 0.0,
            boot_id: "b".into(),
        });
        let v = thermal(&c, &i);
        assert_eq!((v[0].status, v[0].measured), (Status::Pass, Some(0.0)));
        // Every run said it watched no cpufreq policy: nothing can throttle,
        // so 0 episodes is no measurement, never a pass.
        i.no_cpufreq = true;
        let v = thermal(&c, &i);
        assert_eq!(v[0].status, Status::NotMeasured, "{}", v[0].detail);
        assert!(v[0].detail.contains("no cpufreq policy"), "{}", v[0].detail);
        i.no_cpufreq = false;
        let starts: Vec<f64> = (0..7).map(|n| f64::from(10 * n + 5) * HOUR).collect();
        i.throttle.insert("policy7".into(), starts);
        i.throttle.insert("policy0".into(), vec![HOUR]);
        let v = thermal(&c, &i);
        assert_eq!(v[0].subject, "cpufreq policy0");
        assert_eq!(v[0].status, Status::Pass);
        assert_eq!(v[1].measured, Some(7.0));
        assert_eq!(v[1].status, Status::Fail);
        // The third episode (at 25 h) is the first one past 2.
        assert_eq!(v[1].failed_at, Some(25.0 * HOUR));
    }

    #[test]
    fn restarts_are_runs_after_the_first_and_reboots_are_boot_id_changes() {
        let r = |id: i64, started: f64, boot: &str| RunRow {
            id,
            started,
            boot_id: boot.into(),
        };
        let runs = vec![r(1, 0.0, "A"), r(3, 200.0, "B"), r(2, 100.0, "A")];
        assert_eq!(
            restarts_in(&runs, 0.0, 1000.0),
            vec![(100.0, false), (200.0, true)]
        );
        // Only those inside the window.
        assert_eq!(restarts_in(&runs, 150.0, 1000.0), vec![(200.0, true)]);
        let v = restarts(0, &runs, 0.0, 1000.0);
        assert_eq!((v.status, v.failed_at), (Status::Fail, Some(100.0)));
        assert_eq!(v.detail, "1 reboot (boot id changed), 1 daemon restart");
        let v = restarts(2, &runs, 0.0, 1000.0);
        assert_eq!(v.status, Status::Pass);
        assert_eq!(restarts(0, &[], 0.0, 1.0).status, Status::NotMeasured);
    }

    #[test]
    fn memory_full_fails_at_the_first_sample_at_the_limit() {
        let mut m = BTreeMap::new();
        m.insert("a".to_string(), pts(&[(0.0, 1.0), (30.0, 6.0)]));
        m.insert(MACHINE.to_string(), pts(&[(20.0, 5.0), (40.0, 0.0)]));
        let v = memory_full(5.0, &m);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.measured, Some(6.0));
        assert_eq!(v.failed_at, Some(20.0));
        let v = memory_full(6.5, &m);
        assert_eq!(v.status, Status::Pass);
    }

    #[test]
    fn judge_lists_every_criterion() {
        let i = Inputs::default();
        let v = judge(&ReportCriteria::default(), &i);
        let ids: Vec<_> = v.iter().map(|v| v.id).collect();
        assert_eq!(
            ids,
            [
                "oom_kills",
                "memory_growth",
                "thermal_throttling",
                "restarts",
                "memory_full_avg10",
                "critical_exits"
            ]
        );
        assert!(passed(&v));
    }

    proptest! {
        /// A constant series plus a step of `d` in the second half grows by
        /// exactly `d`, whatever the sampling; spikes shorter than a third
        /// of a window never change it.
        #[test]
        fn growth_sees_a_step_not_a_spike(
            base in 0.0f64..1e10,
            d in -1e9f64..1e9,
            n in 20usize..400,
            period in 1.0f64..120.0,
            spike_at in 0usize..20,
        ) {
            let mut s: Vec<Point> = (0..n)
                .map(|i| {
                    let ts = i as f64 * period;
                    Point { ts, v: if i >= n / 2 { base + d } else { base } }
                })
                .collect();
            s[spike_at % n].v = 1e15;
            let g = growth(&s).unwrap();
            prop_assert!((g - d).abs() <= 1e-6 * (base.abs() + d.abs() + 1.0), "{} vs {}", g, d);
        }

        /// The OOM count of any counter series is the sum of its rises, and
        /// a drop (recreation) never makes it negative or loses kills.
        #[test]
        fn oom_count_is_sum_of_rises(v in proptest::collection::vec(0u32..50, 0..60)) {
            let s: Vec<Point> = v.iter().enumerate()
                .map(|(i, &x)| Point { ts: i as f64, v: f64::from(x) })
                .collect();
            let want: u64 = v.windows(2)
                .map(|w| if w[1] >= w[0] { u64::from(w[1] - w[0]) } else { u64::from(w[1]) })
                .sum();
            let got: u64 = counter_increments(&s).iter().map(|x| x.1).sum();
            prop_assert_eq!(got, want);
        }

        /// Restarts: one per run after the first, whatever the order given.
        #[test]
        fn restarts_count_runs_after_the_first(n in 0usize..20, seed in 0u64..1000) {
            let mut runs: Vec<RunRow> = (0..n)
                .map(|i| RunRow { id: i as i64, started: i as f64 * 10.0, boot_id: format!("b{}", i % 3) })
                .collect();
            runs.rotate_left((seed as usize) % n.max(1));
            prop_assert_eq!(restarts_in(&runs, f64::MIN, f64::MAX).len(), n.saturating_sub(1));
        }
    }
}
