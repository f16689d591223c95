//! `cgwarden top` in a real terminal: tmux at 80×24
//! against a running daemon on a fake tree. The screen shows the groups;
//! a rule driven by a fake PSI file turns active on screen; keys switch
//! views; `q` and SIGTERM both exit and put the terminal back (cooked mode,
//! main screen). No daemon: exit 4 naming the socket.
//!
//! tmux missing is a failure, not a skip: tests/run-all.sh installs it.
//! Each test runs its own tmux server (`-L`), killed at the end.
#![cfg(feature = "top")]

use cgwarden::testing::FakeTree;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::{Daemon, Start, BIN};

const POLICY: &str = r#"version: 1
product: vision-cell
groups:
  inference:
    cpuset: { cpus: "4-7" }
    memory: { high: 512M, max: 1G }
  vision:
    cpuset: { cpus: "2-5" }
    memory: { high: 3584M, max: 4G }
system:
  cpufreq:
    policy4: { min: 1GHz }
rules:
  - name: inference-pressure
    when: inference.memory.some.avg10 > 10%
    while:
      - set cpufreq.policy4.min = 1.8GHz
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    then:
      - raise inference.memory.high by 128M up to 1G
"#;

fn psi(root: &Path, avg10: f64) {
    support::memory_pressure(root, "inference", avg10, 100);
}

fn setup(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    let (t, policy, root) = support::board(dir, POLICY);
    support::apply(&policy, &root);
    psi(&root, 2.5);
    for (g, cur) in [("inference", 301_989_888u64), ("vision", 1_288_490_188)] {
        std::fs::write(
            root.join(format!("sys/fs/cgroup/{g}/memory.current")),
            format!("{cur}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        root.join("sys/fs/cgroup/vision/cpu.pressure"),
        "some avg10=23.40 avg60=0.00 avg300=0.00 total=100\n\
         full avg10=0.00 avg60=0.00 avg300=0.00 total=50\n",
    )
    .unwrap();
    (t, policy, root)
}

/// A tmux server of our own, 80×24.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(cmd: &str) -> Tmux {
        let name = format!("cgw-top-{}-{}", std::process::id(), rand_suffix());
        let t = Tmux { name };
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-x",
                "80",
                "-y",
                "24",
                "-s",
                "top",
                cmd,
            ])
            .status()
            .expect("tmux is missing: install it (tests/run-all.sh does)")
            .success();
        assert!(ok, "tmux new-session failed");
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.name, "-f", "/dev/null"]).args(args);
        c
    }

    fn capture(&self) -> String {
        let o = self
            .cmd(&["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn keys(&self, k: &str) {
        assert!(self
            .cmd(&["send-keys", "-t", "top", k])
            .status()
            .unwrap()
            .success());
    }

    fn pane_pid(&self) -> u32 {
        let o = self
            .cmd(&["display-message", "-p", "-t", "top", "#{pane_pid}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    }

    /// Waits until the screen satisfies `f`; panics with the screen.
    fn wait(&self, what: &str, limit: Duration, f: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.capture();
            if f(&s) {
                return s;
            }
            if t0.elapsed() > limit {
                panic!("timed out waiting for {what}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000)
        .unwrap_or(0)
}

/// The shell line tmux runs: top, then its exit status and whether the
/// terminal is back in cooked mode (`stty -a` says `icanon`, not `-icanon`).
fn top_cmd(policy: &Path, root: &Path) -> String {
    format!(
        "{BIN} top --policy {} --root {}; echo EXITED=$?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 120",
        policy.display(),
        root.display()
    )
}

#[test]
fn top_shows_groups_a_rule_turning_active_switches_views_and_q_restores_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    let tmux = Tmux::start(&top_cmd(&policy, &root));
    let s = tmux.wait("the groups view", Duration::from_secs(15), |s| {
        s.contains("groups (by name)") && s.contains("inference") && s.contains("vision")
    });
    assert!(
        s.contains("4-7") && s.contains("288M") && s.contains("512M"),
        "{s}"
    );
    assert!(s.contains("23.4"), "vision's cpu PSI:\n{s}");
    assert_eq!(s.lines().count(), 24, "not 80x24:\n{s}");
    assert!(s.lines().all(|l| l.chars().count() <= 80));

    // A key switches to the rules view; the rule is idle.
    tmux.keys("r");
    tmux.wait("the rules view", Duration::from_secs(5), |s| {
        s.contains("rules (by name)") && s.contains("inference-pressure") && s.contains("idle")
    });
    // Pressure: the rule turns active on screen.
    psi(&root, 42.0);
    tmux.wait("the rule active", Duration::from_secs(10), |s| {
        s.lines()
            .any(|l| l.contains("inference-pressure") && l.contains("active"))
    });
    // Its claim is listed; the write shows among the last actions.
    tmux.keys("c");
    let s = tmux.wait("the claims view", Duration::from_secs(5), |s| {
        s.contains("claims and boosts") && s.contains("cpufreq.policy4.min")
    });
    assert!(s.contains("rule inference-pressure"), "{s}");
    tmux.keys("g");
    tmux.wait(
        "back to groups, with the write",
        Duration::from_secs(5),
        |s| {
            s.contains("groups (by name)")
                && s.contains("1 active")
                && s.contains("1000000 → 1800000")
        },
    );
    // Sorting by memory pressure puts inference (42 %) first.
    tmux.keys("s");
    tmux.keys("s");
    let s = tmux.wait("sorted by memory", Duration::from_secs(5), |s| {
        s.contains("by memory")
    });
    if let Some(keep) = std::env::var_os("CGWARDEN_TOP_CAPTURE") {
        std::fs::write(keep, &s).unwrap();
    }

    tmux.keys("q");
    let s = tmux.wait("top gone", Duration::from_secs(5), |s| {
        s.contains("EXITED=")
    });
    assert!(s.contains("EXITED=0"), "{s}");
    assert!(
        !s.contains("groups (by"),
        "the alternate screen was not left:\n{s}"
    );
    let mode = tmux.wait("stty", Duration::from_secs(5), |s| s.contains("icanon"));
    assert!(
        mode.lines().any(|l| l.trim() == "icanon"),
        "the terminal was left raw:\n{mode}"
    );
    drop(tmux);
    let (code, _) = d.stop();
    assert_eq!(code, 0);
}

#[test]
fn sigterm_restores_the_terminal_too() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    let tmux = Tmux::start(&top_cmd(&policy, &root));
    tmux.wait("the groups view", Duration::from_secs(15), |s| {
        s.contains("groups (by name)")
    });
    // top is the pane shell's child.
    let sh = tmux.pane_pid();
    let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap();
    let top: i32 = children
        .split_whitespace()
        .next()
        .expect("top runs")
        .parse()
        .unwrap();
    // SAFETY: kill(2) on the process this test started (through tmux).
    unsafe { libc::kill(top, libc::SIGTERM) };
    let s = tmux.wait("top gone", Duration::from_secs(5), |s| s.contains("icanon"));
    assert!(s.contains("EXITED=0"), "{s}");
    assert!(!s.contains("groups (by"), "{s}");
    assert!(s.lines().any(|l| l.trim() == "icanon"), "left raw:\n{s}");
    drop(tmux);
    drop(d);
}

#[test]
fn no_daemon_exits_4_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let o = Command::new(BIN)
        .args(["top", "--policy"])
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("run/cgwarden/io.cgwarden"), "{err}");
}
