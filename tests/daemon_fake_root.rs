//! The daemon end to end on a fake tree: `cgwarden run --root DIR --tick
//! 100ms` against plain files that the test rewrites as the kernel would
//! (PSI averages, memory.events counters), asserting that knob files change
//! and change back, hooks run with their documented environment, SIGTERM returns
//! claimed knobs to their baselines, and `--dry-run` changes nothing.

use cgwarden::testing::FakeTree;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;
use support::{read, Daemon, Start};

fn setup(dir: &Path) -> (FakeTree, PathBuf) {
    let hook_out = dir.join("hook.env");
    let (t, policy, root) = support::board(
        dir,
        &format!(
            r#"version: 1
product: test-cell
groups:
  inference:
    memory: {{ high: 8G, max: 10G }}
system:
  sysctl: {{ vm.swappiness: 30 }}
hooks:
  alert:
    exec: ["/bin/sh", "-c", "env > {out}.tmp && mv {out}.tmp {out}; echo ran {{rule}} {{event}}", "hook-arg0"]
    timeout: 5s
rules:
  - name: inference-pressure
    when: inference.memory.some.avg10 > 10%
    then:
      - raise inference.memory.high by 512M up to 10G
      - hook alert
    cooldown: 1h
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set sysctl.vm.swappiness = 90
    hold: 300ms
"#,
            out = hook_out.display()
        ),
    );
    // Converge first so the group exists, then lay out what the kernel
    // would show in it.
    support::apply(&policy, &root);
    psi(&root, 0.0);
    events(&root, 0);
    (t, policy)
}

fn psi(root: &Path, avg10: f64) {
    support::memory_pressure(root, "inference", avg10, 100);
}

fn events(root: &Path, oom_kill: u64) {
    support::memory_events(root, "inference", oom_kill);
}

#[test]
fn rules_fire_write_knobs_run_hooks_and_release_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy) = setup(dir.path());
    let root = dir.path().join("root");
    let d = Daemon::start(&policy, &root, Start::default());
    let log = || d.log();

    // Memory pressure: the `then` step raises memory.high once, and the hook runs.
    assert_eq!(
        read(&root, "sys/fs/cgroup/inference/memory.high"),
        (8u64 << 30).to_string()
    );
    psi(&root, 42.5);
    d.wait_for("memory.high raised", Duration::from_secs(10), || {
        read(&root, "sys/fs/cgroup/inference/memory.high")
            == ((8u64 << 30) + (512u64 << 20)).to_string()
    });
    let hook_env = dir.path().join("hook.env");
    d.wait_for(
        "the hook's environment file",
        Duration::from_secs(10),
        || hook_env.exists(),
    );
    let env = std::fs::read_to_string(&hook_env).unwrap();
    for want in [
        "CGWARDEN_RULE=inference-pressure",
        "CGWARDEN_EVENT=fired",
        "CGWARDEN_METRIC=inference.memory.some.avg10",
        "CGWARDEN_VALUE=42.5",
        "CGWARDEN_THRESHOLD=10%",
        "CGWARDEN_GROUP=inference",
        "CGWARDEN_PRODUCT=test-cell",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ] {
        assert!(
            env.lines().any(|l| l.starts_with(want)),
            "hook env lacks {want}:\n{env}"
        );
    }
    assert!(
        env.lines().any(|l| l.starts_with("CGWARDEN_TIME=20")),
        "{env}"
    );
    assert!(
        !env.contains("CARGO"),
        "the daemon's environment leaked into the hook:\n{env}"
    );
    d.wait_for("hook output in the log", Duration::from_secs(5), || {
        log().contains("ran inference-pressure fired")
    });

    // An OOM kill: the while-claim holds swappiness at 90 and releases it after `hold`.
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30");
    events(&root, 1);
    d.wait_for("swappiness claimed", Duration::from_secs(10), || {
        read(&root, "proc/sys/vm/swappiness") == "90"
    });
    d.wait_for(
        "swappiness released after hold",
        Duration::from_secs(10),
        || read(&root, "proc/sys/vm/swappiness") == "30",
    );
    // The step's value is the new baseline: it stays after pressure is gone.
    psi(&root, 0.0);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        read(&root, "sys/fs/cgroup/inference/memory.high"),
        ((8u64 << 30) + (512u64 << 20)).to_string()
    );

    // A claim still held at SIGTERM is released: the knob goes back to baseline.
    events(&root, 2);
    d.wait_for("swappiness claimed again", Duration::from_secs(10), || {
        read(&root, "proc/sys/vm/swappiness") == "90"
    });
    let (code, log_text) = d.stop();
    assert_eq!(code, 0, "{log_text}");
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30", "{log_text}");
    assert!(
        log_text.contains("rule oom-seen"),
        "writes name their cause:\n{log_text}"
    );
}

#[test]
fn group_deleted_from_outside_is_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy) = setup(dir.path());
    let root = dir.path().join("root");
    let d = Daemon::start(&policy, &root, Start::default());
    let group = root.join("sys/fs/cgroup/inference");
    std::fs::remove_dir_all(&group).unwrap();
    d.wait_for("group recreated", Duration::from_secs(10), || {
        read(&root, "sys/fs/cgroup/inference/memory.high") == (8u64 << 30).to_string()
    });
    let (code, _) = d.stop();
    assert_eq!(code, 0);
}

#[test]
fn dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy) = setup(dir.path());
    let root = dir.path().join("root");
    std::fs::write(root.join("proc/sys/vm/swappiness"), "60\n").unwrap();
    let before_high = read(&root, "sys/fs/cgroup/inference/memory.high");
    let d = Daemon::start(
        &policy,
        &root,
        Start {
            extra: &["--dry-run"],
            ..Start::default()
        },
    );
    psi(&root, 80.0);
    events(&root, 3);
    d.wait_log("would write (dry run)", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        read(&root, "sys/fs/cgroup/inference/memory.high"),
        before_high
    );
    assert_eq!(
        read(&root, "proc/sys/vm/swappiness"),
        "60",
        "not even the baseline is written in a dry run"
    );
    assert!(
        !dir.path().join("hook.env").exists(),
        "hooks do not run in a dry run"
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "60");
}

/// SIGTERM with a `while` rule active: the daemon runs the rule's `cleared`
/// hook (after its `fired` one) within the stop's grace period, then exits 0.
#[test]
fn sigterm_runs_the_cleared_hook_of_an_active_while_rule() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("events");
    let (_t, policy, root) = support::board(
        dir.path(),
        &format!(
            r#"version: 1
groups:
  inference:
    memory: {{ high: 8G }}
hooks:
  note:
    exec: ["/bin/sh", "-c", "sleep 0.2; echo {{event}} {{rule}} >> {out}"]
    timeout: 5s
    min_interval: 1h
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - hook note
    hold: 1h
"#,
            out = out.display()
        ),
    );
    support::apply(&policy, &root);
    events(&root, 0);
    let d = Daemon::start(&policy, &root, Start::default());
    events(&root, 1);
    let lines = || std::fs::read_to_string(&out).unwrap_or_default();
    d.wait_for("the fired hook", Duration::from_secs(10), || {
        lines() == "fired oom-seen\n"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    // min_interval (1h) does not hold back the cleared run of the pair.
    assert_eq!(lines(), "fired oom-seen\ncleared oom-seen\n", "{log}");
}
