//! The daemon's threads: one where a priority or a blocking call needs it.
//!
//! - the event loop (the main thread, `settings.daemon.sched`): rules, PSI
//!   trigger wake-ups, inotify on the groups' files, signals, hooks;
//! - `cgw-exec` (the same priority): exec events and placement;
//! - `cgw-recorder`: the thread that waits for the disk — SQLite, and the
//!   metrics textfile's synced write (`cgw-textfile` does that when there
//!   is no recorder);
//! - `cgw-services` (SCHED_OTHER): the control socket, the metrics
//!   listeners and textfile's timer, the KPI socket and the policy watch,
//!   each a task of its current-thread runtime ([`crate::kernel::runtime`]).
//!   None of them needs a priority or makes a call that blocks: each waits
//!   on its socket, fd or timer, so a slow disk never holds up a control
//!   call.
//!
//! Started on demand, each for as long as it is needed: the writer lanes
//! (`cgw-w-…`, [`super::lanes`]: a lane at its first write, kept: a cgroup
//! write that blocks in reclaim must never stall the loop, and starting a
//! thread when memory is short is what the lanes are there to avoid),
//! `cgw-irq` (`system.irqs`/`kthreads` rules), `cgw-kill` (a `kill in`
//! action), the event loop's blocking threads (the drift guard's,
//! `verify`'s and `health`'s reads; gone 10 s after their last).
//!
//! A thread started for each disk write and ended after would cost more:
//! under `mlockall` the stacks of ended threads glibc keeps for reuse stay
//! resident and locked.

/// The services thread's name (started by
/// [`super::control::ControlState::services`]).
pub(crate) const SERVICES: &str = "cgw-services";
