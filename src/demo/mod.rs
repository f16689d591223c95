//! `cgwarden demo`: the real daemon against a fake 8-CPU board for about
//! twenty seconds of a device's life, narrated.
//!
//! The demo owns only the script. It lays out a board with
//! [`FakeTree`], runs this same binary's `apply`, `run`, `events --json`
//! and `reset` on it (`--root`, so nothing on the host is touched and no
//! root is needed), plays what a kernel would show — a burst of processes
//! to place, memory pressure rising in `inference`, an OOM kill in
//! `vision`, `cyclictest` starting and stopping — and prints what the daemon
//! did about each, from its event stream and its log. It ends with the
//! daemon stopped and the board reset, and exits 1 if any of the expected
//! reactions did not happen, so CI runs it as a test.

use crate::control::wire::Event;
use crate::kernel::fake_tree::{FakeProcess, FakeTree};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The board's policy (also readable as an example).
const POLICY: &str = include_str!("policy.yaml");

/// What happened, counted to decide the exit status.
#[derive(Default)]
struct Seen {
    fired: Vec<String>,
    writes: usize,
    placed: usize,
}

/// Narration: one line per thing, with the time since the demo began.
#[derive(Clone)]
struct Narrator {
    t0: Instant,
    seen: Arc<Mutex<Seen>>,
}

impl Narrator {
    fn say(&self, what: &str) {
        let t = self.t0.elapsed().as_secs_f64();
        crate::outln!("[{t:5.1}s] {what}");
    }
    fn script(&self, what: &str) {
        self.say(&format!("── {what}"));
    }
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        // A poisoned lock only means a narrating thread panicked; the
        // counts are still what they were.
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs the demo in a fresh directory (kept when `keep` names one).
pub(crate) fn run(keep: Option<&Path>) -> u8 {
    let dir = match keep {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!("cgwarden-demo-{}", std::process::id())),
    };
    // `--keep DIR`: a new or empty directory, else a usage error before
    // anything runs (never exit 75 after saying "kept in").
    if let Some(d) = keep {
        let used = match std::fs::read_dir(d) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                eprintln!("cgwarden: error: demo --keep {}: {e}", d.display());
                return crate::exit::USAGE;
            }
        };
        if used {
            eprintln!(
                "cgwarden: error: demo --keep {}: not empty; give a new or empty directory",
                d.display()
            );
            return crate::exit::USAGE;
        }
    }
    let outcome = demo(&dir);
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match outcome {
        Ok(code) => {
            if keep.is_some() {
                crate::outln!(
                    "the board, policy and daemon log are kept in {}",
                    dir.display()
                );
            }
            code
        }
        Err(e) => {
            eprintln!("cgwarden: error: demo: {e}");
            crate::exit::TEMPFAIL
        }
    }
}

