//! The shipped Prometheus rules and Grafana
//! dashboard (`packaging/prometheus/`) against the real tools and a running
//! daemon on a fake root.
//!
//! - `promtool check rules` and `promtool test rules` on the shipped files;
//! - every metric name the rules and the dashboard's queries use is one a
//!   real scrape of the daemon has — except the explicit [`PENDING`] list
//!   (metrics not exported yet), which must *not* be in
//!   the scrape, so the list shrinks as they land;
//! - a real Prometheus server (Debian's `prometheus`) on loopback with the
//!   shipped rules scrapes two daemons: a rule held active past its
//!   `max_active` raises `CgwardenRuleActiveTooLong` naming the device
//!   (read back from `/api/v1/alerts`); stopping one daemon raises
//!   `CgwardenDown` naming it; every dashboard query is accepted by the
//!   server, and the dashboard's panels are drawn from the server's answers
//!   and screenshotted in headless Chromium (docs/fleet-dashboard.png, with
//!   `CGWARDEN_FLEET_PNG=PATH`). Grafana is not installable here: the
//!   panels are drawn by this test (lines, stats, the device table) from the
//!   same queries and the same layout (`gridPos`), not by Grafana.
//!
//! prometheus, promtool, curl and chromium are required: the tests fail,
//! never skip, without them (tests/run-all.sh installs them).

use cgwarden::testing::FakeTree;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

mod support;
use support::{Daemon, Start};

/// Metric names the rules and the dashboard use that the daemon does not
/// export yet, each with the issue that adds it. The lead removes a line
/// when that issue's branch is merged (the test fails once the scrape has
/// the metric, saying so).
const PENDING: &[(&str, &str)] = &[];

/// Series that come from Prometheus itself or from node_exporter.
const FOREIGN: &[&str] = &["up", "ALERTS", "node_textfile_mtime_seconds"];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/prometheus")
}

fn rules_file() -> PathBuf {
    dir().join("cgwarden.rules.yml")
}

