//! cpufreq policy files under `/sys/devices/system/cpu/cpufreq/policyN/`:
//! `scaling_governor`, `scaling_min_freq`, `scaling_max_freq`,
//! `scaling_available_governors`. Frequencies are in kHz, as sysfs has them.
//!
//! # Write order of min/max
//! Older kernels reject `scaling_min_freq` above the current
//! `scaling_max_freq` (and `max` below the current `min`) with EINVAL. When
//! raising min above the current max, write max first; when lowering max
//! below the current min, write min first. `apply`'s plan and the daemon
//! both order their writes by [`crate::knobs::order::write_order`].

use super::error::Result;
use super::root::Root;

pub(crate) use crate::knobs::cpufreq::{attr_path, policy_dir, SCALING_GOVERNOR};

/// True if `policy` exists.
pub(crate) fn exists(root: &Root, policy: &str) -> bool {
    root.is_dir(&policy_dir(policy))
}

/// Reads attribute `attr` of `policy`, trimmed.
pub(crate) fn read(root: &Root, policy: &str, attr: &str) -> Result<String> {
    root.read_trimmed(&attr_path(policy, attr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::cpufreq::{SCALING_AVAILABLE_GOVERNORS, SCALING_MAX_FREQ, SCALING_MIN_FREQ};
    use std::fs;
    use std::path::PathBuf;
    use tempfile::TempDir;

    fn tree() -> (TempDir, Root) {
        let t = TempDir::new().unwrap();
        let p = t.path().join("sys/devices/system/cpu/cpufreq");
        for n in ["policy0", "policy4"] {
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
    fn exists_and_read() {
        let (_t, r) = tree();
        assert!(exists(&r, "policy4"));
        assert!(!exists(&r, "policy5"));
        assert_eq!(
            read(&r, "policy4", SCALING_AVAILABLE_GOVERNORS)
                .unwrap()
                .split_whitespace()
                .count(),
            6
        );
        assert!(read(&r, "policy0", SCALING_MAX_FREQ)
            .unwrap_err()
            .is_not_found());
        assert_eq!(read(&r, "policy4", SCALING_MIN_FREQ).unwrap(), "300000");
    }
}
