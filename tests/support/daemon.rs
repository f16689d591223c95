//! The daemon harness: `cgwarden run --root` (or `cgwardend --root`) as a
//! child with its log in a file.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::Board;

/// How to start the daemon.
pub struct Start<'a> {
    pub tick: &'a str,
    /// `CGWARDEN_LOG`.
    pub log_level: &'a str,
    /// Extra arguments (`--dry-run`).
    pub extra: &'a [&'a str],
    /// Where its stderr goes; default `ROOT/daemon.log`.
    pub log: Option<PathBuf>,
    /// Run `cgwardend` (the packages' daemon binary) instead of `cgwarden run`.
    pub cgwardend: bool,
}

impl Default for Start<'_> {
    fn default() -> Self {
        Start {
            tick: "100ms",
            log_level: "info",
            extra: &[],
            log: None,
            cgwardend: false,
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
        let mut cmd = super::cmd();
        if how.cgwardend {
            cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cgwardend"));
        } else {
            cmd.arg("run");
        }
        let child = cmd
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

    /// Starts it on a [`Board`] (default [`Start`]) and waits until its
    /// control socket listens.
    pub fn on(b: &Board) -> Daemon {
        let d = Daemon::start(&b.policy, &b.root, Start::default());
        d.wait_log("control socket listening", Duration::from_secs(20));
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
