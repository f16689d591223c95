//! One policy for a product line, on the real binary: cluster names resolved
//! on each board's tree (IQ-9100, IQ-8275, QCS6490: tests/support/boards.rs
//! says where each shape comes from), `targets:` chosen by what the board
//! says it is, `check` of the base and every target, `check --target`, an
//! unknown board running the base with a warning, and a name the board
//! lacks refused with its clusters listed. The shipped
//! policies/product-line.yaml is planned unchanged on all three boards.
//! Cluster names are also resolved on a one-cluster and a four-cluster board
//! and in combined lists, and a target's merge rules (maps merge, lists
//! replace, `drop` removes) are checked on the plan they produce.

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

/// One cluster of eight (an x86 guest or a board whose cpufreq driver makes
/// one policy for all CPUs): the only name is `cluster0`.
const ONE: Shape = Shape {
    dir: "one-cluster",
    machine: "ONE",
    compatible: &["vendor,one"],
    policies: &[boards::Policy {
        name: "policy0",
        cpus: "0-7",
        min_khz: 800_000,
        max_khz: 2_000_000,
    }],
    capacity: [1024; 8],
};

/// Four clusters, 3+2+2+1 CPUs (the 1+2+2+3-style SoCs: efficiency cores,
/// two performance tiers at the same top frequency told apart by
/// `cpu_capacity`, a prime core). Chosen to exercise `mid` and the
/// capacity tie-break, not a particular part.
const FOUR: Shape = Shape {
    dir: "four-cluster",
    machine: "FOUR",
    compatible: &["vendor,four"],
    policies: &[
        boards::Policy {
            name: "policy0",
            cpus: "0-2",
            min_khz: 300_000,
            max_khz: 2_016_000,
        },
        boards::Policy {
            name: "policy3",
            cpus: "3-4",
            min_khz: 500_000,
            max_khz: 2_803_200,
        },
        boards::Policy {
            name: "policy5",
            cpus: "5-6",
            min_khz: 500_000,
            max_khz: 2_803_200,
        },
        boards::Policy {
            name: "policy7",
            cpus: "7",
            min_khz: 600_000,
            max_khz: 3_187_200,
        },
    ],
    // policy3's cores outrank policy5's at the same clock.
    capacity: [400, 400, 400, 900, 900, 850, 850, 1024],
};

fn write_policy(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// A policy with one group per CPU list in `lists` (`g0`, `g1`, …) and, for
/// each of `freq`, a cpufreq floor.
fn groups_policy(lists: &[&str], freq: &[&str]) -> String {
    let mut s = String::from("version: 1\ngroups:\n");
    for (i, l) in lists.iter().enumerate() {
        s.push_str(&format!("  g{i}: {{ cpuset: {{ cpus: \"{l}\" }} }}\n"));
    }
    if !freq.is_empty() {
        s.push_str("system:\n  cpufreq:\n");
        for f in freq {
            s.push_str(&format!("    {f}: {{ governor: performance }}\n"));
        }
    }
    s
}

/// Plans `lists` and `freq` on `shape` and checks each group's CPUs and
/// each policy named.
fn resolves(shape: &Shape, lists: &[(&str, &str)], freq: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), shape);
    let names: Vec<&str> = lists.iter().map(|(n, _)| *n).collect();
    let fnames: Vec<&str> = freq.iter().map(|(n, _)| *n).collect();
    let p = write_policy(dir.path(), "p.yaml", &groups_policy(&names, &fnames));
    let r = run(&["plan", &p], &root);
    assert_eq!(r.code, 0, "{}: {r}", shape.dir);
    let w = writes(&r.stdout);
    for (i, (name, want)) in lists.iter().enumerate() {
        let line = format!("/sys/fs/cgroup/g{i}/cpuset.cpus {want}");
        assert!(
            has(&w, &line),
            "{}: `{name}`: no `{line}` in\n{r}",
            shape.dir
        );
    }
    for (name, policy) in freq {
        let line = format!("/sys/devices/system/cpu/cpufreq/{policy}/scaling_governor performance");
        assert!(
            has(&w, &line),
            "{}: `{name}`: no `{line}` in\n{r}",
            shape.dir
        );
    }
}

#[test]
fn a_two_cluster_board_has_little_and_big_and_no_prime() {
    resolves(
        &IQ9100,
        &[
            ("little", "0-3"),
            ("big", "4-7"),
            ("cluster0", "0-3"),
            ("cluster1", "4-7"),
        ],
        &[("big", "policy4"), ("little", "policy0")],
    );
    // `prime` (and `mid`, `cluster2`) name nothing here: each an error
    // listing the board's two clusters.
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), &IQ9100);
    for name in ["prime", "mid", "cluster2"] {
        let p = write_policy(dir.path(), "p.yaml", &groups_policy(&[name], &[]));
        let r = run(&["check", &p], &root);
        assert_eq!(r.code, 1, "{name}: {r}");
        assert!(
            r.stderr.contains(&format!(
                "g0.cpuset.cpus `{name}`: this board has no cluster `{name}`: its clusters are little = cluster0 (CPUs 0-3, policy0, up to 2.5536GHz), big = cluster1 (CPUs 4-7, policy4, up to 2.5536GHz)"
            )),
            "{name}: {r}"
        );
    }
}

