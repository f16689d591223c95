//! The control socket on a fake tree: the CLI commands are
//! clients of the running daemon; boosts merge with rules, end at their
//! deadline, on release, and with the command they were tied to; a
//! non-root caller without a grant is refused with a reason; a client that
//! reaches no daemon exits 4 naming the socket.

use cgwarden::testing::FakeTree;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::{read, Daemon, Run, Start, BIN};

const MIN: &str = "sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq";

fn setup(dir: &Path) -> (FakeTree, PathBuf, PathBuf) {
    support::control_board(dir)
}

fn cli(root: &Path, policy: &Path, args: &[&str]) -> Run {
    // The options go before the arguments: after `--` everything is CMD.
    support::run(
        Command::new(BIN)
            .arg(args[0])
            .arg("--policy")
            .arg(policy)
            .arg("--root")
            .arg(root)
            .args(&args[1..]),
    )
}

fn start(policy: &Path, root: &Path) -> Daemon {
    let d = Daemon::start(policy, root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    d
}

#[test]
fn no_daemon_exits_4_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let o = cli(&root, &policy, &["status"]);
    assert_eq!(o.code, 4, "{o}");
    let err = o.stderr.as_str();
    assert!(err.contains("run/cgwarden/io.cgwarden"), "{err}");
}

#[test]
fn status_shows_groups_rules_and_a_boost_with_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = start(&policy, &root);
    let o = cli(
        &root,
        &policy,
        &[
            "boost",
            "cpufreq.policy4.min=1.8GHz",
            "vision.cpu.weight=500",
            "--for",
            "10m",
            "--reason",
            "inference job",
        ],
    );
    assert_eq!(o.code, 0, "{o}");
    d.wait_for("the boost written", Duration::from_secs(5), || {
        read(&root, MIN) == "1800000" && read(&root, "sys/fs/cgroup/vision/cpu.weight") == "500"
    });
    let o = cli(&root, &policy, &["status"]);
    assert_eq!(o.code, 0, "{o}");
    let s = o.stdout.as_str();
    for want in [
        "control-test",
        "inference",
        "vision",
        "oom-seen",
        "idle",
        "boost 1",
        "inference job",
        "cpufreq.policy4.min",
    ] {
        assert!(s.contains(want), "{want} missing:\n{s}");
    }
    let o = cli(&root, &policy, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("status --json is JSON");
    assert_eq!(v["claims"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["claims"][0]["uid"], 0);
    assert_eq!(v["policy"]["hash"].as_str().map(str::len), Some(64));
    // Released: the knobs return to their baselines.
    let o = cli(&root, &policy, &["release", "1"]);
    assert_eq!(o.code, 0, "{o}");
    d.wait_for("the baseline back", Duration::from_secs(5), || {
        read(&root, MIN) == "1000000" && read(&root, "sys/fs/cgroup/vision/cpu.weight") == "200"
    });
    let o = cli(&root, &policy, &["release", "1"]);
    assert_eq!(o.code, 1, "{o}");
    assert!(o.stderr.contains("no live boost has handle 1"));
    let (code, _) = d.stop();
    assert_eq!(code, 0);
}

#[test]
fn a_boost_ends_at_its_deadline_and_a_boost_with_a_command_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = start(&policy, &root);
    let o = cli(
        &root,
        &policy,
        &["boost", "cpufreq.policy4.min=2GHz", "--for", "1s"],
    );
    assert_eq!(o.code, 0, "{o}");
    d.wait_for("boosted", Duration::from_secs(5), || {
        read(&root, MIN) == "2000000"
    });
    let t0 = Instant::now();
    d.wait_for("expired", Duration::from_secs(5), || {
        read(&root, MIN) == "1000000"
    });
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    // The lane's write and the loop's "boost ended" line race: wait for it.
    d.wait_log("its deadline passed", Duration::from_secs(5));

    // Held exactly while the command runs; its exit status is ours.
    let flag = dir.path().join("seen");
    let script = format!("cat {}/{MIN} > {}; exit 7", root.display(), flag.display());
    let o = cli(
        &root,
        &policy,
        &[
            "boost",
            "cpufreq.policy4.min=1.9GHz",
            "--for",
            "1h",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(o.code, 7, "{o}");
    assert_eq!(std::fs::read_to_string(&flag).unwrap().trim(), "1900000");
    d.wait_for("released with the command", Duration::from_secs(2), || {
        read(&root, MIN) == "1000000"
    });
    drop(d);
}

#[test]
fn a_boost_tied_to_a_killed_client_ends_with_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = start(&policy, &root);
    let mut client = Command::new(BIN)
        .args([
            "boost",
            "cpufreq.policy4.min=1.7GHz",
            "--for",
            "1h",
            "--policy",
        ])
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .args(["--", "sleep", "30"])
        .spawn()
        .unwrap();
    d.wait_for("boosted", Duration::from_secs(5), || {
        read(&root, MIN) == "1700000"
    });
    client.kill().unwrap(); // SIGKILL: no release is sent
    client.wait().unwrap();
    d.wait_for(
        "released when the connection closed",
        Duration::from_secs(2),
        || read(&root, MIN) == "1000000",
    );
    assert!(d.log().contains("connection closed"), "{}", d.log());
}

#[test]
fn refusals_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = start(&policy, &root);
    for (args, want) in [
        (
            vec!["boost", "nosuch.memory.high=1G", "--for", "1m"],
            "no group `nosuch`",
        ),
        (vec!["boost", "/etc/shadow=1", "--for", "1m"], "not a knob"),
        (
            vec!["boost", "vision.cpu.weight=banana", "--for", "1m"],
            "banana",
        ),
        (
            vec!["boost", "vision.cpu.weight=100", "--for", "0s"],
            "more than 0",
        ),
    ] {
        let o = cli(&root, &policy, &args);
        assert_eq!(o.code, 1, "{args:?}: {o}");
        let err = o.stderr.as_str();
        assert!(err.contains(want), "{args:?}: {want} missing: {err}");
    }
    drop(d);
}

