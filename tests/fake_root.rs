//! Fake-root tests: the real binary run with `--root` against a temp dir laid
//! out like a board's /sys and /proc (see `cgwarden::testing::FakeTree`).

use cgwarden::testing::FakeTree;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod support;
use support::{cgwarden, processes_board, read, repo};

/// Every regular file under `dir` with its content, for before/after comparisons.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            let p = e.path();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(
                    rel,
                    String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned(),
                );
            }
        }
    }
    out
}

fn dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                out.push(e.path().strip_prefix(dir).unwrap().to_path_buf());
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn plan_lists_writes_in_order_and_changes_nothing() {
    let (tmp, _t) = processes_board();
    let before = snapshot(tmp.path());
    let dirs_before = dirs(tmp.path());
    let r = cgwarden(&[
        "plan",
        &repo("policies/iq9100-vision.yaml"),
        "--root",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let pos = |needle: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no line starting with {needle:?} in:\n{}", r.stdout))
    };
    // Controllers at the root before any group, parents before their knobs,
    // mems before cpus, memory.high before memory.max.
    let enable = pos(
        "WRITE /sys/fs/cgroup/cgroup.subtree_control +cpu +cpuset +io +memory +pids (was \"\")",
    );
    let mkdir = pos("MKDIR /sys/fs/cgroup/realtime");
    let mems = pos("WRITE /sys/fs/cgroup/realtime/cpuset.mems 0 (was -)");
    let cpus = pos("WRITE /sys/fs/cgroup/realtime/cpuset.cpus 6-7 (was -)");
    let part = pos("WRITE /sys/fs/cgroup/realtime/cpuset.cpus.partition isolated (was -)");
    assert!(enable < mkdir && mkdir < mems && mems < cpus && cpus < part);
    assert!(
        pos("WRITE /sys/fs/cgroup/vision/memory.high 3758096384")
            < pos("WRITE /sys/fs/cgroup/vision/memory.max 4294967296")
    );
    pos("WRITE /proc/sys/vm/swappiness 30 (was 60)");
    pos("WRITE /sys/block/zram0/comp_algorithm lz4 (was lzo-rle)");
    pos("WRITE /sys/block/zram0/disksize 4294967296 (was 0)");
    pos("# skipped on a fake root: SWAPON /dev/zram0 priority 100");
    pos("WRITE /sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq 1200000 (was 691200)");
    pos("WRITE /sys/devices/system/cpu/cpufreq/policy7/scaling_governor performance (was schedutil)");
    pos("WRITE /proc/irq/16/smp_affinity_list 0-5 (was 0-7)");
    pos("WRITE /sys/devices/virtual/workqueue/cpumask 3f (was ff)");
    pos("WRITE /proc/sys/kernel/timer_migration 0 (was 1)");
    pos("WRITE /sys/kernel/rcu_expedited 1 (was 0)");
    pos("WRITE /sys/devices/system/cpu/cpu7/cpuidle/state2/disable 1 (was 0)");
    assert!(
        !r.stdout.contains("cpu6/cpuidle/state0/"),
        "state0 is not deeper than 0"
    );
    pos("WRITE /sys/fs/cgroup/realtime/cgroup.procs 400 (was /)");
    pos("WRITE /sys/fs/cgroup/inference/cgroup.procs 500 (was /)");
    pos("WRITE /sys/fs/cgroup/vision/cgroup.procs 600 (was /)");
    pos("WRITE /sys/fs/cgroup/system/cgroup.procs 700 (was /)");
    pos("# skipped on a fake root: SCHED 400 fifo priority 90");
    assert!(
        !r.stdout.contains("cgroup.procs 1 (was"),
        "systemd matches no rule:\n{}",
        r.stdout
    );
    let last = lines.last().unwrap();
    let counted = lines
        .iter()
        .filter(|l| l.starts_with("WRITE") || l.starts_with("MKDIR"))
        .count();
    assert_eq!(*last, format!("{counted} changes"));
    assert_eq!(
        snapshot(tmp.path()),
        before,
        "plan must not change anything"
    );
    assert_eq!(
        dirs(tmp.path()),
        dirs_before,
        "plan must not create directories"
    );
}

#[test]
fn apply_converges_then_is_idempotent_and_reset_restores_everything() {
    let (tmp, t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = repo("policies/iq9100-vision.yaml");
    let before = snapshot(tmp.path());
    let dirs_before = dirs(tmp.path());

    let r = cgwarden(&["apply", &policy, "--root", root]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    // The hierarchy and every baseline knob.
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/cgroup.subtree_control"),
        "+cpu +cpuset +io +memory +pids"
    );
    assert_eq!(read(t.dir(), "sys/fs/cgroup/realtime/cpuset.cpus"), "6-7");
    assert_eq!(read(t.dir(), "sys/fs/cgroup/realtime/cpuset.mems"), "0");
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/cpuset.cpus.partition"),
        "isolated"
    );
    assert_eq!(read(t.dir(), "sys/fs/cgroup/realtime/cpu.weight"), "200");
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/cpu.max"),
        "max 100000"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/cpu.uclamp.min"),
        "80.00"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/cpu.uclamp.max"),
        "100.00"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/memory.min"),
        "268435456"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/memory.low"),
        "536870912"
    );
    assert_eq!(read(t.dir(), "sys/fs/cgroup/realtime/memory.high"), "max");
    assert_eq!(read(t.dir(), "sys/fs/cgroup/realtime/memory.swap.max"), "0");
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/memory.oom.group"),
        "1"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/io.weight"),
        "default 500"
    );
    assert_eq!(read(t.dir(), "sys/fs/cgroup/realtime/pids.max"), "512");
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/inference/memory.high"),
        "8589934592"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/inference/memory.max"),
        "10737418240"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/vision/memory.high"),
        "3758096384"
    );
    assert_eq!(read(t.dir(), "sys/fs/cgroup/system/cpu.weight"), "10");
    assert_eq!(read(t.dir(), "sys/fs/cgroup/system/cpuset.cpus"), "0-1");
    for (k, v) in [
        ("vm/swappiness", "30"),
        ("vm/min_free_kbytes", "65536"),
        ("vm/watermark_scale_factor", "150"),
        ("vm/watermark_boost_factor", "0"),
        ("vm/dirty_ratio", "5"),
        ("vm/dirty_background_ratio", "2"),
        ("vm/dirty_expire_centisecs", "1500"),
        ("kernel/sched_rt_runtime_us", "950000"),
        ("kernel/timer_migration", "0"),
    ] {
        assert_eq!(read(t.dir(), &format!("proc/sys/{k}")), v, "{k}");
    }
    assert_eq!(read(t.dir(), "sys/kernel/rcu_expedited"), "1");
    assert_eq!(
        read(t.dir(), "sys/block/zram0/comp_algorithm"),
        "lzo lzo-rle [lz4] lz4hc zstd"
    );
    assert_eq!(read(t.dir(), "sys/block/zram0/disksize"), "4294967296");
    assert_eq!(
        read(
            t.dir(),
            "sys/devices/system/cpu/cpufreq/policy4/scaling_governor"
        ),
        "schedutil"
    );
    assert_eq!(
        read(
            t.dir(),
            "sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq"
        ),
        "1200000"
    );
    assert_eq!(
        read(
            t.dir(),
            "sys/devices/system/cpu/cpufreq/policy7/scaling_governor"
        ),
        "performance"
    );
    assert_eq!(read(t.dir(), "proc/irq/24/smp_affinity_list"), "0-5");
    assert_eq!(read(t.dir(), "proc/irq/default_smp_affinity"), "3f");
    assert_eq!(read(t.dir(), "sys/devices/virtual/workqueue/cpumask"), "3f");
    for cpu in [6, 7] {
        assert_eq!(
            read(
                t.dir(),
                &format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state0/disable")
            ),
            "0"
        );
        assert_eq!(
            read(
                t.dir(),
                &format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state1/disable")
            ),
            "1"
        );
        assert_eq!(
            read(
                t.dir(),
                &format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state2/disable")
            ),
            "1"
        );
    }
    assert_eq!(
        read(
            t.dir(),
            "sys/devices/system/cpu/cpu5/cpuidle/state2/disable"
        ),
        "0"
    );
    // Processes are placed; the fake kernel rewrites /proc/PID/cgroup.
    assert_eq!(read(t.dir(), "proc/400/cgroup"), "0::/realtime");
    assert_eq!(read(t.dir(), "proc/500/cgroup"), "0::/inference");
    assert_eq!(read(t.dir(), "proc/600/cgroup"), "0::/vision");
    assert_eq!(read(t.dir(), "proc/700/cgroup"), "0::/system");
    assert_eq!(read(t.dir(), "proc/1/cgroup"), "0::/");
    assert!(read(t.dir(), "sys/fs/cgroup/realtime/cgroup.procs")
        .lines()
        .any(|l| l.trim() == "400"));
    // What cannot happen without a kernel is said, not done.
    assert!(
        r.stdout
            .contains("# skipped on a fake root: SCHED 400 fifo priority 90"),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .contains("# skipped on a fake root: SWAPON /dev/zram0 priority 100"));
    assert!(t.read("run/cgwarden/originals").is_ok(), "journal written");

    // Idempotent: nothing more to do.
    let again = cgwarden(&["apply", &policy, "--root", root]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.lines().any(|l| l == "0 changes"),
        "{}",
        again.stdout
    );
    assert!(
        !again
            .stdout
            .lines()
            .any(|l| l.starts_with("WRITE") || l.starts_with("MKDIR")),
        "{}",
        again.stdout
    );
    let plan = cgwarden(&["plan", &policy, "--root", root]);
    let real_lines: Vec<&str> = plan
        .stdout
        .lines()
        .filter(|l| !l.starts_with("# skipped on a fake root"))
        .collect();
    assert_eq!(
        real_lines,
        vec!["0 changes"],
        "plan after apply:\n{}",
        plan.stdout
    );

    // Reset puts every file back and removes every directory it created.
    let r = cgwarden(&["reset", "--policy", &policy, "--root", root]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let after = snapshot(tmp.path());
    let mut diffs = Vec::new();
    // The order of cgroup.procs means nothing; its members do.
    let members = |s: &str| {
        let mut v: Vec<String> = s.split_whitespace().map(String::from).collect();
        v.sort();
        v
    };
    for (path, orig) in &before {
        match after.get(path) {
            Some(now) if now.trim() == orig.trim() => {}
            Some(now) if path.ends_with("cgroup.procs") && members(now) == members(orig) => {}
            Some(now) => diffs.push(format!("{}: {:?} -> {:?}", path.display(), orig, now)),
            None => diffs.push(format!("{}: removed", path.display())),
        }
    }
    for path in after.keys() {
        if !before.contains_key(path) {
            diffs.push(format!("{}: left behind", path.display()));
        }
    }
    assert!(
        diffs.is_empty(),
        "reset left differences:\n{}",
        diffs.join("\n")
    );
    // state_dir stays (it is where the daemon keeps its socket); nothing else does.
    let left: Vec<PathBuf> = dirs(tmp.path())
        .into_iter()
        .filter(|d| d != Path::new("run/cgwarden"))
        .collect();
    assert_eq!(left, dirs_before);
}

