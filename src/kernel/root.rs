//! [`Root`]: the one place where device paths become host paths.
//!
//! Every absolute path cgwarden touches (`/sys/...`, `/proc/...`, `/run/...`,
//! `settings.cgroup_root`, `settings.state_dir`) is a *device path*. `Root`
//! maps it under a base directory: `/` for the real system, `DIR` for a fake
//! tree (`--root DIR`). Paths are normalized lexically and can never
//! leave the base: `..` stops at the device root, exactly as the kernel
//! resolves `/..` to `/`.
//!
//! # Symlinks
//!
//! Everything that *changes* the tree — knob writes, file creation, append,
//! unlink, mkdir, rmdir — resolves its path beneath the base with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! ([`Root::open_beneath`], and the parent directory for the `*at` calls):
//! a symlink anywhere below the base is refused (ELOOP, or EXDEV for an
//! escape), so a link planted in a fake tree or in the state directory never
//! redirects a write outside it. One exception, because the kernel itself
//! puts links there: below `/sys/block` and `/sys/class` (`/sys/block/zram0`
//! → `../devices/virtual/block/zram0`, `/sys/class/zram-control`) symlinks
//! are followed — on the real root freely (everything is beneath `/`), on a
//! fake root only with `RESOLVE_BENEATH` (no escape from `--root DIR`).
//! Without `openat2` (ENOSYS, kernels before 5.6) the path is walked one
//! component at a time with `O_NOFOLLOW`; that walk follows no symlink at all,
//! except the `/sys/block` / `/sys/class` ones on the real root, which are
//! opened as before. Reads are not restricted (they change nothing).
//!
//! `Root` is also the seam between the two backends:
//! - real: [`Root::write`] opens an *existing* file `O_WRONLY` (never
//!   `O_CREAT`, so a typo can never create a file in sysfs/cgroupfs) and
//!   hands the value to the kernel in one `write(2)` call, because kernel knobs
//!   parse per write.
//! - fake: there is no kernel; its side (atomic writes that create or
//!   replace the file, `subtree_control` merging, group creation, moves,
//!   rmdir refusal) is emulated by its child module `fake`, to which `Root` and
//!   [`CgroupFs`](super::cgroupfs::CgroupFs) dispatch.
//!
//! What has no emulation at all (swap, scheduling syscalls, zram control,
//! PSI triggers, the proc connector) is asked with [`Root::supports`]; callers
//! never ask which backend they have.
//!
//! Errors always report the device path, never the host path.

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

use super::error::{Error, Result};
pub(super) mod fake;

use fake::Fake;

/// Maps absolute device paths under a base directory (see module docs).
#[derive(Clone, Debug)]
pub struct Root {
    base: PathBuf,
    backend: Backend,
}

#[derive(Clone, Debug)]
enum Backend {
    /// A kernel behind the files.
    Kernel,
    /// Plain files; the kernel's side is emulated.
    Fake(Arc<Fake>),
}

/// Something only a kernel does (or only plain files do), for
/// [`Root::supports`]: steps that need it are reported as skipped where it
/// is not supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `mkswap` (the swap header on a block device), `swapon(2)`, `swapoff(2)`.
    Swap,
    /// `sched_setattr(2)` / `sched_getattr(2)`.
    Sched,
    /// zram-control `hot_add`/`hot_remove` and a device's `reset`.
    ZramControl,
    /// PSI triggers (a threshold written to a pressure file, then `poll`).
    PsiTrigger,
    /// The process-events connector (netlink).
    ProcConnector,
    /// Running a hook in a cgroup of its own (joined through `cgroup.procs`
    /// by the real child process) and killing it with `cgroup.kill`; on a
    /// fake tree hooks stay in the daemon's cgroup, killed by process group.
    HookCgroup,
    /// A write may create the file it names (plain files only: a kernel
    /// interface file is never created by a write).
    CreateFile,
}

/// Where the kernel itself puts symlinks above knobs cgwarden writes
/// (see module docs): followed there, beneath the base.
fn symlinks_expected(dev: &Path) -> bool {
    dev.starts_with("/sys/block") || dev.starts_with("/sys/class")
}

/// An error for a path refused because it resolves through a symlink.
fn symlink_refused(op: &'static str, dev: &Path, errno: Errno) -> Error {
    match errno {
        Errno::ELOOP | Errno::EXDEV => Error::other(
            dev,
            format!(
                "{op}: the path goes through a symlink{}; refusing to follow it",
                if errno == Errno::EXDEV {
                    " out of the tree"
                } else {
                    ""
                }
            ),
        ),
        e => Error::io(op, dev, io::Error::from(e)),
    }
}

