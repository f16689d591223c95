use super::*;
use crate::kernel::fake_tree::{FakeProcess, FakeTree};
use std::os::unix::fs::symlink;

// What the capture test checks the sources against: the paths each take
// copies, and what a capture leaves out on purpose.

/// What cgwarden reads but a capture leaves out, and why: the recorder's
/// and the report's device identity names the unit, not the board.
const NOT_COPIED: [(&str, &str); 3] = [
    ("/proc/sys/kernel/hostname", "names the unit"),
    ("/etc/machine-id", "names the unit"),
    ("/var/lib/dbus/machine-id", "names the unit"),
];

impl Take {
    fn dev(&self) -> Option<&Path> {
        match self {
            Take::File(p) | Take::Dir(p) | Take::Tree(p) | Take::Class(p, _) | Take::Cgroups(p) => {
                Some(p)
            }
            Take::Processes => None,
        }
    }

    /// Whether reading device path `dev` reads what this take copies (or
    /// lists a directory on the way to it).
    fn covers(&self, dev: &Path) -> bool {
        let Some(p) = self.dev() else {
            return numeric_proc(dev) || dev == Path::new("/proc");
        };
        if p.starts_with(dev) {
            return true; // a directory above it
        }
        // Whether the directory above a hierarchy is a cgroup too (where
        // the mount is): it is not, on the board and in the copy alike.
        if let Take::Cgroups(_) = self {
            let name = dev.file_name().and_then(|n| n.to_str());
            let dir = dev.parent().unwrap_or(dev);
            if name == Some(crate::kernel::cgroupfs::CONTROLLERS) && p.starts_with(dir) {
                return true;
            }
        }
        match self {
            Take::File(_) | Take::Dir(_) => dev == p,
            Take::Tree(_) | Take::Cgroups(_) => dev.starts_with(p),
            Take::Class(_, only) => dev.strip_prefix(p).is_ok_and(|rest| {
                let first = rest.components().next();
                let name = first.map(|c| c.as_os_str().to_string_lossy());
                name.is_some_and(|n| only.is_none_or(|o| n.starts_with(o)))
            }),
            Take::Processes => false,
        }
    }
}

/// `/proc/PID...`.
fn numeric_proc(dev: &Path) -> bool {
    let mut c = dev.components().skip(1);
    c.next() == Some(Component::Normal("proc".as_ref()))
        && c.next().is_some_and(|n| {
            let n = n.as_os_str().to_string_lossy();
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        })
}

/// Whether a source of `sources` copies what reading `dev` reads.
fn covered(sources: &[Source], dev: &Path) -> bool {
    sources.iter().flat_map(|s| &s.takes).any(|t| t.covers(dev))
}

