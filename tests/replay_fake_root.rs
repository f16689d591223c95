//! `cgwarden replay` end to end (issue 27): the real daemon records a run on
//! a fake tree (memory pressure twice, a stall burst, an OOM kill) with its
//! input tape; replaying the same policy reproduces the recorded firings;
//! a sweep gives the firing counts computed by hand from what the test
//! wrote; a policy reading an input the recording lacks gets a named gap.

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

mod support;
use support::{cgwarden, Daemon, Start};

const POLICY: &str = r#"version: 1
product: replay-test
settings:
  recorder:
    dir: /var/lib/cgwarden
    interval: 1s
groups:
  inference:
    memory: { high: 100M, max: 1G }
rules:
  - name: pressure
    when: inference.memory.some.avg10 > 10%
    while:
      - set inference.memory.high = 300M
  - name: stall
    when: inference.memory.some > 300ms/1s
    then: [compact memory]
  - name: oom
    when: inference.memory.events.oom_kill > 0
    while:
      - set inference.memory.max = 2G
"#;

/// Replaces `ROOT/REL` whole (a rename): the daemon, polling, never reads
/// a half-written file (with a plain write it sometimes does, sees the
/// input unavailable for a tick, and the rule drops; the replay then
/// faithfully reproduces that, but the counts below are by hand).
fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
}

fn memory_events(root: &Path, oom_kill: u64) {
    put(
        root,
        "sys/fs/cgroup/inference/memory.events",
        &format!("low 0\nhigh 0\nmax 0\noom {oom_kill}\noom_kill {oom_kill}\noom_group_kill 0\n"),
    );
}

fn memory_pressure(root: &Path, avg10: f64, total: u64) {
    put(
        root,
        "sys/fs/cgroup/inference/memory.pressure",
        &format!(
            "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=50\n"
        ),
    );
}

/// Writes `memory.pressure` every 100 ms for `secs`: avg10 `avg`, the
/// `total=` growing `rate` µs a second.
fn phase(root: &Path, total: &mut u64, avg: f64, rate: u64, secs: f64) {
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        *total += rate / 10;
        memory_pressure(root, avg, *total);
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn json(args: &[&str]) -> Value {
    let r = cgwarden(args);
    assert_eq!(r.code, 0, "{r}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r}"))
}

#[test]
fn a_recorded_run_replays_to_the_recorded_firings_and_sweeps_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), POLICY);
    let g = root.join("sys/fs/cgroup/inference");
    std::fs::create_dir_all(&g).unwrap();
    memory_events(&root, 0);
    let mut total = 1_000_000;
    memory_pressure(&root, 0.0, total);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("flight recorder running", Duration::from_secs(10));
    phase(&root, &mut total, 0.0, 10_000, 2.0);
    phase(&root, &mut total, 20.0, 500_000, 2.0); // pressure and stall
    phase(&root, &mut total, 0.0, 10_000, 2.0);
    memory_events(&root, 1);
    phase(&root, &mut total, 0.0, 10_000, 2.0);
    phase(&root, &mut total, 30.0, 100_000, 2.0); // pressure only
    phase(&root, &mut total, 0.0, 10_000, 2.5);
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let db = root.join("var/lib/cgwarden/recorder.db");
    let (p, db) = (policy.to_str().unwrap(), db.to_str().unwrap());

    // Shown with --nocapture (the README's example comes from here).
    eprintln!("{}", cgwarden(&["replay", p, "--recording", db]).stdout);
    let v = json(&["replay", p, "--recording", db, "--json"]);
    assert!(v["replay"]["gaps"].as_array().unwrap().is_empty(), "{v:#}");
    let firings = |rule: &str| -> u64 {
        v["diff"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["rule"] == rule)
            .unwrap_or_else(|| panic!("{rule}: {v:#}"))["replayed"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        (firings("pressure"), firings("stall"), firings("oom")),
        (2, 1, 1),
        "{:#}",
        v["diff"]
    );
    for d in v["diff"].as_array().unwrap() {
        assert_eq!(d["recorded"], d["replayed"], "{d:#}");
        assert_eq!(d["matched"], d["replayed"], "{d:#}");
        assert_eq!(d["recorded_writes"], d["replayed_writes"], "{d:#}");
    }

    // By hand: avg10 was 20 for the first burst and 30 for the second.
    let s = json(&[
        "replay",
        p,
        "--recording",
        db,
        "--json",
        "--sweep",
        "pressure.threshold=15%..35%/10%",
    ]);
    let rows: Vec<(String, u64)> = s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["value"].as_str().unwrap().to_string(),
                r["firings"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("15%".into(), 2), ("25%".into(), 1), ("35%".into(), 0)]
    );
    let t = cgwarden(&[
        "replay",
        p,
        "--recording",
        db,
        "--sweep",
        "pressure.threshold=15%..35%/10%",
    ]);
    assert!(
        t.stdout.contains("firings") && t.stdout.contains("25%"),
        "{t}"
    );
    eprintln!("{}", t.stdout);

    // A policy reading memory.current, which the recorded policy did not.
    let other = dir.path().join("other.yaml");
    std::fs::write(
        &other,
        POLICY.replace(
            "inference.memory.events.oom_kill > 0",
            "inference.memory.current > 1G",
        ),
    )
    .unwrap();
    let r = cgwarden(&["replay", other.to_str().unwrap(), "--recording", db]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains("GAP: inference.memory.current is not in the recording from"),
        "{r}"
    );
    // No recording: exit 4, named.
    let r = cgwarden(&["replay", p, "--recording", "/nonexistent/recorder.db"]);
    assert_eq!(r.code, 4, "{r}");
    assert!(r.stderr.contains("/nonexistent/recorder.db"), "{r}");
}