#[test]
fn the_interface_served_is_the_checked_in_idl() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = setup(dir.path());
    let d = start(&policy, &root);
    let sock = support::socket(&root);
    let r = support::call(
        &sock,
        "org.varlink.service.GetInterfaceDescription",
        serde_json::json!({"interface": "io.cgwarden.Daemon"}),
    );
    let served = r["parameters"]["description"].as_str().unwrap_or_default();
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/control/io.cgwarden.Daemon.varlink"
    );
    let checked_in = std::fs::read_to_string(file).unwrap();
    assert_eq!(
        served, checked_in,
        "the IDL changed: regenerate {file} from GetInterfaceDescription"
    );
    let info = support::call(&sock, "org.varlink.service.GetInfo", serde_json::json!({}));
    assert_eq!(info["parameters"]["interfaces"][0], "io.cgwarden.Daemon");
    // An unknown method or ill-typed parameters: zlink 0.8 closes that
    // connection (an error or a close are both allowed); the daemon goes on.
    for (m, p) in [
        ("io.cgwarden.Daemon.Nope", serde_json::json!({})),
        (
            "io.cgwarden.Daemon.Release",
            serde_json::json!({"handle": "x"}),
        ),
    ] {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        let mut msg =
            serde_json::to_vec(&serde_json::json!({"method": m, "parameters": p})).unwrap();
        msg.push(0);
        s.write_all(&msg).unwrap();
        let mut b = [0u8; 256];
        let n = s.read(&mut b).unwrap_or(0);
        assert!(
            n == 0 || b[..n].windows(5).any(|w| w == b"error"),
            "{m}: {:?}",
            &b[..n]
        );
    }
    let r = support::call(
        &sock,
        "io.cgwarden.Daemon.ListClaims",
        serde_json::json!({}),
    );
    assert_eq!(r["parameters"]["claims"], serde_json::json!([]), "{r}");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o660);
    drop(d);
}
