//! sysctl names: dotted names (`vm.swappiness`) mapped to `/proc/sys/...`
//! (callers read and write the path through [`Root`](super::Root)).
//!
//! Names are validated so a sysctl name can never address a file outside
//! `/proc/sys`: no `/`, no empty segments (hence no `..`), no whitespace or
//! NUL.

use std::path::PathBuf;

use super::error::{Error, Result};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
