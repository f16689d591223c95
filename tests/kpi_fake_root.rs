//! KPIs from applications on a fake tree: the real
//! daemon takes StatsD datagrams on `state_dir/kpi.sock`, `cgwarden kpi`
//! values and a cyclictest histogram file, and varlink `RecordKpi`; they
//! show as the `cgwarden_kpi` summary (checked by promtool), as rows of the
//! recorder's `kpi` table, fire a `kpi.NAME.p99 > 5ms over 1m` rule, and
//! come out of `cgwarden report` as the loop_p99 / fps_stddev verdicts and
//! the `kpis` array. A second test sends through PyPI's `statsd` client
//! (4.0.1), which must be installed (tests/run-all.sh does): the test fails
//! without it.

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;
use support::{Daemon, Start};

const POLICY: &str = r#"version: 1
product: kpi-test
settings:
  recorder:
    dir: /var/lib/cgwarden
    interval: 1s
  metrics: { textfile: /var/lib/node_exporter/cgwarden.prom, interval: 1s }
groups:
  inference:
    memory: { high: 100M, max: 1G }
rules:
  - name: loop-slow
    when: kpi.loop_latency.p99 > 5ms over 1m
    while:
      - set inference.memory.high = 200M
"#;

fn db(root: &Path) -> PathBuf {
    root.join("var/lib/cgwarden/recorder.db")
}

/// KPI rows recorded per name.
fn kpi_rows(root: &Path) -> std::collections::BTreeMap<String, i64> {
    let Ok(c) = Connection::open_with_flags(db(root), OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return Default::default();
    };
    let Ok(mut st) = c.prepare("SELECT name, sum(count) FROM kpi GROUP BY name") else {
        return Default::default();
    };
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map(|rows| rows.flatten().collect())
        .unwrap_or_default()
}

fn report(policy: &Path, root: &Path) -> (i32, Value) {
    let r = support::cgwarden(&[
        "report",
        "--format",
        "json",
        "--since",
        "1h",
        "--policy",
        &policy.to_string_lossy(),
        "--db",
        &db(root).to_string_lossy(),
    ]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r}"));
    (r.code, v)
}

