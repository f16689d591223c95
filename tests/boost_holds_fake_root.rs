//! A boost holds before it is answered (docs/control.md "Boosts"): the
//! daemon answers `Boost` once the boost's writes have landed, failed or
//! passed the late-write deadline, so `boost … -- CMD` starts CMD only then,
//! and says on stderr what did not land.
//!
//! The knob's writer lane is made to stall where a real board's can: in
//! the originals journal's append, before the first write of a file (a
//! disk that does not answer). The journal is swapped for a FIFO nobody
//! reads, so that append waits in open(2) until the test opens the FIFO;
//! then the fsync a FIFO refuses (EINVAL) fails the write. `memory.max` of
//! `app` is not in the policy, so nothing journalled it before the boost
//! (the test shows it as a kernel with the memory controller would: `max`).
//! `CGWARDEN_TEST_BIN` runs these against another build (tests/support).

mod support;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{Board, Daemon};

const POLICY: &str = "version: 1\ngroups:\n  app:\n    memory: { high: 256M }\n";
const MAX: &str = "sys/fs/cgroup/app/memory.max";

/// The originals journal swapped for a FIFO; [`StuckJournal::restore`]
/// puts it back.
struct StuckJournal {
    path: PathBuf,
    saved: PathBuf,
}

impl StuckJournal {
    fn new(root: &Path) -> StuckJournal {
        let path = root.join("run/cgwarden/originals");
        let saved = root.join("run/cgwarden/originals.test-saved");
        std::fs::rename(&path, &saved).expect("the journal apply wrote");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        StuckJournal { path, saved }
    }

    /// Opens the FIFO for reading: the lane's open(2) returns, and the
    /// fsync after its append fails.
    fn unblock(&self) -> std::fs::File {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.path)
            .expect("open the FIFO")
    }

    fn restore(self) {
        std::fs::rename(&self.saved, &self.path).expect("restore the journal");
    }
}

/// The board, `memory.max` shown, its daemon running.
fn board(dir: &Path) -> (Board, Daemon) {
    let b = Board::new(dir, POLICY);
    std::fs::write(b.root.join(MAX), "max\n").unwrap();
    let d = Daemon::on(&b);
    (b, d)
}

/// `cgwarden boost --socket S ARGS` as root, started (not waited for), its
/// output captured.
fn spawn_boost(b: &Board, args: &[&str]) -> std::process::Child {
    let sock = b.root.join("run/cgwarden/io.cgwarden");
    support::cmd()
        .arg("boost")
        .arg("--socket")
        .arg(&sock)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cgwarden boost")
}

/// Waits up to 20 s for `child`; its exit code, stdout and stderr.
fn finish(mut child: std::process::Child) -> (i32, String, String) {
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().expect("collect the output");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `touch MARK` as CMD: whether (and when) it ran.
fn mark(dir: &Path) -> (PathBuf, String) {
    let m = dir.join("cmd-ran");
    let s = m.to_string_lossy().into_owned();
    (m, s)
}

#[test]
fn cmd_waits_for_a_blocked_write_until_its_deadline_and_is_told_it_is_late() {
    let dir = tempfile::tempdir().unwrap();
    let (b, d) = board(dir.path());
    let stuck = StuckJournal::new(&b.root);
    let (m, ms) = mark(dir.path());
    let t0 = Instant::now();
    let child = spawn_boost(
        &b,
        &["app.memory.max=1G", "--for", "1m", "--", "touch", &ms],
    );
    // The write waits in the journal's open: no answer, no CMD.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!m.exists(), "CMD ran while the boost's write was blocked");
    let (code, out, err) = finish(child);
    let took = t0.elapsed();
    assert_eq!(code, 0, "{out}{err}");
    assert!(m.exists(), "CMD never ran:\n{out}{err}");
    // Answered at the late-write deadline (1 s), not before.
    assert!(took >= Duration::from_secs(1), "{took:?}\n{err}");
    assert!(
        out.starts_with("boost 1: app.memory.max = 1G until "),
        "{out}"
    );
    assert!(
        err.contains("cgwarden: late: app.memory.max: its write to /sys/fs/cgroup/app/memory.max had not finished after 1s"),
        "{err}"
    );
    // The kernel (here: the disk) lets go; the journal comes back.
    let reader = stuck.unblock();
    d.wait_log(
        "cannot journal the original of /sys/fs/cgroup/app/memory.max",
        Duration::from_secs(10),
    );
    drop(reader);
    stuck.restore();
    drop(d);
}

#[test]
fn a_write_that_fails_is_in_the_reply_and_printed_before_cmd_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (b, d) = board(dir.path());
    let before = support::read(&b.root, MAX);
    let stuck = StuckJournal::new(&b.root);
    let (m, ms) = mark(dir.path());
    // CMD says what it found: the answer came before it started.
    let child = spawn_boost(
        &b,
        &[
            "app.memory.max=1G",
            "--for",
            "1m",
            "--",
            "sh",
            "-c",
            &format!("echo cmd >&2; touch {ms}"),
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!m.exists(), "CMD ran while the boost's write was blocked");
    let reader = stuck.unblock();
    let (code, out, err) = finish(child);
    drop(reader);
    stuck.restore();
    assert_eq!(code, 0, "{out}{err}");
    assert!(m.exists(), "CMD never ran:\n{out}{err}");
    let failed = "cgwarden: not held: app.memory.max: write /sys/fs/cgroup/app/memory.max \"1073741824\" not made: cannot journal the original";
    let at = err.find(failed).unwrap_or_else(|| panic!("{err}"));
    assert!(
        at < err.find("cmd\n").unwrap_or(0),
        "printed after CMD ran:\n{err}"
    );
    // The release's write back failed the same way: said too.
    assert_eq!(
        err.matches("cgwarden: not held: app.memory.max").count(),
        2,
        "{err}"
    );
    assert_eq!(support::read(&b.root, MAX), before, "the write was made");
    drop(d);
}

/// The reply of a write that lands at once: nothing on stderr, CMD sees
/// the boosted value and the knob is back when the command returns.
#[test]
fn cmd_sees_the_boosted_value_and_the_knob_is_back_when_boost_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (b, d) = board(dir.path());
    let high = b.root.join("sys/fs/cgroup/app/memory.high");
    let inside = format!("grep -qx 402653184 {}", high.display());
    for _ in 0..20 {
        let child = spawn_boost(&b, &["app.memory.high=384M", "--", "sh", "-c", &inside]);
        let (code, out, err) = finish(child);
        assert_eq!(code, 0, "CMD did not see the boost:\n{out}{err}");
        assert!(!err.contains("cgwarden:"), "{err}");
        assert_eq!(
            support::read(&b.root, "sys/fs/cgroup/app/memory.high"),
            "268435456"
        );
    }
    drop(d);
}
