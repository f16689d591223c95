//! `cgwarden doctor` on a fake tree: the boot parameters
//! of `/proc/cmdline` and the sysfs files against the policy's RT CPUs;
//! exit 3 and one line naming the exact parameter when one is missing.

use cgwarden::testing::FakeTree;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;
use support::BIN;

fn setup(dir: &Path, cmdline: &str) -> (FakeTree, PathBuf) {
    let root = dir.join("root");
    let t = FakeTree::standard(&root).unwrap();
    t.file("proc/cmdline", cmdline).unwrap();
    t.file("sys/kernel/realtime", "1").unwrap();
    t.file("sys/devices/system/cpu/isolated", "").unwrap();
    t.file("proc/sys/kernel/osrelease", "6.6.0-rt").unwrap();
    t.file(
        "boot/config-6.6.0-rt",
        &format!("{GOOD_CONFIG}# CONFIG_RT_GROUP_SCHED is not set\n"),
    )
    .unwrap();
    t.file(
        "proc/pressure/memory",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    )
    .unwrap();
    (t, root)
}

/// A kernel configuration with everything the shipped policies use.
const GOOD_CONFIG: &str =
    "CONFIG_PREEMPT_RT=y\nCONFIG_PSI=y\nCONFIG_CONNECTOR=y\nCONFIG_PROC_EVENTS=y\n\
CONFIG_CGROUP_FAVOR_DYNMODS=y\nCONFIG_UCLAMP_TASK=y\nCONFIG_UCLAMP_TASK_GROUP=y\nCONFIG_ZRAM=m\n\
CONFIG_CPUSETS=y\nCONFIG_MEMCG=y\nCONFIG_CGROUP_PIDS=y\nCONFIG_BLK_CGROUP=y\n";

fn doctor(policy: &Path, root: &Path) -> (Option<i32>, String) {
    let o: Output = Command::new(BIN)
        .arg("doctor")
        .arg(policy)
        .arg("--root")
        .arg(root)
        .output()
        .expect("run cgwarden doctor");
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn policy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/qcs6490-rt.yaml")
}

#[test]
fn missing_nohz_full_is_named_with_the_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let (t, root) = setup(dir.path(), "console=ttyS0 rcu_nocbs=7 irqaffinity=0-6\n");
    t.file("sys/devices/system/cpu/nohz_full", "(null)")
        .unwrap();
    let (code, out) = doctor(&policy(), &root);
    assert_eq!(code, Some(3), "{out}");
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("missing: ")).collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].starts_with("missing: nohz_full: "), "{out}");
    assert!(
        lines[0].ends_with("add the kernel parameter nohz_full=7"),
        "{out}"
    );
    assert!(out.contains("1 missing, 0 notes"), "{out}");
}

#[test]
fn a_kernel_booted_with_every_parameter_has_nothing_to_say() {
    let dir = tempfile::tempdir().unwrap();
    let (t, root) = setup(
        dir.path(),
        "console=ttyS0 \"nohz_full=7\" rcu_nocbs=7 irqaffinity=0-6 isolcpus=managed_irq,domain,7\n",
    );
    t.file("sys/devices/system/cpu/nohz_full", "7").unwrap();
    let (code, out) = doctor(&policy(), &root);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("nohz_full"), "{out}");
    // Only what the board is and its clusters, then the summary: no finding.
    let findings: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("board: ") && !l.starts_with("clusters: "))
        .collect();
    assert_eq!(findings, ["0 missing, 0 notes"], "{out}");
}

#[test]
fn the_iq8275_policy_wants_core_3_tickless_and_irqs_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let (t, root) = setup(dir.path(), "nohz_full=7\n");
    t.file("sys/devices/system/cpu/nohz_full", "7").unwrap();
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/iq8275-rt.yaml");
    let (code, out) = doctor(&p, &root);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("add the kernel parameter nohz_full=3,7"),
        "{out}"
    );
    assert!(
        out.contains("add the kernel parameter irqaffinity=0-2,4-7"),
        "{out}"
    );
    // nohz_full=7 does not cover core 3's RCU callbacks either.
    assert!(
        out.contains("add the kernel parameter rcu_nocbs=3"),
        "{out}"
    );
}

/// A fake board without /proc/cmdline is a finding naming
/// the file under --root, not a temporary failure (exit 75).
#[test]
fn no_cmdline_is_a_finding_naming_the_file_under_root() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, root) = setup(dir.path(), "");
    std::fs::remove_file(root.join("proc/cmdline")).unwrap();
    let (code, out) = doctor(&policy(), &root);
    // The RT CPU's parameters are then missing: exit 3, as on a kernel
    // booted without them.
    assert_eq!(code, Some(3), "{out}");
    let want = format!(
        "note: cmdline: {} does not exist; the boot-parameter checks read an empty command line",
        root.join("proc/cmdline").display()
    );
    assert!(out.contains(&want), "{out}");
    assert!(out.contains("missing: nohz_full"), "{out}");
}

/// The build configuration from /proc/config.gz (as the
/// kernel serves it, gzip), the cgroup root's controllers and /proc/pressure
/// against what a policy uses; each missing piece named with its option.
#[test]
fn a_kernel_built_without_psi_and_uclamp_is_told_which_options_to_set() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (t, root) = setup(dir.path(), "console=ttyS0\n");
    std::fs::remove_file(root.join("boot/config-6.6.0-rt")).unwrap();
    std::fs::remove_file(root.join("proc/pressure/memory")).unwrap();
    // No `io` controller offered at the root.
    t.file("sys/fs/cgroup/cgroup.controllers", "cpuset cpu memory pids")
        .unwrap();
    let config =
        "CONFIG_PSI=y\nCONFIG_PSI_DEFAULT_DISABLED=y\n# CONFIG_UCLAMP_TASK_GROUP is not set\n\
                  CONFIG_PROC_EVENTS=y\nCONFIG_CGROUP_FAVOR_DYNMODS=y\nCONFIG_ZRAM=m\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(config.as_bytes()).unwrap();
    std::fs::write(root.join("proc/config.gz"), gz.finish().unwrap()).unwrap();
    // The vision cell: PSI rules, uclamp on realtime, io weights.
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/iq9100-vision.yaml");
    let (code, out) = doctor(&policy, &root);
    assert_eq!(code, Some(3), "{out}");
    for want in [
        "missing: psi: ",
        "add the kernel parameter psi=1",
        "missing: uclamp: ",
        "CONFIG_UCLAMP_TASK_GROUP=y",
        "missing: controllers: the cgroup root does not offer the `io` controller",
        "CONFIG_BLK_CGROUP",
    ] {
        assert!(out.contains(want), "doctor did not say `{want}`:\n{out}");
    }
    assert!(
        !out.contains("kernel_config"),
        "the config was readable:\n{out}"
    );
    // With psi=1 booted and the rest fixed, those findings go.
    std::fs::write(
        root.join("proc/pressure/memory"),
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    )
    .unwrap();
    t.file(
        "sys/fs/cgroup/cgroup.controllers",
        "cpuset cpu io memory pids",
    )
    .unwrap();
    let (_, out) = doctor(&policy, &root);
    assert!(
        !out.contains("psi:") && !out.contains("controllers:"),
        "{out}"
    );
    assert!(out.contains("missing: uclamp: "), "{out}");
}
