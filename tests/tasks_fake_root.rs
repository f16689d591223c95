//! Per-process attributes on a fake root: a placement's per-process attributes and
//! `threads:` matched by thread comm and merged over the process's own
//! (`plan` shows one TASK line per change), `apply` makes the file-backed
//! ones (oom_score_adj, the thread move through `cgroup.threads`) and skips
//! the syscall ones, a second `plan` no longer lists what was made, and a
//! real-time thread sched on a match by name only is not granted to a
//! process that is not root's.

use cgwarden::testing::{FakeProcess, FakeTree};

mod support;
use support::{cgwarden, read};

const POLICY: &str = r#"
version: 1
groups:
  node:
    cpu: { weight: 100 }
    children:
      node-rt:
        type: threaded
        cpuset: { cpus: "3" }
placement:
  - match: { comm: "motion_*" }
    group: node
    nice: 5
    oom_score_adj: -900
    ioprio: { class: be, level: 1 }
    cpus: 1-3
    threads:
      - name: "ctrl*"
        group: node-rt
        sched: { policy: fifo, priority: 90 }
        cpus: "3"
      - name: "log"
        nice: 10
"#;

fn board() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = FakeTree::standard(tmp.path().join("root")).expect("tree");
    let mut node = FakeProcess::new(412, "motion_node");
    node.threads = vec![412, 413, 414, 415];
    let mut user = FakeProcess::new(600, "motion_user");
    user.uid = 1000;
    user.threads = vec![600, 601];
    t.add_processes(&[node, user]).expect("processes");
    for (pid, tid, comm) in [
        (412, 413, "ctrl"),
        (412, 414, "log"),
        (412, 415, "worker"),
        (600, 601, "ctrl"),
    ] {
        t.file(&format!("proc/{pid}/task/{tid}/comm"), comm)
            .expect("comm");
    }
    let policy = tmp.path().join("p.yaml");
    std::fs::write(&policy, POLICY).expect("policy");
    (tmp, policy)
}

