//! One policy for a product line, on the real binary: cluster names resolved
//! on each board's tree (IQ-9100, IQ-8275, QCS6490: tests/support/boards.rs
//! says where each shape comes from), `targets:` chosen by what the board
//! says it is, `check` of the base and every target, `check --target`, an
//! unknown board running the base with a warning, and a name the board
//! lacks refused with its clusters listed. The shipped
//! policies/product-line.yaml is planned unchanged on all three boards.

mod support;

use std::path::{Path, PathBuf};
use support::boards::{self, Shape, IQ8275, IQ9100, QCS6490};
use support::{cgwarden, Run};

const PRODUCT_LINE: &str = "policies/product-line.yaml";

fn board(dir: &Path, shape: &Shape) -> PathBuf {
    let root = dir.join(shape.dir);
    boards::lay_out(&root, shape);
    root
}

fn run(args: &[&str], root: &Path) -> Run {
    let mut a: Vec<&str> = args.to_vec();
    let r = root.to_str().unwrap();
    a.extend(["--root", r]);
    cgwarden(&a)
}

/// `WRITE PATH VALUE` lines of a plan, as `PATH VALUE`.
fn writes(plan: &str) -> Vec<String> {
    plan.lines()
        .filter_map(|l| l.strip_prefix("WRITE "))
        .map(|l| l.split(" (was").next().unwrap_or(l).to_string())
        .collect()
}

fn has(plan: &[String], line: &str) -> bool {
    plan.iter().any(|l| l == line)
}

#[test]
fn each_board_tree_reads_as_its_shape_says() {
    let dir = tempfile::tempdir().unwrap();
    let policy = support::repo(PRODUCT_LINE);
    for (shape, clusters) in [
        (
            &IQ9100,
            "clusters: little = cluster0 (CPUs 0-3, policy0, up to 2.5536GHz), big = cluster1 (CPUs 4-7, policy4, up to 2.5536GHz)",
        ),
        (
            &IQ8275,
            "clusters: little = cluster0 (CPUs 4-7, policy4, up to 1.9584GHz), big = cluster1 (CPUs 0-1, policy0, up to 2.112GHz), prime = cluster2 (CPUs 2-3, policy2, up to 2.3616GHz)",
        ),
        (
            &QCS6490,
            "clusters: little = cluster0 (CPUs 0-3, policy0, up to 1.9584GHz), big = cluster1 (CPUs 4-6, policy4, up to 2.4GHz), prime = cluster2 (CPU 7, policy7, up to 2.7072GHz)",
        ),
    ] {
        let root = board(dir.path(), shape);
        let r = run(&["check", &policy], &root);
        assert_eq!(r.code, 0, "{}: {r}", shape.dir);
        assert!(r.stderr.is_empty(), "{}: {r}", shape.dir);
        assert!(
            r.stdout.contains(&format!(
                "target: {} (the board's /sys/devices/soc0/machine)",
                shape.machine
            )),
            "{}: {r}",
            shape.dir
        );
        assert!(r.stdout.contains(clusters), "{}: {r}", shape.dir);
        // doctor shows the board and its clusters too.
        let d = run(&["doctor", &policy], &root);
        assert!(
            d.stdout
                .contains(&format!("board: {} (/sys/devices/soc0/machine)", shape.machine))
                && d.stdout.contains(clusters),
            "{}: {d}",
            shape.dir
        );
    }
}

