//! Extended attributes of cgroup directories: systemd's delegation mark.
//!
//! systemd writes `1` to `trusted.delegate` on the cgroup of every
//! `Delegate=yes` unit, and to `user.delegate` as well where the kernel
//! allows user xattrs on cgroupfs (5.7+); `trusted.*` needs CAP_SYS_ADMIN
//! to read, `user.*` does not. It reads the mark back trusted first, then
//! user (systemd `src/core/cgroup.c` `cgroup_delegate_xattr_apply`,
//! `src/basic/cgroup-util.c` `cg_is_delegated`); so does this.

use super::Root;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The mark's names, in the order systemd reads them.
const DELEGATE: [&str; 2] = ["trusted.delegate", "user.delegate"];

/// Whether the cgroup directory `dir` (a device path) is marked delegated.
/// An attribute that is absent, unreadable (no CAP_SYS_ADMIN for
/// `trusted.*`), unsupported or longer than a boolean says nothing; the
/// next name is asked.
pub(crate) fn delegated(root: &Root, dir: &Path) -> bool {
    let host = root.host_path(dir);
    let Ok(path) = CString::new(host.as_os_str().as_bytes()) else {
        return false;
    };
    DELEGATE
        .iter()
        .find_map(|name| get(&path, name))
        .is_some_and(|v| is_true(&v))
}

/// The value of attribute `name` of `path`, if it has a short one.
fn get(path: &CString, name: &str) -> Option<Vec<u8>> {
    let name = CString::new(name).ok()?;
    let mut buf = [0u8; 16];
    // SAFETY: both strings are NUL-terminated and outlive the call; the
    // kernel writes at most `buf.len()` bytes into `buf`.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    Some(buf[..n.min(buf.len())].to_vec())
}

/// Sets attribute `name` of the host path `path` to `value` (how a fake
/// tree's directory gets systemd's mark).
pub(crate) fn set(path: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
    let invalid = |e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let p = CString::new(path.as_os_str().as_bytes()).map_err(invalid)?;
    let n = CString::new(name).map_err(invalid)?;
    // SAFETY: both strings are NUL-terminated and outlive the call; the
    // kernel reads `value.len()` bytes from a live buffer.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// systemd's booleans (`parse_boolean`): it writes `1`.
fn is_true(v: &[u8]) -> bool {
    let v = String::from_utf8_lossy(v);
    matches!(
        v.trim_end_matches(['\0', '\n'])
            .to_ascii_lowercase()
            .as_str(),
        "1" | "yes" | "y" | "true" | "t" | "on"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake tree's directories carry xattrs as the host's filesystem
    /// keeps them: `user.delegate` = `1` marks, `0` and absence do not.
    /// (`trusted.*` needs CAP_SYS_ADMIN: the guest scenario sets it on a
    /// real cgroup.)
    #[test]
    fn the_user_mark_is_read_and_its_value_counts() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        for (d, v) in [("a", Some(&b"1"[..])), ("b", Some(b"0")), ("c", None)] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
            if let Some(v) = v {
                set(&t.path().join(d), "user.delegate", v).expect(
                    "setxattr user.delegate (the test directory's filesystem needs user \
                     xattrs: ext4, btrfs, tmpfs from 6.6)",
                );
            }
        }
        assert!(delegated(&root, Path::new("/a")));
        assert!(!delegated(&root, Path::new("/b")));
        assert!(!delegated(&root, Path::new("/c")));
        assert!(!delegated(&root, Path::new("/missing")));
        assert!(is_true(b"yes") && is_true(b"1\n") && !is_true(b"no") && !is_true(b""));
    }
}
