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

// ---- Item 2 (RT by renaming) and item 4 (a 10 MB cmdline): placement ----

fn placement_root(
    dir: &Path,
    policy_text: &str,
) -> (FakeTree, std::path::PathBuf, std::path::PathBuf) {
    let root = dir.join("root");
    let t = FakeTree::standard(&root).unwrap();
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, policy_text).unwrap();
    (t, root, policy)
}

const RT_BY_NAME: &str = "version: 1\nproduct: t\ngroups:\n  realtime: {}\nplacement:\n  - match: { comm: motion_control }\n    group: realtime\n    sched: { policy: fifo, priority: 99 }\n";

/// Item 2: `check` warns (exit 0) on an RT sched granted on a name-only
/// match; naming the exe silences it.
#[test]
fn check_warns_on_rt_granted_by_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, RT_BY_NAME).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cgwarden"))
        .arg("check")
        .arg(&policy)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let want = format!("{}:6:5: warning: ", policy.display());
    assert!(err.contains(&want), "want {want}:\n{err}");
    assert!(err.contains("fifo") && err.contains("exe:"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::write(
        &policy,
        RT_BY_NAME.replace(
            "{ comm: motion_control }",
            "{ comm: motion_control, exe: /usr/bin/motion_control }",
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cgwarden"))
        .arg("check")
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Item 2: an unprivileged process renamed to an RT-granted comm is placed
/// in the group but not given the RT policy; the refusal is logged once
/// for that pid however many scans see it; root's process is not refused.
#[test]
fn rt_by_name_is_refused_to_an_unprivileged_process_once() {
    use cgwarden::kernel::fake_tree::FakeProcess;
    let dir = tempfile::tempdir().unwrap();
    let (t, root, policy) = placement_root(dir.path(), RT_BY_NAME);
    t.add_process(&FakeProcess {
        uid: 1000,
        ..FakeProcess::new(400, "motion_control")
    })
    .unwrap();
    t.add_process(&FakeProcess::new(401, "motion_control"))
        .unwrap();
    let d = Daemon::start(&policy, &root, Start::default());
    let refusal = "placement refused: pid 400 (motion_control) sched fifo: not granted";
    d.wait_log(refusal, Duration::from_secs(20));
    // Ten more tick scans see it again.
    std::thread::sleep(Duration::from_millis(1000));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches(refusal).count(), 1, "said once:\n{log}");
    assert!(log.contains("uid is 1000"), "{log}");
    assert!(
        !log.contains("pid 401 (motion_control) sched fifo: not granted"),
        "{log}"
    );
    assert_eq!(read(&root, "proc/400/cgroup"), "0::/realtime");
}

/// Item 4: a 10 MB command line is read up to 64 KiB and matched on that
/// prefix; once matched, a scan does not read it again (timing-free: the
/// process rewrites its command line to one that no longer matches and is
/// moved out by hand — the next scan moves it back from what it knew).
#[test]
fn a_10mb_cmdline_is_read_capped_and_not_reread_by_scans() {
    use cgwarden::kernel::fake_tree::FakeProcess;
    let dir = tempfile::tempdir().unwrap();
    let (t, root, policy) = placement_root(
        dir.path(),
        "version: 1\nproduct: t\ngroups:\n  vision: {}\nplacement:\n  - match: { cmdline: \"python3 /srv/camera_pipeline.py *\" }\n    group: vision\n",
    );
    t.add_process(&FakeProcess::new(600, "python3")).unwrap();
    let mut big = b"python3\0/srv/camera_pipeline.py\0".to_vec();
    big.resize(10 * 1024 * 1024, b'A');
    let cmdline = root.join("proc/600/cmdline");
    std::fs::write(&cmdline, &big).unwrap();
    let capped = cgwarden::kernel::procfs::read_capped(
        &cgwarden::kernel::Root::fake(&root),
        Path::new("/proc/600/cmdline"),
        cgwarden::kernel::procfs::CMDLINE_MAX,
    )
    .unwrap();
    assert_eq!(capped.len(), 64 * 1024);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("placed on the prefix", Duration::from_secs(20), || {
        read(&root, "proc/600/cgroup") == "0::/vision"
    });
    // Rewritten (same pid, start time and comm) and moved out by hand.
    std::fs::write(&cmdline, b"python3\0other.py\0").unwrap();
    std::fs::write(root.join("proc/600/cgroup"), "0::/\n").unwrap();
    std::fs::write(root.join("sys/fs/cgroup/vision/cgroup.procs"), "").unwrap();
    d.wait_for(
        "moved back from the cached match",
        Duration::from_secs(20),
        || read(&root, "proc/600/cgroup") == "0::/vision",
    );
    // A rename (a new comm) is a change: re-read, no longer matches.
    std::fs::write(root.join("proc/600/comm"), "python3.11\n").unwrap();
    std::fs::write(root.join("proc/600/cgroup"), "0::/\n").unwrap();
    std::fs::write(root.join("sys/fs/cgroup/vision/cgroup.procs"), "").unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(read(&root, "proc/600/cgroup"), "0::/", "{log}");
}