impl Root {
    /// The real system: base `/`, a kernel behind the files.
    pub fn real() -> Root {
        Root {
            base: PathBuf::from("/"),
            backend: Backend::Kernel,
        }
    }

    /// A fake tree under `dir` (`--root DIR`): plain files, no kernel behind them.
    pub fn fake(dir: impl Into<PathBuf>) -> Root {
        Root {
            base: dir.into(),
            backend: Backend::Fake(Arc::new(Fake::default())),
        }
    }

    /// Real-kernel semantics (no `O_CREAT`, plain `rmdir`) on a test directory,
    /// so the real code paths can be tested without touching the host.
    #[cfg(test)]
    pub(crate) fn real_at(dir: impl Into<PathBuf>) -> Root {
        Root {
            base: dir.into(),
            backend: Backend::Kernel,
        }
    }

    /// Whether `op` can be carried out on this root (see [`Op`]).
    pub(crate) fn supports(&self, op: Op) -> bool {
        match self.backend {
            Backend::Kernel => op != Op::CreateFile,
            Backend::Fake(_) => op == Op::CreateFile,
        }
    }

    /// The pid this process has in the root's `/proc` (none on a fake tree,
    /// whose processes are files).
    pub(crate) fn own_pid(&self) -> Option<i32> {
        match self.backend {
            Backend::Kernel => i32::try_from(std::process::id()).ok(),
            Backend::Fake(_) => None,
        }
    }

    /// The emulated kernel of a fake tree, for dispatch inside `kernel::`.
    pub(super) fn emulation(&self) -> Option<&Fake> {
        match &self.backend {
            Backend::Kernel => None,
            Backend::Fake(f) => Some(f),
        }
    }

    /// The base directory (`/` for the real system).
    pub(crate) fn base(&self) -> &Path {
        &self.base
    }

    /// Lexically normalizes a device path: always absolute, no `.`, `..`
    /// resolved and clamped at `/`. A relative input is taken relative to `/`.
    pub(crate) fn normalize(device_path: &Path) -> PathBuf {
        // Most paths are built normal (`/proc/42/stat`): one copy, not a
        // push per component (every read of a turn or an exec comes
        // through here).
        if is_normal(device_path) {
            return device_path.to_path_buf();
        }
        Self::normalize_by_components(device_path)
    }

    /// [`Root::normalize`] the long way, one component at a time.
    fn normalize_by_components(device_path: &Path) -> PathBuf {
        let mut out = PathBuf::from("/");
        for c in device_path.components() {
            match c {
                Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
                Component::ParentDir => {
                    // pop() on "/" is a no-op: `..` never leaves the root.
                    out.pop();
                }
                Component::Normal(n) => out.push(n),
            }
        }
        out
    }

    /// Opens `p` (a device path) beneath the base without following
    /// symlinks (see module docs for the `/sys/block` / `/sys/class`
    /// exception). `flags` are `open(2)` flags (`O_CLOEXEC` is added);
    /// `mode` is used with `O_CREAT` only. `op` names the operation in errors.
    pub(crate) fn open_beneath(
        &self,
        op: &'static str,
        p: &Path,
        flags: OFlag,
        mode: u32,
    ) -> Result<fs::File> {
        let dev = Self::dev(p);
        self.open_beneath_fd(&dev, flags, mode)
            .map(fs::File::from)
            .map_err(|e| symlink_refused(op, &dev, e))
    }

    /// The parent directory of `p` opened beneath the base (`O_PATH`), and
    /// `p`'s last component, for the `*at` calls.
    pub(crate) fn parent_beneath(&self, op: &'static str, p: &Path) -> Result<(OwnedFd, PathBuf)> {
        let dev = Self::dev(p);
        let (Some(parent), Some(name)) = (dev.parent(), dev.file_name()) else {
            return Err(Error::io(
                op,
                &dev,
                io::Error::from_raw_os_error(libc::EINVAL),
            ));
        };
        let fd = self
            .open_beneath_fd(parent, OFlag::O_PATH | OFlag::O_DIRECTORY, 0)
            .map_err(|e| symlink_refused(op, &dev, e))?;
        Ok((fd, PathBuf::from(name)))
    }