fn criterion<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["criteria"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no {id} in {v:#}"))
}

fn kpi<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["kpis"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no KPI {name} in {:#}", v["kpis"]))
}

#[test]
fn statsd_cli_varlink_and_cyclictest_reach_metrics_recorder_rules_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), POLICY);
    let d = Daemon::start(&policy, &root, Start::default());
    let sock_path = root.join("run/cgwarden/kpi.sock");
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = std::fs::metadata(&sock_path).expect("kpi.sock");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);

    // Nothing reported yet: the report measures neither criterion.
    let (_, v) = report(&policy, &root);
    assert_eq!(criterion(&v, "loop_p99")["status"], "not_measured", "{v:#}");
    assert_eq!(criterion(&v, "fps_stddev")["status"], "not_measured");
    assert_eq!(criterion(&v, "loop_p99")["measured"], Value::Null);

    // StatsD: several lines per datagram, a rate, malformed lines between.
    let s = UnixDatagram::unbound().unwrap();
    for i in 0..100 {
        let ms = if i % 10 == 0 { 8.0 } else { 2.0 };
        let dgram =
            format!("loop_latency:{ms}|ms\nloop_latency:{ms}|ms|@0.5\nnot a line\nhits:1|c\n");
        s.send_to(dgram.as_bytes(), &sock_path).unwrap();
    }
    s.send_to(b"\xff\xfe:1|ms", &sock_path).unwrap();
    // `cgwarden kpi`: values, then a cyclictest histogram file.
    let cli = |args: &[&str]| {
        let mut a = vec!["kpi"];
        a.extend_from_slice(args);
        a.extend_from_slice(&[
            "--policy",
            policy.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ]);
        support::cgwarden(&a)
    };
    let r = cli(&["fps", "30", "29.5", "30.5", "30"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("kpi fps: 4 samples recorded"), "{r}");
    let fixture = support::repo("tests/fixtures/kpi/cyclictest-histfile.txt");
    let r = cli(&["--cyclictest", &fixture]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains("kpi cyclictest: 4000 samples recorded"),
        "{r}"
    );
    // Refusals: a bad name, a unit that changes, mixed values.
    let r = cli(&["bad name", "1"]);
    assert_eq!(r.code, 2, "{r}");
    let r = cli(&["fps", "2ms"]);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stderr.contains("has unit none"), "{r}");
    // Varlink RecordKpi with counts (a histogram).
    let reply = support::call(
        &support::socket(&root),
        "io.cgwarden.Daemon.RecordKpi",
        serde_json::json!({"name": "fps", "values": [31.0, 29.0], "counts": [2, 2]}),
    );
    assert_eq!(reply["parameters"]["recorded"], 4, "{reply}");
    let reply = support::call(
        &support::socket(&root),
        "io.cgwarden.Daemon.RecordKpi",
        serde_json::json!({"name": "fps", "values": [1.0], "counts": [1, 2]}),
    );
    assert_eq!(
        reply["error"], "io.cgwarden.Daemon.InvalidRequest",
        "{reply}"
    );

    // The rule fires: 10 % of the loop samples are 8 ms.
    let high = "sys/fs/cgroup/inference/memory.high";
    d.wait_for(
        "the loop-slow rule's write",
        Duration::from_secs(20),
        || support::read(&root, high) == "209715200",
    );
    // The metric, valid for promtool.
    let prom = root.join("var/lib/node_exporter/cgwarden.prom");
    d.wait_for(
        "cgwarden_kpi in the textfile",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(&prom)
                .is_ok_and(|t| t.contains("cgwarden_kpi_count{name=\"fps\",unit=\"none\"} 8"))
        },
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    support::promtool_check(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for want in [
        "# TYPE cgwarden_kpi summary",
        "cgwarden_kpi_count{name=\"loop_latency\",unit=\"seconds\"} 200",
        "cgwarden_kpi_count{name=\"cyclictest\",unit=\"seconds\"} 4000",
        // 100 × "not a line", 100 × "hits:1|c", 1 not UTF-8.
        "cgwarden_kpi_refused_total{reason=\"malformed\"} 201",
        "cgwarden_kpi_refused_total{reason=\"unit\"} 1",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    // p99 within the histogram's 1/64 of the 8 ms samples.
    let p99: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "cgwarden_kpi{name=\"loop_latency\",unit=\"seconds\",quantile=\"0.99\"} ",
            )
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no loop_latency p99:\n{text}"));
    assert!((p99 - 0.008).abs() <= 0.008 / 64.0, "{p99}");
    // Recorded.
    d.wait_for("the kpi rows", Duration::from_secs(20), || {
        let r = kpi_rows(&root);
        r.get("loop_latency") == Some(&200)
            && r.get("fps") == Some(&8)
            && r.get("cyclictest") == Some(&4000)
    });

    // The report: loop_p99 fails on 8 ms, fps passes, kpis hold all three.
    let (code, v) = report(&policy, &root);
    assert_eq!(code, 1, "{v:#}");
    let l = criterion(&v, "loop_p99");
    assert_eq!(l["status"], "fail", "{l}");
    assert_eq!(l["unit"], "seconds");
    assert!(
        (l["measured"].as_f64().unwrap() - 0.008).abs() < 0.008 / 64.0,
        "{l}"
    );
    assert!(
        l["detail"].as_str().unwrap().contains("loop_latency: p99"),
        "{l}"
    );
    assert!(
        l["detail"].as_str().unwrap().contains("cyclictest: p99"),
        "{l}"
    );
    let f = criterion(&v, "fps_stddev");
    assert_eq!(f["status"], "pass", "{f}");
    let k = kpi(&v, "loop_latency");
    assert_eq!(
        (k["unit"].as_str(), k["count"].as_u64()),
        (Some("seconds"), Some(200))
    );
    assert!(
        (k["p50"].as_f64().unwrap() - 0.002).abs() < 0.002 / 64.0,
        "{k}"
    );
    let k = kpi(&v, "fps");
    assert_eq!(
        (k["unit"].as_str(), k["count"].as_u64()),
        (Some("none"), Some(8))
    );
    assert!((k["mean"].as_f64().unwrap() - 30.0).abs() < 1e-9, "{k}");
    assert_eq!(kpi(&v, "cyclictest")["max"].as_f64(), Some(8822e-6));
    // The page shows both criteria and the KPI table.
    let page = root.join("report.html");
    let r = support::cgwarden(&[
        "report",
        "--since",
        "1h",
        "--policy",
        &policy.to_string_lossy(),
        "--db",
        &db(&root).to_string_lossy(),
        "--out",
        &page.to_string_lossy(),
    ]);
    assert_eq!(r.code, 1, "{r}");
    let html = std::fs::read_to_string(&page).unwrap();
    for want in [
        "data-criterion=\"loop_p99\"",
        "data-criterion=\"fps_stddev\"",
        "data-kpi=\"cyclictest\"",
    ] {
        assert!(html.contains(want), "{want}");
    }
    d.stop();
}

/// The issue's check: a real StatsD client library sends samples the
/// report shows. PyPI `statsd` 4.0.1's `StatsClient` sends each stat with
/// `sock.sendto(data, self._addr)`; its own `UnixSocketStatsClient` is a
/// stream client, so the script gives the UDP client an `AF_UNIX` datagram
/// socket and the socket's path — the library's formatting, pipelines and
/// send path unchanged.
#[test]
fn pypi_statsd_client_samples_show_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let policy_text = format!(
        "{POLICY}report:\n  criteria:\n    loop_kpi: py.loop_latency\n    fps_kpi: py.fps\n"
    );
    let (_t, policy, root) = support::board(dir.path(), &policy_text);
    let d = Daemon::start(&policy, &root, Start::default());
    let sock_path = root.join("run/cgwarden/kpi.sock");
    let script = r#"
import datetime, socket, sys
import statsd
assert statsd.__version__ == "4.0.1", statsd.__version__

class UnixDatagramStatsClient(statsd.StatsClient):
    def __init__(self, path, prefix=None, maxudpsize=512):
        self._addr = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._prefix = prefix
        self._maxudpsize = maxudpsize

