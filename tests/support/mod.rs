//! What every test crate (and the daemon benchmark) shares, one copy each:
//!
//! - [`BIN`] (or another build: [`bin`], `CGWARDEN_TEST_BIN`), [`cmd`],
//!   [`read`], and the client runs [`cgwarden`] / [`run`] /
//!   [`apply`] with their [`Run`] (exit code, stdout, stderr);
//! - the fake board ([`board`], [`Board`] with its policy applied,
//!   [`processes_board`]) and what a kernel would
//!   show in it ([`memory_events`], [`memory_pressure`]);
//! - the daemon harness ([`Daemon`], [`Start`]): the real binary on a fake
//!   root, readiness, stop, log; [`ended`] / [`wait_ended`] for a pid;
//! - one raw varlink client ([`Conn`], [`call`]) on [`socket`];
//! - tree snapshots and their differences ([`tree_snapshot`], [`tree_diff`]);
//! - for the guest and packaging tests: [`need`] a tool, the serial log's
//!   metrics blocks ([`prom_blocks`]) and [`promtool_check`].
//!
//! Each test crate uses a part of it.
#![allow(dead_code, unused_imports)]

mod board;
mod chromium;
mod daemon;
mod guest;
mod tree;
mod varlink;

pub use board::{board, control_board, memory_events, memory_pressure, processes_board, Board};
pub use chromium::{chromium, CHROMIUM};
pub use daemon::{ended, wait_ended, Daemon, Start};
pub use guest::{need, prom_blocks, promtool_check};
pub use tree::{text_snapshot, tree_diff, tree_snapshot, Node};
pub use varlink::{call, socket, Conn};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_cgwarden");

/// The binary the harness runs: [`BIN`], or `CGWARDEN_TEST_BIN` (how a fix
/// is seen to fail: the same tests against the build before it).
pub fn bin() -> PathBuf {
    std::env::var_os("CGWARDEN_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(BIN))
}

/// A command of [`bin`].
pub fn cmd() -> Command {
    Command::new(bin())
}

/// The repository's top directory.
pub fn repo_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `REL` in this repository (a shipped policy, a fixture), as a string.
pub fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// `ROOT/REL` trimmed; a file that does not exist (yet) reads as empty.
pub fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// A finished client run: exit code (-1 when killed by a signal), stdout,
/// stderr. Its `Display` shows all three, for assertion messages.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` to completion; panics naming it when it cannot start.
pub fn run(cmd: &mut Command) -> Run {
    let shown = format!("{cmd:?}");
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"))
        .into()
}

/// `cgwarden ARGS` to completion.
pub fn cgwarden(args: &[&str]) -> Run {
    run(Command::new(BIN).args(args))
}

/// `cgwarden apply POLICY --root ROOT`; panics with its output on failure.
/// Returns its stdout.
pub fn apply(policy: &Path, root: &Path) -> String {
    let r = run(Command::new(BIN)
        .arg("apply")
        .arg(policy)
        .arg("--root")
        .arg(root));
    assert_eq!(r.code, 0, "cgwarden apply failed:\n{r}");
    r.stdout
}
