//! Tests of [`super`] (`journal`).

use super::*;
use proptest::prelude::*;

const CG: &str = "/sys/fs/cgroup";

fn journal_host(root: &Root, state: &str) -> PathBuf {
    root.host_path(&Path::new(state).join("originals"))
}

#[test]
fn records_once_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let state = Path::new("/run/cgwarden");
    let mut j = Journal::open(&root, state, Path::new(CG)).unwrap();
    assert!(!j.exists(), "nothing is created before the first record");
    assert!(!root.exists(state));
    let swappiness = PathBuf::from("/proc/sys/vm/swappiness");
    j.record(Entry::File {
        path: swappiness.clone(),
        content: "60\n".into(),
    })
    .unwrap();
    // A second original for the same file is ignored: the first one is the truth.
    j.record(Entry::File {
        path: swappiness.clone(),
        content: "30\n".into(),
    })
    .unwrap();
    j.record(Entry::Mkdir {
        path: "/sys/fs/cgroup/rt".into(),
    })
    .unwrap();
    let text = std::fs::read_to_string(journal_host(&root, "/run/cgwarden")).unwrap();
    assert!(
        text.starts_with("# cgwarden originals journal v2\nROOT\t/sys/fs/cgroup\nFILE\t"),
        "{text}"
    );
    let j2 = Journal::open(&root, state, Path::new("/sys/fs/cgroup/")).unwrap();
    assert_eq!(j2.cgroup_root(), Some(Path::new(CG)));
    assert_eq!(j2.original(&swappiness), Some("60\n"));
    assert_eq!(
        j2.original(Path::new("/proc/sys/vm/../vm/swappiness")),
        Some("60\n")
    );
    assert!(j2.has_file(&swappiness));
    assert_eq!(j2.original(Path::new("/proc/sys/vm/dirty_ratio")), None);
    assert_eq!(
        j2.entries(),
        &[
            Entry::File {
                path: swappiness,
                content: "60\n".into()
            },
            Entry::Mkdir {
                path: "/sys/fs/cgroup/rt".into()
            }
        ]
    );
    assert!(j2.warnings().is_empty());
}

#[test]
fn state_dir_is_created_0700_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let mut j = Journal::open(&root, Path::new("/run/cgw"), Path::new(CG)).unwrap();
    j.record(Entry::ZramInit {
        device: "zram0".into(),
    })
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("run/cgw"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let mode = std::fs::metadata(journal_host(&root, "/run/cgw"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn original_of_an_absent_file_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let mut j = Journal::open(&root, Path::new("/run/x"), Path::new(CG)).unwrap();
    let p = Path::new("/sys/fs/cgroup/a/cpu.weight");
    j.record(Entry::Absent { path: p.into() }).unwrap();
    assert!(j.has_file(p));
    assert_eq!(j.original(p), None);
}

#[test]
fn other_cgroup_root_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let mut j = Journal::open(&root, Path::new("/run/x"), Path::new(CG)).unwrap();
    j.record(Entry::Mkdir {
        path: "/sys/fs/cgroup/a".into(),
    })
    .unwrap();
    let e = Journal::open(&root, Path::new("/run/x"), Path::new("/sys/fs/cgroup/sub"))
        .err()
        .expect("refused");
    let msg = e.to_string();
    assert!(msg.contains("/run/x/originals"), "{msg}");
    assert!(msg.contains("cgroup_root /sys/fs/cgroup but"), "{msg}");
    assert!(msg.contains("/sys/fs/cgroup/sub"), "{msg}");
    assert!(e.errno().is_none(), "a refusal, not an I/O error");
}

#[test]
fn torn_last_line_is_ignored_with_a_warning_and_cut_before_appending() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let state = Path::new("/run/x");
    let mut j = Journal::open(&root, state, Path::new(CG)).unwrap();
    j.record(Entry::ZramInit {
        device: "zram0".into(),
    })
    .unwrap();
    let host = journal_host(&root, "/run/x");
    let good = std::fs::read(&host).unwrap();
    // Even a torn line that parses is ignored: it may carry a cut value.
    let mut text = good.clone();
    text.extend_from_slice(b"FILE\t/proc/sys/vm/swappiness\t6");
    std::fs::write(&host, &text).unwrap();
    let loaded = Journal::load(&root, state, Path::new(CG)).unwrap().unwrap();
    assert_eq!(loaded.entries().len(), 1);
    assert_eq!(loaded.warnings().len(), 1);
    assert!(
        loaded.warnings()[0].contains("line 4 is torn"),
        "{:?}",
        loaded.warnings()
    );
    assert_eq!(std::fs::read(&host).unwrap(), text, "load changes nothing");

    let mut w = Journal::open(&root, state, Path::new(CG)).unwrap();
    w.record(Entry::Mkdir {
        path: "/sys/fs/cgroup/a".into(),
    })
    .unwrap();
    let mut expect = good;
    expect.extend_from_slice(b"MKDIR\t/sys/fs/cgroup/a\n");
    assert_eq!(std::fs::read(&host).unwrap(), expect);
    assert!(Journal::load(&root, state, Path::new(CG))
        .unwrap()
        .unwrap()
        .warnings()
        .is_empty());
}

