//! sysctl access: dotted names (`vm.swappiness`) mapped to `/proc/sys/...`
//! and read/written through [`Root`].
//!
//! Names are validated so a sysctl name can never address a file outside
//! `/proc/sys`: no `/`, no empty segments (hence no `..`), no whitespace or
//! NUL.

use std::path::PathBuf;

use super::error::{Error, Result};
use super::root::Root;

/// Device path of sysctl `name`: `vm.swappiness` → `/proc/sys/vm/swappiness`.
pub fn path(name: &str) -> Result<PathBuf> {
    let bad = |why: &str| Error::other("/proc/sys", format!("invalid sysctl name {name:?}: {why}"));
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.contains('/') {
        return Err(bad("contains '/'"));
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("contains whitespace or control characters"));
    }
    let mut p = PathBuf::from("/proc/sys");
    for seg in name.split('.') {
        if seg.is_empty() {
            return Err(bad("empty segment"));
        }
        p.push(seg);
    }
    Ok(p)
}

/// Current value of sysctl `name`, trimmed (multi-value sysctls keep their
/// inner tabs, e.g. `kernel.printk`).
pub fn read(root: &Root, name: &str) -> Result<String> {
    root.read_trimmed(&path(name)?)
}

/// Writes sysctl `name` (an existing file; see [`Root::write`]).
pub fn write(root: &Root, name: &str, value: &str) -> Result<()> {
    root.write(&path(name)?, value)
}

/// True if sysctl `name` exists on this system.
pub fn exists(root: &Root, name: &str) -> bool {
    path(name).map(|p| root.exists(&p)).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    #[test]
    fn names() {
        assert_eq!(
            path("vm.swappiness").unwrap(),
            PathBuf::from("/proc/sys/vm/swappiness")
        );
        assert_eq!(
            path("kernel.sched_rt_runtime_us").unwrap(),
            PathBuf::from("/proc/sys/kernel/sched_rt_runtime_us")
        );
        for bad in [
            "",
            "vm/swappiness",
            "vm..x",
            ".vm",
            "vm.",
            "..",
            "vm. x",
            "a.b\n",
        ] {
            let e = path(bad).unwrap_err();
            assert!(
                e.to_string().contains("invalid sysctl name"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn read_write_fake() {
        let t = TempDir::new().unwrap();
        fs::create_dir_all(t.path().join("proc/sys/vm")).unwrap();
        fs::write(t.path().join("proc/sys/vm/swappiness"), "60\n").unwrap();
        let r = Root::fake(t.path());
        assert_eq!(read(&r, "vm.swappiness").unwrap(), "60");
        write(&r, "vm.swappiness", "30").unwrap();
        assert_eq!(read(&r, "vm.swappiness").unwrap(), "30");
        assert!(exists(&r, "vm.swappiness"));
        assert!(!exists(&r, "vm.nope"));
        assert!(!exists(&r, "vm/../x"));
        let e = read(&r, "vm.nope").unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), std::path::Path::new("/proc/sys/vm/nope"));
        assert!(write(&r, "kernel.x", "1").unwrap_err().is_not_found());
    }
}
