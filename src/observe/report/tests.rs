//! `cgwarden report` on synthetic recorder databases made from the real
//! schema (`crate::observe::SCHEMA`): reading, verdicts end to end, the
//! formats, escaping and the exit statuses.

use super::*;
use rusqlite::{params, Connection};

/// A recorder database at `path` with the schema and `hours` of samples of
/// group `app` (and `system`) every minute, ending now.
pub(crate) fn synthetic(path: &Path, hours: u32) -> (Connection, f64) {
    let db = Connection::open(path).unwrap(); // test fixture
    db.execute_batch(crate::observe::SCHEMA).unwrap(); // test fixture
    let now = unix(SystemTime::now());
    let t0 = now - f64::from(hours) * 3600.0;
    db.execute(
        "INSERT INTO meta VALUES ('schema_version','1'),('product','soak <box>')",
        [],
    )
    .unwrap();
    db.execute(
        "INSERT INTO runs VALUES (1, ?1, 'boot-a', 100, 'soak', 'h', '0.1.0')",
        params![t0 - 10.0],
    )
    .unwrap();
    let tx = db.unchecked_transaction().unwrap();
    for m in 0..=(hours * 60) {
        let ts = t0 + f64::from(m) * 60.0;
        for g in ["app", "system"] {
            tx.execute(
                "INSERT INTO samples (ts, run, grp, cpu_some_avg10, memory_some_avg10, \
                 memory_full_avg10, io_some_avg10, memory_current, memory_high, memory_max, \
                 ev_oom_kill) VALUES (?1, 1, ?2, 3.0, 1.5, 0.5, 0.2, ?3, 300000000, NULL, 0)",
                params![ts, g, 100_000_000i64 + i64::from(m % 7) * 1000],
            )
            .unwrap();
        }
    }
    tx.commit().unwrap();
    (db, now)
}

fn opts(db: &Path, format: Format, out: Option<PathBuf>) -> Options {
    Options {
        db: db.to_path_buf(),
        since: Duration::from_secs(72 * 3600),
        out,
        format,
        criteria: ReportCriteria::default(),
    }
}

fn json_of(db: &Path) -> (u8, serde_json::Value) {
    let out = db.with_extension("json");
    let code = run(&opts(db, Format::Json, Some(out.clone())));
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    (code, serde_json::from_str(&text).unwrap_or_default())
}

fn status_of<'a>(v: &'a serde_json::Value, id: &str) -> Vec<&'a str> {
    v["criteria"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["id"] == id)
        .filter_map(|c| c["status"].as_str())
        .collect()
}

#[test]
fn a_quiet_soak_passes_every_criterion() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("recorder.db");
    let _ = synthetic(&p, 4);
    let (code, v) = json_of(&p);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["passed"], true);
    assert_eq!(status_of(&v, "oom_kills"), ["pass"]);
    assert_eq!(status_of(&v, "memory_growth"), ["pass"]);
    assert_eq!(status_of(&v, "restarts"), ["pass"]);
    assert_eq!(status_of(&v, "memory_full_avg10"), ["pass"]);
    assert_eq!(status_of(&v, "thermal_throttling"), ["pass"]);
    assert_eq!(v["product"], "soak <box>");
    // A schema version 1 database's machine row (`system`) reads as `host`.
    assert_eq!(v["data"]["groups"], json!(["app", "host"]));
}

#[test]
fn an_oom_kill_a_restart_a_leak_and_full_pressure_each_fail() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("recorder.db");
    let (db, now) = synthetic(&p, 4);
    db.execute(
        "UPDATE samples SET ev_oom_kill = 1 WHERE grp = 'app' AND ts > ?1",
        params![now - 3600.0],
    )
    .unwrap();
    let (code, v) = json_of(&p);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(status_of(&v, "oom_kills"), ["fail"]);
    assert_eq!(status_of(&v, "memory_growth"), ["pass"]);
    let oom = &v["criteria"][0];
    assert_eq!(oom["measured"], 1.0);
    assert!(oom["failed_at"].as_str().is_some(), "{oom}");

    db.execute(
        "INSERT INTO runs VALUES (2, ?1, 'boot-b', 200, 'soak', 'h', '0.1.0')",
        params![now - 1800.0],
    )
    .unwrap();
    db.execute(
        "UPDATE samples SET memory_current = memory_current + 80000000 WHERE grp = 'app' \
         AND ts > ?1",
        params![now - 5400.0],
    )
    .unwrap();
    db.execute(
        "UPDATE samples SET memory_full_avg10 = 7.5 WHERE grp = 'system' AND ts > ?1 AND ts < ?2",
        params![now - 600.0, now - 500.0],
    )
    .unwrap();
    let (code, v) = json_of(&p);
    assert_eq!(code, 1);
    for id in ["restarts", "memory_growth", "memory_full_avg10"] {
        assert_eq!(status_of(&v, id), ["fail"], "{id}: {v:#}");
    }
    let full = v["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "memory_full_avg10")
        .unwrap()
        .clone();
    assert_eq!(full["measured"], 7.5);
}