fn put(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// The standard fake board with what the standard tree lacks and a board
/// has: a devfreq device and thermal zones behind class links, a zram
/// device behind `/sys/block`, write-only files, processes, identity.
fn board(dir: &Path) -> FakeTree {
    let t = FakeTree::standard(dir).unwrap();
    let gpu = "sys/devices/platform/soc/3d00000.gpu/devfreq/3d00000.gpu";
    let freqs = [220_000_000, 500_000_000, 900_000_000];
    t.devfreq_device(gpu, "msm-adreno-tz performance powersave", &freqs, freqs[0])
        .unwrap();
    put(dir, "sys/devices/platform/soc/3d00000.gpu/uevent", "x\n");
    symlink("../../../3d00000.gpu", dir.join(gpu).join("device")).unwrap();
    fs::create_dir_all(dir.join("sys/class/devfreq")).unwrap();
    symlink(
        "../../devices/platform/soc/3d00000.gpu/devfreq/3d00000.gpu",
        dir.join("sys/class/devfreq/3d00000.gpu"),
    )
    .unwrap();
    let thermal = "sys/devices/virtual/thermal";
    for (n, kind, temp) in [(0, "cpu-1-0-usr", "45000"), (1, "gpu-usr", "41000")] {
        let z = format!("{thermal}/thermal_zone{n}");
        put(dir, &format!("{z}/type"), &format!("{kind}\n"));
        put(dir, &format!("{z}/temp"), &format!("{temp}\n"));
        put(dir, &format!("{z}/trip_point_0_temp"), "95000\n");
        put(dir, &format!("{z}/trip_point_0_type"), "passive\n");
        put(dir, &format!("{z}/emul_temp"), "");
        fs::set_permissions(
            dir.join(&z).join("emul_temp"),
            fs::Permissions::from_mode(0o200),
        )
        .unwrap();
        symlink("../cooling_device0", dir.join(&z).join("cdev0")).unwrap();
        // An absolute link, as no sysfs has: not made again.
        symlink("/etc", dir.join(&z).join("outside")).unwrap();
        fs::create_dir_all(dir.join("sys/class/thermal")).unwrap();
        symlink(
            format!("../../devices/virtual/thermal/thermal_zone{n}"),
            dir.join(format!("sys/class/thermal/thermal_zone{n}")),
        )
        .unwrap();
    }
    let cd = format!("{thermal}/cooling_device0");
    put(dir, &format!("{cd}/type"), "cpufreq-cpu4\n");
    put(dir, &format!("{cd}/cur_state"), "0\n");
    put(dir, &format!("{cd}/max_state"), "20\n");
    symlink(
        "../../devices/virtual/thermal/cooling_device0",
        dir.join("sys/class/thermal/cooling_device0"),
    )
    .unwrap();
    // The standard tree's zram0 is a plain directory; a board's is a link.
    let zram = dir.join("sys/devices/virtual/block/zram0");
    fs::create_dir_all(zram.parent().unwrap()).unwrap();
    fs::rename(dir.join("sys/block/zram0"), &zram).unwrap();
    symlink(
        "../devices/virtual/block/zram0",
        dir.join("sys/block/zram0"),
    )
    .unwrap();
    fs::create_dir_all(dir.join("sys/devices/virtual/block/loop0")).unwrap();
    symlink(
        "../devices/virtual/block/loop0",
        dir.join("sys/block/loop0"),
    )
    .unwrap();
    fs::set_permissions(zram.join("reset"), fs::Permissions::from_mode(0o200)).unwrap();
    put(dir, "sys/fs/cgroup/cgroup.kill", "");
    fs::set_permissions(
        dir.join("sys/fs/cgroup/cgroup.kill"),
        fs::Permissions::from_mode(0o200),
    )
    .unwrap();
    put(
        dir,
        "sys/fs/cgroup/system.slice/cgroup.controllers",
        "cpu memory\n",
    );
    put(dir, "sys/fs/cgroup/system.slice/memory.high", "max\n");
    put(
        dir,
        "proc/cmdline",
        "console=ttyMSM0 isolcpus=6-7 nohz_full=6-7\n",
    );
    put(dir, "proc/sys/kernel/osrelease", "6.6.52-rt43\n");
    put(dir, "boot/config-6.6.52-rt43", "CONFIG_PREEMPT_RT=y\n");
    put(
        dir,
        "proc/pressure/memory",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
    );
    put(
        dir,
        "proc/meminfo",
        "MemTotal: 16000000 kB\nMemAvailable: 9000000 kB\n",
    );
    put(
        dir,
        "proc/interrupts",
        "           CPU0\n 24:   10  GICv3  foo\n",
    );
    put(dir, "sys/devices/soc0/machine", "QCS9100\n");
    put(dir, "sys/devices/soc0/serial_number", "123456\n");
    put(dir, "proc/sys/kernel/hostname", "cell-07\n");
    put(dir, "proc/device-tree/model", "Qualcomm IQ-9100 EVK\0");
    for p in [
        FakeProcess::new(400, "motion_control"),
        FakeProcess {
            exe: Some("/opt/npu/bin/infer-server".into()),
            cmdline: vec!["/opt/npu/bin/infer-server".into(), "--token=s3cret".into()],
            ..FakeProcess::new(500, "infer-server")
        },
        FakeProcess::new(700, "sshd"),
        FakeProcess::new(800, "irqbalance"),
    ] {
        t.add_process(&p).unwrap();
    }
    t
}

fn take(src: &Path, processes: bool) -> (tempfile::TempDir, Summary) {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("cap");
    let s = capture(&Root::fake(src), &dir, processes).unwrap_or_else(|e| panic!("{e:?}"));
    (out, s)
}

#[test]
fn link_targets_of_sysfs_form_only() {
    let l = Path::new("/sys/class/devfreq/gpu");
    assert_eq!(
        link_target(l, Path::new("../../devices/platform/gpu")),
        Some(PathBuf::from("/sys/devices/platform/gpu"))
    );
    assert_eq!(
        link_target(
            Path::new("/sys/block/zram0"),
            Path::new("../devices/virtual/block/zram0")
        ),
        Some(PathBuf::from("/sys/devices/virtual/block/zram0"))
    );
    for bad in ["/etc", "../../../../etc", "a/../../x", "./x", "..", ""] {
        assert_eq!(link_target(l, Path::new(bad)), None, "{bad}");
    }
}

#[test]
fn takes_cover_what_they_copy_and_the_directories_above() {
    let cpu = Take::Tree("/sys/devices/system/cpu".into());
    assert!(cpu.covers(Path::new("/sys/devices/system/cpu/cpu0/online")));
    assert!(cpu.covers(Path::new("/sys/devices")));
    assert!(!cpu.covers(Path::new("/sys/devices/system/memory")));
    let zram = Take::Class("/sys/block".into(), Some("zram"));
    assert!(zram.covers(Path::new("/sys/block/zram0/mm_stat")));
    assert!(zram.covers(Path::new("/sys/block")));
    assert!(!zram.covers(Path::new("/sys/block/sda/queue/scheduler")));
    let f = Take::File("/proc/meminfo".into());
    assert!(f.covers(Path::new("/proc/meminfo")) && !f.covers(Path::new("/proc/meminfo2")));
    assert!(Take::Processes.covers(Path::new("/proc/42/task/43/stat")));
    assert!(Take::Processes.covers(Path::new("/proc")));
    assert!(!Take::Processes.covers(Path::new("/proc/self/mounts")));
}

#[test]
fn copies_the_board_and_reads_nothing_that_changes_it() {
    let src = tempfile::tempdir().unwrap();
    board(src.path());
    let before = snapshot(src.path());
    let (out, s) = take(src.path(), false);
    assert_eq!(snapshot(src.path()), before, "the source changed");
    let d = out.path().join("cap");
    let read = |rel: &str| fs::read_to_string(d.join(rel)).unwrap();
    // Plain files, a class link and its target, a tree's inner link.
    assert_eq!(
        read("sys/devices/system/cpu/cpufreq/policy4/scaling_min_freq"),
        "691200\n"
    );
    assert_eq!(
        read("sys/class/devfreq/3d00000.gpu/max_freq"),
        "900000000\n"
    );
    assert!(
        fs::symlink_metadata(d.join("sys/class/devfreq/3d00000.gpu"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        read("sys/class/thermal/thermal_zone0/cdev0/type"),
        "cpufreq-cpu4\n"
    );
    assert!(!d
        .join("sys/devices/virtual/thermal/thermal_zone0/outside")
        .exists());
    assert!(
        fs::symlink_metadata(d.join("sys/devices/virtual/thermal/thermal_zone0/outside")).is_err()
    );
    assert_eq!(
        read("sys/block/zram0/comp_algorithm"),
        "lzo [lzo-rle] lz4 lz4hc zstd\n"
    );
    assert!(
        !d.join("sys/block/loop0").exists(),
        "only zram devices of /sys/block"
    );
    // Never read: write-only files and hot_add are there, empty.
    assert_eq!(read("sys/class/zram-control/hot_add"), "");
    assert_eq!(read("sys/fs/cgroup/cgroup.kill"), "");
    assert_eq!(read("sys/block/zram0/reset"), "");
    assert_eq!(read("sys/class/thermal/thermal_zone1/emul_temp"), "");
    assert_eq!(read("sys/fs/cgroup/system.slice/memory.high"), "max\n");
    assert_eq!(read("boot/config-6.6.52-rt43"), "CONFIG_PREEMPT_RT=y\n");
    assert_eq!(read("proc/device-tree/model"), "Qualcomm IQ-9100 EVK\0");
    assert_eq!(read("sys/devices/soc0/machine"), "QCS9100\n");
    // What names the unit, and processes without --processes: not copied.
    for absent in [
        "sys/devices/soc0/serial_number",
        "proc/sys/kernel/hostname",
        "etc/machine-id",
        "etc/passwd",
        "proc/500",
    ] {
        assert!(!d.join(absent).exists(), "{absent} was copied");
    }
    assert_eq!(s.counts.links_skipped, 2, "{:?}", s.counts);
    assert_eq!(s.counts.processes, 0);
    let meta: serde_json::Value = serde_json::from_str(&read(METADATA)).unwrap();
    assert_eq!(meta["kernel"], "6.6.52-rt43");
    assert_eq!(meta["processes"], false);
    assert_eq!(meta["counts"]["files"], s.counts.files);
}

#[test]
fn processes_only_when_asked_with_exe_as_text() {
    let src = tempfile::tempdir().unwrap();
    board(src.path());
    let (out, s) = take(src.path(), true);
    let d = out.path().join("cap");
    assert_eq!(s.counts.processes, 4);
    assert_eq!(
        fs::read_to_string(d.join("proc/500/exe")).unwrap(),
        "/opt/npu/bin/infer-server\n"
    );
    assert_eq!(
        fs::read(d.join("proc/500/cmdline")).unwrap(),
        b"/opt/npu/bin/infer-server\0--token=s3cret\0"
    );
    assert!(d.join("proc/500/task/500/status").is_file());
    assert!(d.join("etc/passwd").is_file());
    // The capture reads as the source does.
    let (a, b) = (Root::fake(src.path()), Root::fake(&d));
    assert_eq!(
        crate::kernel::procfs::user_process(&a, 500, crate::kernel::procfs::Fields::ALL).unwrap(),
        crate::kernel::procfs::user_process(&b, 500, crate::kernel::procfs::Fields::ALL).unwrap()
    );
}

#[test]
fn refuses_a_directory_that_is_not_empty_or_is_in_the_kernel_trees() {
    let src = tempfile::tempdir().unwrap();
    board(src.path());
    let out = tempfile::tempdir().unwrap();
    fs::write(out.path().join("x"), "").unwrap();
    let r = Root::fake(src.path());
    match capture(&r, out.path(), false) {
        Err(Refused::Usage(m)) => assert!(m.contains("not empty"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fs::read_dir(out.path()).unwrap().count(), 1);
    match capture(&r, &out.path().join("x"), false) {
        Err(Refused::Usage(m)) => assert!(m.contains("not a directory"), "{m}"),
        other => panic!("{other:?}"),
    }
    let inside = src.path().join("sys/fs/cgroup/new");
    match capture(&r, &inside, false) {
        Err(Refused::Usage(m)) => assert!(m.contains("/sys"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!inside.exists(), "a group was made");
    // An empty directory is taken.
    let empty = out.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert!(capture(&r, &empty, false).is_ok());
}

#[test]
fn never_writes_through_a_link_in_dir() {
    let src = tempfile::tempdir().unwrap();
    board(src.path());
    let outside = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = Out::open(out.path()).unwrap();
    fs::create_dir_all(out.path().join("sys")).unwrap();
    symlink(outside.path(), out.path().join("sys/fs")).unwrap();
    assert!(o.file(Path::new("/sys/fs/cgroup/x"), b"1").is_err());
    assert!(o.dir(Path::new("/sys/fs/cgroup")).is_err());
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn stops_at_the_limits_and_counts_what_it_left() {
    let src = tempfile::tempdir().unwrap();
    board(src.path());
    put(src.path(), "proc/interrupts", &"x".repeat(MAX_FILE + 1));
    let (out, s) = take(src.path(), false);
    assert_eq!(s.counts.too_large, 1);
    assert!(!out.path().join("cap/proc/interrupts").exists());
    assert!(
        s.line(Path::new("D")).contains("1 larger than 1 MiB"),
        "{}",
        s.line(Path::new("D"))
    );
}

/// Every path `plan`, `doctor` and the readers look at, on a board with
/// everything, is one a capture copies (or leaves out on purpose): a reader
/// that reads somewhere new fails here until `sources` names it.
#[test]
fn every_path_the_readers_read_is_captured() {
    use crate::kernel::{identity, irq, meminfo, memstat, psi, realtime, thermal, zram};
    use crate::knobs::devfreq;
    let src = tempfile::tempdir().unwrap();
    board(src.path());
    let root = Root::fake(src.path());
    let policies = [
        include_str!("../../../policies/iq9100-vision.yaml"),
        include_str!("../../../policies/qcs6490-rt.yaml"),
        include_str!("../../../policies/iq8275-rt.yaml"),
        include_str!("../../../policies/inference-box.yaml"),
        include_str!("../../../policies/oomd-cell.yaml"),
        include_str!("../../../policies/ros2-cell.yaml"),
        include_str!("../../../policies/minimal.yaml"),
        include_str!("../../../policies/product-line.yaml"),
    ];
    let mut seen = crate::kernel::root::trace::during(|| {
        for text in policies {
            let p = crate::policy::load_bytes("policy.yaml", text.as_bytes()).unwrap();
            let conv = crate::converge::Converger::new(root.clone(), &p);
            let plan = conv.plan();
            assert!(!plan.steps.is_empty());
            let _ = crate::doctor::diagnose(&root, &p).unwrap();
            let _ = crate::converge::coexistence_warnings(&root, &p);
        }
        let zones = thermal::zones(&root).unwrap();
        assert_eq!(zones.len(), 2, "the board's zones are read");
        for z in &zones {
            let _ = thermal::temp_millic(&root, z);
            let _ = thermal::lowest_trip(&root, z);
        }
        let cooling = thermal::cooling_devices(&root);
        for p in thermal::policies(&root) {
            let _ = thermal::policy_limit(&root, &p, &cooling);
        }
        assert_eq!(devfreq::devices(&root).len(), 1);
        let _ = irq::irqs(&root);
        let _ = irq::kthreads(&root);
        let _ = realtime::irqs(&root);
        let _ = realtime::cpuidle_states(&root, 7);
        let _ = meminfo::mem_available(&root);
        let _ = memstat::vmstat(&root);
        let _ = memstat::buddyinfo(&root);
        for d in memstat::zram_devices(&root) {
            let _ = memstat::mm_stat(&root, &d);
        }
        let _ = zram::swaps(&root);
        let _ = zram::module_loaded(&root);
        for r in ["cpu", "memory", "io", "irq"] {
            let _ = psi::read_system(&root, r);
        }
        let _ = identity::Device::read(&root);
        // What picks a policy's target, and the board's clusters.
        let _ = identity::board_name(&root);
        let _ = crate::kernel::board::read(&root, Path::new("/sys/fs/cgroup"));
        let _ = crate::kernel::selfproc::possible_cpus(&root);
        // `soak`'s clusters (built with the report feature only).
        #[cfg(feature = "report")]
        let _ = crate::kernel::topology::cpu_groups(&root);
        let _ = crate::kernel::procfs::boot_id(&root);
    });
    let list = sources(&root, true);
    let state = crate::policy::model::Settings::default().state_dir;
    seen.sort();
    seen.dedup();
    assert!(seen.len() > 100, "the trace saw only {} paths", seen.len());
    let missed: Vec<String> = seen
        .iter()
        .filter(|p| !covered(&list, p))
        .filter(|p| !NOT_COPIED.iter().any(|(n, _)| p == &Path::new(n)))
        .filter(|p| !p.starts_with(&state))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missed.is_empty(),
        "read but not captured:\n{}",
        missed.join("\n")
    );
}

/// Every file and link under `dir`, with its content or target.
pub(super) fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let what = if m.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                todo.push(p.clone());
                "dir".into()
            } else if m.permissions().mode() & 0o444 == 0 {
                format!("{:o}", m.permissions().mode())
            } else {
                let text = fs::read(&p).unwrap();
                format!(
                    "{:o} {}",
                    m.permissions().mode(),
                    String::from_utf8_lossy(&text)
                )
            };
            out.push((p, what));
        }
    }
    out.sort();
    out
}
