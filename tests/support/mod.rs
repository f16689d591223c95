//! Shared by the fake-root integration tests and the daemon benchmark:
//! `cgwarden apply` on a fake tree, and a `cgwarden run --root` child with
//! its log in a file. (Each test crate uses a part of it.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_cgwarden");

/// `cgwarden apply POLICY --root ROOT`; panics with its stderr on failure.
/// Returns its stdout.
pub fn apply(policy: &Path, root: &Path) -> String {
    let out = Command::new(BIN)
        .arg("apply")
        .arg(policy)
        .arg("--root")
        .arg(root)
        .output()
        .expect("run cgwarden apply");
    assert!(
        out.status.success(),
        "cgwarden apply failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How to start the daemon.
pub struct Start<'a> {
    pub tick: &'a str,
    /// `CGWARDEN_LOG`.
    pub log_level: &'a str,
    /// Extra arguments (`--dry-run`).
    pub extra: &'a [&'a str],
    /// Where its stderr goes; default `ROOT/daemon.log`.
    pub log: Option<PathBuf>,
}

impl Default for Start<'_> {
    fn default() -> Self {
        Start {
            tick: "100ms",
            log_level: "info",
            extra: &[],
            log: None,
        }
    }
}

/// A `cgwarden run --root` child; killed if dropped without [`Daemon::stop`].
pub struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts it and waits until it logs `cgwarden running`.
    pub fn start(policy: &Path, root: &Path, how: Start) -> Daemon {
        let log = how.log.unwrap_or_else(|| root.join("daemon.log"));
        let f = std::fs::File::create(&log).expect("create daemon log");
        let child = Command::new(BIN)
            .arg("run")
            .arg(policy)
            .arg("--root")
            .arg(root)
            .args(["--tick", how.tick])
            .args(how.extra)
            .env("CGWARDEN_LOG", how.log_level)
            .stdout(Stdio::null())
            .stderr(f)
            .spawn()
            .expect("start cgwarden run");
        let d = Daemon { child, log };
        d.wait_log("cgwarden running", Duration::from_secs(20));
        d
    }

    /// Sends `sig` (e.g. `libc::SIGHUP`) to the daemon.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// The daemon's process id (for /proc/PID/status).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running (not exited, not reaped).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log contains `needle`; panics with the log after `limit`.
    pub fn wait_log(&self, needle: &str, limit: Duration) {
        self.wait_for(&format!("{needle:?} in the log"), limit, || {
            self.log().contains(needle)
        });
    }

    /// Polls `f` every 20 ms until it holds; panics with the log after `limit`.
    pub fn wait_for(&self, what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if f() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("timed out waiting for {what}; daemon log:\n{}", self.log());
    }

    /// SIGTERM (as systemd stops it), reap; exit code and the whole log.
    pub fn stop(mut self) -> (i32, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().expect("reap cgwarden run");
        (status.code().unwrap_or(-1), self.log())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One entry of a tree snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
}

/// Every directory, file (with its bytes) and symlink (with its target)
/// under `dir`, by path relative to it. Panics naming the path on an I/O error.
pub fn tree_snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Node> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("readdir {}: {e}", d.display()));
        for e in entries {
            let e = e.unwrap_or_else(|e| panic!("readdir {}: {e}", d.display()));
            let p = e.path();
            let rel = p.strip_prefix(dir).expect("below dir").to_path_buf();
            let ft = e
                .file_type()
                .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
            let node = if ft.is_symlink() {
                Node::Link(
                    std::fs::read_link(&p)
                        .unwrap_or_else(|e| panic!("readlink {}: {e}", p.display())),
                )
            } else if ft.is_dir() {
                stack.push(p.clone());
                Node::Dir
            } else {
                Node::File(
                    std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())),
                )
            };
            out.insert(rel, node);
        }
    }
    out
}

/// The differences between two snapshots, one line each. A `cgroup.procs`
/// is compared as a set of pids (the kernel lists members in no particular
/// order; a process moved out and back is listed last); everything else byte
/// for byte.
pub fn tree_diff(
    before: &std::collections::BTreeMap<PathBuf, Node>,
    after: &std::collections::BTreeMap<PathBuf, Node>,
) -> Vec<String> {
    let members = |b: &[u8]| {
        let mut v: Vec<String> = String::from_utf8_lossy(b)
            .split_whitespace()
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    let mut diffs = Vec::new();
    for (path, was) in before {
        match (was, after.get(path)) {
            (_, None) => diffs.push(format!("{}: removed", path.display())),
            (Node::File(a), Some(Node::File(b))) if path.ends_with("cgroup.procs") => {
                let (a, b) = (members(a), members(b));
                if a != b {
                    let missing: Vec<&String> = a.iter().filter(|p| !b.contains(p)).collect();
                    let extra: Vec<&String> = b.iter().filter(|p| !a.contains(p)).collect();
                    diffs.push(format!(
                        "{}: pids missing {missing:?}, pids extra {extra:?}",
                        path.display()
                    ));
                }
            }
            (a, Some(b)) if a == b => {}
            (a, Some(b)) => diffs.push(format!("{}: {} -> {}", path.display(), show(a), show(b))),
        }
    }
    for (path, now) in after {
        if !before.contains_key(path) {
            diffs.push(format!("{}: left behind ({})", path.display(), show(now)));
        }
    }
    diffs
}

fn show(n: &Node) -> String {
    match n {
        Node::Dir => "directory".into(),
        Node::Link(t) => format!("symlink to {}", t.display()),
        Node::File(b) if b.len() > 200 => format!("{} bytes", b.len()),
        Node::File(b) => format!("{:?}", String::from_utf8_lossy(b)),
    }
}
