//! Placement on a fake tree: processes laid out as /proc entries
//! are placed by `apply` and by the daemon's scan (`--root` has no exec
//! events: the daemon scans /proc every tick); `running()` follows processes
//! appearing and vanishing; descendants left behind follow their parent;
//! matching one process against 200 rules allocates nothing; a container's
//! process (or a delegated unit's) a rule matches is left where it is, and
//! `plan`, `apply`, the daemon's log and `status` say why.

use cgwarden::testing::{FakeProcess, FakeTree};
use cgwarden::testing::{Match, Placement};
use cgwarden::testing::{Placer, ProcessFacts};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

mod support;
use support::{Daemon, Start};

// ---- allocation counting (this thread only, while armed) ----
struct Counting;
thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ARMED.try_with(|a| {
            if a.get() {
                let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
            }
        });
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn matching_against_200_rules_allocates_nothing() {
    let mut rules = Vec::new();
    for i in 0..200 {
        let m = match i % 4 {
            0 => Match {
                comm: Some(format!("worker_{i}*")),
                ..Default::default()
            },
            1 => Match {
                exe: Some(format!("/opt/app{i}/bin/*")),
                ..Default::default()
            },
            2 => Match {
                cmdline: Some(format!("*--instance {i} *")),
                ..Default::default()
            },
            _ => Match {
                comm: Some(format!("svc{i}")),
                user: Some(cgwarden::testing::UserSpec::Uid(5000 + i)),
                ..Default::default()
            },
        };
        rules.push(Placement {
            matcher: m,
            group: format!("g{i}"),
            sched: None,
            pos: Default::default(),
            tuning: Default::default(),
        });
    }
    let p = Placer::new(&rules, |_| None);
    let facts = ProcessFacts {
        comm: "nomatch_process",
        exe: Some("/usr/lib/some/long/path/binary"),
        cmdline: "/usr/lib/some/long/path/binary --flag value --other thing",
        uid: Some(1000),
    };
    let last = ProcessFacts {
        comm: "svc199",
        exe: None,
        cmdline: "",
        uid: Some(5199),
    };
    // The counter works: an allocation while armed is seen.
    ARMED.with(|a| a.set(true));
    drop(std::hint::black_box(Vec::<u8>::with_capacity(16)));
    ARMED.with(|a| a.set(false));
    assert!(ALLOCS.with(|n| n.get()) >= 1);
    ALLOCS.with(|n| n.set(0));
    ARMED.with(|a| a.set(true));
    let miss = p.find(&facts).is_none();
    let hit = p.find(&last).map(|m| m.index);
    // The comm pre-filter that decides what else to read allocates nothing either.
    let needs = p.needs_for("svc199");
    ARMED.with(|a| a.set(false));
    assert!(miss);
    assert_eq!(hit, Some(199));
    assert!(needs.is_some_and(|n| n.exe && n.cmdline && n.uid));
    assert_eq!(ALLOCS.with(|n| n.get()), 0, "matching allocated");
}

// ---- fake tree helpers ----

const POLICY: &str = r#"version: 1
product: placement-test
groups:
  realtime:
    cpu: { weight: 200 }
  inference:
    cpu: { weight: 100 }
  vision:
    cpu: { weight: 100 }
system:
  sysctl: { vm.swappiness: 30 }
placement:
  - match: { comm: "motion_*" }
    group: realtime
    sched: { policy: fifo, priority: 50 }
  - match: { exe: "/opt/npu/bin/*" }
    group: inference
  - match: { cmdline: "*camera_pipeline*", user: vision }
    group: vision
rules:
  - name: rt-test
    when: running(cyclictest)
    while:
      - set sysctl.vm.swappiness = 90
"#;

fn cgroup_of(root: &Path, pid: i32) -> String {
    support::read(root, &format!("proc/{pid}/cgroup"))
}