#[test]
fn journal_keeps_first_originals_across_a_crash() {
    let (tmp, t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = repo("policies/iq9100-vision.yaml");
    assert_eq!(cgwarden(&["apply", &policy, "--root", root]).code, 0);
    // Someone (or a crashed run's later state) changes knobs; apply converges again.
    t.file("proc/sys/vm/swappiness", "77").unwrap();
    t.file("proc/sys/vm/dirty_ratio", "40").unwrap();
    let r = cgwarden(&["apply", &policy, "--root", root]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("WRITE /proc/sys/vm/swappiness 30 (was 77)"),
        "{}",
        r.stdout
    );
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "30");
    let journal = t.read("run/cgwarden/originals").unwrap();
    assert!(
        journal.contains("FILE\t/proc/sys/vm/swappiness\t60"),
        "{journal}"
    );
    assert!(
        !journal.contains("\t77"),
        "a later value must never replace an original:\n{journal}"
    );
    assert_eq!(
        cgwarden(&["reset", "--policy", &policy, "--root", root]).code,
        0
    );
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "60");
    assert_eq!(read(t.dir(), "proc/sys/vm/dirty_ratio"), "20");
    assert!(
        t.read("run/cgwarden/originals").is_err(),
        "journal deleted after reset"
    );
}

fn write_policy(dir: &Path, text: &str) -> String {
    let p = dir.join("policy.yaml");
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn on_missing_fail_exits_3_and_writes_nothing() {
    let (tmp, t) = processes_board();
    // A kernel without uclamp, and no cpufreq policy9.
    std::fs::remove_file(tmp.path().join("proc/sys/kernel/sched_util_clamp_min")).unwrap();
    let before = snapshot(tmp.path());
    let pol_dir = tempfile::tempdir().unwrap();
    let text = "version: 1\nsettings: { on_missing: fail }\ngroups:\n  rt:\n    uclamp: { min: 50% }\n    cpu: { weight: 100 }\nsystem:\n  sysctl: { vm.swappiness: 10 }\n  cpufreq:\n    policy9: { governor: performance }\n";
    let policy = write_policy(pol_dir.path(), text);
    let r = cgwarden(&["apply", &policy, "--root", tmp.path().to_str().unwrap()]);
    assert_eq!(r.code, 3, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("cpu.uclamp.min"), "{}", r.stderr);
    assert!(r.stderr.contains("policy9"), "{}", r.stderr);
    assert_eq!(snapshot(tmp.path()), before, "nothing may be written");
    assert!(!tmp.path().join("sys/fs/cgroup/rt").exists());
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "60");

    // The same with on_missing: warn applies everything else.
    let policy = write_policy(pol_dir.path(), &text.replace("fail", "warn"));
    let r = cgwarden(&["apply", &policy, "--root", tmp.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("missing") && r.stderr.contains("cpu.uclamp.min"),
        "{}",
        r.stderr
    );
    assert_eq!(read(t.dir(), "sys/fs/cgroup/rt/cpu.weight"), "100");
    assert!(!tmp.path().join("sys/fs/cgroup/rt/cpu.uclamp.min").exists());
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "10");
}