fn dashboard() -> Value {
    let p = dir().join("cgwarden-dashboard.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn tool(name: &str) -> Command {
    support::need(name);
    Command::new(name)
}

// ---------------------------------------------------------------- PromQL

/// The metric names an expression selects: identifiers that are not
/// functions, keywords, label names or durations.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Strings, label matchers, ranges and label lists go first.
    let mut s = String::new();
    let mut chars = expr.chars().peekable();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' | '`' if depth_brace == 0 => {
                for d in chars.by_ref() {
                    if d == c {
                        break;
                    }
                }
                s.push(' ');
            }
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            _ if depth_brace > 0 || depth_bracket > 0 => {}
            _ => s.push(c),
        }
    }
    let mut out = BTreeSet::new();
    let bytes: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut skip_list = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_digit() || c == '.' {
            // A number (`0.99`, `1e3`): not a name.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '.') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' || c == '$' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || "_:$".contains(bytes[i]))
            {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            let mut j = i;
            while j < bytes.len() && bytes[j] == ' ' {
                j += 1;
            }
            let call = j < bytes.len() && bytes[j] == '(';
            let keyword = [
                "by",
                "without",
                "on",
                "ignoring",
                "group_left",
                "group_right",
            ]
            .contains(&word.as_str());
            if keyword {
                // `by (a, b)`: the list holds labels, not metrics.
                skip_list = call;
            } else if !call
                && ![
                    "and",
                    "or",
                    "unless",
                    "bool",
                    "offset",
                    "inf",
                    "nan",
                    "sum",
                    "min",
                    "max",
                    "avg",
                    "count",
                    "group",
                    "stddev",
                    "stdvar",
                    "topk",
                    "bottomk",
                    "quantile",
                    "count_values",
                ]
                .contains(&word.to_ascii_lowercase().as_str())
                && !word.starts_with('$')
            {
                out.insert(word);
            }
            continue;
        }
        if c == '(' && skip_list {
            while i < bytes.len() && bytes[i] != ')' {
                i += 1;
            }
            skip_list = false;
        }
        i += 1;
    }
    out
}

#[test]
fn promql_names_are_found_and_labels_are_not() {
    let n = metric_names(
        r#"max by (hostname) (rate(a_total{x="y", group=~"$g"}[$__rate_interval]) * on (instance, job) group_left (hostname) b) or vector(0) > bool 1e3 and c:d:e offset 5m"#,
    );
    assert_eq!(
        n.into_iter().collect::<Vec<_>>(),
        vec!["a_total", "b", "c:d:e"]
    );
}

/// Every `expr` of the rules file: (alert or record name, expression).
fn rule_exprs() -> Vec<(String, String, bool)> {
    let text = std::fs::read_to_string(rules_file()).unwrap();
    let v: Value = serde_saphyr::from_str(&text).expect("the rules file parses as YAML");
    let mut out = Vec::new();
    for g in v["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let (name, alert) = match (r["alert"].as_str(), r["record"].as_str()) {
                (Some(a), _) => (a.to_string(), true),
                (_, Some(rec)) => (rec.to_string(), false),
                _ => panic!("a rule without alert or record: {r}"),
            };
            out.push((name, r["expr"].as_str().unwrap().to_string(), alert));
        }
    }
    out
}

/// Every panel's queries (panel title, expression).
fn dashboard_exprs(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                p["title"].as_str().unwrap_or("").to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["definition"].as_str() {
            // `label_values(SELECTOR, LABEL)`: the selector is the query.
            let sel = q
                .strip_prefix("label_values(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|r| r.rsplit_once(','))
                .map(|(sel, _)| sel)
                .unwrap_or(q);
            out.push((format!("variable {}", v["name"]), sel.to_string()));
        }
    }
    out
}

// ---------------------------------------------------------------- promtool

#[test]
fn promtool_checks_and_unit_tests_the_shipped_rules() {
    let o = tool("promtool")
        .args(["check", "rules"])
        .arg(rules_file())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = tool("promtool")
        .args(["test", "rules", "cgwarden.rules.test.yml"])
        .current_dir(dir())
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success() && all.contains("SUCCESS"),
        "promtool test rules: {all}"
    );
    // Every alert is unit-tested firing, and links a runbook line that
    // exists in docs/operations.md.
    let tests = std::fs::read_to_string(dir().join("cgwarden.rules.test.yml")).unwrap();
    let ops =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
            .unwrap();
    let text = std::fs::read_to_string(rules_file()).unwrap();
    let v: Value = serde_saphyr::from_str(&text).unwrap();
    for g in v["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let Some(alert) = r["alert"].as_str() else {
                continue;
            };
            assert!(
                tests.contains(&format!(
                    "alertname: {alert}\n        exp_alerts:\n          - exp_labels"
                )) || tests.contains(&format!(
                    "alertname: {alert}\n        exp_alerts:\n          - exp_labels:"
                )),
                "{alert}: no unit test where it fires"
            );
            let url = r["annotations"]["runbook_url"].as_str().unwrap_or("");
            let anchor = url.split_once('#').map(|(_, a)| a).unwrap_or("");
            assert_eq!(anchor, format!("alert-{}", alert.to_lowercase()), "{alert}");
            assert!(
                ops.contains(&format!("<a id=\"{anchor}\"></a>")),
                "{alert}: docs/operations.md has no runbook line `<a id=\"{anchor}\"></a>`"
            );
            let summary = r["annotations"]["summary"].as_str().unwrap_or("");
            // CgwardenAbsent is about the whole job: there is no device.
            assert!(
                alert == "CgwardenAbsent"
                    || summary.contains("$labels.hostname")
                    || summary.contains("$labels.instance"),
                "{alert}: the summary does not name the device: {summary}"
            );
        }
    }
}

// ---------------------------------------------------------------- devices

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One fake device: its tree, policy, metrics port and identity.
struct Device {
    _tree: FakeTree,
    policy: PathBuf,
    root: PathBuf,
    port: u16,
    hostname: String,
    product: String,
}

fn device(dir: &Path, hostname: &str, product: &str, model: &str) -> Device {
    let port = free_port();
    let (tree, policy, root) = support::board(
        dir,
        &format!(
            r#"version: 1
product: {product}
settings:
  metrics:
    listen: 127.0.0.1:{port}
  drift: {{ interval: 1s }}
groups:
  inference:
    memory: {{ high: 100M, max: 1G }}
  vision:
    cpu: {{ weight: 200 }}
placement:
  - match: {{ comm: infer-server }}
    group: inference
hooks:
  note:
    exec: ["/bin/true", "{{rule}}"]
    timeout: 5s
rules:
  - name: inference-big
    when: inference.memory.current > 500M
    max_active: 2s
    while:
      - set vision.cpu.weight = 300
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    max_active: 10m
    while:
      - set vision.cpu.weight = 400
      - hook note
"#
        ),
    );
    let put = |rel: &str, text: &[u8]| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    put(
        "proc/sys/kernel/hostname",
        format!("{hostname}\n").as_bytes(),
    );
    put("proc/sys/kernel/osrelease", b"6.6.52-rt43\n");
    put("etc/machine-id", b"4f1d2c3b5a69788796a5b4c3d2e1f000\n");
    put("proc/device-tree/model", format!("{model}\0").as_bytes());
    support::apply(&policy, &root);
    support::memory_events(&root, "inference", 0);
    Device {
        _tree: tree,
        policy,
        root,
        port,
        hostname: hostname.into(),
        product: product.into(),
    }
}

