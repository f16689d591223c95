//! Hostile and careless input that must never be turned against the box.
//! Each case says what it guards against; all run the real binary against
//! fake trees.

use cgwarden::testing::FakeTree;
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

/// A PSI `total=` jump to 2^64-1 must not fire a stall rule, raise
/// `pids.max` or run a hook with an absurd value. It is ignored (logged
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

// ---- RT by renaming and a 10 MB cmdline: placement ----

fn placement_root(
    dir: &Path,
    policy_text: &str,
) -> (FakeTree, std::path::PathBuf, std::path::PathBuf) {
    let root = dir.join("root");
    let t = FakeTree::standard(&root).unwrap();
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, policy_text).unwrap();
    (t, root, policy)
}

const RT_BY_NAME: &str = "version: 1\nproduct: t\ngroups:\n  realtime: {}\nplacement:\n  - match: { comm: motion_control }\n    group: realtime\n    sched: { policy: fifo, priority: 99 }\n";

/// `check` warns (exit 0) on an RT sched granted on a name-only
/// match; naming the exe silences it.
#[test]
fn check_warns_on_rt_granted_by_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, RT_BY_NAME).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cgwarden"))
        .arg("check")
        .arg(&policy)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let want = format!("{}:6:5: warning: ", policy.display());
    assert!(err.contains(&want), "want {want}:\n{err}");
    assert!(err.contains("fifo") && err.contains("exe:"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::write(
        &policy,
        RT_BY_NAME.replace(
            "{ comm: motion_control }",
            "{ comm: motion_control, exe: /usr/bin/motion_control }",
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cgwarden"))
        .arg("check")
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An unprivileged process renamed to an RT-granted comm is placed
/// in the group but not given the RT policy; the refusal is logged once
/// for that pid however many scans see it; root's process is not refused.
#[test]
fn rt_by_name_is_refused_to_an_unprivileged_process_once() {
    use cgwarden::testing::FakeProcess;
    let dir = tempfile::tempdir().unwrap();
    let (t, root, policy) = placement_root(dir.path(), RT_BY_NAME);
    t.add_process(&FakeProcess {
        uid: 1000,
        ..FakeProcess::new(400, "motion_control")
    })
    .unwrap();
    t.add_process(&FakeProcess::new(401, "motion_control"))
        .unwrap();
    let d = Daemon::start(&policy, &root, Start::default());
    let refusal = "placement refused: pid 400 (motion_control) sched fifo: not granted";
    d.wait_log(refusal, Duration::from_secs(20));
    // Ten more tick scans see it again.
    std::thread::sleep(Duration::from_millis(1000));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches(refusal).count(), 1, "said once:\n{log}");
    assert!(log.contains("uid is 1000"), "{log}");
    assert!(
        !log.contains("pid 401 (motion_control) sched fifo: not granted"),
        "{log}"
    );
    assert_eq!(read(&root, "proc/400/cgroup"), "0::/realtime");
}

/// A 10 MB command line is read up to 64 KiB and matched on that
/// prefix; once matched, a scan does not read it again (timing-free: the
/// process rewrites its command line to one that no longer matches and is
/// moved out by hand — the next scan moves it back from what it knew).
#[test]
fn a_10mb_cmdline_is_read_capped_and_not_reread_by_scans() {
    use cgwarden::testing::FakeProcess;
    let dir = tempfile::tempdir().unwrap();
    let (t, root, policy) = placement_root(
        dir.path(),
        "version: 1\nproduct: t\ngroups:\n  vision: {}\nplacement:\n  - match: { cmdline: \"python3 /srv/camera_pipeline.py *\" }\n    group: vision\n",
    );
    t.add_process(&FakeProcess::new(600, "python3")).unwrap();
    let mut big = b"python3\0/srv/camera_pipeline.py\0".to_vec();
    big.resize(10 * 1024 * 1024, b'A');
    let cmdline = root.join("proc/600/cmdline");
    std::fs::write(&cmdline, &big).unwrap();
    let capped = cgwarden::testing::read_capped(
        &cgwarden::testing::Root::fake(&root),
        Path::new("/proc/600/cmdline"),
        cgwarden::testing::CMDLINE_MAX,
    )
    .unwrap();
    assert_eq!(capped.len(), 64 * 1024);
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("placed on the prefix", Duration::from_secs(20), || {
        read(&root, "proc/600/cgroup") == "0::/vision"
    });
    // Rewritten (same pid, start time and comm) and moved out by hand.
    std::fs::write(&cmdline, b"python3\0other.py\0").unwrap();
    std::fs::write(root.join("proc/600/cgroup"), "0::/\n").unwrap();
    std::fs::write(root.join("sys/fs/cgroup/vision/cgroup.procs"), "").unwrap();
    d.wait_for(
        "moved back from the cached match",
        Duration::from_secs(20),
        || read(&root, "proc/600/cgroup") == "0::/vision",
    );
    // A rename (a new comm) is a change: re-read, no longer matches.
    t.rename(600, "python3.11").unwrap();
    std::fs::write(root.join("proc/600/cgroup"), "0::/\n").unwrap();
    std::fs::write(root.join("sys/fs/cgroup/vision/cgroup.procs"), "").unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(read(&root, "proc/600/cgroup"), "0::/", "{log}");
}

// ---- wp-bounds: bounds, hooks and policy ownership (items 3, 4, 7, 8) ----

/// Runs `cgwarden ARGS` with a time limit; gives the exit code (None when it
/// had to be killed), stderr, the wall time and the child's peak RSS in KiB
/// (`ru_maxrss` from `wait4`, which covers exactly this child).
fn run_bounded(args: &[&str], limit: Duration) -> (Option<i32>, String, Duration, i64) {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let start = std::time::Instant::now();
    // Reaped below with wait4 (which gives the rusage), not Child::wait.
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(support::BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start cgwarden");
    let mut err = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let mut killed = false;
    let (status, rusage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our own unreaped child; both pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break (status, ru);
        }
        if !killed && start.elapsed() > limit {
            killed = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    let stderr = reader.join().unwrap_or_default();
    let code = (!killed && libc::WIFEXITED(status)).then(|| libc::WEXITSTATUS(status));
    (code, stderr, elapsed, rusage.ru_maxrss)
}

/// `check /dev/zero` must not grow without bound nor a 50 MB file be read
/// whole. Both are refused at once (exit 1) with a clear
/// message, in bounded time and memory; `apply` reads the policy the same way.
#[test]
fn oversized_or_special_policy_is_refused_in_bounded_time_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.yaml");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        let line = "# padding padding padding padding padding padding padding padding\n";
        for _ in 0..(50 << 20) / line.len() {
            f.write_all(line.as_bytes()).unwrap();
        }
        f.flush().unwrap();
    }
    let root = dir.path().join("root");
    let _t = FakeTree::standard(&root).unwrap();
    let root_s = root.to_str().unwrap();
    let big_s = big.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["check", "/dev/zero"], "not a regular file"),
        (vec!["check", big_s], "larger than 4 MiB"),
        (vec!["check", "/"], "not a regular file"),
        (
            vec!["apply", "/dev/zero", "--root", root_s],
            "not a regular file",
        ),
        (vec!["apply", big_s, "--root", root_s], "larger than 4 MiB"),
    ];
    for (args, want) in cases {
        let (code, stderr, took, rss_kib) = run_bounded(&args, Duration::from_secs(5));
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(stderr.contains(":1:1: error: "), "{args:?}: {stderr}");
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
        assert!(rss_kib < 64 * 1024, "{args:?}: peak RSS {rss_kib} KiB");
    }
    // A FIFO with no writer must not hang the open.
    let fifo = dir.path().join("fifo.yaml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (code, stderr, _, _) =
        run_bounded(&["check", fifo.to_str().unwrap()], Duration::from_secs(5));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("a FIFO"), "{stderr}");
}

/// `cgwarden ARGS` to completion: (exit code, stdout, stderr).
fn cgwarden_out(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(support::BIN)
        .args(args)
        .output()
        .expect("run cgwarden");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The trust checks apply only to root: a test of them run as anyone else
/// would check nothing, so it fails (never skips) naming why.
fn require_root() {
    assert!(
        is_root(),
        "this test checks what cgwarden refuses to do as root: run it as root (CI does)"
    );
}

/// A hook program with mode 0777 must not run as root. Running as root, `apply`
/// and `run` refuse it (exit 1), naming the hook, the file and why, and write
/// nothing.
#[test]
fn world_writable_hook_program_is_refused_as_root() {
    require_root();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let _t = FakeTree::standard(&root).unwrap();
    let hook = dir.path().join("alert.sh");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o777)).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\ngroups:\n  app:\n    pids: {{ max: 100 }}\nhooks:\n  alert: {{ exec: [\"{}\"] }}\nrules:\n  - name: r\n    when: app.pids.current > 50\n    then: [\"hook alert\"]\n",
            hook.display()
        ),
    )
    .unwrap();
    for cmd in ["apply", "run"] {
        let (code, _, err) = cgwarden_out(&[
            cmd.as_ref(),
            policy.as_os_str(),
            "--root".as_ref(),
            root.as_os_str(),
        ]);
        assert_eq!(code, Some(1), "{cmd}: {err}");
        assert!(err.contains("hook `alert`"), "{cmd}: {err}");
        assert!(err.contains(&hook.display().to_string()), "{cmd}: {err}");
        assert!(
            err.contains("writable by anyone (mode 0777)"),
            "{cmd}: {err}"
        );
    }
    assert_eq!(
        read(&root, "sys/fs/cgroup/app/pids.max"),
        "",
        "nothing written"
    );
    // Mode 0755 (root-owned, in a root-owned 0700 directory) is accepted.
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    support::apply(&policy, &root);
    assert_eq!(read(&root, "sys/fs/cgroup/app/pids.max"), "100");
}

/// A policy file another user owns is refused by `apply` as root
/// (its owner could change what root does); `check` still reads it.
#[test]
fn policy_not_owned_by_root_is_refused_as_root() {
    require_root();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let _t = FakeTree::standard(&root).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\ngroups:\n  app:\n    pids: { max: 100 }\n",
    )
    .unwrap();
    std::os::unix::fs::chown(&policy, Some(65534), Some(65534)).unwrap();
    let args = [
        "apply".as_ref(),
        policy.as_os_str(),
        "--root".as_ref(),
        root.as_os_str(),
    ];
    let (code, _, err) = cgwarden_out(&args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not owned by root"), "{err}");
    assert!(err.contains(&policy.display().to_string()), "{err}");
    let (code, _, err) = cgwarden_out(&["check".as_ref(), policy.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    // Root-owned but group-writable: refused too.
    std::os::unix::fs::chown(&policy, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o664)).unwrap();
    let (code, _, err) = cgwarden_out(&args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("writable by its group"), "{err}");
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = cgwarden_out(&args);
    assert_eq!(code, Some(0), "{err}");
}

/// `--tick 0ms` must not reach a zero-period timer (a panic). Below 10 ms
/// it is a usage error (exit 2) before anything runs.
#[test]
fn tick_below_10ms_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let _t = FakeTree::standard(&root).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "version: 1\ngroups:\n  app: {}\n").unwrap();
    for tick in ["0ms", "0s", "9ms"] {
        let (code, _, err) = cgwarden_out(&[
            "run".as_ref(),
            policy.as_os_str(),
            "--root".as_ref(),
            root.as_os_str(),
            "--tick".as_ref(),
            tick.as_ref(),
        ]);
        assert_eq!(code, Some(2), "--tick {tick}: {err}");
        assert!(err.contains("at least 10ms"), "--tick {tick}: {err}");
        assert!(!err.contains("panicked"), "--tick {tick}: {err}");
    }
}

