//! Files behind the `system.realtime` switch (the RT tuning steps of vendor
//! RT guides): IRQ affinity (`/proc/irq/N/smp_affinity_list`,
//! `/proc/irq/default_smp_affinity`), the unbound-workqueue cpumask
//! (`/sys/devices/virtual/workqueue/cpumask`), `kernel.timer_migration`
//! (a sysctl, see [`TIMER_MIGRATION_SYSCTL`]), cpuidle state disabling
//! (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable`) and the online
//! CPU list.
//!
//! Also the two CPU-set text formats the kernel uses: cpu lists (`0-3,6`)
//! and hex masks (`ff,00000001`: comma-separated 32-bit words, most
//! significant first).

use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::root::Root;

/// The sysctl that controls timer migration (`0` keeps timers on their CPU).
pub const TIMER_MIGRATION_SYSCTL: &str = "kernel.timer_migration";

const PROC_IRQ: &str = "/proc/irq";
const CPU_DIR: &str = "/sys/devices/system/cpu";

/// Numeric IRQ directories of `/proc/irq`, sorted. A missing `/proc/irq`
/// (fake trees) gives an empty list.
pub fn irqs(root: &Root) -> Result<Vec<u32>> {
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

/// `/proc/irq/N/smp_affinity_list` (cpu-list format).
pub fn irq_affinity_path(irq: u32) -> PathBuf {
    PathBuf::from(format!("{PROC_IRQ}/{irq}/smp_affinity_list"))
}

/// `/proc/irq/default_smp_affinity` (hex-mask format).
pub fn default_affinity_path() -> PathBuf {
    PathBuf::from(format!("{PROC_IRQ}/default_smp_affinity"))
}

/// `/sys/devices/virtual/workqueue/cpumask` (hex-mask format).
pub fn workqueue_cpumask_path() -> PathBuf {
    PathBuf::from("/sys/devices/virtual/workqueue/cpumask")
}

/// Indices K of `/sys/devices/system/cpu/cpuN/cpuidle/stateK`, sorted.
/// No cpuidle directory gives an empty list.
pub fn cpuidle_states(root: &Root, cpu: u32) -> Result<Vec<u32>> {
    numeric_entries(
        root,
        &PathBuf::from(format!("{CPU_DIR}/cpu{cpu}/cpuidle")),
        "state",
    )
}

/// `/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable` (`1` disables).
pub fn cpuidle_disable_path(cpu: u32, state: u32) -> PathBuf {
    PathBuf::from(format!("{CPU_DIR}/cpu{cpu}/cpuidle/state{state}/disable"))
}

/// Online CPUs from `/sys/devices/system/cpu/online`.
pub fn online_cpus(root: &Root) -> Result<Vec<u32>> {
    let p = PathBuf::from(format!("{CPU_DIR}/online"));
    let s = root.read_trimmed(&p)?;
    parse_cpulist(&s).ok_or_else(|| Error::parse(&p, "cpu list", &s))
}

/// Largest CPU number accepted in lists and masks (guards against `0-4294967295`).
const MAX_CPU: u32 = 8191;

/// Parses a cpu list (`0-3,6`, `0-7:2` strides are not used by these files
/// and are rejected). Empty text is the empty set. Sorted, deduplicated.
/// (The policy layer has its own `CpuList`; this small parser keeps the
/// kernel layer self-contained.)
pub(crate) fn parse_cpulist(s: &str) -> Option<Vec<u32>> {
    let mut v = Vec::new();
    let s = s.trim();
    if s.is_empty() {
        return Some(v);
    }
    for part in s.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let a = part.parse::<u32>().ok()?;
                (a, a)
            }
        };
        if a > b || b > MAX_CPU {
            return None;
        }
        v.extend(a..=b);
    }
    v.sort_unstable();
    v.dedup();
    Some(v)
}