#[test]
fn a_one_cluster_board_has_only_cluster0() {
    resolves(
        &ONE,
        &[("cluster0", "0-7"), ("cluster0 - 0", "1-7")],
        &[("cluster0", "policy0")],
    );
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), &ONE);
    let r = run(
        &[
            "check",
            &write_policy(dir.path(), "ok.yaml", &groups_policy(&["cluster0"], &[])),
        ],
        &root,
    );
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains("clusters: cluster0 (CPUs 0-7, policy0, up to 2GHz)"),
        "{r}"
    );
    for name in ["little", "big", "prime", "cluster1"] {
        let p = write_policy(dir.path(), "p.yaml", &groups_policy(&[], &[name]));
        let r = run(&["plan", &p], &root);
        assert_eq!(r.code, 1, "{name}: {r}");
        assert!(
            r.stderr.contains(&format!(
                "system.cpufreq: `{name}`: this board has no cluster `{name}`: its only cluster is cluster0 (CPUs 0-7, policy0, up to 2GHz)"
            )),
            "{name}: {r}"
        );
    }
}

#[test]
fn a_four_cluster_board_names_its_tiers_mid_and_big() {
    resolves(
        &FOUR,
        &[
            ("little", "0-2"),
            ("mid", "5-6"),
            ("big", "3-4"),
            ("prime", "7"),
            ("mid,big", "3-6"),
            ("cluster1", "5-6"),
            ("cluster3", "7"),
        ],
        &[("mid", "policy5"), ("big", "policy3"), ("prime", "policy7")],
    );
}

#[test]
fn cluster_lists_combine_and_subtract() {
    resolves(
        &QCS6490,
        &[
            ("big,prime", "4-7"),
            ("little - 0", "1-3"),
            ("0-7 - prime", "0-6"),
            ("little,big - 7", "0-6"),
            ("little,big - 0,4", "1-3,5-6"),
            ("prime,0", "0,7"),
            ("cluster0 - 1-2", "0,3"),
            ("little,big,prime - big - 0", "1-3,7"),
        ],
        &[],
    );
    // The same words on the IQ-8275, whose clusters are numbered the other
    // way round.
    resolves(
        &IQ8275,
        &[
            ("big,prime", "0-3"),
            ("little - 4", "5-7"),
            ("0-7 - prime", "0-1,4-7"),
        ],
        &[],
    );
    // A list that leaves no CPU is an error at its line.
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), &QCS6490);
    let p = write_policy(
        dir.path(),
        "p.yaml",
        &groups_policy(&["little,big", "prime - 7"], &[]),
    );
    let r = run(&["check", &p], &root);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stderr.contains("p.yaml:4:"), "{r}");
    assert!(r.stderr.contains("g1.cpuset.cpus `prime - 7`"), "{r}");
    assert!(!r.stderr.contains("g0.cpuset"), "{r}");
}

/// A base and a target for board `QCS6490` that use every merge rule.
const MERGED: &str = r#"version: 1
groups:
  app:
    cpuset: { cpus: big }
    memory: { high: 512M, max: 1G }
  cam:
    cpuset: { cpus: little }
  misc:
    cpuset: { cpus: little }
placement:
  - match: { comm: app }
    group: app
  - match: { comm: sshd }
    group: misc
system:
  sysctl:
    vm.swappiness: 30
    vm.watermark_scale_factor: 150
  cpufreq:
    big: { governor: performance }
    prime: { governor: performance }
targets:
  QCS6490:
    groups:
      app: { memory: { high: 768M } }
      cam: drop
      extra: { cpuset: { cpus: prime } }
    placement:
      - match: { comm: sshd }
        group: extra
    system:
      sysctl: { vm.swappiness: 10, vm.watermark_scale_factor: drop }
      cpufreq: { prime: drop, big: { min: 1.2GHz } }
"#;

