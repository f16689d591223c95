//! Shared by the tests/polish_*.rs files (issue 22): the binary under test,
//! a fake board with a policy applied, and a `cgwarden run --root` child.
//! Kept apart from tests/support so each can change on its own.
//!
//! `CGWARDEN_POLISH_BIN=/path/to/cgwarden` runs the same tests against
//! another build (how the fixes were seen to fail before them).
#![allow(dead_code)]

use cgwarden::kernel::fake_tree::FakeTree;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The cgwarden binary under test.
pub fn bin() -> PathBuf {
    std::env::var_os("CGWARDEN_POLISH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cgwarden")))
}

pub fn cmd() -> Command {
    Command::new(bin())
}

/// A fake board under `dir/root` with `policy` written to `dir/policy.yaml`
/// and applied.
pub struct Board {
    pub tree: FakeTree,
    pub root: PathBuf,
    pub policy: PathBuf,
}

impl Board {
    pub fn new(dir: &Path, policy: &str) -> Board {
        let root = dir.join("root");
        let tree = FakeTree::standard(&root).expect("fake tree");
        let path = dir.join("policy.yaml");
        std::fs::write(&path, policy).unwrap();
        let out = cmd()
            .arg("apply")
            .arg(&path)
            .arg("--root")
            .arg(&root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "apply failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Board {
            tree,
            root,
            policy: path,
        }
    }

    /// `cgwarden SUB ARGS --policy P --root R` (a client command).
    pub fn client(&self, args: &[&str]) -> Command {
        let mut c = cmd();
        c.args(args)
            .arg("--policy")
            .arg(&self.policy)
            .arg("--root")
            .arg(&self.root);
        c
    }
}

/// A `cgwarden run --root` child, its stderr in a file; killed on drop.
pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    pub fn start(b: &Board) -> Daemon {
        let log = b.root.join("daemon.log");
        let f = std::fs::File::create(&log).unwrap();
        let child = cmd()
            .arg("run")
            .arg(&b.policy)
            .arg("--root")
            .arg(&b.root)
            .args(["--tick", "100ms"])
            .env("CGWARDEN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(f)
            .spawn()
            .unwrap();
        let d = Daemon { child, log };
        d.wait_log("control socket listening", Duration::from_secs(20));
        d
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn wait_log(&self, needle: &str, limit: Duration) {
        let t0 = Instant::now();
        while !self.log().contains(needle) {
            assert!(
                t0.elapsed() < limit,
                "timed out waiting for {needle:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, reap; the exit code and the log.
    pub fn stop(mut self) -> (i32, String) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let st = self.child.wait().unwrap();
        (st.code().unwrap_or(-1), self.log())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether process `pid` has ended (gone or a zombie).
pub fn ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            .is_some_and(|st| st == "Z" || st == "X"),
    }
}

/// Waits up to `limit` for `pid` to end; how long it took, or None.
pub fn wait_ended(pid: i32, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if ended(pid) {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}
