//! The control socket under abuse, on a fake tree: 10,000
//! malformed requests over many connections (random bytes, truncated JSON,
//! no NUL, messages over 64 KiB up to several MiB, deep nesting, wrong
//! types, unknown methods, half-sent messages, slow senders, a subscriber
//! that never reads, more than 64 connections at once, clients that
//! vanish) while 100 clients boost and release knobs and a rule reacts to
//! `memory.events`. The daemon must answer every well-formed call, leave no
//! claim behind, keep reacting, stay within a memory bound and not panic.
//!
//! Timings are printed, and asserted only leniently (a 2-CPU CI machine
//! shared with other jobs). Run with `--nocapture` to see the summary line.

use cgwarden::testing::FakeTree;
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;
use support::{read, Conn, Daemon, Start};

const WEIGHT: &str = "sys/fs/cgroup/vision/cpu.weight";
const MIN: &str = "sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq";
const HIGH: &str = "sys/fs/cgroup/inference/memory.high";
/// inference.memory.high: the baseline and the rule's value.
const HIGH_BASE: &str = "104857600";
const HIGH_RULE: &str = "209715200";

const MALFORMED: usize = 10_000;
const CLIENTS: usize = 100;
const ROUNDS: usize = 3;
const HALF_SENT: usize = 24;

fn setup(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    // tick 200ms: the bare `> 0` counts oom kills within one tick, so the
    // rule clears 200 ms after the last one and can be measured again.
    let (t, policy, root) = support::board(
        dir,
        r#"version: 1
product: stress-test
settings: { tick: 200ms }
groups:
  inference:
    memory: { high: 100M, max: 1G }
  vision:
    cpu: { weight: 200 }
system:
  cpufreq:
    policy4: { min: 1GHz }
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set inference.memory.high = 200M
"#,
    );
    support::apply(&policy, &root);
    events(&root, 0);
    (t, policy, root)
}

fn events(root: &Path, oom_kill: u64) {
    support::memory_events(root, "inference", oom_kill);
}