fn demo(dir: &Path) -> std::io::Result<u8> {
    let exe = std::env::current_exe()?;
    let root = dir.join("root");
    if root.exists() {
        return Err(std::io::Error::other(format!(
            "{} already exists; give an empty directory",
            root.display()
        )));
    }
    std::fs::create_dir_all(dir)?;
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY)?;
    let board = FakeTree::standard(&root)?;
    board.add_process(&FakeProcess::new(1, "systemd"))?;
    board.add_process(&FakeProcess::new(702, "sshd"))?;
    let n = Narrator {
        t0: Instant::now(),
        seen: Arc::default(),
    };

    crate::outln!(
        "cgwarden demo: a smart-camera cell on a fake 8-CPU board in {}",
        root.display()
    );
    crate::outln!(
        "policy: {} (groups realtime, inference, vision, system; 3 rules)\n",
        policy.display()
    );

    // Boot: the one-shot convergence, as cgwarden-apply.service does.
    let apply = Command::new(&exe)
        .arg("apply")
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .stderr(Stdio::null())
        .output()?;
    let lines = String::from_utf8_lossy(&apply.stdout);
    let writes = lines
        .lines()
        .filter(|l| l.starts_with("WRITE") || l.starts_with("MKDIR"))
        .count();
    n.say(&format!(
        "apply: hierarchy and baseline built, {writes} writes journalled (e.g. {})",
        lines
            .lines()
            .find(|l| l.contains("memory.high"))
            .unwrap_or("-")
    ));
    if !apply.status.success() {
        return Ok(1);
    }
    // What the kernel shows in the new groups.
    psi(&board, "inference", 0.0)?;
    oom_kills(&board, "vision", 0)?;

    let mut daemon = Command::new(&exe)
        .arg("run")
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .env("CGWARDEN_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let comms: Arc<Mutex<HashMap<i64, String>>> = Arc::default();
    let ready = follow_log(
        &mut daemon,
        dir.join("daemon.log"),
        n.clone(),
        comms.clone(),
    )?;
    if ready.recv_timeout(Duration::from_secs(10)).is_err() {
        n.say("the daemon did not come up; see daemon.log");
        stop(&mut daemon);
        return Ok(1);
    }
    n.say(&format!(
        "run: the daemon is up (pid {}), following its events",
        daemon.id()
    ));
    let socket = crate::control::client::locate(None, &policy, Some(&root))
        .map_err(std::io::Error::other)?;
    let mut events = Command::new(&exe)
        .arg("events")
        .arg("--json")
        .arg("--socket")
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    follow_events(&mut events, n.clone());
    std::thread::sleep(Duration::from_millis(500));

    // 1. A burst of processes starts: each goes to its group.
    let mut burst = Vec::new();
    for i in 0..6 {
        burst.push(FakeProcess::new(4100 + i, &format!("ffmpeg-worker{i}")));
    }
    for i in 0..4 {
        burst.push(FakeProcess {
            exe: Some("/opt/npu/bin/infer-server".into()),
            ..FakeProcess::new(4200 + i, "infer-server")
        });
    }
    burst.push(FakeProcess::new(4300, "motion_control"));
    burst.push(FakeProcess::new(4301, "bash"));
    n.script(&format!(
        "a burst of {} processes starts (6 camera workers, 4 NPU servers, the motion controller, and a shell no placement rule matches)",
        burst.len()
    ));
    {
        let mut c = comms.lock().unwrap_or_else(|e| e.into_inner());
        for p in &burst {
            c.insert(i64::from(p.pid), p.comm.clone());
        }
    }
    board.add_processes(&burst)?;
    std::thread::sleep(Duration::from_secs(2));

    // 2. Memory pressure rises in inference for a while.
    n.script("memory pressure rises in inference (PSI some avg10 = 24%)");
    psi(&board, "inference", 24.0)?;
    std::thread::sleep(Duration::from_millis(4500));
    n.script("the pressure is gone (avg10 = 0%)");
    psi(&board, "inference", 0.0)?;
    std::thread::sleep(Duration::from_millis(1500));

    // 3. The kernel OOM-kills a process in vision.
    n.script("the kernel OOM-kills a camera worker in vision (memory.events oom_kill 0 → 1)");
    oom_kills(&board, "vision", 1)?;
    remove_process(&root, 4105);
    std::thread::sleep(Duration::from_secs(2));

    // 4. A latency test runs and stops.
    n.script("cyclictest starts (an RT latency test)");
    board.add_process(&FakeProcess::new(4400, "cyclictest"))?;
    comms
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(4400, "cyclictest".into());
    std::thread::sleep(Duration::from_secs(3));
    n.script("cyclictest exits");
    remove_process(&root, 4400);
    std::thread::sleep(Duration::from_millis(2500));

    // 5. Stop and undo.
    n.script("SIGTERM: the daemon releases its claims and stops; the hierarchy stays");
    stop(&mut daemon);
    let _ = events.kill();
    let _ = events.wait();
    std::thread::sleep(Duration::from_millis(100));
    let reset = Command::new(&exe)
        .arg("reset")
        .arg("--policy")
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .stderr(Stdio::null())
        .output()?;
    let out = String::from_utf8_lossy(&reset.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let summary = match lines.as_slice() {
        [.., summary, last] if last.starts_with("reset complete") => format!("{summary}; {last}"),
        [.., last] => last.to_string(),
        [] => "nothing printed".to_string(),
    };
    // The summary line is `reset: N restored, …` already.
    if summary.starts_with("reset:") {
        n.say(&summary);
    } else {
        n.say(&format!("reset: {summary}"));
    }

    let seen = n.seen();
    crate::outln!(
        "\nin all: {} placements, rules fired: {}, {} writes by rules",
        seen.placed,
        if seen.fired.is_empty() {
            "none".to_string()
        } else {
            seen.fired.join(", ")
        },
        seen.writes
    );
    let expected = [
        "inference-memory-pressure",
        "vision-oom-kill",
        "rt-test-running",
    ];
    let missing: Vec<&str> = expected
        .iter()
        .filter(|r| !seen.fired.iter().any(|f| f == *r))
        .copied()
        .collect();
    let ok = missing.is_empty() && seen.placed >= 11 && seen.writes >= 3 && reset.status.success();
    if !ok {
        crate::outln!("the demo did not go as scripted (rules that never fired: {missing:?}); see the daemon log");
    }
    Ok(if ok { 0 } else { 1 })
}

/// `memory.pressure` of a group, as the kernel prints it.
fn psi(board: &FakeTree, group: &str, avg10: f64) -> std::io::Result<()> {
    board.file(
        &format!("sys/fs/cgroup/{group}/memory.pressure"),
        &format!(
            "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=50\n"
        ),
    )
}

/// `memory.events` of a group with `n` OOM kills.
fn oom_kills(board: &FakeTree, group: &str, n: u64) -> std::io::Result<()> {
    board.file(
        &format!("sys/fs/cgroup/{group}/memory.events"),
        &format!("low 0\nhigh 0\nmax {n}\noom {n}\noom_kill {n}\noom_group_kill 0\n"),
    )
}

/// A process exits: its /proc entry goes.
fn remove_process(root: &Path, pid: i32) {
    let _ = std::fs::remove_dir_all(root.join(format!("proc/{pid}")));
}

fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = child.wait();
}

