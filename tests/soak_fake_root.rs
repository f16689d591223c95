//! `cgwarden soak` as a user runs it, beside the real
//! daemon on a fake root: refusals without a daemon or a recorder; a bare
//! soak that ends with DIR/report.json and the report's exit status; a soak
//! stopped by SIGTERM and run again that resumes from its original start
//! (not over), with the daemon SIGKILLed and restarted in between counted
//! by `restarts` (exit 1); a rerun of a finished soak repeats its verdict;
//! a short built-in load that starts and stops.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{Daemon, Start, BIN};

const POLICY: &str = r#"version: 1
product: soak-test
settings:
  recorder:
    dir: /var/lib/cgwarden
    interval: 1s
groups:
  inference:
    memory: { high: 100M, max: 1G }
"#;

const NO_RECORDER: &str = r#"version: 1
product: soak-test
groups:
  inference:
    memory: { high: 100M, max: 1G }
"#;

fn setup(dir: &Path, policy: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (_t, policy, root) = support::board(dir, policy);
    std::fs::create_dir_all(root.join("proc/sys/kernel/random")).unwrap();
    std::fs::write(
        root.join("proc/sys/kernel/random/boot_id"),
        "0f1e2d3c-aaaa-bbbb-cccc-000000000026\n",
    )
    .unwrap();
    (policy, root)
}

fn soak(policy: &Path, root: &Path, out: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("soak")
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--policy")
        .arg(policy)
        .arg("--root")
        .arg(root)
        .args(["--progress", "1s"]);
    c
}

fn json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", p.display()))
}

fn criterion<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

fn wait_db(root: &Path) {
    let db = root.join("var/lib/cgwarden/recorder.db");
    let t0 = Instant::now();
    while !db.exists() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(db.exists(), "{} never appeared", db.display());
}