fn parse_err(bytes: &[u8]) -> String {
    parse(bytes, Path::new("/run/cgwarden/originals"), Path::new(CG))
        .expect_err("must be refused")
        .to_string()
}

#[test]
fn damaged_journals_are_errors_naming_file_and_line() {
    let head = render_header(Path::new(CG));
    let e = parse_err(b"");
    assert!(
        e.contains("/run/cgwarden/originals") && e.contains("empty"),
        "{e}"
    );
    let e = parse_err(b"\x89PNG\r\n\x1a\n\0\0");
    assert!(e.contains("line 1") && e.contains("not a cgwarden"), "{e}");
    let e = parse_err(b"# cgwarden originals journal v2");
    assert!(e.contains("line 1"), "{e}");
    let e = parse_err(format!("{HEADER}\nFILE\t/a\tb\n").as_bytes());
    assert!(e.contains("line 2") && e.contains("ROOT"), "{e}");
    let e = parse_err(
        format!("{head}MKDIR\t/sys/fs/cgroup/a\nFILE\t/proc/sys/vm/swa\nMKDIR\t/sys/fs/cgroup/b\n")
            .as_bytes(),
    );
    assert!(
        e.contains("/run/cgwarden/originals: line 4: damaged entry"),
        "{e}"
    );
    let e = parse_err(format!("{head}MKDIR\trelative\n").as_bytes());
    assert!(e.contains("line 3"), "{e}");
    let e = parse_err(format!("{head}FILE\t/a\tb\\q\n").as_bytes());
    assert!(e.contains("line 3"), "{e}");
    let e = parse_err(format!("{head}MKDIR\t/a\textra\n").as_bytes());
    assert!(e.contains("line 3"), "{e}");
    let e = parse_err(format!("{head}\n").as_bytes());
    assert!(e.contains("line 3"), "an empty line is damage: {e}");
    let mut bad = head.into_bytes();
    bad.extend_from_slice(b"FILE\t/a\t\xff\xfe\n");
    assert!(parse_err(&bad).contains("line 3: not UTF-8"));
}

