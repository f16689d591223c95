//! The state cgwarden keeps, through the real binary on fake trees:
//! the originals journal is checked before it is trusted, `reset` uses the
//! cgroup_root the journal records, one instance at a time holds state_dir
//! (`cgwardend` as `cgwarden run`), and `--root` must name a device tree.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{cgwarden, processes_board, read, Daemon, Run, Start, BIN};

fn policy_path() -> String {
    support::repo("policies/iq9100-vision.yaml")
}

/// Every file, symlink and directory under `dir` (files with content),
/// except cgwarden's own state_dir.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<String>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if rel.starts_with("run/cgwarden") || rel == Path::new("daemon.log") {
                continue;
            }
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                out.insert(rel, None);
                stack.push(p);
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                out.insert(rel, Some(format!("-> {}", target.display())));
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                // The order of cgroup.procs means nothing; its members do.
                let text = if rel.ends_with("cgroup.procs") {
                    let mut v: Vec<&str> = text.split_whitespace().collect();
                    v.sort();
                    v.join(" ")
                } else {
                    text.trim().to_string()
                };
                out.insert(rel, Some(text));
            }
        }
    }
    out
}

fn diff(
    before: &BTreeMap<PathBuf, Option<String>>,
    after: &BTreeMap<PathBuf, Option<String>>,
) -> Vec<String> {
    let mut d = Vec::new();
    for (p, v) in before {
        match after.get(p) {
            Some(now) if now == v => {}
            Some(now) => d.push(format!("{}: {v:?} -> {now:?}", p.display())),
            None => d.push(format!("{}: removed", p.display())),
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        d.push(format!("{}: left behind", p.display()));
    }
    d
}

fn journal(root: &Path) -> PathBuf {
    root.join("run/cgwarden/originals")
}

fn apply(policy: &str, root: &str) -> Run {
    cgwarden(&["apply", policy, "--root", root])
}

fn reset(policy: &str, root: &str) -> Run {
    cgwarden(&["reset", "--policy", policy, "--root", root])
}

/// Applies the policy, then replaces the journal with `damage(journal)`.
/// Reset must exit 1 and leave the damaged journal byte for byte; so must
/// apply (it refuses to add to a journal it cannot trust).
fn assert_refused(what: &str, damage: impl Fn(&[u8]) -> Vec<u8>, needle: &str) {
    let (tmp, t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = policy_path();
    let r = apply(&policy, root);
    assert_eq!(r.code, 0, "{r}");
    let good = std::fs::read(journal(tmp.path())).unwrap();
    let bad = damage(&good);
    std::fs::write(journal(tmp.path()), &bad).unwrap();
    let tree = snapshot(tmp.path());

    let r = reset(&policy, root);
    assert_eq!(r.code, 1, "{what}: {r}");
    assert!(
        r.stderr.contains("/run/cgwarden/originals") && r.stderr.contains(needle),
        "{what}: the message names the journal and {needle:?}: {r}"
    );
    assert_eq!(
        std::fs::read(journal(tmp.path())).unwrap(),
        bad,
        "{what}: journal untouched"
    );
    assert!(
        diff(&tree, &snapshot(tmp.path())).is_empty(),
        "{what}: nothing restored"
    );
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "30");

    let r = apply(&policy, root);
    assert_eq!(r.code, 1, "{what}: apply on a damaged journal: {r}");
    assert_eq!(std::fs::read(journal(tmp.path())).unwrap(), bad, "{what}");
}

#[test]
fn journal_of_random_bytes_is_refused_untouched() {
    assert_refused(
        "random bytes",
        |_| {
            // Deterministic "random" bytes (xorshift), newlines included.
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 24) as u8
                })
                .collect()
        },
        "line 1: not a cgwarden originals journal",
    );
}

#[test]
fn empty_journal_is_refused_untouched() {
    assert_refused("empty file", |_| Vec::new(), "empty file");
}

#[test]
fn journal_torn_mid_file_is_refused_untouched() {
    assert_refused(
        "torn mid-file",
        |good| {
            // Cut the first FILE line after line 4 within its path (a write
            // torn and then appended to), keep everything after it. (A cut
            // that leaves a line that still parses, say a shorter MKDIR
            // path, cannot be told from a real entry: lines carry no checksum.)
            let text = String::from_utf8(good.to_vec()).unwrap();
            let mut lines: Vec<String> = text.lines().map(String::from).collect();
            assert!(lines.len() > 8, "{text}");
            let n = (4..lines.len())
                .find(|&i| lines[i].starts_with("FILE\t"))
                .unwrap_or_else(|| panic!("no FILE line after line 4:\n{text}"));
            let cut = lines[n].rfind('\t').unwrap_or(0) / 2;
            lines[n].truncate(cut.max(3));
            (lines.join("\n") + "\n").into_bytes()
        },
        ": damaged entry",
    );
}

