//! One writer per cgroup tree, and the originals journal's way out when it is
//! damaged, through the real binary on fake trees.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
        ("run", on(root, &["run", &b, "--tick", "100ms"])),
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
