//! Metrics on a fake tree: the real binary serves
//! `GET /metrics` on a unix socket and on loopback TCP and writes the
//! node_exporter textfile; a real HTTP client (`curl`) scrapes it,
//! `promtool` checks what it got, and the values are the fake tree's files.
//! curl and promtool are required: the tests fail, not skip, without them
//! (tests/run-all.sh installs them).

use cgwarden::testing::FakeTree;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod support;
use support::{Daemon, Start};

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn setup(dir: &Path, metrics: &str) -> (FakeTree, PathBuf, PathBuf) {
    support::board(
        dir,
        &format!(
            r#"version: 1
product: metrics-test
settings:
{metrics}
groups:
  inference:
    memory: {{ high: 100M, max: 1G }}
  vision:
    cpu: {{ weight: 200 }}
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set vision.cpu.weight = 300
"#
        ),
    )
}

fn run(cmd: &mut Command) -> Output {
    let name = format!("{cmd:?}");
    cmd.output()
        .unwrap_or_else(|e| panic!("{name}: {e} (is it installed? tests/run-all.sh installs it)"))
}

fn curl(args: &[&str]) -> (String, String) {
    let o = run(Command::new("curl")
        .args(["-sS", "-m", "10", "-D", "/dev/stderr"])
        .args(args));
    assert!(
        o.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `promtool check metrics` on the Prometheus text format.
fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (apt install prometheus; tests/run-all.sh does)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// OpenMetrics is checked by promtool's OpenMetrics parser (`tsdb
/// create-blocks-from openmetrics`), which needs a timestamp on every sample.
fn promtool_openmetrics(dir: &Path, text: &str) {
    assert!(text.ends_with("# EOF\n"), "{text}");
    let stamped: String = text
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("{l}\n")
            } else {
                format!("{l} 1700000000\n")
            }
        })
        .collect();
    let f = dir.join("scrape.om");
    std::fs::write(&f, stamped).unwrap();
    let o = run(Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&f)
        .arg(dir.join("blocks")));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success() && !all.contains("error"),
        "promtool openmetrics: {all}\n{text}"
    );
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .split(' ')
            .next()?
            .parse()
            .ok()
    })
}

fn threads(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        if let Ok(c) = std::fs::read_to_string(e.path().join("comm")) {
            out.push(c.trim().to_string());
        }
    }
    out
}

