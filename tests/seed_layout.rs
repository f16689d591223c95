//! The seed's layout as written — `realtime`, `inference`, `vision` and
//! `system` groups, `host.` for the whole machine — checks, plans, applies
//! and runs on a fake board (`policies/seed-layout.yaml`, shown in
//! docs/cookbook.md). The x86 guest runs the same layout, scaled to its four
//! CPUs, on a real kernel (tests/vm/guest/policies/vision-cell-4cpu.yaml in
//! scenarios 30-apply, 40-placement, 50-converged, 60-oom and 70-reset).

use cgwarden::testing::FakeProcess;
use std::time::Duration;

mod support;
use support::{memory_events, read, Daemon, Start};

/// The shipped policy, with its `logger` hook swapped for `/bin/true` so
/// the test writes nothing to this machine's syslog (hooks run for real
/// under `--root`).
fn seed_policy() -> String {
    let text = std::fs::read_to_string(support::repo("policies/seed-layout.yaml")).unwrap();
    assert!(text.contains("/usr/bin/logger"), "the hook the test swaps");
    text.replace(
        r#"["/usr/bin/logger", "-t", "cgwarden", "{rule} {event}: {metric}={value}"]"#,
        r#"["/bin/true"]"#,
    )
}

#[test]
fn the_seed_layout_checks_as_written() {
    let r = support::cgwarden(&["check", &support::repo("policies/seed-layout.yaml")]);
    assert_eq!(r.code, 0, "{r}");
}

#[test]
fn the_seed_layout_plans_applies_and_runs_with_a_system_group() {
    let dir = tempfile::tempdir().unwrap();
    let (tree, policy, root) = support::board(dir.path(), &seed_policy());
    tree.add_process(&FakeProcess::new(700, "sshd")).unwrap();

    let plan = support::run(
        support::cmd()
            .arg("plan")
            .arg(&policy)
            .arg("--root")
            .arg(&root),
    );
    assert_eq!(plan.code, 0, "{plan}");
    for line in [
        "MKDIR /sys/fs/cgroup/system",
        "WRITE /sys/fs/cgroup/system/cpuset.cpus 0-1",
        "WRITE /sys/fs/cgroup/system/memory.max 1073741824",
        "WRITE /sys/fs/cgroup/system/cgroup.procs 700",
    ] {
        assert!(
            plan.stdout.lines().any(|l| l.starts_with(line)),
            "plan lacks `{line}`:\n{plan}"
        );
    }

    support::apply(&policy, &root);
    assert_eq!(read(&root, "sys/fs/cgroup/system/memory.max"), "1073741824");
    assert_eq!(read(&root, "sys/fs/cgroup/system/cgroup.procs"), "700");

    // The daemon: a rule on the `system` group's memory events fires.
    let d = Daemon::start(&policy, &root, Start::default());
    memory_events(&root, "system", 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read(&root, "proc/sys/vm/swappiness"), "30");
    memory_events(&root, "system", 1);
    d.wait_for(
        "rule system-oom to raise vm.swappiness",
        Duration::from_secs(10),
        || read(&root, "proc/sys/vm/swappiness") == "60",
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

/// `system.` where no group is called `system` means the machine: `check`
/// points at `host.`.
#[test]
fn system_metrics_without_a_system_group_suggest_host() {
    let dir = tempfile::tempdir().unwrap();
    for (when, hint) in [
        (
            "system.memory.some.avg10 > 10%",
            "unknown group `system`, did you mean `host.memory.some.avg10` (the whole machine)?",
        ),
        (
            "system.memory.available < 1G",
            "did you mean `host.memory.available`?",
        ),
    ] {
        let p = dir.path().join("p.yaml");
        std::fs::write(
            &p,
            format!(
                "version: 1\ngroups:\n  app: {{}}\nrules:\n  - name: r\n    when: {when}\n    then: [compact memory]\n"
            ),
        )
        .unwrap();
        let r = support::cgwarden(&["check", p.to_str().unwrap()]);
        assert_eq!(r.code, 1, "{when}: {r}");
        assert!(r.stderr.contains(hint), "{when}: {r}");
        assert!(r.stderr.contains(":6:11: error:"), "{when}: {r}");
    }
}