#[test]
fn controller_not_offered_is_missing() {
    let (tmp, t) = processes_board();
    t.file("sys/fs/cgroup/cgroup.controllers", "cpu memory")
        .unwrap();
    let pol_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(
        pol_dir.path(),
        "version: 1\nsettings: { on_missing: fail }\ngroups:\n  a:\n    io: { weight: 100 }\n    memory: { max: 1G }\n",
    );
    let r = cgwarden(&["plan", &policy, "--root", tmp.path().to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("controller `io` is not offered"),
        "{}",
        r.stderr
    );
}

#[test]
fn nested_groups_enable_controllers_top_down_and_place_in_leaves() {
    let (tmp, t) = processes_board();
    let pol_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(
        pol_dir.path(),
        "version: 1\ngroups:\n  vision:\n    cpuset: { cpus: \"2-5\" }\n    children:\n      capture:\n        cpuset: { cpus: \"2-3\" }\n        memory: { max: 1G }\n      encode:\n        pids: { max: 64 }\nplacement:\n  - match: { comm: sshd }\n    group: capture\n",
    );
    let root = tmp.path().to_str().unwrap();
    let r = cgwarden(&["apply", &policy, "--root", root]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/cgroup.subtree_control"),
        "+cpuset +memory +pids"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/vision/cgroup.subtree_control"),
        "+cpuset +memory +pids"
    );
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/vision/capture/memory.max"),
        "1073741824"
    );
    assert_eq!(read(t.dir(), "sys/fs/cgroup/vision/encode/pids.max"), "64");
    assert_eq!(read(t.dir(), "proc/700/cgroup"), "0::/vision/capture");
    let r = cgwarden(&["reset", "--policy", &policy, "--root", root]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!tmp.path().join("sys/fs/cgroup/vision").exists());
    assert_eq!(read(t.dir(), "proc/700/cgroup"), "0::/");
}

