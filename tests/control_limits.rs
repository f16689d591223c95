//! The control socket's per-connection limits, each alone (malformed,
//! oversized, half-sent or slow requests; src/control/server.rs):
//! a half-sent message is closed after 5 s, a reply not read within 5 s
//! closes that connection — and neither holds up the other clients.
//!
//! Two are ignored until the service is fixed: zlink 0.8's server re-creates
//! every connection's read future on each loop turn, so the 5 s (and 60 s)
//! read timers restart whenever any connection does anything; and it writes
//! a stream's events from its one task, so a subscriber that never reads
//! stalls every call for the 5 s write limit.

use cgwarden::testing::FakeTree;
use serde_json::json;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod support;
use support::{Conn, Daemon, Start};

fn start(dir: &Path) -> (FakeTree, Daemon, PathBuf) {
    let (t, policy, root) = support::board(
        dir,
        "version: 1\nproduct: limits-test\ngroups:\n  vision:\n    cpu: { weight: 200 }\n",
    );
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    let sock = support::socket(&root);
    (t, d, sock)
}

/// Opens `n` connections that each send half a message and stop; returns
/// them and when they were opened.
fn half_sent(sock: &Path, n: usize) -> (Vec<UnixStream>, Instant) {
    let t0 = Instant::now();
    let v = (0..n)
        .map(|_| {
            let mut s = UnixStream::connect(sock).unwrap();
            s.write_all(br#"{"method":"io.cgwarden.Daemon.Status""#)
                .unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    (v, t0)
}

/// Whether the daemon closed `s` (EOF or reset) without waiting.
fn is_closed(s: &UnixStream) -> bool {
    let mut b = [0u8; 64];
    match (&*s).read(&mut b) {
        Ok(0) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(_) => true,
        Ok(_) => panic!("a reply to half a message"),
    }
}

#[test]
fn a_half_sent_message_is_closed_after_5_s() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, d, sock) = start(dir.path());
    let (conns, t0) = half_sent(&sock, 1);
    d.wait_for(
        "the half-sent connection closed",
        Duration::from_secs(7),
        || is_closed(&conns[0]),
    );
    let after = t0.elapsed();
    println!("a half-sent message: closed after {after:?}");
    assert!(after >= Duration::from_millis(4900), "{after:?}");
    let r = support::call(&sock, "io.cgwarden.Daemon.ListClaims", json!({}));
    assert_eq!(r["parameters"]["claims"], json!([]), "{r}");
}

/// Today: 10 half-sent connections close one per 5 s with no other
/// traffic, and never while another client calls every 200 ms.
#[test]
fn half_sent_messages_are_all_closed_within_7_s_while_others_talk() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, d, sock) = start(dir.path());
    let (conns, t0) = half_sent(&sock, 10);
    let mut other = Conn::connect(&sock).unwrap();
    while t0.elapsed() < Duration::from_secs(7) {
        other.call("io.cgwarden.Daemon.ListClaims", json!({}));
        std::thread::sleep(Duration::from_millis(200));
    }
    let open = conns.iter().filter(|s| !is_closed(s)).count();
    assert_eq!(
        open,
        0,
        "{open} of 10 half-sent connections still open after 7 s\n{}",
        d.log()
    );
}

/// Today: the first call after the stuck subscriber's socket fills waits
/// the whole 5 s write limit.
#[test]
#[ignore = "zlink writes stream replies from its one task: a subscriber that never reads stalls every call for up to the 1 s write limit (known limitation, docs/control.md)"]
fn a_subscriber_that_never_reads_stalls_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, d, sock) = start(dir.path());
    let mut stuck = UnixStream::connect(&sock).unwrap();
    stuck
        .write_all(b"{\"method\":\"io.cgwarden.Daemon.Subscribe\",\"more\":true}\0")
        .unwrap();
    let mut pump = Conn::connect(&sock).unwrap();
    let mut probe = Conn::connect(&sock).unwrap();
    let reason = "r".repeat(256);
    let mut worst = Duration::ZERO;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(8) {
        let b = pump.call(
            "io.cgwarden.Daemon.Boost",
            json!({"knobs": {"vision.cpu.weight": "300"}, "duration": "1m", "reason": reason}),
        );
        let h = &b["parameters"]["handle"];
        pump.call("io.cgwarden.Daemon.Release", json!({"handle": h}));
        let t1 = Instant::now();
        probe.call("io.cgwarden.Daemon.ListClaims", json!({}));
        worst = worst.max(t1.elapsed());
    }
    println!("the slowest call beside a stuck subscriber: {worst:?}");
    assert!(
        d.log().contains("was not read within"),
        "the stuck subscriber was never dropped:\n{}",
        d.log()
    );
    assert!(worst < Duration::from_secs(1), "a call waited {worst:?}");
}