#[test]
fn one_policy_plans_unchanged_on_all_three_boards() {
    let dir = tempfile::tempdir().unwrap();
    let policy = support::repo(PRODUCT_LINE);
    let cg = "/sys/fs/cgroup";
    let freq = "/sys/devices/system/cpu/cpufreq";
    // (board, realtime, inference, vision, system, big policy, big floor kHz, prime policy)
    for (shape, rt, inf, vision, sys, big, floor, prime) in [
        (
            &IQ9100,
            "7",
            "4-6",
            Some("0-6"),
            "0-3",
            "policy4",
            "1500000",
            None,
        ),
        (
            &IQ8275,
            "2-3",
            "0-1",
            Some("0-1,4-7"),
            "4-7",
            "policy0",
            "1200000",
            Some("policy2"),
        ),
        (
            &QCS6490,
            "7",
            "4-6",
            None,
            "0-3",
            "policy4",
            "1200000",
            Some("policy7"),
        ),
    ] {
        let root = board(dir.path(), shape);
        let r = run(&["plan", &policy], &root);
        assert_eq!(r.code, 0, "{}: {r}", shape.dir);
        assert!(
            r.stderr
                .contains(&format!("cgwarden: target: {}", shape.machine)),
            "{}: {r}",
            shape.dir
        );
        let w = writes(&r.stdout);
        let want = |l: String| assert!(has(&w, &l), "{}: no `{l}` in\n{}", shape.dir, r.stdout);
        want(format!("{cg}/realtime/cpuset.cpus {rt}"));
        want(format!("{cg}/realtime/cpuset.cpus.partition isolated"));
        want(format!("{cg}/inference/cpuset.cpus {inf}"));
        want(format!("{cg}/system/cpuset.cpus {sys}"));
        match vision {
            Some(v) => want(format!("{cg}/vision/cpuset.cpus {v}")),
            None => assert!(
                !r.stdout.contains("/vision"),
                "{}: the gateway has no camera group:\n{}",
                shape.dir,
                r.stdout
            ),
        }
        want(format!("{freq}/{big}/scaling_min_freq {floor}"));
        match prime {
            Some(p) => want(format!("{freq}/{p}/scaling_governor performance")),
            None => assert!(
                !w.iter().any(|l| l.contains("scaling_governor performance")),
                "{}: {}",
                shape.dir,
                r.stdout
            ),
        }
        // The RT core is out of the housekeeping set; its latency is held
        // by the daemon (not a plan write), its idle states are written.
        let idle = format!(
            "/sys/devices/system/cpu/cpu{}/cpuidle/state1/disable 1",
            rt.chars().last().unwrap()
        );
        want(idle);
    }
}

#[test]
fn plain_check_checks_the_base_and_every_target() {
    let r = cgwarden(&["check", &support::repo(PRODUCT_LINE)]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stderr.is_empty(), "{r}");
    for t in ["QCS9100", "QCS8275", "QCS6490"] {
        assert!(r.stdout.contains(&format!("target {t}: ok: ")), "{r}");
    }
    assert!(r.stdout.contains("resolve on the board at start"), "{r}");
    // A target that drops a group the base still places is an error, with
    // the target named, though the base alone is fine.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.yaml");
    std::fs::write(
        &p,
        "version: 1\ngroups:\n  app: { cpuset: { cpus: big } }\n  cam: {}\nplacement:\n  - match: { comm: cam }\n    group: cam\ntargets:\n  QCS6490:\n    groups: { cam: drop }\n  QCS8275:\n    groups: { app: { cpuset: { cpus: prime7 } } }\n",
    )
    .unwrap();
    let r = cgwarden(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stdout.contains("p.yaml: ok: 2 groups")
            && r.stderr.contains("p.yaml:7:12: error: target QCS6490: ")
            && r.stderr.contains("`cam`"),
        "{r}"
    );
    assert!(
        r.stderr
            .contains("p.yaml:12:38: error: target QCS8275: app.cpuset.cpus `prime7`")
            && r.stderr.contains("did you mean `prime`?"),
        "{r}"
    );
}

#[test]
fn check_target_checks_one_target() {
    let policy = support::repo(PRODUCT_LINE);
    let r = cgwarden(&["check", &policy, "--target", "QCS6490"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains("ok: 3 groups")
            && r.stdout.contains("target: QCS6490 (chosen by --target)")
            && !r.stdout.contains("target QCS9100"),
        "{r}"
    );
    let r = cgwarden(&["check", &policy, "--target", "QCS8250"]);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr.contains(
            "the policy has no target `QCS8250`: its targets are QCS9100, QCS8275, QCS6490"
        ),
        "{r}"
    );
    // --target with --root: that target on that board (here the IQ-9100's
    // target on a QCS6490, which it fits).
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), &QCS6490);
    let r = run(&["check", &policy, "--target", "QCS9100"], &root);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains("target: QCS9100 (chosen by --target)"),
        "{r}"
    );
}