    fn open_beneath_fd(&self, dev: &Path, flags: OFlag, mode: u32) -> nix::Result<OwnedFd> {
        let flags = flags | OFlag::O_CLOEXEC;
        let mode = if flags.contains(OFlag::O_CREAT) {
            Mode::from_bits_truncate(mode)
        } else {
            Mode::empty()
        };
        let follow = symlinks_expected(dev);
        let on_real_root = self.base == Path::new("/");
        if follow && on_real_root {
            return nix::fcntl::open(dev, flags, mode);
        }
        let rel = dev.strip_prefix("/").unwrap_or(dev);
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let base = nix::fcntl::open(
            &self.base,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS;
        if !follow {
            resolve |= ResolveFlag::RESOLVE_NO_SYMLINKS;
        }
        let how = OpenHow::new().flags(flags).mode(mode).resolve(resolve);
        let mut tries = 0;
        loop {
            match nix::fcntl::openat2(&base, rel, how) {
                // A rename raced the lookup: the kernel asks to try again.
                Err(Errno::EAGAIN) if tries < 10 => tries += 1,
                // No openat2 (or a seccomp filter that does not know it).
                Err(Errno::ENOSYS | Errno::EPERM) => break,
                r => return r,
            }
        }
        walk_nofollow(base, rel, flags, mode)
    }
}

/// One read(2) of at most `max` bytes into a new buffer's spare capacity:
/// nothing zeroed first and copied out after, and no second read to see the
/// end (a kernel file is produced whole by one `show`; std's reads that skip
/// the zeroing read again until 0). Every read of a loop turn or an exec
/// comes through here.
pub(crate) fn read_once(f: &fs::File, max: usize) -> io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buf: Vec<u8> = Vec::with_capacity(max);
    loop {
        // SAFETY: `buf` has room for `max` bytes; read(2) writes at most
        // that many into it and says how many.
        let r = unsafe { libc::read(f.as_raw_fd(), buf.as_mut_ptr().cast(), max) };
        match usize::try_from(r) {
            Ok(n) => {
                // SAFETY: the kernel initialised the first `n <= max` bytes.
                unsafe { buf.set_len(n.min(max)) };
                return Ok(buf);
            }
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Exactly one write(2) of `value` to the open kernel file `f` (the
/// kernel parses each write separately); `p` names it in errors.
pub(crate) fn write_once(f: &mut fs::File, p: &Path, value: &str) -> Result<()> {
    let n = loop {
        match f.write(value.as_bytes()) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("write", Root::dev(p), e)),
        }
    };
    if n != value.len() {
        return Err(Error::other(
            Root::dev(p),
            format!(
                "short write: {n} of {} bytes of {value:?} accepted",
                value.len()
            ),
        ));
    }
    Ok(())
}

/// `openat2`'s fallback: opens `rel` below the directory `base` one
/// component at a time with `O_NOFOLLOW`, following no symlink at all.
fn walk_nofollow(base: OwnedFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    {
        let mut dir = base;
        let comps: Vec<_> = rel.components().collect();
        for (i, c) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let (f, m) = if last {
                (flags | OFlag::O_NOFOLLOW, mode)
            } else {
                (
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
            };
            let next = match nix::fcntl::openat(&dir, c.as_os_str(), f, m) {
                // An O_PATH|O_NOFOLLOW open of a symlink with O_DIRECTORY.
                Err(Errno::ENOTDIR)
                    if nix::sys::stat::fstatat(
                        &dir,
                        c.as_os_str(),
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    )
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK) =>
                {
                    return Err(Errno::ELOOP)
                }
                r => r?,
            };
            dir = next;
        }
        Ok(dir)
    }
}

impl Root {
    /// The host path of a device path: base joined with the normalized path
    /// stripped of its leading `/`. Never escapes the base via `..`.
    pub(crate) fn host_path(&self, device_path: &Path) -> PathBuf {
        let norm = Self::normalize(device_path);
        #[cfg(test)]
        trace::note(&norm);
        if self.base.as_os_str() == "/" {
            return norm;
        }
        match norm.strip_prefix("/") {
            Ok(rel) if !rel.as_os_str().is_empty() => self.base.join(rel),
            _ => self.base.clone(),
        }
    }

    /// True if the path exists (a dangling symlink counts as existing).
    pub(crate) fn exists(&self, p: &Path) -> bool {
        fs::symlink_metadata(self.host_path(p)).is_ok()
    }

    /// True if the path is a directory (following symlinks).
    pub(crate) fn is_dir(&self, p: &Path) -> bool {
        fs::metadata(self.host_path(p))
            .map(|m| m.is_dir())
            .unwrap_or(false)
    }

    /// True if the path is a regular file (following symlinks).
    pub(crate) fn is_file(&self, p: &Path) -> bool {
        fs::metadata(self.host_path(p))
            .map(|m| m.is_file())
            .unwrap_or(false)
    }

    fn dev(p: &Path) -> PathBuf {
        Self::normalize(p)
    }

