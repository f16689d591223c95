//! Per-task attributes: nice (`setpriority`), I/O priority
//! (`ioprio_set`), affinity (`sched_setaffinity`), per-task utilization
//! clamps (`sched_setattr` with `SCHED_FLAG_UTIL_CLAMP_*`, policy and
//! parameters kept), `/proc/PID/oom_score_adj`, and the moves of single
//! threads through `cgroup.threads`. All per thread id, except
//! `oom_score_adj`, which the kernel keeps per process.
//!
//! Read-back: nice from `/proc/PID/task/TID/stat` (field 19) and affinity
//! from its `status` (`Cpus_allowed_list`), which a fake tree can hold
//! too; ioprio and uclamp only through syscalls (`None` on a fake tree, so
//! a plan shows them as changes and `apply` skips them there).
//!
//! Hand-written on `libc`: four syscalls with fixed ABIs (ioprio.h,
//! sched_setattr's `struct sched_attr` v1); no crate wraps ioprio or uclamp.

use super::cgroupfs::parse_pid_cgroup;
use super::error::{Error, Result};
use super::{procfs, Op, Root};
use crate::units::CpuList;
use std::path::{Path, PathBuf};

/// `IOPRIO_WHO_PROCESS` (a thread id).
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_SHIFT: u32 = 13;
/// `SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS`.
const KEEP_POLICY_AND_PARAMS: u64 = 0x08 | 0x10;
const UTIL_CLAMP_MIN: u64 = 0x20;
const UTIL_CLAMP_MAX: u64 = 0x40;
/// `SCHED_ATTR_SIZE_VER1`: with `sched_util_min`/`max`.
const SCHED_ATTR_SIZE_VER1: u32 = 56;

/// `struct sched_attr` version 1 (include/uapi/linux/sched/types.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttrV1 {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

fn task_dir(pid: i32, tid: i32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/task/{tid}"))
}

fn os_error(op: &'static str, tid: i32, detail: String) -> Error {
    let errno = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    Error::os(op, format!("/proc/{tid}"), errno, detail)
}

/// A thread's comm (`/proc/PID/task/TID/comm`); `None` when it is gone.
pub(crate) fn thread_comm(root: &Root, pid: i32, tid: i32) -> Option<String> {
    let t = root.read(&task_dir(pid, tid).join("comm")).ok()?;
    Some(t.trim_end_matches('\n').to_string())
}

/// A thread's nice value (`stat` field 19); `None` when it is gone.
pub(crate) fn nice(root: &Root, pid: i32, tid: i32) -> Option<i32> {
    let text = root.read(&task_dir(pid, tid).join("stat")).ok()?;
    procfs::parse_stat(&text)?.num(19)
}

/// A thread's affinity (`status`: `Cpus_allowed_list`).
pub(crate) fn affinity(root: &Root, pid: i32, tid: i32) -> Option<CpuList> {
    let text = root.read(&task_dir(pid, tid).join("status")).ok()?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    CpuList::parse_kernel(line.trim()).ok()
}

/// A thread's cgroup (`/proc/PID/task/TID/cgroup`, as `/a/b`).
pub(crate) fn thread_cgroup(root: &Root, pid: i32, tid: i32) -> Option<String> {
    let text = root.read(&task_dir(pid, tid).join("cgroup")).ok()?;
    parse_pid_cgroup(&text)
}

fn oom_path(pid: i32) -> PathBuf {
    super::procfs::proc_file(pid, "oom_score_adj")
}

/// `/proc/PID/oom_score_adj`.
pub(crate) fn oom_score_adj(root: &Root, pid: i32) -> Option<i32> {
    root.read(&oom_path(pid)).ok()?.trim().parse().ok()
}

pub(crate) fn set_oom_score_adj(root: &Root, pid: i32, value: i32) -> Result<()> {
    root.write(&oom_path(pid), &value.to_string())
}