/// A tiny xorshift: reproducible bytes without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A client that retries while the daemon turns it away (connection limit
/// reached): connects until a call on a fresh connection is answered.
fn connect_answered(sock: &Path, deadline: Instant) -> (Conn, Value) {
    loop {
        if let Ok(mut c) = Conn::connect(sock) {
            if let Ok(v) = c.try_call("io.cgwarden.Daemon.ListClaims", json!({})) {
                return (c, v);
            }
        }
        assert!(
            Instant::now() < deadline,
            "a well-formed client was turned away until the deadline"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The rule's reaction: an oom_kill counted in the fake tree, then the time
/// until the rule's knob write shows; then waits for it to clear.
fn reaction(root: &Path, counter: &mut u64) -> Duration {
    *counter += 1;
    let t0 = Instant::now();
    events(root, *counter);
    while read(root, HIGH) != HIGH_RULE {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "the rule did not react to oom_kill {counter} within 2 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let dt = t0.elapsed();
    while read(root, HIGH) != HIGH_BASE {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the rule did not clear after oom_kill {counter}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    dt
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// How a malformed request's connection ended.
#[derive(Default, Debug)]
struct Outcomes {
    /// Closed by the daemon without a reply.
    closed: usize,
    /// An error reply (then we closed).
    error: usize,
    /// A reply that is not an error (a well-formed part before the bad one).
    reply: usize,
    /// Nothing within 15 s: the daemon neither answered nor closed.
    hung: usize,
}

/// What a malformed request's client does after sending its bytes.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// Reads until a reply or the daemon's close.
    Read,
    /// Half-closes, then reads (a message without its NUL ends at EOF).
    HalfClose,
    /// Closes at once (connects and vanishes).
    Vanish,
}

/// The `i`th malformed request: its bytes and what the client does after.
fn malformed(i: usize, rng: &mut Rng) -> (Vec<u8>, Then) {
    let valid = br#"{"method":"io.cgwarden.Daemon.Boost","parameters":{"knobs":{"vision.cpu.weight":"300"},"duration":"1m"}}"#;
    let mut v: Vec<u8>;
    let mut then = Then::Read;
    match i % 12 {
        // Random bytes.
        0 => {
            let n = 1 + rng.below(512);
            v = (0..n).map(|_| (rng.next() as u8).max(1)).collect();
            v.push(0);
        }
        // Truncated JSON.
        1 => {
            v = valid[..1 + rng.below(valid.len() - 2)].to_vec();
            v.push(0);
        }
        // JSON without its NUL, then EOF.
        2 => {
            v = valid.to_vec();
            then = Then::HalfClose;
        }
        // Over 64 KiB; one in 40 is 4 MiB.
        3 => {
            let n = if i % 480 == 3 { 4 << 20 } else { 70 << 10 };
            v = br#"{"method":"io.cgwarden.Daemon.Status","parameters":{"x":""#.to_vec();
            v.resize(n, b'x');
            v.extend_from_slice(b"\"}}\0");
        }
        // Deeply nested JSON, at the top and inside a parameter.
        4 => {
            let depth = 1000 + rng.below(30_000);
            if i % 24 == 4 {
                v = vec![b'['; depth];
            } else {
                v = br#"{"method":"io.cgwarden.Daemon.Boost","parameters":{"knobs":"#.to_vec();
                v.extend_from_slice("{\"a\":".repeat(depth / 5).as_bytes());
            }
            v.push(0);
        }
        // Wrong types and shapes.
        5 => {
            let cases: [&[u8]; 16] = [
                br#"{"method":5}"#,
                br#"{"method":null,"parameters":{}}"#,
                br#"{"parameters":{}}"#,
                br#"[]"#,
                br#"null"#,
                br#""io.cgwarden.Daemon.Status""#,
                br#"{"method":"io.cgwarden.Daemon.Release","parameters":{"handle":"x"}}"#,
                br#"{"method":"io.cgwarden.Daemon.Release","parameters":{"handle":1e400}}"#,
                br#"{"method":"io.cgwarden.Daemon.Release","parameters":{"handle":123456789012345678901234567890}}"#,
                br#"{"method":"io.cgwarden.Daemon.Release","parameters":{}}"#,
                br#"{"method":"io.cgwarden.Daemon.Boost","parameters":{"knobs":["vision.cpu.weight"]}}"#,
                br#"{"method":"io.cgwarden.Daemon.Boost","parameters":{"knobs":{"vision.cpu.weight":300}}}"#,
                br#"{"method":"io.cgwarden.Daemon.Extend","parameters":{"handle":1.5,"duration":"1m"}}"#,
                br#"{"method":"io.cgwarden.Daemon.Status","parameters":[]}"#,
                br#"{"method":"io.cgwarden.Daemon.Subscribe","more":"yes"}"#,
                b"{\"method\":\"io.cgwarden.Daemon.\xff\xfeStatus\"}",
            ];
            v = cases[(i / 12) % cases.len()].to_vec();
            v.push(0);
        }
        // Unknown methods and interfaces.
        6 => {
            let long = format!("io.cgwarden.Daemon.{}", "N".repeat(60_000));
            let names = [
                "io.cgwarden.Daemon.Nope",
                "io.cgwarden.Daemon",
                "org.varlink.service.Nope",
                "",
                ".",
                "io.cgwarden.Daemon.status",
                long.as_str(),
            ];
            let m = names[(i / 12) % names.len()];
            v = serde_json::to_vec(&json!({"method": m, "parameters": {}})).unwrap();
            v.push(0);
        }
        // Connect and vanish: nothing, or half a message.
        7 => {
            v = if i % 24 == 7 {
                Vec::new()
            } else {
                valid[..20].to_vec()
            };
            then = Then::Vanish;
        }
        // A well-formed call, then garbage on the same connection.
        8 => {
            v = br#"{"method":"io.cgwarden.Daemon.ListClaims"}"#.to_vec();
            v.push(0);
            v.extend_from_slice(b"}{garbage\0");
        }
        // A valid request with a few bytes flipped.
        9 => {
            v = valid.to_vec();
            for _ in 0..3 {
                let p = rng.below(v.len());
                v[p] = (rng.next() as u8).max(1);
            }
            v.push(0);
        }
        // A NUL inside the message: two broken halves.
        10 => {
            v = br#"{"method":"io.cgwarden.Da"#.to_vec();
            v.push(0);
            v.extend_from_slice(br#"emon.Status"}"#);
            v.push(0);
        }
        // Well-typed but invalid: error replies (the connection stays).
        _ => {
            let cases = [
                json!({"method": "io.cgwarden.Daemon.Release", "parameters": {"handle": -5}}),
                json!({"method": "io.cgwarden.Daemon.Boost", "parameters": {"knobs": {"/etc/shadow": "1"}}}),
                json!({"method": "io.cgwarden.Daemon.Boost", "parameters": {"knobs": {}}}),
                json!({"method": "io.cgwarden.Daemon.Boost", "parameters": {"knobs": {"vision.cpu.weight": "300"}, "duration": "-1s"}}),
                json!({"method": "io.cgwarden.Daemon.Extend", "parameters": {"handle": 0, "duration": "1m"}}),
                json!({"method": "io.cgwarden.Daemon.Boost", "parameters": {"knobs": {"vision.cpu.weight": "300"}, "reason": "x".repeat(5000)}}),
            ];
            v = serde_json::to_vec(&cases[(i / 12) % cases.len()]).unwrap();
            v.push(0);
        }
    }
    (v, then)
}

/// Sends one malformed request on a fresh connection; how it ended.
fn send_malformed(sock: &Path, bytes: &[u8], then: Then, out: &mut Outcomes) {
    let Ok(mut s) = UnixStream::connect(sock) else {
        out.closed += 1; // the backlog was full: turned away
        return;
    };
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(15))).unwrap();
    // The daemon may close while we write (EPIPE, ECONNRESET): fine.
    let _ = s.write_all(bytes);
    if then == Then::Vanish {
        drop(s);
        out.closed += 1;
        return;
    }
    if then == Then::HalfClose {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                out.hung += 1;
                return;
            }
            Ok(0) | Err(_) => {
                out.closed += 1;
                return;
            }
            Ok(n) => {
                buf.extend_from_slice(&b[..n]);
                if let Some(p) = buf.iter().position(|c| *c == 0) {
                    let v: Value = serde_json::from_slice(&buf[..p]).expect("a reply is JSON");
                    if v.get("error").is_some() {
                        out.error += 1;
                    } else {
                        out.reply += 1;
                    }
                    return;
                }
            }
        }
    }
}

#[test]
fn the_control_socket_survives_abuse_and_keeps_serving() {
    let t_start = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let mut d = Daemon::start(
        &policy,
        &root,
        Start {
            log_level: "warn,cgwarden=info",
            ..Start::default()
        },
    );
    d.wait_log("control socket listening", Duration::from_secs(10));
    let sock = support::socket(&root);
    let pid = d.pid();
    let is_root = unsafe { libc::geteuid() } == 0;

    // ---- idle: the rule's reaction, the daemon's RSS ----
    // The daemon's first look at a counter is its baseline (events from
    // before it started never fire a rule): a first kill written before
    // that look is not seen. Warm up until one is.
    let mut counter = 0u64;
    let t0 = Instant::now();
    loop {
        counter += 1;
        events(&root, counter);
        let t1 = Instant::now();
        while read(&root, HIGH) != HIGH_RULE && t1.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(5));
        }
        if read(&root, HIGH) == HIGH_RULE {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the rule never reacted to oom_kill:\n{}",
            d.log()
        );
    }
    d.wait_for("the rule cleared", Duration::from_secs(5), || {
        read(&root, HIGH) == HIGH_BASE
    });
    let mut idle: Vec<Duration> = (0..8).map(|_| reaction(&root, &mut counter)).collect();
    let rss_before = rss_kib(pid);

    // ---- stress ----
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut threads = Vec::new();

    // The reaction, measured throughout.
    let under = Arc::new(Mutex::new(Vec::new()));
    let reacting = {
        let (root, stop, under) = (root.clone(), stop.clone(), under.clone());
        std::thread::spawn(move || {
            let mut counter = counter;
            while !stop.load(Ordering::Relaxed) {
                let dt = reaction(&root, &mut counter);
                under.lock().unwrap().push(dt);
            }
        })
    };

    // Half-sent messages: all closed after ~5 s (the partial limit).
    let half_sent = {
        let sock = sock.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let conns: Vec<UnixStream> = (0..HALF_SENT)
                .filter_map(|_| {
                    let mut s = UnixStream::connect(&sock).ok()?;
                    s.write_all(br#"{"method":"io.cgwarden.Daemon.Status""#)
                        .ok()?;
                    Some(s)
                })
                .collect();
            let mut closed_after = Vec::new();
            let mut still_open = 0;
            for mut s in conns {
                let left = Duration::from_secs(9).saturating_sub(t0.elapsed());
                s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
                    .unwrap();
                let mut b = [0u8; 64];
                match s.read(&mut b) {
                    Ok(0) => closed_after.push(t0.elapsed()),
                    Err(e) if e.kind() != ErrorKind::WouldBlock => closed_after.push(t0.elapsed()),
                    _ => still_open += 1,
                }
            }
            (closed_after, still_open)
        })
    };

    // Very slow senders: one byte per 100 ms, answered at the end.
    for _ in 0..3 {
        let sock = sock.clone();
        threads.push(std::thread::spawn(move || {
            let msg = b"{\"method\":\"io.cgwarden.Daemon.ListClaims\"}\0";
            let deadline = Instant::now() + Duration::from_secs(30);
            // Turned away while the slots are full: try again.
            'again: loop {
                assert!(Instant::now() < deadline, "a slow sender never got through");
                let Ok(mut s) = UnixStream::connect(&sock) else {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                for b in msg {
                    if s.write_all(&[*b]).is_err() {
                        std::thread::sleep(Duration::from_millis(50));
                        continue 'again;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut c = Conn::on(s);
                match c.next() {
                    Ok(v) => {
                        assert!(v["parameters"]["claims"].is_array(), "{v}");
                        return;
                    }
                    Err(_) => continue 'again,
                }
            }
        }));
    }

    // Subscribers: one that never reads (small buffer), one that reads.
    let stuck = {
        let s = UnixStream::connect(&sock).unwrap();
        let small: libc::c_int = 4096;
        // SAFETY: setsockopt on our own socket with a c_int.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &small as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        (&s).write_all(b"{\"method\":\"io.cgwarden.Daemon.Subscribe\",\"more\":true}\0")
            .unwrap();
        s
    };
    let follower_events = Arc::new(AtomicUsize::new(0));
    let follower = {
        let (sock, stop, n) = (sock.clone(), stop.clone(), follower_events.clone());
        std::thread::spawn(move || {
            // Admitted first (a call answered), then subscribed: a plain
            // connect that lands while the crowd below holds every slot is
            // turned away, which is the limit working, not a dropped reader
            // (it failed so on a loaded host, with 0 events read).
            let (mut c, _) = connect_answered(&sock, deadline);
            c.s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut msg = b"{\"method\":\"io.cgwarden.Daemon.Subscribe\",\"more\":true}".to_vec();
            msg.push(0);
            c.s.write_all(&msg).unwrap();
            let mut lagged = 0;
            let mut dropped = None;
            while !stop.load(Ordering::Relaxed) {
                match c.next() {
                    Ok(v) => {
                        if v["parameters"]["event"]["kind"] == "lagged" {
                            lagged += 1;
                        }
                        n.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        dropped = Some(format!("{e} at {:?}", Instant::now()));
                        break;
                    }
                }
            }
            (lagged, dropped)
        })
    };

    // An event pump: boosts with long reasons, so the stuck subscriber's
    // socket fills up for sure.
    if is_root {
        let sock = sock.clone();
        threads.push(std::thread::spawn(move || {
            let (mut c, _) = connect_answered(&sock, deadline);
            let reason = "r".repeat(256);
            for i in 0..1500 {
                let b = c
                    .try_call(
                        "io.cgwarden.Daemon.Boost",
                        json!({"knobs": {"vision.cpu.weight": format!("{}", 1000 + i)},
                               "duration": "1m", "reason": reason, "tied_to_connection": true}),
                    )
                    .expect("the pump's boost answered");
                let h = b["parameters"]["handle"].as_i64().expect("a handle");
                c.try_call("io.cgwarden.Daemon.Release", json!({"handle": h}))
                    .expect("the pump's release answered");
            }
        }));
    }

    // More than 64 connections at once: the extra ones are closed; the
    // others are answered.
    let crowd = {
        let sock = sock.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            let conns: Vec<UnixStream> = (0..100)
                .filter_map(|_| UnixStream::connect(&sock).ok())
                .collect();
            let mut held = Vec::new();
            let (mut answered, mut turned_away, mut hung) = (0, 0, 0);
            for s in conns {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut c = Conn::on(s);
                match c.try_call("io.cgwarden.Daemon.ListClaims", json!({})) {
                    Ok(_) => answered += 1,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => hung += 1,
                    Err(_) => turned_away += 1,
                }
                // Held until all were tried.
                held.push(c);
            }
            (answered, turned_away, hung)
        })
    };

    // A probe: how long a plain call waits, all along.
    let probe = {
        let (sock, stop) = (sock.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut c, _) = connect_answered(&sock, deadline);
            let mut worst = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                if c.try_call("io.cgwarden.Daemon.ListClaims", json!({}))
                    .is_err()
                {
                    c = connect_answered(&sock, deadline).0;
                }
                worst = worst.max(t0.elapsed());
                std::thread::sleep(Duration::from_millis(50));
            }
            worst
        })
    };

    // 10,000 malformed requests from 4 threads.
    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    for w in 0..4 {
        let (sock, outcomes) = (sock.clone(), outcomes.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1));
            let mut out = Outcomes::default();
            for i in (w..MALFORMED).step_by(4) {
                let (bytes, then) = malformed(i, &mut rng);
                send_malformed(&sock, &bytes, then, &mut out);
            }
            let mut all = outcomes.lock().unwrap();
            all.closed += out.closed;
            all.error += out.error;
            all.reply += out.reply;
            all.hung += out.hung;
        }));
    }

    // 100 clients, each boosting and releasing a knob ROUNDS times.
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let boosted = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (sock, latencies, boosted) = (sock.clone(), latencies.clone(), boosted.clone());
            std::thread::spawn(move || {
                for r in 0..ROUNDS {
                    let (knob, value) = if i % 2 == 0 {
                        ("vision.cpu.weight", format!("{}", 300 + i * 10 + r))
                    } else {
                        ("cpufreq.policy4.min", format!("{}MHz", 1100 + i * 5 + r))
                    };
                    let (mut c, _) = connect_answered(&sock, deadline);
                    let t0 = Instant::now();
                    // Tied to the connection: a reply lost with a closed
                    // connection cannot leave the boost behind.
                    let b = c.try_call(
                        "io.cgwarden.Daemon.Boost",
                        json!({"knobs": {knob: value}, "duration": "1m",
                               "reason": format!("client {i} round {r}"),
                               "tied_to_connection": true}),
                    );
                    let b = b.unwrap_or_else(|e| panic!("client {i}: Boost not answered: {e}"));
                    let t1 = t0.elapsed();
                    if !is_root {
                        assert_eq!(b["error"], "io.cgwarden.Daemon.Refused", "{b}");
                        continue;
                    }
                    let h = b["parameters"]["handle"]
                        .as_i64()
                        .unwrap_or_else(|| panic!("client {i}: {b}"));
                    assert_eq!(b["parameters"]["applied"][0]["knob"], knob, "{b}");
                    let t0 = Instant::now();
                    let r = c
                        .try_call("io.cgwarden.Daemon.Release", json!({"handle": h}))
                        .unwrap_or_else(|e| panic!("client {i}: Release not answered: {e}"));
                    assert!(r.get("error").is_none(), "client {i}: {r}");
                    let t2 = t0.elapsed();
                    latencies.lock().unwrap().extend([t1, t2]);
                    boosted.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    for c in clients {
        if c.join().is_err() {
            panic!("a boosting client failed; the daemon's log:\n{}", d.log());
        }
    }
    for t in threads {
        t.join().expect("a stress thread failed");
    }
    let (closed_after, half_sent_open) = half_sent.join().expect("the half-sent check failed");
    let (crowd_answered, crowd_closed, crowd_hung) = crowd.join().unwrap();
    // The reaction keeps being measured until the stress is over.
    stop.store(true, Ordering::Relaxed);
    reacting
        .join()
        .expect("the rule stopped reacting under stress");
    let (lagged, follower_dropped) = follower.join().expect("the reading subscriber failed");
    let probe_worst = probe.join().expect("the probe failed");
    let stress_secs = t_start.elapsed().as_secs_f64();

    // ---- after ----
    // The stuck subscriber: dropped by the daemon (EOF after what it sent).
    let (stuck_dropped, stuck_bytes) = {
        let mut s = stuck;
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = vec![0u8; 1 << 16];
        let mut total = 0usize;
        loop {
            match s.read(&mut b) {
                Ok(0) => break (true, total),
                Ok(n) => total += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break (false, total),
                Err(_) => break (true, total),
            }
        }
    };

    let (mut c, claims) = connect_answered(&sock, Instant::now() + Duration::from_secs(10));
    assert_eq!(
        claims["parameters"]["claims"],
        json!([]),
        "claims left behind: {claims}"
    );
    d.wait_for("the baselines back", Duration::from_secs(5), || {
        read(&root, WEIGHT) == "200"
            && read(&root, MIN) == "1000000"
            && read(&root, HIGH) == HIGH_BASE
    });
    let status = c
        .try_call("io.cgwarden.Daemon.Status", json!({}))
        .expect("Status answered after the stress");
    assert_eq!(status["parameters"]["product"], "stress-test", "{status}");
    let rss_after = rss_kib(pid);
    assert!(d.alive(), "the daemon died:\n{}", d.log());
    drop(c);

    let out = outcomes.lock().unwrap();
    let mut lat = latencies.lock().unwrap().clone();
    let mut under = under.lock().unwrap().clone();
    let mut closed_after = closed_after;
    println!("malformed outcomes: {out:?}");
    println!(
        "half-sent: {} connections closed after {:.1}..{:.1} s, {half_sent_open} still open after 9 s",
        closed_after.len(),
        percentile(&mut closed_after, 0.0).as_secs_f64(),
        percentile(&mut closed_after, 1.0).as_secs_f64()
    );
    println!(
        "crowd: 100 connections at once: {crowd_answered} answered, {crowd_closed} turned away, {crowd_hung} neither"
    );
    println!(
        "probe: the slowest ListClaims took {:.1} ms",
        ms(probe_worst)
    );
    println!(
        "subscribers: the reader got {} events ({lagged} lagged notices, dropped: {follower_dropped:?}); the stuck one dropped: {stuck_dropped} (after {stuck_bytes} bytes)",
        follower_events.load(Ordering::Relaxed)
    );
    println!(
        "boost/release calls: {} answered, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        lat.len(),
        ms(percentile(&mut lat, 0.5)),
        ms(percentile(&mut lat, 0.99)),
        ms(percentile(&mut lat, 1.0)),
    );
    println!(
        "control stress: {MALFORMED} malformed requests, {CLIENTS} clients x {ROUNDS} boost/release, 0 claims left, \
         RSS {:.1} -> {:.1} MiB, reaction p50 {:.1} ms / max {:.1} ms (idle, n={}) vs p50 {:.1} ms / max {:.1} ms (under stress, n={}), {stress_secs:.0} s",
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        ms(percentile(&mut idle, 0.5)),
        ms(percentile(&mut idle, 1.0)),
        idle.len(),
        ms(percentile(&mut under, 0.5)),
        ms(percentile(&mut under, 1.0)),
        under.len(),
    );

    let log = d.log();
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for l in log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
    {
        // The message without its time and connection numbers.
        let m: String = l
            .split_once(' ')
            .map_or(l, |(_, m)| m)
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .take(150)
            .collect();
        *kinds.entry(m).or_default() += 1;
    }
    for (m, n) in &kinds {
        println!("daemon log: {n} x {m}");
    }
    assert_eq!(
        out.hung, 0,
        "connections neither answered nor closed: {out:?}"
    );
    assert_eq!(out.closed + out.error + out.reply, MALFORMED, "{out:?}");
    assert!(!under.is_empty(), "no reaction measured under stress");
    if is_root {
        assert_eq!(boosted.load(Ordering::Relaxed), CLIENTS * ROUNDS);
    }
    // Half-sent messages are not asserted closed here: under traffic they
    // stay open (see tests/control_limits.rs); the numbers are printed.
    // More than 64 at once: the extra ones were turned away, every one
    // let in was answered. (All may be turned away: the boosting clients
    // and the half-sent connections may hold every slot at that moment.)
    assert!(
        crowd_closed >= 100 - 64 && crowd_hung == 0,
        "crowd: {crowd_answered} answered, {crowd_closed} turned away, {crowd_hung} hung"
    );
    assert!(
        follower_dropped.is_none(),
        "the reading subscriber was dropped: {follower_dropped:?}"
    );
    // A stuck subscriber stalls the service up to the 5 s write limit
    // (tests/control_limits.rs); lenient here: every call is answered.
    assert!(probe_worst < Duration::from_secs(15), "{probe_worst:?}");
    assert!(
        stuck_dropped,
        "a subscriber that never reads was not dropped"
    );
    // The bound: what the daemon keeps per connection is bounded (64
    // connections x a 64 KiB message, 1024 queued events, 50 actions), a
    // few MiB; allocator slack after 10,000 connections and MiB-sized
    // writes adds some (observed: under 1 MiB). 16 MiB of growth is well
    // past that, and what a leak of 2 KiB per malformed request or 50 KiB
    // per boost would exceed.
    assert!(
        rss_after < rss_before + 16 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
