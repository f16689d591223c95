//! Small ones: `reset POLICY` is positional as for plan/apply/run/doctor, and
//! messages name paths where they are under `--root` (the lock error does
//! not name `/run/cgwarden/lock`, nor reset's "no journal at
//! /run/cgwarden/originals" the host's path).

mod support;
use support::{Board, Daemon};

const POLICY: &str = "version: 1\ngroups:\n  app:\n    memory: { high: 512M }\n";

#[test]
fn reset_takes_the_policy_positionally_or_as_an_option() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let o = support::cmd()
        .arg("reset")
        .arg(&b.policy)
        .arg("--root")
        .arg(&b.root)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(out.contains("reset complete"), "{out}");
    // Again: nothing left, and the path named is the one under --root.
    let o = support::cmd()
        .arg("reset")
        .arg("--policy")
        .arg(&b.policy)
        .arg("--root")
        .arg(&b.root)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    let want = b.root.join("run/cgwarden/originals");
    assert!(
        out.contains(&format!("no journal at {}", want.display())),
        "{out}"
    );
    // Both at once is a usage error, not a silent choice.
    let o = support::cmd()
        .arg("reset")
        .arg(&b.policy)
        .arg("--policy")
        .arg(&b.policy)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

#[test]
fn the_lock_error_names_the_lock_under_root() {
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    let o = support::cmd()
        .arg("apply")
        .arg(&b.policy)
        .arg("--root")
        .arg(&b.root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let want = b.root.join("run/cgwarden/lock");
    assert!(err.contains(&want.display().to_string()), "{err}");
    drop(d);
}

/// docs/control.md: `events` ends on Ctrl-C by SIGINT (the shell's 130).
#[test]
fn events_ends_by_sigint_as_documented() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), POLICY);
    let d = Daemon::on(&b);
    let mut cmd = b.client(&["events"]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    // A test run started in the background of a non-interactive shell
    // inherits SIGINT ignored (POSIX: `cmd &` without job control), and
    // `events` rightly keeps an inherited ignore (a background job must not
    // die of the terminal's Ctrl-C): give the client the terminal's default.
    // SAFETY: signal(2) is async-signal-safe; the closure touches nothing else.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut c = cmd.spawn().unwrap();
    // Subscribed: the first line says so.
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert!(first.contains("subscribed"), "{first}");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let st = c.wait().unwrap();
    assert_eq!(st.signal(), Some(libc::SIGINT), "{st:?}");
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/control.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `cgwarden events"))
        .expect("the events row");
    assert!(row.contains("130"), "{row}");
    drop(d);
}

/// The processes the startup converge places are counted (in the exit
/// line's `placement: placed {…}` and the metric).
#[test]
fn startup_placements_are_counted() {
    use cgwarden::testing::{FakeProcess, FakeTree};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let t = FakeTree::standard(&root).unwrap();
    t.add_processes(&[
        FakeProcess::new(4100, "worker"),
        FakeProcess::new(4101, "worker"),
    ])
    .unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\ngroups:\n  app:\n    memory: { high: 512M }\nplacement:\n  - match: { comm: worker }\n    group: app\n",
    )
    .unwrap();
    let log = dir.path().join("daemon.log");
    let mut child = support::cmd()
        .arg("run")
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .args(["--tick", "100ms"])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("control socket listening")
    {
        assert!(t0.elapsed() < std::time::Duration::from_secs(20));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(r#"placement: placed {"app": 2}"#), "{text}");
}