#[test]
fn scraped_over_unix_socket_and_tcp_and_written_as_textfile_all_valid() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (_t, policy, root) = setup(
        dir.path(),
        &format!(
            "  metrics:\n    socket: /run/cgwarden/metrics.sock\n    listen: 127.0.0.1:{port}\n    textfile: /var/lib/node_exporter/cgwarden.prom\n    interval: 1s"
        ),
    );
    // Converge first so the group exists, and lay out what the kernel would
    // show in it before the daemon starts: an events file that appears only
    // after the daemon's first look may be first read with the OOM kill
    // already in it (seen in CI), and a count's first reading is its base.
    support::apply(&policy, &root);
    let cg = root.join("sys/fs/cgroup/inference");
    std::fs::write(
        cg.join("memory.events"),
        "low 0\nhigh 4\nmax 0\noom 0\noom_kill 0\n",
    )
    .unwrap();
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("metrics socket listening", Duration::from_secs(10));
    std::fs::write(cg.join("memory.current"), "123456789\n").unwrap();
    std::fs::write(
        cg.join("memory.pressure"),
        "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=750000\n",
    )
    .unwrap();
    std::fs::write(
        cg.join("memory.events"),
        "low 0\nhigh 4\nmax 0\noom 0\noom_kill 0\n",
    )
    .unwrap();

    // The unix socket: 0660, under --root, a real HTTP client.
    let sock = root.join("run/cgwarden/metrics.sock");
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);
    let (text, head) = curl(&[
        "--unix-socket",
        sock.to_str().unwrap(),
        "http://localhost/metrics",
    ]);
    assert!(
        head.contains("200") && head.contains("text/plain; version=0.0.4"),
        "{head}"
    );
    promtool_check(&text);
    for (series, want) in [
        (
            "cgwarden_cgroup_memory_current_bytes{group=\"inference\"}",
            123456789.0,
        ),
        (
            "cgwarden_cgroup_memory_high_bytes{group=\"inference\"}",
            100.0 * 1048576.0,
        ),
        (
            "cgwarden_cgroup_memory_max_bytes{group=\"inference\"}",
            1073741824.0,
        ),
        (
            "cgwarden_cgroup_pressure_memory_waiting_seconds_total{group=\"inference\"}",
            2.5,
        ),
        (
            "cgwarden_cgroup_pressure_memory_stalled_seconds_total{group=\"inference\"}",
            0.75,
        ),
        (
            "cgwarden_cgroup_memory_events_total{group=\"inference\",event=\"high\"}",
            4.0,
        ),
        ("cgwarden_rule_active{rule=\"oom-seen\"}", 0.0),
        ("cgwarden_rule_fired_total{rule=\"oom-seen\"}", 0.0),
        ("cgwarden_knob_value{knob=\"vision.cpu.weight\"}", 200.0),
        ("cgwarden_config_last_reload_successful", 1.0),
        (
            "cgwarden_policy_info{product=\"metrics-test\",hash=",
            f64::NAN,
        ),
    ] {
        if want.is_nan() {
            assert!(text.contains(series), "{series} missing:\n{text}");
            continue;
        }
        assert_eq!(value(&text, series), Some(want), "{series} in\n{text}");
    }
    assert!(value(&text, "cgwarden_process_resident_memory_bytes").is_some_and(|v| v > 1e6));
    assert!(value(&text, "cgwarden_process_open_fds").is_some_and(|v| v > 3.0));

    // A rule fires: its gauge and counter follow; the knob's value too.
    std::fs::write(
        cg.join("memory.events"),
        "low 0\nhigh 4\nmax 0\noom 1\noom_kill 1\n",
    )
    .unwrap();
    d.wait_for(
        "the rule active in the metrics",
        Duration::from_secs(10),
        || {
            let (t, _) = curl(&[
                "--unix-socket",
                sock.to_str().unwrap(),
                "http://localhost/metrics",
            ]);
            value(&t, "cgwarden_rule_active{rule=\"oom-seen\"}") == Some(1.0)
                && value(&t, "cgwarden_rule_fired_total{rule=\"oom-seen\"}") == Some(1.0)
                && value(&t, "cgwarden_knob_value{knob=\"vision.cpu.weight\"}") == Some(300.0)
                && value(
                    &t,
                    "cgwarden_knob_writes_total{knob=\"vision.cpu.weight\",result=\"ok\"}",
                )
                .is_some_and(|v| v >= 1.0)
        },
    );

    // Loopback TCP, OpenMetrics when asked for.
    let url = format!("http://127.0.0.1:{port}/metrics");
    let (om, head) = curl(&[
        "-H",
        "Accept: application/openmetrics-text;version=1.0.0",
        &url,
    ]);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(om.contains("# TYPE cgwarden_rule_fired counter"), "{om}");
    assert!(om.contains("cgwarden_build_info{version="), "{om}");
    promtool_openmetrics(dir.path(), &om);
    let (plain, _) = curl(&[&url]);
    promtool_check(&plain);

    // Anything but GET/HEAD /metrics is refused, the server lives on.
    let (_, head) = curl(&[&format!("http://127.0.0.1:{port}/other")]);
    assert!(head.contains("404"), "{head}");
    let (_, head) = curl(&["-X", "POST", &url]);
    assert!(head.contains("405"), "{head}");

    // The textfile: under --root, replaced atomically, valid for node_exporter.
    let tf = root.join("var/lib/node_exporter/cgwarden.prom");
    // Rewritten every interval (1s): it shows the tree's value soon.
    d.wait_for(
        "the textfile with the value",
        Duration::from_secs(5),
        || {
            let text = std::fs::read_to_string(&tf).unwrap_or_default();
            value(
                &text,
                "cgwarden_cgroup_memory_current_bytes{group=\"inference\"}",
            ) == Some(123456789.0)
        },
    );
    promtool_check(&std::fs::read_to_string(&tf).unwrap());
    let names: Vec<String> = std::fs::read_dir(tf.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["cgwarden.prom".to_string()],
        "no temp file left visible"
    );
    // Served as tasks of the services thread, with the control socket; the
    // textfile (no recorder here) written by a thread that may wait for the
    // disk.
    let names = threads(d.pid());
    assert!(names.iter().any(|t| t == "cgw-services"), "{names:?}");
    assert!(names.iter().any(|t| t == "cgw-textfile"), "{names:?}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!sock.exists(), "the socket goes with the daemon");
}