fn curl(url: &str) -> String {
    let o = tool("curl")
        .args(["-sS", "-m", "10", "-g", url])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The names a Prometheus text scrape exports: its samples' names, and
/// the families it declares (`# TYPE`; a histogram's `_bucket`, `_sum` and
/// `_count`) — a family whose kernel file a fake tree lacks has no sample.
fn scraped_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let mut w = rest.split(' ');
            let (name, kind) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
            out.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{suffix}"));
                }
            }
        } else if !l.starts_with('#') && !l.is_empty() {
            out.insert(l.split(['{', ' ']).next().unwrap_or_default().to_string());
        }
    }
    out
}

#[test]
fn every_query_names_a_metric_of_a_real_scrape() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(tmp.path(), "cell-01", "cam", "IQ-9075 EVK");
    let d = Daemon::start(&dev.policy, &dev.root, Start::default());
    d.wait_log("metrics listening", Duration::from_secs(10));
    let scrape = curl(&format!("http://127.0.0.1:{}/metrics", dev.port));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let have = scraped_names(&scrape);
    // The device's identity, from the fake tree's files.
    assert!(
        scrape.contains(
            "cgwarden_device_info{product=\"cam\",hostname=\"cell-01\",machine_id=\"4f1d2c3b5a69788796a5b4c3d2e1f000\",model=\"IQ-9075 EVK\",kernel=\"6.6.52-rt43\"} 1"
        ),
        "{scrape}"
    );
    assert!(
        scrape.contains("cgwarden_rule_max_active_seconds{rule=\"inference-big\"} 2"),
        "{scrape}"
    );

    let records: BTreeSet<String> = rule_exprs()
        .into_iter()
        .filter(|(_, _, alert)| !alert)
        .map(|(n, _, _)| n)
        .collect();
    let pending: BTreeMap<&str, &str> = PENDING.iter().copied().collect();
    let mut unknown = Vec::new();
    let mut used_pending = BTreeSet::new();
    let mut queries: Vec<(String, String)> = rule_exprs()
        .into_iter()
        .map(|(n, e, _)| (format!("rule {n}"), e))
        .collect();
    queries.extend(
        dashboard_exprs(&dashboard())
            .into_iter()
            .map(|(t, e)| (format!("dashboard panel {t:?}"), e)),
    );
    assert!(queries.len() > 40, "{} queries", queries.len());
    for (who, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{who}: no metric in {expr}");
        for n in names {
            if have.contains(&n) || records.contains(&n) || FOREIGN.contains(&n.as_str()) {
                continue;
            }
            if pending.contains_key(n.as_str()) {
                used_pending.insert(n);
                continue;
            }
            unknown.push(format!("{who}: `{n}` in {expr}"));
        }
    }
    assert!(
        unknown.is_empty(),
        "metric names the daemon does not export:\n{}\n\nthe scrape has: {have:?}",
        unknown.join("\n")
    );
    // The pending list is exact: each is used, and none is exported yet.
    for (n, why) in PENDING {
        assert!(used_pending.contains(*n), "{n} is pending but unused");
        assert!(
            !have.contains(*n),
            "{n} ({why}) is exported now: remove it from PENDING in {}",
            file!()
        );
    }
}

// ---------------------------------------------------------------- Prometheus