fn run(cmd: &str, tmp: &tempfile::TempDir, policy: &std::path::Path) -> support::Run {
    let root = tmp.path().join("root");
    let r = cgwarden(&[
        cmd,
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert!(
        r.code == 0 || r.code == 1,
        "{cmd}: {}\n{}",
        r.stdout,
        r.stderr
    );
    r
}

fn tasks(out: &str, pid_tid: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| {
            l.trim_start_matches("# skipped on a fake root: ")
                .strip_prefix("TASK ")
        })
        .filter(|l| l.starts_with(&format!("{pid_tid} ")))
        .map(|l| l.split_once(' ').map_or("", |(_, r)| r).to_string())
        .collect()
}

#[test]
fn plan_merges_thread_entries_over_the_process_attributes() {
    let (tmp, policy) = board();
    let r = run("plan", &tmp, &policy);
    let out = &r.stdout;
    assert!(
        out.contains("WRITE /sys/fs/cgroup/node/node-rt/cgroup.type threaded"),
        "{out}"
    );
    // The main thread: the process's attributes, and oom_score_adj once.
    assert_eq!(
        tasks(out, "412/412"),
        [
            "(motion_node) cpus 1-3 (was 0-7)",
            "(motion_node) nice 5 (was 0)",
            "(motion_node) ioprio be 1 (was -)",
            "(motion_node) oom_score_adj -900 (was 0)",
        ],
        "{out}"
    );
    // ctrl: its entry's group, cpus and sched over the process's; no nice
    // beside a fifo sched; no oom_score_adj (per process).
    assert_eq!(
        tasks(out, "412/413"),
        [
            "(ctrl) group node-rt (was /)",
            "(ctrl) cpus 3 (was 0-7)",
            "(ctrl) sched fifo 90 (was -)",
            "(ctrl) ioprio be 1 (was -)",
        ],
        "{out}"
    );
    // log: its own nice over the process's, the rest from the process.
    assert_eq!(
        tasks(out, "412/414"),
        [
            "(log) cpus 1-3 (was 0-7)",
            "(log) nice 10 (was 0)",
            "(log) ioprio be 1 (was -)",
        ],
        "{out}"
    );
    // A thread no entry names: the process's attributes only.
    assert_eq!(
        tasks(out, "412/415"),
        [
            "(worker) cpus 1-3 (was 0-7)",
            "(worker) nice 5 (was 0)",
            "(worker) ioprio be 1 (was -)",
        ],
        "{out}"
    );
    // uid 1000 matched by name only: no real-time thread, said why.
    assert!(
        tasks(out, "600/601").iter().all(|t| !t.contains("sched")),
        "{out}"
    );
    assert!(
        r.stderr.contains("600/601 (ctrl) sched fifo 90") && r.stderr.contains("not granted"),
        "{}",
        r.stderr
    );
    // plan writes nothing.
    assert_eq!(
        read(&tmp.path().join("root"), "proc/412/oom_score_adj").trim(),
        "0"
    );
}

#[test]
fn apply_makes_the_file_backed_changes_and_a_second_plan_drops_them() {
    let (tmp, policy) = board();
    let root = tmp.path().join("root");
    let r = run("apply", &tmp, &policy);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(read(&root, "proc/412/oom_score_adj").trim(), "-900");
    assert_eq!(
        read(&root, "sys/fs/cgroup/node/node-rt/cgroup.type").trim(),
        "threaded"
    );
    // The uid-1000 ctrl is moved too: only its real-time sched is refused.
    assert_eq!(
        read(&root, "sys/fs/cgroup/node/node-rt/cgroup.threads").trim(),
        "413\n601"
    );
    assert_eq!(
        read(&root, "proc/412/task/413/cgroup").trim(),
        "0::/node/node-rt"
    );
    assert!(
        r.stdout
            .contains("# skipped on a fake root: TASK 412/413 (ctrl) sched fifo 90"),
        "{}",
        r.stdout
    );
    let again = run("plan", &tmp, &policy);
    assert!(
        tasks(&again.stdout, "412/412")
            .iter()
            .all(|t| !t.contains("oom_score_adj")),
        "{}",
        again.stdout
    );
    assert!(
        tasks(&again.stdout, "412/413")
            .iter()
            .all(|t| !t.contains("group")),
        "{}",
        again.stdout
    );
    assert!(!again.stdout.contains("cgroup.type"), "{}", again.stdout);
    // The original was journalled before the write; reset puts it back on
    // the same process (pid and start time) and removes the group.
    let journal = read(&root, "run/cgwarden/tasks.journal");
    assert!(
        journal.contains("TASK 412 100 412 oom_score_adj 0"),
        "{journal}"
    );
    let r = cgwarden(&[
        "reset",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("TASK 412/412 oom_score_adj 0"),
        "{}",
        r.stdout
    );
    assert_eq!(read(&root, "proc/412/oom_score_adj").trim(), "0");
    assert!(!root.join("run/cgwarden/tasks.journal").exists());
    assert!(!root.join("sys/fs/cgroup/node").exists());
}

#[test]
fn reset_never_restores_on_a_process_that_reused_the_pid() {
    let (tmp, policy) = board();
    let root = tmp.path().join("root");
    assert_eq!(run("apply", &tmp, &policy).code, 0);
    assert_eq!(read(&root, "proc/412/oom_score_adj").trim(), "-900");
    // pid 412 is now another process (a later start time).
    let stat = read(&root, "proc/412/stat").replacen(" 100 ", " 777 ", 1);
    std::fs::write(root.join("proc/412/stat"), stat).unwrap();
    let r = cgwarden(&[
        "reset",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("TASK 412/"), "{}", r.stdout);
    assert!(
        r.stdout.contains("TASK 600/600 oom_score_adj 0"),
        "{}",
        r.stdout
    );
    assert_eq!(read(&root, "proc/412/oom_score_adj").trim(), "-900");
}

#[test]
fn check_refuses_misplaced_threaded_groups() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(
        &bad,
        r#"
version: 1
groups:
  top: { type: threaded }
  node:
    children:
      rt: { type: threaded, memory: { max: 64M } }
  other: {}
  pinned: { cpuset: { cpus: "0-1" } }
placement:
  - match: { comm: a }
    group: rt
  - match: { comm: c }
    group: pinned
    cpus: 1-2
  - match: { comm: b }
    group: other
    oom_score_adj: 2000
    threads:
      - name: ctrl
        group: other
"#,
    )
    .expect("write");
    let r = cgwarden(&["check", bad.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let all = format!("{}{}", r.stdout, r.stderr);
    for want in [
        "group `top` is `type: threaded` at the top level",
        "memory is not a threaded controller",
        "placement group `rt` is `type: threaded`",
        "placement.oom_score_adj must be between -1000 and 1000",
        "threads group `other` is not `type: threaded`",
        "placement cpus 1-2 is not within group `pinned`'s cpuset.cpus 0-1",
    ] {
        assert!(all.contains(want), "missing {want:?} in:\n{all}");
    }
}