/// Reads the daemon's log: keeps it in `log`, says when the control socket
/// listens, narrates each placement.
fn follow_log(
    daemon: &mut Child,
    log: PathBuf,
    n: Narrator,
    comms: Arc<Mutex<HashMap<i64, String>>>,
) -> std::io::Result<mpsc::Receiver<()>> {
    let (tx, rx) = mpsc::channel();
    let Some(stderr) = daemon.stderr.take() else {
        return Err(std::io::Error::other("the daemon's log is not piped"));
    };
    let mut file = std::fs::File::create(log)?;
    std::thread::spawn(move || {
        use std::io::Write;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(file, "{line}");
            if line.contains("control socket listening") {
                let _ = tx.send(());
            }
            if line.contains("placed") {
                let pid = field(&line, "pid=").and_then(|p| p.parse::<i64>().ok());
                let group = field(&line, "group=");
                if let (Some(pid), Some(group)) = (pid, group) {
                    let comm = comms
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&pid)
                        .cloned()
                        .unwrap_or_default();
                    n.say(&format!("placed {comm} (pid {pid}) in {group}"));
                    n.seen().placed += 1;
                }
            }
        }
    });
    Ok(rx)
}

/// The value of `key` in a `key=value` log line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(key)? + key.len();
    line[start..].split_whitespace().next()
}

/// Narrates the daemon's event stream (`cgwarden events --json`).
fn follow_events(events: &mut Child, n: Narrator) {
    let Some(out) = events.stdout.take() else {
        return;
    };
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let Ok(e) = serde_json::from_str::<Event>(&line) else {
                continue;
            };
            if let Some(text) = describe(&e, &n) {
                n.say(&text);
            }
        }
    });
}

/// One event in words; `None` for those the demo does not narrate.
fn describe(e: &Event, n: &Narrator) -> Option<String> {
    let rule = e.rule.as_deref().unwrap_or("?");
    let knob = e.knob.as_deref().unwrap_or("?");
    match e.kind.as_str() {
        "rule" => {
            let state = e.state.as_deref().unwrap_or("?");
            if state == "active" {
                n.seen().fired.push(rule.to_string());
            }
            Some(format!("rule {rule} is now {state}"))
        }
        "write" => {
            n.seen().writes += 1;
            let old = e
                .old
                .as_deref()
                .map(|v| pretty(knob, v))
                .unwrap_or("-".into());
            let new = e
                .new
                .as_deref()
                .map(|v| pretty(knob, v))
                .unwrap_or("-".into());
            let why = e.cause.as_deref().unwrap_or("");
            Some(format!("write {knob}: {old} → {new} ({why})"))
        }
        "write_failed" => Some(format!(
            "write {knob} failed: {}",
            e.message.as_deref().unwrap_or("")
        )),
        "claim_granted" => Some(format!(
            "claim on {knob} = {} by {}",
            e.new
                .as_deref()
                .map(|v| pretty(knob, v))
                .unwrap_or_default(),
            e.cause.as_deref().unwrap_or(rule)
        )),
        "claim_released" | "claim_expired" => Some(format!(
            "claim on {knob} released ({})",
            e.cause.as_deref().unwrap_or(rule)
        )),
        _ => None,
    }
}

/// A value as people read it (knobs::human: the rule `status` and
/// `events` follow too).
fn pretty(knob: &str, value: &str) -> String {
    crate::knobs::human::human_text(knob, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_policy_is_valid() {
        let p = crate::policy::load_bytes("demo.yaml", POLICY.as_bytes());
        assert!(
            p.is_ok(),
            "{}",
            p.err().map(|d| d.to_string()).unwrap_or_default()
        );
    }

    #[test]
    fn values_are_shown_in_policy_units() {
        assert_eq!(pretty("inference.memory.high", "2684354560"), "2.5G");
        assert_eq!(pretty("inference.memory.high", "2147483648"), "2G");
        assert_eq!(pretty("cpufreq.policy7.min", "2400000"), "2.4GHz");
        assert_eq!(pretty("sysctl.vm.swappiness", "30"), "30");
        assert_eq!(pretty("vision.memory.max", "max"), "max");
    }

    #[test]
    fn log_fields_are_found() {
        let line = "2026 INFO placed (scan) pid=4101 group=vision descendants=[]";
        assert_eq!(field(line, "pid="), Some("4101"));
        assert_eq!(field(line, "group="), Some("vision"));
        assert_eq!(field(line, "nope="), None);
    }
}
