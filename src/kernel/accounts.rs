//! User and group names to ids: the one reader of `ROOT/etc/passwd` and
//! `ROOT/etc/group`, through [`Root`], so grants, placement (`user:`) and
//! hooks (`user:`) agree — under `--root` (the fake tree's accounts, never
//! the host's) and on a real system alike.
//!
//! Decision: only the files are read, not NSS (LDAP, systemd's dynamic
//! users). Embedded images keep their accounts in files, and a name that
//! only a network service knows is no stable identity for an RT placement
//! or a control grant on a board that must work offline.
//!
//! Lines are `name:password:id:…`; comments, blank and malformed lines are
//! skipped. The files are read whole (they are small and root's own).

use super::error::Result;
use super::root::Root;
use std::path::Path;

/// Where the accounts live.
pub(crate) const PASSWD: &str = "/etc/passwd";
pub(crate) const GROUP: &str = "/etc/group";

/// A user's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// The fields after `name` of the first line of `text` for `name`.
fn entry<'a>(text: &'a str, name: &str) -> Option<Vec<&'a str>> {
    if name.is_empty() {
        return None;
    }
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then(|| f.collect())
    })
}

/// `name`'s ids in a passwd text (`name:x:uid:gid:…`).
pub(crate) fn parse_user(text: &str, name: &str) -> Option<User> {
    let f = entry(text, name)?;
    Some(User {
        uid: f.get(1)?.trim().parse().ok()?,
        gid: f.get(2)?.trim().parse().ok()?,
    })
}

/// `name`'s gid in a group text (`name:x:gid:members`).
pub(crate) fn parse_group(text: &str, name: &str) -> Option<u32> {
    entry(text, name)?.get(1)?.trim().parse().ok()
}

/// User `name` from `ROOT/etc/passwd`; `None` if not listed.
pub(crate) fn user(root: &Root, name: &str) -> Result<Option<User>> {
    if name.is_empty() {
        return Ok(None);
    }
    Ok(parse_user(&root.read(Path::new(PASSWD))?, name))
}

/// Group `name`'s gid from `ROOT/etc/group`; `None` if not listed.
pub(crate) fn group(root: &Root, name: &str) -> Result<Option<u32>> {
    if name.is_empty() {
        return Ok(None);
    }
    Ok(parse_group(&root.read(Path::new(GROUP))?, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn passwd_and_group_lines() {
        let t =
            "root:x:0:0:root:/root:/bin/sh\n# c\njunk\nnobody:x:65534:65533::/:/x\nbad:x:1:zz\n";
        assert_eq!(parse_user(t, "root"), Some(User { uid: 0, gid: 0 }));
        assert_eq!(
            parse_user(t, "nobody"),
            Some(User {
                uid: 65534,
                gid: 65533
            })
        );
        for none in ["bad", "junk", "", "ghost", "# c"] {
            assert_eq!(parse_user(t, none), None, "{none}");
        }
        let g = "root:x:0:\nvideo:x:44:vision,ops\nbroken:x:\n";
        assert_eq!(parse_group(g, "video"), Some(44));
        assert_eq!(parse_group(g, "root"), Some(0));
        assert_eq!(parse_group(g, "broken"), None);
        assert_eq!(parse_group(g, ""), None);
    }

    #[test]
    fn lookups_read_the_roots_files_not_the_hosts() {
        let t = tempfile::TempDir::new().unwrap();
        let r = Root::fake(t.path());
        assert!(user(&r, "vision").unwrap_err().is_not_found());
        fs::create_dir_all(t.path().join("etc")).unwrap();
        fs::write(
            t.path().join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nvision:x:1001:1002::/home/v:/bin/sh\n",
        )
        .unwrap();
        fs::write(t.path().join("etc/group"), "root:x:0:\nops:x:3000:vision\n").unwrap();
        assert_eq!(
            user(&r, "vision").unwrap(),
            Some(User {
                uid: 1001,
                gid: 1002
            })
        );
        // The host's root exists on every machine; the fake tree's is its own.
        assert_eq!(user(&r, "daemon").unwrap(), None);
        assert_eq!(group(&r, "ops").unwrap(), Some(3000));
        assert_eq!(group(&r, "sudo").unwrap(), None);
    }
}
