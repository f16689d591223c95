//! Hot reload of the running daemon on a fake tree: SIGHUP with
//! a broken policy changes nothing; SIGHUP with a new group and a changed
//! baseline creates the one and writes the other; an editor's
//! rename-replace of the policy file reloads without a signal.

use cgwarden::testing::{FakeProcess, FakeTree};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;
use support::{read, Daemon, Start};

const MIB: u64 = 1 << 20;

const POLICY: &str = r#"version: 1
product: reload
groups:
  inference:
    memory: { high: 100M, max: 1G }
  vision:
    memory: { high: 200M }
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set sysctl.kernel.sched_rt_runtime_us = -1
    hold: 1h
"#;

fn setup(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    support::board(dir, POLICY)
}

/// Every directory and file under `sys` and `proc` with its content.
fn kernel_files(root: &Path) -> BTreeMap<PathBuf, String> {
    support::text_snapshot(root, |rel| {
        rel.starts_with("sys") || rel.starts_with("proc")
    })
}

#[test]
fn a_broken_policy_on_sighup_changes_nothing_and_names_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = Daemon::start(&policy, &root, Start::default());
    std::thread::sleep(Duration::from_millis(300));
    let before = kernel_files(&root);
    // A typo and a new group in the same file: nothing of it may happen.
    std::fs::write(
        &policy,
        POLICY.replace(
            "  vision:\n    memory: { high: 200M }",
            "  vision:\n    memroy: { high: 300M }\n  camera:\n    memory: { high: 50M }",
        ),
    )
    .unwrap();
    d.signal(libc::SIGHUP);
    d.wait_log(
        "reload refused: the policy in force",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(300));
    let log = d.log();
    assert!(
        log.contains(&format!("{}:", policy.display())) && log.contains("memroy"),
        "the error names FILE:LINE and the field:\n{log}"
    );
    assert_eq!(
        kernel_files(&root),
        before,
        "a refused reload wrote something"
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("writes=0"), "no knob write at all:\n{log}");
}

#[test]
fn sighup_creates_a_new_group_and_writes_a_changed_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = Daemon::start(&policy, &root, Start::default());
    assert_eq!(
        read(&root, "sys/fs/cgroup/vision/memory.high"),
        (200 * MIB).to_string()
    );
    let inference_max = read(&root, "sys/fs/cgroup/inference/memory.max");
    std::fs::write(
        &policy,
        POLICY.replace(
            "    memory: { high: 200M }",
            "    memory: { high: 300M }\n  camera:\n    memory: { high: 50M }",
        ),
    )
    .unwrap();
    d.signal(libc::SIGHUP);
    d.wait_for(
        "camera created, vision changed",
        Duration::from_secs(10),
        || {
            read(&root, "sys/fs/cgroup/camera/memory.high") == (50 * MIB).to_string()
                && read(&root, "sys/fs/cgroup/vision/memory.high") == (300 * MIB).to_string()
        },
    );
    let log = d.log();
    for want in ["reload: + group camera", "reload: ~ vision.memory.high"] {
        assert!(log.contains(want), "{want:?} not in the log:\n{log}");
    }
    assert_eq!(
        read(&root, "sys/fs/cgroup/inference/memory.max"),
        inference_max,
        "an unchanged knob stays"
    );
    // The mkdir is journalled, so `reset` removes the new group.
    let journal = read(&root, "run/cgwarden/originals");
    assert!(journal.contains("sys/fs/cgroup/camera"), "{journal}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn an_editor_rename_replace_reloads_without_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = Daemon::start(&policy, &root, Start::default());
    // As vim/emacs/sed -i save: write a temp file beside it, rename over it.
    let tmp = dir.path().join(".policy.yaml.swp");
    std::fs::write(&tmp, POLICY.replace("high: 200M", "high: 250M")).unwrap();
    std::fs::rename(&tmp, &policy).unwrap();
    d.wait_for(
        "vision.memory.high rewritten",
        Duration::from_secs(10),
        || read(&root, "sys/fs/cgroup/vision/memory.high") == (250 * MIB).to_string(),
    );
    assert!(
        d.log().contains("policy file changed: reloading"),
        "{}",
        d.log()
    );
    // The same content written again: no second reload.
    std::fs::write(&policy, POLICY.replace("high: 200M", "high: 250M")).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let reloads = d.log().matches("reload: done").count();
    assert_eq!(reloads, 1, "{}", d.log());
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_reload_swaps_the_placement_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = setup(dir.path());
    let placed =
        |g: &str| format!("{POLICY}placement:\n  - match: {{ comm: camd }}\n    group: {g}\n");
    std::fs::write(&policy, placed("inference")).unwrap();
    t.add_process(&FakeProcess::new(400, "camd")).unwrap();
    let d = Daemon::start(&policy, &root, Start::default());
    let cgroup = || read(&root, "proc/400/cgroup");
    d.wait_for("camd in inference", Duration::from_secs(20), || {
        cgroup() == "0::/inference"
    });
    std::fs::write(&policy, placed("vision")).unwrap();
    d.signal(libc::SIGHUP);
    // The swap rescans: the running process moves under the new rule.
    d.wait_for("camd moved to vision", Duration::from_secs(20), || {
        cgroup() == "0::/vision"
    });
    // A process that appears later is placed by the new rules too.
    t.add_process(&FakeProcess::new(401, "camd")).unwrap();
    d.wait_for("new camd in vision", Duration::from_secs(20), || {
        read(&root, "proc/401/cgroup") == "0::/vision"
    });
    assert!(
        d.log().contains("reload: ~ placement: 1 rule"),
        "{}",
        d.log()
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}