/// A Prometheus server on loopback, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts `prometheus` scraping `targets` every second with the shipped
    /// rules, their evaluation every second: the rules' expressions are
    /// verbatim; only the groups' `interval` (30s) and the alerts' `for`
    /// (1m, 5m, 10m) are shortened so the test runs in seconds.
    fn start(dir: &Path, targets: &[u16]) -> Prometheus {
        support::need("prometheus");
        let rules = std::fs::read_to_string(rules_file())
            .unwrap()
            .replace("interval: 30s", "interval: 1s")
            .replace("for: 1m", "for: 3s")
            .replace("for: 5m", "for: 3s")
            .replace("for: 10m", "for: 3s");
        std::fs::write(dir.join("rules.yml"), rules).unwrap();
        let targets = targets
            .iter()
            .map(|p| format!("\"127.0.0.1:{p}\""))
            .collect::<Vec<_>>()
            .join(", ");
        std::fs::write(
            dir.join("prometheus.yml"),
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - rules.yml\nscrape_configs:\n  - job_name: cgwarden\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [{targets}]\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, port, log };
        p.wait("ready", Duration::from_secs(60), || {
            Command::new("curl")
                .args(["-sf", "-m", "2"])
                .arg(p.url("/-/ready"))
                .output()
                .is_ok_and(|o| o.status.success())
        });
        p
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn api(&self, path: &str) -> Value {
        let body = curl(&self.url(path));
        let v: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert_eq!(v["status"], "success", "{path}: {v}");
        v["data"].clone()
    }

    /// A query (URL-encoded by curl), instant or over a range.
    fn query(&self, expr: &str, range: Option<(f64, f64, f64)>) -> Result<Value, String> {
        let mut cmd = tool("curl");
        cmd.args(["-sS", "-m", "10", "--data-urlencode"])
            .arg(format!("query={expr}"));
        let path = match range {
            Some((start, end, step)) => {
                for (k, v) in [("start", start), ("end", end), ("step", step)] {
                    cmd.args(["--data-urlencode", &format!("{k}={v}")]);
                }
                "/api/v1/query_range"
            }
            None => "/api/v1/query",
        };
        let o = cmd.arg(self.url(path)).output().unwrap();
        let body = String::from_utf8_lossy(&o.stdout).into_owned();
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{}: {}", v["errorType"], v["error"]));
        }
        Ok(v["data"].clone())
    }

    fn firing(&self, alert: &str) -> Vec<Value> {
        self.api("/api/v1/alerts")["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["labels"]["alertname"] == alert && a["state"] == "firing")
            .cloned()
            .collect()
    }

    fn wait(&self, what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if f() {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let alerts = curl(&self.url("/api/v1/alerts"));
        panic!(
            "timed out waiting for {what}\nalerts: {alerts}\nprometheus log (tail):\n{}",
            tail(&log, 40)
        );
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `memory.current` replaced whole (a new file renamed over the old): a
/// plain write truncates first, and a daemon reading in between sees an
/// empty file, an unavailable metric, and clears the rule for a moment (a
/// real kernel's file is never empty), which once made the still-active
/// alert resolve just when the test looked.
fn write_current(cg: &Path, bytes: u64) {
    let tmp = cg.join(".memory.current.tmp");
    if std::fs::write(&tmp, format!("{bytes}\n")).is_ok() {
        let _ = std::fs::rename(&tmp, cg.join("memory.current"));
    }
}

/// Plays the kernel on a device for the charts: memory and pressure move.
fn play_kernel(root: &Path, step: u64, base_mib: u64) {
    let cg = root.join("sys/fs/cgroup/inference");
    let wave = ((step as f64) / 5.0).sin();
    let mib = base_mib as f64 + 40.0 * wave;
    write_current(&cg, (mib * 1048576.0) as u64);
    let some = step * 180_000 + (step * step * 900);
    let full = step * 60_000;
    let _ = std::fs::write(
        cg.join("memory.pressure"),
        format!(
            "some avg10=1.00 avg60=0.50 avg300=0.10 total={some}\nfull avg10=0.20 avg60=0.10 avg300=0.00 total={full}\n"
        ),
    );
    let _ = std::fs::write(
        cg.join("io.pressure"),
        format!(
            "some avg10=0.50 avg60=0.20 avg300=0.10 total={}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total={}\n",
            step * 40_000,
            step * 9_000
        ),
    );
}

/// The kernel's clock for [`play_kernel`]: one step at a time, or one step
/// when half a second passed (inside a wait's poll).
struct Player {
    step: u64,
    last: Instant,
}

impl Player {
    fn step(&mut self, devices: &[(&Path, u64)]) {
        self.step += 1;
        for &(root, base_mib) in devices {
            play_kernel(root, self.step, base_mib);
        }
        self.last = Instant::now();
    }

    fn every_half_second(&mut self, devices: &[(&Path, u64)]) {
        if self.last.elapsed() > Duration::from_millis(500) {
            self.step(devices);
        }
    }
}

#[test]
fn a_real_prometheus_raises_the_shipped_alerts_and_draws_the_dashboard() {
    let tmp = tempfile::tempdir().unwrap();
    let a_dir = tmp.path().join("a");
    let b_dir = tmp.path().join("b");
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let a = device(&a_dir, "cell-01", "vision-cell", "IQ-9075 EVK");
    let b = device(&b_dir, "cell-02", "vision-cell", "IQ-9075 EVK");
    let da = Daemon::start(&a.policy, &a.root, Start::default());
    let db = Daemon::start(&b.policy, &b.root, Start::default());
    da.wait_log("metrics listening", Duration::from_secs(10));
    db.wait_log("metrics listening", Duration::from_secs(10));
    let prom_dir = tmp.path().join("prom");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let t0 = now();
    let prom = Prometheus::start(&prom_dir, &[a.port, b.port]);
    prom.wait("both targets up", Duration::from_secs(30), || {
        prom.query("sum(up{job=\"cgwarden\"})", None)
            .ok()
            .and_then(|d| d["result"][0]["value"][1].as_str().map(|s| s == "2"))
            .unwrap_or(false)
    });

    // The kernel moves; then device b's rule goes active and stays past its
    // max_active (2s).
    let mut player = Player {
        step: 0,
        last: Instant::now(),
    };
    for _ in 0..6 {
        player.step(&[(&a.root, 160), (&b.root, 300)]);
        std::thread::sleep(Duration::from_millis(500));
    }
    // Someone else writes a knob device a manages: a drift, counted.
    std::fs::write(
        a.root.join("sys/fs/cgroup/inference/memory.max"),
        "2147483648\n",
    )
    .unwrap();
    da.wait_for("the drift counted", Duration::from_secs(10), || {
        curl(&format!("http://127.0.0.1:{}/metrics", a.port))
            .contains("cgwarden_drift_total{knob=\"inference.memory.max\"}")
    });
    write_current(&b.root.join("sys/fs/cgroup/inference"), 600 << 20);
    db.wait_for("the rule active", Duration::from_secs(10), || {
        curl(&format!("http://127.0.0.1:{}/metrics", b.port))
            .contains("cgwarden_rule_active{rule=\"inference-big\"} 1")
    });
    // (play_kernel keeps b's memory.current over 500M from here on.)
    player.last = Instant::now();
    prom.wait(
        "CgwardenRuleActiveTooLong firing",
        Duration::from_secs(40),
        || {
            player.every_half_second(&[(&a.root, 160), (&b.root, 600)]);
            !prom.firing("CgwardenRuleActiveTooLong").is_empty()
        },
    );
    let alerts = prom.firing("CgwardenRuleActiveTooLong");
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let al = &alerts[0];
    assert_eq!(al["labels"]["rule"], "inference-big", "{al}");
    assert_eq!(al["labels"]["hostname"], b.hostname.as_str(), "{al}");
    assert_eq!(al["labels"]["product"], b.product.as_str(), "{al}");
    assert_eq!(
        al["labels"]["instance"],
        format!("127.0.0.1:{}", b.port),
        "{al}"
    );
    let summary = al["annotations"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(
            "cgwarden on cell-02 (vision-cell): rule inference-big has been active for"
        ),
        "{summary}"
    );
    assert!(al["annotations"]["runbook_url"]
        .as_str()
        .unwrap()
        .ends_with("docs/operations.md#alert-cgwardenruleactivetoolong"));
    // Device a's rules stayed idle: nothing about it.
    assert!(prom.firing("CgwardenDown").is_empty());

    // Stopping device a's daemon: CgwardenDown names it (from the identity
    // it exported before).
    let (code, log) = da.stop();
    assert_eq!(code, 0, "{log}");
    let stopped = Instant::now();
    player.last = Instant::now();
    prom.wait("CgwardenDown firing", Duration::from_secs(40), || {
        player.every_half_second(&[(&b.root, 600)]);
        !prom.firing("CgwardenDown").is_empty()
    });
    let down = prom.firing("CgwardenDown");
    assert_eq!(down.len(), 1, "{down:?}");
    assert_eq!(down[0]["labels"]["hostname"], "cell-01", "{down:?}");
    assert_eq!(
        down[0]["labels"]["instance"],
        format!("127.0.0.1:{}", a.port)
    );
    assert_eq!(
        down[0]["annotations"]["summary"],
        "cgwarden on cell-01 (vision-cell) is down: its metrics endpoint does not answer"
    );
    // Device b's rule is still active past its bound. (A wait, not a
    // look: the alert has no `for`, so one scrape that misses its 1 s
    // timeout on a loaded host resolves it until the next one.)
    player.last = Instant::now();
    prom.wait(
        "CgwardenRuleActiveTooLong still firing",
        Duration::from_secs(15),
        || {
            player.every_half_second(&[(&b.root, 600)]);
            prom.firing("CgwardenRuleActiveTooLong").len() == 1
        },
    );
    eprintln!(
        "CgwardenDown firing {:.1}s after the stop (scrape 1s, for 3s)",
        stopped.elapsed().as_secs_f64()
    );

    // The dashboard, drawn from the server's answers.
    let end = now();
    let vars = [
        ("$product", "vision-cell".to_string()),
        ("$instance", format!("127.0.0.1:{}", b.port)),
        ("$__rate_interval", "4s".to_string()),
    ];
    let page = render_dashboard(&prom, &dashboard(), &vars, (t0, end));
    let html = tmp.path().join("dashboard.html");
    std::fs::write(&html, &page.html).unwrap();
    assert!(
        page.failed.is_empty(),
        "queries Prometheus refused:\n{}",
        page.failed.join("\n")
    );
    // A panel whose metrics the daemon exports shows data.
    let pending: Vec<&str> = PENDING.iter().map(|(n, _)| *n).collect();
    let empty: Vec<&String> = page
        .empty
        .iter()
        .filter(|(_, exprs)| {
            !exprs.iter().any(|e| {
                metric_names(e)
                    .iter()
                    .any(|n| pending.contains(&n.as_str()))
            })
        })
        .map(|(t, _)| t)
        .collect();
    assert!(empty.is_empty(), "panels without data: {empty:?}");
    // The device table lists both devices, the stopped one as not up.
    assert!(
        page.html.contains("<td>cell-01</td>") && page.html.contains("<td>cell-02</td>"),
        "the device table misses a device"
    );
    let png = tmp.path().join("dashboard.png");
    screenshot(tmp.path(), &html, &png, page.height);
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    assert!(bytes.len() > 30_000, "a blank page? {} bytes", bytes.len());
    if let Some(keep) = std::env::var_os("CGWARDEN_FLEET_PNG") {
        std::fs::copy(&png, keep).unwrap();
    }
    let (code, log) = db.stop();
    assert_eq!(code, 0, "{log}");
}

// ---------------------------------------------------------------- drawing

struct Page {
    html: String,
    height: u32,
    /// Queries the server refused (panel, expression, error).
    failed: Vec<String>,
    /// Panels none of whose queries returned a series (title, exprs).
    empty: Vec<(String, Vec<String>)>,
}

const WIDTH: f64 = 1600.0;
const ROW: f64 = 30.0;
const COLORS: [&str; 8] = [
    "#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#b877d9", "#f2495c", "#8ab8ff", "#fade2a",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn legend(fmt: &str, labels: &Value) -> String {
    if fmt.is_empty() {
        return labels.to_string();
    }
    let mut out = fmt.to_string();
    if let Some(m) = labels.as_object() {
        for (k, v) in m {
            out = out.replace(&format!("{{{{{k}}}}}"), v.as_str().unwrap_or(""));
        }
    }
    // Labels the series lacks render empty, as Grafana does.
    while let (Some(a), Some(b)) = (out.find("{{"), out.find("}}")) {
        if b < a {
            break;
        }
        out.replace_range(a..b + 2, "");
    }
    out.trim().to_string()
}

fn fmt_value(v: f64, unit: &str) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    match unit {
        "bytes" => {
            if v >= 1073741824.0 {
                format!("{:.2} GiB", v / 1073741824.0)
            } else {
                format!("{:.1} MiB", v / 1048576.0)
            }
        }
        "percentunit" => format!("{:.1}%", v * 100.0),
        "s" => format!("{:.1} ms", v * 1000.0),
        _ if v.abs() >= 1e9 => format!("{:.2} G", v / 1e9),
        _ if v.abs() >= 1e6 => format!("{:.2} M", v / 1e6),
        _ if v.abs() >= 1e4 => format!("{:.1} k", v / 1e3),
        _ if v.fract() == 0.0 => format!("{v:.0}"),
        _ => format!("{v:.3}"),
    }
}

fn substitute(expr: &str, vars: &[(&str, String)]) -> String {
    let mut e = expr.to_string();
    // Longest first: `$__rate_interval` before any shorter name.
    let mut vs: Vec<&(&str, String)> = vars.iter().collect();
    vs.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    for (k, v) in vs {
        e = e.replace(k, v);
    }
    e
}

fn render_dashboard(
    prom: &Prometheus,
    d: &Value,
    vars: &[(&str, String)],
    (start, end): (f64, f64),
) -> Page {
    let mut body = String::new();
    let mut failed = Vec::new();
    let mut empty = Vec::new();
    let mut bottom = 0.0f64;
    let step = ((end - start) / 200.0).max(1.0);
    for p in d["panels"].as_array().unwrap() {
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_f64().unwrap() / 24.0 * WIDTH,
            g["y"].as_f64().unwrap() * ROW,
            g["w"].as_f64().unwrap() / 24.0 * WIDTH,
            g["h"].as_f64().unwrap() * ROW,
        );
        bottom = bottom.max(y + h);
        let title = substitute(p["title"].as_str().unwrap_or(""), vars);
        let kind = p["type"].as_str().unwrap_or("");
        let style = format!(
            "left:{x:.0}px;top:{y:.0}px;width:{:.0}px;height:{:.0}px",
            w - 8.0,
            h - 8.0
        );
        if kind == "row" {
            body.push_str(&format!(
                "<div class=\"row\" style=\"{style}\">▾ {}</div>\n",
                esc(&title)
            ));
            continue;
        }
        let unit = p["fieldConfig"]["defaults"]["unit"]
            .as_str()
            .unwrap_or("none");
        let targets: Vec<&Value> = p["targets"].as_array().unwrap().iter().collect();
        let exprs: Vec<String> = targets
            .iter()
            .map(|t| t["expr"].as_str().unwrap().to_string())
            .collect();
        let mut any = false;
        let inner = match kind {
            "stat" => {
                let e = substitute(&exprs[0], vars);
                match prom.query(&e, None) {
                    Ok(data) => {
                        let v = data["result"][0]["value"][1]
                            .as_str()
                            .and_then(|s| s.parse::<f64>().ok());
                        any = v.is_some();
                        format!(
                            "<div class=\"stat\">{}</div>",
                            v.map(|v| fmt_value(v, unit)).unwrap_or("No data".into())
                        )
                    }
                    Err(err) => {
                        failed.push(format!("{title}: {e}: {err}"));
                        String::new()
                    }
                }
            }
            "table" => {
                let e = substitute(&exprs[0], vars);
                match prom.query(&e, None) {
                    Ok(data) => {
                        let cols = [
                            "hostname", "product", "instance", "model", "kernel", "hash", "up",
                        ];
                        let mut t = String::from("<table><tr>");
                        for c in cols {
                            t.push_str(&format!("<th>{c}</th>"));
                        }
                        t.push_str("</tr>");
                        for r in data["result"].as_array().into_iter().flatten() {
                            any = true;
                            t.push_str("<tr>");
                            for c in cols {
                                let mut v = match c {
                                    "up" => r["value"][1].as_str().unwrap_or("").to_string(),
                                    _ => r["metric"][c].as_str().unwrap_or("").to_string(),
                                };
                                if c == "hash" {
                                    v.truncate(12);
                                }
                                t.push_str(&format!("<td>{}</td>", esc(&v)));
                            }
                            t.push_str("</tr>");
                        }
                        t.push_str("</table>");
                        t
                    }
                    Err(err) => {
                        failed.push(format!("{title}: {e}: {err}"));
                        String::new()
                    }
                }
            }
            _ => {
                let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
                for t in &targets {
                    let e = substitute(t["expr"].as_str().unwrap(), vars);
                    match prom.query(&e, Some((start, end, step))) {
                        Ok(data) => {
                            for r in data["result"].as_array().into_iter().flatten() {
                                let pts: Vec<(f64, f64)> = r["values"]
                                    .as_array()
                                    .into_iter()
                                    .flatten()
                                    .filter_map(|v| {
                                        let t = v[0].as_f64()?;
                                        let y = v[1].as_str()?.parse::<f64>().ok()?;
                                        y.is_finite().then_some((t, y))
                                    })
                                    .collect();
                                series.push((
                                    legend(t["legendFormat"].as_str().unwrap_or(""), &r["metric"]),
                                    pts,
                                ));
                            }
                        }
                        Err(err) => failed.push(format!("{title}: {e}: {err}")),
                    }
                }
                any = !series.is_empty();
                chart(&series, w - 8.0, h - 8.0 - 26.0, unit, (start, end))
            }
        };
        if !any {
            empty.push((title.clone(), exprs));
        }
        body.push_str(&format!(
            "<div class=\"panel\" style=\"{style}\"><div class=\"title\">{}</div>{}</div>\n",
            esc(&title),
            if any || kind == "table" {
                inner
            } else {
                "<div class=\"nodata\">No data</div>".into()
            }
        ));
    }
    let height = (bottom + 40.0) as u32;
    let html = format!(
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title><style>
body{{margin:0;background:#111217;color:#ccccdc;font:13px Inter,Helvetica,Arial,sans-serif}}
#hdr{{height:40px;line-height:40px;padding:0 12px;font-size:16px;background:#181b1f;border-bottom:1px solid #2c3235}}
#hdr span{{color:#8e8e8e;font-size:12px;margin-left:16px}}
#grid{{position:relative;margin:8px}}
.panel{{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:2px;overflow:hidden}}
.row{{position:absolute;font-size:15px;font-weight:500;color:#d8d9da}}
.title{{height:26px;line-height:26px;padding:0 8px;font-weight:500}}
.stat{{font-size:44px;font-weight:500;color:#73bf69;text-align:center;margin-top:10px}}
.nodata{{color:#8e8e8e;text-align:center;margin-top:40px}}
table{{border-collapse:collapse;width:100%;font-size:12px}}
th{{text-align:left;color:#6e9fff;border-bottom:1px solid #2c3235;padding:4px 8px}}
td{{padding:4px 8px;border-bottom:1px solid #202226}}
.leg{{font-size:11px;padding:0 8px;white-space:nowrap;overflow:hidden}}
.leg i{{display:inline-block;width:12px;height:3px;margin:0 4px 3px 10px;vertical-align:middle}}
</style></head><body><div id="hdr">{title}<span>product = {product} · device = {instance} · drawn by tests/fleet_prometheus.rs from a real Prometheus's query results (not Grafana)</span></div>
<div id="grid" style="height:{h}px">{body}</div></body></html>"#,
        title = esc(d["title"].as_str().unwrap_or("")),
        product = esc(&vars[0].1),
        instance = esc(&vars[1].1),
        h = bottom as u32,
    );
    Page {
        html,
        height: height + 60,
        failed,
        empty,
    }
}

/// A line chart as SVG, with its legend below.
fn chart(
    series: &[(String, Vec<(f64, f64)>)],
    w: f64,
    h: f64,
    unit: &str,
    (t0, t1): (f64, f64),
) -> String {
    let legend_h = 18.0 * ((series.len() as f64) / 3.0).ceil().min(3.0);
    let ph = (h - legend_h).max(40.0);
    let (left, pad) = (70.0, 8.0);
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .collect();
    let (mut lo, mut hi) = ys
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(*y), b.max(*y))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    lo = lo.min(0.0);
    if hi <= lo {
        hi = lo + 1.0;
    }
    hi *= 1.1;
    let sx = |t: f64| left + (t - t0) / (t1 - t0).max(1.0) * (w - left - pad);
    let sy = |y: f64| pad + (1.0 - (y - lo) / (hi - lo)) * (ph - 2.0 * pad);
    let mut svg = format!("<svg width=\"{w:.0}\" height=\"{ph:.0}\">");
    for i in 0..=3 {
        let v = lo + (hi - lo) * i as f64 / 3.0;
        let y = sy(v);
        svg.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{:.0}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#2c3235\"/><text x=\"{:.0}\" y=\"{:.1}\" fill=\"#8e8e8e\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            w - pad,
            left - 6.0,
            y + 4.0,
            esc(&fmt_value(v, unit))
        ));
    }
    // The time axis: its two ends, UTC.
    let hms = |t: f64| {
        let s = t as u64 % 86400;
        format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    };
    for (t, anchor) in [(t0, "start"), (t1, "end")] {
        svg.push_str(&format!(
            "<text x=\"{:.0}\" y=\"{:.0}\" fill=\"#8e8e8e\" font-size=\"10\" text-anchor=\"{anchor}\">{}</text>",
            sx(t),
            ph - 1.0,
            hms(t)
        ));
    }
    for (i, (_, pts)) in series.iter().enumerate() {
        let d: Vec<String> = pts
            .iter()
            .map(|(t, y)| format!("{:.1},{:.1}", sx(*t), sy(*y)))
            .collect();
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>",
            COLORS[i % COLORS.len()],
            d.join(" ")
        ));
    }
    svg.push_str("</svg>");
    let mut leg = String::from("<div class=\"leg\">");
    for (i, (name, _)) in series.iter().enumerate().take(9) {
        leg.push_str(&format!(
            "<i style=\"background:{}\"></i>{}",
            COLORS[i % COLORS.len()],
            esc(name)
        ));
    }
    leg.push_str("</div>");
    format!("{svg}{leg}")
}

fn screenshot(dir: &Path, page: &Path, png: &Path, height: u32) {
    support::chromium(
        dir,
        &[
            "--hide-scrollbars",
            &format!("--window-size={},{height}", WIDTH as u32 + 16),
            &format!("--screenshot={}", png.display()),
        ],
        page,
    );
}

#[test]
fn the_dashboard_is_well_formed_for_grafana() {
    let d = dashboard();
    assert_eq!(d["uid"], "cgwarden-fleet");
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "product", "instance"]);
    let panels = d["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    let mut cells: BTreeMap<(i64, i64), String> = BTreeMap::new();
    let (mut fleet, mut device) = (0, 0);
    let mut row = "";
    for p in panels {
        let title = p["title"].as_str().unwrap();
        assert!(
            ids.insert(p["id"].as_i64().unwrap()),
            "{title}: id used twice"
        );
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_i64().unwrap(),
            g["y"].as_i64().unwrap(),
            g["w"].as_i64().unwrap(),
            g["h"].as_i64().unwrap(),
        );
        assert!(x >= 0 && w > 0 && x + w <= 24 && h > 0, "{title}: {g}");
        // No two panels share a grid cell.
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title.to_string()) {
                    panic!("{title} overlaps {other} at ({cx}, {cy})");
                }
            }
        }
        if p["type"] == "row" {
            row = title;
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let exprs: Vec<&str> = p["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["expr"].as_str().unwrap())
            .collect();
        assert!(!exprs.is_empty(), "{title}: no query");
        // The overview filters by product, the drill-down by instance.
        if row.starts_with("Fleet") {
            fleet += 1;
            assert!(
                exprs.iter().all(|e| e.contains("$product")),
                "{title}: a fleet panel not filtered by $product"
            );
        } else {
            device += 1;
            assert!(
                exprs.iter().all(|e| e.contains("instance=\"$instance\"")),
                "{title}: a device panel not filtered by $instance"
            );
        }
    }
    assert!(
        fleet >= 8 && device >= 10,
        "{fleet} fleet, {device} device panels"
    );
}
