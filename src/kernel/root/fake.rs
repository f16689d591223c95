//! The kernel's side of a fake tree (`--root DIR`): everything a
//! kernel would do behind cgroupfs, procfs and sysfs files, emulated on
//! plain files. [`Root`] dispatches here when its root is
//! fake; nothing outside `kernel::` knows this module exists (callers ask
//! [`Root::supports`](super::Root::supports) for what cannot be emulated).
//!
//! This module owns:
//! - **writes**: a knob write replaces the file's content (creating it if
//!   absent) with `value` plus a newline, as sysfs shows it. Every write is
//!   *atomic*: the data goes to a temp file `.cgw-tmp.<pid>.<seq>` in the
//!   same directory, which is then renamed over the target. A process killed
//!   at any moment leaves the old or the new content, never a torn file — a
//!   kernel knob cannot tear either. A temp file left by a killed writer
//!   (its pid no longer alive) is removed by the first mutation a later
//!   `cgwarden` makes on the tree ([`Fake::settle`]). No fsync: the
//!   guarantee is against kills, not power cuts (the journal has its own).
//!   Exception: event files only the kernel writes (`*.events`,
//!   `*.events.local`) are written in place, as the kernel updates them, so
//!   inotify watches on them keep working when a test plays the kernel.
//! - **`cgroup.subtree_control`**: a write is merged the way the kernel
//!   toggles controllers: `+ctrl` (or a bare name) enables, `-ctrl`
//!   disables, the others stay. Tokens keep the spelling they were written
//!   with; cgwarden compares them normalized.
//! - **values the kernel refuses or changes beside a write** (zram's
//!   algorithm list, an invalid partition's text, `cgroup.type`, the coupled
//!   dirty/overcommit sysctls): see `values`.
//! - **group creation**: a new group gets an empty `cgroup.procs` (first:
//!   a group directory with it is recognisably a cgroup), an empty
//!   `cgroup.subtree_control` and `cgroup.events` (`populated 0`, `frozen 0`).
//! - **controller derivation**: a group without its own `cgroup.controllers`
//!   has its parent's `subtree_control`; a knob is present if its controller
//!   is enabled for the group.
//! - **moves**: see [`Fake::move_pid`] for the order of the three files and
//!   why every interrupted move is recoverable by another move.
//! - **rmdir**: refused (EBUSY) while the group has a child group or a
//!   *member*: a pid listed in its `cgroup.procs` whose `/proc/PID/cgroup`
//!   names the group (or cannot be read). A listed pid that is gone, or
//!   whose `/proc/PID/cgroup` names another group, is a leftover of an
//!   interrupted move, not a member: the kernel would not list it. A
//!   directory that does not look like a cgroup (files but no
//!   `cgroup.procs`) is never removed.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub(crate) mod sysfs;
mod values;

use super::Root;
use crate::kernel::cgroup_text::{join_pids, parse_pid_cgroup, parse_pids};
use crate::kernel::error::{Error, Result};

const PROCS: &str = "cgroup.procs";
const SUBTREE_CONTROL: &str = "cgroup.subtree_control";
const THREADS: &str = "cgroup.threads";
const TMP_PREFIX: &str = ".cgw-tmp.";

/// The emulated kernel of one fake tree (shared by the clones of its [`Root`]).
#[derive(Debug, Default)]
pub(crate) struct Fake {
    /// Makes temp file names unique within this process.
    seq: AtomicU64,
    /// The sweep of temp files left by killed writers runs once.
    settled: OnceLock<()>,
}

impl Fake {
    /// A knob write (see module docs: atomic; `cgroup.subtree_control` merges).
    pub(in crate::kernel) fn write(&self, root: &Root, p: &Path, value: &str) -> Result<()> {
        if kernel_written(p) {
            self.settle(root);
            return root.write_plain(p, value);
        }
        if let Some(done) = sysfs::write(root, p, value, |p, v| self.replace(root, p, v)) {
            return done;
        }
        if let Some(done) = values::write(root, p, value, |p, v| self.replace(root, p, v)) {
            return done;
        }
        if p.file_name().is_some_and(|n| n == THREADS) {
            return self.move_thread(root, p, value);
        }
        if p.file_name().is_some_and(|n| n == SUBTREE_CONTROL) {
            let current = match root.read(p) {
                Ok(t) => t,
                Err(e) if e.is_not_found() => String::new(),
                Err(e) => return Err(e),
            };
            return self.replace(root, p, &merge_toggles(&current, value));
        }
        self.replace(root, p, value)
    }

    /// Replaces the content of `p` with `value` plus a newline if missing,
    /// atomically (temp file + rename); creates `p` if absent.
    pub(in crate::kernel) fn replace(&self, root: &Root, p: &Path, value: &str) -> Result<()> {
        let mut data = value.to_string();
        if !data.ends_with('\n') {
            data.push('\n');
        }
        self.replace_bytes(root, p, data.as_bytes())
    }

