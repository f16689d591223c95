//! Faults together with state, on a fake tree:
//! a daemon SIGKILLed while claims and `then` values are in force leaves
//! nothing behind once it is restarted and their cause is gone, `reset`
//! undoes runtime writes too, and a group deleted from outside is recreated
//! alone — live claims on other groups (and on itself) survive it.

use cgwarden::testing::FakeTree;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod support;
use support::{memory_events, read, Daemon, Start, BIN};

const MIB: u64 = 1 << 20;

/// Everything under the root but state_dir and the daemon's log.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    support::text_snapshot(root, |rel| {
        !rel.starts_with("run") && !rel.ends_with("daemon.log")
    })
}

fn setup(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    support::board(
        dir,
        r#"version: 1
product: faults
groups:
  inference:
    memory: { high: 100M, max: 1G }
  vision:
    cpu: { weight: 200 }
    memory: { high: 200M }
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set sysctl.kernel.sched_rt_runtime_us = -1
      - set inference.memory.high = 160M
    hold: 1h
  - name: vision-oom
    when: vision.memory.events.oom_kill > 0
    then:
      - set sysctl.vm.watermark_scale_factor = 200
"#,
    )
}

fn start(policy: &Path, root: &Path) -> Daemon {
    let d = Daemon::start(policy, root, Start::default());
    for g in ["inference", "vision"] {
        memory_events(root, g, 0);
    }
    // Let the daemon see the zero counts before anything fires.
    std::thread::sleep(Duration::from_millis(300));
    d
}

fn sigkill(d: Daemon) {
    // Drop kills (SIGKILL) and reaps the child without releasing anything.
    drop(d);
}

#[test]
fn a_crash_leaves_no_claim_behind_and_reset_undoes_runtime_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let before = snapshot(&root);
    assert_eq!(read(&root, "proc/sys/kernel/sched_rt_runtime_us"), "950000");

    let d = start(&policy, &root);
    memory_events(&root, "inference", 1);
    memory_events(&root, "vision", 1);
    d.wait_for(
        "claims and the then value in force",
        Duration::from_secs(10),
        || {
            read(&root, "proc/sys/kernel/sched_rt_runtime_us") == "-1"
                && read(&root, "sys/fs/cgroup/inference/memory.high") == (160 * MIB).to_string()
                && read(&root, "proc/sys/vm/watermark_scale_factor") == "200"
        },
    );
    let journal = read(&root, "run/cgwarden/originals");
    for want in ["sched_rt_runtime_us\t950000", "watermark_scale_factor\t10"] {
        assert!(
            journal.contains(want),
            "runtime write not journalled ({want}):\n{journal}"
        );
    }
    sigkill(d);
    assert_eq!(read(&root, "proc/sys/kernel/sched_rt_runtime_us"), "-1");

    // Restarted; the OOM kills were before it started, so nothing claims.
    let d = start(&policy, &root);
    d.wait_for(
        "the crashed run's claims undone",
        Duration::from_secs(10),
        || {
            read(&root, "proc/sys/kernel/sched_rt_runtime_us") == "950000"
                && read(&root, "sys/fs/cgroup/inference/memory.high") == (100 * MIB).to_string()
                && read(&root, "proc/sys/vm/watermark_scale_factor") == "10"
        },
    );
    // And a claim taken by this run is still released on a clean stop.
    memory_events(&root, "inference", 2);
    d.wait_for("claimed again", Duration::from_secs(10), || {
        read(&root, "proc/sys/kernel/sched_rt_runtime_us") == "-1"
    });
    sigkill(d);

    // reset restores every file from before the first run, runtime writes included.
    let text = support::run(
        Command::new(BIN)
            .args(["reset", "--policy"])
            .arg(&policy)
            .arg("--root")
            .arg(&root),
    );
    assert_eq!(text.code, 0, "{text}");
    let after = snapshot(&root);
    let differ: Vec<_> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(v))
        .map(|(k, v)| format!("{}: {v:?} -> {:?}", k.display(), after.get(k)))
        .chain(
            after
                .keys()
                .filter(|k| !before.contains_key(*k))
                .map(|k| format!("{}: left behind", k.display())),
        )
        .collect();
    assert!(
        differ.is_empty(),
        "reset left changes:\n{}\n{text}",
        differ.join("\n")
    );
}

#[test]
fn deleting_a_group_keeps_every_live_claim() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = start(&policy, &root);
    memory_events(&root, "inference", 1);
    let high = "sys/fs/cgroup/inference/memory.high";
    d.wait_for("memory.high claimed", Duration::from_secs(10), || {
        read(&root, high) == (160 * MIB).to_string()
    });
    // An unrelated group deleted: recreated with its baseline; the claim on
    // inference is never rewritten (the old one-shot converge put 100M back).
    std::fs::remove_dir_all(root.join("sys/fs/cgroup/vision")).unwrap();
    d.wait_for("vision recreated", Duration::from_secs(10), || {
        read(&root, "sys/fs/cgroup/vision/cpu.weight") == "200"
            && read(&root, "sys/fs/cgroup/vision/memory.high") == (200 * MIB).to_string()
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read(&root, high), (160 * MIB).to_string(), "{}", d.log());
    assert!(
        !d.log()
            .contains(&format!("memory.high old={} new=100", 160 * MIB)),
        "{}",
        d.log()
    );
    // The claimed group itself deleted: recreated with the claimed value.
    std::fs::remove_dir_all(root.join("sys/fs/cgroup/inference")).unwrap();
    d.wait_for(
        "inference recreated with its claim",
        Duration::from_secs(10),
        || {
            read(&root, "sys/fs/cgroup/inference/memory.max") == (1u64 << 30).to_string()
                && read(&root, high) == (160 * MIB).to_string()
        },
    );
    assert!(
        d.log()
            .contains("recreated with its baseline and live claims"),
        "{}",
        d.log()
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        read(&root, high),
        (100 * MIB).to_string(),
        "released at stop:\n{log}"
    );
}