    /// Whole content as text (invalid UTF-8 is replaced, never an error).
    pub(crate) fn read(&self, p: &Path) -> Result<String> {
        let bytes = self.read_bytes(p)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// Content with trailing whitespace and newlines removed.
    pub(crate) fn read_trimmed(&self, p: &Path) -> Result<String> {
        let mut s = self.read(p)?;
        s.truncate(s.trim_end().len());
        Ok(s)
    }

    /// Content of a small kernel file (a `*.pressure` file, a knob) in one
    /// read(2) ([`read_once`]): open, read, close. `read_to_string` probes
    /// with a tiny read and reads again until 0 — twice the system calls.
    /// Content of 1 KiB or more falls back to reading the rest.
    pub(crate) fn read_small(&self, p: &Path) -> Result<String> {
        let host = self.host_path(p);
        let mut f = fs::File::open(&host).map_err(|e| Error::io("open", Self::dev(p), e))?;
        let mut bytes = read_once(&f, 1024).map_err(|e| Error::io("read", Self::dev(p), e))?;
        if bytes.len() == 1024 {
            f.read_to_end(&mut bytes)
                .map_err(|e| Error::io("read", Self::dev(p), e))?;
        }
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// Raw content (e.g. `/proc/PID/cmdline`).
    pub(crate) fn read_bytes(&self, p: &Path) -> Result<Vec<u8>> {
        let host = self.host_path(p);
        let mut f = fs::File::open(&host).map_err(|e| Error::io("open", Self::dev(p), e))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)
            .map_err(|e| Error::io("read", Self::dev(p), e))?;
        Ok(buf)
    }

    /// Target of a symlink such as `/proc/PID/exe`. The target is a device
    /// path and is returned as-is (on a fake tree it need not exist). On a
    /// fake tree a regular file in place of the link is accepted too: its
    /// trimmed content is the target (fixtures copied without symlinks).
    pub(crate) fn read_link(&self, p: &Path) -> Result<PathBuf> {
        let host = self.host_path(p);
        match fs::read_link(&host) {
            Ok(t) => Ok(t),
            Err(e) if self.emulation().is_some() && e.raw_os_error() == Some(libc::EINVAL) => {
                let s = self.read_trimmed(p)?;
                if s.is_empty() {
                    Err(Error::io("readlink", Self::dev(p), e))
                } else {
                    Ok(PathBuf::from(s))
                }
            }
            Err(e) => Err(Error::io("readlink", Self::dev(p), e)),
        }
    }

    /// Writes a knob (see module docs for real vs fake semantics).
    pub(crate) fn write(&self, p: &Path, value: &str) -> Result<()> {
        if let Some(fake) = self.emulation() {
            return fake.write(self, p, value);
        }
        // Never O_CREAT: a typo can never create a file in sysfs/cgroupfs.
        let mut f = self.open_beneath("open", p, OFlag::O_WRONLY, 0)?;
        write_once(&mut f, p, value)
    }

    /// Creates or truncates and writes (`write_new` on a real root).
    pub(super) fn write_plain(&self, p: &Path, value: &str) -> Result<()> {
        let mut data = value.to_string();
        if !data.ends_with('\n') {
            data.push('\n');
        }
        let mut f = self.open_beneath(
            "open",
            p,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC,
            0o644,
        )?;
        f.write_all(data.as_bytes())
            .map_err(|e| Error::io("write", Self::dev(p), e))
    }

    /// Writes a file that may be created (state files). Creates or
    /// replaces it; a trailing newline is added if missing, on real and fake
    /// roots alike (on a fake root atomically, like every fake write).
    pub(crate) fn write_new(&self, p: &Path, value: &str) -> Result<()> {
        match self.emulation() {
            Some(fake) => fake.replace(self, p, value),
            None => self.write_plain(p, value),
        }
    }

    /// Appends `line` (plus a newline if missing) to a file, creating it, and
    /// fsyncs it (journals). Works the same on real and fake roots.
    pub(crate) fn append_synced(&self, p: &Path, line: &str) -> Result<()> {
        self.settle();
        let mut data = line.to_string();
        if !data.ends_with('\n') {
            data.push('\n');
        }
        let mut f = self.open_beneath(
            "open",
            p,
            OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT,
            0o644,
        )?;
        f.write_all(data.as_bytes())
            .map_err(|e| Error::io("write", Self::dev(p), e))?;
        f.sync_all()
            .map_err(|e| Error::io("fsync", Self::dev(p), e))
    }

    /// Removes a plain file (state files). Missing file is an error (ENOENT).
    pub(crate) fn remove_file(&self, p: &Path) -> Result<()> {
        self.settle();
        let (dir, name) = self.parent_beneath("unlink", p)?;
        nix::unistd::unlinkat(&dir, &name, nix::unistd::UnlinkatFlags::NoRemoveDir)
            .map_err(|e| Error::io("unlink", Self::dev(p), io::Error::from(e)))
    }

    /// Creates one directory level. `Ok(false)` if it already exists as a directory.
    pub(crate) fn mkdir(&self, p: &Path) -> Result<bool> {
        self.settle();
        let (dir, name) = self.parent_beneath("mkdir", p)?;
        match nix::sys::stat::mkdirat(&dir, &name, Mode::from_bits_truncate(0o755)) {
            Ok(()) => Ok(true),
            Err(Errno::EEXIST) => {
                match nix::sys::stat::fstatat(&dir, &name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                {
                    Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => Ok(false),
                    _ => Err(Error::io(
                        "mkdir",
                        Self::dev(p),
                        io::Error::from_raw_os_error(libc::EEXIST),
                    )),
                }
            }
            Err(e) => Err(Error::io("mkdir", Self::dev(p), io::Error::from(e))),
        }
    }

    /// Creates a directory and its missing parents (state_dir). Not for cgroups.
    pub(crate) fn mkdir_all(&self, p: &Path) -> Result<()> {
        self.settle();
        fs::create_dir_all(self.host_path(p)).map_err(|e| Error::io("mkdir", Self::dev(p), e))
    }

    /// Removes a (cgroup) directory.
    ///
    /// Real: `rmdir(2)` only — a cgroup directory holds pseudo-files, and
    /// the kernel refuses (EBUSY) while it has children or processes.
    ///
    /// Fake: the directory holds plain files, so it is removed recursively,
    /// but only if it looks like a cgroup, and with the kernel's refusal
    /// emulated (see [`fake`]).
    pub(crate) fn rmdir(&self, p: &Path) -> Result<()> {
        match self.emulation() {
            Some(fake) => fake.rmdir(self, p),
            None => {
                let (dir, name) = self.parent_beneath("rmdir", p)?;
                nix::unistd::unlinkat(&dir, &name, nix::unistd::UnlinkatFlags::RemoveDir)
                    .map_err(|e| Error::io("rmdir", Self::dev(p), io::Error::from(e)))
            }
        }
    }

    /// On a fake tree, before the first mutation: clears what killed
    /// writers left (see [`fake`]). Nothing on a real root.
    fn settle(&self) {
        if let Some(fake) = self.emulation() {
            fake.settle(self);
        }
    }

    /// Entry names of a directory, sorted. Names that are not UTF-8 are skipped.
    pub(crate) fn list_dir(&self, p: &Path) -> Result<Vec<String>> {
        let rd =
            fs::read_dir(self.host_path(p)).map_err(|e| Error::io("readdir", Self::dev(p), e))?;
        let mut names = Vec::new();
        for entry in rd {
            // An entry that vanishes mid-listing (an exiting /proc/PID) is skipped.
            let Ok(entry) = entry else { continue };
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
}

/// Unit tests' record of the device paths this thread resolved (every read
/// and every existence test goes through [`Root::host_path`]): what the
/// readers look at, for the capture's coverage test.
#[cfg(test)]
pub(crate) mod trace {
    use std::cell::RefCell;
    use std::path::{Path, PathBuf};

    thread_local! {
        static SEEN: RefCell<Option<Vec<PathBuf>>> = const { RefCell::new(None) };
    }

    pub(super) fn note(dev: &Path) {
        SEEN.with(|s| {
            if let Some(v) = s.borrow_mut().as_mut() {
                v.push(dev.to_path_buf());
            }
        });
    }

    /// The device paths `f` resolved on this thread, in order.
    pub(crate) fn during(f: impl FnOnce()) -> Vec<PathBuf> {
        SEEN.with(|s| *s.borrow_mut() = Some(Vec::new()));
        f();
        SEEN.with(|s| s.borrow_mut().take()).unwrap_or_default()
    }
}

/// Whether `p` is already what [`Root::normalize`] makes of it: absolute,
/// no empty, `.` or `..` component, no trailing `/` (except `/` itself).
fn is_normal(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let b = p.as_os_str().as_bytes();
    match b.split_first() {
        Some((b'/', [])) => true,
        Some((b'/', rest)) => rest
            .split(|&c| c == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".."),
        _ => false,
    }
}

#[cfg(test)]
mod normal_tests {
    use super::*;

    proptest::proptest! {
        /// The shortcut for a path already normal gives what the walk
        /// over its components gives, for any mix of `/`, `.`, `..`.
        #[test]
        fn normalize_shortcut_agrees_with_the_walk(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["", ".", "..", "a", "proc", "42", "stat", "..a", ".b"]),
                0..8,
            ),
            lead in proptest::bool::ANY,
            trail in proptest::bool::ANY,
        ) {
            let mut s = if lead { "/".to_string() } else { String::new() };
            s.push_str(&parts.join("/"));
            if trail {
                s.push('/');
            }
            let p = Path::new(&s);
            proptest::prop_assert_eq!(Root::normalize(p), Root::normalize_by_components(p));
        }
    }

    #[test]
    fn normal_paths_are_told_apart() {
        for p in ["/", "/proc/42/stat", "/a/..b/.c"] {
            assert!(is_normal(Path::new(p)), "{p}");
        }
        for p in ["", "proc", "/proc/", "//proc", "/a/./b", "/a/../b", "/.."] {
            assert!(!is_normal(Path::new(p)), "{p}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn fake() -> (TempDir, Root) {
        let t = TempDir::new().expect("tempdir");
        let r = Root::fake(t.path());
        (t, r)
    }

    #[test]
    fn read_small_reads_short_and_long_files_whole() {
        let (t, r) = fake();
        std::fs::write(t.path().join("short"), "some avg10=0.00 total=5\n").expect("write");
        let long: String = (0..500).map(|i| format!("{i} ")).collect();
        std::fs::write(t.path().join("long"), &long).expect("write");
        assert_eq!(
            r.read_small(Path::new("/short")).expect("short"),
            "some avg10=0.00 total=5\n"
        );
        assert_eq!(r.read_small(Path::new("/long")).expect("long"), long);
        assert!(r.read_small(Path::new("/absent")).is_err());
    }

    #[test]
    fn host_path_maps_and_never_escapes() {
        let r = Root::fake("/tmp/fake");
        assert_eq!(
            r.host_path(Path::new("/sys/fs/cgroup/a")),
            PathBuf::from("/tmp/fake/sys/fs/cgroup/a")
        );
        assert_eq!(
            r.host_path(Path::new("/sys/../../../etc/passwd")),
            PathBuf::from("/tmp/fake/etc/passwd")
        );
        assert_eq!(r.host_path(Path::new("/..")), PathBuf::from("/tmp/fake"));
        assert_eq!(r.host_path(Path::new("/")), PathBuf::from("/tmp/fake"));
        assert_eq!(
            r.host_path(Path::new("relative/./x")),
            PathBuf::from("/tmp/fake/relative/x")
        );
        assert_eq!(
            Root::real().host_path(Path::new("/proc/1/../self")),
            PathBuf::from("/proc/self")
        );
        assert!(Root::real().supports(Op::Swap) && !Root::real().supports(Op::CreateFile));
        assert!(!r.supports(Op::Sched) && r.supports(Op::CreateFile));
        assert_eq!(r.own_pid(), None);
        assert_eq!(
            Root::real().own_pid(),
            i32::try_from(std::process::id()).ok()
        );
    }

    #[test]
    fn fake_write_then_read() {
        let (_t, r) = fake();
        let p = Path::new("/sys/knob");
        r.mkdir(Path::new("/sys")).unwrap();
        r.write(p, "42").unwrap();
        assert_eq!(r.read(p).unwrap(), "42\n");
        assert_eq!(r.read_trimmed(p).unwrap(), "42");
        r.write(p, "7\n").unwrap();
        assert_eq!(r.read(p).unwrap(), "7\n");
        assert!(r.exists(p));
        assert!(r.is_file(p));
        assert!(!r.is_dir(p));
    }

    #[test]
    fn fake_write_needs_parent_and_errors_name_device_path() {
        let (t, r) = fake();
        let e = r.write(Path::new("/sys/nope/knob"), "1").unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), Path::new("/sys/nope/knob"));
        assert!(!e.to_string().contains(t.path().to_str().unwrap()));
        let e = r.read(Path::new("/proc/../proc/x")).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), Path::new("/proc/x"));
    }

