//! The flight recorder on a fake tree: the real daemon
//! records every interval into `recorder.dir/recorder.db`; SIGKILLed at
//! random moments it leaves a database that opens, passes
//! `PRAGMA integrity_check` (through rusqlite and through the `sqlite3`
//! CLI, which must be installed: tests/run-all.sh does) and holds every
//! interval up to at most one before the kill.

use cgwarden::testing::FakeTree;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

mod support;
use support::{Daemon, Start};

const INTERVAL: f64 = 1.0;

const POLICY: &str = r#"version: 1
product: recorder-test
settings:
  recorder:
    dir: /var/lib/cgwarden
    interval: 1s
  critical: ["npu-*"]
groups:
  inference:
    memory: { high: 100M, max: 1G }
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set inference.memory.high = 200M
report:
  criteria:
    processes: [camd]
    thermal_zones: [cpu-thermal]
"#;

fn setup(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    let (t, policy, root) = support::board(dir, POLICY);
    std::fs::create_dir_all(root.join("proc/sys/kernel/random")).unwrap();
    std::fs::write(
        root.join("proc/sys/kernel/random/boot_id"),
        "0f1e2d3c-aaaa-bbbb-cccc-000000000001\n",
    )
    .unwrap();
    // The group's event file exists from the start (a kernel shows it).
    let g = root.join("sys/fs/cgroup/inference");
    std::fs::create_dir_all(&g).unwrap();
    std::fs::write(g.join("memory.events"), "oom 0\noom_kill 0\n").unwrap();
    // A named process and a thermal zone with trip points.
    let p = root.join("proc/4242");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("comm"), "camd\n").unwrap();
    std::fs::write(p.join("status"), "Name:\tcamd\nVmRSS:\t   2048 kB\n").unwrap();
    // PSS from smaps_rollup, for the named process and a
    // settings.critical one (the latter not named in report.criteria).
    std::fs::write(
        p.join("smaps_rollup"),
        cgwarden::testing::smaps_rollup_text(2048, 1536),
    )
    .unwrap();
    let p = root.join("proc/4243");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("comm"), "npu-infer\n").unwrap();
    std::fs::write(p.join("status"), "Name:\tnpu-infer\nVmRSS:\t   4096 kB\n").unwrap();
    std::fs::write(
        p.join("smaps_rollup"),
        cgwarden::testing::smaps_rollup_text(4096, 3000),
    )
    .unwrap();
    let z = root.join("sys/class/thermal/thermal_zone0");
    std::fs::create_dir_all(&z).unwrap();
    for (f, v) in [
        ("type", "cpu-thermal"),
        ("temp", "51000"),
        ("trip_point_0_type", "critical"),
        ("trip_point_0_temp", "110000"),
        ("trip_point_1_type", "passive"),
        ("trip_point_1_temp", "95000"),
        ("trip_point_2_type", "hot"),
        ("trip_point_2_temp", "100000"),
    ] {
        std::fs::write(z.join(f), format!("{v}\n")).unwrap();
    }
    (t, policy, root)
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn db(root: &Path) -> PathBuf {
    root.join("var/lib/cgwarden/recorder.db")
}

fn integrity(path: &Path) {
    let c = Connection::open(path).expect("the database opens");
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let o = Command::new("sqlite3")
        .arg(path)
        .arg("PRAGMA integrity_check;")
        .output()
        .expect("sqlite3 (apt install sqlite3; tests/run-all.sh does)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok");
}

