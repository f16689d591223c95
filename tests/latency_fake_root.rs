//! Latency QoS on a fake tree (docs/latency.md): the real
//! binary with `--root`. Per-CPU resume latencies are written in the
//! kernel's encoding and restored by `reset`; `latency.global` is held by
//! the daemon only (`DIR/dev/cpu_dma_latency` holds the 4-byte value while
//! a request is held, and is gone when none is); smallest claim wins.

use cgwarden::testing::FakeProcess;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod support;
use support::{read, Daemon, Run, Start, BIN};

const DMA: &str = "dev/cpu_dma_latency";

fn resume(cpu: u32) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// The held global request: `None` when no file stands for one.
fn held(root: &Path) -> Option<i32> {
    let b = std::fs::read(root.join(DMA)).ok()?;
    Some(i32::from_ne_bytes(b.get(..4)?.try_into().ok()?))
}

fn cgw(args: &[&str], root: &Path) -> Run {
    support::run(Command::new(BIN).args(args).arg("--root").arg(root))
}

const RULE_ONLY: &str = r#"version: 1
product: latency-test
control:
  - uid: 1000                       # latency knobs are in the closed set: grantable
    boost: ["latency.*", "latency.cpu7", "latency.global"]
    max_duration: 1h
groups:
  rt:
    cpuset: { cpus: "7" }
system:
  latency:
    cpus: { "7": 0us, "3": 50us }
rules:
  # Listed first: were the merge first-wins, its 30us would beat 0us.
  - name: servo-running
    when: running(servo_loop)
    while:
      - set latency.global = 30us
  - name: cyclictest-running
    when: running(cyclictest)
    while:
      - set latency.global = 0us
      - set latency.cpu2 = 20us
"#;

#[test]
fn running_rule_holds_the_global_request_while_its_process_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), RULE_ONLY);
    let p = policy.to_str().unwrap();

    // plan: the per-CPU writes in the kernel's encoding (0us is `n/a`).
    let o = cgw(&["plan", p], &root);
    assert_eq!(o.code, 0, "{o}");
    let out = &o.stdout;
    assert!(
        out.contains(
            "WRITE /sys/devices/system/cpu/cpu7/power/pm_qos_resume_latency_us n/a (was 0)"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "WRITE /sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us 50 (was 0)"
        ),
        "{out}"
    );

    let d = Daemon::start(&policy, &root, Start::default());
    assert_eq!(read(&root, &resume(7)), "n/a");
    assert_eq!(read(&root, &resume(3)), "50");
    assert_eq!(held(&root), None, "no request before anything wants one");

    t.add_process(&FakeProcess::new(1000, "cyclictest"))
        .unwrap();
    d.wait_for(
        "0us held while cyclictest runs",
        Duration::from_secs(20),
        || held(&root) == Some(0) && read(&root, &resume(2)) == "20",
    );
    // A second, larger claim does not loosen it: the smallest wins.
    t.add_process(&FakeProcess::new(1001, "servo_loop"))
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(held(&root), Some(0));
    std::fs::remove_dir_all(root.join("proc/1000")).unwrap();
    d.wait_for(
        "30us once cyclictest is gone",
        Duration::from_secs(20),
        || held(&root) == Some(30) && read(&root, &resume(2)) == "0",
    );
    std::fs::remove_dir_all(root.join("proc/1001")).unwrap();
    d.wait_for("request closed after both", Duration::from_secs(20), || {
        held(&root).is_none()
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("request held open"), "{log}");
    assert!(log.contains("request closed"), "{log}");

    // reset puts the per-CPU files back ("0": no constraint).
    let o = cgw(&["reset"], &root);
    assert_eq!(o.code, 0, "{o}");
    for cpu in [2, 3, 7] {
        assert_eq!(read(&root, &resume(cpu)), "0", "cpu{cpu}");
    }
    assert_eq!(held(&root), None);
}

const BASELINE: &str = r#"version: 1
product: latency-baseline
system:
  latency:
    global: 100us
rules:
  - name: cyclictest-running
    when: running(cyclictest)
    while:
      - set latency.global = 0us
"#;

#[test]
fn baseline_request_is_held_by_the_daemon_only() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), BASELINE);
    let p = policy.to_str().unwrap();

    // apply cannot hold a request: it says so and writes nothing for it.
    let o = cgw(&["apply", p], &root);
    assert_eq!(o.code, 0, "{o}");
    let err = &o.stderr;
    assert!(err.contains("held only by the daemon"), "{o}");
    assert_eq!(held(&root), None);

    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("baseline 100us held", Duration::from_secs(20), || {
        held(&root) == Some(100)
    });
    t.add_process(&FakeProcess::new(1000, "cyclictest"))
        .unwrap();
    d.wait_for("0us while cyclictest runs", Duration::from_secs(20), || {
        held(&root) == Some(0)
    });
    std::fs::remove_dir_all(root.join("proc/1000")).unwrap();
    d.wait_for("back to the baseline", Duration::from_secs(20), || {
        held(&root) == Some(100)
    });
    // A clean stop closes the request.
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(held(&root), None, "{log}");
}

#[test]
fn boost_tied_to_a_command_holds_a_cpu_latency_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), RULE_ONLY);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    let file = root.join(resume(5));
    // The boost's write is made by a writer lane right after the reply that
    // starts CMD: wait (up to 5 s) for it while CMD runs, then record.
    let script = format!(
        "for i in $(seq 50); do [ \"$(cat {f})\" = n/a ] && break; sleep 0.1; done; cat {f} > {d}/seen",
        f = file.display(),
        d = dir.path().display()
    );
    let o = support::run(
        Command::new(BIN)
            .arg("boost")
            .arg("--policy")
            .arg(&policy)
            .arg("--root")
            .arg(&root)
            .args(["latency.cpu5=0us", "--for", "1h", "--", "sh", "-c", &script]),
    );
    assert_eq!(o.code, 0, "{o}");
    assert_eq!(
        read(dir.path(), "seen"),
        "n/a",
        "held while the command ran"
    );
    d.wait_for("back to no constraint", Duration::from_secs(5), || {
        read(&root, &resume(5)) == "0"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}