#[test]
fn lines_outside_what_cgwarden_manages_are_refused_naming_the_line() {
    let head = render_header(Path::new(CG));
    for (line, what) in [
        ("FILE\t/etc/passwd\tpwned", "/etc/passwd"),
        ("MKDIR\t/sys/fs/cgroup/../../../proc", "damaged entry"),
        ("FILE\t/sys/fs/cgroup/../../etc/shadow\tx", "damaged entry"),
        ("FILE\t/proc/sys/vm/./swappiness\t60", "damaged entry"),
        ("FILE\t/proc/sys/vm//swappiness\t60", "damaged entry"),
        ("FILE\t/proc/sys/net/ipv4/ip_forward\t1", "ip_forward"),
        // Code-execution sysctls are no knob family's files:
        // a journal naming them is not cgwarden's, whatever its header.
        (
            "FILE\t/proc/sys/kernel/core_pattern\t|/tmp/evil %p",
            "core_pattern",
        ),
        ("FILE\t/proc/sys/kernel/modprobe\t/tmp/evil", "modprobe"),
        ("FILE\t/proc/sys/vm/drop_caches\t3", "drop_caches"),
        ("FILE\t/sys/fs/cgroup/ok/cgroup.procs\t1", "cgroup.procs"),
        ("FILE\t/sys/fs/cgroup/ok/release_agent\tx", "release_agent"),
        (
            "FILE\t/sys/devices/system/cpu/cpufreq/policy0/scaling_setspeed\t1",
            "setspeed",
        ),
        ("FILE\t/sys/block/zram0/hot_remove\t0", "hot_remove"),
        (
            "FILE\t/sys/kernel/mm/transparent_hugepage/enabled\tx",
            "transparent",
        ),
        ("FILE\t/sys/block/sda/queue/scheduler\tnone", "sda"),
        ("ABSENT\t/root/.ssh/authorized_keys", "authorized_keys"),
        ("MKDIR\t/sys/fs/cgroup", "not below the cgroup root"),
        ("MKDIR\t/tmp/x", "not below the cgroup root"),
        ("SWAPON\t/dev/sda1", "swap device /dev/sda1"),
        ("ZRAM_INIT\t../../x", "zram device"),
    ] {
        let text = format!("{head}MKDIR\t/sys/fs/cgroup/ok\n{line}\n");
        let e = parse_err(text.as_bytes());
        assert!(
            e.contains("/run/cgwarden/originals: line 4:") && e.contains(what),
            "{line}: {e}"
        );
    }
    // A recorded cgroup_root elsewhere would make every path "below" it.
    let e = parse_err(b"# cgwarden originals journal v2\nROOT\t/etc\nFILE\t/etc/passwd\tx\n");
    assert!(
        e.contains("line 2") && e.contains("cgroup_root /etc"),
        "{e}"
    );
    let e = parse_err(b"# cgwarden originals journal v2\nROOT\t/\nFILE\t/etc/passwd\tx\n");
    assert!(e.contains("line 2"), "{e}");
    // The policy's own cgroup_root is trusted wherever it is.
    let ok = b"# cgwarden originals journal v2\nROOT\t/mnt/cg\nMKDIR\t/mnt/cg/a\n";
    assert!(Journal::parse_text(ok, Path::new("/mnt/cg")).is_ok());
    assert!(Journal::parse_text(ok, Path::new(CG)).is_err());
    // A v1 journal is checked against the policy's cgroup_root.
    let v1 = format!("{HEADER_V1}\nMKDIR\t/sys/fs/cgroup/a\n");
    assert!(Journal::parse_text(v1.as_bytes(), Path::new(CG)).is_ok());
    assert!(Journal::parse_text(v1.as_bytes(), Path::new("/sys/fs/cgroup/a/b")).is_err());
}

#[test]
fn writers_never_record_what_reset_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let mut j = Journal::open(&root, Path::new("/run/x"), Path::new(CG)).unwrap();
    let e = j
        .record(Entry::File {
            path: "/etc/passwd".into(),
            content: "root:x:0:0\n".into(),
        })
        .expect_err("refused");
    assert!(e.to_string().contains("/etc/passwd"), "{e}");
    assert!(!j.exists(), "nothing was written");
    for legit in [
        "/proc/sys/vm/swappiness",
        "/proc/sys/kernel/sched_rt_runtime_us",
        "/proc/irq/42/smp_affinity_list",
        "/proc/irq/default_smp_affinity",
        "/sys/devices/system/cpu/cpufreq/policy4/scaling_governor",
        "/sys/devices/system/cpu/cpu7/cpuidle/state2/disable",
        "/sys/block/zram0/comp_algorithm",
        "/sys/devices/virtual/workqueue/cpumask",
        "/sys/kernel/rcu_expedited",
        "/sys/devices/system/cpu/cpu7/power/pm_qos_resume_latency_us",
        "/sys/fs/cgroup/cgroup.subtree_control",
        "/sys/fs/cgroup/rt/cpu.weight",
    ] {
        j.record(Entry::File {
            path: legit.into(),
            content: "1\n".into(),
        })
        .unwrap_or_else(|e| panic!("{legit}: {e}"));
    }
    j.record(Entry::Swapon {
        path: "/dev/zram0".into(),
    })
    .unwrap();
    let back = Journal::load(&root, Path::new("/run/x"), Path::new(CG))
        .unwrap()
        .expect("written");
    assert_eq!(back.entries().len(), 13);
}

