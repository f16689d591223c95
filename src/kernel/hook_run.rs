//! The kernel side of a hook run: the cgroup each run
//! lives in and what the forked child does before `exec`.
//!
//! - [`HOOKS_PARENT`] (`<cgroup_root>/cgwarden.hooks`) holds one child
//!   cgroup per run, `<hook>-<seq>`. Policy group names match
//!   `[a-z0-9][a-z0-9_-]{0,63}` (no dot), so `cgwarden.hooks` can never be
//!   a policy group; hook names match the same pattern, so a run name is a
//!   single path component under `NAME_MAX`.
//! - [`ChildSetup::apply`] runs in the child between `fork` and `exec`
//!   (std's `pre_exec`), so it only makes async-signal-safe calls on data
//!   computed before the fork: `open`/`write`/`close` and plain syscalls.
//! - Killing a run is [`CgroupFs::kill`](super::cgroupfs::CgroupFs::kill):
//!   `cgroup.kill` (Linux ≥ 5.14), else SIGKILL to every listed pid until
//!   no new one shows up. Neither `setsid` nor a double fork escapes it.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cgroupfs::CgroupFs;
use super::error::Result;

pub(crate) use crate::knobs::group::HOOKS_PARENT;

/// Relative path (to `settings.cgroup_root`) of run `seq` of hook `hook`.
pub(crate) fn run_rel(hook: &str, seq: u64) -> String {
    format!("{HOOKS_PARENT}/{hook}-{seq}")
}

/// Kills and removes every run cgroup under [`HOOKS_PARENT`] (runs a
/// crashed daemon left; `reset` before removing the parent). Waits up to
/// `wait` per run for its processes to die. Returns the device path of each
/// run removed, or the error that kept it.
pub(crate) fn remove_runs(cg: &CgroupFs, wait: Duration) -> Vec<Result<PathBuf>> {
    let names = match cg.root().list_dir(&cg.dir(HOOKS_PARENT)) {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Vec::new(),
        Err(e) => return vec![Err(e)],
    };
    let mut out = Vec::new();
    for name in names {
        let rel = format!("{HOOKS_PARENT}/{name}");
        if !cg.exists(&rel) {
            continue; // an interface file, not a run
        }
        if let Err(e) = cg.kill(&rel) {
            out.push(Err(e));
            continue;
        }
        let t0 = Instant::now();
        while cg.populated(&rel).unwrap_or(false) && t0.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(10));
        }
        out.push(cg.rmdir(&rel).map(|()| cg.dir(&rel)));
    }
    out
}

/// What a hook child does before `exec`, prepared before the fork.
#[derive(Clone)]
pub(crate) struct ChildSetup {
    /// Host path of the run cgroup's `cgroup.procs`, joined by writing "0".
    procs: Option<CString>,
    /// The forking thread's CPU affinity, put back after joining: moving
    /// into a cpuset cgroup resets it to the cpuset's CPUs, which may
    /// include isolated RT CPUs the daemon keeps off (`settings.daemon.cpus`).
    affinity: Option<libc::cpu_set_t>,
}

impl std::fmt::Debug for ChildSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSetup")
            .field("procs", &self.procs)
            .field("affinity", &self.affinity.is_some())
            .finish()
    }
}

impl ChildSetup {
    /// A setup that joins the cgroup whose `cgroup.procs` is at host path
    /// `procs` (none: the child stays in the daemon's cgroup).
    pub(crate) fn new(procs: Option<&Path>) -> std::io::Result<ChildSetup> {
        let procs = match procs {
            Some(p) => Some(CString::new(p.as_os_str().as_bytes()).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: path contains a NUL byte", p.display()),
                )
            })?),
            None => None,
        };
        let affinity = procs.as_ref().and_then(|_| {
            // SAFETY: a zeroed cpu_set_t is a valid empty set; the size passed
            // is its size.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                let ok =
                    libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
                (ok == 0).then_some(set)
            }
        });
        Ok(ChildSetup { procs, affinity })
    }

    /// In the forked child: join the run cgroup, then drop whatever
    /// priority the daemon has — `SCHED_OTHER`, nice 0, `oom_score_adj` 0.
    ///
    /// Joining and the scheduling policy must succeed (else the spawn
    /// fails: a hook must neither escape its cgroup nor run real-time).
    /// For nice and `oom_score_adj`, EACCES/EPERM is ignored: it only means
    /// the inherited value is *weaker* than 0 (nice > 0, adj > 0) and an
    /// unprivileged daemon may not strengthen it — the point is to take the
    /// daemon's protection away, which the child then does not have.
    ///
    /// Async-signal-safe: no allocation, no locks; errno read right after
    /// each failing call.
    pub(crate) fn apply(&self) -> io::Result<()> {
        if let Some(p) = &self.procs {
            write_c(p, b"0")?;
            if let Some(set) = &self.affinity {
                // Best effort: fails (EINVAL) only when the old CPUs and the
                // cpuset do not meet, and then the cpuset's CPUs stay.
                // SAFETY: a valid set and its size.
                unsafe {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                }
            }
        }
        // SAFETY: plain syscalls on the calling (only) thread with valid
        // arguments.
        unsafe {
            let policy = libc::sched_getscheduler(0);
            if policy < 0 {
                return Err(io::Error::last_os_error());
            }
            if policy & !libc::SCHED_RESET_ON_FORK != libc::SCHED_OTHER {
                let param = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if libc::setpriority(libc::PRIO_PROCESS, 0, 0) != 0 {
                ignore_weaker(io::Error::last_os_error())?;
            }
        }
        if let Err(e) = write_c(c"/proc/self/oom_score_adj", b"0") {
            ignore_weaker(e)?;
        }
        // The daemon runs without transparent huge pages; its hooks with
        // the system's default (the flag survives fork and exec).
        super::residency::allow_thp();
        Ok(())
    }
}

