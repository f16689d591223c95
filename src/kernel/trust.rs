//! Root's trust in a file it reads or runs: the policy
//! file and hook programs must be root-owned and not writable by group or
//! other, nor may their directory be (unless sticky). `apply`, `run` and a
//! reload ask the same check ([`crate::converge::trust`] applies it to a
//! policy and its hooks).

use std::path::Path;

/// Why a file that root would trust (the policy, a hook program) is not
/// safe to trust, or `None`. Checked: the file itself,
/// symlinks followed (what runs or is read is the target), must be owned by
/// root and not writable by group or other; so must the directory holding
/// the target, unless it is sticky (`/tmp`: others cannot replace a root file
/// there). Directories further up are not checked (a path whose ancestor
/// another user controls is the administrator's choice of install location).
/// The caller applies this only when running as root.
pub(crate) fn untrusted(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) => return Some(format!("{}: cannot resolve it: {e}", path.display())),
    };
    let shown = if real == path {
        path.display().to_string()
    } else {
        format!("{} (-> {})", path.display(), real.display())
    };
    let why = |p: &Path, kind: &str, owner: bool, mode: u32| -> Option<String> {
        if !owner {
            Some(format!(
                "{kind} {} is not owned by root, so its owner can change what root runs",
                p.display()
            ))
        } else if mode & 0o022 != 0 {
            Some(format!(
                "{kind} {} is writable by {} (mode {:04o})",
                p.display(),
                if mode & 0o002 != 0 {
                    "anyone"
                } else {
                    "its group"
                },
                mode & 0o7777
            ))
        } else {
            None
        }
    };
    let meta = match std::fs::metadata(&real) {
        Ok(m) => m,
        Err(e) => return Some(format!("{shown}: {e}")),
    };
    if let Some(w) = why(&real, "the file", meta.uid() == 0, meta.mode()) {
        return Some(format!("{shown}: {w}"));
    }
    if let Some(dir) = real.parent() {
        if let Ok(d) = std::fs::metadata(dir) {
            let sticky = d.mode() & 0o1000 != 0;
            let mode = if sticky { d.mode() & !0o022 } else { d.mode() };
            if let Some(w) = why(dir, "its directory", d.uid() == 0, mode) {
                return Some(format!("{shown}: {w}"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn untrusted_names_the_file_and_why() {
        use std::os::unix::fs::PermissionsExt;
        let euid = nix::unistd::geteuid();
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("hook");
        std::fs::write(&f, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let why = super::untrusted(&f).expect("0777 is untrusted");
        assert!(why.contains("writable by anyone (mode 0777)"), "{why}");
        assert!(why.contains(&f.display().to_string()), "{why}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o775)).expect("chmod");
        let why = super::untrusted(&f).expect("0775 is untrusted");
        assert!(why.contains("writable by its group"), "{why}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        if euid.is_root() {
            assert_eq!(super::untrusted(&f), None);
            // A symlink is judged by its target.
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&f, &link).expect("symlink");
            assert_eq!(super::untrusted(&link), None);
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o757)).expect("chmod");
            let why = super::untrusted(&link).expect("target 0757");
            assert!(why.contains("-> "), "{why}");
            // A group-writable directory.
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o775))
                .expect("chmod");
            let why = super::untrusted(&f).expect("dir 0775");
            assert!(why.contains("its directory"), "{why}");
        } else {
            let why = super::untrusted(&f).expect("not root-owned");
            assert!(why.contains("not owned by root"), "{why}");
        }
    }
}