#[test]
fn database_strings_are_escaped_in_the_html() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("recorder.db");
    let (db, now) = synthetic(&p, 2);
    db.execute(
        "INSERT INTO events (ts, run, kind, rule, state, knob, old, new, cause, detail) \
         VALUES (?1, 1, 'rule', '<img src=x onerror=alert(1)>', 'active', NULL, NULL, NULL, \
         '\"&', '<b>')",
        params![now - 100.0],
    )
    .unwrap();
    db.execute(
        "INSERT INTO samples (ts, run, grp, memory_current) VALUES (?1, 1, '<script>x</script>', 1)",
        params![now - 50.0],
    )
    .unwrap();
    let out = dir.path().join("r.html");
    let code = run(&opts(&p, Format::Html, Some(out.clone())));
    assert_eq!(code, 0);
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(!h.contains("<img src=x"), "unescaped rule name");
    assert!(!h.contains("<script>"), "unescaped group name");
    assert!(!h.contains("<b>"), "unescaped detail");
    assert!(h.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(h.contains("soak &lt;box&gt;"));
    assert!(h.contains("<svg"));
    // Self-contained: no script, no external resource.
    assert!(!h.to_lowercase().contains("<script"));
    assert!(!h.contains("src=\"http") && !h.contains("href=\"http"));
}

#[test]
fn missing_and_unreadable_databases_exit_4_and_75() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("absent.db");
    assert_eq!(run(&opts(&p, Format::Json, None)), exit::UNREACHABLE);
    let p = dir.path().join("garbage.db");
    std::fs::write(&p, b"this is not an SQLite database, not even close....").unwrap();
    assert_eq!(run(&opts(&p, Format::Json, None)), exit::TEMPFAIL);
}

#[test]
fn odd_rows_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("recorder.db");
    let (db, now) = synthetic(&p, 1);
    // Text where numbers belong, NULLs everywhere, absurd times.
    db.execute_batch(&format!(
        "INSERT INTO samples (ts, run, grp, memory_current, ev_oom_kill, memory_full_avg10) \
         VALUES ({t}, 1, 'app', 'lots', 'x', 'y');
         INSERT INTO samples (ts, run, grp) VALUES ({t}, 1, 'empty');
         INSERT INTO thermal VALUES ({t}, 1, 'cpu', 90000, NULL);
         INSERT INTO thermal VALUES ({t}, 1, 'cpu', 95000, 85000);
         INSERT INTO processes VALUES ({t}, 1, 'worker', 1, -5, 'x');
         INSERT INTO processes VALUES ({t}, 1, 'worker', 2, 7, NULL);
         INSERT INTO runs VALUES (9, 1e300, 'z', 1, 'p', 'h', 'v');
         INSERT INTO events (ts, run, kind) VALUES ({t}, 1, '');",
        t = now - 10.0
    ))
    .unwrap();
    let mut o = opts(&p, Format::Html, Some(dir.path().join("r.html")));
    o.criteria.thermal_zones = vec!["cpu".into()];
    o.criteria.processes = vec!["worker".into()];
    let _ = run(&o);
    o.format = Format::Json;
    let _ = run(&o);
}

#[test]
fn locate_uses_the_policy_recorder_dir_under_root() {
    let dir = tempfile::tempdir().unwrap();
    let pol = dir.path().join("p.yaml");
    std::fs::write(
        &pol,
        "version: 1\nproduct: x\nsettings:\n  recorder: { dir: /var/lib/rec }\nreport:\n  criteria: { oom_kills: 3 }\ngroups:\n  a: {}\n",
    )
    .unwrap();
    let (p, c) = locate(None, &pol, Some(Path::new("/tmp/fake")));
    assert_eq!(p, Path::new("/tmp/fake/var/lib/rec/recorder.db"));
    assert_eq!(c.oom_kills, 3);
    let (p, _) = locate(None, &dir.path().join("none.yaml"), None);
    assert_eq!(p, Path::new("/var/lib/cgwarden/recorder.db"));
}