fn ignore_weaker(e: io::Error) -> io::Result<()> {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => Ok(()),
        _ => Err(e),
    }
}

/// open(O_WRONLY|O_CLOEXEC) + one write + close; async-signal-safe.
fn write_c(path: &std::ffi::CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; `value` is a valid buffer; the fd
    // is closed on every path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, value.as_ptr().cast(), value.len());
        let err = if n < 0 {
            Some(io::Error::last_os_error())
        } else if n as usize != value.len() {
            Some(io::Error::from(io::ErrorKind::WriteZero))
        } else {
            None
        };
        libc::close(fd);
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Sets up a hook's child: first it joins the run cgroup and drops the
/// daemon's priority while still privileged (`setup`), then, with `creds`
/// (uid, gid), it drops its supplementary groups, gid and uid, in that
/// order. Not `Command::uid/gid`: std runs `pre_exec` closures *after* its
/// own setuid, when setgroups would no longer be permitted, and std ignores
/// EPERM from its own setgroups; doing all three here, in the right order,
/// makes every failure fail the spawn.
pub(crate) fn confine(
    cmd: &mut tokio::process::Command,
    setup: ChildSetup,
    creds: Option<(u32, u32)>,
) {
    // SAFETY: runs in the forked child before exec; `ChildSetup::apply`
    // only makes async-signal-safe calls on data prepared before the fork.
    // The pre_exec steps run in registration order.
    unsafe {
        cmd.pre_exec(move || setup.apply());
    }
    if let Some((uid, gid)) = creds {
        // SAFETY: the closure runs in the forked child before exec. It only
        // calls setgroups/setgid/setuid (async-signal-safe syscall wrappers)
        // and reads errno; it does not allocate, lock, or touch state shared
        // with other threads of the parent.
        unsafe {
            cmd.pre_exec(move || drop_privileges(uid, gid));
        }
    }
}

/// Runs in the forked child: no supplementary groups, then gid, then uid.
fn drop_privileges(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain syscalls with valid arguments (a null list of length 0).
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn run_names_cannot_be_policy_groups() {
        assert_eq!(run_rel("alert", 7), "cgwarden.hooks/alert-7");
        assert!(!crate::policy::decode::valid_name(HOOKS_PARENT));
    }

    #[test]
    fn child_joins_its_procs_file_and_gets_nice_0_and_sched_other() {
        let dir = tempfile::tempdir().unwrap();
        let procs = dir.path().join("cgroup.procs");
        std::fs::write(&procs, "").unwrap();
        let out = dir.path().join("out");
        let setup = ChildSetup::new(Some(&procs)).unwrap();
        let script = format!(
            "cut -d' ' -f19,41 /proc/self/stat > {o}; cat /proc/self/oom_score_adj >> {o}",
            o = out.display()
        );
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", &script]);
        // The parent side: nice 5 for the child before setup (it runs
        // first), so the test sees setup take it back to 0 when permitted.
        // SAFETY: only async-signal-safe calls in the child.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpriority(libc::PRIO_PROCESS, 0, 5);
                Ok(())
            });
            let s = setup.clone();
            cmd.pre_exec(move || s.apply());
        }
        assert!(cmd.status().unwrap().success());
        assert_eq!(std::fs::read_to_string(&procs).unwrap(), "0");
        let text = std::fs::read_to_string(&out).unwrap();
        let mut lines = text.lines();
        let stat: Vec<&str> = lines.next().unwrap().split(' ').collect();
        let root = nix::unistd::geteuid().is_root();
        if root {
            assert_eq!(stat[0], "0", "nice: {text}");
        } else {
            // An unprivileged child may not lower nice 5: ignored, weaker.
            assert_eq!(stat[0], "5", "nice: {text}");
        }
        assert_eq!(stat[1], "0", "policy SCHED_OTHER: {text}");
        let adj: i32 = lines.next().unwrap().trim().parse().unwrap();
        assert!(adj == 0 || (!root && adj > 0), "oom_score_adj {adj}");
    }

    #[test]
    fn a_missing_procs_file_fails_the_spawn() {
        let dir = tempfile::tempdir().unwrap();
        let setup = ChildSetup::new(Some(&dir.path().join("gone/cgroup.procs"))).unwrap();
        let mut cmd = std::process::Command::new("/bin/true");
        // SAFETY: only async-signal-safe calls in the child.
        unsafe {
            cmd.pre_exec(move || setup.apply());
        }
        let e = cmd.status().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    }
}
