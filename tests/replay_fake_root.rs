//! `cgwarden replay` end to end: the real daemon records a run on
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
/// `total=` growing `rate` µs a second of wall time (as the kernel's does:
/// a write that comes late on a loaded host carries the time it missed, so
/// the stall rate the daemon sees is `rate`, not less).
fn phase(root: &Path, total: &mut u64, avg: f64, rate: u64, secs: f64) {
    let t0 = Instant::now();
    let base = *total;
    loop {
        let t = t0.elapsed().as_secs_f64().min(secs);
        *total = base + (rate as f64 * t) as u64;
        memory_pressure(root, avg, *total);
        if t >= secs {
            break;
        }
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

    // The charts page: each rule's inputs, the firings marked.
    let html = dir.path().join("replay.html");
    let r = cgwarden(&[
        "replay",
        p,
        "--recording",
        db,
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 3, "one chart per rule input");
    // The pressure rule's two firings, on its one chart.
    let marks = page.matches("would fire: inference.memory.some.avg10");
    assert_eq!(marks.count(), 2);
    assert!(page.contains("fired in the recording"));

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

/// The tape's cost on the fake board: the real daemon runs
/// policies/iq9100-vision.yaml (1 s tick, 10 s recorder interval) for 60 s
/// while every input its rules read changes each second; the tape's bytes
/// are extrapolated to a day. A measurement, not a gate (slow):
/// `cargo test --test replay_fake_root -- --ignored --nocapture`.
#[test]
#[ignore]
fn iq9100_tape_bytes_per_day_on_the_fake_board() {
    let (tmp, _t) = support::processes_board();
    let root = tmp.path().to_path_buf();
    let policy = support::repo("policies/iq9100-vision.yaml");
    let z = root.join("sys/class/thermal/thermal_zone3");
    std::fs::create_dir_all(&z).unwrap();
    std::fs::write(z.join("type"), "cpu-1-0-usr\n").unwrap();
    for g in ["inference", "vision"] {
        std::fs::create_dir_all(root.join("sys/fs/cgroup").join(g)).unwrap();
    }
    put(
        &root,
        "sys/fs/cgroup/vision/memory.events",
        "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
    );
    let mut lcg = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: u64| {
        lcg = lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (lcg >> 33) % n
    };
    let (mut cpu, mut mem, mut temp, mut avail) =
        (1_000_000u64, 1_000_000u64, 60_000i64, 2_000_000i64);
    let mut write_all = |rnd: &mut dyn FnMut(u64) -> u64| {
        cpu += rnd(120_000);
        mem += rnd(20_000);
        temp += (rnd(11) as i64 - 5) * 100;
        avail += rnd(4097) as i64 - 2048;
        let avg = rnd(3000) as f64 / 100.0;
        put(&root, "sys/fs/cgroup/inference/cpu.pressure", &format!("some avg10=1.00 avg60=0.00 avg300=0.00 total={cpu}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"));
        put(&root, "sys/fs/cgroup/inference/memory.pressure", &format!("some avg10={avg:.2} avg60=0.00 avg300=0.00 total={mem}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"));
        put(
            &root,
            "sys/class/thermal/thermal_zone3/temp",
            &format!("{temp}\n"),
        );
        put(&root, "proc/meminfo", &format!("MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:   {avail} kB\n"));
    };
    write_all(&mut rnd);
    let d = Daemon::start(
        Path::new(&policy),
        &root,
        Start {
            tick: "1s",
            ..Start::default()
        },
    );
    d.wait_log("flight recorder running", Duration::from_secs(10));
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        write_all(&mut rnd);
        std::thread::sleep(Duration::from_secs(1));
    }
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let c = rusqlite::Connection::open(root.join("var/lib/cgwarden/recorder.db")).unwrap();
    let (rows, evals, bytes, from, to): (i64, i64, i64, f64, f64) = c
        .query_row(
            "SELECT count(*), sum(evals), sum(length(data)), min(ts), max(until) FROM tape",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    let keys: Vec<String> = c
        .prepare("SELECT name FROM tape_keys ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let per_day = bytes as f64 * 86_400.0 / (to - from);
    eprintln!("iq9100 on the fake board: {rows} rows, {evals} evaluations in {:.1} s, {bytes} bytes of tape = {:.0} bytes/day (+ SQLite row and page overhead); inputs {keys:?}", to - from, per_day);
    assert!(
        evals as f64 >= (to - from) * 0.9,
        "the daemon evaluates every tick"
    );
    assert!(per_day < 2_500_000.0, "{per_day} bytes/day");
    let r = cgwarden(&[
        "replay",
        &policy,
        "--recording",
        root.join("var/lib/cgwarden/recorder.db").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r}");
    assert!(!r.stdout.contains("GAP"), "{r}");
}

/// A reload that adds a rule reading a new input: the tape watches it from
/// the reload on, so replaying the new policy names the gap before it only.
#[test]
fn a_reload_starts_taping_the_new_rules_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), POLICY);
    std::fs::create_dir_all(root.join("sys/fs/cgroup/inference")).unwrap();
    memory_events(&root, 0);
    let mut total = 1_000_000;
    memory_pressure(&root, 0.0, total);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("flight recorder running", Duration::from_secs(10));
    phase(&root, &mut total, 0.0, 10_000, 3.0);
    let newer = POLICY.to_string()
        + "  - name: big\n    when: inference.memory.current > 1G\n    then: [compact memory]\n";
    let tmp = policy.with_extension("new");
    std::fs::write(&tmp, &newer).unwrap();
    std::fs::rename(&tmp, &policy).unwrap();
    d.signal(libc::SIGHUP);
    d.wait_log(": done", Duration::from_secs(10));
    let reloaded = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    phase(&root, &mut total, 0.0, 10_000, 3.0);
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let db = root.join("var/lib/cgwarden/recorder.db");
    let v = json(&[
        "replay",
        policy.to_str().unwrap(),
        "--recording",
        db.to_str().unwrap(),
        "--json",
    ]);
    let gaps = v["replay"]["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 1, "{gaps:#?}");
    assert_eq!(gaps[0]["rule"], "big");
    assert_eq!(gaps[0]["input"], "inference.memory.current");
    let (from, to) = (
        gaps[0]["from"].as_f64().unwrap(),
        gaps[0]["to"].as_f64().unwrap(),
    );
    assert!(
        (from - v["replay"]["from"].as_f64().unwrap()).abs() < 0.01,
        "{gaps:#?}"
    );
    assert!(
        to <= reloaded && to > reloaded - 3.0,
        "the gap ends at the reload: {to} vs {reloaded}"
    );
    assert!(
        v["replay"]["to"].as_f64().unwrap() > reloaded + 2.0,
        "the rest is taped"
    );
}