#[test]
fn an_empty_database_and_an_absurd_window_report_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("recorder.db");
    let db = Connection::open(&p).unwrap();
    db.execute_batch(crate::observe::SCHEMA).unwrap();
    drop(db);
    let mut o = opts(&p, Format::Html, Some(dir.path().join("r.html")));
    o.since = Duration::from_secs(u64::MAX / 4);
    assert_eq!(run(&o), exit::OK);
    let (code, v) = json_of(&p);
    assert_eq!(code, 0);
    for c in v["criteria"].as_array().unwrap() {
        assert_eq!(c["status"], "not_measured", "{c}");
    }
}

/// The charts span the data, not the whole `--since` window (a first short
/// run would be a strip at the right of empty frames).
#[test]
fn charts_span_the_data_not_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let (_c, now) = synthetic(&db, 1);
    let d = query::read(&db, now - 72.0 * 3600.0, now + 1.0).unwrap();
    let (from, to) = d.chart_span();
    assert!((from - (now - 3600.0)).abs() < 1.0, "{from} vs {now}");
    assert!((to - now).abs() < 1.0, "{to} vs {now}");
    let html = html::page("r.db", &d, &[], true);
    // The first x-axis label of a chart is the first sample's time (HH:MM
    // for a span under two days), not the window's start 72 h earlier.
    let first = when(from);
    let label = &first[11..16];
    assert!(
        html.contains(&format!("text-anchor=\"start\">{label}</text>")),
        "no axis label {label}"
    );
    assert!(
        html.contains("(1.0 h of data)"),
        "the header says the charts' span"
    );
    // No samples: the window.
    let empty = tempfile::tempdir().unwrap();
    let db = empty.path().join("e.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(crate::observe::SCHEMA).unwrap();
    let d = query::read(&db, 100.0, 200.0).unwrap();
    assert_eq!(d.chart_span(), (100.0, 200.0));
}

/// `memory_growth` per process from the recorder's PSS column;
/// RSS when a database has none (the detail says so).
#[test]
fn process_growth_is_judged_on_pss_and_falls_back_to_rss() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |db: &Connection, now: f64, pss_mib: &dyn Fn(u32) -> Option<i64>| {
        for m in 0..=240u32 {
            let ts = now - 4.0 * 3600.0 + f64::from(m) * 60.0;
            db.execute(
                "INSERT INTO processes (ts, run, comm, pid, rss, pss) VALUES (?1, 1, 'camd', 42, ?2, ?3)",
                params![ts, 300i64 << 20, pss_mib(m).map(|p| p << 20)],
            )
            .unwrap();
        }
    };
    let camd = |v: &serde_json::Value| {
        v["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "memory_growth" && c["subject"] == "process camd")
            .cloned()
            .unwrap_or_default()
    };
    // PSS grows 150 MiB while RSS is flat: fail, on PSS.
    let p = dir.path().join("grow.db");
    let (db, now) = synthetic(&p, 4);
    rows(&db, now, &|m| Some(40 + i64::from(m) * 150 / 240));
    let (code, v) = json_of(&p);
    let c = camd(&v);
    assert_eq!((code, c["status"].as_str()), (1, Some("fail")), "{c}");
    assert!(c["detail"].as_str().unwrap().starts_with("PSS"), "{c}");
    // PSS flat, read once a minute in five (NULL between): pass, on PSS.
    let p = dir.path().join("flat.db");
    let (db, now) = synthetic(&p, 4);
    rows(&db, now, &|m| (m % 5 == 0).then_some(40));
    let (code, v) = json_of(&p);
    let c = camd(&v);
    assert_eq!((code, c["status"].as_str()), (0, Some("pass")), "{c}");
    assert!(c["detail"].as_str().unwrap().starts_with("PSS"), "{c}");
    // A database from before the column: RSS judges, and says so.
    let p = dir.path().join("old.db");
    let (db, now) = synthetic(&p, 4);
    db.execute_batch(
        "DROP TABLE processes; CREATE TABLE processes (ts REAL NOT NULL, run INTEGER NOT NULL, \
         comm TEXT NOT NULL, pid INTEGER NOT NULL, rss INTEGER NOT NULL);",
    )
    .unwrap();
    for m in 0..=240u32 {
        let ts = now - 4.0 * 3600.0 + f64::from(m) * 60.0;
        db.execute(
            "INSERT INTO processes VALUES (?1, 1, 'camd', 42, ?2)",
            params![ts, (100i64 + i64::from(m)) << 20],
        )
        .unwrap();
    }
    let (code, v) = json_of(&p);
    let c = camd(&v);
    assert_eq!((code, c["status"].as_str()), (1, Some("fail")), "{c}");
    assert!(
        c["detail"].as_str().unwrap().starts_with("RSS (no PSS"),
        "{c}"
    );
}
