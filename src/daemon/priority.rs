//! How the daemon itself runs (`settings.daemon`), so it is never starved by
//! the overload it reacts to: owns the process-wide controls applied once at start —
//! `mlockall(MCL_CURRENT|MCL_FUTURE)` and the CPU affinity —
//! and the priority of the reacting threads (the event loop, which also
//! serves PSI trigger wake-ups, and the exec/placement thread `cgw-exec`).
//!
//! Each reacting thread calls [`enter_reacting`] on itself; the policy is
//! set with `SCHED_FLAG_RESET_ON_FORK`, so whatever those threads spawn
//! (tokio's blocking pool, writer threads, hook processes) starts
//! `SCHED_OTHER` at nice ≥ 0. On a fake root nothing is attempted: what
//! would be done is logged. Every failure (EPERM without CAP_SYS_NICE,
//! `RLIMIT_RTPRIO` below the priority, an RT-group-scheduling cgroup
//! without `cpu.rt_runtime_us`, `RLIMIT_MEMLOCK`) is logged once and never
//! fatal: a daemon at normal priority beats no daemon.

use crate::kernel::residency;
use crate::kernel::sched::SchedSpec;
use crate::kernel::selfproc;
use crate::kernel::{Op, Root};
use crate::policy::model::DaemonSettings;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The reacting threads' spec once [`apply_process`] ran on a real
/// kernel; unset (nothing to do) on a fake root or before.
static REACTING: OnceLock<SchedSpec> = OnceLock::new();
/// A refused priority change is said once, not once per thread.
static REFUSAL_SAID: AtomicBool = AtomicBool::new(false);
/// Set once [`apply_process`] ran on a real kernel: [`settle`] acts.
static REAL: AtomicBool = AtomicBool::new(false);

/// The kernel's form of `settings.daemon.sched` (the decoder lets only
/// fifo/rr with a priority or other with a nice through, so the placement
/// rules' conversion serves).
pub(crate) fn spec_of(d: &DaemonSettings) -> SchedSpec {
    crate::converge::sched_spec(&d.sched)
}

/// Applies the process-wide settings (affinity, mlockall) and records the
/// reacting threads' policy for [`enter_reacting`]. Call once, early, from
/// the thread that becomes the event loop. Never fails: each refusal is
/// logged with its reason.
pub(crate) fn apply_process(root: &Root, d: &DaemonSettings) {
    let spec = spec_of(d);
    if !root.supports(Op::Sched) {
        tracing::info!(
            "--root: the daemon's own settings are not applied on a fake tree; on a real \
             kernel it would {}bind to cpus {}, and run its event loop and exec threads {} \
             (reset on fork)",
            if d.mlock {
                "mlockall (MCL_CURRENT|MCL_FUTURE), "
            } else {
                ""
            },
            d.cpus
                .as_ref()
                .map_or("(unchanged)".into(), |c| c.to_string()),
            spec
        );
        return;
    }
    REAL.store(true, Ordering::Relaxed);
    // Locked, a 2 MiB huge page on a heap past 2 MiB would stay whole;
    // freed heap goes back past 64 KiB, heaps grow by 16 KiB more than
    // asked (kernel/residency.rs).
    if let Err(e) = residency::disable_thp() {
        tracing::debug!("transparent huge pages stay on for the daemon: {e}");
    }
    residency::tune_malloc(64 << 10, 16 << 10);
    if let Some(cpus) = &d.cpus {
        let possible = selfproc::possible_cpus(root);
        match possible {
            Some(p) if !cpus.is_subset(&p) => tracing::error!(
                "settings.daemon.cpus {cpus}: not within the possible CPUs {p}; affinity left unchanged"
            ),
            _ => {
                let list: Vec<u32> = cpus.iter().collect();
                match selfproc::set_process_affinity(&list) {
                    Ok(()) => tracing::info!(
                        now = ?selfproc::current_affinity(),
                        "settings.daemon.cpus: the daemon runs on cpus {cpus}"
                    ),
                    Err(e) => tracing::error!(
                        "settings.daemon.cpus {cpus}: {e}; affinity left unchanged (not fatal)"
                    ),
                }
            }
        }
    }
    if d.mlock && !selfproc::memlock_unbounded() {
        tracing::error!(
            "settings.daemon.mlock: not done: no CAP_IPC_LOCK and RLIMIT_MEMLOCK is limited; \
             mlockall(MCL_FUTURE) would make later allocations fail past the limit \
             (LimitMEMLOCK=infinity or the capability enables it; not fatal)"
        );
    } else if d.mlock {
        match selfproc::mlockall() {
            Ok(()) => {
                let (rss, lck) = selfproc::memory_kib();
                tracing::info!(
                    rss_kib = rss.unwrap_or(0),
                    locked_kib = lck.unwrap_or(0),
                    "settings.daemon.mlock: every page mapped now and later is resident and \
                     locked (mlockall MCL_CURRENT|MCL_FUTURE)"
                );
            }
            Err(e) => tracing::error!(
                "settings.daemon.mlock: {e}; the daemon may page-fault under memory pressure \
                 (needs CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK; not fatal)"
            ),
        }
    }
    if spec.policy.is_rt() {
        let runtime = root
            .read_trimmed(Path::new(crate::knobs::sysctl::SCHED_RT_RUNTIME))
            .unwrap_or_default();
        if runtime == "-1" {
            tracing::warn!(
                "kernel.sched_rt_runtime_us is -1 (RT throttling off): a runaway {} thread \
                 could starve SCHED_OTHER on its CPUs; cgwarden's reacting threads only run \
                 on wake-ups",
                spec.policy
            );
        }
    }
    let _ = REACTING.set(spec);
}