#[test]
fn a_target_merges_maps_replaces_lists_and_drops_keys() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("qcs6490");
    let t = boards::lay_out(&root, &QCS6490);
    t.add_processes(&[
        cgwarden::testing::FakeProcess::new(500, "app"),
        cgwarden::testing::FakeProcess::new(700, "sshd"),
    ])
    .unwrap();
    let p = write_policy(dir.path(), "p.yaml", MERGED);
    let r = run(&["plan", &p], &root);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stderr.contains("cgwarden: target: QCS6490"), "{r}");
    let w = writes(&r.stdout);
    let want = |l: &str| assert!(has(&w, l), "no `{l}` in\n{r}");
    let cg = "/sys/fs/cgroup";
    // Maps merge: the group's memory block keeps `max`, takes `high`; a
    // group the base lacks is added; sysctl keys merge one by one.
    want(&format!("{cg}/app/memory.high 805306368"));
    want(&format!("{cg}/app/memory.max 1073741824"));
    want(&format!("{cg}/app/cpuset.cpus 4-6"));
    want(&format!("{cg}/extra/cpuset.cpus 7"));
    want("/proc/sys/vm/swappiness 10");
    want("/sys/devices/system/cpu/cpufreq/policy4/scaling_governor performance");
    want("/sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq 1200000");
    // `drop` removes a group, a sysctl, a cpufreq policy.
    for gone in ["/cam", "watermark_scale_factor", "policy7/scaling_governor"] {
        assert!(!r.stdout.contains(gone), "`{gone}` in\n{r}");
    }
    // The list replaces the base's whole: sshd goes to `extra`, and the
    // base's `app` entry is gone, so process 500 stays where it is.
    want(&format!("{cg}/extra/cgroup.procs 700"));
    assert!(!r.stdout.contains(&format!("{cg}/app/cgroup.procs")), "{r}");
    assert!(
        !r.stdout.contains(&format!("{cg}/misc/cgroup.procs")),
        "{r}"
    );

    // On a board the target does not name, the base as written.
    let other = board(&dir.path().join("other"), &IQ8275);
    let r = run(&["plan", &p], &other);
    assert_eq!(r.code, 0, "{r}");
    let w = writes(&r.stdout);
    for l in [
        format!("{cg}/app/memory.high 536870912"),
        format!("{cg}/cam/cpuset.cpus 4-7"),
        "/proc/sys/vm/swappiness 30".to_string(),
        "/proc/sys/vm/watermark_scale_factor 150".to_string(),
        "/sys/devices/system/cpu/cpufreq/policy2/scaling_governor performance".to_string(),
    ] {
        assert!(has(&w, &l), "no `{l}` in\n{r}");
    }
    assert!(!r.stdout.contains("/extra"), "{r}");
    assert!(!r.stdout.contains("scaling_min_freq"), "{r}");
    assert!(
        r.stderr
            .contains("which no target names (targets: QCS6490): the base policy is in force"),
        "{r}"
    );
}

#[test]
fn dropping_what_the_base_lacks_is_an_error_naming_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_policy(
        dir.path(),
        "p.yaml",
        "version: 1\ngroups:\n  app: {}\ntargets:\n  QCS6490:\n    groups: { appp: drop }\n",
    );
    let r = cgwarden(&["check", &p]);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr.contains(
            "p.yaml:6:21: error: target `QCS6490`: drops `groups.appp`, which the base policy does not have"
        ),
        "{r}"
    );
}

#[test]
fn the_target_is_keyed_by_soc0_then_compatible_then_dmi() {
    let policy = "version: 1\ngroups:\n  app: { cpuset: { cpus: little } }\ntargets:\n  QCS6490:\n    groups: { app: { cpuset: { cpus: \"0\" } } }\n  qcom,qcs6490-rb3gen2:\n    groups: { app: { cpuset: { cpus: \"1\" } } }\n  Standard PC (Q35 + ICH9, 2009):\n    groups: { app: { cpuset: { cpus: \"2\" } } }\n";
    let dir = tempfile::tempdir().unwrap();
    let root = board(dir.path(), &QCS6490);
    let dmi = root.join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(dmi.join("product_name"), "Standard PC (Q35 + ICH9, 2009)\n").unwrap();
    let p = write_policy(dir.path(), "p.yaml", policy);
    let cpus = |why: &str, want: &str, source: &str| {
        let r = run(&["plan", &p], &root);
        assert_eq!(r.code, 0, "{why}: {r}");
        assert!(
            has(
                &writes(&r.stdout),
                &format!("/sys/fs/cgroup/app/cpuset.cpus {want}")
            ),
            "{why}: {r}"
        );
        assert!(r.stderr.contains(&format!("({source})")), "{why}: {r}");
    };
    cpus("soc0", "0", "the board's /sys/devices/soc0/machine");
    std::fs::remove_file(root.join("sys/devices/soc0/machine")).unwrap();
    cpus(
        "compatible",
        "1",
        "the board's /proc/device-tree/compatible",
    );
    std::fs::remove_file(root.join("proc/device-tree/compatible")).unwrap();
    cpus("dmi", "2", "the board's /sys/class/dmi/id/product_name");
}
