//! `report --compare`: the change rules, rows on one side only, KPIs (with
//! and without the `"kpis"` array), databases and report JSONs as inputs,
//! the exit statuses and escaping.

use super::*;
use crate::observe::report::tests::synthetic;

/// A report JSON with the figures of docs/report.md's before/after example.
fn seed(before: bool) -> Value {
    let (oom, thr, npu, lp, fr) = if before {
        (2.0, 47.0, 0.028, 0.0082, 12.3)
    } else {
        (0.0, 3.0, 0.018, 0.0021, 3.1)
    };
    let st = |fail: bool| if fail { "fail" } else { "pass" };
    json!({
        "report": "cgwarden", "version": 1, "product": "iq9100",
        "passed": !before,
        "criteria": [
            {"id": "oom_kills", "subject": "all groups", "status": st(oom > 0.0), "limit": 0.0,
             "measured": oom, "unit": "count"},
            {"id": "thermal_throttling", "subject": "policy0", "status": st(thr > 10.0),
             "limit": 10.0, "measured": thr, "unit": "count"},
            {"id": "memory_growth", "subject": "process camd", "status": "not_measured",
             "limit": 52428800.0, "measured": null, "unit": "bytes"},
        ],
        "kpis": [
            {"name": "npu_latency", "unit": "seconds", "count": 1000, "min": 0.001, "mean": npu / 2.0,
             "stddev": 0.002, "p50": npu / 3.0, "p90": npu / 1.5, "p99": npu, "max": npu * 2.0},
            {"name": "loop_latency", "unit": "seconds", "count": 1000, "min": 0.0001, "mean": lp / 4.0,
             "stddev": 0.0005, "p50": lp / 5.0, "p90": lp / 2.0, "p99": lp, "max": lp * 3.0},
        ],
        "measurements": [
            {"id": "fragmentation", "subject": "order 4", "unit": "percent", "mean": fr, "max": fr, "last": fr}
        ],
    })
}

fn side(v: Value) -> Side {
    Side {
        source: "x.json".into(),
        kind: "json",
        report: v,
    }
}

fn find<'a>(rows: &'a [Row], id: &str, subject: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.id == id && r.subject == subject)
        .unwrap_or_else(|| panic!("no row {id} {subject}: {rows:?}"))
}

#[test]
fn percent_is_of_a_and_from_zero_is_new() {
    assert!((percent(28.0, 18.0).unwrap() + 35.714_285).abs() < 1e-4);
    assert!((percent(47.0, 3.0).unwrap() + 93.617_021).abs() < 1e-4);
    assert_eq!(percent(2.0, 0.0), Some(-100.0));
    assert_eq!(percent(0.0, 0.0), Some(0.0));
    assert_eq!(percent(0.0, 3.0), None);
    assert_eq!(percent(-4.0, -2.0), Some(50.0));
    let a = Cell {
        value: Some(0.0),
        status: None,
    };
    let b = Cell {
        value: Some(3.0),
        status: None,
    };
    let c = Change::of(Some(&a), Some(&b));
    assert_eq!(c.kind(), "new");
    assert_eq!(Change::of(Some(&a), Some(&a)).kind(), "same");
    assert_eq!(Change::of(Some(&a), None).kind(), "only_a");
    assert_eq!(Change::of(None, Some(&a)).kind(), "only_b");
    let nm = Cell {
        value: None,
        status: Some("not_measured".into()),
    };
    assert_eq!(Change::of(Some(&nm), Some(&a)).kind(), "not_measured");
}

#[test]
fn the_seed_table_criteria_kpis_and_fragmentation() {
    let rows = rows(&seed(true), &seed(false));
    let oom = find(&rows, "oom_kills", "all groups");
    assert_eq!(
        oom.change,
        Change::Changed {
            absolute: -2.0,
            percent: Some(-100.0)
        }
    );
    assert_eq!(oom.a.as_ref().unwrap().status.as_deref(), Some("fail"));
    assert_eq!(oom.b.as_ref().unwrap().status.as_deref(), Some("pass"));
    let p99 = find(&rows, "npu_latency", "p99");
    assert_eq!((p99.section, p99.unit.as_str()), ("kpi", "seconds"));
    assert_eq!(human_cell(p99.a.as_ref(), &p99.unit).0, "28.0 ms");
    assert_eq!(human_cell(p99.b.as_ref(), &p99.unit).0, "18.0 ms");
    assert_eq!(human_change(p99), "-10.0 ms (-35.7 %)");
    assert_eq!(
        human_change(find(&rows, "loop_latency", "p99")),
        "-6.1 ms (-74.4 %)"
    );
    for stat in KPI_STATS {
        find(&rows, "loop_latency", stat);
    }
    let fr = find(&rows, "fragmentation", "order 4");
    assert_eq!(human_change(fr), "-9.20 pp (-74.8 %)");
    assert_eq!(
        find(&rows, "memory_growth", "process camd").change.kind(),
        "not_measured"
    );
    let text = to_text(&side(seed(true)), &side(seed(false)), &rows);
    assert!(text.contains("OOM kills"), "{text}");
    assert!(text.ends_with("B: PASS\n"), "{text}");
}