#[test]
fn journal_with_a_foreign_header_is_refused_untouched() {
    assert_refused(
        "foreign header",
        |good| {
            let text = String::from_utf8(good.to_vec()).unwrap();
            text.replacen(
                "# cgwarden originals journal v2",
                "# someone else's journal",
                1,
            )
            .into_bytes()
        },
        "line 1: not a cgwarden originals journal",
    );
}

#[test]
fn torn_last_line_is_ignored_with_a_warning_and_everything_is_restored() {
    let (tmp, t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = policy_path();
    let before = snapshot(tmp.path());
    assert_eq!(apply(&policy, root).code, 0);
    let mut bytes = std::fs::read(journal(tmp.path())).unwrap();
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    bytes.extend_from_slice(b"FILE\t/proc/sys/vm/dirty_rat");
    std::fs::write(journal(tmp.path()), &bytes).unwrap();

    let r = reset(&policy, root);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stderr.contains("warning") && r.stderr.contains(&format!("line {} is torn", lines + 1)),
        "{r}"
    );
    let summary = r
        .stdout
        .lines()
        .find(|l| l.starts_with("reset: "))
        .unwrap_or_else(|| panic!("no summary line: {r}"));
    assert!(summary.ends_with(" restored, 0 failed"), "{summary}");
    let restored: usize = summary["reset: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(restored > 20, "{summary}");
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "60");
    let d = diff(&before, &snapshot(tmp.path()));
    assert!(d.is_empty(), "reset left differences:\n{}", d.join("\n"));
    assert!(
        !journal(tmp.path()).exists(),
        "journal deleted after a complete reset"
    );
}

#[test]
fn reset_uses_the_cgroup_root_the_journal_records() {
    let (tmp, _t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = policy_path();
    let before = snapshot(tmp.path());
    assert_eq!(apply(&policy, root).code, 0);
    assert!(tmp.path().join("sys/fs/cgroup/realtime").is_dir());
    let journal_text = std::fs::read_to_string(journal(tmp.path())).unwrap();
    assert!(
        journal_text.starts_with("# cgwarden originals journal v2\nROOT\t/sys/fs/cgroup\n"),
        "{journal_text}"
    );

    // The policy now names another cgroup_root (a delegated subtree).
    let pol_dir = tempfile::tempdir().unwrap();
    let other = pol_dir.path().join("policy.yaml");
    std::fs::write(
        &other,
        "version: 1\nsettings: { cgroup_root: /sys/fs/cgroup/delegated }\ngroups:\n  a:\n    pids: { max: 10 }\n",
    )
    .unwrap();
    let other = other.to_str().unwrap();

    // A writer refuses to mix two roots in one journal, naming both.
    let r = apply(other, root);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stderr
            .contains("cgroup_root /sys/fs/cgroup but the policy names /sys/fs/cgroup/delegated"),
        "{r}"
    );

    let r = reset(other, root);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stderr
            .contains("using cgroup_root /sys/fs/cgroup recorded in the journal"),
        "{r}"
    );
    assert!(r.stdout.contains("RMDIR /sys/fs/cgroup/realtime"), "{r}");
    let d = diff(&before, &snapshot(tmp.path()));
    assert!(d.is_empty(), "reset left differences:\n{}", d.join("\n"));
}

#[test]
fn root_must_be_a_device_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nonexistent");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let policy = policy_path();
    for dir in [&missing, &empty] {
        let d = dir.to_str().unwrap();
        for args in [
            vec!["plan", &policy, "--root", d],
            vec!["apply", &policy, "--root", d],
            vec!["run", &policy, "--root", d],
            vec!["reset", "--policy", &policy, "--root", d],
        ] {
            let r = cgwarden(&args);
            assert_eq!(r.code, 2, "{args:?}: {r}");
            assert!(r.stderr.contains(d), "{args:?}: the message names DIR: {r}");
        }
    }
    assert!(!missing.exists(), "nothing created");
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "nothing created"
    );
    // Each case says which it is: a missing path, or a file given as DIR.
    let file = tmp.path().join("policy.yaml");
    std::fs::write(&file, "version: 1\n").unwrap();
    for (dir, why) in [
        (&missing, "no such directory"),
        (&file, "is a file, not a directory"),
    ] {
        let d = dir.to_str().unwrap();
        let r = cgwarden(&["plan", &policy, "--root", d]);
        assert_eq!(r.code, 2, "{r}");
        assert_eq!(
            r.stderr.trim(),
            format!("cgwarden: error: --root {d}: {why}"),
            "{r}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "version: 1\n");
}

#[test]
fn one_instance_second_run_and_reset_are_refused_naming_the_holder() {
    let (tmp, t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = policy_path();
    let d = Daemon::start(Path::new(&policy), tmp.path(), Start::default());
    let pid = d.pid();

    for (what, r) in [
        (
            "run",
            cgwarden(&["run", &policy, "--root", root, "--tick", "100ms"]),
        ),
        ("reset", reset(&policy, root)),
        ("apply", apply(&policy, root)),
    ] {
        assert_eq!(r.code, 1, "second {what}: {r}");
        assert!(
            r.stderr
                .contains(&format!("held by pid {pid} (cgwarden run ")),
            "second {what} names the holder: {r}"
        );
        assert!(r.stderr.contains("/run/cgwarden/lock"), "{r}");
    }
    // The refused reset changed nothing.
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "30");
    assert!(journal(tmp.path()).exists());
    // plan takes no lock.
    assert_eq!(cgwarden(&["plan", &policy, "--root", root]).code, 0);

    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(
        !tmp.path().join("run/cgwarden/lock").exists(),
        "the lock file goes with the lock"
    );
    let r = reset(&policy, root);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "60");
}

