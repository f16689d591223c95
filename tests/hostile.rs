//! Hostile and careless input that must never be turned against the box
//! (issue 10, SPEC §4 "Trust"). Each case names the item it covers; all run
//! the real binary against fake trees.

use cgwarden::kernel::fake_tree::FakeTree;
use std::path::Path;
use std::time::Duration;

mod support;
use support::{Daemon, Start};

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn pressure(root: &Path, total: u64) {
    std::fs::write(
        root.join("sys/fs/cgroup/app/memory.pressure"),
        format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
    )
    .unwrap();
}

/// Item 5: a PSI `total=` jump to 2^64-1 once fired a stall rule, raised
/// `pids.max` and ran a hook with an absurd value. It is ignored (logged
/// once); real stall afterwards still fires.
#[test]
fn psi_total_wraparound_is_never_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let _t = FakeTree::standard(&root).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\ngroups:\n  app:\n    pids: { max: 100 }\nrules:\n  - name: stall\n    when: app.memory.some > 100ms/1s\n    then: [\"raise app.pids.max by 10 up to 200\"]\n    cooldown: 1h\n",
    )
    .unwrap();
    support::apply(&policy, &root);
    pressure(&root, 1_000);
    let d = Daemon::start(&policy, &root, Start::default());
    std::thread::sleep(Duration::from_millis(400));
    pressure(&root, u64::MAX);
    d.wait_log("ignored as implausible", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        read(&root, "sys/fs/cgroup/app/pids.max"),
        "100",
        "{}",
        d.log()
    );
    // A plausible stall after the jump (500 ms within ~half a second) does fire.
    let base = u64::MAX - 600_000;
    pressure(&root, base);
    std::thread::sleep(Duration::from_millis(500));
    pressure(&root, base + 500_000);
    d.wait_for("the real stall fires", Duration::from_secs(10), || {
        read(&root, "sys/fs/cgroup/app/pids.max") == "110"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log.matches("ignored as implausible").count(),
        1,
        "said once:\n{log}"
    );
}

// ---- Item 1: the journal is not a root write primitive (journal, reset,
// state_dir, lock). Every case must fail on the code before issue 10.

const J_HEAD: &str = "# cgwarden originals journal v2\nROOT\t/sys/fs/cgroup\n";
const SMALL_POLICY: &str = "version: 1\ngroups:\n  app:\n    pids: { max: 100 }\n";

/// A standard fake tree with `SMALL_POLICY`; returns (tempdir, root, policy).
fn small_tree() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let _t = FakeTree::standard(&root).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, SMALL_POLICY).unwrap();
    (dir, root, policy)
}

fn write_journal(root: &Path, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let state = root.join("run/cgwarden");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let j = state.join("originals");
    std::fs::write(&j, text).unwrap();
    j
}