    #[test]
    fn real_write_never_creates() {
        // A "real" root based in a tempdir exercises the O_WRONLY-without-O_CREAT path
        // without touching the host's kernel files.
        let t = TempDir::new().unwrap();
        let r = Root::real_at(t.path());
        let e = r.write(Path::new("/knob"), "1").unwrap_err();
        assert!(e.is_not_found());
        assert!(!t.path().join("knob").exists());
        fs::write(t.path().join("knob"), "").unwrap();
        r.write(Path::new("/knob"), "123").unwrap();
        assert_eq!(fs::read_to_string(t.path().join("knob")).unwrap(), "123");
        // write_new may create
        r.write_new(Path::new("/state"), "x").unwrap();
        assert_eq!(fs::read_to_string(t.path().join("state")).unwrap(), "x\n");
        // real rmdir refuses non-empty dirs
        fs::create_dir(t.path().join("g")).unwrap();
        fs::write(t.path().join("g/cgroup.procs"), "").unwrap();
        assert!(r.rmdir(Path::new("/g")).is_err());
    }

    #[test]
    fn writes_never_follow_a_symlink_out_of_the_tree() {
        let outside = TempDir::new().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, "keep\n").unwrap();
        for r in [fake(), {
            let t = TempDir::new().unwrap();
            let r = Root::real_at(t.path());
            (t, r)
        }] {
            let (t, r) = r;
            fs::create_dir_all(t.path().join("proc/sys/vm")).unwrap();
            std::os::unix::fs::symlink(&secret, t.path().join("proc/sys/vm/swappiness")).unwrap();
            let e = r
                .write(Path::new("/proc/sys/vm/swappiness"), "1")
                .unwrap_err();
            assert!(e.to_string().contains("symlink"), "{e}");
            assert_eq!(e.path(), Path::new("/proc/sys/vm/swappiness"));
            // A symlinked directory component.
            fs::create_dir_all(t.path().join("sys/fs")).unwrap();
            std::os::unix::fs::symlink(outside.path(), t.path().join("sys/fs/cgroup")).unwrap();
            assert!(r.write(Path::new("/sys/fs/cgroup/secret"), "1").is_err());
            assert!(r.mkdir(Path::new("/sys/fs/cgroup/g")).is_err());
            assert!(r.remove_file(Path::new("/sys/fs/cgroup/secret")).is_err());
            assert!(r.rmdir(Path::new("/sys/fs/cgroup/g")).is_err());
            assert!(r
                .append_synced(Path::new("/sys/fs/cgroup/secret"), "x")
                .is_err());
            assert!(r
                .write_new(Path::new("/sys/fs/cgroup/secret"), "x")
                .is_err());
            assert_eq!(fs::read_to_string(&secret).unwrap(), "keep\n");
            assert!(!outside.path().join("g").exists());
            // sysfs class links are followed, but never out of the tree.
            fs::create_dir_all(t.path().join("sys/devices/virtual/block/zram0")).unwrap();
            fs::write(
                t.path().join("sys/devices/virtual/block/zram0/disksize"),
                "0\n",
            )
            .unwrap();
            fs::create_dir_all(t.path().join("sys/block")).unwrap();
            std::os::unix::fs::symlink(
                "../devices/virtual/block/zram0",
                t.path().join("sys/block/zram0"),
            )
            .unwrap();
            r.write(Path::new("/sys/block/zram0/disksize"), "1")
                .unwrap();
            assert_eq!(
                r.read_trimmed(Path::new("/sys/devices/virtual/block/zram0/disksize"))
                    .unwrap(),
                "1"
            );
            std::os::unix::fs::symlink(outside.path(), t.path().join("sys/block/zram1")).unwrap();
            assert!(r.write(Path::new("/sys/block/zram1/secret"), "1").is_err());
            assert_eq!(fs::read_to_string(&secret).unwrap(), "keep\n");
        }
    }

