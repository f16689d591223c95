//! Thin typed access to a cgroup v2 hierarchy: directories, core files
//! (`cgroup.controllers`, `cgroup.subtree_control`, `cgroup.procs`,
//! `cgroup.events`) and controller knobs, addressed as `(rel, knob)` where
//! `rel` is a group path relative to `settings.cgroup_root` (the *base*, the
//! cgroup2 mount or a delegated subtree of it).
//!
//! This module owns what a group "looks like" on disk. It does not decide
//! what to write; the engine does.
//!
//! No cgroup crate is used on purpose: `cgroups-rs` hard-wires
//! `/sys/fs/cgroup` (we need an injectable [`Root`] for `--root` fake trees
//! and delegated subtrees) and maps several v2 knobs wrongly. Plain file
//! access is all cgroup v2 needs.
//!
//! # Fake trees
//! On a fake root there is no kernel; where cgwarden depends on the
//! kernel's side (a new group's core files, controllers derived from the
//! parent, knobs present when their controller is enabled, additive
//! `subtree_control` writes, moves through `cgroup.procs`, rmdir refusal)
//! the methods here hand over to their child module `fake`, which owns that
//! emulation (its atomic writes are the fake backend of `Root`).
//!
//! # The cgroup2 mount
//! [`CgroupFs::mount`] walks up from the base while the parent directory
//! also has a `cgroup.controllers`; the topmost such directory is the mount
//! (this works on real kernels — including hybrid setups with
//! `/sys/fs/cgroup/unified` — and on fake trees without parsing
//! `/proc/self/mountinfo`). If the base has no `cgroup.controllers` (a fake
//! tree not populated yet), it falls back to `/sys/fs/cgroup/unified` when
//! the base is below it, else `/sys/fs/cgroup` when the base is below that,
//! else the base itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use super::cgroup_text::{join_clamped, parse_pid_cgroup, parse_pids};
use super::error::Result;
use super::psi::{parse_psi, Psi};
use super::root::Root;

pub(crate) use crate::knobs::group::CGROUP2_MOUNT;

/// Open `cgroup.procs` files by group ([`CgroupFs::move_pid_kept`]).
#[derive(Debug, Default)]
pub(crate) struct ProcsFiles {
    /// The open file and its path (for errors), by group: a move under a
    /// flood builds no path.
    files: std::collections::HashMap<String, (std::fs::File, PathBuf)>,
}

impl ProcsFiles {
    /// Files kept open at most (a policy has tens of groups).
    const MAX: usize = 256;

    fn files_len_capped(&self) -> bool {
        self.files.len() >= Self::MAX
    }
}

/// Typed access to a cgroup v2 (sub)hierarchy below `base`.
#[derive(Clone, Debug)]
pub struct CgroupFs {
    root: Root,
    base: PathBuf,
}

mod fake;

pub(crate) const CONTROLLERS: &str = "cgroup.controllers";
/// The mount table whose cgroup2 super-block options are read.
pub(crate) const MOUNTINFO: &str = "/proc/self/mountinfo";
const SUBTREE_CONTROL: &str = "cgroup.subtree_control";
const PROCS: &str = "cgroup.procs";
const EVENTS: &str = "cgroup.events";
const KILL: &str = "cgroup.kill";

/// Parses a whitespace-separated controller list, stripping a leading `+`
/// and dropping `-ctrl` tokens.
fn parse_tokens(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|t| !t.starts_with('-'))
        .map(|t| t.trim_start_matches('+'))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses flat-keyed files (`cgroup.events`, `memory.events`, `cpu.stat`,
/// `memory.stat`): `key value` lines. Lines that are not exactly a key and
/// an unsigned number are skipped.
pub(crate) fn parse_flat_keyed(text: &str) -> BTreeMap<String, u64> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if let Ok(v) = v.parse::<u64>() {
            map.insert(k.to_string(), v);
        }
    }
    map
}

impl CgroupFs {
    /// Access to the hierarchy below `base` (device path of `settings.cgroup_root`).
    pub fn new(root: Root, base: impl Into<PathBuf>) -> Self {
        CgroupFs {
            root,
            base: Root::normalize(&base.into()),
        }
    }