fn procs(root: &Path, group: &str) -> Vec<i32> {
    support::read(root, &format!("sys/fs/cgroup/{group}/cgroup.procs"))
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

fn layout(t: &FakeTree) {
    t.add_process(&FakeProcess::new(400, "motion_control"))
        .unwrap();
    t.add_process(&FakeProcess {
        exe: Some("/opt/npu/bin/sub/infer".into()),
        ..FakeProcess::new(500, "infer")
    })
    .unwrap();
    t.add_process(&FakeProcess {
        cmdline: vec!["python3".into(), "/srv/camera_pipeline.py".into()],
        uid: 1001,
        ..FakeProcess::new(600, "python3")
    })
    .unwrap();
    // Same cmdline, wrong user: all keys must match.
    t.add_process(&FakeProcess {
        cmdline: vec!["python3".into(), "/srv/camera_pipeline.py".into()],
        uid: 0,
        ..FakeProcess::new(601, "python3")
    })
    .unwrap();
    t.add_process(&FakeProcess::new(700, "sshd")).unwrap();
}

#[test]
fn apply_places_proc_entries() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), POLICY);
    layout(&t);
    let so = support::apply(&policy, &root);
    assert_eq!(cgroup_of(&root, 400), "0::/realtime");
    assert_eq!(cgroup_of(&root, 500), "0::/inference");
    assert_eq!(cgroup_of(&root, 600), "0::/vision");
    assert_eq!(cgroup_of(&root, 601), "0::/");
    assert_eq!(cgroup_of(&root, 700), "0::/");
    assert_eq!(procs(&root, "realtime"), [400]);
    assert_eq!(procs(&root, "vision"), [600]);
    // sched is not attempted on a fake tree, and says so
    assert!(
        so.contains("skipped on a fake root: SCHED 400 fifo priority 50"),
        "{so}"
    );
}

#[test]
fn daemon_scan_places_new_processes_and_tracks_running() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), POLICY);
    layout(&t);
    let d = Daemon::start(
        &policy,
        &root,
        Start {
            log_level: "debug",
            ..Start::default()
        },
    );
    let swappiness = || {
        std::fs::read_to_string(root.join("proc/sys/vm/swappiness"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    // Existing processes were placed at startup.
    d.wait_for("startup placement", Duration::from_secs(20), || {
        cgroup_of(&root, 400) == "0::/realtime"
    });
    assert_eq!(cgroup_of(&root, 601), "0::/");
    d.wait_for("baseline swappiness", Duration::from_secs(20), || {
        swappiness() == "30"
    });

    // A process that appears later is found by the next tick's scan.
    t.add_process(&FakeProcess::new(800, "motion_planner"))
        .unwrap();
    t.add_process(&FakeProcess {
        exe: Some("/opt/npu/bin/detect".into()),
        ..FakeProcess::new(801, "detect")
    })
    .unwrap();
    d.wait_for("late processes placed", Duration::from_secs(20), || {
        cgroup_of(&root, 800) == "0::/realtime" && cgroup_of(&root, 801) == "0::/inference"
    });
    assert!(procs(&root, "realtime").contains(&800));

    // A matched parent whose child stayed behind: the child follows.
    t.add_process(&FakeProcess::new(901, "helper")).unwrap();
    // The child is listed before the parent appears: a scan between the two
    // would place the parent alone and never look for its children again.
    std::fs::create_dir_all(root.join("proc/900/task/900")).unwrap();
    std::fs::write(root.join("proc/900/task/900/children"), "901\n").unwrap();
    t.add_process(&FakeProcess::new(900, "motion_cam")).unwrap();
    d.wait_for("descendant moved along", Duration::from_secs(20), || {
        cgroup_of(&root, 900) == "0::/realtime" && cgroup_of(&root, 901) == "0::/realtime"
    });

    // running(cyclictest): on when it appears, off when it is gone.
    t.add_process(&FakeProcess::new(1000, "cyclictest"))
        .unwrap();
    d.wait_for(
        "rule on while cyclictest runs",
        Duration::from_secs(20),
        || swappiness() == "90",
    );
    std::fs::remove_dir_all(root.join("proc/1000")).unwrap();
    d.wait_for(
        "rule off after cyclictest exits",
        Duration::from_secs(20),
        || swappiness() == "30",
    );
    let log = d.log();
    assert!(
        log.contains("scanning /proc every tick"),
        "the fallback is announced once:\n{log}"
    );
    assert_eq!(log.matches("scanning /proc every tick").count(), 1, "{log}");
}

/// `--dry-run`: the daemon runs its placement
/// scans in dry run and logs each move it would make, including processes
/// that appear later, and moves nothing.
#[test]
fn dry_run_scans_log_each_move_and_move_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), POLICY);
    layout(&t);
    let cgroups = root.join("sys/fs/cgroup");
    let first = support::tree_snapshot(&cgroups);
    let d = Daemon::start(
        &policy,
        &root,
        Start {
            extra: &["--dry-run"],
            ..Start::default()
        },
    );
    d.wait_log(
        "would move 400 motion_control to realtime (dry run)",
        Duration::from_secs(20),
    );
    d.wait_log(
        "would move 500 infer to inference (dry run)",
        Duration::from_secs(20),
    );
    // A process appearing later is found by the tick scan.
    t.add_process(&FakeProcess::new(800, "motion_planner"))
        .unwrap();
    // The new process is listed in the root cgroup by the fake tree itself.
    let before = support::tree_snapshot(&cgroups);
    assert_eq!(
        support::tree_diff(&first, &before).len(),
        1,
        "only pid 800 added"
    );
    d.wait_log(
        "would move 800 motion_planner to realtime (dry run)",
        Duration::from_secs(20),
    );
    // Several more ticks: each would-be move is said once.
    std::thread::sleep(Duration::from_millis(500));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log.matches("would move 800 motion_planner to realtime (dry run)")
            .count(),
        1,
        "{log}"
    );
    assert!(
        !log.contains("would move 700 "),
        "sshd matches nothing:\n{log}"
    );
    assert!(!log.contains("would move 601 "), "wrong user:\n{log}");
    for pid in [400, 500, 600, 800] {
        assert_eq!(cgroup_of(&root, pid), "0::/", "pid {pid} moved in dry run");
    }
    assert!(procs(&root, "realtime").is_empty() && procs(&root, "inference").is_empty());
    let after = support::tree_snapshot(&cgroups);
    assert_eq!(
        support::tree_diff(&before, &after),
        Vec::<String>::new(),
        "dry run changed the cgroup tree"
    );
}

