//! One writer per cgroup tree, and the originals journal's way out when it is
//! damaged, through the real binary on fake trees.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{processes_board, tree_snapshot, Daemon, Node, Run, Start};

/// A small policy of its own state_dir: a group, a sysctl.
fn policy(dir: &Path, name: &str, state_dir: &str) -> String {
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &p,
        format!(
            "version: 1\nproduct: {name}\nsettings: {{ state_dir: {state_dir} }}\n\
             groups:\n  app:\n    memory: {{ high: 512M }}\n\
             system:\n  sysctl: {{ vm.swappiness: 30 }}\n"
        ),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

/// The tree outside `/run` (where cgwarden keeps its state, sockets and
/// locks), relative to the root.
fn board_state(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(root).unwrap() {
        let name = e.unwrap().file_name();
        if name == "run" || name == "daemon.log" {
            continue;
        }
        let dir = root.join(&name);
        if dir.is_dir() {
            for (p, n) in tree_snapshot(&dir) {
                out.insert(Path::new(&name).join(p), n);
            }
        }
    }
    out
}

/// `cgwarden ARGS --root ROOT` of the binary under test (`CGWARDEN_TEST_BIN`
/// runs these against another build).
fn on(root: &Path, args: &[&str]) -> Run {
    support::run(support::cmd().args(args).arg("--root").arg(root))
}

/// Like [`on`] for a command that should be refused at once (`run`): one
/// still running after 30 s is killed, so a `run` that was not refused fails
/// the test instead of hanging it.
fn on_refused(root: &Path, args: &[&str]) -> Run {
    let mut child = support::cmd()
        .args(args)
        .arg("--root")
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap().into()
}

/// `run a.yaml` holds the tree; `run`, `apply` and `reset` of `b.yaml` (its
/// own state_dir, the same cgroup root) are refused naming a's pid and
/// state_dir, and write nothing. Once a is gone, b may work; a killed
/// holder's lock file does not block.
#[test]
fn a_second_cgwarden_on_the_same_cgroup_tree_is_refused_whatever_its_state_dir() {
    let (tmp, _t) = processes_board();
    let root = tmp.path();
    let a = policy(root, "a", "/run/cgw-a");
    let b = policy(root, "b", "/run/cgw-b");
    let d = Daemon::start(Path::new(&a), root, Start::default());
    let pid = d.pid();
    let before = board_state(root);
    let holder = format!("pid {pid} (cgwarden run {a}), state_dir /run/cgw-a");
    let lock = root.join("run/cgwarden/tree-sys-fs-cgroup.lock");
    assert!(lock.exists(), "the tree lock file is where the docs say");

    for (what, r) in [
        ("run", on_refused(root, &["run", &b, "--tick", "100ms"])),
        ("apply", on(root, &["apply", &b])),
        ("reset", on(root, &["reset", &b])),
    ] {
        assert_eq!(r.code, 1, "second {what}: {r}");
        assert!(r.stderr.contains(&holder), "{what} names the holder: {r}");
        assert!(
            r.stderr
                .contains("cgroup root /sys/fs/cgroup is in use by another cgwarden"),
            "{r}"
        );
        assert!(r.stderr.contains(&lock.display().to_string()), "{r}");
    }
    assert!(
        !root.join("run/cgw-b/originals").exists(),
        "the refused ones journalled nothing"
    );
    let after = board_state(root);
    assert_eq!(support::tree_diff(&before, &after), Vec::<String>::new());

    // A clean stop lets go: b may apply (and reset) then.
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!lock.exists(), "the lock file goes with the lock");
    let r = on(root, &["apply", &b]);
    assert_eq!(r.code, 0, "{r}");
    let r = on(root, &["reset", &b]);
    assert_eq!(r.code, 0, "{r}");

    // A holder killed outright leaves its file; its lock went with it.
    let d = Daemon::start(Path::new(&a), root, Start::default());
    let pid = d.pid();
    drop(d); // SIGKILL
    let left = std::fs::read_to_string(&lock).unwrap();
    assert!(left.starts_with(&format!("pid {pid}\n")), "{left}");
    let r = on(root, &["apply", &b]);
    assert_eq!(r.code, 0, "a dead holder does not block: {r}");
    let now = std::fs::read_to_string(&lock).unwrap_or_default();
    assert!(!now.contains(&format!("pid {pid}\n")), "taken over: {now}");
}

