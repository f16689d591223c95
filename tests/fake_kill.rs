//! A SIGKILL in the middle of `apply` on a fake tree must leave a state that
//! `reset` restores exactly.
//!
//! A real kernel moves a process atomically; the fake tree emulates a move
//! with three plain files (the old and new group's `cgroup.procs` and
//! `/proc/PID/cgroup`). This test kills `apply --root` at random moments
//! while it places a thousand processes, runs `reset --root`, and requires
//! the whole tree — every directory, file and symlink — to be what it was
//! before: journal gone, no created group left, every process listed in its
//! original group only and `/proc/PID/cgroup` naming it.

use cgwarden::testing::{FakeProcess, FakeTree};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{tree_diff, tree_snapshot, BIN};

const PROCESSES: i32 = 1000;
const KILLS: usize = 30;
/// Fixed, so a failure can be reproduced; printed with the result.
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

const POLICY: &str = "version: 1
product: fake-kill
groups:
  realtime:
    cpu: { weight: 200 }
    pids: { max: 4096 }
  inference:
    memory: { high: 2G, max: 4G }
  vision:
    cpu: { weight: 150 }
  housekeeping:
    cpu: { weight: 10 }
    memory: { max: 1G }
placement:
  - match: { comm: \"rt_*\" }
    group: realtime
  - match: { comm: \"infer_*\" }
    group: inference
  - match: { cmdline: \"*camera*\" }
    group: vision
  - match: { comm: \"svc_*\" }
    group: housekeeping
system:
  sysctl:
    vm.swappiness: 30
";

/// Process `i`'s comm and whether a placement rule matches it (9 in 10 do).
fn process(i: i32) -> (FakeProcess, bool) {
    let pid = 1000 + i;
    let (comm, matched) = match i % 10 {
        0..=2 => (format!("rt_{i}"), true),
        3..=4 => (format!("infer_{i}"), true),
        5..=6 => (format!("cam_{i}"), true),
        7..=8 => (format!("svc_{i}"), true),
        _ => (format!("idle_{i}"), false),
    };
    let mut p = FakeProcess::new(pid, &comm);
    if comm.starts_with("cam_") {
        p.cmdline = vec!["/usr/bin/python3".into(), "/opt/camera/pipeline.py".into()];
    }
    (p, matched)
}

/// A fresh board with the thousand processes, all in the root group, and
/// the state directory the device's tmpfiles would create.
fn lay_out(dir: &Path) {
    let t = FakeTree::standard(dir).expect("lay out the fake board");
    let ps: Vec<FakeProcess> = (0..PROCESSES).map(|i| process(i).0).collect();
    t.add_processes(&ps).expect("lay out the processes");
    std::fs::create_dir_all(dir.join("run/cgwarden")).expect("state dir");
}

/// How many matching processes `/proc/PID/cgroup` shows outside the root.
fn placed(dir: &Path) -> usize {
    (0..PROCESSES)
        .filter(|&i| process(i).1)
        .filter(|&i| {
            let f = dir.join(format!("proc/{}/cgroup", 1000 + i));
            std::fs::read_to_string(&f)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
                .trim()
                != "0::/"
        })
        .count()
}

/// A scratch directory, on tmpfs when there is one: the test lays out 31
/// trees of ~8,000 files, which a loaded ext4 makes take minutes.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(t) = tempfile::Builder::new()
            .prefix("cgw-fake-kill")
            .tempdir_in(shm)
        {
            return t;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

fn xorshift(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

#[test]
fn sigkill_during_placement_then_reset_restores_the_tree() {
    let pol_dir = tempfile::tempdir().expect("tempdir");
    let policy = pol_dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("write policy");
    let matching = (0..PROCESSES).filter(|&i| process(i).1).count();

    // One undisturbed apply: it places every matching process, and its
    // duration bounds where placement can be.
    let full = {
        let tmp = scratch();
        lay_out(tmp.path());
        let t0 = Instant::now();
        let out = Command::new(BIN)
            .arg("apply")
            .arg(&policy)
            .arg("--root")
            .arg(tmp.path())
            .output()
            .expect("run cgwarden apply");
        let took = t0.elapsed();
        assert!(
            out.status.success(),
            "apply failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(placed(tmp.path()), matching, "apply placed every match");
        took
    };

    // The kill delay is drawn from a window that narrows onto placement:
    // a kill that found nothing placed yet raises its start, one that found
    // everything placed (or apply already gone) lowers its end.
    let (mut lo, mut hi) = (Duration::ZERO, full);
    let mut rng = SEED;
    let (mut mid, mut before_placement, mut after_placement) = (0, 0, 0);
    let mut restored = 0;
    let mut failures = Vec::new();
    for round in 0..KILLS {
        let tmp = scratch();
        let dir = tmp.path();
        lay_out(dir);
        let before = tree_snapshot(dir);

        let delay = lo + (hi - lo).mul_f64(xorshift(&mut rng));
        let mut child = Command::new(BIN)
            .arg("apply")
            .arg(&policy)
            .arg("--root")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cgwarden apply");
        std::thread::sleep(delay);
        let exited = child.try_wait().expect("poll apply").is_some();
        // Child::kill is SIGKILL.
        let _ = child.kill();
        let _ = child.wait();

        let n = placed(dir);
        if exited || n == matching {
            after_placement += 1;
            hi = hi.min(delay);
        } else if n == 0 {
            before_placement += 1;
            lo = lo.max(delay);
        } else {
            mid += 1;
        }

        let out = Command::new(BIN)
            .arg("reset")
            .arg("--policy")
            .arg(&policy)
            .arg("--root")
            .arg(dir)
            .output()
            .expect("run cgwarden reset");
        let diffs = tree_diff(&before, &tree_snapshot(dir));
        if out.status.success() && diffs.is_empty() {
            restored += 1;
        } else {
            let mut shown: Vec<String> = diffs.iter().take(8).cloned().collect();
            if diffs.len() > 8 {
                shown.push(format!("... {} more", diffs.len() - 8));
            }
            failures.push(format!(
                "round {round}: kill after {delay:?} ({n}/{matching} placed): reset exit {:?}\n  stderr: {}\n  {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim(),
                shown.join("\n  ")
            ));
        }
    }

    println!(
        "restored {restored}/{KILLS}, {mid} kills mid-placement ({before_placement} before, \
         {after_placement} after; undisturbed apply {full:?}; seed {SEED:#x})"
    );
    assert!(
        failures.is_empty(),
        "reset did not restore the tree after {} of {KILLS} kills:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        mid * 2 >= KILLS,
        "only {mid} of {KILLS} kills landed mid-placement: the test did not test placement"
    );
}