    /// The [`Root`] this hierarchy is accessed through.
    pub(crate) fn root(&self) -> &Root {
        &self.root
    }

    /// Device path of the base (`settings.cgroup_root`).
    pub(crate) fn base(&self) -> &Path {
        &self.base
    }

    /// Device path of group `rel` (`""` = the base; `"a/b"` nested).
    /// `..` never leaves the base.
    pub(crate) fn dir(&self, rel: &str) -> PathBuf {
        join_clamped(&self.base, rel)
    }

    /// Device path of file `name` in group `rel`.
    pub(crate) fn file(&self, rel: &str, name: &str) -> PathBuf {
        join_clamped(&self.base, &format!("{rel}/{name}"))
    }

    /// True if group `rel` exists (is a directory).
    pub fn exists(&self, rel: &str) -> bool {
        self.root.is_dir(&self.dir(rel))
    }

    pub(super) fn parent_rel(rel: &str) -> Option<String> {
        let segs: Vec<&str> = rel
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        if segs.is_empty() {
            None
        } else {
            Some(segs[..segs.len() - 1].join("/"))
        }
    }

    /// Controllers available in group `rel` (`cgroup.controllers`).
    pub(crate) fn controllers(&self, rel: &str) -> Result<Vec<String>> {
        match self.root.read(&self.file(rel, CONTROLLERS)) {
            Ok(t) => Ok(parse_tokens(&t)),
            Err(e) if e.is_not_found() && self.root.emulation().is_some() => {
                self.emulated_controllers(rel, e)
            }
            Err(e) => Err(e),
        }
    }

    /// Controllers enabled for the children of `rel` (`cgroup.subtree_control`),
    /// `+` stripped.
    pub(crate) fn subtree_control(&self, rel: &str) -> Result<Vec<String>> {
        Ok(parse_tokens(
            &self.root.read(&self.file(rel, SUBTREE_CONTROL))?,
        ))
    }

    /// Enables controllers for the children of `rel`: writes `+a +b` to
    /// `cgroup.subtree_control` in one write (additive, on a fake root too).
    /// Empty list: no write.
    pub(crate) fn enable_controllers(&self, rel: &str, ctrls: &[&str]) -> Result<()> {
        if ctrls.is_empty() {
            return Ok(());
        }
        let path = self.file(rel, SUBTREE_CONTROL);
        let value = ctrls
            .iter()
            .map(|c| format!("+{}", c.trim_start_matches('+')))
            .collect::<Vec<_>>()
            .join(" ");
        self.root.write(&path, &value)
    }

    /// Creates group `rel` (one level). `Ok(false)` if it already existed.
    /// On a fake root the core files are created too (see module docs).
    pub(crate) fn mkdir(&self, rel: &str) -> Result<bool> {
        let created = self.root.mkdir(&self.dir(rel))?;
        if created && self.root.emulation().is_some() {
            self.emulate_populate(rel)?;
        }
        Ok(created)
    }

    /// Removes group `rel` (see [`Root::rmdir`]).
    pub(crate) fn rmdir(&self, rel: &str) -> Result<()> {
        self.root.rmdir(&self.dir(rel))
    }

    /// Reads knob `knob` of group `rel`, trimmed.
    pub(crate) fn read(&self, rel: &str, knob: &str) -> Result<String> {
        self.root.read_trimmed(&self.file(rel, knob))
    }

    /// Writes knob `knob` of group `rel` (see [`Root::write`]). On a fake
    /// root a knob file that is absent is created if the group exists.
    #[cfg(test)]
    pub(crate) fn write(&self, rel: &str, knob: &str, value: &str) -> Result<()> {
        self.root.write(&self.file(rel, knob), value)
    }

    /// True if knob `knob` exists in group `rel`. On a fake root also true
    /// when the knob's controller is enabled for the group (module docs).
    pub(crate) fn knob_exists(&self, rel: &str, knob: &str) -> bool {
        self.root.exists(&self.file(rel, knob))
            || (self.root.emulation().is_some() && self.emulated_knob(rel, knob))
    }