#[test]
fn an_unknown_board_runs_the_base_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let policy = support::repo(PRODUCT_LINE);
    let root = board(dir.path(), &QCS6490);
    std::fs::write(root.join("sys/devices/soc0/machine"), "QCS5430\n").unwrap();
    let r = run(&["plan", &policy], &root);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stderr.contains("warning: this board is `QCS5430` (/sys/devices/soc0/machine), which no target names (targets: QCS9100, QCS8275, QCS6490): the base policy is in force"),
        "{r}"
    );
    // The base: the camera group is there (the QCS6490 target drops it).
    assert!(
        r.stdout.contains("/sys/fs/cgroup/vision/cpuset.cpus 0-6"),
        "{r}"
    );
    // A board that says nothing at all: the same.
    std::fs::remove_file(root.join("sys/devices/soc0/machine")).unwrap();
    std::fs::remove_file(root.join("proc/device-tree/compatible")).unwrap();
    let r = run(&["check", &policy], &root);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stderr.contains("this board does not say what it is")
            && r.stdout.contains("target: none: the base policy"),
        "{r}"
    );
}

#[test]
fn a_name_the_board_lacks_is_an_error_listing_its_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), &IQ9100);
    let p = dir.path().join("p.yaml");
    std::fs::write(
        &p,
        "version: 1\ngroups:\n  rt: { cpuset: { cpus: prime } }\nsystem:\n  cpufreq: { prime: { governor: performance } }\n",
    )
    .unwrap();
    let want = "this board has no cluster `prime`: its clusters are little = cluster0 (CPUs 0-3, policy0, up to 2.5536GHz), big = cluster1 (CPUs 4-7, policy4, up to 2.5536GHz)";
    for cmd in ["check", "plan", "apply"] {
        let r = run(&[cmd, p.to_str().unwrap()], &root);
        assert_eq!(r.code, 1, "{cmd}: {r}");
        assert!(
            r.stderr.contains(&format!(
                "p.yaml:3:25: error: rt.cpuset.cpus `prime`: {want}"
            )) && r.stderr.contains(&format!(
                "p.yaml:5:14: error: system.cpufreq: `prime`: {want}"
            )),
            "{cmd}: {r}"
        );
        assert!(
            !r.stderr.contains("not a CPU index"),
            "{cmd}: one error per name: {r}"
        );
    }
    // Nothing was written.
    assert!(!root.join("sys/fs/cgroup/rt").exists());
    // Plain check: the file alone is fine, the name resolves at start.
    let r = cgwarden(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r}");
}

#[test]
fn status_and_health_name_the_target_and_a_boost_takes_a_cluster_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), &IQ8275);
    let policy = support::repo(PRODUCT_LINE);
    let d = support::Daemon::start(Path::new(&policy), &root, support::Start::default());
    d.wait_log(
        "control socket listening",
        std::time::Duration::from_secs(20),
    );
    assert!(d.log().contains("target: QCS8275"), "{}", d.log());
    let client = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["--policy", &policy, "--root", root.to_str().unwrap()]);
        cgwarden(&a)
    };
    let s = client(&["status"]);
    assert_eq!(s.code, 0, "{s}");
    assert!(
        s.stdout
            .contains("target: QCS8275 (the board's /sys/devices/soc0/machine)")
            && s.stdout.contains("prime = cluster2 (CPUs 2-3, policy2"),
        "{s}"
    );
    let j = client(&["status", "--json"]);
    assert!(
        j.stdout
            .contains("\"target\": \"QCS8275 (the board's /sys/devices/soc0/machine)\""),
        "{j}"
    );
    let h = client(&["health"]);
    assert!(h.stdout.contains(", target QCS8275"), "{h}");
    // `cpufreq.big.min` is policy0's floor on this board.
    let b = client(&["boost", "cpufreq.big.min=2GHz", "--for", "30s"]);
    assert_eq!(b.code, 0, "{b}");
    assert!(b.stdout.contains("cpufreq.policy0.min"), "{b}");
    d.wait_for(
        "the floor written",
        std::time::Duration::from_secs(10),
        || {
            support::read(
                &root,
                "sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq",
            ) == "2000000"
        },
    );
    let b = client(&["boost", "cpufreq.mid.min=2GHz", "--for", "30s"]);
    assert_ne!(b.code, 0, "{b}");
    assert!(b.stderr.contains("no cluster `mid`"), "{b}");
    d.stop();
}
