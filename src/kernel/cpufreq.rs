//! cpufreq policy files under `/sys/devices/system/cpu/cpufreq/policyN/`:
//! `scaling_governor`, `scaling_min_freq`, `scaling_max_freq`,
//! `scaling_available_governors`, `cpuinfo_min_freq`, `cpuinfo_max_freq`,
//! `related_cpus`. Frequencies are in kHz, as sysfs has them.
//!
//! # Write order of min/max
//! Older kernels reject `scaling_min_freq` above the current
//! `scaling_max_freq` (and `max` below the current `min`) with EINVAL. When
//! raising min above the current max, write max first; when lowering max
//! below the current min, write min first. [`order_min_max`] computes the
//! safe order.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::root::Root;

/// Device path of the cpufreq policy directory.
pub const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

/// Attribute names.
pub const SCALING_GOVERNOR: &str = "scaling_governor";
pub const SCALING_MIN_FREQ: &str = "scaling_min_freq";
pub const SCALING_MAX_FREQ: &str = "scaling_max_freq";
pub const SCALING_AVAILABLE_GOVERNORS: &str = "scaling_available_governors";
pub const CPUINFO_MIN_FREQ: &str = "cpuinfo_min_freq";
pub const CPUINFO_MAX_FREQ: &str = "cpuinfo_max_freq";
pub const RELATED_CPUS: &str = "related_cpus";

/// Device path of a policy directory. `"policy4"` or just `"4"`.
pub fn policy_dir(policy: &str) -> PathBuf {
    let name = if !policy.is_empty() && policy.bytes().all(|b| b.is_ascii_digit()) {
        format!("policy{policy}")
    } else {
        policy.to_string()
    };
    // Root::host_path clamps `..`, but keep a policy name a single component.
    let name = name.replace('/', "_");
    Path::new(CPUFREQ_DIR).join(name)
}

/// Device path of attribute `attr` of `policy`.
pub fn attr_path(policy: &str, attr: &str) -> PathBuf {
    policy_dir(policy).join(attr)
}

fn policy_number(name: &str) -> Option<u32> {
    name.strip_prefix("policy")?.parse().ok()
}