#[test]
fn reset_without_journal_is_a_no_op() {
    let (tmp, _t) = processes_board();
    let r = cgwarden(&[
        "reset",
        "--policy",
        &repo("policies/minimal.yaml"),
        "--root",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("nothing to reset"), "{}", r.stdout);
}

#[test]
fn vanished_process_is_skipped_silently() {
    let (tmp, t) = processes_board();
    // A /proc entry with only a comm (the process exited while we read it):
    // it matches motion_control's rule by name, but there is nothing to move.
    t.file("proc/900/comm", "motion_control").unwrap();
    let r = cgwarden(&[
        "apply",
        &repo("policies/iq9100-vision.yaml"),
        "--root",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert_eq!(read(t.dir(), "proc/400/cgroup"), "0::/realtime");
    // Silently: not a word about it, on either stream.
    assert_eq!(r.stderr, "", "stderr");
    assert!(
        !r.stdout
            .lines()
            .any(|l| l.split_whitespace().any(|w| w == "900")),
        "pid 900 is named:\n{}",
        r.stdout
    );
    // Skipped: listed in no group, and its /proc entry is as it was.
    assert_eq!(read(t.dir(), "sys/fs/cgroup/realtime/cgroup.procs"), "400");
    let entries: Vec<_> = std::fs::read_dir(tmp.path().join("proc/900"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["comm"], "proc/900 changed");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(cgwarden(&["frobnicate"]).code, 2);
    assert_eq!(cgwarden(&["plan", "--bogus"]).code, 2);
}

/// A zram-only policy in its own file (state_dir under the fake root).
fn zram_policy(dir: &Path, on_missing: &str) -> String {
    let p = dir.join("zram.yaml");
    std::fs::write(
        &p,
        format!(
            "version: 1\nsettings:\n  state_dir: /run/cgwarden\n  on_missing: {on_missing}\n\
             system:\n  zram:\n    zram0: {{ algorithm: lz4, size: 128M, mem_limit: 32M, swap_priority: 42 }}\n"
        ),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn zram_initialised_by_someone_else_is_reset_and_reconfigured() {
    let tmp = tempfile::tempdir().unwrap();
    let pol_dir = tempfile::tempdir().unwrap();
    let t = FakeTree::standard(tmp.path()).unwrap();
    // Someone else's configuration, as the 6.1 guest shows it.
    t.file(
        "sys/block/zram0/comp_algorithm",
        "[lzo] lzo-rle lz4 lz4hc zstd ",
    )
    .unwrap();
    t.file("sys/block/zram0/disksize", "67108864").unwrap();
    t.file("sys/block/zram0/initstate", "1").unwrap();
    t.file(
        "sys/block/zram0/mm_stat",
        "       0        0        0 16777216        0        0        0        0        0",
    )
    .unwrap();
    let policy = zram_policy(pol_dir.path(), "warn");
    let root = tmp.path().to_str().unwrap();
    let plan = cgwarden(&["plan", &policy, "--root", root]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let lines: Vec<&str> = plan.stdout.lines().collect();
    assert_eq!(
        lines[..4],
        [
            // A write-only trigger: no `(was …)`, never read.
            "WRITE /sys/block/zram0/reset 1",
            "WRITE /sys/block/zram0/comp_algorithm lz4 (was lzo)",
            "WRITE /sys/block/zram0/disksize 134217728 (was 67108864)",
            "WRITE /sys/block/zram0/mem_limit 33554432 (was 16777216)",
        ],
        "{}",
        plan.stdout
    );
    let r = cgwarden(&["apply", &policy, "--root", root]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        read(t.dir(), "sys/block/zram0/comp_algorithm"),
        "lzo lzo-rle [lz4] lz4hc zstd"
    );
    assert_eq!(read(t.dir(), "sys/block/zram0/disksize"), "134217728");
    assert_eq!(read(t.dir(), "sys/block/zram0/mem_limit"), "33554432");
    let journal = read(t.dir(), "run/cgwarden/originals");
    for want in [
        "FILE\t/sys/block/zram0/comp_algorithm\tlzo\n",
        "FILE\t/sys/block/zram0/disksize\t67108864",
        "FILE\t/sys/block/zram0/mem_limit\t16777216",
    ] {
        assert!(journal.contains(want), "{want:?} not in\n{journal}");
    }
    assert!(!journal.contains("zram0/reset"), "{journal}");
}

#[test]
fn zram_module_absent_on_a_fake_root_is_missing_not_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let pol_dir = tempfile::tempdir().unwrap();
    let _t = FakeTree::standard(tmp.path()).unwrap();
    std::fs::remove_dir_all(tmp.path().join("sys/block/zram0")).unwrap();
    std::fs::remove_dir_all(tmp.path().join("sys/class/zram-control")).unwrap();
    let root = tmp.path().to_str().unwrap();
    let warn = zram_policy(pol_dir.path(), "warn");
    let plan = cgwarden(&["plan", &warn, "--root", root]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert_eq!(
        plan.stdout,
        "# skipped on a fake root: MODPROBE zram\n0 changes\n"
    );
    assert!(
        plan.stderr.contains(
            "missing: zram zram0: /sys/block/zram0 and /sys/class/zram-control are absent"
        ),
        "{}",
        plan.stderr
    );
    let fail = zram_policy(pol_dir.path(), "fail");
    let r = cgwarden(&["apply", &fail, "--root", root]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(!tmp.path().join("run/cgwarden/originals").exists());
}

#[test]
fn invalid_partition_is_a_change_not_converged() {
    let (tmp, t) = processes_board();
    let policy = repo("policies/iq9100-vision.yaml");
    let root = tmp.path().to_str().unwrap();
    assert_eq!(cgwarden(&["apply", &policy, "--root", root]).code, 0);
    // What 6.1 shows once a sibling outside the policy takes the partition's CPUs.
    let invalid = "isolated invalid (Cpu list in cpuset.cpus not exclusive)";
    t.file("sys/fs/cgroup/realtime/cpuset.cpus.partition", invalid)
        .unwrap();
    let plan = cgwarden(&["plan", &policy, "--root", root]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.lines().any(|l| l
            == format!(
                "WRITE /sys/fs/cgroup/realtime/cpuset.cpus.partition isolated (was {invalid})"
            )),
        "{}",
        plan.stdout
    );
    assert!(
        !plan.stdout.lines().any(|l| l == "0 changes"),
        "{}",
        plan.stdout
    );
    // A plain file reads back what was written, so here apply succeeds; the
    // kernel keeping it invalid (apply exit 1 with the reason) is the guest's
    // scenario 55-partition-invalid, and the read-back check's unit test.
    let r = cgwarden(&["apply", &policy, "--root", root]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        read(t.dir(), "sys/fs/cgroup/realtime/cpuset.cpus.partition"),
        "isolated"
    );
    let again = cgwarden(&["plan", &policy, "--root", root]);
    assert!(
        again.stdout.lines().any(|l| l == "0 changes"),
        "{}",
        again.stdout
    );
}