#[test]
fn v1_journal_is_accepted_without_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let host = journal_host(&root, "/run/x");
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    let v1 = format!("{HEADER_V1}\nFILE\t/proc/sys/vm/swappiness\t60\\n\n");
    std::fs::write(&host, &v1).unwrap();
    let j = Journal::load(&root, Path::new("/run/x"), Path::new(CG))
        .unwrap()
        .unwrap();
    assert_eq!(j.version(), Some(Version::V1));
    assert_eq!(j.cgroup_root(), None);
    assert_eq!(
        j.original(Path::new("/proc/sys/vm/swappiness")),
        Some("60\n")
    );
    // A writer keeps appending to it as is.
    let mut w = Journal::open(&root, Path::new("/run/x"), Path::new(CG)).unwrap();
    w.record(Entry::Mkdir {
        path: "/sys/fs/cgroup/a".into(),
    })
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&host).unwrap(),
        format!("{v1}MKDIR\t/sys/fs/cgroup/a\n")
    );
}

#[test]
fn symlinked_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let host = journal_host(&root, "/run/x");
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::fs::write(dir.path().join("elsewhere"), render_header(Path::new(CG))).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &host).unwrap();
    let e = Journal::load(&root, Path::new("/run/x"), Path::new(CG))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

fn arb_entry() -> impl Strategy<Value = Entry> {
    let path = "/[a-z/._\\\\\t\n-]{1,30}";
    prop_oneof![
        (path, "\\PC*").prop_map(|(p, c)| Entry::File {
            path: p.into(),
            content: c
        }),
        path.prop_map(|p| Entry::Absent { path: p.into() }),
        path.prop_map(|p| Entry::Mkdir { path: p.into() }),
        "zram[0-9]{1,2}".prop_map(|d| Entry::ZramInit { device: d }),
        "zram[0-9]{1,2}".prop_map(|d| Entry::ZramHotAdd { device: d }),
        "/dev/[a-z0-9]{1,8}".prop_map(|p| Entry::Swapon { path: p.into() }),
    ]
}

/// Entries naming only what cgwarden manages (below `CG` for groups).
fn arb_managed_entry() -> impl Strategy<Value = Entry> {
    let knob = prop_oneof![
        proptest::sample::select(crate::knobs::sysctl::TABLE)
            .prop_map(|s| format!("/proc/sys/{}", s.name.replace('.', "/"))),
        "[0-9]{1,3}".prop_map(|n| format!("/proc/irq/{n}/smp_affinity_list")),
        "[0-9]{1,2}".prop_map(|n| format!("/sys/block/zram{n}/disksize")),
        "[0-9]{1,2}".prop_map(|n| format!("/sys/devices/system/cpu/cpu{n}/cpuidle/state1/disable")),
        "[a-z]{1,8}(/[a-z]{1,8}){0,2}".prop_map(|g| format!("{CG}/{g}/cpu.weight")),
    ];
    prop_oneof![
        (knob.clone(), "\\PC*").prop_map(|(p, c)| Entry::File {
            path: p.into(),
            content: c
        }),
        knob.prop_map(|p| Entry::Absent { path: p.into() }),
        "[a-z]{1,8}(/[a-z]{1,8}){0,2}".prop_map(|g| Entry::Mkdir {
            path: Path::new(CG).join(g)
        }),
        "zram[0-9]{1,2}".prop_map(|d| Entry::ZramInit { device: d }),
        "zram[0-9]{1,2}".prop_map(|d| Entry::ZramHotAdd { device: d }),
        "[0-9]{1,2}".prop_map(|n| Entry::Swapon {
            path: format!("/dev/zram{n}").into()
        }),
    ]
}

