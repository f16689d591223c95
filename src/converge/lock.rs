//! One instance: `run`, `apply` and `reset` hold an exclusive
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
//!
//! # One writer per cgroup tree
//!
//! The state_dir lock keeps two cgwardens of one state_dir apart, but two
//! policies with different state_dirs and the same `cgroup_root` would still
//! both write one tree (and journal each other's values as originals). So
//! `run`, `apply` and `reset` also hold a [`TreeLock`]: an `flock` on
//! `/run/cgwarden/tree-<cgroup root, systemd-escaped>.lock` (resolved under
//! `--root`; `/sys/fs/cgroup` → `tree-sys-fs-cgroup.lock`), whose file names the
//! holder's pid, state_dir and command. The cgroup root is canonicalised
//! first (a symlink in the way does not make a second key).
//!
//! Why a file under `/run/cgwarden` and not an `flock` on the cgroup
//! directory itself (which cgroupfs accepts, see docs/operations.md): any
//! user may open a cgroup directory and hold an `flock` on it, so an
//! unprivileged process could keep cgwarden from starting; and the
//! directory cannot say who holds it. `/run/cgwarden` (the default
//! state_dir) is created 0700 when absent and checked like state_dir, so only
//! cgwarden's own user can take the lock; it is the RuntimeDirectory the
//! shipped units make writable under `ProtectSystem=strict`. The lock file is
//! removed when the lock is let go, so nothing stays behind. A dead holder's
//! lock goes with its descriptor (`flock` semantics); its file is taken over.

use crate::kernel::{Error, Root};
use nix::fcntl::{Flock, FlockArg};
use std::fs;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
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
    /// Another cgwarden, of another state_dir, writes the same cgroup tree.
    #[error(
        "cgroup root {cgroup_root} is in use by another cgwarden: {holder} (lock {path}); \
         one cgroup tree has one writer: stop that one first, or give this policy its own \
         settings.cgroup_root"
    )]
    TreeHeld {
        /// The cgroup root (device path).
        cgroup_root: PathBuf,
        /// Host path of the lock file.
        path: PathBuf,
        /// `pid N (COMMAND), state_dir DIR` as the holder wrote it.
        holder: String,
        /// The holder's pid, when it could be read.
        pid: Option<u32>,
        /// The holder's state_dir, when it could be read.
        state_dir: Option<PathBuf>,
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
    /// The exit status for it: refused → 1, I/O → 75.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            LockError::Held { .. } | LockError::TreeHeld { .. } | LockError::Refused(_) => {
                crate::exit::REFUSED
            }
            LockError::Io(_) => crate::exit::TEMPFAIL,
        }
    }
}

/// A held `flock` on a file that names its holder; the file is removed (while
/// still locked, and only if it is still ours) when dropped.
#[derive(Debug)]
struct HeldFile {
    file: Flock<fs::File>,
    host: PathBuf,
}

impl Drop for HeldFile {
    fn drop(&mut self) {
        if let (Ok(ours), Ok(now)) = (self.file.metadata(), fs::symlink_metadata(&self.host)) {
            if ours.ino() == now.ino() && ours.dev() == now.dev() {
                let _ = fs::remove_file(&self.host);
            }
        }
    }
}

/// What [`take`] found.
enum Taken {
    Ours(HeldFile),
    /// Locked by another process; what it wrote in the file.
    Busy(String),
}

/// Locks the file at `host` (created 0600, `O_NOFOLLOW`) without waiting and
/// writes `content` into it; `shown` names it in errors.
fn take(host: &Path, shown: &Path, content: &str) -> Result<Taken, LockError> {
    // A few rounds only matter when holders come and go very fast.
    for _ in 0..50 {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(host)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => LockError::Refused(Error::other(
                    shown,
                    "the lock file is a symlink; refusing to follow it",
                )),
                _ => LockError::from(Error::io("open", shown, e)),
            })?;
        let mut locked = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err((mut file, errno)) if errno == nix::errno::Errno::EWOULDBLOCK => {
                return Ok(Taken::Busy(read_content(&mut file)));
            }
            Err((_, nix::errno::Errno::EINTR)) => continue,
            Err((_, errno)) => {
                return Err(LockError::Io(Error::io(
                    "flock",
                    shown,
                    io::Error::from(errno),
                )))
            }
        };
        // The previous holder may have removed the file between our open
        // and our flock: then we hold a lock on a file nobody else sees.
        let ours = locked
            .metadata()
            .map_err(|e| LockError::from(Error::io("fstat", shown, e)))?;
        match fs::symlink_metadata(host) {
            Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => {}
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(LockError::from(Error::io("stat", shown, e))),
        }
        locked
            .set_len(0)
            .and_then(|()| locked.rewind())
            .and_then(|()| locked.write_all(content.as_bytes()))
            .map_err(|e| LockError::from(Error::io("write", shown, e)))?;
        return Ok(Taken::Ours(HeldFile {
            file: locked,
            host: host.to_path_buf(),
        }));
    }
    Err(LockError::Io(Error::other(
        shown,
        "the lock file kept being replaced while locking it; try again",
    )))
}