/// `(class, level)` of a thread's I/O priority; class 1 rt, 2 be, 3 idle,
/// 0 none (the kernel then derives it from nice: be, `(nice + 20) / 5`).
/// `None` on a fake tree or when it is gone.
pub(crate) fn ioprio(root: &Root, tid: i32) -> Option<(u8, u8)> {
    if !root.supports(Op::Sched) {
        return None;
    }
    // SAFETY: ioprio_get takes two ints and touches no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid) };
    if rc < 0 {
        return None;
    }
    let v = rc as u32;
    Some(((v >> IOPRIO_CLASS_SHIFT) as u8, (v & 0x7) as u8))
}

/// The effective `(class, level)` as the kernel schedules it: class 0
/// ("none") means best effort at the level nice implies.
pub(crate) fn effective_ioprio(raw: (u8, u8), nice: i32) -> (u8, u8) {
    match raw {
        (0, _) => (2, ((nice.clamp(-20, 19) + 20) / 5) as u8),
        other => other,
    }
}

pub(crate) fn set_ioprio(tid: i32, class: u8, level: u8) -> Result<()> {
    let v = (u32::from(class) << IOPRIO_CLASS_SHIFT) | u32::from(level & 0x7);
    // SAFETY: ioprio_set takes three ints and touches no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, v) };
    if rc != 0 {
        return Err(os_error(
            "ioprio_set",
            tid,
            format!("class {class} level {level}"),
        ));
    }
    Ok(())
}

pub(crate) fn set_nice(tid: i32, nice: i32) -> Result<()> {
    // SAFETY: setpriority takes plain integers. `which`'s C type differs
    // between libcs (an enum on glibc), hence the cast.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, tid as libc::id_t, nice) };
    if rc != 0 {
        return Err(os_error("setpriority", tid, format!("nice {nice}")));
    }
    Ok(())
}

pub(crate) fn set_affinity(tid: i32, cpus: &CpuList) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for c in cpus.iter() {
        if (c as usize) < max {
            // SAFETY: the index is below the set's size (checked above).
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(os_error("sched_setaffinity", tid, format!("cpus {cpus}")));
    }
    Ok(())
}

/// A thread's `(util_min, util_max)` (0..=1024) from `sched_getattr`;
/// `None` on a fake tree, on a kernel without uclamp or when it is gone.
pub(crate) fn uclamp(root: &Root, tid: i32) -> Option<(u32, u32)> {
    if !root.supports(Op::Sched) {
        return None;
    }
    let mut a = SchedAttrV1::default();
    // SAFETY: `a` is a writable struct sched_attr v1 of the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid as libc::c_long,
            &mut a as *mut SchedAttrV1,
            SCHED_ATTR_SIZE_VER1 as libc::c_uint,
            0 as libc::c_uint,
        )
    };
    // A kernel without CONFIG_UCLAMP_TASK fills only version 0.
    (rc == 0 && a.size >= SCHED_ATTR_SIZE_VER1).then_some((a.sched_util_min, a.sched_util_max))
}

/// Sets a thread's clamps, keeping its policy and parameters; `None`
/// leaves that clamp as it is.
pub(crate) fn set_uclamp(tid: i32, min: Option<u32>, max: Option<u32>) -> Result<()> {
    let mut a = SchedAttrV1 {
        size: SCHED_ATTR_SIZE_VER1,
        sched_flags: KEEP_POLICY_AND_PARAMS,
        ..SchedAttrV1::default()
    };
    if let Some(v) = min {
        a.sched_flags |= UTIL_CLAMP_MIN;
        a.sched_util_min = v.min(1024);
    }
    if let Some(v) = max {
        a.sched_flags |= UTIL_CLAMP_MAX;
        a.sched_util_max = v.min(1024);
    }
    // SAFETY: `a` is a valid struct sched_attr v1 that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::c_long,
            &a as *const SchedAttrV1,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(os_error(
            "sched_setattr",
            tid,
            format!("uclamp min {min:?} max {max:?}"),
        ));
    }
    Ok(())
}

/// Moves one thread into the cgroup directory `dir` (`cgroup.threads`).
pub(crate) fn move_thread(root: &Root, dir: &Path, tid: i32) -> Result<()> {
    root.write(&dir.join("cgroup.threads"), &tid.to_string())
}

/// A process pinned for a last-resort kill: its pidfd (a reused pid
/// cannot be signalled by mistake).
pub(crate) struct Pinned(std::os::fd::OwnedFd);

