//! Reaction latency of the real daemon binary (`cgwarden run`, release).
//!
//!   cargo bench --bench daemon_latency [-- EVENTS]    fake root (default 2000 events)
//!   cargo bench --bench daemon_latency -- psi [SECS]  real-kernel PSI trigger (host cgroup2)
//!
//! Fake root: the policy has one rule
//!     when: vision.memory.events.oom_kill > 0
//!     while: [set sysctl.vm.swappiness = 90]      hold: 0
//! Each event is one in-place write(2) of `memory.events` with a higher
//! `oom_kill` count (same length, no truncation: cgroupfs raises one
//! IN_MODIFY per change, and so does this); the daemon's inotify watch wakes
//! it, the rule fires and the claim writes 90 to `proc/sys/vm/swappiness`.
//! The bench waits for that with its own inotify watch on the knob file and
//! takes the time from just before its write to the moment it read 90
//! ("end to end": includes the bench's own write, wake-up and read). The bare
//! `> 0` counts events within one `settings.tick` (20 ms here), so 20 ms
//! later the daemon wakes at that deadline, the rule clears (hold 0) and the
//! knob goes back to 30; the bench waits for that before the next event (not
//! measured: a timer, not a reaction). The loop's tick is 1 h, so every
//! other evaluation is caused by a wake-up.
//!
//! A second daemon runs the same events with CGWARDEN_LOG=debug; its log
//! timestamps (µs) split the time into write → daemon's `modified` line
//! (kernel inotify + tokio wake + channel) and `modified` → `write` line
//! (sample + evaluate + hand-off to the knob's writer lane + the write +
//! the completion back on the loop + log formatting) — the
//! daemon-internal figure. Debug logging itself costs a little, so the end-to-end figure of
//! the info-level run is the headline.
//!
//! PSI: the daemon cannot register kernel PSI triggers under `--root` (a fake
//! root has no kernel), and it must not run against this host's `/`. So the
//! real-kernel figure uses the daemon's own trigger code
//! (`kernel::psi_trigger::open` + `daemon::watch::spawn_psi_trigger`) on a
//! `cgwarden-bench-*` group below /sys/fs/cgroup/unified, with two spinning
//! child processes pinned to one CPU inside it (CPU `some` pressure ≈ 100 %),
//! and times stall onset → Wake::Psi. Without CAP_SYS_RESOURCE the window
//! must be a multiple of 2 s and the kernel evaluates such triggers only in
//! its 2 s averaging work, which dominates the figure.

use cgwarden::testing::FakeTree;
use inotify::{Inotify, WatchMask};
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "../tests/support/mod.rs"]
mod support;
use support::{Daemon, Start, BIN};

const POLICY: &str = r#"version: 1
product: latency-bench
groups:
  inference:
    memory: { high: 8G, max: 10G }
  vision:
    memory: { high: 3584M, max: 4G }
system:
  sysctl: { vm.swappiness: 30 }
settings:
  # The bare `> 0` counts events within one tick: 20 ms, so the claim
  # goes 20 ms after each event (the loop itself runs with --tick 1h).
  tick: 20ms
rules:
  - name: vision-oom
    when: vision.memory.events.oom_kill > 0
    while:
      - set sysctl.vm.swappiness = 90
    hold: 0s
"#;

fn events_text(n: u64) -> String {
    // Fixed width: every rewrite is the same length, one write(2), no truncation.
    format!("low 0\nhigh 0\nmax 0\noom {n:09}\noom_kill {n:09}\noom_group_kill 0\n")
}

/// Waits (inotify IN_MODIFY on `knob`) until it reads `want`; the instant it did.
fn wait_value(ino: &mut Inotify, knob: &Path, want: &str, limit: Duration) -> Option<Instant> {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        // Drain what is queued, then look (a change may predate the queued events).
        while let Ok(evs) = ino.read_events(&mut buf) {
            if evs.count() == 0 {
                break;
            }
        }
        if fs::read_to_string(knob)
            .map(|s| s.trim() == want)
            .unwrap_or(false)
        {
            return Some(Instant::now());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let mut pfd = libc::pollfd {
            fd: ino.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
    }
}

fn epoch_us(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_micros() as i64
}

/// "2026-11-30T11:03:08.355834Z" → µs since the epoch.
fn parse_ts(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let frac = s[19..].trim_start_matches('.').trim_end_matches('Z');
    let us = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().take(6).collect();
        digits.parse::<i64>().ok()? * 10i64.pow(6 - digits.len() as u32)
    };
    // Days from civil (Howard Hinnant).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(((days * 86400 + h * 3600 + mi * 60 + se) * 1_000_000) + us)
}