c = UnixDatagramStatsClient(sys.argv[1], prefix="py")
for i in range(200):
    c.timing("loop_latency", 1.5 + (i % 10) * 0.1)
c.timing("loop_latency", datetime.timedelta(milliseconds=2))
with c.pipeline() as p:
    for i in range(60):
        p.gauge("fps", 29 + (i % 3))
with c.timer("loop_latency"):
    pass
c.incr("frames")
print("sent")
"#;
    let r = support::run(
        std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&sock_path),
    );
    assert_eq!(
        r.code, 0,
        "the PyPI statsd client (python3 -m pip install statsd==4.0.1; tests/run-all.sh does): {r}"
    );
    d.wait_for(
        "the python samples recorded",
        Duration::from_secs(20),
        || {
            let r = kpi_rows(&root);
            r.get("py.loop_latency") == Some(&202) && r.get("py.fps") == Some(&60)
        },
    );
    let (code, v) = report(&policy, &root);
    assert_eq!(code, 0, "{v:#}");
    let l = criterion(&v, "loop_p99");
    assert_eq!(l["status"], "pass", "{l}");
    assert_eq!(l["subject"], "KPI py.loop_latency");
    // 1.5..2.4 ms: p99 is the 2.4 ms bucket.
    assert!(
        (l["measured"].as_f64().unwrap() - 0.0024).abs() < 0.0024 / 64.0,
        "{l}"
    );
    let f = criterion(&v, "fps_stddev");
    assert_eq!(f["status"], "pass", "{f}");
    let k = kpi(&v, "py.fps");
    assert_eq!(k["count"].as_u64(), Some(60));
    assert!((k["mean"].as_f64().unwrap() - 30.0).abs() < 1e-9, "{k}");
    // `report --compare` of the database with itself: the KPI rows and the
    // loop_p99 criterion, read from the recorder (not the report JSON).
    let dbs = db(&root).to_string_lossy().into_owned();
    let pol = policy.to_string_lossy().into_owned();
    let r = support::cgwarden(&[
        "report",
        "--compare",
        &dbs,
        &dbs,
        "--format",
        "json",
        "--policy",
        &pol,
    ]);
    let c: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r}"));
    let rows = c["rows"].as_array().unwrap_or_else(|| panic!("{c:#}"));
    let row = |section: &str, id: &str, subject: &str| {
        rows.iter()
            .find(|x| x["section"] == section && x["id"] == id && x["subject"] == subject)
            .unwrap_or_else(|| panic!("no {section} {id} {subject} in {c:#}"))
    };
    let p99 = row("kpi", "py.loop_latency", "p99");
    assert_eq!(p99["a"]["value"], p99["b"]["value"], "{p99}");
    assert!(
        (p99["a"]["value"].as_f64().unwrap() - 0.0024).abs() < 0.0024 / 64.0,
        "{p99}"
    );
    assert_eq!(
        row("criterion", "loop_p99", "KPI py.loop_latency")["a"]["status"],
        "pass"
    );
    d.stop();
}

/// The daemon's CPU per StatsD datagram (not a check: prints the numbers
/// docs/kpi.md quotes). `cargo test --release --test kpi_fake_root --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn statsd_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), POLICY);
    let d = Daemon::start(&policy, &root, Start::default());
    let sock_path = root.join("run/cgwarden/kpi.sock");
    let stat = |pid: u32| -> (f64, u64) {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = s.rsplit_once(')').unwrap().1.split_whitespace().collect();
        let tick = 100.0; // USER_HZ
        let cpu = (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / tick;
        let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let rss = st
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        (cpu, rss)
    };
    let prom = root.join("var/lib/node_exporter/cgwarden.prom");
    let accepted = || -> u64 {
        std::fs::read_to_string(&prom)
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("cgwarden_kpi_samples_total "))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    };
    let s = UnixDatagram::unbound().unwrap();
    let mut total = 0u64;
    for (lines, n) in [(1usize, 200_000u64), (10, 20_000)] {
        let (cpu0, rss0) = stat(d.pid());
        let t0 = std::time::Instant::now();
        for i in 0..n {
            let dgram: String = (0..lines)
                .map(|j| {
                    format!(
                        "bench{}:{}|ms\n",
                        (i as usize + j) % 8,
                        1.0 + (i % 1000) as f64 / 100.0
                    )
                })
                .collect();
            s.send_to(dgram.as_bytes(), &sock_path).unwrap();
        }
        total += n * lines as u64;
        d.wait_for("every sample counted", Duration::from_secs(120), || {
            accepted() >= total
        });
        let secs = t0.elapsed().as_secs_f64();
        let (cpu1, rss1) = stat(d.pid());
        println!(
            "{lines} line(s) per datagram: {n} datagrams in {secs:.2} s = {:.0}/s ({:.0} samples/s); daemon CPU {:.2} s = {:.1} µs per datagram; RSS {rss0} -> {rss1} KiB",
            n as f64 / secs,
            (n * lines as u64) as f64 / secs,
            cpu1 - cpu0,
            (cpu1 - cpu0) / n as f64 * 1e6
        );
    }
    d.stop();
}
