//! A closed stdout ends every command quietly: `plan … | head -1` must not
//! exit 101 with "panicked … Broken pipe". Each command
//! runs with stdout a pipe whose reader is already closed, so its first
//! write fails with EPIPE: no panic, no message, its ordinary exit status.
//! A subscriber that goes away is not a WARN in the daemon's log, and no
//! `println!` can come back into src/ (it panics on EPIPE).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{Board, Daemon};

const POLICY: &str = r#"version: 1
product: epipe-cell
groups:
  inference:
    cpuset: { cpus: "4-7" }
    memory: { high: 512M, max: 1G }
  vision:
    cpuset: { cpus: "2-3" }
system:
  cpufreq:
    policy4: { min: 1GHz }
"#;

/// Runs `c` with stdout a pipe nobody reads (the reader closed first).
fn into_closed_pipe(mut c: Command) -> Output {
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    let child = c
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if t0.elapsed() > Duration::from_secs(20) {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{c:?} still runs 20 s after its stdout closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    waiter.join().unwrap()
}

fn assert_quiet(what: &str, o: &Output, codes: &[i32]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code().is_some_and(|c| codes.contains(&c)),
        "{what}: exit {:?} (want {codes:?}); stderr:\n{err}",
        o.status
    );
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe") && !err.contains("error"),
        "{what}: stderr:\n{err}"
    );
}

#[test]
fn commands_without_a_daemon_end_quietly_on_a_closed_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let p = b.policy.display().to_string();
    let r = b.root.display().to_string();
    for (what, args) in [
        ("plan", vec!["plan", &p, "--root", &r]),
        ("check", vec!["check", &p]),
        ("completions fish", vec!["completions", "fish"]),
        ("completions bash", vec!["completions", "bash"]),
        ("help", vec!["help"]),
        ("help plan", vec!["help", "plan"]),
        ("--help", vec!["--help"]),
        ("--version", vec!["--version"]),
    ] {
        let mut c = support::cmd();
        c.args(&args);
        let o = into_closed_pipe(c);
        assert_quiet(what, &o, &[0]);
    }
}

#[test]
fn client_commands_end_quietly_and_the_daemon_does_not_warn() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    for (what, args, codes) in [
        ("status", vec!["status"], &[0][..]),
        ("status --json", vec!["status", "--json"], &[0]),
        ("verify", vec!["verify"], &[0, 1]),
        ("verify --json", vec!["verify", "--json"], &[0, 1]),
        ("reload --dry-run", vec!["reload", "--dry-run"], &[0]),
    ] {
        let o = into_closed_pipe(b.client(&args));
        assert_quiet(what, &o, codes);
    }
    // `events | head -1`: the stream ends at the first event it cannot
    // print. Its subscription is followed until the client is gone.
    for json in [false, true] {
        let mut args = vec!["events"];
        if json {
            args.push("--json");
        }
        let c = b.client(&args);
        let policy = b.policy.clone();
        let root = b.root.clone();
        let poke = std::thread::spawn(move || {
            // Reloads until the client has ended (each one is an event).
            for _ in 0..50 {
                std::thread::sleep(Duration::from_millis(200));
                reload(&policy, &root);
            }
        });
        let o = into_closed_pipe(c);
        assert_quiet(if json { "events --json" } else { "events" }, &o, &[0]);
        drop(poke);
    }
    // The daemon wrote events to a client that had gone: still no WARN.
    reload(&b.policy, &b.root);
    std::thread::sleep(Duration::from_millis(500));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let warns: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(warns.is_empty(), "the daemon warned:\n{}", warns.join("\n"));
}

fn reload(policy: &Path, root: &Path) {
    let _ = support::cmd()
        .arg("reload")
        .arg("--policy")
        .arg(policy)
        .arg("--root")
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `println!`/`print!` panic on a closed stdout: src/ prints through
/// `outln!`/`out!` (src/out.rs). The workload helper (a test tool, not a
/// command users pipe) is exempt.
#[test]
fn no_println_in_src() {
    let mut bad = Vec::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.ends_with("cgwarden-workload") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, l) in text.lines().enumerate() {
                let code = l.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for m in ["println!(", "print!("] {
                    let hit = code.match_indices(m).any(|(at, _)| {
                        at == 0 || {
                            let c = code.as_bytes()[at - 1];
                            !(c.is_ascii_alphanumeric() || c == b'_' || c == b':')
                        }
                    });
                    if hit {
                        bad.push(format!("{}:{}: {l}", p.display(), i + 1));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "println!/print! in src/:\n{}",
        bad.join("\n")
    );
}
