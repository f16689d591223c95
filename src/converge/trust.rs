//! The one trust check of a policy before `apply`, `run` or a reload acts
//! on it: running as root, the policy file and every hook
//! program (an absolute `exec[0]`) must pass [`crate::kernel::trust::untrusted`].
//! Startup and reload call this same function, so they refuse alike.

use crate::kernel::trust::untrusted;
use crate::policy::model::Policy;
use std::path::Path;

/// Why root may not act on the policy at `path`, one line per refused
/// file; empty when it may, or when not running as root.
pub(crate) fn refusals(path: &Path, p: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        return out;
    }
    if let Some(why) = untrusted(path) {
        out.push(format!("refusing the policy {why}"));
    }
    out.extend(hook_refusals(p));
    out
}

/// Why root may not run `p`'s hook programs, one line per refused file;
/// empty when it may, or when not running as root.
pub(crate) fn hook_refusals(p: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        return out;
    }
    for h in &p.hooks {
        // A hook whose program is not an absolute path is disabled anyway.
        let Some(prog) = h.exec.first().map(Path::new).filter(|p| p.is_absolute()) else {
            continue;
        };
        if let Some(why) = untrusted(prog) {
            out.push(format!("refusing hook `{}`: {why}", h.name));
        }
    }
    out
}
