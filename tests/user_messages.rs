//! Assorted user-facing behaviours (messages, exit statuses, units, what
//! `verify` and `plan` report): each test here fails without what it guards.
//! `CGWARDEN_TEST_BIN` runs them against another build (tests/support).

mod support;
use std::process::Output;
use support::{repo, Board, Daemon};

const POLICY: &str = "version: 1\ngroups:\n  app:\n    memory: { high: 512M }\n";

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `verify` after `run policies/iq9100-vision.yaml --root R` does not say
/// `DRIFT zram.zram0.swap_priority expected 100 actual -` nor exit 1:
/// `swapon` is skipped on a fake root, so the priority cannot be read back.
#[test]
fn verify_on_a_fake_root_does_not_call_skipped_steps_drift() {
    let dir = tempfile::tempdir().unwrap();
    let policy = std::fs::read_to_string(repo("policies/iq9100-vision.yaml")).unwrap();
    let b = Board::new(dir.path(), &policy);
    let d = Daemon::on(&b);
    let o = b.client(&["verify"]).output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(!out.contains("DRIFT"), "{out}");
    assert!(
        out.contains("skip  zram.zram0.swap_priority")
            && out.contains("not checked: swapon is skipped on a fake root"),
        "{out}"
    );
    let o = b.client(&["verify", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["drift"], false, "{v}");
    let k = v["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["knob"] == "zram.zram0.swap_priority")
        .expect("the swap priority is listed");
    assert_eq!(k["path"], "/proc/swaps", "{k}");
    assert_eq!(k["skipped"], "swapon is skipped on a fake root", "{k}");
    drop(d);
}

/// `plan` where no group can be built says why and exits 3, not a `missing:`
/// line and `0 changes`, exit 0 — what a converged system prints.
#[test]
fn plan_says_when_no_group_can_be_built() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("sys/fs/cgroup")).unwrap();
    let policy = dir.path().join("p.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let o = support::cmd()
        .arg("plan")
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    assert_eq!(out, "no group can be built; 0 other changes\n", "{err}");
    assert!(err.contains("not a cgroup v2 directory"), "{err}");
    let o = support::cmd()
        .arg("apply")
        .arg(&policy)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    assert!(
        err.contains("no group can be built; nothing was written"),
        "{err}"
    );
    assert!(!root.join("run/cgwarden/originals").exists());
}

/// `status --policy /typo.yaml` says the file is not there instead of asking
/// `/run/cgwarden`.
#[test]
fn a_client_with_a_policy_it_cannot_load_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.yaml");
    for args in [&["status"][..], &["verify", "--json"], &["top"]] {
        let o = support::cmd()
            .args(args)
            .arg("--policy")
            .arg(&typo)
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}{err}");
        assert!(
            err.starts_with(&format!(
                "cgwarden: error: --policy {}: cannot read the policy",
                typo.display()
            )),
            "{args:?}: {err}"
        );
        assert!(!err.contains("/run/cgwarden"), "{err}");
    }
}