fn cgw(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = std::process::Command::new(support::BIN)
        .args(args)
        .output()
        .expect("run cgwarden");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn reset_at(policy: &Path, root: &Path) -> (i32, String) {
    cgw(&[
        "reset".as_ref(),
        "--policy".as_ref(),
        policy.as_os_str(),
        "--root".as_ref(),
        root.as_os_str(),
    ])
}

fn apply_at(policy: &Path, root: &Path) -> (i32, String) {
    cgw(&[
        "apply".as_ref(),
        policy.as_os_str(),
        "--root".as_ref(),
        root.as_os_str(),
    ])
}

#[test]
fn journal_lines_outside_managed_interfaces_make_reset_refuse_touching_nothing() {
    for line in [
        "FILE\t/etc/passwd\tpwned",
        "MKDIR\t/sys/fs/cgroup/../../../proc",
        "FILE\t/sys/fs/cgroup/../../etc/shadow\tpwned",
        "FILE\t/proc/sys/vm/../../../etc/passwd\tpwned",
        "ABSENT\t/etc/passwd",
    ] {
        let (_d, root, policy) = small_tree();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/passwd"), "root:x:0:0\n").unwrap();
        std::fs::write(root.join("etc/shadow"), "root:!:1\n").unwrap();
        let text = format!("{J_HEAD}MKDIR\t/sys/fs/cgroup/app\n{line}\n");
        let j = write_journal(&root, &text);
        let before = support::tree_snapshot(&root);
        let (code, out) = reset_at(&policy, &root);
        assert_eq!(code, 1, "{line}: {out}");
        assert!(
            out.contains("line 4"),
            "{line}: the message names the line: {out}"
        );
        assert_eq!(read(&root, "etc/passwd"), "root:x:0:0", "{line}");
        assert_eq!(read(&root, "etc/shadow"), "root:!:1", "{line}");
        assert_eq!(std::fs::read_to_string(&j).unwrap(), text, "journal kept");
        assert!(
            support::tree_diff(&before, &support::tree_snapshot(&root)).is_empty(),
            "{line}: nothing touched"
        );
    }
}

#[test]
fn reset_never_follows_a_symlink_in_the_root_to_the_outside() {
    let (d, root, policy) = small_tree();
    let outside = d.path().join("outside-file");
    std::fs::write(&outside, "precious\n").unwrap();
    let outdir = d.path().join("outside-dir");
    std::fs::create_dir_all(&outdir).unwrap();
    std::fs::write(outdir.join("cgroup.procs"), "").unwrap();
    std::fs::write(outdir.join("cpu.weight"), "100\n").unwrap();
    std::fs::create_dir_all(root.join("proc/sys/vm")).unwrap();
    let _ = std::fs::remove_file(root.join("proc/sys/vm/swappiness"));
    std::os::unix::fs::symlink(&outside, root.join("proc/sys/vm/swappiness")).unwrap();
    std::os::unix::fs::symlink(&outdir, root.join("sys/fs/cgroup/g")).unwrap();
    std::os::unix::fs::symlink(&outdir, root.join("sys/fs/cgroup/h")).unwrap();
    write_journal(
        &root,
        &format!(
            "{J_HEAD}FILE\t/proc/sys/vm/swappiness\t60\\n\nMKDIR\t/sys/fs/cgroup/g\n\
             ABSENT\t/sys/fs/cgroup/h/cpu.weight\nFILE\t/sys/fs/cgroup/h/cgroup.procs\t1\n"
        ),
    );
    let (code, out) = reset_at(&policy, &root);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("symlink"), "{out}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
    assert!(outdir.join("cpu.weight").exists(), "{out}");
    assert_eq!(
        std::fs::read_to_string(outdir.join("cgroup.procs")).unwrap(),
        ""
    );
    assert!(
        root.join("run/cgwarden/originals").exists(),
        "kept for a rerun"
    );
}

#[test]
fn symlinked_state_dir_journal_and_lock_are_refused_and_their_targets_untouched() {
    // state_dir itself, and a directory above it.
    for link in ["run/cgwarden", "run"] {
        let (d, root, policy) = small_tree();
        let target = d.path().join("elsewhere");
        std::fs::create_dir_all(&target).unwrap();
        let _ = std::fs::remove_dir_all(root.join(link));
        std::fs::create_dir_all(root.join(link).parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&target, root.join(link)).unwrap();
        let (code, out) = apply_at(&policy, &root);
        assert_eq!(code, 1, "{link}: {out}");
        assert!(out.contains("symlink"), "{link}: {out}");
        let (code, out) = reset_at(&policy, &root);
        assert_eq!(code, 1, "{link}: {out}");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "{link}");
    }
    // The journal and the lock file.
    for (name, content) in [("originals", J_HEAD), ("lock", "")] {
        let (d, root, policy) = small_tree();
        let target = d.path().join("target");
        std::fs::write(&target, content).unwrap();
        let j = write_journal(&root, J_HEAD);
        std::fs::remove_file(&j).unwrap();
        std::os::unix::fs::symlink(&target, root.join("run/cgwarden").join(name)).unwrap();
        let (code, out) = apply_at(&policy, &root);
        assert_eq!(code, 1, "{name}: {out}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), content, "{name}");
        assert_eq!(
            read(&root, "sys/fs/cgroup/app/pids.max"),
            "",
            "{name}: {out}"
        );
    }
}

#[test]
fn state_files_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let (_d, root, policy) = small_tree();
    let mode = |rel: &str| {
        std::fs::symlink_metadata(root.join(rel))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(support::BIN)
        .arg("run")
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .args(["--tick", "100ms"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !(root.join("run/cgwarden/lock").exists() && root.join("run/cgwarden/originals").exists())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = (
        mode("run/cgwarden"),
        mode("run/cgwarden/originals"),
        mode("run/cgwarden/lock"),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got, (0o700, 0o600, 0o600));
    assert_eq!(mode("run") & 0o022, 0, "parents are not world-writable");
}

#[test]
fn state_dir_may_not_be_a_managed_group() {
    let (_d, root, policy) = small_tree();
    std::fs::write(
        &policy,
        format!(
            "version: 1\nsettings: {{ state_dir: /sys/fs/cgroup/app/state }}\n{}",
            &SMALL_POLICY[11..]
        ),
    )
    .unwrap();
    let (code, out) = apply_at(&policy, &root);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("state_dir may not be"), "{out}");
    assert!(!root.join("sys/fs/cgroup/app/state").exists());
}
// ---- end of item 1
