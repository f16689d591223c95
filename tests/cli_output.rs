//! The command line says what it does, on a fake board with the real
//! binary: `boost --cap` shows units and counts agree with their nouns;
//! float fields in the log have three decimals; `--json` is the one flag
//! for machine-readable output; `events` ends with exit 0 when the daemon
//! stops cleanly (4 when it is killed) and the daemon's sockets go at its
//! stop and at `reset`; hooks under `--root` are announced; `CGWARDEN_LOG`
//! takes directives per module.

mod support;
use std::time::Duration;
use support::{Board, Daemon};

/// One managed knob (so `verify` counts `1 knob`), a recorder, a hook.
const POLICY: &str = r#"version: 1
product: cli-test
settings:
  recorder:
    dir: /var/lib/cgwarden
    interval: 1s
groups:
  vision:
    memory: { high: 4G }
hooks:
  alert:
    exec: ["/bin/true", "{rule}"]
rules:
  - name: vision-oom
    when: vision.memory.events.oom_kill > 0
    then: ["hook alert"]
"#;

/// `cgwarden ARGS` of the binary under test ([`support::bin`]).
fn cli(args: &[&str]) -> support::Run {
    support::run(support::cmd().args(args))
}

// ---- units, counts, floats ----

const HIGH: &str = "sys/fs/cgroup/vision/memory.high";

