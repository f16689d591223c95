//! Reading the flight recorder (schema v1, `src/observe/schema.sql`) for
//! `cgwarden report`: the database is opened read-only (the daemon may be
//! writing it), and every row is taken as it comes — a NULL or an odd value
//! becomes "not recorded", never a panic.

use super::verdict::{Inputs, Point, RunRow, ThermalPoint};
use rusqlite::{Connection, OpenFlags, Row};
use std::collections::BTreeMap;
use std::path::Path;

/// One group sample, the columns the report draws.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sample {
    pub(crate) ts: f64,
    pub(crate) cpu_some: Option<f64>,
    pub(crate) memory_some: Option<f64>,
    pub(crate) memory_full: Option<f64>,
    pub(crate) io_some: Option<f64>,
    pub(crate) memory_current: Option<i64>,
    pub(crate) memory_high: Option<i64>,
    pub(crate) memory_max: Option<i64>,
    pub(crate) ev_oom_kill: Option<i64>,
}

/// An event row: the recorder's, read back.
pub(crate) use crate::observe::recorder::EventRow;

/// What the report shows, for the window [from, to].
#[derive(Clone, Debug, Default)]
pub(crate) struct Data {
    pub(crate) from: f64,
    pub(crate) to: f64,
    pub(crate) product: Option<String>,
    pub(crate) schema_version: Option<String>,
    pub(crate) runs: Vec<RunRow>,
    /// Per group, by time.
    pub(crate) groups: BTreeMap<String, Vec<Sample>>,
    /// Per comm: summed RSS by time.
    pub(crate) processes: BTreeMap<String, Vec<Point>>,
    /// Per comm: summed PSS by time, where every process of the
    /// comm had it read; empty for a database from before the column.
    pub(crate) pss: BTreeMap<String, Vec<Point>>,
    /// `memstat` rows whose name starts `fragmentation.`, by time.
    pub(crate) fragmentation: BTreeMap<String, Vec<Point>>,
    pub(crate) thermal: BTreeMap<String, Vec<ThermalPoint>>,
    /// By time.
    pub(crate) events: Vec<EventRow>,
    /// Per run start, any time: the cpufreq policies the daemon watched
    /// for throttling (`cpufreq` events; none in an older database).
    pub(crate) cpufreq_watched: Vec<String>,
}

/// Why the database could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// No file there.
    Missing,
    /// It exists and could not be opened or queried.
    Unreadable(String),
}

fn f(row: &Row, i: usize) -> Option<f64> {
    row.get::<_, Option<f64>>(i)
        .ok()
        .flatten()
        .filter(|v| v.is_finite())
}

fn n(row: &Row, i: usize) -> Option<i64> {
    match row.get_ref(i).ok()? {
        rusqlite::types::ValueRef::Integer(v) => Some(v),
        rusqlite::types::ValueRef::Real(v) if v.is_finite() => Some(v as i64),
        _ => None,
    }
}

fn s(row: &Row, i: usize) -> Option<String> {
    match row.get_ref(i).ok()? {
        rusqlite::types::ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        rusqlite::types::ValueRef::Integer(v) => Some(v.to_string()),
        rusqlite::types::ValueRef::Real(v) => Some(v.to_string()),
        _ => None,
    }
}

