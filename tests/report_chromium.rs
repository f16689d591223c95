//! `cgwarden report` end to end: a synthetic flight
//! recorder database made from the real schema, the report command run as
//! a user runs it, and the HTML rendered by headless Chromium.
//!
//! How the page is checked (docs/report.md, "How it is tested"):
//! - `--dump-dom` gives the DOM after loading; the verdict table must have a
//!   row per criterion (`data-criterion=...`) with its PASS/FAIL;
//! - `--enable-logging=stderr --v=0` makes Chromium print every console
//!   message as a `:CONSOLE:` line on stderr; the page has no script, so any
//!   such line (an error, a blocked resource) fails the test. A page with a
//!   deliberate console error proves the check sees one;
//! - `--screenshot` renders a PNG (saved to CGWARDEN_REPORT_PNG when set:
//!   that is how docs/report.png is made).
//!
//! Chromium missing is a failure, not a skip: tests/run-all.sh installs it.
#![cfg(feature = "report")]

use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

mod support;
use support::{chromium, BIN};

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// group, memory some, memory full, cpu some, memory.current, .high, .max
type GroupRow<'a> = (&'a str, f64, f64, f64, i64, Option<i64>, Option<i64>);

/// A 72-hour soak of a vision cell, one sample a minute: three groups, a
/// memory-pressure rule that fires twice and raises inference's
/// memory.high, one named process and one thermal zone. It passes every
/// criterion of [`POLICY`].
fn soak_db(path: &Path) -> (Connection, f64) {
    let db = Connection::open(path).unwrap();
    db.execute_batch(cgwarden::testing::SCHEMA).unwrap();
    let end = now() - 30.0;
    let t0 = end - 72.0 * 3600.0;
    db.execute_batch(
        "INSERT INTO meta VALUES ('schema_version','1'),('product','iq9100-vision-cell'),\
         ('created','0');",
    )
    .unwrap();
    db.execute(
        "INSERT INTO runs VALUES (1, ?1, 'c0ffee-boot', 412, 'iq9100-vision-cell', 'ab12', '0.1.0')",
        params![t0 - 60.0],
    )
    .unwrap();
    let tx = db.unchecked_transaction().unwrap();
    let mut high = 3i64 << 30;
    for m in 0..(72 * 60) {
        let ts = t0 + f64::from(m) * 60.0;
        let h = f64::from(m) / 60.0;
        // Two pressure episodes in inference, at 20 h and 50 h.
        let episode = |c: f64| (-((h - c) / 0.5).powi(2)).exp();
        let mem_some = 2.0 + 35.0 * (episode(20.0) + episode(50.0)) + (h * 7.3).sin().abs();
        let mem_full = mem_some / 12.0;
        let cpu = 8.0 + 4.0 * (h * 0.9).sin().abs();
        let daily = (h / 24.0 * std::f64::consts::TAU).sin();
        let cur = (2.2e9 + 1.5e8 * daily + 3e8 * (episode(20.0) + episode(50.0))) as i64;
        if (h - 20.0).abs() < 1.0 / 120.0 || (h - 50.0).abs() < 1.0 / 120.0 {
            let old = high;
            high += 512 << 20;
            for (kind, state) in [("rule", "pending"), ("rule", "active")] {
                tx.execute(
                    "INSERT INTO events (ts, run, kind, rule, state) VALUES (?1, 1, ?2, \
                     'inference-memory-pressure', ?3)",
                    params![
                        ts - if state == "pending" { 30.0 } else { 0.0 },
                        kind,
                        state
                    ],
                )
                .unwrap();
            }
            tx.execute(
                "INSERT INTO events (ts, run, kind, knob, old, new, cause) VALUES (?1, 1, 'write', \
                 'inference.memory.high', ?2, ?3, 'rule inference-memory-pressure')",
                params![ts + 1.0, old.to_string(), high.to_string()],
            )
            .unwrap();
            tx.execute(
                "INSERT INTO events (ts, run, kind, rule, state) VALUES (?1, 1, 'rule', \
                 'inference-memory-pressure', 'idle')",
                params![ts + 1800.0],
            )
            .unwrap();
        }
        let rows: [GroupRow; 3] = [
            ("inference", mem_some, mem_full, cpu, cur, Some(high), None),
            (
                "vision",
                1.0 + (h * 3.1).sin().abs(),
                0.1,
                15.0 + 5.0 * (h * 1.7).sin(),
                (1.1e9 + 5e7 * daily) as i64,
                Some(3584 << 20),
                Some(4 << 30),
            ),
            (
                "system",
                mem_some / 3.0,
                mem_full / 3.0,
                5.0,
                (5.0e9 + 2e8 * daily) as i64,
                None,
                None,
            ),
        ];
        for (g, ms, mf, c, cur, hi, mx) in rows {
            tx.execute(
                "INSERT INTO samples (ts, run, grp, cpu_some_avg10, cpu_full_avg10, \
                 memory_some_avg10, memory_full_avg10, io_some_avg10, io_full_avg10, \
                 memory_current, memory_high, memory_max, ev_low, ev_high, ev_max, ev_oom, \
                 ev_oom_kill, ev_oom_group_kill) \
                 VALUES (?1, 1, ?2, ?3, 0, ?4, ?5, 0.5, 0.1, ?6, ?7, ?8, 0, 0, 0, 0, 0, 0)",
                params![ts, g, c, ms, mf, cur, hi, mx],
            )
            .unwrap();
        }
        tx.execute(
            "INSERT INTO processes (ts, run, comm, pid, rss, pss) \
             VALUES (?1, 1, 'camera_pipeline', 900, ?2, ?3)",
            params![
                ts,
                (4.2e8 + 1e7 * daily) as i64,
                (2.5e8 + 1e7 * daily) as i64
            ],
        )
        .unwrap();
        tx.execute(
            "INSERT INTO thermal VALUES (?1, 1, 'cpu-0-0-usr', ?2, 95000)",
            params![ts, (62_000.0 + 8_000.0 * daily) as i64],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    (db, end)
}

const POLICY: &str = "version: 1
product: iq9100-vision-cell
groups:
  inference: {}
  vision: {}
report:
  criteria:
    processes: [camera_pipeline]
    thermal_zones: [cpu-0-0-usr]
";

fn report(dir: &Path, db: &Path, extra: &[&str]) -> (Output, PathBuf) {
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let out = dir.join("report.html");
    let o = Command::new(BIN)
        .arg("report")
        .arg("--policy")
        .arg(&policy)
        .arg("--db")
        .arg(db)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .expect("run cgwarden report");
    (o, out)
}

/// The console messages Chromium logged (`:CONSOLE:` lines).
fn console(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect()
}

/// The verdict table's rows as (criterion, subject cell, result cell).
fn verdict_rows(dom: &str) -> Vec<(String, String)> {
    dom.split("<tr data-criterion=\"")
        .skip(1)
        .map(|r| {
            let id = r.split('"').next().unwrap_or("").to_string();
            let result = ["PASS", "FAIL", "not measured"]
                .iter()
                .find(|w| {
                    r.split("</tr>")
                        .next()
                        .unwrap_or("")
                        .contains(&format!(">{w}<"))
                })
                .map(|w| w.to_string())
                .unwrap_or_default();
            (id, result)
        })
        .collect()
}

#[test]
fn a_clean_soak_renders_in_chromium_with_every_criterion_passing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("recorder.db");
    let _ = soak_db(&db);
    let (o, page) = report(dir.path(), &db, &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let dom = chromium(dir.path(), &["--dump-dom"], &page);
    assert!(
        console(&dom).is_empty(),
        "console messages: {:?}",
        console(&dom)
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    let rows = verdict_rows(&html);
    for id in [
        "oom_kills",
        "memory_growth",
        "thermal_throttling",
        "restarts",
        "memory_full_avg10",
    ] {
        assert!(
            rows.iter().any(|(r, v)| r == id && v == "PASS"),
            "{id} not PASS in {rows:?}"
        );
    }
    // Growth is judged per group (not system) and for the named process.
    let growth = rows.iter().filter(|(r, _)| r == "memory_growth").count();
    assert_eq!(growth, 3, "{rows:?}");
    assert!(html.contains("id=\"overall\" class=\"overall pass\""));
    // The charts are there, with the rule firings marked.
    assert!(html.matches("<svg").count() >= 6, "charts missing");
    assert!(html.contains("class=\"mk\""), "no event marks");

    let png = dir.path().join("report.png");
    let shot = chromium(
        dir.path(),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1200,2000",
            "--hide-scrollbars",
        ],
        &page,
    );
    assert!(console(&shot).is_empty(), "{:?}", console(&shot));
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    assert!(bytes.len() > 20_000, "a blank page? {} bytes", bytes.len());
    if let Some(keep) = std::env::var_os("CGWARDEN_REPORT_PNG") {
        std::fs::copy(&png, keep).unwrap();
    }
}

#[test]
fn an_injected_oom_kill_turns_its_criterion_fail_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("recorder.db");
    let (conn, end) = soak_db(&db);
    // The kernel kills one process in vision ten hours before the end.
    conn.execute(
        "UPDATE samples SET ev_oom_kill = 1, ev_oom = 1 WHERE grp = 'vision' AND ts >= ?1",
        params![end - 10.0 * 3600.0],
    )
    .unwrap();
    drop(conn);
    let (o, page) = report(dir.path(), &db, &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL OOM kills"), "{stdout}");
    let dom = chromium(dir.path(), &["--dump-dom"], &page);
    assert!(console(&dom).is_empty(), "{:?}", console(&dom));
    let html = String::from_utf8_lossy(&dom.stdout);
    let rows = verdict_rows(&html);
    assert!(
        rows.iter().any(|(r, v)| r == "oom_kills" && v == "FAIL"),
        "{rows:?}"
    );
    assert!(rows.iter().any(|(r, v)| r == "restarts" && v == "PASS"));
    assert!(html.contains("id=\"overall\" class=\"overall fail\""));

    // The JSON form says the same, with the moment it failed.
    let (o, out) = report(dir.path(), &db, &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    assert_eq!(v["passed"], false);
    let oom = v["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "oom_kills")
        .unwrap();
    assert_eq!(oom["status"], "fail");
    assert_eq!(oom["measured"], 1.0);
    assert!(oom["failed_at"].as_str().unwrap().ends_with('Z'), "{oom}");
}

#[test]
fn the_console_check_sees_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><script>console.error('boom')</script></body></html>",
    )
    .unwrap();
    let o = chromium(dir.path(), &["--dump-dom"], &page);
    let c = console(&o);
    assert!(c.iter().any(|l| l.contains("boom")), "{c:?}");
}

#[test]
fn a_missing_database_exits_4_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nowhere/recorder.db");
    let (o, _) = report(dir.path(), &db, &[]);
    assert_eq!(o.status.code(), Some(4));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&db.display().to_string()), "{err}");
}
