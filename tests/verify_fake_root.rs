//! `verify`, `health` and the drift guard see every file cgwarden holds,
//! not only the knobs of the engine's table: the realtime switch's files
//! (`timer_migration`, `rcu_expedited`, IRQ affinities, cpuidle states, the
//! workqueue cpumask), zram's compressor and the per-process attributes of
//! placed processes. A drift counts once, however often it is seen.

use cgwarden::testing::FakeProcess;
use std::path::Path;
use std::time::Duration;

mod support;
use support::{Board, Daemon, Start};

fn write(root: &Path, rel: &str, text: &str) {
    std::fs::write(root.join(rel), format!("{text}\n")).unwrap();
}

fn verify(b: &Board) -> support::Run {
    support::run(&mut b.client(&["verify"]))
}

fn health(b: &Board) -> support::Run {
    support::run(&mut b.client(&["health"]))
}

#[test]
fn verify_sees_the_realtime_switch_irqs_and_the_governor() {
    let dir = tempfile::tempdir().unwrap();
    let policy = std::fs::read_to_string(support::repo("policies/qcs6490-rt.yaml")).unwrap();
    let b = Board::new(dir.path(), &policy);
    let d = Daemon::on(&b);
    let r = verify(&b);
    assert_eq!(r.code, 0, "converged, nothing drifted: {r}");
    let root = &b.root;
    write(root, "proc/sys/kernel/timer_migration", "1");
    write(root, "sys/kernel/rcu_expedited", "0");
    write(root, "proc/irq/24/smp_affinity_list", "0-7");
    write(
        root,
        "sys/devices/system/cpu/cpu7/cpuidle/state2/disable",
        "0",
    );
    write(root, "sys/devices/virtual/workqueue/cpumask", "ff");
    write(
        root,
        "sys/devices/system/cpu/cpufreq/policy7/scaling_governor",
        "schedutil",
    );
    let r = verify(&b);
    assert_eq!(r.code, 1, "{r}");
    for want in [
        "DRIFT /proc/sys/kernel/timer_migration",
        "DRIFT /sys/kernel/rcu_expedited",
        "DRIFT /proc/irq/24/smp_affinity_list",
        "DRIFT /sys/devices/system/cpu/cpu7/cpuidle/state2/disable",
        "DRIFT /sys/devices/virtual/workqueue/cpumask",
        "DRIFT cpufreq.policy7.governor",
    ] {
        assert!(r.stdout.contains(want), "lacks `{want}`:\n{r}");
    }
    assert!(r.stdout.contains(", 6 drifted"), "{r}");
    // `health` counts each drift once, however many checks saw it.
    let h = health(&b);
    assert_eq!(h.code, 1, "{h}");
    assert!(
        h.stdout.contains("6 drifts seen") || h.stderr.contains("6 drifts seen"),
        "{h}"
    );
    verify(&b);
    let h = health(&b);
    assert!(
        h.stdout.contains("6 drifts seen") || h.stderr.contains("6 drifts seen"),
        "{h}"
    );
    // Put back by hand, it is no longer drift; drifting again is a new one.
    write(root, "sys/kernel/rcu_expedited", "1");
    verify(&b);
    write(root, "sys/kernel/rcu_expedited", "0");
    verify(&b);
    let h = health(&b);
    assert!(
        h.stdout.contains("7 drifts seen") || h.stderr.contains("7 drifts seen"),
        "{h}"
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn the_drift_guard_restores_zram_and_a_placed_processs_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let policy = r#"version: 1
settings:
  drift: { interval: 1s, on_drift: restore }
groups:
  app: {}
placement:
  - match: { comm: worker }
    group: app
    oom_score_adj: -500
system:
  zram:
    zram0: { algorithm: lz4, size: 256M }
"#;
    let (tree, policy, root) = support::board(dir.path(), policy);
    tree.add_process(&FakeProcess::new(900, "worker")).unwrap();
    let d = Daemon::start(&policy, &root, Start::default());
    let adj = "proc/900/oom_score_adj";
    let alg = "sys/block/zram0/comp_algorithm";
    d.wait_for(
        "the placement's oom_score_adj",
        Duration::from_secs(10),
        || support::read(&root, adj) == "-500",
    );
    // The file reads as a kernel's does: the offered list, the one in use
    // in brackets.
    let selected = |root: &Path| {
        let text = support::read(root, alg);
        text.split_whitespace()
            .find_map(|t| t.strip_prefix('[').and_then(|t| t.strip_suffix(']')))
            .map(str::to_string)
            .unwrap_or(text)
    };
    assert_eq!(selected(&root), "lz4");
    write(&root, adj, "0");
    write(&root, alg, "lzo lzo-rle lz4 lz4hc [zstd]");
    d.wait_for("both restored", Duration::from_secs(10), || {
        support::read(&root, adj) == "-500" && selected(&root) == "lz4"
    });
    let log = d.log();
    assert!(log.contains("drift"), "{log}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}
