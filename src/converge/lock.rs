//! One instance (SPEC §4): `run`, `apply` and `reset` hold an exclusive
//! `flock` on `state_dir/lock` while they work, so two of them never
//! interleave their writes and journal records (a `reset` deleting the journal
//! in the middle of an `apply` left groups no journal knew about).
//!
//! This module owns `state_dir` itself: it is created 0700 whatever the
//! umask, and refused when it is `/`, under `/proc` or `/sys`, a symlink (or
//! below one: no component under the root may be a symlink), not a
//! directory, owned by another user, writable by group or others, or a
//! cgroup (a directory holding `cgroup.procs`, or one created inside such a
//! directory: that would create a group). [`refuse_managed_group`] adds the
//! lexical check against `cgroup_root` where it is known (the journal's
//! writers and `reset`). The lock file is created 0600, `O_NOFOLLOW`.
//!
//! The lock file holds the holder's `PID COMMAND` so the one refused can name
//! it. The holder removes the file when it lets go (while still holding the
//! lock); a process that locked a file removed meanwhile notices that the
//! path no longer names its file and tries again, so there is never more than
//! one holder. `plan` and `check` take no lock. The descriptor is close-on-exec:
//! hooks and boosted commands do not inherit it.

use crate::kernel::{Error, Root};
use nix::fcntl::{Flock, FlockArg};
use std::fs;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another cgwarden holds it.
    #[error("{path} is held by {holder}; only one cgwarden run/apply/reset may work at a time")]
    Held {
        /// Device path of the lock file.
        path: PathBuf,
        /// `pid N (COMMAND)` as the holder wrote it, or what is known.
        holder: String,
        /// The holder's pid, when it could be read.
        pid: Option<u32>,
    },
    /// `state_dir` is not safe to use (owner, mode, symlink, location).
    #[error("{0}")]
    Refused(Error),
    /// An I/O error that may pass (full disk, read-only /run, ...).
    #[error("{0}")]
    Io(Error),
}

impl From<Error> for LockError {
    fn from(e: Error) -> Self {
        match e {
            Error::Io { .. } => LockError::Io(e),
            other => LockError::Refused(other),
        }
    }
}

impl LockError {
    /// The exit status for it (SPEC §1): refused → 1, I/O → 75.
    pub fn exit_code(&self) -> u8 {
        match self {
            LockError::Held { .. } | LockError::Refused(_) => crate::exit::REFUSED,
            LockError::Io(_) => crate::exit::TEMPFAIL,
        }
    }
}

/// The held lock; released (and its file removed) when dropped.
#[derive(Debug)]
pub struct StateLock {
    file: Flock<fs::File>,
    host: PathBuf,
    #[cfg(test)]
    path: PathBuf,
}

impl StateLock {
    /// The lock file in a state_dir (device path).
    pub(crate) fn path_in(state_dir: &Path) -> PathBuf {
        Root::normalize(state_dir).join("lock")
    }

    /// Takes the lock without waiting; `what` (e.g. `cgwarden apply
    /// /etc/cgwarden/policy.yaml`) is written after the pid for whoever is
    /// refused next.
    pub fn acquire(root: &Root, state_dir: &Path, what: &str) -> Result<StateLock, LockError> {
        let dir_host = prepare_state_dir(root, state_dir)?;
        let path = Self::path_in(state_dir);
        let host = dir_host.join("lock");
        // Messages name the file where it is: under `--root` (issue 22 item 15).
        let shown = root.host_path(&path);
        // A few rounds only matter when holders come and go very fast.
        for _ in 0..50 {
            let file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&host)
                .map_err(|e| match e.raw_os_error() {
                    Some(libc::ELOOP) => LockError::Refused(Error::other(
                        &shown,
                        "the lock file is a symlink; refusing to follow it",
                    )),
                    _ => LockError::from(Error::io("open", &shown, e)),
                })?;
            let mut locked = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(l) => l,
                Err((mut file, errno)) if errno == nix::errno::Errno::EWOULDBLOCK => {
                    let (holder, pid) = read_holder(&mut file);
                    return Err(LockError::Held {
                        path: shown,
                        holder,
                        pid,
                    });
                }
                Err((_, nix::errno::Errno::EINTR)) => continue,
                Err((_, errno)) => {
                    return Err(LockError::Io(Error::io(
                        "flock",
                        &shown,
                        io::Error::from(errno),
                    )))
                }
            };
            // The previous holder may have removed the file between our open
            // and our flock: then we hold a lock on a file nobody else sees.
            let ours = locked
                .metadata()
                .map_err(|e| LockError::from(Error::io("fstat", &shown, e)))?;
            match fs::symlink_metadata(&host) {
                Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => {}
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(LockError::from(Error::io("stat", &shown, e))),
            }
            let line = format!("{} {}\n", std::process::id(), one_line(what));
            locked
                .set_len(0)
                .and_then(|()| locked.rewind())
                .and_then(|()| locked.write_all(line.as_bytes()))
                .map_err(|e| LockError::from(Error::io("write", &shown, e)))?;
            return Ok(StateLock {
                file: locked,
                host,
                #[cfg(test)]
                path,
            });
        }
        Err(LockError::Io(Error::other(
            &shown,
            "the lock file kept being replaced while locking it; try again",
        )))
    }

    /// Device path of the lock file.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Remove the file while still holding the lock, and only if it is
        // still ours; the lock itself goes with the descriptor.
        if let (Ok(ours), Ok(now)) = (self.file.metadata(), fs::symlink_metadata(&self.host)) {
            if ours.ino() == now.ino() && ours.dev() == now.dev() {
                let _ = fs::remove_file(&self.host);
            }
        }
    }
}