    /// Replaces the content of `p` with exactly `data`, atomically (temp
    /// file + rename); creates `p` if absent.
    pub(in crate::kernel) fn replace_bytes(
        &self,
        root: &Root,
        p: &Path,
        data: &[u8],
    ) -> Result<()> {
        self.settle(root);
        let dev = Root::normalize(p);
        // Resolved beneath the tree without following symlinks (see
        // `kernel::root`): a link planted in the tree never redirects a write.
        let (dir, name) = root.parent_beneath("open", p)?;
        let target = nix::sys::stat::fstatat(&dir, &name, AtFlags::AT_SYMLINK_NOFOLLOW).ok();
        if target.is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK) {
            return Err(Error::other(
                &dev,
                "open: the file is a symlink; refusing to follow it",
            ));
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let tmp = format!("{TMP_PREFIX}{}.{seq}", std::process::id());
        // A fixture's mode is kept; a new file gets 0644.
        let mode = target.map_or(0o644, |st| st.st_mode & 0o7777);
        let fd = nix::fcntl::openat(
            &dir,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        )
        .map_err(|e| Error::io("open", &dev, io::Error::from(e)))?;
        let mut f = fs::File::from(fd);
        // Best effort: the umask may have taken bits of the fixture's mode.
        let _ = f.set_permissions(fs::Permissions::from_mode(mode));
        let done = f
            .write_all(data)
            .map_err(|e| Error::io("write", &dev, e))
            .and_then(|()| {
                nix::fcntl::renameat(&dir, tmp.as_str(), &dir, &name)
                    .map_err(|e| Error::io("rename", &dev, io::Error::from(e)))
            });
        if done.is_err() {
            let _ =
                nix::unistd::unlinkat(&dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        }
        done
    }

    /// Removes temp files whose writer was killed, once per tree and
    /// process, before the first mutation (module docs). Never on `/`.
    pub(in crate::kernel) fn settle(&self, root: &Root) {
        self.settled.get_or_init(|| {
            if root
                .base()
                .canonicalize()
                .is_ok_and(|b| b != Path::new("/"))
            {
                sweep(root.base());
            }
        });
    }

    /// The fake side of [`Root::rmdir`] (module docs: membership, EBUSY).
    pub(in crate::kernel) fn rmdir(&self, root: &Root, p: &Path) -> Result<()> {
        self.settle(root);
        let dev = Root::normalize(p);
        let host = root.host_path(p);
        let busy = || Error::io("rmdir", &dev, io::Error::from_raw_os_error(libc::EBUSY));
        // Refuses a path through a symlink (module docs of `kernel::root`);
        // the checks below use the host path of what was just verified.
        root.open_beneath("rmdir", p, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0)?;
        let meta = fs::symlink_metadata(&host).map_err(|e| Error::io("rmdir", &dev, e))?;
        if !meta.is_dir() {
            return Err(Error::io(
                "rmdir",
                &dev,
                io::Error::from_raw_os_error(libc::ENOTDIR),
            ));
        }
        let entries = fs::read_dir(&host).map_err(|e| Error::io("rmdir", &dev, e))?;
        let mut empty = true;
        let mut has_procs = false;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("rmdir", &dev, e))?;
            empty = false;
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                return Err(busy());
            }
            if entry.file_name() == PROCS {
                has_procs = true;
            }
        }
        if !empty && !has_procs {
            return Err(Error::other(
                &dev,
                "refusing to remove a directory that is not a cgroup (no cgroup.procs)",
            ));
        }
        if has_procs {
            let listed = parse_pids(&root.read(&dev.join(PROCS))?);
            if listed.into_iter().any(|pid| is_member(root, &dev, pid)) {
                return Err(busy());
            }
        }
        fs::remove_dir_all(&host).map_err(|e| Error::io("rmdir", &dev, e))
    }

    /// A thread id written to a group's `cgroup.threads` (`type:
    /// threaded`): ESRCH unless some `/proc/PID/task/TID`
    /// exists; the tid is listed in the group's `cgroup.threads` and that
    /// thread's `cgroup` file names the group (relative to the mount: the
    /// nearest ancestor with a `cgroup.controllers` whose parent has none).
    fn move_thread(&self, root: &Root, p: &Path, value: &str) -> Result<()> {
        let esrch = || Error::io("write", p, io::Error::from_raw_os_error(libc::ESRCH));
        let tid: i32 = value.trim().parse().map_err(|_| esrch())?;
        let proc = Path::new("/proc");
        let task = root
            .list_dir(proc)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.parse::<i32>().is_ok())
            .map(|n| proc.join(n).join("task").join(tid.to_string()))
            .find(|t| root.is_dir(t))
            .ok_or_else(esrch)?;
        let dir = p.parent().unwrap_or(Path::new("/"));
        let has = |d: &Path| root.exists(&d.join("cgroup.controllers"));
        let mount = dir
            .ancestors()
            .find(|a| has(a) && !a.parent().is_some_and(has))
            .unwrap_or(dir)
            .to_path_buf();
        let rel = match dir.strip_prefix(&mount) {
            Ok(r) if r.as_os_str().is_empty() => "/".to_string(),
            Ok(r) => format!("/{}", r.display()),
            Err(_) => dir.display().to_string(),
        };
        let mut tids = match root.read(p) {
            Ok(t) => parse_pids(&t),
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e),
        };
        if !tids.contains(&tid) {
            tids.push(tid);
            self.replace(root, p, &join_pids(&tids))?;
        }
        self.replace(root, &task.join("cgroup"), &format!("0::{rel}"))
    }
}

