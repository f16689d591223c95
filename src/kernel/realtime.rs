//! Files behind the `system.realtime` switch (the RT tuning steps of vendor
//! RT guides): IRQ affinity (`/proc/irq/N/smp_affinity_list`,
//! `/proc/irq/default_smp_affinity`), the unbound-workqueue cpumask
//! (`/sys/devices/virtual/workqueue/cpumask`) and cpuidle state disabling
//! (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable`);
//! `kernel.timer_migration` is a plain sysctl.
//!
//! Also the hex-mask CPU-set format of the default IRQ affinity and the
//! workqueue cpumask (`ff,00000001`: comma-separated 32-bit words, most
//! significant first).

use std::path::Path;

use super::error::Result;
use super::root::Root;

use crate::knobs::system::{cpuidle_dir, PROC_IRQ};
pub(crate) use crate::knobs::system::{
    cpuidle_disable_path, default_affinity_path, irq_affinity_path, rcu_expedited_path,
    workqueue_cpumask_path,
};

/// Numeric IRQ directories of `/proc/irq`, sorted. A missing `/proc/irq`
/// (fake trees) gives an empty list.
pub(crate) fn irqs(root: &Root) -> Result<Vec<u32>> {
    numeric_entries(root, Path::new(PROC_IRQ), "")
}

/// Entries of `dir` named `<prefix><number>`, as sorted numbers; a missing
/// directory gives an empty list.
fn numeric_entries(root: &Root, dir: &Path, prefix: &str) -> Result<Vec<u32>> {
    let names = match root.list_dir(dir) {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut v: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Indices K of `/sys/devices/system/cpu/cpuN/cpuidle/stateK`, sorted.
/// No cpuidle directory gives an empty list.
pub(crate) fn cpuidle_states(root: &Root, cpu: u32) -> Result<Vec<u32>> {
    numeric_entries(root, &cpuidle_dir(cpu), "state")
}

/// Formats CPUs as a kernel hex mask: comma-separated 32-bit words, most
/// significant first, the first word unpadded, the rest 8 digits
/// (`[0..=7]` → `ff`; `[0, 32]` → `1,00000001`; empty → `0`). The kernel
/// pads the first word to its CPU count; it accepts either form on write,
/// so compare masks as CPU sets, not as text (`knobs::normalize` does).
pub(crate) fn cpulist_to_hex_mask(cpus: &[u32]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return "0".to_string();
    };
    let nwords = (max / 32 + 1) as usize;
    let mut words = vec![0u32; nwords];
    for &c in cpus {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    let mut out = format!("{:x}", words[nwords - 1]);
    for w in words[..nwords - 1].iter().rev() {
        out.push_str(&format!(",{w:08x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;
    use tempfile::TempDir;

    #[test]
    fn paths() {
        assert_eq!(
            irq_affinity_path(42),
            PathBuf::from("/proc/irq/42/smp_affinity_list")
        );
        assert_eq!(
            default_affinity_path(),
            PathBuf::from("/proc/irq/default_smp_affinity")
        );
        assert_eq!(
            cpuidle_disable_path(7, 2),
            PathBuf::from("/sys/devices/system/cpu/cpu7/cpuidle/state2/disable")
        );
        assert_eq!(
            workqueue_cpumask_path(),
            PathBuf::from("/sys/devices/virtual/workqueue/cpumask")
        );
    }

    #[test]
    fn fake_tree_listing() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        assert!(irqs(&r).unwrap().is_empty());
        assert!(cpuidle_states(&r, 0).unwrap().is_empty());
        for d in ["proc/irq/0", "proc/irq/16", "proc/irq/9", "proc/irq/x"] {
            fs::create_dir_all(t.path().join(d)).unwrap();
        }
        fs::write(t.path().join("proc/irq/default_smp_affinity"), "ff\n").unwrap();
        assert_eq!(irqs(&r).unwrap(), [0, 9, 16]);
        let ci = t.path().join("sys/devices/system/cpu/cpu7/cpuidle");
        for d in ["state0", "state10", "state2", "driver"] {
            fs::create_dir_all(ci.join(d)).unwrap();
        }
        assert_eq!(cpuidle_states(&r, 7).unwrap(), [0, 2, 10]);
        r.write(&irq_affinity_path(16), "0-6").unwrap();
        assert_eq!(r.read_trimmed(&irq_affinity_path(16)).unwrap(), "0-6");
    }

    #[test]
    fn hex_masks() {
        assert_eq!(cpulist_to_hex_mask(&[]), "0");
        assert_eq!(cpulist_to_hex_mask(&[0, 1, 2, 3, 4, 5, 6]), "7f");
        assert_eq!(cpulist_to_hex_mask(&[6, 7]), "c0");
        assert_eq!(cpulist_to_hex_mask(&[0, 32]), "1,00000001");
        assert_eq!(cpulist_to_hex_mask(&[31]), "80000000");
        assert_eq!(cpulist_to_hex_mask(&[64]), "1,00000000,00000000");
        // What converge writes compares equal to the kernel's padded form.
        use crate::knobs::normalize::{same, Form};
        let mask = cpulist_to_hex_mask(&[0, 1, 2, 3, 4, 5, 6, 63, 64, 65]);
        assert_eq!(mask, "3,80000000,0000007f");
        assert!(same(
            Form::HexMask,
            "00000000,00000003,80000000,0000007f\n",
            &mask,
            4096
        ));
    }
}