proptest! {
    #[test]
    fn entries_round_trip(e in arb_entry()) {
        let canonical_path = match &e {
            Entry::File { path, .. } | Entry::Absent { path } | Entry::Mkdir { path }
            | Entry::Swapon { path } => canonical(path),
            _ => true,
        };
        let expect = canonical_path.then(|| e.clone());
        prop_assert_eq!(Entry::parse(&e.render()), expect);
    }

    #[test]
    fn header_round_trips_any_cgroup_root(
        rel in proptest::collection::vec("[^/\\x00.][^/\\x00]{0,11}", 0..5),
        entries in proptest::collection::vec(arb_managed_entry(), 0..6),
    ) {
        let mut cg = PathBuf::from("/sys/fs/cgroup");
        for c in &rel {
            cg.push(c);
        }
        let cg = Root::normalize(&cg);
        // Groups and their knobs move below the generated cgroup root.
        let rebase = |p: PathBuf| match p.strip_prefix(CG) {
            Ok(rel) => cg.join(rel),
            Err(_) => p,
        };
        let entries: Vec<Entry> = entries.into_iter().map(|e| match e {
            Entry::Mkdir { path } => Entry::Mkdir { path: rebase(path) },
            Entry::File { path, content } => Entry::File { path: rebase(path), content },
            Entry::Absent { path } => Entry::Absent { path: rebase(path) },
            e => e,
        }).collect();
        let mut text = render_header(&cg);
        for e in &entries {
            text.push_str(&e.render());
            text.push('\n');
        }
        let p = parse(text.as_bytes(), Path::new("/j"), Path::new(CG)).unwrap();
        prop_assert_eq!(p.version, Version::V2);
        prop_assert_eq!(p.cgroup_root, Some(cg));
        prop_assert_eq!(p.entries, entries);
        prop_assert!(p.warnings.is_empty());
    }

    /// What the fuzz target (fuzz/fuzz_targets/journal.rs) checks, on
    /// arbitrary bytes after a valid header: no panic, and an accepted
    /// journal names only what cgwarden manages.
    #[test]
    fn parse_text_accepts_only_managed_entries(
        lines in proptest::collection::vec(
            prop_oneof![
                "(FILE|ABSENT|MKDIR|SWAPON|ZRAM_INIT)\t/[a-z./]{0,30}(\t[a-z0-9]{0,4})?",
                any::<Vec<u8>>().prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            ],
            0..8,
        ),
    ) {
        let mut text = render_header(Path::new(CG));
        for l in &lines {
            text.push_str(l);
            text.push('\n');
        }
        if let Ok(p) = Journal::parse_text(text.as_bytes(), Path::new(CG)) {
            for e in &p.entries {
                prop_assert!(managed(e, Path::new(CG)).is_none(), "{:?}", e);
            }
        }
    }

    /// Random bytes never panic, and load only if they are a journal:
    /// then every complete line is exactly what the parse renders back.
    #[test]
    fn random_bytes_never_panic_nor_pass_for_a_journal(
        with_header in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut bytes = if with_header {
            render_header(Path::new(CG)).into_bytes()
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(&tail);
        if let Ok(p) = Journal::parse_text(&bytes, Path::new(CG)) {
            let mut again = match p.version {
                Version::V2 => render_header(p.cgroup_root.as_deref().unwrap_or(Path::new("/"))),
                Version::V1 => format!("{HEADER_V1}\n"),
            };
            for e in &p.entries {
                again.push_str(&e.render());
                again.push('\n');
            }
            prop_assert_eq!(again.as_bytes(), &bytes[..p.valid_len]);
            prop_assert_eq!(p.warnings.len(), usize::from(p.valid_len < bytes.len()));
        }
    }
}

/// A kernel thread's original scheduling and CPUs round-trip, are
/// recorded once per pid, and a damaged or foreign one is refused.
#[test]
fn kthread_entries_round_trip_and_are_checked() {
    let e = Entry::Kthread {
        pid: 137,
        comm: "irq/24-virtio0-config".into(),
        sched: "fifo 50".into(),
        cpus: "0-3".into(),
    };
    let line = e.render();
    assert_eq!(line, "KTHREAD\t137\tirq/24-virtio0-config\tfifo 50\t0-3");
    assert_eq!(Entry::parse(&line), Some(e.clone()));
    assert_eq!(managed(&e, Path::new(CG)), None);
    for bad in [
        "KTHREAD\t0\tx\tfifo 50\t0-3",
        "KTHREAD\t-4\tx\tfifo 50\t0-3",
        "KTHREAD\t12\tx\tfifo 50",
        "KTHREAD\t12\tx\tfifo 50\t0-3\textra",
    ] {
        assert_eq!(Entry::parse(bad), None, "{bad}");
    }
    for (sched, cpus) in [
        ("deadline 0", "0-3"),
        ("fifo 100", "0"),
        ("fifo", "0"),
        ("fifo 50", "a-b"),
    ] {
        let e = Entry::Kthread {
            pid: 5,
            comm: "ksoftirqd/0".into(),
            sched: sched.into(),
            cpus: cpus.into(),
        };
        assert!(managed(&e, Path::new(CG)).is_some(), "{sched} {cpus}");
    }
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let state = Path::new("/run/cgwarden");
    let mut j = Journal::open(&root, state, Path::new(CG)).unwrap();
    j.record(e.clone()).unwrap();
    j.record(Entry::Kthread {
        pid: 137,
        comm: "irq/24-virtio0-config".into(),
        sched: "fifo 70".into(),
        cpus: "0-3".into(),
    })
    .unwrap();
    let j = Journal::open(&root, state, Path::new(CG)).unwrap();
    let kthreads: Vec<&Entry> = j
        .entries()
        .iter()
        .filter(|x| matches!(x, Entry::Kthread { .. }))
        .collect();
    assert_eq!(kthreads, vec![&e], "the first original is the truth");
}

/// Every original the journal keeps is a value its file takes back. For each
/// family, every file of the standard fake tree it owns, plus the read-backs
/// a real kernel prints where they differ from what the file takes (6.1
/// guest): recorded, then written back through the fake root — which
/// refuses what the kernel refuses (zram's whole algorithm list, an invalid
/// partition's text, `cgroup.type` other than `threaded`, 0 in
/// `vm.dirty_bytes`) — and read back the same.
#[test]
fn every_journalled_original_is_a_value_its_file_takes_back() {
    let dir = tempfile::tempdir().unwrap();
    crate::kernel::fake_tree::FakeTree::standard(dir.path()).unwrap();
    let root = Root::fake(dir.path());
    let cg = Path::new(CG);
    // A group with a kernel's read-backs, and a devfreq device.
    let kernel_reads: &[(&str, &str)] = &[
        ("/sys/fs/cgroup/g/cpu.max", "max 100000\n"),
        ("/sys/fs/cgroup/g/cpu.weight", "100\n"),
        ("/sys/fs/cgroup/g/cpuset.cpus", "\n"),
        ("/sys/fs/cgroup/g/cpuset.mems", "\n"),
        (
            "/sys/fs/cgroup/g/cpuset.cpus.partition",
            "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n",
        ),
        ("/sys/fs/cgroup/g/memory.high", "max\n"),
        ("/sys/fs/cgroup/g/memory.min", "0\n"),
        ("/sys/fs/cgroup/g/memory.swap.max", "max\n"),
        ("/sys/fs/cgroup/g/memory.oom.group", "0\n"),
        ("/sys/fs/cgroup/g/io.weight", "default 100\n8:16 200\n"),
        ("/sys/fs/cgroup/g/pids.max", "max\n"),
        ("/sys/fs/cgroup/g/cpu.uclamp.min", "0.00\n"),
        ("/sys/fs/cgroup/g/cpu.uclamp.max", "max\n"),
        ("/sys/fs/cgroup/g/cgroup.type", "threaded\n"),
        ("/sys/class/devfreq/gpu/governor", "simple_ondemand\n"),
        ("/sys/class/devfreq/gpu/min_freq", "300000000\n"),
        ("/sys/class/devfreq/gpu/max_freq", "900000000\n"),
    ];
    for (p, text) in kernel_reads {
        let host = root.host_path(Path::new(p));
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        std::fs::write(host, text).unwrap();
    }
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let dev = Path::new("/").join(p.strip_prefix(dir.path()).unwrap());
            if crate::knobs::owns_file(&dev, cg) {
                files.push(dev);
            }
        }
    }
    files.sort();
    for f in crate::knobs::FAMILIES {
        assert!(
            files.iter().any(|p| f.owns(p, cg)),
            "no file of family {:?} was tried",
            f.name()
        );
    }
    let mut j = Journal::open(&root, Path::new("/run/cgwarden"), cg).unwrap();
    for p in &files {
        let read = root.read(p).unwrap();
        j.record(Entry::File {
            path: p.clone(),
            content: read,
        })
        .unwrap();
    }
    // What a reset reads: the journal from disk.
    let j = Journal::load(&root, Path::new("/run/cgwarden"), cg)
        .unwrap()
        .unwrap();
    for p in &files {
        let original = j.original(p).unwrap().trim_end_matches('\n').to_string();
        if let Some((amount, ratio)) = crate::knobs::coupled(p) {
            if *p == amount && original == "0" {
                // 0 says "the ratio is in force": `reset` writes the ratio,
                // which the journal holds beside it.
                assert!(j.original(&ratio).is_some(), "{}", ratio.display());
                continue;
            }
        }
        root.write(p, &original)
            .unwrap_or_else(|e| panic!("{}: journalled {original:?}, refused: {e}", p.display()));
        // What it reads now is kept as the same original.
        let again = crate::knobs::restorable(p, cg, &root.read(p).unwrap());
        assert_eq!(again.trim_end_matches('\n'), original, "{}", p.display());
    }
    let kept = |p: &str| j.original(Path::new(p)).unwrap().trim().to_string();
    assert_eq!(kept("/sys/block/zram0/comp_algorithm"), "lzo-rle");
    assert_eq!(kept("/sys/fs/cgroup/g/cpuset.cpus.partition"), "isolated");
    assert_eq!(kept("/sys/fs/cgroup/g/io.weight"), "default 100");
    assert_eq!(kept("/sys/fs/cgroup/g/cpu.max"), "max 100000");
    assert_eq!(
        kept("/proc/sys/vm/lowmem_reserve_ratio"),
        "256\t256\t32\t0\t0"
    );
}