/// Pins `pid`; `None` when it is gone or pidfds are unavailable.
pub(crate) fn pin(pid: i32) -> Option<Pinned> {
    procfs::pidfd_open(pid).ok().map(|p| Pinned(p.into()))
}

impl Pinned {
    /// `pidfd_send_signal`; `Ok(false)` when the process is already gone.
    pub(crate) fn signal(&self, sig: i32) -> Result<bool> {
        use std::os::fd::AsRawFd;
        // SAFETY: a pidfd we own, a signal number, no siginfo, flags 0.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if r == 0 {
            return Ok(true);
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno == libc::ESRCH {
            return Ok(false);
        }
        Err(Error::os(
            "pidfd_send_signal",
            "pidfd",
            errno,
            format!("signal {sig}"),
        ))
    }

    /// Waits up to `timeout` for the process to exit (the pidfd becomes
    /// readable); true when it has.
    pub(crate) fn wait_exit(&self, timeout: std::time::Duration) -> bool {
        use std::os::fd::AsRawFd;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut fds = [libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            match super::wait::poll(&mut fds, ms) {
                Ok(n) if n > 0 => return true,
                Ok(_) => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted && !left.is_zero() => {}
                Err(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_tree_reads_nice_affinity_cgroup_and_oom_score_adj() {
        let t = tempfile::TempDir::new().expect("tempdir");
        let root = Root::fake(t.path());
        let d = t.path().join("proc/40/task/41");
        std::fs::create_dir_all(&d).expect("mkdir");
        let mut stat: Vec<String> = vec!["0".into(); 52];
        stat[0] = "41".into();
        stat[1] = "(log thread)".into();
        stat[18] = "-7".into();
        std::fs::write(d.join("stat"), stat.join(" ")).expect("stat");
        std::fs::write(d.join("status"), "Name:\tlog\nCpus_allowed_list:\t2-3\n").expect("s");
        std::fs::write(d.join("cgroup"), "0::/app/rt\n").expect("cg");
        std::fs::write(d.join("comm"), "log thread\n").expect("comm");
        std::fs::write(t.path().join("proc/40/oom_score_adj"), "-900\n").expect("oom");
        assert_eq!(nice(&root, 40, 41), Some(-7));
        assert_eq!(affinity(&root, 40, 41), CpuList::parse("2-3").ok());
        assert_eq!(thread_cgroup(&root, 40, 41).as_deref(), Some("/app/rt"));
        assert_eq!(thread_comm(&root, 40, 41).as_deref(), Some("log thread"));
        assert_eq!(oom_score_adj(&root, 40), Some(-900));
        assert_eq!(ioprio(&root, 41), None, "syscall-only on a fake tree");
        assert_eq!(nice(&root, 40, 42), None, "gone");
    }

    #[test]
    fn ioprio_none_class_is_best_effort_at_the_level_nice_implies() {
        assert_eq!(effective_ioprio((0, 0), 0), (2, 4));
        assert_eq!(effective_ioprio((0, 0), -20), (2, 0));
        assert_eq!(effective_ioprio((0, 0), 19), (2, 7));
        assert_eq!(effective_ioprio((1, 3), 19), (1, 3));
    }

    #[test]
    fn own_thread_reads_back_what_is_set() {
        // This test's own thread: nice up (always allowed), affinity to the
        // CPUs it already has, ioprio be 7 (allowed unprivileged).
        let root = Root::real();
        // SAFETY: gettid has no arguments.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        let pid = std::process::id() as i32;
        let before = nice(&root, pid, tid).expect("nice");
        set_nice(tid, before.max(10)).expect("setpriority");
        assert_eq!(nice(&root, pid, tid), Some(before.max(10)));
        let cpus = affinity(&root, pid, tid).expect("affinity");
        set_affinity(tid, &cpus).expect("setaffinity");
        assert_eq!(affinity(&root, pid, tid), Some(cpus));
        set_ioprio(tid, 2, 7).expect("ioprio_set");
        assert_eq!(ioprio(&root, tid), Some((2, 7)));
    }
}