#[test]
fn a_stuck_or_hostile_client_does_not_stop_scrapes() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (_t, policy, root) = setup(
        dir.path(),
        &format!("  metrics:\n    listen: 127.0.0.1:{port}"),
    );
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("metrics listening", Duration::from_secs(10));
    use std::io::Write;
    // Clients that connect and say nothing, or half a request, or a huge head.
    let mut idle = Vec::new();
    for i in 0..40 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        if i % 2 == 0 {
            let _ = s.write_all(b"GET /metr");
        }
        idle.push(s);
    }
    let mut big = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let _ = big.write_all(
        format!(
            "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(64 * 1024)
        )
        .as_bytes(),
    );
    // The slots free within the head timeout; a scrape then succeeds.
    d.wait_for("a scrape through", Duration::from_secs(15), || {
        Command::new("curl")
            .args([
                "-sf",
                "-m",
                "2",
                &format!("http://127.0.0.1:{port}/metrics"),
            ])
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
    });
    drop(idle);
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn without_metrics_or_recorder_no_thread_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path(), "  tick: 1s");
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    let names = threads(d.pid());
    assert!(
        !names
            .iter()
            .any(|t| t == "cgw-recorder" || t == "cgw-textfile"),
        "{names:?}"
    );
    let (code, _) = d.stop();
    assert_eq!(code, 0);
}

#[test]
fn groups_and_rules_a_reload_adds_appear_in_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(
        dir.path(),
        "  metrics:\n    socket: /run/cgwarden/metrics.sock",
    );
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("metrics socket listening", Duration::from_secs(10));
    let sock = root.join("run/cgwarden/metrics.sock");
    let scrape = || {
        curl(&[
            "--unix-socket",
            sock.to_str().unwrap(),
            "http://localhost/metrics",
        ])
        .0
    };
    assert!(!scrape().contains("group=\"added\""));
    let text = std::fs::read_to_string(&policy).unwrap();
    let text = text.replace(
        "rules:\n",
        "  added:\n    memory: { max: 512M }\nrules:\n  - name: new-rule\n    when: added.memory.events.oom_kill > 0\n    while:\n      - set vision.cpu.weight = 400\n",
    );
    std::fs::write(&policy, text).unwrap();
    d.signal(libc::SIGHUP);
    d.wait_for(
        "the new group and rule in the metrics",
        Duration::from_secs(10),
        || {
            let t = scrape();
            value(&t, "cgwarden_cgroup_memory_max_bytes{group=\"added\"}") == Some(536870912.0)
                && value(&t, "cgwarden_rule_active{rule=\"new-rule\"}") == Some(0.0)
                && value(&t, "cgwarden_config_last_reload_successful") == Some(1.0)
        },
    );
    // A broken policy: the reload fails, the metrics say so.
    std::fs::write(&policy, "version: 1\ngroups: [").unwrap();
    d.signal(libc::SIGHUP);
    d.wait_for(
        "the failed reload in the metrics",
        Duration::from_secs(10),
        || value(&scrape(), "cgwarden_config_last_reload_successful") == Some(0.0),
    );
    let (code, _) = d.stop();
    assert_eq!(code, 0);
}
