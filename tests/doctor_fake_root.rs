//! `cgwarden doctor` on a fake tree (issue 15 item 3): the boot parameters
//! of `/proc/cmdline` and the sysfs files against the policy's RT CPUs;
//! exit 3 and one line naming the exact parameter when one is missing.

use cgwarden::kernel::fake_tree::FakeTree;
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
        "CONFIG_PREEMPT_RT=y\n# CONFIG_RT_GROUP_SCHED is not set\n",
    )
    .unwrap();
    (t, root)
}

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
    assert_eq!(out.trim(), "0 missing, 0 notes", "{out}");
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

#[test]
fn no_cmdline_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, root) = setup(dir.path(), "");
    std::fs::remove_file(root.join("proc/cmdline")).unwrap();
    let (code, out) = doctor(&policy(), &root);
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("/proc/cmdline"), "{out}");
}