/// `reset` locks the tree its journal records, not the policy's: a reset of
/// a journal recorded for another cgroup root is refused while a daemon
/// holds that root.
#[test]
fn reset_locks_the_tree_its_journal_records() {
    let (tmp, _t) = processes_board();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("sys/fs/cgroup/sub")).unwrap();
    for f in ["cgroup.controllers", "cgroup.subtree_control"] {
        std::fs::copy(
            root.join("sys/fs/cgroup").join(f),
            root.join("sys/fs/cgroup/sub").join(f),
        )
        .unwrap();
    }
    // b's journal records /sys/fs/cgroup/sub; its policy now names the default.
    let b_sub = root.join("b-sub.yaml");
    std::fs::write(
        &b_sub,
        "version: 1\nsettings: { state_dir: /run/cgw-b, cgroup_root: /sys/fs/cgroup/sub }\n\
         groups:\n  app:\n    memory: { high: 256M }\n",
    )
    .unwrap();
    let r = on(root, &["apply", b_sub.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r}");
    let b = policy(root, "b", "/run/cgw-b");
    // A daemon holds /sys/fs/cgroup/sub.
    let a_sub = root.join("a-sub.yaml");
    std::fs::write(
        &a_sub,
        "version: 1\nsettings: { state_dir: /run/cgw-a, cgroup_root: /sys/fs/cgroup/sub }\n",
    )
    .unwrap();
    let d = Daemon::start(&a_sub, root, Start::default());
    let r = on(root, &["reset", &b]);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr
            .contains("cgroup root /sys/fs/cgroup/sub is in use by another cgwarden"),
        "{r}"
    );
    assert!(root.join("run/cgw-b/originals").exists());
    drop(d);
    let r = on(root, &["reset", &b]);
    assert_eq!(r.code, 0, "{r}");
    assert!(!root.join("run/cgw-b/originals").exists());
}