    /// Pids in group `rel` (`cgroup.procs`); junk lines are skipped.
    pub(crate) fn procs(&self, rel: &str) -> Result<Vec<i32>> {
        Ok(parse_pids(&self.root.read(&self.file(rel, PROCS))?))
    }

    /// Moves process `pid` into group `rel` by writing it to `cgroup.procs`.
    /// On a fake root the kernel's side is emulated (module docs). A vanished
    /// process gives an error with [`Error::is_gone`] (ESRCH).
    pub(crate) fn move_pid(&self, rel: &str, pid: i32) -> Result<()> {
        if self.root.emulation().is_some() {
            return self.emulate_move(rel, pid);
        }
        self.root.write(&self.file(rel, PROCS), &pid.to_string())
    }

    /// [`Self::move_pid`] through `open`, which keeps each group's
    /// `cgroup.procs` open between moves (under an exec flood a move is
    /// then one write(2), not a path walk, an open, a write and
    /// closes). A file whose cgroup was removed (ENODEV, its kernfs node
    /// is dead) is opened again once: the group may have been recreated.
    pub(crate) fn move_pid_kept(&self, open: &mut ProcsFiles, rel: &str, pid: i32) -> Result<()> {
        if self.root.emulation().is_some() {
            return self.move_pid(rel, pid);
        }
        let value = pid.to_string();
        for fresh in [false, true] {
            if fresh {
                open.files.remove(rel);
            }
            if !open.files.contains_key(rel) {
                if open.files_len_capped() {
                    // Bounded: groups come and go with reloads.
                    return self.move_pid(rel, pid);
                }
                let path = self.file(rel, PROCS);
                let f = self
                    .root
                    .open_beneath("open", &path, nix::fcntl::OFlag::O_WRONLY, 0)?;
                open.files.insert(rel.to_string(), (f, path));
            }
            let Some((f, path)) = open.files.get_mut(rel) else {
                continue;
            };
            match super::root::write_once(f, path, &value) {
                Err(e) if !fresh && e.errno() == Some(libc::ENODEV) => continue,
                r => return r,
            }
        }
        Ok(())
    }

