//! The daemon's own process controls, so it is never starved by what it
//! reacts to: `mlockall(2)`, `sched_setaffinity(2)` of the whole process,
//! `sched_setattr(2)` of the calling thread with `SCHED_FLAG_RESET_ON_FORK`,
//! and the few `/proc/self` and `/sys` reads that report on them (`VmRSS`,
//! `VmLck`, possible CPUs). Only the daemon calls these, on a real kernel;
//! on a fake root the caller logs what it would do instead.

use super::error::{Error, Result};
use super::root::Root;
use super::sched::{apply_with_flags, SchedSpec};
use std::path::Path;

/// `SCHED_FLAG_RESET_ON_FORK`: threads and processes the caller creates
/// start `SCHED_OTHER` nice ≥ 0 (include/uapi/linux/sched.h).
pub(crate) const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`: every page of every mapping now —
/// the binary, the C libraries, the heap, the stack — is read in and locked
/// before the call returns, and every later mapping (a thread's stack, heap
/// growth, a library loaded later) is read in and locked when it is made.
/// Not `MCL_ONFAULT`: that locks only what was touched, so code the daemon
/// had not run yet would be read from the disk the first time it runs —
/// under the memory pressure it reacts to. The cost is that every mapping
/// is resident in full (thread stacks are sized for it: [`super::residency`]).
pub(crate) fn mlockall() -> Result<()> {
    // SAFETY: mlockall takes flags only and touches no memory of ours.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc != 0 {
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        return Err(Error::os(
            "mlockall",
            "/proc/self",
            errno,
            "MCL_CURRENT|MCL_FUTURE".to_string(),
        ));
    }
    Ok(())
}

/// Binds every thread of this process to `cpus` (`sched_setaffinity` on
/// each task: the call itself acts on one thread only). Threads created
/// later inherit the mask of their creator.
pub(crate) fn set_process_affinity(cpus: &[u32]) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if (c as usize) < max {
            // SAFETY: `c` is below the set's capacity.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
    }
    // Our own tasks (a real kernel only: /proc/self is a symlink the Root
    // seam would not follow, and a fake tree has no self).
    let tids = match std::fs::read_dir("/proc/self/task") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .collect::<Vec<_>>(),
        Err(_) => vec![0],
    };
    let spec = cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    for tid in tids {
        // SAFETY: `set` is a valid cpu_set_t of the size passed.
        let rc =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            if errno == libc::ESRCH {
                continue; // a thread that just ended
            }
            return Err(Error::os(
                "sched_setaffinity",
                format!("/proc/self/task/{tid}"),
                errno,
                format!("cpus {spec}"),
            ));
        }
    }
    Ok(())
}

/// The calling thread's CPU affinity, as a sorted list.
pub(crate) fn current_affinity() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain data; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid for the size passed; pid 0 = the caller.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: every index is below the set's capacity.
    (0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect()
}

/// Applies `spec` to the calling thread with `SCHED_FLAG_RESET_ON_FORK`,
/// so what it spawns (writer threads, hook processes) starts as
/// `SCHED_OTHER` at nice ≥ 0 and never inherits the daemon's priority.
pub(crate) fn set_own_thread_sched(spec: &SchedSpec) -> Result<()> {
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    apply_with_flags(tid, spec, SCHED_FLAG_RESET_ON_FORK)
}

/// Whether `mlockall(MCL_FUTURE)` is safe: locked memory is not capped
/// (CAP_IPC_LOCK in the effective set, or `RLIMIT_MEMLOCK` unlimited).
/// With a cap, MCL_FUTURE makes every later mmap past it fail (thread
/// stacks, heap growth) — the locked size counts whole mappings — so the
/// daemon would break instead of being safer.
pub(crate) fn memlock_unbounded() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if cap_ipc_lock(&status) {
        return true;
    }
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for the kernel to fill.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    rc == 0 && r.rlim_cur == libc::RLIM_INFINITY
}

/// CAP_IPC_LOCK (bit 14) in a status file's `CapEff:` mask.
pub(crate) fn cap_ipc_lock(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << 14) != 0)
}

/// `RLIMIT_RTPRIO` of this process (soft limit), `None` when unlimited.
pub(crate) fn rtprio_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for the kernel to fill.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut r) };
    if rc != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        None
    } else {
        Some(r.rlim_cur)
    }
}

/// Resident and locked memory of this process in KiB: `Rss` and `Locked`
/// of `/proc/self/smaps_rollup` (the page tables), else `VmRSS` and `VmLck`
/// of `/proc/self/status`. Not those first: on 6.1 each thread batches its
/// RSS counter updates over 64 faults, so `VmRSS` can lag MiBs behind; and
/// `VmLck` counts whole locked mappings, with the address space glibc
/// reserves for each thread's heap (64 MiB each, never touched), where
/// `Locked` counts the pages.
pub(crate) fn memory_kib() -> (Option<u64>, Option<u64>) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let (vmrss, vmlck) = parse_status_kib(&text);
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let field = |name: &str| {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    (field("Rss:").or(vmrss), field("Locked:").or(vmlck))
}

/// `VmRSS:`/`VmLck:` lines of a status file, in KiB.
pub(crate) fn parse_status_kib(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    (field("VmRSS:"), field("VmLck:"))
}

/// CPU time this process used (user + system), in seconds, from
/// `/proc/self/stat` of the real kernel (fields 14 and 15, in clock ticks).
pub(crate) fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let stat = super::procfs::parse_stat(&text)?;
    let ticks: u64 = stat.num::<u64>(14)?.checked_add(stat.num::<u64>(15)?)?;
    // SAFETY: sysconf takes a constant and touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// CPU time (user + system) the calling thread used, in ns
/// (`CLOCK_THREAD_CPUTIME_ID`); 0 if it cannot be read.
#[cfg(any(test, feature = "loop-profile"))]
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// How many file descriptors this process has open (`/proc/self/fd`).
pub(crate) fn open_fds() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory handle itself is one of them.
    Some((dir.count() as u64).saturating_sub(1))
}

/// Where the kernel lists the CPUs this machine can ever have.
pub(crate) const POSSIBLE_CPUS: &str = "/sys/devices/system/cpu/possible";

/// The CPUs the kernel could ever bring online
/// (`/sys/devices/system/cpu/possible`); `None` when it cannot be read.
pub(crate) fn possible_cpus(root: &Root) -> Option<crate::units::CpuList> {
    let text = root.read_trimmed(Path::new(POSSIBLE_CPUS)).ok()?;
    crate::units::CpuList::parse_kernel(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_in_kib() {
        let t = "Name:\tcgwarden\nVmLck:\t    1234 kB\nVmRSS:\t    5120 kB\n";
        assert_eq!(parse_status_kib(t), (Some(5120), Some(1234)));
        assert_eq!(parse_status_kib("garbage"), (None, None));
        assert_eq!(parse_status_kib("VmRSS:\tx kB\n"), (None, None));
    }

    #[test]
    fn cap_ipc_lock_is_bit_14_of_capeff() {
        assert!(cap_ipc_lock("CapInh:\t0\nCapEff:\t000001ffffffffff\n"));
        assert!(cap_ipc_lock("CapEff:\t0000000000004000\n"));
        assert!(!cap_ipc_lock("CapEff:\t0000000000000000\n"));
        assert!(!cap_ipc_lock("CapEff:\tzz\n"));
        assert!(!cap_ipc_lock(""));
    }

    #[test]
    fn own_affinity_is_not_empty() {
        assert!(!current_affinity().is_empty());
    }
}