/// zram's algorithm is journalled as the active one, not the list its file
/// reads (which the kernel, and the fake tree, refuse), and `reset` writes
/// that back. The coupled sysctls: writing `vm.dirty_bytes` zeroes
/// `vm.dirty_ratio` (as the kernel does), which is journalled beside it and
/// put back by `reset` — never a 0 into `vm.dirty_bytes`, which the kernel
/// refuses.
#[test]
fn every_journalled_original_is_written_back_as_its_file_takes_it() {
    let (tmp, _t) = processes_board();
    let root = tmp.path();
    let p = root.join("orig.yaml");
    std::fs::write(
        &p,
        "version: 1\nsystem:\n  sysctl:\n    vm.dirty_bytes: 67108864\n    \
         vm.dirty_background_bytes: 33554432\n  zram:\n    zram0: { algorithm: lz4, size: 128M }\n",
    )
    .unwrap();
    let p = p.to_str().unwrap();
    let read = |rel: &str| support::read(root, rel);
    assert_eq!(
        read("sys/block/zram0/comp_algorithm"),
        "lzo [lzo-rle] lz4 lz4hc zstd"
    );
    let r = on(root, &["apply", p]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(
        read("sys/block/zram0/comp_algorithm"),
        "lzo lzo-rle [lz4] lz4hc zstd"
    );
    assert_eq!(
        read("proc/sys/vm/dirty_ratio"),
        "0",
        "the kernel zeroes the ratio"
    );
    let journal = read("run/cgwarden/originals");
    for line in [
        "FILE\t/sys/block/zram0/comp_algorithm\tlzo-rle",
        "FILE\t/proc/sys/vm/dirty_ratio\t20\\n",
        "FILE\t/proc/sys/vm/dirty_background_ratio\t10\\n",
    ] {
        assert!(journal.lines().any(|l| l == line), "{line:?} in\n{journal}");
    }
    let r = on(root, &["reset", p]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(
        read("sys/block/zram0/comp_algorithm"),
        "lzo [lzo-rle] lz4 lz4hc zstd"
    );
    for (f, v) in [
        ("dirty_bytes", "0"),
        ("dirty_ratio", "20"),
        ("dirty_background_bytes", "0"),
        ("dirty_background_ratio", "10"),
    ] {
        assert_eq!(read(&format!("proc/sys/vm/{f}")), v, "{f}");
    }
    assert!(!root.join("run/cgwarden/originals").exists());
}

/// A damaged journal: `reset`, `apply` and `run` refuse it naming its real
/// path under `--root`, the damaged line's number and text, and the way out;
/// `reset --salvage` restores the lines that can be trusted, never one that
/// names a file no family owns, sets the file aside byte for byte, and the
/// unit can start again.
#[test]
fn a_damaged_journal_names_its_real_path_and_line_and_salvage_is_the_way_out() {
    let (tmp, _t) = processes_board();
    let root = tmp.path();
    let p = policy(root, "p", "/run/cgwarden");
    std::fs::write(root.join("proc/sys/kernel/core_pattern"), "core\n").unwrap();
    let r = on(root, &["apply", &p]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(support::read(root, "proc/sys/vm/swappiness"), "30");
    let journal = root.join("run/cgwarden/originals");
    let good = std::fs::read_to_string(&journal).unwrap();
    let n = good.lines().count();
    let damaged = format!(
        "{good}FILE\t/proc/sys/vm/swa\nFILE\t/proc/sys/kernel/core_pattern\t|/tmp/x %p\\n\n"
    );
    std::fs::write(&journal, &damaged).unwrap();
    let shown = journal.display().to_string();

    for (what, r) in [
        ("reset", on(root, &["reset", &p])),
        ("apply", on(root, &["apply", &p])),
        ("run", on_refused(root, &["run", &p, "--tick", "100ms"])),
    ] {
        assert_eq!(r.code, 1, "{what}: {r}");
        let line = format!(
            "{shown}: line {}: damaged entry \"FILE\\t/proc/sys/vm/swa\"",
            n + 1
        );
        assert!(r.stderr.contains(&line), "{what} names {line:?}: {r}");
        assert!(
            r.stderr.contains("cgwarden reset --salvage POLICY")
                && r.stderr.contains("docs/journal-recovery.md"),
            "{what} gives the way out: {r}"
        );
    }
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), damaged);

    let r = on(root, &["reset", "--salvage", &p]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stderr.contains(&format!(
            "set aside, not restored: line {}: damaged entry",
            n + 1
        )),
        "{r}"
    );
    assert!(
        r.stderr.contains(&format!(
            "set aside, not restored: line {}: names /proc/sys/kernel/core_pattern",
            n + 2
        )),
        "{r}"
    );
    assert!(r.stdout.contains("WRITE /proc/sys/vm/swappiness 60"), "{r}");
    assert!(r.stdout.contains("reset complete; journal removed"), "{r}");
    assert_eq!(support::read(root, "proc/sys/vm/swappiness"), "60");
    assert_eq!(support::read(root, "proc/sys/kernel/core_pattern"), "core");
    assert!(
        !root.join("sys/fs/cgroup/app").exists(),
        "the created group is removed"
    );
    let aside: Vec<PathBuf> = std::fs::read_dir(root.join("run/cgwarden"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("originals.damaged-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read_to_string(&aside[0]).unwrap(), damaged);
    assert!(
        r.stderr.contains(&format!(
            "the damaged file is kept as {}",
            aside[0].display()
        )),
        "{r}"
    );
    assert!(!journal.exists());
    // The way is open again.
    let r = on(root, &["apply", &p]);
    assert_eq!(r.code, 0, "{r}");
}

/// A file that is not a cgwarden journal gives nothing to restore: salvage
/// says so, sets it aside, and acts on none of its lines.
#[test]
fn salvage_restores_nothing_from_a_file_that_is_not_a_journal() {
    let (tmp, _t) = processes_board();
    let root = tmp.path();
    let p = policy(root, "p", "/run/cgwarden");
    let journal = root.join("run/cgwarden/originals");
    std::fs::create_dir_all(journal.parent().unwrap()).unwrap();
    std::fs::write(&journal, "FILE\t/proc/sys/vm/swappiness\t1\\n\n").unwrap();
    let r = on(root, &["reset", "--salvage", &p]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains("nothing restored: no line of the damaged journal can be trusted"),
        "{r}"
    );
    assert!(r.stderr.contains("not a cgwarden journal"), "{r}");
    assert_eq!(support::read(root, "proc/sys/vm/swappiness"), "60");
    assert!(!journal.exists());
    let r = on(root, &["apply", &p]);
    assert_eq!(r.code, 0, "{r}");
}

/// `size: 50%` is a share of the board's MemTotal (`--root`'s
/// /proc/meminfo), in whole MiB rounded down as zram-generator does; plain
/// `check` leaves it a share; a board without MemTotal has the device missing.
#[test]
fn zram_size_as_a_share_of_the_boards_ram() {
    let (tmp, _t) = processes_board();
    let root = tmp.path();
    let p = root.join("zram.yaml");
    std::fs::write(
        &p,
        "version: 1\nsettings: { on_missing: fail }\nsystem:\n  zram:\n    zram0: { size: 50% }\n",
    )
    .unwrap();
    let p = p.to_str().unwrap();
    let r = support::run(support::cmd().args(["check", p]));
    assert_eq!(r.code, 0, "{r}");
    for (bad, says) in [
        ("0%", "invalid zram size `0%`"),
        ("500%", "at most 400"),
        ("-50%", "a share of RAM is a number above 0"),
        ("0", "must be more than 0"),
        ("max", "needs a size, not `max`"),
    ] {
        let f = root.join("bad.yaml");
        std::fs::write(
            &f,
            format!("version: 1\nsystem:\n  zram:\n    zram0: {{ size: {bad} }}\n"),
        )
        .unwrap();
        let r = support::run(support::cmd().arg("check").arg(&f));
        assert_eq!(r.code, 1, "{bad}: {r}");
        assert!(
            r.stderr.contains("bad.yaml:4:") && r.stderr.contains(says),
            "{bad}: {r}"
        );
    }

    // No MemTotal on this board: missing, and on_missing: fail writes nothing.
    let r = on(root, &["apply", p]);
    assert_eq!(r.code, 3, "{r}");
    assert!(
        r.stderr
            .contains("zram zram0: size 50% of RAM cannot be resolved"),
        "{r}"
    );
    assert_eq!(support::read(root, "sys/block/zram0/disksize"), "0");

    std::fs::write(
        root.join("proc/meminfo"),
        "MemTotal:        2013248 kB\nMemFree:         1500000 kB\nMemAvailable:    1800000 kB\n",
    )
    .unwrap();
    let r = on(root, &["plan", p]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains("WRITE /sys/block/zram0/disksize 1030750208 (was 0)"),
        "983 MiB: {r}"
    );
    let r = on(root, &["apply", p]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(
        support::read(root, "sys/block/zram0/disksize"),
        "1030750208"
    );
    let r = on(root, &["reset", p]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(support::read(root, "sys/block/zram0/disksize"), "0");
}