    #[test]
    fn fallback_walk_follows_no_symlink() {
        let t = TempDir::new().unwrap();
        fs::create_dir_all(t.path().join("a/b")).unwrap();
        fs::write(t.path().join("a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink("b", t.path().join("a/l")).unwrap();
        std::os::unix::fs::symlink("f", t.path().join("a/b/lf")).unwrap();
        let base = || {
            nix::fcntl::open(t.path(), OFlag::O_PATH | OFlag::O_DIRECTORY, Mode::empty()).unwrap()
        };
        let open =
            |rel: &str| walk_nofollow(base(), Path::new(rel), OFlag::O_RDONLY, Mode::empty());
        assert!(open("a/b/f").is_ok());
        assert_eq!(open("a/l/f").unwrap_err(), Errno::ELOOP);
        assert_eq!(open("a/b/lf").unwrap_err(), Errno::ELOOP);
        assert_eq!(open("a/b/nope").unwrap_err(), Errno::ENOENT);
    }

    #[test]
    fn garbage_bytes_are_tolerated() {
        let (t, r) = fake();
        fs::write(t.path().join("g"), [0xff, 0xfe, b'a', b'\n']).unwrap();
        assert_eq!(
            r.read_trimmed(Path::new("/g")).unwrap(),
            "\u{fffd}\u{fffd}a"
        );
        assert_eq!(r.read_bytes(Path::new("/g")).unwrap().len(), 4);
    }

    #[test]
    fn mkdir_single_level() {
        let (t, r) = fake();
        assert!(r.mkdir(Path::new("/a")).unwrap());
        assert!(!r.mkdir(Path::new("/a")).unwrap());
        assert!(r.mkdir(Path::new("/x/y")).unwrap_err().is_not_found());
        fs::write(t.path().join("f"), "").unwrap();
        assert!(r.mkdir(Path::new("/f")).is_err());
        r.mkdir_all(Path::new("/run/cgwarden")).unwrap();
        assert!(r.is_dir(Path::new("/run/cgwarden")));
    }

    #[test]
    fn fake_rmdir_rules() {
        let (t, r) = fake();
        // empty dir: removed
        r.mkdir(Path::new("/e")).unwrap();
        r.rmdir(Path::new("/e")).unwrap();
        assert!(!r.exists(Path::new("/e")));
        // cgroup-looking dir with knob files: removed
        fs::create_dir(t.path().join("g")).unwrap();
        fs::write(t.path().join("g/cgroup.procs"), "\n").unwrap();
        fs::write(t.path().join("g/cpu.weight"), "100\n").unwrap();
        r.rmdir(Path::new("/g")).unwrap();
        assert!(!t.path().join("g").exists());
        // not a cgroup: refused, untouched
        fs::create_dir(t.path().join("d")).unwrap();
        fs::write(t.path().join("d/important"), "x").unwrap();
        let e = r.rmdir(Path::new("/d")).unwrap_err();
        assert_eq!(e.path(), Path::new("/d"));
        assert!(t.path().join("d/important").exists());
        // populated: EBUSY while a listed pid is a member
        fs::create_dir(t.path().join("p")).unwrap();
        fs::write(t.path().join("p/cgroup.procs"), "12\n13\n").unwrap();
        fs::create_dir_all(t.path().join("proc/12")).unwrap();
        fs::write(t.path().join("proc/12/cgroup"), "0::/p\n").unwrap();
        assert_eq!(
            r.rmdir(Path::new("/p")).unwrap_err().errno(),
            Some(libc::EBUSY)
        );
        // a listed pid that has moved on (an interrupted move) or is gone
        // (13) is not a member
        fs::write(t.path().join("proc/12/cgroup"), "0::/\n").unwrap();
        r.rmdir(Path::new("/p")).unwrap();
        assert!(!t.path().join("p").exists());
        fs::create_dir(t.path().join("p")).unwrap();
        fs::write(t.path().join("p/cgroup.procs"), "12\n").unwrap();
        // has child group: EBUSY
        fs::create_dir_all(t.path().join("c/child")).unwrap();
        fs::write(t.path().join("c/cgroup.procs"), "").unwrap();
        assert_eq!(
            r.rmdir(Path::new("/c")).unwrap_err().errno(),
            Some(libc::EBUSY)
        );
        // missing
        assert!(r.rmdir(Path::new("/missing")).unwrap_err().is_not_found());
        // a file
        assert_eq!(
            r.rmdir(Path::new("/p/cgroup.procs")).unwrap_err().errno(),
            Some(libc::ENOTDIR)
        );
    }

    #[test]
    fn read_link_fake() {
        let (t, r) = fake();
        fs::create_dir_all(t.path().join("proc/5")).unwrap();
        std::os::unix::fs::symlink("/opt/npu/bin/infer", t.path().join("proc/5/exe")).unwrap();
        assert_eq!(
            r.read_link(Path::new("/proc/5/exe")).unwrap(),
            PathBuf::from("/opt/npu/bin/infer")
        );
        assert!(r.exists(Path::new("/proc/5/exe")));
        fs::write(t.path().join("proc/5/exe2"), "/usr/bin/x\n").unwrap();
        assert_eq!(
            r.read_link(Path::new("/proc/5/exe2")).unwrap(),
            PathBuf::from("/usr/bin/x")
        );
        assert!(r
            .read_link(Path::new("/proc/6/exe"))
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn list_dir_sorted_and_append() {
        let (t, r) = fake();
        for n in ["b", "a", "10", "2"] {
            fs::write(t.path().join(n), "").unwrap();
        }
        assert_eq!(r.list_dir(Path::new("/")).unwrap(), ["10", "2", "a", "b"]);
        assert!(r.list_dir(Path::new("/nope")).unwrap_err().is_not_found());
        r.append_synced(Path::new("/j"), "one").unwrap();
        r.append_synced(Path::new("/j"), "two\n").unwrap();
        assert_eq!(r.read(Path::new("/j")).unwrap(), "one\ntwo\n");
        r.remove_file(Path::new("/j")).unwrap();
        assert!(!r.exists(Path::new("/j")));
    }
}