/// `demo --keep DIR` on a used DIR is refused before running (not exit 75
/// after saying "kept in").
#[test]
fn demo_keep_refuses_a_used_directory_before_running() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mine"), "x").unwrap();
    let o = support::cmd()
        .arg("demo")
        .arg("--keep")
        .arg(dir.path())
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert_eq!(out, "", "{err}");
    assert_eq!(
        err,
        format!(
            "cgwarden: error: demo --keep {}: not empty; give a new or empty directory\n",
            dir.path().display()
        )
    );
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "the demo wrote into a used directory");
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A real preview of an edit: `reload --dry-run CANDIDATE` diffs an edited
/// copy against what runs and prints its hash beside the one in force; the
/// unchanged file with an active rule says `= rule … kept (active since …)`
/// and counts 0 changes; a broken candidate is refused with its own name;
/// nothing is loaded.
#[test]
fn reload_dry_run_previews_a_candidate_and_counts_only_changes() {
    use cgwarden::testing::FakeProcess;
    let policy = "version: 1\ngroups:\n  app:\n    memory: { high: 512M }\nrules:\n  - name: hold\n    when: running(holder)\n    while:\n      - set sysctl.vm.swappiness = 10\n";
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), policy);
    let d = Daemon::on(&b);
    b.tree
        .add_process(&FakeProcess::new(4000, "holder"))
        .unwrap();
    let t0 = std::time::Instant::now();
    loop {
        let o = b.client(&["status", "--json"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        if v["rules"][0]["state"] == "active" {
            break;
        }
        assert!(
            t0.elapsed().as_secs() < 20,
            "the rule never went active: {v}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let in_force = sha(policy.as_bytes());
    // The file as it is: nothing changes; the kept active rule is said.
    let o = b.client(&["reload", "--dry-run"]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("= rule hold kept (active since ") && lines[0].ends_with("s ago)"),
        "{out}"
    );
    assert_eq!(
        lines[1],
        format!("would reload: policy {} (0 changes)", &in_force[..12])
    );
    // An edited copy: its difference and its hash, and the hash in force.
    let cand = dir.path().join("edited.yaml");
    let edited = policy.replace("512M", "1G");
    std::fs::write(&cand, &edited).unwrap();
    let o = b
        .client(&["reload", "--dry-run"])
        .arg(&cand)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("~ app.memory.high 512M -> 1G\n"), "{out}");
    assert!(
        out.ends_with(&format!(
            "would reload {}: policy {} (1 change; in force: {})\n",
            cand.display(),
            &sha(edited.as_bytes())[..12],
            &in_force[..12]
        )),
        "{out}"
    );
    // Nothing was loaded: the knob and the hash in force are unchanged.
    let high = std::fs::read_to_string(b.root.join("sys/fs/cgroup/app/memory.high")).unwrap();
    assert_eq!(high.trim(), "536870912");
    let o = b.client(&["status", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["policy"]["hash"], in_force.as_str());
    // A broken candidate is refused with its own name.
    std::fs::write(&cand, policy.replace("memory:", "memroy:")).unwrap();
    let o = b
        .client(&["reload", "--dry-run"])
        .arg(&cand)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        err.starts_with(&format!(
            "{}:4:5: error: unknown field `memroy`",
            cand.display()
        )),
        "{err}"
    );
    // A candidate is only previewed.
    let o = b.client(&["reload"]).arg(&cand).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    drop(d);
}

/// One rule for reserved group names: `check` refuses each reserved name,
/// policy.md lists exactly them, and `system` is not one of them (the
/// seed's layout names a group `system`; the machine is `host`).
#[test]
fn reserved_group_names_are_one_rule_in_check_and_the_docs() {
    let names: Vec<&str> = cgwarden::testing::reserved_group_names()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(
        names.contains(&"host") && names.contains(&"latency") && !names.contains(&"system"),
        "{names:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    for n in &names {
        let p = dir.path().join(format!("{n}.yaml"));
        std::fs::write(
            &p,
            format!("version: 1\ngroups:\n  {n}:\n    cpu: {{ weight: 50 }}\n"),
        )
        .unwrap();
        let o = support::cmd().arg("check").arg(&p).output().unwrap();
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{n}: {out}{err}");
        assert!(
            err.contains(&format!("3:3: error: group name `{n}` is reserved")),
            "{n}: {err}"
        );
    }
    // The policy reference says the same list, in the same words.
    let list = names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let t = std::fs::read_to_string(repo("docs/policy.md")).unwrap();
    let flat = t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!(
            "Reserved group names (`check` refuses them): {list} —"
        )),
        "docs/policy.md does not list {list}"
    );
    // A group-only metric of `host` is an error, not a group.
    let p = dir.path().join("metric.yaml");
    std::fs::write(
        &p,
        "version: 1\ngroups:\n  app: {}\nrules:\n  - name: r\n    when: host.memory.current > 1G\n    then:\n      - set sysctl.vm.swappiness = 10\n",
    )
    .unwrap();
    let o = support::cmd().arg("check").arg(&p).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`host` is the whole machine, not a group"),
        "{err}"
    );
}