#[test]
fn soak_refuses_without_a_daemon_or_a_recorder() {
    let t = tempfile::tempdir().unwrap();
    let (policy, root) = setup(t.path(), POLICY);
    let out = t.path().join("soak");
    let r: support::Run = soak(&policy, &root, &out, &["--for", "5s", "--load", "none"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 4, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    assert!(
        r.stderr.contains("no daemon answers"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    assert!(!out.join("soak.json").exists());

    let t2 = tempfile::tempdir().unwrap();
    let (policy, root) = setup(t2.path(), NO_RECORDER);
    let r: support::Run = soak(&policy, &root, &out, &["--for", "5s"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 3, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    assert!(
        r.stderr.contains("has no settings.recorder"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );

    // A damaged state file: refused with its name, never a panic.
    let (policy, root) = setup(t.path(), POLICY);
    let d = Daemon::start(&policy, &root, Start::default());
    wait_db(&root);
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("soak.json"), "{\"version\": 1, \"started\": \"x\"").unwrap();
    let r: support::Run = soak(&policy, &root, &out, &["--for", "5s", "--load", "none"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 3, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    assert!(
        r.stderr.contains("soak.json: not a soak state"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    assert!(
        !r.stderr.contains("panicked"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    d.stop();
}

#[test]
fn a_bare_soak_ends_with_the_report_and_its_exit_status() {
    let t = tempfile::tempdir().unwrap();
    let (policy, root) = setup(t.path(), POLICY);
    let d = Daemon::start(&policy, &root, Start::default());
    wait_db(&root);
    let out = t.path().join("soak");
    let t0 = Instant::now();
    let r: support::Run = soak(&policy, &root, &out, &["--for", "4s", "--load", "none"])
        .output()
        .unwrap()
        .into();
    let took = t0.elapsed();
    assert_eq!(r.code, 0, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    assert!(took >= Duration::from_secs(4), "{took:?}");
    // A progress line: elapsed/total, phase, daemon, the criteria so far.
    assert!(
        r.stdout.lines().any(|l| l.starts_with("soak 0:00:0")
            && l.contains("/0:00:04 record")
            && l.contains("daemon pid")
            && l.contains(" pass, 0 fail, ")),
        "{}",
        r.stdout
    );
    let rep = json(&out.join("report.json"));
    assert_eq!(rep["passed"], true, "{rep:#}");
    assert_eq!(criterion(&rep, "restarts")["status"], "pass");
    let secs = rep["window"]["seconds"].as_f64().unwrap();
    assert!((4.0..15.0).contains(&secs), "window {secs}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<svg") || html.contains("<table"),
        "report.html"
    );
    let st = json(&out.join("soak.json"));
    assert_eq!(st["finished"]["exit_code"], 0, "{st:#}");
    assert_eq!(st["phase"], "done");
    assert_eq!(st["load"], "none");
    d.stop();
}

#[test]
fn a_stopped_soak_resumes_from_its_start_and_counts_the_daemon_restart() {
    let t = tempfile::tempdir().unwrap();
    let (policy, root) = setup(t.path(), POLICY);
    let d = Daemon::start(&policy, &root, Start::default());
    wait_db(&root);
    let out = t.path().join("soak");
    let t0 = Instant::now();
    let first = soak(&policy, &root, &out, &["--for", "12s", "--load", "none"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    let r: support::Run = first.wait_with_output().unwrap().into();
    assert_eq!(r.code, 75, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    assert!(
        r.stdout.contains("stopped by SIGTERM"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    let st = json(&out.join("soak.json"));
    assert!(st["finished"].is_null(), "{st:#}");
    let started = st["started"].as_f64().unwrap();

    // The daemon dies (SIGKILL) and comes back: a restart in the window.
    d.signal(libc::SIGKILL);
    drop(d);
    let d = Daemon::start(&policy, &root, Start::default());
    let t1 = Instant::now();
    let r: support::Run = soak(&policy, &root, &out, &["--for", "12s", "--load", "none"])
        .output()
        .unwrap()
        .into();
    let took = t1.elapsed();
    // Resumed: it ended 12 s after the first start, not 12 s after this one.
    assert!(
        r.stdout.contains("resumed at 0:00:0"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    // A run that started over would last the whole 12 s.
    assert!(
        took < Duration::from_millis(11_500),
        "{took:?} (resumed {:?} after the start): started over?",
        t1 - t0
    );
    assert_eq!(r.code, 1, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    let rep = json(&out.join("report.json"));
    let restarts = criterion(&rep, "restarts");
    assert_eq!(restarts["status"], "fail", "{rep:#}");
    assert_eq!(restarts["measured"], 1.0, "{rep:#}");
    assert!(
        restarts["detail"]
            .as_str()
            .unwrap()
            .contains("daemon restart"),
        "{restarts:#}"
    );
    let st = json(&out.join("soak.json"));
    assert_eq!(st["started"].as_f64().unwrap(), started, "{st:#}");
    assert_eq!(st["resumes"].as_array().unwrap().len(), 1, "{st:#}");
    assert_eq!(st["resumes"][0]["reboot"], false);
    assert_eq!(st["finished"]["exit_code"], 1);

    // Finished: a rerun says so and repeats the verdict, starting nothing.
    let r: support::Run = soak(&policy, &root, &out, &["--for", "12s", "--load", "none"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 1, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    assert!(
        r.stdout.contains("finished at"),
        "exit {}\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    d.stop();
}

#[test]
fn a_short_seed_load_starts_its_loads_and_stops_them() {
    let t = tempfile::tempdir().unwrap();
    let (policy, root) = setup(t.path(), POLICY);
    let d = Daemon::start(&policy, &root, Start::default());
    wait_db(&root);
    let out = t.path().join("soak");
    // No stress-ng or fio: the built-in loads. 10 s: cool-down lasts 1 s, an
    // iteration of the soak's loop on a busy machine must not step over it.
    let r: support::Run = soak(&policy, &root, &out, &["--for", "10s", "--load", "seed"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "exit {}\n{}\n{}", r.code, r.stdout, r.stderr);
    for want in [
        "soak: warm-up at 0:00:00",
        "soak: load at",
        "soak: cool-down at",
        "load io writer into",
        "load network loopback TCP: built-in",
        "loads running",
    ] {
        assert!(r.stdout.contains(want), "{want:?} in\n{}", r.stdout);
    }
    // The IO writer's file is gone; only the soak's own files are left.
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["report.html", "report.json", "soak.json"]);
    d.stop();
}

#[test]
fn a_soak_whose_terminal_went_away_goes_on_to_its_verdict() {
    let t = tempfile::tempdir().unwrap();
    let (policy, root) = setup(t.path(), POLICY);
    let d = Daemon::start(&policy, &root, Start::default());
    wait_db(&root);
    let out = t.path().join("soak");
    // Both outputs closed by their reader (EPIPE), and a SIGHUP: no panic
    // (101), the soak ends with its verdict and its files.
    let mut c = soak(&policy, &root, &out, &["--for", "3s", "--load", "none"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    drop(c.stderr.take());
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGHUP) };
    let status = c.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(json(&out.join("report.json"))["passed"], true);
    assert_eq!(json(&out.join("soak.json"))["finished"]["exit_code"], 0);
    d.stop();
}