/// After startup or a reload (`what` names it in the log): what glibc can
/// give back of the heap that work freed goes back to the kernel
/// ([`residency::trim_heap`]; with `mlock`, the main heap's top). Every
/// mapped page stays. Nothing on a fake root.
pub(crate) fn settle(what: &str) {
    if !REAL.load(Ordering::Relaxed) {
        return;
    }
    let before = selfproc::memory_kib().0;
    residency::trim_heap();
    let (rss, lck) = selfproc::memory_kib();
    tracing::info!(
        rss_kib_before = before.unwrap_or(0),
        rss_kib = rss.unwrap_or(0),
        locked_kib = lck.unwrap_or(0),
        "memory: the {what}'s free heap given back"
    );
}

/// Puts the calling thread (`what` names it in logs) at the reacting
/// priority with `SCHED_FLAG_RESET_ON_FORK`. Nothing when
/// [`apply_process`] did not run on a real kernel. True when applied.
pub(crate) fn enter_reacting(what: &str) -> bool {
    let Some(spec) = REACTING.get() else {
        return false;
    };
    match selfproc::set_own_thread_sched(spec) {
        Ok(()) => {
            tracing::info!("settings.daemon.sched: {what} thread runs {spec} (reset on fork)");
            true
        }
        Err(e) => {
            let why = refusal_reason(e.errno(), spec);
            if !REFUSAL_SAID.swap(true, Ordering::Relaxed) {
                tracing::error!(
                    "settings.daemon.sched: {what} thread: {e}{why}; it runs at normal priority \
                     (not fatal)"
                );
            } else {
                tracing::debug!("settings.daemon.sched: {what} thread: {e}");
            }
            false
        }
    }
}

/// Why `sched_setattr` on ourselves failed, in words an integrator can act on.
fn refusal_reason(errno: Option<i32>, spec: &SchedSpec) -> String {
    match errno {
        Some(libc::EPERM) if spec.policy.is_rt() => {
            let lim = selfproc::rtprio_limit().map_or("unlimited".to_string(), |l| l.to_string());
            format!(
                " (needs CAP_SYS_NICE or RLIMIT_RTPRIO ≥ {} — it is {lim}; with RT group \
                 scheduling, also cpu.rt_runtime_us > 0 in the daemon's cgroup)",
                spec.priority.unwrap_or(1)
            )
        }
        Some(libc::EPERM) => " (a negative nice needs CAP_SYS_NICE or RLIMIT_NICE)".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::sched::Policy as KPolicy;
    use crate::policy::model::SchedPolicy;

    #[test]
    fn the_spec_follows_the_settings() {
        let d = DaemonSettings::default();
        let s = spec_of(&d);
        assert_eq!(
            (s.policy, s.priority, s.nice),
            (KPolicy::Fifo, Some(1), None)
        );
        let mut d = DaemonSettings::default();
        d.sched.policy = SchedPolicy::Other;
        d.sched.priority = None;
        d.sched.nice = Some(-5);
        let s = spec_of(&d);
        assert_eq!(
            (s.policy, s.priority, s.nice),
            (KPolicy::Other, None, Some(-5))
        );
        assert!(crate::kernel::sched::validate(&s).is_ok());
    }

    #[test]
    fn a_fake_root_applies_nothing() {
        let t = tempfile::TempDir::new().unwrap();
        apply_process(&Root::fake(t.path()), &DaemonSettings::default());
        assert!(REACTING.get().is_none());
        assert!(!enter_reacting("test"));
    }

    #[test]
    fn refusals_name_the_limit() {
        let s = spec_of(&DaemonSettings::default());
        assert!(refusal_reason(Some(libc::EPERM), &s).contains("RLIMIT_RTPRIO"));
        assert_eq!(refusal_reason(Some(libc::EINVAL), &s), "");
    }
}
