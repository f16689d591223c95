//! Hostile and careless input that must never be turned against the box
//! (issue 10, SPEC §4 "Trust"). Each case names the item it covers; all run
//! the real binary against fake trees.

use cgwarden::kernel::fake_tree::FakeTree;
use std::path::Path;
use std::time::Duration;

mod support;
use support::{Daemon, Start};

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn pressure(root: &Path, total: u64) {
    std::fs::write(
        root.join("sys/fs/cgroup/app/memory.pressure"),
        format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
    )
    .unwrap();
}

/// Item 5: a PSI `total=` jump to 2^64-1 once fired a stall rule, raised
/// `pids.max` and ran a hook with an absurd value. It is ignored (logged
/// once); real stall afterwards still fires.
#[test]
fn psi_total_wraparound_is_never_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let _t = FakeTree::standard(&root).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\ngroups:\n  app:\n    pids: { max: 100 }\nrules:\n  - name: stall\n    when: app.memory.some > 100ms/1s\n    then: [\"raise app.pids.max by 10 up to 200\"]\n    cooldown: 1h\n",
    )
    .unwrap();
    support::apply(&policy, &root);
    pressure(&root, 1_000);
    let d = Daemon::start(&policy, &root, Start::default());
    std::thread::sleep(Duration::from_millis(400));
    pressure(&root, u64::MAX);
    d.wait_log("ignored as implausible", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        read(&root, "sys/fs/cgroup/app/pids.max"),
        "100",
        "{}",
        d.log()
    );
    // A plausible stall after the jump (500 ms within ~half a second) does fire.
    let base = u64::MAX - 600_000;
    pressure(&root, base);
    std::thread::sleep(Duration::from_millis(500));
    pressure(&root, base + 500_000);
    d.wait_for("the real stall fires", Duration::from_secs(10), || {
        read(&root, "sys/fs/cgroup/app/pids.max") == "110"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log.matches("ignored as implausible").count(),
        1,
        "said once:\n{log}"
    );
}
