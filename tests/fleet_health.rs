//! `cgwarden health` against the real daemon on
//! a fake root: exit 0 on a healthy run, 4 without a daemon, 1 (with the
//! reason) after a refused reload, after drift and after a write the kernel
//! refused — and the event records on the daemon's log carry their fields.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod support;
use support::{Daemon, Run, Start, BIN};

const POLICY: &str = r#"version: 1
product: health-test
groups:
  inference:
    memory: { high: 100M, max: 1G }
  vision:
    cpu: { weight: 200 }
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set vision.cpu.weight = 300
"#;

fn health(root: &Path, policy: &Path, json: bool) -> Run {
    let mut c = Command::new(BIN);
    c.arg("health")
        .arg("--policy")
        .arg(policy)
        .arg("--root")
        .arg(root);
    if json {
        c.arg("--json");
    }
    support::run(&mut c)
}

fn start(
    dir: &Path,
) -> (
    cgwarden::testing::FakeTree,
    std::path::PathBuf,
    std::path::PathBuf,
    Daemon,
) {
    let (t, policy, root) = support::board(dir, POLICY);
    support::apply(&policy, &root);
    support::memory_events(&root, "inference", 0);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    (t, policy, root, d)
}

fn wait_health(d: &Daemon, root: &Path, policy: &Path, code: i32) -> Run {
    let mut last = None;
    d.wait_for(
        &format!("health exit {code}"),
        Duration::from_secs(10),
        || {
            let r = health(root, policy, false);
            let ok = r.code == code;
            last = Some(r);
            ok
        },
    );
    last.unwrap()
}

#[test]
fn healthy_is_0_and_no_daemon_is_4() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), POLICY);
    let r = health(&root, &policy, false);
    assert_eq!(r.code, 4, "{r}");
    assert!(r.stderr.contains("no daemon answers"), "{r}");
    support::apply(&policy, &root);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    let r = health(&root, &policy, false);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.starts_with("healthy: policy "), "{r}");
    let j = health(&root, &policy, true);
    assert_eq!(j.code, 0, "{j}");
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["healthy"], true, "{v}");
    assert_eq!(v["reasons"], serde_json::json!([]), "{v}");
    assert_eq!(v["hash"], v["disk_hash"], "{v}");
    assert_eq!(v["hash"].as_str().unwrap().len(), 64, "{v}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_refused_reload_is_1_until_the_policy_in_force_is_back_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root, d) = start(dir.path());
    assert_eq!(health(&root, &policy, false).code, 0);
    // The update installs a broken policy: the daemon refuses it (the file
    // watch reloads), the old one keeps running.
    std::fs::write(&policy, POLICY.replace("weight: 200", "wieght: 200")).unwrap();
    // Unhealthy at once (the file on disk is not in force), then with the
    // refusal once the daemon has tried it.
    let mut last = None;
    d.wait_for("health naming the refusal", Duration::from_secs(10), || {
        let r = health(&root, &policy, false);
        let done = r.code == 1 && r.stderr.contains("the last reload failed");
        last = Some(r);
        done
    });
    let r = last.unwrap();
    assert!(
        r.stderr
            .contains("cgwarden: unhealthy: the last reload failed: ")
            && r.stderr.contains("unknown field `wieght`"),
        "{r}"
    );
    assert!(
        r.stderr.contains("is not the one in force") && r.stderr.contains("it was refused"),
        "{r}"
    );
    // Rolled back: the old file again; its content is the policy in force,
    // and the refusal is over.
    std::fs::write(&policy, POLICY).unwrap();
    let r = wait_health(&d, &root, &policy, 0);
    assert!(r.stdout.starts_with("healthy"), "{r}");
    // A good new policy: healthy once it is in force.
    std::fs::write(&policy, POLICY.replace("weight: 200", "weight: 250")).unwrap();
    d.wait_for("the new baseline", Duration::from_secs(10), || {
        support::read(&root, "sys/fs/cgroup/vision/cpu.weight") == "250"
    });
    wait_health(&d, &root, &policy, 0);
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    // The reload and its refusal were event records on the log.
    assert!(
        log.contains("policy reload refused")
            && log.contains("message_id=\"8465b6a187534c3989ce70d63a9efd70\""),
        "{log}"
    );
}

#[test]
fn drift_is_1_and_stays_1_until_a_new_policy_is_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root, d) = start(dir.path());
    assert_eq!(health(&root, &policy, false).code, 0);
    // Someone else writes a managed knob.
    std::fs::write(root.join("sys/fs/cgroup/vision/cpu.weight"), "999\n").unwrap();
    let r = health(&root, &policy, false);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr.contains("1 drift seen since ")
            && r.stderr.contains("vision.cpu.weight: expected 200")
            && r.stderr.contains("holds 999 instead"),
        "{r}"
    );
    // Put back: no drift now, but drift was seen since the policy was loaded.
    std::fs::write(root.join("sys/fs/cgroup/vision/cpu.weight"), "200\n").unwrap();
    let r = health(&root, &policy, false);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stderr.contains("1 drift seen"), "{r}");
    // A new policy put in force starts the count again.
    std::fs::write(&policy, POLICY.replace("high: 100M", "high: 120M")).unwrap();
    wait_health(&d, &root, &policy, 0);
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("drift on vision.cpu.weight")
            && log.contains("message_id=\"a7666fd3ebc847aab5aa4ec71b2d21d6\""),
        "{log}"
    );
}

