//! The control socket checked by a client we did not write: the PyPI
//! `varlink` package (tests/varlink/client_test.py) calls every method of
//! io.cgwarden.Daemon on a daemon running on a fake tree, with a proxy
//! built from the interface description the daemon serves.
//!
//! Python 3 and the `varlink` module are required: CI installs them
//! (tests/run-all.sh); a missing one fails this test, with how to install it.

use cgwarden::testing::FakeTree;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod support;
use support::{Daemon, Start};

fn setup(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    support::control_board(dir)
}

/// Fails (never skips) without python3 and its `varlink` module.
fn require_python_varlink() {
    let o = Command::new("python3")
        .args(["-c", "import varlink"])
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is needed for the independent varlink client test: {e}")
        });
    assert!(
        o.status.success(),
        "the Python `varlink` package is missing; install it with \
         `python3 -m pip install varlink` (tests/run-all.sh does in CI):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Starts a daemon, runs client_test.py on its socket with `args`, asserts
/// exit 0 and that the knobs are back at their baselines after.
fn run_client(args: &[&str]) {
    require_python_varlink();
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    let sock = support::socket(&root);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/varlink/client_test.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(&sock)
        .args(args)
        .output()
        .expect("run python3");
    let out = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{out}\ndaemon log:\n{}", d.log());
    println!("{out}");
    // Everything the client boosted was released: the baselines are back.
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    d.wait_for("the baselines back", Duration::from_secs(5), || {
        read("sys/fs/cgroup/vision/cpu.weight") == "200"
            && read("sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq") == "1000000"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn the_pypi_varlink_client_calls_every_method() {
    run_client(&[]);
}

/// The IDL: InvalidRequest is "A parameter is malformed (unknown knob, bad
/// duration or value)", Refused "The caller may not do this". A boost whose
/// only knob has a malformed value is answered Refused today
/// (src/daemon/control.rs, `on_boost`: `allowed.is_empty()` → `refused`).
#[test]
fn a_malformed_knob_value_is_an_invalid_request() {
    run_client(&["bad-value"]);
}
