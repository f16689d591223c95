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
//! # Fake trees (SPEC §1)
//! On a fake root there is no kernel; where cgwarden depends on the
//! kernel's side (a new group's core files, controllers derived from the
//! parent, knobs present when their controller is enabled, additive
//! `subtree_control` writes, moves through `cgroup.procs`, rmdir refusal)
//! the methods here hand over to [`super::fake`], which owns that emulation.
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

use super::error::Result;
use super::psi::{parse_psi, Psi};
use super::root::Root;

pub use crate::knobs::group::CGROUP2_MOUNT;

/// Typed access to a cgroup v2 (sub)hierarchy below `base`.
#[derive(Clone, Debug)]
pub struct CgroupFs {
    root: Root,
    base: PathBuf,
}

const CONTROLLERS: &str = "cgroup.controllers";
const SUBTREE_CONTROL: &str = "cgroup.subtree_control";
const PROCS: &str = "cgroup.procs";
const EVENTS: &str = "cgroup.events";
const KILL: &str = "cgroup.kill";

/// Joins `rel` (slash-separated) onto `base`; `.`/empty segments are
/// skipped and `..` never climbs above `base`.
pub(super) fn join_clamped(base: &Path, rel: &str) -> PathBuf {
    let mut segs: Vec<&str> = Vec::new();
    for s in rel.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    let mut p = base.to_path_buf();
    for s in segs {
        p.push(s);
    }
    p
}

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
pub fn parse_flat_keyed(text: &str) -> BTreeMap<String, u64> {
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

/// Parses `cgroup.procs` / `cgroup.threads`: one pid per line; junk skipped.
pub fn parse_pids(text: &str) -> Vec<i32> {
    text.split_whitespace()
        .filter_map(|t| t.parse::<i32>().ok())
        .filter(|&p| p > 0)
        .collect()
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
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// Device path of the base (`settings.cgroup_root`).
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Device path of group `rel` (`""` = the base; `"a/b"` nested).
    /// `..` never leaves the base.
    pub fn dir(&self, rel: &str) -> PathBuf {
        join_clamped(&self.base, rel)
    }

    /// Device path of file `name` in group `rel`.
    pub fn file(&self, rel: &str, name: &str) -> PathBuf {
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
    pub fn controllers(&self, rel: &str) -> Result<Vec<String>> {
        match self.root.read(&self.file(rel, CONTROLLERS)) {
            Ok(t) => Ok(parse_tokens(&t)),
            Err(e) if e.is_not_found() => match self.root.emulation() {
                Some(fake) => fake.controllers(self, rel, e),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Controllers enabled for the children of `rel` (`cgroup.subtree_control`),
    /// `+` stripped.
    pub fn subtree_control(&self, rel: &str) -> Result<Vec<String>> {
        Ok(parse_tokens(
            &self.root.read(&self.file(rel, SUBTREE_CONTROL))?,
        ))
    }

    /// Enables controllers for the children of `rel`: writes `+a +b` to
    /// `cgroup.subtree_control` in one write (additive, on a fake root too).
    /// Empty list: no write.
    pub fn enable_controllers(&self, rel: &str, ctrls: &[&str]) -> Result<()> {
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
    pub fn mkdir(&self, rel: &str) -> Result<bool> {
        let created = self.root.mkdir(&self.dir(rel))?;
        if let Some(fake) = self.root.emulation().filter(|_| created) {
            fake.populate_group(self, rel)?;
        }
        Ok(created)
    }

    /// Removes group `rel` (see [`Root::rmdir`]).
    pub fn rmdir(&self, rel: &str) -> Result<()> {
        self.root.rmdir(&self.dir(rel))
    }

    /// Reads knob `knob` of group `rel`, trimmed.
    pub fn read(&self, rel: &str, knob: &str) -> Result<String> {
        self.root.read_trimmed(&self.file(rel, knob))
    }

    /// Writes knob `knob` of group `rel` (see [`Root::write`]). On a fake
    /// root a knob file that is absent is created if the group exists.
    pub fn write(&self, rel: &str, knob: &str, value: &str) -> Result<()> {
        self.root.write(&self.file(rel, knob), value)
    }

    /// True if knob `knob` exists in group `rel`. On a fake root also true
    /// when the knob's controller is enabled for the group (module docs).
    pub fn knob_exists(&self, rel: &str, knob: &str) -> bool {
        self.root.exists(&self.file(rel, knob))
            || self
                .root
                .emulation()
                .is_some_and(|fake| fake.knob_enabled(self, rel, knob))
    }

    /// Pids in group `rel` (`cgroup.procs`); junk lines are skipped.
    pub fn procs(&self, rel: &str) -> Result<Vec<i32>> {
        Ok(parse_pids(&self.root.read(&self.file(rel, PROCS))?))
    }

    /// Moves process `pid` into group `rel` by writing it to `cgroup.procs`.
    /// On a fake root the kernel's side is emulated (module docs). A vanished
    /// process gives an error with [`Error::is_gone`] (ESRCH).
    pub fn move_pid(&self, rel: &str, pid: i32) -> Result<()> {
        match self.root.emulation() {
            Some(fake) => fake.move_pid(self, rel, pid),
            None => self.root.write(&self.file(rel, PROCS), &pid.to_string()),
        }
    }

    /// SIGKILLs every process in group `rel` and its descendants: writes
    /// "1" to `cgroup.kill` (Linux ≥ 5.14); without that file, SIGKILLs
    /// every pid in `cgroup.procs`, again while new pids show up (a fork
    /// racing the read), at most 64 rounds. A process with SIGKILL pending
    /// cannot fork again, so the rounds end. Returns once every process was
    /// signalled, not when they are gone (see [`Self::populated`]).
    pub fn kill(&self, rel: &str) -> Result<()> {
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
    pub fn populated(&self, rel: &str) -> Result<bool> {
        match self.events(rel) {
            Ok(ev) if ev.contains_key("populated") => Ok(ev["populated"] != 0),
            Ok(_) => Ok(!self.procs(rel)?.is_empty()),
            Err(e) if e.is_not_found() && self.exists(rel) => Ok(!self.procs(rel)?.is_empty()),
            Err(e) => Err(e),
        }
    }

    /// Device path of the cgroup2 mount the base lives in (module docs).
    pub fn mount(&self) -> PathBuf {
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

    /// Super-block options of the cgroup2 mount the base lives in (from
    /// `/proc/self/mountinfo`: `nsdelegate`, `favordynmods`, ...); `None`
    /// when it cannot be told (a fake tree without mountinfo).
    pub fn mount_options(&self) -> Option<Vec<String>> {
        let text = self.root.read(Path::new("/proc/self/mountinfo")).ok()?;
        parse_cgroup2_options(&text, &self.mount())
    }

    /// A flat-keyed file of group `rel` (`memory.events`, `cpu.stat`, ...).
    pub fn flat_keyed(&self, rel: &str, knob: &str) -> Result<BTreeMap<String, u64>> {
        Ok(parse_flat_keyed(&self.root.read(&self.file(rel, knob))?))
    }

    /// `cgroup.events` of group `rel` (`populated`, `frozen`).
    pub fn events(&self, rel: &str) -> Result<BTreeMap<String, u64>> {
        self.flat_keyed(rel, EVENTS)
    }

    /// `memory.events` of group `rel` (`low`, `high`, `max`, `oom`, `oom_kill`, ...).
    pub fn memory_events(&self, rel: &str) -> Result<BTreeMap<String, u64>> {
        self.flat_keyed(rel, "memory.events")
    }

    /// `<resource>.pressure` of group `rel` (`resource`: cpu, memory, io, irq).
    pub fn psi(&self, rel: &str, resource: &str) -> Result<Psi> {
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
    let text = root.read(Path::new(&format!("/proc/{pid}/cgroup")))?;
    Ok(parse_pid_cgroup(&text))
}

/// The super options of the cgroup2 mount at `mount_point` in a
/// `/proc/PID/mountinfo` text (proc(5): `... MOUNTPOINT OPTS [TAGS] - TYPE
/// SOURCE SUPEROPTS`).
pub fn parse_cgroup2_options(mountinfo: &str, mount_point: &Path) -> Option<Vec<String>> {
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

/// Parses the content of `/proc/PID/cgroup` (see [`pid_cgroup`]).
pub fn parse_pid_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
        .filter(|p| p.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    #[test]
    fn cgroup2_mount_options_from_mountinfo() {
        let mi = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                  41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n\
                  50 1 0:40 / /mnt/cg rw - cgroup2 none rw,favordynmods,memory_recursiveprot\n";
        let o = parse_cgroup2_options(mi, Path::new("/sys/fs/cgroup/unified")).unwrap();
        assert_eq!(o, ["rw", "nsdelegate"]);
        let o = parse_cgroup2_options(mi, Path::new("/mnt/cg")).unwrap();
        assert!(o.iter().any(|x| x == "favordynmods"));
        // A tmpfs at the path is not a cgroup2 mount; an unknown path is none.
        assert_eq!(parse_cgroup2_options(mi, Path::new("/sys/fs/cgroup")), None);
        assert_eq!(
            parse_cgroup2_options("garbage\n - \n", Path::new("/x")),
            None
        );
    }

    /// Fake tree with a cgroup2 mount at /sys/fs/cgroup offering cpu/memory/io.
    fn tree() -> (TempDir, CgroupFs) {
        let t = TempDir::new().unwrap();
        let cg = t.path().join("sys/fs/cgroup");
        fs::create_dir_all(&cg).unwrap();
        fs::write(cg.join("cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
        fs::write(cg.join("cgroup.subtree_control"), "").unwrap();
        fs::write(cg.join("cgroup.procs"), "1\n100\n").unwrap();
        let fs = CgroupFs::new(Root::fake(t.path()), "/sys/fs/cgroup");
        (t, fs)
    }

    fn add_proc(t: &TempDir, pid: i32, cgroup: &str) {
        let d = t.path().join(format!("proc/{pid}"));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("cgroup"), cgroup).unwrap();
    }

    #[test]
    fn paths() {
        let (_t, c) = tree();
        assert_eq!(c.dir(""), PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(c.dir("a/b"), PathBuf::from("/sys/fs/cgroup/a/b"));
        assert_eq!(c.dir("/a//./b/"), PathBuf::from("/sys/fs/cgroup/a/b"));
        assert_eq!(c.dir("../../etc"), PathBuf::from("/sys/fs/cgroup/etc"));
        assert_eq!(
            c.file("a", "cpu.weight"),
            PathBuf::from("/sys/fs/cgroup/a/cpu.weight")
        );
        assert_eq!(
            c.file("", "cgroup.procs"),
            PathBuf::from("/sys/fs/cgroup/cgroup.procs")
        );
        assert_eq!(c.file("a", "../../x"), PathBuf::from("/sys/fs/cgroup/x"));
    }

    #[test]
    fn controllers_and_subtree_control() {
        let (t, c) = tree();
        assert_eq!(
            c.controllers("").unwrap(),
            ["cpuset", "cpu", "io", "memory", "pids"]
        );
        assert!(c.subtree_control("").unwrap().is_empty());
        fs::write(
            t.path().join("sys/fs/cgroup/cgroup.subtree_control"),
            "+cpu +memory -io\n",
        )
        .unwrap();
        assert_eq!(c.subtree_control("").unwrap(), ["cpu", "memory"]);
        c.enable_controllers("", &["memory", "+cpuset"]).unwrap();
        assert_eq!(c.subtree_control("").unwrap(), ["cpu", "memory", "cpuset"]);
        // merged like the kernel's toggles; tokens keep their spelling
        assert_eq!(
            c.read("", "cgroup.subtree_control").unwrap(),
            "+cpu +memory +cpuset"
        );
        c.enable_controllers("", &[]).unwrap();
        // a new group inherits the parent's subtree_control as its controllers
        assert!(c.mkdir("g").unwrap());
        assert!(!c.mkdir("g").unwrap());
        assert_eq!(c.controllers("g").unwrap(), ["cpu", "memory", "cpuset"]);
        assert!(c.procs("g").unwrap().is_empty());
        assert_eq!(c.events("g").unwrap()["populated"], 0);
        assert!(c.controllers("missing").unwrap_err().is_not_found());
    }

    #[test]
    fn real_enable_writes_plus_tokens() {
        let t = TempDir::new().unwrap();
        fs::write(t.path().join("cgroup.subtree_control"), "").unwrap();
        // A non-fake Root on a tempdir: exercises the real-kernel formatting.
        let c = CgroupFs::new(Root::real_at(t.path()), "/");
        c.enable_controllers("", &["cpu", "+memory"]).unwrap();
        assert_eq!(
            fs::read_to_string(t.path().join("cgroup.subtree_control")).unwrap(),
            "+cpu +memory"
        );
        // real: a knob that does not exist is never created
        assert!(c.write("", "cpu.wieght", "1").unwrap_err().is_not_found());
        assert!(!t.path().join("cpu.wieght").exists());
        assert!(!c.knob_exists("", "cpu.weight"));
    }

    #[test]
    fn knobs_read_write_exists() {
        let (t, c) = tree();
        c.mkdir("g").unwrap();
        assert!(!c.knob_exists("g", "memory.high"));
        c.enable_controllers("", &["cpu", "memory"]).unwrap();
        assert!(c.knob_exists("g", "memory.high"));
        assert!(c.knob_exists("g", "cpu.uclamp.min"));
        assert!(!c.knob_exists("g", "io.weight"));
        assert!(!c.knob_exists("g", "cgroup.freeze"));
        assert!(c.knob_exists("g", "cgroup.procs"));
        assert!(!c.knob_exists("nogroup", "memory.high"));
        assert!(c.read("g", "memory.high").unwrap_err().is_not_found());
        c.write("g", "memory.high", "max").unwrap();
        assert_eq!(c.read("g", "memory.high").unwrap(), "max");
        assert_eq!(
            fs::read_to_string(t.path().join("sys/fs/cgroup/g/memory.high")).unwrap(),
            "max\n"
        );
        assert!(c.exists("g"));
        assert!(!c.exists("h"));
        // write into a group that does not exist fails, creates nothing
        assert!(c.write("h", "cpu.weight", "1").unwrap_err().is_not_found());
        assert!(!c.exists("h"));
    }

    #[test]
    fn procs_tolerates_junk() {
        let (t, c) = tree();
        fs::write(
            t.path().join("sys/fs/cgroup/cgroup.procs"),
            "1\nabc\n-5\n  42 \n\n",
        )
        .unwrap();
        assert_eq!(c.procs("").unwrap(), [1, 42]);
    }

    #[test]
    fn move_pid_emulation() {
        let (t, c) = tree();
        c.mkdir("a").unwrap();
        c.mkdir("b").unwrap();
        add_proc(&t, 100, "0::/\n");
        c.move_pid("a", 100).unwrap();
        assert_eq!(c.procs("a").unwrap(), [100]);
        assert_eq!(c.procs("").unwrap(), [1]);
        assert_eq!(pid_cgroup(c.root(), 100).unwrap().as_deref(), Some("/a"));
        c.move_pid("a", 100).unwrap(); // idempotent
        assert_eq!(c.procs("a").unwrap(), [100]);
        c.move_pid("b", 100).unwrap();
        assert!(c.procs("a").unwrap().is_empty());
        assert_eq!(c.procs("b").unwrap(), [100]);
        // hybrid lines are kept
        add_proc(&t, 7, "12:pids:/x\n1:name=systemd:/y\n");
        c.move_pid("a", 7).unwrap();
        assert_eq!(
            fs::read_to_string(t.path().join("proc/7/cgroup")).unwrap(),
            "12:pids:/x\n1:name=systemd:/y\n0::/a\n"
        );
        // vanished pid: ESRCH, nothing written
        let e = c.move_pid("a", 999).unwrap_err();
        assert!(e.is_gone());
        assert_eq!(e.errno(), Some(libc::ESRCH));
        assert_eq!(c.procs("a").unwrap(), [7]);
        // missing group
        assert!(c.move_pid("zz", 7).unwrap_err().is_not_found());
        // back to the root
        c.move_pid("", 7).unwrap();
        assert_eq!(pid_cgroup(c.root(), 7).unwrap().as_deref(), Some("/"));
        assert!(c.procs("a").unwrap().is_empty());
    }

    /// `kill` with real-kernel semantics on a test directory: `cgroup.kill`
    /// when present, else SIGKILL to every listed pid.
    #[test]
    fn kill_writes_cgroup_kill_or_signals_every_pid() {
        let t = TempDir::new().unwrap();
        let run = t.path().join("cg/cgwarden.hooks/h-1");
        fs::create_dir_all(&run).unwrap();
        let c = CgroupFs::new(Root::real_at(t.path()), "/cg");
        fs::write(run.join("cgroup.kill"), "").unwrap();
        c.kill("cgwarden.hooks/h-1").unwrap();
        assert_eq!(fs::read_to_string(run.join("cgroup.kill")).unwrap(), "1");
        // Before 5.14: no cgroup.kill.
        fs::remove_file(run.join("cgroup.kill")).unwrap();
        let mut a = std::process::Command::new("/bin/sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mut b = std::process::Command::new("/bin/sleep")
            .arg("60")
            .spawn()
            .unwrap();
        fs::write(
            run.join("cgroup.procs"),
            format!("{}\n{}\n", a.id(), b.id()),
        )
        .unwrap();
        fs::write(run.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        assert!(c.populated("cgwarden.hooks/h-1").unwrap());
        c.kill("cgwarden.hooks/h-1").unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(a.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(b.wait().unwrap().signal(), Some(libc::SIGKILL));
        fs::write(run.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
        assert!(!c.populated("cgwarden.hooks/h-1").unwrap());
        // A group that does not exist: an error naming its path.
        let e = c.kill("cgwarden.hooks/h-2").unwrap_err();
        assert!(e.to_string().contains("/cg/cgwarden.hooks/h-2"), "{e}");
    }

    #[test]
    fn move_pid_in_delegated_subtree() {
        let (t, _) = tree();
        let sub = t.path().join("sys/fs/cgroup/cgwarden.slice");
        fs::create_dir_all(&sub).unwrap();
        fs::write(sub.join("cgroup.controllers"), "cpu memory").unwrap();
        fs::write(sub.join("cgroup.subtree_control"), "cpu memory").unwrap();
        let c = CgroupFs::new(Root::fake(t.path()), "/sys/fs/cgroup/cgwarden.slice");
        assert_eq!(c.mount(), PathBuf::from("/sys/fs/cgroup"));
        c.mkdir("vision").unwrap();
        add_proc(&t, 55, "0::/user.slice\n");
        c.move_pid("vision", 55).unwrap();
        assert_eq!(
            pid_cgroup(c.root(), 55).unwrap().as_deref(),
            Some("/cgwarden.slice/vision")
        );
    }

    #[test]
    fn mount_detection() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        // nothing populated: rule-based fallback
        assert_eq!(
            CgroupFs::new(r.clone(), "/sys/fs/cgroup/x").mount(),
            PathBuf::from("/sys/fs/cgroup")
        );
        assert_eq!(
            CgroupFs::new(r.clone(), "/sys/fs/cgroup/unified/x").mount(),
            PathBuf::from("/sys/fs/cgroup/unified")
        );
        assert_eq!(
            CgroupFs::new(r.clone(), "/cg").mount(),
            PathBuf::from("/cg")
        );
        // hybrid: /sys/fs/cgroup is a tmpfs without cgroup.controllers
        let u = t.path().join("sys/fs/cgroup/unified/x");
        fs::create_dir_all(&u).unwrap();
        fs::write(u.join("cgroup.controllers"), "").unwrap();
        fs::write(u.parent().unwrap().join("cgroup.controllers"), "").unwrap();
        assert_eq!(
            CgroupFs::new(r.clone(), "/sys/fs/cgroup/unified/x").mount(),
            PathBuf::from("/sys/fs/cgroup/unified")
        );
        // custom mount point
        fs::create_dir_all(t.path().join("cg/a")).unwrap();
        fs::write(t.path().join("cg/cgroup.controllers"), "").unwrap();
        fs::write(t.path().join("cg/a/cgroup.controllers"), "").unwrap();
        assert_eq!(CgroupFs::new(r, "/cg/a").mount(), PathBuf::from("/cg"));
    }

    #[test]
    fn events_and_flat_keyed() {
        let (t, c) = tree();
        fs::write(
            t.path().join("sys/fs/cgroup/memory.events"),
            "low 0\nhigh 12\nmax 3\noom 0\noom_kill 1\njunk\nbad x\nthree a 1\n",
        )
        .unwrap();
        let m = c.memory_events("").unwrap();
        assert_eq!(m.len(), 5);
        assert_eq!(m["high"], 12);
        assert_eq!(m["oom_kill"], 1);
        assert!(c.events("").unwrap_err().is_not_found());
        assert!(parse_flat_keyed("").is_empty());
    }

    #[test]
    fn psi_of_group() {
        let (t, c) = tree();
        fs::write(
            t.path().join("sys/fs/cgroup/cpu.pressure"),
            "some avg10=2.00 avg60=1.00 avg300=0.50 total=10\n",
        )
        .unwrap();
        let p = c.psi("", "cpu").unwrap();
        assert_eq!(p.some.unwrap().avg10, 2.0);
        assert!(p.full.is_none());
        assert!(c.psi("", "io").unwrap_err().is_not_found());
    }

    #[test]
    fn pid_cgroup_parsing() {
        assert_eq!(parse_pid_cgroup("0::/a/b\n").as_deref(), Some("/a/b"));
        assert_eq!(
            parse_pid_cgroup("11:cpu:/x\n0::/init.scope\n").as_deref(),
            Some("/init.scope")
        );
        assert_eq!(parse_pid_cgroup("11:cpu:/x\n"), None);
        assert_eq!(parse_pid_cgroup(""), None);
        assert_eq!(parse_pid_cgroup("0::garbage"), None);
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        assert!(pid_cgroup(&r, 4).unwrap_err().is_gone());
        add_proc(&t, 4, "0::/\n");
        assert_eq!(pid_cgroup(&r, 4).unwrap().as_deref(), Some("/"));
    }
}