/// Whether `table` has `column` (a database from an older cgwarden may
/// lack either).
fn has_column(db: &Connection, table: &str, column: &str) -> bool {
    db.query_row(
        "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .unwrap_or(false)
}

/// Reads the window [from, to] of the database at `path`.
pub(crate) fn read(path: &Path, from: f64, to: f64) -> Result<Data, ReadError> {
    if !path.exists() {
        return Err(ReadError::Missing);
    }
    let bad = |e: rusqlite::Error| ReadError::Unreadable(e.to_string());
    let db = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(bad)?;
    // The recorder commits once per interval; wait out a commit in progress.
    db.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(bad)?;
    let mut d = Data {
        from,
        to,
        ..Default::default()
    };
    {
        let mut st = db.prepare("SELECT key, value FROM meta").map_err(bad)?;
        let rows = st.query_map([], |r| Ok((s(r, 0), s(r, 1)))).map_err(bad)?;
        for (k, v) in rows.flatten() {
            match k.as_deref() {
                Some("product") => d.product = v,
                Some("schema_version") => d.schema_version = v,
                _ => {}
            }
        }
    }
    {
        let mut st = db
            .prepare("SELECT id, started, boot_id FROM runs ORDER BY started, id")
            .map_err(bad)?;
        let rows = st
            .query_map([], |r| {
                Ok(RunRow {
                    id: n(r, 0).unwrap_or(0),
                    started: f(r, 1).unwrap_or(f64::NAN),
                    boot_id: s(r, 2).unwrap_or_default(),
                })
            })
            .map_err(bad)?;
        d.runs = rows.flatten().filter(|r| r.started.is_finite()).collect();
    }
    {
        let mut st = db
            .prepare(
                "SELECT ts, grp, cpu_some_avg10, memory_some_avg10, memory_full_avg10, \
                 io_some_avg10, memory_current, memory_high, memory_max, ev_oom_kill \
                 FROM samples WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts",
            )
            .map_err(bad)?;
        let rows = st
            .query_map([from, to], |r| {
                Ok((
                    s(r, 1),
                    Sample {
                        ts: f(r, 0).unwrap_or(f64::NAN),
                        cpu_some: f(r, 2),
                        memory_some: f(r, 3),
                        memory_full: f(r, 4),
                        io_some: f(r, 5),
                        memory_current: n(r, 6),
                        memory_high: n(r, 7),
                        memory_max: n(r, 8),
                        ev_oom_kill: n(r, 9),
                    },
                ))
            })
            .map_err(bad)?;
        let v1 = d.schema_version.as_deref().map(str::trim) == Some("1");
        for (g, smp) in rows.flatten() {
            if let (Some(g), true) = (g, smp.ts.is_finite()) {
                let g = if v1 {
                    crate::observe::host_name_of_v1(&g).into_owned()
                } else {
                    g
                };
                d.groups.entry(g).or_default().push(smp);
            }
        }
    }
    {
        // `pss` is absent from databases written before it.
        let pss = if has_column(&db, "processes", "pss") {
            "CASE WHEN count(pss) = count(*) THEN SUM(pss) END"
        } else {
            "NULL"
        };
        let mut st = db
            .prepare(&format!(
                "SELECT ts, comm, SUM(rss), {pss} FROM processes WHERE ts >= ?1 AND ts <= ?2 \
                 GROUP BY ts, comm ORDER BY ts"
            ))
            .map_err(bad)?;
        let rows = st
            .query_map([from, to], |r| Ok((f(r, 0), s(r, 1), n(r, 2), n(r, 3))))
            .map_err(bad)?;
        for (ts, comm, rss, pss) in rows.flatten() {
            let (Some(ts), Some(comm)) = (ts, comm) else {
                continue;
            };
            if let Some(pss) = pss {
                d.pss
                    .entry(comm.clone())
                    .or_default()
                    .push(Point { ts, v: pss as f64 });
            }
            if let Some(rss) = rss {
                d.processes
                    .entry(comm)
                    .or_default()
                    .push(Point { ts, v: rss as f64 });
            }
        }
    }
    if has_column(&db, "memstat", "name") {
        let mut st = db
            .prepare(
                "SELECT ts, name, value FROM memstat WHERE ts >= ?1 AND ts <= ?2 \
                 AND name LIKE 'fragmentation.%' ORDER BY ts",
            )
            .map_err(bad)?;
        let rows = st
            .query_map([from, to], |r| Ok((f(r, 0), s(r, 1), f(r, 2))))
            .map_err(bad)?;
        for (ts, name, v) in rows.flatten() {
            if let (Some(ts), Some(name), Some(v)) = (ts, name, v) {
                d.fragmentation
                    .entry(name)
                    .or_default()
                    .push(Point { ts, v });
            }
        }
    }
    {
        let mut st = db
            .prepare(
                "SELECT ts, zone, temp, trip FROM thermal WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts",
            )
            .map_err(bad)?;
        let rows = st
            .query_map([from, to], |r| Ok((f(r, 0), s(r, 1), n(r, 2), n(r, 3))))
            .map_err(bad)?;
        for (ts, zone, temp, trip) in rows.flatten() {
            if let (Some(ts), Some(zone), Some(temp)) = (ts, zone, temp) {
                d.thermal
                    .entry(zone)
                    .or_default()
                    .push(ThermalPoint { ts, temp, trip });
            }
        }
    }
    {
        let mut st = db
            .prepare("SELECT detail FROM events WHERE kind = 'cpufreq'")
            .map_err(bad)?;
        let rows = st.query_map([], |r| Ok(s(r, 0))).map_err(bad)?;
        d.cpufreq_watched = rows.flatten().map(Option::unwrap_or_default).collect();
    }
    {
        let mut st = db
            .prepare(
                "SELECT ts, kind, rule, state, knob, old, new, cause, detail FROM events \
                 WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts",
            )
            .map_err(bad)?;
        let rows = st
            .query_map([from, to], |r| {
                Ok(EventRow {
                    ts: f(r, 0).unwrap_or(f64::NAN),
                    kind: s(r, 1).unwrap_or_default(),
                    rule: s(r, 2),
                    state: s(r, 3),
                    knob: s(r, 4),
                    old: s(r, 5),
                    new: s(r, 6),
                    cause: s(r, 7),
                    detail: s(r, 8),
                })
            })
            .map_err(bad)?;
        d.events = rows.flatten().filter(|e| e.ts.is_finite()).collect();
    }
    Ok(d)
}

/// The shortest span a chart shows (one sample would make a zero-width
/// axis).
const MIN_CHART_SPAN: f64 = 60.0;

impl Data {
    /// What the charts span: the samples' first to last time (at least
    /// [`MIN_CHART_SPAN`]), within the window; the window when there are none.
    /// So a first short run of a 72 h window is not a strip at the right edge
    /// of empty frames.
    pub(crate) fn chart_span(&self) -> (f64, f64) {
        let times = self
            .groups
            .values()
            .flat_map(|s| s.iter().map(|x| x.ts))
            .chain(self.processes.values().flat_map(|p| p.iter().map(|x| x.ts)))
            .chain(self.thermal.values().flat_map(|p| p.iter().map(|x| x.ts)))
            .filter(|t| t.is_finite());
        let (first, last) = times.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), t| {
            (a.min(t), b.max(t))
        });
        if !first.is_finite() {
            return (self.from, self.to);
        }
        let from = first.max(self.from);
        let to = last.min(self.to).max(from + MIN_CHART_SPAN);
        (from, to)
    }

    /// The verdicts' view of the data.
    pub(crate) fn inputs(&self) -> Inputs {
        let series = |g: &[Sample], pick: fn(&Sample) -> Option<f64>| -> Vec<Point> {
            g.iter()
                .filter_map(|s| pick(s).map(|v| Point { ts: s.ts, v }))
                .collect()
        };
        let mut i = Inputs {
            from: self.from,
            to: self.to,
            processes: self.processes.clone(),
            pss: self.pss.clone(),
            runs: self.runs.clone(),
            no_cpufreq: !self.cpufreq_watched.is_empty()
                && self.cpufreq_watched.iter().all(|p| p.trim().is_empty()),
            ..Default::default()
        };
        // Throttle episodes, one `throttle` event each.
        for e in self.events.iter().filter(|e| e.kind == "throttle") {
            let policy = e
                .knob
                .as_deref()
                .map(|k| k.strip_prefix("cpufreq.").unwrap_or(k))
                .unwrap_or("?");
            i.throttle.entry(policy.to_string()).or_default().push(e.ts);
        }
        for (g, s) in &self.groups {
            i.oom_kill
                .insert(g.clone(), series(s, |s| s.ev_oom_kill.map(|v| v as f64)));
            i.memory
                .insert(g.clone(), series(s, |s| s.memory_current.map(|v| v as f64)));
            i.memory_full
                .insert(g.clone(), series(s, |s| s.memory_full));
        }
        i.critical_exits = self
            .events
            .iter()
            .filter(|e| e.kind == "critical_exit")
            .map(|e| (e.ts, e.detail.clone().unwrap_or_default()))
            .collect();
        i
    }
}