/// Dry run places (logs) even when no `running()` rule keeps the exec
/// thread for presence.
#[test]
fn dry_run_places_without_presence_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), POLICY);
    let text = POLICY.split("rules:").next().unwrap_or(POLICY);
    std::fs::write(&policy, text).unwrap();
    layout(&t);
    let d = Daemon::start(
        &policy,
        &root,
        Start {
            extra: &["--dry-run"],
            ..Start::default()
        },
    );
    t.add_process(&FakeProcess::new(800, "motion_planner"))
        .unwrap();
    d.wait_log(
        "would move 800 motion_planner to realtime (dry run)",
        Duration::from_secs(20),
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(cgroup_of(&root, 800), "0::/", "{log}");
}

// ---- containers and delegated subtrees: left alone ----

const DOCKER_ID: &str = "8f3c9a0d1e2b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3ce1";

/// The line of the `motion_*` placement in [`POLICY`].
fn motion_line() -> usize {
    POLICY
        .lines()
        .position(|l| l.contains("motion_*"))
        .map(|i| i + 1)
        .expect("the motion_* placement")
}

/// `pid 400` native, `pid 410` in a docker scope (systemd driver, as runc
/// makes it), `pid 420` in a `Delegate=yes` service's subgroup (its cgroup
/// marked `user.delegate` = 1 as systemd marks it): all `motion_control`.
fn container_layout(t: &FakeTree) -> String {
    let docker = format!("/system.slice/docker-{DOCKER_ID}.scope");
    let svc = "sys/fs/cgroup/system.slice/ros.service";
    for g in [format!("sys/fs/cgroup{docker}"), format!("{svc}/payload")] {
        t.file(&format!("{g}/cgroup.procs"), "").unwrap();
    }
    t.mark_delegated(svc, b"1")
        .expect("user.delegate (the test directory's filesystem needs user xattrs)");
    t.add_process(&FakeProcess::new(400, "motion_control"))
        .unwrap();
    t.add_process(&FakeProcess {
        cgroup: docker.clone(),
        ..FakeProcess::new(410, "motion_control")
    })
    .unwrap();
    t.add_process(&FakeProcess {
        cgroup: "/system.slice/ros.service/payload".into(),
        ..FakeProcess::new(420, "motion_control")
    })
    .unwrap();
    docker
}

fn left_alone_note(pid: i32, cgroup: &str, owner: &str) -> String {
    format!(
        "# left alone: pid {pid} (motion_control) in {cgroup}: placement at policy line {} \
         → realtime matches it, but its cgroup belongs to {owner}",
        motion_line()
    )
}

