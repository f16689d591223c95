//! The kernel's side of a cgroup hierarchy on a fake tree (`--root DIR`):
//! what [`CgroupFs`] does where no kernel is behind the files —
//! the core files of a new group, controllers derived from the parent, knobs
//! present when their controller is enabled, and moves (three atomic file
//! writes in a recoverable order). The files are written with
//! [`Root::write_new`](crate::kernel::Root::write_new), which on a fake tree
//! is the emulation's atomic replace (`kernel::root`'s fake backend).

use super::{join_clamped, pid_cgroup, CgroupFs, EVENTS, PROCS, SUBTREE_CONTROL};
use crate::kernel::cgroup_text::{join_pids, parse_pids};
use crate::kernel::error::{Error, Result};
use std::io;
use std::path::PathBuf;

impl CgroupFs {
    /// The core files of a group [`CgroupFs::mkdir`] just created.
    pub(super) fn emulate_populate(&self, rel: &str) -> Result<()> {
        let root = &self.root;
        root.write_new(&self.file(rel, PROCS), "")?;
        root.write_new(&self.file(rel, SUBTREE_CONTROL), "")?;
        root.write_new(&self.file(rel, EVENTS), "populated 0\nfrozen 0")
    }

    /// `cgroup.controllers` of a group that has no such file: its parent's
    /// `subtree_control`. `missing` (the read error) for the base or a group
    /// that does not exist.
    pub(super) fn emulated_controllers(&self, rel: &str, missing: Error) -> Result<Vec<String>> {
        match Self::parent_rel(rel) {
            Some(parent) if self.exists(rel) => self.subtree_control(&parent),
            _ => Err(missing),
        }
    }

    /// Whether the knob's controller (the part before the first `.`) is
    /// enabled for an existing group; `cgroup.*` files are not controller knobs.
    pub(super) fn emulated_knob(&self, rel: &str, knob: &str) -> bool {
        let Some((ctrl, _)) = knob.split_once('.') else {
            return false;
        };
        if ctrl == "cgroup" || !self.exists(rel) {
            return false;
        }
        self.controllers(rel)
            .map(|cs| cs.iter().any(|c| c == ctrl))
            .unwrap_or(false)
    }

    /// Moves `pid` into group `rel`: ESRCH if `/proc/PID` does not exist,
    /// ENOENT if the group does not. Three atomic file writes, in this order:
    ///
    /// 1. the pid is appended to the new group's `cgroup.procs`;
    /// 2. the `0::` line of `/proc/PID/cgroup` names the new group — the
    ///    commit point: from here on the process *is* in the new group;
    /// 3. the pid is removed from the old group's `cgroup.procs` (the old
    ///    group is what `/proc/PID/cgroup` named before step 2).
    ///
    /// Killed after 1, the pid is listed in both groups and `/proc` names the
    /// old one: the new group may be removed (the pid is not its member) and
    /// a move anywhere works. Killed after 2, it is listed in both and `/proc`
    /// names the new one: the next move out of it takes it off the new
    /// group's list in step 3. Either way no process is listed nowhere, and
    /// `/proc/PID/cgroup` never names a group that does not list it — which
    /// is what `reset` needs to empty and remove every group it created.
    pub(super) fn emulate_move(&self, rel: &str, pid: i32) -> Result<()> {
        let root = &self.root;
        let procs_path = self.file(rel, PROCS);
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        if pid <= 0 || !root.is_dir(&proc_dir) {
            return Err(Error::io(
                "write",
                procs_path,
                io::Error::from_raw_os_error(libc::ESRCH),
            ));
        }
        let target = self.dir(rel);
        if !root.is_dir(&target) {
            return Err(Error::io(
                "write",
                procs_path,
                io::Error::from_raw_os_error(libc::ENOENT),
            ));
        }
        let mount = self.mount();
        let old = match pid_cgroup(root, pid) {
            Ok(old) => old.map(|o| join_clamped(&mount, &o)),
            Err(e) => {
                tracing::debug!(pid, error = %e, "fake move: no old cgroup");
                None
            }
        };

        // 1. Listed in the new group.
        let mut pids = match root.read(&procs_path) {
            Ok(t) => parse_pids(&t),
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e),
        };
        if !pids.contains(&pid) {
            pids.push(pid);
            root.write_new(&procs_path, &join_pids(&pids))?;
        }

        // 2. /proc/PID/cgroup names it (hybrid v1 lines are kept).
        let rel_to_mount = match target.strip_prefix(&mount) {
            Ok(r) if r.as_os_str().is_empty() => "/".to_string(),
            Ok(r) => format!("/{}", r.display()),
            Err(_) => target.display().to_string(),
        };
        let cg_path = proc_dir.join("cgroup");
        let old_text = match root.read(&cg_path) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => String::new(),
            Err(e) => return Err(e),
        };
        let new_line = format!("0::{rel_to_mount}");
        let mut replaced = false;
        let mut lines: Vec<&str> = Vec::new();
        for l in old_text.lines() {
            if l.starts_with("0::") {
                if !replaced {
                    lines.push(&new_line);
                    replaced = true;
                }
            } else if !l.trim().is_empty() {
                lines.push(l);
            }
        }
        if !replaced {
            lines.push(&new_line);
        }
        let new_text = lines.join("\n");
        if new_text.trim_end() != old_text.trim_end() {
            root.write_new(&cg_path, &new_text)?;
        }

        // 3. Off the old group's list.
        if let Some(old_dir) = old.filter(|d| *d != target) {
            let old_procs = old_dir.join(PROCS);
            if let Ok(text) = root.read(&old_procs) {
                let pids = parse_pids(&text);
                if pids.contains(&pid) {
                    let rest: Vec<i32> = pids.into_iter().filter(|&p| p != pid).collect();
                    root.write_new(&old_procs, &join_pids(&rest))?;
                }
            }
        }
        Ok(())
    }
}
