//! The recorder's `kpi` table (schema in `schema.sql`): written
//! every recorder interval, one row per KPI name that had samples, and
//! read back by `cgwarden report` for a window of any length (the rows'
//! histograms merge exactly).
//!
//! Disk: a row is its 4 numbers, name, unit and the bucket blob (about
//! 2 bytes per non-empty bucket plus 1–3 bytes of count): a latency KPI
//! spread over ~60 buckets is ~250 bytes with SQLite's overhead and the
//! index, so ~2.2 MB per name per day at the default 10 s interval (see
//! docs/kpi.md for the measured number). The table is pruned with the
//! others by `recorder.retention` and `recorder.max_size`.

use super::{Hist, Unit};
use rusqlite::{params, Connection};
#[cfg(any(test, feature = "report"))]
use std::collections::BTreeMap;

/// Writes one interval's rows.
pub(crate) fn insert(
    tx: &Connection,
    run: i64,
    ts: f64,
    rows: &[(String, Unit, Hist)],
) -> rusqlite::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut st = tx.prepare_cached(
        "INSERT INTO kpi (ts, run, name, unit, count, sum, sumsq, min, max, buckets) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (name, unit, h) in rows {
        st.execute(params![
            ts,
            run,
            name,
            unit.name(),
            i64::try_from(h.count).unwrap_or(i64::MAX),
            h.sum,
            h.sumsq,
            h.min,
            h.max,
            h.encode()
        ])?;
    }
    Ok(())
}

/// KPIs by name with their merged histograms.
#[cfg(any(test, feature = "report"))]
pub(crate) type Merged = BTreeMap<String, (Unit, Hist)>;

/// Every KPI's rows within `[from, to]` merged, by name; rows that do not
/// decode (a damaged blob, text in a number column) are skipped and
/// counted in the second value.
#[cfg(any(test, feature = "report"))]
pub(crate) fn window(conn: &Connection, from: f64, to: f64) -> rusqlite::Result<(Merged, u64)> {
    let mut out = Merged::new();
    let mut skipped = 0u64;
    // An older database has no kpi table: no KPI.
    let has: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'kpi'",
        [],
        |r| r.get(0),
    )?;
    if has == 0 {
        return Ok((out, 0));
    }
    let mut st = conn.prepare(
        "SELECT name, unit, count, sum, sumsq, min, max, buckets FROM kpi WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts",
    )?;
    let mut rows = st.query(params![from, to])?;
    while let Some(r) = rows.next()? {
        let row = (|| -> Option<(String, Unit, Hist)> {
            let name: String = r.get(0).ok()?;
            let unit = Unit::from_name(&r.get::<_, String>(1).ok()?)?;
            Some((name, unit, hist_of(r)?))
        })();
        match row {
            Some((name, unit, h)) => match out.get_mut(&name) {
                Some((u, acc)) if *u == unit => acc.merge(&h),
                Some(_) => skipped += 1,
                None => {
                    out.insert(name, (unit, h));
                }
            },
            None => skipped += 1,
        }
    }
    Ok((out, skipped))
}

/// A `kpi` row's histogram from columns 2–7 (`count, sum, sumsq, min, max,
/// buckets`, as both queries here select them); none when it does not decode.
#[cfg(any(test, feature = "report"))]
fn hist_of(r: &rusqlite::Row) -> Option<Hist> {
    let count = u64::try_from(r.get::<_, i64>(2).ok()?).ok()?;
    Hist::decode(
        &r.get::<_, Vec<u8>>(7).ok()?,
        count,
        r.get(3).ok()?,
        r.get(4).ok()?,
        r.get(5).ok()?,
        r.get(6).ok()?,
    )
}

/// Every row within `[from, to]`, in time order: (ts, name, histogram);
/// rows that do not decode are left out.
#[cfg(feature = "report")]
pub(crate) fn rows(
    conn: &Connection,
    from: f64,
    to: f64,
) -> rusqlite::Result<Vec<(f64, String, Hist)>> {
    let has: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'kpi'",
        [],
        |r| r.get(0),
    )?;
    let mut out = Vec::new();
    if has == 0 {
        return Ok(out);
    }
    let mut st = conn.prepare(
        "SELECT ts, name, count, sum, sumsq, min, max, buckets FROM kpi WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts",
    )?;
    let mut q = st.query(params![from, to])?;
    while let Some(r) = q.next()? {
        let row = (|| -> Option<(f64, String, Hist)> {
            Some((r.get(0).ok()?, r.get(1).ok()?, hist_of(r)?))
        })();
        out.extend(row);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_merge() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(crate::observe::SCHEMA).unwrap();
        let mut a = Hist::default();
        a.add(0.002, 10);
        let mut b = Hist::default();
        b.add(0.008, 1);
        insert(
            &conn,
            1,
            100.0,
            &[("loop".into(), Unit::Seconds, a.clone())],
        )
        .unwrap();
        insert(
            &conn,
            1,
            110.0,
            &[("loop".into(), Unit::Seconds, b.clone())],
        )
        .unwrap();
        // A damaged row is skipped, not fatal.
        conn.execute(
            "INSERT INTO kpi VALUES (105, 1, 'loop', 'seconds', 3, 1, 1, 0, 1, x'ff')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO kpi VALUES (106, 1, 'fps', 'bogus', 'text', 1, 1, 0, 1, x'00')",
            [],
        )
        .unwrap();
        let (w, skipped) = window(&conn, 0.0, 200.0).unwrap();
        assert_eq!(skipped, 2);
        let (u, h) = &w["loop"];
        assert_eq!(*u, Unit::Seconds);
        a.merge(&b);
        assert_eq!(h, &a);
        let (w, _) = window(&conn, 105.0, 200.0).unwrap();
        assert_eq!(w["loop"].1.count, 1);
    }
}