/// What the holder wrote: `pid N (COMMAND)`. It writes right after locking,
/// so an empty file is given a moment.
fn read_holder(file: &mut fs::File) -> (String, Option<u32>) {
    for _ in 0..20 {
        let mut s = String::new();
        if file.rewind().is_ok() && file.read_to_string(&mut s).is_ok() {
            let s = s.trim();
            if let Some((pid, cmd)) = s.split_once(' ') {
                if let Ok(pid) = pid.parse::<u32>() {
                    return (format!("pid {pid} ({cmd})"), Some(pid));
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    ("another process (it wrote no pid)".into(), None)
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Makes sure `state_dir` exists and is safe (see module docs); returns its
/// host path. A refusal is an [`Error::Other`], an I/O failure an [`Error::Io`].
pub(crate) fn prepare_state_dir(root: &Root, state_dir: &Path) -> Result<PathBuf, Error> {
    let dev = Root::normalize(state_dir);
    if dev == Path::new("/") || dev.starts_with("/proc") || dev.starts_with("/sys") {
        return Err(Error::other(
            &dev,
            "state_dir may not be /, under /proc or under /sys",
        ));
    }
    let host = root.host_path(&dev);
    // Every component below the root: no symlink, missing ones created 0755
    // (0700 for state_dir itself), never inside a cgroup.
    let mut cur_dev = PathBuf::from("/");
    let comps: Vec<_> = dev.components().skip(1).collect();
    for (i, c) in comps.iter().enumerate() {
        let parent_dev = cur_dev.clone();
        cur_dev.push(c);
        let last = i + 1 == comps.len();
        let h = root.host_path(&cur_dev);
        match fs::symlink_metadata(&h) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::other(
                    &dev,
                    format!(
                        "state_dir {} a symlink ({}); refusing to follow it",
                        if last { "is" } else { "lies below" },
                        cur_dev.display()
                    ),
                ))
            }
            Ok(m) if last => check_state_dir(&dev, &m)?,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if root.exists(&parent_dev.join("cgroup.procs")) {
                    return Err(Error::other(
                        &dev,
                        format!(
                            "state_dir may not be a cgroup: {} is one (creating it would \
                             create a group)",
                            parent_dev.display()
                        ),
                    ));
                }
                let mode = if last { 0o700 } else { 0o755 };
                match fs::DirBuilder::new().mode(mode).create(&h) {
                    Ok(()) if last => {
                        // The umask may have taken bits away; set exactly 0700.
                        fs::set_permissions(&h, fs::Permissions::from_mode(0o700))
                            .map_err(|e| Error::io("chmod", &dev, e))?;
                    }
                    Ok(()) => {}
                    // Someone created it meanwhile: checked below like any other.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(Error::io("mkdir", &cur_dev, e)),
                }
                let m = fs::symlink_metadata(&h).map_err(|e| Error::io("stat", &cur_dev, e))?;
                if m.file_type().is_symlink() {
                    return Err(Error::other(
                        &dev,
                        "state_dir became a symlink; refusing it",
                    ));
                }
                if last {
                    check_state_dir(&dev, &m)?;
                }
            }
            Err(e) => return Err(Error::io("stat", &cur_dev, e)),
        }
    }
    if root.exists(&dev.join("cgroup.procs")) {
        return Err(Error::other(
            &dev,
            "state_dir may not be a cgroup (it holds cgroup.procs)",
        ));
    }
    Ok(host)
}

/// Refuses a `state_dir` at or below `cgroup_root` (a managed group).
pub(crate) fn refuse_managed_group(state_dir: &Path, cgroup_root: &Path) -> Result<(), Error> {
    let dev = Root::normalize(state_dir);
    if dev.starts_with(Root::normalize(cgroup_root)) {
        return Err(Error::other(
            &dev,
            format!(
                "state_dir may not be a managed group (it is under cgroup_root {})",
                cgroup_root.display()
            ),
        ));
    }
    Ok(())
}

fn check_state_dir(dev: &Path, m: &fs::Metadata) -> Result<(), Error> {
    if m.file_type().is_symlink() {
        return Err(Error::other(
            dev,
            "state_dir is a symlink; refusing to follow it",
        ));
    }
    if !m.is_dir() {
        return Err(Error::other(dev, "state_dir is not a directory"));
    }
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me {
        return Err(Error::other(
            dev,
            format!(
                "state_dir is owned by uid {}, not by this user (uid {me}); refusing to use it",
                m.uid()
            ),
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(Error::other(
            dev,
            format!(
                "state_dir is writable by group or others (mode {:04o}); refusing to use it \
                 (chmod go-w it)",
                m.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_naming_the_first_and_the_file_goes_with_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        let state = Path::new("/run/cgwarden");
        let first = StateLock::acquire(&root, state, "cgwarden run /p.yaml").unwrap();
        let host = dir.path().join("run/cgwarden/lock");
        assert_eq!(
            fs::read_to_string(&host).unwrap(),
            format!("{} cgwarden run /p.yaml\n", std::process::id())
        );
        let err = StateLock::acquire(&root, state, "cgwarden reset").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!(
                "pid {} (cgwarden run /p.yaml)",
                std::process::id()
            )),
            "{msg}"
        );
        assert!(msg.contains("/run/cgwarden/lock"), "{msg}");
        assert_eq!(err.exit_code(), 1);
        drop(first);
        assert!(!host.exists(), "the lock file is removed on release");
        let again = StateLock::acquire(&root, state, "cgwarden reset").unwrap();
        assert_eq!(again.path(), Path::new("/run/cgwarden/lock"));
    }

    #[test]
    fn stale_lock_file_of_a_dead_holder_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        prepare_state_dir(&root, Path::new("/run/c")).unwrap();
        fs::write(dir.path().join("run/c/lock"), "999999 cgwarden apply\n").unwrap();
        let l = StateLock::acquire(&root, Path::new("/run/c"), "cgwarden apply").unwrap();
        drop(l);
    }

    #[test]
    fn unsafe_state_dirs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        fs::create_dir_all(dir.path().join("run/open")).unwrap();
        fs::set_permissions(
            dir.path().join("run/open"),
            fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        let e = StateLock::acquire(&root, Path::new("/run/open"), "x").unwrap_err();
        assert!(e.to_string().contains("mode 0777"), "{e}");
        assert_eq!(e.exit_code(), 1);

        fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), dir.path().join("run/link"))
            .unwrap();
        let e = StateLock::acquire(&root, Path::new("/run/link"), "x").unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");

        for bad in ["/", "/proc/cgw", "/sys/fs/cgroup/x"] {
            let e = StateLock::acquire(&root, Path::new(bad), "x").unwrap_err();
            assert!(e.to_string().contains("state_dir may not be"), "{bad}: {e}");
        }
        assert!(!dir.path().join("proc").exists());
    }

    #[test]
    fn io_failure_is_a_tempfail() {
        let dir = tempfile::tempdir().unwrap();
        // state_dir's parent is a file: mkdir fails with ENOTDIR.
        fs::write(dir.path().join("run"), "").unwrap();
        let root = Root::fake(dir.path());
        let e = StateLock::acquire(&root, Path::new("/run/cgwarden"), "x").unwrap_err();
        assert!(matches!(e, LockError::Io(_)), "{e:?}");
        assert_eq!(e.exit_code(), 75);
    }
}
