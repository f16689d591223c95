//! `cgwarden capture DIR` of the real binary, from a fake board (`--root
//! SRC`): `plan` and `doctor` on the capture say what they say on the board,
//! for every shipped policy, on a fresh board and an applied one; the board
//! is left as it was; DIR must be new or empty.

use std::path::{Path, PathBuf};

mod support;
use support::{cmd, repo, run, tree_snapshot, Run};

/// The shipped policies (each a different mix of groups, placement,
/// cpufreq, devfreq, zram, realtime, latency).
const POLICIES: [&str; 7] = [
    "policies/iq9100-vision.yaml",
    "policies/qcs6490-rt.yaml",
    "policies/iq8275-rt.yaml",
    "policies/inference-box.yaml",
    "policies/oomd-cell.yaml",
    "policies/ros2-cell.yaml",
    "policies/minimal.yaml",
];

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The processes board (policies/iq9100-vision.yaml's processes, sshd)
/// with what doctor reads, a devfreq device and a thermal zone behind
/// their class links as on a board, and a tuner doctor warns about.
fn board() -> (tempfile::TempDir, PathBuf) {
    let (tmp, t) = support::processes_board();
    let root = t.dir().to_path_buf();
    put(&root, "proc/cmdline", "console=ttyMSM0 isolcpus=managed_irq,domain,6-7 nohz_full=6-7 rcu_nocbs=6-7 irqaffinity=0-5\n");
    put(&root, "sys/devices/system/cpu/isolated", "6-7\n");
    put(&root, "sys/devices/system/cpu/nohz_full", "6-7\n");
    put(&root, "sys/kernel/realtime", "1\n");
    put(&root, "proc/sys/kernel/osrelease", "6.6.52-rt43\n");
    put(
        &root,
        "boot/config-6.6.52-rt43",
        "CONFIG_PREEMPT_RT=y\nCONFIG_PSI=y\nCONFIG_UCLAMP_TASK_GROUP=y\n",
    );
    put(&root, "proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    let gpu = "sys/devices/platform/soc/3d00000.gpu/devfreq/3d00000.gpu";
    let freqs = [220_000_000, 500_000_000, 900_000_000];
    t.devfreq_device(gpu, "msm-adreno-tz performance powersave", &freqs, freqs[0])
        .unwrap();
    std::fs::create_dir_all(root.join("sys/class/devfreq")).unwrap();
    std::os::unix::fs::symlink(
        "../../devices/platform/soc/3d00000.gpu/devfreq/3d00000.gpu",
        root.join("sys/class/devfreq/gpu"),
    )
    .unwrap();
    let z = "sys/devices/virtual/thermal/thermal_zone3";
    put(&root, &format!("{z}/type"), "cpu-1-0-usr\n");
    put(&root, &format!("{z}/temp"), "52000\n");
    std::fs::create_dir_all(root.join("sys/class/thermal")).unwrap();
    std::os::unix::fs::symlink(
        "../../devices/virtual/thermal/thermal_zone3",
        root.join("sys/class/thermal/thermal_zone3"),
    )
    .unwrap();
    t.add_process(&cgwarden::testing::FakeProcess::new(900, "irqbalance"))
        .unwrap();
    (tmp, root)
}

fn capture(src: &Path, dir: &Path, processes: bool) -> Run {
    let mut c = cmd();
    c.arg("capture").arg(dir).arg("--root").arg(src);
    if processes {
        c.arg("--processes");
    }
    run(&mut c)
}

fn on(sub: &str, policy: &str, root: &Path) -> Run {
    run(cmd().arg(sub).arg(repo(policy)).arg("--root").arg(root))
}

/// `plan` and `doctor` of every shipped policy, exit code, stdout and
/// stderr, on `root`.
fn said(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for p in POLICIES {
        for sub in ["plan", "doctor"] {
            out.push(format!("{sub} {p}: {}", on(sub, p, root)));
        }
    }
    out
}

fn assert_same(a: &[String], b: &[String]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "the board and its capture differ");
    }
}

#[test]
fn plan_and_doctor_on_the_capture_say_what_they_say_on_the_board() {
    let (_tmp, src) = board();
    let before = tree_snapshot(&src);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("board");
    let r = capture(&src, &dir, true);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("6 processes"), "{r}");
    assert_eq!(tree_snapshot(&src), before, "capture changed the board");
    let on_board = said(&src);
    // The plans place processes, and doctor warns about irqbalance: the
    // comparison sees the processes.
    assert!(
        on_board[0].contains("/realtime/cgroup.procs 400"),
        "{}",
        on_board[0]
    );
    assert!(
        on_board[1].contains("irqbalance is running"),
        "{}",
        on_board[1]
    );
    assert!(
        on_board[1].contains("devfreq gpu: governor msm-adreno-tz"),
        "{}",
        on_board[1]
    );
    assert_same(&on_board, &said(&dir));

    // Applied, the board plans nothing: so does its capture.
    let policy = repo(POLICIES[0]);
    support::apply(Path::new(&policy), &src);
    let applied = out.path().join("applied");
    assert_eq!(capture(&src, &applied, true).code, 0);
    let plan = on("plan", POLICIES[0], &applied);
    assert!(plan.stdout.ends_with("0 changes\n"), "{plan}");
    assert_same(&said(&src), &said(&applied));
}

#[test]
fn without_processes_the_plan_differs_only_in_placement() {
    let (_tmp, src) = board();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("board");
    let r = capture(&src, &dir, false);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("no processes"), "{r}");
    assert!(!dir.join("proc/500").exists() && !dir.join("etc/passwd").exists());
    let board = on("plan", POLICIES[0], &src).stdout;
    let copy = on("plan", POLICIES[0], &dir).stdout;
    // Placement: the moves and the scheduling of the processes moved.
    let moves = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.contains("cgroup.procs") && !l.contains("SCHED "))
            .filter(|l| !l.ends_with(" changes"))
            .map(String::from)
            .collect()
    };
    assert!(
        board.contains("cgroup.procs") && !copy.contains("cgroup.procs"),
        "{board}\n{copy}"
    );
    assert_eq!(moves(&board), moves(&copy));
}

#[test]
fn a_capture_of_a_capture_is_the_same_tree() {
    let (_tmp, src) = board();
    let out = tempfile::tempdir().unwrap();
    let (a, b) = (out.path().join("a"), out.path().join("b"));
    assert_eq!(capture(&src, &a, true).code, 0);
    assert_eq!(capture(&a, &b, true).code, 0);
    let strip = |d: &Path| {
        let mut s = tree_snapshot(d);
        s.remove(Path::new("capture.json"));
        s
    };
    assert_eq!(strip(&a), strip(&b));
}

#[test]
fn dir_must_be_new_or_empty() {
    let (_tmp, src) = board();
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("keep"), "x").unwrap();
    let r = capture(&src, out.path(), false);
    assert_eq!(r.code, 2, "{r}");
    assert!(r.stderr.contains("not empty"), "{r}");
    assert_eq!(
        std::fs::read_to_string(out.path().join("keep")).unwrap(),
        "x"
    );
    let r = capture(&src, &src.join("sys/fs/cgroup/x"), false);
    assert_eq!(r.code, 2, "{r}");
    assert!(!src.join("sys/fs/cgroup/x").exists());
    let r = run(cmd().args(["capture"]));
    assert_eq!(r.code, 2, "{r}");
}
