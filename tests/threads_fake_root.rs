//! The daemon's threads, through the real binary on a fake root running
//! policies/iq9100-vision.yaml (control socket, KPI socket, metrics socket
//! and textfile, flight recorder, policy watch): a thread exists only where
//! a priority or a blocking call needs one. At idle that is the event loop,
//! `cgw-exec`, `cgw-recorder` (it writes the textfile too) and
//! `cgw-services` (control, metrics, KPI socket and policy watch as tasks of
//! one runtime), and serving every one of those services adds none. The
//! fake root leaves the daemon's own `/proc/PID/task` real: that is what is
//! counted.

mod support;

use std::io::{Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::Path;
use std::time::Duration;
use support::{processes_board, Daemon, Start};

/// The iq9100 policy's thread bound with everything it serves on.
const MAX_THREADS: usize = 4;

fn threads(pid: u32) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/task: {e}"))
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect();
    out.sort();
    out
}

/// `GET /metrics` over the metrics unix socket, by hand: the status line.
fn scrape(sock: &Path) -> String {
    let mut s =
        UnixStream::connect(sock).unwrap_or_else(|e| panic!("connect {}: {e}", sock.display()));
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn iq9100_runs_on_four_threads_idle_and_serving() {
    let (tmp, _t) = processes_board();
    let root = tmp.path();
    // A copy beside the tree: the policy watch sees it edited below.
    let etc = tempfile::tempdir().unwrap();
    let policy = etc.path().join("iq9100-vision.yaml");
    std::fs::copy(support::repo("policies/iq9100-vision.yaml"), &policy).unwrap();
    let d = Daemon::start(
        &policy,
        root,
        Start {
            tick: "1s",
            ..Start::default()
        },
    );
    for said in [
        "control socket listening",
        "KPI socket listening",
        "metrics socket listening",
        "flight recorder running",
    ] {
        d.wait_log(said, Duration::from_secs(20));
    }
    let log = d.log();
    assert!(!log.contains("policy file not watched"), "{log}");
    // Idle: a few ticks after start.
    std::thread::sleep(Duration::from_secs(3));
    let idle = threads(d.pid());
    assert!(
        idle.len() <= MAX_THREADS,
        "{} threads at idle, at most {MAX_THREADS}: {idle:?}",
        idle.len()
    );
    for name in ["cgw-exec", "cgw-recorder", "cgw-services"] {
        assert!(idle.iter().any(|t| t == name), "no {name}: {idle:?}");
    }

    // Every service answers from the one services thread.
    let state = root.join("run/cgwarden");
    let status = support::call(
        &support::socket(root),
        "io.cgwarden.Daemon.Status",
        serde_json::json!({}),
    );
    assert!(status.get("parameters").is_some(), "{status}");
    let kpi = UnixDatagram::unbound().unwrap();
    kpi.send_to(b"threads_test:5|ms\n", state.join("kpi.sock"))
        .unwrap();
    let text = scrape(&root.join("run/cgwarden/metrics.sock"));
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    d.wait_for(
        "the KPI sample in a scrape",
        Duration::from_secs(10),
        || {
            scrape(&root.join("run/cgwarden/metrics.sock"))
                .contains("cgwarden_kpi_count{name=\"threads_test\"")
        },
    );
    // The textfile, written by the recorder's thread (the one that waits
    // for the disk).
    let tf = root.join("var/lib/node_exporter/textfile_collector/cgwarden.prom");
    d.wait_for("the metrics textfile", Duration::from_secs(10), || {
        std::fs::read_to_string(&tf).is_ok_and(|t| t.contains("cgwarden_"))
    });
    // The policy watch: an edit is seen (debounced) and reloaded.
    let mut text = std::fs::read_to_string(&policy).unwrap();
    text.push_str("# edited\n");
    std::fs::write(&policy, text).unwrap();
    d.wait_log("policy file changed: reloading", Duration::from_secs(10));
    let serving = threads(d.pid());
    assert!(
        serving.len() <= MAX_THREADS,
        "{} threads while serving, at most {MAX_THREADS}: {serving:?}",
        serving.len()
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}