/// Event files (`cgroup.events`, `memory.events`, `memory.events.local`):
/// read-only on a kernel, which updates them in place and raises IN_MODIFY
/// on the same inode. On a fake tree only a test playing the kernel writes
/// them, so they are written in place (a rename would leave a daemon's
/// inotify watch on the old inode).
fn kernel_written(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".events") || n.ends_with(".events.local"))
}

/// Applies a `cgroup.subtree_control` write to the current content the way
/// the kernel does (module docs).
fn merge_toggles(current: &str, write: &str) -> String {
    let name = |t: &str| t.trim_start_matches(['+', '-']).to_string();
    let mut out: Vec<&str> = current
        .split_whitespace()
        .filter(|t| !t.starts_with('-'))
        .collect();
    for t in write.split_whitespace() {
        let n = name(t);
        if n.is_empty() {
            continue;
        }
        if t.starts_with('-') {
            out.retain(|c| name(c) != n);
        } else if !out.iter().any(|c| name(c) == n) {
            out.push(t);
        }
    }
    out.join(" ")
}

/// Whether `pid`, listed in group `dir`'s `cgroup.procs`, is its member
/// (module docs). `/proc/PID/cgroup` shows the path relative to the cgroup2
/// mount, which is a suffix of `dir`'s device path.
fn is_member(root: &Root, dir: &Path, pid: i32) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    if !root.is_dir(&proc_dir) {
        return false;
    }
    let Ok(text) = root.read(&proc_dir.join("cgroup")) else {
        return true;
    };
    match parse_pid_cgroup(&text) {
        Some(cg) => {
            let rel = cg.trim_start_matches('/');
            !rel.is_empty() && dir.ends_with(rel)
        }
        None => true,
    }
}

/// Removes `.cgw-tmp.<pid>.<seq>` files below `dir` whose writer is gone.
fn sweep(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            sweep(&e.path());
            continue;
        }
        let name = e.file_name();
        let Some(writer) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TMP_PREFIX))
            .and_then(|n| n.split('.').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if !alive(writer) {
            let _ = fs::remove_file(e.path());
        }
    }
}

fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks the pid.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toggles_merge_like_the_kernel() {
        assert_eq!(merge_toggles("", "+cpu +memory"), "+cpu +memory");
        assert_eq!(merge_toggles("cpu io\n", "+memory +cpu"), "cpu io +memory");
        assert_eq!(merge_toggles("+cpu +memory -io", "-cpu"), "+memory");
        assert_eq!(merge_toggles("cpu memory", "-cpu -memory"), "");
        assert_eq!(merge_toggles("cpu", "pids + -"), "cpu pids");
    }

    #[test]
    fn stray_temp_files_of_dead_writers_are_swept() {
        let t = tempfile::TempDir::new().expect("tempdir");
        let d = t.path().join("proc/5");
        fs::create_dir_all(&d).expect("mkdir");
        // A pid that cannot exist (above pid_max) and our own, live one.
        let dead = d.join(format!("{TMP_PREFIX}{}.3", i32::MAX));
        let live = d.join(format!("{TMP_PREFIX}{}.4", std::process::id()));
        fs::write(&dead, "x").expect("write");
        fs::write(&live, "x").expect("write");
        fs::write(d.join("cgroup"), "0::/\n").expect("write");
        let r = Root::fake(t.path());
        r.write(Path::new("/proc/5/cgroup"), "0::/a")
            .expect("fake write");
        assert!(!dead.exists(), "a dead writer's temp file is removed");
        assert!(live.exists(), "a live writer's temp file is kept");
        assert_eq!(
            fs::read_to_string(d.join("cgroup")).expect("read"),
            "0::/a\n"
        );
        // The write itself left no temp file behind.
        let left: Vec<_> = fs::read_dir(&d)
            .expect("readdir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }
}