#[test]
fn rows_on_one_side_and_reports_without_kpis() {
    let mut a = seed(true);
    let mut b = seed(false);
    // A has no "kpis" at all (a report from before them); B lost a criterion.
    a.as_object_mut().unwrap().remove("kpis");
    b["criteria"].as_array_mut().unwrap().remove(1);
    b["criteria"].as_array_mut().unwrap().push(json!(
        {"id": "restarts", "subject": "daemon and device", "status": "fail", "measured": 1.0, "unit": "count"}));
    let rows = rows(&a, &b);
    assert_eq!(
        find(&rows, "thermal_throttling", "policy0").change,
        Change::OnlyA
    );
    let r = find(&rows, "restarts", "daemon and device");
    assert_eq!((r.change, r.a.is_none()), (Change::OnlyB, true));
    assert_eq!(find(&rows, "npu_latency", "p99").change, Change::OnlyB);
    // Sections stay together: every criterion before every KPI.
    let first_kpi = rows.iter().position(|r| r.section == "kpi").unwrap();
    assert!(rows[first_kpi..].iter().all(|r| r.section != "criterion"));
    let j = to_json(&side(a), &side(b), &rows);
    assert_eq!(j["passed"], false, "B failed restarts");
    let r = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "restarts")
        .unwrap();
    assert_eq!(r["a"], Value::Null);
    assert_eq!(r["change"]["kind"], "only_b");
    // Junk where numbers belong is "not measured", never a panic.
    let junk =
        json!({"criteria": [{"id": 5, "measured": "lots"}], "kpis": "no", "measurements": [1]});
    let rows = super::rows(&junk, &seed(false));
    assert_eq!(find(&rows, "5", "").change, Change::OnlyA);
}

#[test]
fn a_database_and_its_report_json_compare_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("before.db");
    let (conn, now) = synthetic(&db, 4);
    conn.execute(
        "INSERT INTO memstat (ts, run, name, value) VALUES (?1, 1, 'fragmentation.4', 0.123), \
         (?2, 1, 'fragmentation.4', 0.125)",
        [now - 100.0, now - 50.0],
    )
    .unwrap();
    let json_path = dir.path().join("before.json");
    let code = crate::observe::report::run(&crate::observe::report::Options {
        db: db.clone(),
        since: Duration::from_secs(72 * 3600),
        out: Some(json_path.clone()),
        format: crate::observe::report::Format::Json,
        criteria: ReportCriteria::default(),
    });
    assert_eq!(code, 0);
    let c = ReportCriteria::default();
    let from_db = load(&db, None, &c).unwrap();
    let from_json = load(&json_path, None, &c).unwrap();
    assert_eq!((from_db.kind, from_json.kind), ("database", "json"));
    let a = rows(&from_db.report, &from_json.report);
    assert!(!a.is_empty());
    for r in &a {
        assert!(matches!(r.change.kind(), "same" | "not_measured"), "{r:?}");
    }
    let fr = find(&a, "fragmentation", "order 4");
    assert!((fr.a.as_ref().unwrap().value.unwrap() - 12.4).abs() < 1e-9);
    // --since: the last 30 minutes before the database's last sample.
    let short = load(&db, Some(Duration::from_secs(1800)), &c).unwrap();
    assert_eq!(short.report["window"]["seconds"], 1800.0);
}

#[test]
fn inputs_that_are_missing_or_neither_kind_and_bs_verdict_exit() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("b.json");
    std::fs::write(&good, seed(false).to_string()).unwrap();
    let bad = dir.path().join("a.json");
    std::fs::write(&bad, seed(true).to_string()).unwrap();
    let opts = |a: &Path, b: &Path, out: Option<PathBuf>, format| Options {
        a: a.to_path_buf(),
        b: b.to_path_buf(),
        since: None,
        out,
        format,
        criteria: ReportCriteria::default(),
    };
    let out = dir.path().join("c.json");
    assert_eq!(
        run(&opts(&bad, &good, Some(out.clone()), Format::Json)),
        exit::OK
    );
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(j["compare"], "cgwarden");
    assert_eq!(j["a"]["kind"], "json");
    // B is the "after": its failing criterion fails the comparison.
    assert_eq!(
        run(&opts(&good, &bad, Some(out.clone()), Format::Json)),
        exit::REFUSED
    );
    let none = dir.path().join("none.db");
    assert_eq!(
        run(&opts(&none, &good, None, Format::Text)),
        exit::UNREACHABLE
    );
    let text = dir.path().join("t.txt");
    std::fs::write(&text, "hello").unwrap();
    assert_eq!(run(&opts(&good, &text, None, Format::Text)), exit::TEMPFAIL);
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"criteria\": [").unwrap();
    assert_eq!(
        run(&opts(&broken, &good, None, Format::Text)),
        exit::TEMPFAIL
    );
    std::fs::write(&broken, "{\"other\": 1}").unwrap();
    assert_eq!(
        run(&opts(&broken, &good, None, Format::Text)),
        exit::TEMPFAIL
    );
    let sqlite_junk = dir.path().join("junk.db");
    let mut bytes = SQLITE_MAGIC.to_vec();
    bytes.extend_from_slice(&[0xff; 200]);
    std::fs::write(&sqlite_junk, bytes).unwrap();
    assert_eq!(
        run(&opts(&sqlite_junk, &good, None, Format::Text)),
        exit::TEMPFAIL
    );
    let unwritable = dir.path().join("no/such/dir/c.html");
    assert_eq!(
        run(&opts(&bad, &good, Some(unwritable), Format::Html)),
        exit::TEMPFAIL
    );
}

#[test]
fn input_strings_are_escaped_in_the_page() {
    let mut a = seed(true);
    a["product"] = json!("<b>cell</b>");
    a["criteria"][0]["subject"] = json!("group <script>alert(1)</script>");
    a["kpis"][0]["name"] = json!("fps\"><img src=x>");
    let (sa, sb) = (side(a.clone()), side(seed(false)));
    let rows = rows(&sa.report, &sb.report);
    let page = html::page(&sa, &sb, &rows, true);
    assert!(!page.contains("<script>alert"), "{page}");
    assert!(!page.contains("<img"), "{page}");
    assert!(!page.contains("<b>cell"), "{page}");
    assert!(page.contains("group &lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!page.contains("<script"), "no script at all");
}
