//! The fake board: the standard fake tree of `cgwarden::testing::FakeTree`
//! with a policy beside it, and what a kernel would show in its groups.

use cgwarden::testing::{FakeProcess, FakeTree};
use std::path::{Path, PathBuf};

/// `DIR/root` (the standard fake tree) and `DIR/policy.yaml` holding
/// `policy`: (tree, policy file, root).
pub fn board(dir: &Path, policy: &str) -> (FakeTree, PathBuf, PathBuf) {
    let root = dir.join("root");
    let t = FakeTree::standard(&root)
        .unwrap_or_else(|e| panic!("fake tree at {}: {e}", root.display()));
    let file = dir.join("policy.yaml");
    std::fs::write(&file, policy).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    (t, file, root)
}

/// The board of policies/iq9100-vision.yaml (fake tree in a fresh temporary
/// directory): four processes the policy places, and sshd (pid 700) that
/// only the catch-all group takes.
pub fn processes_board() -> (tempfile::TempDir, FakeTree) {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let t = FakeTree::standard(tmp.path()).expect("fake tree");
    let processes = [
        FakeProcess {
            cgroup: "/".into(),
            ..FakeProcess::new(1, "systemd")
        },
        FakeProcess::new(400, "motion_control"),
        FakeProcess {
            exe: Some("/opt/npu/bin/infer-server".into()),
            cmdline: vec![
                "/opt/npu/bin/infer-server".into(),
                "--model".into(),
                "yolo".into(),
            ],
            ..FakeProcess::new(500, "infer-server")
        },
        FakeProcess {
            exe: Some("/usr/bin/python3.11".into()),
            cmdline: vec!["python3".into(), "/opt/vision/camera_pipeline.py".into()],
            uid: 1001,
            ..FakeProcess::new(600, "python3")
        },
        FakeProcess::new(700, "sshd"),
    ];
    for p in &processes {
        t.add_process(p).expect("add a fake process");
    }
    (tmp, t)
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
}

/// `GROUP/memory.events` as the kernel shows it, with `oom_kill` OOM kills.
pub fn memory_events(root: &Path, group: &str, oom_kill: u64) {
    write(
        root,
        &format!("sys/fs/cgroup/{group}/memory.events"),
        &format!("low 0\nhigh 0\nmax 0\noom {oom_kill}\noom_kill {oom_kill}\noom_group_kill 0\n"),
    );
}

/// `GROUP/memory.pressure` with `some avg10` and `some total` set.
pub fn memory_pressure(root: &Path, group: &str, avg10: f64, total: u64) {
    write(
        root,
        &format!("sys/fs/cgroup/{group}/memory.pressure"),
        &format!(
            "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total={total}\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=50\n"
        ),
    );
}

/// A fake board under `DIR/root` with `policy` in `DIR/policy.yaml`,
/// applied (`cgwarden apply`).
pub struct Board {
    pub tree: FakeTree,
    pub root: PathBuf,
    pub policy: PathBuf,
}

impl Board {
    pub fn new(dir: &Path, policy: &str) -> Board {
        let (tree, policy, root) = board(dir, policy);
        let out = super::cmd()
            .arg("apply")
            .arg(&policy)
            .arg("--root")
            .arg(&root)
            .output()
            .expect("run cgwarden apply");
        assert!(
            out.status.success(),
            "apply failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Board { tree, root, policy }
    }

    /// `cgwarden SUB ARGS --policy P --root R` (a client command).
    pub fn client(&self, args: &[&str]) -> std::process::Command {
        let mut c = super::cmd();
        c.args(args)
            .arg("--policy")
            .arg(&self.policy)
            .arg("--root")
            .arg(&self.root);
        c
    }
}

/// The control tests' board (`control_fake_root`, `control_varlink`): two
/// groups, a cpufreq floor, and a rule an OOM kill fires that raises it.
pub fn control_board(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    board(
        dir,
        r#"version: 1
product: control-test
groups:
  inference:
    memory: { high: 100M, max: 1G }
  vision:
    cpu: { weight: 200 }
system:
  cpufreq:
    policy4: { min: 1GHz }
rules:
  - name: oom-seen
    when: inference.memory.events.oom_kill > 0
    while:
      - set cpufreq.policy4.min = 1.5GHz
"#,
    )
}
