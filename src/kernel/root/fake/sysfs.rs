//! The kernel's side of a fake tree for the board's hardware files (issue
//! 24), kept apart from `fake.rs` (the cgroupfs emulation):
//!
//! - **cpufreq governor switch** — a write of `policyN/scaling_governor`
//!   is refused with EINVAL when `scaling_available_governors` exists and
//!   does not list the governor (cpufreq's `store_scaling_governor`); when it
//!   changes the governor, the old governor's per-policy tunables directory
//!   `policyN/OLD/` disappears and the new one's `policyN/NEW/` appears with
//!   the kernel's defaults, as `cpufreq_exit_governor`/`cpufreq_init_governor`
//!   do (schedutil's `sugov_init` creates the `rate_limit_us` attribute
//!   afresh, with `cpufreq_policy_transition_delay_us()`). A fake tree says
//!   what those defaults are in `policyN/.governor-defaults/GOVERNOR/FILE`
//!   (the standard tree: schedutil `rate_limit_us 1000`; a vendor-kernel
//!   fixture: `up_rate_limit_us`/`down_rate_limit_us`); a governor without
//!   such a directory gets none (performance, powersave have no tunables).

use std::fs;
use std::path::Path;

use crate::kernel::error::{Error, Result};
use crate::kernel::root::Root;

/// Where a fake tree keeps each governor's default tunables.
pub(crate) const GOVERNOR_DEFAULTS: &str = ".governor-defaults";

/// Handles `p` if it is a file this module emulates; `None` leaves the write
/// to the plain emulation.
pub(super) fn write(
    root: &Root,
    p: &Path,
    value: &str,
    replace: impl Fn(&Path, &str) -> Result<()>,
) -> Option<Result<()>> {
    let dev = Root::normalize(p);
    let policy_dir = dev.parent()?;
    let is_governor = dev.file_name()? == crate::knobs::cpufreq::SCALING_GOVERNOR
        && policy_dir.parent()? == Path::new(crate::knobs::cpufreq::CPUFREQ_DIR);
    if !is_governor {
        return None;
    }
    Some(switch_governor(
        root,
        &dev,
        policy_dir,
        value.trim(),
        replace,
    ))
}

fn switch_governor(
    root: &Root,
    dev: &Path,
    policy_dir: &Path,
    new: &str,
    replace: impl Fn(&Path, &str) -> Result<()>,
) -> Result<()> {
    let avail = policy_dir.join(crate::knobs::cpufreq::SCALING_AVAILABLE_GOVERNORS);
    if let Ok(offered) = root.read_trimmed(&avail) {
        if !offered.split_whitespace().any(|g| g == new) {
            return Err(Error::io(
                "write",
                dev,
                std::io::Error::from_raw_os_error(libc::EINVAL),
            ));
        }
    }
    let old = root.read_trimmed(dev).ok();
    if old.as_deref() == Some(new) {
        return replace(dev, new);
    }
    // As the kernel does it: the old governor's directory goes (its exit),
    // the new one's comes (its init), and only then does scaling_governor
    // read the new name, so a reader that sees the new name never sees the
    // old governor's tunables.
    let valid = |g: &str| !g.is_empty() && !g.contains('/') && !g.starts_with('.');
    if let Some(old) = old.filter(|g| valid(g)) {
        let host = root.host_path(&policy_dir.join(&old));
        if fs::symlink_metadata(&host).is_ok_and(|m| m.is_dir()) {
            fs::remove_dir_all(&host).map_err(|e| Error::io("rmdir", policy_dir.join(&old), e))?;
        }
    }
    if valid(new) {
        let defaults = policy_dir.join(GOVERNOR_DEFAULTS).join(new);
        if let Ok(files) = root.list_dir(&defaults) {
            let dir = policy_dir.join(new);
            root.mkdir_all(&dir)?;
            for f in files {
                let v = root.read(&defaults.join(&f))?;
                replace(&dir.join(&f), &v)?;
            }
        }
    }
    replace(dev, new)
}