/// `cgwardend`, the binary the packages' units run, is `cgwarden run`: it
/// converges, serves the control socket, holds the same locks (so a second
/// daemon of either kind is refused) and gives them back at SIGTERM.
#[test]
fn cgwardend_is_the_daemon_and_holds_the_tree_as_cgwarden_run_does() {
    let (tmp, t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = policy_path();
    let start = Start {
        cgwardend: true,
        ..Start::default()
    };
    let d = Daemon::start(Path::new(&policy), tmp.path(), start);
    d.wait_log(
        "control socket listening",
        std::time::Duration::from_secs(20),
    );
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "30");
    let status = cgwarden(&["status", "--root", root]);
    assert_eq!(status.code, 0, "{status}");
    assert!(status.stdout.contains("iq9100-vision-cell"), "{status}");
    let second = cgwarden(&["run", &policy, "--root", root, "--tick", "100ms"]);
    assert_eq!(second.code, 1, "{second}");
    assert!(
        second
            .stderr
            .contains(&format!("held by pid {} (cgwarden run ", d.pid())),
        "{second}"
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!tmp.path().join("run/cgwarden/lock").exists(), "{log}");
    assert_eq!(reset(&policy, root).code, 0);
    assert_eq!(read(t.dir(), "proc/sys/vm/swappiness"), "60");
}

#[test]
fn state_dir_is_private_and_refused_when_others_may_write_it() {
    let (tmp, _t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = policy_path();
    use std::os::unix::fs::PermissionsExt;
    let sd = tmp.path().join("run/cgwarden");
    // Whatever the umask, state_dir is created 0700.
    let r = Command::new("sh")
        .args(["-c", "umask 0; exec \"$0\" \"$@\""])
        .arg(BIN)
        .args(["apply", &policy, "--root", root])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", Run::from(r));
    let mode = std::fs::metadata(&sd).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    std::fs::set_permissions(&sd, std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = reset(&policy, root);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stderr.contains("writable by group or others"), "{r}");
    assert!(journal(tmp.path()).exists());
}

/// The bug this guards: `reset` deleted the journal in the middle of an
/// `apply`, and the groups created after that were in no journal. With the
/// state_dir lock the two never overlap; whatever order they ran in, a final
/// `reset` gives back the tree as it was.
#[test]
fn apply_and_reset_raced_leave_nothing_a_final_reset_cannot_undo() {
    let (tmp, _t) = processes_board();
    let root = tmp.path().to_str().unwrap();
    let policy = policy_path();
    let before = snapshot(tmp.path());
    let spawn = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn cgwarden")
    };
    let mut refused = 0;
    for round in 0..20 {
        // Alternate who starts first; both start at once.
        let (a, r) = if round % 2 == 0 {
            let a = spawn(&["apply", &policy, "--root", root]);
            let r = spawn(&["reset", "--policy", &policy, "--root", root]);
            (a, r)
        } else {
            let r = spawn(&["reset", "--policy", &policy, "--root", root]);
            let a = spawn(&["apply", &policy, "--root", root]);
            (a, r)
        };
        for (what, child) in [("apply", a), ("reset", r)] {
            let run = Run::from(child.wait_with_output().unwrap());
            match run.code {
                0 => {}
                1 if run.stderr.contains("is held by pid") => refused += 1,
                _ => panic!("round {round}: {what}: {run}"),
            }
        }
    }
    // The lock was exercised: in some round one of the two found the other
    // holding it (both start within a millisecond; each runs for longer).
    assert!(
        refused > 0,
        "in 20 rounds apply and reset never overlapped: the race was not run"
    );
    let r = reset(&policy, root);
    assert_eq!(r.code, 0, "{r}");
    let d = diff(&before, &snapshot(tmp.path()));
    assert!(
        d.is_empty(),
        "after the races ({refused} refused), reset left differences:\n{}",
        d.join("\n")
    );
    assert!(!journal(tmp.path()).exists());
}
