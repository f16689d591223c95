//! What the policy says is what the board holds: a value beyond the board
//! (a CPU it lacks, a frequency outside a cpufreq policy's hardware range, a
//! unit left out) is an error with its position and the board's range.
//! Plain `check` judges the file alone (it runs on a laptop); `check --root
//! DIR` judges it against that board's tree; `plan`, `apply`, `run` and a
//! reload judge it against the board they act on and refuse it (exit 1),
//! writing nothing, so no group is ever left on more CPUs than the policy
//! says.

use std::path::Path;
use std::time::Duration;

mod support;
use support::{read, Daemon, Start};

const BEYOND: &str = r#"version: 1
groups:
  inference:
    cpuset: { cpus: "4-9" }
system:
  cpufreq:
    policy4: { min: 12GHz }
"#;

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn check_judges_the_file_alone_and_check_root_the_board() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), BEYOND);
    // A laptop's CPUs are not the board's: plain check accepts it.
    let r = support::cgwarden(&["check", arg(&policy)]);
    assert_eq!(r.code, 0, "{r}");
    // The board's tree (8 CPUs, policy4 691.2MHz–2.4GHz) refuses both.
    let r = support::cgwarden(&["check", arg(&policy), "--root", arg(&root)]);
    assert_eq!(r.code, 1, "{r}");
    let file = policy.display();
    assert!(
        r.stderr.contains(&format!(
            "{file}:4:21: error: group `inference`: cpuset.cpus `4-9` names CPUs 8-9, which this board does not have (its CPUs are 0-7"
        )),
        "{r}"
    );
    assert!(
        r.stderr.contains(&format!(
            "{file}:7:21: error: cpufreq.policy4.min: 12GHz is above policy4's cpuinfo_max_freq 2.4GHz (its range is 691.2MHz–2.4GHz)"
        )),
        "{r}"
    );
}

#[test]
fn plan_apply_and_run_refuse_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::board(dir.path(), BEYOND);
    for cmd in ["plan", "apply"] {
        let r = support::cgwarden(&[cmd, arg(&policy), "--root", arg(&root)]);
        assert_eq!(r.code, 1, "{cmd}: {r}");
        assert!(r.stderr.contains("names CPUs 8-9"), "{cmd}: {r}");
        assert!(r.stdout.is_empty(), "{cmd} printed a plan: {r}");
    }
    assert!(!root.join("sys/fs/cgroup/inference").exists());
    assert!(!root.join("run/cgwarden/originals").exists());
    assert_eq!(
        read(
            &root,
            "sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq"
        ),
        "691200"
    );
    let r = support::run(
        support::cmd()
            .arg("run")
            .arg(&policy)
            .arg("--root")
            .arg(&root)
            .env("CGWARDEN_LOG", "info"),
    );
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stderr.contains("12GHz is above"), "{r}");
    assert!(!root.join("sys/fs/cgroup/inference").exists());
}

#[test]
fn a_frequency_without_its_unit_is_refused_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.yaml");
    std::fs::write(
        &p,
        "version: 1\nsystem:\n  cpufreq:\n    policy4: { min: 1200 }\nrules:\n  - name: r\n    when: running(x)\n    while: [\"set devfreq.gpu.min = 300\"]\n",
    )
    .unwrap();
    let r = support::cgwarden(&["check", arg(&p)]);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr.contains(":4:21: error: cpufreq.policy4.min: `1200` without a unit is 1200 kHz (cpufreq files count in kHz), below any CPU's range: write the unit, e.g. `1200MHz`"),
        "{r}"
    );
    assert!(
        r.stderr
            .contains(":8:36: error: rule `r`: devfreq.gpu.min: `300` without a unit is 300 Hz"),
        "{r}"
    );
}

#[test]
fn a_reload_beyond_the_board_is_refused_and_the_old_policy_holds() {
    let dir = tempfile::tempdir().unwrap();
    let good = "version: 1\ngroups:\n  inference:\n    cpuset: { cpus: \"4-7\" }\n";
    let (_t, policy, root) = support::board(dir.path(), good);
    let d = Daemon::start(&policy, &root, Start::default());
    assert_eq!(read(&root, "sys/fs/cgroup/inference/cpuset.cpus"), "4-7");
    std::fs::write(&policy, good.replace("4-7", "4-9")).unwrap();
    d.signal(libc::SIGHUP);
    d.wait_log(
        "reload refused: the policy in force",
        Duration::from_secs(10),
    );
    assert!(d.log().contains("names CPUs 8-9"), "{}", d.log());
    assert_eq!(read(&root, "sys/fs/cgroup/inference/cpuset.cpus"), "4-7");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_boost_beyond_the_board_is_refused_with_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = support::control_board(dir.path());
    let b = support::Board {
        tree: _t,
        root,
        policy,
    };
    let d = Daemon::on(&b);
    let r = support::run(&mut b.client(&["boost", "cpufreq.policy4.min=12GHz", "--for", "1m"]));
    assert_ne!(r.code, 0, "{r}");
    assert!(
        r.stderr
            .contains("12GHz is above policy4's cpuinfo_max_freq 2.4GHz"),
        "{r}"
    );
    let r = support::run(&mut b.client(&["boost", "cpufreq.policy4.min=1.8GHz", "--for", "1m"]));
    assert_eq!(r.code, 0, "{r}");
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}