struct Pct {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

fn pct(mut v: Vec<f64>) -> Option<Pct> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    let at = |q: f64| v[((n as f64 * q) as usize).min(n - 1)];
    Some(Pct {
        n,
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        max: v[n - 1],
        mean: v.iter().sum::<f64>() / n as f64,
    })
}

fn row(label: &str, v: Vec<f64>) {
    match pct(v) {
        Some(p) => println!(
            "  {label:<52} n={:<5} p50 {:>8.1}  p90 {:>8.1}  p99 {:>8.1}  max {:>8.1}  mean {:>8.1}  (us)",
            p.n, p.p50, p.p90, p.p99, p.max, p.mean
        ),
        None => println!("  {label:<52} no samples"),
    }
}

/// One run of `events` fire (then release) cycles against a fresh daemon.
fn run_fake(events: u64, debug: bool) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    FakeTree::standard(&root).unwrap();
    let policy = dir.path().join("policy.yaml");
    fs::write(&policy, POLICY).unwrap();
    support::apply(&policy, &root);
    let ev_path = root.join("sys/fs/cgroup/vision/memory.events");
    fs::write(&ev_path, events_text(0)).unwrap();
    let knob = root.join("proc/sys/vm/swappiness");
    assert_eq!(fs::read_to_string(&knob).unwrap().trim(), "30");

    let d = Daemon::start(
        &policy,
        &root,
        Start {
            tick: "1h",
            log_level: if debug { "debug" } else { "info" },
            log: Some(dir.path().join("daemon.log")),
            ..Start::default()
        },
    );
    // Let it reach its first idle wait.
    std::thread::sleep(Duration::from_millis(200));
    let ev_file = fs::OpenOptions::new().write(true).open(&ev_path).unwrap();
    let mut ino = Inotify::init().unwrap();
    // The directory, not the file: a fake-tree write replaces the file
    // (temp file + rename), so a watch on the old inode would go quiet.
    let knob_dir = knob.parent().expect("the knob has a directory");
    ino.watches()
        .add(
            knob_dir,
            WatchMask::MODIFY | WatchMask::MOVED_TO | WatchMask::CREATE,
        )
        .unwrap();

    let mut fire = Vec::new();
    let mut sent: Vec<(i64, &'static str)> = Vec::new(); // (wall µs of the event write, kind)
    let mut missed = 0u32;
    let limit = Duration::from_secs(2);
    for n in 1..=events {
        // Fire: a new oom_kill.
        std::thread::sleep(Duration::from_millis(1)); // let the daemon go idle
        let wall = SystemTime::now();
        let t0 = Instant::now();
        ev_file.write_all_at(events_text(n).as_bytes(), 0).unwrap();
        match wait_value(&mut ino, &knob, "90", limit) {
            Some(t1) => {
                fire.push((t1 - t0).as_secs_f64() * 1e6);
                sent.push((epoch_us(wall), "fire"));
            }
            None => {
                missed += 1;
                continue;
            }
        }
        // The event leaves its 20 ms window: the daemon wakes at that
        // deadline and releases the claim. Not a reaction to a write, so
        // not measured; wait for it before the next event.
        if wait_value(&mut ino, &knob, "30", limit).is_none() {
            missed += 1;
        }
    }
    let (_, log) = d.stop();
    let level = if debug {
        "CGWARDEN_LOG=debug"
    } else {
        "CGWARDEN_LOG=info"
    };
    println!("-- daemon with {level}: {events} events, tick 1h --");
    row("end to end (event write -> knob reads 90)", fire);
    if missed > 0 {
        println!("  missed (no change within 2 s): {missed}");
    }
    let writes = log
        .lines()
        .filter(|l| l.contains(" write ") || l.ends_with(" write"))
        .count();
    println!(
        "  daemon log: {} lines, {} `write` lines",
        log.lines().count(),
        writes
    );
    if debug {
        internal(&log, &sent);
    }
}