#[test]
fn a_write_the_kernel_refused_is_1_and_events_are_structured_records() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root, d) = start(dir.path());
    assert_eq!(health(&root, &policy, false).code, 0);
    // The knob's file cannot be written (a directory in its place: the
    // write fails with EISDIR), then the rule claims it.
    let knob = root.join("sys/fs/cgroup/vision/cpu.weight");
    std::fs::remove_file(&knob).unwrap();
    std::fs::create_dir(&knob).unwrap();
    support::memory_events(&root, "inference", 1);
    d.wait_log(
        "write of vision.cpu.weight = 300 by rule oom-seen failed",
        Duration::from_secs(10),
    );
    // The file back with the baseline: nothing drifts now.
    std::fs::remove_dir(&knob).unwrap();
    std::fs::write(&knob, "200\n").unwrap();
    d.wait_log("rule oom-seen idle", Duration::from_secs(10));
    let r = health(&root, &policy, false);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr.contains("refused by the kernel since")
            && r.stderr
                .contains("vision.cpu.weight = 300 by rule oom-seen"),
        "{r}"
    );
    assert!(!r.stderr.contains("drift"), "{r}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    // Each event is one record with its fields (journald gets the same
    // fields, upper-cased: MESSAGE_ID=, CGWARDEN_RULE=, …).
    let fired = log
        .lines()
        .find(|l| l.contains("rule oom-seen active"))
        .unwrap_or_else(|| panic!("no rule record in\n{log}"));
    for field in [
        "message_id=\"1122b142d8ff40ce86670a70fbecdcca\"",
        "cgwarden_event=\"rule\"",
        "cgwarden_rule=\"oom-seen\"",
        "cgwarden_state=\"active\"",
    ] {
        assert!(fired.contains(field), "{field} missing: {fired}");
    }
    assert!(!fired.contains("cgwarden_knob"), "no empty fields: {fired}");
    let failed = log
        .lines()
        .find(|l| l.contains("write of vision.cpu.weight = 300"))
        .unwrap();
    for field in [
        "WARN",
        "message_id=\"afe3d479b2304e37900c209cac1434df\"",
        "cgwarden_knob=\"vision.cpu.weight\"",
        "cgwarden_new=\"300\"",
        "cgwarden_cause=\"rule oom-seen\"",
    ] {
        assert!(failed.contains(field), "{field} missing: {failed}");
    }
}

/// packaging/ota/cgwarden-policy-update, the flow docs/operations.md shows
/// for RAUC, Mender and SWUpdate, against the daemon.
fn update(root: &Path, live: &Path, new: &Path) -> Run {
    support::run(
        Command::new("sh")
            .arg(support::repo("packaging/ota/cgwarden-policy-update"))
            .arg(new)
            .env("LIVE", live)
            .env("SETTLE", "1")
            .env("CGWARDEN", BIN)
            .env(
                "CGWARDEN_OPTS",
                format!("--policy {} --root {}", live.display(), root.display()),
            ),
    )
}

#[test]
fn the_ota_update_flow_commits_a_good_policy_and_rolls_back_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root, d) = start(dir.path());
    let new = dir.path().join("policy.yaml.staged");
    // A broken policy never reaches the daemon.
    std::fs::write(&new, POLICY.replace("weight: 200", "wieght: 200")).unwrap();
    let r = update(&root, &policy, &new);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr
            .contains("refused by cgwarden check; nothing installed"),
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), POLICY);
    // A good one is installed, judged healthy and committed.
    let good = POLICY.replace("weight: 200", "weight: 250");
    std::fs::write(&new, &good).unwrap();
    let r = update(&root, &policy, &new);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stderr.contains("committed"), "{r}");
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), good);
    assert!(!dir.path().join("policy.yaml.previous").exists());
    assert_eq!(
        support::read(&root, "sys/fs/cgroup/vision/cpu.weight"),
        "250"
    );
    // One whose write the kernel refuses: unhealthy, rolled back.
    let knob = root.join("sys/fs/cgroup/inference/memory.high");
    std::fs::remove_file(&knob).unwrap();
    std::fs::create_dir(&knob).unwrap();
    let bad = good.replace("high: 100M", "high: 150M");
    std::fs::write(&new, &bad).unwrap();
    let r = update(&root, &policy, &new);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr.contains("write refused by the kernel")
            && r.stderr.contains("rolling back: unhealthy with"),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(&policy).unwrap(),
        good,
        "the old file is back"
    );
    assert!(!dir.path().join("policy.yaml.previous").exists());
    let j = health(&root, &policy, true);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(
        v["hash"], v["disk_hash"],
        "the daemon runs the old policy again: {v}"
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}