/// One rendering rule for knob values: JSON raw, text for people in units,
/// logs both (never `old=806400 new=2400MHz`).
#[test]
fn knob_values_are_raw_in_json_human_in_text_and_both_in_logs() {
    use cgwarden::testing::FakeProcess;
    use std::process::Stdio;
    let policy = "version: 1\ngroups:\n  app:\n    memory: { high: 512M }\nrules:\n  - name: fast\n    when: running(holder)\n    while:\n      - set cpufreq.policy7.min = 2.4GHz\n";
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), policy);
    let d = Daemon::on(&b);
    let follow = |json: bool| {
        let mut args = vec!["events"];
        if json {
            args.push("--json");
        }
        let path = dir.path().join(format!("events-{json}"));
        let c = b
            .client(&args)
            .stdout(std::fs::File::create(&path).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        (c, path)
    };
    let (mut text_c, text_p) = follow(false);
    let (mut json_c, json_p) = follow(true);
    let wait_for = |p: &std::path::Path, what: &str| {
        let t0 = std::time::Instant::now();
        while !std::fs::read_to_string(p)
            .unwrap_or_default()
            .contains(what)
        {
            assert!(t0.elapsed().as_secs() < 20, "no {what} in {}", p.display());
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    wait_for(&text_p, "subscribed");
    wait_for(&json_p, "subscribed");
    b.tree
        .add_process(&FakeProcess::new(4000, "holder"))
        .unwrap();
    wait_for(&text_p, " write ");
    wait_for(&json_p, "\"write\"");
    let _ = text_c.kill();
    let _ = json_c.kill();
    let _ = text_c.wait();
    let _ = json_c.wait();
    let lines = std::fs::read_to_string(&text_p).unwrap();
    assert!(
        lines.contains("write knob=cpufreq.policy7.min 806.4MHz -> 2.4GHz cause=\"rule fast\""),
        "{lines}"
    );
    let json = std::fs::read_to_string(&json_p).unwrap();
    let w: serde_json::Value = json
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "write")
        .unwrap();
    assert_eq!(
        (&w["old"], &w["new"]),
        (&"806400".into(), &"2400000".into()),
        "{w}"
    );
    // status: text in units, JSON raw.
    let o = b.client(&["status"]).output().unwrap();
    let (out, _) = text(&o);
    assert!(
        out.contains("cpufreq.policy7.min              806.4MHz -> 2.4GHz  (rule fast)"),
        "{out}"
    );
    assert!(
        out.contains("2.4GHz (baseline 806.4MHz) by rule fast"),
        "{out}"
    );
    let o = b.client(&["status", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["knob"] == "cpufreq.policy7.min")
        .unwrap();
    assert_eq!(
        (&a["old"], &a["new"]),
        (&"806400".into(), &"2400000".into()),
        "{a}"
    );
    // The log: both, in the write's one record, once it landed.
    d.wait_log(
        "set cpufreq.policy7.min = ",
        std::time::Duration::from_secs(10),
    );
    let log = d.log();
    let writes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cpufreq.policy7.min") && l.contains("2400000"))
        .collect();
    assert_eq!(writes.len(), 1, "one record per write: {log}");
    assert!(
        writes[0].contains(
            "set cpufreq.policy7.min = 2400000 (2.4GHz), was 806400 (806.4MHz), by rule fast"
        ) && writes[0].contains("elapsed_ms=")
            && writes[0].contains("cgwarden_event=\"write\""),
        "{log}"
    );
}

/// A metrics port already in use is shown by `status`, not only an ERROR
/// line in the log (not fatal: the policy is still supervised).
#[test]
fn a_metrics_port_in_use_is_shown_by_status() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let policy = format!(
        "version: 1\nsettings:\n  metrics:\n    listen: {addr}\ngroups:\n  app:\n    memory: {{ high: 512M }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let b = Board::new(dir.path(), &policy);
    let d = Daemon::on(&b);
    let o = b.client(&["status"]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.lines().any(
            |l| l.starts_with(&format!("UNAVAILABLE: metrics address {addr}: "))
                && l.contains("in use")
        ),
        "{out}"
    );
    let o = b.client(&["status", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let u = v["unavailable"].as_array().cloned().unwrap_or_default();
    assert_eq!(u.len(), 1, "{v}");
    assert!(u[0].as_str().unwrap().contains(&addr.to_string()), "{u:?}");
    drop(d);
    drop(held);
}

/// The documented non-root flow on a fake root, as uid 65534: in
/// the socket's group it boosts through its `control:` grant; without the
/// group it cannot connect (exit 4). (The guest's 95-nonroot-boost does the
/// same on a real kernel.)
#[test]
fn uid_65534_in_the_socket_group_boosts_through_its_grant() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !nix::unistd::geteuid().is_root() {
        panic!("this test runs as root (it starts clients as uid 65534)");
    }
    let policy = "version: 1\nsettings:\n  socket_group: nogroup\ncontrol:\n  - user: nobody\n    boost: [\"app.memory.high\"]\n    max_duration: 10m\n    max_boosts: 1\ngroups:\n  app:\n    memory: { high: 256M }\n";
    let dir = tempfile::tempdir().unwrap();
    // uid 65534 must reach the socket below the temporary directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let b = Board::new(dir.path(), policy);
    let d = Daemon::on(&b);
    let sock = b.root.join("run/cgwarden/io.cgwarden");
    let as_nobody = |gid: u32, args: &[&str]| {
        // `--socket` before the arguments: after a `--` they are CMD's.
        let mut c = support::cmd();
        c.arg(args[0]).arg("--socket").arg(&sock).args(&args[1..]);
        c.uid(65534).gid(gid);
        c.output().unwrap()
    };
    let o = as_nobody(65534, &["boost", "app.memory.high=384M", "--for", "1m"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.starts_with("boost 1: app.memory.high = 384M until "),
        "{out}"
    );
    let high = b.root.join("sys/fs/cgroup/app/memory.high");
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&high).unwrap().trim() != "402653184" {
        assert!(t0.elapsed().as_secs() < 10, "the boost was not written");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let wait_high = |want: &str| {
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(&high).unwrap().trim() != want {
            assert!(t0.elapsed().as_secs() < 10, "memory.high never read {want}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let h = out.lines().last().unwrap().to_string();
    let o = as_nobody(65534, &["release", &h]);
    assert!(o.status.success(), "{o:?}");
    wait_high("268435456");
    // `boost … -- CMD`: held exactly while CMD runs (cookbook.md).
    let inside = format!("grep -qx 402653184 {}", high.display());
    let o = as_nobody(
        65534,
        &[
            "boost",
            "app.memory.high=384M",
            "--for",
            "10m",
            "--",
            "sh",
            "-c",
            &inside,
        ],
    );
    assert!(o.status.success(), "{o:?}");
    wait_high("268435456");
    // Outside the grant: refused with a reason.
    let o = as_nobody(65534, &["boost", "app.memory.max=1G", "--for", "1m"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    // Not in the socket's group: cannot connect.
    let o = as_nobody(65533, &["status"]);
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    drop(d);
}