/// What a holder wrote. It writes right after locking, so an empty file is
/// given a moment.
fn read_content(file: &mut fs::File) -> String {
    for _ in 0..20 {
        let mut s = String::new();
        if file.rewind().is_ok() && file.read_to_string(&mut s).is_ok() && !s.trim().is_empty() {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    String::new()
}

/// The held state_dir lock; released (and its file removed) when dropped.
#[derive(Debug)]
pub(crate) struct StateLock {
    _held: HeldFile,
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
    pub(crate) fn acquire(
        root: &Root,
        state_dir: &Path,
        what: &str,
    ) -> Result<StateLock, LockError> {
        let dir_host = prepare_state_dir(root, state_dir)?;
        let path = Self::path_in(state_dir);
        // Messages name the file where it is: under `--root`.
        let shown = root.host_path(&path);
        let line = format!("{} {}\n", std::process::id(), one_line(what));
        match take(&dir_host.join("lock"), &shown, &line)? {
            Taken::Ours(held) => Ok(StateLock {
                _held: held,
                #[cfg(test)]
                path,
            }),
            Taken::Busy(content) => {
                let (holder, pid) = parse_state_holder(&content);
                Err(LockError::Held {
                    path: shown,
                    holder,
                    pid,
                })
            }
        }
    }

    /// Device path of the lock file.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// `PID COMMAND` as a state_dir lock's holder wrote it → `pid N (COMMAND)`.
fn parse_state_holder(content: &str) -> (String, Option<u32>) {
    let s = content.trim();
    if let Some((pid, cmd)) = s.split_once(' ') {
        if let Ok(pid) = pid.parse::<u32>() {
            return (format!("pid {pid} ({cmd})"), Some(pid));
        }
    }
    ("another process (it wrote no pid)".into(), None)
}

/// Where the cgroup-tree locks live (device path, resolved under `--root`).
pub(crate) const TREE_LOCK_DIR: &str = "/run/cgwarden";

/// The held lock on a cgroup tree (see module docs); released (and its file
/// removed) when dropped.
#[derive(Debug)]
pub(crate) struct TreeLock {
    _held: HeldFile,
}

impl TreeLock {
    /// The lock file for `cgroup_root` (device path; canonicalised under the
    /// root when it exists, see [`canonical_cgroup_root`]).
    pub(crate) fn path_for(root: &Root, cgroup_root: &Path) -> PathBuf {
        let key = canonical_cgroup_root(root, cgroup_root);
        Path::new(TREE_LOCK_DIR).join(format!("tree-{}.lock", escape_path(&key)))
    }

    /// Takes the lock on `cgroup_root` without waiting, naming this process,
    /// its `state_dir` and `what` (`cgwarden run /etc/cgwarden/policy.yaml`)
    /// in the file for whoever is refused next.
    pub(crate) fn acquire(
        root: &Root,
        cgroup_root: &Path,
        state_dir: &Path,
        what: &str,
    ) -> Result<TreeLock, LockError> {
        let dir_host =
            prepare_private_dir(root, Path::new(TREE_LOCK_DIR), "the tree lock's directory")?;
        let path = Self::path_for(root, cgroup_root);
        let shown = root.host_path(&path);
        let name = path.file_name().unwrap_or_default();
        let content = format!(
            "pid {}\nstate_dir {}\ncgroup_root {}\ncommand {}\n",
            std::process::id(),
            one_line(&Root::normalize(state_dir).to_string_lossy()),
            one_line(&canonical_cgroup_root(root, cgroup_root).to_string_lossy()),
            one_line(what)
        );
        match take(&dir_host.join(name), &shown, &content)? {
            Taken::Ours(held) => Ok(TreeLock { _held: held }),
            Taken::Busy(content) => {
                let h = TreeHolder::parse(&content);
                Err(LockError::TreeHeld {
                    cgroup_root: Root::normalize(cgroup_root),
                    path: shown,
                    holder: h.describe(),
                    pid: h.pid,
                    state_dir: h.state_dir,
                })
            }
        }
    }
}

/// What a tree lock's holder wrote.
#[derive(Debug, Default, PartialEq, Eq)]
struct TreeHolder {
    pid: Option<u32>,
    state_dir: Option<PathBuf>,
    command: Option<String>,
}

impl TreeHolder {
    fn parse(content: &str) -> TreeHolder {
        let mut h = TreeHolder::default();
        for line in content.lines() {
            match line.split_once(' ') {
                Some(("pid", v)) => h.pid = v.trim().parse().ok(),
                Some(("state_dir", v)) => h.state_dir = Some(PathBuf::from(v)),
                Some(("command", v)) => h.command = Some(v.to_string()),
                _ => {}
            }
        }
        h
    }

    /// `pid 42 (cgwarden run /a.yaml), state_dir /run/a`.
    fn describe(&self) -> String {
        let mut s = match self.pid {
            Some(pid) => format!("pid {pid}"),
            None => "a process that wrote no pid".to_string(),
        };
        if let Some(c) = &self.command {
            s.push_str(&format!(" ({c})"));
        }
        match &self.state_dir {
            Some(d) => s.push_str(&format!(", state_dir {}", d.display())),
            None => s.push_str(", state_dir unknown"),
        }
        s
    }
}

/// `cgroup_root` as one key: normalized, and with symlinks resolved when it
/// exists under the root (so `/sys/fs/cgroup/../cgroup` or a symlinked
/// mount point name the same tree). A root that does not exist is keyed by
/// its normalized path.
pub(crate) fn canonical_cgroup_root(root: &Root, cgroup_root: &Path) -> PathBuf {
    let norm = Root::normalize(cgroup_root);
    let host = root.host_path(&norm);
    let (Ok(real), Ok(base)) = (fs::canonicalize(&host), fs::canonicalize(root.base())) else {
        return norm;
    };
    match real.strip_prefix(&base) {
        Ok(rel) => Root::normalize(&Path::new("/").join(rel)),
        // It resolves out of the tree: key it by what the policy says.
        Err(_) => norm,
    }
}

/// A path as systemd-escape --path spells it: `/sys/fs/cgroup` →
/// `sys-fs-cgroup`, `/` → `-`; `/` between components becomes `-`, and every
/// byte other than ASCII letters, digits, `:`, `_` and `.` (and a leading `.`)
/// becomes `\xNN`. A name longer than 200 bytes is cut and given a hash of
/// the whole (FNV-1a, the same in every build) so distinct roots stay apart.
pub(crate) fn escape_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let trimmed: &[u8] = {
        let mut b = bytes;
        while let [b'/', rest @ ..] = b {
            b = rest;
        }
        while let [rest @ .., b'/'] = b {
            b = rest;
        }
        b
    };
    if trimmed.is_empty() {
        return "-".to_string();
    }
    let mut out = String::new();
    for (i, &b) in trimmed.iter().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || b == b':' || b == b'_' || b == b'.' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if out.len() > 200 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut cut = 180;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str(&format!("-{h:016x}"));
    }
    out
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Makes sure `state_dir` exists and is safe (see module docs); returns its
/// host path. A refusal is an [`Error::Other`], an I/O failure an [`Error::Io`].
pub(crate) fn prepare_state_dir(root: &Root, state_dir: &Path) -> Result<PathBuf, Error> {
    prepare_private_dir(root, state_dir, "state_dir")
}

/// [`prepare_state_dir`] for any private directory of cgwarden's (`label`
/// names it in messages: `state_dir`, `the tree lock directory`).
fn prepare_private_dir(root: &Root, state_dir: &Path, label: &str) -> Result<PathBuf, Error> {
    let dev = Root::normalize(state_dir);
    if dev == Path::new("/") || dev.starts_with("/proc") || dev.starts_with("/sys") {
        return Err(Error::other(
            &dev,
            format!("{label} may not be /, under /proc or under /sys"),
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
                        "{label} {} a symlink ({}); refusing to follow it",
                        if last { "is" } else { "lies below" },
                        cur_dev.display()
                    ),
                ))
            }
            Ok(m) if last => check_state_dir(&dev, &m, label)?,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if root.exists(&parent_dev.join("cgroup.procs")) {
                    return Err(Error::other(
                        &dev,
                        format!(
                            "{label} may not be a cgroup: {} is one (creating it would \
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
                        format!("{label} became a symlink; refusing it"),
                    ));
                }
                if last {
                    check_state_dir(&dev, &m, label)?;
                }
            }
            Err(e) => return Err(Error::io("stat", &cur_dev, e)),
        }
    }
    if root.exists(&dev.join("cgroup.procs")) {
        return Err(Error::other(
            &dev,
            format!("{label} may not be a cgroup (it holds cgroup.procs)"),
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

fn check_state_dir(dev: &Path, m: &fs::Metadata, label: &str) -> Result<(), Error> {
    if m.file_type().is_symlink() {
        return Err(Error::other(
            dev,
            format!("{label} is a symlink; refusing to follow it"),
        ));
    }
    if !m.is_dir() {
        return Err(Error::other(dev, format!("{label} is not a directory")));
    }
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me {
        return Err(Error::other(
            dev,
            format!(
                "{label} is owned by uid {}, not by this user (uid {me}); refusing to use it",
                m.uid()
            ),
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(Error::other(
            dev,
            format!(
                "{label} is writable by group or others (mode {:04o}); refusing to use it \
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
    fn a_second_cgwarden_on_the_same_cgroup_root_is_refused_whatever_its_state_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        fs::create_dir_all(dir.path().join("sys/fs/cgroup/app")).unwrap();
        let cg = Path::new("/sys/fs/cgroup");
        let first =
            TreeLock::acquire(&root, cg, Path::new("/run/a"), "cgwarden run /a.yaml").unwrap();
        assert_eq!(
            TreeLock::path_for(&root, cg),
            Path::new("/run/cgwarden/tree-sys-fs-cgroup.lock")
        );
        let host = dir.path().join("run/cgwarden/tree-sys-fs-cgroup.lock");
        let me = std::process::id();
        assert_eq!(
            fs::read_to_string(&host).unwrap(),
            format!(
                "pid {me}\nstate_dir /run/a\ncgroup_root /sys/fs/cgroup\ncommand cgwarden run /a.yaml\n"
            )
        );
        // The same tree spelled another way is the same key.
        for spelled in [
            "/sys/fs/cgroup/",
            "/sys/fs/./cgroup",
            "/sys/fs/cgroup/app/..",
        ] {
            let err =
                TreeLock::acquire(&root, Path::new(spelled), Path::new("/run/b"), "x").unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains(&format!(
                    "pid {me} (cgwarden run /a.yaml), state_dir /run/a"
                )),
                "{spelled}: {msg}"
            );
            assert!(msg.contains(&host.display().to_string()), "{msg}");
            assert_eq!(err.exit_code(), 1);
            match err {
                LockError::TreeHeld { pid, state_dir, .. } => {
                    assert_eq!(pid, Some(me));
                    assert_eq!(state_dir.as_deref(), Some(Path::new("/run/a")));
                }
                other => panic!("{other:?}"),
            }
        }
        // Another tree is another lock.
        let other = TreeLock::acquire(
            &root,
            Path::new("/sys/fs/cgroup/app"),
            Path::new("/run/b"),
            "x",
        )
        .unwrap();
        drop(other);
        drop(first);
        assert!(!host.exists(), "the lock file is removed on release");
        TreeLock::acquire(&root, cg, Path::new("/run/b"), "x").unwrap();
        let m = fs::metadata(dir.path().join("run/cgwarden")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
    }

    #[test]
    fn a_symlink_to_the_cgroup_root_is_the_same_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        fs::create_dir_all(dir.path().join("sys/fs/cgroup/unified")).unwrap();
        std::os::unix::fs::symlink("cgroup/unified", dir.path().join("sys/fs/cg2")).unwrap();
        let a = TreeLock::path_for(&root, Path::new("/sys/fs/cg2"));
        let b = TreeLock::path_for(&root, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(a, b);
        assert_eq!(
            b,
            Path::new("/run/cgwarden/tree-sys-fs-cgroup-unified.lock")
        );
    }

    #[test]
    fn a_dead_holders_tree_lock_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::fake(dir.path());
        prepare_private_dir(&root, Path::new(TREE_LOCK_DIR), "x").unwrap();
        let host = dir.path().join("run/cgwarden/tree-sys-fs-cgroup.lock");
        fs::write(&host, "pid 999999\nstate_dir /run/gone\n").unwrap();
        let l = TreeLock::acquire(&root, Path::new("/sys/fs/cgroup"), Path::new("/run/c"), "y")
            .unwrap();
        assert!(fs::read_to_string(&host)
            .unwrap()
            .contains("state_dir /run/c"));
        drop(l);
    }

    #[test]
    fn cgroup_roots_are_escaped_as_systemd_escape_does() {
        let e = |p: &str| escape_path(Path::new(p));
        assert_eq!(e("/"), "-");
        assert_eq!(e("/sys/fs/cgroup"), "sys-fs-cgroup");
        assert_eq!(
            e("/sys/fs/cgroup/system.slice/cgwarden-delegated.service"),
            "sys-fs-cgroup-system.slice-cgwarden\\x2ddelegated.service"
        );
        assert_eq!(e("/a b/.c"), "a\\x20b-.c");
        assert_eq!(e("/.hidden"), "\\x2ehidden");
        let long = format!("/sys/fs/cgroup/{}", "x-".repeat(200));
        let long2 = format!("/sys/fs/cgroup/{}y", "x-".repeat(200));
        assert!(e(&long).len() <= 200, "{}", e(&long).len());
        assert_ne!(e(&long), e(&long2));
        assert_eq!(e(&long), e(&long), "stable");
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