/// Formats CPUs as a kernel cpu list: `[0,1,2,3,6]` → `0-3,6`.
pub fn format_cpulist(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// Formats CPUs as a kernel hex mask: comma-separated 32-bit words, most
/// significant first, the first word unpadded, the rest 8 digits
/// (`[0..=7]` → `ff`; `[0, 32]` → `1,00000001`; empty → `0`). The kernel
/// pads the first word to its CPU count; it accepts either form on write,
/// so compare masks with [`hex_mask_to_cpus`], not as text.
pub fn cpulist_to_hex_mask(cpus: &[u32]) -> String {
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

/// Parses a kernel hex mask (`ff`, `00000000,000000c0`, `0x3`) into sorted
/// CPUs. `None` for garbage.
pub fn hex_mask_to_cpus(s: &str) -> Option<Vec<u32>> {
    let s = s.trim();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    let words: Vec<&str> = s.split(',').collect();
    let mut cpus = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        if w.is_empty() || w.len() > 8 {
            return None;
        }
        let val = u32::from_str_radix(w, 16).ok()?;
        for bit in 0..32u32 {
            if val & (1 << bit) != 0 {
                let cpu = u32::try_from(i).ok()?.checked_mul(32)?.checked_add(bit)?;
                if cpu > MAX_CPU {
                    return None;
                }
                cpus.push(cpu);
            }
        }
    }
    cpus.sort_unstable();
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
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
        assert!(online_cpus(&r).unwrap_err().is_not_found());
        fs::write(t.path().join("sys/devices/system/cpu/online"), "0-3,6\n").unwrap();
        assert_eq!(online_cpus(&r).unwrap(), [0, 1, 2, 3, 6]);
        fs::write(t.path().join("sys/devices/system/cpu/online"), "zz\n").unwrap();
        assert!(matches!(online_cpus(&r).unwrap_err(), Error::Parse { .. }));
        r.write(&irq_affinity_path(16), "0-6").unwrap();
        assert_eq!(r.read_trimmed(&irq_affinity_path(16)).unwrap(), "0-6");
    }

    #[test]
    fn cpulists() {
        assert_eq!(parse_cpulist("0-3,6").unwrap(), [0, 1, 2, 3, 6]);
        assert_eq!(parse_cpulist(" 6,0-1,1 ").unwrap(), [0, 1, 6]);
        assert_eq!(parse_cpulist("").unwrap(), Vec::<u32>::new());
        for bad in ["3-1", "a", "1,,2", "0-99999", "-1", "1-"] {
            assert!(parse_cpulist(bad).is_none(), "{bad}");
        }
        assert_eq!(format_cpulist(&[6, 0, 1, 2, 3]), "0-3,6");
        assert_eq!(format_cpulist(&[]), "");
        assert_eq!(format_cpulist(&[1, 3, 4]), "1,3-4");
    }

    #[test]
    fn hex_masks() {
        assert_eq!(cpulist_to_hex_mask(&[]), "0");
        assert_eq!(cpulist_to_hex_mask(&[0, 1, 2, 3, 4, 5, 6]), "7f");
        assert_eq!(cpulist_to_hex_mask(&[6, 7]), "c0");
        assert_eq!(cpulist_to_hex_mask(&[0, 32]), "1,00000001");
        assert_eq!(cpulist_to_hex_mask(&[31]), "80000000");
        assert_eq!(cpulist_to_hex_mask(&[64]), "1,00000000,00000000");
        assert_eq!(hex_mask_to_cpus("7f").unwrap(), [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(hex_mask_to_cpus("00000000,000000c0\n").unwrap(), [6, 7]);
        assert_eq!(hex_mask_to_cpus("1,00000001").unwrap(), [0, 32]);
        assert_eq!(hex_mask_to_cpus("0").unwrap(), Vec::<u32>::new());
        assert_eq!(hex_mask_to_cpus("0x3").unwrap(), [0, 1]);
        for bad in ["", "g", "1,,2", "123456789", ","] {
            assert!(hex_mask_to_cpus(bad).is_none(), "{bad}");
        }
        // round trip
        let cpus = parse_cpulist("0-6,40,63-65").unwrap();
        assert_eq!(hex_mask_to_cpus(&cpulist_to_hex_mask(&cpus)).unwrap(), cpus);
    }
}