/// `boost --cap vision.memory.high=3G` printed `3221225472` where a boost
/// prints `5G`; `status` listed the cap raw too.
#[test]
fn boost_cap_shows_units_as_a_boost_does() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    let run = |args: &[&str]| support::run(&mut b.client(args));
    let r = run(&["boost", "vision.memory.high=5G", "--for", "1h"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("vision.memory.high = 5G until"), "{r}");
    let r = run(&["boost", "--cap", "vision.memory.high=3G", "--for", "1h"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains("cap vision.memory.high = 3G until"),
        "a cap in units, as a boost: {r}"
    );
    d.wait_for("the cap's write", Duration::from_secs(10), || {
        support::read(&b.root, HIGH) == "3221225472"
    });
    let st = run(&["status"]);
    assert!(st.stdout.contains("cap vision.memory.high"), "{st}");
    assert!(!st.stdout.contains("3221225472"), "{st}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

/// Counts said `1 changes`, `1 knobs`, `1 samples`: a count of one takes
/// the singular.
#[test]
fn a_count_of_one_takes_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    let run = |args: &[&str]| support::run(&mut b.client(args));
    // The policy's only knob.
    let v = run(&["verify"]);
    assert!(v.stdout.ends_with("\n1 knob, 0 drifted\n"), "{v}");
    let r = run(&["kpi", "fps", "29.8"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("kpi fps: 1 sample recorded"), "{r}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    // One file moved: `plan` and `apply` count `1 change`.
    std::fs::write(b.root.join(HIGH), "max\n").unwrap();
    let (policy, root) = (b.policy.to_str().unwrap(), b.root.to_str().unwrap());
    for cmd in ["plan", "apply"] {
        let r = cli(&[cmd, policy, "--root", root]);
        assert_eq!(r.code, 0, "{r}");
        assert!(r.stdout.ends_with("\n1 change\n"), "{r}");
    }
}

/// `elapsed_ms=0.6520980000000001` in the log: every float field has three
/// decimals.
#[test]
fn log_floats_have_three_decimals() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    for v in ["5G", "6G", "7G"] {
        let knob = format!("vision.memory.high={v}");
        let r = support::run(&mut b.client(&["boost", &knob, "--for", "1h"]));
        assert_eq!(r.code, 0, "{r}");
    }
    d.wait_for("the boosts' writes", Duration::from_secs(10), || {
        support::read(&b.root, HIGH) == (7u64 << 30).to_string()
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let floats: Vec<&str> = log
        .split_whitespace()
        .filter(|w| w.starts_with("elapsed_ms="))
        .collect();
    assert!(floats.len() >= 3, "{log}");
    for f in floats {
        let v = &f["elapsed_ms=".len()..];
        let decimals = v.split_once('.').map_or("", |(_, d)| d);
        assert_eq!(decimals.len(), 3, "{f}");
    }
}

// ---- one flag for machine-readable output ----

use serde_json::Value;

/// Every command with machine-readable output takes `--json`, and report
/// no longer offers `--format json` (it still takes it: below).
#[test]
fn every_machine_readable_command_takes_json() {
    for cmd in ["status", "verify", "health", "events", "report", "replay"] {
        let r = cli(&["help", cmd]);
        assert_eq!(r.code, 0, "{r}");
        assert!(r.stdout.contains("--json"), "{cmd} has no --json:\n{r}");
    }
    let r = cli(&["help", "report"]);
    assert!(
        r.stdout.contains("[possible values: html, text]"),
        "report --format offers json still:\n{r}"
    );
    // `--json` and another `--format` contradict each other.
    let r = cli(&[
        "report",
        "--json",
        "--format",
        "html",
        "--db",
        "/nonexistent",
    ]);
    assert_eq!(r.code, 2, "{r}");
}

/// A run with the recorder on: `report --json` and `report --compare …
/// --json` print JSON; `--format json`, the older spelling, prints the same
/// report and a warning.
#[test]
fn report_and_compare_take_json_and_the_old_format_json_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    d.wait_log("flight recorder running", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(2500));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let db = b.root.join("var/lib/cgwarden/recorder.db");
    let db = db.to_str().unwrap();
    let policy = b.policy.to_str().unwrap();
    let json = |args: &[&str]| -> (support::Run, Value) {
        let r = cli(args);
        let v = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r}"));
        (r, v)
    };
    let base = ["report", "--policy", policy, "--db", db, "--since", "1h"];
    let (r, new) = json(&[&base[..], &["--json"]].concat());
    assert!(r.code == 0 || r.code == 1, "{r}");
    assert!(new["criteria"].is_array(), "{new:#}");
    assert!(r.stderr.is_empty(), "{r}");
    let (r, old) = json(&[&base[..], &["--format", "json"]].concat());
    assert!(r.code == 0 || r.code == 1, "{r}");
    assert!(
        r.stderr.contains("--format json is deprecated; use --json"),
        "{r}"
    );
    assert_eq!(new["criteria"], old["criteria"]);
    let (r, cmp) = json(&["report", "--compare", db, db, "--policy", policy, "--json"]);
    assert!(r.code == 0 || r.code == 1, "{r}");
    assert!(cmp.is_object(), "{cmp:#}");
    // Without --json: the table, not JSON.
    let r = cli(&["report", "--compare", db, db, "--policy", policy]);
    assert!(serde_json::from_str::<Value>(&r.stdout).is_err(), "{r}");
}

// ---- the end of the event stream, the sockets ----

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Instant;
use support::Start;

fn state_dir(b: &Board) -> std::path::PathBuf {
    b.root.join("run/cgwarden")
}

fn sockets(dir: &Path) -> Vec<String> {
    ["io.cgwarden", "kpi.sock"]
        .into_iter()
        .filter(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
        .map(String::from)
        .collect()
}

/// `cgwarden events` as a child, its stdout read line by line.
struct Events {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Events {
    fn start(b: &Board, json: bool) -> Events {
        let mut cmd = b.client(&["events"]);
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let e = Events { child, lines };
        let first = e.lines.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(first.contains("subscribed"), "{first}");
        e
    }

    /// Waits for the client to end: its exit code, the lines after the
    /// first, its stderr.
    fn end(mut self) -> (i32, Vec<String>, String) {
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                panic!("events did not end within 10 s of the daemon's end");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        use std::io::Read;
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        let lines =
            std::iter::from_fn(|| self.lines.recv_timeout(Duration::from_secs(1)).ok()).collect();
        (status.code().unwrap_or(-1), lines, err)
    }
}

/// The daemon stopped by SIGTERM: `events` prints its last event,
/// `stopped`, and exits 0 (it exited 4, "the daemon stopped answering:
/// Unexpected end of file"), in text and JSON. Killed, the daemon sends no
/// `stopped` and `events` exits 4: a crash still reads as one.
#[test]
fn events_exits_0_when_the_daemon_stops_and_4_when_it_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    let text = Events::start(&b, false);
    let json = Events::start(&b, true);
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let (code, lines, err) = text.end();
    assert_eq!(code, 0, "{lines:?}\n{err}");
    assert!(err.is_empty(), "{err}");
    let last = lines.last().cloned().unwrap_or_default();
    assert!(last.contains(" stopped "), "{lines:?}");
    let (code, lines, err) = json.end();
    assert_eq!(code, 0, "{lines:?}\n{err}");
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["kind"], "stopped", "{lines:?}");

    let d = Daemon::on(&b);
    let ev = Events::start(&b, false);
    d.signal(libc::SIGKILL);
    assert!(
        support::wait_ended(d.pid() as i32, Duration::from_secs(10)).is_some(),
        "SIGKILL did not end the daemon"
    );
    let (code, lines, err) = ev.end();
    assert_eq!(code, 4, "{lines:?}\n{err}");
    assert!(err.contains("stopped answering"), "{err}");
}

/// `kpi.sock` stayed after SIGTERM while the control socket went: both go
/// now, from a dry run too. A killed daemon leaves both; `reset` (holding
/// the state_dir lock, so no daemon serves them) removes them.
#[test]
fn the_daemons_sockets_go_at_its_stop_and_at_reset() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    for extra in [&[][..], &["--dry-run"][..]] {
        let d = Daemon::start(
            &b.policy,
            &b.root,
            Start {
                extra,
                ..Default::default()
            },
        );
        d.wait_log("KPI socket listening", Duration::from_secs(10));
        assert_eq!(sockets(&state_dir(&b)), ["io.cgwarden", "kpi.sock"]);
        let (code, log) = d.stop();
        assert_eq!(code, 0, "{log}");
        assert_eq!(
            sockets(&state_dir(&b)),
            Vec::<String>::new(),
            "{extra:?}: {log}"
        );
    }
    let d = Daemon::on(&b);
    d.wait_log("KPI socket listening", Duration::from_secs(10));
    d.signal(libc::SIGKILL);
    assert!(support::wait_ended(d.pid() as i32, Duration::from_secs(10)).is_some());
    drop(d);
    assert_eq!(sockets(&state_dir(&b)), ["io.cgwarden", "kpi.sock"]);
    let r = cli(&[
        "reset",
        b.policy.to_str().unwrap(),
        "--root",
        b.root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(sockets(&state_dir(&b)), Vec::<String>::new(), "{r}");
}

// ---- hooks under --root ----

/// Hooks run for real under `--root` (tests on a fake board see them run
/// that way): the start says so, naming each hook and its program. A dry
/// run runs none and says nothing of the kind.
#[test]
fn run_under_root_warns_that_its_hooks_run_for_real() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let line = log
        .lines()
        .find(|l| l.contains("hooks run for real under --root"))
        .unwrap_or_else(|| panic!("no warning about live hooks:\n{log}"));
    assert!(line.contains(" WARN "), "{line}");
    assert!(line.contains("alert (/bin/true {rule})"), "{line}");
    assert!(line.contains("--dry-run"), "{line}");
    // Before the daemon says it runs: it is the start's word.
    let at = log.find("hooks run for real").unwrap();
    assert!(at < log.find("cgwarden running").unwrap(), "{log}");

    let d = Daemon::start(
        &b.policy,
        &b.root,
        Start {
            extra: &["--dry-run"],
            ..Default::default()
        },
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("hooks run for real"), "{log}");

    // No hooks, nothing to say.
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(
        dir.path(),
        "version: 1\ngroups:\n  app:\n    memory: { high: 512M }\n",
    );
    let (code, log) = Daemon::on(&b).stop();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("hooks run for real"), "{log}");
}

// ---- the log filter ----

/// `CGWARDEN_LOG` takes a list of directives as well as a level: one module
/// quieter (the startup's WRITE lines at warn) leaves the rest at info; a
/// list that does not parse is said and the daemon logs at info.
#[test]
fn the_log_filter_takes_directives_per_module() {
    use support::Start;
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let run = |filter: &str| {
        let d = Daemon::start(
            &b.policy,
            &b.root,
            Start {
                log_level: filter,
                ..Start::default()
            },
        );
        let (code, log) = d.stop();
        assert_eq!(code, 0, "{log}");
        log
    };
    std::fs::write(b.root.join(HIGH), "max\n").unwrap();
    let all = run("info");
    assert!(
        all.contains("WRITE /sys/fs/cgroup/vision/memory.high"),
        "{all}"
    );
    std::fs::write(b.root.join(HIGH), "max\n").unwrap();
    let quiet = run("info,cgwarden::daemon::startup=warn");
    assert!(quiet.contains("cgwarden running"), "{quiet}");
    assert!(!quiet.contains("WRITE "), "{quiet}");
    std::fs::write(b.root.join(HIGH), "max\n").unwrap();
    let bad = run("info,cgwarden=loud");
    assert!(bad.contains("CGWARDEN_LOG=\"info,cgwarden=loud\""), "{bad}");
    assert!(
        bad.contains("WRITE /sys/fs/cgroup/vision/memory.high"),
        "{bad}"
    );
}