    /// SIGKILLs every process in group `rel` and its descendants: writes
    /// "1" to `cgroup.kill` (Linux ≥ 5.14); without that file, SIGKILLs
    /// every pid in `cgroup.procs`, again while new pids show up (a fork
    /// racing the read), at most 64 rounds. A process with SIGKILL pending
    /// cannot fork again, so the rounds end. Returns once every process was
    /// signalled, not when they are gone (see [`Self::populated`]).
    pub(crate) fn kill(&self, rel: &str) -> Result<()> {
        match self.root.write(&self.file(rel, KILL), "1") {
            Err(e) if e.is_not_found() && self.exists(rel) => {}
            r => return r,
        }
        let mut signalled: Vec<i32> = Vec::new();
        for _ in 0..64 {
            let fresh: Vec<i32> = self
                .procs(rel)?
                .into_iter()
                .filter(|p| !signalled.contains(p))
                .collect();
            if fresh.is_empty() {
                return Ok(());
            }
            for p in fresh {
                match nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                ) {
                    Ok(()) | Err(nix::errno::Errno::ESRCH) => signalled.push(p),
                    Err(e) => {
                        return Err(super::Error::other(
                            self.file(rel, PROCS),
                            format!("SIGKILL to pid {p}: {e}"),
                        ))
                    }
                }
            }
        }
        Err(super::Error::other(
            self.file(rel, PROCS),
            "new processes kept appearing while killing the group",
        ))
    }

    /// True while group `rel` or a descendant holds a process (`populated`
    /// in `cgroup.events`; `cgroup.procs` when that file is absent).
    pub(crate) fn populated(&self, rel: &str) -> Result<bool> {
        match self.events(rel) {
            Ok(ev) if ev.contains_key("populated") => Ok(ev["populated"] != 0),
            Ok(_) => Ok(!self.procs(rel)?.is_empty()),
            Err(e) if e.is_not_found() && self.exists(rel) => Ok(!self.procs(rel)?.is_empty()),
            Err(e) => Err(e),
        }
    }

    /// Device path of the cgroup2 mount the base lives in (module docs).
    pub(crate) fn mount(&self) -> PathBuf {
        let has = |d: &Path| self.root.exists(&d.join(CONTROLLERS));
        if has(&self.base) {
            let mut cur = self.base.clone();
            while let Some(parent) = cur.parent() {
                if parent == cur || !has(parent) {
                    break;
                }
                cur = parent.to_path_buf();
            }
            return cur;
        }
        let unified = Path::new("/sys/fs/cgroup/unified");
        let cgroup = Path::new("/sys/fs/cgroup");
        if self.base.starts_with(unified) {
            unified.to_path_buf()
        } else if self.base.starts_with(cgroup) {
            cgroup.to_path_buf()
        } else {
            self.base.clone()
        }
    }

    /// Where the base lies inside its cgroup2 mount, as `/proc/PID/cgroup`
    /// shows paths: `""` when the base is the mount, else `/a/b`. A group
    /// `rel` is then `{prefix}/{rel}` there.
    pub(crate) fn proc_prefix(&self) -> String {
        match self.base.strip_prefix(self.mount()) {
            Ok(p) if !p.as_os_str().is_empty() => format!("/{}", p.display()),
            _ => String::new(),
        }
    }

    /// Super-block options of the cgroup2 mount the base lives in (from
    /// `/proc/self/mountinfo`: `nsdelegate`, `favordynmods`, ...); `None`
    /// when it cannot be told (a fake tree without mountinfo).
    pub(crate) fn mount_options(&self) -> Option<Vec<String>> {
        let text = self.root.read(Path::new(MOUNTINFO)).ok()?;
        parse_cgroup2_options(&text, &self.mount())
    }

    /// A flat-keyed file of group `rel` (`memory.events`, `cpu.stat`, ...).
    pub(crate) fn flat_keyed(&self, rel: &str, knob: &str) -> Result<BTreeMap<String, u64>> {
        Ok(parse_flat_keyed(&self.root.read(&self.file(rel, knob))?))
    }

    /// `cgroup.events` of group `rel` (`populated`, `frozen`).
    pub(crate) fn events(&self, rel: &str) -> Result<BTreeMap<String, u64>> {
        self.flat_keyed(rel, EVENTS)
    }

    /// `memory.events` of group `rel` (`low`, `high`, `max`, `oom`, `oom_kill`, ...).
    pub(crate) fn memory_events(&self, rel: &str) -> Result<BTreeMap<String, u64>> {
        self.flat_keyed(rel, "memory.events")
    }

    /// `<resource>.pressure` of group `rel` (`resource`: cpu, memory, io, irq).
    pub(crate) fn psi(&self, rel: &str, resource: &str) -> Result<Psi> {
        Ok(parse_psi(
            &self
                .root
                .read(&self.file(rel, &format!("{resource}.pressure")))?,
        ))
    }
}

/// The cgroup v2 path of process `pid`: the `0::/path` line of
/// `/proc/PID/cgroup` → `Some("/path")`; `None` if there is no v2 line.
/// A vanished process is an error with [`Error::is_gone`].
pub fn pid_cgroup(root: &Root, pid: i32) -> Result<Option<String>> {
    // One read(2): the exec path reads it for every matched process.
    let text = root.read_small(&super::procfs::proc_file(pid, "cgroup"))?;
    Ok(parse_pid_cgroup(&text))
}

/// The super options of the cgroup2 mount at `mount_point` in a
/// `/proc/PID/mountinfo` text (proc(5): `... MOUNTPOINT OPTS [TAGS] - TYPE
/// SOURCE SUPEROPTS`).
pub(crate) fn parse_cgroup2_options(mountinfo: &str, mount_point: &Path) -> Option<Vec<String>> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        if r.next()? != "cgroup2" {
            return None;
        }
        let point = left.split_whitespace().nth(4)?;
        if Path::new(point) != mount_point {
            return None;
        }
        let opts = r.nth(1).unwrap_or("");
        Some(opts.split(',').map(str::to_string).collect())
    })
}

#[cfg(test)]
mod tests;