/// The `oom-seen` activations recorded so far (0 while the file or its
/// table is not there yet).
fn rule_rows(path: &Path) -> i64 {
    let Ok(c) = Connection::open(path) else {
        return 0;
    };
    c.query_row(
        "SELECT count(*) FROM events WHERE kind = 'rule' AND rule = 'oom-seen' AND state = 'active'",
        [],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

fn one<T: rusqlite::types::FromSql>(c: &Connection, sql: &str) -> T {
    c.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Pseudo-random moment in [lo, hi) seconds (no rand crate: the clock's
/// nanoseconds are random enough to place a kill).
fn random_secs(lo: f64, hi: f64) -> f64 {
    let n = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    lo + (hi - lo) * (n % 1000) as f64 / 1000.0
}

#[test]
fn sigkill_at_random_moments_leaves_a_sound_database_missing_at_most_one_interval() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    for round in 1..=4 {
        let mut d = Daemon::start(&policy, &root, Start::default());
        d.wait_log("flight recorder running", Duration::from_secs(10));
        if round == 2 {
            // A rule transition and its write land in `events`. The daemon
            // takes its first memory.events reading as the baseline (an OOM
            // kill before it started is no event), and that reading may come
            // after "flight recorder running": so the count keeps rising
            // until the transition is on disk. The kill may then come at any
            // moment; before, it would only test the host's speed.
            let events = root.join("sys/fs/cgroup/inference/memory.events");
            let t0 = Instant::now();
            let mut n = 0;
            while rule_rows(&db(&root)) == 0 {
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "the rule transition never reached the database; daemon log:\n{}",
                    d.log()
                );
                n += 1;
                std::fs::write(&events, format!("oom {n}\noom_kill {n}\n")).unwrap();
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        std::thread::sleep(Duration::from_secs_f64(random_secs(1.2, 4.0)));
        d.signal(libc::SIGKILL);
        let killed = now();
        let t0 = Instant::now();
        while d.alive() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(d);
        integrity(&db(&root));
        let c = Connection::open(db(&root)).unwrap();
        let runs: i64 = one(&c, "SELECT count(*) FROM runs");
        assert_eq!(runs, round, "one runs row per start");
        let last: f64 = one(&c, "SELECT max(ts) FROM samples");
        let lost = killed - last;
        assert!(
            lost <= INTERVAL + 0.5,
            "round {round}: the last sample is {lost:.2}s before the kill"
        );
        // Every interval of this run is there (none torn out).
        let run: i64 = one(&c, "SELECT max(id) FROM runs");
        let (n, first): (i64, f64) = c
            .query_row(
                "SELECT count(*), min(ts) FROM samples WHERE grp = 'host' AND run = ?1",
                [run],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(
            n as f64 >= (last - first) / INTERVAL - 0.5,
            "{n} intervals from {first} to {last}"
        );
    }
    let c = Connection::open(db(&root)).unwrap();
    let boot: String = one(&c, "SELECT boot_id FROM runs LIMIT 1");
    assert_eq!(boot, "0f1e2d3c-aaaa-bbbb-cccc-000000000001");
    let starts: i64 = one(&c, "SELECT count(*) FROM events WHERE kind = 'start'");
    assert_eq!(starts, 4);
    // Each run names the cpufreq policies it watches for throttling (what
    // the report's thermal_throttling can judge).
    let mut pol: Vec<(u32, String)> =
        std::fs::read_dir(root.join("sys/devices/system/cpu/cpufreq"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let n = e.file_name().to_string_lossy().to_string();
                        Some((n.strip_prefix("policy")?.parse().ok()?, n))
                    })
                    .collect()
            })
            .unwrap_or_default();
    pol.sort();
    let want: Vec<String> = pol.into_iter().map(|(_, n)| n).collect();
    let watched: Vec<String> = c
        .prepare("SELECT detail FROM events WHERE kind = 'cpufreq'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(watched, vec![want.join(" "); 4]);
    let rule: i64 = one(
        &c,
        "SELECT count(*) FROM events WHERE kind = 'rule' AND rule = 'oom-seen' AND state = 'active'",
    );
    let all: Vec<String> = c
        .prepare("SELECT kind || ' ' || coalesce(rule, '') || ' ' || coalesce(state, '') || ' ' || coalesce(knob, '') FROM events")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .flatten()
        .collect();
    assert!(rule >= 1, "the rule transition is recorded: {all:?}");
    let write: i64 = one(
        &c,
        "SELECT count(*) FROM events WHERE kind = 'write' AND knob = 'inference.memory.high'",
    );
    assert!(write >= 1, "the write is recorded");
    let rss: i64 = one(&c, "SELECT rss FROM processes WHERE comm = 'camd' LIMIT 1");
    assert_eq!(rss, 2048 * 1024);
    // PSS of the named and the critical process (the first
    // interval of every run reads it).
    let pss: i64 = one(&c, "SELECT max(pss) FROM processes WHERE comm = 'camd'");
    assert_eq!(pss, 1536 * 1024);
    let (rss, pss): (i64, i64) = c
        .query_row(
            "SELECT rss, max(pss) FROM processes WHERE comm = 'npu-infer'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((rss, pss), (4096 * 1024, 3000 * 1024));
    let (temp, trip): (i64, i64) = c
        .query_row("SELECT temp, trip FROM thermal LIMIT 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((temp, trip), (51000, 95000), "the lowest passive/hot trip");
    let high: i64 = one(
        &c,
        "SELECT memory_high FROM samples WHERE grp = 'inference' ORDER BY ts LIMIT 1",
    );
    assert_eq!(high, 100 << 20);
    let own: i64 = one(&c, "SELECT count(*) FROM daemon WHERE rss > 0 AND fds > 0");
    assert!(own > 0);

    // A clean stop records its last interval and `stop`.
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("flight recorder running", Duration::from_secs(10));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    integrity(&db(&root));
    let c = Connection::open(db(&root)).unwrap();
    let stop: String = one(
        &c,
        "SELECT kind FROM events ORDER BY ts DESC, rowid DESC LIMIT 1",
    );
    assert_eq!(stop, "stop");
}