/// A cpu list is judged against the board's CPUs: the fake tree has CPUs
/// 0-7, and `0-3,64` is refused (exit 1) whatever `on_missing` says, with
/// nothing written — the group is never left unconfined on every CPU.
#[test]
fn cpuset_cpus_beyond_the_possible_cpus_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let body = "groups:\n  app:\n    cpuset: { cpus: \"0-3,64\" }\n    pids: { max: 100 }\n";
    for settings in ["", "settings: { on_missing: fail }\n"] {
        let root = dir.path().join(format!("root{}", settings.len()));
        let _t = FakeTree::standard(&root).unwrap();
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, format!("version: 1\n{settings}{body}")).unwrap();
        let (code, _, err) = cgwarden_out(&[
            "apply".as_ref(),
            policy.as_os_str(),
            "--root".as_ref(),
            root.as_os_str(),
        ]);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("cpuset.cpus `0-3,64` names CPU 64, which this board does not have"),
            "{err}"
        );
        assert_eq!(
            read(&root, "sys/fs/cgroup/app/pids.max"),
            "",
            "nothing written"
        );
    }
}

// ---- The journal is not a root write primitive (journal, reset,
// state_dir, lock). Every case must fail on code that trusts the journal.

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

/// The journal's allow-list must not accept any `/proc/sys/kernel/*` file:
/// one appended line would make `reset` (as root) pipe core dumps to a
/// program or swap the module loader. The allow-list is the knob
/// registry's files: a line naming a code-execution sysctl (or a cgroup
/// file no family writes) makes the whole journal untrusted, and `reset`
/// exits 1 having written nothing — the sysctls keep their values.
#[test]
fn a_journal_line_naming_core_pattern_or_modprobe_is_never_restored() {
    for (line, file, keep) in [
        (
            "FILE\t/proc/sys/kernel/core_pattern\t|/tmp/evil %p\\n",
            "proc/sys/kernel/core_pattern",
            "core",
        ),
        (
            "FILE\t/proc/sys/kernel/modprobe\t/tmp/evil\\n",
            "proc/sys/kernel/modprobe",
            "/sbin/modprobe",
        ),
        (
            "FILE\t/sys/fs/cgroup/app/cgroup.procs\t1\\n",
            "sys/fs/cgroup/app/cgroup.procs",
            "",
        ),
    ] {
        let (_d, root, policy) = small_tree();
        let (code, out) = apply_at(&policy, &root);
        assert_eq!(code, 0, "apply: {out}");
        std::fs::write(root.join(file), keep).unwrap();
        // A real journal from `apply`, with one hostile line appended.
        let j = root.join("run/cgwarden/originals");
        let mut text = std::fs::read_to_string(&j).unwrap();
        text.push_str(line);
        text.push('\n');
        std::fs::write(&j, &text).unwrap();
        let before = support::tree_snapshot(&root);
        let (code, out) = reset_at(&policy, &root);
        assert_eq!(code, 1, "{line}: reset must refuse: {out}");
        let named = file.rsplit('/').next().unwrap();
        assert!(
            out.contains(named),
            "{line}: the refusal names the file: {out}"
        );
        assert!(out.contains("not trusted"), "{line}: {out}");
        assert_eq!(read(&root, file), keep, "{line}: left as it was");
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
             ABSENT\t/sys/fs/cgroup/h/cpu.weight\nFILE\t/sys/fs/cgroup/h/memory.high\t1\n"
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
    assert!(!outdir.join("memory.high").exists(), "{out}");
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
    assert_eq!(code, 1, "{out}");
    // Refused when the policy is read (check does it too), before any lock.
    assert!(
        out.contains("settings.state_dir `/sys/fs/cgroup/app/state` is"),
        "{out}"
    );
    assert!(!root.join("sys/fs/cgroup/app/state").exists());
}
// ---- end of the journal cases
