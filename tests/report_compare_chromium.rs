//! `cgwarden report --compare A B` end to end: two runs of
//! a board — "before" with OOM kills, throttle episodes, a leaking process
//! and a fragmented buddy allocator; "after" clean — recorded in synthetic
//! databases from the real schema, reported as JSON by `cgwarden report`,
//! given the `"kpis"` array (the KPI contract of docs/report.md; the
//! synthetic databases hold no `kpi` rows, so the report's array is empty
//! and the test's figures are put in by hand), compared as HTML, and the
//! page rendered by headless Chromium (tests/support/chromium.rs, the flags
//! of docs/report.md):
//! - no console message (the page has no script; report_chromium.rs's
//!   `the_console_check_sees_an_error` proves the check sees one);
//! - every value cell of the loaded DOM (`data-value`) equals the number in
//!   the JSON report it came from: criteria `measured`, KPI p50/p99/mean/
//!   stddev, measurement `mean`; the exit status is B's verdict.
#![cfg(feature = "report")]

use rusqlite::{params, Connection};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

mod support;
use support::{chromium, BIN};

const POLICY: &str = "version: 1
product: iq9100-vision-cell
groups:
  inference: {}
report:
  criteria:
    processes: [camera_pipeline]
";

/// Six hours of a board, one sample a minute. `before`: 2 OOM kills in
/// inference, 47 throttle episodes, camera_pipeline's PSS growing 120 MiB,
/// order-4 fragmentation ~12 %; else none of it, ~3 %.
fn run_db(path: &Path, before: bool) {
    let db = Connection::open(path).unwrap();
    db.execute_batch(cgwarden::testing::SCHEMA).unwrap();
    let end = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - 30.0;
    let t0 = end - 6.0 * 3600.0;
    db.execute_batch("INSERT INTO meta VALUES ('schema_version','1'),('product','iq9100 <cell>');")
        .unwrap();
    db.execute(
        "INSERT INTO runs VALUES (1, ?1, 'boot-a', 412, 'iq9100', 'ab12', '0.1.0')",
        params![t0 - 60.0],
    )
    .unwrap();
    let tx = db.unchecked_transaction().unwrap();
    for m in 0..=360u32 {
        let ts = t0 + f64::from(m) * 60.0;
        let kills = if before {
            i64::from(m >= 100) + i64::from(m >= 250)
        } else {
            0
        };
        for g in ["inference", "system"] {
            tx.execute(
                "INSERT INTO samples (ts, run, grp, cpu_some_avg10, memory_some_avg10, \
                 memory_full_avg10, io_some_avg10, memory_current, memory_high, memory_max, \
                 ev_oom_kill) VALUES (?1, 1, ?2, 3.0, 1.5, 0.5, 0.2, ?3, NULL, NULL, ?4)",
                params![ts, g, 900_000_000i64 + i64::from(m % 7) * 4096, kills],
            )
            .unwrap();
        }
        let leak = if before {
            i64::from(m) * (120 << 20) / 360
        } else {
            0
        };
        tx.execute(
            "INSERT INTO processes (ts, run, comm, pid, rss, pss) \
             VALUES (?1, 1, 'camera_pipeline', 900, ?2, ?3)",
            params![ts, (400i64 << 20) + leak, (250i64 << 20) + leak],
        )
        .unwrap();
        let frag = if before { 0.123 } else { 0.031 } + f64::from(m % 3) * 0.001;
        tx.execute(
            "INSERT INTO memstat (ts, run, name, value) VALUES (?1, 1, 'fragmentation.4', ?2)",
            params![ts, frag],
        )
        .unwrap();
        if m % 7 == 3 && ((before && m / 7 < 47) || (!before && m / 7 < 3)) {
            tx.execute(
                "INSERT INTO events (ts, run, kind, knob) VALUES (?1, 1, 'throttle', 'cpufreq.policy0')",
                params![ts],
            )
            .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// The KPI summaries of the report's `"kpis"` contract (seconds).
fn kpis(before: bool) -> Value {
    let (npu, lp) = if before {
        (0.028, 0.0082)
    } else {
        (0.018, 0.0021)
    };
    json!([
        {"name": "npu_latency", "unit": "seconds", "count": 21600, "min": 0.004,
         "mean": npu * 0.45, "stddev": npu * 0.2, "p50": npu * 0.4, "p90": npu * 0.7,
         "p99": npu, "max": npu * 1.6},
        {"name": "loop_latency_us", "unit": "seconds", "count": 2_160_000, "min": 0.00005,
         "mean": lp * 0.2, "stddev": lp * 0.1, "p50": lp * 0.15, "p90": lp * 0.5,
         "p99": lp, "max": lp * 2.5},
        {"name": "fps", "unit": "none", "count": 21600, "min": 27.0, "mean": 29.9,
         "stddev": if before { 2.7 } else { 0.8 }, "p50": 30.0, "p90": 30.0, "p99": 30.0, "max": 30.0}
    ])
}

fn cgwarden(dir: &Path, args: &[&str]) -> Output {
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    Command::new(BIN)
        .arg("report")
        .arg("--policy")
        .arg(&policy)
        .args(args)
        .output()
        .expect("run cgwarden report")
}

/// `cgwarden report --json` of a run, with its `"kpis"`.
fn report_json(dir: &Path, before: bool) -> (PathBuf, Value) {
    let name = if before { "before" } else { "after" };
    let db = dir.join(format!("{name}.db"));
    run_db(&db, before);
    let out = dir.join(format!("{name}.json"));
    let o = cgwarden(
        dir,
        &[
            "--db",
            db.to_str().unwrap(),
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(if before { 1 } else { 0 }), "{o:?}");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    if v["kpis"].as_array().is_none_or(|a| a.is_empty()) {
        v["kpis"] = kpis(before);
        std::fs::write(&out, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }
    (out, v)
}

/// The page's value rows: (section, id, subject) → (A data-value, B data-value).
type Cells = Vec<((String, String, String), Option<f64>, Option<f64>)>;

fn attr(s: &str, name: &str) -> Option<String> {
    let at = s.find(&format!("{name}=\""))? + name.len() + 2;
    Some(s[at..].split('"').next()?.to_string())
}

fn dom_cells(dom: &str) -> Cells {
    dom.split("<tr data-section=\"")
        .skip(1)
        .map(|r| {
            let row = r.split("</tr>").next().unwrap_or("");
            let section = row.split('"').next().unwrap_or("").to_string();
            let value = |class: &str| {
                let td = row.split(&format!("class=\"num {class}\"")).nth(1)?;
                let td = td.split('>').next()?;
                attr(td, "data-value")?.parse::<f64>().ok()
            };
            (
                (
                    section,
                    attr(row, "data-id").unwrap_or_default(),
                    attr(row, "data-subject").unwrap_or_default(),
                ),
                value("a"),
                value("b"),
            )
        })
        .collect()
}

/// What the page must show for one report: every number it has.
fn expected(v: &Value) -> Vec<((String, String, String), Option<f64>)> {
    let s = |x: &Value| x.as_str().unwrap_or("").to_string();
    let mut out = Vec::new();
    for c in v["criteria"].as_array().unwrap() {
        out.push((
            ("criterion".into(), s(&c["id"]), s(&c["subject"])),
            c["measured"].as_f64(),
        ));
    }
    for k in v["kpis"].as_array().unwrap() {
        for stat in ["p50", "p99", "mean", "stddev"] {
            out.push((("kpi".into(), s(&k["name"]), stat.into()), k[stat].as_f64()));
        }
    }
    for m in v["measurements"].as_array().unwrap() {
        out.push((
            ("measurement".into(), s(&m["id"]), s(&m["subject"])),
            m["mean"].as_f64(),
        ));
    }
    out
}

fn console(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect()
}

#[test]
fn the_compare_page_renders_and_shows_both_reports_values() {
    let dir = tempfile::tempdir().unwrap();
    let (a_path, a) = report_json(dir.path(), true);
    let (b_path, b) = report_json(dir.path(), false);
    let page = dir.path().join("compare.html");
    let o = cgwarden(
        dir.path(),
        &[
            "--compare",
            a_path.to_str().unwrap(),
            b_path.to_str().unwrap(),
            "--format",
            "html",
            "--out",
            page.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "B passes: {stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("OOM kills"),
        "the table on stdout: {stdout}"
    );

    let dom = chromium(dir.path(), &["--dump-dom"], &page);
    assert!(
        console(&dom).is_empty(),
        "console messages: {:?}",
        console(&dom)
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    let cells = dom_cells(&html);
    // The seed's rows are all there, with both sides' numbers exactly.
    let ea = expected(&a);
    let eb = expected(&b);
    assert_eq!(
        cells.len(),
        ea.len(),
        "one row per criterion, KPI statistic, measurement: {cells:?}"
    );
    for (key, want) in &ea {
        let got = cells
            .iter()
            .find(|c| &c.0 == key)
            .unwrap_or_else(|| panic!("no row {key:?}"));
        assert_eq!(got.1, *want, "A {key:?}");
    }
    for (key, want) in &eb {
        let got = cells
            .iter()
            .find(|c| &c.0 == key)
            .unwrap_or_else(|| panic!("no row {key:?}"));
        assert_eq!(got.2, *want, "B {key:?}");
    }
    // The figures of docs/report.md's before/after example, as a reader sees them.
    let key = |s: &str, i: &str, j: &str| (s.to_string(), i.to_string(), j.to_string());
    for (k, av, bv) in [
        (key("criterion", "oom_kills", "all groups"), 2.0, 0.0),
        (
            key("criterion", "thermal_throttling", "cpufreq policy0"),
            47.0,
            3.0,
        ),
        (key("kpi", "npu_latency", "p99"), 0.028, 0.018),
    ] {
        let c = cells.iter().find(|c| c.0 == k).unwrap();
        assert_eq!((c.1, c.2), (Some(av), Some(bv)), "{k:?}");
    }
    assert!(
        html.contains("28.0 ms") && html.contains("18.0 ms"),
        "KPI seconds shown in ms"
    );
    assert!(html.contains("-10.0 ms (-35.7 %)"));
    // The leak is judged on PSS.
    let leak = a["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["subject"] == "process camera_pipeline")
        .unwrap();
    assert_eq!(leak["status"], "fail", "{leak}");
    assert!(
        leak["detail"].as_str().unwrap().starts_with("PSS"),
        "{leak}"
    );
    assert!(html.contains("iq9100 &lt;cell&gt;"), "the product, escaped");
    assert!(html.contains("id=\"overall\""));

    // The databases themselves compare the same (their own whole data),
    // and B failing (swapped) exits 1.
    let jo = dir.path().join("c.json");
    let o = cgwarden(
        dir.path(),
        &[
            "--compare",
            dir.path().join("after.db").to_str().unwrap(),
            dir.path().join("before.db").to_str().unwrap(),
            "--format",
            "json",
            "--out",
            jo.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "B (before) fails");
    let j: Value = serde_json::from_slice(&std::fs::read(&jo).unwrap()).unwrap();
    let oom = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "oom_kills")
        .unwrap();
    assert_eq!(
        (oom["a"]["value"].as_f64(), oom["b"]["value"].as_f64()),
        (Some(0.0), Some(2.0))
    );
    assert_eq!(oom["change"]["kind"], "new", "0 → 2 has no percent");
}