/// Pairs each bench event write with the daemon's next `modified` debug line
/// and the `write` info line after that.
fn internal(log: &str, sent: &[(i64, &str)]) {
    let mut modified = Vec::new();
    let mut writes = Vec::new();
    for line in log.lines() {
        let Some(ts) = line.split_whitespace().next().and_then(parse_ts) else {
            continue;
        };
        if line.contains(" modified ") && line.contains("memory.events") {
            modified.push(ts);
        } else if line.contains("knob=sysctl.vm.swappiness") && !line.contains("would write") {
            writes.push(ts);
        }
    }
    let (mut to_wake, mut wake_to_write, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let (mut mi, mut wi) = (0, 0);
    for (t_ev, _) in sent {
        while mi < modified.len() && modified[mi] < *t_ev {
            mi += 1;
        }
        let Some(&m) = modified.get(mi) else { break };
        while wi < writes.len() && writes[wi] < m {
            wi += 1;
        }
        let Some(&w) = writes.get(wi) else { break };
        to_wake.push((m - t_ev) as f64);
        wake_to_write.push((w - m) as f64);
        total.push((w - t_ev) as f64);
        mi += 1;
        wi += 1;
    }
    println!("  daemon-internal, from its log timestamps (1 us resolution):");
    row("event write -> `modified` logged (inotify+wake)", to_wake);
    row(
        "`modified` -> `write` logged (evaluate+write)",
        wake_to_write,
    );
    row("event write -> `write` logged", total);
}

// ------------------------------------------------------------------ PSI

fn psi(secs: u64) {
    use cgwarden::bench::{psi_trigger, spawn_psi_trigger, Wake};
    use cgwarden::testing::Root;
    let base = Path::new("/sys/fs/cgroup/unified");
    println!(
        "-- real-kernel PSI trigger (host cgroup2 at {}) --",
        base.display()
    );
    if !base.join("cgroup.procs").exists() {
        println!("  no cgroup2 mount at {}: skipped", base.display());
        return;
    }
    let group = base.join(format!("cgwarden-bench-{}", std::process::id()));
    if let Err(e) = fs::create_dir(&group) {
        println!("  cannot create {}: {e}: skipped", group.display());
        return;
    }
    let cap = psi_trigger::has_cap_sys_resource(&Root::real());
    println!("  group {}; CAP_SYS_RESOURCE: {cap:?}", group.display());
    let window = if cap == Some(true) {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(2)
    };
    let amount = Duration::from_millis(100);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut spinners: Vec<Child> = Vec::new();
    let result = rt.block_on(async {
        let trig = psi_trigger::open(
            &Root::real(),
            &group.join("cpu.pressure"),
            "some",
            amount,
            window,
        )
        .map_err(|e| e.to_string())?;
        println!(
            "  trigger: {:?} (some {amount:?} within {window:?})",
            trig.spec()
        );
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let _task = spawn_psi_trigger(trig, 0, tx).map_err(|e| e.to_string())?;
        let mut onset_to_wake = Vec::new();
        let t_end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < t_end {
            // Quiet period: no stall in the window, drain stale wakes.
            tokio::time::sleep(window + Duration::from_millis(2500)).await;
            while rx.try_recv().is_ok() {}
            // Stall onset: two spinners on one CPU inside the group.
            let t0 = Instant::now();
            for _ in 0..2 {
                let c = Command::new("taskset")
                    .args(["-c", "0", "sh", "-c", "while :; do :; done"])
                    .stdout(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("taskset: {e}"))?;
                fs::write(group.join("cgroup.procs"), c.id().to_string())
                    .map_err(|e| e.to_string())?;
                spinners.push(c);
            }
            let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
            let dt = t0.elapsed();
            for mut c in spinners.drain(..) {
                let _ = c.kill();
                let _ = c.wait();
            }
            match got {
                Ok(Some(Wake::Psi { .. })) => onset_to_wake.push(dt.as_secs_f64() * 1e6),
                other => println!("  no trigger within 10 s ({other:?})"),
            }
        }
        Ok::<_, String>(onset_to_wake)
    });
    for mut c in spinners.drain(..) {
        let _ = c.kill();
        let _ = c.wait();
    }
    // Give the kernel a moment to see the group empty, then remove it.
    std::thread::sleep(Duration::from_millis(100));
    if let Err(e) = fs::remove_dir(&group) {
        println!("  WARNING: could not remove {}: {e}", group.display());
    }
    match result {
        Ok(v) => {
            row("stall onset -> Wake::Psi (spinners start ~ t0)", v);
            println!(
                "  (the stall reaches {amount:?} about {amount:?} after onset; the rest is the kernel's trigger evaluation)"
            );
        }
        Err(e) => println!("  PSI trigger unavailable: {e}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    println!(
        "cgwarden daemon latency benchmark ({} build of the bench; daemon {BIN}; {} CPUs)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    if args.first().map(String::as_str) == Some("psi") {
        let secs = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
        psi(secs);
        return;
    }
    let events = args.first().and_then(|s| s.parse().ok()).unwrap_or(2000);
    run_fake(events, false);
    run_fake(events, true);
    let _ = std::io::stdout().flush();
}