/// Names of the cpufreq policies (`policy0`, `policy4`, ...), in numeric
/// order. A missing or empty cpufreq directory (VMs) gives an empty list.
pub fn policies(root: &Root) -> Result<Vec<String>> {
    let names = match root.list_dir(Path::new(CPUFREQ_DIR)) {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut pol: Vec<(u32, String)> = names
        .into_iter()
        .filter_map(|n| policy_number(&n).map(|k| (k, n)))
        .collect();
    pol.sort();
    Ok(pol.into_iter().map(|(_, n)| n).collect())
}

/// True if `policy` exists.
pub fn exists(root: &Root, policy: &str) -> bool {
    root.is_dir(&policy_dir(policy))
}

/// Reads attribute `attr` of `policy`, trimmed.
pub fn read(root: &Root, policy: &str, attr: &str) -> Result<String> {
    root.read_trimmed(&attr_path(policy, attr))
}

/// Writes attribute `attr` of `policy`.
pub fn write(root: &Root, policy: &str, attr: &str, value: &str) -> Result<()> {
    root.write(&attr_path(policy, attr), value)
}

/// Reads a frequency attribute (kHz).
pub fn read_khz(root: &Root, policy: &str, attr: &str) -> Result<u64> {
    let p = attr_path(policy, attr);
    let s = root.read_trimmed(&p)?;
    s.parse()
        .map_err(|_| Error::parse(&p, "frequency (kHz)", &s))
}

/// Governors offered by `policy` (`scaling_available_governors`).
pub fn available_governors(root: &Root, policy: &str) -> Result<Vec<String>> {
    Ok(read(root, policy, SCALING_AVAILABLE_GOVERNORS)?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// Which limit a write in [`order_min_max`] goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Min,
    Max,
}

impl Limit {
    /// The sysfs attribute name.
    pub fn attr(self) -> &'static str {
        match self {
            Limit::Min => SCALING_MIN_FREQ,
            Limit::Max => SCALING_MAX_FREQ,
        }
    }
}

/// The writes needed to go from `(cur_min, cur_max)` to the new limits, in a
/// safe order (module docs). `None` or an unchanged value means no write.
/// The caller validates `new_min <= new_max`; if it is violated the writes
/// are still ordered so that the first one succeeds.
pub fn order_min_max(
    cur_min: u64,
    cur_max: u64,
    new_min: Option<u64>,
    new_max: Option<u64>,
) -> Vec<(Limit, u64)> {
    let min = new_min.filter(|&v| v != cur_min);
    let max = new_max.filter(|&v| v != cur_max);
    match (min, max) {
        (None, None) => Vec::new(),
        (Some(m), None) => vec![(Limit::Min, m)],
        (None, Some(x)) => vec![(Limit::Max, x)],
        (Some(m), Some(x)) => {
            if m > cur_max {
                // raising min above the current max: make room first
                vec![(Limit::Max, x), (Limit::Min, m)]
            } else {
                // min fits under the current max; writing it first also
                // covers lowering max below the current min
                vec![(Limit::Min, m), (Limit::Max, x)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    fn tree() -> (TempDir, Root) {
        let t = TempDir::new().unwrap();
        let p = t.path().join("sys/devices/system/cpu/cpufreq");
        for n in ["policy7", "policy0", "policy4", "boost", "policyX"] {
            fs::create_dir_all(p.join(n)).unwrap();
        }
        fs::write(
            p.join("policy4/scaling_available_governors"),
            "conservative ondemand userspace powersave performance schedutil \n",
        )
        .unwrap();
        fs::write(p.join("policy4/scaling_min_freq"), "300000\n").unwrap();
        fs::write(p.join("policy4/scaling_max_freq"), "garbage\n").unwrap();
        let r = Root::fake(t.path());
        (t, r)
    }

    #[test]
    fn paths() {
        assert_eq!(
            policy_dir("policy4"),
            PathBuf::from("/sys/devices/system/cpu/cpufreq/policy4")
        );
        assert_eq!(policy_dir("4"), policy_dir("policy4"));
        assert_eq!(
            attr_path("policy7", SCALING_GOVERNOR),
            PathBuf::from("/sys/devices/system/cpu/cpufreq/policy7/scaling_governor")
        );
        assert_eq!(
            policy_dir("../x"),
            PathBuf::from("/sys/devices/system/cpu/cpufreq/.._x")
        );
    }

    #[test]
    fn list_and_read() {
        let (t, r) = tree();
        assert_eq!(policies(&r).unwrap(), ["policy0", "policy4", "policy7"]);
        assert!(exists(&r, "policy4"));
        assert!(!exists(&r, "policy5"));
        assert_eq!(available_governors(&r, "policy4").unwrap().len(), 6);
        assert_eq!(read_khz(&r, "policy4", SCALING_MIN_FREQ).unwrap(), 300000);
        let e = read_khz(&r, "policy4", SCALING_MAX_FREQ).unwrap_err();
        assert!(matches!(e, Error::Parse { .. }));
        assert!(read_khz(&r, "policy0", SCALING_MAX_FREQ)
            .unwrap_err()
            .is_not_found());
        write(&r, "policy4", SCALING_MIN_FREQ, "1200000").unwrap();
        assert_eq!(read(&r, "policy4", SCALING_MIN_FREQ).unwrap(), "1200000");
        // empty and missing cpufreq dir
        fs::remove_dir_all(t.path().join("sys/devices/system/cpu/cpufreq")).unwrap();
        assert!(policies(&r).unwrap().is_empty());
        fs::create_dir_all(t.path().join("sys/devices/system/cpu/cpufreq")).unwrap();
        assert!(policies(&r).unwrap().is_empty());
    }

    #[test]
    fn min_max_order() {
        // raise min above current max: max first
        assert_eq!(
            order_min_max(300, 1000, Some(1800), Some(2000)),
            [(Limit::Max, 2000), (Limit::Min, 1800)]
        );
        // lower max below current min: min first
        assert_eq!(
            order_min_max(1500, 2000, Some(300), Some(1000)),
            [(Limit::Min, 300), (Limit::Max, 1000)]
        );
        assert_eq!(order_min_max(300, 1000, Some(300), Some(1000)), []);
        assert_eq!(
            order_min_max(300, 1000, Some(500), None),
            [(Limit::Min, 500)]
        );
        assert_eq!(
            order_min_max(300, 1000, None, Some(900)),
            [(Limit::Max, 900)]
        );
        assert_eq!(Limit::Max.attr(), "scaling_max_freq");
    }
}