#[test]
fn check_plan_and_apply_leave_a_containers_process_where_it_is_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), POLICY);
    let docker = container_layout(&t);
    let docker_note = left_alone_note(410, &docker, "a container runtime (docker)");
    let svc_note = left_alone_note(
        420,
        "/system.slice/ros.service/payload",
        "the manager of a delegated subtree (/system.slice/ros.service is marked: Delegate=yes)",
    );
    // plan: the native process is moved, the other two are notes, not changes.
    let r = support::run(
        std::process::Command::new(support::bin())
            .arg("plan")
            .arg(&policy)
            .arg("--root")
            .arg(&root),
    );
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains("realtime/cgroup.procs 400 (was /)"),
        "{r}"
    );
    assert!(r.stdout.contains(&docker_note), "{r}");
    assert!(r.stdout.contains(&svc_note), "{r}");
    assert!(!r.stdout.contains(" 410 (was"), "{r}");
    assert!(!r.stdout.contains(" 420 (was"), "{r}");
    let changes = r.stdout.lines().filter(|l| !l.starts_with('#')).count() - 1;
    assert!(
        r.stdout.ends_with(&format!("{changes} changes\n")),
        "notes counted as changes:\n{r}"
    );
    // check on the board's tree says which placement matched and why it stayed.
    let r = support::run(
        std::process::Command::new(support::bin())
            .arg("check")
            .arg(&policy)
            .arg("--root")
            .arg(&root),
    );
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains(&docker_note), "{r}");
    assert!(r.stdout.contains(&svc_note), "{r}");
    // apply: the same, and the kernel's side shows it.
    let so = support::apply(&policy, &root);
    assert!(so.contains(&docker_note) && so.contains(&svc_note), "{so}");
    assert_eq!(cgroup_of(&root, 400), "0::/realtime");
    assert_eq!(cgroup_of(&root, 410), format!("0::{docker}"));
    assert_eq!(
        cgroup_of(&root, 420),
        "0::/system.slice/ros.service/payload"
    );
    assert_eq!(procs(&root, "realtime"), [400]);
    assert_eq!(procs(&root, &docker[1..]), [410]);
    // No sched for the container's process either (skipped lines name 400 only).
    assert!(
        !so.contains("SCHED 410") && !so.contains("SCHED 420"),
        "{so}"
    );
}

#[test]
fn the_daemon_leaves_a_containers_process_logs_it_once_and_status_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = support::board(dir.path(), POLICY);
    let docker = container_layout(&t);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log(
        &format!("placement left a process alone: pid 410 (motion_control) in {docker}"),
        Duration::from_secs(20),
    );
    d.wait_log(
        "placement left a process alone: pid 420 (motion_control) in /system.slice/ros.service/payload",
        Duration::from_secs(20),
    );
    d.wait_for("the native one placed", Duration::from_secs(20), || {
        cgroup_of(&root, 400) == "0::/realtime"
    });
    // A process that comes later into the container: left alone too.
    t.add_process(&FakeProcess {
        cgroup: docker.clone(),
        ..FakeProcess::new(411, "motion_planner")
    })
    .unwrap();
    d.wait_log(
        "placement left a process alone: pid 411 (motion_planner)",
        Duration::from_secs(20),
    );
    // Many ticks (each one a scan on a fake root): said once each.
    std::thread::sleep(Duration::from_millis(800));
    let cli = |args: &[&str]| {
        support::run(
            std::process::Command::new(support::bin())
                .args(args)
                .arg("--policy")
                .arg(&policy)
                .arg("--root")
                .arg(&root),
        )
    };
    let o = cli(&["status"]);
    assert_eq!(o.code, 0, "{o}");
    assert!(o.stdout.contains("LEFT ALONE"), "{o}");
    assert!(
        o.stdout.contains(&format!(
            "410 (motion_control) in {docker}: policy line {} → realtime; belongs to a container runtime (docker)",
            motion_line()
        )),
        "{o}"
    );
    let o = cli(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("status --json is JSON");
    let pids: Vec<i64> = v["left_alone"]
        .as_array()
        .map(|a| a.iter().filter_map(|k| k["pid"].as_i64()).collect())
        .unwrap_or_default();
    assert_eq!(pids, [410, 411, 420], "{v}");
    assert_eq!(v["left_alone"][0]["group"], "realtime");
    assert_eq!(v["left_alone"][0]["cgroup"], docker.as_str());
    // Gone: no longer listed.
    std::fs::remove_dir_all(root.join("proc/411")).unwrap();
    d.wait_for("411 unlisted", Duration::from_secs(20), || {
        let o = cli(&["status", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or_default();
        v["left_alone"]
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|k| k["pid"] != 411))
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    for pid in [410, 411, 420] {
        assert_eq!(
            log.matches(&format!("placement left a process alone: pid {pid} "))
                .count(),
            1,
            "pid {pid} not said exactly once:\n{log}"
        );
    }
    assert_eq!(cgroup_of(&root, 410), format!("0::{docker}"));
    assert_eq!(cgroup_of(&root, 411), "");
    assert_eq!(
        cgroup_of(&root, 420),
        "0::/system.slice/ros.service/payload"
    );
    assert_eq!(procs(&root, "realtime"), [400]);
}