/// A journal of an older cgwarden that kept zram's whole algorithm list is
/// read as the active algorithm.
#[test]
fn an_older_journals_algorithm_list_is_read_as_the_active_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::fake(dir.path());
    let host = journal_host(&root, "/run/cgwarden");
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::fs::write(
        &host,
        format!(
            "{HEADER}\nROOT\t/sys/fs/cgroup\nFILE\t/sys/block/zram0/comp_algorithm\tlzo [lzo-rle] lz4 lz4hc zstd \\n\n"
        ),
    )
    .unwrap();
    let j = Journal::load(&root, Path::new("/run/cgwarden"), Path::new(CG))
        .unwrap()
        .unwrap();
    assert_eq!(
        j.original(Path::new("/sys/block/zram0/comp_algorithm")),
        Some("lzo-rle")
    );
}

/// Writing one sysctl of a coupled pair journals the other first: the
/// kernel changes it behind the write.
#[test]
fn a_coupled_sysctls_partner_is_journalled_with_it() {
    let dir = tempfile::tempdir().unwrap();
    crate::kernel::fake_tree::FakeTree::standard(dir.path()).unwrap();
    let root = Root::fake(dir.path());
    let mut j = Journal::open(&root, Path::new("/run/cgwarden"), Path::new(CG)).unwrap();
    j.record(Entry::File {
        path: "/proc/sys/vm/dirty_bytes".into(),
        content: "0\n".into(),
    })
    .unwrap();
    assert_eq!(
        j.original(Path::new("/proc/sys/vm/dirty_ratio")),
        Some("20\n")
    );
    assert_eq!(
        j.original(Path::new("/proc/sys/vm/dirty_bytes")),
        Some("0\n")
    );
    j.record(Entry::File {
        path: "/proc/sys/vm/overcommit_ratio".into(),
        content: "50\n".into(),
    })
    .unwrap();
    assert_eq!(
        j.original(Path::new("/proc/sys/vm/overcommit_kbytes")),
        Some("0\n")
    );
    // Not recorded twice, and the pair's other member keeps its first original.
    let text = std::fs::read_to_string(journal_host(&root, "/run/cgwarden")).unwrap();
    assert_eq!(text.matches("dirty_ratio").count(), 1, "{text}");
}
